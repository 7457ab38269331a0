//! The machine set decision: how many machines to create, which to delete,
//! and the status to report, from the set and the machines it owns.
//!
//! A pass either creates or deletes, never both (as upstream): when machines
//! are missing it only creates; otherwise it deletes the surplus in
//! [`deletion::order`], plus every Failed machine (replaced on the next pass)
//! and every machine the cluster autoscaler picked (priority 1, marked before
//! the autoscaler's last replica change).

use api::labels;
use api::{
    ConditionStatus, LastOperation, Machine, MachinePhase, MachineSet, MachineSetCondition,
    MachineSetConditionType, MachineSetStatus, MachineState, MachineSummary,
};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::deletion::{self, Candidate, Preserved};
use crate::time::{to_chrono, to_time};

/// Steady-state resync of machine sets and deployments.
pub const RESYNC: Duration = Duration::from_secs(600);
/// How soon to look again while the cache catches up with a controller's
/// own writes.
pub const CACHE_WAIT: Duration = Duration::from_millis(500);

/// At most this many machines are created or deleted in one pass.
pub const MAX_BURST: usize = 100;

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Machines to create.
    pub create: usize,
    /// Machines to delete, by name.
    pub delete: Vec<String>,
    /// The status to write (conditions are merged by the executor).
    pub status: MachineSetStatus,
    /// Why creation was held back, if it was.
    pub held: Option<&'static str>,
    /// Machines whose spec must take the template's node template,
    /// configuration or class kind (no rollout: these never create a new
    /// machine set), by name, with the merge patch of their spec.
    pub sync: Vec<(String, serde_json::Value)>,
}

fn parse_time(s: Option<&String>) -> Option<DateTime<Utc>> {
    s.and_then(|v| DateTime::parse_from_rfc3339(v).ok())
        .map(|t| t.with_timezone(&Utc))
}

fn annotation<'a>(m: &'a Machine, key: &str) -> Option<&'a String> {
    m.metadata.annotations.as_ref().and_then(|a| a.get(key))
}

fn is_terminating(m: &Machine) -> bool {
    m.metadata.deletion_timestamp.is_some() || m.phase() == Some(MachinePhase::Terminating)
}

