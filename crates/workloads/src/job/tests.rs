//! The Job planner over a simulated namespace, pass by pass.

use super::*;
use crate::pods::test_pods::{PodExt, pod};
use serde_json::{Value, json};

fn at(t: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(t, 0).unwrap()
}

const BACKOFF: Backoff = Backoff {
    base: Duration::from_secs(10),
    max: Duration::from_secs(60),
};

fn job(spec: Value) -> Job {
    let mut s = json!({
        "completions": 1, "parallelism": 1, "backoffLimit": 6,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "job-uid"}},
        "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "job-uid"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}
    });
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    serde_json::from_value(json!({
        "metadata": {"name": "pi", "namespace": "ns", "uid": "job-uid"},
        "spec": s
    }))
    .unwrap()
}

/// A namespace where pods exist as soon as they are created; a deleted pod
/// with a finalizer stays, deleting, until its finalizer goes.
struct World {
    job: Job,
    pods: Vec<Pod>,
    clock: i64,
    seq: u32,
    deleted_job: bool,
}

impl World {
    fn new(job: Job) -> World {
        World {
            job,
            pods: Vec::new(),
            clock: 1_000,
            seq: 0,
            deleted_job: false,
        }
    }

    fn plan(&self) -> Plan {
        let refs: Vec<&Pod> = self.pods.iter().collect();
        plan(&self.job, &refs, BACKOFF, at(self.clock))
    }

    /// One pass; `stop_after_record` leaves it after the first status write
    /// (a crash before the finalizers go).
    fn pass_with(&mut self, stop_after_record: bool) -> Plan {
        let p = self.plan();
        for name in &p.delete {
            let t = self.clock;
            if let Some(pod) = self.pod_mut(name)
                && has_finalizer(pod)
            {
                pod.metadata.deletion_timestamp = Some(to_time(at(t)));
            }
            self.gc();
        }
        for _ in 0..p.create {
            self.seq += 1;
            let mut new = new_pod(&self.job, &format!("pi-{}", self.seq));
            new.metadata.uid = Some(format!("pod-{}", self.seq));
            new.metadata.creation_timestamp = Some(to_time(at(self.clock)));
            self.pods.push(new.phase("Pending"));
        }
        if let Some(s) = &p.record {
            self.job.status = Some(s.clone());
        }
        if stop_after_record {
            return p;
        }
        for name in &p.release {
            if let Some(f) = self
                .pod_mut(name)
                .and_then(|p| p.metadata.finalizers.as_mut())
            {
                f.retain(|f| f != names::JOB_TRACKING_FINALIZER);
            }
        }
        self.gc();
        if let Some(s) = &p.status {
            self.job.status = Some(s.clone());
        }
        if p.delete_job {
            self.deleted_job = true;
        }
        p
    }

    fn pass(&mut self) -> Plan {
        self.pass_with(false)
    }

    /// Deleting pods without finalizers are gone.
    fn gc(&mut self) {
        self.pods.retain(|p| {
            p.metadata.deletion_timestamp.is_none()
                || p.metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|f| !f.is_empty())
        });
    }

    fn pod_mut(&mut self, name: &str) -> Option<&mut Pod> {
        self.pods
            .iter_mut()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    }

    fn running(&self) -> Vec<String> {
        self.pods
            .iter()
            .filter(|p| pods::is_active(p))
            .map(|p| p.metadata.name.clone().unwrap())
            .collect()
    }

    /// The kubelet: the newest active pod exits.
    fn exit(&mut self, ok: bool) {
        let name = self.running().pop().expect("a running pod");
        let t = self.clock;
        let pod = self.pod_mut(&name).unwrap();
        let mut done = pod.clone().phase(if ok { "Succeeded" } else { "Failed" });
        done.status.as_mut().unwrap().conditions =
            Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "Ready".into(),
                status: "False".into(),
                last_transition_time: Some(to_time(at(t))),
                ..Default::default()
            }]);
        *pod = done;
    }

    fn status(&self) -> JobStatus {
        self.job.status.clone().unwrap_or_default()
    }

    fn has(&self, t: &str) -> Option<JobCondition> {
        self.status()
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == t && c.status == "True")
    }
}

