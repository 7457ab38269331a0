//! Serde and schema helpers that make the Rust types read and write the same
//! JSON as Go's `encoding/json` with `omitempty`, and schema snippets for the
//! fields whose Go types have no useful Rust schema (raw extensions, byte
//! slices).

use serde::de::{Deserialize, Deserializer};

/// Go's `omitempty` for integers.
pub(crate) fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}

/// Reads `null` as the default value; Go writes `null` for nil slices and
/// maps that lack `omitempty`.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Schema of a `runtime.RawExtension`: any object, kept as is by the API
/// server (`x-kubernetes-preserve-unknown-fields`), as controller-gen writes
/// it for upstream's raw fields.
pub(crate) fn raw_extension(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Schema of a Go `[]byte`, which `encoding/json` writes as base64.
pub(crate) fn byte_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "format": "byte",
    })
}

/// Schema of a `corev1.ResourceList` (resource name to quantity), written as
/// controller-gen writes it instead of repeating k8s-openapi's long
/// `Quantity` description for every map.
pub(crate) fn resource_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": true,
        },
    })
}

/// Schema of an optional `ResourceList`.
pub(crate) fn optional_resource_list(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    resource_list(g)
}