fn created(m: &Machine) -> DateTime<Utc> {
    m.metadata
        .creation_timestamp
        .as_ref()
        .map(to_chrono)
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

fn candidate(m: &Machine) -> Candidate {
    Candidate {
        name: m.metadata.name.clone().unwrap_or_default(),
        priority: deletion::parse_priority(
            annotation(m, labels::MACHINE_PRIORITY).map(String::as_str),
        ),
        marked_for_deletion: parse_time(annotation(m, labels::MARKED_FOR_DELETION_TIME)),
        phase: m.phase(),
        created: created(m),
        preserved: Preserved::No,
    }
}

/// Running for at least `min_ready` (counted from the phase change).
fn available(m: &Machine, min_ready_seconds: i32, now: DateTime<Utc>) -> bool {
    match m.phase() {
        Some(MachinePhase::Available) => true,
        Some(MachinePhase::Running) => {
            if min_ready_seconds <= 0 {
                return true;
            }
            let since = m
                .status
                .as_ref()
                .and_then(|s| s.current_status.last_update_time.as_ref())
                .map(to_chrono);
            since.is_none_or(|s| (now - s).num_seconds() >= i64::from(min_ready_seconds))
        }
        _ => false,
    }
}

fn labels_match(m: &Machine, set: &MachineSet) -> bool {
    let have = m.metadata.labels.as_ref();
    set.spec
        .template
        .metadata
        .labels
        .iter()
        .flatten()
        .all(|(k, v)| have.and_then(|h| h.get(k)) == Some(v))
}

fn has_label(set: &MachineSet, key: &str, value: Option<&str>) -> bool {
    set.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .is_some_and(|v| value.is_none_or(|want| v == want))
}

/// The merge patch that brings `m` in line with the set's template: node
/// template and per-machine configuration for active machines (not Failed,
/// not terminating), the class kind for all. `None` when nothing differs.
pub fn template_sync(set: &MachineSet, m: &Machine) -> Option<serde_json::Value> {
    let want = &set.spec.template.spec;
    let active = !is_terminating(m) && m.phase() != Some(MachinePhase::Failed);
    // Equal fields serialise alike, so there is nothing to diff: the usual
    // case, checked without building JSON for every machine of every pass.
    if m.spec.class.kind == want.class.kind
        && (!active
            || (m.spec.node_template == want.node_template
                && m.spec.configuration == want.configuration))
    {
        return None;
    }
    let view = |spec: &api::MachineSpec| -> Option<serde_json::Value> {
        let mut v = serde_json::Map::new();
        if active {
            v.insert(
                "nodeTemplate".into(),
                serde_json::to_value(&spec.node_template).ok()?,
            );
            if let serde_json::Value::Object(c) = serde_json::to_value(&spec.configuration).ok()? {
                v.extend(c);
            }
        }
        v.insert("class".into(), serde_json::json!({"kind": spec.class.kind}));
        Some(serde_json::Value::Object(v))
    };
    let patch = apimachinery::patch::merge_patch_diff(&view(&m.spec)?, &view(want)?)?;
    Some(serde_json::json!({"spec": patch}))
}

/// The decision for one machine set over the machines it owns.
pub fn plan(set: &MachineSet, machines: &[&Machine], now: DateTime<Utc>) -> Plan {
    let sync = machines
        .iter()
        .filter_map(|m| Some((m.metadata.name.clone()?, template_sync(set, m)?)))
        .collect();
    let replicas = set.spec.replicas.max(0) as usize;
    let active: Vec<&Machine> = machines
        .iter()
        .copied()
        .filter(|m| !is_terminating(m))
        .collect();
    let mut create = 0;
    let mut delete: Vec<String> = Vec::new();
    let mut held = None;
    let deleting_set = set.metadata.deletion_timestamp.is_some();
    if deleting_set {
        delete = active
            .iter()
            .filter_map(|m| m.metadata.name.clone())
            .collect();
    } else if active.len() < replicas {
        if has_label(set, labels::FREEZE, Some(labels::TRUE)) {
            held = Some("the machine set is frozen");
        } else if has_label(set, labels::SCALE_UP_DISABLED, None) {
            held = Some("scale-up is disabled on the machine set");
        } else {
            create = (replicas - active.len()).min(MAX_BURST);
        }
    } else {
        let surplus = active.len() - replicas;
        // Machines the autoscaler picked before its last replica change.
        let scaler_changed = parse_time(
            set.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(labels::LAST_REPLICA_CHANGE_BY_SCALER_TIME)),
        );
        // Ordering every machine is only needed when one is to go: a set
        // at its size (most passes) skips it.
        let ordered = if surplus > 0 || scaler_changed.is_some() {
            deletion::order(active.iter().map(|m| candidate(m)).collect())
        } else {
            Vec::new()
        };
        delete.extend(ordered.iter().take(surplus).map(|c| c.name.clone()));
        // Failed machines are replaced: deleted now, recreated next pass.
        delete.extend(
            active
                .iter()
                .filter(|m| m.phase() == Some(MachinePhase::Failed))
                .filter_map(|m| m.metadata.name.clone()),
        );
        if let Some(changed) = scaler_changed {
            for c in &ordered {
                if c.priority == 1 && c.marked_for_deletion.is_some_and(|t| t <= changed) {
                    delete.push(c.name.clone());
                }
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        delete.retain(|n| seen.insert(n.clone()));
        delete.truncate(MAX_BURST);
    }

    let min_ready = set.spec.min_ready_seconds;
    let failed: Vec<MachineSummary> = machines
        .iter()
        .filter(|m| {
            m.status
                .as_ref()
                .is_some_and(|s| s.last_operation.state == Some(MachineState::Failed))
        })
        .map(|m| MachineSummary {
            name: m.metadata.name.clone().unwrap_or_default(),
            provider_id: m.spec.provider_id.clone(),
            last_operation: m
                .status
                .as_ref()
                .map(|s| s.last_operation.clone())
                .unwrap_or_default(),
            owner_ref: set.metadata.name.clone().unwrap_or_default(),
        })
        .collect();
    let old = set.status.clone().unwrap_or_default();
    let status = MachineSetStatus {
        replicas: machines.len() as i32,
        fully_labeled_replicas: machines.iter().filter(|m| labels_match(m, set)).count() as i32,
        ready_replicas: machines
            .iter()
            .filter(|m| m.phase() == Some(MachinePhase::Running))
            .count() as i32,
        available_replicas: machines
            .iter()
            .filter(|m| available(m, min_ready, now))
            .count() as i32,
        observed_generation: set.metadata.generation.unwrap_or(0),
        conditions: old.conditions.clone(),
        last_operation: old.last_operation.clone(),
        failed_machines: (!failed.is_empty()).then_some(failed),
        ..old
    };
    Plan {
        sync,
        create,
        delete,
        status,
        held,
    }
}

/// Sets or clears the ReplicaFailure condition, keeping the transition time
/// when the status does not change.
pub fn set_replica_failure(
    conditions: &mut Vec<MachineSetCondition>,
    failure: Option<(&str, String)>,
    now: DateTime<Utc>,
) {
    let ty = MachineSetConditionType::ReplicaFailure;
    match failure {
        None => conditions.retain(|c| c.type_ != ty),
        Some((reason, message)) => {
            let existing = conditions.iter_mut().find(|c| c.type_ == ty);
            match existing {
                Some(c) => {
                    c.reason = reason.to_string();
                    c.message = message;
                }
                None => conditions.push(MachineSetCondition {
                    type_: ty,
                    status: ConditionStatus::True,
                    last_transition_time: Some(to_time(now)),
                    reason: reason.to_string(),
                    message,
                }),
            }
        }
    }
}

/// The last operation a set reports after a pass.
pub fn last_operation(
    description: String,
    state: MachineState,
    now: DateTime<Utc>,
) -> LastOperation {
    LastOperation {
        description,
        state: Some(state),
        last_update_time: Some(to_time(now)),
        ..LastOperation::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::collections::BTreeMap;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    fn set(replicas: i32) -> MachineSet {
        let mut s = MachineSet::test("ms").replicas(replicas);
        s.metadata.uid = Some("uid-ms".into());
        s.metadata.generation = Some(4);
        s
    }

    fn machine(name: &str, phase: Option<MachinePhase>, age: i64, s: &MachineSet) -> Machine {
        let mut m = Machine::test(name).owned_by(s);
        if let Some(p) = phase {
            m = m.with_phase(p);
        }
        m.metadata.creation_timestamp = Some(to_time(t(age)));
        m
    }

    fn names(p: &Plan) -> Vec<&str> {
        p.delete.iter().map(String::as_str).collect()
    }

    #[test]
    fn creates_missing_and_deletes_surplus() {
        use MachinePhase::*;
        let s = set(3);
        let a = machine("a", Some(Running), 0, &s);
        let p = plan(&s, &[&a], t(100));
        assert_eq!((p.create, p.delete.len()), (2, 0));
        let ms: Vec<Machine> = (0..5)
            .map(|i| machine(&format!("m{i}"), Some(Running), i, &s))
            .collect();
        let refs: Vec<&Machine> = ms.iter().collect();
        let p = plan(&s, &refs, t(100));
        assert_eq!(p.create, 0);
        assert_eq!(names(&p), ["m0", "m1"], "older machines go first");
    }

    #[test]
    fn availability_by_phase() {
        use MachinePhase::*;
        // (phase, counts as ready, counts as available). `Available` is the
        // phase of a machine without a target cluster: its VM serves, there
        // is no node to be Ready, and minReadySeconds (counted from a node
        // turning Ready) does not apply.
        let table = [
            (Some(Running), true, true),
            (Some(Available), false, true),
            (Some(Pending), false, false),
            (Some(Unknown), false, false),
            (Some(Failed), false, false),
            (Some(CrashLoopBackOff), false, false),
            (None, false, false),
        ];
        for min_ready in [0, 30] {
            for (phase, ready, available) in table {
                let mut s = set(1);
                s.spec.min_ready_seconds = min_ready;
                let m = machine("m", phase, 0, &s);
                let p = plan(&s, &[&m], t(1000));
                let case = format!("{phase:?} minReady={min_ready}");
                assert_eq!(p.status.ready_replicas, i32::from(ready), "{case}");
                assert_eq!(p.status.available_replicas, i32::from(available), "{case}");
            }
        }
    }

    #[test]
    fn terminating_machines_do_not_count_as_active() {
        use MachinePhase::*;
        let s = set(2);
        let a = machine("a", Some(Running), 0, &s);
        let b = machine("b", Some(Terminating), 1, &s);
        let p = plan(&s, &[&a, &b], t(100));
        assert_eq!(p.create, 1);
        assert_eq!(p.status.replicas, 2, "status counts every owned machine");
    }

    #[test]
    fn failed_machines_are_replaced_after_deletion() {
        use MachinePhase::*;
        let s = set(3);
        let ms = [
            machine("r1", Some(Running), 0, &s),
            machine("r2", Some(Running), 1, &s),
            machine("f", Some(Failed), 2, &s),
        ];
        let p = plan(&s, &ms.iter().collect::<Vec<_>>(), t(100));
        assert_eq!((p.create, names(&p)), (0, vec!["f"]));
    }

    #[test]
    fn scenario_19_priority_and_pending_first() {
        use MachinePhase::*;
        let s = set(2);
        let mut p1 = machine("p1", Some(Running), 5, &s);
        p1.metadata.annotations = Some(BTreeMap::from([(
            labels::MACHINE_PRIORITY.into(),
            "1".into(),
        )]));
        let ms = [
            machine("r1", Some(Running), 0, &s),
            p1,
            machine("pend", Some(Pending), 6, &s),
            machine("r2", Some(Running), 1, &s),
        ];
        let p = plan(&s, &ms.iter().collect::<Vec<_>>(), t(100));
        assert_eq!(names(&p), ["p1", "pend"]);
    }

    #[test]
    fn frozen_sets_do_not_scale_up() {
        let mut s = set(3);
        s.metadata.labels = Some(BTreeMap::from([(
            labels::FREEZE.into(),
            labels::TRUE.into(),
        )]));
        let p = plan(&s, &[], t(0));
        assert_eq!(p.create, 0);
        assert!(p.held.is_some());
    }

    #[test]
    fn template_changes_flow_to_active_machines_in_place() {
        use api::NodeTemplateSpec;
        let mut set = MachineSet::test("s");
        let mut labels = BTreeMap::new();
        labels.insert("role".to_string(), "web".to_string());
        set.spec.template.spec.node_template = NodeTemplateSpec {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                labels: Some(labels),
                ..Default::default()
            },
            ..Default::default()
        };
        set.spec.template.spec.configuration.drain_timeout = Some("5m".into());
        let mut old = Machine::test("m").running();
        let mut old_labels = BTreeMap::new();
        old_labels.insert("role".to_string(), "apps".to_string());
        old_labels.insert("gone".to_string(), "x".to_string());
        old.spec.node_template.metadata.labels = Some(old_labels);
        old.spec.configuration.health_timeout = Some("10m".into());
        let patch = template_sync(&set, &old).expect("the machine differs");
        assert_eq!(
            patch,
            serde_json::json!({"spec": {
                "nodeTemplate": {"metadata": {"labels": {"role": "web", "gone": null}}},
                "drainTimeout": "5m",
                "healthTimeout": null,
            }})
        );
        // A Failed machine keeps its template (it is about to be replaced).
        let failed = old.clone().with_phase(MachinePhase::Failed);
        assert_eq!(template_sync(&set, &failed), None);
        // An up-to-date machine needs nothing.
        let mut current = Machine::test("c").running();
        current.spec = set.spec.template.spec.clone();
        assert_eq!(template_sync(&set, &current), None);
        let p = plan(&set, &[&old, &current], Utc::now());
        assert_eq!(p.sync.len(), 1);
        assert_eq!(p.sync[0].0, "m");
    }

    #[test]
    fn status_counts_and_min_ready_seconds() {
        use MachinePhase::*;
        let mut s = set(3);
        s.spec.min_ready_seconds = 30;
        let mut fresh = machine("fresh", Some(Running), 0, &s);
        fresh
            .status
            .as_mut()
            .unwrap()
            .current_status
            .last_update_time = Some(to_time(t(90)));
        let mut settled = machine("settled", Some(Running), 0, &s);
        settled
            .status
            .as_mut()
            .unwrap()
            .current_status
            .last_update_time = Some(to_time(t(10)));
        let pending = machine("pending", Some(Pending), 0, &s);
        let mut failed = machine("failed", Some(Failed), 0, &s);
        failed.status.as_mut().unwrap().last_operation.state = Some(MachineState::Failed);
        let p = plan(&s, &[&fresh, &settled, &pending, &failed], t(100));
        assert_eq!(p.status.replicas, 4);
        assert_eq!(p.status.ready_replicas, 2);
        assert_eq!(
            p.status.available_replicas, 1,
            "one Running machine is younger than minReadySeconds"
        );
        assert_eq!(p.status.fully_labeled_replicas, 4);
        assert_eq!(p.status.observed_generation, 4);
        assert_eq!(p.status.failed_machines.as_ref().map(Vec::len), Some(1));
    }

    #[test]
    fn a_deleting_set_deletes_everything() {
        use MachinePhase::*;
        let mut s = set(3);
        s.metadata.deletion_timestamp = Some(to_time(t(0)));
        let ms = [
            machine("a", Some(Running), 0, &s),
            machine("b", Some(Terminating), 0, &s),
        ];
        let p = plan(&s, &ms.iter().collect::<Vec<_>>(), t(10));
        assert_eq!((p.create, names(&p)), (0, vec!["a"]));
    }

    #[test]
    fn replica_failure_condition_keeps_transition_time() {
        let mut c = Vec::new();
        set_replica_failure(&mut c, Some(("FailedCreate", "quota".into())), t(0));
        set_replica_failure(&mut c, Some(("FailedCreate", "quota again".into())), t(50));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].last_transition_time, Some(to_time(t(0))));
        assert_eq!(c[0].message, "quota again");
        set_replica_failure(&mut c, None, t(60));
        assert!(c.is_empty());
    }
}
