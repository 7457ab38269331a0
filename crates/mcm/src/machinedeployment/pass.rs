//! One reconcile of a deployment, planned as a whole (spec §4, "Order"):
//! the finalizer, the wait for the cache to show the controller's own
//! writes, the cluster autoscaler's triggered deletions, or the rollout
//! plan; plus the status to write and when to look again. The executor
//! (`controllers::machinedeployment`) carries the steps out one by one and
//! decides nothing.

use std::time::Duration;

use api::{MachineDeployment, MachineDeploymentStatus, MachinePhase, MachineSet, labels};
use chrono::{DateTime, Utc};

use super::{Step, TriggeredDeletion, plan, triggered_deletions};
use crate::machineset::CACHE_WAIT;

/// One change the executor makes in a deployment's pass.
#[derive(Clone, Debug, PartialEq)]
pub enum PassStep {
    /// Put the MCM finalizer on the deployment.
    AddFinalizer,
    /// Take it off: the deployment is deleted and its sets are gone.
    RemoveFinalizer,
    /// Drop what the controller expects to see of the deployment's sets.
    ForgetExpectations,
    /// Mark a machine the autoscaler picked: priority 1 and the marked
    /// time, so its machine set deletes exactly it once the replicas drop.
    MarkForDeletion(TriggeredDeletion),
    /// Set the trigger-deletion annotation to what is left of it (`None`
    /// removes it).
    ConsumeTriggers { left: Option<String> },
    /// A step of the rollout plan ([`plan`]).
    Rollout(Step),
}

/// When the deployment is looked at again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requeue {
    /// Only when something changes.
    AwaitChange,
    /// After this long, or sooner if something changes.
    After(Duration),
}

/// The plan of one pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Pass {
    pub steps: Vec<PassStep>,
    /// The status to write, when it differs from the deployment's; only a
    /// pass that planned the rollout has one.
    pub status: Option<MachineDeploymentStatus>,
    pub requeue: Requeue,
}

/// What the executor observed besides the deployment.
pub struct Observed<'a> {
    /// The machine sets the deployment controls, as cached.
    pub sets: &'a [&'a MachineSet],
    /// The cache shows every write of the controller's last pass.
    pub cache_current: bool,
    /// The phase of a machine of the deployment's namespace by name:
    /// `None` when there is no such machine, `Terminating` for one being
    /// deleted.
    pub machine_phase: &'a dyn Fn(&str) -> Option<Option<MachinePhase>>,
}

fn has_finalizer(md: &MachineDeployment) -> bool {
    md.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == labels::MCM_FINALIZER)
}

