//! The namespaced `Shoot`, limited to what machine management reads and
//! writes: the profile reference, region, Kubernetes version, worker pools,
//! hibernation, maintenance and the status a controller reports.
//!
//! Upstream's Shoot has many more fields (networking, DNS, addons, ...).
//! They are not modelled here, so a Shoot read through these types drops
//! them; the wiring layer must patch Shoots rather than replace them
//! wholesale.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cloudprofile::{CloudProfileReference, Cri};
use super::time::Time;
use apimachinery::gojson::{is_zero_i64, null_as_default};

/// Desired state of a shoot cluster (machine-management subset).
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "core.gardener.cloud",
    version = "v1beta1",
    kind = "Shoot",
    namespaced,
    status = "ShootStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Kubernetes cluster whose control plane Gardener runs and whose workers it manages.",
    printcolumn(
        name = "Cloudprofile",
        type_ = "string",
        json_path = ".spec.cloudProfile.name",
        description = "The cloud profile the shoot uses."
    ),
    printcolumn(
        name = "Provider",
        type_ = "string",
        json_path = ".spec.provider.type",
        description = "The provider type."
    ),
    printcolumn(
        name = "Region",
        type_ = "string",
        json_path = ".spec.region",
        description = "The region of the shoot."
    ),
    printcolumn(
        name = "K8s Version",
        type_ = "string",
        json_path = ".spec.kubernetes.version",
        description = "The control plane's Kubernetes version."
    ),
    printcolumn(
        name = "Hibernation",
        type_ = "boolean",
        json_path = ".status.hibernated",
        description = "Whether the shoot is hibernated."
    ),
    printcolumn(
        name = "Last Operation",
        type_ = "string",
        json_path = ".status.lastOperation.type",
        description = "The last operation."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the shoot was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ShootSpec {
    /// Legacy profile reference (a `CloudProfile` name); forbidden from
    /// Kubernetes 1.34 on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_profile_name: Option<String>,
    /// The profile the shoot uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_profile: Option<CloudProfileReference>,
    /// Hibernation settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hibernation: Option<Hibernation>,
    /// Control plane Kubernetes settings.
    #[serde(default)]
    pub kubernetes: ShootKubernetes,
    /// Maintenance settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<Maintenance>,
    /// Infrastructure provider and worker pools.
    #[serde(default)]
    pub provider: Provider,
    /// Purpose: `evaluation`, `testing`, `development`, `production` or
    /// `infrastructure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// Region, one of the profile's.
    #[serde(default)]
    pub region: String,
    /// Legacy credentials reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_binding_name: Option<String>,
    /// Credentials reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_binding_name: Option<String>,
    /// Seed hosting the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_name: Option<String>,
}

/// Control plane Kubernetes settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShootKubernetes {
    /// Version; admission defaults a partial one (`1.30`) to the latest
    /// supported match.
    #[serde(default)]
    pub version: String,
}

/// Infrastructure provider settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provider {
    /// Provider type; must equal the profile's.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Provider-specific infrastructure configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub infrastructure_config: Option<Value>,
    /// Provider-specific control plane configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub control_plane_config: Option<Value>,
    /// Worker pools.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub workers: Vec<Worker>,
}

/// How a pool's nodes are updated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WorkerUpdateStrategy {
    /// Replace nodes (default).
    #[default]
    AutoRollingUpdate,
    /// Update nodes in place automatically.
    AutoInPlaceUpdate,
    /// Update nodes in place when an operator labels them.
    ManualInPlaceUpdate,
}

impl WorkerUpdateStrategy {
    /// Whether nodes are updated in place.
    pub fn is_in_place(self) -> bool {
        !matches!(self, WorkerUpdateStrategy::AutoRollingUpdate)
    }
}

/// A worker pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Worker {
    /// Pool name (DNS label, at most 15 characters).
    pub name: String,
    /// Machine type, image and architecture.
    #[serde(default)]
    pub machine: Machine,
    /// Smallest node count.
    #[serde(default)]
    pub minimum: i32,
    /// Largest node count.
    #[serde(default)]
    pub maximum: i32,
    /// Extra nodes during a rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Nodes that may be unavailable during an update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Provider-specific pool configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub provider_config: Option<Value>,
    /// Zones the pool spreads over.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub zones: Vec<String>,
    /// Root volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<Volume>,
    /// Additional data volumes.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub data_volumes: Vec<DataVolume>,
    /// Data volume that holds the kubelet's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_data_volume_name: Option<String>,
    /// Labels for the nodes.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub labels: BTreeMap<String, String>,
    /// Annotations for the nodes.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub annotations: BTreeMap<String, String>,
    /// Taints for the nodes.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub taints: Vec<Taint>,
    /// Container runtime; absent means containerd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cri: Option<Cri>,
    /// Pool-specific Kubernetes settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<WorkerKubernetes>,
    /// Machine controller manager settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_controller_manager: Option<MachineControllerManagerSettings>,
    /// Priority for the cluster autoscaler's priority expander (≥ −1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// How nodes are updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<WorkerUpdateStrategy>,
    /// Whether system components may run on the pool (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_components: Option<WorkerSystemComponents>,
}

impl Worker {
    /// Whether the pool updates its nodes in place.
    pub fn is_in_place(&self) -> bool {
        self.update_strategy
            .is_some_and(WorkerUpdateStrategy::is_in_place)
    }

    /// The pool's Kubernetes version if it sets one.
    pub fn kubernetes_version(&self) -> Option<&str> {
        self.kubernetes
            .as_ref()
            .and_then(|k| k.version.as_deref())
            .filter(|v| !v.is_empty())
    }

