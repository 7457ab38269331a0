//! `TrellisConfig` and `TrellisConfigTemplate` in
//! bootstrap.cluster.x-k8s.io/v1beta1, with the contract label the core
//! resolves versions by.

use std::collections::BTreeMap;

use capi::types::Condition;
use capi::types::common::TemplateMeta;
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use kube::core::crd::v1::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a node registers: labels and taints its kubelet starts with.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "TrellisConfig",
    namespaced,
    status = "TrellisConfigStatus",
    derive = "PartialEq",
    derive = "Default",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta1"),
    label("cluster.x-k8s.io/provider", "bootstrap-trellis"),
    doc = "Bootstrap configuration of one trellis node: cloud-init with a bootstrap token for the cluster's API.",
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
        description = "The bootstrap data Secret is written"
    ),
    printcolumn(
        name = "DataSecretName",
        type_ = "string",
        json_path = ".status.dataSecretName",
        description = "The Secret with the bootstrap data"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of TrellisConfig"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct TrellisConfigSpec {
    /// Labels the kubelet registers the node with (only those a kubelet
    /// may set on itself; the Machine controller syncs the
    /// `node-role.kubernetes.io/` ones from the Machine).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, String>,
    /// Taints the kubelet registers the node with, besides Cluster API's
    /// `node.cluster.x-k8s.io/uninitialized:NoSchedule`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_taints: Vec<Taint>,
}

/// What the bootstrap provider observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrellisConfigStatus {
    /// The data Secret is written (the contract's readiness).
    #[serde(default)]
    pub ready: bool,
    /// The Secret with the bootstrap data (key `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The template MachineSets clone a `TrellisConfig` from.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "TrellisConfigTemplate",
    namespaced,
    derive = "PartialEq",
    derive = "Default",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta1"),
    label("cluster.x-k8s.io/provider", "bootstrap-trellis"),
    doc = "A template of TrellisConfigs.",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of TrellisConfigTemplate"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct TrellisConfigTemplateSpec {
    pub template: TrellisConfigTemplateResource,
}

/// `spec.template` of a `TrellisConfigTemplate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrellisConfigTemplateResource {
    #[serde(default, skip_serializing_if = "TemplateMeta::is_empty")]
    pub metadata: TemplateMeta,
    #[serde(default)]
    pub spec: TrellisConfigSpec,
}

/// The provider's CRDs.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![TrellisConfig::crd(), TrellisConfigTemplate::crd()]
}

/// [`crds`] as YAML.
pub fn crds_yaml() -> String {
    capi::types::to_yaml(&crds())
}
