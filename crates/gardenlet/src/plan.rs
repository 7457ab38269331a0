//! Every verdict of the Shoot reconciler as a pure function of what was
//! observed and the clock: the Shoot status (last operation, conditions,
//! hibernation) and the next steps of a deletion. The executor in
//! `controller` observes, calls these, and writes what they return.

use chrono::{DateTime, Utc};
use gardener::{Condition, LastError, LastOperation, ShootStatus, Time};
use std::collections::BTreeMap;

/// How often a Shoot whose operation is still running is looked at again.
pub const PROGRESS_REQUEUE: std::time::Duration = std::time::Duration::from_secs(2);
/// How often a settled Shoot's conditions are refreshed.
pub const SETTLED_REQUEUE: std::time::Duration = std::time::Duration::from_secs(30);

/// `lastOperation.type` values.
pub const OP_CREATE: &str = "Create";
pub const OP_RECONCILE: &str = "Reconcile";
pub const OP_DELETE: &str = "Delete";
/// `lastOperation.state` values.
pub const STATE_PROCESSING: &str = "Processing";
pub const STATE_SUCCEEDED: &str = "Succeeded";
pub const STATE_ERROR: &str = "Error";
pub const STATE_FAILED: &str = "Failed";

/// Condition types, in the order they are written.
pub const API_SERVER_AVAILABLE: &str = "APIServerAvailable";
pub const EVERY_NODE_READY: &str = "EveryNodeReady";
pub const SYSTEM_COMPONENTS_HEALTHY: &str = "SystemComponentsHealthy";

const TRUE: &str = "True";
const FALSE: &str = "False";
const UNKNOWN: &str = "Unknown";
const PROGRESSING: &str = "Progressing";

/// The Worker as the status verdict reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerObservation {
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// `status.lastOperation.state`, `.description` and `.lastUpdateTime`.
    pub last_operation_state: Option<String>,
    pub last_operation_description: String,
    pub last_operation_time: Option<DateTime<Utc>>,
    /// The reconcile request gardenlet left on it, if still there.
    pub operation_annotation: bool,
    /// When gardenlet last asked for a reconcile.
    pub requested_at: Option<DateTime<Utc>>,
}

impl WorkerObservation {
    /// Whether the extension has finished the Worker as it is now: its last
    /// operation succeeded for this generation, after gardenlet's latest
    /// request (either the request annotation is gone, or the operation was
    /// updated no earlier than the request).
    pub fn reconciled(&self) -> bool {
        let succeeded = self.last_operation_state.as_deref() == Some(STATE_SUCCEEDED);
        let current = self.observed_generation >= self.generation;
        let after_request = !self.operation_annotation
            || match (self.last_operation_time, self.requested_at) {
                (Some(done), Some(asked)) => done >= asked,
                (_, None) => true,
                (None, Some(_)) => false,
            };
        succeeded && current && after_request
    }
}

/// Nodes of the shoot's API.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeCounts {
    pub total: usize,
    pub ready: usize,
}

/// Everything the status verdict reads.
#[derive(Clone, Debug)]
pub struct StatusInput<'a> {
    /// The status as it is.
    pub previous: Option<&'a ShootStatus>,
    pub technical_id: &'a str,
    /// The Shoot's `metadata.generation`.
    pub generation: i64,
    /// `spec.hibernation.enabled`.
    pub hibernation_wanted: bool,
    /// The Worker, if it exists.
    pub worker: Option<&'a WorkerObservation>,
    /// Machines left in the control namespace.
    pub machines: usize,
    /// The shoot API's nodes; `None` when the API did not answer.
    pub nodes: Option<NodeCounts>,
    /// How many nodes the awake shoot should have.
    pub minimum_nodes: i32,
    /// What the reconcile stopped to wait for before the Worker (the
    /// shoot's etcd-main), said as the last operation's description.
    pub waiting: Option<&'a str>,
    /// A step of this reconcile that failed.
    pub error: Option<&'a str>,
    pub now: DateTime<Utc>,
}

