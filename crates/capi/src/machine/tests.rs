//! The Machine controller's decisions, table by table: seed 004's
//! transitions through the whole planner (not only the phase function),
//! references that cannot be read, node sync, health verdicts and the
//! deletion flow.

use std::collections::BTreeMap;

use super::*;
use crate::testing::{
    BOOTSTRAP_API, INFRA_API, at, cluster, deleting, machine, node, provider_object,
};
use k8s_openapi::api::core::v1::{NodeSpec, Taint};

fn config(data: Value) -> DynamicObject {
    provider_object(BOOTSTRAP_API, "TrellisConfig", "m1", data)
}

fn infra(data: Value) -> DynamicObject {
    provider_object(INFRA_API, "LocalMachine", "m1", data)
}

fn ready_config() -> DynamicObject {
    config(json!({"status": {"ready": true, "dataSecretName": "m1"}}))
}

fn ready_infra() -> DynamicObject {
    infra(json!({
        "spec": {"providerID": "local:///default/1"},
        "status": {"ready": true, "addresses": [{"type": "InternalIP", "address": "10.250.0.1"}]},
    }))
}

fn scope<'a>(
    m: &'a Machine,
    c: &'a Cluster,
    bootstrap: Lookup<'a>,
    infra: Lookup<'a>,
    node: NodeLookup<'a>,
) -> Scope<'a> {
    Scope {
        machine: m,
        cluster: Some(c),
        bootstrap,
        infra,
        node,
        health: Vec::new(),
        drain: None,
        other_control_plane_machines: 0,
        now: at(60),
    }
}

fn phase(p: &Plan) -> &str {
    p.status.phase.as_deref().unwrap_or_default()
}

fn condition<'a>(p: &'a Plan, t: &str) -> (&'a str, &'a str) {
    cond::get(&p.status.conditions, t)
        .map(|c| (c.status.as_str(), c.reason.as_str()))
        .unwrap_or(("", ""))
}

/// The Machine as it would read after the plan's writes.
fn apply(m: &Machine, p: &Plan) -> Machine {
    let mut v = serde_json::to_value(m).unwrap();
    if let Some(patch) = &p.machine_patch {
        let mut patch = patch.clone();
        if let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        crate::meta::merge_into(&mut v, patch);
    }
    v["status"] = serde_json::to_value(&p.status).unwrap();
    serde_json::from_value(v).unwrap()
}

#[test]
fn a_new_machine_only_gets_its_finalizer() {
    let mut m = machine("m1");
    m.metadata.finalizers = None;
    let c = cluster();
    let p = plan(&scope(
        &m,
        &c,
        Lookup::NotFound,
        Lookup::NotFound,
        NodeLookup::NoTarget,
    ));
    assert!(p.add_finalizer);
    assert!(p.machine_patch.is_none() && p.status.phase.is_none());
}

/// Seed 004's walk from `kubectl apply` to Running, one reconcile per
/// step, each fed the Machine as the previous one left it.
#[test]
fn seed_walk_pending_provisioning_provisioned_running() {
    let c = cluster();
    let pid = "local:///default/1";
    let unready_config = config(json!({"status": {}}));
    let unready_infra = infra(json!({}));
    let booting = node("m1", pid, "False");
    let up = node("m1", pid, "True");
    let configs = [
        &unready_config,
        &ready_config(),
        &ready_config(),
        &ready_config(),
        &ready_config(),
    ];
    let infras = [
        &unready_infra,
        &unready_infra,
        &ready_infra(),
        &ready_infra(),
        &ready_infra(),
    ];
    let nodes = [
        NodeLookup::NotFound,
        NodeLookup::NotFound,
        NodeLookup::NotFound,
        NodeLookup::Found(&booting),
        NodeLookup::Found(&up),
    ];
    let want = [
        "Pending",
        "Provisioning",
        "Provisioned",
        "Provisioned",
        "Running",
    ];
    let mut m = machine("m1");
    for i in 0..5 {
        let p = plan(&scope(
            &m,
            &c,
            Lookup::Found(configs[i]),
            Lookup::Found(infras[i]),
            nodes[i].clone(),
        ));
        assert!(p.errors.is_empty(), "step {i}: {:?}", p.errors);
        assert_eq!(phase(&p), want[i], "step {i}");
        m = apply(&m, &p);
    }
    let s = m.status.clone().unwrap();
    assert_eq!(m.spec.bootstrap.data_secret_name.as_deref(), Some("m1"));
    assert_eq!(m.spec.provider_id.as_deref(), Some(pid));
    assert_eq!(s.addresses[0].address, "10.250.0.1");
    assert!(s.bootstrap_ready && s.infrastructure_ready);
    assert_eq!(s.node_ref.unwrap().name.as_deref(), Some("m1"));
    assert_eq!(s.observed_generation, Some(1));
    assert_eq!(
        cond::get(&s.conditions, ct::READY).map(|c| c.status.as_str()),
        Some("True")
    );
}

