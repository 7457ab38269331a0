//! The provider contracts as the core controllers read them
//! (`docs/book/src/developer/providers/contracts/`): which fields of a
//! bootstrap config, an infrastructure machine or an infrastructure cluster
//! mean what. The core never knows a provider's kinds; it reads these
//! fields out of unstructured objects, so any provider speaking the v1beta1
//! contract works.
//!
//! | provider object | read by the core |
//! |---|---|
//! | BootstrapConfig | `status.ready`, `status.dataSecretName`, `status.failureReason/failureMessage`, `status.conditions[Ready]` |
//! | InfraMachine | `spec.providerID`, `status.ready`, `status.addresses`, `spec.failureDomain`, `status.failureReason/failureMessage`, `status.conditions[Ready]` |
//! | InfraCluster | `spec.controlPlaneEndpoint`, `status.ready`, `status.failureDomains`, `status.failureReason/failureMessage` |
//!
//! Malformed fields read as absent: a provider's bug must not crash the
//! core, and the object's own controller is the one to complain.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::DynamicObject;
use serde_json::Value;

use crate::types::{ApiEndpoint, Condition, FailureDomainSpec, MachineAddress};

fn field<'a>(obj: &'a DynamicObject, pointer: &str) -> Option<&'a Value> {
    obj.data.pointer(pointer)
}

