//! A MachineDeployment's rollout, step by step, with the sets' Machines
//! becoming available between reconciles: upstream's scenarios 16–19 plus
//! paused proportional scaling and history cleanup.

use super::*;
use crate::testing::{at, cluster, machine};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

fn md(replicas: i32, surge: i32, unavailable: i32) -> MachineDeployment {
    let mut d = MachineDeployment::new(
        "md",
        crate::types::MachineDeploymentSpec {
            cluster_name: "c1".into(),
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    labels::DEPLOYMENT_NAME.into(),
                    "md".into(),
                )])),
                ..Default::default()
            },
            template: crate::types::MachineTemplateSpec {
                metadata: crate::types::TemplateMeta {
                    labels: BTreeMap::from([(labels::DEPLOYMENT_NAME.into(), "md".into())]),
                    annotations: BTreeMap::new(),
                },
                spec: machine("x").spec,
            },
            strategy: Some(crate::types::MachineDeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(crate::types::RollingUpdate {
                    max_surge: Some(IntOrString::Int(surge)),
                    max_unavailable: Some(IntOrString::Int(unavailable)),
                    delete_policy: None,
                }),
                remediation: None,
            }),
            ..Default::default()
        },
    );
    d.metadata = ObjectMeta {
        name: Some("md".into()),
        namespace: Some("default".into()),
        uid: Some("uid-md".into()),
        generation: Some(1),
        finalizers: Some(vec![labels::MACHINE_DEPLOYMENT_FINALIZER.into()]),
        labels: Some(BTreeMap::from([(labels::CLUSTER_NAME.into(), "c1".into())])),
        owner_references: Some(vec![meta::owner_ref(
            crate::API_VERSION,
            "Cluster",
            "c1",
            "uid-c1",
            false,
        )]),
        ..Default::default()
    };
    d
}

/// The world between reconciles: sets and how many of their Machines are
/// available (all of a set's Machines exist and become available at once
/// when `settle` runs).
struct World {
    sets: Vec<MachineSet>,
    clock: i64,
}

impl World {
    fn reconcile(&mut self, d: &MachineDeployment, random: &str) -> DeploymentPlan {
        let c = cluster();
        let p = plan(&DeploymentScope {
            md: d,
            cluster: Some(&c),
            sets: self.sets.iter().collect(),
            machines_per_set: self
                .sets
                .iter()
                .map(|s| {
                    let n = s.status.as_ref().map_or(0, |x| x.replicas) as usize;
                    (s.metadata.name.clone().unwrap(), (n, 0))
                })
                .collect(),
            templates_found: true,
            random: random.into(),
            now: at(self.clock),
        });
        if let Some(mut s) = p.create.clone() {
            s.metadata.uid = Some(format!("uid-{}", s.metadata.name.as_deref().unwrap()));
            s.metadata.creation_timestamp = Some(mcm::time::to_time(at(self.clock)));
            self.sets.push(s);
        }
        for (name, patch) in &p.set_patches {
            let s = self
                .sets
                .iter_mut()
                .find(|s| s.metadata.name.as_deref() == Some(name))
                .unwrap();
            let mut v = serde_json::to_value(&*s).unwrap();
            meta::merge_into(&mut v, patch.clone());
            *s = serde_json::from_value(v).unwrap();
        }
        self.sets
            .retain(|s| !p.delete.contains(s.metadata.name.as_ref().unwrap()));
        self.clock += 1;
        p
    }

    /// Machines catch up with spec: `ready` new Machines become available.
    fn settle(&mut self, available: bool) {
        for s in &mut self.sets {
            let r = s.spec.replicas.unwrap_or(0);
            let st = s.status.get_or_insert_with(Default::default);
            st.replicas = r;
            st.ready_replicas = if available {
                r
            } else {
                st.ready_replicas.min(r)
            };
            st.available_replicas = if available {
                r
            } else {
                st.available_replicas.min(r)
            };
            st.observed_generation = Some(1);
        }
    }

    fn replicas(&self) -> Vec<(String, i32)> {
        self.sets
            .iter()
            .map(|s| {
                (
                    s.metadata.name.clone().unwrap(),
                    s.spec.replicas.unwrap_or(0),
                )
            })
            .collect()
    }
}

