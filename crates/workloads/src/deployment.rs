//! The Deployment decision (upstream's `syncDeployment`): which
//! ReplicaSets to create, scale or delete, the revision annotations, and
//! the status with its Progressing and Available conditions — from the
//! Deployment, the ReplicaSets it manages and their pods.
//!
//! The order follows upstream: a deleting Deployment only reports; a paused
//! one, or one whose replica count changed (a "scaling event"), is scaled
//! proportionally; otherwise the strategy takes one step — RollingUpdate
//! grows the new set within `maxSurge` or shrinks old sets within
//! `maxUnavailable`, Recreate scales the old sets to zero, waits for their
//! pods to go, then scales the new one up. Rollbacks (`kubectl rollout
//! undo`) and restarts (`kubectl rollout restart`) are template changes
//! made by kubectl; the new set is then an existing one, which gets the
//! next revision and remembers its old ones in `revision-history`.
//!
//! The fencepost and rolling-step arithmetic is machine-controller-
//! manager's (the same algorithm, inherited from here), imported from
//! `mcm::rollout`.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use mcm::rollout::{self, IntOrPercent, SetCounts};
use serde_json::Value;

use crate::meta::{self, Owner, annotation, created, to_chrono, to_time};
use crate::names;

mod replica_sets;
mod status;

use replica_sets::{by_age, int_annotation, set_new_annotations, set_replicas_annotations};
pub use replica_sets::{collision, equal_ignore_hash, find_new, new_replica_set, revision};
pub use status::{collided, create_failed};
use status::{complete, condition, new_condition, paused_conditions, set_condition};

/// Upstream's limit on the `revision-history` annotation.
const MAX_REVISION_HISTORY_CHARS: usize = 2000;

/// Annotations of a Deployment that its ReplicaSets do not copy.
const NOT_COPIED: &[&str] = &[
    names::LAST_APPLIED,
    names::REVISION,
    names::REVISION_HISTORY,
    names::DESIRED_REPLICAS,
    names::MAX_REPLICAS,
    names::DEPRECATED_ROLLBACK_TO,
];

/// One write of a pass, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Create the new ReplicaSet. An `AlreadyExists` answer means the cache
    /// was stale or the hash collided ([`collision`] tells which).
    CreateReplicaSet(Box<ReplicaSet>),
    /// Set a ReplicaSet's replicas, annotations (added or changed keys) and
    /// `minReadySeconds`, guarded by the resource version it was planned
    /// from.
    UpdateReplicaSet {
        name: String,
        resource_version: Option<String>,
        replicas: i32,
        annotations: BTreeMap<String, String>,
        min_ready_seconds: Option<i32>,
    },
    /// Delete an old ReplicaSet beyond `revisionHistoryLimit`.
    DeleteReplicaSet {
        name: String,
        uid: Option<String>,
        resource_version: Option<String>,
    },
    /// Record the rollout's revision on the Deployment.
    SetRevision(String),
    Event {
        warning: bool,
        reason: &'static str,
        message: String,
    },
}

/// What one pass of a Deployment does.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
    /// The status to write, when it differs from the observed one.
    pub status: Option<DeploymentStatus>,
    /// Look again then (the progress deadline).
    pub requeue_after: Option<Duration>,
}

/// What a pass of a Deployment sees.
pub struct Observed<'a> {
    pub deployment: &'a Deployment,
    /// The ReplicaSets it manages (claimed).
    pub sets: Vec<&'a ReplicaSet>,
    /// Their pods, for Recreate's wait until old pods are gone.
    pub pods: Vec<&'a Pod>,
}

pub fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn rs_status(rs: &ReplicaSet) -> (i32, i32, i32) {
    let s = rs.status.as_ref();
    (
        s.map_or(0, |s| s.replicas),
        s.and_then(|s| s.ready_replicas).unwrap_or(0),
        s.and_then(|s| s.available_replicas).unwrap_or(0),
    )
}

fn strategy_type(d: &Deployment) -> &str {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
}

fn is_rolling(d: &Deployment) -> bool {
    strategy_type(d) == "RollingUpdate"
}

/// `(maxSurge, maxUnavailable)` resolved against the replicas (both 0
/// for Recreate).
pub fn fenceposts(d: &Deployment) -> (i32, i32) {
    if !is_rolling(d) {
        return (0, 0);
    }
    let ru = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.clone())
        .unwrap_or_default();
    let parse = |v: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>| {
        v.and_then(IntOrPercent::from_int_or_string)
            .unwrap_or(IntOrPercent::Percent(25))
    };
    let replicas = i64::from(replicas(d).max(0));
    let (s, u) = rollout::fenceposts(
        replicas,
        &parse(ru.max_surge.as_ref()),
        &parse(ru.max_unavailable.as_ref()),
    );
    (s as i32, u as i32)
}

