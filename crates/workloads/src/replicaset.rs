//! The ReplicaSet decision (upstream's `syncReplicaSet`): how many pods to
//! create, which to delete, and the status to report — from the set and
//! the active pods it manages.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};

use crate::meta::{self, Owner, to_time};
use crate::pods;

/// Upstream's `BurstReplicas`: at most this many creations or deletions
/// per pass, so a huge scale does not starve other sets.
pub const BURST_REPLICAS: usize = 500;

/// What one pass of a ReplicaSet does.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Pods to create from the template (the executor names them).
    pub create: usize,
    /// Pods to delete, by name, cheapest first.
    pub delete: Vec<String>,
    /// The status from the pods observed (before this pass's writes); the
    /// executor adds the `ReplicaFailure` condition with [`with_failure`].
    pub status: ReplicaSetStatus,
    /// Look again then: a Ready pod becomes available (minReadySeconds).
    pub requeue_after: Option<Duration>,
}

pub fn replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn min_ready_seconds(rs: &ReplicaSet) -> i32 {
    rs.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

fn template(rs: &ReplicaSet) -> Option<&PodTemplateSpec> {
    rs.spec.as_ref()?.template.as_ref()
}

/// Plans one pass of `rs`, which manages `pods` (active and claimed).
pub fn plan(rs: &ReplicaSet, pods: &[&Pod], now: DateTime<Utc>) -> Plan {
    let active: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| pods::is_active(p))
        .collect();
    let want = replicas(rs).max(0) as usize;
    let (mut create, mut delete) = (0, Vec::new());
    // A set being deleted only reports; the garbage collector removes its
    // pods.
    if rs.metadata.deletion_timestamp.is_none() {
        if active.len() < want {
            create = (want - active.len()).min(BURST_REPLICAS);
        } else if active.len() > want {
            let mut ranked = active.clone();
            ranked.sort_by(|a, b| pods::deletion_order(a, b));
            delete = ranked
                .iter()
                .take((active.len() - want).min(BURST_REPLICAS))
                .map(|p| meta::name(&p.metadata).to_string())
                .collect();
        }
    }
    let min_ready = min_ready_seconds(rs);
    let template_labels = template(rs).and_then(|t| t.metadata.as_ref()?.labels.as_ref());
    let mut status = rs.status.clone().unwrap_or_default();
    status.replicas = active.len() as i32;
    status.fully_labeled_replicas = Some(
        active
            .iter()
            .filter(|p| pods::has_labels(p, template_labels))
            .count() as i32,
    );
    status.ready_replicas = Some(active.iter().filter(|p| pods::is_ready(p)).count() as i32);
    status.available_replicas = Some(
        active
            .iter()
            .filter(|p| pods::is_available(p, min_ready, now))
            .count() as i32,
    );
    status.observed_generation = rs.metadata.generation;
    let requeue_after = active
        .iter()
        .filter(|p| pods::is_ready(p) && !pods::is_available(p, min_ready, now))
        .filter_map(|p| pods::available_at(p, min_ready))
        .min()
        .map(|t| (t - now).to_std().unwrap_or_default() + Duration::from_secs(1));
    Plan {
        create,
        delete,
        status,
        requeue_after,
    }
}

/// The `ReplicaFailure` condition after a pass: set (once, keeping its
/// first message) when creating or deleting failed, removed when the pass
/// succeeded.
pub fn with_failure(
    mut status: ReplicaSetStatus,
    failure: Option<(&str, String)>,
    now: DateTime<Utc>,
) -> ReplicaSetStatus {
    let mut conditions = status.conditions.take().unwrap_or_default();
    let existing = conditions.iter().any(|c| c.type_ == "ReplicaFailure");
    match failure {
        Some((reason, message)) if !existing => conditions.push(ReplicaSetCondition {
            type_: "ReplicaFailure".into(),
            status: "True".into(),
            reason: Some(reason.into()),
            message: Some(message),
            last_transition_time: Some(to_time(now)),
        }),
        Some(_) => {}
        None => conditions.retain(|c| c.type_ != "ReplicaFailure"),
    }
    status.conditions = (!conditions.is_empty()).then_some(conditions);
    status
}

