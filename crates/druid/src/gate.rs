//! When the etcd controller acts (spec §3, `internal/controller/etcd/
//! register.go` and `reconciler.go`): which Etcd updates wake it, whether a
//! pass reconciles the spec, and what the spec flow's outcome does to
//! `lastOperation` and the requeue. Pure.

use std::time::Duration;

use crate::components::{OPERATION_ANNOTATION, SUSPEND_ANNOTATION};
use crate::types::Etcd;

/// Gardener's own operation annotation, which druid honours like its own
/// (upstream accepts both and removes both once the spec is applied).
pub const GARDENER_OPERATION_ANNOTATION: &str = "gardener.cloud/operation";

/// The operation annotations a reconciled spec drops.
pub const OPERATION_ANNOTATIONS: [&str; 2] = [OPERATION_ANNOTATION, GARDENER_OPERATION_ANNOTATION];

/// `etcdStatusSyncPeriod`: the status flow runs at least this often.
pub const STATUS_SYNC_PERIOD: Duration = Duration::from_secs(15);
/// A component that asked to be looked at again.
pub const COMPONENT_REQUEUE: Duration = Duration::from_secs(10);
/// Deletion waits this long while components remain.
pub const DELETION_REQUEUE: Duration = Duration::from_secs(5);

fn annotation<'a>(etcd: &'a Etcd, key: &str) -> Option<&'a str> {
    etcd.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// An operation annotation asks for a reconcile.
pub fn reconcile_requested(etcd: &Etcd) -> bool {
    OPERATION_ANNOTATIONS
        .iter()
        .any(|key| annotation(etcd, key) == Some("reconcile"))
}

/// The operation annotations present on `etcd`, which the pass that
/// applied its spec removes.
pub fn annotations_to_drop(etcd: &Etcd) -> Vec<&'static str> {
    OPERATION_ANNOTATIONS
        .into_iter()
        .filter(|key| annotation(etcd, key).is_some())
        .collect()
}

fn never_reconciled(etcd: &Etcd) -> bool {
    etcd.status
        .as_ref()
        .and_then(|s| s.observed_generation)
        .is_none()
}

fn last_op_reconcile_succeeded(etcd: &Etcd) -> bool {
    etcd.status
        .as_ref()
        .and_then(|s| s.last_operation.as_ref())
        .is_some_and(|o| o.type_ == "Reconcile" && o.state == "Succeeded")
}

/// The update predicate: whether an update from `old` to `new` wakes the
/// controller.
pub fn update_wakes(old: &Etcd, new: &Etcd, auto_reconcile: bool) -> bool {
    let generation_changed = old.metadata.generation != new.metadata.generation;
    let never = never_reconciled(new);
    (reconcile_requested(new) && (generation_changed || last_op_reconcile_succeeded(new) || never))
        || (auto_reconcile && (generation_changed || never))
}

/// The whole event filter of the etcd controller: a new Etcd (or one seen
/// first after a restart) always passes; an update passes if
/// [`update_wakes`] says so, or if it marks the Etcd for deletion (the
/// deletion flow must run even when nothing else asks for a reconcile).
/// Status-only writes, the controller's own included, never pass.
pub fn event_passes(old: Option<&Etcd>, new: &Etcd, auto_reconcile: bool) -> bool {
    let Some(old) = old else { return true };
    let deletion_started =
        old.metadata.deletion_timestamp.is_none() && new.metadata.deletion_timestamp.is_some();
    deletion_started || update_wakes(old, new, auto_reconcile)
}

/// What one pass does with the spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecPass {
    /// Run the spec flow.
    Reconcile,
    /// Suspended by annotation: skip it, with a Warning event.
    Suspended,
    /// Nothing asks for it (auto-reconcile off, no annotation).
    Skip,
}

pub fn spec_pass(etcd: &Etcd, auto_reconcile: bool) -> SpecPass {
    if annotation(etcd, SUSPEND_ANNOTATION).is_some() {
        return SpecPass::Suspended;
    }
    if auto_reconcile || reconcile_requested(etcd) || never_reconciled(etcd) {
        SpecPass::Reconcile
    } else {
        SpecPass::Skip
    }
}

