//! The gardenlet against an embedded seed API server: a CloudProfile and a
//! Shoot with two pools over three zones become a control namespace, a
//! Cluster, a Worker and a shoot API server of their own; the shoot's
//! machine controllers turn a machine deployment in the seed into a Node in
//! the shoot (never in the seed); hibernation reaches the Cluster and the
//! Worker; deleting the Shoot takes everything down, including the shoot's
//! API server and data directory; and a restarted gardenlet brings a
//! shoot's API back on the same store.
//!
//! No Worker actuator runs here: where one would act, the test acts (it
//! creates a machine class and deployment, reports the Worker reconciled,
//! scales to zero).

use std::path::Path;

use api::{Machine, MachineClass, MachineDeployment};
use gardener::Shoot;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use testkit::{create, eventually};
use tokio::sync::oneshot;
use worker::{Cluster, Worker};

const ID: &str = "shoot--dev--demo";

/// The seed: an embedded API server with the Gardener, Worker and machine
/// CRDs.
async fn seed() -> kube::Client {
    let crds = [gardener::crds(), worker::crds(), api::crds()].concat();
    testkit::cluster(crds).await.client()
}

/// Starts the gardenlet; the sender stops it, the handle ends after.
fn start(seed: &kube::Client, data: &Path) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = oneshot::channel::<()>();
    let config = gardenlet::Config {
        data_dir: Some(data.to_path_buf()),
        simulator: testkit::sim::fast(),
        ..gardenlet::Config::default()
    };
    let handle = tokio::spawn(gardenlet::run(seed.clone(), config, async move {
        let _ = rx.await;
    }));
    (tx, handle)
}

/// The project namespace, the profile and the Shoot: pools `cpu` (3..6)
/// and `sys` (1..3, no system components) over zones z1..z3.
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
                                  "architecture": "amd64",
                                  "machineControllerManager": {"machineCreationTimeout": "7m"}}],
                "regions": [{"name": "local", "zones": [{"name": "z1"}, {"name": "z2"}, {"name": "z3"}]}]
            }
        }),
    )
    .await;
    let zones = json!(["z1", "z2", "z3"]);
    // Untyped, so fields the typed Shoot does not model reach the server.
    let ar = kube::core::ApiResource::erase::<Shoot>(&());
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
                     "minimum": 3, "maximum": 6, "zones": zones, "labels": {"team": "a"},
                     "clusterAutoscaler": {"scaleDownUnneededTime": "15m"}},
                    {"name": "sys", "machine": {"type": "small"},
                     "minimum": 1, "maximum": 3, "maxSurge": 2, "zones": zones,
                     "systemComponents": {"allow": false}}
                ]}
            }
        }),
    )
    .await;
}

async fn shoot_client(seed: &kube::Client) -> Option<kube::Client> {
    let secret = Api::<Secret>::namespaced(seed.clone(), ID)
        .get_opt("kubeconfig")
        .await
        .ok()??;
    let data = secret.data?.get("kubeconfig")?.0.clone();
    let config = testkit::kubeconfig(std::str::from_utf8(&data).ok()?)
        .await
        .ok()?;
    kube::Client::try_from(config).ok()
}

async fn namespaces_of(client: &kube::Client) -> Option<Vec<String>> {
    let list = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .ok()?;
    Some(
        list.items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect(),
    )
}

async fn get_shoot(seed: &kube::Client) -> Option<Shoot> {
    Api::<Shoot>::namespaced(seed.clone(), "garden-dev")
        .get_opt("demo")
        .await
        .unwrap()
}

/// Stands in for the Worker actuator: reports the current generation
/// reconciled and removes gardenlet's request.
async fn report_worker_reconciled(seed: &kube::Client) {
    let workers: Api<Worker> = Api::namespaced(seed.clone(), ID);
    let w = workers.get(ID).await.unwrap();
    workers
        .patch(
            ID,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"gardener.cloud/operation": null}}})),
        )
        .await
        .unwrap();
    workers
        .patch_status(
            ID,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "observedGeneration": w.metadata.generation.unwrap(),
                "lastOperation": {"type": "Reconcile", "state": "Succeeded", "progress": 100,
                                  "description": "done",
                                  "lastUpdateTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)}
            }})),
        )
        .await
        .unwrap();
}

