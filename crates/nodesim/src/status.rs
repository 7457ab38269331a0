//! The node decisions, as pure functions of what a node's kubelet knows and
//! the clock: which conditions it reports, when it posts its status, when it
//! renews its lease, and when (standing in for the node-lifecycle
//! controller) a silent node's conditions turn `Unknown`.
//!
//! The simulator's executor calls [`plan_node`] for every node on every tick
//! and carries out the returned [`NodePlan`]; nothing here does I/O.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::config::SimConfig;
use crate::faults::NodeFaults;

/// The condition types the kubelet itself reports, in the kubelet's order.
/// These, and only these, are the ones the node-lifecycle controller sets to
/// `Unknown` when the kubelet falls silent.
pub const KUBELET_CONDITIONS: [&str; 4] =
    ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];

/// Reason the node-lifecycle controller gives a silent node's conditions.
pub const NODE_STATUS_UNKNOWN: &str = "NodeStatusUnknown";

/// `status` of a node condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`.
    Unknown,
}

impl ConditionStatus {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node condition without its timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// `type`, e.g. `Ready`.
    pub type_: String,
    /// `status`.
    pub status: ConditionStatus,
    /// `reason`, CamelCase.
    pub reason: String,
    /// `message`, for humans.
    pub message: String,
}

impl Condition {
    fn new(type_: &str, status: ConditionStatus, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message: message.to_string(),
        }
    }
}

/// A condition as posted, with its timestamps.
#[derive(Clone, Debug, PartialEq)]
pub struct PostedCondition {
    /// The condition.
    pub condition: Condition,
    /// When `status` last changed.
    pub last_transition: Timestamp,
    /// When the kubelet last confirmed it.
    pub last_heartbeat: Timestamp,
}

/// The part of a node's status the simulator owns, as last posted (or to be
/// posted next).
#[derive(Clone, Debug, PartialEq)]
pub struct Posted {
    /// Conditions in posting order.
    pub conditions: Vec<PostedCondition>,
    /// `status.volumesAttached` names (also reported as `volumesInUse`),
    /// sorted.
    pub volumes: Vec<String>,
    /// When it was posted.
    pub at: Timestamp,
}

impl Posted {
    /// Whether the posted `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        self.status_of("Ready") == Some(ConditionStatus::True)
    }

    /// The posted status of a condition type.
    pub fn status_of(&self, type_: &str) -> Option<ConditionStatus> {
        self.conditions
            .iter()
            .find(|c| c.condition.type_ == type_)
            .map(|c| c.condition.status)
    }
}

/// What the simulator knows about one node, as input to [`plan_node`].
#[derive(Clone, Copy, Debug)]
pub struct NodeView<'a> {
    /// The Node object exists (the simulator created or adopted it).
    pub registered: bool,
    /// The Node object was deleted by someone else: the kubelet cannot post
    /// any more, and does not re-register (a running kubelet never does).
    pub gone: bool,
    /// The VM exists and the kubelet has not been stopped by a fault.
    pub kubelet_running: bool,
    /// When the VM was started, for the boot delay.
    pub started: Timestamp,
    /// How long the VM takes to boot.
    pub boot_delay: Duration,
    /// The faults set on the node.
    pub faults: &'a NodeFaults,
    /// When the lease was last renewed: a stopped kubelet's silence counts
    /// from here.
    pub last_renewal: Option<Timestamp>,
    /// When the next renewal is due ([`next_renewal_due`]); `None`: now.
    pub renewal_due: Option<Timestamp>,
    /// What was last posted.
    pub posted: Option<&'a Posted>,
    /// Volumes attached for the node's pods, sorted.
    pub volumes: &'a [String],
}

/// What to do for one node now. Carried out in field order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodePlan {
    /// Create (or adopt) the Node object.
    pub register: bool,
    /// Post this status.
    pub post: Option<Posted>,
    /// Renew (or create) the lease.
    pub renew_lease: bool,
}

impl NodePlan {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        !self.register && self.post.is_none() && !self.renew_lease
    }
}

