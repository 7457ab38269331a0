//! What the dwd scenario tests share: a seed (embedded API server with the
//! Cluster and machine CRDs) and a shoot (another embedded API server),
//! the prober's kubeconfig Secret, dependants as Deployments whose
//! readiness the test plays, and nodes, machines and leases.
//!
//! No workload controller runs here: [`mirror_readiness`] stands in for
//! the Deployment controller and the kubelet, setting
//! `status.readyReplicas` to `spec.replicas`, so a scale flow's short wait
//! sees the readiness it would see on a real seed.

#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use testkit::{Cluster, eventually};

pub const NS: &str = "shoot--p--a";
pub const SECRET: &str = "shoot-access-dependency-watchdog-probe";

/// The seed: the Cluster and machine.sapcloud.io CRDs installed.
pub async fn seed() -> Cluster {
    let mut crds: Vec<Value> = worker::crds()
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    crds.extend(
        api::crds()
            .into_iter()
            .map(|c| serde_json::to_value(c).unwrap()),
    );
    let c = testkit::cluster(crds).await;
    testkit::namespace(&c.client(), NS).await;
    c
}

/// A shoot's API server.
pub async fn shoot() -> Cluster {
    testkit::bare_cluster().await
}

/// A kubeconfig for a plain-HTTP server.
pub fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: shoot\n  cluster:\n    server: {url}\ncontexts:\n- name: shoot\n  context:\n    cluster: shoot\n    user: admin\ncurrent-context: shoot\nusers:\n- name: admin\n  user:\n    token: admin\n"
    )
}

/// Writes the prober's kubeconfig Secret for the shoot at `url`.
pub async fn write_secret(seed: &kube::Client, url: &str) {
    let secrets: Api<Secret> = Api::namespaced(seed.clone(), NS);
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": SECRET, "namespace": NS},
        "stringData": {"kubeconfig": kubeconfig(url)},
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
}

/// The prober config of the tests: upstream's fields, test-scale times.
pub fn prober_config(extra: &str, dependants: &str) -> dwd::ProberConfig {
    // Test-scale defaults, unless `extra` sets the key.
    let defaults: String = [
        "probeTimeout: 2s",
        "initialDelay: 0s",
        "probeInterval: 200ms",
        "backoffJitterFactor: 0",
    ]
    .iter()
    .filter(|d| !extra.contains(d.split(':').next().unwrap_or_default()))
    .map(|d| format!("{d}\n"))
    .collect();
    dwd::ProberConfig::from_yaml(&format!(
        "kubeConfigSecretName: {SECRET}\n{defaults}{extra}\ndependentResourceInfos:\n{dependants}"
    ))
    .unwrap()
}

/// A dependant entry of a prober config.
pub fn dependant(name: &str, optional: bool, up: i32, down: i32, up_delay: &str) -> String {
    format!(
        "- ref: {{apiVersion: apps/v1, kind: Deployment, name: {name}}}\n  optional: {optional}\n  scaleUp: {{level: {up}, initialDelay: {up_delay}}}\n  scaleDown: {{level: {down}}}\n"
    )
}

/// A Deployment in the shoot namespace.
pub async fn deployment(seed: &kube::Client, name: &str, replicas: i32, annotations: Value) {
    let api: Api<Deployment> = Api::namespaced(seed.clone(), NS);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "trellis.dev/exec"}]}},
        },
    }))
    .unwrap();
    api.create(&PostParams::default(), &d).await.unwrap();
}

/// `spec.replicas` and annotations of a Deployment.
pub async fn replicas(seed: &kube::Client, name: &str) -> (i32, BTreeMap<String, String>) {
    let d = Api::<Deployment>::namespaced(seed.clone(), NS)
        .get(name)
        .await
        .unwrap();
    (
        d.spec.and_then(|s| s.replicas).unwrap_or(0),
        d.metadata.annotations.unwrap_or_default(),
    )
}

