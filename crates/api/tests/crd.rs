//! The generated CRDs: names, subresources and printer columns as upstream
//! declares them, and schemas the API server accepts as structural.

use api::{Machine, MachineClass, MachineDeployment, MachineSet, crds, crds_yaml};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::crd::v1::CustomResourceExt;
use serde::Deserialize;
use serde_json::Value;

fn schema_of(crd: &CustomResourceDefinition) -> Value {
    let version = &crd.spec.versions[0];
    let schema = version.schema.as_ref().unwrap().open_api_v3_schema.as_ref();
    serde_json::to_value(schema.expect("every CRD has a schema")).unwrap()
}

/// Collects every violation of the structural-schema rules that matter in
/// practice: references, missing types, and type-changing combinators.
fn structural_violations(node: &Value, path: &str, out: &mut Vec<String>) {
    let Some(obj) = node.as_object() else {
        out.push(format!("{path}: schema is not an object"));
        return;
    };
    for forbidden in ["$ref", "definitions", "$defs", "oneOf", "allOf", "not"] {
        if obj.contains_key(forbidden) {
            out.push(format!("{path}: has {forbidden}"));
        }
    }
    let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if !obj.contains_key("type") && !int_or_string && !preserve {
        out.push(format!("{path}: no type"));
    }
    if obj.contains_key("anyOf") && !int_or_string {
        out.push(format!("{path}: anyOf outside an int-or-string"));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            structural_violations(child, &format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = obj.get("items") {
        structural_violations(items, &format!("{path}[]"), out);
    }
    if let Some(extra) = obj.get("additionalProperties").filter(|v| v.is_object()) {
        structural_violations(extra, &format!("{path}{{}}"), out);
    }
}

fn at<'a>(schema: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(schema, |node, key| {
        node.get("properties")
            .and_then(|p| p.get(*key))
            .unwrap_or_else(|| panic!("no property {key} in {path:?}"))
    })
}

#[test]
fn every_schema_is_structural() {
    for crd in crds() {
        let mut violations = Vec::new();
        structural_violations(&schema_of(&crd), "", &mut violations);
        let name = crd.metadata.name.unwrap();
        assert!(violations.is_empty(), "{name}: {violations:#?}");
    }
}

#[test]
fn names_match_upstream() {
    let expected = [
        (
            "machineclasses.machine.sapcloud.io",
            "MachineClass",
            "machineclass",
            "mcc",
        ),
        ("machines.machine.sapcloud.io", "Machine", "machine", "mc"),
        (
            "machinesets.machine.sapcloud.io",
            "MachineSet",
            "machineset",
            "mcs",
        ),
        (
            "machinedeployments.machine.sapcloud.io",
            "MachineDeployment",
            "machinedeployment",
            "mcd",
        ),
    ];
    let crds = crds();
    assert_eq!(crds.len(), expected.len());
    for (crd, (name, kind, singular, short)) in crds.iter().zip(expected) {
        assert_eq!(crd.metadata.name.as_deref(), Some(name));
        assert_eq!(crd.spec.group, "machine.sapcloud.io");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.kind, kind);
        assert_eq!(crd.spec.names.singular.as_deref(), Some(singular));
        assert_eq!(crd.spec.names.short_names, Some(vec![short.to_string()]));
        assert_eq!(crd.spec.names.categories, None);
        assert_eq!(crd.spec.versions.len(), 1);
        assert_eq!(crd.spec.versions[0].name, "v1alpha1");
        assert!(crd.spec.versions[0].served && crd.spec.versions[0].storage);
    }
    assert_eq!(
        MachineClass::crd_name(),
        "machineclasses.machine.sapcloud.io"
    );
    assert_eq!(MachineClass::shortnames(), &["mcc"]);
}

#[test]
fn subresources() {
    let class = MachineClass::crd();
    assert!(class.spec.versions[0].subresources.is_none());

    let machine = Machine::crd();
    let sub = machine.spec.versions[0].subresources.as_ref().unwrap();
    assert!(sub.status.is_some());
    assert!(sub.scale.is_none());

    for crd in [MachineSet::crd(), MachineDeployment::crd()] {
        let sub = crd.spec.versions[0].subresources.as_ref().unwrap();
        assert!(sub.status.is_some());
        let scale = sub.scale.as_ref().expect("scale subresource");
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.replicas");
        assert_eq!(scale.label_selector_path, None);
    }
}

