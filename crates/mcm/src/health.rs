//! Machine health: whether a node is healthy, and what a health pass does to
//! the machine's phase (Running, Unknown, Failed), including the creation and
//! health timeouts and the limit on how many machines of one deployment may
//! be failed for health at a time.

use std::time::Duration;

use api::MachinePhase;
use chrono::{DateTime, Utc};

/// Node condition types checked besides Ready, by default.
pub const DEFAULT_NODE_CONDITIONS: &[&str] = &[
    "KernelDeadlock",
    "ReadonlyFilesystem",
    "DiskPressure",
    "NetworkUnavailable",
];

/// One node condition: type and status (`True`, `False`, `Unknown`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub type_: String,
    pub status: String,
    pub since: Option<DateTime<Utc>>,
}

/// Healthy means: conditions reported, `Ready` is `True`, and every watched
/// condition type that is reported is exactly `False`.
pub fn is_healthy(conditions: &[Condition], watched: &[String]) -> bool {
    if conditions.is_empty() {
        return false;
    }
    let ready = conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    ready
        && conditions
            .iter()
            .filter(|c| watched.contains(&c.type_))
            .all(|c| c.status == "False")
}

/// What a health pass observed.
#[derive(Clone, Debug)]
pub struct Observed {
    pub phase: Option<MachinePhase>,
    pub node_exists: bool,
    pub healthy: bool,
    /// The node carries `node.gardener.cloud/critical-components-not-ready`.
    pub critical_components_not_ready: bool,
    pub created: DateTime<Utc>,
    /// When the phase last changed (`currentStatus.lastUpdateTime`).
    pub phase_since: DateTime<Utc>,
    pub creation_timeout: Duration,
    pub health_timeout: Duration,
    pub disable_health_timeout: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing changes; look again after this long.
    Wait(Duration),
    /// The node is healthy: Running. `first_join` when coming from Pending.
    Running { first_join: bool },
    /// The node went away or unhealthy while Running.
    Unknown { node_gone: bool },
    /// The node never became healthy within the creation timeout.
    FailedCreationTimeout,
    /// Unhealthy for longer than the health timeout: fail, if the meltdown
    /// limit allows (see [`may_fail_for_health`]).
    FailedHealthTimeout,
}

/// How often a machine that is waiting on its node is looked at again.
pub const HEALTH_RECHECK: Duration = Duration::from_secs(60);

fn elapsed(since: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (now - since).to_std().unwrap_or_default()
}

/// The health decision for one machine.
pub fn decide(o: &Observed, now: DateTime<Utc>) -> Verdict {
    use MachinePhase::*;
    let phase = o.phase;
    if matches!(
        phase,
        Some(Terminating) | Some(InPlaceUpdating) | Some(InPlaceUpdateFailed)
    ) {
        return Verdict::Wait(HEALTH_RECHECK);
    }
    if !o.node_exists && phase == Some(Running) {
        return Verdict::Unknown { node_gone: true };
    }
    if o.node_exists && o.healthy && phase != Some(Running) {
        let gated = phase == Some(Pending) && o.critical_components_not_ready;
        if !gated && phase != Some(CrashLoopBackOff) && phase.is_some() {
            return Verdict::Running {
                first_join: phase == Some(Pending),
            };
        }
    }
    if o.node_exists && !o.healthy && phase == Some(Running) {
        return Verdict::Unknown { node_gone: false };
    }
    match phase {
        Some(Pending) => {
            let age = elapsed(o.created, now);
            if age > o.creation_timeout {
                Verdict::FailedCreationTimeout
            } else {
                Verdict::Wait((o.creation_timeout - age).min(HEALTH_RECHECK))
            }
        }
        Some(Unknown) if !o.disable_health_timeout => {
            let age = elapsed(o.phase_since, now);
            if age > o.health_timeout {
                Verdict::FailedHealthTimeout
            } else {
                Verdict::Wait((o.health_timeout - age).min(HEALTH_RECHECK))
            }
        }
        _ => Verdict::Wait(HEALTH_RECHECK),
    }
}

/// One machine of a deployment, for the meltdown limit.
#[derive(Clone, Debug)]
pub struct Sibling {
    pub phase: Option<MachinePhase>,
    pub preserved: bool,
}

