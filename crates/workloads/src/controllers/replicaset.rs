//! The ReplicaSet executor: claim the pods, wait for earlier writes to
//! show, apply [`crate::replicaset::plan`] (slow-start creation batches,
//! deletions), write the status.

use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use futures::future::join_all;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use super::{
    CACHE_WAIT, CONFLICT_WAIT, Context, Error, Written, claim, is_code, key, owner_current,
    write_status,
};
use crate::expectations::Expect;
use crate::meta::{self, Owner, Selector};
use crate::{pods, replicaset};

pub const NAME: &str = "replicaset";
/// Upstream's event source.
pub const REPORTER: &str = "replicaset-controller";

/// Upstream's `SlowStartInitialBatchSize`.
pub const SLOW_START: usize = 1;

pub async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let name = meta::name(&rs.metadata).to_string();
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let sets: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
    let owner = Owner::of("apps/v1", "ReplicaSet", &rs.metadata);
    let selector = rs
        .spec
        .as_ref()
        .map(|s| Selector::from_label_selector(&s.selector));
    let Some(Ok(selector)) = selector else {
        // An invalid selector was refused by the API server; nothing to do.
        return Ok(Action::await_change());
    };
    // Only active pods are claimed (upstream filters before claiming).
    let candidates: Vec<Arc<Pod>> = ctx
        .pods_in(&ns)
        .into_iter()
        .filter(|p| pods::is_active(p))
        .collect();
    let managed = claim(
        &pods_api,
        &owner,
        candidates,
        |p| selector.matches(p.metadata.labels.as_ref()),
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
    let now = meta::whole_seconds(Utc::now());
    let refs: Vec<&Pod> = managed.iter().map(|p| p.as_ref()).collect();
    let plan = replicaset::plan(&rs, &refs, now);

    let mut failure: Option<(&str, String)> = None;
    if plan.create > 0 {
        failure = create_pods(&ctx, &rs, &pods_api, plan.create).await;
    }
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
                    rs.as_ref(),
                    false,
                    "SuccessfulDelete",
                    format!("Deleted pod: {n}"),
                ),
                Err(e) if is_code(&e, 404) => {}
                Err(e) => {
                    ctx.pod_expectations.lower(&uid, &key(&ns, n));
                    ctx.event(
                        REPORTER,
                        rs.as_ref(),
                        true,
                        "FailedDelete",
                        format!("Error deleting: {e}"),
                    );
                    failure.get_or_insert(("FailedDelete", e.to_string()));
                }
            }
        }
    }
    let status = replicaset::with_failure(plan.status, failure, now);
    if rs.status.as_ref() != Some(&status) {
        let mut updated = (*rs).clone();
        updated.status = Some(status);
        match write_status(&sets, &updated).await? {
            Written::Done => {}
            Written::Conflict => return Ok(Action::requeue(CONFLICT_WAIT)),
            Written::Gone => return Ok(Action::await_change()),
        }
    }
    Ok(plan
        .requeue_after
        .map(Action::requeue)
        .unwrap_or_else(Action::await_change))
}

/// Creates `n` pods of `rs` in slow-start batches (1, 2, 4, …), stopping
/// at the first failing batch so a broken template costs one pod, not
/// five hundred. Returns the failure, if any.
async fn create_pods(
    ctx: &Context,
    rs: &ReplicaSet,
    api: &Api<Pod>,
    n: usize,
) -> Option<(&'static str, String)> {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let prefix = format!("{}-", meta::name(&rs.metadata));
    let mut remaining = n;
    let mut batch = SLOW_START;
    while remaining > 0 {
        let size = batch.min(remaining);
        let names: Vec<String> = (0..size).map(|_| meta::generate_name(&prefix)).collect();
        ctx.pod_expectations
            .expect(&uid, names.iter().map(|n| (key(&ns, n), Expect::Present)));
        let results = join_all(names.iter().map(|n| {
            let pod = replicaset::new_pod(rs, n);
            async move { api.create(&PostParams::default(), &pod).await }
        }))
        .await;
        let mut failed = None;
        for (n, r) in names.iter().zip(results) {
            match r {
                Ok(_) => ctx.event(
                    REPORTER,
                    rs,
                    false,
                    "SuccessfulCreate",
                    format!("Created pod: {n}"),
                ),
                Err(e) => {
                    ctx.pod_expectations.lower(&uid, &key(&ns, n));
                    // A taken name is retried with another on the next pass.
                    if !is_code(&e, 409) {
                        ctx.event(
                            REPORTER,
                            rs,
                            true,
                            "FailedCreate",
                            format!("Error creating: {e}"),
                        );
                        failed.get_or_insert(("FailedCreate", e.to_string()));
                    }
                }
            }
        }
        if failed.is_some() {
            return failed;
        }
        remaining -= size;
        batch *= 2;
    }
    None
}
