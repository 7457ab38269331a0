//! The `MachineClass` resource: provider configuration shared by machines.
//!
//! Unlike the other kinds it has no `spec`: its fields sit at the top level
//! next to `metadata`. `kube::CustomResource` only derives spec/status kinds,
//! so the `Resource` plumbing and the CRD are written out here by hand.

use std::collections::BTreeMap;

use apimachinery::gojson::null_as_default;
use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize, Serializer, ser::SerializeStruct};
use serde_json::Value;

/// Provider configuration and credentials that machines are created from.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(description = "Provider configuration and credentials that machines are created from.")]
pub struct MachineClass {
    /// Standard object metadata; like the derived kinds, left out of the
    /// schema because the API server handles it itself.
    #[schemars(skip)]
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What a node of this class looks like, so the cluster autoscaler can
    /// scale a group up from zero.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
    pub node_template: Option<NodeTemplate>,
    /// Secret holding the provider credentials; its keys win over those of
    /// `secretRef` when both name the same key.
    #[serde(default)]
    pub credentials_secret_ref: Option<SecretReference>,
    /// Provider-specific VM configuration, passed to the driver untouched.
    #[serde(default)]
    #[schemars(schema_with = "apimachinery::gojson::preserve_unknown_object")]
    pub provider_spec: Value,
    /// Name of the driver that serves this class, e.g. `aws` or `local`.
    #[serde(default)]
    pub provider: String,
    /// Secret holding the `userData` (cloud-init) and possibly credentials.
    #[serde(default)]
    pub secret_ref: Option<SecretReference>,
}

/// Resources and placement of a node of a class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeTemplate {
    /// Node capacity; `cpu`, `gpu` and `memory` are required.
    #[serde(default, deserialize_with = "null_as_default")]
    #[schemars(schema_with = "apimachinery::gojson::resource_list")]
    pub capacity: BTreeMap<String, Quantity>,
    /// Extended resources the controller adds to the node's capacity.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    #[schemars(schema_with = "apimachinery::gojson::resource_list")]
    pub virtual_capacity: BTreeMap<String, Quantity>,
    /// Provider's instance type.
    #[serde(default)]
    pub instance_type: String,
    /// Region of the nodes.
    #[serde(default)]
    pub region: String,
    /// Zone of the nodes.
    #[serde(default)]
    pub zone: String,
    /// CPU architecture of the nodes, e.g. `amd64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
}

// Written by hand to put `apiVersion` and `kind` in front, as the derived
// kinds do, and to omit empty fields the way Go's `omitempty` does.
impl Serialize for MachineClass {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut obj = ser.serialize_struct("MachineClass", 8)?;
        obj.serialize_field("apiVersion", super::super::GROUP_VERSION)?;
        obj.serialize_field("kind", "MachineClass")?;
        obj.serialize_field("metadata", &self.metadata)?;
        if let Some(t) = &self.node_template {
            obj.serialize_field("nodeTemplate", t)?;
        }
        if let Some(r) = &self.credentials_secret_ref {
            obj.serialize_field("credentialsSecretRef", r)?;
        }
        // Upstream's field has no `omitempty`, but a nil RawExtension is
        // written as `null`, which the CRD schema would reject; omit it.
        if !self.provider_spec.is_null() {
            obj.serialize_field("providerSpec", &self.provider_spec)?;
        }
        if !self.provider.is_empty() {
            obj.serialize_field("provider", &self.provider)?;
        }
        if let Some(r) = &self.secret_ref {
            obj.serialize_field("secretRef", r)?;
        }
        obj.end()
    }
}

impl k8s_openapi::Resource for MachineClass {
    const API_VERSION: &'static str = "machine.sapcloud.io/v1alpha1";
    const GROUP: &'static str = "machine.sapcloud.io";
    const KIND: &'static str = "MachineClass";
    const VERSION: &'static str = "v1alpha1";
    const URL_PATH_SEGMENT: &'static str = "machineclasses";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::ListableResource for MachineClass {
    const LIST_KIND: &'static str = "MachineClassList";
}

impl k8s_openapi::Metadata for MachineClass {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl MachineClass {
    /// A class with a name and provider spec, in the style of the derived
    /// kinds' `new`.
    pub fn new(name: &str, provider: &str, provider_spec: Value) -> MachineClass {
        MachineClass {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            provider: provider.to_string(),
            provider_spec,
            ..MachineClass::default()
        }
    }
}
