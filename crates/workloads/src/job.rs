//! The Job decision (upstream's `syncJob` for non-indexed Jobs, with the
//! TTL-after-finished controller's): how many pods to create or delete,
//! which finished pods to count, and the status with its conditions.
//!
//! Pods carry the `batch.kubernetes.io/job-tracking` finalizer until they
//! are counted, and counting goes through `status.uncountedTerminatedPods`
//! as upstream does it, so a pass stopped at any point neither loses a
//! finished pod nor counts one twice: (1) newly finished pods' UIDs are
//! written to `uncountedTerminatedPods`, (2) their finalizers removed,
//! (3) the UIDs whose pods no longer hold the finalizer move into
//! `succeeded`/`failed`. A Job that met its completions or failed first
//! gets the interim `SuccessCriteriaMet`/`FailureTarget` condition, then
//! `Complete`/`Failed` once no pod of it is left running or uncounted.
//! Failed pods are replaced after an exponential back-off (10 s, 20 s, …,
//! up to 10 min by default) counted from the last failure.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;

use crate::meta::{self, Owner, created, to_chrono, to_time};
use crate::names;
use crate::pods;

/// Upstream's `MaxPodCreateDeletePerSync`.
pub const MAX_PODS_PER_PASS: usize = 500;
/// Upstream's `MaxUncountedPods`.
pub const MAX_UNCOUNTED: usize = 500;

/// The back-off between pod failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

/// What one pass of a Job does, in this order: delete and create pods,
/// write `record`, remove the finalizers of `release`, write `status`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Plan {
    pub delete: Vec<String>,
    pub create: usize,
    /// The status with the newly finished pods recorded as uncounted,
    /// written before any finalizer is removed.
    pub record: Option<JobStatus>,
    /// Pods whose tracking finalizer goes.
    pub release: Vec<String>,
    /// The status once those pods are released, when it differs from the
    /// one written before.
    pub status: Option<JobStatus>,
    pub events: Vec<(bool, &'static str, String)>,
    /// Delete the Job: its time to live after finishing is over.
    pub delete_job: bool,
    /// Look again then (back-off, active deadline, time to live).
    pub requeue_after: Option<Duration>,
}

fn spec(job: &Job) -> k8s_openapi::api::batch::v1::JobSpec {
    job.spec.clone().unwrap_or_default()
}

fn condition<'a>(job: &'a Job, type_: &str) -> Option<&'a JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// `IsJobFinished`: Complete or Failed.
pub fn finished(job: &Job) -> Option<&JobCondition> {
    condition(job, "Complete").or_else(|| condition(job, "Failed"))
}

pub fn succeeded(job: &Job) -> bool {
    condition(job, "Complete").is_some()
}

fn suspended(job: &Job) -> bool {
    spec(job).suspend.unwrap_or(false)
}

pub fn has_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == names::JOB_TRACKING_FINALIZER))
}

/// `onlyReplaceFailedPods`: wait for terminating pods before replacing.
fn only_replace_failed(job: &Job) -> bool {
    let s = spec(job);
    s.pod_replacement_policy.as_deref() == Some("Failed") || s.pod_failure_policy.is_some()
}

/// `isPodFailed`: Failed, or deleted before it succeeded (unless only
/// failed pods are replaced).
fn is_failed(pod: &Pod, job: &Job) -> bool {
    if pods::phase(pod) == "Failed" {
        return true;
    }
    !only_replace_failed(job) && pods::is_terminating(pod) && pods::phase(pod) != "Succeeded"
}

/// `getFinishedTime`: when the last container ended, else when the pod
/// stopped being Ready, else when it was deleted, else its creation.
pub fn finished_at(pod: &Pod) -> DateTime<Utc> {
    let status = pod.status.as_ref();
    let containers = status.and_then(|s| s.container_statuses.as_ref());
    if let Some(cs) = containers.filter(|cs| !cs.is_empty()) {
        let ends: Option<Vec<DateTime<Utc>>> = cs
            .iter()
            .map(|c| {
                c.state
                    .as_ref()?
                    .terminated
                    .as_ref()?
                    .finished_at
                    .as_ref()
                    .map(to_chrono)
            })
            .collect();
        if let Some(end) = ends.and_then(|e| e.into_iter().max()) {
            return end;
        }
    }
    let not_ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "Ready" && c.status == "False")
        })
        .and_then(|c| c.last_transition_time.as_ref())
        .map(to_chrono);
    if let Some(t) = not_ready {
        return t;
    }
    if let Some(d) = pod.metadata.deletion_timestamp.as_ref() {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        return to_chrono(d) - chrono::Duration::seconds(grace);
    }
    created(&pod.metadata)
}