#[test]
fn no_bootstrap_data_stays_pending_and_says_why() {
    let c = cluster();
    let not_ready = config(json!({"status": {"ready": false}}));
    let m = machine("m1");
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&not_ready),
        Lookup::Found(&infra(json!({}))),
        NodeLookup::NotFound,
    ));
    assert_eq!(phase(&p), "Pending");
    assert!(!p.status.bootstrap_ready);
    assert_eq!(
        condition(&p, ct::BOOTSTRAP_READY),
        ("False", "WaitingForDataSecret")
    );
    let msg = &cond::get(&p.status.conditions, ct::READY).unwrap().message;
    assert!(msg.contains("TrellisConfig"), "{msg}");
    // The config gets the Machine as its controller and the cluster label.
    let patch = p.bootstrap_patch.expect("ownership patch");
    assert_eq!(patch["metadata"]["ownerReferences"][0]["kind"], "Machine");
    assert_eq!(patch["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(patch["metadata"]["labels"][labels::CLUSTER_NAME], "c1");
    assert!(p.infra_patch.is_some());
}

#[test]
fn a_config_mirrors_its_ready_condition() {
    let c = cluster();
    let cfg = config(json!({"status": {"conditions": [
        {"type": "Ready", "status": "False", "severity": "Info", "reason": "WaitingForClusterInfrastructure"}
    ]}}));
    let m = machine("m1");
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::NotFound,
        NodeLookup::NoTarget,
    ));
    assert_eq!(
        condition(&p, ct::BOOTSTRAP_READY),
        ("False", "WaitingForClusterInfrastructure")
    );
}

#[test]
fn a_ready_config_without_a_secret_name_is_an_error() {
    let c = cluster();
    let cfg = config(json!({"status": {"ready": true}}));
    let m = machine("m1");
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::NotFound,
        NodeLookup::NoTarget,
    ));
    assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
    assert!(!p.status.bootstrap_ready);
    assert_eq!(phase(&p), "Pending");
    assert_eq!(p.status.observed_generation, None, "not observed on error");
}

/// Seed: `data: ""` means no bootstrap step. Upstream: the data Secret is
/// named directly, with no config to wait for.
#[test]
fn bootstrap_data_given_directly_skips_the_bootstrap_step() {
    let c = cluster();
    let mut m = machine("m1");
    m.spec.bootstrap.config_ref = None;
    m.spec.bootstrap.data_secret_name = Some("handmade".into());
    let p = plan(&scope(
        &m,
        &c,
        Lookup::None,
        Lookup::Found(&infra(json!({}))),
        NodeLookup::NotFound,
    ));
    assert!(p.status.bootstrap_ready);
    assert_eq!(phase(&p), "Provisioning");
    assert!(p.bootstrap_patch.is_none());
    assert_eq!(condition(&p, ct::BOOTSTRAP_READY).0, "True");

    m.spec.bootstrap.data_secret_name = None;
    let p = plan(&scope(
        &m,
        &c,
        Lookup::None,
        Lookup::Found(&infra(json!({}))),
        NodeLookup::NotFound,
    ));
    assert_eq!(phase(&p), "Pending");
}

#[test]
fn references_of_unknown_kinds_are_a_condition_not_a_crash() {
    let c = cluster();
    let m = machine("m1");
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Invalid("no CRD serves kind TrellisConfig".into()),
        Lookup::Invalid("no CRD serves kind LocalMachine".into()),
        NodeLookup::NotFound,
    ));
    assert_eq!(
        condition(&p, ct::BOOTSTRAP_READY),
        ("False", "InvalidReference")
    );
    assert_eq!(
        condition(&p, ct::INFRASTRUCTURE_READY),
        ("False", "InvalidReference")
    );
    let ready = cond::get(&p.status.conditions, ct::READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.severity.as_str()),
        ("False", "Error")
    );
    assert!(ready.message.contains("no CRD serves"), "{}", ready.message);
    assert_eq!(p.requeue, Some(MISSING_REFERENCE_RETRY));
    assert_eq!(phase(&p), "Pending");
}