/// How the spec flow ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowOutcome {
    Succeeded,
    /// A component wants another look (e.g. a StatefulSet mid-change).
    Requeue(String),
    Failed {
        code: String,
        description: String,
    },
}

/// `lastOperation.state` for an outcome and the requeue it implies (the
/// status sync period bounds every requeue).
pub fn outcome_state(outcome: &FlowOutcome) -> (&'static str, Duration) {
    match outcome {
        FlowOutcome::Succeeded => ("Succeeded", STATUS_SYNC_PERIOD),
        FlowOutcome::Requeue(_) => ("Requeue", COMPONENT_REQUEUE),
        FlowOutcome::Failed { .. } => ("Error", COMPONENT_REQUEUE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{EtcdStatus, LastOperation};

    fn etcd(generation: i64, observed: Option<i64>, annotations: &[(&str, &str)]) -> Etcd {
        let mut e = Etcd::new("e", Default::default());
        e.metadata.generation = Some(generation);
        if !annotations.is_empty() {
            e.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
        }
        e.status = Some(EtcdStatus {
            observed_generation: observed,
            last_operation: Some(LastOperation {
                type_: "Reconcile".into(),
                state: "Succeeded".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        e
    }

    #[test]
    fn scenario_02_without_auto_reconcile_only_the_annotation_applies_the_spec() {
        let old = etcd(1, Some(1), &[]);
        let new = etcd(2, Some(1), &[]);
        assert!(!update_wakes(&old, &new, false));
        assert_eq!(spec_pass(&new, false), SpecPass::Skip);
        let annotated = etcd(2, Some(1), &[(OPERATION_ANNOTATION, "reconcile")]);
        assert!(update_wakes(&new, &annotated, false));
        assert_eq!(spec_pass(&annotated, false), SpecPass::Reconcile);
        // With auto-reconcile every generation change applies.
        assert!(update_wakes(&old, &new, true));
        assert_eq!(spec_pass(&new, true), SpecPass::Reconcile);
        // A status-only update wakes nobody.
        assert!(!update_wakes(&new, &new, true));
        // Never reconciled: the first pass applies the spec.
        assert_eq!(spec_pass(&etcd(1, None, &[]), false), SpecPass::Reconcile);
    }

    #[test]
    fn scenario_02_gardeners_operation_annotation_counts_and_both_are_dropped() {
        let e = etcd(
            2,
            Some(1),
            &[
                (GARDENER_OPERATION_ANNOTATION, "reconcile"),
                ("unrelated", "x"),
            ],
        );
        assert!(reconcile_requested(&e));
        assert_eq!(annotations_to_drop(&e), [GARDENER_OPERATION_ANNOTATION]);
        let other = etcd(2, Some(1), &[(OPERATION_ANNOTATION, "maintain")]);
        assert!(!reconcile_requested(&other));
        assert_eq!(annotations_to_drop(&other), [OPERATION_ANNOTATION]);
    }

    #[test]
    fn the_event_filter_passes_creations_and_deletions_but_not_status_writes() {
        let e = etcd(1, Some(1), &[]);
        assert!(event_passes(None, &e, false));
        let mut status_write = e.clone();
        status_write.status.as_mut().unwrap().ready = Some(true);
        assert!(!event_passes(Some(&e), &status_write, true));
        let mut deleting = e.clone();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        assert!(event_passes(Some(&e), &deleting, false));
        assert!(!event_passes(Some(&deleting), &deleting, false));
    }

    #[test]
    fn scenario_03_suspension_wins_over_the_operation_annotation() {
        let e = etcd(
            2,
            Some(1),
            &[
                (OPERATION_ANNOTATION, "reconcile"),
                (SUSPEND_ANNOTATION, ""),
            ],
        );
        assert_eq!(spec_pass(&e, true), SpecPass::Suspended);
    }

    #[test]
    fn outcomes_map_to_last_operation_states() {
        assert_eq!(outcome_state(&FlowOutcome::Succeeded).0, "Succeeded");
        assert_eq!(
            outcome_state(&FlowOutcome::Requeue("sts".into())),
            ("Requeue", COMPONENT_REQUEUE)
        );
        assert_eq!(
            outcome_state(&FlowOutcome::Failed {
                code: "ERR_SYNC_STATEFULSET".into(),
                description: "x".into()
            })
            .0,
            "Error"
        );
    }
}
