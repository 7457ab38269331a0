//! Admission for Cluster API objects in the embedded API server, where
//! upstream runs webhooks: the core kinds (cluster.x-k8s.io) are defaulted
//! and validated by `capi::webhooks`, so an invalid object is rejected with
//! a 422 and field causes; provider templates (`*Template` in
//! bootstrap.cluster.x-k8s.io and infrastructure.cluster.x-k8s.io) are
//! immutable, as upstream's providers' webhooks keep them — a rollout is a
//! new template, never an edited one.

// Admission answers are full metav1.Status errors, as in the apiserver crate.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use apimachinery::{ApiError, Cause};
use apiserver::{AdmissionPlugin, Attributes, Operation};
use serde_json::Value;

/// The groups of the provider kinds trellis serves.
const PROVIDER_GROUPS: [&str; 2] = [
    "bootstrap.cluster.x-k8s.io",
    "infrastructure.cluster.x-k8s.io",
];

pub struct CapiAdmission;

/// Objects and their scale; status writes come from controllers and must
/// not fail on the spec's account.
fn applies(attrs: &Attributes<'_>) -> bool {
    attrs.operation != Operation::Delete && matches!(attrs.subresource, None | Some("scale"))
}

#[async_trait::async_trait]
impl AdmissionPlugin for CapiAdmission {
    fn name(&self) -> &str {
        "ClusterAPIValidation"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), ApiError> {
        if !applies(attrs) || attrs.resource.group != capi::GROUP || attrs.subresource.is_some() {
            return Ok(());
        }
        capi::webhooks::default_object(&attrs.resource.kind, obj, attrs.old);
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), ApiError> {
        if !applies(attrs) {
            return Ok(());
        }
        let group = attrs.resource.group.as_str();
        let kind = attrs.resource.kind.as_str();
        let causes = if group == capi::GROUP {
            // A field of the wrong type is schema validation's to report.
            capi::webhooks::validate_object(kind, obj, attrs.old).unwrap_or_default()
        } else if PROVIDER_GROUPS.contains(&group)
            && kind.ends_with("Template")
            && attrs.operation == Operation::Update
            && attrs.subresource.is_none()
        {
            template_immutable(attrs.old, obj)
        } else {
            Vec::new()
        };
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(group, kind, attrs.name, causes))
        }
    }
}

/// A template's `spec.template.spec` may not change.
fn template_immutable(old: Option<&Value>, new: &Value) -> Vec<Cause> {
    let spec = |v: &Value| v.pointer("/spec/template/spec").cloned();
    match old {
        Some(old) if spec(old) != spec(new) => vec![Cause::invalid(
            "spec.template.spec",
            "Invalid value: a template is immutable; create a new one and reference it instead",
        )],
        _ => Vec::new(),
    }
}

/// Every Cluster API CRD trellis serves: the core kinds and its two
/// providers'.
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    capi::crds()
        .into_iter()
        .chain(capi_bootstrap::crds())
        .chain(capi_local::crds())
        .collect()
}

/// [`crds`] as YAML, for `trellis crds`.
pub fn crds_yaml() -> String {
    capi::types::to_yaml(&crds())
}

/// Installs the Cluster API CRDs and admission into an embedded server.
pub async fn prepare(server: &Arc<apiserver::Server>) -> anyhow::Result<()> {
    for crd in crds() {
        let manifest = serde_json::to_value(&crd)?;
        apiserver::crd::install(server, &manifest).await?;
    }
    server.add_admission(Arc::new(CapiAdmission));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_are_immutable() {
        let old = json!({"spec": {"template": {"spec": {"bootDelay": "1s"}}}});
        let same = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"template": {"spec": {"bootDelay": "1s"}}}});
        let changed = json!({"spec": {"template": {"spec": {"bootDelay": "2s"}}}});
        assert!(template_immutable(Some(&old), &same).is_empty());
        assert_eq!(
            template_immutable(Some(&old), &changed)[0].field,
            "spec.template.spec"
        );
        assert!(template_immutable(None, &changed).is_empty());
    }

    #[test]
    fn every_crd_carries_the_contract_label() {
        for crd in crds() {
            let labels = crd.metadata.labels.unwrap_or_default();
            assert_eq!(
                labels.get("cluster.x-k8s.io/v1beta1").map(String::as_str),
                Some("v1beta1"),
                "{:?}",
                crd.metadata.name
            );
        }
        assert_eq!(crds().len(), 10);
    }
}
