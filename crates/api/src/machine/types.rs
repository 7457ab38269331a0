//! The `Machine` resource and the types the other resources share with it:
//! class references, last operations, machine summaries, the per-machine
//! controller configuration and the string enums of phases and operations.

use std::time::Duration;

use apimachinery::gojson::{empty_as_none, is_default, is_false, null_as_default};
use k8s_openapi::api::core::v1::{NodeAddress, NodeCondition, NodeSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::parse_duration;

/// Declares a string enum that serializes as its variant names, like the
/// string aliases with constants that upstream uses.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The value as written on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant)),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| format!("unknown {} {s:?}", stringify!($name)))
            }
        }
    };
}
pub(crate) use string_enum;

string_enum! {
    /// Where a machine is in its life cycle (`status.currentStatus.phase`).
    /// A machine that was never processed has no phase.
    MachinePhase {
        /// The VM exists and the controller waits for its node to join.
        Pending,
        /// The VM exists but no target cluster is configured, so no node is
        /// expected.
        Available,
        /// The node joined and is healthy.
        Running,
        /// Deletion has started.
        Terminating,
        /// The node went unhealthy or disappeared; the health timeout runs.
        Unknown,
        /// A timeout expired; the owning machine set will replace the machine.
        Failed,
        /// Creating the VM failed and is retried.
        CrashLoopBackOff,
        /// The node is drained and being updated in place.
        InPlaceUpdating,
        /// The in-place update finished; the machine returns to `Running`.
        InPlaceUpdateSuccessful,
        /// The in-place update failed or timed out.
        InPlaceUpdateFailed,
    }
}

string_enum! {
    /// Outcome of the last operation (`lastOperation.state`).
    MachineState {
        /// Still in progress.
        Processing,
        /// Ended with an error.
        Failed,
        /// Completed.
        Successful,
    }
}

string_enum! {
    /// Kind of the last operation (`lastOperation.type`).
    MachineOperationType {
        /// Creating the VM and waiting for its node.
        Create,
        /// Updating the machine object.
        Update,
        /// Updating the node in place without replacing the VM.
        InPlaceUpdate,
        /// Draining the node.
        DrainNode,
        /// Watching node health.
        HealthCheck,
        /// Draining and deleting.
        Delete,
    }
}

string_enum! {
    /// Status of a machine set or deployment condition.
    ConditionStatus {
        /// The condition holds.
        True,
        /// The condition does not hold.
        False,
        /// The controller cannot tell.
        Unknown,
    }
}

/// Reference to the machine class a machine is created from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClassSpec {
    /// API group of the class, normally `machine.sapcloud.io`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// Kind of the class; `MachineClass` for all current providers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Name of the class in the machine's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// Labels, annotations and taints that the controller keeps on the machine's
/// node, and the node spec it expects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeTemplateSpec {
    /// Labels and annotations to keep on the node.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub metadata: ObjectMeta,
    /// Node spec; only `taints` is synchronized to the node.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    pub spec: NodeSpec,
}

/// Per-machine overrides of the machine controller's flags. Upstream embeds
/// these fields inline in the machine spec; durations are Go duration strings
/// (`"20m"`) and are checked by validation rather than at decode time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfiguration {
    /// How long a normal drain may take, counted from the deletion timestamp,
    /// before the drain is forced (`--machine-drain-timeout`, default 2h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_timeout: Option<String>,
    /// How long a machine may stay `Unknown` before it is marked `Failed`
    /// (`--machine-health-timeout`, default 10m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_timeout: Option<String>,
    /// How long a machine may stay `Pending` before it is marked `Failed`
    /// (`--machine-creation-timeout`, default 20m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timeout: Option<String>,
    /// How long an in-place update may take (`--machine-inplace-update-timeout`,
    /// default 20m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_timeout: Option<String>,
    /// How long a preserved machine is kept (`--machine-preserve-timeout`,
    /// default 96h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_preserve_timeout: Option<String>,
    /// When true an unhealthy machine stays `Unknown` forever instead of
    /// failing after the health timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_health_timeout: Option<bool>,
    /// How many times an eviction is retried during a drain
    /// (`--machine-max-evict-retries`, default 360).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_evict_retries: Option<i32>,
    /// Comma-separated node condition types that make a node unhealthy when
    /// they are not `False` (`--node-conditions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_conditions: Option<String>,
}

