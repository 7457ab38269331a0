//! What a maintenance run writes, as pure functions: which profile a shoot
//! uses, the JSON patch that applies a [`MaintenancePlan`] to exactly the
//! changed fields, `status.lastMaintenance`, and the events.
//!
//! The `Shoot` type models only part of upstream's fields, so the spec is
//! never written whole: the patch replaces single leaves (a version string)
//! by JSON pointer and carries the observed `resourceVersion` as a
//! precondition, so it applies to exactly the object the plan was made
//! from or fails with a conflict.

use chrono::{DateTime, Utc};
use gardener::maintenance::{ChangeKind, MaintenancePlan, PlannedChange};
use gardener::{Extensions, LastMaintenance, Shoot, ShootSpec, Time};
use serde_json::{Value, json};

use crate::schedule::{self, OPERATION_ANNOTATION, Trigger, state};

/// Event reason of a machine image version change (upstream's).
pub const REASON_IMAGE: &str = "MachineImageVersionMaintenance";
/// Event reason of a Kubernetes version change (upstream's).
pub const REASON_KUBERNETES: &str = "KubernetesVersionMaintenance";
/// Event reason of a maintenance that failed (upstream's).
pub const REASON_FAILED: &str = "ShootMaintenanceFailed";

/// Description of a maintenance run that found nothing to change.
pub const NOTHING_TO_DO: &str = "Nothing to maintain: every version is current";

/// The profile a shoot consumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileRef {
    /// A cluster-scoped `CloudProfile`.
    Cluster(String),
    /// A `NamespacedCloudProfile`, consumed through its rendered status.
    Namespaced {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// The profile `spec` of a shoot in `shoot_namespace` refers to:
/// `spec.cloudProfile` (kind empty means `CloudProfile`), else the legacy
/// `spec.cloudProfileName`. An NCP is looked up in the shoot's namespace,
/// or with [`Extensions::cross_project_use`] in the one the reference
/// names.
pub fn profile_ref(shoot_namespace: &str, spec: &ShootSpec, ext: Extensions) -> Option<ProfileRef> {
    if let Some(r) = &spec.cloud_profile {
        if r.name.is_empty() {
            return None;
        }
        if r.is_namespaced() {
            let namespace = match &r.namespace {
                Some(ns) if ext.cross_project_use && !ns.is_empty() => ns.clone(),
                _ => shoot_namespace.to_string(),
            };
            return Some(ProfileRef::Namespaced {
                namespace,
                name: r.name.clone(),
            });
        }
        return Some(ProfileRef::Cluster(r.name.clone()));
    }
    spec.cloud_profile_name
        .as_ref()
        .filter(|n| !n.is_empty())
        .map(|n| ProfileRef::Cluster(n.clone()))
}

/// An event to publish on the shoot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent {
    /// Warning rather than Normal.
    pub warning: bool,
    /// Machine-readable reason.
    pub reason: &'static str,
    /// The sentence.
    pub note: String,
}

/// Everything one maintenance run writes, decided up front.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// JSON patch operations on `spec` and the operation annotation,
    /// without the precondition ([`Outcome::spec_patch`] adds it).
    pub ops: Vec<Value>,
    /// Whether `ops` change the spec (not only the annotation). Only then
    /// is `Processing` written first, so an interrupted run is redone.
    pub changes_spec: bool,
    /// `status.lastMaintenance` once the run is done.
    pub last_maintenance: LastMaintenance,
    /// Events to publish once the spec patch has been applied.
    pub events: Vec<PlannedEvent>,
}

impl Outcome {
    /// `status.lastMaintenance` while the spec patch is in flight.
    pub fn processing(&self) -> LastMaintenance {
        LastMaintenance {
            state: state::PROCESSING.into(),
            failure_reason: None,
            ..self.last_maintenance.clone()
        }
    }

    /// The JSON patch to send, guarded by `resource_version`; `None` when
    /// there is nothing to patch.
    pub fn spec_patch(&self, resource_version: &str) -> Option<Value> {
        guarded(&self.ops, resource_version)
    }
}