#[test]
fn printer_columns() {
    let columns = |crd: CustomResourceDefinition| -> Vec<(String, String, String)> {
        crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name, c.type_, c.json_path))
            .collect()
    };
    let owned = |cols: &[(&str, &str, &str)]| -> Vec<(String, String, String)> {
        cols.iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect()
    };
    assert_eq!(columns(MachineClass::crd()), vec![]);
    assert_eq!(
        columns(Machine::crd()),
        owned(&[
            ("Status", "string", ".status.currentStatus.phase"),
            ("Age", "date", ".metadata.creationTimestamp"),
            ("Node", "string", ".metadata.labels.node"),
            ("ProviderID", "string", ".spec.providerID"),
        ])
    );
    let provider_id = &Machine::crd().spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap()[3];
    assert_eq!(provider_id.priority, Some(1));
    assert_eq!(
        columns(MachineSet::crd()),
        owned(&[
            ("Desired", "integer", ".spec.replicas"),
            ("Current", "integer", ".status.replicas"),
            ("Ready", "integer", ".status.readyReplicas"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ])
    );
    assert_eq!(
        columns(MachineDeployment::crd()),
        owned(&[
            ("Ready", "integer", ".status.readyReplicas"),
            ("Desired", "integer", ".spec.replicas"),
            ("Up-to-date", "integer", ".status.updatedReplicas"),
            ("Available", "integer", ".status.availableReplicas"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ])
    );
}

#[test]
fn schema_details_follow_upstream() {
    let class = schema_of(&MachineClass::crd());
    assert_eq!(class["required"], serde_json::json!(["providerSpec"]));
    let provider_spec = at(&class, &["providerSpec"]);
    assert_eq!(provider_spec["type"], "object");
    assert_eq!(provider_spec["x-kubernetes-preserve-unknown-fields"], true);
    for field in [
        "nodeTemplate",
        "credentialsSecretRef",
        "provider",
        "secretRef",
    ] {
        at(&class, &[field]);
    }
    let capacity = at(&class, &["nodeTemplate", "capacity"]);
    assert_eq!(
        capacity["additionalProperties"]["x-kubernetes-int-or-string"],
        true
    );

    let machine = schema_of(&Machine::crd());
    let node_meta = at(&machine, &["spec", "nodeTemplate", "metadata"]);
    assert_eq!(node_meta["x-kubernetes-preserve-unknown-fields"], true);
    for field in [
        "class",
        "providerID",
        "nodeTemplate",
        "drainTimeout",
        "healthTimeout",
        "creationTimeout",
        "inPlaceUpdateTimeout",
        "machinePreserveTimeout",
        "disableHealthTimeout",
        "maxEvictRetries",
        "nodeConditions",
    ] {
        at(&machine, &["spec", field]);
    }
    for field in [
        "phase",
        "timeoutActive",
        "lastUpdateTime",
        "preserveExpiryTime",
    ] {
        at(&machine, &["status", "currentStatus", field]);
    }

    let set = schema_of(&MachineSet::crd());
    at(&set, &["status", "machineSetCondition"]);
    let template_meta = at(&set, &["spec", "template", "metadata"]);
    assert_eq!(template_meta["x-kubernetes-preserve-unknown-fields"], true);

    let md = schema_of(&MachineDeployment::crd());
    let surge = at(&md, &["spec", "strategy", "rollingUpdate", "maxSurge"]);
    assert_eq!(surge["x-kubernetes-int-or-string"], true);
    at(
        &md,
        &["spec", "strategy", "inPlaceUpdate", "orchestrationType"],
    );
    for field in ["collisionCount", "failedMachines", "unavailableReplicas"] {
        at(&md, &["status", field]);
    }
}

#[test]
fn yaml_stream_reads_back() {
    let yaml = crds_yaml();
    let docs: Vec<CustomResourceDefinition> = serde_yaml::Deserializer::from_str(&yaml)
        .map(|doc| CustomResourceDefinition::deserialize(doc).unwrap())
        .collect();
    assert_eq!(docs, crds());
    assert_eq!(yaml.matches("\n---\n").count(), 3);
}

/// Not run: proves that the types plug into kube's typed client.
#[allow(dead_code)]
fn typed_clients(client: kube::Client) {
    let _: kube::Api<MachineClass> = kube::Api::namespaced(client.clone(), "default");
    let _: kube::Api<Machine> = kube::Api::namespaced(client.clone(), "default");
    let _: kube::Api<MachineSet> = kube::Api::namespaced(client.clone(), "default");
    let _: kube::Api<MachineDeployment> = kube::Api::namespaced(client, "default");
}

#[test]
fn the_structural_check_catches_violations() {
    let bad = serde_json::json!({
        "type": "object",
        "properties": {
            "untyped": {"description": "no type"},
            "referenced": {"$ref": "#/definitions/X"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "list": {"type": "array", "items": {"properties": {}}},
            "map": {"type": "object", "additionalProperties": {"oneOf": []}},
            "ok": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}]},
        },
    });
    let mut violations = Vec::new();
    structural_violations(&bad, "", &mut violations);
    assert_eq!(
        violations,
        vec![
            ".untyped: no type",
            ".referenced: has $ref",
            ".referenced: no type",
            ".either: no type",
            ".either: anyOf outside an int-or-string",
            ".list[]: no type",
            ".map{}: has oneOf",
            ".map{}: no type",
        ]
    );
}
