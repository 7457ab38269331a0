//! Strategic merge patch (`application/strategic-merge-patch+json`) for the
//! built-in kinds, as kubectl apply, edit and patch send it.
//!
//! It is a JSON merge patch (a `null` deletes a map entry) with two
//! differences. Lists whose field is tagged `patchStrategy: merge` merge
//! element-wise: lists of objects by their merge key (which depends on the
//! field's place in the kind, see [`crate::http::shape`]), lists of scalars as
//! sets; other lists are replaced whole. And the patch may carry directives:
//!
//! - `$patch: replace` on a map replaces it; on a list element, replaces the
//!   whole list by the patch's other elements;
//! - `$patch: delete` on a map empties it; on a list element, deletes the
//!   elements with that merge key;
//! - `$retainKeys: [..]` clears the map's entries not named in it (kubectl
//!   sends it for `retainKeys` fields such as a Deployment's strategy or a
//!   volume's source when the source type changes);
//! - `$deleteFromPrimitiveList/<field>: [..]` removes scalars from a merged
//!   scalar list;
//! - `$setElementOrder/<field>: [..]` gives the order of a merged list.
//!
//! Element order follows kube-apiserver: the patch's elements (in
//! `$setElementOrder` order when given, else patch order) are interleaved
//! with the elements only the server has, which keep their relative order;
//! where both are on the server their server order decides.
//!
//! Directives never reach the stored object, and malformed directives are
//! a 400, never a panic.

use std::collections::{HashMap, HashSet};

use apimachinery::ApiError;
use serde_json::{Map, Value};

use crate::http::shape::{Shape, SmpField};
use crate::storage::registry::Resource;

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";

/// Applies a strategic merge patch to `target`, an object of the built-in
/// kind `res`.
pub fn strategic_merge(res: &Resource, target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Value::Object(patch) = patch else {
        return Err(bad("the patch must be a JSON object"));
    };
    let original = match target.take() {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    *target = merge_map(original, patch, Shape::for_resource(res))?;
    Ok(())
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message)
}

/// Merges the map `patch` into the map `original` (of shape `shape`).
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    shape: Shape<'_>,
) -> Result<Value, ApiError> {
    match patch.get(PATCH) {
        None => {}
        Some(Value::String(d)) if d == "merge" => {}
        Some(Value::String(d)) if d == "replace" => {
            // The patch's other entries are the new map; they may carry
            // directives of their own.
            return merge_map(Map::new(), &without_directive(patch), shape);
        }
        Some(Value::String(d)) if d == "delete" => return Ok(Value::Object(Map::new())),
        Some(other) => {
            return Err(bad(format!(
                "Unknown patch type: {other} in map: {}",
                Value::Object(patch.clone())
            )));
        }
    }
    if let Some(keys) = patch.get(RETAIN_KEYS) {
        retain_keys(&mut original, patch, keys)?;
    }
    // `$setElementOrder` orders against the list as the server had it.
    let mut server_lists: HashMap<&str, Vec<Value>> = HashMap::new();
    for key in patch.keys() {
        if let Some(field) = key.strip_prefix(SET_ORDER)
            && let Some(Value::Array(list)) = original.get(field)
        {
            server_lists.insert(field, list.clone());
        }
    }
    let mut gone: HashSet<&str> = HashSet::new();
    for (key, value) in patch {
        if key == PATCH || key == RETAIN_KEYS || key.starts_with(SET_ORDER) {
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_FROM) {
            delete_from_list(&mut original, field, value)?;
            continue;
        }
        if key.starts_with('$') {
            // Not a directive we know: dropped, as decoding into the typed
            // object drops it upstream.
            continue;
        }
        if value.is_null() {
            // Removed in one pass below: one shift_remove per key would be
            // quadratic in the size of the map.
            if original.contains_key(key) {
                gone.insert(key.as_str());
            }
            continue;
        }
        let child = shape.field(key);
        let smp = shape.smp_field(key);
        let merged = match original.get_mut(key) {
            Some(existing) => merge_value(existing.take(), value, child, smp)?,
            None => merge_value(Value::Null, value, child, smp)?,
        };
        // `insert` keeps the position of an existing entry.
        original.insert(key.clone(), merged);
    }
    if !gone.is_empty() {
        original.retain(|k, _| !gone.contains(k.as_str()));
    }
    for (key, order) in patch {
        let Some(field) = key.strip_prefix(SET_ORDER) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(bad(format!("invalid patch: {key} must be a list")));
        };
        let Some(smp) = shape.smp_field(field).filter(|s| s.merge) else {
            continue;
        };
        let server = server_lists.remove(field).unwrap_or_default();
        if let Some(Value::Array(list)) = original.get_mut(field) {
            let ident = Identity(smp.merge_key);
            let order: Vec<String> = order.iter().filter_map(|v| ident.of(v)).collect();
            *list = reorder(std::mem::take(list), &order, &server, ident);
        }
    }
    Ok(Value::Object(original))
}

