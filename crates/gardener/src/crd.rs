//! CustomResourceDefinitions generated from the types, so the manifests can
//! never drift from the Rust structs.
//!
//! The derive already runs kube's structural-schema rewriters; the
//! `providerConfig` fields are marked `x-kubernetes-preserve-unknown-fields`
//! through their schema function. Short names follow upstream's registry
//! (`cprofile`, `cpfl` for CloudProfile, `nscpfl` for NamespacedCloudProfile;
//! Shoots have none). All three have a status subresource.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::crd::v1::CustomResourceExt;

use crate::types::{CloudProfile, NamespacedCloudProfile, Shoot};

/// The CRDs of the three kinds, parents first.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        CloudProfile::crd(),
        NamespacedCloudProfile::crd(),
        Shoot::crd(),
    ]
}

/// [`crds`] as one multi-document YAML stream, ready for `kubectl apply -f`.
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .filter_map(|crd| serde_yaml::to_string(crd).ok())
        .collect::<Vec<_>>()
        .join("---\n")
}