fn string(obj: &DynamicObject, pointer: &str) -> Option<String> {
    field(obj, pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// `status.ready` is `true`.
pub fn ready(obj: &DynamicObject) -> bool {
    field(obj, "/status/ready").and_then(Value::as_bool) == Some(true)
}

/// `status.dataSecretName` of a bootstrap config, if set.
pub fn data_secret_name(obj: &DynamicObject) -> Option<String> {
    string(obj, "/status/dataSecretName")
}

/// `spec.providerID` of an infrastructure machine, if set.
pub fn provider_id(obj: &DynamicObject) -> Option<String> {
    string(obj, "/spec/providerID")
}

/// `spec.failureDomain` of an infrastructure machine, if set.
pub fn failure_domain(obj: &DynamicObject) -> Option<String> {
    string(obj, "/spec/failureDomain")
}

/// `status.addresses`, if present and well-formed.
pub fn addresses(obj: &DynamicObject) -> Option<Vec<MachineAddress>> {
    field(obj, "/status/addresses").and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// `status.failureReason` and `status.failureMessage`.
pub fn failure(obj: &DynamicObject) -> (Option<String>, Option<String>) {
    (
        string(obj, "/status/failureReason"),
        string(obj, "/status/failureMessage"),
    )
}

/// `status.conditions`, the well-formed ones.
pub fn conditions(obj: &DynamicObject) -> Vec<Condition> {
    field(obj, "/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| serde_json::from_value(c.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `spec.controlPlaneEndpoint` of an infrastructure cluster, if valid.
pub fn control_plane_endpoint(obj: &DynamicObject) -> Option<ApiEndpoint> {
    field(obj, "/spec/controlPlaneEndpoint")
        .and_then(|v| serde_json::from_value::<ApiEndpoint>(v.clone()).ok())
        .filter(ApiEndpoint::is_valid)
}

/// `status.failureDomains` of an infrastructure cluster (the v1beta1 map).
pub fn failure_domains(obj: &DynamicObject) -> BTreeMap<String, FailureDomainSpec> {
    field(obj, "/status/failureDomains")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// Whether the object is being deleted.
pub fn deleting(obj: &DynamicObject) -> bool {
    obj.metadata.deletion_timestamp.is_some()
}

/// `Kind` and `group` of a reference (`apiVersion` is `group/version`,
/// or just `version` for the core group).
pub fn group_kind(r: &ObjectReference) -> (String, String) {
    let api_version = r.api_version.as_deref().unwrap_or_default();
    let group = api_version
        .rsplit_once('/')
        .map(|(g, _)| g)
        .unwrap_or_default();
    (group.to_string(), r.kind.clone().unwrap_or_default())
}

/// `Kind.group`, as `cloned-from-groupkind` and messages spell it.
pub fn group_kind_string(r: &ObjectReference) -> String {
    let (group, kind) = group_kind(r);
    if group.is_empty() {
        kind
    } else {
        format!("{kind}.{group}")
    }
}

/// The version a provider's CRD serves for a contract
/// (`util/contract/contract.go`): the CRD's label
/// `cluster.x-k8s.io/<contract>` lists versions joined by `_`
/// (`v1alpha4_v1beta1`); the last one the CRD still serves wins. A CRD
/// without the label does not implement the contract.
pub fn contract_version(
    crd_labels: &BTreeMap<String, String>,
    contract: &str,
    served: &[String],
) -> Result<String, String> {
    let key = format!("{}{contract}", crate::types::labels::CONTRACT_LABEL_PREFIX);
    let Some(list) = crd_labels.get(&key) else {
        return Err(format!(
            "its CRD has no label {key:?}, so it does not implement the Cluster API {contract} contract"
        ));
    };
    list.split('_')
        .filter(|v| served.iter().any(|s| s == v))
        .max_by(|a, b| kube_version_order(a, b))
        .map(str::to_string)
        .ok_or_else(|| {
            format!("its CRD's label {key}={list:?} names no version the CRD serves ({served:?})")
        })
}

/// Kubernetes' version priority: GA > beta > alpha, higher numbers first
/// within each (`v1` > `v1beta2` > `v1beta1` > `v1alpha1`).
pub fn kube_version_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(v: &str) -> (u32, u32, u32) {
        let Some(rest) = v.strip_prefix('v') else {
            return (0, 0, 0);
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major = digits.parse().unwrap_or(0);
        let tail = &rest[digits.len()..];
        let (stage, minor) = if tail.is_empty() {
            (3, 0)
        } else if let Some(n) = tail.strip_prefix("beta") {
            (2, n.parse().unwrap_or(0))
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (1, n.parse().unwrap_or(0))
        } else {
            (0, 0)
        };
        (stage, major, minor)
    }
    key(a).cmp(&key(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(data: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "LocalMachine",
            "metadata": {"name": "m1"},
        }))
        .map(|o: DynamicObject| DynamicObject { data, ..o })
        .unwrap()
    }

    #[test]
    fn reads_the_contract_fields() {
        let o = obj(json!({
            "spec": {"providerID": "local:///z/1", "failureDomain": "z"},
            "status": {
                "ready": true,
                "dataSecretName": "m1",
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "failureReason": "CreateError",
                "conditions": [{"type": "Ready", "status": "True"}, {"bad": 1}],
                "failureDomains": {"z": {"controlPlane": true}},
            }
        }));
        assert!(ready(&o));
        assert_eq!(data_secret_name(&o).as_deref(), Some("m1"));
        assert_eq!(provider_id(&o).as_deref(), Some("local:///z/1"));
        assert_eq!(failure_domain(&o).as_deref(), Some("z"));
        assert_eq!(addresses(&o).unwrap()[0].address, "10.0.0.1");
        assert_eq!(failure(&o), (Some("CreateError".into()), None));
        assert_eq!(conditions(&o).len(), 1);
        assert!(failure_domains(&o)["z"].control_plane);
    }

    #[test]
    fn malformed_fields_read_as_absent() {
        let o = obj(json!({
            "spec": {"providerID": 5, "controlPlaneEndpoint": {"host": "", "port": 0}},
            "status": {"ready": "yes", "addresses": "nope", "conditions": "x"}
        }));
        assert!(!ready(&o));
        assert_eq!(provider_id(&o), None);
        assert_eq!(addresses(&o), None);
        assert!(conditions(&o).is_empty());
        assert_eq!(control_plane_endpoint(&o), None);
        assert!(!ready(&obj(Value::Null)));
    }

    #[test]
    fn contract_versions() {
        let labels =
            |v: &str| BTreeMap::from([("cluster.x-k8s.io/v1beta1".to_string(), v.to_string())]);
        let served = |vs: &[&str]| vs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        type Row = (
            BTreeMap<String, String>,
            Vec<String>,
            Result<&'static str, &'static str>,
        );
        let rows: Vec<Row> = vec![
            (labels("v1beta1"), served(&["v1beta1"]), Ok("v1beta1")),
            (
                labels("v1alpha4_v1beta1"),
                served(&["v1alpha4", "v1beta1"]),
                Ok("v1beta1"),
            ),
            (
                labels("v1alpha3_v1alpha4"),
                served(&["v1alpha3", "v1alpha4"]),
                Ok("v1alpha4"),
            ),
            (
                labels("v1beta1"),
                served(&["v1beta2"]),
                Err("names no version"),
            ),
            (BTreeMap::new(), served(&["v1beta1"]), Err("has no label")),
        ];
        for (l, s, want) in rows {
            match (contract_version(&l, "v1beta1", &s), want) {
                (Ok(v), Ok(w)) => assert_eq!(v, w),
                (Err(e), Err(w)) => assert!(e.contains(w), "{e}"),
                (got, want) => panic!("{l:?} {s:?}: got {got:?}, want {want:?}"),
            }
        }
        use std::cmp::Ordering::*;
        assert_eq!(kube_version_order("v1", "v1beta2"), Greater);
        assert_eq!(kube_version_order("v1beta2", "v1beta10"), Less);
        assert_eq!(kube_version_order("v1alpha1", "v1beta1"), Less);
        assert_eq!(kube_version_order("v2", "v1"), Greater);
    }

    #[test]
    fn group_kinds() {
        let r = ObjectReference {
            api_version: Some("bootstrap.cluster.x-k8s.io/v1beta1".into()),
            kind: Some("TrellisConfigTemplate".into()),
            ..Default::default()
        };
        assert_eq!(
            group_kind_string(&r),
            "TrellisConfigTemplate.bootstrap.cluster.x-k8s.io"
        );
        let core = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Secret".into()),
            ..Default::default()
        };
        assert_eq!(group_kind(&core), (String::new(), "Secret".into()));
    }
}
