//! Server-side apply: merging an applied configuration into the live
//! object, ownership of the applied fields, and conflicts with other
//! managers.

use std::collections::HashMap;

use apimachinery::{ApiError, Cause};
use serde_json::{Map, Value};

use super::*;
use crate::http::shape::{ListKind, Shape};
use crate::object;
use crate::storage::registry::Resource;

// ---------------------------------------------------------------------------
// Apply

/// What an apply decided.
pub struct Applied {
    /// The object to store, with managedFields set.
    pub object: Value,
}

/// Applies `applied` (already checked to be an object of `res` with the
/// right name) for `manager` over `live` (`None` when the object does not
/// exist yet, in which case `skeleton` — apiVersion, kind, name, namespace —
/// is the starting point).
pub fn apply(
    res: &Resource,
    sub: Option<&str>,
    live: Option<&Value>,
    skeleton: &Value,
    applied: &Value,
    manager: &str,
    force: bool,
) -> Result<Applied, ApiError> {
    apply_at(
        res,
        sub,
        live,
        skeleton,
        applied,
        manager,
        force,
        &object::now_rfc3339(),
    )
}

#[allow(clippy::too_many_arguments)]
pub(super) fn apply_at(
    res: &Resource,
    sub: Option<&str>,
    live: Option<&Value>,
    skeleton: &Value,
    applied: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Applied, ApiError> {
    let shape = Shape::for_resource(res);
    let sub_name = sub.unwrap_or("");
    let mut managers = live.map(live_managers).unwrap_or_default();
    let mut base = live.cloned().unwrap_or_else(|| skeleton.clone());
    if let Some(m) = object::meta_mut(&mut base) {
        m.remove("managedFields");
    }
    let applied = &reset_fields(applied, res, sub);
    let applied_set = owned(flatten(applied, shape));

    let mut merged = merge(Some(&base), applied, shape, "")?;

    let mine = managers
        .iter()
        .position(|m| m.same_owner(manager, Operation::Apply, "", sub_name));
    let (last_set, old_time) = match mine {
        Some(i) => {
            let m = managers.remove(i);
            (m.fields, m.time)
        }
        None => (FieldSet::new(), None),
    };

    // Fields this manager applied before and no longer applies go, unless
    // someone (this manager included, through the new configuration) still
    // owns them.
    let owned: FieldSet = managers
        .iter()
        .flat_map(|m| m.fields.iter().cloned())
        .chain(applied_set.iter().cloned())
        .collect();
    let stale: Vec<&Path> = last_set.iter().filter(|p| !owned.contains(*p)).collect();
    remove_paths(&mut merged, &stale, &owned);

    let cmp = compare(&flatten(&base, shape), &flatten(&merged, shape));
    let mut conflicts: Vec<(String, Path)> = Vec::new();
    for m in &managers {
        for p in m.fields.intersection(&cmp.changed) {
            conflicts.push((m.describe(), p.clone()));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(conflicts));
    }
    for m in &mut managers {
        m.fields
            .retain(|p| !cmp.changed.contains(p) && !cmp.removed.contains(p));
    }
    let object_changed = merged != base;
    managers.push(Managed {
        manager: manager.to_string(),
        operation: Operation::Apply,
        api_version: res.api_version(),
        time: if object_changed || old_time.is_none() {
            Some(now.to_string())
        } else {
            old_time
        },
        subresource: sub_name.to_string(),
        fields: applied_set,
    });
    managers.retain(|m| !m.fields.is_empty());
    set_managed(&mut merged, managers);
    Ok(Applied { object: merged })
}

/// The 409 kube-apiserver answers an apply that would change fields other
/// managers own.
pub(super) fn conflict_error(mut conflicts: Vec<(String, Path)>) -> ApiError {
    conflicts.sort();
    let n = conflicts.len();
    let message = if n == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            conflicts[0].0,
            display_path(&conflicts[0].1)
        )
    } else {
        let mut lines = Vec::new();
        let mut last: Option<&str> = None;
        for (who, path) in &conflicts {
            if last != Some(who.as_str()) {
                lines.push(format!("conflicts with {who}:"));
                last = Some(who);
            }
            lines.push(format!("- {}", display_path(path)));
        }
        format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
    };
    let mut e = ApiError::new(409, "Conflict", message);
    e.causes = conflicts
        .iter()
        .map(|(who, path)| {
            Cause::new(
                "FieldManagerConflict",
                display_path(path),
                format!("conflict with {who}"),
            )
        })
        .collect();
    e
}

/// A path as conflicts print it: `.spec.containers[name="c"].image`.
pub fn display_path(path: &Path) -> String {
    let mut s = String::new();
    for el in path {
        if let Some(f) = el.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = el.strip_prefix("k:") {
            let fields: Vec<String> = match serde_json::from_str::<Map<String, Value>>(k) {
                Ok(m) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                Err(_) => vec![k.to_string()],
            };
            s.push_str(&format!("[{}]", fields.join(",")));
        } else if let Some(v) = el.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = el.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        }
    }
    s
}

