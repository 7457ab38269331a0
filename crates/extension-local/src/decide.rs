//! The decisions of the Worker controller that the `worker` crate does not
//! already take: which Workers are ours, the operation type, which machines
//! to mark for forced deletion, where user data comes from, the steps of a
//! deletion, the rolling-update condition, and the next status. All pure;
//! the executor in [`crate::controller`] observes, calls these, and writes.

use std::collections::BTreeMap;

use api::Machine;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use worker::{
    Condition, InPlaceUpdatesWorkerStatus, LastError, LastOperation, MachineUpdateStrategy,
    ObservedMachineSet, WantedDeployment, Worker, WorkerMachineDeployment, WorkerStatus,
};

use crate::error::Error;

/// The finalizer that keeps a Worker until its machines are gone.
pub const FINALIZER: &str = "extensions.gardener.cloud/worker";

/// Label that makes MCM delete a machine without draining it (value
/// [`api::labels::TRUE`]); set on every machine of a hibernating or deleted
/// Worker so the machines go fast.
pub const FORCE_DELETION_LABEL: &str = api::labels::FORCE_DELETION;

/// Condition type saying whether a pool is being rolled to new machines.
pub const CONDITION_ROLLING_UPDATE: &str = "RollingUpdate";

/// The Worker `spec.class` this controller serves besides an absent one.
pub const EXTENSION_CLASS_SHOOT: &str = "shoot";

/// Whether this controller reconciles the Worker: `type: local` of the
/// shoot extension class.
pub fn responsible(worker: &Worker) -> bool {
    worker.spec.type_ == worker::WORKER_TYPE_LOCAL
        && worker
            .spec
            .class
            .as_deref()
            .is_none_or(|c| c.is_empty() || c == EXTENSION_CLASS_SHOOT)
}

/// Whether the Worker carries [`FINALIZER`].
pub fn has_finalizer(worker: &Worker) -> bool {
    worker
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

/// The annotation gardenlet sets to ask for a reconcile; removed once one
/// went through.
pub const OPERATION_ANNOTATION: &str = "gardener.cloud/operation";

/// Whether gardenlet asked for a reconcile that has not been acknowledged.
pub fn operation_requested(worker: &Worker) -> bool {
    worker
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.get(OPERATION_ANNOTATION).map(String::as_str) == Some("reconcile"))
}

/// The operation a reconcile performs, as `lastOperation.type`: `Delete`
/// once deletion started; `Create` until a first operation succeeded;
/// `Reconcile` afterwards.
pub fn operation_type(worker: &Worker) -> &'static str {
    if worker.metadata.deletion_timestamp.is_some() {
        return "Delete";
    }
    match worker
        .status
        .as_ref()
        .and_then(|s| s.last_operation.as_ref())
    {
        None => "Create",
        Some(op) if op.type_ == "Create" && op.state != "Succeeded" => "Create",
        Some(_) => "Reconcile",
    }
}

/// The machines that still need the force-deletion label.
pub fn force_deletion_targets(machines: &[Machine]) -> Vec<String> {
    machines
        .iter()
        .filter(|m| {
            m.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(FORCE_DELETION_LABEL))
                .map(String::as_str)
                != Some(api::labels::TRUE)
        })
        .filter_map(|m| m.metadata.name.clone())
        .collect()
}

/// Where a pool's user data lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserDataRef {
    /// The pool.
    pub pool: String,
    /// Secret in the Worker's namespace.
    pub secret: String,
    /// Key in the secret.
    pub key: String,
}

/// The secrets to read user data from, one per pool that names one; pools
/// without a reference use their inline `userData`.
pub fn user_data_refs(worker: &Worker) -> Vec<UserDataRef> {
    worker
        .spec
        .pools
        .iter()
        .filter_map(|p| {
            let r = p.user_data_secret_ref.as_ref()?;
            Some(UserDataRef {
                pool: p.name.clone(),
                secret: r.name.clone(),
                key: r.key.clone(),
            })
        })
        .collect()
}

