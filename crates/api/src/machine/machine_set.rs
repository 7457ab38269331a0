//! The `MachineSet` resource: keeps a number of machines from one template.

use apimachinery::gojson::{is_default, is_zero_i32, null_as_default};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::types::{
    ClassSpec, ConditionStatus, LastOperation, MachineSummary, MachineTemplateSpec, string_enum,
};

/// Desired state of a machine set.
// Clippy mistakes the repeated `type_` keys of separate `printcolumn(...)`
// groups for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machine.sapcloud.io",
    version = "v1alpha1",
    kind = "MachineSet",
    namespaced,
    status = "MachineSetStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "mcs",
    doc = "Keeps a given number of machines created from one template.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Number of desired machines."
    ),
    printcolumn(
        name = "Current",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "Number of machines the set owns."
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Number of running machines."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the machine set was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    /// Number of machines to keep. Always written, because the scale
    /// subresource needs the field to exist.
    #[serde(default)]
    pub replicas: i32,
    /// Selects the machines the set owns; must match the template's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Unused by the controllers; kept so that upstream objects round-trip.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    pub machine_class: ClassSpec,
    /// Template the machines are created from.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    pub template: MachineTemplateSpec,
    /// Carried over from Kubernetes' ReplicaSet; MCM does not use it when
    /// deciding availability.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub min_ready_seconds: i32,
    /// How many failed machines the set preserves automatically for analysis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_preserve_failed_machine_max: Option<i32>,
}

string_enum! {
    /// Type of a machine set condition.
    MachineSetConditionType {
        /// Creating or deleting machines failed (reasons `FailedCreate`,
        /// `FailedDelete`).
        ReplicaFailure,
        /// The safety controller froze the set because it owns too many
        /// machines.
        Frozen,
    }
}

/// A condition of a machine set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetCondition {
    /// Which condition this is.
    #[serde(rename = "type")]
    pub type_: MachineSetConditionType,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// One-word reason of the last change.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable details.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Observed state of a machine set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetStatus {
    /// Number of machines the set owns, terminating ones included.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub replicas: i32,
    /// Number of owned machines whose labels match the template's.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub fully_labeled_replicas: i32,
    /// Number of `Running` machines.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub ready_replicas: i32,
    /// Number of `Running` or `Available` machines.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub available_replicas: i32,
    /// Number of failed machines kept because they are preserved.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub preserved_failed_replicas: i32,
    /// The generation the controller last acted on.
    #[serde(default, skip_serializing_if = "apimachinery::gojson::is_zero_i64")]
    pub observed_generation: i64,
    /// Conditions; upstream names this field `machineSetCondition`.
    #[serde(
        rename = "machineSetCondition",
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub conditions: Vec<MachineSetCondition>,
    /// The last operation of the set.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    pub last_operation: LastOperation,
    /// Machines whose last operation failed. Upstream distinguishes an absent
    /// list from an empty one, so this stays an `Option`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_machines: Option<Vec<MachineSummary>>,
    /// Number of failed machines currently auto-preserved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_preserve_failed_machine_count: Option<i32>,
}

/// Reasons of the `ReplicaFailure` condition.
pub mod machine_set_reasons {
    /// Creating machines failed.
    pub const FAILED_CREATE: &str = "FailedCreate";
    /// Deleting machines failed.
    pub const FAILED_DELETE: &str = "FailedDelete";
}