fn max_surge(d: &Deployment) -> i32 {
    fenceposts(d).0
}

fn max_unavailable(d: &Deployment) -> i32 {
    if replicas(d) == 0 { 0 } else { fenceposts(d).1 }
}

fn progress_deadline(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .filter(|s| *s != i32::MAX)
}

fn revision_history_limit(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .filter(|l| *l != i32::MAX)
}

/// One pass in progress: working copies of the Deployment's status and its
/// sets, and the writes so far.
struct Pass<'a> {
    d: &'a Deployment,
    status: DeploymentStatus,
    sets: Vec<ReplicaSet>,
    new: Option<usize>,
    pods: &'a [&'a Pod],
    steps: Vec<Step>,
    revision: Option<String>,
    now: DateTime<Utc>,
}

impl Pass<'_> {
    fn event(&mut self, warning: bool, reason: &'static str, message: String) {
        self.steps.push(Step::Event {
            warning,
            reason,
            message,
        });
    }

    fn olds(&self) -> Vec<usize> {
        (0..self.sets.len())
            .filter(|i| Some(*i) != self.new)
            .collect()
    }

    fn active(&self, idx: &[usize]) -> Vec<usize> {
        idx.iter()
            .copied()
            .filter(|i| rs_replicas(&self.sets[*i]) > 0)
            .collect()
    }

    fn update_step(&mut self, i: usize) {
        let rs = &self.sets[i];
        self.steps.push(Step::UpdateReplicaSet {
            name: meta::name(&rs.metadata).to_string(),
            resource_version: rs.metadata.resource_version.clone(),
            replicas: rs_replicas(rs),
            annotations: rs.metadata.annotations.clone().unwrap_or_default(),
            min_ready_seconds: rs.spec.as_ref().and_then(|s| s.min_ready_seconds),
        });
    }

    /// `getNewReplicaSet`: find the set of the current template (syncing
    /// its annotations and the Deployment's revision) or, if asked to,
    /// create it.
    fn new_replica_set(&mut self, create: bool) {
        let olds: Vec<&ReplicaSet> = self
            .sets
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != self.new)
            .map(|(_, rs)| rs)
            .collect();
        let next_revision = olds.iter().map(|rs| revision(rs)).max().unwrap_or(0) + 1;
        if let Some(i) = self.new {
            let mut rs = self.sets[i].clone();
            let changed = set_new_annotations(self.d, &mut rs, next_revision, true);
            let min_ready = self.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
            let min_ready_changed = rs
                .spec
                .as_ref()
                .and_then(|s| s.min_ready_seconds)
                .unwrap_or(0)
                != min_ready.unwrap_or(0);
            if changed || min_ready_changed {
                if let Some(s) = rs.spec.as_mut() {
                    s.min_ready_seconds = min_ready;
                }
                self.sets[i] = rs;
                self.update_step(i);
                return;
            }
            let rev = annotation(&self.sets[i].metadata, names::REVISION)
                .unwrap_or_default()
                .to_string();
            self.revision = Some(rev);
            if progress_deadline(self.d).is_some()
                && condition(&self.status, "Progressing").is_none()
            {
                let msg = format!("Found new replica set {:?}", meta::name(&rs.metadata));
                set_condition(
                    &mut self.status,
                    new_condition("Progressing", "True", "FoundNewReplicaSet", msg, self.now),
                );
            }
            return;
        }
        if !create {
            return;
        }
        // The new set starts with what a rolling step allows it (all the
        // replicas for Recreate).
        let mut rs = new_replica_set(self.d, 0, next_revision);
        let start = if is_rolling(self.d) {
            let all: Vec<&ReplicaSet> = self.sets.iter().collect();
            new_set_replicas(self.d, &all, &rs)
        } else {
            replicas(self.d)
        };
        if let Some(s) = rs.spec.as_mut() {
            s.replicas = Some(start);
        }
        let name = meta::name(&rs.metadata).to_string();
        self.steps
            .push(Step::CreateReplicaSet(Box::new(rs.clone())));
        if start > 0 {
            self.event(
                false,
                "ScalingReplicaSet",
                format!("Scaled up replica set {name} from 0 to {start}"),
            );
        }
        self.revision = Some(next_revision.to_string());
        if progress_deadline(self.d).is_some() {
            let msg = format!("Created new replica set {name:?}");
            set_condition(
                &mut self.status,
                new_condition("Progressing", "True", "NewReplicaSetCreated", msg, self.now),
            );
        }
        self.sets.push(rs);
        self.new = Some(self.sets.len() - 1);
    }

    /// `scaleReplicaSet`: a new size, and the replica annotations.
    fn scale_set(&mut self, i: usize, size: i32, operation: &str) -> bool {
        let d_replicas = replicas(self.d);
        let max = d_replicas + max_surge(self.d);
        let old = rs_replicas(&self.sets[i]);
        let mut rs = self.sets[i].clone();
        let annotations_changed = set_replicas_annotations(&mut rs, d_replicas, max);
        if old == size && !annotations_changed {
            return false;
        }
        if let Some(s) = rs.spec.as_mut() {
            s.replicas = Some(size);
        }
        self.sets[i] = rs;
        self.update_step(i);
        if old != size {
            let name = meta::name(&self.sets[i].metadata).to_string();
            self.event(
                false,
                "ScalingReplicaSet",
                format!("Scaled {operation} replica set {name} from {old} to {size}"),
            );
        }
        true
    }

    fn scale_and_record(&mut self, i: usize, size: i32) -> bool {
        let op = if rs_replicas(&self.sets[i]) < size {
            "up"
        } else {
            "down"
        };
        if rs_replicas(&self.sets[i]) == size {
            return false;
        }
        self.scale_set(i, size, op)
    }

    /// `isScalingEvent`: an active set was sized for other replicas.
    fn is_scaling_event(&self) -> bool {
        let want = replicas(self.d);
        (0..self.sets.len())
            .filter(|i| rs_replicas(&self.sets[*i]) > 0)
            .any(|i| {
                int_annotation(&self.sets[i], names::DESIRED_REPLICAS).is_some_and(|r| r != want)
            })
    }

    /// `scale`: the only active set takes all replicas; a saturated new
    /// set empties the old ones; otherwise replicas are spread over the
    /// active sets in proportion (rolling updates only).
    fn scale(&mut self) {
        let want = replicas(self.d);
        let all: Vec<usize> = (0..self.sets.len()).collect();
        let active = self.active(&all);
        let target = match active.len() {
            0 => self.new.or_else(|| {
                let mut olds = self.olds();
                olds.sort_by(|a, b| by_age(&self.sets[*b], &self.sets[*a]));
                olds.first().copied()
            }),
            1 => Some(active[0]),
            _ => None,
        };
        if let Some(i) = target {
            self.scale_and_record(i, want);
            return;
        }
        if self.new.is_some_and(|n| self.saturated(n)) {
            for i in self.active(&self.olds()) {
                self.scale_and_record(i, 0);
            }
            return;
        }
        if !is_rolling(self.d) {
            return;
        }
        let allowed = if want > 0 {
            want + max_surge(self.d)
        } else {
            0
        };
        let current: i32 = active.iter().map(|i| rs_replicas(&self.sets[*i])).sum();
        let to_add = allowed - current;
        let mut order = active.clone();
        // Larger sets first; on ties newer first when growing, older
        // first when shrinking.
        order.sort_by(|a, b| {
            let (x, y) = (&self.sets[*a], &self.sets[*b]);
            let by_size = rs_replicas(y).cmp(&rs_replicas(x));
            let by_age = if to_add > 0 {
                by_age(y, x)
            } else {
                by_age(x, y)
            };
            by_size.then(by_age)
        });
        let operation = if to_add > 0 { "up" } else { "down" };
        let mut added = 0;
        let mut sizes: Vec<i32> = Vec::with_capacity(order.len());
        for &i in &order {
            let size = rs_replicas(&self.sets[i]);
            if to_add != 0 {
                let p = self.proportion(i, to_add, added);
                sizes.push(size + p);
                added += p;
            } else {
                sizes.push(size);
            }
        }
        for (k, &i) in order.iter().enumerate() {
            let mut size = sizes[k];
            if k == 0 && to_add != 0 {
                size = (size + to_add - added).max(0);
            }
            self.scale_set(i, size, operation);
        }
    }

    /// `GetProportion`: a set's share of a replica change.
    fn proportion(&self, i: usize, to_add: i32, added: i32) -> i32 {
        let rs = &self.sets[i];
        let size = rs_replicas(rs);
        if size == 0 || to_add == 0 || to_add == added {
            return 0;
        }
        let want = replicas(self.d);
        let fraction = if want == 0 {
            -size
        } else {
            let d_max = want + max_surge(self.d);
            let annotated = int_annotation(rs, names::MAX_REPLICAS).unwrap_or_else(|| {
                self.d
                    .status
                    .as_ref()
                    .map_or(0, |s| s.replicas.unwrap_or(0))
            });
            if annotated == 0 {
                0
            } else {
                ((f64::from(size) * f64::from(d_max)) / f64::from(annotated)).round() as i32 - size
            }
        };
        let allowed = to_add - added;
        if to_add > 0 {
            fraction.min(allowed)
        } else {
            fraction.max(allowed)
        }
    }

    /// `IsSaturated`: the new set has all replicas, all available.
    fn saturated(&self, i: usize) -> bool {
        let rs = &self.sets[i];
        let want = replicas(self.d);
        int_annotation(rs, names::DESIRED_REPLICAS) == Some(want)
            && rs_replicas(rs) == want
            && rs_status(rs).2 == want
    }

    /// One RollingUpdate step: grow the new set, or else shrink old ones.
    fn rolling(&mut self) {
        self.new_replica_set(true);
        let Some(n) = self.new else {
            return;
        };
        let want = replicas(self.d);
        let new_size = rs_replicas(&self.sets[n]);
        if new_size > want {
            if self.scale_and_record(n, want) {
                return;
            }
        } else if new_size < want {
            let all: Vec<&ReplicaSet> = self.sets.iter().collect();
            let grown = new_set_replicas(self.d, &all, &self.sets[n]);
            if self.scale_and_record(n, grown) {
                return;
            }
        }
        if self.shrink_old() {
            return;
        }
        if complete(self.d, self.d.status.as_ref()) {
            self.cleanup();
        }
    }

    /// `reconcileOldReplicaSets`: unavailable old pods first, then
    /// available ones down to `replicas - maxUnavailable`.
    fn shrink_old(&mut self) -> bool {
        let Some(n) = self.new else {
            return false;
        };
        let olds = self.active(&self.olds());
        if olds.is_empty() {
            return false;
        }
        let counts = |i: usize, rs: &ReplicaSet| {
            let (status, _, available) = rs_status(rs);
            SetCounts {
                name: i.to_string(),
                spec: i64::from(rs_replicas(rs)),
                status: i64::from(status),
                available: i64::from(available),
                age_rank: created(&rs.metadata).timestamp(),
                max_replicas_annotation: None,
            }
        };
        let new = counts(n, &self.sets[n]);
        let old: Vec<SetCounts> = olds.iter().map(|i| counts(*i, &self.sets[*i])).collect();
        let cuts = rollout::scale_down_old(
            i64::from(replicas(self.d)),
            i64::from(max_unavailable(self.d)),
            &new,
            &old,
        );
        let mut scaled = false;
        for (idx, size) in cuts {
            if let Ok(i) = idx.parse::<usize>() {
                scaled |= self.scale_and_record(i, size as i32);
            }
        }
        scaled
    }

    /// One Recreate step: old sets to zero, wait for their pods to go,
    /// then the new set to full size.
    fn recreate(&mut self) {
        self.new_replica_set(false);
        let mut scaled = false;
        for i in self.active(&self.olds()) {
            scaled |= self.scale_and_record(i, 0);
        }
        if scaled || self.old_pods_running() {
            return;
        }
        if self.new.is_none() {
            self.new_replica_set(true);
        }
        if let Some(n) = self.new {
            self.scale_and_record(n, replicas(self.d));
        }
        if complete(self.d, self.d.status.as_ref()) {
            self.cleanup();
        }
    }

    /// `oldPodsRunning`: old sets report pods, or a pod of an old set has
    /// not finished.
    fn old_pods_running(&self) -> bool {
        let olds = self.olds();
        if olds.iter().any(|i| rs_status(&self.sets[*i]).0 > 0) {
            return true;
        }
        let new_uid = self.new.and_then(|n| self.sets[n].metadata.uid.clone());
        let set_uids: Vec<&str> = olds
            .iter()
            .filter_map(|i| self.sets[*i].metadata.uid.as_deref())
            .collect();
        self.pods.iter().any(|p| {
            let owner = meta::controller_of(&p.metadata).map(|r| r.uid.as_str());
            owner.is_some_and(|u| set_uids.contains(&u) && Some(u) != new_uid.as_deref())
                && !crate::pods::is_terminal(p)
        })
    }

    /// `cleanupDeployment`: delete the oldest empty sets beyond
    /// `revisionHistoryLimit`.
    fn cleanup(&mut self) {
        let Some(limit) = revision_history_limit(self.d) else {
            return;
        };
        let mut cleanable: Vec<usize> = self
            .olds()
            .into_iter()
            .filter(|i| self.sets[*i].metadata.deletion_timestamp.is_none())
            .collect();
        let diff = cleanable.len() as i64 - i64::from(limit);
        if diff <= 0 {
            return;
        }
        cleanable.sort_by(|a, b| {
            let (x, y) = (&self.sets[*a], &self.sets[*b]);
            revision(x).cmp(&revision(y)).then_with(|| by_age(x, y))
        });
        for &i in cleanable.iter().take(diff as usize) {
            let rs = &self.sets[i];
            let observed = rs
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
            if rs_status(rs).0 != 0
                || rs_replicas(rs) != 0
                || rs.metadata.generation.unwrap_or(0) > observed
            {
                continue;
            }
            self.steps.push(Step::DeleteReplicaSet {
                name: meta::name(&rs.metadata).to_string(),
                uid: rs.metadata.uid.clone(),
                resource_version: rs.metadata.resource_version.clone(),
            });
        }
    }
}