#[test]
fn missing_references_wait() {
    let c = cluster();
    let m = machine("m1");
    let p = plan(&scope(
        &m,
        &c,
        Lookup::NotFound,
        Lookup::NotFound,
        NodeLookup::NotFound,
    ));
    assert_eq!(
        condition(&p, ct::BOOTSTRAP_READY),
        ("False", "ReferenceNotFound")
    );
    assert_eq!(
        condition(&p, ct::INFRASTRUCTURE_READY),
        ("False", "ReferenceNotFound")
    );
    assert_eq!(p.requeue, Some(MISSING_REFERENCE_RETRY));
    assert!(p.errors.is_empty());
}

#[test]
fn ready_infrastructure_without_a_provider_id_is_an_error() {
    let cfg = ready_config();
    let c = cluster();
    let m = machine("m1");
    let inf = infra(json!({"status": {"ready": true}}));
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::NotFound,
    ));
    assert!(p.errors[0].contains("providerID"), "{:?}", p.errors);
    assert!(!p.status.infrastructure_ready);
}

#[test]
fn failures_of_provider_objects_fail_the_machine() {
    let cfg = ready_config();
    let c = cluster();
    let m = machine("m1");
    let inf = infra(json!({"status": {"failureReason": "CreateError", "failureMessage": "quota"}}));
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::NotFound,
    ));
    assert_eq!(phase(&p), "Failed");
    assert_eq!(p.status.failure_reason.as_deref(), Some("CreateError"));
    assert!(
        p.status
            .failure_message
            .as_deref()
            .unwrap()
            .contains("LocalMachine.infrastructure.cluster.x-k8s.io")
    );
}

#[test]
fn infrastructure_deleted_after_being_ready_is_a_terminal_failure() {
    let cfg = ready_config();
    let c = cluster();
    let mut m = machine("m1");
    m.spec.provider_id = Some("local:///default/1".into());
    m.status = Some(MachineStatus {
        infrastructure_ready: true,
        bootstrap_ready: true,
        ..MachineStatus::default()
    });
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::NotFound,
        NodeLookup::NotFound,
    ));
    assert_eq!(
        p.status.failure_reason.as_deref(),
        Some("InvalidConfiguration")
    );
    assert_eq!(phase(&p), "Failed");
    assert_eq!(p.errors.len(), 1);
}

#[test]
fn node_sync_labels_annotations_and_the_uninitialized_taint() {
    let (cfg, inf) = (ready_config(), ready_infra());
    let c = cluster();
    let mut m = machine("m1");
    m.metadata.labels.as_mut().unwrap().extend([
        ("node-role.kubernetes.io/worker".to_string(), String::new()),
        ("foo".to_string(), "bar".to_string()),
    ]);
    let mut n = node("m1", "local:///default/1", "True");
    n.spec = Some(NodeSpec {
        provider_id: Some("local:///default/1".into()),
        taints: Some(vec![
            Taint {
                key: labels::UNINITIALIZED_TAINT.into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            },
            Taint {
                key: "keep".into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            },
        ]),
        ..NodeSpec::default()
    });
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::Found(&n),
    ));
    let patch = p.node_patch.clone().expect("a node patch");
    assert_eq!(
        patch["metadata"]["labels"],
        json!({"node-role.kubernetes.io/worker": ""})
    );
    let ann = &patch["metadata"]["annotations"];
    assert_eq!(ann[labels::NODE_CLUSTER_NAME], "c1");
    assert_eq!(ann[labels::NODE_CLUSTER_NAMESPACE], "default");
    assert_eq!(ann[labels::NODE_MACHINE], "m1");
    assert_eq!(
        ann[labels::NODE_LABELS_FROM_MACHINE],
        "node-role.kubernetes.io/worker"
    );
    assert_eq!(
        patch["spec"]["taints"],
        json!([{"key": "keep", "effect": "NoSchedule"}])
    );
    assert_eq!(patch["metadata"]["resourceVersion"], "3");
    assert_eq!(phase(&p), "Running");
    assert_eq!(condition(&p, ct::NODE_HEALTHY).0, "True");
}