/// Time from `then` to `now`, zero if `then` is in the future.
pub fn elapsed(now: Timestamp, then: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(then)).unwrap_or(Duration::ZERO)
}

/// Whether the VM has finished booting.
pub fn booted(started: Timestamp, boot_delay: Duration, now: Timestamp) -> bool {
    elapsed(now, started) >= boot_delay
}

/// When the first renewal after a node created its lease is due: somewhere
/// in the first interval, at a fraction fixed by the node's name. Real
/// kubelets start at scattered times; nodes that a simulator registers in
/// one burst would otherwise renew in one burst forever (fixed rate), and
/// load the API server in spikes instead of evenly.
pub fn first_renewal_due(node: &str, created_at: Timestamp, interval: Duration) -> Timestamp {
    let fraction = (crate::pods::fnv(node) % 1000 + 1) as f64 / 1000.0;
    created_at
        .checked_add(interval.mul_f64(fraction))
        .unwrap_or(created_at)
}

/// When the renewal after one made at `renewed_at` is due.
///
/// The schedule is fixed-rate: one interval after the previous renewal was
/// *due*, so the tick granularity and queueing behind other nodes do not
/// stretch the cadence (a 10 s interval means 10 s on average, as with the
/// kubelet's own timer). A node that fell more than an interval behind
/// restarts from its actual renewal instead of catching up in a burst.
pub fn next_renewal_due(
    was_due: Option<Timestamp>,
    renewed_at: Timestamp,
    interval: Duration,
) -> Timestamp {
    let after = |t: Timestamp| t.checked_add(interval).unwrap_or(t);
    match was_due.map(after) {
        Some(next) if next > renewed_at => next,
        _ => after(renewed_at),
    }
}