/// Merges one patch value into the original value of a field.
fn merge_value(
    original: Value,
    patch: &Value,
    shape: Shape<'_>,
    smp: Option<SmpField>,
) -> Result<Value, ApiError> {
    match (original, patch) {
        (Value::Object(o), Value::Object(p)) if !smp.is_some_and(|s| s.replace) => {
            merge_map(o, p, shape)
        }
        (Value::Null, Value::Object(p)) if !smp.is_some_and(|s| s.replace) => {
            merge_map(Map::new(), p, shape)
        }
        (Value::Array(o), Value::Array(p)) if smp.is_some_and(|s| s.merge) => Ok(Value::Array(
            merge_list(o, p, smp.and_then(|s| s.merge_key), shape.items())?,
        )),
        (Value::Null, Value::Array(p)) if smp.is_some_and(|s| s.merge) => Ok(Value::Array(
            merge_list(Vec::new(), p, smp.and_then(|s| s.merge_key), shape.items())?,
        )),
        // Scalars, replaced lists and maps, and changes of type.
        (_, p) => Ok(clean(p)),
    }
}

/// Merges a patch list into a list with merge strategy: by `key` for lists
/// of objects, as a set for lists of scalars.
fn merge_list(
    original: Vec<Value>,
    patch: &[Value],
    key: Option<&str>,
    items: Shape<'_>,
) -> Result<Vec<Value>, ApiError> {
    let Some(key) = key else {
        return Ok(merge_scalar_set(original, patch));
    };
    let ident = Identity(Some(key));
    let mut base = original;
    let mut plain = Vec::new();
    let mut replace = false;
    let mut deleted = HashSet::new();
    for item in patch {
        let Value::Object(m) = item else {
            return Err(bad(format!(
                "invalid patch: {item} is not a map, but the list merges by key {key:?}"
            )));
        };
        match m.get(PATCH) {
            None => plain.push(m),
            Some(Value::String(d)) if d == "delete" => match ident.of(item) {
                Some(id) => {
                    deleted.insert(id);
                }
                None => return Err(no_merge_key(item, key)),
            },
            Some(Value::String(d)) if d == "replace" => replace = true,
            Some(Value::String(d)) if d == "merge" => {
                return Err(bad("merging lists cannot yet be specified in the patch"));
            }
            Some(other) => return Err(bad(format!("Unknown patch type: {other} in map: {item}"))),
        }
    }
    if replace {
        // The list becomes the patch's other elements.
        return plain
            .into_iter()
            .map(|m| merge_map(Map::new(), m, items))
            .collect();
    }
    if !deleted.is_empty() {
        base.retain(|v| ident.of(v).is_none_or(|id| !deleted.contains(&id)));
    }
    let server = base.clone();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, v) in base.iter().enumerate() {
        if let Some(id) = ident.of(v) {
            index.entry(id).or_insert(i);
        }
    }
    let mut order = Vec::with_capacity(plain.len());
    for m in plain {
        let Some(id) = m.get(key).map(identity_string) else {
            return Err(no_merge_key(&Value::Object(m.clone()), key));
        };
        match index.get(&id) {
            Some(&i) => {
                let existing = match base[i].take() {
                    Value::Object(o) => o,
                    _ => Map::new(),
                };
                base[i] = merge_map(existing, m, items)?;
            }
            None => {
                index.insert(id.clone(), base.len());
                base.push(merge_map(Map::new(), m, items)?);
            }
        }
        order.push(id);
    }
    Ok(reorder(base, &order, &server, ident))
}

