//! The controllers crash at arbitrary points (their task aborted wherever
//! it awaits) again and again in the middle of a rolling update and of a
//! Job, and restart with fresh caches: the rollout never leaves its bounds
//! and finishes, and the Job counts each pod exactly once.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use parking_lot::Mutex;
use serde_json::json;

const NS: &str = "default";

/// A pseudo-random pause between 20 and 220 ms (xorshift; no dependency).
fn pause(seed: &mut u64) -> Duration {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    Duration::from_millis(20 + *seed % 200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_neither_break_rollout_bounds_nor_count_pods_twice() {
    let (_cluster, client) = cluster().await;
    let kubelet = kubelet(client.clone(), NS, Duration::from_millis(100));
    create::<Deployment>(
        &client,
        NS,
        json!({"metadata": {"name": "web"}, "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}),
    )
    .await;
    let mut running = controllers(client.clone(), std::future::pending());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let done = async || {
        let d = deployments.get("web").await.unwrap();
        let s = d.status.unwrap_or_default();
        s.observed_generation == d.metadata.generation
            && s.updated_replicas == Some(4)
            && s.replicas == Some(4)
            && s.available_replicas == Some(4)
    };
    eventually("the first rollout", 30, done).await;

    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (client, violations, sampling) = (client.clone(), violations.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::SeqCst) {
                let pods: Vec<Pod> = live_pods(&client, NS)
                    .await
                    .into_iter()
                    .filter(|p| {
                        p.metadata
                            .labels
                            .as_ref()
                            .is_some_and(|l| l.get("app").map(String::as_str) == Some("web"))
                    })
                    .collect();
                let ready = pods.iter().filter(|p| is_ready(p)).count();
                if pods.len() > 5 || ready < 4 {
                    violations
                        .lock()
                        .push(format!("{} pods, {ready} ready", pods.len()));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(&json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})),
        )
        .await
        .unwrap();
    create::<Job>(
        &client,
        NS,
        json!({"metadata": {"name": "batch"}, "spec": {"completions": 3, "parallelism": 1,
            "template": {"metadata": {"labels": {"app": "batch"}},
                         "spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "c", "image": "perl"}]}}}}),
    )
    .await;
    // Crash and restart the controllers over and over while the job's pods
    // finish as they come.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..15 {
        tokio::time::sleep(pause(&mut seed)).await;
        running.abort();
        let _ = (&mut running).await;
        let lp = ListParams::default().labels("batch.kubernetes.io/job-name=batch");
        for p in pods.list(&lp).await.unwrap().items {
            let phase = p.status.as_ref().and_then(|s| s.phase.clone());
            if phase.as_deref() != Some("Succeeded") && p.metadata.deletion_timestamp.is_none() {
                mark_finished(&client, NS, p.metadata.name.as_deref().unwrap(), true).await;
            }
        }
        running = controllers(client.clone(), std::future::pending());
    }
    eventually("the second rollout", 60, done).await;
    let job = async || {
        let lp = ListParams::default().labels("batch.kubernetes.io/job-name=batch");
        for p in pods.list(&lp).await.unwrap().items {
            let phase = p.status.as_ref().and_then(|s| s.phase.clone());
            if phase.as_deref() != Some("Succeeded") && p.metadata.deletion_timestamp.is_none() {
                mark_finished(&client, NS, p.metadata.name.as_deref().unwrap(), true).await;
            }
        }
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        let j = jobs.get("batch").await.unwrap();
        j.status.and_then(|s| s.conditions).is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
    };
    eventually("the job complete", 60, job).await;
    sampling.store(false, Ordering::SeqCst);
    sampler.await.unwrap();
    assert!(violations.lock().is_empty(), "{:?}", violations.lock());
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    assert_eq!(
        sets.list(&ListParams::default()).await.unwrap().items.len(),
        2,
        "one set per template"
    );
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let s = jobs.get("batch").await.unwrap().status.unwrap();
    let lp = ListParams::default().labels("batch.kubernetes.io/job-name=batch");
    let ran = pods.list(&lp).await.unwrap().items;
    assert_eq!(s.succeeded, Some(3), "each success counted once");
    assert_eq!(
        ran.len(),
        3,
        "no pod made twice: {:?}",
        ran.iter()
            .map(|p| p.metadata.name.clone())
            .collect::<Vec<_>>()
    );
    assert!(ran.iter().all(|p| p.metadata.finalizers.is_none()));
    running.abort();
    kubelet.abort();
}
