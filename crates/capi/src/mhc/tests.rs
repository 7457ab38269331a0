//! Health verdicts and the short-circuit: upstream's scenarios 20–22.

use super::*;
use crate::testing::{at, cluster, machine, node};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

fn check(max_unhealthy: &str) -> MachineHealthCheck {
    let mut c = MachineHealthCheck::new(
        "mhc",
        crate::types::MachineHealthCheckSpec {
            cluster_name: "c1".into(),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("pool".into(), "a".into())])),
                ..Default::default()
            },
            unhealthy_conditions: vec![crate::types::UnhealthyCondition {
                type_: "Ready".into(),
                status: "Unknown".into(),
                timeout: "300s".into(),
            }],
            max_unhealthy: Some(IntOrString::String(max_unhealthy.into())),
            ..Default::default()
        },
    );
    c.metadata.namespace = Some("default".into());
    c.metadata.generation = Some(1);
    c
}

/// Cluster `c1` with infrastructure ready and the control plane
/// initialized at `t0`.
fn ready_cluster() -> Cluster {
    let mut c = cluster();
    let mut conditions = Vec::new();
    cond::set(
        &mut conditions,
        cond::true_(ct::INFRASTRUCTURE_READY),
        at(0),
    );
    cond::set(
        &mut conditions,
        cond::true_(ct::CONTROL_PLANE_INITIALIZED),
        at(0),
    );
    c.status = Some(crate::types::ClusterStatus {
        conditions,
        infrastructure_ready: true,
        ..Default::default()
    });
    c
}

fn target(name: &str, with_node: bool) -> Machine {
    let mut m = machine(name);
    m.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("pool".into(), "a".into());
    m.status = Some(crate::types::MachineStatus {
        node_ref: with_node.then(|| ObjectReference {
            name: Some(name.into()),
            ..Default::default()
        }),
        ..Default::default()
    });
    m
}

/// A Node whose Ready has been `status` since `since` seconds after t0.
fn node_since(name: &str, status: &str, since: i64) -> Node {
    let mut n = node(name, "p", status);
    n.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time =
        Some(mcm::time::to_time(at(since)));
    n
}

fn run(check: &MachineHealthCheck, machines: &[Machine], nodes: &[Node], now: i64) -> CheckPlan {
    let c = ready_cluster();
    let by_name: BTreeMap<String, &Node> = nodes
        .iter()
        .map(|n| (n.metadata.name.clone().unwrap(), n))
        .collect();
    plan(
        check,
        &c,
        &machines.iter().collect::<Vec<_>>(),
        &by_name,
        at(now),
    )
}

/// Scenario 20: Ready Unknown for 301s of a 300s timeout is unhealthy.
#[test]
fn an_unknown_node_past_its_timeout_is_unhealthy() {
    let m = [target("a", true)];
    let early = run(&check("100%"), &m, &[node_since("a", "Unknown", 0)], 299);
    assert!(early.status.unhealthy_machines.is_empty());
    assert_eq!(early.requeue, Some(Duration::from_secs(2)));
    let p = run(&check("100%"), &m, &[node_since("a", "Unknown", 0)], 301);
    assert_eq!(p.status.unhealthy_machines[0].reason, "UnhealthyNode");
    assert!(cond::is_true(&p.status.conditions, ct::REMEDIATION_ALLOWED));
    assert_eq!(p.events[0].1, "MachineMarkedUnhealthy");
    assert_eq!(
        (p.status.expected_machines, p.status.current_healthy),
        (1, 0)
    );
}

