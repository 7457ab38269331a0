//! The API objects a simulated kubelet writes, built from a [`NodeSpec`] and
//! a [`Posted`] status: the Node at registration, its status patches, and
//! its Lease. Pure constructors; the executor sends them.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    AttachedVolume, DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints,
    NodeSpec as K8sNodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::config::SimConfig;
use crate::spec::NodeSpec;
use crate::status::Posted;

/// Namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// Port the kubelet would serve on; reported in `daemonEndpoints`.
const KUBELET_PORT: i32 = 10250;

/// The node's labels: the spec's, plus the ones every kubelet sets unless
/// told otherwise.
pub fn node_labels(spec: &NodeSpec) -> BTreeMap<String, String> {
    let mut labels = spec.labels.clone();
    for (k, v) in [
        ("kubernetes.io/hostname", spec.name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
    ] {
        labels.entry(k.to_string()).or_insert_with(|| v.to_string());
    }
    labels
}

/// `status.capacity`: the spec's, or a small default VM, always with a pod
/// limit.
pub fn capacity(spec: &NodeSpec) -> BTreeMap<String, Quantity> {
    let mut cap = spec.capacity.clone();
    if cap.is_empty() {
        for (k, v) in [
            ("cpu", "2"),
            ("memory", "8Gi"),
            ("ephemeral-storage", "50Gi"),
        ] {
            cap.insert(k.to_string(), Quantity(v.to_string()));
        }
    }
    cap.entry("pods".to_string())
        .or_insert_with(|| Quantity("110".to_string()));
    cap
}

/// `status.allocatable`: the spec's, or the capacity.
pub fn allocatable(spec: &NodeSpec) -> BTreeMap<String, Quantity> {
    if spec.allocatable.is_empty() {
        capacity(spec)
    } else {
        spec.allocatable.clone()
    }
}

/// `status.addresses`: the spec's, always with a `Hostname`.
pub fn addresses(spec: &NodeSpec) -> Vec<NodeAddress> {
    let mut out = spec.addresses.clone();
    if !out.iter().any(|a| a.type_ == "Hostname") {
        out.push(NodeAddress {
            type_: "Hostname".to_string(),
            address: spec.name.clone(),
        });
    }
    out
}

/// `status.nodeInfo`. IDs are derived from the node name so that a
/// re-registered node reports the same machine.
pub fn node_info(spec: &NodeSpec, cfg: &SimConfig) -> NodeSystemInfo {
    let id = format!("{:016x}", crate::pods::fnv(&spec.name));
    let version = spec
        .kubelet_version
        .clone()
        .unwrap_or_else(|| cfg.kubelet_version.clone());
    NodeSystemInfo {
        architecture: node_labels(spec)["kubernetes.io/arch"].clone(),
        boot_id: format!("{:016x}", crate::pods::fnv(&spec.provider_id)),
        container_runtime_version: "sim://nodesim".to_string(),
        kernel_version: "6.1.0-nodesim".to_string(),
        kube_proxy_version: version.clone(),
        kubelet_version: version,
        machine_id: id.clone(),
        operating_system: "linux".to_string(),
        os_image: "trellis nodesim".to_string(),
        system_uuid: id,
    }
}

fn conditions(posted: &Posted) -> Vec<NodeCondition> {
    posted
        .conditions
        .iter()
        .map(|c| NodeCondition {
            type_: c.condition.type_.clone(),
            status: c.condition.status.as_str().to_string(),
            reason: Some(c.condition.reason.clone()),
            message: Some(c.condition.message.clone()),
            last_transition_time: Some(Time(c.last_transition)),
            last_heartbeat_time: Some(Time(c.last_heartbeat)),
        })
        .collect()
}

/// The node status, complete or only the parts that change after
/// registration (conditions and volumes).
pub fn node_status(spec: &NodeSpec, cfg: &SimConfig, posted: &Posted, full: bool) -> NodeStatus {
    let volumes = &posted.volumes;
    let mut status = NodeStatus {
        conditions: Some(conditions(posted)),
        volumes_attached: Some(
            volumes
                .iter()
                .map(|v| AttachedVolume {
                    name: v.clone(),
                    device_path: String::new(),
                })
                .collect(),
        ),
        volumes_in_use: Some(volumes.clone()),
        ..NodeStatus::default()
    };
    if full {
        status.capacity = Some(capacity(spec));
        status.allocatable = Some(allocatable(spec));
        status.addresses = Some(addresses(spec));
        status.node_info = Some(node_info(spec, cfg));
        status.daemon_endpoints = Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint { port: KUBELET_PORT }),
        });
        status.phase = None;
    }
    status
}

/// The Node a kubelet registers.
pub fn node_object(spec: &NodeSpec, cfg: &SimConfig, posted: &Posted) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(spec.name.clone()),
            labels: Some(node_labels(spec)),
            annotations: (!spec.annotations.is_empty()).then(|| spec.annotations.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(K8sNodeSpec {
            provider_id: Some(spec.provider_id.clone()),
            taints: (!spec.taints.is_empty()).then(|| spec.taints.clone()),
            ..K8sNodeSpec::default()
        }),
        status: Some(node_status(spec, cfg, posted, true)),
    }
}

