//! `druid.gardener.cloud/v1alpha1` Etcd and EtcdCopyBackupsTask, with the
//! field names and optionality of upstream's Go types
//! (`api/core/v1alpha1/etcd.go`, `store.go`, `etcdcopybackupstask.go`), so
//! upstream manifests decode and encode back unchanged. Defaults are not
//! written into the objects; [`EtcdSpec`]'s accessors return druid's
//! defaults (spec §1), so a manifest reads back as it was applied.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Schema of a `resource.Quantity` (`8Gi` or a plain number).
pub fn quantity_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": true,
    })
}

/// Schema of a list of objects kept as they are (topology spread
/// constraints, validated by the StatefulSet they end up in).
pub fn preserve_unknown_array(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    })
}

/// A reference to a Secret by name (and key, for CAs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretReference {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaSecretRef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Key of the CA bundle in the Secret [ca.crt].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_key: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsConfig {
    #[serde(rename = "tlsCASecretRef")]
    pub tls_ca_secret_ref: CaSecretRef,
    #[serde(rename = "serverTLSSecretRef")]
    pub server_tls_secret_ref: SecretReference,
    #[serde(
        rename = "clientTLSSecretRef",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_tls_secret_ref: Option<SecretReference>,
}

/// Where snapshots go: `Local` is a directory; the others are object stores.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    pub prefix: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_override: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompressionSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElectionSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reelection_period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_connection_timeout: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotCompactionSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_threshold: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_full_snapshot_threshold: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_snapshot_schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garbage_collection_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backups_limit_based_gc: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garbage_collection_period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_snapshot_period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::types::quantity_schema")]
    pub delta_snapshot_memory_limit: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_snapshot_retention_period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<CompressionSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_profiling: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_snapshot_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_election: Option<LeaderElectionSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_compaction: Option<SnapshotCompactionSpec>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientService {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_distribution: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::types::quantity_schema")]
    pub quota: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defragmentation_schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrapper_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret_ref: Option<SecretReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_url_tls: Option<TlsConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_url_tls: Option<TlsConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_default_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_duration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_service: Option<ClientService>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_defrag_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_bbolt_freelist_type: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SharedConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_compaction_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_compaction_retention: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingConstraints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub affinity: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::types::preserve_unknown_array")]
    pub topology_spread_constraints: Option<Value>,
}

/// An etcd cluster with its backup-restore sidecars.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "druid.gardener.cloud",
    version = "v1alpha1",
    kind = "Etcd",
    plural = "etcds",
    namespaced,
    status = "EtcdStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Etcd is the Schema for the etcds API",
    scale = r#"{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas","labelSelectorPath":".status.labelSelector"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Quorate","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"All Members Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"AllMembersReady\")].status"}"#,
    printcolumn = r#"{"name":"Backup Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"BackupReady\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Cluster Size","type":"integer","jsonPath":".spec.replicas","priority":1}"#,
    printcolumn = r#"{"name":"Current Replicas","type":"integer","jsonPath":".status.currentReplicas","priority":1}"#,
    printcolumn = r#"{"name":"Ready Replicas","type":"integer","jsonPath":".status.readyReplicas","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct EtcdSpec {
    /// Deprecated pod selector; druid selects by its own labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Pod labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Pod annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub etcd: EtcdConfig,
    #[serde(default)]
    pub backup: BackupSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_config: Option<SharedConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_constraints: Option<SchedulingConstraints>,
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_root: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::types::quantity_schema")]
    pub storage_capacity: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_claim_template: Option<String>,
}

/// One condition (`druidv1alpha1.Condition`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdMemberStatus {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub status: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastOperation {
    #[serde(rename = "type")]
    pub type_: String,
    pub state: String,
    #[serde(default)]
    pub description: String,
    #[serde(default, rename = "runID")]
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastError {
    pub code: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<Time>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrossVersionObjectReference {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<CrossVersionObjectReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_operation: Option<LastOperation>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_errors: Vec<LastError>,
    #[serde(default)]
    pub current_replicas: i32,
    #[serde(default)]
    pub replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// The pod selector in string form, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<EtcdMemberStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_url_tls_enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// Waiting for a final full snapshot in the source before copying.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitForFinalSnapshotSpec {
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// Copies the backups of one store into another.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "druid.gardener.cloud",
    version = "v1alpha1",
    kind = "EtcdCopyBackupsTask",
    plural = "etcdcopybackupstasks",
    namespaced,
    status = "EtcdCopyBackupsTaskStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "EtcdCopyBackupsTask is a task for copying etcd backups from a source to a target store."
)]
#[serde(rename_all = "camelCase")]
pub struct EtcdCopyBackupsTaskSpec {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_labels: BTreeMap<String, String>,
    pub source_store: StoreSpec,
    pub target_store: StoreSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backup_age: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backups: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for_final_snapshot: Option<WaitForFinalSnapshotSpec>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdCopyBackupsTaskStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}
