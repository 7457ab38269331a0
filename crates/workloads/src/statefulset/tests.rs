//! The StatefulSet planner over a simulated namespace, pass by pass.

use super::*;
use crate::pods::test_pods::PodExt;
use k8s_openapi::api::apps::v1::StatefulSet;

fn at(t: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(t, 0).unwrap()
}

fn web(replicas: i32, image: &str, extra: Value) -> StatefulSet {
    let mut spec = json!({
        "replicas": replicas,
        "serviceName": "web",
        "selector": {"matchLabels": {"app": "web"}},
        "podManagementPolicy": "OrderedReady",
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "revisionHistoryLimit": 10,
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "c", "image": image}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "www"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "sts-uid", "generation": 1},
        "spec": spec
    }))
    .unwrap()
}

/// A namespace where created objects exist at once; pods start Pending
/// and become Running and Ready only when the test says so.
struct World {
    set: StatefulSet,
    pods: Vec<Pod>,
    revisions: Vec<ControllerRevision>,
    claims: Vec<PersistentVolumeClaim>,
    clock: i64,
    uid: u32,
}

impl World {
    fn new(set: StatefulSet) -> World {
        World {
            set,
            pods: Vec::new(),
            revisions: Vec::new(),
            claims: Vec::new(),
            clock: 1_000,
            uid: 0,
        }
    }

    fn plan(&self) -> Plan {
        plan(
            &Observed {
                set: &self.set,
                pods: self.pods.iter().collect(),
                revisions: self.revisions.iter().collect(),
                claims: self.claims.iter().collect(),
            },
            at(self.clock),
        )
    }

    fn next_uid(&mut self) -> String {
        self.uid += 1;
        format!("uid-{}", self.uid)
    }

    /// One pass: plan and apply.
    fn pass(&mut self) -> Plan {
        let p = self.plan();
        for s in &p.steps {
            match s {
                Step::CreateRevision(r) => {
                    let mut r = (**r).clone();
                    r.metadata.uid = Some(self.next_uid());
                    self.revisions.push(r);
                }
                Step::UpdateRevision { name, revision } => {
                    let r = self
                        .revisions
                        .iter_mut()
                        .find(|r| r.metadata.name.as_deref() == Some(name))
                        .unwrap();
                    r.revision = *revision;
                }
                Step::CreateClaim(c) => {
                    let mut c = (**c).clone();
                    c.metadata.uid = Some(self.next_uid());
                    self.claims.push(c);
                }
                Step::CreatePod(pod) => {
                    let mut pod = (**pod).clone();
                    pod.metadata.uid = Some(self.next_uid());
                    pod.metadata.creation_timestamp = Some(crate::meta::to_time(at(self.clock)));
                    pod = pod.phase("Pending");
                    self.pods.push(pod);
                }
                Step::DeletePod { name } => {
                    self.pods
                        .retain(|p| p.metadata.name.as_deref() != Some(name));
                }
                Step::LabelPod { name, labels } => {
                    let p = self.pod_mut(name);
                    p.metadata.labels = Some(labels.clone());
                }
                Step::SetClaimOwners {
                    name,
                    owner_references,
                    ..
                } => {
                    let c = self
                        .claims
                        .iter_mut()
                        .find(|c| c.metadata.name.as_deref() == Some(name))
                        .unwrap();
                    c.metadata.owner_references =
                        (!owner_references.is_empty()).then(|| owner_references.clone());
                }
                Step::Event { .. } => {}
            }
        }
        if let Some(s) = &p.status {
            self.set.status = Some(s.clone());
        }
        for name in &p.prune {
            self.revisions
                .retain(|r| r.metadata.name.as_deref() != Some(name));
        }
        self.clock += 1;
        p
    }

    fn pod_mut(&mut self, name: &str) -> &mut Pod {
        self.pods
            .iter_mut()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap()
    }

    fn ready(&mut self, name: &str) {
        let t = self.clock;
        let p = self.pod_mut(name);
        *p = p.clone().ready_at(t);
    }

    fn names(&self) -> Vec<String> {
        let mut n: Vec<String> = self
            .pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        n.sort();
        n
    }

    /// Passes, making every pod ready, until nothing changes.
    fn settle(&mut self) {
        for _ in 0..100 {
            let p = self.pass();
            let pending: Vec<String> = self
                .pods
                .iter()
                .filter(|p| !pods::is_ready(p))
                .map(|p| p.metadata.name.clone().unwrap())
                .collect();
            for n in &pending {
                self.ready(n);
            }
            if p.steps.is_empty() && p.status.is_none() && pending.is_empty() {
                return;
            }
        }
        panic!("the set did not settle");
    }

    fn set_image(&mut self, image: &str) {
        let spec = self.set.spec.as_mut().unwrap();
        spec.template.spec.as_mut().unwrap().containers[0].image = Some(image.into());
        self.set.metadata.generation = Some(self.set.metadata.generation.unwrap() + 1);
    }

    fn image(&self, name: &str) -> String {
        self.pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .and_then(|p| p.spec.as_ref()?.containers[0].image.clone())
            .unwrap()
    }
}

