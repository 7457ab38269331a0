//! The cloud profile as the local provider reads it: the profile spec out of
//! a [`Cluster`], the local provider's `providerConfig` (which maps logical
//! image versions to provider images), and the [`ImageResolver`] that picks
//! the image a pool's machines boot (§4.2).
//!
//! The local "image" is an opaque string; it reaches the VM as the class's
//! `image` tag. Choosing between several entries of one version works like
//! the cloud providers': every entry is a capability flavor, and
//! [`gardener::capabilities::select_flavor`] picks the one the machine
//! type's capabilities fit best. A profile without capability definitions
//! is treated as defining only `architecture: [amd64, arm64]`, and its
//! per-architecture entries become one flavor each.

use std::collections::BTreeMap;

use gardener::capabilities::{defaulted, select_flavor};
use gardener::{AMD64, ARCHITECTURE, ARM64, Capabilities, CapabilityDefinition, CloudProfileSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use worker::{Cluster, ImageEntry, ImageRequest, ImageResolver};

use crate::error::Error;

/// API version of the local provider's configuration objects.
pub const LOCAL_PROVIDER_API_VERSION: &str = worker::image::LOCAL_PROVIDER_API_VERSION;

/// Kind of [`CloudProfileConfig`].
pub const CLOUD_PROFILE_CONFIG_KIND: &str = "CloudProfileConfig";

/// The local provider's `spec.providerConfig` of a cloud profile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloudProfileConfig {
    /// [`LOCAL_PROVIDER_API_VERSION`].
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// [`CLOUD_PROFILE_CONFIG_KIND`].
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Logical images and where their versions come from.
    #[serde(default)]
    pub machine_images: Vec<MachineImages>,
}

/// One logical image and its versions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineImages {
    /// Logical image name, as in the profile's `machineImages`.
    pub name: String,
    /// Versions; one version may be listed several times, once per
    /// architecture, in legacy profiles.
    #[serde(default)]
    pub versions: Vec<MachineImageVersion>,
}

/// One version of a logical image.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineImageVersion {
    /// The version.
    pub version: String,
    /// The provider image, for entries without flavors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The architecture of `image` (legacy); absent means amd64 in profiles
    /// without capabilities and "any" in profiles with them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// Images per capability flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capability_flavors: Vec<MachineImageFlavor>,
}

/// One flavor of an image version: the capabilities it offers and its image.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineImageFlavor {
    /// What the flavor supports; missing capabilities mean every defined
    /// value.
    #[serde(default)]
    pub capabilities: Capabilities,
    /// The provider image.
    pub image: String,
}

/// Reads the profile spec embedded in a Cluster: a CloudProfile object
/// (`spec`), a NamespacedCloudProfile (`status.cloudProfileSpec`, the
/// rendered form), or a bare spec. A Cluster without a profile reads as an
/// empty spec, which resolves no image.
pub fn profile_spec(cluster: &Cluster) -> Result<CloudProfileSpec, Error> {
    let raw = &cluster.spec.cloud_profile;
    let spec = match raw {
        Value::Null => return Ok(CloudProfileSpec::default()),
        v if v.pointer("/status/cloudProfileSpec").is_some() => {
            v.pointer("/status/cloudProfileSpec")
        }
        v if v.get("spec").is_some() => v.get("spec"),
        v => Some(v),
    };
    let Some(spec) = spec else {
        return Ok(CloudProfileSpec::default());
    };
    serde_json::from_value(spec.clone()).map_err(|e| Error::CloudProfileInvalid(e.to_string()))
}

/// Decodes the local provider's configuration from a profile spec; absent
/// reads as empty.
pub fn cloud_profile_config(spec: &CloudProfileSpec) -> Result<CloudProfileConfig, Error> {
    match &spec.provider_config {
        None | Some(Value::Null) => Ok(CloudProfileConfig::default()),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| Error::CloudProfileConfigInvalid(e.to_string())),
    }
}

/// The [`ImageResolver`] over a profile: its capability definitions and
/// machine types, and the local provider's image mapping.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileImages {
    /// The profile's capability definitions (may be empty).
    pub definitions: Vec<CapabilityDefinition>,
    /// Machine type name to its legacy architecture and capabilities.
    pub machine_types: BTreeMap<String, (Option<String>, Capabilities)>,
    /// The local provider's image mapping.
    pub config: CloudProfileConfig,
}

impl ProfileImages {
    /// The resolver of a profile spec.
    pub fn from_spec(spec: &CloudProfileSpec) -> Result<ProfileImages, Error> {
        Ok(ProfileImages {
            definitions: spec.machine_capabilities.clone(),
            machine_types: spec
                .machine_types
                .iter()
                .map(|t| {
                    (
                        t.name.clone(),
                        (t.architecture.clone(), t.capabilities.clone()),
                    )
                })
                .collect(),
            config: cloud_profile_config(spec)?,
        })
    }

