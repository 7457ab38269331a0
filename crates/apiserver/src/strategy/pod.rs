//! Pods: a spec with named containers that have images, the update rules of
//! kube's `ValidatePodUpdate` (only images, the active deadline, added
//! tolerations and a first node binding may change), `Pending` as the
//! first phase, and graceful deletion of scheduled pods (their kubelet
//! finishes it).

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::core::v1 as core;
use serde_json::{Map, Value, json};

use crate::storage::registry::{Deletion, Resource, Strategy};

/// Field selectors pods accept beyond metadata.
pub const FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];

/// kube's default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE_SECONDS: i64 = 30;

#[derive(Debug)]
pub struct Pod;

impl Strategy for Pod {
    fn initial_status(&self, given: Option<Value>) -> Option<Value> {
        let mut s = given.filter(Value::is_object).unwrap_or_else(|| json!({}));
        if s.get("phase").is_none() {
            s["phase"] = json!("Pending");
        }
        Some(s)
    }

    fn apply_defaults(&self, _res: &Resource, obj: &mut Value) {
        super::defaults::on(obj, super::defaults::pod);
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        let pod = super::typed::<core::Pod>(obj)?;
        let mut causes = Vec::new();
        match pod.spec {
            None => causes.push(Cause::required("spec")),
            Some(spec) => {
                if spec.containers.is_empty() {
                    causes.push(Cause::required("spec.containers"));
                }
                let mut names = std::collections::BTreeSet::new();
                for (i, c) in spec.containers.iter().enumerate() {
                    if c.name.is_empty() {
                        causes.push(Cause::required(format!("spec.containers[{i}].name")));
                    } else if !names.insert(c.name.clone()) {
                        causes.push(Cause::new(
                            "FieldValueDuplicate",
                            format!("spec.containers[{i}].name"),
                            format!("Duplicate value: \"{}\"", c.name),
                        ));
                    }
                    if c.image.as_deref().unwrap_or("").is_empty() {
                        causes.push(Cause::required(format!("spec.containers[{i}].image")));
                    }
                }
            }
        }
        Ok(causes)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        pod_update(new, old)
    }

    /// A scheduled pod is deleted gracefully: its kubelet finishes it.
    fn deletion(&self, old: &Value, grace: Option<i64>) -> Deletion {
        let grace_seconds = if old.pointer("/spec/nodeName").is_some() {
            let default = old
                .pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(DEFAULT_GRACE_SECONDS);
            grace.unwrap_or(default).max(0)
        } else {
            0
        };
        Deletion {
            grace_seconds,
            ..Deletion::default()
        }
    }
}

/// The pod spec fields kube lets an update change, in the words of its
/// error message (kube 1.32, InPlacePodVerticalScaling off).
const POD_UPDATABLE: &[&str] = &[
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
];

fn forbidden(field: impl Into<String>, why: impl std::fmt::Display) -> Cause {
    Cause::new("FieldValueForbidden", field, format!("Forbidden: {why}"))
}

/// The value compared for "did the spec change": kube compares decoded Go
/// structs semantically, where an absent field, `null` and an empty list
/// are all the same nil slice or pointer.
fn semantic(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null() && !x.as_array().is_some_and(Vec::is_empty))
                .map(|(k, x)| (k.clone(), semantic(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(semantic).collect()),
        other => other.clone(),
    }
}

/// Paths (at most a few) where two semantic values differ, to tell the user
/// what the forbidden change was, as kube's message appends a diff.
fn diff_paths(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    const MAX: usize = 5;
    if out.len() >= MAX || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let none = Value::Null;
                diff_paths(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&none),
                    y.get(k).unwrap_or(&none),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff_paths(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ => out.push(path.to_string()),
    }
}

