//! The Etcd's status as the etcd controller writes it (spec §3 "Status
//! flow" and the spec flow's `lastOperation`/`lastErrors`): replica counts
//! and `ready` from the StatefulSet, members, conditions, the StatefulSet
//! reference and the selector, all computed from observed facts in one
//! place and written once per pass. Pure.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::Timestamp;

use crate::components::{Names, default_labels};
use crate::condition::{self, StsFacts, Verdict};
use crate::gate::FlowOutcome;
use crate::types::{
    Condition, CrossVersionObjectReference, Etcd, EtcdMemberStatus, EtcdStatus, LastError,
    LastOperation,
};

/// What the StatefulSet says, with absent numbers as 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StsView {
    pub generation: i64,
    pub observed_generation: i64,
    pub spec_replicas: i32,
    pub replicas: i32,
    pub ready_replicas: i32,
    pub current_replicas: i32,
    pub updated_replicas: i32,
    pub current_revision: String,
    pub update_revision: String,
}

impl StsView {
    pub fn of(sts: &StatefulSet) -> StsView {
        let s = sts.status.clone().unwrap_or_default();
        StsView {
            generation: sts.metadata.generation.unwrap_or(0),
            observed_generation: s.observed_generation.unwrap_or(0),
            spec_replicas: sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            replicas: s.replicas,
            ready_replicas: s.ready_replicas.unwrap_or(0),
            current_replicas: s.current_replicas.unwrap_or(0),
            updated_replicas: s.updated_replicas.unwrap_or(0),
            current_revision: s.current_revision.unwrap_or_default(),
            update_revision: s.update_revision.unwrap_or_default(),
        }
    }

    /// The facts AllMembersUpdated looks at.
    pub fn condition_facts(&self) -> StsFacts {
        StsFacts {
            generation: self.generation,
            observed_generation: self.observed_generation,
            updated_replicas: self.updated_replicas,
            current_revision: self.current_revision.clone(),
            update_revision: self.update_revision.clone(),
        }
    }
}

/// `currentReplicas`, `replicas`, `readyReplicas` and `ready`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replicas {
    pub current: i32,
    pub replicas: i32,
    pub ready_replicas: i32,
    pub ready: bool,
}

/// The replica counts from the StatefulSet: `replicas` mirrors
/// `currentReplicas`; `ready` needs the set's current generation observed,
/// enough ready pods (the spec's count once reconciled, else the set's),
/// and a finished rollout. No StatefulSet: zeros, not ready.
pub fn replicas(sts: Option<&StsView>, spec_replicas: i32, reconciled: bool) -> Replicas {
    let Some(s) = sts else {
        return Replicas::default();
    };
    let expected = if reconciled {
        spec_replicas
    } else {
        s.spec_replicas
    };
    let ready = s.observed_generation >= s.generation
        && s.ready_replicas >= expected
        && s.current_revision == s.update_revision
        && s.current_replicas == s.updated_replicas;
    Replicas {
        current: s.current_replicas,
        replicas: s.current_replicas,
        ready_replicas: s.ready_replicas,
        ready,
    }
}

/// What the status flow observed.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    pub sts: Option<StsView>,
    pub members: Vec<EtcdMemberStatus>,
    pub verdicts: Vec<Verdict>,
    /// Whether every member lease says peer TLS is on (`None`: no lease
    /// says anything yet).
    pub peer_tls_enabled: Option<bool>,
}

/// The status flow's result over `previous`: everything but
/// `lastOperation`, `lastErrors` and `observedGeneration`, which belong to
/// the spec flow.
pub fn status_flow(etcd: &Etcd, previous: &EtcdStatus, o: &Observed, now: Timestamp) -> EtcdStatus {
    let n = Names::of(etcd);
    let reconciled = previous.observed_generation.is_some();
    let r = replicas(o.sts.as_ref(), etcd.spec.replicas, reconciled);
    let labels = default_labels(&n.name);
    let label_selector = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    EtcdStatus {
        etcd: o.sts.as_ref().map(|_| CrossVersionObjectReference {
            kind: "StatefulSet".into(),
            name: n.name.clone(),
            api_version: Some("apps/v1".into()),
        }),
        conditions: condition::merge(
            &previous.conditions,
            &o.verdicts,
            etcd.spec.replicas == 0,
            now,
        ),
        current_replicas: r.current,
        replicas: r.replicas,
        ready_replicas: r.ready_replicas,
        ready: Some(r.ready),
        label_selector: Some(label_selector),
        members: o.members.clone(),
        peer_url_tls_enabled: o.peer_tls_enabled.or(previous.peer_url_tls_enabled),
        selector: Some(LabelSelector {
            match_labels: Some(labels),
            ..Default::default()
        }),
        ..previous.clone()
    }
}

/// A `lastOperation` record.
pub fn operation(
    type_: &str,
    state: &str,
    description: &str,
    run_id: &str,
    now: Timestamp,
) -> LastOperation {
    LastOperation {
        type_: type_.to_string(),
        state: state.to_string(),
        description: description.to_string(),
        run_id: run_id.to_string(),
        last_update_time: Some(Time(now)),
    }
}

/// Records how the spec flow ended: `lastOperation` and `lastErrors`, and
/// `observedGeneration` only on success (never before the work is done).
pub fn record_outcome(
    status: &mut EtcdStatus,
    outcome: &FlowOutcome,
    generation: i64,
    run_id: &str,
    now: Timestamp,
) {
    let (state, _) = crate::gate::outcome_state(outcome);
    match outcome {
        FlowOutcome::Succeeded => {
            status.last_operation = Some(operation(
                "Reconcile",
                state,
                "Reconciliation of the spec succeeded",
                run_id,
                now,
            ));
            status.last_errors.clear();
            status.observed_generation = Some(generation);
        }
        FlowOutcome::Requeue(why) => {
            status.last_operation = Some(operation("Reconcile", state, why, run_id, now));
            status.last_errors.clear();
        }
        FlowOutcome::Failed { code, description } => {
            status.last_operation = Some(operation("Reconcile", state, description, run_id, now));
            status.last_errors = vec![LastError {
                code: code.clone(),
                description: description.clone(),
                observed_at: Some(Time(now)),
            }];
        }
    }
}