/// The status to write and whether the operation is done.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusVerdict {
    pub status: ShootStatus,
    /// The operation succeeded: requeue slowly.
    pub done: bool,
}

/// The Shoot's status after this reconcile.
pub fn shoot_status(input: &StatusInput<'_>) -> StatusVerdict {
    let previous = input.previous.cloned().unwrap_or_default();
    let worker_done = input.worker.is_some_and(WorkerObservation::reconciled);
    let hibernated = input.hibernation_wanted && input.machines == 0;
    let done = input.error.is_none() && worker_done && (!input.hibernation_wanted || hibernated);
    let op_type = match &previous.last_operation {
        None => OP_CREATE,
        Some(op) if op.type_ == OP_CREATE && op.state != STATE_SUCCEEDED => OP_CREATE,
        // A deletion that was started cannot go back; this verdict only
        // runs for Shoots without deletionTimestamp, so a Delete here means
        // a deletion request was withdrawn before it was accepted.
        Some(_) => OP_RECONCILE,
    };
    let (state, progress, description) = match (input.error, done) {
        (Some(e), _) => (STATE_ERROR, 50, format!("{op_type} failed: {e}")),
        (None, true) => (
            STATE_SUCCEEDED,
            100,
            if hibernated {
                "Shoot cluster is hibernated.".to_string()
            } else {
                "Shoot cluster has been successfully reconciled.".to_string()
            },
        ),
        (None, false) => (
            STATE_PROCESSING,
            if input.worker.is_some() {
                60
            } else if input.waiting.is_some() {
                10
            } else {
                20
            },
            match input.worker {
                None => input
                    .waiting
                    .map_or_else(|| "Deploying the Worker.".to_string(), str::to_string),
                Some(_) if input.hibernation_wanted && !worker_done => {
                    "Waiting for the Worker to scale to zero.".to_string()
                }
                Some(_) if input.hibernation_wanted => {
                    format!("Waiting for {} machines to be deleted.", input.machines)
                }
                Some(_) => "Waiting for the Worker to be reconciled.".to_string(),
            },
        ),
    };
    let last_operation = keep_time(
        previous.last_operation.as_ref(),
        LastOperation {
            description,
            last_update_time: Some(Time(input.now)),
            progress,
            state: state.to_string(),
            type_: op_type.to_string(),
        },
    );
    let last_errors = match input.error {
        Some(e) => vec![LastError {
            description: e.to_string(),
            task_id: None,
            codes: Vec::new(),
            last_update_time: previous
                .last_errors
                .iter()
                .find(|l| l.description == e)
                .and_then(|l| l.last_update_time)
                .or(Some(Time(input.now))),
        }],
        None => Vec::new(),
    };
    let conditions = merge_conditions(
        &previous.conditions,
        vec![
            api_server_condition(input.nodes),
            node_condition(input),
            worker_condition(input.worker),
        ],
        input.now,
    );
    StatusVerdict {
        status: ShootStatus {
            conditions,
            hibernated,
            last_operation: Some(last_operation),
            last_errors,
            observed_generation: if done {
                input.generation
            } else {
                previous.observed_generation
            },
            technical_id: input.technical_id.to_string(),
            last_maintenance: previous.last_maintenance.clone(),
            last_hibernation_trigger_time: previous.last_hibernation_trigger_time,
        },
        done,
    }
}

/// The operation as computed, with the previous update time when nothing
/// else changed, so an unchanged status is not rewritten every pass.
fn keep_time(previous: Option<&LastOperation>, mut next: LastOperation) -> LastOperation {
    if let Some(p) = previous {
        let same = p.type_ == next.type_
            && p.state == next.state
            && p.progress == next.progress
            && p.description == next.description;
        if same {
            next.last_update_time = p.last_update_time;
        }
    }
    next
}

/// A condition without times; [`merge_conditions`] fills them in.
fn condition(type_: &str, status: &str, reason: &str, message: String) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        last_transition_time: None,
        last_update_time: None,
        reason: reason.to_string(),
        message,
        codes: Vec::new(),
    }
}