#[test]
fn a_node_that_is_not_ready_gets_no_node_ref() {
    let (cfg, inf) = (ready_config(), ready_infra());
    let c = cluster();
    let m = machine("m1");
    let n = node("m1", "local:///default/1", "False");
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::Found(&n),
    ));
    assert!(p.status.node_ref.is_none());
    assert_eq!(phase(&p), "Provisioned");
    assert_eq!(
        condition(&p, ct::NODE_HEALTHY),
        ("False", "NodeProvisioning")
    );
}

#[test]
fn a_lost_node_is_node_not_found_and_several_are_an_error() {
    let (cfg, inf) = (ready_config(), ready_infra());
    let c = cluster();
    let mut m = machine("m1");
    m.spec.provider_id = Some("local:///default/1".into());
    m.status = Some(MachineStatus {
        node_ref: Some(ObjectReference {
            name: Some("m1".into()),
            ..ObjectReference::default()
        }),
        infrastructure_ready: true,
        bootstrap_ready: true,
        ..MachineStatus::default()
    });
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::NotFound,
    ));
    assert_eq!(condition(&p, ct::NODE_HEALTHY), ("False", "NodeNotFound"));
    assert_eq!(phase(&p), "Running", "the phase follows nodeRef");
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::Ambiguous(vec!["a".into(), "b".into()]),
    ));
    assert_eq!(p.errors.len(), 1);
}

#[test]
fn health_verdicts_become_conditions() {
    let (cfg, inf) = (ready_config(), ready_infra());
    let c = cluster();
    let m = machine("m1");
    let verdict = |unhealthy: bool, allowed: bool| HealthVerdict {
        check: "mhc".into(),
        unhealthy: unhealthy.then(|| ("UnhealthyNode".into(), "Ready Unknown for 30s".into())),
        remediation_allowed: allowed,
    };
    let rows = [
        (verdict(false, true), ("True", ""), ("", "")),
        (
            verdict(true, true),
            ("False", "UnhealthyNode"),
            ("False", "WaitingForRemediation"),
        ),
        (verdict(true, false), ("False", "UnhealthyNode"), ("", "")),
    ];
    for (v, hc, or) in rows {
        let mut s = scope(
            &m,
            &c,
            Lookup::Found(&cfg),
            Lookup::Found(&inf),
            NodeLookup::NotFound,
        );
        s.health = vec![v.clone()];
        let p = plan(&s);
        assert_eq!(condition(&p, ct::HEALTH_CHECK_SUCCEEDED), hc, "{v:?}");
        assert_eq!(condition(&p, ct::OWNER_REMEDIATED), or, "{v:?}");
    }
    // Without any check the conditions go.
    let mut marked = m.clone();
    marked.status = Some(MachineStatus {
        conditions: vec![cond::false_(ct::OWNER_REMEDIATED, "x", "Warning", "")],
        ..MachineStatus::default()
    });
    let p = plan(&scope(
        &marked,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::NotFound,
    ));
    assert_eq!(condition(&p, ct::OWNER_REMEDIATED), ("", ""));
}

#[test]
fn paused_machines_only_say_so() {
    let (cfg, inf) = (ready_config(), ready_infra());
    let mut c = cluster();
    c.spec.paused = true;
    let m = machine("m1");
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::NotFound,
    ));
    assert_eq!(condition(&p, ct::PAUSED).0, "True");
    assert!(p.machine_patch.is_none() && p.bootstrap_patch.is_none() && p.status.phase.is_none());
}

#[test]
fn a_missing_cluster_is_an_error_without_writes() {
    let m = machine("m1");
    let c = cluster();
    let mut s = scope(
        &m,
        &c,
        Lookup::NotFound,
        Lookup::NotFound,
        NodeLookup::NotFound,
    );
    s.cluster = None;
    let p = plan(&s);
    assert_eq!(p.errors.len(), 1);
    assert!(p.machine_patch.is_none());
}

#[test]
fn a_standalone_machine_gets_a_cluster_owner() {
    let c = cluster();
    let m = machine("m1");
    let p = plan(&scope(
        &m,
        &c,
        Lookup::NotFound,
        Lookup::NotFound,
        NodeLookup::NotFound,
    ));
    let refs = &p.machine_patch.unwrap()["metadata"]["ownerReferences"];
    assert_eq!(refs[0]["kind"], "Cluster");
    assert_eq!(refs[0].get("controller"), None);
    // A MachineSet's Machine does not.
    let mut owned = machine("m1");
    owned
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(labels::SET_NAME.into(), "ms".into());
    let p = plan(&scope(
        &owned,
        &c,
        Lookup::NotFound,
        Lookup::NotFound,
        NodeLookup::NotFound,
    ));
    assert!(p.machine_patch.is_none());
}

