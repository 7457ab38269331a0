//! The Deployment planner, step by step and over whole simulated rollouts.

use super::*;
use crate::pods::test_pods::PodExt;
use k8s_openapi::api::apps::v1::ReplicaSetStatus;
use serde_json::json;

fn at(t: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(t, 0).unwrap()
}

fn deployment(replicas: i32, image: &str, strategy: Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "d-uid", "generation": 1,
                     "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": strategy,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": image}]}}
        }
    }))
    .unwrap()
}

fn rolling(surge: Value, unavailable: Value) -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
}

/// A cluster of one Deployment and its ReplicaSets, where a ReplicaSet's
/// pods exist as soon as it asks for them and become available one round
/// later (each round is a pass of the Deployment and one of every set).
struct World {
    d: Deployment,
    sets: Vec<ReplicaSet>,
    clock: i64,
    uid: u32,
}

impl World {
    fn new(d: Deployment) -> World {
        World {
            d,
            sets: Vec::new(),
            clock: 1_000,
            uid: 0,
        }
    }

    fn plan(&self) -> Plan {
        let o = Observed {
            deployment: &self.d,
            sets: self.sets.iter().collect(),
            pods: Vec::new(),
        };
        plan(&o, at(self.clock))
    }

    fn apply(&mut self, p: &Plan) {
        for s in &p.steps {
            match s {
                Step::CreateReplicaSet(rs) => {
                    let mut rs = (**rs).clone();
                    self.uid += 1;
                    rs.metadata.uid = Some(format!("rs-{}", self.uid));
                    rs.metadata.creation_timestamp = Some(to_time(at(self.clock)));
                    rs.metadata.generation = Some(1);
                    rs.status = Some(ReplicaSetStatus::default());
                    self.sets.push(rs);
                }
                Step::UpdateReplicaSet {
                    name,
                    replicas,
                    annotations,
                    min_ready_seconds,
                    ..
                } => {
                    let rs = self
                        .sets
                        .iter_mut()
                        .find(|r| r.metadata.name.as_deref() == Some(name))
                        .unwrap();
                    let spec = rs.spec.as_mut().unwrap();
                    spec.replicas = Some(*replicas);
                    spec.min_ready_seconds = *min_ready_seconds;
                    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
                    a.extend(annotations.clone());
                }
                Step::DeleteReplicaSet { name, .. } => {
                    self.sets
                        .retain(|r| r.metadata.name.as_deref() != Some(name));
                }
                Step::SetRevision(r) => {
                    self.d
                        .metadata
                        .annotations
                        .get_or_insert_with(BTreeMap::new)
                        .insert(names::REVISION.into(), r.clone());
                }
                Step::Event { .. } => {}
            }
        }
        if let Some(s) = &p.status {
            self.d.status = Some(s.clone());
        }
    }

    /// Every set's pods: made or removed at once; ready ones available.
    fn run_sets(&mut self) {
        for rs in &mut self.sets {
            let want = rs_replicas(rs);
            let st = rs.status.get_or_insert_with(Default::default);
            let was = st.replicas;
            let available = st
                .available_replicas
                .unwrap_or(0)
                .min(want)
                .max(was.min(want));
            st.replicas = want;
            st.ready_replicas = Some(available);
            st.available_replicas = Some(available);
            st.observed_generation = rs.metadata.generation;
        }
    }

    fn totals(&self) -> (i32, i32) {
        let total = self.sets.iter().map(|r| rs_status(r).0).sum();
        let available = self.sets.iter().map(|r| rs_status(r).2).sum();
        (total, available)
    }

    fn set_template(&mut self, image: &str) {
        let spec = self.d.spec.as_mut().unwrap();
        spec.template.spec.as_mut().unwrap().containers[0].image = Some(image.into());
        self.d.metadata.generation = Some(self.d.metadata.generation.unwrap_or(1) + 1);
    }

    /// Rounds until the Deployment reports complete; checks `each` after
    /// every round.
    fn run(&mut self, rounds: usize, mut each: impl FnMut(&World)) -> usize {
        for round in 0..rounds {
            let p = self.plan();
            self.apply(&p);
            self.run_sets();
            self.clock += 1;
            each(self);
            if complete(&self.d, self.d.status.as_ref())
                && self.sets.iter().filter(|r| rs_replicas(r) > 0).count() <= 1
                && p.steps.is_empty()
                && p.status.is_none()
            {
                return round;
            }
        }
        panic!("the rollout did not finish in {rounds} rounds");
    }

    fn set(&self, revision_: i64) -> &ReplicaSet {
        self.sets.iter().find(|r| revision(r) == revision_).unwrap()
    }
}