#[test]
fn ordered_ready_creates_one_pod_at_a_time_as_each_becomes_ready() {
    let mut w = World::new(web(3, "nginx:1", json!({})));
    let p = w.pass();
    assert!(matches!(p.steps[0], Step::CreateRevision(_)));
    assert_eq!(w.names(), ["web-0"]);
    assert_eq!(w.claims.len(), 1);
    assert_eq!(w.claims[0].metadata.name.as_deref(), Some("www-web-0"));
    assert_eq!(
        w.claims[0].metadata.labels.as_ref().unwrap()["app"],
        "web",
        "claims carry the selector's labels"
    );
    // web-0 is not ready: nothing more.
    w.pass();
    assert_eq!(w.names(), ["web-0"]);
    w.ready("web-0");
    w.pass();
    assert_eq!(w.names(), ["web-0", "web-1"]);
    w.pass();
    assert_eq!(w.names(), ["web-0", "web-1"]);
    w.ready("web-1");
    w.pass();
    assert_eq!(w.names(), ["web-0", "web-1", "web-2"]);
    w.ready("web-2");
    w.pass();
    let s = w.set.status.clone().unwrap();
    assert_eq!(
        (
            s.replicas,
            s.ready_replicas,
            s.current_replicas,
            s.updated_replicas
        ),
        (3, Some(3), Some(3), Some(3))
    );
    assert_eq!(s.current_revision, s.update_revision);
    assert_eq!(s.observed_generation, Some(1));

    // The pods' identity, revision and storage.
    let pod = &w.pods[1];
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[names::STATEFULSET_POD_NAME], "web-1");
    assert_eq!(labels[names::POD_INDEX], "1");
    assert_eq!(
        labels[names::CONTROLLER_REVISION_HASH],
        s.update_revision.clone().unwrap()
    );
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(
        (spec.hostname.as_deref(), spec.subdomain.as_deref()),
        (Some("web-1"), Some("web"))
    );
    let vol = &spec.volumes.as_ref().unwrap()[0];
    assert_eq!(vol.name, "www");
    assert_eq!(
        vol.persistent_volume_claim.as_ref().unwrap().claim_name,
        "www-web-1"
    );
    // Retain/Retain: claims have no owners, so they outlive their pods.
    assert!(
        w.claims
            .iter()
            .all(|c| c.metadata.owner_references.is_none())
    );
    let rev = &w.revisions[0];
    assert_eq!(rev.revision, 1);
    assert!(rev.metadata.name.as_deref().unwrap().starts_with("web-"));
    assert!(
        rev.metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key(names::REVISION_HASH_LABEL)
    );
    assert_eq!(
        rev.data
            .as_ref()
            .unwrap()
            .0
            .pointer("/spec/template/$patch"),
        Some(&json!("replace"))
    );
}

#[test]
fn a_deleted_pod_comes_back_with_its_name_and_claim() {
    let mut w = World::new(web(3, "nginx:1", json!({})));
    w.settle();
    let claims = w.claims.clone();
    w.pods
        .retain(|p| p.metadata.name.as_deref() != Some("web-1"));
    w.pass();
    assert_eq!(w.names(), ["web-0", "web-1", "web-2"]);
    assert_eq!(w.claims, claims, "no claim was made or lost");
    // A pod that failed is replaced too.
    let failed = w.pod_mut("web-0").clone().phase("Failed");
    *w.pod_mut("web-0") = failed;
    w.pass();
    assert_eq!(w.names(), ["web-1", "web-2"]);
    w.pass();
    assert_eq!(w.names(), ["web-0", "web-1", "web-2"]);
}

#[test]
fn parallel_creates_and_deletes_at_once() {
    let mut w = World::new(web(
        3,
        "nginx:1",
        json!({"podManagementPolicy": "Parallel"}),
    ));
    w.pass();
    assert_eq!(w.names(), ["web-0", "web-1", "web-2"]);
    w.set.spec.as_mut().unwrap().replicas = Some(0);
    w.pass();
    assert!(w.names().is_empty());
}

#[test]
fn ordered_scale_down_goes_from_the_highest_ordinal_one_at_a_time() {
    let mut w = World::new(web(3, "nginx:1", json!({})));
    w.settle();
    w.set.spec.as_mut().unwrap().replicas = Some(1);
    w.pass();
    assert_eq!(w.names(), ["web-0", "web-1"]);
    w.pass();
    assert_eq!(w.names(), ["web-0"]);
    // Their claims stay (Retain).
    assert_eq!(w.claims.len(), 3);
}

