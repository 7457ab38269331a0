//! Pods as the workload controllers judge them (upstream's `podutil` and
//! `controller_utils`): active, ready, available after `minReadySeconds`,
//! the order in which a ReplicaSet gives pods up, and the pod a template
//! makes.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::meta::{annotation, created, to_chrono};
use crate::names;

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Succeeded or Failed: its containers will not run again.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// `FilterActivePods`: neither finished nor being deleted.
pub fn is_active(pod: &Pod) -> bool {
    !is_terminal(pod) && !is_terminating(pod)
}

/// The `Ready` condition, if the pod has one.
fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

pub fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// Since when the pod has been Ready (the condition's transition time).
pub fn ready_since(pod: &Pod) -> Option<DateTime<Utc>> {
    ready_condition(pod)
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(to_chrono)
}

/// `IsPodAvailable`: Ready for at least `min_ready_seconds`.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: DateTime<Utc>) -> bool {
    if !is_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    ready_since(pod).is_some_and(|t| t + Duration::seconds(i64::from(min_ready_seconds)) <= now)
}

/// When a Ready pod that is not available yet becomes available.
pub fn available_at(pod: &Pod, min_ready_seconds: i32) -> Option<DateTime<Utc>> {
    if min_ready_seconds <= 0 {
        return None;
    }
    ready_since(pod).map(|t| t + Duration::seconds(i64::from(min_ready_seconds)))
}

/// Running and Ready (StatefulSets need both).
pub fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && is_ready(pod)
}

/// Restarts of the pod's containers, summed.
fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0)
}