    /// The definitions flavors are chosen by: the profile's, or only the
    /// architectures for a legacy profile.
    fn effective_definitions(&self) -> Vec<CapabilityDefinition> {
        if self.definitions.is_empty() {
            vec![CapabilityDefinition {
                name: ARCHITECTURE.to_string(),
                values: vec![AMD64.to_string(), ARM64.to_string()],
            }]
        } else {
            self.definitions.clone()
        }
    }

    /// The machine type's capabilities, made to name an architecture: the
    /// type's own, else the single architecture the profile defines, else
    /// the pool's.
    fn type_capabilities(&self, request: &ImageRequest<'_>) -> Capabilities {
        let (legacy_arch, caps) = self
            .machine_types
            .get(request.machine_type)
            .cloned()
            .unwrap_or_default();
        let mut caps = if self.definitions.is_empty() {
            Capabilities::new()
        } else {
            caps
        };
        let named = caps.get(ARCHITECTURE).is_some_and(|v| !v.is_empty());
        if !named {
            let single_defined = self
                .definitions
                .iter()
                .find(|d| d.name == ARCHITECTURE)
                .filter(|d| d.values.len() == 1)
                .and_then(|d| d.values.first().cloned());
            let arch = legacy_arch
                .filter(|a| !a.is_empty())
                .or(single_defined)
                .unwrap_or_else(|| request.architecture.to_string());
            caps.insert(ARCHITECTURE.to_string(), vec![arch]);
        }
        caps
    }

    /// Every flavor of `name@version` with its image, in profile order.
    fn flavors(&self, request: &ImageRequest<'_>) -> Vec<(Capabilities, String)> {
        let legacy = self.definitions.is_empty();
        self.config
            .machine_images
            .iter()
            .filter(|i| i.name == request.name)
            .flat_map(|i| i.versions.iter())
            .filter(|v| v.version == request.version)
            .flat_map(|v| {
                if !v.capability_flavors.is_empty() {
                    return v
                        .capability_flavors
                        .iter()
                        .map(|f| (f.capabilities.clone(), f.image.clone()))
                        .collect::<Vec<_>>();
                }
                let Some(image) = v.image.clone() else {
                    return Vec::new();
                };
                let arch = v
                    .architecture
                    .clone()
                    .or_else(|| legacy.then(|| AMD64.to_string()));
                let caps = arch
                    .map(|a| Capabilities::from([(ARCHITECTURE.to_string(), vec![a])]))
                    .unwrap_or_default();
                vec![(caps, image)]
            })
            .collect()
    }
}

impl ImageResolver for ProfileImages {
    fn resolve(&self, request: &ImageRequest<'_>) -> Result<Option<ImageEntry>, String> {
        let flavors = self.flavors(request);
        if flavors.is_empty() {
            return Ok(None);
        }
        let defs = self.effective_definitions();
        let type_caps = self.type_capabilities(request);
        let caps: Vec<Capabilities> = flavors.iter().map(|(c, _)| c.clone()).collect();
        let index = select_flavor(&type_caps, &caps, &defs)
            .map_err(|e| e.to_string())?
            .unwrap_or(0);
        let Some((caps, image)) = flavors.get(index) else {
            return Ok(None);
        };
        Ok(Some(ImageEntry {
            name: request.name.to_string(),
            version: request.version.to_string(),
            image: image.clone(),
            architecture: None,
            capabilities: defaulted(caps, &defs),
        }))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request<'a>(arch: &'a str, machine_type: &'a str) -> ImageRequest<'a> {
        ImageRequest {
            pool: "p",
            name: "ubuntu",
            version: "1.0.0",
            architecture: arch,
            machine_type,
        }
    }

    fn profile(spec: Value) -> ProfileImages {
        let spec: CloudProfileSpec = serde_json::from_value(spec).unwrap();
        ProfileImages::from_spec(&spec).unwrap()
    }

    fn machine_type(name: &str, extra: Value) -> Value {
        let mut t = json!({"name": name, "cpu": "2", "gpu": "0", "memory": "4Gi"});
        if let (Some(t), Some(extra)) = (t.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                t.insert(k.clone(), v.clone());
            }
        }
        t
    }

    fn resolved(p: &ProfileImages, r: &ImageRequest<'_>) -> Result<Option<String>, String> {
        p.resolve(r).map(|e| e.map(|e| e.image))
    }

    #[test]
    fn legacy_profiles_pick_by_architecture() {
        let p = profile(json!({
            "type": "local",
            "machineTypes": [
                machine_type("small", json!({})),
                machine_type("arm", json!({"architecture": "arm64"})),
            ],
            "providerConfig": {"machineImages": [{"name": "ubuntu", "versions": [
                {"version": "1.0.0", "image": "img-amd"},
                {"version": "1.0.0", "image": "img-arm", "architecture": "arm64"},
                {"version": "2.0.0", "image": "img-2"},
            ]}]},
        }));
        // `None`: no flavor fits.
        let cases: [(&str, &str, Option<&str>); 5] = [
            // The pool's architecture when the type names none.
            ("amd64", "small", Some("img-amd")),
            ("arm64", "small", Some("img-arm")),
            // The type's legacy architecture wins over the pool's.
            ("amd64", "arm", Some("img-arm")),
            // Unknown types fall back to the pool's architecture.
            ("arm64", "unknown", Some("img-arm")),
            ("s390x", "small", None),
        ];
        for (arch, t, want) in cases {
            let got = resolved(&p, &request(arch, t));
            match want {
                Some(image) => assert_eq!(got, Ok(Some(image.to_string())), "{arch} {t}"),
                None => assert!(got.is_err(), "{arch} {t}: {got:?}"),
            }
        }
        let missing = ImageRequest {
            version: "9.9.9",
            ..request("amd64", "small")
        };
        assert_eq!(p.resolve(&missing), Ok(None), "not in the profile");
    }

