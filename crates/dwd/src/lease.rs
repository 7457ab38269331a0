//! The node-lease probe's verdict (spec §1.4 step 4, §1.5): which nodes
//! are candidates, which of their leases have expired, and whether the
//! dependants are scaled down, up, or left alone.
//!
//! The inputs are views of the Nodes, Machines and Leases the executor
//! listed, so the rules are tested here without any API.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::lifecycle::NodeConditions;

/// Node annotation of nodes MCM does not manage: never candidates.
pub const NOT_MANAGED_BY_MCM: &str = "node.machine.sapcloud.io/not-managed-by-mcm";
/// Node label naming the worker pool.
pub const POOL_LABEL: &str = "worker.gardener.cloud/pool";
/// Machine label naming its node.
pub const MACHINE_NODE_LABEL: &str = "node";
/// The namespace of node leases in the shoot.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The unhealthy condition types of pools that name none.
pub const DEFAULT_UNHEALTHY_CONDITIONS: [&str; 4] = [
    "KernelDeadlock",
    "ReadonlyFilesystem",
    "DiskPressure",
    "NetworkUnavailable",
];
/// Node condition type of in-place updates, and the reasons that exclude
/// a node.
pub const IN_PLACE_UPDATE: &str = "InPlaceUpdate";
pub const IN_PLACE_UPDATE_REASONS: [&str; 2] = ["ReadyForUpdate", "UpdateFailed"];
/// A lease has expired this fraction of the KCM grace period after its
/// renewal: about three missed renewals at 10 s of 40 s, so the prober acts
/// before kube-controller-manager marks the nodes unknown.
pub const EXPIRY_BUFFER_FRACTION: f64 = 0.75;

/// What the verdict needs of a Node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeView {
    pub name: String,
    /// Has [`NOT_MANAGED_BY_MCM`].
    pub not_managed: bool,
    /// The [`POOL_LABEL`] value.
    pub pool: Option<String>,
    /// (type, status, reason) of each condition.
    pub conditions: Vec<(String, String, String)>,
}

/// What the verdict needs of a Machine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MachineView {
    /// The [`MACHINE_NODE_LABEL`] value.
    pub node: Option<String>,
    /// `status.currentStatus.phase`.
    pub phase: Option<String>,
}

/// What the verdict needs of a Lease.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseView {
    pub name: String,
    pub renew_time: Option<DateTime<Utc>>,
}

/// Why a node is not a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Excluded {
    NotManagedByMcm,
    UnhealthyCondition,
    NoLiveMachine,
    InPlaceUpdate,
}

/// Whether a node is a candidate, or why not (spec §1.5, rules 1–4).
pub fn candidacy(
    node: &NodeView,
    live_machine_nodes: &BTreeSet<&str>,
    pools: &NodeConditions,
) -> Result<(), Excluded> {
    if node.not_managed {
        return Err(Excluded::NotManagedByMcm);
    }
    let pool_types: Vec<&str> = node
        .pool
        .as_ref()
        .and_then(|p| pools.get(p))
        .filter(|types| !types.is_empty())
        .map(|types| types.iter().map(String::as_str).collect())
        .unwrap_or_else(|| DEFAULT_UNHEALTHY_CONDITIONS.to_vec());
    if node
        .conditions
        .iter()
        .any(|(t, s, _)| s == "True" && pool_types.contains(&t.as_str()))
    {
        return Err(Excluded::UnhealthyCondition);
    }
    if !live_machine_nodes.contains(node.name.as_str()) {
        return Err(Excluded::NoLiveMachine);
    }
    if node
        .conditions
        .iter()
        .any(|(t, _, r)| t == IN_PLACE_UPDATE && IN_PLACE_UPDATE_REASONS.contains(&r.as_str()))
    {
        return Err(Excluded::InPlaceUpdate);
    }
    Ok(())
}

/// Whether a lease has expired at `now`; a lease never renewed has.
pub fn is_expired(lease: &LeaseView, kcm_grace: Duration, now: DateTime<Utc>) -> bool {
    let Some(renewed) = lease.renew_time else {
        return true;
    };
    let buffer = kcm_grace.mul_f64(EXPIRY_BUFFER_FRACTION);
    match chrono::Duration::from_std(buffer) {
        Ok(b) => now >= renewed + b,
        // A grace period beyond chrono's range never expires.
        Err(_) => false,
    }
}

/// What the prober does after a successful lease probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// One candidate cannot tell a node failure from lost connectivity.
    Skip,
    ScaleUp,
    ScaleDown,
}

/// The lease probe's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Candidate leases (leases of candidate nodes).
    pub candidates: usize,
    pub expired: usize,
    /// Candidate nodes that have no lease: ignored, not counted.
    pub without_lease: Vec<String>,
    /// Nodes that are not candidates, and why.
    pub excluded: BTreeMap<String, Excluded>,
    pub decision: Decision,
}