fn running_machine() -> Machine {
    let mut m = machine("m1");
    m.spec.provider_id = Some("local:///default/1".into());
    m.spec.bootstrap.data_secret_name = Some("m1".into());
    m.status = Some(MachineStatus {
        node_ref: Some(ObjectReference {
            name: Some("m1".into()),
            ..ObjectReference::default()
        }),
        bootstrap_ready: true,
        infrastructure_ready: true,
        phase: Some("Running".into()),
        ..MachineStatus::default()
    });
    deleting(m, at(0))
}

fn pod(name: &str) -> DrainPod {
    let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"nodeName": "m1", "containers": []},
    }))
    .unwrap();
    mcm::machine::drain_pod(&p).unwrap()
}

/// The deletion flow in order: cordon and evict, then the infrastructure
/// object, then the bootstrap config, then the Node and the finalizer.
#[test]
fn deletion_cordons_drains_then_deletes_infra_bootstrap_node() {
    let c = cluster();
    let m = running_machine();
    let n = node("m1", "local:///default/1", "True");
    let cfg = ready_config();
    let inf = ready_infra();

    // 1. Pods on the node: cordon and evict them.
    let mut s = scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::Found(&n),
    );
    s.drain = Some(DrainFacts {
        pods: vec![pod("web")],
        records: HashMap::new(),
    });
    let p = plan(&s);
    assert_eq!(phase(&p), "Deleting");
    assert_eq!(
        p.node_patch.as_ref().unwrap()["spec"]["unschedulable"],
        true
    );
    assert_eq!(p.pod_actions, vec![PodAction::Evict("uid-web".into())]);
    assert_eq!(condition(&p, ct::DRAINING_SUCCEEDED), ("False", "Draining"));
    assert!(!p.delete_infra);
    assert!(
        p.status
            .deletion
            .as_ref()
            .unwrap()
            .node_drain_start_time
            .is_some()
    );

    // 2. Drained: the infrastructure object goes first.
    let mut s = scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::Found(&n),
    );
    s.drain = Some(DrainFacts::default());
    let p = plan(&s);
    assert!(p.delete_infra && !p.delete_bootstrap && !p.delete_node);
    assert_eq!(condition(&p, ct::DRAINING_SUCCEEDED).0, "True");
    assert_eq!(
        p.events
            .iter()
            .filter(|e| e.reason == "SuccessfulDrainNode")
            .count(),
        1
    );

    // 3. Infrastructure going: wait, do not touch the config yet.
    let going = deleting(ready_infra(), at(1));
    let mut s = scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&going),
        NodeLookup::Found(&n),
    );
    s.drain = Some(DrainFacts::default());
    let p = plan(&s);
    assert!(!p.delete_infra && !p.delete_bootstrap && !p.remove_finalizer);

    // 4. Infrastructure gone: the bootstrap config.
    let mut s = scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::NotFound,
        NodeLookup::Found(&n),
    );
    s.drain = Some(DrainFacts::default());
    let p = plan(&s);
    assert!(p.delete_bootstrap && !p.delete_node && !p.remove_finalizer);
    assert_eq!(phase(&p), "Deleting");

    // 5. Both gone: the Node, the finalizer, phase Deleted.
    let mut s = scope(
        &m,
        &c,
        Lookup::NotFound,
        Lookup::NotFound,
        NodeLookup::Found(&n),
    );
    s.drain = Some(DrainFacts::default());
    let p = plan(&s);
    assert!(p.delete_node && p.remove_finalizer);
    assert_eq!(phase(&p), "Deleted");
    assert_eq!(
        p.node_deletion_deadline,
        Some(at(10)),
        "default nodeDeletionTimeout 10s"
    );
}