#[test]
fn first_reconcile_creates_a_full_set() {
    let d = md(3, 1, 0);
    let mut w = World {
        sets: vec![],
        clock: 0,
    };
    let p = w.reconcile(&d, "aaaaa");
    let s = p.create.unwrap();
    assert_eq!(s.metadata.name.as_deref(), Some("md-aaaaa"));
    assert_eq!(s.spec.replicas, Some(3));
    assert_eq!(
        s.metadata.annotations.as_ref().unwrap()[labels::REVISION],
        "1"
    );
    assert_eq!(
        s.metadata.annotations.as_ref().unwrap()[labels::MAX_REPLICAS],
        "4"
    );
    let hash = &s.spec.template.metadata.labels[labels::MACHINE_TEMPLATE_HASH];
    assert!(hash.ends_with("-aaaaa"), "{hash}");
    assert_eq!(
        s.spec.selector.match_labels.as_ref().unwrap()[labels::MACHINE_TEMPLATE_HASH],
        *hash
    );
    assert_eq!(
        s.metadata.owner_references.as_ref().unwrap()[0].kind,
        "MachineDeployment"
    );
}

/// Scenario 16: surge 1 / unavailable 0 replaces one Machine at a time and
/// never drops below 3 available or above 4 Machines.
#[test]
fn rolling_update_within_surge_and_unavailable() {
    let mut d = md(3, 1, 0);
    let mut w = World {
        sets: vec![],
        clock: 0,
    };
    w.reconcile(&d, "aaaaa");
    w.settle(true);
    d.spec.template.spec.version = Some("v1.32.0".into());
    let p = w.reconcile(&d, "bbbbb");
    assert_eq!(p.create.as_ref().unwrap().spec.replicas, Some(1));
    assert_eq!(
        p.create
            .as_ref()
            .unwrap()
            .metadata
            .annotations
            .as_ref()
            .unwrap()[labels::REVISION],
        "2"
    );
    assert_eq!(
        w.replicas(),
        [("md-aaaaa".into(), 3), ("md-bbbbb".into(), 1)]
    );
    let surge_ok = |w: &World| w.replicas().iter().map(|r| r.1).sum::<i32>() <= 4;
    let available = |w: &World| -> i32 {
        w.sets
            .iter()
            .map(|s| s.status.as_ref().map_or(0, |x| x.available_replicas))
            .sum()
    };
    let mut steps = 0;
    loop {
        // New Machines exist but are not available yet: old ones may not go.
        w.settle(false);
        assert!(
            available(&w) >= 3,
            "availability dropped: {:?}",
            w.replicas()
        );
        w.reconcile(&d, "zzzzz");
        assert!(surge_ok(&w), "surge exceeded: {:?}", w.replicas());
        w.settle(false);
        assert!(
            available(&w) >= 3,
            "availability dropped: {:?}",
            w.replicas()
        );
        w.settle(true);
        w.reconcile(&d, "zzzzz");
        assert!(surge_ok(&w), "surge exceeded: {:?}", w.replicas());
        steps += 1;
        if w.replicas() == [("md-aaaaa".into(), 0), ("md-bbbbb".into(), 3)] {
            break;
        }
        assert!(steps < 10, "rollout stuck at {:?}", w.replicas());
    }
    assert!(steps >= 3, "one Machine at a time: {steps} steps");
    // The old set is kept as history (limit 1); a third rollout deletes it.
    w.settle(true);
    w.reconcile(&d, "zzzzz");
    assert_eq!(w.sets.len(), 2);
    d.spec.template.spec.version = Some("v1.33.0".into());
    for _ in 0..12 {
        w.reconcile(&d, "ccccc");
        w.settle(true);
    }
    let names: Vec<String> = w
        .sets
        .iter()
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["md-bbbbb", "md-ccccc"]);
}

/// Scenario 17: label and timeout changes are applied in place.
#[test]
fn in_place_changes_do_not_roll() {
    let mut d = md(3, 1, 0);
    let mut w = World {
        sets: vec![],
        clock: 0,
    };
    w.reconcile(&d, "aaaaa");
    w.settle(true);
    d.spec
        .template
        .metadata
        .labels
        .insert("tier".into(), "gold".into());
    d.spec.template.spec.node_drain_timeout = Some("5m".into());
    let p = w.reconcile(&d, "bbbbb");
    assert!(p.create.is_none());
    let s = &w.sets[0];
    assert_eq!(s.spec.template.metadata.labels["tier"], "gold");
    assert!(
        s.spec
            .template
            .metadata
            .labels
            .contains_key(labels::MACHINE_TEMPLATE_HASH)
    );
    assert_eq!(
        s.spec.template.spec.node_drain_timeout.as_deref(),
        Some("5m")
    );
}

/// Scenario 18: surge 0 and unavailable 0 would deadlock; one old Machine
/// goes first.
#[test]
fn zero_surge_and_unavailable_remove_one_first() {
    let mut d = md(3, 0, 0);
    let mut w = World {
        sets: vec![],
        clock: 0,
    };
    w.reconcile(&d, "aaaaa");
    w.settle(true);
    d.spec.template.spec.version = Some("v1.32.0".into());
    // One old Machine goes before a new one is added.
    w.reconcile(&d, "bbbbb");
    assert_eq!(
        w.replicas(),
        [("md-aaaaa".into(), 2), ("md-bbbbb".into(), 0)]
    );
    w.settle(true);
    w.reconcile(&d, "bbbbb");
    assert_eq!(
        w.replicas(),
        [("md-aaaaa".into(), 2), ("md-bbbbb".into(), 1)]
    );
}