fn no_merge_key(item: &Value, key: &str) -> ApiError {
    bad(format!(
        "map: {item} does not contain declared merge key: {key}"
    ))
}

/// A set union of scalars: the original's, then the patch's new ones, in
/// kube-apiserver's order.
fn merge_scalar_set(original: Vec<Value>, patch: &[Value]) -> Vec<Value> {
    let ident = Identity(None);
    let server = original.clone();
    let mut seen = HashSet::new();
    let mut merged = Vec::with_capacity(original.len() + patch.len());
    for v in original.into_iter().chain(patch.iter().map(clean)) {
        if let Some(id) = ident.of(&v)
            && seen.insert(id)
        {
            merged.push(v);
        }
    }
    let order: Vec<String> = patch.iter().filter_map(|v| ident.of(v)).collect();
    reorder(merged, &order, &server, ident)
}

/// What identifies a list element for ordering and matching: the value of
/// the merge key, or the whole scalar. Rendered as compact JSON so it can
/// be hashed.
#[derive(Clone, Copy)]
struct Identity<'k>(Option<&'k str>);

impl Identity<'_> {
    fn of(&self, v: &Value) -> Option<String> {
        match self.0 {
            Some(key) => v.get(key).map(identity_string),
            None => Some(identity_string(v)),
        }
    }
}

fn identity_string(v: &Value) -> String {
    v.to_string()
}

/// Orders a merged list: the elements named in `order` (sorted by it) are
/// interleaved with the rest (sorted by their place in `server`); a rest
/// element goes first only when both it and the next ordered element are
/// on the server and it comes first there.
fn reorder(
    merged: Vec<Value>,
    order: &[String],
    server: &[Value],
    ident: Identity<'_>,
) -> Vec<Value> {
    let mut order_pos: HashMap<&str, usize> = HashMap::new();
    for (i, id) in order.iter().enumerate() {
        order_pos.entry(id.as_str()).or_insert(i);
    }
    let mut server_pos: HashMap<String, usize> = HashMap::new();
    for (i, v) in server.iter().enumerate() {
        if let Some(id) = ident.of(v) {
            server_pos.entry(id).or_insert(i);
        }
    }
    let mut ordered: Vec<(usize, Option<usize>, Value)> = Vec::new();
    let mut rest: Vec<(usize, Option<usize>, Value)> = Vec::new();
    for v in merged {
        let id = ident.of(&v);
        let in_server = id.as_ref().and_then(|id| server_pos.get(id).copied());
        match id.as_deref().and_then(|id| order_pos.get(id).copied()) {
            Some(p) => ordered.push((p, in_server, v)),
            None => rest.push((in_server.unwrap_or(usize::MAX), in_server, v)),
        }
    }
    // Stable sorts keep duplicates and unknown elements in merge order.
    ordered.sort_by_key(|e| e.0);
    rest.sort_by_key(|e| e.0);
    let mut out = Vec::with_capacity(ordered.len() + rest.len());
    let mut ordered = ordered.into_iter().peekable();
    let mut rest = rest.into_iter().peekable();
    loop {
        let take_rest = match (rest.peek(), ordered.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(r), Some(o)) => matches!((r.1, o.1), (Some(a), Some(b)) if a < b),
        };
        let next = if take_rest {
            rest.next()
        } else {
            ordered.next()
        };
        if let Some((_, _, v)) = next {
            out.push(v);
        }
    }
    out
}