#[test]
fn a_new_deployment_creates_its_set_with_every_replica() {
    let d = deployment(3, "nginx:1", rolling(json!("25%"), json!("25%")));
    let w = World::new(d.clone());
    let p = w.plan();
    let Step::CreateReplicaSet(rs) = &p.steps[0] else {
        panic!("expected a create first: {:?}", p.steps);
    };
    let hash = crate::hash::pod_template_hash(&d.spec.as_ref().unwrap().template, None);
    assert_eq!(
        rs.metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    assert_eq!(rs_replicas(rs), 3, "maxSurge 1 over 0 pods allows all 3");
    let a = rs.metadata.annotations.as_ref().unwrap();
    assert_eq!(a[names::REVISION], "1");
    assert_eq!(a[names::DESIRED_REPLICAS], "3");
    assert_eq!(a[names::MAX_REPLICAS], "4");
    let spec = rs.spec.as_ref().unwrap();
    assert_eq!(
        spec.selector.match_labels.as_ref().unwrap()[names::POD_TEMPLATE_HASH],
        hash
    );
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Deployment", Some(true))
    );
    assert!(p.steps.contains(&Step::Event {
        warning: false,
        reason: "ScalingReplicaSet",
        message: format!("Scaled up replica set web-{hash} from 0 to 3"),
    }));
    assert!(p.steps.contains(&Step::SetRevision("1".into())));
    let s = p.status.unwrap();
    assert_eq!(s.observed_generation, Some(1));
    let progressing = condition(&s, "Progressing").unwrap();
    assert_eq!(progressing.reason.as_deref(), Some("NewReplicaSetCreated"));
    assert_eq!(
        progressing.message.as_deref(),
        Some(format!("Created new replica set \"web-{hash}\"").as_str())
    );
    let available = condition(&s, "Available").unwrap();
    assert_eq!(
        (available.status.as_str(), available.reason.as_deref()),
        ("False", Some("MinimumReplicasUnavailable"))
    );
}

#[test]
fn a_finished_rollout_reports_complete_and_available() {
    let mut w = World::new(deployment(3, "nginx:1", rolling(json!(1), json!(0))));
    w.run(20, |_| {});
    let s = w.d.status.clone().unwrap();
    assert_eq!(
        (
            s.replicas,
            s.updated_replicas,
            s.ready_replicas,
            s.available_replicas
        ),
        (Some(3), Some(3), Some(3), Some(3))
    );
    assert_eq!(s.unavailable_replicas, Some(0));
    let progressing = condition(&s, "Progressing").unwrap();
    assert_eq!(
        progressing.reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );
    let name = w.sets[0].metadata.name.clone().unwrap();
    assert_eq!(
        progressing.message.as_deref(),
        Some(format!("ReplicaSet \"{name}\" has successfully progressed.").as_str())
    );
    assert_eq!(condition(&s, "Available").unwrap().status, "True");
    // Nothing more to do: a pass writes nothing.
    let p = w.plan();
    assert!(p.steps.is_empty() && p.status.is_none(), "{p:?}");
}

#[test]
fn rolling_updates_stay_within_surge_and_unavailability() {
    let cases = [
        (3, json!(1), json!(0)),
        (3, json!(0), json!(1)),
        (4, json!("25%"), json!("25%")),
        (10, json!(3), json!(2)),
        (5, json!("50%"), json!(0)),
    ];
    for (replicas, surge, unavailable) in cases {
        let d = deployment(
            replicas,
            "nginx:1",
            rolling(surge.clone(), unavailable.clone()),
        );
        let (max_surge, max_unavailable) = fenceposts(&d);
        let mut w = World::new(d);
        w.run(50, |_| {});
        w.set_template("nginx:2");
        let rounds = w.run(200, |w| {
            let (total, available) = w.totals();
            assert!(
                total <= replicas + max_surge,
                "{replicas} {surge} {unavailable}: {total} pods exceed the surge"
            );
            assert!(
                available >= replicas - max_unavailable,
                "{replicas} {surge} {unavailable}: only {available} available"
            );
        });
        assert!(rounds > 1, "the rollout took steps");
        // The old set is scaled to zero and kept as history; the new one
        // is revision 2.
        assert_eq!(rs_replicas(w.set(1)), 0);
        assert_eq!(rs_replicas(w.set(2)), replicas);
        assert_eq!(annotation(&w.d.metadata, names::REVISION), Some("2"));
    }
}

