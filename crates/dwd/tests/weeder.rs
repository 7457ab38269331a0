//! The weeder against an embedded API server (spec scenarios 21–25):
//! EndpointSlices turning ready start weeders that delete crash-looping
//! dependant pods for `watchDuration`, and nothing else.
//!
//! The test plays the kubelet: it writes the pods' container statuses.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SERVICE: &str = "etcd-main-client";
const SLICE: &str = "etcd-main-client-x1";

struct Weeder {
    metrics: Arc<dwd::Metrics>,
    manager: Arc<dwd::controllers::weeder::WeederManager>,
    shutdown: CancellationToken,
}

async fn weeder(client: &kube::Client, watch: &str) -> Weeder {
    let config = dwd::WeederConfig::from_yaml(&format!(
        "watchDuration: {watch}\nservicesAndDependantSelectors:\n  {SERVICE}:\n    podSelectors:\n    - matchLabels: {{role: apiserver}}\n"
    ))
    .unwrap();
    let metrics = Arc::new(dwd::Metrics::new());
    let shutdown = CancellationToken::new();
    let manager = dwd::run::weeder_manager(client.clone(), config, metrics.clone(), &shutdown);
    tokio::spawn(dwd::run::run_weeder(
        client.clone(),
        manager.clone(),
        shutdown.clone(),
    ));
    eventually("the slice watch is synced", 5, async || metrics.is_ready()).await;
    Weeder {
        metrics,
        manager,
        shutdown,
    }
}

fn slice_endpoints(ready: &[bool]) -> Value {
    json!(ready
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"addresses": [format!("127.1.0.{}", i + 1)], "conditions": {"ready": r}}))
        .collect::<Vec<_>>())
}

async fn set_slice(client: &kube::Client, ns: &str, service: &str, ready: &[bool]) {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    let endpoints = slice_endpoints(ready);
    if api.get_opt(SLICE).await.unwrap().is_some() {
        api.patch(
            SLICE,
            &PatchParams::default(),
            &Patch::Merge(json!({"endpoints": endpoints})),
        )
        .await
        .unwrap();
    } else {
        let s: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": SLICE, "namespace": ns,
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{"name": "client", "port": 2379, "protocol": "TCP"}],
        }))
        .unwrap();
        api.create(&PostParams::default(), &s).await.unwrap();
    }
}

/// A pod with `labels` whose one container is running or crash-looping.
async fn pod(client: &kube::Client, ns: &str, name: &str, role: &str, crashing: bool) {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"role": role}},
        "spec": {"containers": [{"name": "c", "image": "trellis.dev/exec"}]},
    }))
    .unwrap();
    api.create(&PostParams::default(), &p).await.unwrap();
    set_crashing(client, ns, name, crashing).await;
}

async fn set_crashing(client: &kube::Client, ns: &str, name: &str, crashing: bool) {
    let state = if crashing {
        json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}})
    } else {
        json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}})
    };
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "containerStatuses": [
                {"name": "c", "image": "trellis.dev/exec", "imageID": "", "ready": !crashing,
                 "restartCount": 3, "state": state}]}})),
        )
        .await
        .unwrap();
}

async fn exists(client: &kube::Client, ns: &str, name: &str) -> bool {
    Api::<Pod>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .unwrap()
        .is_some_and(|p| p.metadata.deletion_timestamp.is_none())
}

#[tokio::test]
async fn scenarios_21_and_22_a_ready_slice_weeds_crash_looping_dependants_for_the_watch_duration() {
    let seed = testkit::bare_cluster().await;
    let client = seed.client();
    testkit::namespace(&client, NS).await;
    testkit::namespace(&client, "other").await;
    let w = weeder(&client, "2s").await;
    set_slice(&client, NS, SERVICE, &[false, false, false]).await;
    pod(&client, NS, "kube-apiserver-a", "apiserver", true).await;
    pod(&client, NS, "kube-apiserver-b", "apiserver", false).await;
    pod(&client, NS, "etcd-main-0", "main", true).await;
    pod(&client, "other", "kube-apiserver-c", "apiserver", true).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        exists(&client, NS, "kube-apiserver-a").await,
        "not ready yet: nothing weeded"
    );

    // 21: all three endpoints turn ready.
    set_slice(&client, NS, SERVICE, &[true, true, true]).await;
    eventually("the crash-looping apiserver pod deleted", 5, async || {
        !exists(&client, NS, "kube-apiserver-a").await
    })
    .await;
    assert!(
        exists(&client, NS, "kube-apiserver-b").await,
        "running pods stay"
    );
    assert!(
        exists(&client, NS, "etcd-main-0").await,
        "pods outside the selector stay"
    );
    assert!(
        exists(&client, "other", "kube-apiserver-c").await,
        "pods of other namespaces stay"
    );
    assert_eq!(w.metrics.pods_deleted(NS, SERVICE), 1);

    // 22: within the window a pod that starts crash-looping goes...
    tokio::time::sleep(Duration::from_millis(500)).await;
    set_crashing(&client, NS, "kube-apiserver-b", true).await;
    eventually(
        "a pod crash-looping within the window deleted",
        5,
        async || !exists(&client, NS, "kube-apiserver-b").await,
    )
    .await;
    // ...after it, one stays.
    eventually("the weeder ended", 5, async || w.manager.active() == 0).await;
    pod(&client, NS, "kube-apiserver-d", "apiserver", true).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        exists(&client, NS, "kube-apiserver-d").await,
        "after the window nothing is weeded"
    );
    w.shutdown.cancel();
}