/// The meltdown protection: a machine of a deployment may be failed for
/// health only while fewer than `limit` of its siblings are already being
/// replaced (any phase but Running/Unknown counts once, Terminating twice,
/// preserved machines not at all). Upstream's limit is a fixed 1.
pub fn may_fail_for_health(siblings: &[Sibling], limit: u32) -> bool {
    let busy: u32 = siblings
        .iter()
        .map(|s| match s.phase {
            Some(MachinePhase::Running) | Some(MachinePhase::Unknown) => 0,
            _ if s.preserved => 0,
            Some(MachinePhase::Terminating) => 2,
            _ => 1,
        })
        .sum();
    busy < limit.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    fn cond(ty: &str, st: &str) -> Condition {
        Condition {
            type_: ty.into(),
            status: st.into(),
            since: None,
        }
    }

    fn watched() -> Vec<String> {
        DEFAULT_NODE_CONDITIONS
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn health_table() {
        let cases: Vec<(Vec<Condition>, bool)> = vec![
            (vec![], false),
            (vec![cond("Ready", "True")], true),
            (vec![cond("Ready", "False")], false),
            (vec![cond("Ready", "Unknown")], false),
            (
                vec![cond("Ready", "True"), cond("DiskPressure", "True")],
                false,
            ),
            (
                vec![cond("Ready", "True"), cond("DiskPressure", "Unknown")],
                false,
            ),
            (
                vec![
                    cond("Ready", "True"),
                    cond("DiskPressure", "False"),
                    cond("MemoryPressure", "True"),
                ],
                true,
            ),
            (
                vec![cond("Ready", "True"), cond("ReadonlyFilesystem", "True")],
                false,
            ),
        ];
        for (c, want) in cases {
            assert_eq!(is_healthy(&c, &watched()), want, "{c:?}");
        }
    }

    fn obs(phase: Option<MachinePhase>, node: bool, healthy: bool) -> Observed {
        Observed {
            phase,
            node_exists: node,
            healthy,
            critical_components_not_ready: false,
            created: t(0),
            phase_since: t(0),
            creation_timeout: Duration::from_secs(1200),
            health_timeout: Duration::from_secs(600),
            disable_health_timeout: false,
        }
    }

    #[test]
    fn phase_transitions() {
        use MachinePhase::*;
        let now = t(100);
        let cases: Vec<(Observed, Verdict)> = vec![
            (
                obs(Some(Pending), true, true),
                Verdict::Running { first_join: true },
            ),
            (
                obs(Some(Unknown), true, true),
                Verdict::Running { first_join: false },
            ),
            (
                obs(Some(Failed), true, true),
                Verdict::Running { first_join: false },
            ),
            (
                obs(Some(Running), true, false),
                Verdict::Unknown { node_gone: false },
            ),
            (
                obs(Some(Running), false, false),
                Verdict::Unknown { node_gone: true },
            ),
            (
                obs(Some(Running), true, true),
                Verdict::Wait(HEALTH_RECHECK),
            ),
            (
                obs(Some(Pending), false, false),
                Verdict::Wait(HEALTH_RECHECK),
            ),
            (
                obs(Some(Terminating), true, true),
                Verdict::Wait(HEALTH_RECHECK),
            ),
            (
                obs(Some(Unknown), true, false),
                Verdict::Wait(HEALTH_RECHECK),
            ),
        ];
        for (o, want) in cases {
            assert_eq!(decide(&o, now), want, "{:?}", o.phase);
        }
    }

    #[test]
    fn critical_components_taint_gates_running() {
        let mut o = obs(Some(MachinePhase::Pending), true, true);
        o.critical_components_not_ready = true;
        assert_eq!(decide(&o, t(10)), Verdict::Wait(HEALTH_RECHECK));
    }

    #[test]
    fn timeouts() {
        use MachinePhase::*;
        assert_eq!(
            decide(&obs(Some(Pending), true, false), t(1201)),
            Verdict::FailedCreationTimeout
        );
        assert_eq!(
            decide(&obs(Some(Pending), true, false), t(1190)),
            Verdict::Wait(Duration::from_secs(10))
        );
        assert_eq!(
            decide(&obs(Some(Unknown), true, false), t(601)),
            Verdict::FailedHealthTimeout
        );
        let mut o = obs(Some(Unknown), true, false);
        o.disable_health_timeout = true;
        assert_eq!(decide(&o, t(100_000)), Verdict::Wait(HEALTH_RECHECK));
    }

    #[test]
    fn meltdown_limit() {
        use MachinePhase::*;
        let s = |p: MachinePhase| Sibling {
            phase: Some(p),
            preserved: false,
        };
        assert!(may_fail_for_health(
            &[s(Running), s(Unknown), s(Unknown)],
            1
        ));
        assert!(!may_fail_for_health(
            &[s(Running), s(Failed), s(Unknown)],
            1
        ));
        assert!(
            !may_fail_for_health(&[s(Pending), s(Unknown)], 1),
            "a replacement still joining blocks"
        );
        assert!(
            !may_fail_for_health(&[s(Terminating), s(Unknown)], 2),
            "terminating counts twice"
        );
        assert!(
            may_fail_for_health(&[s(Failed), s(Unknown)], 2),
            "the limit is configurable"
        );
        let preserved = Sibling {
            phase: Some(Failed),
            preserved: true,
        };
        assert!(may_fail_for_health(&[preserved, s(Unknown)], 1));
    }
}
