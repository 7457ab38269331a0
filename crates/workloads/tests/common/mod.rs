//! What the scenario tests share: an embedded API server with the workload
//! controllers running against it, a stand-in kubelet that marks pods as a
//! kubelet would, and polling (testkit's).

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::time::Duration;

use apiserver::cluster::Cluster;
use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
pub use testkit::eventually;

/// A cluster with the controllers; they stop when it is dropped.
pub struct Env {
    pub cluster: Cluster,
    pub client: kube::Client,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// The controllers' configuration at test scale (short Job back-off).
pub fn config() -> workloads::Config {
    workloads::Config {
        job_backoff: Duration::from_millis(200),
        job_backoff_max: Duration::from_secs(2),
        ..workloads::Config::default()
    }
}

/// Starts an embedded API server, without controllers.
pub async fn cluster() -> (Cluster, kube::Client) {
    let cluster = testkit::bare_cluster().await;
    let client = cluster.client();
    (cluster, client)
}

/// Runs the workload controllers until the task is aborted (a crash: they
/// stop at whatever await they are at) or `stop` fires.
pub fn controllers(
    client: kube::Client,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let shutdown = futures::FutureExt::shared(Box::pin(stop));
    tokio::spawn(async move {
        if let Err(e) = workloads::run(client, config(), shutdown).await {
            panic!("the controllers stopped: {e:#}");
        }
    })
}

/// Starts an embedded API server and the workload controllers (with the
/// Job back-off shortened to test scale).
pub async fn start() -> Env {
    let (cluster, client) = cluster().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    controllers(client.clone(), async move {
        let _ = stopped.await;
    });
    Env {
        cluster,
        client,
        _stop: stop,
    }
}

/// Creates an object of kind `K` in `ns` from JSON.
pub async fn create<K>(client: &kube::Client, ns: &str, obj: Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let obj: K = serde_json::from_value(obj).expect("a valid object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("the object is created")
}

/// The pods of `ns` (live ones, not being deleted).
pub async fn live_pods(client: &kube::Client, ns: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What a kubelet reports for a pod whose containers run and pass their
/// readiness probes: Running, Ready, an IP.
pub async fn mark_ready(client: &kube::Client, ns: &str, name: &str, ip: &str) {
    set_status(
        client,
        ns,
        name,
        json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
               "conditions": [{"type": "Ready", "status": "True",
                               "lastTransitionTime": Utc::now().to_rfc3339()}]}),
    )
    .await;
}

/// A kubelet's report of a pod whose containers ran and exited.
pub async fn mark_finished(client: &kube::Client, ns: &str, name: &str, succeeded: bool) {
    let (phase, code) = if succeeded {
        ("Succeeded", 0)
    } else {
        ("Failed", 1)
    };
    let now = Utc::now().to_rfc3339();
    set_status(
        client,
        ns,
        name,
        json!({"phase": phase,
               "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}],
               "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false,
                   "restartCount": 0,
                   "state": {"terminated": {"exitCode": code, "finishedAt": now}}}]}),
    )
    .await;
}

/// A kubelet's report that a pod stopped passing its readiness probe.
pub async fn mark_unready(client: &kube::Client, ns: &str, name: &str) {
    set_status(
        client,
        ns,
        name,
        json!({"phase": "Running",
               "conditions": [{"type": "Ready", "status": "False",
                               "lastTransitionTime": Utc::now().to_rfc3339()}]}),
    )
    .await;
}

async fn set_status(client: &kube::Client, ns: &str, name: &str, status: Value) {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": status})),
    )
    .await
    .expect("the pod's status is written");
}

/// A stand-in kubelet: every pod of `ns` becomes Running and Ready `delay`
/// after it appears, with a loopback IP of its own, until the task is
/// aborted.
pub fn kubelet(client: kube::Client, ns: &str, delay: Duration) -> tokio::task::JoinHandle<()> {
    let ns = ns.to_string();
    tokio::spawn(async move {
        let mut seen: std::collections::HashMap<String, tokio::time::Instant> = Default::default();
        let mut next_ip = 2u32;
        loop {
            for p in live_pods(&client, &ns).await {
                let name = p.metadata.name.clone().unwrap_or_default();
                let first = *seen
                    .entry(name.clone())
                    .or_insert_with(tokio::time::Instant::now);
                let pending = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
                if pending && first.elapsed() >= delay {
                    let ip = format!("127.0.{}.{}", next_ip / 250, next_ip % 250 + 2);
                    next_ip += 1;
                    mark_ready(&client, &ns, &name, &ip).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}