#[test]
fn rollback_reuses_the_old_set_with_the_next_revision() {
    let mut w = World::new(deployment(2, "nginx:1", rolling(json!(1), json!(0))));
    w.run(20, |_| {});
    let first = w.set(1).metadata.name.clone();
    w.set_template("nginx:2");
    w.run(40, |_| {});
    // `kubectl rollout undo`: the template of revision 1 again.
    w.set_template("nginx:1");
    w.run(40, |_| {});
    assert_eq!(w.sets.len(), 2, "no third set: {:?}", w.sets);
    let back = w.set(3);
    assert_eq!(back.metadata.name, first);
    assert_eq!(
        annotation(&back.metadata, names::REVISION_HISTORY),
        Some("1")
    );
    assert_eq!(rs_replicas(back), 2);
    assert_eq!(annotation(&w.d.metadata, names::REVISION), Some("3"));
}

#[test]
fn recreate_empties_old_sets_and_waits_for_their_pods() {
    let mut w = World::new(deployment(3, "nginx:1", json!({"type": "Recreate"})));
    w.run(20, |_| {});
    w.set_template("nginx:2");
    let p = w.plan();
    // First the old set goes to zero; no new set yet.
    assert!(
        !p.steps
            .iter()
            .any(|s| matches!(s, Step::CreateReplicaSet(_)))
    );
    assert!(
        p.steps
            .iter()
            .any(|s| matches!(s, Step::UpdateReplicaSet { replicas: 0, .. }))
    );
    w.apply(&p);
    // Its pods are still there (status not caught up): still no new set.
    let p = w.plan();
    assert!(
        !p.steps
            .iter()
            .any(|s| matches!(s, Step::CreateReplicaSet(_)))
    );
    // One of its pods still terminating counts too.
    w.run_sets();
    let old_uid = w.set(1).metadata.uid.clone().unwrap();
    let pod = crate::pods::test_pods::pod("p")
        .owned_by(&old_uid)
        .phase("Running");
    let o = Observed {
        deployment: &w.d,
        sets: w.sets.iter().collect(),
        pods: vec![&pod],
    };
    assert!(
        !plan(&o, at(w.clock))
            .steps
            .iter()
            .any(|s| matches!(s, Step::CreateReplicaSet(_)))
    );
    // Gone: the new set gets every replica at once.
    let p = w.plan();
    let Some(Step::CreateReplicaSet(rs)) = p.steps.first() else {
        panic!("expected the new set: {:?}", p.steps);
    };
    assert_eq!(rs_replicas(rs), 3);
}

#[test]
fn a_scaling_event_during_a_rollout_is_spread_proportionally() {
    let mut w = World::new(deployment(10, "nginx:1", rolling(json!(3), json!(2))));
    w.run(50, |_| {});
    w.set_template("nginx:2");
    // Two rounds into the rollout both sets are active.
    for _ in 0..2 {
        let p = w.plan();
        w.apply(&p);
        w.run_sets();
    }
    let before: Vec<i32> = w.sets.iter().map(rs_replicas).collect();
    assert!(before.iter().all(|r| *r > 0), "{before:?}");
    w.d.spec.as_mut().unwrap().replicas = Some(20);
    let p = w.plan();
    w.apply(&p);
    let after: Vec<i32> = w.sets.iter().map(rs_replicas).collect();
    // 20 + surge 5 (25% of 20, rounded up... here an absolute 3) spread.
    assert_eq!(after.iter().sum::<i32>(), 20 + 3, "{before:?} -> {after:?}");
    assert!(
        after[0] > before[0] && after[1] > before[1],
        "{before:?} -> {after:?}"
    );
    assert!(p.steps.iter().any(
        |s| matches!(s, Step::Event { message, .. } if message.starts_with("Scaled up replica set"))
    ));
    // Scaling to zero empties every set.
    w.d.spec.as_mut().unwrap().replicas = Some(0);
    let p = w.plan();
    w.apply(&p);
    assert!(w.sets.iter().all(|r| rs_replicas(r) == 0));
}

#[test]
fn scale_to_zero_and_back_uses_the_same_set() {
    let mut w = World::new(deployment(3, "nginx:1", rolling(json!(1), json!(0))));
    w.run(20, |_| {});
    w.d.spec.as_mut().unwrap().replicas = Some(0);
    w.run(20, |_| {});
    assert_eq!(w.sets.len(), 1);
    assert_eq!(rs_replicas(&w.sets[0]), 0);
    assert_eq!(w.d.status.as_ref().unwrap().replicas, Some(0));
    w.d.spec.as_mut().unwrap().replicas = Some(2);
    w.run(20, |_| {});
    assert_eq!(rs_replicas(&w.sets[0]), 2);
}

