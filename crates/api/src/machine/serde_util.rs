//! Serde and schema helpers that make the Rust types read and write the same
//! JSON as Go's `encoding/json` with `omitempty`.
//!
//! Go never omits a non-pointer struct, and writes `null` for a nil slice or
//! map that lacks `omitempty`; these helpers let us omit empty structs (which
//! Go readers treat the same as absent) and accept `null` wherever Go may
//! have written it.

use serde::de::{Deserialize, DeserializeOwned, Deserializer, IntoDeserializer};

/// True when `value` equals its type's default: used to omit empty structs.
pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Go's `omitempty` for integers.
pub(crate) fn is_zero_i32(value: &i32) -> bool {
    *value == 0
}

/// Go's `omitempty` for 64-bit integers.
pub(crate) fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}

/// Go's `omitempty` for booleans.
pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}

/// Reads `null` as the default value. Go writes `null` for nil slices that
/// have no `omitempty` (upstream's own examples show
/// `machineSetCondition: null`).
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Reads an optional string enum, treating `""` like an absent field: Go's
/// string aliases use `""` as "not set" (for instance the phase of a machine
/// that has not been created yet).
pub(crate) fn empty_as_none<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    match Option::<String>::deserialize(deserializer)? {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => T::deserialize(s.into_deserializer()).map(Some),
    }
}

/// Schema for fields whose content the API server must keep as is without
/// validating it: raw provider configuration and embedded object metadata
/// (upstream marks both `x-kubernetes-preserve-unknown-fields`).
pub(crate) fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Schema of a `ResourceList` (resource name to quantity), written as
/// upstream's controller-gen writes it instead of repeating k8s-openapi's
/// long `Quantity` description for every map.
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
