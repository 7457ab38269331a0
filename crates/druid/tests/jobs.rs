//! Scenario tests of the compaction, EtcdCopyBackupsTask and Secret
//! controllers against the embedded API server (spec §11: 13–16, 18 and
//! the Secret finalizer). Jobs' outcomes are written by the tests, as the
//! Job controller would.

mod common;

use common::*;
use druid::{Etcd, EtcdCopyBackupsTask};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

async fn job_exists(c: &kube::Client, name: &str) -> bool {
    Api::<Job>::namespaced(c.clone(), NS)
        .get_opt(name)
        .await
        .unwrap()
        .is_some()
}

async fn finish_job(c: &kube::Client, name: &str, type_: &str, reason: &str) {
    Api::<Job>::namespaced(c.clone(), NS)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": type_, "status": "True", "reason": reason, "message": reason}]}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn scenario_13_14_a_million_new_events_run_the_compactor_and_its_success_is_recorded() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 1, true, json!({}))).await;
    reconciled(c, "e").await;
    renew_lease(c, "e-full-snap", "1000", secs(60)).await;
    renew_lease(c, "e-delta-snap", "1000500", secs(5)).await;
    // Below the threshold nothing runs (the table test of the decision
    // covers this exactly; here it is only a spot check).
    renew_lease(c, "e-delta-snap", "1000900", secs(5)).await;
    assert!(!job_exists(c, "e-compactor").await);
    renew_lease(c, "e-delta-snap", "1001000", secs(5)).await;
    eventually("the compactor job", 30, async || {
        job_exists(c, "e-compactor").await
    })
    .await;
    let job = Api::<Job>::namespaced(c.clone(), NS)
        .get("e-compactor")
        .await
        .unwrap();
    assert_eq!(job.metadata.owner_references.unwrap()[0].kind, "Etcd");
    assert_eq!(job.spec.as_ref().unwrap().backoff_limit, Some(0));
    // The compactor uploads a full snapshot and moves the full lease, then
    // completes.
    renew_lease(c, "e-full-snap", "1001000", secs(1)).await;
    finish_job(c, "e-compactor", "Complete", "Completed").await;
    wait_condition(c, "e", "LastSnapshotCompactionSucceeded", ("True", "None")).await;
    eventually("the finished job is deleted", 30, async || {
        !job_exists(c, "e-compactor").await
    })
    .await;
    // The etcd controller's later passes keep the condition.
    renew_lease(c, "e-0", "abc:def:Leader", secs(1)).await;
    let s = eventually_cond(c, "e", "a member", |s| s.members.len() == 1).await;
    assert!(condition(&s, "LastSnapshotCompactionSucceeded").is_some());
    assert!(env.trigger.calls.lock().is_empty());
}

#[tokio::test]
async fn scenario_15_after_a_deadline_the_next_trigger_takes_a_full_snapshot() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 1, true, json!({}))).await;
    reconciled(c, "e").await;
    renew_lease(c, "e-full-snap", "1000", secs(60)).await;
    renew_lease(c, "e-delta-snap", "1001000", secs(5)).await;
    eventually("the compactor job", 30, async || {
        job_exists(c, "e-compactor").await
    })
    .await;
    finish_job(c, "e-compactor", "Failed", "DeadlineExceeded").await;
    // The failure is recorded (False, DeadlineExceeded) and the job
    // deleted; the pass after that, with the same 1,000,000 events (below
    // the full-snapshot threshold), asks for a full snapshot because of
    // that failure, and records its success.
    wait_condition(
        c,
        "e",
        "LastSnapshotCompactionSucceeded",
        ("True", "FullSnapshotTakenSuccessfully"),
    )
    .await;
    // (backup-restore would now move the full-snapshot lease; the stand-in
    // does not, so a later pass may run the compactor again.)
    assert_eq!(
        env.trigger.calls.lock()[0],
        "http://e-client.ns.svc.cluster.local:8080/snapshot/full"
    );
}

