//! Go's `encoding/json` on the wire and controller-gen's schemas in CRDs,
//! for typed resources written in Rust.
//!
//! The typed resources of `api`, `gardener` and `worker` must read and write
//! the same JSON as their upstream Go types, so that upstream YAML round-trips
//! unchanged: Go never omits a non-pointer struct, omits zero numbers and
//! `false` under `omitempty`, and writes `null` for a nil slice or map that
//! lacks `omitempty`. The serde helpers here let the Rust types omit what Go
//! omits and accept `null` wherever Go may have written it. The schema
//! helpers give the fields whose Rust type has no faithful schema (raw
//! extensions, byte slices, resource lists) the schema controller-gen writes
//! for them.

use serde::de::{Deserialize, DeserializeOwned, Deserializer, IntoDeserializer};

/// True when `value` equals its type's default: used to omit empty structs,
/// which Go readers treat the same as absent ones.
pub fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Go's `omitempty` for integers.
pub fn is_zero_i32(value: &i32) -> bool {
    *value == 0
}

/// Go's `omitempty` for 64-bit integers.
pub fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}

/// Go's `omitempty` for booleans.
pub fn is_false(value: &bool) -> bool {
    !*value
}

/// Reads `null` as the default value. Go writes `null` for nil slices and
/// maps that have no `omitempty` (upstream's own examples show
/// `machineSetCondition: null`).
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Reads an optional string enum, treating `""` like an absent field: Go's
/// string aliases use `""` as "not set" (for instance the phase of a machine
/// that has not been created yet).
pub fn empty_as_none<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
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

/// Schema of fields whose content the API server must keep as it is without
/// validating it: a `runtime.RawExtension` (provider configuration and
/// status, which only extensions understand) or embedded object metadata.
/// Upstream marks both `x-kubernetes-preserve-unknown-fields`.
pub fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Schema of a Go `[]byte`, which `encoding/json` writes as base64.
pub fn byte_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "format": "byte",
    })
}

/// Schema of a `corev1.ResourceList` (resource name to quantity), written as
/// controller-gen writes it instead of repeating k8s-openapi's long
/// `Quantity` description for every map.
pub fn resource_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": true,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Default, Debug, PartialEq)]
    struct Probe {
        #[serde(default, deserialize_with = "null_as_default")]
        items: Vec<String>,
        #[serde(default, deserialize_with = "empty_as_none")]
        phase: Option<Phase>,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    enum Phase {
        Running,
    }

    #[test]
    fn null_and_empty_strings_read_as_absent() {
        let p: Probe = serde_json::from_str(r#"{"items": null, "phase": ""}"#).unwrap();
        assert_eq!(p, Probe::default());
        let p: Probe = serde_json::from_str(r#"{"items": ["a"], "phase": "Running"}"#).unwrap();
        assert_eq!(p.items, vec!["a"]);
        assert_eq!(p.phase, Some(Phase::Running));
    }

    #[test]
    fn omitempty_predicates_match_go_zero_values() {
        assert!(is_zero_i32(&0) && !is_zero_i32(&1));
        assert!(is_zero_i64(&0) && !is_zero_i64(&-1));
        assert!(is_false(&false) && !is_false(&true));
        assert!(is_default(&String::new()) && !is_default(&"x".to_string()));
    }
}
