//! CustomResourceDefinitions: validation of the definition, the served
//! resources one definition becomes (one per served version), the status a
//! definition should have (names accepted, established, stored versions),
//! `generation`, and deletion behind the cleanup finalizer that the CRD
//! controller removes once every custom object is gone.

use std::sync::Arc;

use apimachinery::schema::Schema;
use apimachinery::{ApiError, Cause};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
use serde_json::{Value, json};

use crate::object;
use crate::storage::registry::{
    ALL_VERBS, Deletion, PrinterColumn, Resource, ScalePaths, Strategy,
};

/// Held by a deleting CRD until its custom objects are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

#[derive(Debug)]
pub struct CustomResourceDefinition;

impl Strategy for CustomResourceDefinition {
    fn has_generation(&self) -> bool {
        true
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        super::typed::<ext::CustomResourceDefinition>(obj)?;
        Ok(validate_crd(obj))
    }

    fn deletion(&self, _old: &Value, _grace: Option<i64>) -> Deletion {
        Deletion {
            finalizers: vec![CLEANUP_FINALIZER],
            ..Deletion::default()
        }
    }
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// Checks a CRD beyond its JSON shape.
pub fn validate_crd(crd: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let group = s(crd, "/spec/group");
    let plural = s(crd, "/spec/names/plural");
    let kind = s(crd, "/spec/names/kind");
    if group.is_empty() {
        causes.push(Cause::required("spec.group"));
    } else if !group.contains('.') {
        causes.push(Cause::invalid(
            "spec.group",
            format!("Invalid value: \"{group}\": should be a domain with at least one dot"),
        ));
    }
    if plural.is_empty() {
        causes.push(Cause::required("spec.names.plural"));
    } else if let Some(why) = object::check_label(plural) {
        causes.push(Cause::invalid(
            "spec.names.plural",
            format!("Invalid value: \"{plural}\": {why}"),
        ));
    }
    if kind.is_empty() {
        causes.push(Cause::required("spec.names.kind"));
    }
    let name = object::name(crd);
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    match s(crd, "/spec/scope") {
        "Namespaced" | "Cluster" => {}
        "" => causes.push(Cause::required("spec.scope")),
        other => causes.push(Cause::new(
            "FieldValueNotSupported",
            "spec.scope",
            format!(
                "Unsupported value: \"{other}\": supported values: \"Cluster\", \"Namespaced\""
            ),
        )),
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::required("spec.versions"));
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if !versions.is_empty() && storage != 1 {
        causes.push(Cause::invalid(
            "spec.versions",
            format!("Invalid value: must have exactly one version marked as storage version, found {storage}"),
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        let vname = s(v, "/name");
        if vname.is_empty() {
            causes.push(Cause::required(format!("spec.versions[{i}].name")));
        }
        if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
            causes.extend(apimachinery::schema::validate_structural(
                schema,
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
            ));
        }
    }
    causes
}

fn printer_columns(v: &Value) -> Vec<PrinterColumn> {
    v.get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| PrinterColumn {
                    name: s(c, "/name").to_string(),
                    type_: s(c, "/type").to_string(),
                    format: c.get("format").and_then(Value::as_str).map(str::to_string),
                    description: s(c, "/description").to_string(),
                    priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    json_path: s(c, "/jsonPath").to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One served resource per served version of the CRD.
pub fn resources_of(crd: &Value) -> Vec<Resource> {
    let group = s(crd, "/spec/group").to_string();
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let plural = s(&names, "/plural").to_string();
    let kind = s(&names, "/kind").to_string();
    let strs = |p: &str| -> Vec<String> {
        names
            .get(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .map(|v| s(v, "/name").to_string())
        .unwrap_or_default();
    let uid = object::uid(crd).to_string();
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
        .map(|v| {
            let schema = v
                .pointer("/schema/openAPIV3Schema")
                .and_then(|sch| Schema::from_json(sch).ok())
                .map(Arc::new);
            let scale = v.pointer("/subresources/scale").map(|sc| ScalePaths {
                spec_replicas: s(sc, "/specReplicasPath").to_string(),
                status_replicas: s(sc, "/statusReplicasPath").to_string(),
                label_selector: sc
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                selector_is_structured: false,
            });
            Resource {
                group: group.clone(),
                version: s(v, "/name").to_string(),
                plural: plural.clone(),
                singular: names
                    .get("singular")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| kind.to_lowercase()),
                kind: kind.clone(),
                list_kind: names
                    .get("listKind")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{kind}List")),
                namespaced: s(crd, "/spec/scope") == "Namespaced",
                short_names: strs("shortNames"),
                categories: strs("categories"),
                status_subresource: v.pointer("/subresources/status").is_some(),
                scale,
                eviction: false,
                storage: format!("{group}/{plural}"),
                storage_version: storage_version.clone(),
                schema,
                printer_columns: printer_columns(v),
                extra_fields: Vec::new(),
                builtin: false,
                crd_uid: Some(uid.clone()),
                verbs: ALL_VERBS.to_vec(),
                strategy: &super::custom::Custom,
            }
        })
        .collect()
}

/// The status a CRD should have: names accepted, established, stored versions.
pub fn desired_status(crd: &Value) -> Value {
    let mut stored: Vec<String> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if let Some(sv) = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        && !stored.iter().any(|x| x == sv)
    {
        stored.push(sv.to_string());
    }
    let old_conditions = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let cond = |ty: &str, reason: &str, message: &str| {
        let prev = old_conditions
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(ty));
        let since = prev
            .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(object::now_rfc3339()));
        json!({"type": ty, "status": "True", "lastTransitionTime": since,
               "reason": reason, "message": message})
    };
    let mut accepted = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    if accepted.get("singular").is_none()
        && let Some(k) = accepted.get("kind").and_then(Value::as_str)
    {
        accepted["singular"] = json!(k.to_lowercase());
    }
    if accepted.get("listKind").is_none()
        && let Some(k) = accepted.get("kind").and_then(Value::as_str)
    {
        accepted["listKind"] = json!(format!("{k}List"));
    }
    json!({
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": accepted,
        "storedVersions": stored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "metadata": {"name": "widgets.example.com", "uid": "u1"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}},
                    {"name": "v0", "served": false, "storage": false},
                ],
            },
        })
    }

    #[test]
    fn a_definition_serves_one_resource_per_served_version() {
        assert!(validate_crd(&crd()).is_empty());
        let rs = resources_of(&crd());
        assert_eq!(rs.len(), 1);
        let r = &rs[0];
        assert_eq!(
            (r.group.as_str(), r.version.as_str(), r.plural.as_str()),
            ("example.com", "v1", "widgets")
        );
        assert_eq!(r.list_kind, "WidgetList");
        assert_eq!(r.singular, "widget");
        assert!(r.namespaced && r.status_subresource && r.scale.is_some());
        assert_eq!(r.storage, "example.com/widgets");
        assert_eq!(r.crd_uid.as_deref(), Some("u1"));
        assert!(r.strategy.has_generation());
    }

    #[test]
    fn the_status_accepts_names_and_records_the_storage_version() {
        let s = desired_status(&crd());
        assert_eq!(s["storedVersions"], json!(["v1"]));
        assert_eq!(s["acceptedNames"]["listKind"], "WidgetList");
        let types: Vec<&str> = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["NamesAccepted", "Established"]);
    }

    #[test]
    fn invalid_definitions_name_their_fields() {
        let mut bad = crd();
        bad["spec"]["group"] = json!("nodot");
        bad["spec"]["scope"] = json!("Galaxy");
        let fields: Vec<String> = validate_crd(&bad).into_iter().map(|c| c.field).collect();
        assert!(fields.contains(&"spec.group".to_string()), "{fields:?}");
        assert!(fields.contains(&"spec.scope".to_string()), "{fields:?}");
        assert!(fields.contains(&"metadata.name".to_string()), "{fields:?}");
    }

    #[test]
    fn deletion_waits_for_the_cleanup() {
        let d = CustomResourceDefinition.deletion(&crd(), None);
        assert_eq!(d.finalizers, [CLEANUP_FINALIZER]);
    }
}
