//! Jobs against the embedded API server: a Job whose pod fails twice and
//! then succeeds completes within its back-off limit, counted once per
//! pod; one that fails too often fails; finished Jobs go after their time
//! to live.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::json;

const NS: &str = "default";

fn pi(name: &str, backoff_limit: i32, extra: serde_json::Value) -> serde_json::Value {
    let mut spec = json!({
        "backoffLimit": backoff_limit,
        "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "perl"}]}}
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

async fn job(client: &kube::Client, name: &str) -> Option<Job> {
    let api: Api<Job> = Api::namespaced(client.clone(), NS);
    api.get_opt(name).await.unwrap()
}

fn condition(j: &Job, t: &str) -> Option<k8s_openapi::api::batch::v1::JobCondition> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t && c.status == "True")
        .cloned()
}

/// The pods of the Job `name` that are Pending (the one to finish next).
async fn pending_pod(client: &kube::Client, name: &str) -> Option<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}"));
    api.list(&lp).await.unwrap().items.into_iter().find(|p| {
        p.metadata.deletion_timestamp.is_none()
            && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
    })
}

/// Waits for the Job's next pod and finishes it.
async fn finish_next(client: &kube::Client, name: &str, ok: bool) -> Pod {
    let mut found = None;
    eventually("the job's next pod", 30, async || {
        found = pending_pod(client, name).await;
        found.is_some()
    })
    .await;
    let pod = found.unwrap();
    mark_finished(client, NS, pod.metadata.name.as_deref().unwrap(), ok).await;
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_fails_twice_then_succeeds_completes() {
    let env = start().await;
    let client = env.client.clone();
    create::<Job>(&client, NS, pi("pi", 3, json!({}))).await;

    let first = finish_next(&client, "pi", false).await;
    assert!(
        first
            .metadata
            .finalizers
            .as_ref()
            .unwrap()
            .contains(&"batch.kubernetes.io/job-tracking".to_string())
    );
    let owner = &first.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Job", "pi"));
    assert!(first.metadata.name.as_deref().unwrap().starts_with("pi-"));
    eventually("the first failure counted", 30, async || {
        job(&client, "pi").await.and_then(|j| j.status?.failed) == Some(1)
    })
    .await;
    finish_next(&client, "pi", false).await;
    eventually("the second failure counted", 30, async || {
        job(&client, "pi").await.and_then(|j| j.status?.failed) == Some(2)
    })
    .await;
    finish_next(&client, "pi", true).await;
    eventually("the job complete", 30, async || {
        job(&client, "pi")
            .await
            .is_some_and(|j| condition(&j, "Complete").is_some())
    })
    .await;
    let j = job(&client, "pi").await.unwrap();
    let s = j.status.clone().unwrap();
    assert_eq!((s.succeeded, s.failed, s.active), (Some(1), Some(2), None));
    assert!(s.start_time.is_some() && s.completion_time.is_some());
    assert_eq!(s.ready, Some(0));
    assert_eq!(s.terminating, Some(0));
    let met = condition(&j, "SuccessCriteriaMet").unwrap();
    assert_eq!(met.reason.as_deref(), Some("CompletionsReached"));
    assert_eq!(
        condition(&j, "Complete").unwrap().message.as_deref(),
        Some("Reached expected number of succeeded pods")
    );
    // Every pod was counted and let go; three ran in all.
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pods = api.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(pods.len(), 3);
    assert!(pods.iter().all(|p| p.metadata.finalizers.is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_failures_fail_the_job_and_finished_jobs_expire() {
    let env = start().await;
    let client = env.client.clone();
    create::<Job>(
        &client,
        NS,
        pi("flaky", 1, json!({"ttlSecondsAfterFinished": 2})),
    )
    .await;
    finish_next(&client, "flaky", false).await;
    finish_next(&client, "flaky", false).await;
    eventually("the job failed", 30, async || {
        job(&client, "flaky")
            .await
            .is_some_and(|j| condition(&j, "Failed").is_some())
    })
    .await;
    let j = job(&client, "flaky").await.unwrap();
    let failed = condition(&j, "Failed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert!(condition(&j, "FailureTarget").is_some());
    assert_eq!(j.status.unwrap().failed, Some(2));
    // Its time to live is two seconds.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(job(&client, "flaky").await.is_some(), "not before its time");
    eventually("the job deleted", 30, async || {
        job(&client, "flaky").await.is_none()
    })
    .await;
}
