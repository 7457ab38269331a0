//! The machine deployment controller: executes the deployment plan — creates,
//! scales and deletes machine sets, rolls back, and reports status.

use std::sync::Arc;
use std::time::Duration;

use api::{MachineDeployment, MachineSet, labels};
use chrono::Utc;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::{Map, Value, json};

use super::context::{Context, Error};
use super::machineset::{CACHE_WAIT, RESYNC, publish_event, set_finalizer};
use crate::machinedeployment::{self, Step};

/// How often an unfinished rollout is looked at without events.
const ROLLOUT_RECHECK: Duration = Duration::from_secs(2);

fn has_finalizer(md: &MachineDeployment) -> bool {
    md.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == labels::MCM_FINALIZER)
}

pub async fn reconcile(md: Arc<MachineDeployment>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = md.metadata.namespace.clone().unwrap_or_default();
    let name = md.metadata.name.clone().unwrap_or_default();
    let uid = md.metadata.uid.clone().unwrap_or_default();
    let mds: Api<MachineDeployment> = Api::namespaced(ctx.control.clone(), &ns);
    let sets: Api<MachineSet> = Api::namespaced(ctx.control.clone(), &ns);
    let owned = ctx.sets_of(&uid);
    if md.metadata.deletion_timestamp.is_some() && owned.is_empty() {
        if has_finalizer(&md) {
            set_finalizer(&mds, &md.metadata, false).await?;
        }
        ctx.expectations.forget(&uid);
        return Ok(Action::await_change());
    }
    if md.metadata.deletion_timestamp.is_none() && !has_finalizer(&md) {
        set_finalizer(&mds, &md.metadata, true).await?;
        return Ok(Action::await_change());
    }
    // Act only on a cache that shows our own last writes.
    let cached = |n: &str| {
        owned
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(n))
            .map(|s| s.metadata.deletion_timestamp.is_none())
    };
    if !ctx.expectations.satisfied(&uid, cached) {
        return Ok(Action::requeue(CACHE_WAIT));
    }
    // The cluster autoscaler's targeted deletions: mark the named machines
    // (priority 1 + marked time) so the machine set removes exactly them when
    // the replicas drop, then consume the annotation.
    if let Some(ann) = md
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::TRIGGER_DELETION_BY_MCM))
        .cloned()
    {
        let machines: Api<api::Machine> = Api::namespaced(ctx.control.clone(), &ns);
        let cached = ctx.machines.state();
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let (marks, left) = machinedeployment::triggered_deletions(&ann, &now, |n| {
            cached
                .iter()
                .find(|m| {
                    m.metadata.name.as_deref() == Some(n)
                        && m.metadata.namespace.as_deref() == Some(ns.as_str())
                })
                .map(|m| {
                    if m.metadata.deletion_timestamp.is_some() {
                        Some(api::MachinePhase::Terminating)
                    } else {
                        m.phase()
                    }
                })
        });
        for mark in &marks {
            let patch = json!({"metadata": {"annotations": {
                labels::MACHINE_PRIORITY: "1",
                labels::MARKED_FOR_DELETION_TIME: mark.marked_at,
            }}});
            match machines
                .patch(
                    &mark.machine,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(Error::api(format!("machine {}", mark.machine), e)),
            }
        }
        let patch = json!({"metadata": {"annotations": {labels::TRIGGER_DELETION_BY_MCM: left}}});
        mds.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::api(format!("machine deployment {name}"), e))?;
        return Ok(Action::requeue(CACHE_WAIT));
    }
    let refs: Vec<&MachineSet> = owned.iter().map(|s| s.as_ref()).collect();
    let plan = machinedeployment::plan(&md, &refs, Utc::now());
    tracing::debug!(deployment = %name, sets = refs.len(), steps = ?plan.steps, "machine deployment plan");
    let mut status = plan.status.clone();
    let mut created = Vec::new();
    let mut acted = false;
    for step in &plan.steps {
        match step {
            Step::CreateSet { set } => {
                acted = true;
                let set_name = set.metadata.name.clone().unwrap_or_default();
                match sets.create(&PostParams::default(), set).await {
                    Ok(_) => {
                        let note =
                            format!("Scaled up machine set {set_name} to {}", set.spec.replicas);
                        publish_event(&ctx, md.as_ref(), false, "ScalingMachineSet", note);
                        created.push(set_name)
                    }
                    Err(kube::Error::Api(e)) if e.code == 409 => {
                        // A set of that name exists but is not ours for this
                        // template: a hash collision. Count it; the next pass
                        // hashes with the new count.
                        status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                        tracing::info!(deployment = %name, set = %set_name, "machine set name collision");
                    }
                    Err(e) => {
                        return Err(Error::api(format!("creating machine set {set_name}"), e));
                    }
                }
            }
            Step::UpdateSet {
                name: set_name,
                replicas,
                annotations,
                template,
            } => {
                acted = true;
                let ann: Map<String, Value> = annotations
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.clone().map(Value::String).unwrap_or(Value::Null),
                        )
                    })
                    .collect();
                let mut patch =
                    json!({"metadata": {"annotations": ann}, "spec": {"replicas": replicas}});
                if let Some(t) = template {
                    patch["spec"]["template"] =
                        serde_json::to_value(t).map_err(|_| Error::Encode(set_name.clone()))?;
                }
                sets.patch(set_name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| Error::api(format!("machine set {set_name}"), e))?;
                let before = refs
                    .iter()
                    .find(|s| s.metadata.name.as_ref() == Some(set_name))
                    .map(|s| s.spec.replicas);
                if let Some(before) = before.filter(|b| b != replicas) {
                    let dir = if *replicas > before { "up" } else { "down" };
                    let note =
                        format!("Scaled {dir} machine set {set_name} to {replicas} from {before}");
                    publish_event(&ctx, md.as_ref(), false, "ScalingMachineSet", note);
                }
            }
            Step::DeleteSet { name: set_name } => {
                acted = true;
                match sets.delete(set_name, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => {
                        return Err(Error::api(format!("deleting machine set {set_name}"), e));
                    }
                }
            }
            Step::UpdateDeployment {
                template,
                revision,
                clear_rollback,
            } => {
                acted = true;
                let mut patch = json!({});
                if let Some(t) = template {
                    patch["spec"]["template"] =
                        serde_json::to_value(t).map_err(|_| Error::Encode(name.clone()))?;
                }
                if *clear_rollback {
                    patch["spec"]["rollbackTo"] = Value::Null;
                }
                if let Some(r) = revision {
                    patch["metadata"] = json!({"annotations": {labels::REVISION: r}});
                }
                mds.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| Error::api(format!("machine deployment {name}"), e))?;
            }
            Step::Event {
                reason,
                message,
                warning,
            } => {
                if *warning {
                    tracing::warn!(deployment = %name, reason, message, "machine deployment event");
                } else {
                    tracing::info!(deployment = %name, reason, message, "machine deployment event");
                }
                publish_event(&ctx, md.as_ref(), *warning, reason, message.clone());
            }
        }
    }
    ctx.expectations.expect(&uid, created, Vec::new());
    if md.status.as_ref() != Some(&status) {
        let mut updated = (*md).clone();
        updated.status = Some(status);
        if let Err(e) = mds
            .replace_status(&name, &PostParams::default(), &updated)
            .await
            && !matches!(&e, kube::Error::Api(s) if s.code == 409)
        {
            return Err(Error::api(
                format!("status of machine deployment {name}"),
                e,
            ));
        }
    }
    if acted {
        return Ok(Action::requeue(CACHE_WAIT));
    }
    // While a rollout is under way, look again soon even without events:
    // reconciles are level-triggered, so a missed wake-up costs a second,
    // not the resync period.
    let st = &plan.status;
    let settled = st.updated_replicas == md.spec.replicas
        && st.replicas == md.spec.replicas
        && st.available_replicas == md.spec.replicas;
    if !settled && !md.spec.paused {
        return Ok(Action::requeue(ROLLOUT_RECHECK));
    }
    Ok(Action::requeue(
        plan.requeue_after.unwrap_or(RESYNC).min(RESYNC),
    ))
}

/// The controller's name in metrics and its backoff.
pub const NAME: &str = "machinedeployment";

/// Failures are retried after the deployment's backoff (see
/// [`crate::backoff`]).
pub fn error_policy(md: Arc<MachineDeployment>, err: &Error, ctx: Arc<Context>) -> Action {
    let after = ctx.error_requeue(NAME, md.as_ref());
    tracing::warn!(error = %err, retry_in = ?after, "machine deployment reconcile failed");
    Action::requeue(after)
}
