//! Serde and schema helpers that make the types write the same JSON as Go's
//! `encoding/json` with `omitempty`, so upstream YAML round-trips unchanged.

use serde::{Deserialize, Deserializer};

/// Go's `omitempty` for booleans.
pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}

/// Go's `omitempty` for 64-bit integers.
pub(crate) fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}

/// Reads `null` as the default value: Go writes `null` for nil slices and
/// maps that lack `omitempty`.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Schema of raw provider configuration (`runtime.RawExtension`): the API
/// server keeps it as it is, only extensions understand it.
pub(crate) fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}
