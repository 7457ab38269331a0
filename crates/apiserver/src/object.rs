//! Object metadata: accessors and the rules every object's metadata follows
//! (names, labels, annotations, finalizers, owner references), as pure
//! functions of a JSON object. The stored encoding is
//! [`crate::storage::codec`].

use chrono::{SecondsFormat, Utc};
use serde_json::{Map, Value, json};
use store::Revision;

use apimachinery::Cause;

pub fn set_rv(obj: &mut Value, rv: Revision) {
    if let Some(m) = meta_mut(obj) {
        m.insert("resourceVersion".into(), json!(rv.to_string()));
    }
}

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// The object's metadata map, created if missing or not an object.
pub fn meta_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let m = obj.as_object_mut()?;
    let entry = m
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj).and_then(|m| m.get(field)).and_then(Value::as_str)
}

pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or("")
}

pub fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid").unwrap_or("")
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Sets finalizers, removing the field when empty: an empty list must never
/// be stored (kube-rs's finalizer helper tests for its absence).
pub fn set_finalizers(obj: &mut Value, fins: &[String]) {
    if let Some(m) = meta_mut(obj) {
        if fins.is_empty() {
            m.remove("finalizers");
        } else {
            m.insert("finalizers".into(), json!(fins));
        }
    }
}

pub fn is_deleting(obj: &Value) -> bool {
    meta(obj)
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}

pub fn owner_refs(obj: &Value) -> Vec<Value> {
    meta(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

pub fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Removes empty metadata collections that kube-apiserver never stores.
pub fn tidy(obj: &mut Value) {
    if let Some(m) = meta_mut(obj) {
        for f in [
            "finalizers",
            "labels",
            "annotations",
            "ownerReferences",
            "managedFields",
        ] {
            let empty = match m.get(f) {
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Object(o)) => o.is_empty(),
                Some(Value::Null) => true,
                _ => false,
            };
            if empty {
                m.remove(f);
            }
        }
        for f in ["generateName", "namespace", "deletionTimestamp"] {
            if m.get(f).is_some_and(|v| v.is_null() || v == "") {
                m.remove(f);
            }
        }
    }
}

const NAME_CHARS: &str = "lowercase alphanumeric characters, '-' or '.'";

/// A DNS-1123 subdomain check, returning the reason it fails.
pub fn check_subdomain(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".into());
    }
    if name.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    let ends_ok = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !ok_chars || !ends_ok(name.bytes().next()) || !ends_ok(name.bytes().last()) {
        return Some(format!(
            "a lowercase RFC 1123 subdomain must consist of {NAME_CHARS}, and must start and end with an alphanumeric character (e.g. 'example.com')"
        ));
    }
    None
}

/// A DNS-1123 label check (namespaces), returning the reason it fails.
pub fn check_label(name: &str) -> Option<String> {
    if name.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ends_ok = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !ok_chars || !ends_ok(name.bytes().next()) || !ends_ok(name.bytes().last()) {
        return Some(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name')".into(),
        );
    }
    None
}

