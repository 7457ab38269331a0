//! Mapping a pool's logical machine image to the provider image, and the
//! `local` provider status that records the images in use (§4.2).
//!
//! Picking the profile entry (capability flavors, `FindBestImageFlavor`) is
//! the cloud-profile layer's job; the planner asks an [`ImageResolver`] and
//! only implements the fallback upstream has: an image that is no longer in
//! the profile is still found in the Worker's `status.providerStatus` if it
//! was used before with a compatible architecture.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Error;

/// API version of the `local` provider's status object.
pub const LOCAL_PROVIDER_API_VERSION: &str = "local.provider.extensions.gardener.cloud/v1alpha1";

/// What the planner asks the resolver for, once per pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageRequest<'a> {
    /// Pool name, for error messages.
    pub pool: &'a str,
    /// Logical image name.
    pub name: &'a str,
    /// Image version.
    pub version: &'a str,
    /// The pool's architecture (defaulted to `amd64`).
    pub architecture: &'a str,
    /// The pool's machine type, whose capabilities select the flavor.
    pub machine_type: &'a str,
}

/// One provider image: a profile entry, or a used image in the status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageEntry {
    /// Logical image name.
    pub name: String,
    /// Image version.
    pub version: String,
    /// The provider's image reference (for `local`, an image id or tag).
    pub image: String,
    /// Legacy architecture of the entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// Capabilities of the flavor the entry belongs to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capabilities: BTreeMap<String, Vec<String>>,
}

impl ImageEntry {
    /// Whether the entry runs on `architecture`: its capability says so, or
    /// its legacy field, or it names none (then `amd64`).
    pub fn supports_architecture(&self, architecture: &str) -> bool {
        match self.capabilities.get("architecture") {
            Some(values) => values.iter().any(|v| v == architecture),
            None => self.architecture.as_deref().unwrap_or("amd64") == architecture,
        }
    }
}

/// Finds the profile's image for a pool. `Ok(None)` means the profile does
/// not list `name@version` (the planner then tries the Worker status);
/// `Err` means it does but no entry fits (no compatible or no unique
/// flavor), which is not retried elsewhere.
pub trait ImageResolver {
    /// Resolves one request.
    fn resolve(&self, request: &ImageRequest<'_>) -> Result<Option<ImageEntry>, String>;
}

impl<F> ImageResolver for F
where
    F: Fn(&ImageRequest<'_>) -> Result<Option<ImageEntry>, String>,
{
    fn resolve(&self, request: &ImageRequest<'_>) -> Result<Option<ImageEntry>, String> {
        self(request)
    }
}

/// A flat list of profile entries, matched by name, version and
/// architecture, first match wins. Enough for profiles without capability
/// definitions and for tests; profiles with capabilities plug in a resolver
/// that selects flavors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageTable(pub Vec<ImageEntry>);

impl ImageResolver for ImageTable {
    fn resolve(&self, request: &ImageRequest<'_>) -> Result<Option<ImageEntry>, String> {
        Ok(self
            .0
            .iter()
            .find(|e| {
                e.name == request.name
                    && e.version == request.version
                    && e.supports_architecture(request.architecture)
            })
            .cloned())
    }
}

/// The `local` provider's `status.providerStatus`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalWorkerStatus {
    /// Always [`LOCAL_PROVIDER_API_VERSION`] when written.
    #[serde(default)]
    pub api_version: String,
    /// Always `WorkerStatus` when written.
    #[serde(default)]
    pub kind: String,
    /// The images in use, deduplicated by name, version and capabilities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_images: Vec<ImageEntry>,
}

impl LocalWorkerStatus {
    /// A status listing `images`, deduplicated by name, version and
    /// capabilities (architecture counts as a capability), first kept.
    pub fn with_images(images: impl IntoIterator<Item = ImageEntry>) -> LocalWorkerStatus {
        let mut machine_images: Vec<ImageEntry> = Vec::new();
        for image in images {
            let duplicate = machine_images.iter().any(|e| {
                e.name == image.name
                    && e.version == image.version
                    && e.capabilities == image.capabilities
                    && e.architecture == image.architecture
            });
            if !duplicate {
                machine_images.push(image);
            }
        }
        LocalWorkerStatus {
            api_version: LOCAL_PROVIDER_API_VERSION.to_string(),
            kind: "WorkerStatus".to_string(),
            machine_images,
        }
    }

    /// Decodes a Worker's `status.providerStatus`; absent reads as empty.
    pub fn from_provider_status(value: Option<&Value>) -> Result<LocalWorkerStatus, Error> {
        match value {
            None | Some(Value::Null) => Ok(LocalWorkerStatus::default()),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| Error::InvalidProviderStatus(e.to_string())),
        }
    }

    /// The status as the raw JSON stored in the Worker.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The image for a pool: the resolver's answer, else an entry of the
/// Worker's previous provider status with the same name, version and a
/// compatible architecture.
pub fn find_image(
    resolver: &dyn ImageResolver,
    previous: &LocalWorkerStatus,
    request: &ImageRequest<'_>,
) -> Result<ImageEntry, Error> {
    let from_profile =
        resolver
            .resolve(request)
            .map_err(|message| Error::ImageResolutionFailed {
                pool: request.pool.to_string(),
                message,
            })?;
    if let Some(image) = from_profile {
        return Ok(image);
    }
    previous
        .machine_images
        .iter()
        .find(|e| {
            e.name == request.name
                && e.version == request.version
                && e.supports_architecture(request.architecture)
        })
        .cloned()
        .ok_or_else(|| Error::ImageNotFound {
            name: request.name.to_string(),
            version: request.version.to_string(),
            architecture: request.architecture.to_string(),
        })
}
