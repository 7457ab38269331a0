//! The machine set controller: keeps the number of machines a set owns at
//! its replicas, replaces failed machines, and reports status.

use std::sync::Arc;
use std::time::{Duration, Instant};

use api::{Machine, MachineSet, MachineState, labels};
use chrono::Utc;
use futures::future::join_all;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::context::{Context, Error, controlled_by};
use crate::machineset::{self, last_operation, set_replica_failure};

pub use crate::machineset::{CACHE_WAIT, RESYNC};

/// How long publishing one event may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(5);

/// At most this many machine names are listed in one event's note.
const NAMES_IN_EVENT: usize = 10;

/// Publishes an event on `obj` in the background: events are best effort
/// and must never delay a reconcile or fail it.
pub(super) fn publish_event<K>(ctx: &Context, obj: &K, warning: bool, reason: &str, note: String)
where
    K: Resource<DynamicType = ()>,
{
    let ev = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_string(),
        note: Some(note),
        action: reason.to_string(),
        secondary: None,
    };
    let reference = obj.object_ref(&());
    let recorder = ctx.recorder.clone();
    tokio::spawn(async move {
        match tokio::time::timeout(EVENT_TIMEOUT, recorder.publish(&ev, &reference)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, reason = %ev.reason, "publishing an event failed")
            }
            Err(_) => tracing::debug!(reason = %ev.reason, "publishing an event timed out"),
        }
    });
}

/// `n` names, then "and N more" past [`NAMES_IN_EVENT`].
fn name_list(names: &[String]) -> String {
    let mut s = names
        .iter()
        .take(NAMES_IN_EVENT)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > NAMES_IN_EVENT {
        s.push_str(&format!(" and {} more", names.len() - NAMES_IN_EVENT));
    }
    s
}

/// The machine a set creates from its template.
pub fn machine_for(set: &MachineSet) -> Machine {
    let t = &set.spec.template;
    let name = set.metadata.name.clone().unwrap_or_default();
    Machine {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: set.metadata.namespace.clone(),
            labels: t.metadata.labels.clone(),
            annotations: t.metadata.annotations.clone(),
            finalizers: t.metadata.finalizers.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: api::GROUP_VERSION.into(),
                kind: "MachineSet".into(),
                name,
                uid: set.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: t.spec.clone(),
        status: None,
    }
}

fn has_finalizer(meta: &ObjectMeta) -> bool {
    meta.finalizers
        .iter()
        .flatten()
        .any(|f| f == labels::MCM_FINALIZER)
}

/// Adds or removes the MCM finalizer with a merge patch guarded by the
/// resource version, so a concurrent change is not overwritten.
pub async fn set_finalizer<K>(api: &Api<K>, meta: &ObjectMeta, present: bool) -> Result<(), Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut fins: Vec<String> = meta.finalizers.clone().unwrap_or_default();
    fins.retain(|f| f != labels::MCM_FINALIZER);
    if present {
        fins.push(labels::MCM_FINALIZER.to_string());
    }
    let name = meta.name.clone().unwrap_or_default();
    let patch = json!({"metadata": {"finalizers": fins, "resourceVersion": meta.resource_version}});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(Error::api(format!("finalizers of {name}"), e)),
    }
}

