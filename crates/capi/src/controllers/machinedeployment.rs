//! The MachineDeployment controller's executor: reads its MachineSets and
//! templates, applies the rollout step the planner decided (create the new
//! set, scale and annotate sets, delete history) and writes the status.
//! It also gives the templates a Cluster owner reference, so that they go
//! with the Cluster.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::dynamic::Fetched;
use super::{Context, Error, is_not_found};
use crate::machinedeployment::{DeploymentScope, plan};
use crate::machineset::random_suffix;
use crate::meta;
use crate::types::labels;
use crate::types::{Cluster, MachineDeployment, MachineSet};

/// Reconciles one MachineDeployment.
pub async fn reconcile(md: Arc<MachineDeployment>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = super::key(md.as_ref());
    let result = reconcile_inner(&md, &ctx).await;
    if result.is_ok() {
        ctx.succeeded(&key);
    }
    result
}

/// Reads a template and makes sure the Cluster owns it; whether it exists.
async fn template(
    ctx: &Context,
    r: &ObjectReference,
    ns: &str,
    cluster: Option<&Cluster>,
) -> Result<bool, Error> {
    let Ok(ar) = ctx.dynamic.resolve(r).await else {
        return Ok(false);
    };
    let name = r.name.clone().unwrap_or_default();
    let Fetched::Found(t) = ctx
        .dynamic
        .get_live(&ar, &name, ns)
        .await
        .map_err(|e| Error::api(format!("reading {} {name}", ar.kind), e))?
    else {
        return Ok(false);
    };
    if let Some(c) = cluster {
        let uid = c.metadata.uid.as_deref().unwrap_or_default();
        if !meta::has_owner(&t.metadata, uid) {
            let mut refs = t.metadata.owner_references.clone().unwrap_or_default();
            refs.push(meta::owner_ref(
                crate::API_VERSION,
                "Cluster",
                c.name(),
                uid,
                false,
            ));
            let patch = json!({"metadata": {
                "ownerReferences": refs,
                "labels": {labels::CLUSTER_NAME: c.name()},
                "resourceVersion": t.metadata.resource_version,
            }});
            ctx.dynamic
                .api(&ar, ns)
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| Error::api(format!("owning {} {name}", ar.kind), e))?;
        }
    }
    Ok(true)
}

async fn reconcile_inner(md: &MachineDeployment, ctx: &Context) -> Result<Action, Error> {
    let ns = md.metadata.namespace.clone().unwrap_or_default();
    let name = md.metadata.name.clone().unwrap_or_default();
    let cluster = ctx.cluster(&ns, &md.spec.cluster_name);
    let sets = ctx
        .sets
        .state_filter(|s| s.metadata.namespace.as_deref() == Some(ns.as_str()));
    let mut machines_per_set: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for m in ctx.machines.state_filter(|m| m.namespace() == ns) {
        if let Some(o) = meta::controller_of(&m.metadata).filter(|o| o.kind == "MachineSet") {
            let e = machines_per_set.entry(o.name.clone()).or_default();
            e.0 += 1;
            if m.metadata.deletion_timestamp.is_some() {
                e.1 += 1;
            }
        }
    }
    let deleting = md.metadata.deletion_timestamp.is_some();
    let mut templates_found = true;
    if !deleting {
        let t = &md.spec.template.spec;
        if let Some(r) = &t.bootstrap.config_ref {
            templates_found &= template(ctx, r, &ns, cluster.as_deref()).await?;
        }
        templates_found &= template(ctx, &t.infrastructure_ref, &ns, cluster.as_deref()).await?;
    }
    let random = random_suffix(&mut rand::rng());
    let p = plan(&DeploymentScope {
        md,
        cluster: cluster.as_deref(),
        sets: sets.iter().map(|s| s.as_ref()).collect(),
        machines_per_set,
        templates_found,
        random,
        now: Utc::now(),
    });
    let mds: Api<MachineDeployment> = Api::namespaced(ctx.client.clone(), &ns);
    let sets_api: Api<MachineSet> = Api::namespaced(ctx.client.clone(), &ns);
    if p.add_finalizer {
        let mut f = md.metadata.finalizers.clone().unwrap_or_default();
        f.push(labels::MACHINE_DEPLOYMENT_FINALIZER.into());
        mds.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": f, "resourceVersion": md.metadata.resource_version}})),
        )
        .await
        .map_err(|e| Error::api("adding the finalizer", e))?;
        return Ok(Action::await_change());
    }
    if let Some(patch) = &p.md_patch {
        mds.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| Error::api("patching the MachineDeployment", e))?;
    }
    for s in &p.adopt {
        let Some(set) = sets.iter().find(|x| x.metadata.name.as_deref() == Some(s)) else {
            continue;
        };
        let mut refs = set.metadata.owner_references.clone().unwrap_or_default();
        refs.push(meta::owner_ref(
            crate::API_VERSION,
            "MachineDeployment",
            &name,
            md.metadata.uid.as_deref().unwrap_or_default(),
            true,
        ));
        let patch = json!({"metadata": {
            "ownerReferences": refs,
            "labels": {labels::DEPLOYMENT_NAME: name},
            "resourceVersion": set.metadata.resource_version,
        }});
        sets_api
            .patch(s, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::api(format!("adopting MachineSet {s}"), e))?;
    }
    if let Some(new) = &p.create {
        let created = sets_api
            .create(&PostParams::default(), new)
            .await
            .map_err(|e| Error::api("creating the new MachineSet", e))?;
        let new_name = created.metadata.name.clone().unwrap_or_default();
        ctx.event(
            md,
            false,
            "SuccessfulCreate",
            format!("Created MachineSet {new_name:?}"),
        );
        // Wait until the cache shows it, so the next pass does not create
        // another one.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::time::Instant::now() < deadline
            && ctx
                .sets
                .get(&kube::runtime::reflector::ObjectRef::new(&new_name).within(&ns))
                .is_none()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    for (s, patch) in &p.set_patches {
        match sets_api
            .patch(s, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::api(format!("updating MachineSet {s}"), e)),
        }
    }
    for s in &p.delete {
        match sets_api.delete(s, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::api(format!("deleting MachineSet {s}"), e)),
        }
    }
    let old = serde_json::to_value(md.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
    let new = serde_json::to_value(&p.status).unwrap_or(Value::Null);
    let mut latest = md.metadata.clone();
    if let Some(diff) = apimachinery::patch::merge_patch_diff(&old, &new) {
        match mds
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": diff})),
            )
            .await
        {
            Ok(m) => latest = m.metadata,
            Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
            Err(e) => return Err(Error::api("writing the MachineDeployment status", e)),
        }
    }
    if p.remove_finalizer {
        let f: Vec<String> = latest
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != labels::MACHINE_DEPLOYMENT_FINALIZER)
            .cloned()
            .collect();
        match mds
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
    if !p.errors.is_empty() {
        return Err(Error::Plan(p.errors.join("; ")));
    }
    Ok(super::requeue(p.requeue, &ctx.config))
}

/// After a failed reconcile: back off per deployment.
pub fn error_policy(md: Arc<MachineDeployment>, e: &Error, ctx: Arc<Context>) -> Action {
    tracing::debug!(deployment = ?md.metadata.name, error = %e, "reconcile failed");
    ctx.error_action(super::key(md.as_ref()))
}
