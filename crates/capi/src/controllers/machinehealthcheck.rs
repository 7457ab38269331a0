//! The MachineHealthCheck controller's executor: gathers the namespace's
//! Machines and their Nodes, calls [`crate::mhc::plan`] and writes the
//! check's status (the Machine controller mirrors the verdicts onto the
//! Machines).

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::Utc;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::{Context, Error, is_not_found};
use crate::types::MachineHealthCheck;

/// Reconciles one MachineHealthCheck.
pub async fn reconcile(check: Arc<MachineHealthCheck>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = super::key(check.as_ref());
    let result = reconcile_inner(&check, &ctx).await;
    if result.is_ok() {
        ctx.succeeded(&key);
    }
    result
}

async fn reconcile_inner(check: &MachineHealthCheck, ctx: &Context) -> Result<Action, Error> {
    let ns = check.metadata.namespace.clone().unwrap_or_default();
    let name = check.metadata.name.clone().unwrap_or_default();
    let Some(cluster) = ctx.cluster(&ns, &check.spec.cluster_name) else {
        return Err(Error::Plan(format!(
            "Cluster {:?} does not exist",
            check.spec.cluster_name
        )));
    };
    if cluster.spec.paused
        || crate::meta::annotation(&check.metadata, crate::types::labels::PAUSED).is_some()
    {
        return Ok(Action::await_change());
    }
    let machines = ctx
        .machines
        .state_filter(|m| m.namespace() == ns && m.spec.cluster_name == check.spec.cluster_name);
    let nodes: Vec<Arc<Node>> = ctx
        .nodes
        .as_ref()
        .map(|store| {
            machines
                .iter()
                .filter_map(|m| m.status.as_ref()?.node_ref.as_ref()?.name.clone())
                .filter_map(|n| store.get(&kube::runtime::reflector::ObjectRef::new(&n)))
                .collect()
        })
        .unwrap_or_default();
    let by_name: BTreeMap<String, &Node> = nodes
        .iter()
        .map(|n| (n.metadata.name.clone().unwrap_or_default(), n.as_ref()))
        .collect();
    let p = crate::mhc::plan(
        check,
        &cluster,
        &machines.iter().map(|m| m.as_ref()).collect::<Vec<_>>(),
        &by_name,
        Utc::now(),
    );
    let api: Api<MachineHealthCheck> = Api::namespaced(ctx.client.clone(), &ns);
    if let Some(patch) = &p.check_patch {
        api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| Error::api("patching the MachineHealthCheck", e))?;
    }
    let old = serde_json::to_value(check.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
    let new = serde_json::to_value(&p.status).unwrap_or(Value::Null);
    if let Some(diff) = apimachinery::patch::merge_patch_diff(&old, &new) {
        match api
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": diff})),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
            Err(e) => return Err(Error::api("writing the MachineHealthCheck status", e)),
        }
    }
    for (warning, reason, note) in &p.events {
        ctx.event(check, *warning, reason, note.clone());
    }
    Ok(super::requeue(p.requeue, &ctx.config))
}

/// After a failed reconcile: back off per check.
pub fn error_policy(check: Arc<MachineHealthCheck>, e: &Error, ctx: Arc<Context>) -> Action {
    tracing::debug!(check = ?check.metadata.name, error = %e, "reconcile failed");
    ctx.error_action(super::key(check.as_ref()))
}
