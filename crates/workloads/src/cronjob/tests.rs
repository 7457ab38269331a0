//! The CronJob planner: schedules in a time zone, concurrency policies,
//! deadlines, the active list and the history.

use super::*;
use serde_json::{Value, json};

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn cronjob(schedule: &str, extra: Value) -> CronJob {
    let mut spec = json!({
        "schedule": schedule,
        "concurrencyPolicy": "Allow",
        "suspend": false,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
        "jobTemplate": {"metadata": {"labels": {"app": "hello"}},
            "spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                "containers": [{"name": "c", "image": "busybox"}]}}}}
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({
        "metadata": {"name": "hello", "namespace": "ns", "uid": "cj-uid",
                     "creationTimestamp": "2026-01-05T10:00:30Z"},
        "spec": spec
    }))
    .unwrap()
}

fn child(name: &str, uid: &str, state: Option<&str>, start: &str) -> Job {
    let mut status = json!({"startTime": start});
    if let Some(s) = state {
        status["conditions"] = json!([{"type": s, "status": "True"}]);
        if s == "Complete" {
            status["completionTime"] = json!(start);
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": uid,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "hello",
                                 "uid": "cj-uid", "controller": true}]},
        "status": status
    }))
    .unwrap()
}

fn run(cj: &CronJob, jobs: &[Job], now: &str) -> Plan {
    plan(
        &Observed {
            cronjob: cj,
            jobs: jobs.iter().collect(),
            gone: BTreeSet::new(),
        },
        t(now),
    )
}

fn active(cj: &mut CronJob, jobs: &[&Job]) {
    let s = cj.status.get_or_insert_with(Default::default);
    s.active = Some(jobs.iter().map(|j| reference(j)).collect());
}

#[test]
fn a_job_starts_at_each_scheduled_time_once() {
    let mut cj = cronjob("*/1 * * * *", json!({}));
    let p = run(&cj, &[], "2026-01-05T10:01:05Z");
    let (j, at) = p.create.clone().expect("a job for 10:01");
    assert_eq!(at, t("2026-01-05T10:01:00Z"));
    assert_eq!(
        j.metadata.name.as_deref(),
        Some(format!("hello-{}", at.timestamp() / 60).as_str())
    );
    assert_eq!(j.metadata.labels.as_ref().unwrap()["app"], "hello");
    assert_eq!(
        j.metadata.annotations.as_ref().unwrap()[names::CRONJOB_SCHEDULED_TIMESTAMP],
        "2026-01-05T10:01:00Z"
    );
    assert_eq!(meta::controller_of(&j.metadata).unwrap().kind, "CronJob");
    assert_eq!(p.requeue_after, Some(Duration::from_millis(55_100)));
    // Recorded: nothing more until 10:02.
    let mut created = (*j).clone();
    created.metadata.uid = Some("j1".into());
    cj.status = Some(with_started(p.status, &created, at));
    let p = run(&cj, &[created.clone()], "2026-01-05T10:01:40Z");
    assert!(p.create.is_none());
    let p = run(&cj, &[created], "2026-01-05T10:02:00Z");
    assert_eq!(p.create.unwrap().1, t("2026-01-05T10:02:00Z"));
}

#[test]
fn nothing_before_the_first_time_and_nothing_while_suspended() {
    let cj = cronjob("0 * * * *", json!({}));
    let p = run(&cj, &[], "2026-01-05T10:59:00Z");
    assert!(p.create.is_none());
    assert_eq!(p.requeue_after, Some(Duration::from_millis(60_100)));
    let cj = cronjob("0 * * * *", json!({"suspend": true}));
    assert!(run(&cj, &[], "2026-01-05T11:30:00Z").create.is_none());
}

#[test]
fn concurrency_policies() {
    let running = child("hello-1", "j1", None, "2026-01-05T10:01:00Z");
    let mut forbid = cronjob("*/1 * * * *", json!({"concurrencyPolicy": "Forbid"}));
    active(&mut forbid, &[&running]);
    let p = run(
        &forbid,
        std::slice::from_ref(&running),
        "2026-01-05T10:02:01Z",
    );
    assert!(p.create.is_none());
    assert!(p.events.iter().any(|e| e.1 == "JobAlreadyActive"));

    let mut replace = cronjob("*/1 * * * *", json!({"concurrencyPolicy": "Replace"}));
    active(&mut replace, &[&running]);
    let p = run(
        &replace,
        std::slice::from_ref(&running),
        "2026-01-05T10:02:01Z",
    );
    assert_eq!(p.delete, [("hello-1".to_string(), "j1".to_string())]);
    assert!(p.create.is_some());
    assert!(p.status.active.is_none(), "the replaced job left the list");

    let mut allow = cronjob("*/1 * * * *", json!({}));
    active(&mut allow, &[&running]);
    let p = run(&allow, &[running], "2026-01-05T10:02:01Z");
    assert!(p.delete.is_empty() && p.create.is_some());
}

