//! The order in which a machine set gives up machines when it has too many:
//! preserved machines last, then by the machine-priority annotation (lower
//! first, as the cluster autoscaler marks its pick with 1), then machines the
//! autoscaler marked for deletion (earlier first), then by phase (the least
//! useful first), then by age (older first), as MCM does.

use api::MachinePhase;
use chrono::{DateTime, Utc};

/// How a machine is preserved, which makes it the last choice to delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Preserved {
    No,
    /// Preserved automatically because it failed.
    Auto {
        expiry: Option<DateTime<Utc>>,
    },
    /// Preserved on a user's request.
    User {
        expiry: Option<DateTime<Utc>>,
    },
}

/// What the ordering needs to know about one machine.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub name: String,
    /// The `machinepriority.machine.sapcloud.io` annotation; unparsable or
    /// absent is 3.
    pub priority: i64,
    pub marked_for_deletion: Option<DateTime<Utc>>,
    pub phase: Option<MachinePhase>,
    pub created: DateTime<Utc>,
    pub preserved: Preserved,
}

/// Rank of a phase: lower is deleted first. Machines without a phase are
/// treated like Pending ones.
pub fn phase_rank(phase: Option<MachinePhase>) -> u8 {
    match phase {
        Some(MachinePhase::Terminating) => 0,
        Some(MachinePhase::Failed) | Some(MachinePhase::InPlaceUpdateFailed) => 1,
        Some(MachinePhase::CrashLoopBackOff) => 2,
        Some(MachinePhase::Unknown) => 3,
        None | Some(MachinePhase::Pending) => 4,
        Some(MachinePhase::Available) => 5,
        Some(MachinePhase::Running)
        | Some(MachinePhase::InPlaceUpdating)
        | Some(MachinePhase::InPlaceUpdateSuccessful) => 6,
    }
}

/// Parses the priority annotation value.
pub fn parse_priority(v: Option<&str>) -> i64 {
    v.and_then(|s| s.trim().parse::<i64>().ok()).unwrap_or(3)
}

fn preserve_key(p: &Preserved) -> (u8, Option<DateTime<Utc>>) {
    match p {
        Preserved::No => (0, None),
        Preserved::Auto { expiry } => (1, *expiry),
        Preserved::User { expiry } => (2, *expiry),
    }
}

/// Sorts `candidates` so that the first is the one to delete first.
pub fn order(mut candidates: Vec<Candidate>) -> Vec<Candidate> {
    candidates.sort_by(|a, b| {
        let (pa, ea) = preserve_key(&a.preserved);
        let (pb, eb) = preserve_key(&b.preserved);
        pa.cmp(&pb)
            // Earlier expiry first; a missing expiry last.
            .then_with(|| match (ea, eb) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            })
            .then(a.priority.cmp(&b.priority))
            .then_with(|| match (a.marked_for_deletion, b.marked_for_deletion) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            })
            .then(phase_rank(a.phase).cmp(&phase_rank(b.phase)))
            .then(a.created.cmp(&b.created))
            .then(a.name.cmp(&b.name))
    });
    candidates
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(min: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + min * 60, 0).unwrap()
    }

    fn m(name: &str, phase: Option<MachinePhase>, created: i64) -> Candidate {
        Candidate {
            name: name.into(),
            priority: 3,
            marked_for_deletion: None,
            phase,
            created: at(created),
            preserved: Preserved::No,
        }
    }

    fn names(c: Vec<Candidate>) -> Vec<String> {
        order(c).into_iter().map(|c| c.name).collect()
    }

    #[test]
    fn phase_order() {
        use MachinePhase::*;
        let c = vec![
            m("running", Some(Running), 0),
            m("available", Some(Available), 0),
            m("pending", Some(Pending), 0),
            m("unknown", Some(Unknown), 0),
            m("crash", Some(CrashLoopBackOff), 0),
            m("failed", Some(Failed), 0),
            m("terminating", Some(Terminating), 0),
        ];
        assert_eq!(
            names(c),
            [
                "terminating",
                "failed",
                "crash",
                "unknown",
                "pending",
                "available",
                "running"
            ]
        );
    }

    #[test]
    fn priority_then_marks_then_phase_then_age() {
        use MachinePhase::*;
        let mut p1 = m("autoscaler-pick", Some(Running), 0);
        p1.priority = 1;
        let mut marked_late = m("marked-late", Some(Running), 0);
        marked_late.marked_for_deletion = Some(at(10));
        let mut marked_early = m("marked-early", Some(Running), 0);
        marked_early.marked_for_deletion = Some(at(5));
        let c = vec![
            m("young-running", Some(Running), 9),
            m("old-running", Some(Running), 1),
            marked_late,
            m("pending", Some(Pending), 5),
            marked_early,
            p1,
        ];
        assert_eq!(
            names(c),
            [
                "autoscaler-pick",
                "marked-early",
                "marked-late",
                "pending",
                "old-running",
                "young-running"
            ]
        );
    }

    #[test]
    fn spec_scenario_19() {
        // MS 4 -> 2 with one priority-1, one Pending and two Running machines:
        // the priority-1 and the Pending ones go.
        use MachinePhase::*;
        let mut p1 = m("p1", Some(Running), 3);
        p1.priority = 1;
        let c = vec![
            m("r1", Some(Running), 0),
            p1,
            m("pend", Some(Pending), 4),
            m("r2", Some(Running), 1),
        ];
        assert_eq!(&names(c)[..2], ["p1", "pend"]);
    }

    #[test]
    fn preserved_last() {
        use MachinePhase::*;
        let mut user = m("user", Some(Failed), 0);
        user.preserved = Preserved::User {
            expiry: Some(at(100)),
        };
        let mut auto = m("auto", Some(Failed), 0);
        auto.preserved = Preserved::Auto {
            expiry: Some(at(200)),
        };
        let c = vec![user, auto, m("running", Some(Running), 0)];
        assert_eq!(names(c), ["running", "auto", "user"]);
    }

    #[test]
    fn priorities_parse_with_default() {
        assert_eq!(parse_priority(Some("1")), 1);
        assert_eq!(parse_priority(Some("x")), 3);
        assert_eq!(parse_priority(None), 3);
    }
}
