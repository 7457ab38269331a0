//! The shoot's `machine-controller-manager` Deployment against an embedded
//! seed: gardenlet creates it with upstream's labels and one replica; scaled
//! to 0 (as dependency-watchdog's prober does, annotations included) the
//! shoot's machine controllers stop — the heartbeat Lease is released and a
//! scaled-up machine deployment gets no new machine — and gardenlet's own
//! passes keep the scale and the annotations; back at 1 they run again and
//! catch up. A shoot deleted while held at 0 still loses its machines.

use std::path::Path;

use api::{Machine, MachineClass, MachineDeployment};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use testkit::{create, eventually};
use tokio::sync::oneshot;

const ID: &str = "shoot--dev--demo";
const MCM: &str = "machine-controller-manager";
const HEARTBEAT: &str = "machine-controller-manager-heartbeat";
const MELTDOWN: &str = "dependency-watchdog.gardener.cloud/meltdown-protection-active";
const REPLICAS: &str = "dependency-watchdog.gardener.cloud/replicas";

async fn seed() -> kube::Client {
    let crds = [gardener::crds(), worker::crds(), api::crds()].concat();
    testkit::cluster(crds).await.client()
}

fn start(seed: &kube::Client, data: &Path) -> oneshot::Sender<()> {
    let (tx, rx) = oneshot::channel::<()>();
    let config = gardenlet::Config {
        data_dir: Some(data.to_path_buf()),
        simulator: testkit::sim::fast(),
        ..gardenlet::Config::default()
    };
    tokio::spawn(gardenlet::run(seed.clone(), config, async move {
        let _ = rx.await;
    }));
    tx
}

/// A profile and a Shoot with one pool.
async fn apply_shoot(seed: &kube::Client) {
    create(
        &Api::<Namespace>::all(seed.clone()),
        json!({"metadata": {"name": "garden-dev"}}),
    )
    .await;
    create(
        &Api::<gardener::CloudProfile>::all(seed.clone()),
        json!({
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "CloudProfile",
            "metadata": {"name": "local"},
            "spec": {
                "type": "local",
                "kubernetes": {"versions": [{"version": "1.31.2", "classification": "supported"}]},
                "machineImages": [{"name": "local", "versions": [
                    {"version": "1.0.0", "classification": "supported", "architectures": ["amd64"]}]}],
                "machineTypes": [{"name": "small", "cpu": "2", "gpu": "0", "memory": "4Gi",
                                  "architecture": "amd64"}],
                "regions": [{"name": "local", "zones": [{"name": "z1"}]}]
            }
        }),
    )
    .await;
    let ar = kube::core::ApiResource::erase::<gardener::Shoot>(&());
    create(
        &Api::<kube::core::DynamicObject>::namespaced_with(seed.clone(), "garden-dev", &ar),
        json!({
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
            "metadata": {"name": "demo", "namespace": "garden-dev"},
            "spec": {
                "cloudProfile": {"kind": "CloudProfile", "name": "local"},
                "region": "local",
                "kubernetes": {"version": "1.31.2"},
                "provider": {"type": "local", "workers": [
                    {"name": "cpu", "machine": {"type": "small", "image": {"name": "local", "version": "1.0.0"}},
                     "minimum": 1, "maximum": 3, "zones": ["z1"]}
                ]}
            }
        }),
    )
    .await;
}

/// A local class and a deployment of one machine, as the Worker actuator
/// would create them (none runs here).
async fn machine_deployment(seed: &kube::Client) {
    create(
        &Api::<Secret>::namespaced(seed.clone(), ID),
        json!({"metadata": {"name": "cpu-class"},
               "stringData": {"userData": "#cloud-config\ntoken: <<BOOTSTRAP_TOKEN>>\n"}}),
    )
    .await;
    create(
        &Api::<MachineClass>::namespaced(seed.clone(), ID),
        json!({
            "apiVersion": "machine.sapcloud.io/v1alpha1", "kind": "MachineClass",
            "metadata": {"name": "cpu-class"},
            "provider": "local",
            "providerSpec": {"zone": "z1", "tags": {format!("kubernetes.io/cluster/{ID}"): "1"}},
            "secretRef": {"name": "cpu-class", "namespace": ID},
            "credentialsSecretRef": {"name": "cpu-class", "namespace": ID}
        }),
    )
    .await;
    let md = MachineDeployment::test(&format!("{ID}-cpu-z1")).class("cpu-class");
    let mut md = serde_json::to_value(&md).unwrap();
    md["metadata"]["namespace"] = json!(ID);
    create(&Api::<MachineDeployment>::namespaced(seed.clone(), ID), md).await;
}

async fn machine_count(seed: &kube::Client) -> usize {
    Api::<Machine>::namespaced(seed.clone(), ID)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
}