#[test]
fn a_start_missed_by_more_than_the_deadline_is_skipped() {
    let cj = cronjob("0 * * * *", json!({"startingDeadlineSeconds": 60}));
    let p = run(&cj, &[], "2026-01-05T11:02:00Z");
    assert!(p.create.is_none());
    // The deadline moves the earliest time: nothing was missed in the
    // last minute, so not even an event.
    let p = run(&cj, &[], "2026-01-05T11:00:30Z");
    assert_eq!(p.create.unwrap().1, t("2026-01-05T11:00:00Z"));
    // Without a deadline the missed start is made up for.
    let cj = cronjob("0 * * * *", json!({}));
    let p = run(&cj, &[], "2026-01-05T11:03:00Z");
    assert_eq!(p.create.unwrap().1, t("2026-01-05T11:00:00Z"));
}

#[test]
fn schedules_run_in_their_time_zone() {
    let cj = cronjob("0 9 * * *", json!({"timeZone": "Europe/Berlin"}));
    let p = run(&cj, &[], "2026-01-06T08:00:10Z");
    let (j, at) = p.create.expect("09:00 in Berlin is 08:00 UTC in winter");
    assert_eq!(at, t("2026-01-06T08:00:00Z"));
    assert_eq!(
        j.metadata.annotations.as_ref().unwrap()[names::CRONJOB_SCHEDULED_TIMESTAMP],
        "2026-01-06T09:00:00+01:00"
    );
    let bad = cronjob("0 9 * * *", json!({"timeZone": "Mars/Olympus"}));
    let p = run(&bad, &[], "2026-01-06T08:00:10Z");
    assert!(p.create.is_none());
    assert!(p.events.iter().any(|e| e.1 == "UnknownTimeZone"));
    let unparseable = cronjob("61 * * * *", json!({}));
    let p = run(&unparseable, &[], "2026-01-06T08:00:10Z");
    assert!(p.events.iter().any(|e| e.1 == "UnparseableSchedule"));
}

#[test]
fn the_active_list_follows_the_jobs() {
    let done = child("hello-1", "j1", Some("Complete"), "2026-01-05T10:01:00Z");
    let failed = child("hello-2", "j2", Some("Failed"), "2026-01-05T10:02:00Z");
    let stray = child("hello-3", "j3", None, "2026-01-05T10:03:00Z");
    let mut cj = cronjob("0 0 1 1 *", json!({}));
    active(&mut cj, &[&done, &failed]);
    let mut ghost = reference(&done);
    ghost.uid = Some("j9".into());
    ghost.name = Some("hello-9".into());
    cj.status
        .as_mut()
        .unwrap()
        .active
        .as_mut()
        .unwrap()
        .push(ghost);
    let p = plan(
        &Observed {
            cronjob: &cj,
            jobs: vec![&done, &failed, &stray],
            gone: ["j9".to_string()].into(),
        },
        t("2026-01-05T10:05:00Z"),
    );
    assert!(p.status.active.is_none(), "{:?}", p.status.active);
    assert_eq!(
        p.status.last_successful_time.map(|x| to_chrono(&x)),
        Some(t("2026-01-05T10:01:00Z"))
    );
    let reasons: Vec<&str> = p.events.iter().map(|e| e.1).collect();
    assert!(reasons.contains(&"SawCompletedJob"));
    assert!(reasons.contains(&"UnexpectedJob"));
    assert!(reasons.contains(&"MissingJob"));
}

#[test]
fn history_limits_keep_the_newest_finished_jobs() {
    let jobs: Vec<Job> = (0..5)
        .map(|i| {
            child(
                &format!("ok-{i}"),
                &format!("s{i}"),
                Some("Complete"),
                &format!("2026-01-05T10:0{i}:00Z"),
            )
        })
        .chain((0..2).map(|i| {
            child(
                &format!("bad-{i}"),
                &format!("f{i}"),
                Some("Failed"),
                &format!("2026-01-05T11:0{i}:00Z"),
            )
        }))
        .collect();
    let cj = cronjob("0 0 1 1 *", json!({}));
    let p = run(&cj, &jobs, "2026-01-05T12:00:00Z");
    let deleted: Vec<&str> = p.delete.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(deleted, ["ok-0", "ok-1", "bad-0"]);
}

#[test]
fn a_controller_far_behind_starts_only_the_latest_and_says_so() {
    let cj = cronjob("*/1 * * * *", json!({}));
    let p = run(&cj, &[], "2026-01-05T14:00:30Z");
    assert_eq!(p.create.unwrap().1, t("2026-01-05T14:00:00Z"));
    assert!(p.events.iter().any(|e| e.1 == "TooManyMissedTimes"));
}
