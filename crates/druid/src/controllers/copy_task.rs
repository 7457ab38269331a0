//! The EtcdCopyBackupsTask controller (spec §8): a finalizer, the Job
//! `<task>-worker` running backup-restore `copy`, the task's status
//! mirroring the Job; on deletion the Job goes first (foreground), then
//! the finalizer.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};

use super::{Context, Error};
use crate::gate::DELETION_REQUEUE;
use crate::jobs;
use crate::types::EtcdCopyBackupsTask;

/// Runs the task controller until `shutdown`.
pub async fn run(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    Controller::new(
        ctx.watch_api::<EtcdCopyBackupsTask>(),
        watcher::Config::default(),
    )
    .owns(ctx.watch_api::<Job>(), watcher::Config::default())
    .graceful_shutdown_on(shutdown)
    .run(reconcile, error_policy, ctx)
    .for_each(|_| futures::future::ready(()))
    .await;
}

pub fn error_policy(task: Arc<EtcdCopyBackupsTask>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(task = %task.name_any(), error = %err, "copy task reconcile failed");
    Action::requeue(super::ERROR_REQUEUE)
}

pub async fn reconcile(task: Arc<EtcdCopyBackupsTask>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = task.namespace().unwrap_or_default();
    let name = task.name_any();
    let tasks: Api<EtcdCopyBackupsTask> = Api::namespaced(ctx.client.clone(), &ns);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let job_name = jobs::copy_job_name(&task);
    let job = jobs
        .get_opt(&job_name)
        .await
        .map_err(|source| Error::ReadFailed {
            what: job_name.clone(),
            source,
        })?;
    if task.metadata.deletion_timestamp.is_some() {
        if !super::has_finalizer(&*task) {
            return Ok(Action::await_change());
        }
        return match job {
            Some(j) => {
                if j.metadata.deletion_timestamp.is_none() {
                    super::delete(
                        &ctx.client,
                        &ns,
                        "Job",
                        &job_name,
                        &DeleteParams::foreground(),
                    )
                    .await?;
                }
                Ok(Action::requeue(DELETION_REQUEUE))
            }
            None => {
                super::set_finalizer(&tasks, &*task, false).await?;
                Ok(Action::await_change())
            }
        };
    }
    super::set_finalizer(&tasks, &*task, true).await?;
    let Some(job) = job else {
        let job: Job = serde_json::from_value(jobs::copy_job(&task, &ctx.opts.settings)).map_err(
            |source| Error::InvalidObject {
                what: job_name.clone(),
                source,
            },
        )?;
        return match jobs.create(&Default::default(), &job).await {
            Ok(_) => Ok(Action::await_change()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Action::await_change()),
            Err(source) => Err(Error::ApplyFailed {
                kind: "Job".into(),
                name: job_name,
                source,
            }),
        };
    };
    let now = Timestamp::now();
    super::update_status(
        &tasks,
        &name,
        |fresh: &EtcdCopyBackupsTask| {
            let previous = fresh.status.clone().unwrap_or_default();
            jobs::copy_task_status(&previous, &job, fresh.metadata.generation, now)
        },
        |t, s| t.status = Some(s),
    )
    .await?;
    Ok(Action::await_change())
}
