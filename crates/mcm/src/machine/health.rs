//! A machine's health (spec §2.2) as the machine controller applies it:
//! the facts [`crate::health::decide`] needs, the status its verdict leads
//! to, and how a machine counts for the meltdown limit.

use std::time::Duration;

use api::{
    Machine, MachineOperationType, MachinePhase, MachineState, MachineStatus, format_duration,
    labels,
};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, NodeCondition};

use super::{Settings, age, last_op, with_phase};
use crate::health::{self, Condition, Verdict};
use crate::time::to_chrono;

/// A node condition in the planners' form.
fn condition(c: &NodeCondition) -> Condition {
    Condition {
        type_: c.type_.clone(),
        status: c.status.clone(),
        since: c.last_transition_time.as_ref().map(to_chrono),
    }
}

pub(crate) fn node_conditions(node: &Node) -> &[NodeCondition] {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[])
}

/// Whether the node carries a taint with `key`.
pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key))
}

/// The facts [`health::decide`] needs about a machine and its node.
pub fn observe_health(
    m: &Machine,
    node: Option<&Node>,
    settings: &Settings,
    now: DateTime<Utc>,
) -> health::Observed {
    let conditions: Vec<Condition> = node
        .map(|n| node_conditions(n).iter().map(condition).collect())
        .unwrap_or_default();
    let created = m
        .metadata
        .creation_timestamp
        .as_ref()
        .map(to_chrono)
        .unwrap_or(now);
    let phase_since = m
        .status
        .as_ref()
        .and_then(|s| s.current_status.last_update_time.as_ref())
        .map(to_chrono)
        .unwrap_or(created);
    health::Observed {
        phase: m.phase(),
        node_exists: node.is_some(),
        healthy: health::is_healthy(&conditions, &settings.node_conditions),
        critical_components_not_ready: node
            .is_some_and(|n| has_taint(n, labels::CRITICAL_COMPONENTS_NOT_READY_TAINT)),
        created,
        phase_since,
        creation_timeout: settings.creation_timeout,
        health_timeout: settings.health_timeout,
        disable_health_timeout: settings.disable_health_timeout,
    }
}

/// Conditions compared without their heartbeat times, so a heartbeat alone
/// never causes a machine status write.
fn same_conditions(a: &[NodeCondition], b: &[NodeCondition]) -> bool {
    let key = |c: &NodeCondition| (c.type_.clone(), c.status.clone(), c.reason.clone());
    a.len() == b.len() && a.iter().map(key).eq(b.iter().map(key))
}

