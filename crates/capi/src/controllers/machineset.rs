//! The MachineSet controller's executor: creates Machines with their
//! cloned bootstrap configs and infrastructure objects, deletes the
//! Machines the plan picked, adopts orphans, keeps labels in place and
//! writes the status. After creating or deleting it waits (bounded) until
//! its cache shows the change, as upstream does, so the next pass never
//! counts a Machine twice or misses one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::dynamic::Fetched;
use super::{Context, Error, is_not_found};
use crate::clone::{CloneFor, clone_template, cloned_kind};
use crate::machineset::{SetScope, machine_name, new_machine, plan};
use crate::meta;
use crate::types::labels::{self, conditions as ct, reasons};
use crate::types::{Machine, MachineSet};

/// Most Machines created in one pass (Kubernetes' ReplicaSet
/// `burstReplicas`); the rest follow on the next pass.
pub const MAX_BURST: usize = 500;
/// Machines created at once within a burst.
pub const PARALLEL_CREATES: usize = 16;
/// How long to wait for the cache to show this pass's writes.
pub const CACHE_WAIT: Duration = Duration::from_secs(10);

/// Reconciles one MachineSet.
pub async fn reconcile(set: Arc<MachineSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = super::key(set.as_ref());
    let result = reconcile_inner(&set, &ctx).await;
    if result.is_ok() {
        ctx.succeeded(&key);
    }
    result
}

