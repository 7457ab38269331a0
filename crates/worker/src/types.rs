//! The `extensions.gardener.cloud/v1alpha1` resources the worker actuator
//! reads and writes: [`Worker`] (namespaced, with status) and [`Cluster`]
//! (cluster-scoped, the Shoot, Seed and CloudProfile mirrored into the seed).
//!
//! Field names and optionality follow upstream's Go types
//! (`pkg/apis/extensions/v1alpha1/types_worker.go`, `types_cluster.go`, and the
//! embedded `core/v1beta1` settings), so upstream YAML decodes and encodes
//! back to the same document: optional fields are skipped when absent, raw
//! extensions stay untyped JSON.
//!
//! Where the contract document (seed 002) and upstream's types disagree, the
//! types follow upstream and accept the document's spelling as an alias:
//! the example's `machineControllerManager.drainTimeout`/`healthTimeout`/
//! `creationTimeout` are read into `machineDrainTimeout`/... and written back
//! under upstream's names; its `scaleDownUtilizationThreshold: 0.5` (a number)
//! is read into upstream's string field; its inline `userData` is kept as the
//! legacy field it was before `userDataSecretRef` replaced it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{SecretKeySelector, SecretReference, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::de::Deserializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use apimachinery::gojson::{is_zero_i64, null_as_default};
/// `core/v1beta1`'s last operation and error, declared once in `gardener`:
/// a Worker reports them exactly as a Shoot does.
pub use gardener::{LastError, LastOperation};

/// Desired state of a Worker: where and how the pools' machines run.
// Clippy mistakes the repeated `type_` keys of separate `printcolumn(...)`
// groups for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "extensions.gardener.cloud",
    version = "v1alpha1",
    kind = "Worker",
    plural = "workers",
    namespaced,
    status = "WorkerStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "The worker pools of a shoot, to be turned into machine classes and machine deployments.",
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".spec.type",
        description = "The type of the cloud provider for this resource."
    ),
    printcolumn(
        name = "Region",
        type_ = "string",
        json_path = ".spec.region",
        description = "The region into which the worker should be deployed."
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.lastOperation.state",
        description = "Status of the worker."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "creation timestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WorkerSpec {
    /// Provider type, `local` for this actuator.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// Extension class (`shoot`, `seed`, `garden`); absent means `shoot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Provider-specific configuration of the whole Worker (raw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub provider_config: Option<Value>,
    /// Output of the Infrastructure reconciliation, copied in by gardenlet (raw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub infrastructure_provider_status: Option<Value>,
    /// Region of the machines; immutable upstream.
    #[serde(default)]
    pub region: String,
    /// Secret with the provider credentials (`cloudprovider`); machine
    /// classes refer to it as `credentialsSecretRef`.
    #[serde(default)]
    pub secret_ref: SecretReference,
    /// Public SSH key for the machines (Go `[]byte`, base64 on the wire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::byte_string")]
    pub ssh_public_key: Option<ByteString>,
    /// The worker pools.
    #[serde(default, deserialize_with = "null_as_default")]
    pub pools: Vec<WorkerPool>,
}

