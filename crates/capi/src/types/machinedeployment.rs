//! The `MachineDeployment` (cluster.x-k8s.io/v1beta1): declarative updates
//! of Machines through MachineSets, rolling them out within `maxSurge` and
//! `maxUnavailable`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Condition, is_false, is_zero, null_as_default};
use super::machine::MachineTemplateSpec;
use super::machineset::MachineNamingStrategy;

/// Desired state of a MachineDeployment.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "MachineDeployment",
    namespaced,
    status = "MachineDeploymentStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "md",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta1"),
    label("cluster.x-k8s.io/provider", "cluster-api"),
    doc = "Declarative updates of Machines through MachineSets.",
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
        description = "Total number of machines desired by this MachineDeployment",
        priority = 10
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "Total number of non-terminated machines targeted by this MachineDeployment"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Total number of ready machines targeted by this MachineDeployment"
    ),
    printcolumn(
        name = "Updated",
        type_ = "integer",
        json_path = ".status.updatedReplicas",
        description = "Total number of non-terminated machines targeted by this deployment that have the desired template spec"
    ),
    printcolumn(
        name = "Unavailable",
        type_ = "integer",
        json_path = ".status.unavailableReplicas",
        description = "Total number of unavailable machines targeted by this MachineDeployment"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "MachineDeployment status such as ScalingUp/ScalingDown/Running/Failed/Unknown"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of MachineDeployment"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.template.spec.version",
        description = "Kubernetes version associated with this MachineDeployment"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentSpec {
    /// The Cluster of the deployment (immutable).
    #[serde(default)]
    pub cluster_name: String,
    /// How many Machines to keep (defaulted to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Roll every Machine out again once this time has passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_after: Option<Time>,
    /// The MachineSets and Machines of the deployment.
    #[serde(default, deserialize_with = "null_as_default")]
    pub selector: LabelSelector,
    /// What each Machine looks like.
    #[serde(default, deserialize_with = "null_as_default")]
    pub template: MachineTemplateSpec,
    /// How old Machines are replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<MachineDeploymentStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_naming_strategy: Option<MachineNamingStrategy>,
    /// How long a new Machine's Node must be Ready to count as available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ready_seconds: Option<i32>,
    /// Old MachineSets kept after a rollout (defaulted to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// While true, template changes are not rolled out.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Deprecated and read by no controller (defaulted to 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
}

/// How a MachineDeployment replaces Machines.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentStrategy {
    /// `RollingUpdate` (the default) or `OnDelete`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<RemediationStrategy>,
}

/// The limits of a rolling update.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdate {
    /// Machines that may exist above the desired count (default 1; a
    /// percentage rounds up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::int_or_string_schema")]
    pub max_surge: Option<IntOrString>,
    /// Machines that may be unavailable below the desired count (default
    /// 0; a percentage rounds down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::int_or_string_schema")]
    pub max_unavailable: Option<IntOrString>,
    /// Copied to the MachineSets' `deletePolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_policy: Option<String>,
}

/// How many unhealthy Machines a MachineSet of the deployment remediates at
/// once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemediationStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::int_or_string_schema")]
    pub max_in_flight: Option<IntOrString>,
}

/// What the MachineDeployment controller observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The selector as a string, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Machines of all its sets.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
    /// Machines of the newest set.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub updated_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub available_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unavailable_replicas: i32,
    /// `ScalingUp`, `ScalingDown`, `Running`, `Failed` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Strategy types.
pub mod strategy {
    pub const ROLLING_UPDATE: &str = "RollingUpdate";
    pub const ON_DELETE: &str = "OnDelete";
}
