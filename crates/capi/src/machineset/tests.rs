//! The MachineSet's decisions: scaling with deleting Machines counted,
//! delete policies, remediation within maxInFlight, adoption, in-place
//! labels, status counts and the Machines it creates.

use super::*;
use crate::testing::{at, cluster, deleting, machine, node};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn set(replicas: i32) -> MachineSet {
    let mut s = MachineSet::new(
        "ms1",
        crate::types::MachineSetSpec {
            cluster_name: "c1".into(),
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("pool".into(), "a".into())])),
                ..LabelSelector::default()
            },
            template: crate::types::MachineTemplateSpec {
                metadata: crate::types::TemplateMeta {
                    labels: BTreeMap::from([("pool".into(), "a".into())]),
                    annotations: BTreeMap::new(),
                },
                spec: machine("x").spec,
            },
            ..Default::default()
        },
    );
    s.metadata = ObjectMeta {
        name: Some("ms1".into()),
        namespace: Some("default".into()),
        uid: Some("uid-ms1".into()),
        generation: Some(2),
        finalizers: Some(vec![labels::MACHINE_SET_FINALIZER.into()]),
        labels: Some(BTreeMap::from([(labels::CLUSTER_NAME.into(), "c1".into())])),
        owner_references: Some(vec![meta::owner_ref(
            crate::API_VERSION,
            "Cluster",
            "c1",
            "uid-c1",
            false,
        )]),
        ..ObjectMeta::default()
    };
    s
}

/// A Machine of the set, created `age_days` before t0, with a Ready Node.
fn member(name: &str, age_days: i64) -> Machine {
    let mut m = machine(name);
    m.metadata.creation_timestamp = Some(mcm::time::to_time(at(-age_days * 86_400)));
    m.metadata.labels.as_mut().unwrap().extend([
        ("pool".to_string(), "a".to_string()),
        (labels::SET_NAME.to_string(), "ms1".to_string()),
    ]);
    m.metadata.owner_references = Some(vec![meta::owner_ref(
        crate::API_VERSION,
        "MachineSet",
        "ms1",
        "uid-ms1",
        true,
    )]);
    m.status = Some(crate::types::MachineStatus {
        node_ref: Some(ObjectReference {
            name: Some(name.into()),
            ..Default::default()
        }),
        conditions: vec![cond::true_(ct::READY)],
        ..Default::default()
    });
    m
}

fn plan_for(
    s: &MachineSet,
    machines: &[Machine],
    nodes: &[k8s_openapi::api::core::v1::Node],
) -> SetPlan {
    let c = cluster();
    plan(&SetScope {
        set: s,
        cluster: Some(&c),
        deployment: None,
        machines: machines.iter().collect(),
        nodes: nodes
            .iter()
            .map(|n| (n.metadata.name.clone().unwrap(), n))
            .collect(),
        now: at(0),
    })
}

#[test]
fn scales_up_to_the_replicas() {
    let s = set(3);
    let p = plan_for(&s, &[member("ms1-a", 1)], &[]);
    assert_eq!(p.create, 2);
    assert!(p.delete.is_empty());
    assert_eq!(p.status.replicas, 1);
    assert_eq!(
        cond::get(&p.status.conditions, ct::RESIZED).unwrap().reason,
        "ScalingUp"
    );
    assert_eq!(p.status.selector.as_deref(), Some("pool=a"));
    assert_eq!(p.status.observed_generation, Some(2));
}