fn api_server_condition(nodes: Option<NodeCounts>) -> Condition {
    match nodes {
        Some(_) => condition(
            API_SERVER_AVAILABLE,
            TRUE,
            "HealthzRequestSucceeded",
            "The shoot's API server answers.".into(),
        ),
        None => condition(
            API_SERVER_AVAILABLE,
            FALSE,
            "HealthzRequestFailed",
            "The shoot's API server does not answer.".into(),
        ),
    }
}

fn node_condition(input: &StatusInput<'_>) -> Condition {
    let Some(nodes) = input.nodes else {
        return condition(
            EVERY_NODE_READY,
            UNKNOWN,
            "NodesUnknown",
            "The shoot's nodes cannot be listed.".into(),
        );
    };
    if input.hibernation_wanted {
        return if nodes.total == 0 {
            condition(
                EVERY_NODE_READY,
                TRUE,
                "ShootHibernated",
                "The shoot is hibernated and has no nodes.".into(),
            )
        } else {
            condition(
                EVERY_NODE_READY,
                PROGRESSING,
                "ShootHibernating",
                format!("{} nodes are left while hibernating.", nodes.total),
            )
        };
    }
    let wanted = usize::try_from(input.minimum_nodes).unwrap_or(0);
    if nodes.ready < nodes.total {
        condition(
            EVERY_NODE_READY,
            FALSE,
            "NodesNotReady",
            format!("{} of {} nodes are ready.", nodes.ready, nodes.total),
        )
    } else if nodes.total < wanted {
        condition(
            EVERY_NODE_READY,
            FALSE,
            "MissingNodes",
            format!(
                "{} nodes registered, at least {wanted} expected.",
                nodes.total
            ),
        )
    } else {
        condition(
            EVERY_NODE_READY,
            TRUE,
            "EveryNodeReady",
            format!("All {} nodes are ready.", nodes.total),
        )
    }
}

fn worker_condition(worker: Option<&WorkerObservation>) -> Condition {
    let Some(w) = worker else {
        return condition(
            SYSTEM_COMPONENTS_HEALTHY,
            PROGRESSING,
            "WorkerMissing",
            "The Worker is not deployed yet.".into(),
        );
    };
    match w.last_operation_state.as_deref() {
        _ if w.reconciled() => condition(
            SYSTEM_COMPONENTS_HEALTHY,
            TRUE,
            "WorkerReconciled",
            "The Worker is reconciled.".into(),
        ),
        Some(STATE_ERROR | STATE_FAILED) => condition(
            SYSTEM_COMPONENTS_HEALTHY,
            FALSE,
            "WorkerUnhealthy",
            w.last_operation_description.clone(),
        ),
        _ => condition(
            SYSTEM_COMPONENTS_HEALTHY,
            PROGRESSING,
            "WorkerProgressing",
            "The Worker is being reconciled.".into(),
        ),
    }
}

/// The conditions in `next`'s order, with times carried over: the
/// transition time stays while the status stays, and the update time stays
/// while status, reason and message stay. Conditions of other types that
/// `previous` has (written by someone else) are kept after them.
pub fn merge_conditions(
    previous: &[Condition],
    next: Vec<Condition>,
    now: DateTime<Utc>,
) -> Vec<Condition> {
    let by_type: BTreeMap<&str, &Condition> =
        previous.iter().map(|c| (c.type_.as_str(), c)).collect();
    let mut out: Vec<Condition> = next
        .into_iter()
        .map(|mut c| {
            let old = by_type.get(c.type_.as_str());
            c.last_transition_time = match old {
                Some(o) if o.status == c.status => o.last_transition_time.or(Some(Time(now))),
                _ => Some(Time(now)),
            };
            c.last_update_time = match old {
                Some(o)
                    if o.status == c.status && o.reason == c.reason && o.message == c.message =>
                {
                    o.last_update_time.or(Some(Time(now)))
                }
                _ => Some(Time(now)),
            };
            c
        })
        .collect();
    for old in previous {
        if !out.iter().any(|c| c.type_ == old.type_) {
            out.push(old.clone());
        }
    }
    out
}

