//! `LocalCluster`, `LocalMachine` and `LocalMachineTemplate` in
//! infrastructure.cluster.x-k8s.io/v1beta1, with the contract label the
//! core resolves versions by.

use std::collections::BTreeMap;

use capi::types::Condition;
use capi::types::common::{ApiEndpoint, FailureDomainSpec, MachineAddress, TemplateMeta};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use kube::core::crd::v1::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A cluster's local infrastructure: where its API server listens.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "LocalCluster",
    namespaced,
    status = "LocalClusterStatus",
    derive = "PartialEq",
    derive = "Default",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta1"),
    label("cluster.x-k8s.io/provider", "infrastructure-local"),
    doc = "The local infrastructure of a Cluster: the workload API endpoint and failure domains.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Ready",
        type_ = "boolean",
        json_path = ".status.ready",
        description = "The infrastructure is ready"
    ),
    printcolumn(
        name = "Host",
        type_ = "string",
        json_path = ".spec.controlPlaneEndpoint.host",
        description = "The API server's host"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of LocalCluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct LocalClusterSpec {
    /// Where the cluster's API server listens; filled in from the
    /// provider's workload cluster when empty.
    #[serde(default, skip_serializing_if = "ApiEndpoint::is_zero")]
    pub control_plane_endpoint: ApiEndpoint,
    /// Failure domains (zones) Machines may be spread over; each becomes a
    /// zone of the VMs placed there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failure_domains: BTreeMap<String, FailureDomainSpec>,
}

/// What the LocalCluster controller observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalClusterStatus {
    #[serde(default)]
    pub ready: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failure_domains: BTreeMap<String, FailureDomainSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One local server: a simulated VM of the local provider.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "LocalMachine",
    namespaced,
    status = "LocalMachineStatus",
    derive = "PartialEq",
    derive = "Default",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta1"),
    label("cluster.x-k8s.io/provider", "infrastructure-local"),
    doc = "A local server: a simulated VM whose kubelet boots from the Machine's bootstrap data.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "ProviderID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "The VM's providerID"
    ),
    printcolumn(
        name = "Ready",
        type_ = "boolean",
        json_path = ".status.ready",
        description = "The VM runs"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of LocalMachine"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct LocalMachineSpec {
    /// The VM's ID (`local:///<zone>/<vm>`), set once it exists.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// How long the VM takes to boot until its node is Ready (Go
    /// duration; default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "capi::types::common::duration_schema")]
    pub boot_delay: Option<String>,
    /// The node's `node.kubernetes.io/instance-type` label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The node's capacity (cpu, memory, ...); the simulator's default VM
    /// when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
}

/// What the LocalMachine controller observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalMachineStatus {
    /// The VM exists (the contract's readiness).
    #[serde(default)]
    pub ready: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The template MachineSets clone a `LocalMachine` from.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "LocalMachineTemplate",
    namespaced,
    derive = "PartialEq",
    derive = "Default",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta1"),
    label("cluster.x-k8s.io/provider", "infrastructure-local"),
    doc = "A template of LocalMachines.",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of LocalMachineTemplate"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct LocalMachineTemplateSpec {
    pub template: LocalMachineTemplateResource,
}

/// `spec.template` of a `LocalMachineTemplate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalMachineTemplateResource {
    #[serde(default, skip_serializing_if = "TemplateMeta::is_empty")]
    pub metadata: TemplateMeta,
    #[serde(default)]
    pub spec: LocalMachineSpec,
}

/// The provider's CRDs.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        LocalCluster::crd(),
        LocalMachine::crd(),
        LocalMachineTemplate::crd(),
    ]
}

/// [`crds`] as YAML.
pub fn crds_yaml() -> String {
    capi::types::to_yaml(&crds())
}
