//! The cluster-scoped `CloudProfile` (core.gardener.cloud/v1beta1) and the
//! spec types it shares with `NamespacedCloudProfile`: versions and their
//! lifecycle, machine images with capability flavors, machine and volume
//! types, regions and capability definitions.
//!
//! Field names and optionality follow upstream's
//! `pkg/apis/core/v1beta1/types_cloudprofile.go`, so profiles written for a Go
//! Gardener read and write back unchanged.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::time::Time;
use apimachinery::gojson::{is_false, null_as_default};

/// Capability name to the values a machine type or image flavor supports.
///
/// Upstream's `Capabilities` is `map[string]CapabilityValues`; Go writes map
/// keys sorted, which a `BTreeMap` reproduces. Value order matters only in
/// the profile's definitions (it is the preference order), not here.
pub type Capabilities = BTreeMap<String, Vec<String>>;

/// The capability name every profile with capabilities must define.
pub const ARCHITECTURE: &str = "architecture";
/// `amd64`, the architecture assumed wherever none is given.
pub const AMD64: &str = "amd64";
/// `arm64`.
pub const ARM64: &str = "arm64";
/// The only CPU architectures Gardener supports.
pub const SUPPORTED_ARCHITECTURES: &[&str] = &[AMD64, ARM64];
/// `containerd`, the CRI every image version offers when it lists none.
pub const CONTAINERD: &str = "containerd";

/// Desired state of a cloud profile: the catalogue of versions, images,
/// machines and volumes shoots of one provider may use.
// Clippy mistakes the repeated `type_` keys of separate `printcolumn(...)`
// groups for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "core.gardener.cloud",
    version = "v1beta1",
    kind = "CloudProfile",
    status = "CloudProfileStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "cprofile",
    shortname = "cpfl",
    doc = "A catalogue of Kubernetes versions, machine images, machine types, volume types and regions of one infrastructure provider.",
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".spec.type",
        description = "The provider type of the profile."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the profile was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CloudProfileSpec {
    /// PEM certificates shoots of this profile trust in addition to the
    /// system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// Offered Kubernetes versions.
    #[serde(default)]
    pub kubernetes: KubernetesSettings,
    /// Offered machine images and their versions.
    #[serde(default, deserialize_with = "null_as_default")]
    pub machine_images: Vec<MachineImage>,
    /// Offered machine types.
    #[serde(default, deserialize_with = "null_as_default")]
    pub machine_types: Vec<MachineType>,
    /// Provider-specific configuration (image references per region, ...),
    /// understood only by the provider extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub provider_config: Option<Value>,
    /// Regions and their zones.
    #[serde(default, deserialize_with = "null_as_default")]
    pub regions: Vec<Region>,
    /// Which seeds may host shoots of this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_selector: Option<SeedSelector>,
    /// Provider type, e.g. `aws` or `local`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Offered volume types.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub volume_types: Vec<VolumeType>,
    /// Machine image and type for bastion hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bastion: Option<Bastion>,
    /// Limits shoots of this profile must respect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Capability definitions in priority order; each value list is in
    /// preference order. Empty means the profile uses the legacy
    /// architecture fields only.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub machine_capabilities: Vec<CapabilityDefinition>,
    /// Control plane settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlane>,
}

/// Observed state of a cloud profile: the current classification of every
/// version, recomputed at each lifecycle transition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudProfileStatus {
    /// Classifications of the Kubernetes versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesStatus>,
    /// Classifications of the machine image versions, per image.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub machine_images: Vec<MachineImageStatus>,
}

/// Status of the Kubernetes versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesStatus {
    /// One entry per version.
    #[serde(default, deserialize_with = "null_as_default")]
    pub versions: Vec<ExpirableVersionStatus>,
}

/// Status of one machine image.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineImageStatus {
    /// Image name.
    pub name: String,
    /// One entry per version.
    #[serde(default, deserialize_with = "null_as_default")]
    pub versions: Vec<ExpirableVersionStatus>,
}