    /// The pool's CRI name, defaulted to containerd.
    pub fn cri_name(&self) -> &str {
        self.cri
            .as_ref()
            .map(|c| c.name.as_str())
            .filter(|n| !n.is_empty())
            .unwrap_or(super::cloudprofile::CONTAINERD)
    }
}

/// Machine settings of a pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// Machine type from the profile.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Machine image; admission defaults it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ShootMachineImage>,
    /// CPU architecture; admission defaults it from the machine type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
}

/// The image of a pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShootMachineImage {
    /// Image name from the profile.
    #[serde(default)]
    pub name: String,
    /// Image-specific configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub provider_config: Option<Value>,
    /// Version; admission defaults a partial or absent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The root volume of a pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// Volume name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Volume type from the profile.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Size, e.g. `50Gi`.
    #[serde(rename = "size")]
    pub volume_size: String,
    /// Whether the volume is encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
}

/// A data volume of a pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolume {
    /// Volume name.
    pub name: String,
    /// Volume type from the profile.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Size, e.g. `50Gi`.
    #[serde(rename = "size")]
    pub volume_size: String,
    /// Whether the volume is encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
}

/// Pool-specific Kubernetes settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerKubernetes {
    /// Kubelet version of the pool; absent means the control plane's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Kubelet configuration, kept as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub kubelet: Option<Value>,
}

/// Machine controller manager settings of a pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineControllerManagerSettings {
    /// How long draining a node may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_drain_timeout: Option<String>,
    /// How long a node may be unhealthy before it is replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_health_timeout: Option<String>,
    /// How long creating a machine may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_creation_timeout: Option<String>,
    /// How often eviction is retried while draining.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_evict_retries: Option<i32>,
    /// Node conditions that count as unhealthy.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub node_conditions: Vec<String>,
    /// How long an in-place update may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_timeout: Option<String>,
    /// Never replace unhealthy machines (set for in-place pools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_health_timeout: Option<bool>,
    /// How long a preserved machine is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_preserve_timeout: Option<String>,
    /// How many failed machines are preserved automatically.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_preserve_failed_machine_max: Option<i32>,
}

/// Whether system components may run on a pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerSystemComponents {
    /// System components may run here.
    #[serde(default)]
    pub allow: bool,
}

/// Hibernation settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hibernation {
    /// Whether the shoot should be hibernated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Cron schedules that hibernate and wake the shoot.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub schedules: Vec<HibernationSchedule>,
}

/// A hibernation schedule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HibernationSchedule {
    /// Cron expression that hibernates the shoot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Cron expression that wakes the shoot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Time zone of the expressions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

/// Maintenance settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Maintenance {
    /// What maintenance updates automatically.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_update: Option<MaintenanceAutoUpdate>,
    /// The daily window maintenance runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_window: Option<MaintenanceTimeWindow>,
    /// Roll spec changes out only inside the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confine_spec_update_rollout: Option<bool>,
}

/// What maintenance updates automatically.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceAutoUpdate {
    /// Update the Kubernetes patch version.
    #[serde(default)]
    pub kubernetes_version: bool,
    /// Update machine image versions (absent means true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_image_version: Option<bool>,
}

/// A daily time window in Gardener's `HHMMSS+ZZZZ` format, e.g.
/// `begin: 220000+0100`, `end: 230000+0100`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceTimeWindow {
    /// Start of the window.
    pub begin: String,
    /// End of the window; may be earlier than `begin` to wrap midnight.
    pub end: String,
}

/// Observed state of a shoot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShootStatus {
    /// Conditions, e.g. `EveryNodeReady`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub conditions: Vec<Condition>,
    /// Whether the shoot is hibernated (always written, as upstream has
    /// no `omitempty` here).
    #[serde(default)]
    pub hibernated: bool,
    /// The last operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_operation: Option<LastOperation>,
    /// Errors of the last operation.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub last_errors: Vec<LastError>,
    /// The generation the status reflects.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Name used for the shoot's resources in the seed and provider.
    #[serde(default, rename = "technicalID")]
    pub technical_id: String,
    /// The last maintenance operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_maintenance: Option<LastMaintenance>,
    /// When a hibernation schedule last changed `spec.hibernation.enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_hibernation_trigger_time: Option<super::Time>,
}

/// A Gardener condition (it has `lastUpdateTime` and `codes`, unlike
/// `metav1.Condition`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False`, `Progressing` or `Unknown`.
    pub status: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// When the condition was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Machine-readable reason.
    #[serde(default)]
    pub reason: String,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
    /// Well-known error codes.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub codes: Vec<String>,
}

// `core/v1beta1.LastOperation`, declared once: the Worker's status (crate
// `worker`) carries it too. The doc comments below are the CRDs' field
// descriptions.
/// The last operation on a shoot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastOperation {
    /// What happened.
    #[serde(default)]
    pub description: String,
    /// When the operation was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Progress in percent.
    #[serde(default)]
    pub progress: i32,
    /// `Processing`, `Succeeded`, `Error`, `Failed`, `Pending`, `Aborted`.
    #[serde(default)]
    pub state: String,
    /// `Create`, `Reconcile`, `Delete`, `Migrate`, `Restore`.
    #[serde(default, rename = "type")]
    pub type_: String,
}

// `core/v1beta1.LastError`, shared with the Worker's status like
// `LastOperation`.
/// An error of the last operation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastError {
    /// What failed.
    #[serde(default)]
    pub description: String,
    /// The task that failed.
    #[serde(default, rename = "taskID", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Well-known error codes.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub codes: Vec<String>,
    /// When the error was last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
}

/// The last maintenance operation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastMaintenance {
    /// What maintenance changed, one sentence per change.
    #[serde(default)]
    pub description: String,
    /// When maintenance was triggered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggered_time: Option<Time>,
    /// `Processing`, `Succeeded` or `Failed`.
    #[serde(default)]
    pub state: String,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
}