/// Scenario 21: maxUnhealthy 40% of 6 allows 2; with 3 down nothing is
/// remediated.
#[test]
fn too_many_unhealthy_stops_remediation() {
    let names = ["a", "b", "c", "d", "e", "f"];
    let machines: Vec<Machine> = names.iter().map(|n| target(n, true)).collect();
    let nodes = |down: usize| -> Vec<Node> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                if i < down {
                    node_since(n, "Unknown", 0)
                } else {
                    node_since(n, "True", 0)
                }
            })
            .collect()
    };
    let p = run(&check("40%"), &machines, &nodes(3), 400);
    let rc = cond::get(&p.status.conditions, ct::REMEDIATION_ALLOWED).unwrap();
    assert_eq!(
        (rc.status.as_str(), rc.reason.as_str()),
        ("False", "TooManyUnhealthy")
    );
    assert!(
        rc.message
            .contains("total: 6, unhealthy: 3, maxUnhealthy: 40%"),
        "{}",
        rc.message
    );
    assert_eq!(p.status.remediations_allowed, 0);
    assert_eq!(
        p.status.unhealthy_machines.len(),
        3,
        "verdicts are still published"
    );
    assert_eq!(p.events[0].1, "RemediationRestricted");
    let p = run(&check("40%"), &machines, &nodes(2), 400);
    assert!(cond::is_true(&p.status.conditions, ct::REMEDIATION_ALLOWED));
    assert_eq!(p.status.remediations_allowed, 0);
}

#[test]
fn unhealthy_range_wins() {
    let mut c = check("100%");
    c.spec.unhealthy_range = Some("[1-2]".into());
    assert!(!remediation_allowed(&c, 5, 0).0);
    assert_eq!(remediation_allowed(&c, 5, 2), (true, 0, "[1-2]".into()));
    assert!(!remediation_allowed(&c, 5, 3).0);
    assert_eq!(parse_range("[3-1]"), None);
    assert_eq!(parse_range("1-2"), None);
    let mut one = check("100%");
    one.spec.max_unhealthy = Some(IntOrString::Int(1));
    assert_eq!(remediation_allowed(&one, 3, 1), (true, 0, "1".into()));
}

/// Scenario 22: the startup timeout counts from the latest of creation,
/// the Cluster's readiness and the Machine's infrastructure readiness.
#[test]
fn node_startup_timeout_counts_from_infrastructure_ready() {
    let mut m = target("a", false);
    cond::set(
        &mut m.status.as_mut().unwrap().conditions,
        cond::true_(ct::INFRASTRUCTURE_READY),
        at(120),
    );
    let c = check("100%");
    let p = run(&c, std::slice::from_ref(&m), &[], 600 + 60);
    assert!(
        p.status.unhealthy_machines.is_empty(),
        "T+11m is not yet 10m after T+2m"
    );
    let p = run(&c, std::slice::from_ref(&m), &[], 720 + 1);
    assert_eq!(p.status.unhealthy_machines[0].reason, "NodeStartupTimeout");
    // Opted out: not a target at all.
    m.metadata.annotations = Some(BTreeMap::from([(
        labels::SKIP_REMEDIATION.into(),
        String::new(),
    )]));
    let p = run(&c, &[m], &[], 721);
    assert_eq!(p.status.expected_machines, 0);
}

#[test]
fn other_rules() {
    let c = check("100%");
    let mut failed = target("a", true);
    failed.status.as_mut().unwrap().failure_reason = Some("CreateError".into());
    let mut marked = target("b", true);
    marked.metadata.annotations = Some(BTreeMap::from([(
        labels::REMEDIATE_MACHINE.into(),
        String::new(),
    )]));
    let lost = target("c", true);
    let p = run(
        &c,
        &[failed, marked, lost],
        &[node_since("a", "True", 0), node_since("b", "True", 0)],
        10,
    );
    let reasons: Vec<&str> = p
        .status
        .unhealthy_machines
        .iter()
        .map(|u| u.reason.as_str())
        .collect();
    assert_eq!(
        reasons,
        [
            "MachineHasFailure",
            "HasRemediateMachineAnnotation",
            "NodeNotFound"
        ]
    );
    // A cluster that is not ready yet gives no verdicts.
    let m = target("a", false);
    let p = plan(&c, &cluster(), &[&m], &BTreeMap::new(), at(100_000));
    assert!(p.status.unhealthy_machines.is_empty());
    assert_eq!(p.status.current_healthy, 0);
    // The check gets the cluster label and a Cluster owner.
    let patch = p.check_patch.unwrap();
    assert_eq!(patch["metadata"]["ownerReferences"][0]["kind"], "Cluster");
}