/// One worker pool: machines of one type and image, spread over zones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerPool {
    /// Pool name, a DNS label of at most 15 characters.
    #[serde(default)]
    pub name: String,
    /// Machine type from the CloudProfile.
    #[serde(default)]
    pub machine_type: String,
    /// Logical machine image, mapped to a provider image by the actuator.
    #[serde(default)]
    pub machine_image: MachineImage,
    /// Smallest pool size (sum over zones).
    #[serde(default)]
    pub minimum: i32,
    /// Largest pool size (sum over zones).
    #[serde(default)]
    pub maximum: i32,
    /// Machines created beyond the desired count during an update.
    #[serde(default)]
    pub max_surge: IntOrString,
    /// Machines that may be unavailable during an update.
    #[serde(default)]
    pub max_unavailable: IntOrString,
    /// Labels for every node of the pool (gardenlet adds its own, §4.1).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations for every node of the pool.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Taints for every node of the pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Availability zones the pool is spread over, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// Root disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<Volume>,
    /// Additional disks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_volumes: Vec<DataVolume>,
    /// Name of the data volume holding the kubelet's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_data_volume_name: Option<String>,
    /// Resources of one machine, for the cluster autoscaler's scale-from-zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_template: Option<WorkerNodeTemplate>,
    /// MCM settings mapped onto the machine deployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_controller_manager: Option<MachineControllerManagerSettings>,
    /// Cluster-autoscaler settings mapped onto deployment annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_autoscaler: Option<ClusterAutoscalerOptions>,
    /// Legacy inline user data (Go `[]byte`), superseded upstream by
    /// `userDataSecretRef`; still read because the contract example shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::byte_string")]
    pub user_data: Option<ByteString>,
    /// Secret key holding the bootstrap user data for the pool's machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_secret_ref: Option<SecretKeySelector>,
    /// Name of the gardener-node-agent secret; identifies the operating
    /// system configuration, so a change rolls the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_agent_secret_name: Option<String>,
    /// Kubernetes version of the pool's kubelets (pool or control plane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Kubelet configuration (`core/v1beta1.KubeletConfig`), kept raw; only
    /// `kubeReserved`, `evictionHard` and `cpuManagerPolicy` feed the hashes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub kubelet_config: Option<Value>,
    /// Provider-specific pool configuration (raw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub provider_config: Option<Value>,
    /// CPU architecture (`amd64`, `arm64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// Scale-up priority for the cluster autoscaler's priority expander (≥ −1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// How the pool's machines are updated; absent means `AutoRollingUpdate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<MachineUpdateStrategy>,
}

/// How a pool's machines are updated (`core/v1beta1.MachineUpdateStrategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum MachineUpdateStrategy {
    /// Replace machines (the default).
    AutoRollingUpdate,
    /// Update nodes in place; the controller picks them.
    AutoInPlaceUpdate,
    /// Update nodes in place; the operator picks them.
    ManualInPlaceUpdate,
}

impl MachineUpdateStrategy {
    /// Whether the strategy updates nodes in place.
    pub fn is_in_place(self) -> bool {
        !matches!(self, MachineUpdateStrategy::AutoRollingUpdate)
    }
}

impl WorkerPool {
    /// Whether the pool is updated in place (either in-place strategy).
    pub fn is_in_place(&self) -> bool {
        self.update_strategy
            .is_some_and(MachineUpdateStrategy::is_in_place)
    }
}

/// Logical machine image.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineImage {
    /// Image name, e.g. `gardenlinux`.
    #[serde(default)]
    pub name: String,
    /// Image version.
    #[serde(default)]
    pub version: String,
}

/// Root disk of a pool's machines.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// Name, to refer to the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Volume type from the CloudProfile.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Size such as `20Gi`.
    #[serde(default)]
    pub size: String,
    /// Whether the disk is encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
}

/// An additional disk of a pool's machines.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolume {
    /// Name, to refer to the volume.
    #[serde(default)]
    pub name: String,
    /// Volume type from the CloudProfile.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Size such as `50Gi`.
    #[serde(default)]
    pub size: String,
    /// Whether the disk is encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
}

/// Expected resources of one node of the pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerNodeTemplate {
    /// Node capacity (`cpu`, `gpu`, `memory`, ...). Numbers are accepted and
    /// kept as quantities (the contract example writes `cpu: 2`).
    #[serde(default, deserialize_with = "null_as_default")]
    #[schemars(schema_with = "apimachinery::gojson::resource_list")]
    pub capacity: BTreeMap<String, Quantity>,
    /// Extended resources added to the capacity by the node's controller.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "null_as_default"
    )]
    #[schemars(schema_with = "apimachinery::gojson::resource_list")]
    pub virtual_capacity: Option<BTreeMap<String, Quantity>>,
}

/// Per-pool settings of machine-controller-manager
/// (`core/v1beta1.MachineControllerManagerSettings`). Durations are Go
/// duration strings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineControllerManagerSettings {
    /// Drain timeout (`drainTimeout` in the contract document).
    #[serde(
        default,
        alias = "drainTimeout",
        skip_serializing_if = "Option::is_none"
    )]
    pub machine_drain_timeout: Option<String>,
    /// Health timeout (`healthTimeout` in the contract document).
    #[serde(
        default,
        alias = "healthTimeout",
        skip_serializing_if = "Option::is_none"
    )]
    pub machine_health_timeout: Option<String>,
    /// Creation timeout (`creationTimeout` in the contract document).
    #[serde(
        default,
        alias = "creationTimeout",
        skip_serializing_if = "Option::is_none"
    )]
    pub machine_creation_timeout: Option<String>,
    /// Eviction retries during a drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_evict_retries: Option<i32>,
    /// Node condition types that make a machine unhealthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_conditions: Vec<String>,
    /// Timeout of an in-place update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_timeout: Option<String>,
    /// Never fail unhealthy machines (defaulted to true for in-place pools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_health_timeout: Option<bool>,
    /// How long failed machines are preserved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_preserve_timeout: Option<String>,
    /// How many failed machines are preserved automatically (pool total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_preserve_failed_machine_max: Option<i32>,
}