/// kube-apiserver's limit on the total size of an object's annotations
/// (keys plus values).
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// Checks the metadata every object must have right: name format, label and
/// annotation types, finalizer and owner reference shapes.
pub fn validate_meta(obj: &Value, dns_label_name: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = name(obj);
    let bad_name = if dns_label_name {
        check_label(name)
    } else {
        check_subdomain(name)
    };
    if let Some(why) = bad_name {
        causes.push(Cause::invalid(
            "metadata.name",
            format!("Invalid value: \"{name}\": {why}"),
        ));
    }
    let Some(m) = meta(obj) else {
        return causes;
    };
    for field in ["labels", "annotations"] {
        match m.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (k, v) in map {
                    if !v.is_string() {
                        causes.push(Cause::new(
                            "FieldValueTypeInvalid",
                            format!("metadata.{field}[{k}]"),
                            "must be a string",
                        ));
                    }
                    if k.is_empty() || k.len() > 316 {
                        causes.push(Cause::invalid(
                            format!("metadata.{field}"),
                            format!("Invalid value: \"{k}\": name part must be non-empty and at most 63 characters"),
                        ));
                    }
                    if field == "labels"
                        && let Some(v) = v.as_str()
                        && !valid_label_value(v)
                    {
                        causes.push(Cause::invalid(
                            format!("metadata.labels[{k}]"),
                            format!("Invalid value: \"{v}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, at most 63 characters"),
                        ));
                    }
                }
            }
            Some(_) => causes.push(Cause::new(
                "FieldValueTypeInvalid",
                format!("metadata.{field}"),
                "must be a map of strings",
            )),
        }
    }
    if let Some(Value::Object(annotations)) = m.get("annotations") {
        let total: usize = annotations
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if total > MAX_ANNOTATIONS_BYTES {
            causes.push(Cause::new(
                "FieldValueTooLong",
                "metadata.annotations",
                format!("Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes"),
            ));
        }
    }
    if let Some(f) = m.get("finalizers")
        && !f.is_null()
        && !f
            .as_array()
            .is_some_and(|a| a.iter().all(|v| v.as_str().is_some_and(|s| !s.is_empty())))
    {
        causes.push(Cause::invalid(
            "metadata.finalizers",
            "must be a list of non-empty strings",
        ));
    }
    if let Some(refs) = m.get("ownerReferences")
        && !refs.is_null()
    {
        match refs.as_array() {
            None => causes.push(Cause::invalid("metadata.ownerReferences", "must be a list")),
            Some(refs) => {
                let mut controllers = 0;
                for (i, r) in refs.iter().enumerate() {
                    for f in ["apiVersion", "kind", "name", "uid"] {
                        if r.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                            causes.push(Cause::required(format!(
                                "metadata.ownerReferences[{i}].{f}"
                            )));
                        }
                    }
                    if r.get("controller").and_then(Value::as_bool) == Some(true) {
                        controllers += 1;
                    }
                }
                if controllers > 1 {
                    causes.push(Cause::invalid(
                        "metadata.ownerReferences",
                        "Only one reference can have Controller set to true",
                    ));
                }
            }
        }
    }
    causes
}

fn valid_label_value(v: &str) -> bool {
    if v.is_empty() {
        return true;
    }
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    v.len() <= 63
        && v.bytes()
            .all(|b| alnum(b) || b == b'-' || b == b'_' || b == b'.')
        && v.bytes().next().is_some_and(alnum)
        && v.bytes().last().is_some_and(alnum)
}

/// A name for `generateName`: the prefix (cut to 58 characters) and five
/// characters from the alphabet kube-apiserver uses.
pub fn generate_name(prefix: &str) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut p: String = prefix.chars().take(58).collect();
    let mut rng = rand::rng();
    for _ in 0..5 {
        p.push(ALPHABET[rng.random_range(0..ALPHABET.len())] as char);
    }
    p
}

/// Whether `old` and `new` differ in what moves `generation`: everything
/// but metadata, apiVersion, kind and (where a status subresource exists)
/// status. Compared in place, without copying either object.
pub fn generation_relevant_differs(old: &Value, new: &Value, status_subresource: bool) -> bool {
    let counts = |k: &str| {
        !(matches!(k, "metadata" | "apiVersion" | "kind") || (status_subresource && k == "status"))
    };
    match (old.as_object(), new.as_object()) {
        (Some(o), Some(n)) => {
            let missing_or_changed = o
                .iter()
                .filter(|(k, _)| counts(k))
                .any(|(k, v)| n.get(k) != Some(v));
            missing_or_changed || n.keys().filter(|k| counts(k)).any(|k| !o.contains_key(k))
        }
        _ => old != new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_are_limited_to_256_kib_in_total() {
        let at = |total: usize| {
            // Two annotations whose keys and values add up to `total`.
            let v = "x".repeat(total / 2 - 1);
            json!({"metadata": {"name": "a", "annotations": {"a": v, "b": v}}})
        };
        assert!(validate_meta(&at(MAX_ANNOTATIONS_BYTES), false).is_empty());
        let causes = validate_meta(&at(MAX_ANNOTATIONS_BYTES + 2), false);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "metadata.annotations");
        assert!(causes[0].message.contains("262144"));
    }

    #[test]
    fn names() {
        assert!(check_subdomain("a.b-c").is_none());
        assert!(check_subdomain("A").is_some());
        assert!(check_subdomain("-a").is_some());
        assert!(check_label("a.b").is_some());
        let n = generate_name("web-");
        assert_eq!(n.len(), 9);
        assert!(n.starts_with("web-"));
    }
}