#[test]
fn deletion_hooks_hold_the_machine() {
    let (cfg, inf) = (ready_config(), ready_infra());
    let c = cluster();
    let n = node("m1", "local:///default/1", "True");
    let mut m = running_machine();
    m.metadata.annotations = Some(BTreeMap::from([(
        format!("{}/mine", labels::PRE_DRAIN_HOOK_PREFIX),
        String::new(),
    )]));
    let p = plan(&scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::Found(&n),
    ));
    assert!(p.node_patch.is_none(), "no cordon");
    assert!(!p.delete_infra);
    assert_eq!(
        condition(&p, ct::PRE_DRAIN_HOOK_SUCCEEDED),
        ("False", "WaitingExternalHook")
    );

    m.metadata.annotations = Some(BTreeMap::from([(
        labels::PRE_TERMINATE_HOOK_PREFIX.to_string(),
        String::new(),
    )]));
    let mut s = scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::Found(&n),
    );
    s.drain = Some(DrainFacts::default());
    let p = plan(&s);
    assert!(p.node_patch.is_some(), "drained");
    assert!(!p.delete_infra, "held before the infrastructure goes");
    assert_eq!(
        condition(&p, ct::PRE_TERMINATE_HOOK_SUCCEEDED),
        ("False", "WaitingExternalHook")
    );
}

#[test]
fn exclude_draining_and_drain_timeout_skip_the_drain() {
    let (cfg, inf) = (ready_config(), ready_infra());
    let c = cluster();
    let n = node("m1", "local:///default/1", "True");
    let mut m = running_machine();
    m.metadata.annotations = Some(BTreeMap::from([(
        labels::EXCLUDE_NODE_DRAINING.to_string(),
        String::new(),
    )]));
    let mut s = scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::Found(&n),
    );
    s.drain = Some(DrainFacts {
        pods: vec![pod("web")],
        records: HashMap::new(),
    });
    let p = plan(&s);
    assert!(p.pod_actions.is_empty() && p.node_patch.is_none());
    assert!(p.delete_infra, "infrastructure deleted in the same pass");

    let mut m = running_machine();
    m.spec.node_drain_timeout = Some("5m".into());
    m.status.as_mut().unwrap().deletion = Some(MachineDeletionStatus {
        node_drain_start_time: Some(mcm::time::to_time(at(60 - 300))),
        ..MachineDeletionStatus::default()
    });
    let mut s = scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::Found(&n),
    );
    s.drain = Some(DrainFacts {
        pods: vec![pod("web")],
        records: HashMap::new(),
    });
    let p = plan(&s);
    assert!(p.pod_actions.is_empty());
    assert!(p.delete_infra);
}

#[test]
fn attached_volumes_are_waited_for() {
    let (cfg, inf) = (ready_config(), ready_infra());
    let c = cluster();
    let mut n = node("m1", "local:///default/1", "True");
    n.status.as_mut().unwrap().volumes_attached =
        Some(vec![k8s_openapi::api::core::v1::AttachedVolume {
            name: "kubernetes.io/csi/x^v1".into(),
            device_path: String::new(),
        }]);
    let m = running_machine();
    let mut s = scope(
        &m,
        &c,
        Lookup::Found(&cfg),
        Lookup::Found(&inf),
        NodeLookup::Found(&n),
    );
    s.drain = Some(DrainFacts::default());
    let p = plan(&s);
    assert_eq!(
        condition(&p, ct::VOLUME_DETACH_SUCCEEDED),
        ("False", "WaitingForVolumeDetach")
    );
    assert!(!p.delete_infra);
    assert_eq!(p.requeue, Some(DRAIN_RETRY));
}

#[test]
fn the_last_control_plane_machine_keeps_its_node() {
    let c = cluster();
    let n = node("m1", "local:///default/1", "True");
    let mut m = running_machine();
    m.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(labels::CONTROL_PLANE.into(), String::new());
    let s = scope(
        &m,
        &c,
        Lookup::NotFound,
        Lookup::NotFound,
        NodeLookup::Found(&n),
    );
    let p = plan(&s);
    assert!(!p.delete_node && p.node_patch.is_none() && p.remove_finalizer);
    let mut s = scope(
        &m,
        &c,
        Lookup::NotFound,
        Lookup::NotFound,
        NodeLookup::Found(&n),
    );
    s.other_control_plane_machines = 1;
    s.drain = Some(DrainFacts::default());
    assert!(plan(&s).delete_node);
}

#[test]
fn deleting_with_the_cluster_skips_the_drain_but_deletes_the_node() {
    let c = deleting(cluster(), at(0));
    let n = node("m1", "local:///default/1", "True");
    let m = running_machine();
    let mut s = scope(
        &m,
        &c,
        Lookup::NotFound,
        Lookup::NotFound,
        NodeLookup::Found(&n),
    );
    s.drain = Some(DrainFacts {
        pods: vec![pod("web")],
        records: HashMap::new(),
    });
    let p = plan(&s);
    assert!(p.pod_actions.is_empty());
    assert!(p.delete_node && p.remove_finalizer);
}
