//! The Deployment executor: claim the ReplicaSets, apply the steps of
//! [`crate::deployment::plan`] in order (stopping at the first that fails
//! or finds the cache stale), write the status, then the revision.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use serde_json::json;

use super::{
    CACHE_WAIT, CONFLICT_WAIT, Context, Error, Written, claim, is_code, owner_current, write_status,
};
use crate::deployment::{self, Observed, Step};
use crate::meta::{self, Owner, Selector};
use crate::names;

pub const NAME: &str = "deployment";
/// Upstream's event source.
pub const REPORTER: &str = "deployment-controller";

pub async fn reconcile(d: Arc<Deployment>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = d.metadata.namespace.clone().unwrap_or_default();
    let name = meta::name(&d.metadata).to_string();
    let uid = d.metadata.uid.clone().unwrap_or_default();
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let sets_api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
    let owner = Owner::of("apps/v1", "Deployment", &d.metadata);
    let selector = d
        .spec
        .as_ref()
        .map(|s| Selector::from_label_selector(&s.selector));
    let Some(Ok(selector)) = selector else {
        return Ok(Action::await_change());
    };
    let candidates: Vec<Arc<ReplicaSet>> = ctx
        .replica_sets
        .state()
        .into_iter()
        .filter(|rs| rs.metadata.namespace.as_deref() == Some(ns.as_str()))
        .collect();
    let sets = if selector.is_empty() {
        // Selecting everything is refused by validation; never adopt on it.
        Vec::new()
    } else {
        claim(
            &sets_api,
            &owner,
            candidates,
            |rs| selector.matches(rs.metadata.labels.as_ref()),
            async || owner_current(&deployments, &name, &uid).await,
        )
        .await?
    };
    let set_uids: Vec<&str> = sets
        .iter()
        .filter_map(|rs| rs.metadata.uid.as_deref())
        .collect();
    let pods: Vec<Arc<Pod>> = ctx
        .pods_in(&ns)
        .into_iter()
        .filter(|p| {
            meta::controller_of(&p.metadata).is_some_and(|r| set_uids.contains(&r.uid.as_str()))
        })
        .collect();
    let now = meta::whole_seconds(Utc::now());
    let observed = Observed {
        deployment: &d,
        sets: sets.iter().map(|s| s.as_ref()).collect(),
        pods: pods.iter().map(|p| p.as_ref()).collect(),
    };
    let plan = deployment::plan(&observed, now);

    // Resource versions of sets written earlier in this pass.
    let mut versions: HashMap<String, String> = HashMap::new();
    let mut revision = None;
    for step in &plan.steps {
        match step {
            Step::CreateReplicaSet(rs) => {
                let rs_name = meta::name(&rs.metadata).to_string();
                match sets_api.create(&PostParams::default(), rs).await {
                    Ok(_) => {}
                    Err(e) if is_code(&e, 409) => {
                        return already_exists(&d, &deployments, &sets_api, &rs_name).await;
                    }
                    Err(source) => {
                        let msg = source.to_string();
                        ctx.event(
                            REPORTER,
                            d.as_ref(),
                            true,
                            "ReplicaSetCreateError",
                            format!("Failed to create new replica set {rs_name:?}: {msg}"),
                        );
                        if let Some(status) = deployment::create_failed(&d, &rs_name, &msg, now) {
                            let mut updated = (*d).clone();
                            updated.status = Some(status);
                            write_status(&deployments, &updated).await?;
                        }
                        return Err(Error::CreateFailed {
                            what: format!("replica set {rs_name}"),
                            source,
                        });
                    }
                }
            }
            Step::UpdateReplicaSet {
                name: rs_name,
                resource_version,
                replicas,
                annotations,
                min_ready_seconds,
            } => {
                let rv = versions.get(rs_name).cloned().or(resource_version.clone());
                let patch = json!({
                    "metadata": {"annotations": annotations, "resourceVersion": rv},
                    "spec": {"replicas": replicas, "minReadySeconds": min_ready_seconds},
                });
                match sets_api
                    .patch(rs_name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(updated) => {
                        if let Some(rv) = updated.metadata.resource_version {
                            versions.insert(rs_name.clone(), rv);
                        }
                    }
                    // Planned from a stale set: plan again from a fresh one.
                    Err(e) if is_code(&e, 409) || is_code(&e, 404) => {
                        return Ok(Action::requeue(CONFLICT_WAIT));
                    }
                    Err(source) => {
                        return Err(Error::UpdateFailed {
                            what: format!("replica set {rs_name}"),
                            source,
                        });
                    }
                }
            }
            Step::DeleteReplicaSet {
                name: rs_name,
                uid,
                resource_version,
            } => {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: uid.clone(),
                        resource_version: versions
                            .get(rs_name)
                            .cloned()
                            .or(resource_version.clone()),
                    }),
                    ..DeleteParams::background()
                };
                match sets_api.delete(rs_name, &dp).await {
                    Ok(_) => {}
                    Err(e) if is_code(&e, 409) || is_code(&e, 404) => {}
                    Err(source) => {
                        return Err(Error::DeleteFailed {
                            what: format!("replica set {rs_name}"),
                            source,
                        });
                    }
                }
            }
            Step::SetRevision(r) => revision = Some(r.clone()),
            Step::Event {
                warning,
                reason,
                message,
            } => ctx.event(REPORTER, d.as_ref(), *warning, reason, message.clone()),
        }
    }
    if let Some(status) = plan.status {
        let mut updated = (*d).clone();
        updated.status = Some(status);
        match write_status(&deployments, &updated).await? {
            Written::Done => {}
            Written::Conflict => return Ok(Action::requeue(CONFLICT_WAIT)),
            Written::Gone => return Ok(Action::await_change()),
        }
    }
    // The revision goes last: it changes the Deployment's resource
    // version, which the status write above is guarded by.
    if let Some(r) = revision {
        let patch = json!({"metadata": {"annotations": {names::REVISION: r}}});
        match deployments
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if is_code(&e, 404) => return Ok(Action::await_change()),
            Err(source) => {
                return Err(Error::UpdateFailed {
                    what: format!("the revision of deployment {name}"),
                    source,
                });
            }
        }
    }
    Ok(plan
        .requeue_after
        .map(Action::requeue)
        .unwrap_or_else(Action::await_change))
}

/// The new set's name is taken: by our own set the cache has not shown yet
/// (wait for it), or by another (a hash collision: count it, so the next
/// pass names the set differently).
async fn already_exists(
    d: &Deployment,
    deployments: &Api<Deployment>,
    sets: &Api<ReplicaSet>,
    rs_name: &str,
) -> Result<Action, Error> {
    let existing = sets
        .get_opt(rs_name)
        .await
        .map_err(|source| Error::ReadFailed {
            what: format!("replica set {rs_name}"),
            source,
        })?;
    let Some(existing) = existing else {
        return Ok(Action::requeue(CONFLICT_WAIT));
    };
    if !deployment::collision(d, &existing) {
        return Ok(Action::requeue(CACHE_WAIT));
    }
    let mut updated = d.clone();
    updated.status = Some(deployment::collided(d));
    write_status(deployments, &updated).await?;
    tracing::info!(deployment = %meta::name(&d.metadata), set = rs_name, "hash collision; counting it");
    Ok(Action::requeue(CONFLICT_WAIT))
}
