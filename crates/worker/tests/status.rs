//! Worker status entries, the rollout verdict, cleanup, bootstrap user data
//! and the Shoot facts.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use api::{
    ConditionStatus, LastOperation as MachineLastOperation, MachineDeployment,
    MachineDeploymentCondition, MachineDeploymentConditionType, MachineDeploymentSpec,
    MachineDeploymentStatus, MachineSummary,
};
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;
use worker::bootstrap::{
    BOOTSTRAP_TOKEN_PLACEHOLDER, BootstrapConfig, MACHINE_NAME_PLACEHOLDER, bootstrap_user_data,
};
use worker::labels::{self, kubelet_node_labels};
use worker::status::{
    check_machine_deployment, last_error, last_operation, machine_deployments_status,
    status_machine_deployments,
};
use worker::{
    ExistingSecret, HealthInput, HealthVerdict, ObservedMachineSet, ShootFacts, WantedDeployment,
    cleanup_plan, deletion_plan, health,
};

fn now() -> Time {
    serde_json::from_value(json!("2024-05-01T12:00:00Z")).unwrap()
}

fn wanted(name: &str, class: &str, min: i32, max: i32) -> WantedDeployment {
    WantedDeployment {
        name: name.into(),
        class_name: class.into(),
        secret_name: class.into(),
        minimum: min,
        maximum: max,
        ..WantedDeployment::default()
    }
}

#[test]
fn status_lists_min_max_priority_per_deployment() {
    let mut a = wanted("md-z1", "md-z1-abcde", 2, 3);
    a.priority = Some(4);
    let b = wanted("md-z2", "md-z2-abcde", 1, 2);
    let entries = status_machine_deployments(&[a.clone(), b.clone()]);
    assert_eq!(
        serde_json::to_value(&entries).unwrap(),
        json!([
            {"name": "md-z1", "minimum": 2, "maximum": 3, "priority": 4},
            {"name": "md-z2", "minimum": 1, "maximum": 2}
        ])
    );
    let update = machine_deployments_status(&[a, b], now()).unwrap();
    assert_eq!(update.last_update_time, now());
    assert!(
        machine_deployments_status(&[], now()).is_none(),
        "nothing wanted, no update"
    );
}

/// A deployment that rolled out: available, progressing, all updated.
fn rolled_out(name: &str, replicas: i32) -> MachineDeployment {
    let condition = |t, s| MachineDeploymentCondition {
        type_: t,
        status: s,
        last_update_time: None,
        last_transition_time: None,
        reason: String::new(),
        message: String::new(),
    };
    let mut md = MachineDeployment::new(
        name,
        MachineDeploymentSpec {
            replicas,
            ..MachineDeploymentSpec::default()
        },
    );
    md.metadata.namespace = Some("ns".into());
    md.metadata.generation = Some(2);
    md.status = Some(MachineDeploymentStatus {
        observed_generation: 2,
        replicas,
        updated_replicas: replicas,
        ready_replicas: replicas,
        available_replicas: replicas,
        conditions: vec![
            condition(
                MachineDeploymentConditionType::Available,
                ConditionStatus::True,
            ),
            condition(
                MachineDeploymentConditionType::Progressing,
                ConditionStatus::True,
            ),
        ],
        ..MachineDeploymentStatus::default()
    });
    md
}

fn set(owner: &str, class: &str) -> ObservedMachineSet {
    ObservedMachineSet {
        owner: owner.into(),
        class_name: class.into(),
    }
}

struct Fixture {
    wanted: Vec<WantedDeployment>,
    observed: Vec<MachineDeployment>,
    sets: Vec<ObservedMachineSet>,
    pre_mds: BTreeSet<String>,
    pre_classes: BTreeSet<String>,
    hibernated: bool,
}

impl Fixture {
    fn healthy() -> Fixture {
        Fixture {
            wanted: vec![
                wanted("md-z1", "md-z1-new", 1, 3),
                wanted("md-z2", "md-z2-new", 1, 3),
            ],
            observed: vec![rolled_out("md-z1", 2), rolled_out("md-z2", 1)],
            sets: vec![set("md-z1", "md-z1-new"), set("md-z2", "md-z2-new")],
            pre_mds: BTreeSet::new(),
            pre_classes: BTreeSet::new(),
            hibernated: false,
        }
    }

