//! The `MachineHealthCheck` (cluster.x-k8s.io/v1beta1): which Machines are
//! unhealthy, and whether their owners may remediate them.
//!
//! trellis extension: `status.unhealthyMachines` lists the verdicts behind
//! `currentHealthy`. Upstream's health check patches `HealthCheckSucceeded`
//! and `OwnerRemediated` onto each Machine's status itself; in trellis the
//! Machine controller is the only writer of Machine status (seed 004), so
//! the health check publishes its verdicts here and the Machine controller
//! mirrors them into those same conditions.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Condition, is_zero, null_as_default};

/// Desired state of a MachineHealthCheck.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "MachineHealthCheck",
    namespaced,
    status = "MachineHealthCheckStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "mhc",
    shortname = "mhcs",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta1"),
    label("cluster.x-k8s.io/provider", "cluster-api"),
    doc = "Marks unhealthy Machines for remediation by their owners.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterName",
        description = "Cluster"
    ),
    printcolumn(
        name = "ExpectedMachines",
        type_ = "integer",
        json_path = ".status.expectedMachines",
        description = "Number of machines currently monitored"
    ),
    printcolumn(
        name = "MaxUnhealthy",
        type_ = "string",
        json_path = ".spec.maxUnhealthy",
        description = "Maximum number of unhealthy machines allowed"
    ),
    printcolumn(
        name = "CurrentHealthy",
        type_ = "integer",
        json_path = ".status.currentHealthy",
        description = "Current observed healthy machines"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of MachineHealthCheck"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineHealthCheckSpec {
    #[serde(default)]
    pub cluster_name: String,
    /// The Machines to check (must not be empty).
    #[serde(default, deserialize_with = "null_as_default")]
    pub selector: LabelSelector,
    /// Node conditions that make a Machine unhealthy once they have held
    /// for their timeout (any one suffices).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhealthy_conditions: Vec<UnhealthyCondition>,
    /// Remediation stops while more Machines than this are unhealthy
    /// (default `100%`; a percentage rounds down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::int_or_string_schema")]
    pub max_unhealthy: Option<IntOrString>,
    /// `[min-max]`: remediation happens only while the number of unhealthy
    /// Machines is in this range; wins over `maxUnhealthy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy_range: Option<String>,
    /// How long a Machine may go without a Node (default 10m; 0 = never
    /// unhealthy for that).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::duration_schema")]
    pub node_startup_timeout: Option<String>,
    /// External remediation (accepted; trellis remediates through the
    /// owner only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation_template: Option<ObjectReference>,
}

/// A Node condition that makes a Machine unhealthy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    /// Go duration.
    #[schemars(schema_with = "super::common::duration_schema")]
    pub timeout: String,
}

/// What the MachineHealthCheck controller observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineHealthCheckStatus {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub expected_machines: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub current_healthy: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub remediations_allowed: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The checked Machines, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// trellis: the Machines found unhealthy and why, sorted by name; the
    /// Machine controller mirrors them into `HealthCheckSucceeded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhealthy_machines: Vec<UnhealthyMachine>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One unhealthy Machine and why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyMachine {
    pub name: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}