#[test]
fn history_beyond_the_limit_is_deleted_oldest_first() {
    let mut d = deployment(1, "v1", rolling(json!(1), json!(0)));
    d.spec.as_mut().unwrap().revision_history_limit = Some(1);
    let mut w = World::new(d);
    w.run(20, |_| {});
    for image in ["v2", "v3", "v4"] {
        w.set_template(image);
        w.run(40, |_| {});
    }
    let mut revisions: Vec<i64> = w.sets.iter().map(revision).collect();
    revisions.sort();
    assert_eq!(
        revisions,
        vec![3, 4],
        "one old set kept besides the new one"
    );
}

#[test]
fn no_progress_within_the_deadline_times_out() {
    let mut d = deployment(3, "nginx:1", rolling(json!(1), json!(0)));
    d.spec.as_mut().unwrap().progress_deadline_seconds = Some(60);
    let mut w = World::new(d);
    let p = w.plan();
    w.apply(&p);
    // The set's pods never become ready.
    for rs in &mut w.sets {
        rs.status = Some(ReplicaSetStatus {
            replicas: 3,
            observed_generation: Some(1),
            ..ReplicaSetStatus::default()
        });
    }
    w.clock += 10;
    let p = w.plan();
    w.apply(&p);
    let s = w.d.status.clone().unwrap();
    assert_eq!(
        condition(&s, "Progressing").unwrap().reason.as_deref(),
        Some("ReplicaSetUpdated")
    );
    // Check again when the deadline passes.
    let p = w.plan();
    assert_eq!(p.requeue_after, Some(Duration::from_secs(61)));
    w.clock += 61;
    let p = w.plan();
    let s = p.status.unwrap();
    let c = condition(&s, "Progressing").unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("ProgressDeadlineExceeded"))
    );
    assert!(
        c.message
            .as_deref()
            .unwrap()
            .ends_with("has timed out progressing.")
    );
}

#[test]
fn a_paused_deployment_scales_but_does_not_roll_out() {
    let mut w = World::new(deployment(3, "nginx:1", rolling(json!(1), json!(0))));
    w.run(20, |_| {});
    w.d.spec.as_mut().unwrap().paused = Some(true);
    w.set_template("nginx:2");
    let p = w.plan();
    assert!(
        !p.steps
            .iter()
            .any(|s| matches!(s, Step::CreateReplicaSet(_)))
    );
    let s = p.status.clone().unwrap();
    let c = condition(&s, "Progressing").unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("Unknown", Some("DeploymentPaused"))
    );
    w.apply(&p);
    w.d.spec.as_mut().unwrap().replicas = Some(5);
    let p = w.plan();
    assert!(
        p.steps
            .iter()
            .any(|s| matches!(s, Step::UpdateReplicaSet { replicas: 5, .. }))
    );
    // Resumed: the rollout goes on.
    w.apply(&p);
    w.d.spec.as_mut().unwrap().paused = Some(false);
    let p = w.plan();
    assert!(
        p.steps
            .iter()
            .any(|s| matches!(s, Step::CreateReplicaSet(_)))
    );
}

#[test]
fn a_restart_annotation_rolls_out_like_any_template_change() {
    let mut w = World::new(deployment(2, "nginx:1", rolling(json!(1), json!(0))));
    w.run(20, |_| {});
    let t = &mut w.d.spec.as_mut().unwrap().template;
    t.metadata
        .get_or_insert_with(Default::default)
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            "kubectl.kubernetes.io/restartedAt".into(),
            "2024-01-01T00:00:00Z".into(),
        );
    w.run(40, |_| {});
    assert_eq!(w.sets.len(), 2);
    assert_eq!(rs_replicas(w.set(2)), 2);
}

#[test]
fn hash_collisions_and_template_equality() {
    let d = deployment(1, "nginx:1", rolling(json!(1), json!(0)));
    let mine = new_replica_set(&d, 1, 1);
    assert!(!collision(
        &{
            let mut d = d.clone();
            d.metadata.uid = Some("d-uid".into());
            d
        },
        &mine
    ));
    let other = new_replica_set(&deployment(1, "nginx:2", rolling(json!(1), json!(0))), 1, 1);
    assert!(collision(&d, &other));
    let s = collided(&d);
    assert_eq!(s.collision_count, Some(1));
    let mut d2 = d.clone();
    d2.status = Some(s);
    assert_ne!(new_replica_set(&d2, 1, 1).metadata.name, mine.metadata.name);
    // Empty maps and absent ones are the same template.
    let mut a = d.spec.clone().unwrap().template;
    let b = a.clone();
    a.metadata.as_mut().unwrap().annotations = Some(BTreeMap::new());
    assert!(equal_ignore_hash(&a, &b));
}