/// The user data a reference points at, or why it cannot be had.
pub fn user_data(reference: &UserDataRef, secret: Option<&Secret>) -> Result<Vec<u8>, Error> {
    secret
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(&reference.key))
        .map(|b| b.0.clone())
        .filter(|b| !b.is_empty())
        .ok_or_else(|| Error::UserDataMissing {
            pool: reference.pool.clone(),
            secret: reference.secret.clone(),
            key: reference.key.clone(),
        })
}

/// Whether any wanted deployment still has a machine set of another class:
/// machines are being replaced.
pub fn rolling_update(wanted: &[WantedDeployment], sets: &[ObservedMachineSet]) -> bool {
    wanted.iter().any(|w| {
        sets.iter()
            .any(|s| s.owner == w.name && s.class_name != w.class_name)
    })
}

/// The in-place hashes to record: automatically updated pools as soon as
/// their deployments carry the new class, manually updated ones only once
/// the rollout is done (§4.3 step 5); other entries are kept.
pub fn in_place_hashes(
    worker: &Worker,
    planned: &BTreeMap<String, String>,
    done: bool,
) -> BTreeMap<String, String> {
    let mut map = worker
        .status
        .as_ref()
        .and_then(|s| s.in_place_updates.as_ref())
        .map(|u| u.worker_pool_to_hash_map.clone())
        .unwrap_or_default();
    map.retain(|pool, _| worker.spec.pools.iter().any(|p| &p.name == pool));
    for pool in &worker.spec.pools {
        let Some(hash) = planned.get(&pool.name) else {
            continue;
        };
        let manual = pool.update_strategy == Some(MachineUpdateStrategy::ManualInPlaceUpdate);
        if done || !manual {
            map.insert(pool.name.clone(), hash.clone());
        }
    }
    map
}

/// What exists in the namespace of a Worker being deleted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeletionObservation {
    /// Machine deployments: name and whether deletion started.
    pub deployments: Vec<(String, bool)>,
    /// Machines: name, whether deletion started, whether force-labelled.
    pub machines: Vec<(String, bool, bool)>,
    /// Machine classes: name and whether deletion started.
    pub classes: Vec<(String, bool)>,
    /// Machine-class secrets: name and whether deletion started.
    pub secrets: Vec<(String, bool)>,
}

/// The steps of one deletion pass (§4.3 "Delete"): force-label every
/// machine and delete every deployment; once no machine and no deployment
/// is left, delete classes and class secrets; once those are gone, drop the
/// finalizer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeletionPlan {
    /// Machines to label `force-deletion: "True"`.
    pub label_machines: Vec<String>,
    /// Deployments to scale to zero and delete.
    pub delete_deployments: Vec<String>,
    /// Classes to delete.
    pub delete_classes: Vec<String>,
    /// Class secrets to delete.
    pub delete_secrets: Vec<String>,
    /// What is still awaited, if anything.
    pub waiting: Option<String>,
    /// Everything is gone: remove the finalizer.
    pub remove_finalizer: bool,
}

/// Decides one deletion pass.
pub fn deletion_plan(obs: &DeletionObservation) -> DeletionPlan {
    let live = |v: &[(String, bool)]| -> Vec<String> {
        v.iter()
            .filter(|(_, deleting)| !deleting)
            .map(|(n, _)| n.clone())
            .collect()
    };
    let mut plan = DeletionPlan {
        label_machines: obs
            .machines
            .iter()
            .filter(|(_, _, labelled)| !labelled)
            .map(|(n, _, _)| n.clone())
            .collect(),
        delete_deployments: live(&obs.deployments),
        ..DeletionPlan::default()
    };
    if !obs.machines.is_empty() || !obs.deployments.is_empty() {
        plan.waiting = Some(format!(
            "Waiting until all machines are deleted ({} machine(s) and {} machine deployment(s) left)...",
            obs.machines.len(),
            obs.deployments.len()
        ));
        return plan;
    }
    plan.delete_classes = live(&obs.classes);
    plan.delete_secrets = live(&obs.secrets);
    if !obs.classes.is_empty() || !obs.secrets.is_empty() {
        plan.waiting = Some(format!(
            "Waiting until machine classes and their secrets are deleted ({} class(es), {} secret(s) left)...",
            obs.classes.len(),
            obs.secrets.len()
        ));
        return plan;
    }
    plan.remove_finalizer = true;
    plan
}

