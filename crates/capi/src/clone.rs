//! Template → object cloning (`controllers/external/util.go`
//! `GenerateTemplate`): a MachineSet turns its bootstrap config template
//! and infrastructure machine template into one object of each per
//! Machine, named like the Machine.
//!
//! The clone copies the template's `spec.template` (metadata and spec);
//! its kind is the template's without `Template`, its apiVersion the
//! template's. Labels are the template's, then the Machine's, then
//! `cluster.x-k8s.io/cluster-name`; annotations the template's, then the
//! Machine's, then `cloned-from-name` and `cloned-from-groupkind`. Its one
//! owner is the creator (the MachineSet); the Machine controller later
//! makes the Machine its controller.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use crate::types::labels;

/// What a clone is made for.
#[derive(Clone, Debug)]
pub struct CloneFor<'a> {
    /// The clone's name (the Machine's).
    pub name: &'a str,
    pub namespace: &'a str,
    pub cluster_name: &'a str,
    /// The Machine's labels and annotations.
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
    /// The creator, as the clone's only owner.
    pub owner: Option<OwnerReference>,
}

/// The kind a template makes: `LocalMachineTemplate` → `LocalMachine`.
pub fn cloned_kind(template_kind: &str) -> Option<&str> {
    template_kind
        .strip_suffix("Template")
        .filter(|k| !k.is_empty())
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// The object to create from `template`, or why it cannot be made.
pub fn clone_template(template: &DynamicObject, to: &CloneFor<'_>) -> Result<Value, String> {
    let types = template
        .types
        .as_ref()
        .ok_or("the template has no apiVersion and kind")?;
    let template_name = template.metadata.name.as_deref().unwrap_or_default();
    let kind = cloned_kind(&types.kind).ok_or_else(|| {
        format!(
            "{} {template_name:?} is no template: its kind does not end in Template",
            types.kind
        )
    })?;
    let inner = template
        .data
        .pointer("/spec/template")
        .ok_or_else(|| format!("{} {template_name:?} has no spec.template", types.kind))?;
    let mut labels = string_map(inner.pointer("/metadata/labels"));
    labels.extend(to.labels.clone());
    labels.insert(labels::CLUSTER_NAME.into(), to.cluster_name.into());
    let mut annotations = string_map(inner.pointer("/metadata/annotations"));
    annotations.extend(to.annotations.clone());
    let group = crate::meta::group_of(&types.api_version);
    annotations.insert(labels::CLONED_FROM_NAME.into(), template_name.into());
    annotations.insert(
        labels::CLONED_FROM_GROUP_KIND.into(),
        if group.is_empty() {
            types.kind.clone()
        } else {
            format!("{}.{group}", types.kind)
        },
    );
    let mut metadata = json!({
        "name": to.name,
        "namespace": to.namespace,
        "labels": labels,
        "annotations": annotations,
    });
    if let Some(owner) = &to.owner {
        metadata["ownerReferences"] = json!([owner]);
    }
    let mut obj = json!({
        "apiVersion": types.api_version,
        "kind": kind,
        "metadata": metadata,
    });
    if let Some(spec) = inner.get("spec") {
        obj["spec"] = spec.clone();
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::provider_object;

    fn template(data: Value) -> DynamicObject {
        provider_object(
            "infrastructure.cluster.x-k8s.io/v1beta1",
            "LocalMachineTemplate",
            "workers-v1",
            data,
        )
    }

    #[test]
    fn clones_spec_labels_annotations_and_owner() {
        let t = template(json!({"spec": {"template": {
            "metadata": {"labels": {"tier": "a", "shared": "template"}, "annotations": {"note": "x"}},
            "spec": {"bootDelay": "2s"},
        }}}));
        let labels = BTreeMap::from([
            ("shared".to_string(), "machine".to_string()),
            (labels::SET_NAME.to_string(), "ms1".to_string()),
        ]);
        let annotations = BTreeMap::new();
        let owner = crate::meta::owner_ref(crate::API_VERSION, "MachineSet", "ms1", "u1", true);
        let obj = clone_template(
            &t,
            &CloneFor {
                name: "ms1-abcde",
                namespace: "default",
                cluster_name: "c1",
                labels: &labels,
                annotations: &annotations,
                owner: Some(owner),
            },
        )
        .unwrap();
        assert_eq!(obj["kind"], "LocalMachine");
        assert_eq!(obj["apiVersion"], "infrastructure.cluster.x-k8s.io/v1beta1");
        assert_eq!(obj["metadata"]["name"], "ms1-abcde");
        assert_eq!(obj["spec"], json!({"bootDelay": "2s"}));
        let l = &obj["metadata"]["labels"];
        assert_eq!(
            (l["tier"].as_str(), l["shared"].as_str()),
            (Some("a"), Some("machine"))
        );
        assert_eq!(l[labels::CLUSTER_NAME], "c1");
        assert_eq!(l[labels::SET_NAME], "ms1");
        let a = &obj["metadata"]["annotations"];
        assert_eq!(a[labels::CLONED_FROM_NAME], "workers-v1");
        assert_eq!(
            a[labels::CLONED_FROM_GROUP_KIND],
            "LocalMachineTemplate.infrastructure.cluster.x-k8s.io"
        );
        assert_eq!(a["note"], "x");
        assert_eq!(obj["metadata"]["ownerReferences"][0]["kind"], "MachineSet");
        assert!(obj["metadata"].get("resourceVersion").is_none());
    }

    #[test]
    fn a_template_needs_spec_template_and_a_template_kind() {
        let empty = BTreeMap::new();
        let to = CloneFor {
            name: "m",
            namespace: "default",
            cluster_name: "c1",
            labels: &empty,
            annotations: &empty,
            owner: None,
        };
        let err = clone_template(&template(json!({"spec": {}})), &to).unwrap_err();
        assert!(err.contains("spec.template"), "{err}");
        let not_template = provider_object(
            "x.io/v1",
            "LocalMachine",
            "m",
            json!({"spec": {"template": {}}}),
        );
        assert!(
            clone_template(&not_template, &to)
                .unwrap_err()
                .contains("Template")
        );
        assert_eq!(cloned_kind("Template"), None);
    }
}