/// `ops` preceded by a write of the observed resource version, which the
/// API server treats as a precondition; `None` without ops.
fn guarded(ops: &[Value], resource_version: &str) -> Option<Value> {
    if ops.is_empty() {
        return None;
    }
    let mut all = vec![json!({
        "op": "replace",
        "path": "/metadata/resourceVersion",
        "value": resource_version,
    })];
    all.extend(ops.iter().cloned());
    Some(Value::Array(all))
}

/// Escapes a JSON pointer token (RFC 6901).
fn pointer_token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// The JSON pointer of the field a change touches, found by worker name
/// in `spec` (the plan's index is only for humans).
pub fn change_pointer(spec: &ShootSpec, change: &PlannedChange) -> Option<String> {
    let pool = || {
        let name = change.worker.as_deref()?;
        spec.provider.workers.iter().position(|w| w.name == name)
    };
    match change.kind {
        ChangeKind::KubernetesVersion => Some("/spec/kubernetes/version".into()),
        ChangeKind::MachineImageVersion => {
            let i = pool()?;
            spec.provider.workers[i].machine.image.as_ref()?;
            Some(format!("/spec/provider/workers/{i}/machine/image/version"))
        }
        ChangeKind::WorkerKubernetesVersion => {
            let i = pool()?;
            spec.provider.workers[i].kubernetes.as_ref()?;
            Some(format!("/spec/provider/workers/{i}/kubernetes/version"))
        }
    }
}

/// The operation that removes `maintain` from the operation annotation,
/// if the shoot carries it.
fn annotation_op(shoot: &Shoot) -> Option<Value> {
    let value = shoot
        .metadata
        .annotations
        .as_ref()?
        .get(OPERATION_ANNOTATION)?;
    if !schedule::wants_maintenance(shoot.metadata.annotations.as_ref()) {
        return None;
    }
    let path = format!(
        "/metadata/annotations/{}",
        pointer_token(OPERATION_ANNOTATION)
    );
    Some(match schedule::annotation_after_maintenance(value) {
        None => json!({"op": "remove", "path": path}),
        Some(rest) => json!({"op": "replace", "path": path, "value": rest}),
    })
}

/// Decides what a maintenance run of `shoot` at `now` writes, given the
/// plan for its spec.
///
/// * Every planned change becomes a JSON patch `add` of its field (which
///   replaces an existing member and, unlike `replace`, also sets one
///   that is absent) and a Normal event with the change's reason.
/// * Every plan error becomes a Warning event and part of `failureReason`;
///   the state is `Failed` if there is any, else `Succeeded`.
/// * `maintain` is dropped from the operation annotation.
/// * An interrupted run (a `Processing` record) whose plan is now empty
///   had already applied its changes: its record is only marked done.
pub fn outcome(
    shoot: &Shoot,
    plan: &MaintenancePlan,
    trigger: Trigger,
    now: DateTime<Utc>,
) -> Outcome {
    let mut ops = Vec::new();
    let mut events = Vec::new();
    let mut skipped = Vec::new();
    for change in &plan.changes {
        let Some(path) = change_pointer(&shoot.spec, change) else {
            // The plan came from this very spec, so this cannot happen;
            // report rather than panic if it ever does.
            skipped.push(format!(
                "planned change of {} could not be located in the spec",
                change.field
            ));
            continue;
        };
        ops.push(json!({"op": "add", "path": path, "value": change.to}));
        events.push(PlannedEvent {
            warning: false,
            reason: match change.kind {
                ChangeKind::MachineImageVersion => REASON_IMAGE,
                _ => REASON_KUBERNETES,
            },
            note: change.reason.clone(),
        });
    }
    let changes_spec = !ops.is_empty();
    let mut failures: Vec<String> = plan.errors.iter().map(|e| e.to_string()).collect();
    failures.extend(skipped);
    for f in &failures {
        events.push(PlannedEvent {
            warning: true,
            reason: REASON_FAILED,
            note: f.clone(),
        });
    }
    if let Some(op) = annotation_op(shoot) {
        ops.push(op);
    }

    let previous = shoot
        .status
        .as_ref()
        .and_then(|s| s.last_maintenance.as_ref());
    let last_maintenance = match previous {
        Some(prev)
            if trigger == Trigger::Interrupted
                && plan.changes.is_empty()
                && failures.is_empty() =>
        {
            LastMaintenance {
                state: state::SUCCEEDED.into(),
                failure_reason: None,
                ..prev.clone()
            }
        }
        _ => {
            let description = plan.description();
            LastMaintenance {
                description: if description.is_empty() {
                    NOTHING_TO_DO.into()
                } else {
                    description
                },
                triggered_time: Some(Time(now)),
                state: if failures.is_empty() {
                    state::SUCCEEDED.into()
                } else {
                    state::FAILED.into()
                },
                failure_reason: (!failures.is_empty()).then(|| failures.join("; ")),
            }
        }
    };
    Outcome {
        ops,
        changes_spec,
        last_maintenance,
        events,
    }
}

