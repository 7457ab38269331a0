//! The compaction controller (spec §7): woken by an Etcd, its snapshot
//! leases and its compactor Job; [`crate::compaction::decide`] says
//! whether to run the compactor, ask backup-restore for a full snapshot,
//! record a finished Job or clean it up.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Resource, ResourceExt};

use super::{Context, Error};
use crate::compaction::{self, Decision, Observed};
use crate::components::{self, Names};
use crate::condition::TYPE_LAST_SNAPSHOT_COMPACTION_SUCCEEDED;
use crate::jobs::{self, FailedPod};
use crate::types::Etcd;

/// Runs the compaction controller until `shutdown`.
pub async fn run(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    Controller::new(ctx.watch_api::<Etcd>(), watcher::Config::default())
        .owns(ctx.watch_api::<Job>(), watcher::Config::default())
        .watches(
            ctx.watch_api::<Lease>(),
            watcher::Config::default(),
            |lease: Lease| {
                let name = lease.name_any();
                let snapshot = name.ends_with("-full-snap") || name.ends_with("-delta-snap");
                snapshot.then(|| super::owner_etcd(&lease)).flatten()
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

pub fn error_policy(etcd: Arc<Etcd>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(etcd = %etcd.name_any(), error = %err, "compaction reconcile failed");
    Action::requeue(compaction::REQUEUE)
}

fn holder(lease: Option<Lease>) -> Option<String> {
    lease.and_then(|l| l.spec).and_then(|s| s.holder_identity)
}

/// The pod of a failed compactor, for the failure reason.
async fn failed_pod(pods: &Api<Pod>, job: &str) -> Option<FailedPod> {
    let list = pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .ok()?;
    let pod = list.items.into_iter().next()?;
    let status = pod.status.unwrap_or_default();
    Some(FailedPod {
        disruption_reason: status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
            .and_then(|c| c.reason),
        process_failed: status
            .container_statuses
            .unwrap_or_default()
            .iter()
            .any(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .is_some_and(|t| t.exit_code != 0)
            }),
    })
}

pub async fn reconcile(etcd: Arc<Etcd>, ctx: Arc<Context>) -> Result<Action, Error> {
    let n = Names::of(&etcd);
    let client = &ctx.client;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &n.namespace);
    let leases: Api<Lease> = Api::namespaced(client.clone(), &n.namespace);
    let read = |what: &str| {
        let what = what.to_string();
        move |source| Error::ReadFailed { what, source }
    };
    let job_name = n.compactor_job();
    let job = jobs
        .get_opt(&job_name)
        .await
        .map_err(read("compactor job"))?;
    let job_state = match &job {
        Some(j) => {
            let pod = if jobs::failed(j) {
                failed_pod(&Api::namespaced(client.clone(), &n.namespace), &job_name).await
            } else {
                None
            };
            Some(jobs::compactor_state(j, pod.as_ref()))
        }
        None => None,
    };
    let has_store = etcd.spec.backup.store.is_some();
    let (full, delta) = if has_store && job.is_none() {
        (
            leases
                .get_opt(&n.full_snapshot_lease())
                .await
                .map_err(read("full snapshot lease"))?,
            leases
                .get_opt(&n.delta_snapshot_lease())
                .await
                .map_err(read("delta snapshot lease"))?,
        )
    } else {
        (None, None)
    };
    let sc = etcd
        .spec
        .backup
        .snapshot_compaction
        .clone()
        .unwrap_or_default();
    let last_condition = etcd.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == TYPE_LAST_SNAPSHOT_COMPACTION_SUCCEEDED)
            .map(|c| (c.status.clone(), c.reason.clone()))
    });
    let observed = Observed {
        etcd_deleting: etcd.meta().deletion_timestamp.is_some(),
        has_store,
        job: job_state,
        full_holder: holder(full),
        delta_holder: holder(delta),
        events_threshold: sc.events_threshold,
        trigger_full_snapshot_threshold: sc.trigger_full_snapshot_threshold,
        last_condition,
    };
    let etcds: Api<Etcd> = Api::namespaced(client.clone(), &n.namespace);
    match compaction::decide(&observed) {
        Decision::DeleteJob => {
            super::delete(
                client,
                &n.namespace,
                "Job",
                &job_name,
                &DeleteParams::foreground(),
            )
            .await?;
            Ok(Action::await_change())
        }
        Decision::Requeue(d) => Ok(Action::requeue(d)),
        Decision::Wait | Decision::Nothing => Ok(Action::await_change()),
        Decision::Finished { condition, .. } => {
            // The condition first: a crash before the deletion finds the
            // Job still finished and records the same condition again.
            set_condition(&etcds, &n.name, condition).await?;
            super::delete(
                client,
                &n.namespace,
                "Job",
                &job_name,
                &DeleteParams::foreground(),
            )
            .await?;
            Ok(Action::requeue(compaction::REQUEUE))
        }
        Decision::CreateJob { delta } => {
            tracing::info!(etcd = %n.name, delta, "creating the compactor job");
            let job: Job = serde_json::from_value(jobs::compactor_job(&etcd, &ctx.opts.settings))
                .map_err(|source| Error::InvalidObject {
                what: job_name.clone(),
                source,
            })?;
            match jobs.create(&Default::default(), &job).await {
                Ok(_) => Ok(Action::await_change()),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(Action::await_change()),
                Err(source) => Err(Error::ApplyFailed {
                    kind: "Job".into(),
                    name: job_name,
                    source,
                }),
            }
        }
        Decision::TriggerFullSnapshot { delta } => {
            tracing::info!(etcd = %n.name, delta, "triggering a full snapshot instead of compaction");
            let url = components::full_snapshot_url(&etcd, &ctx.opts.settings);
            let result = ctx
                .opts
                .snapshot_trigger
                .trigger(url, components::snapshot_timeout(&etcd))
                .await;
            let ok = result.is_ok();
            set_condition(&etcds, &n.name, compaction::full_snapshot_result(result)).await?;
            Ok(if ok {
                Action::await_change()
            } else {
                Action::requeue(compaction::REQUEUE)
            })
        }
        Decision::BadLease(why) => Err(Error::SnapshotLeaseInvalid(why)),
    }
}

async fn set_condition(
    etcds: &Api<Etcd>,
    name: &str,
    (status, reason, message): compaction::ConditionUpdate,
) -> Result<(), Error> {
    let now = Timestamp::now();
    super::update_etcd_status(etcds, name, |fresh| {
        let mut s = fresh.status.clone().unwrap_or_default();
        crate::status::set_condition(
            &mut s.conditions,
            TYPE_LAST_SNAPSHOT_COMPACTION_SUCCEEDED,
            status,
            &reason,
            &message,
            now,
        );
        s
    })
    .await
}
