//! Scaling the dependants (spec §1.7, §1.8): the flow of levels for one
//! operation, and what one resource's scale step does given what it read.
//!
//! A flow runs its levels in ascending order, each after every lower one
//! ended; the resources of a level run concurrently; a failed level stops
//! the flow. One resource's step: sleep its initial delay, read its
//! annotations ([`on_annotations`]: gone, ignored, or go on), read
//! `/scale` ([`on_scale`]: already there, or scale), annotate, scale,
//! clear the meltdown marker, and wait briefly for readiness
//! ([`target_reached`]). The step is tried [`ATTEMPTS`] times.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::{DependentResourceInfo, ScaleInfo};

/// The replicas a resource had before it was scaled down: the scale-up
/// target.
pub const REPLICAS_ANNOTATION: &str = "dependency-watchdog.gardener.cloud/replicas";
/// Present while dependency-watchdog holds a resource down; tells
/// Gardener's shoot reconciliation not to scale it back up.
pub const MELTDOWN_ANNOTATION: &str =
    "dependency-watchdog.gardener.cloud/meltdown-protection-active";
/// Set to `true` by an operator: dependency-watchdog leaves the resource's
/// replicas alone.
pub const IGNORE_SCALING_ANNOTATION: &str = "dependency-watchdog.gardener.cloud/ignore-scaling";

/// Attempts of one resource's scale step, and the pause between them.
pub const ATTEMPTS: u32 = 3;
pub const ATTEMPT_PAUSE: Duration = Duration::from_millis(100);
/// How often and how long readiness is polled after scaling. Short on
/// purpose (spec §1.7): a retry that finds the replicas set succeeds, so a
/// level ends within about 2 × initialDelay + 5 s even if pods never turn
/// ready.
pub const READY_POLL: Duration = Duration::from_secs(1);
pub const READY_WAIT: Duration = Duration::from_secs(5);

/// Which way a flow scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    ScaleUp,
    ScaleDown,
}

impl Operation {
    pub fn label(self) -> &'static str {
        match self {
            Operation::ScaleUp => "scale_up",
            Operation::ScaleDown => "scale_down",
        }
    }

    /// The resource's settings for this operation.
    pub fn info(self, d: &DependentResourceInfo) -> &ScaleInfo {
        match self {
            Operation::ScaleUp => &d.scale_up,
            Operation::ScaleDown => &d.scale_down,
        }
    }
}

/// A resource's scale step failed for a reason that is no API error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScaleError {
    #[error("the mandatory resource {0} does not exist")]
    MandatoryMissing(String),
    #[error("annotation {REPLICAS_ANNOTATION} of {resource} is {value:?}, not an integer")]
    InvalidReplicasAnnotation { resource: String, value: String },
    #[error("{resource} did not reach {target} ready replicas in time")]
    NotReady { resource: String, target: i32 },
    #[error("the {operation} of level {level} failed: {failed}")]
    LevelFailed {
        operation: &'static str,
        level: i32,
        failed: String,
    },
}

/// The levels of a flow: ascending, each with its resources in config
/// order.
pub fn levels(
    infos: &[DependentResourceInfo],
    op: Operation,
) -> Vec<(i32, Vec<&DependentResourceInfo>)> {
    let mut by_level: BTreeMap<i32, Vec<&DependentResourceInfo>> = BTreeMap::new();
    for d in infos {
        by_level.entry(op.info(d).level).or_default().push(d);
    }
    by_level.into_iter().collect()
}

/// Whether `ignore-scaling` parses as true (Go's `strconv.ParseBool`;
/// anything else counts as false).
pub fn ignore_scaling(annotations: &BTreeMap<String, String>) -> bool {
    matches!(
        annotations
            .get(IGNORE_SCALING_ANNOTATION)
            .map(String::as_str),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True")
    )
}

/// What the step does after reading the resource's annotations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AfterAnnotations {
    /// The resource is absent and optional: done.
    Absent,
    /// `ignore-scaling` is set: done, after removing the meltdown marker
    /// if present.
    Ignored { remove_meltdown: bool },
    /// Go on to `/scale`.
    ReadScale,
}

/// Decides on the annotations read (`None`: the resource does not exist).
pub fn on_annotations(
    annotations: Option<&BTreeMap<String, String>>,
    optional: bool,
    resource: &str,
) -> Result<AfterAnnotations, ScaleError> {
    match annotations {
        None if optional => Ok(AfterAnnotations::Absent),
        None => Err(ScaleError::MandatoryMissing(resource.to_string())),
        Some(a) if ignore_scaling(a) => Ok(AfterAnnotations::Ignored {
            remove_meltdown: a.contains_key(MELTDOWN_ANNOTATION),
        }),
        Some(_) => Ok(AfterAnnotations::ReadScale),
    }
}