/// A strategic merge patch of the status subresource. Conditions merge by
/// type, so conditions other writers own (MCM's `Terminating`,
/// `InPlaceUpdate`, ...) survive; the volume lists are replaced whole.
pub fn status_patch(spec: &NodeSpec, cfg: &SimConfig, posted: &Posted, full: bool) -> Value {
    json!({ "status": node_status(spec, cfg, posted, full) })
}

/// The node's Lease, owned by the Node so that deleting the Node deletes it.
pub fn lease_object(node: &str, node_uid: &str, cfg: &SimConfig, now: Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some(LEASE_NAMESPACE.to_string()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_string(),
                kind: "Node".to_string(),
                name: node.to_string(),
                uid: node_uid.to_string(),
                controller: None,
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_string()),
            lease_duration_seconds: Some(cfg.lease_duration_seconds),
            renew_time: Some(MicroTime(now)),
            ..LeaseSpec::default()
        }),
    }
}

/// A merge patch renewing a lease. It also restates holder and duration, so
/// a lease someone else edited is taken back.
pub fn lease_renewal(node: &str, cfg: &SimConfig, now: Timestamp) -> Value {
    json!({
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": cfg.lease_duration_seconds,
            "renewTime": MicroTime(now),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{Condition, ConditionStatus, PostedCondition};

    fn posted() -> Posted {
        let at = Timestamp::from_second(1_700_000_000).unwrap();
        Posted {
            conditions: vec![PostedCondition {
                condition: Condition {
                    type_: "Ready".into(),
                    status: ConditionStatus::True,
                    reason: "KubeletReady".into(),
                    message: "ok".into(),
                },
                last_transition: at,
                last_heartbeat: at,
            }],
            volumes: vec!["kubernetes.io/csi/d^v".into()],
            at,
        }
    }

    #[test]
    fn registered_node_carries_spec_and_defaults() {
        let mut spec = NodeSpec::new("n1", "local:///default/abc");
        spec.labels
            .insert("kubernetes.io/arch".into(), "arm64".into());
        spec.addresses.push(NodeAddress {
            type_: "InternalIP".into(),
            address: "10.250.0.1".into(),
        });
        let node = node_object(&spec, &SimConfig::default(), &posted());
        let labels = node.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["kubernetes.io/hostname"], "n1");
        assert_eq!(labels["kubernetes.io/arch"], "arm64");
        assert_eq!(
            node.spec.as_ref().unwrap().provider_id.as_deref(),
            Some("local:///default/abc")
        );
        let status = node.status.as_ref().unwrap();
        let cap = status.capacity.as_ref().unwrap();
        assert_eq!(cap["pods"].0, "110");
        assert_eq!(cap["cpu"].0, "2");
        assert_eq!(status.allocatable, status.capacity);
        let addrs: Vec<&str> = status
            .addresses
            .iter()
            .flatten()
            .map(|a| a.type_.as_str())
            .collect();
        assert_eq!(addrs, ["InternalIP", "Hostname"]);
        assert_eq!(status.node_info.as_ref().unwrap().architecture, "arm64");
        assert_eq!(status.volumes_in_use.as_ref().unwrap().len(), 1);
    }

    #[test]
    fn kubelet_version_comes_from_the_spec_or_the_simulator() {
        let cfg = SimConfig::default();
        let mut spec = NodeSpec::new("n1", "p");
        assert_eq!(node_info(&spec, &cfg).kubelet_version, cfg.kubelet_version);
        spec.kubelet_version = Some("v1.31.2".into());
        let info = node_info(&spec, &cfg);
        assert_eq!(info.kubelet_version, "v1.31.2");
        assert_eq!(info.kube_proxy_version, "v1.31.2");
    }

    #[test]
    fn partial_status_patch_has_only_conditions_and_volumes() {
        let spec = NodeSpec::new("n1", "p");
        let patch = status_patch(&spec, &SimConfig::default(), &posted(), false);
        let keys: Vec<&String> = patch["status"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["conditions", "volumesAttached", "volumesInUse"]);
        assert_eq!(patch["status"]["conditions"][0]["status"], "True");
    }

    #[test]
    fn lease_is_owned_by_its_node_and_renewal_has_microseconds() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let lease = lease_object("n1", "uid-1", &SimConfig::default(), now);
        assert_eq!(lease.metadata.namespace.as_deref(), Some(LEASE_NAMESPACE));
        assert_eq!(lease.metadata.owner_references.unwrap()[0].uid, "uid-1");
        let spec = lease.spec.unwrap();
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
        let patch = lease_renewal("n1", &SimConfig::default(), now);
        assert_eq!(
            patch["spec"]["renewTime"],
            json!("2023-11-14T22:13:20.000000Z")
        );
    }
}
