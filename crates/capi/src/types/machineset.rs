//! The `MachineSet` (cluster.x-k8s.io/v1beta1): keeps a number of Machines
//! from one template, cloning the template's bootstrap and infrastructure
//! templates for each Machine.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Condition, is_zero, null_as_default};
use super::machine::MachineTemplateSpec;

/// Desired state of a MachineSet.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "MachineSet",
    namespaced,
    status = "MachineSetStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "ms",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta1"),
    label("cluster.x-k8s.io/provider", "cluster-api"),
    doc = "Keeps a number of Machines created from one template.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterName",
        description = "Cluster"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Total number of machines desired by this machineset",
        priority = 10
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "Total number of non-terminated machines targeted by this machineset"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Total number of ready machines targeted by this machineset."
    ),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableReplicas",
        description = "Total number of available machines (ready for at least minReadySeconds)"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of MachineSet"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.template.spec.version",
        description = "Kubernetes version associated with this MachineSet"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    /// The Cluster of the set (immutable).
    #[serde(default)]
    pub cluster_name: String,
    /// How many Machines to keep (defaulted to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// How long a Machine's Node must be Ready to count as available.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_ready_seconds: i32,
    /// Which Machines go first on scale-down: `Random` (the default),
    /// `Newest` or `Oldest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_policy: Option<String>,
    /// The Machines of the set; must match the template's labels.
    #[serde(default, deserialize_with = "null_as_default")]
    pub selector: LabelSelector,
    /// What each Machine looks like.
    #[serde(default, deserialize_with = "null_as_default")]
    pub template: MachineTemplateSpec,
    /// How Machines are named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_naming_strategy: Option<MachineNamingStrategy>,
}

/// How Machines of a set are named (`{{ .machineSet.name }}-{{ .random }}`
/// by default).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineNamingStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

/// What the MachineSet controller observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetStatus {
    /// The selector as a string, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Machines of the set, deleting ones included.
    #[serde(default)]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fully_labeled_replicas: i32,
    /// Machines whose Node is Ready.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready_replicas: i32,
    /// Ready for at least `minReadySeconds`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub available_replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// `deletePolicy` values.
pub mod delete_policy {
    pub const RANDOM: &str = "Random";
    pub const NEWEST: &str = "Newest";
    pub const OLDEST: &str = "Oldest";
    pub const ALL: [&str; 3] = [RANDOM, NEWEST, OLDEST];
}
