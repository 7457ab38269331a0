//! The CronJob decision (upstream's `syncCronJob` and
//! `cleanupFinishedJobs`): keep the active list in step with the Jobs,
//! start a Job at each scheduled time in the schedule's time zone (within
//! `startingDeadlineSeconds`, as `concurrencyPolicy` allows, unless
//! suspended), and keep only the last successful and failed Jobs.
//!
//! Job names are deterministic (`<cronjob>-<scheduled time in minutes>`),
//! so a pass that stops between creating a Job and recording it finds the
//! Job on its next try instead of starting a second one.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use gardener::cron::Cron;
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::job;
use crate::meta::{self, Owner, created, to_chrono, to_time};
use crate::names;

/// Upstream looks again this long after a scheduled time, so the time has
/// surely passed.
const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);

/// More missed start times than this are reported, not walked.
const TOO_MANY_MISSED: usize = 100;

/// What one pass of a CronJob does, in this order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Plan {
    /// Jobs to delete (`Replace`d ones, then history beyond the limits):
    /// `(name, uid)`.
    pub delete: Vec<(String, String)>,
    /// The Job to start and the time it is for. Once created (or found,
    /// if it exists and is this CronJob's) it joins the active list and
    /// the time becomes `lastScheduleTime`.
    pub create: Option<(Box<Job>, DateTime<Utc>)>,
    /// The status without the Job started in this pass.
    pub status: CronJobStatus,
    pub events: Vec<(bool, &'static str, String)>,
    pub requeue_after: Option<Duration>,
}

/// What a pass of a CronJob sees.
pub struct Observed<'a> {
    pub cronjob: &'a CronJob,
    /// The Jobs it controls.
    pub jobs: Vec<&'a Job>,
    /// UIDs of active Jobs a live read did not find.
    pub gone: BTreeSet<String>,
}

fn spec(cj: &CronJob) -> k8s_openapi::api::batch::v1::CronJobSpec {
    cj.spec.clone().unwrap_or_default()
}

/// `getJobName`: the CronJob's name and the scheduled time in minutes.
pub fn job_name(cj: &CronJob, scheduled: DateTime<Utc>) -> String {
    format!(
        "{}-{}",
        meta::name(&cj.metadata),
        scheduled.timestamp() / 60
    )
}

