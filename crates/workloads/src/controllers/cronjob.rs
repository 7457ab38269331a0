//! The CronJob executor: find its Jobs, confirm missing ones with a live
//! read, apply [`crate::cronjob::plan`] (delete replaced and old Jobs,
//! start the scheduled one, record it), and come back at the next
//! scheduled time.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::Utc;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::controller::Action;

use super::{CONFLICT_WAIT, Context, Error, Written, is_code, write_status};
use crate::cronjob::{self, Observed};
use crate::meta;

pub const NAME: &str = "cronjob";
/// Upstream's event source.
pub const REPORTER: &str = "cronjob-controller";

pub async fn reconcile(cached: Arc<CronJob>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = cached.metadata.namespace.clone().unwrap_or_default();
    let name = meta::name(&cached.metadata).to_string();
    let uid = cached.metadata.uid.clone().unwrap_or_default();
    let cronjobs: Api<CronJob> = Api::namespaced(ctx.client.clone(), &ns);
    let jobs_api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let jobs: Vec<Arc<Job>> = ctx
        .jobs
        .state()
        .into_iter()
        .filter(|j| {
            j.metadata.namespace.as_deref() == Some(ns.as_str())
                && meta::is_controlled_by(&j.metadata, &uid)
        })
        .collect();
    let listed = |cj: &CronJob, j: &Job| {
        cj.status
            .as_ref()
            .and_then(|s| s.active.as_ref())
            .is_some_and(|a| a.iter().any(|r| r.uid == j.metadata.uid))
    };
    // A Job our cache shows before the CronJob status that lists it: read
    // the CronJob fresh rather than call the Job unexpected.
    let stale = jobs
        .iter()
        .any(|j| crate::job::finished(j).is_none() && !listed(&cached, j));
    let cj: Arc<CronJob> = if stale {
        match cronjobs.get_opt(&name).await {
            Ok(Some(fresh)) if fresh.metadata.uid.as_deref() == Some(uid.as_str()) => {
                Arc::new(fresh)
            }
            Ok(_) => return Ok(Action::await_change()),
            Err(source) => {
                return Err(Error::ReadFailed {
                    what: format!("cron job {name}"),
                    source,
                });
            }
        }
    } else {
        cached
    };
    // Active Jobs the cache lacks are read live before being called gone.
    let mut gone = BTreeSet::new();
    for r in cj.status.iter().flat_map(|s| s.active.iter().flatten()) {
        if jobs.iter().any(|j| j.metadata.uid == r.uid) {
            continue;
        }
        let job_name = r.name.clone().unwrap_or_default();
        match jobs_api.get_opt(&job_name).await {
            Ok(Some(j)) if j.metadata.uid == r.uid => {}
            Ok(_) => {
                gone.insert(r.uid.clone().unwrap_or_default());
            }
            Err(source) => {
                return Err(Error::ReadFailed {
                    what: format!("job {job_name}"),
                    source,
                });
            }
        }
    }
    let now = meta::whole_seconds(Utc::now());
    let plan = cronjob::plan(
        &Observed {
            cronjob: &cj,
            jobs: jobs.iter().map(|j| j.as_ref()).collect(),
            gone,
        },
        now,
    );
    for (job_name, job_uid) in &plan.delete {
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(job_uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match jobs_api.delete(job_name, &dp).await {
            Ok(_) => {}
            Err(e) if is_code(&e, 404) || is_code(&e, 409) => {}
            Err(source) => {
                return Err(Error::DeleteFailed {
                    what: format!("job {job_name}"),
                    source,
                });
            }
        }
    }
    let mut status = plan.status.clone();
    if let Some((job, scheduled)) = &plan.create {
        let job_name = meta::name(&job.metadata).to_string();
        match jobs_api.create(&PostParams::default(), job).await {
            Ok(created) => {
                ctx.event(
                    REPORTER,
                    cj.as_ref(),
                    false,
                    "SuccessfulCreate",
                    format!("Created job {job_name}"),
                );
                status = cronjob::with_started(status, &created, *scheduled);
            }
            // Created by an earlier pass that did not get to record it.
            Err(e) if is_code(&e, 409) => {
                let existing =
                    jobs_api
                        .get_opt(&job_name)
                        .await
                        .map_err(|source| Error::ReadFailed {
                            what: format!("job {job_name}"),
                            source,
                        })?;
                match existing {
                    Some(j) if meta::is_controlled_by(&j.metadata, &uid) => {
                        status = cronjob::with_started(status, &j, *scheduled);
                    }
                    _ => {}
                }
            }
            Err(source) => {
                ctx.event(
                    REPORTER,
                    cj.as_ref(),
                    true,
                    "FailedCreate",
                    format!("Error creating job: {source}"),
                );
                return Err(Error::CreateFailed {
                    what: format!("job {job_name}"),
                    source,
                });
            }
        }
    }
    for (warning, reason, message) in &plan.events {
        ctx.event(REPORTER, cj.as_ref(), *warning, reason, message.clone());
    }
    if cj.status.as_ref() != Some(&status) {
        let mut updated = (*cj).clone();
        updated.status = Some(status);
        match write_status(&cronjobs, &updated).await? {
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
