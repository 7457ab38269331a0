//! Objects written by a Go MCM decode unchanged, survive a round trip, and
//! re-encode to the same content up to Go's own notion of "empty".

use api::{
    ConditionStatus, Machine, MachineClass, MachineDeployment, MachineDeploymentConditionType,
    MachineDeploymentStrategyType, MachineOperationType, MachinePhase, MachineSet, MachineState,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const MACHINE: &str = include_str!("fixtures/machine.yaml");
const MACHINE_SET: &str = include_str!("fixtures/machine-set.yaml");
const MACHINE_DEPLOYMENT: &str = include_str!("fixtures/machine-deployment.yaml");
const MACHINE_DEPLOYMENT_PAUSED: &str = include_str!("fixtures/machine-deployment-paused.yaml");
const MACHINE_CLASS: &str = include_str!("fixtures/machine-class.yaml");

/// Drops what Go treats as absent: nulls and zero values, then the objects
/// and lists left empty. Two documents equal after this read the same in Go.
fn normalize(value: Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Bool(false) => None,
        Value::String(s) if s.is_empty() => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::Object(map) => {
            let map: serde_json::Map<String, Value> = map
                .into_iter()
                .filter_map(|(k, v)| normalize(v).map(|v| (k, v)))
                .collect();
            (!map.is_empty()).then_some(Value::Object(map))
        }
        Value::Array(items) => {
            let items: Vec<Value> = items.into_iter().filter_map(normalize).collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        other => Some(other),
    }
}

/// Decodes `yaml`, checks that encoding and decoding again is lossless, and
/// compares the encoding with the input after removing `dropped` paths
/// (fields of older API versions that the current types no longer have).
fn round_trip<T>(yaml: &str, dropped: &[&str]) -> (T, Value)
where
    T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
{
    let obj: T = serde_yaml::from_str(yaml).expect("upstream YAML decodes");
    let json = serde_json::to_value(&obj).unwrap();
    let again: T = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(again, obj, "JSON round trip");
    let again: T = serde_yaml::from_str(&serde_yaml::to_string(&obj).unwrap()).unwrap();
    assert_eq!(again, obj, "YAML round trip");

    let mut input: Value = serde_yaml::from_str(yaml).unwrap();
    for path in dropped {
        let (parent, key) = path.rsplit_once('/').unwrap();
        input
            .pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .and_then(|m| m.remove(key))
            .unwrap_or_else(|| panic!("fixture has {path}"));
    }
    assert_eq!(normalize(json.clone()), normalize(input));
    (obj, json)
}

/// `clusterName` and `initializers` left ObjectMeta in Kubernetes 1.14/1.25.
const OLD_META: [&str; 2] = ["/metadata/clusterName", "/metadata/initializers"];

#[test]
fn machine() {
    // `status.node` predates the `node` label and is gone upstream too.
    let dropped = [OLD_META[0], OLD_META[1], "/status/node"];
    let (m, json) = round_trip::<Machine>(MACHINE, &dropped);
    assert_eq!(m.metadata.name.as_deref(), Some("test-machine"));
    assert_eq!(m.spec.class.kind, "AWSMachineClass");
    assert_eq!(m.spec.class.name, "test-aws");
    assert_eq!(m.spec.provider_id, "aws:///eu-east-1/i-00bef3f2618ffef23");
    let status = m.status.as_ref().unwrap();
    assert_eq!(status.conditions.len(), 4);
    assert_eq!(status.current_status.phase, Some(MachinePhase::Running));
    assert_eq!(status.last_operation.state, Some(MachineState::Successful));
    assert_eq!(
        status.last_operation.type_,
        Some(MachineOperationType::Create)
    );
    assert_eq!(m.phase(), Some(MachinePhase::Running));
    assert_eq!(json["apiVersion"], "machine.sapcloud.io/v1alpha1");
    assert_eq!(json["kind"], "Machine");
    assert_eq!(
        json["spec"]["providerID"],
        "aws:///eu-east-1/i-00bef3f2618ffef23"
    );
}

#[test]
fn machine_set() {
    let (ms, json) = round_trip::<MachineSet>(MACHINE_SET, &OLD_META);
    assert_eq!(ms.spec.replicas, 3);
    assert_eq!(ms.spec.min_ready_seconds, 200);
    assert_eq!(ms.spec.template.spec.class.name, "test-aws");
    let status = ms.status.as_ref().unwrap();
    // `machineSetCondition: null` and `lastOperation: {lastUpdateTime: null}`.
    assert!(status.conditions.is_empty());
    assert_eq!(status.last_operation, Default::default());
    assert_eq!(
        (
            status.replicas,
            status.ready_replicas,
            status.available_replicas
        ),
        (3, 3, 3)
    );
    assert_eq!(status.fully_labeled_replicas, 3);
    assert!(json["status"].get("machineSetCondition").is_none());
    assert!(json["spec"].get("machineClass").is_none());
    assert_eq!(api::validate_machine_set(&ms), vec![]);
}

#[test]
fn machine_deployment() {
    let (md, json) = round_trip::<MachineDeployment>(MACHINE_DEPLOYMENT, &OLD_META);
    let strategy = &md.spec.strategy;
    assert_eq!(
        strategy.type_,
        Some(MachineDeploymentStrategyType::RollingUpdate)
    );
    let rolling = strategy.rolling_update.as_ref().unwrap();
    assert_eq!(rolling.max_surge, Some(IntOrString::Int(1)));
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(1)));
    let status = md.status.as_ref().unwrap();
    assert_eq!(status.conditions.len(), 1);
    let available = &status.conditions[0];
    assert_eq!(available.type_, MachineDeploymentConditionType::Available);
    assert_eq!(available.status, ConditionStatus::True);
    assert_eq!(available.reason, "MinimumReplicasAvailable");
    assert_eq!(json["spec"]["strategy"]["rollingUpdate"]["maxSurge"], 1);
    assert_eq!(
        md.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"],
        "1"
    );
    assert_eq!(api::validate_machine_deployment(&md), vec![]);

    // The client-side apply record in the annotation is itself a valid object.
    let applied = &md.metadata.annotations.as_ref().unwrap()[api::labels::KUBECTL_LAST_APPLIED];
    let applied: MachineDeployment = serde_json::from_str(applied).unwrap();
    assert_eq!(applied.spec, md.spec);
}

