//! The `Cluster` (cluster.x-k8s.io/v1beta1): the root every other object
//! names by `clusterName`, with a reference to its infrastructure.
//!
//! Topology (ClusterClass) and the cluster network are carried unmodelled
//! so that upstream manifests apply; trellis does not act on them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ApiEndpoint, Condition, FailureDomainSpec, is_false};

/// Desired state of a Cluster.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "Cluster",
    namespaced,
    status = "ClusterStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "cl",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta1"),
    label("cluster.x-k8s.io/provider", "cluster-api"),
    doc = "A Kubernetes cluster: its infrastructure, control plane and the Machines that name it.",
    printcolumn(
        name = "ClusterClass",
        type_ = "string",
        json_path = ".spec.topology.class",
        description = "ClusterClass of this Cluster, empty if the Cluster is not using a ClusterClass"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Cluster status such as Pending/Provisioning/Provisioned/Deleting/Failed"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of Cluster"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.topology.version",
        description = "Kubernetes version associated with this Cluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// While true no controller acts on the Cluster or its objects.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Carried, not acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::preserve_unknown_object")]
    pub cluster_network: Option<serde_json::Value>,
    /// Where the cluster's API server listens; copied from the
    /// infrastructure cluster when unset.
    #[serde(default, skip_serializing_if = "ApiEndpoint::is_zero")]
    pub control_plane_endpoint: ApiEndpoint,
    /// The control-plane provider's object, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<ObjectReference>,
    /// The infrastructure provider's cluster object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ObjectReference>,
    /// Carried, not acted on (ClusterClass topology).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::preserve_unknown_object")]
    pub topology: Option<serde_json::Value>,
}

/// What the Cluster controller observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failure_domains: BTreeMap<String, FailureDomainSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// `Pending`, `Provisioning`, `Provisioned`, `Deleting` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default)]
    pub infrastructure_ready: bool,
    #[serde(default)]
    pub control_plane_ready: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Cluster {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// Upstream's pause rule: the Cluster's `spec.paused`.
    pub fn paused(&self) -> bool {
        self.spec.paused
    }
}
