//! Builders for test fixtures (`machine("m1").with_data_secret("s")`), so
//! table tests read as the situations they describe. Used by this crate's
//! unit tests and by the providers' and trellis's tests.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use crate::types::labels;
use crate::types::{Cluster, ClusterSpec, Machine, MachineSpec};

/// A fixed instant tests count from.
pub fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000, 0).expect("a valid timestamp")
}

/// `t0` plus `s` seconds.
pub fn at(s: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::seconds(s)
}

/// A reference of the test providers' kinds.
pub fn reference(api_version: &str, kind: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.to_string()),
        kind: Some(kind.to_string()),
        name: Some(name.to_string()),
        namespace: Some("default".to_string()),
        ..ObjectReference::default()
    }
}

pub const BOOTSTRAP_API: &str = "bootstrap.cluster.x-k8s.io/v1beta1";
pub const INFRA_API: &str = "infrastructure.cluster.x-k8s.io/v1beta1";

/// A Machine `name` of Cluster `c1` in `default`, with its finalizer, a
/// TrellisConfig and a LocalMachine of the same name.
pub fn machine(name: &str) -> Machine {
    let mut m = Machine::new(
        name,
        MachineSpec {
            cluster_name: "c1".into(),
            bootstrap: crate::types::Bootstrap {
                config_ref: Some(reference(BOOTSTRAP_API, "TrellisConfig", name)),
                data_secret_name: None,
            },
            infrastructure_ref: reference(INFRA_API, "LocalMachine", name),
            version: Some("v1.31.2".into()),
            ..MachineSpec::default()
        },
    );
    m.metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: Some("default".into()),
        uid: Some(format!("uid-{name}")),
        generation: Some(1),
        resource_version: Some("1".into()),
        creation_timestamp: Some(mcm::time::to_time(t0())),
        finalizers: Some(vec![labels::MACHINE_FINALIZER.into()]),
        labels: Some(BTreeMap::from([(labels::CLUSTER_NAME.into(), "c1".into())])),
        ..ObjectMeta::default()
    };
    m
}

/// Cluster `c1` in `default`.
pub fn cluster() -> Cluster {
    let mut c = Cluster::new("c1", ClusterSpec::default());
    c.metadata.namespace = Some("default".into());
    c.metadata.uid = Some("uid-c1".into());
    c
}

/// A provider object with `data` (spec/status) as the API would return it.
pub fn provider_object(api_version: &str, kind: &str, name: &str, data: Value) -> DynamicObject {
    let mut o: DynamicObject = serde_json::from_value(json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{kind}-{name}"), "resourceVersion": "7"},
    }))
    .expect("a valid object");
    o.data = data;
    o
}

/// A Node with a providerID and the given Ready status.
pub fn node(name: &str, provider_id: &str, ready: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-node-{name}")),
            resource_version: Some("3".into()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id.into()),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: ready.into(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
    }
}

/// Sets a deletion timestamp.
pub fn deleting<K: kube::Resource>(mut obj: K, at: DateTime<Utc>) -> K {
    obj.meta_mut().deletion_timestamp = Some(mcm::time::to_time(at));
    obj
}