/// `NewRSNewReplicas` for a rolling update: grow within `replicas +
/// maxSurge` counted over every set's `spec.replicas` (a set's status
/// trails what it was just asked for, so counting it would let a fast
/// second pass surge past the limit).
fn new_set_replicas(d: &Deployment, all: &[&ReplicaSet], new: &ReplicaSet) -> i32 {
    let counts = |rs: &ReplicaSet| SetCounts {
        name: meta::name(&rs.metadata).to_string(),
        spec: i64::from(rs_replicas(rs)),
        status: i64::from(rs_replicas(rs)),
        available: 0,
        age_rank: 0,
        max_replicas_annotation: None,
    };
    let mut everything: Vec<SetCounts> = all
        .iter()
        .filter(|rs| rs.metadata.name != new.metadata.name)
        .map(|rs| counts(rs))
        .collect();
    everything.push(counts(new));
    rollout::new_set_replicas(
        i64::from(replicas(d)),
        i64::from(max_surge(d)),
        &counts(new),
        &everything,
    ) as i32
}

/// Plans one pass of a Deployment.
pub fn plan(o: &Observed, now: DateTime<Utc>) -> Plan {
    let d = o.deployment;
    let mut sets: Vec<ReplicaSet> = o.sets.iter().map(|rs| (*rs).clone()).collect();
    sets.sort_by(by_age);
    let refs: Vec<&ReplicaSet> = sets.iter().collect();
    let new = find_new(d, &refs).and_then(|n| {
        sets.iter()
            .position(|rs| rs.metadata.name == n.metadata.name)
    });
    let mut pass = Pass {
        d,
        status: d.status.clone().unwrap_or_default(),
        sets,
        new,
        pods: &o.pods,
        steps: Vec::new(),
        revision: None,
        now,
    };
    let selects_all = d.spec.as_ref().is_none_or(|s| {
        s.selector
            .match_labels
            .as_ref()
            .is_none_or(|m| m.is_empty())
            && s.selector
                .match_expressions
                .as_ref()
                .is_none_or(|m| m.is_empty())
    });
    if selects_all {
        pass.event(
            true,
            "SelectingAll",
            "This deployment is selecting all pods. A non-empty selector is required.".into(),
        );
        return finish(pass, None);
    }
    if d.metadata.deletion_timestamp.is_some() {
        // `syncStatusOnly`.
        pass.new_replica_set(false);
        let s = pass.calculate_status();
        return finish(pass, Some((s, None)));
    }
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    paused_conditions(&mut pass, paused);
    // `getAllReplicaSetsAndSyncRevision` without creating: syncs the
    // existing new set's annotations and the Deployment's revision. The
    // strategies below call it again, creating; repeating it is a no-op.
    pass.new_replica_set(false);
    if paused || pass.is_scaling_event() {
        // `sync`: scale, prune history while paused, report.
        pass.scale();
        if paused {
            pass.cleanup();
        }
        let s = pass.calculate_status();
        return finish(pass, Some((s, None)));
    }
    if is_rolling(d) {
        pass.rolling();
    } else {
        pass.recreate();
    }
    let (s, requeue) = pass.rollout_status();
    finish(pass, Some((s, requeue)))
}

fn finish(mut pass: Pass, status: Option<(DeploymentStatus, Option<Duration>)>) -> Plan {
    if let Some(rev) = pass.revision.take()
        && annotation(&pass.d.metadata, names::REVISION) != Some(rev.as_str())
        && !rev.is_empty()
    {
        pass.steps.push(Step::SetRevision(rev));
    }
    let (status, requeue_after) = match status {
        Some((s, r)) => (Some(s), r),
        None => (None, None),
    };
    let observed = pass.d.status.clone().unwrap_or_default();
    Plan {
        steps: pass.steps,
        status: status.filter(|s| *s != observed),
        requeue_after,
    }
}

#[cfg(test)]
mod tests;
