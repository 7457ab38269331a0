//! Table tests of the node decisions: conditions from faults and time, when
//! to post, when to renew, and the lifecycle verdict for silent kubelets.

use super::*;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn cfg() -> SimConfig {
    SimConfig::default()
}

fn faults(stopped: bool, not_ready: bool, conds: &[&str]) -> NodeFaults {
    NodeFaults {
        kubelet_stopped: stopped,
        not_ready,
        conditions: conds.iter().map(|s| s.to_string()).collect(),
        vanish: false,
    }
}

/// A registered node started at t(0) with a 5 s boot, renewed at t(0).
fn view<'a>(f: &'a NodeFaults, posted: Option<&'a Posted>) -> NodeView<'a> {
    NodeView {
        registered: true,
        gone: false,
        kubelet_running: !f.kubelet_stopped,
        started: t(0),
        boot_delay: Duration::from_secs(5),
        faults: f,
        last_renewal: Some(t(0)),
        renewal_due: Some(t(10)),
        posted,
        volumes: &[],
    }
}

/// `type=status` pairs, in order.
fn summary(conds: &[Condition]) -> Vec<String> {
    conds
        .iter()
        .map(|c| format!("{}={}", c.type_, c.status))
        .collect()
}

#[test]
fn conditions_from_faults_and_time() {
    let none = faults(false, false, &[]);
    let not_ready = faults(false, true, &[]);
    let disk = faults(false, false, &["DiskPressure", "KernelDeadlock"]);
    let stopped = faults(true, false, &[]);
    let base = [
        "MemoryPressure=False",
        "DiskPressure=False",
        "PIDPressure=False",
    ];
    let with = |ready: &str| {
        let mut v: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        v.push(format!("Ready={ready}"));
        v
    };
    let unknown: Vec<String> = KUBELET_CONDITIONS
        .iter()
        .map(|t| format!("{t}=Unknown"))
        .collect();
    let cases: Vec<(&str, &NodeFaults, i64, Option<Vec<String>>)> = vec![
        ("booting", &none, 2, Some(with("False"))),
        ("booted", &none, 5, Some(with("True"))),
        ("not ready fault", &not_ready, 60, Some(with("False"))),
        (
            "condition fault",
            &disk,
            60,
            Some(vec![
                "MemoryPressure=False".into(),
                "DiskPressure=True".into(),
                "PIDPressure=False".into(),
                "Ready=True".into(),
                "KernelDeadlock=True".into(),
            ]),
        ),
        ("stopped within grace", &stopped, 39, None),
        ("stopped past grace", &stopped, 40, Some(unknown)),
    ];
    for (what, f, at, want) in cases {
        let got = desired_conditions(&view(f, None), cfg().node_monitor_grace_period, t(at));
        assert_eq!(got.as_deref().map(summary), want, "{what}");
    }
}

#[test]
fn unknown_verdict_counts_from_the_last_renewal() {
    let stopped = faults(true, false, &[]);
    let mut v = view(&stopped, None);
    v.last_renewal = Some(t(30));
    assert!(desired_conditions(&v, Duration::from_secs(40), t(69)).is_none());
    assert!(desired_conditions(&v, Duration::from_secs(40), t(70)).is_some());
    // Never renewed: counts from the VM's start.
    v.last_renewal = None;
    assert!(desired_conditions(&v, Duration::from_secs(40), t(40)).is_some());
}

#[test]
fn cleared_extra_conditions_stay_false_and_unknown_keeps_them() {
    let was = faults(false, false, &["KernelDeadlock"]);
    let desired =
        desired_conditions(&view(&was, None), cfg().node_monitor_grace_period, t(10)).unwrap();
    let posted = next_post(
        &desired,
        &[],
        None,
        true,
        cfg().status_report_interval,
        t(10),
    )
    .unwrap();

    let cleared = faults(false, false, &[]);
    let now = desired_conditions(
        &view(&cleared, Some(&posted)),
        cfg().node_monitor_grace_period,
        t(20),
    )
    .unwrap();
    let kd = now.iter().find(|c| c.type_ == "KernelDeadlock").unwrap();
    assert_eq!(
        (kd.status, kd.reason.as_str()),
        (ConditionStatus::False, "NoKernelDeadlock")
    );

    // The lifecycle verdict touches only the kubelet's own conditions.
    let stopped = faults(true, false, &[]);
    let verdict = desired_conditions(
        &view(&stopped, Some(&posted)),
        cfg().node_monitor_grace_period,
        t(100),
    )
    .unwrap();
    let kd = verdict
        .iter()
        .find(|c| c.type_ == "KernelDeadlock")
        .unwrap();
    assert_eq!(kd.status, ConditionStatus::True);
    assert_eq!(verdict.len(), 5);
}