/// Per-pool cluster-autoscaler settings; each becomes an annotation on the
/// pool's machine deployments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAutoscalerOptions {
    /// Utilization fraction below which a node may be removed. A string
    /// upstream; a number (as in the contract example) is accepted.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "string_or_number"
    )]
    pub scale_down_utilization_threshold: Option<String>,
    /// GPU utilization fraction below which a node may be removed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "string_or_number"
    )]
    pub scale_down_gpu_utilization_threshold: Option<String>,
    /// How long a node must be unneeded before removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_unneeded_time: Option<String>,
    /// How long an unready node must be unneeded before removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_unready_time: Option<String>,
    /// How long to wait for a node to be provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_node_provision_time: Option<String>,
}

fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected a string or a number, got {other}"
        ))),
    }
}

/// Observed state of a Worker.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerStatus {
    /// Provider status (raw); for `local` a [`crate::LocalWorkerStatus`]
    /// listing the machine images in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub provider_status: Option<Value>,
    /// Conditions.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub conditions: Vec<Condition>,
    /// The last error, if the last operation failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError>,
    /// The last operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_operation: Option<LastOperation>,
    /// Generation last reconciled successfully.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// State kept for control-plane migration (raw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub state: Option<Value>,
    /// Resources referenced by the extension.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub resources: Vec<NamedResourceReference>,
    /// The machine deployments created, for the cluster autoscaler.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub machine_deployments: Vec<WorkerMachineDeployment>,
    /// When `machineDeployments` was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_deployments_last_update_time: Option<Time>,
    /// Hashes of the in-place pools that are fully updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_updates: Option<InPlaceUpdatesWorkerStatus>,
}

/// A machine deployment in the Worker status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerMachineDeployment {
    /// Deployment name.
    pub name: String,
    /// Smallest size of this deployment.
    pub minimum: i32,
    /// Largest size of this deployment.
    pub maximum: i32,
    /// The pool's priority, for the autoscaler's priority expander.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// In-place update bookkeeping in the Worker status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdatesWorkerStatus {
    /// Pool name to the in-place hash its machines are updated to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub worker_pool_to_hash_map: BTreeMap<String, String>,
}

/// A condition (`core/v1beta1.Condition`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False`, `Unknown` or `Progressing`.
    #[serde(default)]
    pub status: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// When the condition was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// One-word reason.
    #[serde(default)]
    pub reason: String,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
    /// Well-known error codes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<String>,
}

/// A named reference to another resource (`core/v1beta1.NamedResourceReference`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamedResourceReference {
    /// Name of the reference.
    #[serde(default)]
    pub name: String,
    /// The referenced object.
    #[serde(default)]
    pub resource_ref: CrossVersionObjectReference,
}

/// A reference to an object by kind and name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrossVersionObjectReference {
    /// Kind of the object.
    #[serde(default)]
    pub kind: String,
    /// Name of the object.
    #[serde(default)]
    pub name: String,
    /// API version of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
}

/// The Shoot, Seed and CloudProfile mirrored into the seed, named like the
/// shoot's control-plane namespace. Upstream embeds the full objects as raw
/// extensions; a NamespacedCloudProfile is embedded rendered, as a
/// CloudProfile. [`crate::ShootFacts`] reads what the actuator needs.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "extensions.gardener.cloud",
    version = "v1alpha1",
    kind = "Cluster",
    plural = "clusters",
    derive = "PartialEq",
    derive = "Default",
    doc = "The Shoot, Seed and CloudProfile of a shoot, mirrored for extensions.",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "creation timestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// The CloudProfile (raw).
    #[serde(default)]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub cloud_profile: Value,
    /// The Seed (raw).
    #[serde(default)]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub seed: Value,
    /// The Shoot (raw).
    #[serde(default)]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub shoot: Value,
}