fn describe_conditions(conditions: &[NodeCondition]) -> String {
    conditions
        .iter()
        .map(|c| format!("{}={}", c.type_, c.status))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The status a health verdict leads to, with the node's conditions copied
/// in; `None` when nothing changes. A `FailedHealthTimeout` verdict is only
/// applied by the caller once the meltdown limit allows it.
pub fn health_status(
    m: &Machine,
    verdict: &Verdict,
    node: Option<&Node>,
    settings: &Settings,
    now: DateTime<Utc>,
) -> Option<MachineStatus> {
    let old = m.status.clone().unwrap_or_default();
    let name = m.metadata.name.as_deref().unwrap_or_default();
    let conditions = node.map(node_conditions).unwrap_or(&[]);
    let mut s = match verdict {
        Verdict::Running { first_join } => {
            let mut s = with_phase(&old, MachinePhase::Running, false, now);
            s.last_operation = if *first_join {
                last_op(
                    MachineOperationType::Create,
                    MachineState::Successful,
                    format!(
                        "Machine {name} successfully joined the cluster in {}",
                        format_duration(Duration::from_secs(age(m, now).as_secs()))
                    ),
                    None,
                    now,
                )
            } else {
                last_op(
                    MachineOperationType::HealthCheck,
                    MachineState::Successful,
                    format!("Machine {name} successfully re-joined the cluster"),
                    None,
                    now,
                )
            };
            s
        }
        Verdict::Unknown { node_gone } => {
            let mut s = with_phase(&old, MachinePhase::Unknown, true, now);
            let why = if *node_gone {
                "its node is gone".to_string()
            } else {
                format!(
                    "node conditions: {}",
                    describe_conditions(conditions).as_str()
                )
            };
            s.last_operation = last_op(
                MachineOperationType::HealthCheck,
                MachineState::Processing,
                format!("Machine {name} is unhealthy - changing MachineState to Unknown: {why}"),
                None,
                now,
            );
            s
        }
        Verdict::FailedCreationTimeout => {
            let mut s = with_phase(&old, MachinePhase::Failed, false, now);
            s.last_operation = last_op(
                MachineOperationType::Create,
                MachineState::Failed,
                format!(
                    "Machine {name} failed to join the cluster in {}",
                    format_duration(settings.creation_timeout)
                ),
                None,
                now,
            );
            s
        }
        Verdict::FailedHealthTimeout => {
            let mut s = with_phase(&old, MachinePhase::Failed, false, now);
            s.last_operation = last_op(
                MachineOperationType::HealthCheck,
                MachineState::Failed,
                format!(
                    "Machine {name} is not healthy since {}; changing MachineState to Failed. \
                     Node conditions: {}",
                    format_duration(settings.health_timeout),
                    describe_conditions(conditions)
                ),
                None,
                now,
            );
            s
        }
        Verdict::Wait(_) => old.clone(),
    };
    if node.is_some() && !same_conditions(&s.conditions, conditions) {
        s.conditions = conditions.to_vec();
    }
    (s != old).then_some(s)
}

/// A machine as the meltdown limit sees it: a machine being deleted counts
/// as `Terminating` even before the controller has written that phase.
pub fn sibling(m: &Machine) -> health::Sibling {
    health::Sibling {
        phase: if m.metadata.deletion_timestamp.is_some() {
            Some(MachinePhase::Terminating)
        } else {
            m.phase()
        },
        preserved: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::test_support::{created_at, node, t};
    use crate::time::to_time;

    #[test]
    fn health_statuses() {
        use MachinePhase::*;
        let s = Settings::default();
        let ready = node(&[("Ready", "True")]);
        let m = created_at(Machine::test("m1").with_phase(Pending), 0);
        let st = health_status(
            &m,
            &Verdict::Running { first_join: true },
            Some(&ready),
            &s,
            t(90),
        )
        .unwrap();
        assert_eq!(st.current_status.phase, Some(Running));
        assert_eq!(st.current_status.last_update_time, Some(to_time(t(90))));
        assert_eq!(
            st.last_operation.description,
            "Machine m1 successfully joined the cluster in 1m30s"
        );
        assert_eq!(st.conditions.len(), 1);

        // A wait only copies conditions, and only when they changed.
        let mut running = m.clone().with_phase(Running);
        running.status.as_mut().unwrap().conditions = st.conditions.clone();
        assert_eq!(
            health_status(
                &running,
                &Verdict::Wait(Duration::ZERO),
                Some(&ready),
                &s,
                t(99)
            ),
            None
        );
        let sick = node(&[("Ready", "False")]);
        let st = health_status(
            &running,
            &Verdict::Unknown { node_gone: false },
            Some(&sick),
            &s,
            t(100),
        )
        .unwrap();
        assert_eq!(st.current_status.phase, Some(Unknown));
        assert!(st.current_status.timeout_active);
        assert!(st.last_operation.description.contains("Ready=False"));
        assert_eq!(st.conditions[0].status, "False");

        let st = health_status(
            &running,
            &Verdict::FailedHealthTimeout,
            Some(&sick),
            &s,
            t(1),
        )
        .unwrap();
        assert_eq!(st.current_status.phase, Some(Failed));
        assert_eq!(
            st.last_operation.type_,
            Some(MachineOperationType::HealthCheck)
        );
        let st = health_status(&m, &Verdict::FailedCreationTimeout, None, &s, t(1)).unwrap();
        assert_eq!(
            st.last_operation.description,
            "Machine m1 failed to join the cluster in 20m0s"
        );
    }

    #[test]
    fn siblings_being_deleted_count_as_terminating() {
        let mut m = Machine::test("m1").with_phase(MachinePhase::Failed);
        assert_eq!(sibling(&m).phase, Some(MachinePhase::Failed));
        m.metadata.deletion_timestamp = Some(to_time(t(0)));
        assert_eq!(sibling(&m).phase, Some(MachinePhase::Terminating));
    }
}