#[test]
fn a_job_that_fails_twice_then_succeeds_completes() {
    let mut w = World::new(job(json!({"backoffLimit": 3})));
    let p = w.pass();
    assert_eq!(p.create, 1);
    assert!(w.status().start_time.is_some());
    let first = &w.pods[0];
    assert!(has_finalizer(first));
    assert_eq!(first.metadata.generate_name.as_deref(), Some("pi-"));
    assert_eq!(meta::controller_of(&first.metadata).unwrap().kind, "Job");
    assert_eq!(w.status().active, Some(1));

    w.exit(false);
    let p = w.pass();
    assert!(p.record.is_some(), "the failure is recorded before release");
    assert_eq!(p.release, ["pi-1"]);
    assert_eq!(w.status().failed, Some(1));
    assert_eq!(p.create, 0, "the replacement waits for the back-off");
    assert_eq!(p.requeue_after, Some(Duration::from_secs(10)));
    w.clock += 10;
    assert_eq!(w.pass().create, 1);

    w.exit(false);
    w.pass();
    assert_eq!(w.status().failed, Some(2));
    // Second failure in a row: 20 s.
    w.clock += 15;
    assert_eq!(w.pass().create, 0);
    w.clock += 5;
    assert_eq!(w.pass().create, 1);

    w.exit(true);
    let p = w.pass();
    let s = w.status();
    assert_eq!((s.succeeded, s.failed, s.active), (Some(1), Some(2), None));
    let met = w.has("SuccessCriteriaMet").unwrap();
    assert_eq!(met.reason.as_deref(), Some("CompletionsReached"));
    let done = w.has("Complete").unwrap();
    assert_eq!(
        done.message.as_deref(),
        Some("Reached expected number of succeeded pods")
    );
    assert!(s.completion_time.is_some());
    assert_eq!(
        s.uncounted_terminated_pods,
        Some(UncountedTerminatedPods::default())
    );
    assert!(p.events.iter().any(|e| e.1 == "Completed"));
    assert!(w.pods.iter().all(|p| !has_finalizer(p)));
    // Finished: nothing more happens.
    let p = w.pass();
    assert_eq!((p.create, p.delete.len(), p.status.is_none()), (0, 0, true));
}

