//! The Job executor: claim the pods, apply [`crate::job::plan`] (pod
//! deletions and slow-start creations, the uncounted record, finalizer
//! removals, the final status, the deletion after the time to live), and
//! let go of tracking finalizers on pods whose Job is gone.

use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use futures::future::join_all;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::{
    CACHE_WAIT, CONFLICT_WAIT, Context, Error, Written, claim, is_code, key, owner_current,
    write_status,
};
use crate::expectations::Expect;
use crate::job::{self, Backoff};
use crate::meta::{self, Owner, Selector};
use crate::names;

pub const NAME: &str = "job";
/// Upstream's event source.
pub const REPORTER: &str = "job-controller";

pub async fn reconcile(j: Arc<Job>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = j.metadata.namespace.clone().unwrap_or_default();
    let name = meta::name(&j.metadata).to_string();
    let uid = j.metadata.uid.clone().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    if job::is_indexed(&j) {
        tracing::warn!(job = %name, "indexed Jobs are not run by this controller");
        return Ok(Action::await_change());
    }
    let selector = j
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .map(Selector::from_label_selector);
    let Some(Ok(selector)) = selector else {
        return Ok(Action::await_change());
    };
    if selector.is_empty() {
        return Ok(Action::await_change());
    }
    let owner = Owner::of("batch/v1", "Job", &j.metadata);
    let pods = claim(
        &pods_api,
        &owner,
        ctx.pods_in(&ns),
        |p| selector.matches(p.metadata.labels.as_ref()),
        async || owner_current(&jobs, &name, &uid).await,
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
    let now = meta::whole_seconds(Utc::now());
    let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
    let backoff = Backoff {
        base: ctx.config.job_backoff,
        max: ctx.config.job_backoff_max,
    };
    let plan = job::plan(&j, &refs, backoff, now);

    if !plan.delete.is_empty() {
        ctx.pod_expectations.expect(
            &uid,
            plan.delete.iter().map(|n| (key(&ns, n), Expect::Gone)),
        );
        let dp = DeleteParams::background();
        let results = join_all(plan.delete.iter().map(|n| pods_api.delete(n, &dp))).await;
        for (n, r) in plan.delete.iter().zip(results) {
            match r {
                Ok(_) => ctx.event(
                    REPORTER,
                    j.as_ref(),
                    false,
                    "SuccessfulDelete",
                    format!("Deleted pod: {n}"),
                ),
                Err(e) if is_code(&e, 404) => {}
                Err(source) => {
                    ctx.pod_expectations.lower(&uid, &key(&ns, n));
                    return Err(Error::DeleteFailed {
                        what: format!("pod {n}"),
                        source,
                    });
                }
            }
        }
    }
    if plan.create > 0 {
        create_pods(&ctx, &j, &pods_api, plan.create).await?;
    }
    if let Some(record) = &plan.record {
        let mut updated = (*j).clone();
        updated.status = Some(record.clone());
        match write_status(&jobs, &updated).await? {
            Written::Done => {}
            Written::Conflict => return Ok(Action::requeue(CONFLICT_WAIT)),
            Written::Gone => return Ok(Action::await_change()),
        }
    }
    if !plan.release.is_empty() {
        ctx.pod_expectations.expect(
            &uid,
            plan.release.iter().map(|n| {
                (
                    key(&ns, n),
                    Expect::WithoutFinalizer(names::JOB_TRACKING_FINALIZER.into()),
                )
            }),
        );
        for n in &plan.release {
            if let Err(source) = release(&pods_api, n).await {
                ctx.pod_expectations.lower(&uid, &key(&ns, n));
                return Err(source);
            }
        }
    }
    if let Some(status) = &plan.status {
        // Written over the record, if there was one.
        let current = match &plan.record {
            Some(_) => jobs
                .get_status(&name)
                .await
                .map_err(|source| Error::ReadFailed {
                    what: format!("job {name}"),
                    source,
                })?,
            None => (*j).clone(),
        };
        let mut updated = current;
        updated.status = Some(status.clone());
        match write_status(&jobs, &updated).await? {
            Written::Done => {}
            Written::Conflict => return Ok(Action::requeue(CONFLICT_WAIT)),
            Written::Gone => return Ok(Action::await_change()),
        }
    }
    for (warning, reason, message) in &plan.events {
        ctx.event(REPORTER, j.as_ref(), *warning, reason, message.clone());
    }
    if plan.delete_job {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match jobs.delete(&name, &dp).await {
            Ok(_) => tracing::info!(job = %name, "deleted after its time to live"),
            Err(e) if is_code(&e, 404) || is_code(&e, 409) => {}
            Err(source) => {
                return Err(Error::DeleteFailed {
                    what: format!("job {name}"),
                    source,
                });
            }
        }
        return Ok(Action::await_change());
    }
    Ok(plan
        .requeue_after
        .map(Action::requeue)
        .unwrap_or_else(Action::await_change))
}

/// Creates `n` pods of `j` in slow-start batches, stopping at the first
/// failing batch.
async fn create_pods(ctx: &Context, j: &Job, api: &Api<Pod>, n: usize) -> Result<(), Error> {
    let ns = j.metadata.namespace.clone().unwrap_or_default();
    let uid = j.metadata.uid.clone().unwrap_or_default();
    let prefix = format!("{}-", meta::name(&j.metadata));
    let mut remaining = n;
    let mut batch = super::replicaset::SLOW_START;
    while remaining > 0 {
        let size = batch.min(remaining);
        let names: Vec<String> = (0..size).map(|_| meta::generate_name(&prefix)).collect();
        ctx.pod_expectations
            .expect(&uid, names.iter().map(|n| (key(&ns, n), Expect::Present)));
        let results = join_all(names.iter().map(|n| {
            let pod = job::new_pod(j, n);
            async move { api.create(&PostParams::default(), &pod).await }
        }))
        .await;
        let mut failure = None;
        for (n, r) in names.iter().zip(results) {
            match r {
                Ok(_) => ctx.event(
                    REPORTER,
                    j,
                    false,
                    "SuccessfulCreate",
                    format!("Created pod: {n}"),
                ),
                Err(e) => {
                    ctx.pod_expectations.lower(&uid, &key(&ns, n));
                    if !is_code(&e, 409) {
                        ctx.event(
                            REPORTER,
                            j,
                            true,
                            "FailedCreate",
                            format!("Error creating: {e}"),
                        );
                        failure.get_or_insert(Error::CreateFailed {
                            what: format!("pod {n}"),
                            source: e,
                        });
                    }
                }
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        remaining -= size;
        batch *= 2;
    }
    Ok(())
}

/// Removes the tracking finalizer from a pod (a pod already gone has none).
async fn release(api: &Api<Pod>, name: &str) -> Result<(), Error> {
    let patch = json!({"metadata": {
        "$deleteFromPrimitiveList/finalizers": [names::JOB_TRACKING_FINALIZER]}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_code(&e, 404) => Ok(()),
        Err(source) => Err(Error::UpdateFailed {
            what: format!("the finalizers of pod {name}"),
            source,
        }),
    }
}

/// A pod holding the tracking finalizer whose Job is gone (or never was
/// its controller) is let go, so it can be deleted; the Job, read fresh,
/// decides.
pub async fn release_orphan(ctx: &Context, pod: &Pod) -> Result<(), Error> {
    if !job::has_finalizer(pod) {
        return Ok(());
    }
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let name = meta::name(&pod.metadata);
    let owner = meta::controller_of(&pod.metadata).filter(|r| r.kind == "Job");
    let orphaned = match owner {
        None => true,
        Some(r) => {
            let cached = ctx
                .jobs
                .get(&ObjectRef::new(&r.name).within(&ns))
                .is_some_and(|j| j.metadata.uid.as_deref() == Some(r.uid.as_str()));
            if cached {
                false
            } else {
                let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
                !owner_current(&jobs, &r.name, &r.uid).await?
            }
        }
    };
    if orphaned {
        release(&pods_api, name).await?;
    }
    Ok(())
}
