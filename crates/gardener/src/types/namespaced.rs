//! The `NamespacedCloudProfile` (NCP): a project's additions to and
//! overrides of a parent `CloudProfile`, rendered into
//! `status.cloudProfileSpec` (see [`crate::render`]).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cloudprofile::{
    CloudProfileReference, CloudProfileSpec, KubernetesSettings, Limits, MachineImage, MachineType,
    VolumeType,
};
use apimachinery::gojson::null_as_default;

/// Desired state of a namespaced cloud profile.
///
/// Compared with GEP-25's text (seed 001) this follows what upstream built:
/// the NCP has `providerConfig` and `limits` but no regions, seed selector or
/// bastion, and its Kubernetes entries may only override the expiration date
/// of parent versions.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "core.gardener.cloud",
    version = "v1beta1",
    kind = "NamespacedCloudProfile",
    namespaced,
    status = "NamespacedCloudProfileStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "nscpfl",
    doc = "A project's additions to and overrides of a parent cloud profile.",
    printcolumn(
        name = "Parent",
        type_ = "string",
        json_path = ".spec.parent.name",
        description = "The profile this one inherits from."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the profile was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedCloudProfileSpec {
    /// Additional PEM certificates, appended to the parent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// Expiration-date overrides of parent Kubernetes versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesSettings>,
    /// Overrides of parent images and versions, and new ones.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub machine_images: Vec<MachineImage>,
    /// Replacements of parent machine types, and new ones.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub machine_types: Vec<MachineType>,
    /// Replacements of parent volume types, and new ones.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub volume_types: Vec<VolumeType>,
    /// The profile this one inherits from (immutable).
    ///
    /// Upstream only allows kind `CloudProfile`. Beyond upstream (GEP-25
    /// outlook, "multi-level inheritance"), kind `NamespacedCloudProfile`
    /// names another NCP in the same namespace; it is accepted only when the
    /// caller enables [`crate::Extensions::multi_level_inheritance`].
    pub parent: CloudProfileReference,
    /// Provider-specific additions; merged into the status by the provider's
    /// webhook, never by core rendering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub provider_config: Option<Value>,
    /// Limits that replace the parent's when set and positive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
}

/// Observed state: the rendered profile shoots of the namespace consume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedCloudProfileStatus {
    /// Parent spec merged with this NCP's spec.
    #[serde(default)]
    pub cloud_profile_spec: CloudProfileSpec,
    /// The generation the rendering reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