/// The pass for `md`. In order: a deleted deployment without sets only
/// lets go; one without the finalizer only gets it; a cache that does not
/// show the last pass's writes yet is waited for; the autoscaler's
/// triggered deletions are applied alone, then looked at again once the
/// cache shows them; otherwise the rollout plan runs.
pub fn plan_pass(md: &MachineDeployment, seen: &Observed, now: DateTime<Utc>) -> Pass {
    let only = |steps: Vec<PassStep>, requeue| Pass {
        steps,
        status: None,
        requeue,
    };
    let deleting = md.metadata.deletion_timestamp.is_some();
    if deleting && seen.sets.is_empty() {
        let mut steps = Vec::new();
        if has_finalizer(md) {
            steps.push(PassStep::RemoveFinalizer);
        }
        steps.push(PassStep::ForgetExpectations);
        return only(steps, Requeue::AwaitChange);
    }
    if !deleting && !has_finalizer(md) {
        return only(vec![PassStep::AddFinalizer], Requeue::AwaitChange);
    }
    if !seen.cache_current {
        return only(Vec::new(), Requeue::After(CACHE_WAIT));
    }
    if let Some(ann) = md
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::TRIGGER_DELETION_BY_MCM))
    {
        let at = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let (marks, left) = triggered_deletions(ann, &at, seen.machine_phase);
        let mut steps: Vec<PassStep> = marks.into_iter().map(PassStep::MarkForDeletion).collect();
        steps.push(PassStep::ConsumeTriggers { left });
        return only(steps, Requeue::After(CACHE_WAIT));
    }
    let rollout = plan(md, seen.sets, now);
    Pass {
        steps: rollout.steps.into_iter().map(PassStep::Rollout).collect(),
        status: Some(rollout.status),
        requeue: Requeue::After(rollout.requeue),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinedeployment::ROLLOUT_RECHECK;
    use crate::machineset::RESYNC;
    use crate::time::to_time;
    use api::MachineSetStatus;
    use api::testing::Fixture;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    fn md(replicas: i32) -> MachineDeployment {
        let mut d = MachineDeployment::test("web")
            .replicas(replicas)
            .with_uid("uid-web")
            .finalizer(labels::MCM_FINALIZER)
            // The revision its first set gets, as the deployment records it.
            .annotation(labels::REVISION, "1");
        d.metadata.generation = Some(1);
        d
    }

    fn phase(name: &str) -> Option<Option<MachinePhase>> {
        match name {
            "m1" => Some(Some(MachinePhase::Running)),
            "m2" => Some(Some(MachinePhase::Failed)),
            _ => None,
        }
    }

    fn pass(md: &MachineDeployment, sets: &[&MachineSet], cache_current: bool) -> Pass {
        let seen = Observed {
            sets,
            cache_current,
            machine_phase: &phase,
        };
        plan_pass(md, &seen, t(0))
    }

    /// The set a deployment's first pass creates, with its machines all
    /// there and available.
    fn settled_set(md: &MachineDeployment) -> MachineSet {
        let p = pass(md, &[], true);
        let Some(PassStep::Rollout(Step::CreateSet { set })) = p.steps.first() else {
            panic!("{p:?}");
        };
        let mut set = (**set).clone();
        set.metadata.creation_timestamp = Some(to_time(t(0)));
        set.status = Some(MachineSetStatus {
            replicas: set.spec.replicas,
            ready_replicas: set.spec.replicas,
            available_replicas: set.spec.replicas,
            ..MachineSetStatus::default()
        });
        set
    }

    #[test]
    fn the_order_of_a_pass() {
        let mut deleting = md(2);
        deleting.metadata.deletion_timestamp = Some(to_time(t(0)));
        let mut deleted = deleting.clone();
        deleted.metadata.finalizers = None;
        let mut fresh = md(2);
        fresh.metadata.finalizers = None;
        let triggered = md(2).annotation(
            labels::TRIGGER_DELETION_BY_MCM,
            "m1,m2~2026-11-21T09:00:00Z,gone",
        );
        let plain = md(2);
        let set = settled_set(&plain);
        let wait = Requeue::After(CACHE_WAIT);
        // (deployment, sets, cache current, steps, status written, requeue)
        type Row<'a> = (
            &'a MachineDeployment,
            Vec<&'a MachineSet>,
            bool,
            Vec<PassStep>,
            bool,
            Requeue,
        );
        let table: Vec<Row> = vec![
            // Deleted and its sets gone: only let go.
            (
                &deleting,
                vec![],
                false,
                vec![PassStep::RemoveFinalizer, PassStep::ForgetExpectations],
                false,
                Requeue::AwaitChange,
            ),
            (
                &deleted,
                vec![],
                true,
                vec![PassStep::ForgetExpectations],
                false,
                Requeue::AwaitChange,
            ),
            // The finalizer comes first, before the cache is even asked.
            (
                &fresh,
                vec![],
                false,
                vec![PassStep::AddFinalizer],
                false,
                Requeue::AwaitChange,
            ),
            // A cache behind our own writes is waited for.
            (&plain, vec![], false, vec![], false, wait),
            (&deleting, vec![&set], false, vec![], false, wait),
            // Triggered deletions alone, every entry consumed: m1 marked at
            // the pass's time, m2 (Failed) and a missing machine dropped.
            (
                &triggered,
                vec![&set],
                true,
                vec![
                    PassStep::MarkForDeletion(TriggeredDeletion {
                        machine: "m1".into(),
                        marked_at: "2023-11-14T22:13:20Z".into(),
                    }),
                    PassStep::ConsumeTriggers { left: None },
                ],
                false,
                wait,
            ),
            // A deleting deployment with sets deletes them.
            (
                &deleting,
                vec![&set],
                true,
                vec![PassStep::Rollout(Step::DeleteSet {
                    name: set.metadata.name.clone().unwrap(),
                })],
                true,
                wait,
            ),
            // Settled: nothing to do until the resync.
            (
                &plain,
                vec![&set],
                true,
                vec![],
                true,
                Requeue::After(RESYNC),
            ),
        ];
        for (i, (d, sets, cache_current, steps, status, requeue)) in table.into_iter().enumerate() {
            let p = pass(d, &sets, cache_current);
            assert_eq!(p.steps, steps, "case {i}");
            assert_eq!(p.status.is_some(), status, "case {i}");
            assert_eq!(p.requeue, requeue, "case {i}");
        }
        // A rollout pass carries the rollout plan's steps and status.
        let p = pass(&md(2), &[], true);
        assert!(matches!(
            &p.steps[..],
            [PassStep::Rollout(Step::CreateSet { .. })]
        ));
        assert_eq!(p.status, Some(plan(&md(2), &[], t(0)).status));
        assert_eq!(p.requeue, wait);
    }

    #[test]
    fn the_planner_decides_when_a_deployment_is_settled() {
        let d = md(2);
        let set = settled_set(&d);
        let with = |f: &dyn Fn(&mut MachineSetStatus)| {
            let mut s = set.clone();
            f(s.status.as_mut().unwrap());
            s
        };
        let unavailable = with(&|st| st.available_replicas = 1);
        let surplus = with(&|st| st.replicas = 3);
        let mut paused = d.clone();
        paused.spec.paused = true;
        // (deployment, its one set, requeue)
        let table = [
            (&d, &set, RESYNC),
            // Replicas not yet available, or still terminating: a rollout
            // under way is looked at every few seconds.
            (&d, &unavailable, ROLLOUT_RECHECK),
            (&d, &surplus, ROLLOUT_RECHECK),
            // A paused deployment is not rolling out.
            (&paused, &unavailable, RESYNC),
        ];
        for (i, (d, set, want)) in table.into_iter().enumerate() {
            let p = plan(d, &[set], t(0));
            assert!(p.steps.is_empty(), "case {i}: {:?}", p.steps);
            assert_eq!(p.requeue, want, "case {i}");
        }
        // The decision itself, over what a plan holds: (acts, updated,
        // replicas, available, paused, deadline, requeue).
        let secs = std::time::Duration::from_secs;
        let table = [
            (true, 2, 2, 2, false, None, CACHE_WAIT),
            (false, 2, 2, 2, false, None, RESYNC),
            (false, 2, 2, 2, false, Some(secs(30)), secs(30)),
            (false, 2, 2, 2, false, Some(secs(3600)), RESYNC),
            (false, 1, 2, 2, false, Some(secs(30)), ROLLOUT_RECHECK),
            (false, 2, 3, 2, false, None, ROLLOUT_RECHECK),
            (false, 2, 2, 1, false, None, ROLLOUT_RECHECK),
            (false, 2, 2, 1, true, None, RESYNC),
        ];
        for (i, (acts, updated, replicas, available, paused, deadline, want)) in
            table.into_iter().enumerate()
        {
            let mut d = md(2);
            d.spec.paused = paused;
            let steps = if acts {
                vec![Step::DeleteSet { name: "x".into() }]
            } else {
                vec![Step::Event {
                    reason: "Noted",
                    message: String::new(),
                    warning: false,
                }]
            };
            let status = MachineDeploymentStatus {
                updated_replicas: updated,
                replicas,
                available_replicas: available,
                ..MachineDeploymentStatus::default()
            };
            assert_eq!(
                super::super::requeue(&d, &steps, &status, deadline),
                want,
                "case {i}"
            );
        }
    }
}