/// Sets one condition in place, keeping its transition time while the
/// status holds (for the conditions other controllers write, such as
/// LastSnapshotCompactionSucceeded).
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let new = |transition: Option<Time>| Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        last_transition_time: transition.or(Some(Time(now))),
        last_update_time: Some(Time(now)),
        reason: reason.to_string(),
        message: message.to_string(),
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            let kept = (c.status == status)
                .then(|| c.last_transition_time.clone())
                .flatten();
            *c = new(kept);
        }
        None => conditions.push(new(None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::{TYPE_LAST_SNAPSHOT_COMPACTION_SUCCEEDED, TYPE_READY};
    use k8s_openapi::jiff::SignedDuration;

    fn sts(ready: i32, current: i32, updated: i32, revisions: (&str, &str)) -> StsView {
        StsView {
            generation: 2,
            observed_generation: 2,
            spec_replicas: 3,
            replicas: 3,
            ready_replicas: ready,
            current_replicas: current,
            updated_replicas: updated,
            current_revision: revisions.0.into(),
            update_revision: revisions.1.into(),
        }
    }

    #[test]
    fn scenario_04_ready_needs_every_expected_pod_and_a_finished_rollout() {
        let done = sts(3, 3, 3, ("a", "a"));
        assert_eq!(
            replicas(Some(&done), 3, true),
            Replicas {
                current: 3,
                replicas: 3,
                ready_replicas: 3,
                ready: true
            }
        );
        assert!(!replicas(Some(&sts(2, 3, 3, ("a", "a"))), 3, true).ready);
        assert!(!replicas(Some(&sts(3, 3, 1, ("a", "b"))), 3, true).ready);
        let mut stale = done.clone();
        stale.observed_generation = 1;
        assert!(!replicas(Some(&stale), 3, true).ready);
        // Before the first reconcile the set's own count is expected.
        assert!(replicas(Some(&done), 5, false).ready);
        assert!(!replicas(Some(&done), 5, true).ready);
        assert_eq!(replicas(None, 3, true), Replicas::default());
    }

    #[test]
    fn status_flow_writes_reference_selector_and_keeps_other_writers_conditions() {
        let mut e = Etcd::new("e", Default::default());
        e.spec.replicas = 3;
        let now = Timestamp::now();
        let previous = EtcdStatus {
            observed_generation: Some(1),
            conditions: vec![Condition {
                type_: TYPE_LAST_SNAPSHOT_COMPACTION_SUCCEEDED.into(),
                status: "True".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let o = Observed {
            sts: Some(sts(3, 3, 3, ("a", "a"))),
            verdicts: vec![condition::ready(&[])],
            ..Default::default()
        };
        let s = status_flow(&e, &previous, &o, now);
        assert_eq!(s.etcd.as_ref().unwrap().name, "e");
        assert_eq!(
            s.label_selector.as_deref(),
            Some("app.kubernetes.io/managed-by=etcd-druid,app.kubernetes.io/part-of=e")
        );
        let types: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, [TYPE_READY, TYPE_LAST_SNAPSHOT_COMPACTION_SUCCEEDED]);
        assert_eq!(s.observed_generation, Some(1));
        assert_eq!(s.ready, Some(true));
        let none = status_flow(&e, &previous, &Observed::default(), now);
        assert_eq!((none.etcd, none.ready), (None, Some(false)));
    }

    #[test]
    fn scenario_01_success_advances_observed_generation_and_failure_does_not() {
        let now = Timestamp::now();
        let mut s = EtcdStatus::default();
        let failed = FlowOutcome::Failed {
            code: "ERR_SYNC_STATEFULSET".into(),
            description: "boom".into(),
        };
        record_outcome(&mut s, &failed, 4, "r1", now);
        assert_eq!(s.observed_generation, None);
        assert_eq!(s.last_operation.as_ref().unwrap().state, "Error");
        assert_eq!(s.last_errors[0].code, "ERR_SYNC_STATEFULSET");
        record_outcome(&mut s, &FlowOutcome::Requeue("sts".into()), 4, "r2", now);
        assert_eq!(s.observed_generation, None);
        assert_eq!(s.last_operation.as_ref().unwrap().state, "Requeue");
        record_outcome(&mut s, &FlowOutcome::Succeeded, 4, "r3", now);
        assert_eq!(s.observed_generation, Some(4));
        let op = s.last_operation.unwrap();
        assert_eq!(
            (op.type_.as_str(), op.state.as_str()),
            ("Reconcile", "Succeeded")
        );
        assert!(s.last_errors.is_empty());
    }

    #[test]
    fn set_condition_keeps_the_transition_time_while_the_status_holds() {
        let t0 = Timestamp::now() - SignedDuration::from_hours(1);
        let now = Timestamp::now();
        let mut c = Vec::new();
        set_condition(&mut c, "X", "True", "None", "ok", t0);
        set_condition(&mut c, "X", "True", "None", "ok again", now);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].last_transition_time, Some(Time(t0)));
        assert_eq!(c[0].last_update_time, Some(Time(now)));
        set_condition(&mut c, "X", "False", "DeadlineExceeded", "late", now);
        assert_eq!(c[0].last_transition_time, Some(Time(now)));
    }
}