#[test]
fn posts_on_change_and_heartbeat_only() {
    let none = faults(false, false, &[]);
    let report = cfg().status_report_interval;
    let desired = desired_conditions(&view(&none, None), Duration::from_secs(40), t(10)).unwrap();
    let first = next_post(&desired, &[], None, true, report, t(10)).expect("first post");
    assert!(first.is_ready());

    let vols = ["kubernetes.io/csi/x^v1".to_string()];
    let cases: Vec<(&str, &[String], bool, i64, bool)> = vec![
        ("unchanged", &[], true, 20, false),
        ("heartbeat due", &[], true, 10 + 300, true),
        ("volume attached", &vols, true, 20, true),
        (
            "silent kubelet never heartbeats",
            &[],
            false,
            10 + 600,
            false,
        ),
    ];
    for (what, volumes, running, at, want) in cases {
        let got = next_post(&desired, volumes, Some(&first), running, report, t(at));
        assert_eq!(got.is_some(), want, "{what}");
    }
}

#[test]
fn transition_times_carry_over_and_heartbeats_freeze_when_silent() {
    let none = faults(false, false, &[]);
    let report = cfg().status_report_interval;
    let ready = desired_conditions(&view(&none, None), Duration::from_secs(40), t(10)).unwrap();
    let p1 = next_post(&ready, &[], None, true, report, t(10)).unwrap();
    let p2 = next_post(&ready, &[], Some(&p1), true, report, t(400)).unwrap();
    let r2 = p2
        .conditions
        .iter()
        .find(|c| c.condition.type_ == "Ready")
        .unwrap();
    assert_eq!((r2.last_transition, r2.last_heartbeat), (t(10), t(400)));

    let stopped = faults(true, false, &[]);
    let unknown =
        desired_conditions(&view(&stopped, Some(&p2)), Duration::from_secs(40), t(500)).unwrap();
    let p3 = next_post(&unknown, &[], Some(&p2), false, report, t(500)).unwrap();
    let r3 = p3
        .conditions
        .iter()
        .find(|c| c.condition.type_ == "Ready")
        .unwrap();
    assert_eq!(r3.condition.status, ConditionStatus::Unknown);
    assert_eq!((r3.last_transition, r3.last_heartbeat), (t(500), t(400)));
    assert!(!p3.is_ready());
}

#[test]
fn plan_node_table() {
    let none = faults(false, false, &[]);
    let stopped = faults(true, false, &[]);
    let c = cfg();
    let desired = desired_conditions(&view(&none, None), Duration::from_secs(40), t(10)).unwrap();
    let posted = next_post(&desired, &[], None, true, c.status_report_interval, t(10)).unwrap();

    struct Case<'a> {
        what: &'a str,
        view: NodeView<'a>,
        at: i64,
        register: bool,
        post: bool,
        renew: bool,
    }
    let fresh = NodeView {
        registered: false,
        last_renewal: None,
        renewal_due: None,
        ..view(&none, None)
    };
    let cases = [
        Case {
            what: "new node registers, posts and creates its lease",
            view: fresh,
            at: 0,
            register: true,
            post: true,
            renew: true,
        },
        Case {
            what: "deregistered before registering: nothing",
            view: NodeView {
                kubelet_running: false,
                ..fresh
            },
            at: 0,
            register: false,
            post: false,
            renew: false,
        },
        Case {
            what: "steady, lease not due",
            view: NodeView {
                renewal_due: Some(t(15)),
                ..view(&none, Some(&posted))
            },
            at: 14,
            register: false,
            post: false,
            renew: false,
        },
        Case {
            what: "steady, lease due",
            view: NodeView {
                renewal_due: Some(t(15)),
                ..view(&none, Some(&posted))
            },
            at: 15,
            register: false,
            post: false,
            renew: true,
        },
        Case {
            what: "kubelet stopped: no renewal, verdict after grace",
            view: view(&stopped, Some(&posted)),
            at: 45,
            register: false,
            post: true,
            renew: false,
        },
        Case {
            what: "node object gone: nothing",
            view: NodeView {
                gone: true,
                ..view(&none, Some(&posted))
            },
            at: 100,
            register: false,
            post: false,
            renew: false,
        },
    ];
    for case in cases {
        let p = plan_node(&case.view, &c, t(case.at));
        assert_eq!(
            (p.register, p.post.is_some(), p.renew_lease),
            (case.register, case.post, case.renew),
            "{}",
            case.what
        );
    }
}

#[test]
fn renewals_keep_a_fixed_rate() {
    let i = Duration::from_secs(10);
    let cases = [
        ("first renewal", None, 0, 10),
        ("on time", Some(10), 10, 20),
        ("late by a tick keeps the cadence", Some(10), 11, 20),
        ("late by queueing keeps the cadence", Some(10), 19, 20),
        ("more than an interval behind restarts", Some(10), 25, 35),
    ];
    for (what, due, at, want) in cases {
        assert_eq!(next_renewal_due(due.map(t), t(at), i), t(want), "{what}");
    }
}

#[test]
fn first_renewals_are_spread_over_the_interval() {
    let i = Duration::from_secs(10);
    let dues: Vec<Duration> = (0..200)
        .map(|n| elapsed(first_renewal_due(&format!("node-{n}"), t(0), i), t(0)))
        .collect();
    assert!(dues.iter().all(|d| *d > Duration::ZERO && *d <= i));
    let early = dues.iter().filter(|d| **d < i / 2).count();
    assert!(
        (60..140).contains(&early),
        "{early} of 200 in the first half"
    );
    assert_eq!(
        first_renewal_due("a", t(0), i),
        first_renewal_due("a", t(0), i)
    );
}
