//! Table tests and a rollout simulation for the deployment planner: the
//! simulation applies each plan to an in-memory fleet whose machines take one
//! tick to become available, and checks the rollout invariants at every tick.

use super::*;
use api::{MachineSetStatus, RollbackConfig};
use chrono::TimeZone;

fn t(s: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
}

fn md(replicas: i32) -> MachineDeployment {
    let mut d = MachineDeployment::test("web").replicas(replicas);
    d.metadata.uid = Some("uid-web".into());
    d.metadata.generation = Some(1);
    d
}

struct Sim {
    md: MachineDeployment,
    sets: Vec<MachineSet>,
    now: i64,
    events: Vec<&'static str>,
}

impl Sim {
    fn new(md: MachineDeployment) -> Sim {
        Sim {
            md,
            sets: Vec::new(),
            now: 0,
            events: Vec::new(),
        }
    }

    fn plan(&self) -> Plan {
        let refs: Vec<&MachineSet> = self.sets.iter().collect();
        plan(&self.md, &refs, t(self.now))
    }

    fn apply(&mut self, p: &Plan) {
        for s in &p.steps {
            match s {
                Step::CreateSet { set } => {
                    let mut set = (**set).clone();
                    assert!(
                        !self
                            .sets
                            .iter()
                            .any(|x| x.metadata.name == set.metadata.name),
                        "set names are unique"
                    );
                    set.metadata.creation_timestamp = Some(to_time(t(self.now)));
                    set.status = Some(MachineSetStatus::default());
                    self.sets.push(set);
                }
                Step::UpdateSet {
                    name: n,
                    replicas,
                    annotations,
                    template,
                } => {
                    let set = self
                        .sets
                        .iter_mut()
                        .find(|x| x.metadata.name.as_deref() == Some(n))
                        .expect("set exists");
                    set.spec.replicas = *replicas;
                    let a = set.metadata.annotations.get_or_insert_with(BTreeMap::new);
                    for (k, v) in annotations {
                        match v {
                            Some(v) => a.insert(k.clone(), v.clone()),
                            None => a.remove(k),
                        };
                    }
                    if let Some(tpl) = template {
                        set.spec.template = (**tpl).clone();
                    }
                }
                Step::DeleteSet { name: n } => {
                    self.sets.retain(|x| x.metadata.name.as_deref() != Some(n))
                }
                Step::UpdateDeployment {
                    template,
                    revision,
                    clear_rollback,
                } => {
                    if let Some(tpl) = template {
                        self.md.spec.template = (**tpl).clone();
                    }
                    if let Some(r) = revision {
                        self.md
                            .metadata
                            .annotations
                            .get_or_insert_with(BTreeMap::new)
                            .insert(labels::REVISION.into(), r.clone());
                    }
                    if *clear_rollback {
                        self.md.spec.rollback_to = None;
                    }
                }
                Step::Event { reason, .. } => self.events.push(reason),
            }
        }
        self.md.status = Some(p.status.clone());
    }

    /// Machines follow their sets: created at once but available one tick
    /// later; deleted at once.
    fn tick(&mut self) {
        self.now += 10;
        for s in &mut self.sets {
            let st = s.status.get_or_insert_with(MachineSetStatus::default);
            let spec = s.spec.replicas;
            st.available_replicas = st.replicas.min(spec);
            st.ready_replicas = st.available_replicas;
            st.replicas = spec;
        }
    }

    fn total(&self) -> i32 {
        self.sets
            .iter()
            .map(|s| s.status.as_ref().map_or(0, |x| x.replicas))
            .sum()
    }

    fn available(&self) -> i32 {
        self.sets
            .iter()
            .map(|s| s.status.as_ref().map_or(0, |x| x.available_replicas))
            .sum()
    }