/// Scenario 19: OnDelete creates the new set at 0 and follows deletions.
#[test]
fn on_delete_follows_user_deletions() {
    let mut d = md(3, 1, 0);
    let mut w = World {
        sets: vec![],
        clock: 0,
    };
    w.reconcile(&d, "aaaaa");
    w.settle(true);
    d.spec.strategy.as_mut().unwrap().type_ = Some("OnDelete".into());
    d.spec.template.spec.version = Some("v1.32.0".into());
    w.reconcile(&d, "bbbbb");
    assert_eq!(
        w.replicas(),
        [("md-aaaaa".into(), 3), ("md-bbbbb".into(), 0)]
    );
    let old = &w.sets[0];
    assert_eq!(
        old.metadata.annotations.as_ref().unwrap()[labels::DISABLE_MACHINE_CREATE],
        "true"
    );
    // The user deletes one old Machine.
    w.sets[0].status.as_mut().unwrap().replicas = 2;
    w.reconcile(&d, "bbbbb");
    assert_eq!(
        w.replicas(),
        [("md-aaaaa".into(), 2), ("md-bbbbb".into(), 1)]
    );
}

#[test]
fn paused_scales_proportionally_without_rolling() {
    let mut d = md(3, 1, 0);
    let mut w = World {
        sets: vec![],
        clock: 0,
    };
    w.reconcile(&d, "aaaaa");
    w.settle(true);
    d.spec.paused = true;
    d.spec.template.spec.version = Some("v1.32.0".into());
    d.spec.replicas = Some(5);
    let p = w.reconcile(&d, "bbbbb");
    assert!(p.create.is_none(), "no rollout while paused");
    assert_eq!(w.replicas(), [("md-aaaaa".into(), 5)]);
}

#[test]
fn status_counts_and_conditions() {
    let d = md(3, 1, 0);
    let mut w = World {
        sets: vec![],
        clock: 0,
    };
    w.reconcile(&d, "aaaaa");
    w.settle(true);
    let p = w.reconcile(&d, "aaaaa");
    let st = &p.status;
    assert_eq!(
        (
            st.replicas,
            st.updated_replicas,
            st.ready_replicas,
            st.available_replicas,
            st.unavailable_replicas
        ),
        (3, 3, 3, 3, 0)
    );
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert!(cond::is_true(&st.conditions, ct::AVAILABLE));
    assert_eq!(
        st.selector.as_deref(),
        Some("cluster.x-k8s.io/deployment-name=md")
    );
    w.sets[0].status.as_mut().unwrap().available_replicas = 1;
    w.sets[0].status.as_mut().unwrap().ready_replicas = 1;
    let p = w.reconcile(&d, "aaaaa");
    assert_eq!(p.status.phase.as_deref(), Some("ScalingUp"));
    assert_eq!(
        cond::get(&p.status.conditions, ct::AVAILABLE)
            .unwrap()
            .reason,
        "WaitingForAvailableMachines"
    );
}

#[test]
fn rollout_fields_ignore_labels_and_timeouts() {
    let mut a = machine("x").spec;
    let b = a.clone();
    a.node_drain_timeout = Some("1m".into());
    assert_eq!(rollout_fields(&a), rollout_fields(&b));
    a.infrastructure_ref.name = Some("other".into());
    assert_ne!(template_hash(&a), template_hash(&b));
    let mut c = b.clone();
    c.infrastructure_ref.api_version = Some("infrastructure.cluster.x-k8s.io/v1beta2".into());
    assert_eq!(
        rollout_fields(&c),
        rollout_fields(&b),
        "the version of a reference does not roll"
    );
}

#[test]
fn deletion_deletes_sets_then_lets_go() {
    let d = crate::testing::deleting(md(3, 1, 0), at(0));
    let mut w = World {
        sets: vec![],
        clock: 0,
    };
    let p = w.reconcile(&d, "aaaaa");
    assert!(p.remove_finalizer);
    let mut live = md(3, 1, 0);
    live.metadata.deletion_timestamp = None;
    let mut w2 = World {
        sets: vec![],
        clock: 0,
    };
    w2.reconcile(&live, "aaaaa");
    let p = w2.reconcile(&d, "aaaaa");
    assert_eq!(p.delete, ["md-aaaaa"]);
    assert!(!p.remove_finalizer);
}
