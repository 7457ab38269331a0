//! FieldsV1 and `managedFields` encoding: field sets to and from the
//! nested JSON kube-apiserver uses, and the managers of a live object.

use serde_json::{Map, Value, json};

use super::*;
use crate::object;

// ---------------------------------------------------------------------------
// FieldsV1 and managedFields encoding

/// Decodes a FieldsV1 object into a set.
pub fn decode_fields(v: &Value) -> Option<FieldSet> {
    let mut out = FieldSet::new();
    let mut path = Path::new();
    decode_node(v, &mut path, &mut out)?;
    Some(out)
}

pub(super) fn decode_node(v: &Value, path: &mut Path, out: &mut FieldSet) -> Option<()> {
    let Value::Object(m) = v else { return None };
    for (k, child) in m {
        if k == "." {
            if !path.is_empty() {
                out.insert(path.clone());
            }
            continue;
        }
        if !["f:", "k:", "v:", "i:"].iter().any(|p| k.starts_with(p)) {
            return None;
        }
        path.push(k.clone());
        match child {
            Value::Object(c) if c.is_empty() => {
                out.insert(path.clone());
            }
            _ => decode_node(child, path, out)?,
        }
        path.pop();
    }
    Some(())
}

/// Encodes a set as FieldsV1: nested objects, `{}` for an owned leaf and
/// `".": {}` first in an owned node that has owned children.
pub fn encode_fields(set: &FieldSet) -> Value {
    let mut root = Map::new();
    let mut iter = set.iter().peekable();
    while let Some(path) = iter.next() {
        if path.is_empty() {
            continue;
        }
        let has_children = iter.peek().is_some_and(|next| next.starts_with(path));
        let mut node = &mut root;
        for el in path {
            let entry = node.entry(el.clone()).or_insert_with(|| json!({}));
            if !entry.is_object() {
                *entry = json!({});
            }
            node = match entry {
                Value::Object(m) => m,
                _ => unreachable!("made an object above"),
            };
        }
        if has_children {
            node.insert(".".into(), json!({}));
        }
    }
    Value::Object(root)
}

/// What a request's or object's `metadata.managedFields` says.
pub(super) enum Requested {
    /// Absent, empty or undecodable: use the live object's.
    Unset,
    /// `[{}]`: clear ownership.
    Reset,
    Entries(Vec<Managed>),
}

pub(super) fn requested(obj: &Value) -> Requested {
    let Some(Value::Array(list)) = object::meta(obj).and_then(|m| m.get("managedFields")) else {
        return Requested::Unset;
    };
    if list.is_empty() {
        return Requested::Unset;
    }
    if list
        .iter()
        .all(|e| e.as_object().is_some_and(Map::is_empty))
    {
        return Requested::Reset;
    }
    match list.iter().map(decode_entry).collect::<Option<Vec<_>>>() {
        Some(entries) => Requested::Entries(entries),
        None => Requested::Unset,
    }
}

/// The managers recorded on a stored object (none when they do not decode).
pub(super) fn live_managers(obj: &Value) -> Vec<Managed> {
    match requested(obj) {
        Requested::Entries(e) => e,
        _ => Vec::new(),
    }
}

pub(super) fn decode_entry(v: &Value) -> Option<Managed> {
    let m = v.as_object()?;
    let s = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
    let operation = match m.get("operation").and_then(Value::as_str)? {
        "Apply" => Operation::Apply,
        "Update" => Operation::Update,
        _ => return None,
    };
    let fields = match m.get("fieldsV1") {
        None | Some(Value::Null) => FieldSet::new(),
        Some(f) => {
            if s("fieldsType").as_deref() != Some("FieldsV1") {
                return None;
            }
            decode_fields(f)?
        }
    };
    Some(Managed {
        manager: s("manager").unwrap_or_default(),
        operation,
        api_version: s("apiVersion").unwrap_or_default(),
        time: s("time"),
        subresource: s("subresource").unwrap_or_default(),
        fields,
    })
}

/// The managedFields list, in kube-apiserver's order: Apply before
/// Update, then oldest first, then by manager, apiVersion, subresource.
pub(super) fn encode_managed(mut managers: Vec<Managed>) -> Value {
    managers.sort_by(|a, b| {
        (
            a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    Value::Array(
        managers
            .into_iter()
            .map(|m| {
                let mut e = Map::new();
                e.insert("manager".into(), json!(m.manager));
                e.insert("operation".into(), json!(m.operation.as_str()));
                e.insert("apiVersion".into(), json!(m.api_version));
                if let Some(t) = m.time {
                    e.insert("time".into(), json!(t));
                }
                e.insert("fieldsType".into(), json!("FieldsV1"));
                e.insert("fieldsV1".into(), encode_fields(&m.fields));
                if !m.subresource.is_empty() {
                    e.insert("subresource".into(), json!(m.subresource));
                }
                Value::Object(e)
            })
            .collect(),
    )
}

pub(super) fn set_managed(obj: &mut Value, managers: Vec<Managed>) {
    if let Some(m) = object::meta_mut(obj) {
        if managers.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), encode_managed(managers));
        }
    }
}
