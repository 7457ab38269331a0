//! Admission for machine.sapcloud.io objects in the embedded API server:
//! MachineDeployments are defaulted, and every kind is validated with the
//! `api` crate's pure rules, so an invalid object is rejected with a 422 and
//! field causes instead of being skipped by the controllers (as upstream
//! MCM does).

// Admission answers are full metav1.Status errors, as in the apiserver crate.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use apimachinery::ApiError;
use apiserver::{AdmissionPlugin, Attributes, Operation};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

pub struct MachineAdmission;

/// Decodes into the typed kind; a field of the wrong type is a 422 naming
/// that field, as kube-apiserver answers.
fn decode<T: DeserializeOwned>(obj: &Value, kind: &str) -> Result<T, ApiError> {
    decode_in(api::API_GROUP, obj, kind)
}

/// [`decode`] for a kind of any API group.
pub(crate) fn decode_in<T: DeserializeOwned>(
    group: &str,
    obj: &Value,
    kind: &str,
) -> Result<T, ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    serde_path_to_error::deserialize(obj.clone()).map_err(|e| {
        let field = e.path().to_string();
        ApiError::invalid(
            group,
            kind,
            name,
            vec![apimachinery::Cause::new(
                "FieldValueTypeInvalid",
                if field == "." { String::new() } else { field },
                format!("Invalid value: {}", e.inner()),
            )],
        )
    })
}

fn encode<T: Serialize>(v: &T) -> Result<Value, ApiError> {
    serde_json::to_value(v).map_err(|e| ApiError::internal(e.to_string()))
}

/// Only the object itself and its scale are checked: status writes come from
/// controllers and must not fail on the spec's account.
fn applies(attrs: &Attributes<'_>) -> bool {
    attrs.resource.group == api::API_GROUP
        && attrs.operation != Operation::Delete
        && matches!(attrs.subresource, None | Some("scale"))
}

#[async_trait::async_trait]
impl AdmissionPlugin for MachineAdmission {
    fn name(&self) -> &str {
        "MachineValidation"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), ApiError> {
        if !applies(attrs) || attrs.resource.kind != "MachineDeployment" {
            return Ok(());
        }
        // An object that does not decode is left to schema validation, which
        // reports it with field causes.
        let Ok(mut md) = decode::<api::MachineDeployment>(obj, "MachineDeployment") else {
            return Ok(());
        };
        api::default_machine_deployment(&mut md);
        // Only the spec is taken back: metadata and status stay as sent.
        let defaulted = encode(&md)?;
        if let Some(spec) = defaulted.get("spec") {
            obj["spec"] = spec.clone();
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), ApiError> {
        if !applies(attrs) {
            return Ok(());
        }
        let kind = attrs.resource.kind.as_str();
        let causes = match kind {
            "Machine" => api::validate_machine(&decode(obj, kind)?),
            "MachineSet" => api::validate_machine_set(&decode(obj, kind)?),
            "MachineDeployment" => api::validate_machine_deployment(&decode(obj, kind)?),
            "MachineClass" => api::validate_machine_class(&decode(obj, kind)?),
            _ => Vec::new(),
        };
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(api::API_GROUP, kind, attrs.name, causes))
        }
    }
}

/// Installs trellis's CRDs and admission into an embedded server.
pub async fn prepare(server: &Arc<apiserver::Server>) -> anyhow::Result<()> {
    for crd in api::crds() {
        let manifest = serde_json::to_value(&crd)?;
        apiserver::crd::install(server, &manifest).await?;
    }
    server.add_admission(Arc::new(MachineAdmission));
    Ok(())
}
