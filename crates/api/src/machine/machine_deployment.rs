//! The `MachineDeployment` resource: rolls machine sets out and back.

use apimachinery::gojson::{
    empty_as_none, is_default, is_false, is_zero_i32, is_zero_i64, null_as_default,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::types::{ConditionStatus, MachineSummary, MachineTemplateSpec, string_enum};

/// Desired state of a machine deployment.
// Clippy mistakes the repeated `type_` keys of separate `printcolumn(...)`
// groups for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machine.sapcloud.io",
    version = "v1alpha1",
    kind = "MachineDeployment",
    namespaced,
    status = "MachineDeploymentStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "mcd",
    doc = "Declarative updates of machines through machine sets.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Number of running machines."
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Number of desired machines."
    ),
    printcolumn(
        name = "Up-to-date",
        type_ = "integer",
        json_path = ".status.updatedReplicas",
        description = "Number of machines created from the current template."
    ),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableReplicas",
        description = "Number of available machines."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the machine deployment was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentSpec {
    /// Number of machines wanted. Always written, because the scale
    /// subresource needs the field to exist.
    #[serde(default)]
    pub replicas: i32,
    /// Selects the machine sets and machines the deployment owns; must match
    /// the template's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Template of the machines. Changes to labels, annotations or the class
    /// name roll out a new machine set; node template and timeouts are
    /// updated in place.
    #[serde(default, deserialize_with = "null_as_default")]
    pub template: MachineTemplateSpec,
    /// How old machines are replaced.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    pub strategy: MachineDeploymentStrategy,
    /// Carried over from Kubernetes' Deployment.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub min_ready_seconds: i32,
    /// How many old machine sets to keep for rollback; absent keeps all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// While true, template changes are not rolled out (scaling still is).
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Deprecated: a rollback request, cleared once done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_to: Option<RollbackConfig>,
    /// Seconds without progress after which `Progressing` turns False with
    /// reason `ProgressDeadlineExceeded`; absent means no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
    /// How many failed machines are preserved automatically for analysis;
    /// copied to the machine sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_preserve_failed_machine_max: Option<i32>,
}

string_enum! {
    /// How a deployment replaces machines.
    MachineDeploymentStrategyType {
        /// Delete all old machines, then create the new ones.
        Recreate,
        /// Replace machines gradually within `maxSurge`/`maxUnavailable`.
        RollingUpdate,
        /// Update the existing nodes without replacing their VMs.
        InPlaceUpdate,
    }
}

string_enum! {
    /// Who chooses the nodes of an in-place update.
    OrchestrationType {
        /// The controller selects nodes, within `maxUnavailable`.
        Auto,
        /// The operator labels nodes `selected-for-update`.
        Manual,
    }
}

/// How a deployment replaces machines.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentStrategy {
    /// The strategy; defaulted to `RollingUpdate`.
    #[serde(
        rename = "type",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_as_none"
    )]
    pub type_: Option<MachineDeploymentStrategyType>,
    /// Parameters of `RollingUpdate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateMachineDeployment>,
    /// Parameters of `InPlaceUpdate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update: Option<InPlaceUpdateMachineDeployment>,
}

/// Bounds of a rolling update. Each is a count or a percentage of
/// `spec.replicas` such as `"25%"`; surge percentages round up,
/// unavailability percentages round down.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateMachineDeployment {
    /// How many machines may be missing from `spec.replicas` during the update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// How many machines may exist beyond `spec.replicas` during the update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
}

/// Bounds and mode of an in-place update.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateMachineDeployment {
    /// How many nodes may be updating at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// How far the new machine set may grow beyond the moved machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Whether the controller or the operator selects the nodes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_as_none"
    )]
    pub orchestration_type: Option<OrchestrationType>,
}

/// A rollback request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackConfig {
    /// Revision to return to; 0 means the previous one.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub revision: i64,
}

string_enum! {
    /// Type of a machine deployment condition.
    MachineDeploymentConditionType {
        /// Enough machines are available.
        Available,
        /// A rollout is making progress, finished, or stalled.
        Progressing,
        /// The new machine set failed to create or delete machines.
        ReplicaFailure,
        /// The safety controller froze one of the machine sets.
        Frozen,
    }
}

/// A condition of a machine deployment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentCondition {
    /// Which condition this is.
    #[serde(rename = "type")]
    pub type_: MachineDeploymentConditionType,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// When the condition was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// One-word reason of the last change; see [`machine_deployment_reasons`].
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable details.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Observed state of a machine deployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentStatus {
    /// The generation the controller last acted on.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Sum of the machine sets' `status.replicas`.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub replicas: i32,
    /// Machines owned by the newest machine set.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_replicas: i32,
    /// Running machines.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub ready_replicas: i32,
    /// Available machines.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub available_replicas: i32,
    /// Failed machines kept because they are preserved.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub preserved_failed_replicas: i32,
    /// Machines still missing for full availability.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub unavailable_replicas: i32,
    /// Conditions.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub conditions: Vec<MachineDeploymentCondition>,
    /// Bumped on a machine set name clash so that the next name differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Failed machines of all the deployment's machine sets.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub failed_machines: Vec<MachineSummary>,
}

/// Reasons of machine deployment conditions, as upstream spells them.
pub mod machine_deployment_reasons {
    /// `Available` True.
    pub const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
    /// `Available` False.
    pub const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
    /// `Progressing`: a new machine set was created.
    pub const NEW_MACHINE_SET_CREATED: &str = "NewMachineSetCreated";
    /// `Progressing`: an existing machine set matches the template.
    pub const FOUND_NEW_MACHINE_SET: &str = "FoundNewMachineSet";
    /// `Progressing`: the rollout moved forward.
    pub const MACHINE_SET_UPDATED: &str = "MachineSetUpdated";
    /// `Progressing` True: the rollout completed.
    pub const NEW_MACHINE_SET_AVAILABLE: &str = "NewMachineSetAvailable";
    /// `Progressing` False: no progress within `progressDeadlineSeconds`.
    pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
    /// `Progressing` False: the new machine set could not be created.
    pub const MACHINE_SET_CREATE_ERROR: &str = "MachineSetCreateError";
    /// `Progressing` Unknown: the deployment is paused.
    pub const DEPLOYMENT_PAUSED: &str = "DeploymentPaused";
    /// `Progressing` Unknown: the deployment was resumed.
    pub const DEPLOYMENT_RESUMED: &str = "DeploymentResumed";
    /// `Frozen`: a machine set owns too many machines.
    pub const OVERSHOOTING_REPLICA_COUNT: &str = "OverShootingReplicaCount";
    /// `Frozen` False: the count dropped back.
    pub const UNDERSHOOTING_REPLICA_COUNT: &str = "UnderShootingReplicaCount";
    /// `Frozen`: made consistent with the machine sets' state.
    pub const MACHINE_DEPLOYMENT_STATE_SYNC: &str = "MachineDeploymentStateSync";
}