#[test]
fn the_backoff_limit_fails_the_job_and_stops_its_pods() {
    let mut w = World::new(job(
        json!({"backoffLimit": 1, "parallelism": 2, "completions": 4}),
    ));
    w.pass();
    assert_eq!(w.running().len(), 2);
    w.exit(false);
    w.pass();
    w.clock += 10;
    w.pass();
    w.exit(false);
    let p = w.pass();
    // Over the limit: the other running pod is stopped and counted.
    assert_eq!(p.delete.len(), 1, "{p:?}");
    let target = w.has("FailureTarget").unwrap();
    assert_eq!(target.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(
        target.message.as_deref(),
        Some("Job has reached the specified backoff limit")
    );
    assert!(w.has("Failed").is_none(), "not while a pod is terminating");
    let p = w.pass();
    let failed = w.has("Failed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(w.status().failed, Some(3));
    assert!(
        p.events
            .iter()
            .any(|e| e.0 && e.1 == "BackoffLimitExceeded")
    );
    assert!(w.running().is_empty());
}

#[test]
fn a_crash_between_recording_and_releasing_counts_each_pod_once() {
    let mut w = World::new(job(json!({"completions": 2})));
    w.pass();
    w.exit(true);
    w.pass_with(true);
    let recorded = w.status();
    assert_eq!(
        recorded.uncounted_terminated_pods.unwrap().succeeded,
        Some(vec!["pod-1".to_string()])
    );
    assert_eq!(recorded.succeeded, None);
    // The next pass finds the pod still holding its finalizer.
    w.pass();
    assert_eq!(w.status().succeeded, Some(1));
    w.pass();
    assert_eq!(w.status().succeeded, Some(1), "never twice");
    assert_eq!(w.running().len(), 1, "the second completion runs");
}

#[test]
fn parallelism_and_completions_bound_the_pods() {
    let mut w = World::new(job(json!({"completions": 3, "parallelism": 2})));
    w.pass();
    assert_eq!(w.running().len(), 2);
    w.exit(true);
    w.pass();
    w.pass();
    assert_eq!(w.running().len(), 2, "two more to go, two at a time");
    w.exit(true);
    w.pass();
    w.pass();
    assert_eq!(w.running().len(), 1, "one completion left");
    w.exit(true);
    w.pass();
    assert!(w.has("Complete").is_some());
    assert_eq!(w.status().succeeded, Some(3));
}

#[test]
fn the_active_deadline_fails_a_running_job() {
    let mut w = World::new(job(json!({"activeDeadlineSeconds": 30})));
    let p = w.pass();
    assert_eq!(p.requeue_after, Some(Duration::from_secs(30)));
    w.clock += 30;
    let p = w.pass();
    assert_eq!(p.delete.len(), 1);
    assert_eq!(
        w.has("FailureTarget").unwrap().reason.as_deref(),
        Some("DeadlineExceeded")
    );
    w.pass();
    assert!(w.has("Failed").is_some());
}

#[test]
fn suspending_stops_pods_and_resuming_restarts_the_clock() {
    let mut w = World::new(job(json!({})));
    w.pass();
    w.job.spec.as_mut().unwrap().suspend = Some(true);
    let p = w.pass();
    assert_eq!(p.delete.len(), 1);
    let c = w.has("Suspended").unwrap();
    assert_eq!(c.reason.as_deref(), Some("JobSuspended"));
    w.pass();
    assert!(w.running().is_empty());
    w.clock += 100;
    w.job.spec.as_mut().unwrap().suspend = Some(false);
    let p = w.pass();
    assert_eq!(p.create, 1);
    let s = w.status();
    let c = s
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Suspended")
        .unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("JobResumed"))
    );
    assert_eq!(s.start_time, Some(to_time(at(w.clock))));
}

#[test]
fn finished_jobs_are_deleted_after_their_time_to_live() {
    let mut w = World::new(job(json!({"ttlSecondsAfterFinished": 30})));
    w.pass();
    w.exit(true);
    w.pass();
    assert!(w.has("Complete").is_some());
    let p = w.pass();
    assert!(!p.delete_job);
    assert!(p.requeue_after.unwrap() >= Duration::from_secs(29));
    w.clock += 30;
    assert!(w.pass().delete_job);
}

#[test]
fn without_completions_the_first_success_ends_the_job() {
    let mut w = World::new(job(json!({"completions": null, "parallelism": 2})));
    w.pass();
    assert_eq!(w.running().len(), 2);
    w.exit(true);
    w.pass();
    assert_eq!(w.running().len(), 1, "the others finish on their own");
    assert!(w.has("Complete").is_none());
    w.exit(true);
    w.pass();
    assert!(w.has("Complete").is_some());
}

#[test]
fn backoff_doubles_up_to_the_maximum() {
    let j = job(json!({}));
    let failed = |n: &str, t: i64| {
        pod(n)
            .owned_by("job-uid")
            .phase("Failed")
            .finalizer(names::JOB_TRACKING_FINALIZER)
            .created_at(t)
    };
    let pods: Vec<Pod> = (0..5).map(|i| failed(&format!("p{i}"), 100 + i)).collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    // Five failures: 10 · 2^4 = 160 s, capped at 60 s, from the last (104).
    assert_eq!(
        backoff_remaining(&refs, &j, BACKOFF, at(134)),
        Duration::from_secs(30)
    );
    // A success after them resets the count.
    let ok = pod("ok").phase("Succeeded").created_at(200);
    let refs2: Vec<&Pod> = pods.iter().chain([&ok]).collect();
    assert_eq!(
        backoff_remaining(&refs2, &j, BACKOFF, at(201)),
        Duration::ZERO
    );
}
