//! The `Machine` (cluster.x-k8s.io/v1beta1): one server that is to become a
//! Node, described by references to a bootstrap config and an
//! infrastructure object that providers own.
//!
//! Upstream moved the seed's inline `spec.bootstrap.data` into a Secret
//! named by `spec.bootstrap.dataSecretName` (the data may hold credentials
//! and no longer belongs in an object everyone can read); trellis follows
//! upstream.

use k8s_openapi::api::core::v1::{NodeSystemInfo, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Condition, MachineAddress, null_as_default};

/// Desired state of a Machine.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "Machine",
    namespaced,
    status = "MachineStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "ma",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta1"),
    label("cluster.x-k8s.io/provider", "cluster-api"),
    doc = "A server that is to become a Kubernetes Node: a bootstrap config turns it into a node, an infrastructure object is the server.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterName",
        description = "Cluster"
    ),
    printcolumn(
        name = "NodeName",
        type_ = "string",
        json_path = ".status.nodeRef.name",
        description = "Node name associated with this machine"
    ),
    printcolumn(
        name = "ProviderID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider ID"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Machine status such as Terminating/Pending/Running/Failed etc"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of Machine"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.version",
        description = "Kubernetes version associated with this Machine"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The Cluster this Machine belongs to (same namespace; immutable).
    #[serde(default)]
    pub cluster_name: String,
    /// How the server becomes a node.
    #[serde(default, deserialize_with = "null_as_default")]
    pub bootstrap: Bootstrap,
    /// The infrastructure provider's object that is the server.
    #[serde(default, deserialize_with = "null_as_default")]
    pub infrastructure_ref: ObjectReference,
    /// The Kubernetes version the node should run (`v1.31.2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The server's ID at its provider, copied from the infrastructure
    /// object; equals the Node's `spec.providerID`.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// Where the server should be placed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// Extra conditions that must be True for the Machine to be Ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readiness_gates: Vec<MachineReadinessGate>,
    /// How long a drain may take (Go duration; unset or 0 = no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::duration_schema")]
    pub node_drain_timeout: Option<String>,
    /// How long deletion waits for volumes to detach (unset or 0 = no
    /// limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::duration_schema")]
    pub node_volume_detach_timeout: Option<String>,
    /// How long deletion retries deleting the Node (defaulted to 10s; 0 =
    /// forever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::duration_schema")]
    pub node_deletion_timeout: Option<String>,
}

/// How the server becomes a node: a provider's config object, or a Secret
/// with the data given directly.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// The bootstrap provider's object that produces the data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<ObjectReference>,
    /// The Secret (same namespace, key `value`) that holds the bootstrap
    /// data. Copied from the config's `status.dataSecretName` once it is
    /// ready, or set by the user for data made without a provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// A readiness gate (`MachineReadinessGate`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineReadinessGate {
    pub condition_type: String,
}

/// What the Machine controller observed. It is the only writer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// The Node this Machine became.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<ObjectReference>,
    /// The Node's `status.nodeInfo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeSystemInfo>,
    /// When the phase last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
    /// A terminal problem that needs a person (`InvalidConfiguration`,
    /// `CreateError`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// The terminal problem in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// The server's addresses, copied from the infrastructure object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// Where the Machine is in its life, derived from the other fields
    /// (`Pending`, `Provisioning`, `Provisioned`, `Running`, `Deleting`,
    /// `Deleted`, `Failed`). Never read to make decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// When the control-plane certificates expire (control-plane Machines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificates_expiry_date: Option<Time>,
    /// The bootstrap data Secret is known.
    #[serde(default)]
    pub bootstrap_ready: bool,
    /// The infrastructure object reported ready (latched).
    #[serde(default)]
    pub infrastructure_ready: bool,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Timestamps of the deletion steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<MachineDeletionStatus>,
}

/// When the deletion steps started.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeletionStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_drain_start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for_node_volume_detach_start_time: Option<Time>,
}

/// The template of Machines in MachineSets and MachineDeployments.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineTemplateSpec {
    #[serde(default, skip_serializing_if = "super::common::TemplateMeta::is_empty")]
    pub metadata: super::common::TemplateMeta,
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: MachineSpec,
}

impl Machine {
    /// The Machine's name (empty if it has none, which the API server
    /// never returns).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The Machine's namespace.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// `status`, or an empty one.
    pub fn status_or_default(&self) -> MachineStatus {
        self.status.clone().unwrap_or_default()
    }

    /// A condition of the Machine, if set.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
    }
}