/// The classification a version has right now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExpirableVersionStatus {
    /// The version.
    pub version: String,
    /// Its current classification.
    pub classification: Classification,
}

/// The Kubernetes versions a profile offers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesSettings {
    /// Offered versions, each `major.minor.patch`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub versions: Vec<ExpirableVersion>,
}

/// Where a version stands in its lifecycle. The derived order is the rank
/// upstream uses: unavailable < preview < supported < deprecated < expired.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Classification {
    /// Announced but not yet usable.
    Unavailable,
    /// Usable for testing; never chosen by defaulting or maintenance.
    Preview,
    /// Recommended.
    #[default]
    Supported,
    /// Usable, but shoots should move away.
    Deprecated,
    /// No longer usable for new workers; maintenance forces updates.
    Expired,
}

impl Classification {
    /// The value as written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Classification::Unavailable => "unavailable",
            Classification::Preview => "preview",
            Classification::Supported => "supported",
            Classification::Deprecated => "deprecated",
            Classification::Expired => "expired",
        }
    }
}

impl std::fmt::Display for Classification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step of a version's lifecycle.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleStage {
    /// The classification that holds from `startTime` on.
    pub classification: Classification,
    /// When the stage starts; absent means "since ever" (first stage only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
}

/// A version with an optional end of life.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExpirableVersion {
    /// The version, semver-like.
    pub version: String,
    /// When the version expires (legacy; exclusive with `lifecycle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_date: Option<Time>,
    /// Static classification (legacy; exclusive with `lifecycle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<Classification>,
    /// Timed lifecycle stages in rank order.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub lifecycle: Vec<LifecycleStage>,
}

/// How far maintenance may move a pool's image version automatically.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum UpdateStrategy {
    /// Only patch versions of the same minor.
    Patch,
    /// Any version of the same major.
    Minor,
    /// Any version (upstream's default).
    #[default]
    Major,
}

impl std::fmt::Display for UpdateStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UpdateStrategy::Patch => "patch",
            UpdateStrategy::Minor => "minor",
            UpdateStrategy::Major => "major",
        })
    }
}

/// An operating system image and its versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineImage {
    /// Image name, e.g. `gardenlinux`.
    pub name: String,
    /// Offered versions.
    #[serde(default, deserialize_with = "null_as_default")]
    pub versions: Vec<MachineImageVersion>,
    /// Maintenance update strategy; absent means `major`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
}

/// One version of a machine image.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineImageVersion {
    /// Version and lifecycle.
    #[serde(flatten)]
    pub expirable: ExpirableVersion,
    /// Container runtimes the version ships; absent means containerd.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub cri: Vec<Cri>,
    /// CPU architectures (legacy, kept in sync with the flavors).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub architectures: Vec<String>,
    /// Semver constraint the kubelet version must satisfy, e.g. `>= 1.26`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_version_constraint: Option<String>,
    /// Whether nodes can be updated to this version in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_updates: Option<InPlaceUpdates>,
    /// The variants of this version, one per distinct image in the
    /// provider. Each flavor is written as a plain capability map (upstream
    /// wraps it in `MachineImageFlavor` but serializes the inner map).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub capability_flavors: Vec<Capabilities>,
}

impl MachineImageVersion {
    /// The version string.
    pub fn version(&self) -> &str {
        &self.expirable.version
    }
}

/// In-place update support of an image version.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdates {
    /// Nodes may be updated to this version in place.
    #[serde(default)]
    pub supported: bool,
    /// Oldest version an in-place update to this one may start from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_version_for_update: Option<String>,
}

/// A container runtime interface and the runtimes it offers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cri {
    /// CRI name; upstream knows only `containerd`.
    pub name: String,
    /// Additional runtimes, e.g. gVisor.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub container_runtimes: Vec<ContainerRuntime>,
}

