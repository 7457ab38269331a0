//! v1beta1 conditions, as upstream's `util/conditions` keeps them: setting
//! a condition keeps its transition time unless the status changes, the
//! list stays in a stable order (`Ready` first, then by type), `Ready`
//! summarises a set of conditions by the worst one, and a provider's
//! `Ready` condition is mirrored under another type.

use chrono::{DateTime, Utc};

use crate::types::Condition;
use crate::types::labels::conditions::READY;

pub const TRUE: &str = "True";
pub const FALSE: &str = "False";
pub const UNKNOWN: &str = "Unknown";

/// Severities of False conditions.
pub mod severity {
    pub const ERROR: &str = "Error";
    pub const WARNING: &str = "Warning";
    pub const INFO: &str = "Info";
}

/// A True condition.
pub fn true_(type_: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: TRUE.to_string(),
        ..Condition::default()
    }
}

/// A False condition with a reason, severity and message.
pub fn false_(type_: &str, reason: &str, severity: &str, message: impl Into<String>) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: FALSE.to_string(),
        severity: severity.to_string(),
        reason: reason.to_string(),
        message: message.into(),
        last_transition_time: None,
    }
}

/// An Unknown condition.
pub fn unknown(type_: &str, reason: &str, message: impl Into<String>) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: UNKNOWN.to_string(),
        reason: reason.to_string(),
        message: message.into(),
        ..Condition::default()
    }
}

/// The condition of that type, if any.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition is there and True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == TRUE)
}

/// Whether the condition is there and False.
pub fn is_false(conditions: &[Condition], type_: &str) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == FALSE)
}

/// Sets `c`, keeping the old transition time unless the status changed
/// (a changed reason or message alone is no transition), and keeps the list
/// in upstream's order.
pub fn set(conditions: &mut Vec<Condition>, mut c: Condition, now: DateTime<Utc>) {
    match conditions.iter_mut().find(|x| x.type_ == c.type_) {
        Some(old) => {
            c.last_transition_time = if old.status == c.status {
                old.last_transition_time.clone()
            } else {
                Some(mcm::time::to_time(now))
            };
            if c.last_transition_time.is_none() {
                c.last_transition_time = Some(mcm::time::to_time(now));
            }
            *old = c;
        }
        None => {
            c.last_transition_time = Some(mcm::time::to_time(now));
            conditions.push(c);
        }
    }
    sort(conditions);
}

/// Removes the condition of that type.
pub fn delete(conditions: &mut Vec<Condition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

/// `Ready` first, then alphabetical (upstream's `lexicographicLess`).
pub fn sort(conditions: &mut [Condition]) {
    conditions.sort_by(|a, b| {
        (a.type_ != READY)
            .cmp(&(b.type_ != READY))
            .then_with(|| a.type_.cmp(&b.type_))
    });
}

/// How bad a condition is, for the summary: False/Error worst, then
/// False/Warning, False/Info, True, Unknown.
fn rank(c: &Condition) -> u8 {
    match (c.status.as_str(), c.severity.as_str()) {
        (FALSE, severity::ERROR) => 0,
        (FALSE, severity::WARNING) => 1,
        (FALSE, _) => 2,
        (TRUE, _) => 3,
        _ => 4,
    }
}

/// The `Ready` summary of the `types` that are set: the worst group wins
/// and lends its reason, severity and message (the first of that rank in
/// `types` order); True when nothing is False. With none set, True.
pub fn summary(conditions: &[Condition], types: &[&str]) -> Condition {
    let present: Vec<&Condition> = types.iter().filter_map(|t| get(conditions, t)).collect();
    let Some(worst) = present.iter().min_by_key(|c| rank(c)) else {
        return true_(READY);
    };
    match worst.status.as_str() {
        FALSE => Condition {
            type_: READY.to_string(),
            status: FALSE.to_string(),
            severity: worst.severity.clone(),
            reason: worst.reason.clone(),
            message: worst.message.clone(),
            last_transition_time: None,
        },
        // A mix of True and Unknown is True upstream: Unknown ranks last.
        _ if present.iter().any(|c| c.status == TRUE) => true_(READY),
        _ => unknown(READY, &worst.reason, worst.message.clone()),
    }
}

/// The provider object's `Ready` condition under `type_`, or `fallback`
/// when the object has none (upstream's `conditions.SetMirror` with a
/// fallback).
pub fn mirror(from: &[Condition], type_: &str, fallback: Condition) -> Condition {
    match get(from, READY) {
        Some(c) => Condition {
            type_: type_.to_string(),
            last_transition_time: None,
            ..c.clone()
        },
        None => Condition {
            type_: type_.to_string(),
            ..fallback
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap()
    }

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let mut cs = Vec::new();
        set(&mut cs, false_("B", "R1", severity::INFO, "m"), at(0));
        set(&mut cs, false_("B", "R2", severity::INFO, "n"), at(10));
        assert_eq!(cs[0].reason, "R2");
        assert_eq!(cs[0].last_transition_time, Some(mcm::time::to_time(at(0))));
        set(&mut cs, true_("B"), at(20));
        assert_eq!(cs[0].last_transition_time, Some(mcm::time::to_time(at(20))));
    }

    #[test]
    fn ready_first_then_alphabetical() {
        let mut cs = Vec::new();
        for t in ["Zeta", "Ready", "Alpha"] {
            set(&mut cs, true_(t), at(0));
        }
        let order: Vec<&str> = cs.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(order, ["Ready", "Alpha", "Zeta"]);
    }

    #[test]
    fn summary_takes_the_worst() {
        let rows: Vec<(Vec<Condition>, &str, &str)> = vec![
            (vec![], TRUE, ""),
            (vec![true_("A"), true_("B")], TRUE, ""),
            (
                vec![
                    true_("A"),
                    false_("B", "Info", severity::INFO, ""),
                    false_("C", "Warn", severity::WARNING, ""),
                ],
                FALSE,
                "Warn",
            ),
            (
                vec![
                    false_("A", "Warn", severity::WARNING, ""),
                    false_("B", "Err", severity::ERROR, ""),
                ],
                FALSE,
                "Err",
            ),
            (vec![true_("A"), unknown("B", "U", "")], TRUE, ""),
            (vec![unknown("A", "U", "")], UNKNOWN, "U"),
        ];
        for (cs, status, reason) in rows {
            let s = summary(&cs, &["A", "B", "C"]);
            assert_eq!(
                (s.status.as_str(), s.reason.as_str()),
                (status, reason),
                "{cs:?}"
            );
        }
        // Types not listed do not count.
        let cs = vec![false_("X", "R", severity::ERROR, "")];
        assert_eq!(summary(&cs, &["A"]).status, TRUE);
    }

    #[test]
    fn mirror_uses_ready_or_the_fallback() {
        let provider = vec![false_(READY, "Booting", severity::INFO, "vm boots")];
        let m = mirror(&provider, "InfrastructureReady", true_("x"));
        assert_eq!(
            (m.type_.as_str(), m.reason.as_str(), m.message.as_str()),
            ("InfrastructureReady", "Booting", "vm boots")
        );
        let f = mirror(
            &[],
            "BootstrapReady",
            false_("x", "WaitingForDataSecret", severity::INFO, ""),
        );
        assert_eq!(
            (f.type_.as_str(), f.reason.as_str()),
            ("BootstrapReady", "WaitingForDataSecret")
        );
    }
}