/// `$retainKeys`: drops the original's entries not named in the list, after
/// checking that the patch itself only sets named entries.
fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    keys: &Value,
) -> Result<(), ApiError> {
    let invalid = || {
        bad(
            "invalid patch format of retainKeys: $retainKeys must be a list of field names covering every field the patch sets",
        )
    };
    let Value::Array(keys) = keys else {
        return Err(invalid());
    };
    let keep: HashSet<&str> = keys.iter().filter_map(Value::as_str).collect();
    for (k, v) in patch {
        if v.is_null() || k.starts_with('$') {
            continue;
        }
        if !keep.contains(k.as_str()) {
            return Err(invalid());
        }
    }
    original.retain(|k, _| keep.contains(k.as_str()));
    Ok(())
}

/// `$deleteFromPrimitiveList/<field>`: removes the listed scalars.
fn delete_from_list(
    original: &mut Map<String, Value>,
    field: &str,
    values: &Value,
) -> Result<(), ApiError> {
    let Value::Array(values) = values else {
        return Err(bad(format!(
            "invalid patch: {DELETE_FROM}{field} must be a list"
        )));
    };
    let gone: HashSet<String> = values.iter().map(identity_string).collect();
    if let Some(Value::Array(list)) = original.get_mut(field) {
        list.retain(|v| !gone.contains(&identity_string(v)));
    }
    Ok(())
}

fn without_directive(patch: &Map<String, Value>) -> Map<String, Value> {
    patch
        .iter()
        .filter(|(k, _)| k.as_str() != PATCH)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A value taken whole from the patch, without directives and without
/// `null` map entries (which would delete nothing).
fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !v.is_null() && !is_directive(k))
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(clean).collect()),
        other => other.clone(),
    }
}