/// What the deletion flow observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeletionObservation {
    /// The Shoot still carries gardenlet's finalizer.
    pub has_finalizer: bool,
    /// The Worker exists; and whether its deletion was requested.
    pub worker: Option<bool>,
    /// Machine deployments, sets and machines in the control namespace.
    pub machine_objects: usize,
    /// Local VMs recorded in the control namespace.
    pub vms: usize,
    /// The shoot's API server and controllers run.
    pub shoot_cluster_running: bool,
    /// The Cluster resource exists.
    pub cluster: bool,
    /// The control namespace: `None` absent, `Some(terminating)`.
    pub namespace: Option<bool>,
    /// The shoot's data directory exists.
    pub data_dir: bool,
}

/// One step of the deletion flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeletionAction {
    /// Start the shoot's API server and machine controllers (after a
    /// restart), so machines can be drained and deleted.
    StartShootCluster,
    DeleteWorker,
    /// Delete machine deployments, sets and machines the Worker's actuator
    /// left behind, so the machine controllers remove them.
    DeleteMachineObjects,
    /// Remove VMs no machine owns any more.
    DeleteOrphanVms,
    StopShootCluster,
    DeleteCluster,
    DeleteNamespace,
    RemoveDataDir,
    RemoveFinalizer,
}

/// The steps to take now and what is still awaited (`None`: the deletion is
/// complete once the steps ran).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeletionPlan {
    pub actions: Vec<DeletionAction>,
    pub waiting_for: Option<&'static str>,
}

/// The deletion flow: the Worker goes first and is awaited; then whatever
/// machines are left are deleted and awaited while the shoot's machine
/// controllers still run; only then do the controllers and the API server
/// stop, the Cluster and the namespace go, and once the namespace is gone
/// the data directory and the finalizer.
pub fn deletion_plan(o: &DeletionObservation) -> DeletionPlan {
    use DeletionAction::*;
    if !o.has_finalizer {
        return DeletionPlan::default();
    }
    let machines_left = o.worker.is_some() || o.machine_objects > 0 || o.vms > 0;
    let mut actions = Vec::new();
    if machines_left && !o.shoot_cluster_running {
        actions.push(StartShootCluster);
    }
    if let Some(deleting) = o.worker {
        if !deleting {
            actions.push(DeleteWorker);
        }
        return DeletionPlan {
            actions,
            waiting_for: Some("the Worker to be deleted"),
        };
    }
    if o.machine_objects > 0 {
        actions.push(DeleteMachineObjects);
        return DeletionPlan {
            actions,
            waiting_for: Some("the machines to be deleted"),
        };
    }
    if o.vms > 0 {
        actions.push(DeleteOrphanVms);
        return DeletionPlan {
            actions,
            waiting_for: Some("the VMs to be deleted"),
        };
    }
    if o.shoot_cluster_running {
        actions.push(StopShootCluster);
    }
    if o.cluster {
        actions.push(DeleteCluster);
    }
    match o.namespace {
        Some(terminating) => {
            if !terminating {
                actions.push(DeleteNamespace);
            }
            DeletionPlan {
                actions,
                waiting_for: Some("the control namespace to be deleted"),
            }
        }
        None => {
            if o.data_dir {
                actions.push(RemoveDataDir);
            }
            actions.push(RemoveFinalizer);
            DeletionPlan {
                actions,
                waiting_for: None,
            }
        }
    }
}

