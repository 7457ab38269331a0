//! The StatefulSet executor: claim pods and revisions, apply the steps of
//! [`crate::statefulset::plan`] in order (stopping at the first failure or
//! sign of a stale cache), write the status, then prune old revisions.

use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::{
    CACHE_WAIT, CONFLICT_WAIT, Context, Error, Written, claim, is_code, key, owner_current,
    write_status,
};
use crate::expectations::Expect;
use crate::meta::{self, Owner, Selector};
use crate::statefulset::{self, Observed, Step};

pub const NAME: &str = "statefulset";
/// Upstream's event source.
pub const REPORTER: &str = "statefulset-controller";

pub async fn reconcile(set: Arc<StatefulSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let name = meta::name(&set.metadata).to_string();
    let uid = set.metadata.uid.clone().unwrap_or_default();
    let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ns);
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let revs_api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let claims_api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let owner = Owner::of("apps/v1", "StatefulSet", &set.metadata);
    let selector = set
        .spec
        .as_ref()
        .map(|s| Selector::from_label_selector(&s.selector));
    let Some(Ok(selector)) = selector else {
        return Ok(Action::await_change());
    };
    if selector.is_empty() {
        return Ok(Action::await_change());
    }
    let pods = claim(
        &pods_api,
        &owner,
        ctx.pods_in(&ns),
        |p| selector.matches(p.metadata.labels.as_ref()) && statefulset::is_member(&set, p),
        async || owner_current(&sets, &name, &uid).await,
    )
    .await?;
    let revisions: Vec<Arc<ControllerRevision>> = ctx
        .revisions
        .state()
        .into_iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(ns.as_str()))
        .collect();
    let revisions = claim(
        &revs_api,
        &owner,
        revisions,
        |r| selector.matches(r.metadata.labels.as_ref()),
        async || owner_current(&sets, &name, &uid).await,
    )
    .await?;
    let cached = |k: &str| {
        let (ns, n) = k.split_once('/').unwrap_or(("", k));
        ctx.pods
            .get(&ObjectRef::new(n).within(ns))
            .map(|p| p.metadata.clone())
    };
    if !ctx.pod_expectations.satisfied(&uid, Instant::now(), cached) {
        return Ok(Action::requeue(CACHE_WAIT));
    }
    let claims: Vec<Arc<PersistentVolumeClaim>> = ctx
        .claims
        .state()
        .into_iter()
        .filter(|c| c.metadata.namespace.as_deref() == Some(ns.as_str()))
        .collect();
    let now = meta::whole_seconds(Utc::now());
    let plan = statefulset::plan(
        &Observed {
            set: &set,
            pods: pods.iter().map(|p| p.as_ref()).collect(),
            revisions: revisions.iter().map(|r| r.as_ref()).collect(),
            claims: claims.iter().map(|c| c.as_ref()).collect(),
        },
        now,
    );
    let pp = PostParams::default();
    let merge = |v: serde_json::Value| Patch::Merge(v);
    for step in &plan.steps {
        match step {
            Step::CreateRevision(rev) => {
                match revs_api.create(&pp, rev).await {
                    Ok(_) => {}
                    Err(e) if is_code(&e, 409) => {
                        let rev_name = meta::name(&rev.metadata);
                        let existing = revs_api.get_opt(rev_name).await.map_err(|source| {
                            Error::ReadFailed {
                                what: format!("controller revision {rev_name}"),
                                source,
                            }
                        })?;
                        match existing {
                            Some(x) if statefulset::equal_revision(&x, rev) => {}
                            Some(_) => {
                                let mut updated = (*set).clone();
                                updated.status = Some(statefulset::collided(&set));
                                write_status(&sets, &updated).await?;
                                return Ok(Action::requeue(CONFLICT_WAIT));
                            }
                            None => return Ok(Action::requeue(CONFLICT_WAIT)),
                        }
                    }
                    Err(source) => {
                        return Err(Error::CreateFailed {
                            what: format!("controller revision {}", meta::name(&rev.metadata)),
                            source,
                        });
                    }
                }
            }
            Step::UpdateRevision {
                name: rev_name,
                revision,
            } => {
                let patch = merge(json!({ "revision": revision }));
                if let Err(source) = revs_api
                    .patch(rev_name, &PatchParams::default(), &patch)
                    .await
                {
                    if is_code(&source, 404) || is_code(&source, 409) {
                        return Ok(Action::requeue(CONFLICT_WAIT));
                    }
                    return Err(Error::UpdateFailed {
                        what: format!("controller revision {rev_name}"),
                        source,
                    });
                }
            }
            Step::CreateClaim(c) => match claims_api.create(&pp, c).await {
                Ok(_) => {}
                // Made by an earlier pass whose result the cache lacks.
                Err(e) if is_code(&e, 409) => {}
                Err(source) => {
                    let claim_name = meta::name(&c.metadata).to_string();
                    ctx.event(
                        REPORTER,
                        set.as_ref(),
                        true,
                        "FailedCreate",
                        format!("create Claim {claim_name} for StatefulSet {name} failed error: {source}"),
                    );
                    return Err(Error::CreateFailed {
                        what: format!("persistent volume claim {claim_name}"),
                        source,
                    });
                }
            },
            Step::CreatePod(pod) => {
                let pod_name = meta::name(&pod.metadata).to_string();
                ctx.pod_expectations
                    .expect(&uid, [(key(&ns, &pod_name), Expect::Present)]);
                match pods_api.create(&pp, pod).await {
                    Ok(_) => {}
                    Err(e) if is_code(&e, 409) => {
                        ctx.pod_expectations.lower(&uid, &key(&ns, &pod_name));
                        return Ok(Action::requeue(CACHE_WAIT));
                    }
                    Err(source) => {
                        ctx.pod_expectations.lower(&uid, &key(&ns, &pod_name));
                        ctx.event(
                            REPORTER,
                            set.as_ref(),
                            true,
                            "FailedCreate",
                            format!(
                                "create Pod {pod_name} in StatefulSet {name} failed error: {source}"
                            ),
                        );
                        return Err(Error::CreateFailed {
                            what: format!("pod {pod_name}"),
                            source,
                        });
                    }
                }
            }
            Step::DeletePod { name: pod_name } => {
                ctx.pod_expectations
                    .expect(&uid, [(key(&ns, pod_name), Expect::Gone)]);
                match pods_api.delete(pod_name, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(e) if is_code(&e, 404) => {}
                    Err(source) => {
                        ctx.pod_expectations.lower(&uid, &key(&ns, pod_name));
                        ctx.event(
                            REPORTER,
                            set.as_ref(),
                            true,
                            "FailedDelete",
                            format!(
                                "delete Pod {pod_name} in StatefulSet {name} failed error: {source}"
                            ),
                        );
                        return Err(Error::DeleteFailed {
                            what: format!("pod {pod_name}"),
                            source,
                        });
                    }
                }
            }
            Step::LabelPod {
                name: pod_name,
                labels,
            } => {
                let patch = merge(json!({"metadata": {"labels": labels}}));
                match pods_api
                    .patch(pod_name, &PatchParams::default(), &patch)
                    .await
                {
                    Ok(_) => {}
                    Err(e) if is_code(&e, 404) => {}
                    Err(source) => {
                        return Err(Error::UpdateFailed {
                            what: format!("pod {pod_name}"),
                            source,
                        });
                    }
                }
            }
            Step::SetClaimOwners {
                name: claim_name,
                owner_references,
                resource_version,
            } => {
                let refs = if owner_references.is_empty() {
                    serde_json::Value::Null
                } else {
                    json!(owner_references)
                };
                let patch = merge(json!({"metadata": {
                    "ownerReferences": refs, "resourceVersion": resource_version}}));
                match claims_api
                    .patch(claim_name, &PatchParams::default(), &patch)
                    .await
                {
                    Ok(_) => {}
                    Err(e) if is_code(&e, 404) || is_code(&e, 409) => {
                        return Ok(Action::requeue(CONFLICT_WAIT));
                    }
                    Err(source) => {
                        return Err(Error::UpdateFailed {
                            what: format!("persistent volume claim {claim_name}"),
                            source,
                        });
                    }
                }
            }
            Step::Event {
                warning,
                reason,
                message,
            } => ctx.event(REPORTER, set.as_ref(), *warning, reason, message.clone()),
        }
    }
    if let Some(status) = plan.status {
        let mut updated = (*set).clone();
        updated.status = Some(status);
        match write_status(&sets, &updated).await? {
            Written::Done => {}
            Written::Conflict => return Ok(Action::requeue(CONFLICT_WAIT)),
            Written::Gone => return Ok(Action::await_change()),
        }
    }
    for rev in &plan.prune {
        match revs_api.delete(rev, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_code(&e, 404) => {}
            Err(source) => {
                return Err(Error::DeleteFailed {
                    what: format!("controller revision {rev}"),
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