/// The conditions a node should show now, or `None` when nothing should be
/// posted at all (a silent kubelet within the grace period).
///
/// A running kubelet reports the [`KUBELET_CONDITIONS`] from its boot state
/// and faults, plus every other faulted type (`True`) and every other type
/// it reported before (`False` once the fault is gone). A stopped kubelet
/// reports nothing; once it has been silent for the grace period, its
/// kubelet conditions become `Unknown` and the rest stay as they were.
pub fn desired_conditions(
    v: &NodeView<'_>,
    grace: Duration,
    now: Timestamp,
) -> Option<Vec<Condition>> {
    let previous_extras = v.posted.into_iter().flat_map(|p| {
        p.conditions
            .iter()
            .filter(|c| !KUBELET_CONDITIONS.contains(&c.condition.type_.as_str()))
    });
    if !v.kubelet_running {
        let silent_since = v.last_renewal.unwrap_or(v.started);
        if elapsed(now, silent_since) < grace {
            return None;
        }
        let mut out: Vec<Condition> = KUBELET_CONDITIONS
            .iter()
            .map(|t| {
                Condition::new(
                    t,
                    ConditionStatus::Unknown,
                    NODE_STATUS_UNKNOWN,
                    "Kubelet stopped posting node status.",
                )
            })
            .collect();
        out.extend(previous_extras.map(|c| c.condition.clone()));
        return Some(out);
    }

    let faulted = |t: &str| v.faults.conditions.contains(t);
    let pressure = |t: &str, ok: (&str, &str), bad: (&str, &str)| {
        if faulted(t) {
            Condition::new(t, ConditionStatus::True, bad.0, bad.1)
        } else {
            Condition::new(t, ConditionStatus::False, ok.0, ok.1)
        }
    };
    let ready = if !booted(v.started, v.boot_delay, now) {
        Condition::new(
            "Ready",
            ConditionStatus::False,
            "KubeletNotReady",
            "container runtime status check may not have completed yet",
        )
    } else if v.faults.not_ready {
        Condition::new(
            "Ready",
            ConditionStatus::False,
            "KubeletNotReady",
            "simulated fault: nodesim.trellis.dev/ready=false",
        )
    } else {
        Condition::new(
            "Ready",
            ConditionStatus::True,
            "KubeletReady",
            "kubelet is posting ready status",
        )
    };
    let mut out = vec![
        pressure(
            "MemoryPressure",
            (
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            (
                "KubeletHasInsufficientMemory",
                "kubelet has insufficient memory available",
            ),
        ),
        pressure(
            "DiskPressure",
            ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        ),
        pressure(
            "PIDPressure",
            (
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            (
                "KubeletHasInsufficientPID",
                "kubelet has insufficient PID available",
            ),
        ),
        ready,
    ];
    let extras: BTreeSet<&str> = v
        .faults
        .conditions
        .iter()
        .map(String::as_str)
        .chain(previous_extras.map(|c| c.condition.type_.as_str()))
        .filter(|t| !KUBELET_CONDITIONS.contains(t))
        .collect();
    for t in extras {
        out.push(if faulted(t) {
            Condition::new(
                t,
                ConditionStatus::True,
                "SimulatedFault",
                "set by nodesim.trellis.dev/conditions",
            )
        } else {
            Condition::new(
                t,
                ConditionStatus::False,
                &format!("No{t}"),
                "no simulated fault",
            )
        });
    }
    Some(out)
}

/// The status to post, if any: the desired conditions and volumes with
/// their timestamps, when they differ from what was posted or when a
/// running kubelet's heartbeat is due.
///
/// Transition times carry over while a condition's status stays the same;
/// heartbeat times advance only while the kubelet runs, since the
/// node-lifecycle controller leaves them alone.
pub fn next_post(
    desired: &[Condition],
    volumes: &[String],
    posted: Option<&Posted>,
    kubelet_running: bool,
    report_interval: Duration,
    now: Timestamp,
) -> Option<Posted> {
    if let Some(p) = posted {
        let same = p.volumes == volumes
            && p.conditions.len() == desired.len()
            && p.conditions
                .iter()
                .zip(desired)
                .all(|(a, b)| a.condition == *b);
        let heartbeat_due = kubelet_running && elapsed(now, p.at) >= report_interval;
        if same && !heartbeat_due {
            return None;
        }
    }
    let previous =
        |t: &str| posted.and_then(|p| p.conditions.iter().find(|c| c.condition.type_ == t));
    let conditions = desired
        .iter()
        .map(|c| {
            let prev = previous(&c.type_);
            let last_transition = match prev {
                Some(p) if p.condition.status == c.status => p.last_transition,
                _ => now,
            };
            let last_heartbeat = match prev {
                Some(p) if !kubelet_running => p.last_heartbeat,
                _ => now,
            };
            PostedCondition {
                condition: c.clone(),
                last_transition,
                last_heartbeat,
            }
        })
        .collect();
    Some(Posted {
        conditions,
        volumes: volumes.to_vec(),
        at: now,
    })
}

/// Everything to do for one node now.
///
/// * A node not yet registered registers (with its first status) and
///   creates its lease, as long as its VM exists.
/// * A registered node posts its status when [`next_post`] says so, and
///   renews its lease when due, while its kubelet runs.
/// * A node whose kubelet has stopped gets the node-lifecycle verdict once.
/// * A node whose object was deleted is left alone.
pub fn plan_node(v: &NodeView<'_>, cfg: &SimConfig, now: Timestamp) -> NodePlan {
    if v.gone || (!v.registered && !v.kubelet_running) {
        return NodePlan::default();
    }
    let volumes: &[String] = if v.kubelet_running {
        v.volumes
    } else {
        v.posted.map_or(&[], |p| &p.volumes)
    };
    let post = desired_conditions(v, cfg.node_monitor_grace_period, now).and_then(|desired| {
        next_post(
            &desired,
            volumes,
            v.posted,
            v.kubelet_running,
            cfg.status_report_interval,
            now,
        )
    });
    NodePlan {
        register: !v.registered,
        post,
        renew_lease: v.kubelet_running && (!v.registered || v.renewal_due.is_none_or(|t| now >= t)),
    }
}

#[cfg(test)]
mod tests;