async fn reconcile_inner(set: &MachineSet, ctx: &Context) -> Result<Action, Error> {
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let name = set.metadata.name.clone().unwrap_or_default();
    let cluster = ctx.cluster(&ns, &set.spec.cluster_name);
    let deployment = meta::controller_of(&set.metadata)
        .filter(|o| o.kind == "MachineDeployment")
        .and_then(|o| {
            ctx.deployments
                .find(|d| d.metadata.uid.as_deref() == Some(o.uid.as_str()))
        });
    let machines = ctx
        .machines
        .state_filter(|m| m.namespace() == ns && m.spec.cluster_name == set.spec.cluster_name);
    let node_names: Vec<String> = machines
        .iter()
        .filter_map(|m| m.status.as_ref()?.node_ref.as_ref()?.name.clone())
        .collect();
    let nodes: Vec<Arc<Node>> = ctx
        .nodes
        .as_ref()
        .map(|store| {
            node_names
                .iter()
                .filter_map(|n| store.get(&kube::runtime::reflector::ObjectRef::new(n)))
                .collect()
        })
        .unwrap_or_default();
    let p = plan(&SetScope {
        set,
        cluster: cluster.as_deref(),
        deployment: deployment.as_deref(),
        machines: machines.iter().map(|m| m.as_ref()).collect(),
        nodes: nodes
            .iter()
            .map(|n| (n.metadata.name.clone().unwrap_or_default(), n.as_ref()))
            .collect::<BTreeMap<_, _>>(),
        now: Utc::now(),
    });

    let sets: Api<MachineSet> = Api::namespaced(ctx.client.clone(), &ns);
    let machines_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    if p.add_finalizer {
        let mut f = set.metadata.finalizers.clone().unwrap_or_default();
        f.push(labels::MACHINE_SET_FINALIZER.into());
        sets.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": f, "resourceVersion": set.metadata.resource_version}})),
        )
        .await
        .map_err(|e| Error::api("adding the finalizer", e))?;
        return Ok(Action::await_change());
    }
    if let Some(patch) = &p.set_patch {
        sets.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| Error::api("patching the MachineSet", e))?;
    }
    let owner = meta::owner_ref(
        crate::API_VERSION,
        "MachineSet",
        &name,
        set.metadata.uid.as_deref().unwrap_or_default(),
        true,
    );
    for m in &p.adopt {
        let Some(machine) = machines.iter().find(|x| x.name() == m) else {
            continue;
        };
        let mut refs = machine
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default();
        refs.push(owner.clone());
        let patch = json!({"metadata": {"ownerReferences": refs, "resourceVersion": machine.metadata.resource_version}});
        machines_api
            .patch(m, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::api(format!("adopting Machine {m}"), e))?;
        ctx.event(
            set,
            false,
            "SuccessfulAdopt",
            format!("Adopted Machine {m:?}"),
        );
    }
    for (m, patch) in &p.machine_syncs {
        machines_api
            .patch(
                m,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": patch})),
            )
            .await
            .or_else(|e| {
                if is_not_found(&e) {
                    Ok(Default::default())
                } else {
                    Err(e)
                }
            })
            .map_err(|e| Error::api(format!("labelling Machine {m}"), e))?;
        // The same labels on its provider objects.
        if let (Some(machine), Some(labels)) =
            (machines.iter().find(|x| x.name() == m), patch.get("labels"))
        {
            let refs = [
                machine.spec.bootstrap.config_ref.as_ref(),
                Some(&machine.spec.infrastructure_ref),
            ];
            for r in refs.into_iter().flatten() {
                label_external(ctx, r, &ns, labels).await;
            }
        }
    }
    for m in &p.delete {
        match machines_api.delete(m, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::api(format!("deleting Machine {m}"), e)),
        }
        ctx.event(
            set,
            false,
            "SuccessfulDelete",
            format!("Deleted Machine {m:?}"),
        );
    }
    if !p.delete.is_empty() {
        wait_for_cache(ctx, &ns, |store_has| {
            p.delete.iter().all(|n| store_has(n) != Some(false))
        })
        .await;
    }
    let mut conditions_patch = None;
    if p.create > 0 {
        let burst = p.create.min(MAX_BURST);
        let names: Vec<String> = {
            let mut rng = rand::rng();
            (0..burst).map(|_| machine_name(&name, &mut rng)).collect()
        };
        let results: Vec<Result<String, (String, String)>> = futures::stream::iter(names)
            .map(|n| create_machine(ctx, set, n))
            .buffer_unordered(PARALLEL_CREATES)
            .collect()
            .await;
        let created: Vec<String> = results
            .iter()
            .filter_map(|r| r.as_ref().ok().cloned())
            .collect();
        if let Some(Err((reason, message))) = results.iter().find(|r| r.is_err()) {
            ctx.event(set, true, reason, message.clone());
            conditions_patch = Some(crate::conditions::false_(
                ct::MACHINES_CREATED,
                reason,
                crate::conditions::severity::ERROR,
                message.clone(),
            ));
        } else if !created.is_empty() {
            ctx.event(
                set,
                false,
                "SuccessfulCreate",
                format!("Created {} Machines", created.len()),
            );
            conditions_patch = Some(crate::conditions::true_(ct::MACHINES_CREATED));
        }
        wait_for_cache(ctx, &ns, |store_has| {
            created.iter().all(|n| store_has(n).is_some())
        })
        .await;
    }
    let mut status = p.status.clone();
    if let Some(c) = conditions_patch.clone() {
        crate::conditions::set(&mut status.conditions, c, Utc::now());
    }
    let old = serde_json::to_value(set.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
    let new = serde_json::to_value(&status).unwrap_or(Value::Null);
    let mut latest = set.metadata.clone();
    if let Some(diff) = apimachinery::patch::merge_patch_diff(&old, &new) {
        match sets
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": diff})),
            )
            .await
        {
            Ok(s) => latest = s.metadata,
            Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
            Err(e) => return Err(Error::api("writing the MachineSet status", e)),
        }
    }
    if p.remove_finalizer {
        let f: Vec<String> = latest
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != labels::MACHINE_SET_FINALIZER)
            .cloned()
            .collect();
        match sets
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": f, "resourceVersion": latest.resource_version}})),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::api("removing the finalizer", e)),
        }
        return Ok(Action::await_change());
    }
    if conditions_patch.is_some_and(|c| c.status == crate::conditions::FALSE) {
        return Err(Error::Plan("creating Machines failed".into()));
    }
    if !p.errors.is_empty() {
        return Err(Error::Plan(p.errors.join("; ")));
    }
    for (warning, reason, note) in &p.events {
        ctx.event(set, *warning, reason, note.clone());
    }
    let hint = if p.create > MAX_BURST {
        Some(Duration::from_millis(100))
    } else {
        p.requeue
    };
    Ok(super::requeue(hint, &ctx.config))
}