    fn verdict(&self) -> HealthVerdict {
        health(&HealthInput {
            hibernated: self.hibernated,
            wanted: &self.wanted,
            observed: &self.observed,
            machine_sets: &self.sets,
            pre_existing_deployments: &self.pre_mds,
            pre_existing_classes: &self.pre_classes,
        })
    }
}

#[test]
fn health_done_when_all_updated_and_available() {
    assert_eq!(Fixture::healthy().verdict(), HealthVerdict::Done);
}

#[test]
fn health_waits_for_a_missing_deployment() {
    let mut f = Fixture::healthy();
    f.observed.pop();
    assert!(
        matches!(f.verdict(), HealthVerdict::Waiting(m) if m.contains("1/2 machinedeployments available"))
    );
}

#[test]
fn health_waits_for_the_machine_sets_of_a_rolling_update() {
    let mut f = Fixture::healthy();
    f.pre_mds.insert("md-z1".into());
    f.pre_classes.insert("md-z1-old".into());
    f.sets = vec![set("md-z1", "md-z1-old"), set("md-z2", "md-z2-new")];
    assert!(
        matches!(f.verdict(), HealthVerdict::Waiting(m) if m.contains("create the machine sets") && m.contains("ns/md-z1"))
    );
    f.sets.push(set("md-z1", "md-z1-new"));
    assert_eq!(f.verdict(), HealthVerdict::Done);
}

#[test]
fn health_waits_for_old_machines_to_drain() {
    let mut f = Fixture::healthy();
    let status = f.observed[0].status.as_mut().unwrap();
    status.replicas = 3; // one old machine still around
    assert!(
        matches!(f.verdict(), HealthVerdict::Waiting(m) if m.contains("old machines are drained") && m.contains("1 machine(s)"))
    );
}

#[test]
fn health_fails_on_failed_machines() {
    let mut f = Fixture::healthy();
    f.observed[1].status.as_mut().unwrap().failed_machines = vec![MachineSummary {
        name: "m1".into(),
        last_operation: MachineLastOperation {
            description: "quota exceeded".into(),
            ..MachineLastOperation::default()
        },
        ..MachineSummary::default()
    }];
    let verdict = f.verdict();
    assert_eq!(
        verdict,
        HealthVerdict::Failed("machine m1 failed: quota exceeded".into())
    );
    let op = last_operation("Reconcile", &verdict, now());
    assert_eq!(op.state, "Error");
    assert!(last_error(&verdict, now()).is_some());
}

#[test]
fn health_hibernated_waits_until_no_machine_is_awake() {
    let mut f = Fixture::healthy();
    f.hibernated = true;
    assert!(matches!(f.verdict(), HealthVerdict::Waiting(m) if m.contains("3 still awake")));
    for md in &mut f.observed {
        md.status.as_mut().unwrap().replicas = 0;
    }
    assert_eq!(f.verdict(), HealthVerdict::Done);
}

#[test]
fn check_machine_deployment_conditions() {
    let md = rolled_out("md", 1);
    assert!(check_machine_deployment(&md).is_ok());
    let mut stale = md.clone();
    stale.metadata.generation = Some(3);
    assert!(
        check_machine_deployment(&stale)
            .unwrap_err()
            .contains("observed generation outdated")
    );
    let mut unavailable = md.clone();
    unavailable.status.as_mut().unwrap().conditions[0].status = ConditionStatus::False;
    assert!(check_machine_deployment(&unavailable).is_err());
    let mut missing = md;
    missing.status.as_mut().unwrap().conditions.clear();
    assert!(
        check_machine_deployment(&missing)
            .unwrap_err()
            .contains("missing")
    );
}

#[test]
fn last_operation_texts() {
    let done = last_operation("Reconcile", &HealthVerdict::Done, now());
    assert_eq!((done.state.as_str(), done.progress), ("Succeeded", 100));
    let waiting = last_operation(
        "Reconcile",
        &HealthVerdict::Waiting("Waiting until x".into()),
        now(),
    );
    assert_eq!(waiting.state, "Processing");
    assert_eq!(waiting.description, "Waiting until x");
    assert_eq!(waiting.type_, "Reconcile");
    assert!(last_error(&HealthVerdict::Done, now()).is_none());
}