fn deletion_cost(pod: &Pod) -> i32 {
    annotation(&pod.metadata, names::POD_DELETION_COST)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn phase_rank(pod: &Pod) -> u8 {
    match phase(pod) {
        "Pending" | "" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 3,
    }
}

/// `ActivePodsWithRanks.Less`: the order in which pods are given up when
/// scaling down, cheapest first — unscheduled before scheduled, pending
/// before unknown before running, not ready before ready, lower
/// deletion cost first, more recently ready first, more restarts first,
/// newer first. (Upstream also ranks pods doubled up on one node first;
/// the embedded seed runs one node, so the rank would always tie.)
pub fn deletion_order(a: &Pod, b: &Pod) -> Ordering {
    let scheduled = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    scheduled(a)
        .cmp(&scheduled(b))
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
        .then_with(|| {
            // Both ready: the one ready for less time goes first.
            match (ready_since(a), ready_since(b)) {
                (Some(x), Some(y)) => y.cmp(&x),
                _ => Ordering::Equal,
            }
        })
        .then_with(|| restarts(b).cmp(&restarts(a)))
        .then_with(|| created(&b.metadata).cmp(&created(&a.metadata)))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// `GetPodFromTemplate`: the pod a template makes, controlled by `owner`.
pub fn from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    name: &str,
    generate_name: Option<String>,
    owner: OwnerReference,
) -> Pod {
    let t = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            generate_name,
            namespace: Some(namespace.to_string()),
            labels: t.labels.clone(),
            annotations: t.annotations.clone(),
            finalizers: t.finalizers.clone(),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// Whether the pod carries every label of the template (a ReplicaSet's
/// `fullyLabeledReplicas`).
pub fn has_labels(pod: &Pod, labels: Option<&BTreeMap<String, String>>) -> bool {
    let have = pod.metadata.labels.as_ref();
    labels
        .into_iter()
        .flatten()
        .all(|(k, v)| have.and_then(|h| h.get(k)) == Some(v))
}

#[cfg(test)]
pub mod test_pods {
    //! Pod fixtures for the planners' tests.

    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};

    /// A pod named `name`, created `age_s` seconds before the epoch plus
    /// 10,000 s, Pending and unscheduled.
    pub fn pod(name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(crate::meta::to_time(
                    DateTime::from_timestamp(1_000, 0).unwrap_or_default(),
                )),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec::default()),
            status: Some(PodStatus {
                phase: Some("Pending".into()),
                ..PodStatus::default()
            }),
        }
    }

    pub trait PodExt {
        fn phase(self, p: &str) -> Self;
        fn ready_at(self, t: i64) -> Self;
        fn created_at(self, t: i64) -> Self;
        fn on_node(self, n: &str) -> Self;
        fn deleting(self) -> Self;
        fn labels(self, l: &[(&str, &str)]) -> Self;
        fn owned_by(self, uid: &str) -> Self;
        fn finalizer(self, f: &str) -> Self;
    }

    impl PodExt for Pod {
        fn phase(mut self, p: &str) -> Self {
            self.status.get_or_insert_with(Default::default).phase = Some(p.into());
            self
        }
        /// Running and Ready since unix second `t`.
        fn ready_at(mut self, t: i64) -> Self {
            let s = self.status.get_or_insert_with(Default::default);
            s.phase = Some("Running".into());
            s.conditions = Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(crate::meta::to_time(
                    DateTime::from_timestamp(t, 0).unwrap_or_default(),
                )),
                ..PodCondition::default()
            }]);
            self
        }
        fn created_at(mut self, t: i64) -> Self {
            self.metadata.creation_timestamp = Some(crate::meta::to_time(
                DateTime::from_timestamp(t, 0).unwrap_or_default(),
            ));
            self
        }
        fn on_node(mut self, n: &str) -> Self {
            self.spec.get_or_insert_with(Default::default).node_name = Some(n.into());
            self
        }
        fn deleting(mut self) -> Self {
            self.metadata.deletion_timestamp = Some(crate::meta::to_time(
                DateTime::from_timestamp(5_000, 0).unwrap_or_default(),
            ));
            self
        }
        fn labels(mut self, l: &[(&str, &str)]) -> Self {
            let m = self.metadata.labels.get_or_insert_with(Default::default);
            for (k, v) in l {
                m.insert(k.to_string(), v.to_string());
            }
            self
        }
        fn owned_by(mut self, uid: &str) -> Self {
            self.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "owner".into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]);
            self
        }
        fn finalizer(mut self, f: &str) -> Self {
            self.metadata
                .finalizers
                .get_or_insert_with(Default::default)
                .push(f.into());
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_pods::*;
    use super::*;

    fn at(t: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(t, 0).unwrap()
    }

    #[test]
    fn availability_waits_min_ready_seconds() {
        let p = pod("a").ready_at(100);
        assert!(is_available(&p, 0, at(100)));
        assert!(!is_available(&p, 10, at(109)));
        assert!(is_available(&p, 10, at(110)));
        assert_eq!(available_at(&p, 10), Some(at(110)));
        assert!(!is_available(&pod("b"), 0, at(100)));
        assert!(is_running_and_ready(&p));
        assert!(!is_active(&pod("c").phase("Succeeded")));
        assert!(!is_active(&pod("d").deleting()));
    }

    #[test]
    fn cheapest_pods_go_first() {
        let mut pods = [
            pod("ready-old").on_node("n").ready_at(100),
            pod("ready-new").on_node("n").ready_at(200),
            pod("running").on_node("n").phase("Running"),
            pod("pending").on_node("n"),
            pod("unscheduled"),
        ];
        pods.sort_by(deletion_order);
        let names: Vec<&str> = pods
            .iter()
            .map(|p| crate::meta::name(&p.metadata))
            .collect();
        assert_eq!(
            names,
            [
                "unscheduled",
                "pending",
                "running",
                "ready-new",
                "ready-old"
            ]
        );
        // Deletion cost beats readiness age; newer beats older.
        let mut cheap = pod("cheap").on_node("n").ready_at(100);
        cheap
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(names::POD_DELETION_COST.into(), "-5".into());
        let dear = pod("dear").on_node("n").ready_at(200);
        assert_eq!(deletion_order(&cheap, &dear), Ordering::Less);
        let young = pod("young").created_at(2_000);
        let old = pod("old").created_at(1_000);
        assert_eq!(deletion_order(&young, &old), Ordering::Less);
    }
}