/// `getRef`: how the active list refers to a Job.
pub fn reference(j: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: j.metadata.name.clone(),
        namespace: j.metadata.namespace.clone(),
        uid: j.metadata.uid.clone(),
        resource_version: j.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// `getJobFromTemplate2`: the Job for `scheduled`, labelled and annotated
/// as the template says, with the scheduled time in the schedule's zone.
pub fn new_job(cj: &CronJob, scheduled: DateTime<Utc>, tz: Tz) -> Job {
    let template = spec(cj).job_template;
    let meta_t = template.metadata.unwrap_or_default();
    let mut annotations = meta_t.annotations.unwrap_or_default();
    annotations.insert(
        names::CRONJOB_SCHEDULED_TIMESTAMP.into(),
        scheduled
            .with_timezone(&tz)
            .to_rfc3339_opts(SecondsFormat::Secs, true),
    );
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(cj, scheduled)),
            namespace: cj.metadata.namespace.clone(),
            labels: meta_t.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![
                Owner::of("batch/v1", "CronJob", &cj.metadata).controller_ref(),
            ]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// The scheduled times in `(since, until]`: the most recent one, and how
/// many there are (counting stops past [`TOO_MANY_MISSED`]).
fn missed(
    cron: &Cron,
    tz: Tz,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> (Option<DateTime<Utc>>, usize) {
    let mut count = 0;
    let mut t = since;
    while let Some(next) = cron.next_after(t, tz) {
        if next > until {
            break;
        }
        count += 1;
        t = next;
        if count > TOO_MANY_MISSED {
            // Far behind: find the most recent without walking there.
            return (cron.last_between(since, until, tz), count);
        }
    }
    ((count > 0).then_some(t), count)
}

/// When to look again: just after the next scheduled time.
fn next_in(cron: &Cron, tz: Tz, now: DateTime<Utc>) -> Option<Duration> {
    cron.next_after(now, tz)
        .map(|t| (t - now).to_std().unwrap_or_default() + NEXT_SCHEDULE_DELTA)
}

/// Plans one pass of a CronJob.
pub fn plan(o: &Observed, now: DateTime<Utc>) -> Plan {
    let cj = o.cronjob;
    let s = spec(cj);
    let mut plan = Plan {
        status: cj.status.clone().unwrap_or_default(),
        ..Plan::default()
    };
    let mut active: Vec<ObjectReference> = plan.status.active.clone().unwrap_or_default();
    let is_active =
        |a: &[ObjectReference], uid: &str| a.iter().any(|r| r.uid.as_deref() == Some(uid));

    // The active list follows the Jobs.
    let mut child_uids = BTreeSet::new();
    for j in &o.jobs {
        let uid = j.metadata.uid.clone().unwrap_or_default();
        child_uids.insert(uid.clone());
        let done = job::finished(j).map(|c| c.type_.clone());
        let listed = is_active(&active, &uid);
        if !listed && done.is_none() {
            plan.events.push((
                true,
                "UnexpectedJob",
                format!(
                    "Saw a job that the controller did not create or forgot: {}",
                    meta::name(&j.metadata)
                ),
            ));
        } else if listed && let Some(kind) = done {
            active.retain(|r| r.uid.as_deref() != Some(uid.as_str()));
            plan.events.push((
                false,
                "SawCompletedJob",
                format!(
                    "Saw completed job: {}, condition: {kind}",
                    meta::name(&j.metadata)
                ),
            ));
        }
        if job::succeeded(j)
            && let Some(done_at) = j.status.as_ref().and_then(|s| s.completion_time.clone())
        {
            let later = plan
                .status
                .last_successful_time
                .as_ref()
                .is_none_or(|t| to_chrono(&done_at) > to_chrono(t));
            if later {
                plan.status.last_successful_time = Some(done_at);
            }
        }
    }
    active.retain(|r| {
        let uid = r.uid.clone().unwrap_or_default();
        child_uids.contains(&uid) || !o.gone.contains(&uid)
    });
    for r in plan.status.active.iter().flatten() {
        if r.uid
            .as_ref()
            .is_some_and(|u| o.gone.contains(u) && !child_uids.contains(u))
        {
            plan.events.push((
                false,
                "MissingJob",
                format!(
                    "Active job went missing: {}",
                    r.name.clone().unwrap_or_default()
                ),
            ));
        }
    }

    let mut delete: Vec<(String, String)> = Vec::new();
    if cj.metadata.deletion_timestamp.is_none() {
        schedule(o, &s, now, &mut active, &mut delete, &mut plan);
    }

    // History: the oldest finished Jobs beyond the limits go.
    let replaced: BTreeSet<String> = delete.iter().map(|(_, u)| u.clone()).collect();
    let start = |j: &Job| {
        j.status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(to_chrono)
    };
    for (success, limit) in [
        (true, s.successful_jobs_history_limit),
        (false, s.failed_jobs_history_limit),
    ] {
        let Some(limit) = limit else {
            continue;
        };
        let mut js: Vec<&Job> = o
            .jobs
            .iter()
            .copied()
            .filter(|j| job::finished(j).is_some_and(|c| (c.type_ == "Complete") == success))
            .filter(|j| {
                !j.metadata
                    .uid
                    .as_ref()
                    .is_some_and(|u| replaced.contains(u))
            })
            .collect();
        // `byJobStartTime`: oldest first, those never started last.
        js.sort_by(|a, b| match (start(a), start(b)) {
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some(_), None) => std::cmp::Ordering::Less,
            (x, y) => x
                .cmp(&y)
                .then_with(|| a.metadata.name.cmp(&b.metadata.name)),
        });
        let excess = js.len().saturating_sub(limit.max(0) as usize);
        for j in js.into_iter().take(excess) {
            let uid = j.metadata.uid.clone().unwrap_or_default();
            active.retain(|r| r.uid.as_deref() != Some(uid.as_str()));
            delete.push((meta::name(&j.metadata).to_string(), uid));
            plan.events.push((
                false,
                "SuccessfulDelete",
                format!("Deleted job {}", meta::name(&j.metadata)),
            ));
        }
    }
    plan.delete = delete;
    plan.status.active = (!active.is_empty()).then_some(active);
    plan
}

/// The scheduling half of `syncCronJob`.
fn schedule(
    o: &Observed,
    s: &k8s_openapi::api::batch::v1::CronJobSpec,
    now: DateTime<Utc>,
    active: &mut Vec<ObjectReference>,
    delete: &mut Vec<(String, String)>,
    plan: &mut Plan,
) {
    let cj = o.cronjob;
    let tz = match gardener::cron::location(s.time_zone.as_deref()) {
        Ok(tz) => tz,
        Err(e) => {
            plan.events.push((
                true,
                "UnknownTimeZone",
                format!(
                    "invalid timeZone: {:?}: {e}",
                    s.time_zone.clone().unwrap_or_default()
                ),
            ));
            return;
        }
    };
    if s.suspend.unwrap_or(false) {
        return;
    }
    let cron = match Cron::parse(&s.schedule) {
        Ok(c) => c,
        Err(e) => {
            plan.events.push((
                true,
                "UnparseableSchedule",
                format!("unparseable schedule: {:?} : {e}", s.schedule),
            ));
            return;
        }
    };
    plan.requeue_after = next_in(&cron, tz, now);
    let mut earliest = plan
        .status
        .last_schedule_time
        .as_ref()
        .map(to_chrono)
        .unwrap_or_else(|| created(&cj.metadata));
    if let Some(sds) = s.starting_deadline_seconds {
        let deadline = now - chrono::Duration::seconds(sds);
        if deadline > earliest {
            earliest = deadline;
        }
    }
    let (recent, count) = missed(&cron, tz, earliest, now);
    let Some(scheduled) = recent else {
        return;
    };
    if count > TOO_MANY_MISSED {
        plan.events.push((
            true,
            "TooManyMissedTimes",
            format!(
                "too many missed start times: {count}. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
            ),
        ));
    }
    if let Some(sds) = s.starting_deadline_seconds
        && scheduled + chrono::Duration::seconds(sds) < now
    {
        plan.events.push((
            true,
            "MissSchedule",
            format!(
                "Missed scheduled time to start a job: {}",
                scheduled.to_rfc2822()
            ),
        ));
        return;
    }
    let name = job_name(cj, scheduled);
    let already = active
        .iter()
        .any(|r| r.name.as_deref() == Some(name.as_str()))
        || plan.status.last_schedule_time.as_ref().map(to_chrono) == Some(scheduled);
    if already {
        return;
    }
    match s.concurrency_policy.as_deref() {
        Some("Forbid") if !active.is_empty() => {
            plan.events.push((
                false,
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is Forbid"
                    .into(),
            ));
            return;
        }
        Some("Replace") => {
            for r in active.drain(..) {
                let (Some(n), Some(u)) = (r.name.clone(), r.uid.clone()) else {
                    continue;
                };
                plan.events
                    .push((false, "SuccessfulDelete", format!("Deleted job {n}")));
                delete.push((n, u));
            }
        }
        _ => {}
    }
    plan.create = Some((Box::new(new_job(cj, scheduled, tz)), scheduled));
}

/// The status once the planned Job exists: it is active and its time is
/// the last scheduled one.
pub fn with_started(
    mut status: CronJobStatus,
    started: &Job,
    scheduled: DateTime<Utc>,
) -> CronJobStatus {
    let uid = started.metadata.uid.clone();
    let mut active = status.active.take().unwrap_or_default();
    if !active.iter().any(|r| r.uid == uid) {
        active.push(reference(started));
    }
    status.active = Some(active);
    status.last_schedule_time = Some(to_time(scheduled));
    status
}

#[cfg(test)]
mod tests;