impl Verdict {
    /// The expired fraction of the candidate leases (0 without any).
    pub fn fraction(&self) -> f64 {
        if self.candidates == 0 {
            0.0
        } else {
            self.expired as f64 / self.candidates as f64
        }
    }
}

/// Everything the lease probe saw.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    pub nodes: Vec<NodeView>,
    pub machines: Vec<MachineView>,
    pub leases: Vec<LeaseView>,
}

/// The verdict of one lease probe (spec §1.4 step 4).
pub fn verdict(
    seen: &Observation,
    pools: &NodeConditions,
    kcm_grace: Duration,
    failure_fraction: f64,
    now: DateTime<Utc>,
) -> Verdict {
    let live: BTreeSet<&str> = seen
        .machines
        .iter()
        .filter(|m| !matches!(m.phase.as_deref(), Some("Failed" | "Terminating")))
        .filter_map(|m| m.node.as_deref())
        .collect();
    let mut excluded = BTreeMap::new();
    let mut candidate_nodes = BTreeSet::new();
    for node in &seen.nodes {
        match candidacy(node, &live, pools) {
            Ok(()) => {
                candidate_nodes.insert(node.name.as_str());
            }
            Err(why) => {
                excluded.insert(node.name.clone(), why);
            }
        }
    }
    let mut leased = BTreeSet::new();
    let mut candidates = 0;
    let mut expired = 0;
    for lease in &seen.leases {
        if candidate_nodes.contains(lease.name.as_str()) && leased.insert(lease.name.as_str()) {
            candidates += 1;
            if is_expired(lease, kcm_grace, now) {
                expired += 1;
            }
        }
    }
    let without_lease = candidate_nodes
        .iter()
        .filter(|n| !leased.contains(*n))
        .map(|n| n.to_string())
        .collect();
    let decision = match candidates {
        1 => Decision::Skip,
        0 => Decision::ScaleUp,
        c if (expired as f64 / c as f64) < failure_fraction => Decision::ScaleUp,
        _ => Decision::ScaleDown,
    };
    Verdict {
        candidates,
        expired,
        without_lease,
        excluded,
        decision,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: Duration = Duration::from_secs(40);

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-02-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn node(name: &str) -> NodeView {
        NodeView {
            name: name.into(),
            pool: Some("pool-a".into()),
            ..NodeView::default()
        }
    }

    fn machine(node: &str, phase: &str) -> MachineView {
        MachineView {
            node: Some(node.into()),
            phase: Some(phase.into()),
        }
    }

    fn lease(name: &str, secs_ago: i64) -> LeaseView {
        LeaseView {
            name: name.into(),
            renew_time: Some(now() - chrono::Duration::seconds(secs_ago)),
        }
    }

    /// `n` healthy running nodes `n0..`, the first `expired` renewed 31 s
    /// ago and the rest 2 s ago.
    fn fleet(n: usize, expired: usize) -> Observation {
        let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
        Observation {
            nodes: names.iter().map(|n| node(n)).collect(),
            machines: names.iter().map(|n| machine(n, "Running")).collect(),
            leases: names
                .iter()
                .enumerate()
                .map(|(i, n)| lease(n, if i < expired { 31 } else { 2 }))
                .collect(),
        }
    }

    #[test]
    fn expiry_is_three_quarters_of_the_kcm_grace_after_renewal() {
        // (seconds since renewal, grace, expired)
        let table = [
            (29, K, false),
            (30, K, true),
            (31, K, true),
            (44, Duration::from_secs(60), false),
            (45, Duration::from_secs(60), true),
        ];
        for (ago, grace, want) in table {
            assert_eq!(
                is_expired(&lease("a", ago), grace, now()),
                want,
                "{ago}s, {grace:?}"
            );
        }
        let never = LeaseView {
            name: "a".into(),
            renew_time: None,
        };
        assert!(
            is_expired(&never, K, now()),
            "a lease never renewed has expired"
        );
    }

    #[test]
    fn scenarios_12_to_15_the_verdicts() {
        let mut excluded = fleet(3, 3);
        excluded.nodes[0].not_managed = true;
        excluded.nodes[1].conditions = vec![("DiskPressure".into(), "True".into(), String::new())];
        excluded.machines[2].phase = Some("Terminating".into());
        // (scenario, observation, candidates, expired, decision)
        let table: Vec<(&str, Observation, usize, usize, Decision)> = vec![
            (
                "12: 6 of 10 expired",
                fleet(10, 6),
                10,
                6,
                Decision::ScaleDown,
            ),
            (
                "13: 5 of 10 expired",
                fleet(10, 5),
                10,
                5,
                Decision::ScaleUp,
            ),
            (
                "14: every expired node excluded",
                excluded,
                0,
                0,
                Decision::ScaleUp,
            ),
            (
                "15: one candidate, expired",
                fleet(1, 1),
                1,
                1,
                Decision::Skip,
            ),
            (
                "no nodes at all",
                Observation::default(),
                0,
                0,
                Decision::ScaleUp,
            ),
            ("all healthy", fleet(3, 0), 3, 0, Decision::ScaleUp),
            ("all expired", fleet(2, 2), 2, 2, Decision::ScaleDown),
        ];
        for (name, seen, c, e, d) in table {
            let v = verdict(&seen, &NodeConditions::new(), K, 0.6, now());
            assert_eq!((v.candidates, v.expired, v.decision), (c, e, d), "{name}");
        }
    }

    #[test]
    // The tables' rows are tuples of the inputs and the outcome.
    #[allow(clippy::type_complexity)]
    fn every_candidate_rule() {
        let pools = NodeConditions::from([
            (
                "custom".to_string(),
                vec!["FrequentKubeletRestart".to_string()],
            ),
            ("empty".to_string(), vec![]),
        ]);
        let cond = |t: &str, s: &str, r: &str| (t.to_string(), s.to_string(), r.to_string());
        let with = |pool: Option<&str>, conditions: Vec<(String, String, String)>| NodeView {
            name: "n".into(),
            pool: pool.map(str::to_string),
            conditions,
            ..NodeView::default()
        };
        let live = BTreeSet::from(["n"]);
        let none = BTreeSet::new();
        // (case, node, machines' nodes, outcome)
        let table: Vec<(&str, NodeView, &BTreeSet<&str>, Result<(), Excluded>)> = vec![
            (
                "healthy",
                with(Some("a"), vec![cond("Ready", "True", "")]),
                &live,
                Ok(()),
            ),
            (
                "not managed by mcm",
                NodeView {
                    not_managed: true,
                    ..with(None, vec![])
                },
                &live,
                Err(Excluded::NotManagedByMcm),
            ),
            (
                "default types without a pool label",
                with(None, vec![cond("KernelDeadlock", "True", "")]),
                &live,
                Err(Excluded::UnhealthyCondition),
            ),
            (
                "default types for a pool without settings",
                with(Some("a"), vec![cond("NetworkUnavailable", "True", "")]),
                &live,
                Err(Excluded::UnhealthyCondition),
            ),
            (
                "default types for a pool with an empty list",
                with(Some("empty"), vec![cond("ReadonlyFilesystem", "True", "")]),
                &live,
                Err(Excluded::UnhealthyCondition),
            ),
            (
                "a pool's own types replace the defaults",
                with(Some("custom"), vec![cond("DiskPressure", "True", "")]),
                &live,
                Ok(()),
            ),
            (
                "a pool's own type",
                with(
                    Some("custom"),
                    vec![cond("FrequentKubeletRestart", "True", "")],
                ),
                &live,
                Err(Excluded::UnhealthyCondition),
            ),
            (
                "a False condition is healthy",
                with(Some("a"), vec![cond("DiskPressure", "False", "")]),
                &live,
                Ok(()),
            ),
            (
                "no machine",
                with(Some("a"), vec![]),
                &none,
                Err(Excluded::NoLiveMachine),
            ),
            (
                "in-place update ready",
                with(
                    Some("a"),
                    vec![cond("InPlaceUpdate", "True", "ReadyForUpdate")],
                ),
                &live,
                Err(Excluded::InPlaceUpdate),
            ),
            (
                "in-place update failed",
                with(
                    Some("a"),
                    vec![cond("InPlaceUpdate", "False", "UpdateFailed")],
                ),
                &live,
                Err(Excluded::InPlaceUpdate),
            ),
            (
                "in-place update done",
                with(
                    Some("a"),
                    vec![cond("InPlaceUpdate", "False", "UpdateSuccessful")],
                ),
                &live,
                Ok(()),
            ),
        ];
        for (name, node, machines, want) in table {
            assert_eq!(candidacy(&node, machines, &pools), want, "{name}");
        }
    }

    #[test]
    fn failed_and_terminating_machines_are_not_live_and_leases_of_others_do_not_count() {
        let mut seen = fleet(4, 2);
        seen.machines[0].phase = Some("Failed".into());
        seen.machines.push(MachineView {
            node: None,
            phase: Some("Pending".into()),
        });
        // A lease of a node that is no candidate, and a candidate without
        // a lease.
        seen.leases.push(lease("elsewhere", 100));
        seen.leases.retain(|l| l.name != "n3");
        let v = verdict(&seen, &NodeConditions::new(), K, 0.6, now());
        assert_eq!(v.excluded.get("n0"), Some(&Excluded::NoLiveMachine));
        assert_eq!((v.candidates, v.expired), (2, 1));
        assert_eq!(v.without_lease, vec!["n3".to_string()]);
        assert_eq!(v.decision, Decision::ScaleUp, "1 of 2 is below 0.6");
        assert_eq!(v.fraction(), 0.5);
    }
}