#[test]
fn rolling_updates_replace_from_the_top_and_respect_the_partition() {
    let mut w = World::new(web(3, "nginx:1", json!({})));
    w.settle();
    w.set_image("nginx:2");
    let p = w.pass();
    assert!(p.steps.iter().any(|s| matches!(s, Step::CreateRevision(_))));
    assert_eq!(w.names(), ["web-0", "web-1"], "web-2 goes first");
    let s = w.set.status.clone().unwrap();
    assert_ne!(s.current_revision, s.update_revision);
    w.pass();
    assert_eq!(w.image("web-2"), "nginx:2");
    // web-1 waits for web-2 to be ready.
    w.pass();
    assert_eq!(w.names(), ["web-0", "web-1", "web-2"]);
    w.settle();
    for n in ["web-0", "web-1", "web-2"] {
        assert_eq!(w.image(n), "nginx:2");
    }
    let s = w.set.status.clone().unwrap();
    assert_eq!(s.current_revision, s.update_revision);
    assert_eq!(s.current_replicas, Some(3));

    // With a partition of 2 only web-2 moves to the next template.
    w.set.spec.as_mut().unwrap().update_strategy = Some(
        serde_json::from_value(json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}))
            .unwrap(),
    );
    w.set_image("nginx:3");
    w.settle();
    assert_eq!(
        [w.image("web-0"), w.image("web-1"), w.image("web-2")],
        ["nginx:2", "nginx:2", "nginx:3"]
    );
    let s = w.set.status.clone().unwrap();
    assert_eq!((s.updated_replicas, s.current_replicas), (Some(1), Some(2)));
}

#[test]
fn on_delete_updates_only_pods_deleted_by_hand() {
    let mut w = World::new(web(
        2,
        "nginx:1",
        json!({"updateStrategy": {"type": "OnDelete"}}),
    ));
    w.settle();
    w.set_image("nginx:2");
    w.settle();
    assert_eq!([w.image("web-0"), w.image("web-1")], ["nginx:1", "nginx:1"]);
    w.pods
        .retain(|p| p.metadata.name.as_deref() != Some("web-1"));
    w.settle();
    assert_eq!([w.image("web-0"), w.image("web-1")], ["nginx:1", "nginx:2"]);
}

#[test]
fn a_rollback_renumbers_the_old_revision() {
    let mut w = World::new(web(1, "nginx:1", json!({})));
    w.settle();
    let first = w.revisions[0].metadata.name.clone();
    w.set_image("nginx:2");
    w.settle();
    w.set_image("nginx:1");
    let p = w.pass();
    assert!(
        p.steps
            .iter()
            .any(|s| matches!(s, Step::UpdateRevision { name, revision: 3 } if Some(name) == first.as_ref())),
        "{:?}",
        p.steps
    );
    w.settle();
    assert_eq!(w.revisions.len(), 2);
    assert_eq!(w.set.status.as_ref().unwrap().update_revision, first);
}

#[test]
fn history_beyond_the_limit_is_pruned() {
    let mut w = World::new(web(1, "v1", json!({"revisionHistoryLimit": 1})));
    w.settle();
    for v in ["v2", "v3", "v4"] {
        w.set_image(v);
        w.settle();
    }
    let mut revs: Vec<i64> = w.revisions.iter().map(|r| r.revision).collect();
    revs.sort();
    assert_eq!(revs, vec![3, 4]);
}

#[test]
fn retention_policies_set_claim_owners() {
    let mut w = World::new(web(
        2,
        "nginx:1",
        json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Delete"}}),
    ));
    w.settle();
    for c in &w.claims {
        let refs = c.metadata.owner_references.as_ref().unwrap();
        assert_eq!((refs.len(), refs[0].kind.as_str()), (1, "StatefulSet"));
    }
    w.set.spec.as_mut().unwrap().replicas = Some(1);
    let p = w.pass();
    // The claim of the pod scaled away now belongs to that pod.
    let web1_uid = p.steps.iter().find_map(|s| match s {
        Step::SetClaimOwners {
            name,
            owner_references,
            ..
        } if name == "www-web-1" => Some(owner_references[0].clone()),
        _ => None,
    });
    let owner = web1_uid.expect("www-web-1 gets the pod as owner");
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Pod", "web-1"));
    assert_eq!(w.names(), ["web-0"]);
}

#[test]
fn a_deleting_set_only_reports() {
    let mut set = web(3, "nginx:1", json!({}));
    set.metadata.deletion_timestamp = Some(crate::meta::to_time(at(1)));
    let w = World::new(set);
    let p = w.plan();
    assert!(p.steps.iter().all(|s| matches!(s, Step::CreateRevision(_))));
}

#[test]
fn names_and_ordinals() {
    assert_eq!(parent_and_ordinal("web-12"), Some(("web", 12)));
    assert_eq!(parent_and_ordinal("my-web-0"), Some(("my-web", 0)));
    assert_eq!(parent_and_ordinal("web-x"), None);
    assert_eq!(parent_and_ordinal("web"), None);
    assert_eq!(parent_and_ordinal("web-"), None);
    let set = web(1, "i", json!({}));
    let a = new_revision(&set, 1, 0);
    let b = new_revision(&set, 1, 1);
    assert_ne!(
        a.metadata.name, b.metadata.name,
        "the collision count salts"
    );
    assert!(equal_revision(&a, &b));
    assert_eq!(
        revision_template(&a).unwrap(),
        set.spec.as_ref().unwrap().template
    );
}