/// What the step does after reading `/scale`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AfterScale {
    /// Already at the operation's side of zero: done, after removing a
    /// leftover meltdown marker on scale-up.
    Unchanged { remove_meltdown: bool },
    /// Scale to `target`: first merge-patch `annotate` onto the resource
    /// (scale-down), afterwards remove the meltdown marker (scale-up).
    Scale {
        from: i32,
        target: i32,
        annotate: Option<Value>,
        remove_meltdown: bool,
    },
}

/// Decides on `spec.replicas` read from `/scale`, with the annotations
/// read before.
pub fn on_scale(
    op: Operation,
    annotations: &BTreeMap<String, String>,
    replicas: i32,
    resource: &str,
) -> Result<AfterScale, ScaleError> {
    let meltdown = annotations.contains_key(MELTDOWN_ANNOTATION);
    match op {
        Operation::ScaleDown if replicas > 0 => Ok(AfterScale::Scale {
            from: replicas,
            target: 0,
            annotate: Some(json!({"metadata": {"annotations": {
                REPLICAS_ANNOTATION: replicas.to_string(),
                MELTDOWN_ANNOTATION: "",
            }}})),
            remove_meltdown: false,
        }),
        Operation::ScaleDown => Ok(AfterScale::Unchanged {
            remove_meltdown: false,
        }),
        Operation::ScaleUp if replicas == 0 => Ok(AfterScale::Scale {
            from: 0,
            target: scale_up_target(annotations, resource)?,
            annotate: None,
            // The replicas annotation stays (upstream's code, not its
            // docs); the next scale-down overwrites it.
            remove_meltdown: true,
        }),
        Operation::ScaleUp => Ok(AfterScale::Unchanged {
            remove_meltdown: meltdown,
        }),
    }
}

/// The scale-up target: the replicas annotation, 1 without it. A value of
/// 0 or less would leave the resource down for good, so it counts as
/// absent (dependency-watchdog never writes one).
pub fn scale_up_target(
    annotations: &BTreeMap<String, String>,
    resource: &str,
) -> Result<i32, ScaleError> {
    match annotations.get(REPLICAS_ANNOTATION) {
        None => Ok(1),
        Some(v) => match v.trim().parse::<i32>() {
            Ok(n) if n > 0 => Ok(n),
            Ok(_) => Ok(1),
            Err(_) => Err(ScaleError::InvalidReplicasAnnotation {
                resource: resource.to_string(),
                value: v.clone(),
            }),
        },
    }
}

/// The merge patch that removes the meltdown marker.
pub fn remove_meltdown_patch() -> Value {
    json!({"metadata": {"annotations": {MELTDOWN_ANNOTATION: null}}})
}