/// Who holds the shoot's heartbeat Lease (`None`: released or absent).
async fn heartbeat_holder(seed: &kube::Client) -> Option<String> {
    Api::<Lease>::namespaced(seed.clone(), ID)
        .get_opt(HEARTBEAT)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

async fn scale(deployments: &Api<Deployment>, replicas: i32) {
    deployments
        .patch(
            MCM,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_shoot_machine_controllers_follow_the_deployment_scale() {
    let seed = seed().await;
    let data = tempfile::tempdir().unwrap();
    let _stop = start(&seed, data.path());
    apply_shoot(&seed).await;

    // Created with upstream's name and labels, one replica.
    let deployments: Api<Deployment> = Api::namespaced(seed.clone(), ID);
    let d = eventually(
        "the machine-controller-manager deployment",
        30,
        async || deployments.get_opt(MCM).await.unwrap(),
    )
    .await;
    let labels = d.metadata.labels.clone().unwrap();
    assert_eq!(labels["app"], "kubernetes");
    assert_eq!(labels["role"], "machine-controller-manager");
    assert_eq!(labels["gardener.cloud/role"], "controlplane");
    assert_eq!(d.spec.as_ref().unwrap().replicas, Some(1));

    // Running: a machine for the machine deployment, the heartbeat held.
    eventually("the shoot's API", 30, async || {
        Api::<Secret>::namespaced(seed.clone(), ID)
            .get_opt("kubeconfig")
            .await
            .unwrap()
            .is_some()
    })
    .await;
    machine_deployment(&seed).await;
    eventually("a machine", 30, async || machine_count(&seed).await == 1).await;
    eventually("the heartbeat held", 30, async || {
        heartbeat_holder(&seed).await.is_some()
    })
    .await;

    // Scaled to 0 with the prober's annotations: the controllers stop.
    deployments
        .patch(
            MCM,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {REPLICAS: "1", MELTDOWN: ""}}})),
        )
        .await
        .unwrap();
    scale(&deployments, 0).await;
    eventually("the heartbeat released", 30, async || {
        heartbeat_holder(&seed).await.is_none()
    })
    .await;

    // Nothing is created meanwhile.
    let mds: Api<MachineDeployment> = Api::namespaced(seed.clone(), ID);
    mds.patch(
        &format!("{ID}-cpu-z1"),
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();

    // gardenlet's own passes restore what it owns and keep the scale and
    // the annotations: drop a label it owns, trigger a pass.
    deployments
        .patch(
            MCM,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"role": null}}})),
        )
        .await
        .unwrap();
    Api::<gardener::Shoot>::namespaced(seed.clone(), "garden-dev")
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"test": "reconcile"}}})),
        )
        .await
        .unwrap();
    let d = eventually("gardenlet to restore its label", 30, async || {
        deployments
            .get(MCM)
            .await
            .ok()
            .filter(|d| d.metadata.labels.as_ref().unwrap().contains_key("role"))
    })
    .await;
    assert_eq!(d.spec.as_ref().unwrap().replicas, Some(0));
    let annotations = d.metadata.annotations.unwrap();
    assert_eq!(annotations.get(MELTDOWN).map(String::as_str), Some(""));
    assert_eq!(annotations.get(REPLICAS).map(String::as_str), Some("1"));

    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert_eq!(
        machine_count(&seed).await,
        1,
        "no machine is created while scaled to 0"
    );
    assert!(heartbeat_holder(&seed).await.is_none());

    // Back to 1: the controllers run again and catch up.
    scale(&deployments, 1).await;
    eventually("the heartbeat held again", 30, async || {
        heartbeat_holder(&seed).await.is_some()
    })
    .await;
    eventually("the scaled-up machines", 30, async || {
        machine_count(&seed).await == 3
    })
    .await;

    // Held at 0 again, the shoot is deleted: its machines still go, since
    // the deletion flow marks the Cluster deleting (the prober lets go)
    // and scales the Deployment back up.
    deployments
        .patch(
            MCM,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {MELTDOWN: ""}}})),
        )
        .await
        .unwrap();
    scale(&deployments, 0).await;
    eventually("the heartbeat released", 30, async || {
        heartbeat_holder(&seed).await.is_none()
    })
    .await;
    let shoots: Api<gardener::Shoot> = Api::namespaced(seed.clone(), "garden-dev");
    shoots
        .delete("demo", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    let clusters: Api<worker::Cluster> = Api::all(seed.clone());
    eventually("the Cluster marked deleting", 30, async || {
        clusters
            .get_opt(ID)
            .await
            .unwrap()
            .is_none_or(|c| !c.spec.shoot["metadata"]["deletionTimestamp"].is_null())
    })
    .await;
    eventually("the machines deleted", 60, async || {
        machine_count(&seed).await == 0
    })
    .await;
    eventually("the shoot gone", 60, async || {
        shoots.get_opt("demo").await.unwrap().is_none()
    })
    .await;
}