/// The last operation of a deletion in progress (kept unchanged while it
/// waits on the same thing).
pub fn deletion_operation(
    previous: Option<&LastOperation>,
    plan: &DeletionPlan,
    now: DateTime<Utc>,
) -> LastOperation {
    keep_time(
        previous,
        LastOperation {
            description: match plan.waiting_for {
                Some(w) => format!("Deleting the shoot: waiting for {w}."),
                None => "Shoot cluster has been deleted.".to_string(),
            },
            last_update_time: Some(Time(now)),
            progress: if plan.waiting_for.is_some() { 50 } else { 100 },
            state: STATE_PROCESSING.to_string(),
            type_: OP_DELETE.to_string(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-01-01T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn reconciled_worker() -> WorkerObservation {
        WorkerObservation {
            generation: 2,
            observed_generation: 2,
            last_operation_state: Some(STATE_SUCCEEDED.into()),
            ..WorkerObservation::default()
        }
    }

    #[test]
    fn worker_reconciled_needs_success_for_this_generation_after_the_request() {
        let asked = now();
        let later = now() + chrono::Duration::seconds(5);
        let earlier = now() - chrono::Duration::seconds(5);
        let table: Vec<(&str, WorkerObservation, bool)> = vec![
            ("succeeded", reconciled_worker(), true),
            (
                "old generation",
                WorkerObservation {
                    observed_generation: 1,
                    ..reconciled_worker()
                },
                false,
            ),
            (
                "processing",
                WorkerObservation {
                    last_operation_state: Some(STATE_PROCESSING.into()),
                    ..reconciled_worker()
                },
                false,
            ),
            (
                "no operation",
                WorkerObservation {
                    last_operation_state: None,
                    ..reconciled_worker()
                },
                false,
            ),
            (
                "request pending, operation older",
                WorkerObservation {
                    operation_annotation: true,
                    requested_at: Some(asked),
                    last_operation_time: Some(earlier),
                    ..reconciled_worker()
                },
                false,
            ),
            (
                "request pending, operation newer",
                WorkerObservation {
                    operation_annotation: true,
                    requested_at: Some(asked),
                    last_operation_time: Some(later),
                    ..reconciled_worker()
                },
                true,
            ),
            (
                "request removed",
                WorkerObservation {
                    operation_annotation: false,
                    requested_at: Some(asked),
                    last_operation_time: Some(earlier),
                    ..reconciled_worker()
                },
                true,
            ),
        ];
        for (name, w, want) in table {
            assert_eq!(w.reconciled(), want, "{name}");
        }
    }

    fn input<'a>(worker: Option<&'a WorkerObservation>) -> StatusInput<'a> {
        StatusInput {
            previous: None,
            technical_id: "shoot--p--s",
            generation: 3,
            hibernation_wanted: false,
            worker,
            machines: 2,
            nodes: Some(NodeCounts { total: 2, ready: 2 }),
            minimum_nodes: 2,
            waiting: None,
            error: None,
            now: now(),
        }
    }

    #[test]
    fn a_shoot_waiting_for_its_etcd_says_so_before_the_worker() {
        let mut i = input(None);
        i.waiting = Some("Waiting for etcd-main to be ready (0/1 members ready).");
        let v = shoot_status(&i);
        assert!(!v.done);
        let op = v.status.last_operation.unwrap();
        assert_eq!(op.state, STATE_PROCESSING);
        assert_eq!(op.progress, 10);
        assert_eq!(
            op.description,
            "Waiting for etcd-main to be ready (0/1 members ready)."
        );
        assert!(v.status.last_errors.is_empty(), "waiting is no error");
    }

    fn cond<'a>(s: &'a ShootStatus, t: &str) -> (&'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == t).unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn status_verdicts() {
        let done = reconciled_worker();
        let busy = WorkerObservation {
            last_operation_state: Some(STATE_PROCESSING.into()),
            ..reconciled_worker()
        };
        let failed = WorkerObservation {
            last_operation_state: Some(STATE_ERROR.into()),
            last_operation_description: "quota".into(),
            ..reconciled_worker()
        };
        let created = ShootStatus {
            last_operation: Some(LastOperation {
                type_: OP_CREATE.into(),
                state: STATE_SUCCEEDED.into(),
                ..LastOperation::default()
            }),
            observed_generation: 2,
            ..ShootStatus::default()
        };
        // (name, input, type, state, done, hibernated, observedGeneration)
        let table: Vec<(&str, StatusInput, &str, &str, bool, bool, i64)> = vec![
            (
                "first pass",
                input(None),
                OP_CREATE,
                STATE_PROCESSING,
                false,
                false,
                0,
            ),
            (
                "worker busy",
                input(Some(&busy)),
                OP_CREATE,
                STATE_PROCESSING,
                false,
                false,
                0,
            ),
            (
                "worker done",
                input(Some(&done)),
                OP_CREATE,
                STATE_SUCCEEDED,
                true,
                false,
                3,
            ),
            (
                "after a successful create",
                StatusInput {
                    previous: Some(&created),
                    ..input(Some(&busy))
                },
                OP_RECONCILE,
                STATE_PROCESSING,
                false,
                false,
                2,
            ),
            (
                "a step failed",
                StatusInput {
                    error: Some("boom"),
                    ..input(Some(&done))
                },
                OP_CREATE,
                STATE_ERROR,
                false,
                false,
                0,
            ),
            (
                "hibernating, machines left",
                StatusInput {
                    hibernation_wanted: true,
                    ..input(Some(&done))
                },
                OP_CREATE,
                STATE_PROCESSING,
                false,
                false,
                0,
            ),
            (
                "hibernated",
                StatusInput {
                    hibernation_wanted: true,
                    machines: 0,
                    nodes: Some(NodeCounts::default()),
                    ..input(Some(&done))
                },
                OP_CREATE,
                STATE_SUCCEEDED,
                true,
                true,
                3,
            ),
            (
                "worker failed",
                input(Some(&failed)),
                OP_CREATE,
                STATE_PROCESSING,
                false,
                false,
                0,
            ),
        ];
        for (name, i, ty, state, done, hibernated, observed) in table {
            let v = shoot_status(&i);
            let op = v.status.last_operation.as_ref().unwrap();
            assert_eq!(
                (op.type_.as_str(), op.state.as_str()),
                (ty, state),
                "{name}"
            );
            assert_eq!(v.done, done, "{name}");
            assert_eq!(v.status.hibernated, hibernated, "{name}");
            assert_eq!(v.status.observed_generation, observed, "{name}");
            assert_eq!(v.status.technical_id, "shoot--p--s", "{name}");
            assert_eq!(v.status.last_errors.is_empty(), i.error.is_none(), "{name}");
        }
        let v = shoot_status(&input(Some(&failed)));
        assert_eq!(
            cond(&v.status, SYSTEM_COMPONENTS_HEALTHY),
            ("False", "WorkerUnhealthy")
        );
    }

    #[test]
    fn node_condition_verdicts() {
        let done = reconciled_worker();
        type Row<'a> = (&'a str, Option<NodeCounts>, bool, (&'a str, &'a str));
        let table: Vec<Row> = vec![
            (
                "all ready",
                Some(NodeCounts { total: 2, ready: 2 }),
                false,
                ("True", "EveryNodeReady"),
            ),
            (
                "one not ready",
                Some(NodeCounts { total: 2, ready: 1 }),
                false,
                ("False", "NodesNotReady"),
            ),
            (
                "too few",
                Some(NodeCounts { total: 1, ready: 1 }),
                false,
                ("False", "MissingNodes"),
            ),
            ("no answer", None, false, ("Unknown", "NodesUnknown")),
            (
                "hibernated",
                Some(NodeCounts::default()),
                true,
                ("True", "ShootHibernated"),
            ),
            (
                "hibernating",
                Some(NodeCounts { total: 1, ready: 1 }),
                true,
                ("Progressing", "ShootHibernating"),
            ),
        ];
        for (name, nodes, hibernation_wanted, want) in table {
            let v = shoot_status(&StatusInput {
                nodes,
                hibernation_wanted,
                ..input(Some(&done))
            });
            assert_eq!(cond(&v.status, EVERY_NODE_READY), want, "{name}");
            let api = cond(&v.status, API_SERVER_AVAILABLE).0;
            assert_eq!(
                api,
                if nodes.is_some() { "True" } else { "False" },
                "{name}"
            );
        }
    }

    #[test]
    fn an_unchanged_status_is_stable() {
        let done = reconciled_worker();
        let first = shoot_status(&input(Some(&done))).status;
        let later = now() + chrono::Duration::minutes(5);
        let second = shoot_status(&StatusInput {
            previous: Some(&first),
            now: later,
            ..input(Some(&done))
        });
        // A Create that succeeded is followed by a Reconcile; the one after
        // that changes nothing.
        let third = shoot_status(&StatusInput {
            previous: Some(&second.status),
            now: later + chrono::Duration::minutes(5),
            ..input(Some(&done))
        });
        assert_eq!(second.status, third.status);
        assert_eq!(first.conditions, second.status.conditions);
    }

    #[test]
    fn merge_conditions_keeps_times_and_foreign_conditions() {
        let t0 = now();
        let t1 = now() + chrono::Duration::minutes(1);
        let previous = merge_conditions(
            &[],
            vec![
                condition("A", TRUE, "R", "m".into()),
                condition("B", TRUE, "R", "m".into()),
            ],
            t0,
        );
        let mut previous = previous;
        previous.push(Condition {
            type_: "Foreign".into(),
            status: TRUE.into(),
            ..Condition::default()
        });
        let next = merge_conditions(
            &previous,
            vec![
                condition("A", TRUE, "R", "changed".into()),
                condition("B", FALSE, "R", "m".into()),
            ],
            t1,
        );
        assert_eq!(next[0].last_transition_time, Some(Time(t0)));
        assert_eq!(next[0].last_update_time, Some(Time(t1)));
        assert_eq!(next[1].last_transition_time, Some(Time(t1)));
        assert_eq!(next[2].type_, "Foreign");
    }

    #[test]
    fn deletion_steps() {
        use DeletionAction::*;
        let base = DeletionObservation {
            has_finalizer: true,
            shoot_cluster_running: true,
            cluster: true,
            namespace: Some(false),
            data_dir: true,
            ..DeletionObservation::default()
        };
        let table: Vec<(&str, DeletionObservation, Vec<DeletionAction>, bool)> = vec![
            (
                "worker first",
                DeletionObservation {
                    worker: Some(false),
                    ..base.clone()
                },
                vec![DeleteWorker],
                true,
            ),
            (
                "worker deleting, after a restart",
                DeletionObservation {
                    worker: Some(true),
                    shoot_cluster_running: false,
                    ..base.clone()
                },
                vec![StartShootCluster],
                true,
            ),
            (
                "machines left",
                DeletionObservation {
                    machine_objects: 3,
                    vms: 1,
                    ..base.clone()
                },
                vec![DeleteMachineObjects],
                true,
            ),
            (
                "orphan VMs",
                DeletionObservation {
                    vms: 2,
                    ..base.clone()
                },
                vec![DeleteOrphanVms],
                true,
            ),
            (
                "tear down",
                base.clone(),
                vec![StopShootCluster, DeleteCluster, DeleteNamespace],
                true,
            ),
            (
                "namespace terminating",
                DeletionObservation {
                    shoot_cluster_running: false,
                    cluster: false,
                    namespace: Some(true),
                    ..base.clone()
                },
                vec![],
                true,
            ),
            (
                "done",
                DeletionObservation {
                    shoot_cluster_running: false,
                    cluster: false,
                    namespace: None,
                    ..base.clone()
                },
                vec![RemoveDataDir, RemoveFinalizer],
                false,
            ),
            (
                "done, memory mode",
                DeletionObservation {
                    shoot_cluster_running: false,
                    cluster: false,
                    namespace: None,
                    data_dir: false,
                    ..base.clone()
                },
                vec![RemoveFinalizer],
                false,
            ),
            (
                "not ours",
                DeletionObservation {
                    has_finalizer: false,
                    ..base.clone()
                },
                vec![],
                false,
            ),
        ];
        for (name, o, actions, waits) in table {
            let p = deletion_plan(&o);
            assert_eq!(p.actions, actions, "{name}");
            assert_eq!(p.waiting_for.is_some(), waits, "{name}");
        }
    }
}
