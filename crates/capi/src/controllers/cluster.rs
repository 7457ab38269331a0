//! The Cluster controller's executor: reads the infrastructure cluster
//! through the dynamic watches, copies its readiness and endpoint in, and
//! on deletion removes the Cluster's deployments, sets and Machines, then
//! the infrastructure cluster, then the finalizer.

use std::sync::Arc;

use chrono::Utc;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::{Context, Error, is_not_found};
use crate::cluster::{ClusterScope, Descendants, plan};
use crate::meta::{controller_of, label};
use crate::types::labels;
use crate::types::{Cluster, Machine, MachineDeployment, MachineSet};

/// Reconciles one Cluster.
pub async fn reconcile(c: Arc<Cluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = super::key(c.as_ref());
    let result = reconcile_inner(&c, &ctx).await;
    if result.is_ok() {
        ctx.succeeded(&key);
    }
    result
}

/// The Cluster's objects still there, and those deletion starts from.
fn descendants(ctx: &Context, c: &Cluster) -> Descendants {
    let ns = c.namespace();
    let of_cluster = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.namespace.as_deref() == Some(ns) && label(meta, labels::CLUSTER_NAME) == Some(c.name())
    };
    let owned_by = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
                    kind: &str| {
        controller_of(meta).is_some_and(|o| o.kind == kind)
    };
    let entry = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        (
            meta.name.clone().unwrap_or_default(),
            meta.deletion_timestamp.is_some(),
        )
    };
    let deployments: Vec<_> = ctx.deployments.state_filter(|d| {
        of_cluster(&d.metadata)
            || d.spec.cluster_name == c.name() && d.metadata.namespace.as_deref() == Some(ns)
    });
    let sets: Vec<_> = ctx.sets.state_filter(|s| {
        of_cluster(&s.metadata)
            || s.spec.cluster_name == c.name() && s.metadata.namespace.as_deref() == Some(ns)
    });
    let machines: Vec<_> = ctx.machines.state_filter(|m| {
        of_cluster(&m.metadata) || m.spec.cluster_name == c.name() && m.namespace() == ns
    });
    Descendants {
        remaining: deployments.len() + sets.len() + machines.len(),
        deployments: deployments.iter().map(|d| entry(&d.metadata)).collect(),
        sets: sets
            .iter()
            .filter(|s| !owned_by(&s.metadata, "MachineDeployment"))
            .map(|s| entry(&s.metadata))
            .collect(),
        machines: machines
            .iter()
            .filter(|m| !owned_by(&m.metadata, "MachineSet"))
            .map(|m| entry(&m.metadata))
            .collect(),
    }
}

async fn reconcile_inner(c: &Cluster, ctx: &Context) -> Result<Action, Error> {
    let ns = c.namespace().to_string();
    let name = c.name().to_string();
    let infra = ctx
        .dynamic
        .get(c.spec.infrastructure_ref.as_ref(), &ns)
        .await
        .map_err(|e| Error::api("reading the infrastructure cluster", e))?;
    let p = plan(&ClusterScope {
        cluster: c,
        infra: infra.as_lookup(),
        descendants: descendants(ctx, c),
        now: Utc::now(),
    });
    let api: Api<Cluster> = Api::namespaced(ctx.client.clone(), &ns);
    if p.add_finalizer {
        let mut f = c.metadata.finalizers.clone().unwrap_or_default();
        f.push(labels::CLUSTER_FINALIZER.into());
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": f, "resourceVersion": c.metadata.resource_version}})),
        )
        .await
        .map_err(|e| Error::api("adding the finalizer", e))?;
        return Ok(Action::await_change());
    }
    if let (Some(patch), Some(r)) = (&p.infra_patch, c.spec.infrastructure_ref.as_ref()) {
        let ar = ctx.dynamic.resolve(r).await.map_err(Error::Plan)?;
        let iname = r.name.clone().unwrap_or_default();
        ctx.dynamic
            .api(&ar, &ns)
            .patch(&iname, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| Error::api(format!("owning {} {iname}", ar.kind), e))?;
    }
    if let Some(patch) = &p.cluster_patch {
        api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| Error::api("patching the Cluster", e))?;
    }
    let bg = DeleteParams::background();
    let ignore_missing = |r: Result<(), kube::Error>, what: String| match r {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(Error::api(what, e)),
    };
    for d in &p.delete_deployments {
        let api: Api<MachineDeployment> = Api::namespaced(ctx.client.clone(), &ns);
        ignore_missing(
            api.delete(d, &bg).await.map(|_| ()),
            format!("deleting MachineDeployment {d}"),
        )?;
    }
    for s in &p.delete_sets {
        let api: Api<MachineSet> = Api::namespaced(ctx.client.clone(), &ns);
        ignore_missing(
            api.delete(s, &bg).await.map(|_| ()),
            format!("deleting MachineSet {s}"),
        )?;
    }
    for m in &p.delete_machines {
        let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
        ignore_missing(
            api.delete(m, &bg).await.map(|_| ()),
            format!("deleting Machine {m}"),
        )?;
    }
    if p.delete_infra
        && let Some(r) = c.spec.infrastructure_ref.as_ref()
    {
        let ar = ctx.dynamic.resolve(r).await.map_err(Error::Plan)?;
        let iname = r.name.clone().unwrap_or_default();
        ignore_missing(
            ctx.dynamic
                .api(&ar, &ns)
                .delete(&iname, &bg)
                .await
                .map(|_| ()),
            format!("deleting {} {iname}", ar.kind),
        )?;
    }
    let old = serde_json::to_value(c.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
    let new = serde_json::to_value(&p.status).unwrap_or(Value::Null);
    let mut latest = c.metadata.clone();
    if let Some(diff) = apimachinery::patch::merge_patch_diff(&old, &new) {
        match api
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": diff})),
            )
            .await
        {
            Ok(x) => latest = x.metadata,
            Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
            Err(e) => return Err(Error::api("writing the Cluster status", e)),
        }
    }
    if p.remove_finalizer {
        let f: Vec<String> = latest
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != labels::CLUSTER_FINALIZER)
            .cloned()
            .collect();
        ignore_missing(
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": f, "resourceVersion": latest.resource_version}})),
            )
            .await
            .map(|_| ()),
            "removing the finalizer".into(),
        )?;
        return Ok(Action::await_change());
    }
    if !p.errors.is_empty() {
        return Err(Error::Plan(p.errors.join("; ")));
    }
    Ok(super::requeue(p.requeue, &ctx.config))
}

/// After a failed reconcile: back off per Cluster.
pub fn error_policy(c: Arc<Cluster>, e: &Error, ctx: Arc<Context>) -> Action {
    tracing::debug!(cluster = %c.name(), error = %e, "reconcile failed");
    ctx.error_action(super::key(c.as_ref()))
}