/// How long creating a replacement still waits: `base · 2^(n-1)` (at most
/// `max`) after the last of the `n` failures since the last success,
/// counted over the Job's pods (upstream keeps the count in memory; the
/// pods, which a Job keeps, give the same).
pub fn backoff_remaining(
    job_pods: &[&Pod],
    job: &Job,
    backoff: Backoff,
    now: DateTime<Utc>,
) -> Duration {
    let mut finished: Vec<(&Pod, DateTime<Utc>)> = job_pods
        .iter()
        .copied()
        .filter(|p| pods::phase(p) == "Succeeded" || is_failed(p, job))
        .map(|p| (p, finished_at(p)))
        .collect();
    finished.sort_by_key(|(_, t)| *t);
    let last_success = finished
        .iter()
        .rposition(|(p, _)| pods::phase(p) == "Succeeded");
    let failures: Vec<DateTime<Utc>> = finished
        .iter()
        .skip(last_success.map_or(0, |i| i + 1))
        .filter(|(p, _)| is_failed(p, job))
        .map(|(_, t)| *t)
        .collect();
    let Some(last) = failures.last() else {
        return Duration::ZERO;
    };
    let mut wait = backoff.base;
    for _ in 1..failures.len() {
        wait = wait.saturating_mul(2);
        if wait >= backoff.max {
            wait = backoff.max;
            break;
        }
    }
    let elapsed = (now - *last).to_std().unwrap_or_default();
    wait.saturating_sub(elapsed)
}

fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(to_time(now)),
        last_transition_time: Some(to_time(now)),
    }
}

/// `ensureJobConditionStatus`: set or replace the condition of `type_`; a
/// False condition is not added where there is none.
fn ensure_condition(
    conditions: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) -> bool {
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status != status
            || c.reason.as_deref() != Some(reason)
            || c.message.as_deref() != Some(message)
        {
            *c = new_condition(type_, status, reason, message, now);
            return true;
        }
        return false;
    }
    if status != "False" {
        conditions.push(new_condition(type_, status, reason, message, now));
        return true;
    }
    false
}