#[test]
fn cleanup_deletes_unwanted_objects_only() {
    let wanted = [wanted("md-z1", "md-z1-new", 1, 1)];
    let purpose = BTreeMap::from([(
        labels::PURPOSE.to_string(),
        labels::PURPOSE_MACHINE_CLASS.to_string(),
    )]);
    let secrets = [
        ExistingSecret {
            name: "md-z1-new".into(),
            labels: purpose.clone(),
        },
        ExistingSecret {
            name: "md-z1-old".into(),
            labels: purpose.clone(),
        },
        ExistingSecret {
            name: "cloudprovider".into(),
            labels: BTreeMap::new(),
        },
    ];
    let plan = cleanup_plan(
        &wanted,
        &["md-z1".into(), "md-z2".into()],
        &["md-z1-new".into(), "md-z1-old".into(), "md-z2-old".into()],
        &secrets,
    );
    assert_eq!(plan.machine_deployments, ["md-z2"]);
    assert_eq!(plan.machine_classes, ["md-z1-old", "md-z2-old"]);
    assert_eq!(
        plan.secrets,
        ["md-z1-old"],
        "cloudprovider is not a class secret"
    );

    let all = deletion_plan(&["md-z1".into()], &["md-z1-new".into()], &secrets);
    assert_eq!(all.secrets, ["md-z1-new", "md-z1-old"]);
    assert!(cleanup_plan(&wanted, &["md-z1".into()], &[], &[]).is_empty());
}

#[test]
fn bootstrap_user_data_has_placeholders_and_kubelet_labels() {
    let node_labels = BTreeMap::from([
        (labels::WORKER_POOL.to_string(), "cpu".to_string()),
        (labels::NODE_ROLE.to_string(), "node".to_string()),
        (labels::ARCH.to_string(), "amd64".to_string()),
        (
            "node-restriction.kubernetes.io/secret".to_string(),
            "x".to_string(),
        ),
        ("kubernetes.io/not-allowed".to_string(), "x".to_string()),
        ("team".to_string(), "a".to_string()),
    ]);
    let taints = [Taint {
        key: "dedicated".into(),
        value: Some("gpu".into()),
        effect: "NoSchedule".into(),
        ..Taint::default()
    }];
    let doc = bootstrap_user_data(&BootstrapConfig {
        pool: "cpu",
        kubernetes_version: "1.31.1",
        api_server_url: "https://api.example:443",
        ca_data: Some("Q0E="),
        node_labels: &node_labels,
        taints: &taints,
    });
    assert!(doc.starts_with("#cloud-config\n"));
    assert!(doc.contains(BOOTSTRAP_TOKEN_PLACEHOLDER));
    assert!(doc.contains(MACHINE_NAME_PLACEHOLDER));

    let parsed: serde_json::Value = serde_yaml::from_str(&doc).unwrap();
    let cmd: Vec<&str> = parsed["runcmd"][0]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(cmd[0], "kubelet");
    assert!(cmd.contains(&"--hostname-override=<<MACHINE_NAME>>"));
    assert!(cmd.contains(
        &"--node-labels=kubernetes.io/arch=amd64,node.kubernetes.io/role=node,team=a,worker.gardener.cloud/pool=cpu"
    ), "{cmd:?}");
    assert!(cmd.contains(&"--register-with-taints=dedicated=gpu:NoSchedule"));
    let kubeconfig: serde_json::Value =
        serde_yaml::from_str(parsed["write_files"][2]["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        kubeconfig["users"][0]["user"]["token"],
        BOOTSTRAP_TOKEN_PLACEHOLDER
    );
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["server"],
        "https://api.example:443"
    );
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"],
        "Q0E="
    );
    // The node agent's configuration names the kubelet's version.
    let files = parsed["write_files"].as_array().unwrap();
    let agent = files
        .iter()
        .find(|f| f["path"] == worker::bootstrap::NODE_AGENT_CONFIG_PATH)
        .expect("the node agent's configuration is written");
    let agent: serde_json::Value =
        serde_yaml::from_str(agent["content"].as_str().unwrap()).unwrap();
    assert_eq!(agent["kind"], "NodeAgentConfiguration");
    assert_eq!(
        agent["controllers"]["operatingSystemConfig"]["kubernetesVersion"],
        "1.31.1"
    );
    assert_eq!(agent["apiServer"]["server"], "https://api.example:443");
}