/// Whether the wait after scaling is over: scale-down at 0 ready
/// replicas, scale-up at one or more. A missing field reads as 0.
pub fn target_reached(op: Operation, ready_replicas: Option<i64>) -> bool {
    let ready = ready_replicas.unwrap_or(0);
    match op {
        Operation::ScaleDown => ready == 0,
        Operation::ScaleUp => ready >= 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ResourceRef;

    fn info(name: &str, up: i32, down: i32) -> DependentResourceInfo {
        let s = |level| ScaleInfo {
            level,
            initial_delay: Duration::ZERO,
            timeout: Duration::from_secs(30),
        };
        DependentResourceInfo {
            reference: ResourceRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: name.into(),
            },
            optional: false,
            scale_up: s(up),
            scale_down: s(down),
        }
    }

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn names(levels: &[(i32, Vec<&DependentResourceInfo>)]) -> Vec<(i32, Vec<String>)> {
        levels
            .iter()
            .map(|(l, ds)| (*l, ds.iter().map(|d| d.reference.name.clone()).collect()))
            .collect()
    }

    #[test]
    fn scenarios_16_and_17_levels_in_ascending_order() {
        let infos = vec![
            info("kube-controller-manager", 1, 0),
            info("machine-controller-manager", 1, 1),
            info("cluster-autoscaler", 0, 2),
        ];
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            names(&levels(&infos, Operation::ScaleDown)),
            vec![
                (0, s(&["kube-controller-manager"])),
                (1, s(&["machine-controller-manager"])),
                (2, s(&["cluster-autoscaler"])),
            ]
        );
        assert_eq!(
            names(&levels(&infos, Operation::ScaleUp)),
            vec![
                (0, s(&["cluster-autoscaler"])),
                (
                    1,
                    s(&["kube-controller-manager", "machine-controller-manager"])
                ),
            ]
        );
        assert!(levels(&[], Operation::ScaleUp).is_empty());
    }

    #[test]
    // The tables' rows are tuples of the inputs and the outcome.
    #[allow(clippy::type_complexity)]
    fn scenarios_18_and_19_after_reading_the_annotations() {
        let melt = ann(&[
            (IGNORE_SCALING_ANNOTATION, "true"),
            (MELTDOWN_ANNOTATION, ""),
        ]);
        // (case, annotations, optional, outcome)
        let table: Vec<(
            &str,
            Option<BTreeMap<String, String>>,
            bool,
            Result<AfterAnnotations, ScaleError>,
        )> = vec![
            (
                "18: optional and absent",
                None,
                true,
                Ok(AfterAnnotations::Absent),
            ),
            (
                "18: mandatory and absent",
                None,
                false,
                Err(ScaleError::MandatoryMissing("r".into())),
            ),
            (
                "19: ignored, meltdown removed",
                Some(melt),
                false,
                Ok(AfterAnnotations::Ignored {
                    remove_meltdown: true,
                }),
            ),
            (
                "ignored without meltdown",
                Some(ann(&[(IGNORE_SCALING_ANNOTATION, "True")])),
                false,
                Ok(AfterAnnotations::Ignored {
                    remove_meltdown: false,
                }),
            ),
            (
                "ignore-scaling not a bool",
                Some(ann(&[(IGNORE_SCALING_ANNOTATION, "yes")])),
                false,
                Ok(AfterAnnotations::ReadScale),
            ),
            (
                "ignore-scaling false",
                Some(ann(&[(IGNORE_SCALING_ANNOTATION, "false")])),
                false,
                Ok(AfterAnnotations::ReadScale),
            ),
            (
                "plain",
                Some(ann(&[])),
                true,
                Ok(AfterAnnotations::ReadScale),
            ),
        ];
        for (name, a, optional, want) in table {
            assert_eq!(on_annotations(a.as_ref(), optional, "r"), want, "{name}");
        }
    }

    #[test]
    // The tables' rows are tuples of the inputs and the outcome.
    #[allow(clippy::type_complexity)]
    fn scenarios_13_16_17_after_reading_scale() {
        let down_from = |n: i32| AfterScale::Scale {
            from: n,
            target: 0,
            annotate: Some(json!({"metadata": {"annotations": {
                REPLICAS_ANNOTATION: n.to_string(), MELTDOWN_ANNOTATION: ""}}})),
            remove_meltdown: false,
        };
        let up_to = |n: i32| AfterScale::Scale {
            from: 0,
            target: n,
            annotate: None,
            remove_meltdown: true,
        };
        let after_down = ann(&[(REPLICAS_ANNOTATION, "2"), (MELTDOWN_ANNOTATION, "")]);
        // (case, operation, annotations, spec.replicas, outcome)
        let table: Vec<(
            &str,
            Operation,
            BTreeMap<String, String>,
            i32,
            Result<AfterScale, ScaleError>,
        )> = vec![
            (
                "16: down from 1",
                Operation::ScaleDown,
                ann(&[]),
                1,
                Ok(down_from(1)),
            ),
            (
                "16: down from 2 overwrites",
                Operation::ScaleDown,
                ann(&[(REPLICAS_ANNOTATION, "5")]),
                2,
                Ok(down_from(2)),
            ),
            (
                "already down",
                Operation::ScaleDown,
                after_down.clone(),
                0,
                Ok(AfterScale::Unchanged {
                    remove_meltdown: false,
                }),
            ),
            (
                "17: up to the annotation",
                Operation::ScaleUp,
                after_down,
                0,
                Ok(up_to(2)),
            ),
            (
                "up without annotation: 1",
                Operation::ScaleUp,
                ann(&[]),
                0,
                Ok(up_to(1)),
            ),
            (
                "up with annotation 0: 1",
                Operation::ScaleUp,
                ann(&[(REPLICAS_ANNOTATION, "0")]),
                0,
                Ok(up_to(1)),
            ),
            (
                "up with a bad annotation",
                Operation::ScaleUp,
                ann(&[(REPLICAS_ANNOTATION, "two")]),
                0,
                Err(ScaleError::InvalidReplicasAnnotation {
                    resource: "r".into(),
                    value: "two".into(),
                }),
            ),
            (
                "13: up is a no-op above 0",
                Operation::ScaleUp,
                ann(&[]),
                3,
                Ok(AfterScale::Unchanged {
                    remove_meltdown: false,
                }),
            ),
            (
                "13: a leftover meltdown marker goes",
                Operation::ScaleUp,
                ann(&[(MELTDOWN_ANNOTATION, "")]),
                3,
                Ok(AfterScale::Unchanged {
                    remove_meltdown: true,
                }),
            ),
            (
                "a bad annotation is not read above 0",
                Operation::ScaleUp,
                ann(&[(REPLICAS_ANNOTATION, "x")]),
                1,
                Ok(AfterScale::Unchanged {
                    remove_meltdown: false,
                }),
            ),
        ];
        for (name, op, a, replicas, want) in table {
            assert_eq!(on_scale(op, &a, replicas, "r"), want, "{name}");
        }
    }

    #[test]
    fn readiness_after_scaling() {
        let table = [
            (Operation::ScaleDown, None, true),
            (Operation::ScaleDown, Some(0), true),
            (Operation::ScaleDown, Some(1), false),
            (Operation::ScaleUp, None, false),
            (Operation::ScaleUp, Some(0), false),
            (Operation::ScaleUp, Some(1), true),
            (Operation::ScaleUp, Some(3), true),
        ];
        for (op, ready, want) in table {
            assert_eq!(target_reached(op, ready), want, "{op:?} {ready:?}");
        }
    }
}
