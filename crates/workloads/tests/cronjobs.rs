//! CronJobs against the embedded API server: a Job starts at the next
//! scheduled minute, named for it, and the CronJob records it as active,
//! then as its last success once it completes.

mod common;

use common::*;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, ListParams};
use serde_json::json;

const NS: &str = "default";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cronjob_starts_jobs_on_schedule() {
    let env = start().await;
    let client = env.client.clone();
    create::<CronJob>(
        &client,
        NS,
        json!({
            "metadata": {"name": "hello"},
            "spec": {
                "schedule": "*/1 * * * *",
                "timeZone": "Etc/UTC",
                "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{"name": "c", "image": "busybox"}]}}}}
            }
        }),
    )
    .await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), NS);
    // The next minute comes within 60 s.
    let mut started = None;
    eventually("a job at the next minute", 75, async || {
        started = jobs.list(&ListParams::default()).await.unwrap().items.pop();
        started.is_some()
    })
    .await;
    let job = started.unwrap();
    let name = job.metadata.name.clone().unwrap();
    let scheduled = job.metadata.annotations.as_ref().unwrap()
        ["batch.kubernetes.io/cronjob-scheduled-timestamp"]
        .clone();
    let at = chrono::DateTime::parse_from_rfc3339(&scheduled).unwrap();
    assert_eq!(at.timestamp() % 60, 0, "on the minute: {scheduled}");
    assert_eq!(name, format!("hello-{}", at.timestamp() / 60));
    let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("CronJob", Some(true))
    );
    eventually("the job listed as active", 30, async || {
        let s = cronjobs
            .get("hello")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        s.active
            .is_some_and(|a| a.iter().any(|r| r.name.as_deref() == Some(name.as_str())))
            && s.last_schedule_time.is_some()
    })
    .await;

    // Its pod succeeds: the Job completes and the CronJob notes it.
    let mut pod_name = None;
    eventually("the job's pod", 30, async || {
        pod_name = live_pods(&client, NS)
            .await
            .pop()
            .and_then(|p| p.metadata.name);
        pod_name.is_some()
    })
    .await;
    mark_finished(&client, NS, pod_name.as_deref().unwrap(), true).await;
    eventually("the success recorded", 30, async || {
        let s = cronjobs
            .get("hello")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        s.active.is_none() && s.last_successful_time.is_some()
    })
    .await;
}