pub async fn reconcile(set: Arc<MachineSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let name = set.metadata.name.clone().unwrap_or_default();
    let uid = set.metadata.uid.clone().unwrap_or_default();
    let sets: Api<MachineSet> = Api::namespaced(ctx.control.clone(), &ns);
    let machines: Api<Machine> = Api::namespaced(ctx.control.clone(), &ns);
    let live = set.metadata.deletion_timestamp.is_none();
    if live && !has_finalizer(&set.metadata) {
        set_finalizer(&sets, &set.metadata, true).await?;
        return Ok(Action::await_change());
    }
    let mut owned = None;
    if !live {
        let machines = ctx.machines_of(&uid);
        if machines.is_empty() {
            if has_finalizer(&set.metadata) {
                set_finalizer(&sets, &set.metadata, false).await?;
            }
            ctx.expectations.forget(&uid);
            ctx.pacing.forget(&uid);
            return Ok(Action::await_change());
        }
        owned = Some(machines);
    }
    // The expected writes are looked up by name, so a set waiting for its
    // cache costs what it wrote, not what it owns.
    let cached = |n: &str| {
        ctx.machines
            .get(&ObjectRef::new(n).within(&ns))
            .filter(|m| controlled_by(&m.metadata, &uid))
            .map(|m| m.metadata.deletion_timestamp.is_none())
    };
    if !ctx.expectations.satisfied(&uid, cached) {
        return Ok(Action::requeue(CACHE_WAIT));
    }
    // Planning walks every machine of the set: not more often than its
    // gap (see `PASS_GAP_FACTOR`); the triggers in between come back here.
    if let Some(wait) = ctx.pacing.wait(&uid, Instant::now()) {
        return Ok(Action::requeue(wait));
    }
    let started = Instant::now();
    let owned = owned.unwrap_or_else(|| ctx.machines_of(&uid));
    let now = Utc::now();
    let refs: Vec<&Machine> = owned.iter().map(|m| m.as_ref()).collect();
    let plan = machineset::plan(&set, &refs, now);
    drop(refs);
    drop(owned);
    let ended = Instant::now();
    ctx.pacing.record(&uid, ended, ended - started);

    // Node template, configuration and class kind flow to the machines in
    // place (the machine controller takes them on to the nodes); a missing
    // machine is simply gone already.
    for (machine, patch) in &plan.sync {
        match machines
            .patch(machine, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(Error::api(format!("syncing machine {machine}"), e)),
        }
    }

    // Create in slow-start batches (1, 2, 4, …), stopping at the first
    // failing batch, so a broken template costs one machine, not a hundred.
    let mut created = Vec::new();
    let mut failure: Option<(&str, String)> = None;
    let mut remaining = plan.create;
    let mut batch = 1usize;
    let template = machine_for(&set);
    let pp = PostParams::default();
    while remaining > 0 && failure.is_none() {
        let n = batch.min(remaining);
        let results = join_all((0..n).map(|_| machines.create(&pp, &template))).await;
        for r in results {
            match r {
                Ok(m) => created.push(m.metadata.name.unwrap_or_default()),
                Err(e) => failure = Some(("FailedCreate", e.to_string())),
            }
        }
        remaining -= n;
        batch *= 2;
    }
    let mut deleted = Vec::new();
    for d in &plan.delete {
        match machines.delete(d, &DeleteParams::background()).await {
            Ok(_) => deleted.push(d.clone()),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => failure = Some(("FailedDelete", e.to_string())),
        }
    }
    if !created.is_empty() || !deleted.is_empty() {
        tracing::info!(set = %name, created = created.len(), deleted = deleted.len(), "machine set scaled");
    }
    // One event per kind of outcome and pass rather than one per machine
    // (upstream's way), so scaling by a thousand costs a few writes.
    if !created.is_empty() {
        let note = format!(
            "Created {} machines: {}",
            created.len(),
            name_list(&created)
        );
        publish_event(&ctx, set.as_ref(), false, "SuccessfulCreate", note);
    }
    if !deleted.is_empty() {
        let note = format!(
            "Deleted {} machines: {}",
            deleted.len(),
            name_list(&deleted)
        );
        publish_event(&ctx, set.as_ref(), false, "SuccessfulDelete", note);
    }
    if let Some((reason, message)) = &failure {
        publish_event(&ctx, set.as_ref(), true, reason, message.clone());
    }
    ctx.expectations
        .expect(&uid, created.clone(), deleted.clone());

    let mut status = plan.status;
    set_replica_failure(&mut status.conditions, failure.clone(), now);
    if failure.is_some() || !created.is_empty() || !deleted.is_empty() {
        let (desc, state) = match &failure {
            Some((_, m)) => (format!("Scaling failed: {m}"), MachineState::Failed),
            None => (
                format!(
                    "Created {} and deleted {} machines",
                    created.len(),
                    deleted.len()
                ),
                MachineState::Successful,
            ),
        };
        status.last_operation = last_operation(desc, state, now);
    }
    if set.status.as_ref() != Some(&status) {
        let mut updated = (*set).clone();
        updated.status = Some(status);
        if let Err(e) = sets
            .replace_status(&name, &PostParams::default(), &updated)
            .await
        {
            // A conflict means newer facts are on the way; the next pass
            // writes the status from them.
            if !matches!(&e, kube::Error::Api(s) if s.code == 409) {
                return Err(Error::api(format!("status of machine set {name}"), e));
            }
        }
    }
    match failure {
        Some((_, message)) => Err(Error::ScaleFailed {
            set: format!("machine set {name}"),
            message,
        }),
        _ if !plan.delete.is_empty() || plan.create > 0 => Ok(Action::requeue(CACHE_WAIT)),
        _ => Ok(Action::requeue(RESYNC)),
    }
}

/// The controller's name in metrics and its backoff.
pub const NAME: &str = "machineset";

/// Failures are retried after the set's backoff (see [`crate::backoff`]).
pub fn error_policy(set: Arc<MachineSet>, err: &Error, ctx: Arc<Context>) -> Action {
    let after = ctx.error_requeue(NAME, set.as_ref());
    tracing::warn!(error = %err, retry_in = ?after, "machine set reconcile failed");
    Action::requeue(after)
}