/// A new pod of `rs` named `name` (the set's name, a dash, five
/// characters, as `generateName` makes it).
pub fn new_pod(rs: &ReplicaSet, name: &str) -> Pod {
    let owner = Owner::of("apps/v1", "ReplicaSet", &rs.metadata).controller_ref();
    let template = template(rs).cloned().unwrap_or_default();
    let prefix = format!("{}-", meta::name(&rs.metadata));
    pods::from_template(
        &template,
        rs.metadata.namespace.as_deref().unwrap_or_default(),
        name,
        Some(prefix),
        owner,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::test_pods::*;
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn rs(replicas: i32, min_ready: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web-abc".into()),
                namespace: Some("ns".into()),
                uid: Some("rs-uid".into()),
                generation: Some(4),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: Some(min_ready),
                template: Some(
                    serde_json::from_value(serde_json::json!({
                        "metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}},
                        "spec": {"containers": [{"name": "c", "image": "i"}]}
                    }))
                    .unwrap(),
                ),
                ..ReplicaSetSpec::default()
            }),
            status: None,
        }
    }

    fn at(t: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(t, 0).unwrap()
    }

    #[test]
    fn scale_table() {
        let labelled = |n: &str| pod(n).labels(&[("app", "web"), ("pod-template-hash", "abc")]);
        let cases: Vec<(i32, Vec<Pod>, usize, Vec<&str>)> = vec![
            (3, vec![], 3, vec![]),
            (3, vec![labelled("a").ready_at(1)], 2, vec![]),
            // Finished and deleting pods do not count; a replacement is made.
            (
                2,
                vec![
                    labelled("a").ready_at(1),
                    labelled("b").phase("Failed"),
                    labelled("c").deleting(),
                ],
                1,
                vec![],
            ),
            // Too many: the not-ready one goes first.
            (
                1,
                vec![labelled("a").ready_at(1), labelled("b")],
                0,
                vec!["b"],
            ),
            (0, vec![labelled("a"), labelled("b")], 0, vec!["a", "b"]),
        ];
        for (want, observed, create, delete) in cases {
            let refs: Vec<&Pod> = observed.iter().collect();
            let p = plan(&rs(want, 0), &refs, at(100));
            assert_eq!(p.create, create, "replicas {want}");
            assert_eq!(p.delete, delete, "replicas {want}");
        }
    }

    #[test]
    fn status_counts_labelled_ready_and_available_pods() {
        let observed = [
            pod("a")
                .labels(&[("app", "web"), ("pod-template-hash", "abc")])
                .ready_at(50),
            pod("b").labels(&[("app", "web")]).ready_at(95),
            pod("c").labels(&[("app", "web"), ("pod-template-hash", "abc")]),
            pod("d").phase("Succeeded"),
        ];
        let refs: Vec<&Pod> = observed.iter().collect();
        let p = plan(&rs(3, 10), &refs, at(100));
        assert_eq!(p.status.replicas, 3);
        assert_eq!(p.status.fully_labeled_replicas, Some(2));
        assert_eq!(p.status.ready_replicas, Some(2));
        assert_eq!(p.status.available_replicas, Some(1));
        assert_eq!(p.status.observed_generation, Some(4));
        // b becomes available at 105: look again just after.
        assert_eq!(p.requeue_after, Some(Duration::from_secs(6)));
    }

    #[test]
    fn a_deleting_set_only_reports() {
        let mut set = rs(3, 0);
        set.metadata.deletion_timestamp = Some(to_time(at(1)));
        let p = plan(&set, &[], at(100));
        assert_eq!((p.create, p.delete.len()), (0, 0));
    }

    #[test]
    fn burst_limits_one_pass() {
        let p = plan(&rs(2000, 0), &[], at(100));
        assert_eq!(p.create, BURST_REPLICAS);
    }

    #[test]
    fn replica_failure_is_set_once_and_cleared() {
        let s = with_failure(
            ReplicaSetStatus::default(),
            Some(("FailedCreate", "quota".into())),
            at(1),
        );
        let s = with_failure(s, Some(("FailedCreate", "other".into())), at(2));
        let conds = s.conditions.clone().unwrap();
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].message.as_deref(), Some("quota"));
        assert!(with_failure(s, None, at(3)).conditions.is_none());
    }

    #[test]
    fn new_pods_copy_the_template_and_point_at_the_set() {
        let p = new_pod(&rs(1, 0), "web-abc-x2k4f");
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-abc-"));
        assert_eq!(p.metadata.name.as_deref(), Some("web-abc-x2k4f"));
        let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("ReplicaSet", "rs-uid")
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(
            p.metadata
                .labels
                .unwrap()
                .get("pod-template-hash")
                .map(String::as_str),
            Some("abc")
        );
    }
}
