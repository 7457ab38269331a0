//! The node simulator against the embedded API server: registration, boot,
//! lease renewal, the fault annotations, pods on simulated nodes, volumes,
//! and that conditions written by others survive the simulator's posts.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{eventually, fast, start};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Container, Node, NodeAddress, PersistentVolume,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource,
    PersistentVolumeSpec, Pod, PodSpec, Taint, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use nodesim::{NodeSimulator, NodeSpec, faults};
use serde_json::json;

fn condition(node: &Node, type_: &str) -> Option<(String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

fn status_of(node: &Node, type_: &str) -> Option<String> {
    condition(node, type_).map(|(s, _)| s)
}

async fn node_where(
    nodes: &Api<Node>,
    name: &str,
    what: &str,
    secs: u64,
    pred: impl Fn(&Node) -> bool,
) -> Node {
    eventually(what, secs, || async {
        nodes.get_opt(name).await.unwrap().filter(|n| pred(n))
    })
    .await
}

fn spec(name: &str) -> NodeSpec {
    let mut s = NodeSpec::new(name, &format!("local:///zone-a/{name}"));
    s.labels
        .insert("node.kubernetes.io/instance-type".into(), "m5.large".into());
    s.annotations.insert("example.com/a".into(), "1".into());
    s.taints.push(Taint {
        key: "dedicated".into(),
        value: Some("sim".into()),
        effect: "NoSchedule".into(),
        time_added: None,
    });
    s.capacity = BTreeMap::from([
        ("cpu".to_string(), Quantity("4".into())),
        ("memory".to_string(), Quantity("16Gi".into())),
    ]);
    s.addresses.push(NodeAddress {
        type_: "InternalIP".into(),
        address: "10.250.0.7".into(),
    });
    s
}

async fn annotate(nodes: &Api<Node>, name: &str, key: &str, value: Option<&str>) {
    let patch = json!({ "metadata": { "annotations": { key: value } } });
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_registers_boots_and_renews_its_lease() {
    let srv = start().await;
    let sim = NodeSimulator::new(srv.client(), fast());
    let mut s = spec("n1");
    s.boot_delay = Duration::from_millis(1500);
    sim.register(s);

    let nodes: Api<Node> = Api::all(srv.client());
    let node = node_where(&nodes, "n1", "registered", 10, |_| true).await;
    let meta = &node.metadata;
    let labels = meta.labels.as_ref().unwrap();
    assert_eq!(labels["node.kubernetes.io/instance-type"], "m5.large");
    assert_eq!(labels["kubernetes.io/hostname"], "n1");
    assert_eq!(meta.annotations.as_ref().unwrap()["example.com/a"], "1");
    let nspec = node.spec.as_ref().unwrap();
    assert_eq!(nspec.provider_id.as_deref(), Some("local:///zone-a/n1"));
    assert_eq!(nspec.taints.as_ref().unwrap()[0].key, "dedicated");
    let st = node.status.as_ref().unwrap();
    assert_eq!(st.capacity.as_ref().unwrap()["cpu"].0, "4");
    assert_eq!(st.allocatable.as_ref().unwrap()["memory"].0, "16Gi");
    assert_eq!(st.node_info.as_ref().unwrap().kubelet_version, "v1.32.0");
    let addrs: Vec<(&str, &str)> = st
        .addresses
        .iter()
        .flatten()
        .map(|a| (a.type_.as_str(), a.address.as_str()))
        .collect();
    assert_eq!(addrs, [("InternalIP", "10.250.0.7"), ("Hostname", "n1")]);
    // Still booting.
    assert_eq!(
        condition(&node, "Ready"),
        Some(("False".into(), "KubeletNotReady".into()))
    );
    for t in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
        assert_eq!(status_of(&node, t).as_deref(), Some("False"), "{t}");
    }

    node_where(&nodes, "n1", "Ready after boot", 10, |n| {
        status_of(n, "Ready").as_deref() == Some("True")
    })
    .await;

    let leases: Api<Lease> = Api::namespaced(srv.client(), "kube-node-lease");
    let first = eventually("lease", 5, || async { leases.get_opt("n1").await.unwrap() }).await;
    let spec = first.spec.as_ref().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    assert_eq!(
        first.metadata.owner_references.as_ref().unwrap()[0].uid,
        node.metadata.uid.clone().unwrap()
    );
    let t0 = spec.renew_time.clone().unwrap();
    eventually("lease renewed", 5, || async {
        let l = leases.get("n1").await.unwrap();
        (l.spec.unwrap().renew_time.unwrap().0 > t0.0).then_some(())
    })
    .await;
    let stats = eventually("renewal counted", 5, || async {
        let s = sim.stats();
        (s.lease_renewals >= 1).then_some(s)
    })
    .await;
    assert_eq!((stats.nodes, stats.ready), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_stopped_turns_ready_unknown_and_recovers() {
    let srv = start().await;
    let sim = NodeSimulator::new(srv.client(), fast());
    sim.register(spec("n1"));
    let nodes: Api<Node> = Api::all(srv.client());
    node_where(&nodes, "n1", "Ready", 10, |n| {
        status_of(n, "Ready").as_deref() == Some("True")
    })
    .await;

    annotate(&nodes, "n1", faults::KUBELET, Some(faults::KUBELET_STOPPED)).await;
    let node = node_where(&nodes, "n1", "Ready Unknown", 10, |n| {
        status_of(n, "Ready").as_deref() == Some("Unknown")
    })
    .await;
    assert_eq!(
        condition(&node, "Ready").unwrap().1,
        "NodeStatusUnknown",
        "reason"
    );
    assert_eq!(status_of(&node, "DiskPressure").as_deref(), Some("Unknown"));
    // The lease is no longer renewed.
    let leases: Api<Lease> = Api::namespaced(srv.client(), "kube-node-lease");
    let before = leases.get("n1").await.unwrap().spec.unwrap().renew_time;
    tokio::time::sleep(Duration::from_millis(900)).await;
    let after = leases.get("n1").await.unwrap().spec.unwrap().renew_time;
    assert_eq!(before, after, "lease renewed by a stopped kubelet");

    annotate(&nodes, "n1", faults::KUBELET, None).await;
    node_where(&nodes, "n1", "Ready again", 10, |n| {
        status_of(n, "Ready").as_deref() == Some("True")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_and_condition_faults() {
    let srv = start().await;
    let sim = NodeSimulator::new(srv.client(), fast());
    sim.register(spec("n1"));
    let nodes: Api<Node> = Api::all(srv.client());
    node_where(&nodes, "n1", "Ready", 10, |n| {
        status_of(n, "Ready").as_deref() == Some("True")
    })
    .await;

    annotate(&nodes, "n1", faults::READY, Some("false")).await;
    node_where(&nodes, "n1", "NotReady", 10, |n| {
        status_of(n, "Ready").as_deref() == Some("False")
    })
    .await;
    annotate(&nodes, "n1", faults::READY, None).await;
    annotate(
        &nodes,
        "n1",
        faults::CONDITIONS,
        Some("DiskPressure,KernelDeadlock,ReadonlyFilesystem"),
    )
    .await;
    let node = node_where(&nodes, "n1", "conditions set", 10, |n| {
        status_of(n, "ReadonlyFilesystem").as_deref() == Some("True")
    })
    .await;
    for (t, want) in [
        ("Ready", "True"),
        ("DiskPressure", "True"),
        ("KernelDeadlock", "True"),
        ("MemoryPressure", "False"),
    ] {
        assert_eq!(status_of(&node, t).as_deref(), Some(want), "{t}");
    }
    annotate(&nodes, "n1", faults::CONDITIONS, None).await;
    node_where(&nodes, "n1", "conditions cleared", 10, |n| {
        status_of(n, "KernelDeadlock").as_deref() == Some("False")
            && status_of(n, "DiskPressure").as_deref() == Some("False")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_conditions_survive_and_deregistered_nodes_go_unknown() {
    let srv = start().await;
    let sim = NodeSimulator::new(srv.client(), fast());
    sim.register(spec("n1"));
    let nodes: Api<Node> = Api::all(srv.client());
    node_where(&nodes, "n1", "Ready", 10, |n| {
        status_of(n, "Ready").as_deref() == Some("True")
    })
    .await;
    // The machine controller marks the node as terminating.
    let patch = json!({"status": {"conditions": [
        {"type": "Terminating", "status": "True", "reason": "ScaleDown"}
    ]}});
    nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    // A fault makes the simulator post again; Terminating must stay.
    annotate(&nodes, "n1", faults::READY, Some("false")).await;
    let node = node_where(&nodes, "n1", "NotReady", 10, |n| {
        status_of(n, "Ready").as_deref() == Some("False")
    })
    .await;
    assert_eq!(status_of(&node, "Terminating").as_deref(), Some("True"));

    // The VM is deleted: the node goes silent and, after the grace period,
    // Unknown; the node object stays for the machine controller to delete.
    assert!(sim.deregister("n1"));
    assert!(!sim.is_simulated("n1"));
    node_where(&nodes, "n1", "Unknown after deregistration", 10, |n| {
        status_of(n, "Ready").as_deref() == Some("Unknown")
    })
    .await;
    assert_eq!(sim.stats().nodes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vanish_fault_stops_the_vm_and_tells_subscribers() {
    let srv = start().await;
    let sim = NodeSimulator::new(srv.client(), fast());
    let mut vanished = sim.subscribe_vanished();
    sim.register(spec("n1"));
    let nodes: Api<Node> = Api::all(srv.client());
    node_where(&nodes, "n1", "Ready", 10, |n| {
        status_of(n, "Ready").as_deref() == Some("True")
    })
    .await;
    annotate(&nodes, "n1", faults::VANISH, Some("true")).await;
    let name = tokio::time::timeout(Duration::from_secs(10), vanished.recv())
        .await
        .expect("vanish event")
        .unwrap();
    assert_eq!(name, "n1");
    assert!(!sim.is_simulated("n1"));
}

fn pod(name: &str, node: &str, claim: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            containers: vec![Container {
                name: "app".into(),
                image: Some("nginx:1.27".into()),
                ..Container::default()
            }],
            volumes: claim.map(|c| {
                vec![Volume {
                    name: "data".into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: c.into(),
                        read_only: None,
                    }),
                    ..Volume::default()
                }]
            }),
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref()?.phase.as_deref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_crash_and_are_finalized_on_deletion() {
    let srv = start().await;
    let sim = NodeSimulator::new(srv.client(), fast());
    sim.register(spec("n1"));
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    pods.create(&PostParams::default(), &pod("web", "n1", None))
        .await
        .unwrap();

    let running = eventually("pod Running", 10, || async {
        pods.get("web")
            .await
            .ok()
            .filter(|p| phase(p) == Some("Running"))
    })
    .await;
    let st = running.status.as_ref().unwrap();
    assert_eq!(st.host_ip.as_deref(), Some("10.250.0.7"));
    assert!(st.pod_ip.is_some());
    let cs = &st.container_statuses.as_ref().unwrap()[0];
    assert!(cs.ready && cs.started == Some(true) && cs.restart_count == 0);
    let conds: BTreeMap<&str, &str> = st
        .conditions
        .iter()
        .flatten()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    for c in ["Ready", "ContainersReady", "Initialized", "PodScheduled"] {
        assert_eq!(conds.get(c), Some(&"True"), "{c}");
    }

    let patch = json!({"metadata": {"annotations": {faults::CRASH: "true"}}});
    pods.patch("web", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    eventually("CrashLoopBackOff", 10, || async {
        let p = pods.get("web").await.unwrap();
        let cs = p.status?.container_statuses?.into_iter().next()?;
        let waiting = cs.state?.waiting?.reason?;
        (waiting == "CrashLoopBackOff" && cs.restart_count == 1 && !cs.ready).then_some(())
    })
    .await;

    // A scheduled pod is deleted gracefully; the kubelet finishes it.
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    eventually("pod finalized", 10, || async {
        pods.get_opt("web").await.unwrap().is_none().then_some(())
    })
    .await;

    // Eviction (what drain does) ends the same way.
    pods.create(&PostParams::default(), &pod("evictee", "n1", None))
        .await
        .unwrap();
    eventually("second pod Running", 10, || async {
        pods.get("evictee")
            .await
            .ok()
            .filter(|p| phase(p) == Some("Running"))
    })
    .await;
    pods.evict("evictee", &EvictParams::default())
        .await
        .unwrap();
    eventually("evicted pod finalized", 10, || async {
        pods.get_opt("evictee")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    // The pod is gone before the simulator has read the delete's answer.
    eventually("finalizations counted", 5, || async {
        (sim.stats().pod_finalizations >= 2).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_volumes_attach_and_detach() {
    let srv = start().await;
    let sim = NodeSimulator::new(srv.client(), fast());
    sim.register(spec("n1"));
    let pvs: Api<PersistentVolume> = Api::all(srv.client());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(srv.client(), "default");
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");

    // The pod comes first; its claim is not bound yet.
    pods.create(&PostParams::default(), &pod("db", "n1", Some("data")))
        .await
        .unwrap();
    eventually("waiting for the volume", 10, || async {
        let p = pods.get("db").await.unwrap();
        let cs = p.status?.container_statuses?.into_iter().next()?;
        (cs.state?.waiting?.reason? == "ContainerCreating").then_some(())
    })
    .await;

    let pv = PersistentVolume {
        metadata: ObjectMeta {
            name: Some("pv-1".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: "local.csi.trellis.dev".into(),
                volume_handle: "vol-1".into(),
                ..CSIPersistentVolumeSource::default()
            }),
            capacity: Some(BTreeMap::from([(
                "storage".to_string(),
                Quantity("1Gi".into()),
            )])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    };
    pvs.create(&PostParams::default(), &pv).await.unwrap();
    let pvc = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("data".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            volume_name: Some("pv-1".into()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    };
    pvcs.create(&PostParams::default(), &pvc).await.unwrap();

    let want = "kubernetes.io/csi/local.csi.trellis.dev^vol-1";
    let nodes: Api<Node> = Api::all(srv.client());
    let node = node_where(&nodes, "n1", "volume attached", 15, |n| {
        n.status
            .as_ref()
            .and_then(|s| s.volumes_attached.as_ref())
            .is_some_and(|v| v.iter().any(|a| a.name == want))
    })
    .await;
    assert_eq!(
        node.status.unwrap().volumes_in_use.unwrap(),
        vec![want.to_string()]
    );
    eventually("pod Running", 10, || async {
        pods.get("db")
            .await
            .ok()
            .filter(|p| phase(p) == Some("Running"))
    })
    .await;

    pods.delete("db", &DeleteParams::default()).await.unwrap();
    node_where(&nodes, "n1", "volume detached", 10, |n| {
        n.status
            .as_ref()
            .and_then(|s| s.volumes_attached.as_ref())
            .is_some_and(|v| v.is_empty())
    })
    .await;
    drop(sim);
}