/// A local class and a deployment of one machine in the control namespace,
/// as the Worker actuator would create them.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shoot_lifecycle() {
    let seed = seed().await;
    let data = tempfile::tempdir().unwrap();
    let (_stop, _running) = start(&seed, data.path());
    apply_shoot(&seed).await;

    // The control namespace, recorded as the technical ID, with the finalizer.
    let namespaces: Api<Namespace> = Api::all(seed.clone());
    eventually("the control namespace", 20, async || {
        namespaces.get_opt(ID).await.unwrap().is_some()
    })
    .await;
    eventually("the technical ID", 20, async || {
        get_shoot(&seed)
            .await
            .and_then(|s| s.status)
            .is_some_and(|s| s.technical_id == ID)
    })
    .await;
    let shoot = get_shoot(&seed).await.unwrap();
    assert!(
        shoot
            .metadata
            .finalizers
            .unwrap()
            .contains(&"gardener".to_string())
    );
    let op = shoot.status.unwrap().last_operation.unwrap();
    assert_eq!(
        (op.type_.as_str(), op.state.as_str()),
        ("Create", "Processing")
    );

    // The Cluster mirrors Shoot, Seed and CloudProfile.
    let clusters: Api<Cluster> = Api::all(seed.clone());
    eventually("the Cluster", 20, async || {
        clusters.get_opt(ID).await.unwrap().is_some()
    })
    .await;
    let cluster = clusters.get(ID).await.unwrap();
    assert_eq!(cluster.spec.shoot["metadata"]["name"], "demo");
    assert_eq!(cluster.spec.shoot["status"]["technicalID"], ID);
    assert_eq!(cluster.spec.cloud_profile["kind"], "CloudProfile");
    assert_eq!(cluster.spec.cloud_profile["metadata"]["name"], "local");
    assert_eq!(cluster.spec.seed["kind"], "Seed");

    // The Worker: two pools over three zones, labels, image, capacity.
    let workers: Api<Worker> = Api::namespaced(seed.clone(), ID);
    eventually("the Worker", 20, async || {
        workers.get_opt(ID).await.unwrap().is_some()
    })
    .await;
    let w = workers.get(ID).await.unwrap();
    assert_eq!(w.spec.type_, "local");
    assert_eq!(w.spec.secret_ref.name.as_deref(), Some("cloudprovider"));
    assert_eq!(w.spec.pools.len(), 2);
    let cpu = &w.spec.pools[0];
    let sys = &w.spec.pools[1];
    assert_eq!(cpu.name, "cpu");
    assert_eq!(cpu.zones, vec!["z1", "z2", "z3"]);
    assert_eq!((cpu.minimum, cpu.maximum), (3, 6));
    assert_eq!(cpu.machine_image.version, "1.0.0");
    assert_eq!(
        sys.machine_image.version, "1.0.0",
        "defaulted from the profile"
    );
    assert_eq!(cpu.kubernetes_version.as_deref(), Some("1.31.2"));
    assert_eq!(cpu.labels["team"], "a");
    assert_eq!(cpu.labels["worker.gardener.cloud/pool"], "cpu");
    assert_eq!(cpu.labels["node.kubernetes.io/role"], "node");
    assert_eq!(
        cpu.labels["worker.gardener.cloud/system-components"],
        "true"
    );
    assert!(
        !sys.labels
            .contains_key("worker.gardener.cloud/system-components")
    );
    assert_eq!(
        cpu.labels["worker.gardener.cloud/gardener-node-agent-secret-name"],
        cpu.node_agent_secret_name.clone().unwrap()
    );
    let capacity = &cpu.node_template.as_ref().unwrap().capacity;
    assert_eq!(capacity["cpu"].0, "2");
    assert_eq!(capacity["memory"].0, "4Gi");
    assert_eq!(
        cpu.machine_controller_manager
            .as_ref()
            .unwrap()
            .machine_creation_timeout
            .as_deref(),
        Some("7m")
    );
    assert_eq!(
        cluster.spec.shoot["spec"]["provider"]["workers"][0]["clusterAutoscaler"]["scaleDownUnneededTime"],
        "15m",
        "{}",
        cluster.spec.shoot
    );
    assert_eq!(
        cpu.cluster_autoscaler
            .as_ref()
            .unwrap()
            .scale_down_unneeded_time
            .as_deref(),
        Some("15m")
    );
    assert_eq!(
        serde_json::to_value(&cpu.max_surge).unwrap(),
        json!(1),
        "rolling default"
    );
    assert_eq!(serde_json::to_value(&sys.max_surge).unwrap(), json!(2));
    let user_data_ref = cpu.user_data_secret_ref.as_ref().unwrap();
    assert_eq!(user_data_ref.name, "user-data-cpu");

    // The pool's bootstrap data, with MCM's placeholders and the shoot API.
    let secrets: Api<Secret> = Api::namespaced(seed.clone(), ID);
    let user_data = secrets.get("user-data-cpu").await.unwrap();
    let doc = String::from_utf8(user_data.data.unwrap()[&user_data_ref.key].0.clone()).unwrap();
    assert!(doc.contains("<<BOOTSTRAP_TOKEN>>") && doc.contains("<<MACHINE_NAME>>"));
    assert!(doc.contains("worker.gardener.cloud/pool=cpu"), "{doc}");
    assert!(secrets.get_opt("cloudprovider").await.unwrap().is_some());
    // dependency-watchdog's prober reads the same shoot kubeconfig under
    // upstream's Secret name.
    let kubeconfig_of = async |name: &str| {
        secrets.get(name).await.unwrap().data.unwrap()["kubeconfig"]
            .0
            .clone()
    };
    assert_eq!(
        kubeconfig_of(gardenlet::build::DWD_PROBE_SECRET).await,
        kubeconfig_of("kubeconfig").await
    );

    // The kubeconfig Secret reaches an API of its own.
    let shoot_api = shoot_client(&seed).await.expect("the kubeconfig secret");
    let shoot_namespaces = namespaces_of(&shoot_api)
        .await
        .expect("the shoot API answers");
    assert!(shoot_namespaces.contains(&"kube-system".to_string()));
    assert!(!shoot_namespaces.contains(&"garden-dev".to_string()));
    assert!(!shoot_namespaces.contains(&ID.to_string()));
    let shoot_dir = data.path().join("shoots").join(ID);
    assert!(shoot_dir.join("store").is_dir());

    // The shoot's machine controllers: a machine in the seed, its Node in
    // the shoot.
    machine_deployment(&seed).await;
    let shoot_nodes: Api<Node> = Api::all(shoot_api.clone());
    eventually("a Node in the shoot", 30, async || {
        !shoot_nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    let seed_nodes = Api::<Node>::all(seed.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        seed_nodes.items.is_empty(),
        "no Node may register in the seed"
    );
    let machines: Api<Machine> = Api::namespaced(seed.clone(), ID);
    assert_eq!(
        machines
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    // The Worker reconciled: the Create operation succeeds.
    report_worker_reconciled(&seed).await;
    // (The pass after the successful Create is a Reconcile.)
    eventually("the operation to succeed", 20, async || {
        let op = get_shoot(&seed)
            .await
            .and_then(|s| s.status)
            .and_then(|s| s.last_operation);
        op.is_some_and(|o| o.state == "Succeeded")
    })
    .await;
    let status = get_shoot(&seed).await.unwrap().status.unwrap();
    let cond = |t: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == t)
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    assert_eq!(cond("APIServerAvailable").unwrap().0, "True");
    assert_eq!(cond("SystemComponentsHealthy").unwrap().0, "True");
    // One node of the four the pools' minimums ask for.
    assert_eq!(
        cond("EveryNodeReady").unwrap(),
        ("False".into(), "MissingNodes".into())
    );
    assert!(!status.hibernated);
    // The Cluster shows the last operation, which is what lets
    // dependency-watchdog start probing the shoot.
    eventually("the Cluster to show the operation", 20, async || {
        let c = clusters.get(ID).await.unwrap();
        c.spec.shoot["status"]["lastOperation"]["state"] == "Succeeded"
    })
    .await;

    // Hibernation reaches the Cluster and asks the Worker's actuator to act.
    let shoots: Api<Shoot> = Api::namespaced(seed.clone(), "garden-dev");
    shoots
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hibernation": {"enabled": true}}})),
        )
        .await
        .unwrap();
    eventually("the Cluster to show hibernation", 20, async || {
        clusters.get(ID).await.unwrap().spec.shoot["spec"]["hibernation"]["enabled"] == json!(true)
    })
    .await;
    eventually("the Worker to be asked to reconcile", 20, async || {
        workers
            .get(ID)
            .await
            .unwrap()
            .metadata
            .annotations
            .unwrap_or_default()
            .get("gardener.cloud/operation")
            .map(String::as_str)
            == Some("reconcile")
    })
    .await;
    // Not hibernated while a machine is left.
    let status = get_shoot(&seed).await.unwrap().status.unwrap();
    assert!(!status.hibernated);
    assert_eq!(status.last_operation.unwrap().state, "Processing");
    // The actuator scales to zero.
    let mds: Api<MachineDeployment> = Api::namespaced(seed.clone(), ID);
    mds.patch(
        &format!("{ID}-cpu-z1"),
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .unwrap();
    report_worker_reconciled(&seed).await;
    eventually("status.hibernated", 30, async || {
        get_shoot(&seed)
            .await
            .and_then(|s| s.status)
            .is_some_and(|s| s.hibernated)
    })
    .await;
    assert!(
        machines
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // No machine controllers while hibernated (Gardener scales them down).
    let mcm: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(seed.clone(), ID);
    let mcm_replicas = async || {
        mcm.get("machine-controller-manager")
            .await
            .unwrap()
            .spec
            .and_then(|s| s.replicas)
    };
    eventually("the machine-controller-manager at 0", 20, async || {
        mcm_replicas().await == Some(0)
    })
    .await;

    // Waking up again, then deletion.
    mds.patch(
        &format!("{ID}-cpu-z1"),
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    shoots
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hibernation": {"enabled": false}}})),
        )
        .await
        .unwrap();
    eventually("the wake-up", 20, async || {
        get_shoot(&seed)
            .await
            .and_then(|s| s.status)
            .is_some_and(|s| !s.hibernated)
    })
    .await;
    assert_eq!(mcm_replicas().await, Some(1), "the controllers are back");
    eventually("a machine again", 30, async || {
        !machines
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    let url = {
        let kc = secrets.get("kubeconfig").await.unwrap().data.unwrap()["kubeconfig"]
            .0
            .clone();
        let kc = String::from_utf8(kc).unwrap();
        kc.lines()
            .find_map(|l| l.trim().strip_prefix("server: ").map(str::to_string))
            .unwrap()
    };
    shoots
        .delete("demo", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Shoot to be gone", 60, async || {
        get_shoot(&seed).await.is_none()
    })
    .await;
    assert!(workers.get_opt(ID).await.is_err() || workers.get_opt(ID).await.unwrap().is_none());
    assert!(
        namespaces.get_opt(ID).await.unwrap().is_none(),
        "namespace deleted"
    );
    assert!(
        clusters.get_opt(ID).await.unwrap().is_none(),
        "Cluster deleted"
    );
    assert!(
        Api::<MachineDeployment>::all(seed.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(!shoot_dir.exists(), "the shoot's data directory is removed");
    let addr = url.trim_start_matches("https://");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the shoot's API server no longer listens on {addr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_gardenlet_brings_the_shoot_api_back_with_its_state() {
    let seed = seed().await;
    let data = tempfile::tempdir().unwrap();
    let (stop, running) = start(&seed, data.path());
    apply_shoot(&seed).await;
    let mut shoot_api = None;
    eventually("the shoot API", 20, async || {
        shoot_api = shoot_client(&seed).await;
        match &shoot_api {
            Some(c) => namespaces_of(c).await.is_some(),
            None => false,
        }
    })
    .await;
    let shoot_api = shoot_api.unwrap();
    create(
        &Api::<ConfigMap>::namespaced(shoot_api.clone(), "default"),
        json!({"metadata": {"name": "keep"}, "data": {"k": "v"}}),
    )
    .await;
    stop.send(()).unwrap();
    running.await.unwrap();
    assert!(
        namespaces_of(&shoot_api).await.is_none(),
        "the shoot API stops with the gardenlet"
    );

    let (_stop, _running) = start(&seed, data.path());
    eventually("the kept ConfigMap through the shoot API", 30, async || {
        let Some(c) = shoot_client(&seed).await else {
            return false;
        };
        Api::<ConfigMap>::namespaced(c, "default")
            .get_opt("keep")
            .await
            .ok()
            .flatten()
            .is_some_and(|cm| cm.data.unwrap_or_default().get("k").map(String::as_str) == Some("v"))
    })
    .await;
}
