//! Small readers and builders of object metadata the planners share:
//! labels, annotations, owner references and merge patches of them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};

/// A label's value, if set.
pub fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// An annotation's value, if set.
pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// The controller owner reference, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// The group of an `apiVersion` (`""` for the core group).
pub fn group_of(api_version: &str) -> &str {
    api_version
        .rsplit_once('/')
        .map(|(g, _)| g)
        .unwrap_or_default()
}

/// An owner reference; controllers also block the owner's foreground
/// deletion, as controller-runtime's `SetControllerReference` does.
pub fn owner_ref(
    api_version: &str,
    kind: &str,
    name: &str,
    uid: &str,
    controller: bool,
) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
        controller: controller.then_some(true),
        block_owner_deletion: controller.then_some(true),
    }
}

/// Whether `refs` holds a reference to the object with this UID.
pub fn has_owner(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references.iter().flatten().any(|o| o.uid == uid)
}

/// The owner references of `meta` with `owner` made the controller: a
/// reference to the same object is replaced; any other controller
/// reference of the kinds in `strip` is dropped, any other controller
/// reference is demoted to a plain owner (there is one controller).
pub fn with_controller(
    meta: &ObjectMeta,
    owner: OwnerReference,
    strip: &[(&str, &str)],
) -> Vec<OwnerReference> {
    let mut out: Vec<OwnerReference> = Vec::new();
    for o in meta.owner_references.iter().flatten() {
        if o.uid == owner.uid {
            continue;
        }
        let stripped = strip
            .iter()
            .any(|(group, kind)| o.kind == *kind && group_of(&o.api_version) == *group);
        if stripped {
            continue;
        }
        let mut o = o.clone();
        if o.controller == Some(true) {
            o.controller = None;
        }
        out.push(o);
    }
    out.push(owner);
    out
}

/// A merge patch of labels (and `null` for removals), or `None` when
/// every wanted label is already there.
pub fn labels_patch(
    meta: &ObjectMeta,
    want: &BTreeMap<String, String>,
    remove: &[String],
) -> Option<Value> {
    let have = meta.labels.clone().unwrap_or_default();
    let mut patch = serde_json::Map::new();
    for (k, v) in want {
        if have.get(k) != Some(v) {
            patch.insert(k.clone(), json!(v));
        }
    }
    for k in remove {
        if have.contains_key(k) && !want.contains_key(k) {
            patch.insert(k.clone(), Value::Null);
        }
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

/// Merges the object `b` into `a` (both JSON objects), recursively.
pub fn merge_into(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge_into(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(refs: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(refs),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn controller_is_replaced_and_machine_sets_stripped() {
        let ms = owner_ref("cluster.x-k8s.io/v1beta1", "MachineSet", "ms", "u-ms", true);
        let other = owner_ref("x.io/v1", "Thing", "t", "u-t", true);
        let cluster = owner_ref("cluster.x-k8s.io/v1beta1", "Cluster", "c", "u-c", false);
        let m = owner_ref("cluster.x-k8s.io/v1beta1", "Machine", "m", "u-m", true);
        let refs = with_controller(
            &meta(vec![ms, other, cluster.clone()]),
            m.clone(),
            &[("cluster.x-k8s.io", "MachineSet")],
        );
        assert_eq!(refs.len(), 3);
        assert_eq!(refs[0].controller, None, "other controller demoted");
        assert_eq!(refs[1], cluster);
        assert_eq!(refs[2], m);
        // Idempotent.
        let again = with_controller(&meta(refs.clone()), m, &[]);
        assert_eq!(again, refs);
    }

    #[test]
    fn label_patches() {
        let m = ObjectMeta {
            labels: Some(BTreeMap::from([
                ("a".to_string(), "1".to_string()),
                ("old".to_string(), "x".to_string()),
            ])),
            ..ObjectMeta::default()
        };
        let want = BTreeMap::from([("a".to_string(), "1".to_string())]);
        assert_eq!(labels_patch(&m, &want, &[]), None);
        let want2 = BTreeMap::from([("b".to_string(), "2".to_string())]);
        assert_eq!(
            labels_patch(&m, &want2, &["old".to_string()]),
            Some(json!({"b": "2", "old": null}))
        );
        let mut v = json!({"metadata": {"labels": {"a": "1"}}});
        merge_into(
            &mut v,
            json!({"metadata": {"labels": {"b": "2"}}, "spec": {"x": 1}}),
        );
        assert_eq!(
            v,
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": 1}})
        );
    }
}