/// Where an operation stands, for `lastOperation`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Done.
    Succeeded,
    /// Under way; the description says what is awaited.
    Processing(String),
    /// Failed; also recorded as `lastError`.
    Failed(String),
}

/// What a pass learnt, to be folded into the status.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusUpdate {
    /// `Create`, `Reconcile` or `Delete` ([`operation_type`]).
    pub operation: &'static str,
    /// The Worker's `metadata.generation`.
    pub generation: i64,
    /// The outcome.
    pub progress: Progress,
    /// `status.machineDeployments`, if the pass planned them.
    pub machine_deployments: Option<Vec<WorkerMachineDeployment>>,
    /// `status.providerStatus`, if the pass planned it.
    pub provider_status: Option<Value>,
    /// Whether machines are being replaced, if the pass looked.
    pub rolling_update: Option<bool>,
    /// `status.inPlaceUpdates.workerPoolToHashMap`, if the pass computed it.
    pub in_place_hashes: Option<BTreeMap<String, String>>,
}

impl StatusUpdate {
    /// An update that only reports progress.
    pub fn progress(operation: &'static str, generation: i64, progress: Progress) -> StatusUpdate {
        StatusUpdate {
            operation,
            generation,
            progress,
            machine_deployments: None,
            provider_status: None,
            rolling_update: None,
            in_place_hashes: None,
        }
    }
}

fn verb(operation: &str) -> &'static str {
    match operation {
        "Delete" => "deleting",
        "Create" => "creating",
        _ => "reconciling",
    }
}

/// The status after a pass. Timestamps move only when what they date
/// changed, so an unchanged outcome yields an unchanged status and the
/// executor can skip the write (and the watch event it would cause).
/// `observedGeneration` advances only when the operation succeeded.
pub fn next_status(
    current: Option<&WorkerStatus>,
    update: &StatusUpdate,
    now: &Time,
) -> WorkerStatus {
    let mut status = current.cloned().unwrap_or_default();

    if let Some(mds) = &update.machine_deployments
        && (status.machine_deployments != *mds
            || status.machine_deployments_last_update_time.is_none())
        && !mds.is_empty()
    {
        status.machine_deployments = mds.clone();
        status.machine_deployments_last_update_time = Some(now.clone());
    }
    if let Some(provider_status) = &update.provider_status {
        status.provider_status = Some(provider_status.clone());
    }

    let (state, progress, description) = match &update.progress {
        Progress::Succeeded => (
            "Succeeded",
            100,
            format!(
                "Successfully {} Worker",
                match update.operation {
                    "Delete" => "deleted",
                    "Create" => "created",
                    _ => "reconciled",
                }
            ),
        ),
        Progress::Processing(msg) => ("Processing", 50, msg.clone()),
        Progress::Failed(msg) => (
            "Error",
            50,
            format!("Error {} Worker: {msg}", verb(update.operation)),
        ),
    };
    let same_operation = status.last_operation.as_ref().is_some_and(|op| {
        op.type_ == update.operation
            && op.state == state
            && op.progress == progress
            && op.description == description
    });
    if !same_operation {
        status.last_operation = Some(LastOperation {
            description,
            last_update_time: Some(now.clone().into()),
            progress,
            state: state.to_string(),
            type_: update.operation.to_string(),
        });
    }
    match &update.progress {
        Progress::Succeeded => status.last_error = None,
        Progress::Processing(_) => {}
        Progress::Failed(msg) => {
            if status.last_error.as_ref().map(|e| &e.description) != Some(msg) {
                status.last_error = Some(LastError {
                    description: msg.clone(),
                    task_id: None,
                    codes: Vec::new(),
                    last_update_time: Some(now.clone().into()),
                });
            }
        }
    }
    if update.progress == Progress::Succeeded {
        status.observed_generation = update.generation;
    }

    if let Some(rolling) = update.rolling_update {
        let (value, reason, message) = if rolling {
            (
                "True",
                "RollingUpdateInProgress",
                "Machines of at least one worker pool are being replaced.",
            )
        } else {
            ("False", "NoRollingUpdate", "No worker pool is rolling.")
        };
        set_condition(
            &mut status.conditions,
            CONDITION_ROLLING_UPDATE,
            value,
            reason,
            message,
            now,
        );
    }
    if let Some(map) = &update.in_place_hashes {
        status.in_place_updates = if map.is_empty() {
            None
        } else {
            Some(InPlaceUpdatesWorkerStatus {
                worker_pool_to_hash_map: map.clone(),
            })
        };
    }
    status
}