fn is_directive(key: &str) -> bool {
    key == PATCH || key == RETAIN_KEYS || key.starts_with(SET_ORDER) || key.starts_with(DELETE_FROM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn res(group: &str, kind: &str) -> Resource {
        crate::strategy::resources()
            .into_iter()
            .find(|r| r.group == group && r.kind == kind)
            .expect("a served kind")
    }

    fn patched(kind: (&str, &str), mut target: Value, patch: Value) -> Value {
        strategic_merge(&res(kind.0, kind.1), &mut target, &patch).unwrap();
        target
    }

    fn deploy(containers: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"app": "d", "tier": "web"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": containers}}},
        })
    }

    fn names(v: &Value) -> Vec<&str> {
        v.pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect()
    }

    const DEPLOY: (&str, &str) = ("apps", "Deployment");

    #[test]
    fn containers_merge_by_name() {
        let live = deploy(json!([
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"},
        ]));
        // kubectl edit changing one image.
        let out = patched(
            DEPLOY,
            live,
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "b", "image": "b:2"}],
            }}}}),
        );
        assert_eq!(names(&out), ["a", "b"]);
        assert_eq!(
            out.pointer("/spec/template/spec/containers/1/image")
                .unwrap(),
            "b:2"
        );
        assert_eq!(
            out.pointer("/spec/template/spec/containers/0/env/0/value")
                .unwrap(),
            "1"
        );
        assert!(
            !out.to_string().contains('$'),
            "no directive is stored: {out}"
        );
    }

    #[test]
    fn kubectl_apply_adds_and_deletes_containers_in_order() {
        let live = deploy(json!([{"name": "a", "image": "a"}, {"name": "b", "image": "b"}]));
        // What kubectl apply sends when the manifest drops `a` and adds `c`
        // after `b`.
        let out = patched(
            DEPLOY,
            live,
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "b"}, {"name": "c"}],
                "containers": [{"name": "c", "image": "c"}, {"$patch": "delete", "name": "a"}],
            }}}}),
        );
        assert_eq!(names(&out), ["b", "c"]);
    }

    #[test]
    fn new_element_without_order_goes_first_like_upstream() {
        let live = deploy(json!([{"name": "a", "image": "a"}, {"name": "b", "image": "b"}]));
        let out = patched(
            DEPLOY,
            live,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "c"}]}}}}),
        );
        assert_eq!(names(&out), ["c", "a", "b"]);
    }

    #[test]
    fn set_element_order_reorders() {
        let live = deploy(
            json!([{"name": "a", "image": "a"}, {"name": "b", "image": "b"}, {"name": "c", "image": "c"}]),
        );
        let out = patched(
            DEPLOY,
            live,
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
            }}}}),
        );
        assert_eq!(names(&out), ["c", "a", "b"]);
    }

    #[test]
    fn replace_directive_on_list_element_and_map() {
        let live = deploy(json!([{"name": "a", "image": "a"}, {"name": "b", "image": "b"}]));
        let out = patched(
            DEPLOY,
            live,
            json!({
                "metadata": {"labels": {"$patch": "replace", "only": "me"}},
                "spec": {"template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "z", "image": "z"}]}}},
            }),
        );
        assert_eq!(names(&out), ["z"]);
        assert_eq!(out["metadata"]["labels"], json!({"only": "me"}));
    }

    #[test]
    fn nested_lists_use_their_own_keys() {
        let live = deploy(json!([{
            "name": "a", "image": "a",
            "ports": [{"containerPort": 80}, {"containerPort": 443}],
            "volumeMounts": [{"mountPath": "/x", "name": "v"}],
        }]));
        let out = patched(
            DEPLOY,
            live,
            json!({"spec": {"template": {"spec": {"containers": [{
                "name": "a",
                "ports": [{"containerPort": 8080, "name": "alt"}, {"containerPort": 80, "$patch": "delete"}],
                "volumeMounts": [{"mountPath": "/x", "readOnly": true}],
                "env": [{"name": "E", "value": "v"}],
            }]}}}}),
        );
        let c = out.pointer("/spec/template/spec/containers/0").unwrap();
        let ports: Vec<i64> = c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["containerPort"].as_i64().unwrap())
            .collect();
        assert_eq!(ports, [8080, 443]);
        assert_eq!(
            c["volumeMounts"],
            json!([{"mountPath": "/x", "name": "v", "readOnly": true}])
        );
        assert_eq!(c["env"], json!([{"name": "E", "value": "v"}]));
    }

    #[test]
    fn service_ports_merge_by_port() {
        let live = json!({"metadata": {"name": "s"}, "spec": {"ports": [
            {"port": 80, "targetPort": 8080, "name": "http"},
        ]}});
        let out = patched(
            ("", "Service"),
            live,
            json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}, {"port": 443, "name": "https"}]}}),
        );
        assert_eq!(
            out["spec"]["ports"][0],
            json!({"port": 80, "targetPort": 9090, "name": "http"})
        );
        assert_eq!(out["spec"]["ports"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn atomic_lists_are_replaced() {
        let live = json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "a", "image": "a", "args": ["1", "2"]}],
            "tolerations": [{"key": "k1"}, {"key": "k2"}],
        }});
        let out = patched(
            ("", "Pod"),
            live,
            json!({"spec": {
                "tolerations": [{"key": "k3"}],
                "containers": [{"name": "a", "args": ["3"]}],
            }}),
        );
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "k3"}]));
        assert_eq!(out["spec"]["containers"][0]["args"], json!(["3"]));
    }

    #[test]
    fn finalizers_merge_as_a_set_and_delete_from_primitive_list() {
        let live = json!({"metadata": {"name": "c", "finalizers": ["a", "b"]}});
        let out = patched(
            ("", "ConfigMap"),
            live.clone(),
            json!({"metadata": {"finalizers": ["b", "c"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));
        let out = patched(
            ("", "ConfigMap"),
            out,
            json!({"metadata": {
                "$deleteFromPrimitiveList/finalizers": ["a"],
                "$setElementOrder/finalizers": ["c", "b"],
            }}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["c", "b"]));
    }

    #[test]
    fn null_deletes_and_delete_directive_empties_a_map() {
        let live = json!({"metadata": {"name": "c", "labels": {"a": "1", "b": "2"}, "annotations": {"x": "y"}}, "data": {"k": "v", "j": "w"}});
        let out = patched(
            ("", "ConfigMap"),
            live,
            json!({"metadata": {"labels": {"a": null}, "annotations": {"$patch": "delete"}}, "data": {"j": null, "n": "1"}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(out["metadata"]["annotations"], json!({}));
        assert_eq!(out["data"], json!({"k": "v", "n": "1"}));
    }

    #[test]
    fn retain_keys_clears_the_other_fields() {
        let live = deploy(json!([{"name": "a", "image": "a"}]));
        let mut live = live;
        live["spec"]["strategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}});
        // kubectl apply switching the strategy to Recreate.
        let out = patched(
            DEPLOY,
            live,
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}}),
        );
        assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
        // A volume changing its source type.
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [], "volumes": [
            {"name": "v", "emptyDir": {}},
        ]}});
        let out = patched(
            ("", "Pod"),
            pod,
            json!({"spec": {"volumes": [{"$retainKeys": ["configMap", "name"], "name": "v", "configMap": {"name": "cm"}}]}}),
        );
        assert_eq!(
            out["spec"]["volumes"],
            json!([{"name": "v", "configMap": {"name": "cm"}}])
        );
    }

    #[test]
    fn budget_selectors_are_replaced_whole() {
        let live = json!({"metadata": {"name": "b"}, "spec": {"selector": {
            "matchLabels": {"a": "1"}, "matchExpressions": [{"key": "k", "operator": "Exists"}],
        }}});
        let out = patched(
            ("policy", "PodDisruptionBudget"),
            live,
            json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}}),
        );
        assert_eq!(out["spec"]["selector"], json!({"matchLabels": {"b": "2"}}));
    }

    #[test]
    fn malformed_patches_are_bad_requests() {
        let live = deploy(json!([{"name": "a", "image": "a"}]));
        for p in [
            json!({"spec": {"$patch": "explode"}}),
            json!({"spec": {"$patch": 7}}),
            json!({"spec": {"template": {"spec": {"containers": ["not a map"]}}}}),
            json!({"spec": {"template": {"spec": {"containers": [{"image": "no name"}]}}}}),
            json!({"spec": {"template": {"spec": {"containers": [{"$patch": "delete"}]}}}}),
            json!({"spec": {"template": {"spec": {"$setElementOrder/containers": "x"}}}}),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": {}}}),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "other": 1}}}),
            json!([1, 2]),
        ] {
            let mut t = live.clone();
            let e = strategic_merge(&res("apps", "Deployment"), &mut t, &p).unwrap_err();
            assert_eq!(e.code, 400, "{p}: {e}");
        }
    }

    #[test]
    fn hostile_nesting_does_not_panic() {
        let mut deep = json!({"x": 1});
        for _ in 0..120 {
            deep = json!({"a": deep, "$patch": "merge", "l": [[{"$patch": "delete"}]]});
        }
        let mut t = json!({"metadata": {"name": "c"}});
        strategic_merge(&res("", "ConfigMap"), &mut t, &deep).unwrap();
        let dupes = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "1"}, {"name": "a", "image": "2"},
        ]}}}});
        let mut t = deploy(json!([{"name": "a", "image": "0"}, {"name": "a", "image": "0"}]));
        strategic_merge(&res("apps", "Deployment"), &mut t, &dupes).unwrap();
    }
}