#[tokio::test]
async fn scenario_16_three_million_events_trigger_a_full_snapshot_not_a_job() {
    let env = start().await;
    let c = &env.client;
    *env.trigger.fail.lock() = true;
    create_etcd(c, etcd_json("e", 1, true, json!({}))).await;
    reconciled(c, "e").await;
    renew_lease(c, "e-full-snap", "0", secs(60)).await;
    renew_lease(c, "e-delta-snap", "3000000", secs(5)).await;
    // backup-restore answered 503 first: the condition says so.
    wait_condition(
        c,
        "e",
        "LastSnapshotCompactionSucceeded",
        ("False", "ErrorTriggeringFullSnapshot"),
    )
    .await;
    *env.trigger.fail.lock() = false;
    wait_condition(
        c,
        "e",
        "LastSnapshotCompactionSucceeded",
        ("True", "FullSnapshotTakenSuccessfully"),
    )
    .await;
    assert!(!job_exists(c, "e-compactor").await);
}

#[tokio::test]
async fn scenario_18_a_copy_task_runs_its_worker_job_and_deletes_it_first() {
    let env = start().await;
    let c = &env.client;
    let tasks: Api<EtcdCopyBackupsTask> = Api::namespaced(c.clone(), NS);
    let task: EtcdCopyBackupsTask = serde_json::from_value(json!({
        "apiVersion": "druid.gardener.cloud/v1alpha1",
        "kind": "EtcdCopyBackupsTask",
        "metadata": {"name": "t", "namespace": NS},
        "spec": {
            "sourceStore": {"provider": "Local", "container": "a", "prefix": "src"},
            "targetStore": {"provider": "Local", "container": "b", "prefix": "dst"},
        },
    }))
    .unwrap();
    tasks.create(&PostParams::default(), &task).await.unwrap();
    eventually("the worker job", 30, async || {
        job_exists(c, "t-worker").await
    })
    .await;
    let t = tasks.get("t").await.unwrap();
    assert_eq!(
        t.metadata.finalizers.unwrap_or_default(),
        ["druid.gardener.cloud/etcd-druid"]
    );
    finish_job(c, "t-worker", "Complete", "Completed").await;
    eventually("Succeeded=True", 30, async || {
        let t = tasks.get("t").await.unwrap();
        t.status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Succeeded" && c.status == "True")
        })
    })
    .await;
    // The Job holds the task back until it is gone.
    let jobs: Api<Job> = Api::namespaced(c.clone(), NS);
    jobs.patch(
        "t-worker",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["test/hold"]}})),
    )
    .await
    .unwrap();
    tasks.delete("t", &Default::default()).await.unwrap();
    eventually("the job is being deleted", 30, async || {
        jobs.get("t-worker")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    assert!(tasks.get_opt("t").await.unwrap().is_some());
    jobs.patch(
        "t-worker",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the task is gone", 30, async || {
        tasks.get_opt("t").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn referenced_secrets_carry_the_finalizer_until_no_etcd_references_them() {
    let env = start().await;
    let c = &env.client;
    let secrets: Api<Secret> = Api::namespaced(c.clone(), NS);
    for name in ["creds", "unrelated"] {
        let s: Secret =
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS}})).unwrap();
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
    create_etcd(
        c,
        etcd_json(
            "e",
            1,
            true,
            json!({"backup": {"store": {"secretRef": {"name": "creds"}}}}),
        ),
    )
    .await;
    let finalizers = |name: &'static str| {
        let secrets = secrets.clone();
        async move {
            secrets
                .get(name)
                .await
                .unwrap()
                .metadata
                .finalizers
                .unwrap_or_default()
        }
    };
    eventually("the finalizer on creds", 30, async || {
        finalizers("creds").await == ["druid.gardener.cloud/etcd-druid"]
    })
    .await;
    assert!(finalizers("unrelated").await.is_empty());
    // The reference goes: so does the finalizer.
    Api::<Etcd>::namespaced(c.clone(), NS)
        .patch(
            "e",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"backup": {"store": {"secretRef": null}}}})),
        )
        .await
        .unwrap();
    eventually("the finalizer leaves creds", 30, async || {
        finalizers("creds").await.is_empty()
    })
    .await;
}