#[test]
fn paused_machine_deployment_from_the_faq() {
    let (md, _) = round_trip::<MachineDeployment>(MACHINE_DEPLOYMENT_PAUSED, &[]);
    assert!(md.spec.paused);
    assert_eq!(md.status, None);
}

#[test]
fn machine_class() {
    let mut yaml: Value = serde_yaml::from_str(MACHINE_CLASS).unwrap();
    // Go writes quantities as strings; a bare number is accepted and comes
    // back as a string.
    yaml["nodeTemplate"]["virtualCapacity"]["hc.hana.com/memory"] = "1234567".into();
    let (class, json) = round_trip::<MachineClass>(&serde_yaml::to_string(&yaml).unwrap(), &[]);
    let direct: MachineClass = serde_yaml::from_str(MACHINE_CLASS).unwrap();
    assert_eq!(direct, class);

    assert_eq!(class.provider, "local");
    assert_eq!(class.provider_spec["tags"]["kubernetes.io/role/node"], "1");
    assert_eq!(class.provider_spec["rootFsSizeGB"], 20);
    let template = class.node_template.as_ref().unwrap();
    assert_eq!(template.capacity["memory"].0, "8Gi");
    assert_eq!(template.architecture.as_deref(), Some("amd64"));
    assert_eq!(
        class.secret_ref.as_ref().unwrap().name.as_deref(),
        Some("test-mc-secret")
    );
    assert_eq!(json["apiVersion"], "machine.sapcloud.io/v1alpha1");
    assert_eq!(json["kind"], "MachineClass");
    assert_eq!(api::validate_machine_class(&class), vec![]);
}

#[test]
fn go_empty_values_decode() {
    // What a Go MCM writes for a machine it has not processed yet: empty
    // phase, zero times, nil slices.
    let yaml = r#"
apiVersion: machine.sapcloud.io/v1alpha1
kind: Machine
metadata:
  name: fresh
  creationTimestamp: null
spec:
  class: {}
  nodeTemplate:
    metadata:
      creationTimestamp: null
    spec: {}
status:
  conditions: null
  currentStatus:
    lastUpdateTime: null
    phase: ""
  lastOperation:
    lastUpdateTime: null
    state: ""
    type: ""
"#;
    let m: Machine = serde_yaml::from_str(yaml).unwrap();
    assert_eq!(m.phase(), None);
    let json = serde_json::to_value(&m).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "apiVersion": "machine.sapcloud.io/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": "fresh"},
            "spec": {},
            "status": {},
        })
    );
}

#[test]
fn inline_configuration_and_newer_fields() {
    let yaml = r#"
apiVersion: machine.sapcloud.io/v1alpha1
kind: MachineDeployment
metadata:
  name: pool
spec:
  replicas: 0
  selector:
    matchLabels: {name: pool}
  template:
    metadata:
      labels: {name: pool}
    spec:
      class: {kind: MachineClass, name: c1}
      drainTimeout: 2h
      healthTimeout: 10m
      creationTimeout: 20m
      inPlaceUpdateTimeout: 20m
      machinePreserveTimeout: 96h
      disableHealthTimeout: true
      maxEvictRetries: 360
      nodeConditions: KernelDeadlock,ReadonlyFilesystem
  strategy:
    type: InPlaceUpdate
    inPlaceUpdate:
      maxSurge: "25%"
      maxUnavailable: 0
      orchestrationType: Manual
  autoPreserveFailedMachineMax: 2
  revisionHistoryLimit: 1
  progressDeadlineSeconds: 600
  rollbackTo: {revision: 2}
status:
  preservedFailedReplicas: 1
  collisionCount: 0
  failedMachines:
  - name: pool-abc-1
    providerID: local:///m1
    ownerRef: pool-abc
    lastOperation: {state: Failed, type: Create, errorCode: ResourceExhausted}
"#;
    let (md, json) = round_trip::<MachineDeployment>(yaml, &[]);
    let config = &md.spec.template.spec.configuration;
    assert_eq!(
        config.drain_timeout(),
        Some(std::time::Duration::from_secs(7200))
    );
    assert_eq!(
        config.machine_preserve_timeout(),
        Some(std::time::Duration::from_secs(96 * 3600))
    );
    assert_eq!(config.disable_health_timeout, Some(true));
    assert_eq!(
        config.node_condition_types(),
        Some(vec![
            "KernelDeadlock".to_string(),
            "ReadonlyFilesystem".to_string()
        ])
    );
    // The configuration stays inline, next to `class`.
    assert_eq!(json["spec"]["template"]["spec"]["drainTimeout"], "2h");
    // `replicas: 0` is kept for the scale subresource; `collisionCount: 0`
    // is a pointer upstream and so is kept too.
    assert_eq!(json["spec"]["replicas"], 0);
    assert_eq!(json["status"]["collisionCount"], 0);
    assert_eq!(
        md.status.as_ref().unwrap().failed_machines[0].provider_id,
        "local:///m1"
    );
    assert_eq!(api::validate_machine_deployment(&md), vec![]);
}