/// Scenario 14: Oldest deletes the annotated Machine first, then the
/// oldest; Random ties break by name, an unhealthy one first.
#[test]
fn delete_policies() {
    let mut newest = member("ms1-c", 1);
    newest.metadata.annotations = Some(BTreeMap::from([(
        labels::DELETE_MACHINE.into(),
        "yes".into(),
    )]));
    let machines = [newest, member("ms1-b", 2), member("ms1-a", 3)];
    let mut s = set(1);
    s.spec.delete_policy = Some("Oldest".into());
    let mut p = plan_for(&s, &machines, &[]);
    p.delete.sort();
    assert_eq!(p.delete, ["ms1-a", "ms1-c"]);

    let healthy = [member("a", 1), member("b", 1), member("c", 1)];
    let p = plan_for(&set(2), &healthy, &[]);
    assert_eq!(p.delete, ["a"]);
    let mut no_node = member("c", 1);
    no_node.status.as_mut().unwrap().node_ref = None;
    let p = plan_for(&set(2), &[member("a", 1), member("b", 1), no_node], &[]);
    assert_eq!(p.delete, ["c"]);
    let p = plan_for(
        &{
            let mut s = set(2);
            s.spec.delete_policy = Some("Newest".into());
            s
        },
        &[member("a", 5), member("b", 1), member("c", 3)],
        &[],
    );
    assert_eq!(p.delete, ["b"]);
}

/// Scenario 15: a deleting Machine counts; nothing more is deleted and
/// nothing is created until it is gone.
#[test]
fn deleting_machines_count() {
    let machines = [
        member("a", 1),
        member("b", 1),
        deleting(member("c", 1), at(0)),
    ];
    let p = plan_for(&set(2), &machines, &[]);
    assert!(p.delete.is_empty() && p.create == 0);
    let p = plan_for(&set(3), &machines, &[]);
    assert!(p.delete.is_empty() && p.create == 0);
    assert_eq!(p.status.replicas, 3);
}

#[test]
fn orphans_are_adopted_and_labels_kept_in_place() {
    let mut orphan = member("ms1-x", 1);
    orphan.metadata.owner_references = None;
    orphan
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove(labels::SET_NAME);
    let mut other = member("other", 1);
    other.metadata.owner_references = Some(vec![meta::owner_ref(
        crate::API_VERSION,
        "MachineSet",
        "ms2",
        "uid-ms2",
        true,
    )]);
    let p = plan_for(&set(1), &[orphan, other], &[]);
    assert_eq!(p.adopt, ["ms1-x"]);
    assert_eq!(p.status.replicas, 1, "another set's Machine is not ours");
    assert_eq!(p.machine_syncs.len(), 1);
    assert_eq!(p.machine_syncs[0].1["labels"][labels::SET_NAME], "ms1");
}

#[test]
fn remediation_deletes_marked_machines_within_max_in_flight() {
    let marked = |name: &str, annotated: bool| {
        let mut m = member(name, 1);
        let st = m.status.as_mut().unwrap();
        st.conditions.push(cond::false_(
            ct::HEALTH_CHECK_SUCCEEDED,
            "UnhealthyNode",
            "Warning",
            "",
        ));
        st.conditions.push(cond::false_(
            ct::OWNER_REMEDIATED,
            "WaitingForRemediation",
            "Warning",
            "",
        ));
        if annotated {
            m.metadata.annotations = Some(BTreeMap::from([(
                labels::REMEDIATE_MACHINE.into(),
                String::new(),
            )]));
        }
        m
    };
    let machines = [marked("a", false), marked("b", true), marked("c", false)];
    // Without a deployment: no limit.
    let p = plan_for(&set(3), &machines, &[]);
    let mut d = p.delete.clone();
    d.sort();
    assert_eq!(d, ["a", "b", "c"]);
    assert_eq!(p.create, 0, "replacements come once they are gone");
    // maxInFlight 1: only the annotated one (scenario 23).
    let mut md = MachineDeployment::new("md", Default::default());
    md.spec.replicas = Some(3);
    md.spec.strategy = Some(crate::types::MachineDeploymentStrategy {
        remediation: Some(crate::types::RemediationStrategy {
            max_in_flight: Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1)),
        }),
        ..Default::default()
    });
    let s = set(3);
    let c = cluster();
    let p = plan(&SetScope {
        set: &s,
        cluster: Some(&c),
        deployment: Some(&md),
        machines: machines.iter().collect(),
        nodes: BTreeMap::new(),
        now: at(0),
    });
    assert_eq!(p.delete, ["b"]);
    // An old revision's set leaves them to the rollout.
    md.metadata.annotations = Some(BTreeMap::from([(labels::REVISION.into(), "2".into())]));
    let mut old = set(3);
    old.metadata.annotations = Some(BTreeMap::from([(labels::REVISION.into(), "1".into())]));
    let p = plan(&SetScope {
        set: &old,
        cluster: Some(&c),
        deployment: Some(&md),
        machines: machines.iter().collect(),
        nodes: BTreeMap::new(),
        now: at(0),
    });
    assert!(p.delete.is_empty());
}

