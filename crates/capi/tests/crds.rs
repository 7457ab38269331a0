//! The generated CRDs carry upstream's names, short names, category,
//! printer columns, subresources and contract labels, and upstream-style
//! YAML decodes into the types.

use capi::types::labels;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

fn crd(kind: &str) -> CustomResourceDefinition {
    capi::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"))
}

fn columns(kind: &str) -> Vec<(String, String, i32)> {
    crd(kind).spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.name, c.json_path, c.priority.unwrap_or(0)))
        .collect()
}

#[test]
fn names_short_names_and_categories() {
    let table = [
        ("Cluster", "clusters.cluster.x-k8s.io", vec!["cl"]),
        ("Machine", "machines.cluster.x-k8s.io", vec!["ma"]),
        ("MachineSet", "machinesets.cluster.x-k8s.io", vec!["ms"]),
        (
            "MachineDeployment",
            "machinedeployments.cluster.x-k8s.io",
            vec!["md"],
        ),
        (
            "MachineHealthCheck",
            "machinehealthchecks.cluster.x-k8s.io",
            vec!["mhc", "mhcs"],
        ),
    ];
    for (kind, name, short) in table {
        let c = crd(kind);
        assert_eq!(c.metadata.name.as_deref(), Some(name));
        assert_eq!(c.spec.scope, "Namespaced");
        assert_eq!(c.spec.names.short_names.clone().unwrap_or_default(), short);
        assert_eq!(
            c.spec.names.categories.clone().unwrap_or_default(),
            ["cluster-api"]
        );
        let l = c.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            l.get("cluster.x-k8s.io/v1beta1").map(String::as_str),
            Some("v1beta1"),
            "{kind}"
        );
        assert_eq!(
            l.get(labels::PROVIDER_LABEL).map(String::as_str),
            Some("cluster-api")
        );
        let v = &c.spec.versions[0];
        assert_eq!(
            (v.name.as_str(), v.served, v.storage),
            ("v1beta1", true, true)
        );
        assert!(v.subresources.as_ref().unwrap().status.is_some(), "{kind}");
    }
}

#[test]
fn printer_columns_are_upstreams() {
    let names = |kind| columns(kind).into_iter().map(|c| c.0).collect::<Vec<_>>();
    assert_eq!(
        names("Machine"),
        [
            "Cluster",
            "NodeName",
            "ProviderID",
            "Phase",
            "Age",
            "Version"
        ]
    );
    assert_eq!(
        names("MachineSet"),
        [
            "Cluster",
            "Desired",
            "Replicas",
            "Ready",
            "Available",
            "Age",
            "Version"
        ]
    );
    assert_eq!(
        names("MachineDeployment"),
        [
            "Cluster",
            "Desired",
            "Replicas",
            "Ready",
            "Updated",
            "Unavailable",
            "Phase",
            "Age",
            "Version"
        ]
    );
    assert_eq!(
        names("Cluster"),
        ["ClusterClass", "Phase", "Age", "Version"]
    );
    assert_eq!(
        names("MachineHealthCheck"),
        [
            "Cluster",
            "ExpectedMachines",
            "MaxUnhealthy",
            "CurrentHealthy",
            "Age"
        ]
    );
    // Desired is a wide-only column.
    let desired = columns("MachineDeployment")
        .into_iter()
        .find(|c| c.0 == "Desired")
        .unwrap();
    assert!(desired.2 > 0);
    assert_eq!(desired.1, ".spec.replicas");
}

#[test]
fn scale_subresources_point_at_the_selector() {
    for kind in ["MachineSet", "MachineDeployment"] {
        let scale = crd(kind).spec.versions[0]
            .subresources
            .clone()
            .unwrap()
            .scale
            .unwrap();
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.replicas");
        assert_eq!(
            scale.label_selector_path.as_deref(),
            Some(".status.selector")
        );
    }
}

#[test]
fn upstream_yaml_decodes() {
    let md: capi::MachineDeployment = serde_yaml::from_str(
        r#"
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: md-0, namespace: default}
spec:
  clusterName: c1
  replicas: 3
  selector: {matchLabels: null}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: "25%", maxUnavailable: 0}
  template:
    spec:
      clusterName: c1
      version: v1.31.2
      bootstrap:
        configRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta1, kind: KubeadmConfigTemplate, name: md-0}
      infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: DockerMachineTemplate, name: md-0}
      nodeDrainTimeout: 5m
"#,
    )
    .unwrap();
    assert_eq!(md.spec.replicas, Some(3));
    let ru = md.spec.strategy.unwrap().rolling_update.unwrap();
    assert_eq!(
        ru.max_surge,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("25%".into()))
    );
    assert_eq!(
        md.spec.template.spec.node_drain_timeout.as_deref(),
        Some("5m")
    );
    // Round trip: the status booleans upstream always writes are written.
    let m = capi::Machine::new("m", capi::MachineSpec::default());
    let mut m = m;
    m.status = Some(capi::MachineStatus::default());
    let v = serde_json::to_value(&m).unwrap();
    assert_eq!(v["status"]["bootstrapReady"], false);
    assert_eq!(v["status"]["infrastructureReady"], false);
}