impl MachineConfiguration {
    /// `drainTimeout`, if set and valid.
    pub fn drain_timeout(&self) -> Option<Duration> {
        self.drain_timeout.as_deref().and_then(parse_duration)
    }
    /// `healthTimeout`, if set and valid.
    pub fn health_timeout(&self) -> Option<Duration> {
        self.health_timeout.as_deref().and_then(parse_duration)
    }
    /// `creationTimeout`, if set and valid.
    pub fn creation_timeout(&self) -> Option<Duration> {
        self.creation_timeout.as_deref().and_then(parse_duration)
    }
    /// `inPlaceUpdateTimeout`, if set and valid.
    pub fn in_place_update_timeout(&self) -> Option<Duration> {
        self.in_place_update_timeout
            .as_deref()
            .and_then(parse_duration)
    }
    /// `machinePreserveTimeout`, if set and valid.
    pub fn machine_preserve_timeout(&self) -> Option<Duration> {
        self.machine_preserve_timeout
            .as_deref()
            .and_then(parse_duration)
    }
    /// `nodeConditions` split at commas, blanks dropped.
    pub fn node_condition_types(&self) -> Option<Vec<String>> {
        self.node_conditions.as_deref().map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
    }
}

/// Desired state of a machine: which class to create it from and what its
/// node should carry.
// Clippy mistakes the repeated `type_` keys of separate `printcolumn(...)`
// groups for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machine.sapcloud.io",
    version = "v1alpha1",
    kind = "Machine",
    namespaced,
    status = "MachineStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "mc",
    doc = "A physical or virtual machine that should join the target cluster as a node.",
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.currentStatus.phase",
        description = "Phase of the machine."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the machine was created."
    ),
    printcolumn(
        name = "Node",
        type_ = "string",
        json_path = ".metadata.labels.node",
        description = "Node backing the machine."
    ),
    printcolumn(
        name = "ProviderID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider's ID of the VM backing the machine.",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The machine class to create the VM from.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    pub class: ClassSpec,
    /// The provider's ID of the VM, set once the VM exists.
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub provider_id: String,
    /// What the machine's node should carry.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    pub node_template: NodeTemplateSpec,
    /// Per-machine controller settings, inline in the spec.
    #[serde(flatten)]
    pub configuration: MachineConfiguration,
}

/// Observed state of a machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Addresses reported by the provider; only filled when no target cluster
    /// is configured and so there is no node to read them from.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub addresses: Vec<NodeAddress>,
    /// A copy of the node's conditions.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub conditions: Vec<NodeCondition>,
    /// The last operation the machine controller performed or attempted.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    pub last_operation: LastOperation,
    /// The phase and when it last changed.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    pub current_status: CurrentStatus,
    /// Opaque provider state returned by the driver and passed back to it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_known_state: String,
}

/// The last operation performed on a machine or machine set. For machines the
/// description doubles as the step marker of the deletion flow.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastOperation {
    /// Human-readable description; some values are matched by the deletion flow.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Name of the driver error code when the operation failed
    /// (e.g. `ResourceExhausted`); the cluster autoscaler backs off on it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error_code: String,
    /// When the operation was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Whether the operation is running, failed or succeeded.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_as_none"
    )]
    pub state: Option<MachineState>,
    /// What kind of operation it was.
    #[serde(
        rename = "type",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_as_none"
    )]
    pub type_: Option<MachineOperationType>,
}

/// Phase of a machine and the time it was entered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrentStatus {
    /// The phase; absent for a machine the controller has not processed yet.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_as_none"
    )]
    pub phase: Option<MachinePhase>,
    /// Set while a creation or health timeout is being counted.
    #[serde(default, skip_serializing_if = "is_false")]
    pub timeout_active: bool,
    /// When the phase last changed; the health timeout counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Until when the machine is preserved; absent when it is not preserved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_expiry_time: Option<Time>,
}

/// Metadata and spec that machines are created with by a machine set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineTemplateSpec {
    /// Labels, annotations and finalizers for the new machines.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub metadata: ObjectMeta,
    /// Spec of the new machines.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    pub spec: MachineSpec,
}

/// A failed machine, listed in machine set and deployment status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSummary {
    /// Name of the machine.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Provider's ID of its VM.
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub provider_id: String,
    /// Its last operation, which failed.
    #[serde(
        default,
        skip_serializing_if = "is_default",
        deserialize_with = "null_as_default"
    )]
    pub last_operation: LastOperation,
    /// Name of the machine set owning it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner_ref: String,
}

impl Machine {
    /// The phase, if the machine has been processed.
    pub fn phase(&self) -> Option<MachinePhase> {
        self.status.as_ref().and_then(|s| s.current_status.phase)
    }
}