/// Merges an applied configuration into a live value: maps entry by entry
/// (a `null` removes), associative lists element by element, sets as
/// unions, anything else replaced.
pub(super) fn merge(
    live: Option<&Value>,
    applied: &Value,
    shape: Shape<'_>,
    at: &str,
) -> Result<Value, ApiError> {
    match applied {
        Value::Object(am) if !shape.is_atomic_map() => {
            let mut out = match live {
                Some(Value::Object(lm)) => lm.clone(),
                _ => Map::new(),
            };
            for (k, av) in am {
                if av.is_null() {
                    out.shift_remove(k);
                    continue;
                }
                let child = merge(out.get(k), av, shape.field(k), &format!("{at}.{k}"))?;
                out.insert(k.clone(), child);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => match shape.list_kind() {
            ListKind::Atomic => Ok(applied.clone()),
            ListKind::Set => {
                let mut out = match live {
                    Some(Value::Array(l)) => l.clone(),
                    _ => Vec::new(),
                };
                let mut seen: std::collections::HashSet<String> =
                    out.iter().map(Value::to_string).collect();
                for item in items {
                    if seen.insert(item.to_string()) {
                        out.push(item.clone());
                    }
                }
                Ok(Value::Array(out))
            }
            ListKind::Map(keys) => {
                let item_shape = shape.items();
                let mut out = match live {
                    Some(Value::Array(l)) => l.clone(),
                    _ => Vec::new(),
                };
                let mut index: HashMap<String, usize> = HashMap::new();
                for (i, item) in out.iter().enumerate() {
                    index.entry(element(item, &keys, usize::MAX)).or_insert(i);
                }
                let mut applied_keys = std::collections::HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    let el = element(item, &keys, i);
                    if !item.is_object() || el.starts_with("i:") {
                        return Err(ApiError::bad_request(format!(
                            "{at}: element {i} must be an object with key fields {keys:?}"
                        )));
                    }
                    if !applied_keys.insert(el.clone()) {
                        return Err(ApiError::bad_request(format!(
                            "{at}: duplicate entries for key {}",
                            display_path(&vec![el])
                        )));
                    }
                    match index.get(&el) {
                        Some(&j) => {
                            let m = merge(Some(&out[j]), item, item_shape, &format!("{at}[{i}]"))?;
                            out[j] = m;
                        }
                        None => {
                            index.insert(el, out.len());
                            out.push(merge(None, item, item_shape, &format!("{at}[{i}]"))?);
                        }
                    }
                }
                Ok(Value::Array(out))
            }
        },
        other => Ok(other.clone()),
    }
}

/// Removes the values at `paths` (sorted) from `obj`, then any map the
/// removal left empty that nobody owns. A field whose own entry is stale
/// but below which something is still owned stays (kubectl's migration
/// from client-side apply gives the applier `".": {}` on maps such as
/// labels whose entries it keeps applying); a stale list element goes
/// whole, as in kube-apiserver.
pub(super) fn remove_paths(obj: &mut Value, paths: &[&Path], owned: &FieldSet) {
    let mut last_removed: Option<&Path> = None;
    for path in paths {
        if last_removed.is_some_and(|r| path.starts_with(r)) {
            continue;
        }
        let is_field = path.last().is_some_and(|e| e.starts_with("f:"));
        if is_field && has_owned_below(owned, path) {
            continue;
        }
        if remove_at(obj, path) {
            last_removed = Some(path);
            // Drop emptied parents reached through map fields.
            let mut n = path.len() - 1;
            while n >= 2 {
                let parent = &path[..n];
                let empty =
                    get_at(obj, parent).is_some_and(|v| v.as_object().is_some_and(Map::is_empty));
                if !empty || owned.contains(&parent.to_vec()) || !parent[n - 1].starts_with("f:") {
                    break;
                }
                remove_at(obj, parent);
                n -= 1;
            }
        }
    }
}

/// Whether `owned` has a path that extends `path`: those sort right after
/// it.
pub(super) fn has_owned_below(owned: &FieldSet, path: &Path) -> bool {
    use std::ops::Bound::{Excluded, Unbounded};
    owned
        .range::<Path, _>((Excluded(path), Unbounded))
        .next()
        .is_some_and(|next| next.starts_with(path))
}

pub(super) fn matches_element(item: &Value, el: &str) -> bool {
    if let Some(k) = el.strip_prefix("k:") {
        match serde_json::from_str::<Map<String, Value>>(k) {
            Ok(key) => key.iter().all(|(f, v)| item.get(f) == Some(v)),
            Err(_) => false,
        }
    } else if let Some(v) = el.strip_prefix("v:") {
        serde_json::from_str::<Value>(v).is_ok_and(|v| *item == v)
    } else {
        false
    }
}

pub(super) fn child_mut<'v>(v: &'v mut Value, el: &str) -> Option<&'v mut Value> {
    if let Some(f) = el.strip_prefix("f:") {
        return v.as_object_mut()?.get_mut(f);
    }
    if let Some(i) = el.strip_prefix("i:") {
        return v.as_array_mut()?.get_mut(i.parse::<usize>().ok()?);
    }
    v.as_array_mut()?
        .iter_mut()
        .find(|item| matches_element(item, el))
}

pub(super) fn get_at<'v>(obj: &'v Value, path: &[String]) -> Option<&'v Value> {
    let mut cur = obj;
    for el in path {
        cur = if let Some(f) = el.strip_prefix("f:") {
            cur.as_object()?.get(f)?
        } else if let Some(i) = el.strip_prefix("i:") {
            cur.as_array()?.get(i.parse::<usize>().ok()?)?
        } else {
            cur.as_array()?
                .iter()
                .find(|item| matches_element(item, el))?
        };
    }
    Some(cur)
}

/// Removes the value at `path`; whether there was one.
pub(super) fn remove_at(obj: &mut Value, path: &[String]) -> bool {
    let Some((last, parent_path)) = path.split_last() else {
        return false;
    };
    let mut parent = obj;
    for el in parent_path {
        match child_mut(parent, el) {
            Some(c) => parent = c,
            None => return false,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        return parent
            .as_object_mut()
            .is_some_and(|m| m.shift_remove(f).is_some());
    }
    if last.starts_with("i:") {
        // Positions shift as elements go; elements without keys are left
        // to their other owners.
        return false;
    }
    match parent.as_array_mut() {
        Some(items) => {
            let before = items.len();
            items.retain(|item| !matches_element(item, last));
            items.len() != before
        }
        None => false,
    }
}
