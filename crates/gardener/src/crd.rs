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
        shoot_crd(),
    ]
}

/// Where a Shoot keeps fields this crate does not model (networking,
/// addons, DNS, kubelet settings, ...): upstream manifests carry them, and
/// they must apply unchanged and be kept, not pruned or rejected by strict
/// field validation. The modelled fields are still validated.
pub const SHOOT_OPEN_OBJECTS: &[&[&str]] = &[
    &["spec"],
    &["spec", "kubernetes"],
    &["spec", "provider"],
    &["spec", "provider", "workers", "[]"],
    &["spec", "provider", "workers", "[]", "machine"],
    &["status"],
];

fn shoot_crd() -> CustomResourceDefinition {
    let mut crd = Shoot::crd();
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        for path in SHOOT_OPEN_OBJECTS {
            let mut node = Some(&mut *schema);
            for step in *path {
                node = node.and_then(|n| {
                    if *step == "[]" {
                        match n.items.as_mut() {
                            Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(s)) => Some(&mut **s),
                            _ => None,
                        }
                    } else {
                        n.properties.as_mut().and_then(|p| p.get_mut(*step))
                    }
                });
            }
            if let Some(n) = node {
                n.x_kubernetes_preserve_unknown_fields = Some(true);
            }
        }
    }
    crd
}

/// [`crds`] as one multi-document YAML stream, ready for `kubectl apply -f`.
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .filter_map(|crd| serde_yaml::to_string(crd).ok())
        .collect::<Vec<_>>()
        .join("---\n")
}