    /// Plans, applies and ticks until nothing changes; returns the steps run.
    fn converge(&mut self, mut check: impl FnMut(&Sim)) -> usize {
        for i in 0..200 {
            let p = self.plan();
            let acting = p.steps.iter().any(|s| !matches!(s, Step::Event { .. }));
            self.apply(&p);
            self.tick();
            check(self);
            if !acting && self.plan().steps.is_empty() {
                return i;
            }
        }
        panic!(
            "did not converge: {:?}",
            self.sets
                .iter()
                .map(|s| (s.metadata.name.clone(), s.spec.replicas))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn fenceposts_from_the_strategy() {
    assert_eq!(fenceposts(&md(3)), (1, 0));
    assert_eq!(fenceposts(&md(10).rolling("25%", "25%")), (3, 2));
    assert_eq!(fenceposts(&md(10).rolling("0", "0%")), (0, 1));
    assert_eq!(fenceposts(&md(3).recreate()), (0, 0));
    assert_eq!(fenceposts(&md(0)), (0, 0));
}

#[test]
fn first_reconcile_creates_the_set_at_full_size() {
    let d = md(3);
    let p = plan(&d, &[], t(0));
    match &p.steps[..] {
        [Step::CreateSet { set }] => {
            assert_eq!(set.spec.replicas, 3);
            let name = set.metadata.name.clone().unwrap();
            assert!(name.starts_with("web-"), "{name}");
            let ann = set.metadata.annotations.clone().unwrap();
            assert_eq!(ann[labels::REVISION], "1");
            assert_eq!(ann[labels::DESIRED_REPLICAS], "3");
            assert_eq!(ann[labels::MAX_REPLICAS], "4");
            let hash =
                &set.spec.template.metadata.labels.as_ref().unwrap()[labels::MACHINE_TEMPLATE_HASH];
            assert_eq!(
                &set.spec
                    .selector
                    .as_ref()
                    .unwrap()
                    .match_labels
                    .as_ref()
                    .unwrap()[labels::MACHINE_TEMPLATE_HASH],
                hash
            );
            assert_eq!(
                set.metadata.owner_references.as_ref().unwrap()[0].controller,
                Some(true)
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rolling_update_holds_surge_and_availability() {
    let mut sim = Sim::new(md(3));
    sim.converge(|_| {});
    assert_eq!((sim.total(), sim.available()), (3, 3));
    // Change the class name: a rollout.
    sim.md.spec.template.spec.class.name = "other-class".into();
    sim.md.metadata.generation = Some(2);
    let steps = sim.converge(|s| {
        assert!(
            s.total() <= 4,
            "never more than replicas + maxSurge machines: {}",
            s.total()
        );
        assert!(
            s.available() >= 3,
            "never fewer than replicas available: {}",
            s.available()
        );
    });
    assert!(steps > 2);
    let live: Vec<&MachineSet> = sim.sets.iter().filter(|s| s.spec.replicas > 0).collect();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].spec.template.spec.class.name, "other-class");
    assert_eq!(
        sim.md.metadata.annotations.as_ref().unwrap()[labels::REVISION],
        "2"
    );
    let st = sim.md.status.clone().unwrap();
    assert_eq!(
        (st.updated_replicas, st.available_replicas, st.replicas),
        (3, 3, 3)
    );
    let prog = st
        .conditions
        .iter()
        .find(|c| c.type_ == CondType::Progressing)
        .unwrap();
    assert_eq!(prog.reason, "NewMachineSetAvailable");
}

#[test]
fn rolling_update_with_percentages() {
    let mut sim = Sim::new(md(10).rolling("25%", "25%"));
    sim.converge(|_| {});
    sim.md.spec.template.spec.class.name = "next".into();
    sim.converge(|s| {
        assert!(s.total() <= 13, "{}", s.total());
        assert!(s.available() >= 8, "{}", s.available());
    });
    assert_eq!(sim.available(), 10);
}

#[test]
fn in_place_changes_do_not_roll_out() {
    let mut sim = Sim::new(md(2));
    sim.converge(|_| {});
    let before: Vec<_> = sim.sets.iter().map(|s| s.metadata.name.clone()).collect();
    sim.md.spec.template.spec.configuration.drain_timeout = Some("5m".into());
    sim.converge(|_| {});
    let after: Vec<_> = sim.sets.iter().map(|s| s.metadata.name.clone()).collect();
    assert_eq!(before, after, "no new machine set");
    assert_eq!(
        sim.sets[0]
            .spec
            .template
            .spec
            .configuration
            .drain_timeout
            .as_deref(),
        Some("5m"),
        "synced in place"
    );
}

#[test]
fn recreate_empties_old_sets_first() {
    let mut sim = Sim::new(md(3).recreate());
    sim.converge(|_| {});
    sim.md.spec.template.spec.class.name = "next".into();
    let mut saw_gap = false;
    sim.converge(|s| {
        let old_alive = s
            .sets
            .iter()
            .filter(|x| x.spec.template.spec.class.name != "next")
            .map(|x| x.status.as_ref().map_or(0, |y| y.replicas))
            .sum::<i32>();
        let new_alive = s
            .sets
            .iter()
            .filter(|x| x.spec.template.spec.class.name == "next")
            .map(|x| x.status.as_ref().map_or(0, |y| y.replicas))
            .sum::<i32>();
        assert!(
            old_alive == 0 || new_alive == 0,
            "old and new machines never coexist"
        );
        if old_alive == 0 && new_alive == 0 {
            saw_gap = true;
        }
    });
    assert!(saw_gap);
    assert_eq!(sim.available(), 3);
}

#[test]
fn scaling_during_a_rollout_is_proportional() {
    let mut sim = Sim::new(md(10).rolling("30%", "0"));
    sim.converge(|_| {});
    sim.md.spec.template.spec.class.name = "next".into();
    // Two steps into the rollout: both sets active.
    for _ in 0..2 {
        let p = sim.plan();
        sim.apply(&p);
        sim.tick();
    }
    let active = sim.sets.iter().filter(|s| s.spec.replicas > 0).count();
    assert_eq!(active, 2, "mid-rollout");
    sim.md.spec.replicas = 20;
    let p = sim.plan();
    let grown: Vec<(String, i32)> = p
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::UpdateSet { name, replicas, .. } => Some((name.clone(), *replicas)),
            _ => None,
        })
        .collect();
    assert_eq!(grown.len(), 2, "both sets grow: {grown:?}");
    assert_eq!(
        grown.iter().map(|g| g.1).sum::<i32>(),
        20 + 6,
        "up to replicas + surge"
    );
    sim.apply(&p);
    sim.tick();
    sim.converge(|s| assert!(s.total() <= 26));
    assert_eq!(sim.available(), 20);
}

#[test]
fn paused_deployments_scale_but_do_not_roll_out() {
    let mut sim = Sim::new(md(2));
    sim.converge(|_| {});
    sim.md.spec.paused = true;
    sim.md.spec.template.spec.class.name = "next".into();
    sim.converge(|_| {});
    assert_eq!(sim.sets.len(), 1, "no new set while paused");
    let prog = sim
        .md
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == CondType::Progressing)
        .cloned()
        .unwrap();
    assert_eq!(
        (prog.status, prog.reason.as_str()),
        (ConditionStatus::Unknown, "DeploymentPaused")
    );
    sim.md.spec.replicas = 4;
    sim.converge(|_| {});
    assert_eq!(sim.sets[0].spec.replicas, 4, "scaling still applies");
    sim.md.spec.paused = false;
    sim.converge(|_| {});
    assert!(
        sim.sets
            .iter()
            .any(|s| s.spec.template.spec.class.name == "next" && s.spec.replicas == 4)
    );
}

#[test]
fn rollback_restores_an_earlier_template() {
    let mut sim = Sim::new(md(2));
    sim.converge(|_| {});
    sim.md.spec.template.spec.class.name = "v2".into();
    sim.converge(|_| {});
    assert_eq!(sim.sets.len(), 2);
    sim.md.spec.rollback_to = Some(RollbackConfig { revision: 0 });
    sim.converge(|_| {});
    assert_eq!(
        sim.md.spec.template.spec.class.name, "test-class",
        "back to revision 1"
    );
    assert!(sim.md.spec.rollback_to.is_none());
    assert!(sim.events.contains(&"DeploymentRollback"));
    let live: Vec<&MachineSet> = sim.sets.iter().filter(|s| s.spec.replicas > 0).collect();
    assert_eq!(live.len(), 1);
    let ann = live[0].metadata.annotations.as_ref().unwrap();
    assert_eq!(
        ann[labels::REVISION],
        "3",
        "a reused set gets the next revision"
    );
    assert_eq!(ann[labels::REVISION_HISTORY], "1");
    // An unknown revision is reported and cleared.
    sim.md.spec.rollback_to = Some(RollbackConfig { revision: 42 });
    sim.converge(|_| {});
    assert!(sim.events.contains(&"DeploymentRollbackRevisionNotFound"));
    assert!(sim.md.spec.rollback_to.is_none());
}

#[test]
fn history_is_pruned_to_the_limit() {
    let mut d = md(1);
    d.spec.revision_history_limit = Some(1);
    let mut sim = Sim::new(d);
    for class in ["a", "b", "c", "d"] {
        sim.md.spec.template.spec.class.name = class.into();
        sim.converge(|_| {});
    }
    let empty = sim.sets.iter().filter(|s| s.spec.replicas == 0).count();
    assert_eq!(empty, 1, "one old set kept");
    assert_eq!(sim.sets.len(), 2);
}

#[test]
fn progress_deadline_is_reported() {
    let mut d = md(2);
    d.spec.progress_deadline_seconds = Some(600);
    let mut sim = Sim::new(d);
    // Machines never become available.
    let p = sim.plan();
    sim.apply(&p);
    for s in &mut sim.sets {
        s.status = Some(MachineSetStatus {
            replicas: 2,
            ..Default::default()
        });
    }
    sim.now = 10;
    let p = sim.plan();
    sim.apply(&p);
    assert_eq!(p.requeue_after, Some(Duration::from_secs(600)));
    sim.now = 700;
    let p = sim.plan();
    let prog = p
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == CondType::Progressing)
        .unwrap();
    assert_eq!(
        (prog.status, prog.reason.as_str()),
        (ConditionStatus::False, "ProgressDeadlineExceeded")
    );
    let avail = p
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == CondType::Available)
        .unwrap();
    assert_eq!(avail.status, ConditionStatus::False);
}

#[test]
fn deleting_deployment_deletes_its_sets() {
    let mut sim = Sim::new(md(2));
    sim.converge(|_| {});
    sim.md.metadata.deletion_timestamp = Some(to_time(t(0)));
    let p = sim.plan();
    assert!(matches!(&p.steps[..], [Step::DeleteSet { .. }]));
}