    #[test]
    fn capability_profiles_select_flavors() {
        let p = profile(json!({
            "type": "local",
            "machineCapabilities": [
                {"name": "architecture", "values": ["amd64", "arm64"]},
                {"name": "storage", "values": ["nvme", "scsi"]},
            ],
            "machineTypes": [
                machine_type("any", json!({})),
                machine_type("scsi-only", json!({"capabilities": {"storage": ["scsi"]}})),
                machine_type("arm", json!({"capabilities": {"architecture": ["arm64"]}})),
                machine_type("legacy-arm", json!({"architecture": "arm64"})),
            ],
            "providerConfig": {"machineImages": [{"name": "ubuntu", "versions": [
                {"version": "1.0.0", "capabilityFlavors": [
                    {"capabilities": {"architecture": ["amd64"], "storage": ["scsi"]}, "image": "amd-scsi"},
                    {"capabilities": {"architecture": ["amd64"], "storage": ["nvme"]}, "image": "amd-nvme"},
                    {"capabilities": {"architecture": ["arm64"]}, "image": "arm-any"},
                ]},
            ]}]},
        }));
        let cases = [
            // nvme is preferred over scsi when the type supports both.
            ("amd64", "any", Ok(Some("amd-nvme"))),
            ("amd64", "scsi-only", Ok(Some("amd-scsi"))),
            ("amd64", "arm", Ok(Some("arm-any"))),
            // A type without the capability uses its legacy architecture.
            ("amd64", "legacy-arm", Ok(Some("arm-any"))),
            ("arm64", "any", Ok(Some("arm-any"))),
        ];
        for (arch, t, want) in cases {
            let got: Result<Option<String>, String> = resolved(&p, &request(arch, t));
            assert_eq!(
                got,
                want.map(|o: Option<&str>| o.map(str::to_string)),
                "{arch} {t}"
            );
        }
        let entry = p.resolve(&request("arm64", "any")).unwrap().unwrap();
        assert_eq!(
            entry.capabilities.get("storage"),
            Some(&vec!["nvme".to_string(), "scsi".to_string()]),
            "the chosen flavor is recorded defaulted"
        );
        assert!(entry.supports_architecture("arm64"));
    }

    #[test]
    fn incompatible_or_ambiguous_flavors_are_errors() {
        let p = profile(json!({
            "machineCapabilities": [{"name": "architecture", "values": ["amd64", "arm64"]}],
            "machineTypes": [machine_type("any", json!({}))],
            "providerConfig": {"machineImages": [{"name": "ubuntu", "versions": [
                {"version": "1.0.0", "capabilityFlavors": [
                    {"capabilities": {"architecture": ["amd64"]}, "image": "a"},
                    {"capabilities": {"architecture": ["amd64"]}, "image": "b"},
                ]},
            ]}]},
        }));
        let err = p.resolve(&request("amd64", "any")).unwrap_err();
        assert!(err.contains("unique"), "{err}");
        let err = p.resolve(&request("arm64", "any")).unwrap_err();
        assert!(err.contains("no compatible flavor"), "{err}");
    }

    #[test]
    fn profile_spec_reads_every_embedding() {
        let spec = json!({"type": "local", "regions": [{"name": "r1"}]});
        let cases = [
            (json!({"kind": "CloudProfile", "spec": spec}), "local"),
            (
                json!({"kind": "NamespacedCloudProfile", "spec": {"parent": {}}, "status": {"cloudProfileSpec": spec}}),
                "local",
            ),
            (spec.clone(), "local"),
            (Value::Null, ""),
        ];
        for (raw, want) in cases {
            let mut cluster = Cluster::new("shoot--p--s", Default::default());
            cluster.spec.cloud_profile = raw.clone();
            assert_eq!(profile_spec(&cluster).unwrap().type_, want, "{raw}");
        }
        let mut cluster = Cluster::new("c", Default::default());
        cluster.spec.cloud_profile = json!({"spec": {"machineTypes": "nope"}});
        assert!(matches!(
            profile_spec(&cluster),
            Err(Error::CloudProfileInvalid(_))
        ));
        let bad = serde_json::from_value::<CloudProfileSpec>(
            json!({"providerConfig": {"machineImages": "x"}}),
        )
        .unwrap();
        assert!(matches!(
            cloud_profile_config(&bad),
            Err(Error::CloudProfileConfigInvalid(_))
        ));
    }
}