/// Plays the Deployment controller and kubelet: every 50 ms, each
/// Deployment's `status.readyReplicas` becomes its `spec.replicas`.
pub fn mirror_readiness(seed: kube::Client) -> CancellationToken {
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        let api: Api<Deployment> = Api::namespaced(seed, NS);
        while !token.is_cancelled() {
            if let Ok(list) = api.list(&ListParams::default()).await {
                for d in list.items {
                    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
                    let ready = d
                        .status
                        .as_ref()
                        .and_then(|s| s.ready_replicas)
                        .unwrap_or(0);
                    if want != ready {
                        let name = d.metadata.name.unwrap_or_default();
                        let _ = api
                            .patch_status(
                                &name,
                                &PatchParams::default(),
                                &Patch::Merge(
                                    json!({"status": {"replicas": want, "readyReplicas": want}}),
                                ),
                            )
                            .await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    stop
}

fn machines(seed: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::erase::<api::Machine>(&());
    Api::namespaced_with(seed.clone(), NS, &ar)
}

/// A Machine for `node` in the given phase.
pub async fn machine(seed: &kube::Client, node: &str, phase: &str) {
    let api = machines(seed);
    let m: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": format!("m-{node}"), "namespace": NS, "labels": {"node": node}},
        "spec": {"class": {"kind": "MachineClass", "name": "local"}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &m).await.unwrap();
    api.patch_status(
        &format!("m-{node}"),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"currentStatus": {"phase": phase}}})),
    )
    .await
    .unwrap();
}

/// A Node in pool `pool-a` with the given extra conditions and annotations.
pub async fn node(shoot: &kube::Client, name: &str, conditions: Value, annotations: Value) {
    let api: Api<Node> = Api::all(shoot.clone());
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"worker.gardener.cloud/pool": "pool-a"}, "annotations": annotations},
    }))
    .unwrap();
    api.create(&PostParams::default(), &n).await.unwrap();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": conditions}})),
    )
    .await
    .unwrap();
}

/// Sets (or creates) the node lease `name`, renewed at `at`.
pub async fn renew(shoot: &kube::Client, name: &str, at: DateTime<Utc>) {
    let api: Api<Lease> = Api::namespaced(shoot.clone(), "kube-node-lease");
    let spec = json!({"holderIdentity": name, "leaseDurationSeconds": 40,
                      "renewTime": at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)});
    if api.get_opt(name).await.unwrap().is_some() {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await
        .unwrap();
    } else {
        let l: Lease = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "kube-node-lease"}, "spec": spec,
        }))
        .unwrap();
        api.create(&PostParams::default(), &l).await.unwrap();
    }
}

/// `n` managed, healthy nodes `n0..` with running machines; the first
/// `expired` leases renewed 31 s ago, the others now.
pub async fn fleet(seed: &kube::Client, shoot: &kube::Client, n: usize, expired: usize) {
    testkit::namespace(shoot, "kube-node-lease").await;
    for i in 0..n {
        let name = format!("n{i}");
        node(
            shoot,
            &name,
            json!([{"type": "Ready", "status": "True"}]),
            json!({}),
        )
        .await;
        machine(seed, &name, "Running").await;
        let ago = if i < expired { 31 } else { 0 };
        renew(shoot, &name, Utc::now() - chrono::Duration::seconds(ago)).await;
    }
}

/// The shared parts of a prober.
pub fn shared(seed: &kube::Client) -> dwd::controllers::prober::Shared {
    dwd::controllers::prober::Shared {
        seed: seed.clone(),
        metrics: Arc::new(dwd::Metrics::new()),
        recorder: Arc::new(kube::runtime::events::Recorder::new(
            seed.clone(),
            kube::runtime::events::Reporter {
                controller: dwd::run::PROBER_REPORTER.into(),
                instance: None,
            },
        )),
    }
}

/// The Events recorded about `name` in the shoot namespace, as
/// (reason, note).
pub async fn events(seed: &kube::Client, name: &str) -> Vec<(String, String)> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(seed.clone(), NS);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}