#[test]
fn ready_and_available_come_from_the_nodes() {
    let mut s = set(2);
    s.spec.min_ready_seconds = 60;
    let mut up_long = node("a", "p1", "True");
    up_long
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()[0]
        .last_transition_time = Some(mcm::time::to_time(at(-120)));
    let mut up_now = node("b", "p2", "True");
    up_now.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time =
        Some(mcm::time::to_time(at(-10)));
    let p = plan_for(&s, &[member("a", 1), member("b", 1)], &[up_long, up_now]);
    assert_eq!(
        (p.status.ready_replicas, p.status.available_replicas),
        (2, 1)
    );
    assert_eq!(p.requeue, Some(Duration::from_secs(51)));
}

#[test]
fn a_deleting_set_deletes_its_machines_then_lets_go() {
    let s = deleting(set(3), at(0));
    let p = plan_for(&s, &[member("a", 1), deleting(member("b", 1), at(0))], &[]);
    assert_eq!(p.delete, ["a"]);
    assert!(!p.remove_finalizer);
    let p = plan_for(&s, &[], &[]);
    assert!(p.remove_finalizer);
}

#[test]
fn new_machines_reference_their_clones() {
    let mut s = set(1);
    s.spec
        .template
        .spec
        .bootstrap
        .config_ref
        .as_mut()
        .unwrap()
        .kind = Some("TrellisConfigTemplate".into());
    s.spec.template.spec.infrastructure_ref.kind = Some("LocalMachineTemplate".into());
    let m = new_machine(&s, "ms1-bcdfg");
    let cfg = m.spec.bootstrap.config_ref.unwrap();
    assert_eq!(
        (cfg.kind.as_deref(), cfg.name.as_deref()),
        (Some("TrellisConfig"), Some("ms1-bcdfg"))
    );
    assert_eq!(
        m.spec.infrastructure_ref.kind.as_deref(),
        Some("LocalMachine")
    );
    let l = m.metadata.labels.unwrap();
    assert_eq!(l[labels::SET_NAME], "ms1");
    assert_eq!(l["pool"], "a");
    assert_eq!(
        m.metadata.owner_references.unwrap()[0].controller,
        Some(true)
    );
    assert_eq!(m.metadata.finalizers.unwrap(), [labels::MACHINE_FINALIZER]);
    let mut rng = rand::rng();
    let n = machine_name(&"x".repeat(70), &mut rng);
    assert_eq!(n.len(), 58 + 6);
    assert!(
        n[59..]
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
    );
}

#[test]
fn selectors_and_label_values() {
    let sel = LabelSelector {
        match_labels: Some(BTreeMap::from([("a".into(), "1".into())])),
        match_expressions: Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: "b".into(),
                operator: "In".into(),
                values: Some(vec!["x".into(), "y".into()]),
            },
        ]),
    };
    assert_eq!(selector_string(&sel), "a=1,b in (x,y)");
    assert!(!selects(&LabelSelector::default(), &BTreeMap::new()));
    assert_eq!(set_name_label("ms1"), "ms1");
    let long = set_name_label(&"m".repeat(64));
    assert!(
        long.starts_with("hash_") && long.ends_with("_z") && long.len() <= 63,
        "{long}"
    );
}
