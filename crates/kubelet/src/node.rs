//! The Node that stands for this machine and its Lease: pure constructors
//! (capacity from the machine, the kubelet's HTTPS port in
//! `daemonEndpoints`, 127.0.0.1 as InternalIP) and the thin loop that
//! registers the node and renews the lease.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::error::Error;

/// Namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The label that tells this node from simulated ones.
pub const RUNTIME_LABEL: &str = "node.trellis.dev/runtime";
pub const RUNTIME_VALUE: &str = "process";
/// Lease timing, as upstream's defaults.
pub const LEASE_DURATION_SECS: i32 = 40;
pub const LEASE_RENEW: Duration = Duration::from_secs(10);

/// What the node says about itself.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub address: String,
    pub kubelet_port: u16,
    pub cpus: usize,
    pub memory_bytes: u64,
    pub max_pods: u32,
}

/// This machine's CPUs and memory.
pub fn machine() -> (usize, u64) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024);
    (cpus, mem)
}

fn labels(info: &NodeInfo) -> BTreeMap<String, String> {
    let mut l = info.labels.clone();
    for (k, v) in [
        ("kubernetes.io/hostname", info.name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", std::env::consts::ARCH),
        (RUNTIME_LABEL, RUNTIME_VALUE),
    ] {
        let v = if v == "x86_64" {
            "amd64"
        } else if v == "aarch64" {
            "arm64"
        } else {
            v
        };
        l.entry(k.to_string()).or_insert_with(|| v.to_string());
    }
    l
}

/// The node's status: Ready, capacity, addresses, the kubelet endpoint.
pub fn status(info: &NodeInfo, now: Timestamp, since: Timestamp) -> NodeStatus {
    let q = |s: String| Quantity(s);
    let capacity: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), q(info.cpus.to_string())),
        (
            "memory".to_string(),
            q(format!("{}Ki", info.memory_bytes / 1024)),
        ),
        ("pods".to_string(), q(info.max_pods.to_string())),
        ("ephemeral-storage".to_string(), q("100Gi".to_string())),
    ]
    .into();
    let cond = |t: &str, s: &str, reason: &str, msg: &str| NodeCondition {
        type_: t.to_string(),
        status: s.to_string(),
        reason: Some(reason.to_string()),
        message: Some(msg.to_string()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(since)),
    };
    NodeStatus {
        conditions: Some(vec![
            cond(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
            ),
            cond(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            cond(
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
            ),
            cond(
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
        ]),
        allocatable: Some(capacity.clone()),
        capacity: Some(capacity),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: info.address.clone(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: info.name.clone(),
            },
        ]),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: info.kubelet_port as i32,
            }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: labels(info)["kubernetes.io/arch"].clone(),
            boot_id: String::new(),
            container_runtime_version: "trellis-process://1".into(),
            kernel_version: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            kube_proxy_version: String::new(),
            kubelet_version: "v1.32.0-trellis".into(),
            machine_id: std::fs::read_to_string("/etc/machine-id")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            operating_system: "linux".into(),
            os_image: "trellis process runtime".into(),
            system_uuid: String::new(),
        }),
        ..NodeStatus::default()
    }
}

/// The Node object at registration.
pub fn node(info: &NodeInfo, now: Timestamp) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(info.name.clone()),
            labels: Some(labels(info)),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: (!info.taints.is_empty()).then(|| info.taints.clone()),
            ..NodeSpec::default()
        }),
        status: Some(status(info, now, now)),
    }
}

/// The node's Lease, owned by the Node.
pub fn lease(node: &str, node_uid: &str, now: Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some(LEASE_NAMESPACE.to_string()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.to_string(),
                uid: node_uid.to_string(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_string()),
            lease_duration_seconds: Some(LEASE_DURATION_SECS),
            renew_time: Some(MicroTime(now)),
            ..LeaseSpec::default()
        }),
    }
}

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Registers the node (or takes over an existing one) and returns its UID.
pub async fn register(client: &kube::Client, info: &NodeInfo) -> Result<Node, Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let now = Timestamp::now();
    let err = |source| Error::RegisterFailed {
        node: info.name.clone(),
        source,
    };
    let created = match nodes.create(&PostParams::default(), &node(info, now)).await {
        Ok(n) => n,
        Err(e) if code(&e) == Some(409) => {
            // Labels we set are restated; ones users added stay.
            let patch = json!({"metadata": {"labels": labels(info)}});
            nodes
                .patch(&info.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(err)?
        }
        Err(e) => return Err(err(e)),
    };
    post_status(client, info, now).await?;
    Ok(created)
}

/// Posts the node's status (Ready, endpoint, capacity).
pub async fn post_status(
    client: &kube::Client,
    info: &NodeInfo,
    since: Timestamp,
) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({"status": status(info, Timestamp::now(), since)});
    nodes
        .patch_status(
            &info.name,
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
        .map_err(|source| Error::RegisterFailed {
            node: info.name.clone(),
            source,
        })?;
    Ok(())
}

/// Renews (or creates) the node's lease.
pub async fn renew(client: &kube::Client, node: &str, node_uid: &str) -> Result<(), Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let now = Timestamp::now();
    let err = |source| Error::LeaseFailed {
        node: node.to_string(),
        source,
    };
    let patch = json!({"spec": {"holderIdentity": node, "leaseDurationSeconds": LEASE_DURATION_SECS, "renewTime": MicroTime(now)}});
    match leases
        .patch(node, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(404) => leases
            .create(&PostParams::default(), &lease(node, node_uid, now))
            .await
            .map(|_| ())
            .map_err(err),
        Err(e) => Err(err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> NodeInfo {
        NodeInfo {
            name: "box".into(),
            labels: [("team".to_string(), "a".to_string())].into(),
            taints: vec![],
            address: "127.0.0.1".into(),
            kubelet_port: 10250,
            cpus: 2,
            memory_bytes: 8 << 30,
            max_pods: 110,
        }
    }

    #[test]
    fn the_node_says_where_its_kubelet_listens_and_what_it_has() {
        let n = node(&info(), Timestamp::UNIX_EPOCH);
        let labels = n.metadata.labels.unwrap();
        assert_eq!(labels["kubernetes.io/hostname"], "box");
        assert_eq!(labels[RUNTIME_LABEL], RUNTIME_VALUE);
        assert_eq!(labels["team"], "a");
        let st = n.status.unwrap();
        assert_eq!(
            st.daemon_endpoints.unwrap().kubelet_endpoint.unwrap().port,
            10250
        );
        let cap = st.capacity.unwrap();
        assert_eq!(cap["cpu"].0, "2");
        assert_eq!(cap["memory"].0, "8388608Ki");
        assert_eq!(cap["pods"].0, "110");
        let ready = st
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "True");
        assert_eq!(st.addresses.unwrap()[0].address, "127.0.0.1");
        let l = lease("box", "uid-1", Timestamp::UNIX_EPOCH);
        assert_eq!(l.spec.unwrap().lease_duration_seconds, Some(40));
        assert_eq!(l.metadata.owner_references.unwrap()[0].uid, "uid-1");
    }
}
