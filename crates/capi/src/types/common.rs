//! What the cluster.x-k8s.io kinds share: v1beta1 conditions (with a
//! severity), machine addresses, template metadata, API endpoints and the
//! serde and schema helpers that make the Rust types read and write the same
//! JSON as upstream's Go types.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

/// A v1beta1 condition (`sigs.k8s.io/cluster-api/api/v1beta1.Condition`):
/// like `metav1.Condition` but with a severity for False conditions and
/// without `observedGeneration`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, e.g. `Ready` or `BootstrapReady`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// How bad a False condition is: `Error`, `Warning` or `Info`; empty
    /// for True ones.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub severity: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// One CamelCase word saying why.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// A sentence for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// One address of a machine (`MachineAddress`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MachineAddress {
    /// `Hostname`, `ExternalIP`, `InternalIP`, `ExternalDNS` or `InternalDNS`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The address.
    pub address: String,
}

/// The labels and annotations of a template (`clusterv1.ObjectMeta`): the
/// only metadata a template may carry to the objects made from it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMeta {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl TemplateMeta {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// Where a control plane's API server listens.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiEndpoint {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub port: i32,
}

impl ApiEndpoint {
    /// Upstream's `IsValid`: a host and a port.
    pub fn is_valid(&self) -> bool {
        !self.host.is_empty() && self.port != 0
    }

    pub fn is_zero(&self) -> bool {
        self.host.is_empty() && self.port == 0
    }
}

/// A failure domain of a cluster (`FailureDomainSpec`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainSpec {
    /// Whether control-plane machines may be placed there.
    #[serde(default, skip_serializing_if = "is_false")]
    pub control_plane: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// Go's `omitempty` for booleans.
pub fn is_false(v: &bool) -> bool {
    !*v
}

/// Go's `omitempty` for integers.
pub fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// Reads `null` as the default value (Go writes `null` for nil slices and
/// maps without `omitempty`).
pub fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The schema of a free-form object whose fields the API server must keep
/// (`x-kubernetes-preserve-unknown-fields`), for the parts of upstream's
/// types trellis carries but does not model (topology, cluster network).
pub fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// The schema of a Go `metav1.Duration`: a string such as `10s` or `1m30s`.
pub fn duration_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
    })
}

/// The schema of an `intstr.IntOrString`.
pub fn int_or_string_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
    })
}