/// The record of a run whose spec patch the API server rejected (for
/// example by validation): `Failed` with the server's message, and a
/// Warning event. Upstream retries such a shoot in its next window.
pub fn rejected(planned: &LastMaintenance, message: &str) -> (LastMaintenance, PlannedEvent) {
    let reason = format!("the maintained spec was rejected by the API server: {message}");
    (
        LastMaintenance {
            state: state::FAILED.into(),
            failure_reason: Some(reason.clone()),
            ..planned.clone()
        },
        PlannedEvent {
            warning: true,
            reason: REASON_FAILED,
            note: reason,
        },
    )
}

/// The JSON patch that only drops `maintain` from the operation
/// annotation (after a rejected spec patch), guarded by
/// `resource_version`; `None` if the shoot does not ask for maintenance.
pub fn annotation_patch(shoot: &Shoot, resource_version: &str) -> Option<Value> {
    let op = annotation_op(shoot)?;
    guarded(&[op], resource_version)
}

/// The merge patch of `status.lastMaintenance`, guarded by
/// `resource_version` when given. An absent failure reason is written as
/// `null` so that an old one is removed.
pub fn status_patch(last: &LastMaintenance, resource_version: Option<&str>) -> Value {
    let mut lm = serde_json::to_value(last).unwrap_or_else(|_| json!({}));
    if let Some(obj) = lm.as_object_mut() {
        obj.entry("failureReason").or_insert(Value::Null);
    }
    let mut patch = json!({"status": {"lastMaintenance": lm}});
    if let Some(rv) = resource_version {
        patch["metadata"] = json!({"resourceVersion": rv});
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use gardener::{
        CloudProfileReference, Machine, ShootMachineImage, ShootStatus, Worker, WorkerKubernetes,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 10, 22, 5, 0).unwrap()
    }

    fn worker(name: &str, version: &str, k8s: Option<&str>) -> Worker {
        Worker {
            name: name.into(),
            machine: Machine {
                type_: "m".into(),
                image: Some(ShootMachineImage {
                    name: "gardenlinux".into(),
                    version: Some(version.into()),
                    provider_config: None,
                }),
                architecture: None,
            },
            kubernetes: k8s.map(|v| WorkerKubernetes {
                version: Some(v.into()),
                kubelet: None,
            }),
            ..Default::default()
        }
    }

    fn shoot(annotation: Option<&str>, last: Option<LastMaintenance>) -> Shoot {
        let mut s = Shoot::new("s", ShootSpec::default());
        s.metadata = ObjectMeta {
            name: Some("s".into()),
            namespace: Some("garden-dev".into()),
            annotations: annotation
                .map(|v| BTreeMap::from([(OPERATION_ANNOTATION.to_string(), v.to_string())])),
            ..Default::default()
        };
        s.spec.kubernetes.version = "1.31.1".into();
        s.spec.provider.workers = vec![
            worker("a", "1.0.0", None),
            worker("b", "1.0.0", Some("1.30.5")),
        ];
        s.status = Some(ShootStatus {
            last_maintenance: last,
            ..Default::default()
        });
        s
    }

    fn change(kind: ChangeKind, worker: Option<&str>, to: &str) -> PlannedChange {
        PlannedChange {
            kind,
            worker: worker.map(str::to_string),
            field: "f".into(),
            from: "x".into(),
            to: to.into(),
            forced: false,
            reason: format!("{kind:?} {worker:?} -> {to}"),
        }
    }

    #[test]
    fn profile_references() {
        let ext_off = Extensions::default();
        let ext_on = Extensions {
            cross_project_use: true,
            ..Default::default()
        };
        let with = |r: Option<CloudProfileReference>, legacy: Option<&str>| ShootSpec {
            cloud_profile: r,
            cloud_profile_name: legacy.map(str::to_string),
            ..Default::default()
        };
        let cross = CloudProfileReference {
            namespace: Some("other".into()),
            ..CloudProfileReference::namespaced("n")
        };
        let untyped = CloudProfileReference {
            kind: String::new(),
            name: "c".into(),
            namespace: None,
        };
        let cases: Vec<(&str, ShootSpec, Extensions, Option<ProfileRef>)> = vec![
            (
                "cloud profile",
                with(Some(CloudProfileReference::cloud_profile("c")), None),
                ext_off,
                Some(ProfileRef::Cluster("c".into())),
            ),
            (
                "empty kind is CloudProfile",
                with(Some(untyped), None),
                ext_off,
                Some(ProfileRef::Cluster("c".into())),
            ),
            (
                "legacy name",
                with(None, Some("legacy")),
                ext_off,
                Some(ProfileRef::Cluster("legacy".into())),
            ),
            (
                "reference wins over legacy name",
                with(
                    Some(CloudProfileReference::cloud_profile("c")),
                    Some("legacy"),
                ),
                ext_off,
                Some(ProfileRef::Cluster("c".into())),
            ),
            (
                "ncp in own namespace",
                with(Some(CloudProfileReference::namespaced("n")), None),
                ext_off,
                Some(ProfileRef::Namespaced {
                    namespace: "garden-dev".into(),
                    name: "n".into(),
                }),
            ),
            (
                "cross-project ignored when off",
                with(Some(cross.clone()), None),
                ext_off,
                Some(ProfileRef::Namespaced {
                    namespace: "garden-dev".into(),
                    name: "n".into(),
                }),
            ),
            (
                "cross-project honoured when on",
                with(Some(cross), None),
                ext_on,
                Some(ProfileRef::Namespaced {
                    namespace: "other".into(),
                    name: "n".into(),
                }),
            ),
            ("nothing", with(None, None), ext_off, None),
            (
                "empty name",
                with(Some(CloudProfileReference::cloud_profile("")), None),
                ext_off,
                None,
            ),
        ];
        for (name, spec, ext, want) in cases {
            assert_eq!(profile_ref("garden-dev", &spec, ext), want, "{name}");
        }
    }

    #[test]
    fn patch_touches_only_changed_fields() {
        let s = shoot(Some("maintain"), None);
        let plan = MaintenancePlan {
            changes: vec![
                change(ChangeKind::MachineImageVersion, Some("b"), "1.1.0"),
                change(ChangeKind::KubernetesVersion, None, "1.31.2"),
                change(ChangeKind::WorkerKubernetesVersion, Some("b"), "1.30.6"),
            ],
            errors: vec![],
        };
        let out = outcome(&s, &plan, Trigger::Annotation, now());
        assert!(out.changes_spec);
        assert_eq!(
            out.spec_patch("42").unwrap(),
            json!([
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/spec/provider/workers/1/machine/image/version", "value": "1.1.0"},
                {"op": "add", "path": "/spec/kubernetes/version", "value": "1.31.2"},
                {"op": "add", "path": "/spec/provider/workers/1/kubernetes/version", "value": "1.30.6"},
                {"op": "remove", "path": "/metadata/annotations/gardener.cloud~1operation"},
            ])
        );
        // The patch applied to the shoot's JSON changes exactly the planned
        // leaves and the annotation.
        let mut doc = serde_json::to_value(&s).unwrap();
        doc["metadata"]["resourceVersion"] = json!("42");
        doc["spec"]["provider"]["workers"][0]["clusterAutoscaler"] = json!({"keep": true});
        let before = doc.clone();
        let p: json_patch::Patch = serde_json::from_value(out.spec_patch("42").unwrap()).unwrap();
        json_patch::patch(&mut doc, &p).unwrap();
        let mut want = before;
        want["spec"]["provider"]["workers"][1]["machine"]["image"]["version"] = json!("1.1.0");
        want["spec"]["kubernetes"]["version"] = json!("1.31.2");
        want["spec"]["provider"]["workers"][1]["kubernetes"]["version"] = json!("1.30.6");
        want["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(OPERATION_ANNOTATION);
        assert_eq!(doc, want);

        assert_eq!(
            out.events
                .iter()
                .map(|e| (e.warning, e.reason))
                .collect::<Vec<_>>(),
            vec![
                (false, REASON_IMAGE),
                (false, REASON_KUBERNETES),
                (false, REASON_KUBERNETES)
            ]
        );
        assert_eq!(out.last_maintenance.state, state::SUCCEEDED);
        assert_eq!(out.last_maintenance.triggered_time, Some(Time(now())));
        assert_eq!(out.last_maintenance.description, plan.description());
        assert_eq!(out.processing().state, state::PROCESSING);
        assert_eq!(out.processing().description, plan.description());
    }

    #[test]
    fn outcomes() {
        let failed = gardener::Error::MaintenanceFailed {
            pool: "a".into(),
            reason: "no successor".into(),
        };
        let prev = LastMaintenance {
            description: "Machine image updated".into(),
            triggered_time: Some(Time(now() - chrono::Duration::minutes(3))),
            state: state::PROCESSING.into(),
            failure_reason: None,
        };
        struct Row {
            name: &'static str,
            shoot: Shoot,
            plan: MaintenancePlan,
            trigger: Trigger,
            ops: usize,
            changes_spec: bool,
            state: &'static str,
            description: &'static str,
            failure: Option<&'static str>,
            warnings: usize,
        }
        let rows = vec![
            Row {
                name: "nothing to do in the window",
                shoot: shoot(None, None),
                plan: MaintenancePlan::default(),
                trigger: Trigger::Window,
                ops: 0,
                changes_spec: false,
                state: state::SUCCEEDED,
                description: NOTHING_TO_DO,
                failure: None,
                warnings: 0,
            },
            Row {
                name: "nothing to do, asked by annotation: only the annotation goes",
                shoot: shoot(Some("maintain"), None),
                plan: MaintenancePlan::default(),
                trigger: Trigger::Annotation,
                ops: 1,
                changes_spec: false,
                state: state::SUCCEEDED,
                description: NOTHING_TO_DO,
                failure: None,
                warnings: 0,
            },
            Row {
                name: "other operations in the annotation are kept",
                shoot: shoot(Some("maintain;reconcile"), None),
                plan: MaintenancePlan::default(),
                trigger: Trigger::Annotation,
                ops: 1,
                changes_spec: false,
                state: state::SUCCEEDED,
                description: NOTHING_TO_DO,
                failure: None,
                warnings: 0,
            },
            Row {
                name: "an expired version without successor fails with a warning",
                shoot: shoot(None, None),
                plan: MaintenancePlan {
                    changes: vec![],
                    errors: vec![failed.clone()],
                },
                trigger: Trigger::Window,
                ops: 0,
                changes_spec: false,
                state: state::FAILED,
                description: "maintenance of worker pool \"a\" failed: no successor",
                failure: Some("maintenance of worker pool \"a\" failed: no successor"),
                warnings: 1,
            },
            Row {
                name: "one pool fails, the other is updated",
                shoot: shoot(None, None),
                plan: MaintenancePlan {
                    changes: vec![change(ChangeKind::MachineImageVersion, Some("b"), "1.1.0")],
                    errors: vec![failed],
                },
                trigger: Trigger::Window,
                ops: 1,
                changes_spec: true,
                state: state::FAILED,
                description: "MachineImageVersion Some(\"b\") -> 1.1.0; maintenance of worker pool \"a\" failed: no successor",
                failure: Some("maintenance of worker pool \"a\" failed: no successor"),
                warnings: 1,
            },
            Row {
                name: "interrupted after the spec patch: only marked done",
                shoot: shoot(None, Some(prev.clone())),
                plan: MaintenancePlan::default(),
                trigger: Trigger::Interrupted,
                ops: 0,
                changes_spec: false,
                state: state::SUCCEEDED,
                description: "Machine image updated",
                failure: None,
                warnings: 0,
            },
            Row {
                name: "interrupted before the spec patch: done again",
                shoot: shoot(None, Some(prev)),
                plan: MaintenancePlan {
                    changes: vec![change(ChangeKind::MachineImageVersion, Some("a"), "1.1.0")],
                    errors: vec![],
                },
                trigger: Trigger::Interrupted,
                ops: 1,
                changes_spec: true,
                state: state::SUCCEEDED,
                description: "MachineImageVersion Some(\"a\") -> 1.1.0",
                failure: None,
                warnings: 0,
            },
            Row {
                name: "a change naming an unknown pool is reported, not applied",
                shoot: shoot(None, None),
                plan: MaintenancePlan {
                    changes: vec![change(ChangeKind::MachineImageVersion, Some("zz"), "1.1.0")],
                    errors: vec![],
                },
                trigger: Trigger::Window,
                ops: 0,
                changes_spec: false,
                state: state::FAILED,
                description: "MachineImageVersion Some(\"zz\") -> 1.1.0",
                failure: Some("planned change of f could not be located in the spec"),
                warnings: 1,
            },
        ];
        for r in rows {
            let out = outcome(&r.shoot, &r.plan, r.trigger, now());
            assert_eq!(out.ops.len(), r.ops, "{}", r.name);
            assert_eq!(out.changes_spec, r.changes_spec, "{}", r.name);
            assert_eq!(out.last_maintenance.state, r.state, "{}", r.name);
            assert_eq!(
                out.last_maintenance.description, r.description,
                "{}",
                r.name
            );
            assert_eq!(
                out.last_maintenance.failure_reason.as_deref(),
                r.failure,
                "{}",
                r.name
            );
            assert_eq!(
                out.events.iter().filter(|e| e.warning).count(),
                r.warnings,
                "{}",
                r.name
            );
            assert_eq!(out.spec_patch("1").is_some(), r.ops > 0, "{}", r.name);
        }
    }

    #[test]
    fn annotation_ops() {
        let kept = outcome(
            &shoot(Some("maintain;reconcile"), None),
            &MaintenancePlan::default(),
            Trigger::Annotation,
            now(),
        );
        assert_eq!(
            kept.ops,
            vec![
                json!({"op": "replace", "path": "/metadata/annotations/gardener.cloud~1operation", "value": "reconcile"})
            ]
        );
        let unrelated = shoot(Some("reconcile"), None);
        assert_eq!(annotation_patch(&unrelated, "1"), None);
        assert_eq!(
            annotation_patch(&shoot(Some("maintain"), None), "7"),
            Some(json!([
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "remove", "path": "/metadata/annotations/gardener.cloud~1operation"},
            ]))
        );
    }

    #[test]
    fn status_patches() {
        let lm = LastMaintenance {
            description: "d".into(),
            triggered_time: Some(Time(now())),
            state: state::SUCCEEDED.into(),
            failure_reason: None,
        };
        assert_eq!(
            status_patch(&lm, Some("9")),
            json!({
                "metadata": {"resourceVersion": "9"},
                "status": {"lastMaintenance": {
                    "description": "d",
                    "triggeredTime": "2026-03-10T22:05:00Z",
                    "state": "Succeeded",
                    "failureReason": null,
                }},
            })
        );
        let (failed, ev) = rejected(&lm, "spec.kubernetes.version: Forbidden");
        assert_eq!(failed.state, state::FAILED);
        assert_eq!(failed.triggered_time, lm.triggered_time);
        assert!(ev.warning && ev.note.contains("Forbidden"));
        assert_eq!(
            status_patch(&failed, None)["status"]["lastMaintenance"]["failureReason"],
            json!(
                "the maintained spec was rejected by the API server: spec.kubernetes.version: Forbidden"
            )
        );
    }
}
