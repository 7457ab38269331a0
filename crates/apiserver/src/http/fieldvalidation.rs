//! `fieldValidation=Strict|Warn|Ignore`: what the server does with unknown
//! and duplicate fields in a write. Unknown fields are found by the kind's
//! schema (structural schema pruning for custom resources, the built-in
//! OpenAPI schemas otherwise, see [`crate::http::openapi::prune_unknown`]);
//! duplicates by re-reading the JSON body, since a parsed `Value` keeps only
//! the last of two equal keys.
//!
//! kube-apiserver drops unknown fields when it decodes, warns about them by
//! default (a `Warning: 299` header) and fails with 400 under Strict, which
//! kubectl requests for `create`/`apply`/`replace` once the OpenAPI says the
//! PATCH operation takes the parameter.

use std::collections::HashSet;
use std::fmt;

use apimachinery::ApiError;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::http::request::Query;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Ignore,
    Warn,
    Strict,
}

/// The mode a request asks for; Warn when unset.
pub fn mode(q: &Query) -> Result<Mode, ApiError> {
    match q.get("fieldValidation").unwrap_or("Warn") {
        "Ignore" => Ok(Mode::Ignore),
        "Warn" => Ok(Mode::Warn),
        "Strict" => Ok(Mode::Strict),
        other => Err(ApiError::bad_request(format!(
            "fieldValidation must be one of Ignore, Warn, Strict; got {other:?}"
        ))),
    }
}

/// Applies the mode to what was found: the warnings to send, or the 400 of
/// a strict request.
pub fn outcome(
    mode: Mode,
    unknown: &[String],
    duplicates: &[String],
) -> Result<Vec<String>, ApiError> {
    let problems: Vec<String> = duplicates
        .iter()
        .map(|p| format!("duplicate field \"{p}\""))
        .chain(unknown.iter().map(|p| format!("unknown field \"{p}\"")))
        .collect();
    match mode {
        Mode::Ignore => Ok(Vec::new()),
        Mode::Warn => Ok(problems),
        Mode::Strict if problems.is_empty() => Ok(Vec::new()),
        Mode::Strict => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            problems.join(", ")
        ))),
    }
}

/// Paths of keys that occur twice in one JSON object of `body`
/// (`spec.replicas`, `spec.containers[0].name`). Empty when the body is not
/// JSON: parsing errors are reported elsewhere.
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Walk {
        path: String::new(),
        out: &mut out,
    }
    .deserialize(&mut de);
    out
}

/// Walks a JSON document noting duplicate keys; nothing is built.
struct Walk<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.out.push(path.clone());
            }
            map.next_value_seed(Walk {
                path,
                out: &mut *self.out,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Walk {
                path: format!("{}[{i}]", self.path),
                out: &mut *self.out,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(IgnoredAny).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_with_paths() {
        let body = br#"{"spec": {"replicas": 1, "replicas": 2, "c": [{"n": 1, "n": 2}]}, "a": 1}"#;
        assert_eq!(duplicate_fields(body), ["spec.replicas", "spec.c[0].n"]);
        assert!(duplicate_fields(b"not json").is_empty());
    }

    #[test]
    fn modes() {
        let unknown = vec!["spec.foo".to_string()];
        assert_eq!(
            outcome(Mode::Warn, &unknown, &[]).unwrap(),
            ["unknown field \"spec.foo\""]
        );
        assert!(outcome(Mode::Ignore, &unknown, &[]).unwrap().is_empty());
        let e = outcome(Mode::Strict, &unknown, &[]).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "strict decoding error: unknown field \"spec.foo\""
        );
        assert!(outcome(Mode::Strict, &[], &[]).unwrap().is_empty());
    }
}