/// An additional container runtime.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRuntime {
    /// Runtime type, e.g. `gvisor`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Runtime-specific configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub provider_config: Option<Value>,
}

/// A machine type of the provider.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineType {
    /// CPU count.
    pub cpu: Quantity,
    /// GPU count.
    pub gpu: Quantity,
    /// Memory size.
    pub memory: Quantity,
    /// Type name, e.g. `m5.large`.
    pub name: String,
    /// Root disk the type comes with, if fixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<MachineTypeStorage>,
    /// Whether new workers may use the type; absent means true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usable: Option<bool>,
    /// CPU architecture (legacy, kept in sync with the capabilities).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// What the type supports; missing capabilities mean "all defined
    /// values".
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub capabilities: Capabilities,
    /// Machine controller manager settings for machines of this type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_controller_manager: Option<MachineTypeMcmSettings>,
}

impl MachineType {
    /// `usable`, defaulted to true.
    pub fn is_usable(&self) -> bool {
        self.usable.unwrap_or(true)
    }
}

/// Per-type machine controller manager settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineTypeMcmSettings {
    /// How long creating a machine of this type may take, e.g. `20m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_creation_timeout: Option<String>,
}

/// The root disk of a machine type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineTypeStorage {
    /// Storage class, e.g. `standard`.
    #[serde(default, rename = "class")]
    pub class: String,
    /// Fixed size (exclusive with `minSize`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    /// Storage type, e.g. `gp3`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Smallest size a worker may ask for (exclusive with `size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_size: Option<Quantity>,
}

/// A volume type of the provider.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeType {
    /// Storage class, e.g. `premium`.
    #[serde(default, rename = "class")]
    pub class: String,
    /// Type name, e.g. `gp3`.
    pub name: String,
    /// Whether new workers may use the type; absent means true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usable: Option<bool>,
    /// Smallest size a volume of this type may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_size: Option<Quantity>,
}

impl VolumeType {
    /// `usable`, defaulted to true.
    pub fn is_usable(&self) -> bool {
        self.usable.unwrap_or(true)
    }
}

/// A region of the provider.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Region {
    /// Region name.
    pub name: String,
    /// Zones of the region.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub zones: Vec<AvailabilityZone>,
    /// Labels shoots and seeds can be matched against.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub labels: BTreeMap<String, String>,
    /// Access restrictions the region supports.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub access_restrictions: Vec<AccessRestriction>,
}

/// A zone and what is not available in it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AvailabilityZone {
    /// Zone name.
    pub name: String,
    /// Machine types that cannot be used in this zone.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub unavailable_machine_types: Vec<String>,
    /// Volume types that cannot be used in this zone.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub unavailable_volume_types: Vec<String>,
}

/// A named access restriction.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessRestriction {
    /// Restriction name, e.g. `eu-access-only`.
    pub name: String,
}

/// Seeds allowed for shoots of the profile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeedSelector {
    /// Label selector on seeds (inlined, as upstream embeds it).
    #[serde(flatten)]
    pub label_selector: LabelSelector,
    /// Provider types of allowed seeds; `*` allows all.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub provider_types: Vec<String>,
}

/// Machine settings of bastion hosts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bastion {
    /// Image of bastion hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_image: Option<BastionMachineImage>,
    /// Machine type of bastion hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<BastionMachineType>,
}

/// Image of bastion hosts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BastionMachineImage {
    /// Image name from `machineImages`.
    pub name: String,
    /// Version; absent means the latest supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Machine type of bastion hosts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BastionMachineType {
    /// Type name from `machineTypes`.
    pub name: String,
}

/// Limits of shoots using the profile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Largest Σ `minimum` over a shoot's pools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nodes_total: Option<i32>,
}

/// A capability and its possible values in preference order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityDefinition {
    /// Capability name, e.g. `architecture`.
    pub name: String,
    /// Values, most preferred first.
    #[serde(default, deserialize_with = "null_as_default")]
    pub values: Vec<String>,
}