/// kube's `ValidatePodUpdate` spec rules.
fn pod_update(new: &Value, old: &Value) -> Vec<Cause> {
    // A pod stored before defaulting existed compares as if defaulted, so
    // its first update is not refused for the defaults it now gets.
    let mut old = old.clone();
    super::defaults::on(&mut old, super::defaults::pod);
    let empty = Map::new();
    let new_spec = new.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let old_spec = old.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let list = |m: &Map<String, Value>, k: &str| -> Vec<Value> {
        m.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut causes = Vec::new();
    for key in ["containers", "initContainers"] {
        if list(new_spec, key).len() != list(old_spec, key).len() {
            causes.push(forbidden(
                format!("spec.{key}"),
                "pod updates may not add or remove containers",
            ));
            return causes;
        }
    }
    let ads = |m: &Map<String, Value>| m.get("activeDeadlineSeconds").and_then(Value::as_i64);
    match (ads(new_spec), ads(old_spec)) {
        (Some(n), _) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            causes.push(Cause::invalid(
                "spec.activeDeadlineSeconds",
                format!("Invalid value: {n}: must be between 0 and 2147483647, inclusive"),
            ));
            return causes;
        }
        (Some(n), Some(o)) if o < n => {
            causes.push(Cause::invalid(
                "spec.activeDeadlineSeconds",
                format!("Invalid value: {n}: must be less than or equal to previous value"),
            ));
            return causes;
        }
        (None, Some(_)) => causes.push(Cause::invalid(
            "spec.activeDeadlineSeconds",
            "Invalid value: \"null\": must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    // Existing tolerations stay (only their tolerationSeconds may change);
    // new ones may be added.
    let strip_seconds = |t: &Value| {
        let mut t = semantic(t);
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    let new_tols: Vec<Value> = list(new_spec, "tolerations")
        .iter()
        .map(strip_seconds)
        .collect();
    if list(old_spec, "tolerations")
        .iter()
        .any(|t| !new_tols.contains(&strip_seconds(t)))
    {
        causes.push(forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }
    // Scheduling gates may only be removed.
    let old_gates = list(old_spec, "schedulingGates");
    if list(new_spec, "schedulingGates")
        .iter()
        .any(|g| !old_gates.contains(g))
    {
        causes.push(forbidden(
            "spec.schedulingGates",
            "only deletion is allowed, but found new scheduling gate",
        ));
    }
    let old_sem = semantic(&Value::Object(old_spec.clone()));
    if semantic(&Value::Object(new_spec.clone())) == old_sem {
        return causes;
    }
    // Take every field an update may change from the old spec; whatever
    // still differs is a forbidden change.
    let mut munged = new_spec.clone();
    for key in ["containers", "initContainers"] {
        let old_list = list(old_spec, key);
        if let Some(cs) = munged.get_mut(key).and_then(Value::as_array_mut) {
            for (c, o) in cs.iter_mut().zip(&old_list) {
                if let Some(c) = c.as_object_mut() {
                    match o.get("image") {
                        Some(img) => c.insert("image".into(), img.clone()),
                        None => c.remove("image"),
                    };
                }
            }
        }
    }
    for key in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
        match old_spec.get(key) {
            Some(v) => munged.insert(key.into(), v.clone()),
            None => munged.remove(key),
        };
    }
    let grace = |m: &Map<String, Value>| {
        m.get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
    };
    if grace(old_spec).is_some_and(|g| g < 0) && grace(&munged) == Some(1) {
        munged.insert(
            "terminationGracePeriodSeconds".into(),
            old_spec["terminationGracePeriodSeconds"].clone(),
        );
    }
    // kube binds a pod to its node through the `pods/binding` subresource,
    // which this server does not serve; a scheduler-like client sets
    // `spec.nodeName` by update instead, so setting it once (from empty) is
    // allowed. Changing or clearing it stays forbidden.
    let node = |m: &Map<String, Value>| {
        m.get("nodeName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if node(old_spec).is_empty() && !node(&munged).is_empty() {
        match old_spec.get("nodeName") {
            Some(v) => munged.insert("nodeName".into(), v.clone()),
            None => munged.remove("nodeName"),
        };
    }
    let munged_sem = semantic(&Value::Object(munged));
    if munged_sem != old_sem {
        let mut paths = Vec::new();
        diff_paths("spec", &old_sem, &munged_sem, &mut paths);
        causes.push(forbidden(
            "spec",
            format!(
                "pod updates may not change fields other than {}\n  changed: {}",
                POD_UPDATABLE.join(","),
                paths.join(", ")
            ),
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res() -> Resource {
        crate::strategy::resources()
            .into_iter()
            .find(|r| r.kind == "Pod")
            .unwrap()
    }

    fn pod(containers: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
    }

    #[test]
    fn containers_need_unique_names_and_images() {
        let ok = pod(json!([{"name": "a", "image": "i"}]));
        assert!(Pod.validate(&res(), &ok).unwrap().is_empty());
        let bad = pod(json!([{"name": "a", "image": "i"}, {"name": "a"}]));
        let fields: Vec<String> = Pod
            .validate(&res(), &bad)
            .unwrap()
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            ["spec.containers[1].name", "spec.containers[1].image"]
        );
        let none = json!({"metadata": {"name": "p"}});
        assert_eq!(Pod.validate(&res(), &none).unwrap()[0].field, "spec");
    }

    #[test]
    fn a_scheduled_pod_is_deleted_gracefully() {
        let mut p = pod(json!([{"name": "a", "image": "i"}]));
        assert_eq!(Pod.deletion(&p, None).grace_seconds, 0, "nobody runs it");
        p["spec"]["nodeName"] = json!("n1");
        assert_eq!(Pod.deletion(&p, None).grace_seconds, 30);
        assert_eq!(Pod.deletion(&p, Some(0)).grace_seconds, 0);
        p["spec"]["terminationGracePeriodSeconds"] = json!(5);
        assert_eq!(Pod.deletion(&p, None).grace_seconds, 5);
    }

    #[test]
    fn a_pod_starts_pending_and_may_be_bound_once() {
        assert_eq!(Pod.initial_status(None).unwrap()["phase"], "Pending");
        let given = json!({"phase": "Running"});
        assert_eq!(Pod.initial_status(Some(given)).unwrap()["phase"], "Running");
        // As admission sees them: both defaulted.
        let mut old = pod(json!([{"name": "a", "image": "i"}]));
        Pod.apply_defaults(&res(), &mut old);
        let mut bound = old.clone();
        bound["spec"]["nodeName"] = json!("n1");
        assert!(Pod.validate_update(&bound, &old).is_empty());
        let mut moved = bound.clone();
        moved["spec"]["nodeName"] = json!("n2");
        assert_eq!(Pod.validate_update(&moved, &bound)[0].field, "spec");
    }
}