/// `pastBackoffLimitOnFailure`: with `restartPolicy: OnFailure` failures
/// show as container restarts.
fn past_backoff_limit_on_failure(job: &Job, job_pods: &[&Pod]) -> bool {
    let s = spec(job);
    let on_failure = s
        .template
        .spec
        .as_ref()
        .and_then(|p| p.restart_policy.as_deref())
        == Some("OnFailure");
    if !on_failure {
        return false;
    }
    let restarts: i32 = job_pods
        .iter()
        .filter(|p| matches!(pods::phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .flat_map(|st| {
            st.init_container_statuses
                .iter()
                .flatten()
                .chain(st.container_statuses.iter().flatten())
                .map(|c| c.restart_count)
        })
        .sum();
    let limit = s.backoff_limit.unwrap_or(6);
    if limit == 0 {
        restarts > 0
    } else {
        restarts >= limit
    }
}

fn nonzero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// The Job's end: Complete after `SuccessCriteriaMet`, Failed after
/// `FailureTarget`, with the interim condition's reason and message.
#[derive(Clone, Debug, PartialEq)]
struct Finish {
    success: bool,
    reason: String,
    message: String,
}

/// Plans one pass of a non-indexed Job that manages `job_pods`.
pub fn plan(job: &Job, job_pods: &[&Pod], backoff: Backoff, now: DateTime<Utc>) -> Plan {
    let mut plan = Plan::default();
    if let Some(done) = finished(job) {
        ttl(job, done, now, &mut plan);
        // Pods still holding the finalizer (counted before the Job
        // finished) are let go.
        plan.release = job_pods
            .iter()
            .filter(|p| has_finalizer(p))
            .map(|p| meta::name(&p.metadata).to_string())
            .collect();
        return plan;
    }
    let s = spec(job);
    let old = job.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let uncounted = old.uncounted_terminated_pods.clone().unwrap_or_default();
    let counted_s: BTreeSet<String> = uncounted
        .succeeded
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let counted_f: BTreeSet<String> = uncounted
        .failed
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    let tracked_new =
        |p: &Pod| has_finalizer(p) && !counted_s.contains(&uid(p)) && !counted_f.contains(&uid(p));
    let new_succeeded = job_pods
        .iter()
        .filter(|p| tracked_new(p) && pods::phase(p) == "Succeeded")
        .count() as i32;
    let new_failed = job_pods
        .iter()
        .filter(|p| tracked_new(p) && is_failed(p, job))
        .count() as i32;
    let succeeded = old.succeeded.unwrap_or(0) + new_succeeded + counted_s.len() as i32;
    let failed = old.failed.unwrap_or(0) + new_failed + counted_f.len() as i32;
    let mut active: Vec<&Pod> = job_pods
        .iter()
        .copied()
        .filter(|p| pods::is_active(p))
        .collect();
    let mut terminating = job_pods
        .iter()
        .filter(|p| pods::is_terminating(p) && !pods::is_terminal(p))
        .count() as i32;
    let mut ready = active.iter().filter(|p| pods::is_ready(p)).count() as i32;
    if status.start_time.is_none() && !suspended(job) {
        status.start_time = Some(to_time(now));
    }
    let mut requeue: Vec<Duration> = Vec::new();

    // How the Job ends, if it does.
    let mut finish: Option<Finish> = if let Some(c) = condition(job, "SuccessCriteriaMet") {
        Some(Finish {
            success: true,
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
        })
    } else {
        condition(job, "FailureTarget").map(|c| Finish {
            success: false,
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
        })
    };
    let mut interim = false;
    if finish.is_none() {
        let limit = s.backoff_limit.unwrap_or(6);
        let start = status.start_time.as_ref().map(to_chrono);
        let deadline = s
            .active_deadline_seconds
            .filter(|_| !suspended(job))
            .zip(start)
            .map(|(d, st)| st + chrono::Duration::seconds(d));
        if failed > limit || past_backoff_limit_on_failure(job, job_pods) {
            finish = Some(Finish {
                success: false,
                reason: "BackoffLimitExceeded".into(),
                message: "Job has reached the specified backoff limit".into(),
            });
            interim = true;
        } else if deadline.is_some_and(|d| now >= d) {
            finish = Some(Finish {
                success: false,
                reason: "DeadlineExceeded".into(),
                message: "Job was active longer than specified deadline".into(),
            });
            interim = true;
        } else if let Some(d) = deadline {
            requeue.push((d - now).to_std().unwrap_or_default());
        }
    }
    let mut conditions = status.conditions.clone().unwrap_or_default();

    if finish.as_ref().is_some_and(|f| !f.success) {
        // A failing Job stops all its pods.
        let mut doomed = active.clone();
        doomed.sort_by(|a, b| pods::deletion_order(a, b));
        plan.delete = doomed
            .iter()
            .map(|p| meta::name(&p.metadata).to_string())
            .collect();
        terminating += active.len() as i32;
        ready = 0;
        active.clear();
    } else if job.metadata.deletion_timestamp.is_none() {
        let parallelism = s.parallelism.unwrap_or(1).max(0);
        if suspended(job) {
            plan.delete = active
                .iter()
                .map(|p| meta::name(&p.metadata).to_string())
                .collect();
            terminating += active.len() as i32;
            ready = 0;
            active.clear();
        } else {
            let want = match s.completions {
                None if succeeded > 0 => active.len() as i32,
                None => parallelism,
                Some(c) => (c - succeeded).min(parallelism).max(0),
            };
            let excess = active.len() as i32 - want;
            if excess > 0 {
                let mut ranked = active.clone();
                ranked.sort_by(|a, b| pods::deletion_order(a, b));
                let doomed: Vec<&Pod> = ranked
                    .into_iter()
                    .take((excess as usize).min(MAX_PODS_PER_PASS))
                    .collect();
                plan.delete = doomed
                    .iter()
                    .map(|p| meta::name(&p.metadata).to_string())
                    .collect();
                ready -= doomed.iter().filter(|p| pods::is_ready(p)).count() as i32;
                terminating += doomed.len() as i32;
                active.retain(|p| !doomed.iter().any(|d| d.metadata.name == p.metadata.name));
            } else {
                let blocking = if only_replace_failed(job) {
                    terminating
                } else {
                    0
                };
                let missing = want - blocking - active.len() as i32;
                if missing > 0 {
                    let wait = backoff_remaining(job_pods, job, backoff, now);
                    if wait > Duration::ZERO {
                        requeue.push(wait);
                    } else {
                        plan.create = (missing as usize).min(MAX_PODS_PER_PASS);
                    }
                }
            }
        }
        let complete = match s.completions {
            None => succeeded > 0 && active.is_empty() && plan.create == 0,
            Some(c) => succeeded >= c && active.is_empty() && plan.create == 0,
        };
        if complete {
            finish = Some(Finish {
                success: true,
                reason: "CompletionsReached".into(),
                message: "Reached expected number of succeeded pods".into(),
            });
            interim = condition(job, "SuccessCriteriaMet").is_none();
        } else if suspended(job) {
            if ensure_condition(
                &mut conditions,
                "Suspended",
                "True",
                "JobSuspended",
                "Job suspended",
                now,
            ) {
                plan.events
                    .push((false, "Suspended", "Job suspended".into()));
            }
        } else if ensure_condition(
            &mut conditions,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            now,
        ) {
            plan.events.push((false, "Resumed", "Job resumed".into()));
            // The active deadline counts from the resumption.
            status.start_time = Some(to_time(now));
        }
    }

    // Count what finished: record UIDs first, then release the pods.
    let mut uncounted_s: Vec<String> = uncounted.succeeded.clone().unwrap_or_default();
    let mut uncounted_f: Vec<String> = uncounted.failed.clone().unwrap_or_default();
    let mut needs_flush = false;
    let failing = finish.as_ref().is_some_and(|f| !f.success);
    for p in job_pods.iter().filter(|p| has_finalizer(p)) {
        let pod_uid = uid(p);
        let considered_failed = is_failed(p, job);
        let removable = job.metadata.deletion_timestamp.is_some()
            || finish.is_some()
            || pods::phase(p) == "Succeeded"
            || considered_failed;
        if !removable {
            continue;
        }
        plan.release.push(meta::name(&p.metadata).to_string());
        if pods::phase(p) == "Succeeded" && !uncounted_f.contains(&pod_uid) {
            if !uncounted_s.contains(&pod_uid) {
                uncounted_s.push(pod_uid);
                needs_flush = true;
            }
        } else if (considered_failed || failing) && !uncounted_f.contains(&pod_uid) {
            // A failing Job's unfinished pods count as failed.
            uncounted_f.push(pod_uid);
            needs_flush = true;
        }
        if uncounted_s.len() + uncounted_f.len() >= MAX_UNCOUNTED {
            break;
        }
    }
    if let Some(f) = &finish
        && interim
    {
        let type_ = if f.success {
            "SuccessCriteriaMet"
        } else {
            "FailureTarget"
        };
        conditions.push(new_condition(type_, "True", &f.reason, &f.message, now));
        needs_flush = true;
    }
    // Pods created this pass count as active (upstream's `active += diff`).
    status.active = nonzero(active.len() as i32 + plan.create as i32);
    status.ready = Some(ready.max(0));
    status.terminating = Some(terminating.max(0));
    status.conditions = (!conditions.is_empty()).then(|| conditions.clone());
    status.uncounted_terminated_pods = Some(UncountedTerminatedPods {
        succeeded: (!uncounted_s.is_empty()).then(|| uncounted_s.clone()),
        failed: (!uncounted_f.is_empty()).then(|| uncounted_f.clone()),
    });
    if needs_flush {
        plan.record = Some(status.clone());
    }
    // Once released, the recorded UIDs become counts.
    let still_held: BTreeSet<String> = job_pods
        .iter()
        .filter(|p| {
            has_finalizer(p)
                && !plan
                    .release
                    .iter()
                    .any(|r| Some(r) == p.metadata.name.as_ref())
        })
        .map(|p| uid(p))
        .collect();
    let mut final_status = status.clone();
    let (mut s_count, mut f_count) = (old.succeeded.unwrap_or(0), old.failed.unwrap_or(0));
    uncounted_s.retain(|u| {
        let held = still_held.contains(u);
        if !held {
            s_count += 1;
        }
        held
    });
    uncounted_f.retain(|u| {
        let held = still_held.contains(u);
        if !held {
            f_count += 1;
        }
        held
    });
    final_status.succeeded = nonzero(s_count);
    final_status.failed = nonzero(f_count);
    final_status.uncounted_terminated_pods = Some(UncountedTerminatedPods {
        succeeded: (!uncounted_s.is_empty()).then_some(uncounted_s.clone()),
        failed: (!uncounted_f.is_empty()).then_some(uncounted_f.clone()),
    });
    // `enactJobFinished`: nothing left uncounted or terminating.
    if let Some(f) = &finish
        && uncounted_s.is_empty()
        && uncounted_f.is_empty()
        && terminating == 0
    {
        let type_ = if f.success { "Complete" } else { "Failed" };
        let mut cs = final_status.conditions.clone().unwrap_or_default();
        ensure_condition(&mut cs, type_, "True", &f.reason, &f.message, now);
        final_status.conditions = Some(cs);
        if f.success {
            final_status.completion_time = Some(to_time(now));
            plan.events
                .push((false, "Completed", "Job completed".into()));
        } else {
            plan.events
                .push((true, static_reason(&f.reason), f.message.clone()));
        }
    }
    let written = plan.record.as_ref().unwrap_or(&old);
    if final_status != *written {
        plan.status = Some(final_status);
    }
    plan.requeue_after = requeue.into_iter().min();
    plan
}

/// Event reasons are static strings; the failure reasons the planner sets
/// are known.
fn static_reason(reason: &str) -> &'static str {
    match reason {
        "BackoffLimitExceeded" => "BackoffLimitExceeded",
        "DeadlineExceeded" => "DeadlineExceeded",
        "PodFailurePolicy" => "PodFailurePolicy",
        _ => "JobFailed",
    }
}

/// The TTL-after-finished controller: delete the Job `ttlSecondsAfterFinished`
/// after it finished, or look again then.
fn ttl(job: &Job, done: &JobCondition, now: DateTime<Utc>, plan: &mut Plan) {
    let Some(ttl) = spec(job).ttl_seconds_after_finished else {
        return;
    };
    if job.metadata.deletion_timestamp.is_some() {
        return;
    }
    let finished_at = done
        .last_transition_time
        .as_ref()
        .map(to_chrono)
        .unwrap_or(now);
    let expire = finished_at + chrono::Duration::seconds(i64::from(ttl));
    if now >= expire {
        plan.delete_job = true;
    } else {
        plan.requeue_after =
            Some((expire - now).to_std().unwrap_or_default() + Duration::from_millis(100));
    }
}

/// A new pod of `job` named `name`: the template, the tracking finalizer,
/// the Job as controller.
pub fn new_pod(job: &Job, name: &str) -> Pod {
    let owner = Owner::of("batch/v1", "Job", &job.metadata).controller_ref();
    let mut template = spec(job).template;
    let fins = template
        .metadata
        .get_or_insert_with(Default::default)
        .finalizers
        .get_or_insert_with(Vec::new);
    if !fins.iter().any(|f| f == names::JOB_TRACKING_FINALIZER) {
        fins.push(names::JOB_TRACKING_FINALIZER.into());
    }
    pods::from_template(
        &template,
        job.metadata.namespace.as_deref().unwrap_or_default(),
        name,
        Some(format!("{}-", meta::name(&job.metadata))),
        owner,
    )
}

/// Whether the Job counts its pods one by one (indexed completion is not
/// supported by this controller).
pub fn is_indexed(job: &Job) -> bool {
    spec(job).completion_mode.as_deref() == Some("Indexed")
}

#[cfg(test)]
mod tests;