/// Control plane settings of the profile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlane {
    /// Whether a highly available control plane may be pinned to one zone.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_zone_pinning: bool,
}

/// Reference from an NCP to its parent, or from a Shoot to its profile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudProfileReference {
    /// `CloudProfile` or `NamespacedCloudProfile`; empty means CloudProfile
    /// for a Shoot's reference.
    #[serde(default)]
    pub kind: String,
    /// Name of the referenced profile.
    pub name: String,
    /// Namespace of a referenced `NamespacedCloudProfile` when it lives
    /// outside the referrer's namespace.
    ///
    /// Beyond upstream (GEP-25 outlook, "cross-project sharing"): upstream
    /// has no such field. It is honoured only when the caller enables
    /// [`crate::Extensions::cross_project_use`] (Shoots) or
    /// [`crate::Extensions::multi_level_inheritance`] (NCP parents, where it
    /// must equal the NCP's own namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// `CloudProfile`.
pub const KIND_CLOUD_PROFILE: &str = "CloudProfile";
/// `NamespacedCloudProfile`.
pub const KIND_NAMESPACED_CLOUD_PROFILE: &str = "NamespacedCloudProfile";

impl CloudProfileReference {
    /// A reference to a cluster-scoped profile.
    pub fn cloud_profile(name: impl Into<String>) -> Self {
        CloudProfileReference {
            kind: KIND_CLOUD_PROFILE.to_string(),
            name: name.into(),
            namespace: None,
        }
    }

    /// A reference to a namespaced profile in the referrer's namespace.
    pub fn namespaced(name: impl Into<String>) -> Self {
        CloudProfileReference {
            kind: KIND_NAMESPACED_CLOUD_PROFILE.to_string(),
            name: name.into(),
            namespace: None,
        }
    }

    /// The kind, with empty read as `CloudProfile`.
    pub fn effective_kind(&self) -> &str {
        if self.kind.is_empty() {
            KIND_CLOUD_PROFILE
        } else {
            &self.kind
        }
    }

    /// Whether this points at a `NamespacedCloudProfile`.
    pub fn is_namespaced(&self) -> bool {
        self.effective_kind() == KIND_NAMESPACED_CLOUD_PROFILE
    }
}

impl CloudProfileSpec {
    /// The machine type called `name`.
    pub fn machine_type(&self, name: &str) -> Option<&MachineType> {
        self.machine_types.iter().find(|t| t.name == name)
    }

    /// The machine image called `name` (exact match).
    pub fn machine_image(&self, name: &str) -> Option<&MachineImage> {
        self.machine_images.iter().find(|i| i.name == name)
    }

    /// The volume type called `name`.
    pub fn volume_type(&self, name: &str) -> Option<&VolumeType> {
        self.volume_types.iter().find(|t| t.name == name)
    }

    /// The region called `name`.
    pub fn region(&self, name: &str) -> Option<&Region> {
        self.regions.iter().find(|r| r.name == name)
    }

    /// The Kubernetes version entry for exactly `version`.
    pub fn kubernetes_version(&self, version: &str) -> Option<&ExpirableVersion> {
        self.kubernetes
            .versions
            .iter()
            .find(|v| v.version == version)
    }
}

impl MachineImage {
    /// The version entry for exactly `version`.
    pub fn version(&self, version: &str) -> Option<&MachineImageVersion> {
        self.versions.iter().find(|v| v.version() == version)
    }

    /// `updateStrategy`, defaulted to major.
    pub fn strategy(&self) -> UpdateStrategy {
        self.update_strategy.unwrap_or_default()
    }
}

impl MachineImageVersion {
    /// The CRIs the version offers, with an empty list read as containerd.
    pub fn offered_cris(&self) -> Vec<Cri> {
        if self.cri.is_empty() {
            vec![Cri {
                name: CONTAINERD.to_string(),
                container_runtimes: Vec::new(),
            }]
        } else {
            self.cri.clone()
        }
    }
}