/// Sets a condition, keeping its transition time while the status holds
/// and its update time while nothing changes; conditions stay sorted by
/// type so the order is stable.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &Time,
) {
    let existing = conditions.iter_mut().find(|c| c.type_ == type_);
    match existing {
        Some(c) if c.status == status && c.reason == reason && c.message == message => {}
        Some(c) => {
            if c.status != status {
                c.last_transition_time = Some(now.clone());
            }
            c.status = status.to_string();
            c.reason = reason.to_string();
            c.message = message.to_string();
            c.last_update_time = Some(now.clone());
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                last_transition_time: Some(now.clone()),
                last_update_time: Some(now.clone()),
                reason: reason.to_string(),
                message: message.to_string(),
                codes: Vec::new(),
            });
            conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
        }
    }
}

/// The status as a JSON merge patch body: every field this controller
/// writes is present, cleared ones as `null`, so fields it no longer sets
/// (a resolved `lastError`) are removed rather than left behind.
pub fn status_patch(status: &WorkerStatus) -> Value {
    let mut value = serde_json::to_value(status).unwrap_or(Value::Null);
    if let Some(obj) = value.as_object_mut() {
        for key in [
            "providerStatus",
            "conditions",
            "lastError",
            "lastOperation",
            "machineDeployments",
            "machineDeploymentsLastUpdateTime",
            "inPlaceUpdates",
        ] {
            obj.entry(key).or_insert(Value::Null);
        }
    }
    serde_json::json!({ "status": value })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::SecretKeySelector;
    use serde_json::json;
    use worker::{WorkerPool, WorkerSpec};

    use super::*;

    fn time(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + secs).unwrap_or_default())
    }

    fn worker(type_: &str, class: Option<&str>) -> Worker {
        let mut w = Worker::new(
            "w",
            WorkerSpec {
                type_: type_.to_string(),
                class: class.map(str::to_string),
                ..WorkerSpec::default()
            },
        );
        w.metadata.namespace = Some("shoot--p--s".into());
        w
    }

    fn with_last_op(mut w: Worker, type_: &str, state: &str) -> Worker {
        w.status = Some(WorkerStatus {
            last_operation: Some(LastOperation {
                type_: type_.into(),
                state: state.into(),
                ..LastOperation::default()
            }),
            ..WorkerStatus::default()
        });
        w
    }

    #[test]
    fn responsibility_by_type_and_class() {
        let cases = [
            ("local", None, true),
            ("local", Some(""), true),
            ("local", Some("shoot"), true),
            ("local", Some("seed"), false),
            ("aws", None, false),
            ("", None, false),
        ];
        for (t, c, want) in cases {
            assert_eq!(responsible(&worker(t, c)), want, "{t} {c:?}");
        }
    }

    #[test]
    fn operation_types() {
        let fresh = worker("local", None);
        let mut deleting = with_last_op(worker("local", None), "Reconcile", "Succeeded");
        deleting.metadata.deletion_timestamp = Some(time(0));
        let cases = [
            (fresh.clone(), "Create"),
            (
                with_last_op(fresh.clone(), "Create", "Processing"),
                "Create",
            ),
            (with_last_op(fresh.clone(), "Create", "Error"), "Create"),
            (
                with_last_op(fresh.clone(), "Create", "Succeeded"),
                "Reconcile",
            ),
            (
                with_last_op(fresh.clone(), "Reconcile", "Error"),
                "Reconcile",
            ),
            (deleting, "Delete"),
        ];
        for (w, want) in cases {
            assert_eq!(operation_type(&w), want, "{:?}", w.status);
        }
    }

    #[test]
    fn finalizer_detection() {
        let mut w = worker("local", None);
        assert!(!has_finalizer(&w));
        w.metadata.finalizers = Some(vec!["other".into(), FINALIZER.into()]);
        assert!(has_finalizer(&w));
    }

    #[test]
    fn force_deletion_skips_labelled_machines() {
        let machine = |name: &str, label: Option<&str>| {
            let mut m: Machine = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"class": {"kind": "MachineClass", "name": "c"}},
            }))
            .unwrap();
            if let Some(v) = label {
                m.metadata.labels = Some(BTreeMap::from([(FORCE_DELETION_LABEL.into(), v.into())]));
            }
            m
        };
        let machines = [
            machine("a", None),
            machine("b", Some("True")),
            machine("c", Some("False")),
        ];
        assert_eq!(force_deletion_targets(&machines), vec!["a", "c"]);
        assert!(force_deletion_targets(&[]).is_empty());
    }

    #[test]
    fn user_data_lookup() {
        let mut w = worker("local", None);
        w.spec.pools = vec![
            WorkerPool {
                name: "inline".into(),
                ..WorkerPool::default()
            },
            WorkerPool {
                name: "ref".into(),
                user_data_secret_ref: Some(SecretKeySelector {
                    name: "ud".into(),
                    key: "cloud-init".into(),
                    optional: None,
                }),
                ..WorkerPool::default()
            },
        ];
        let refs = user_data_refs(&w);
        assert_eq!(refs.len(), 1);
        let r = &refs[0];
        assert_eq!((r.pool.as_str(), r.secret.as_str()), ("ref", "ud"));
        let secret = |key: &str, value: &[u8]| Secret {
            data: Some(BTreeMap::from([(
                key.to_string(),
                ByteString(value.to_vec()),
            )])),
            ..Secret::default()
        };
        let cases: [(Option<Secret>, Option<&[u8]>); 4] = [
            (Some(secret("cloud-init", b"#!")), Some(b"#!")),
            (Some(secret("other", b"#!")), None),
            (Some(secret("cloud-init", b"")), None),
            (None, None),
        ];
        for (s, want) in cases {
            let got = user_data(r, s.as_ref()).ok();
            assert_eq!(got.as_deref(), want, "{s:?}");
        }
    }

    fn wanted(name: &str, class: &str) -> WantedDeployment {
        WantedDeployment {
            name: name.into(),
            class_name: class.into(),
            ..WantedDeployment::default()
        }
    }

    fn set(owner: &str, class: &str) -> ObservedMachineSet {
        ObservedMachineSet {
            owner: owner.into(),
            class_name: class.into(),
        }
    }

    #[test]
    fn rolling_update_detection() {
        let w = [wanted("md1", "c-new"), wanted("md2", "d")];
        let cases = [
            (vec![], false),
            (vec![set("md1", "c-new"), set("md2", "d")], false),
            (vec![set("md1", "c-old"), set("md1", "c-new")], true),
            (vec![set("md1", "c-old")], true),
            // Sets of deployments no longer wanted do not count.
            (vec![set("gone", "x"), set("md1", "c-new")], false),
        ];
        for (sets, want) in cases {
            assert_eq!(rolling_update(&w, &sets), want, "{sets:?}");
        }
    }

    #[test]
    fn in_place_hash_recording() {
        let pool = |name: &str, s: Option<MachineUpdateStrategy>| WorkerPool {
            name: name.into(),
            update_strategy: s,
            ..WorkerPool::default()
        };
        let mut w = worker("local", None);
        w.spec.pools = vec![
            pool("auto", Some(MachineUpdateStrategy::AutoInPlaceUpdate)),
            pool("manual", Some(MachineUpdateStrategy::ManualInPlaceUpdate)),
            pool("rolling", None),
        ];
        w.status = Some(WorkerStatus {
            in_place_updates: Some(InPlaceUpdatesWorkerStatus {
                worker_pool_to_hash_map: BTreeMap::from([
                    ("manual".into(), "old".into()),
                    ("removed".into(), "x".into()),
                ]),
            }),
            ..WorkerStatus::default()
        });
        let planned = BTreeMap::from([
            ("auto".to_string(), "a1".to_string()),
            ("manual".to_string(), "m1".to_string()),
        ]);
        let waiting = in_place_hashes(&w, &planned, false);
        assert_eq!(
            waiting,
            BTreeMap::from([
                ("auto".into(), "a1".into()),
                ("manual".into(), "old".into())
            ])
        );
        let done = in_place_hashes(&w, &planned, true);
        assert_eq!(
            done,
            BTreeMap::from([("auto".into(), "a1".into()), ("manual".into(), "m1".into())])
        );
    }

    #[test]
    fn deletion_passes() {
        let s = |n: &str, d: bool| (n.to_string(), d);
        let obs = |deployments, machines, classes, secrets| DeletionObservation {
            deployments,
            machines,
            classes,
            secrets,
        };
        // Deployments and machines left: label, delete deployments, wait.
        let p = deletion_plan(&obs(
            vec![s("md1", false), s("md2", true)],
            vec![("m1".into(), false, false), ("m2".into(), true, true)],
            vec![s("c1", false)],
            vec![s("c1", false)],
        ));
        assert_eq!(p.label_machines, vec!["m1"]);
        assert_eq!(p.delete_deployments, vec!["md1"]);
        assert!(p.delete_classes.is_empty() && p.delete_secrets.is_empty());
        assert!(p.waiting.as_deref().unwrap_or("").contains("2 machine(s)"));
        assert!(!p.remove_finalizer);
        // Only a machine left (its deployment is gone): still no class deletion.
        let p = deletion_plan(&obs(
            vec![],
            vec![("m1".into(), true, true)],
            vec![s("c1", false)],
            vec![],
        ));
        assert!(p.delete_classes.is_empty() && p.waiting.is_some());
        // Machines gone: classes and secrets go, then wait for them.
        let p = deletion_plan(&obs(
            vec![],
            vec![],
            vec![s("c1", false), s("c2", true)],
            vec![s("c1", false)],
        ));
        assert_eq!(p.delete_classes, vec!["c1"]);
        assert_eq!(p.delete_secrets, vec!["c1"]);
        assert!(p.waiting.is_some() && !p.remove_finalizer);
        // A class held by a finalizer keeps the Worker.
        let p = deletion_plan(&obs(vec![], vec![], vec![s("c2", true)], vec![]));
        assert!(p.delete_classes.is_empty() && p.waiting.is_some());
        // Nothing left.
        let p = deletion_plan(&DeletionObservation::default());
        assert!(p.remove_finalizer && p.waiting.is_none());
    }

    fn md(name: &str, min: i32, max: i32) -> WorkerMachineDeployment {
        WorkerMachineDeployment {
            name: name.into(),
            minimum: min,
            maximum: max,
            priority: None,
        }
    }

    #[test]
    fn status_is_stable_when_nothing_changes() {
        let update = StatusUpdate {
            operation: "Create",
            generation: 3,
            progress: Progress::Processing("waiting".into()),
            machine_deployments: Some(vec![md("a", 1, 2)]),
            provider_status: Some(json!({"kind": "WorkerStatus"})),
            rolling_update: Some(false),
            in_place_hashes: Some(BTreeMap::new()),
        };
        let first = next_status(None, &update, &time(0));
        assert_eq!(first.machine_deployments, vec![md("a", 1, 2)]);
        assert_eq!(first.machine_deployments_last_update_time, Some(time(0)));
        assert_eq!(first.observed_generation, 0, "not before success");
        assert_eq!(first.conditions.len(), 1);
        let again = next_status(Some(&first), &update, &time(10));
        assert_eq!(again, first, "an unchanged outcome keeps every timestamp");

        // New deployments move their timestamp; success advances the generation.
        let done = StatusUpdate {
            progress: Progress::Succeeded,
            machine_deployments: Some(vec![md("a", 1, 2), md("b", 1, 1)]),
            rolling_update: Some(true),
            ..update.clone()
        };
        let next = next_status(Some(&first), &done, &time(20));
        assert_eq!(next.machine_deployments_last_update_time, Some(time(20)));
        assert_eq!(next.observed_generation, 3);
        let op = next.last_operation.clone().unwrap_or_default();
        assert_eq!((op.state.as_str(), op.progress), ("Succeeded", 100));
        assert_eq!(op.last_update_time, Some(time(20).into()));
        let c = &next.conditions[0];
        assert_eq!(
            (c.status.as_str(), c.last_transition_time.clone()),
            ("True", Some(time(20)))
        );
    }

    #[test]
    fn errors_set_and_success_clears_last_error() {
        let failed = StatusUpdate::progress("Reconcile", 2, Progress::Failed("boom".into()));
        let s = next_status(None, &failed, &time(0));
        assert_eq!(
            s.last_error.as_ref().map(|e| e.description.as_str()),
            Some("boom")
        );
        let op = s.last_operation.clone().unwrap_or_default();
        assert_eq!(op.state, "Error");
        assert!(op.description.contains("reconciling") && op.description.contains("boom"));
        // Processing keeps the error, success clears it.
        let processing = StatusUpdate::progress("Reconcile", 2, Progress::Processing("w".into()));
        let s = next_status(Some(&s), &processing, &time(1));
        assert!(s.last_error.is_some());
        assert_eq!(s.observed_generation, 0);
        let ok = StatusUpdate::progress("Reconcile", 2, Progress::Succeeded);
        let s = next_status(Some(&s), &ok, &time(2));
        assert!(s.last_error.is_none());
        let patch = status_patch(&s);
        assert_eq!(patch["status"]["lastError"], Value::Null);
        assert!(
            patch["status"]
                .as_object()
                .is_some_and(|o| o.contains_key("lastError"))
        );
        assert_eq!(patch["status"]["observedGeneration"], json!(2));
        // Empty deployment lists leave the recorded ones alone (upstream skips them).
        let empty = StatusUpdate {
            machine_deployments: Some(vec![]),
            ..StatusUpdate::progress("Reconcile", 2, Progress::Succeeded)
        };
        let mut with = s.clone();
        with.machine_deployments = vec![md("x", 0, 0)];
        assert_eq!(
            next_status(Some(&with), &empty, &time(3)).machine_deployments,
            vec![md("x", 0, 0)]
        );
    }

    #[test]
    fn conditions_keep_transition_times() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, "B", "True", "r", "m", &time(0));
        set_condition(&mut conditions, "A", "False", "r", "m", &time(0));
        assert_eq!(conditions[0].type_, "A", "sorted by type");
        set_condition(&mut conditions, "B", "True", "r2", "m2", &time(5));
        let b = &conditions[1];
        assert_eq!(b.last_transition_time, Some(time(0)), "status unchanged");
        assert_eq!(b.last_update_time, Some(time(5)));
        set_condition(&mut conditions, "B", "False", "r2", "m2", &time(9));
        assert_eq!(conditions[1].last_transition_time, Some(time(9)));
    }
}