#[tokio::test]
async fn scenario_23_only_a_transition_to_ready_starts_a_weeder() {
    let seed = testkit::bare_cluster().await;
    let client = seed.client();
    testkit::namespace(&client, NS).await;
    let w = weeder(&client, "5s").await;
    // Created not ready: nothing.
    set_slice(&client, NS, SERVICE, &[false]).await;
    pod(&client, NS, "kube-apiserver-a", "apiserver", true).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(w.manager.active(), 0);
    assert!(exists(&client, NS, "kube-apiserver-a").await);
    // A slice of another service turning ready: nothing.
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let other: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "other-x1", "namespace": NS, "labels": {"kubernetes.io/service-name": "other"}},
        "addressType": "IPv4", "endpoints": slice_endpoints(&[true]),
    }))
    .unwrap();
    api.create(&PostParams::default(), &other).await.unwrap();
    // Ready → not ready, and deletion: nothing.
    set_slice(&client, NS, SERVICE, &[false, false]).await;
    api.delete(SLICE, &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(w.manager.active(), 0);
    assert!(exists(&client, NS, "kube-apiserver-a").await);
    // Created ready: a weeder (every ready slice is reported at start).
    set_slice(&client, NS, SERVICE, &[true]).await;
    eventually("a weeder", 5, async || w.manager.active() == 1).await;
    eventually("the pod weeded", 5, async || {
        !exists(&client, NS, "kube-apiserver-a").await
    })
    .await;
    // Ready → ready: no new weeder.
    set_slice(&client, NS, SERVICE, &[true, true]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        w.metrics
            .encode()
            .matches("dwd_weeder_weeders_started_total{")
            .count(),
        1
    );
    assert!(w.metrics.encode().contains(&format!(
        r#"dwd_weeder_weeders_started_total{{namespace="{NS}",service="{SERVICE}"}} 1"#
    )));
    w.shutdown.cancel();
}

#[tokio::test]
async fn scenario_24_a_second_trigger_restarts_the_window() {
    let seed = testkit::bare_cluster().await;
    let client = seed.client();
    testkit::namespace(&client, NS).await;
    let w = weeder(&client, "2s").await;
    set_slice(&client, NS, SERVICE, &[false]).await;
    set_slice(&client, NS, SERVICE, &[true]).await;
    eventually("a weeder", 5, async || w.manager.active() == 1).await;
    // 1.5 s in, the slice flaps and turns ready again: a new 2 s window.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    set_slice(&client, NS, SERVICE, &[false]).await;
    set_slice(&client, NS, SERVICE, &[true]).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // 2.5 s after the first trigger the first window has passed; a pod
    // crash-looping now is weeded by the second weeder, alone.
    assert_eq!(
        w.manager.active(),
        1,
        "the old weeder was replaced, not doubled"
    );
    pod(&client, NS, "kube-apiserver-a", "apiserver", true).await;
    eventually("the pod weeded in the new window", 5, async || {
        !exists(&client, NS, "kube-apiserver-a").await
    })
    .await;
    w.shutdown.cancel();
}

#[tokio::test]
async fn scenario_25_a_pod_already_being_deleted_is_left_alone() {
    let seed = testkit::bare_cluster().await;
    let client = seed.client();
    testkit::namespace(&client, NS).await;
    // A finalizer keeps the deleted pod around with its deletionTimestamp.
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "kube-apiserver-a", "namespace": NS, "labels": {"role": "apiserver"},
                     "finalizers": ["test.trellis.dev/hold"]},
        "spec": {"containers": [{"name": "c", "image": "trellis.dev/exec"}]},
    }))
    .unwrap();
    api.create(&PostParams::default(), &p).await.unwrap();
    set_crashing(&client, NS, "kube-apiserver-a", true).await;
    api.delete("kube-apiserver-a", &DeleteParams::default())
        .await
        .unwrap();
    let w = weeder(&client, "5s").await;
    set_slice(&client, NS, SERVICE, &[true]).await;
    eventually("a weeder", 5, async || w.manager.active() == 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(w.metrics.pods_deleted(NS, SERVICE), 0, "no delete issued");
    api.patch(
        "kube-apiserver-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    w.shutdown.cancel();
}
