//! Field sets of objects: the owned paths of an object by its list and
//! map semantics, and what changed between two states.

use std::collections::BTreeMap;

use serde_json::Value;

use super::*;
use crate::http::shape::{Keys, ListKind, Shape};
use crate::storage::registry::Resource;

// ---------------------------------------------------------------------------
// Field sets of objects

/// The paths of an object a field set can name.
pub(super) type Flat<'v> = BTreeMap<Path, Entry<'v>>;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Entry<'v> {
    /// An owned leaf, with its value (compared to find changes).
    Leaf(&'v Value),
    /// An owned element or map entry that has owned children.
    Owned,
    /// A granular map that nobody owns by applying it, but that an update
    /// adding it does own (`".": {}`), as kube-apiserver's comparison of
    /// typed objects finds. Go value structs (`spec`, a pod template) are
    /// never added, since the typed object always has them.
    Map,
}

/// The paths an applied configuration owns.
pub(super) fn owned(flat: Flat<'_>) -> FieldSet {
    flat.into_iter()
        .filter(|(_, e)| *e != Entry::Map)
        .map(|(p, _)| p)
        .collect()
}

/// The field set of a whole object, without the fields nobody owns.
pub(super) fn flatten<'v>(obj: &'v Value, shape: Shape<'_>) -> Flat<'v> {
    let mut out = Flat::new();
    let Value::Object(root) = obj else {
        return out;
    };
    let mut path = Path::new();
    for (k, v) in root {
        if k == "apiVersion" || k == "kind" {
            continue;
        }
        if k == "metadata"
            && let Value::Object(meta) = v
        {
            let meta_shape = shape.field(k);
            path.push("f:metadata".into());
            for (mk, mv) in meta {
                if UNOWNED_META.contains(&mk.as_str()) {
                    continue;
                }
                path.push(format!("f:{mk}"));
                walk(mv, meta_shape.field(mk), false, &mut path, &mut out);
                path.pop();
            }
            path.pop();
            continue;
        }
        path.push(format!("f:{k}"));
        walk(v, shape.field(k), !shape.declared(k), &mut path, &mut out);
        path.pop();
    }
    out
}

pub(super) fn walk<'v>(
    v: &'v Value,
    shape: Shape<'_>,
    owned_container: bool,
    path: &mut Path,
    out: &mut Flat<'v>,
) {
    match v {
        Value::Object(m) if !m.is_empty() && !shape.is_atomic_map() => {
            if owned_container {
                out.insert(path.clone(), Entry::Owned);
            } else if !shape.always_present() {
                out.insert(path.clone(), Entry::Map);
            }
            for (k, child) in m {
                path.push(format!("f:{k}"));
                walk(child, shape.field(k), !shape.declared(k), path, out);
                path.pop();
            }
        }
        Value::Array(items) => match shape.list_kind() {
            ListKind::Atomic => {
                out.insert(path.clone(), Entry::Leaf(v));
            }
            ListKind::Set => {
                for item in items {
                    path.push(format!("v:{item}"));
                    out.insert(path.clone(), Entry::Leaf(item));
                    path.pop();
                }
            }
            ListKind::Map(keys) => {
                let item_shape = shape.items();
                for (i, item) in items.iter().enumerate() {
                    path.push(element(item, &keys, i));
                    match item {
                        Value::Object(m) => {
                            out.insert(path.clone(), Entry::Owned);
                            for (k, child) in m {
                                path.push(format!("f:{k}"));
                                walk(
                                    child,
                                    item_shape.field(k),
                                    !item_shape.declared(k),
                                    path,
                                    out,
                                );
                                path.pop();
                            }
                        }
                        other => {
                            out.insert(path.clone(), Entry::Leaf(other));
                        }
                    }
                    path.pop();
                }
            }
        },
        _ => {
            out.insert(path.clone(), Entry::Leaf(v));
        }
    }
}

/// The path element of an associative list's element: `k:` with its key
/// fields (sorted by name, as kube-apiserver writes them; a missing key
/// field with a default takes it), or `i:` when it has none.
pub(super) fn element(item: &Value, keys: &Keys<'_>, index: usize) -> String {
    let mut key: BTreeMap<&str, Value> = keys
        .iter()
        .filter_map(|k| item.get(k).filter(|v| !v.is_null()).map(|v| (k, v.clone())))
        .collect();
    if !key.is_empty() {
        for k in keys.iter() {
            if let (false, Some(d)) = (key.contains_key(k), keys.default_of(k)) {
                key.insert(k, d);
            }
        }
    }
    if key.is_empty() {
        format!("i:{index}")
    } else {
        format!("k:{}", serde_json::to_string(&key).unwrap_or_default())
    }
}

/// The fields a write changed (modified or added) and removed.
pub(super) struct Comparison {
    pub(super) changed: FieldSet,
    pub(super) removed: FieldSet,
}

pub(super) fn compare(old: &Flat<'_>, new: &Flat<'_>) -> Comparison {
    let mut changed = FieldSet::new();
    let mut removed = FieldSet::new();
    for (p, nv) in new {
        match old.get(p) {
            None => {
                changed.insert(p.clone());
            }
            Some(ov) if ov != nv => {
                changed.insert(p.clone());
            }
            Some(_) => {}
        }
    }
    for p in old.keys() {
        if !new.contains_key(p) {
            removed.insert(p.clone());
        }
    }
    Comparison { changed, removed }
}

/// The part of an applied configuration a write to `sub` may change: only
/// status through `/status`, and no status through the main resource when a
/// status subresource exists (kube-apiserver's reset fields). The rest is
/// neither merged nor owned.
pub(super) fn reset_fields(applied: &Value, res: &Resource, sub: Option<&str>) -> Value {
    let mut out = applied.clone();
    if let Value::Object(m) = &mut out {
        match sub {
            Some("status") => {
                m.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "status"))
            }
            None if res.status_subresource => {
                m.shift_remove("status");
            }
            _ => {}
        }
    }
    out
}
