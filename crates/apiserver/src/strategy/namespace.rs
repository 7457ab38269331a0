//! Namespaces: DNS-label names, the `kubernetes.io/metadata.name` label,
//! the `kubernetes` spec finalizer that the namespace controller removes
//! once the namespace is empty, deletion as a Terminating phase rather than
//! removal, the `finalize` subresource, and the system namespaces that may
//! never be deleted.

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::core::v1 as core;
use serde_json::{Value, json};

use crate::object::{self, meta_mut};
use crate::storage::registry::{Deletion, NameRule, Resource, Strategy};

/// Namespaces have no deletecollection in kube: one request must not be
/// able to delete every namespace.
pub const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// Namespaces kube-apiserver's NamespaceLifecycle admission never lets go.
pub const IMMORTAL: &[&str] = &["default", "kube-system", "kube-public"];

/// The spec finalizer the namespace controller removes once the namespace
/// is empty.
pub const FINALIZER: &str = "kubernetes";

#[derive(Debug)]
pub struct Namespace;

impl Strategy for Namespace {
    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn initial_status(&self, _given: Option<Value>) -> Option<Value> {
        Some(json!({"phase": "Active"}))
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        let name = object::name(obj).to_string();
        if !name.is_empty() {
            let m = meta_mut(obj).expect("metadata exists");
            let labels = m.entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
        if obj.pointer("/spec/finalizers").is_none() {
            obj["spec"] = json!({"finalizers": [FINALIZER]});
        }
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        super::typed::<core::Namespace>(obj)?;
        Ok(Vec::new())
    }

    fn check_delete(&self, _res: &Resource, name: &str) -> Result<(), ApiError> {
        if IMMORTAL.contains(&name) {
            return Err(super::forbidden(
                "",
                "namespaces",
                name,
                "this namespace may not be deleted",
            ));
        }
        Ok(())
    }

    fn deletion(&self, _old: &Value, _grace: Option<i64>) -> Deletion {
        Deletion {
            lifecycle: true,
            ..Deletion::default()
        }
    }

    fn mark_deleting(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Terminating"});
        if obj.pointer("/spec/finalizers").is_none() {
            obj["spec"] = json!({"finalizers": [FINALIZER]});
        }
    }

    fn finalize_subresource(&self) -> bool {
        true
    }

    fn is_namespace(&self) -> bool {
        true
    }
}

/// Whether a namespace object is being deleted, so nothing new may be
/// created in it.
pub fn is_terminating(ns: &Value) -> bool {
    object::is_deleting(ns)
}

/// The 403 for creating `name` (empty for generateName) of `res` in the
/// terminating namespace `ns`.
pub fn terminating(res: &Resource, ns: &str, name: &str) -> ApiError {
    let mut e = super::forbidden(
        &res.group,
        &res.plural,
        name,
        &format!("unable to create new content in namespace {ns} because it is being terminated"),
    );
    e.causes.push(Cause::new(
        "NamespaceTerminating",
        "metadata.namespace",
        format!("namespace {ns} is being terminated"),
    ));
    e
}

/// A namespace object as the server creates the system namespaces.
pub fn new_object(name: &str) -> Value {
    json!({
        "metadata": {
            "name": name,
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": object::now_rfc3339(),
            "labels": {"kubernetes.io/metadata.name": name},
        },
        "apiVersion": "v1",
        "kind": "Namespace",
        "spec": {"finalizers": [FINALIZER]},
        "status": {"phase": "Active"},
    })
}