#[test]
fn kubelet_label_filter_follows_node_restriction() {
    let all = BTreeMap::from([
        ("kubelet.kubernetes.io/x".to_string(), "1".to_string()),
        ("sub.node.kubernetes.io/y".to_string(), "1".to_string()),
        ("topology.kubernetes.io/zone".to_string(), "a".to_string()),
        ("example.k8s.io/z".to_string(), "1".to_string()),
        ("worker.gardener.cloud/pool".to_string(), "p".to_string()),
        ("plain".to_string(), "1".to_string()),
    ]);
    let allowed: Vec<String> = kubelet_node_labels(&all).into_keys().collect();
    assert_eq!(
        allowed,
        [
            "kubelet.kubernetes.io/x",
            "plain",
            "sub.node.kubernetes.io/y",
            "topology.kubernetes.io/zone",
            "worker.gardener.cloud/pool"
        ]
    );
}

#[test]
fn pool_node_labels_follow_section_4_1() {
    let got = labels::pool_node_labels(&labels::NodeLabelInputs {
        user_labels: BTreeMap::from([("team".to_string(), "a".to_string())]),
        pool: "cpu".into(),
        architecture: "arm64".into(),
        node_local_dns: true,
        system_components_allowed: true,
        node_agent_secret_name: Some("gardener-node-agent-cpu-0123".into()),
        cri_name: None,
        container_runtimes: vec!["gvisor".into()],
    });
    assert_eq!(got["team"], "a");
    assert_eq!(got[labels::NODE_ROLE], "node");
    assert_eq!(got[labels::ARCH], "arm64");
    assert_eq!(got[labels::NODE_LOCAL_DNS], "true");
    assert_eq!(got[labels::SYSTEM_COMPONENTS], "true");
    assert_eq!(got[labels::WORKER_POOL], "cpu");
    assert_eq!(got[labels::WORKER_POOL_LEGACY], "cpu");
    assert_eq!(got[labels::CRI_NAME], "containerd");
    assert_eq!(got["containerruntime.worker.gardener.cloud/gvisor"], "true");
    assert_eq!(got.len(), 10);
}

#[test]
fn shoot_facts_from_the_cluster_shoot() {
    let shoot = json!({
        "spec": {
            "kubernetes": {"version": "1.31.1"},
            "hibernation": {"enabled": true},
            "systemComponents": {"nodeLocalDNS": {"enabled": true}},
            "provider": {"workers": [{"name": "cpu", "cri": {"name": "containerd"}}, {"name": "gpu"}]}
        },
        "status": {
            "technicalID": "shoot--dev--local",
            "credentials": {"rotation": {
                "certificateAuthorities": {
                    "lastInitiationTime": "2024-01-01T00:00:00Z",
                    "pendingWorkersRollouts": [{"name": "gpu", "lastInitiationTime": "2024-02-01T00:00:00Z"}]
                }
            }}
        }
    });
    let facts = ShootFacts::from_shoot(&shoot);
    assert_eq!(facts.technical_id.as_deref(), Some("shoot--dev--local"));
    assert_eq!(facts.kubernetes_version.as_deref(), Some("1.31.1"));
    assert!(facts.hibernated && facts.node_local_dns);
    assert_eq!(facts.cri_by_pool.len(), 1);
    let go = |t: Option<&Time>| t.map(worker::naming::go_time_string);
    assert_eq!(
        go(facts.ca_rotation.for_pool("cpu")).as_deref(),
        Some("2024-01-01 00:00:00 +0000 UTC")
    );
    assert_eq!(
        go(facts.ca_rotation.for_pool("gpu")).as_deref(),
        Some("2024-02-01 00:00:00 +0000 UTC")
    );
    assert_eq!(facts.service_account_key_rotation.for_pool("cpu"), None);
    // Garbage reads as absent rather than failing.
    assert_eq!(
        ShootFacts::from_shoot(&json!({"spec": 3})),
        ShootFacts::default()
    );
}