/// Polls the Machine cache until `done` holds (at most [`CACHE_WAIT`]).
/// `done` gets a lookup: `None` absent, `Some(deleting)` present.
async fn wait_for_cache(
    ctx: &Context,
    ns: &str,
    done: impl Fn(&dyn Fn(&str) -> Option<bool>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + CACHE_WAIT;
    loop {
        let lookup = |name: &str| {
            ctx.machines
                .get(&kube::runtime::reflector::ObjectRef::new(name).within(ns))
                .map(|m| m.metadata.deletion_timestamp.is_some())
        };
        if done(&lookup) || tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Puts `labels` (a merge patch) on a provider object, best effort: the
/// next pass tries again.
async fn label_external(ctx: &Context, r: &ObjectReference, ns: &str, labels: &Value) {
    let Ok(ar) = ctx.dynamic.resolve(r).await else {
        return;
    };
    let name = r.name.clone().unwrap_or_default();
    let patch = json!({"metadata": {"labels": labels}});
    if let Err(e) = ctx
        .dynamic
        .api(&ar, ns)
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        && !is_not_found(&e)
    {
        tracing::debug!(object = %name, error = %e, "labelling a provider object failed");
    }
}

/// Clones one template for the Machine `name` and creates the clone;
/// returns its reference.
async fn clone_for(
    ctx: &Context,
    set: &MachineSet,
    template_ref: &ObjectReference,
    machine: &Machine,
) -> Result<(), String> {
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let ar = ctx.dynamic.resolve(template_ref).await?;
    let template_name = template_ref.name.clone().unwrap_or_default();
    let template = match ctx.dynamic.get_live(&ar, &template_name, &ns).await {
        Ok(Fetched::Found(t)) => t,
        Ok(_) => return Err(format!("{} {template_name:?} does not exist", ar.kind)),
        Err(e) => return Err(format!("reading {} {template_name:?}: {e}", ar.kind)),
    };
    let labels = machine.metadata.labels.clone().unwrap_or_default();
    let annotations = machine.metadata.annotations.clone().unwrap_or_default();
    let owner = meta::owner_ref(
        crate::API_VERSION,
        "MachineSet",
        set.metadata.name.as_deref().unwrap_or_default(),
        set.metadata.uid.as_deref().unwrap_or_default(),
        true,
    );
    let obj = clone_template(
        &template,
        &CloneFor {
            name: machine.name(),
            namespace: &ns,
            cluster_name: &set.spec.cluster_name,
            labels: &labels,
            annotations: &annotations,
            owner: Some(owner),
        },
    )?;
    let clone_ref = ObjectReference {
        api_version: template_ref.api_version.clone(),
        kind: cloned_kind(&ar.kind).map(str::to_string),
        ..ObjectReference::default()
    };
    let clone_ar = ctx.dynamic.resolve(&clone_ref).await?;
    let dynobj: kube::api::DynamicObject =
        serde_json::from_value(obj).map_err(|e| e.to_string())?;
    match ctx
        .dynamic
        .api(&clone_ar, &ns)
        .create(&PostParams::default(), &dynobj)
        .await
    {
        Ok(_) => Ok(()),
        // A clone left by an interrupted pass is reused.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(format!(
            "creating {} {:?}: {e}",
            clone_ar.kind,
            machine.name()
        )),
    }
}

/// Deletes a clone again after a later step failed (best effort; the
/// MachineSet owns it, so garbage collection gets it at the latest).
async fn delete_clone(ctx: &Context, r: &ObjectReference, ns: &str) {
    if let Ok(ar) = ctx.dynamic.resolve(r).await {
        let name = r.name.clone().unwrap_or_default();
        let _ = ctx
            .dynamic
            .api(&ar, ns)
            .delete(&name, &DeleteParams::background())
            .await;
    }
}

/// Creates one Machine: bootstrap clone, infrastructure clone, Machine;
/// a failure removes what was made. Returns the name, or the failure's
/// condition reason and message.
async fn create_machine(
    ctx: &Context,
    set: &MachineSet,
    name: String,
) -> Result<String, (String, String)> {
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let machine = new_machine(set, &name);
    let template = &set.spec.template.spec;
    if let Some(r) = &template.bootstrap.config_ref {
        clone_for(ctx, set, r, &machine)
            .await
            .map_err(|e| (reasons::BOOTSTRAP_TEMPLATE_CLONING_FAILED.to_string(), e))?;
    }
    if let Err(e) = clone_for(ctx, set, &template.infrastructure_ref, &machine).await {
        if let Some(r) = &machine.spec.bootstrap.config_ref {
            delete_clone(ctx, r, &ns).await;
        }
        return Err((
            reasons::INFRASTRUCTURE_TEMPLATE_CLONING_FAILED.to_string(),
            e,
        ));
    }
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    if let Err(e) = api.create(&PostParams::default(), &machine).await {
        if let Some(r) = &machine.spec.bootstrap.config_ref {
            delete_clone(ctx, r, &ns).await;
        }
        delete_clone(ctx, &machine.spec.infrastructure_ref, &ns).await;
        return Err((
            reasons::MACHINE_CREATION_FAILED.to_string(),
            format!("creating Machine {name:?}: {e}"),
        ));
    }
    Ok(name)
}

/// After a failed reconcile: back off per set.
pub fn error_policy(set: Arc<MachineSet>, e: &Error, ctx: Arc<Context>) -> Action {
    tracing::debug!(set = ?set.metadata.name, error = %e, "reconcile failed");
    ctx.error_action(super::key(set.as_ref()))
}
