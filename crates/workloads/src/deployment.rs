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

fn template(d: &Deployment) -> PodTemplateSpec {
    d.spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default()
}

pub fn revision(rs: &ReplicaSet) -> i64 {
    annotation(&rs.metadata, names::REVISION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn int_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    annotation(&rs.metadata, key).and_then(|v| v.parse().ok())
}

/// A template as `apiequality.Semantic.DeepEqual` compares it: absent,
/// null, empty maps and empty lists are all the same.
fn semantic(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (k, semantic(v)))
                .filter(|(_, v)| !is_empty(v))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(semantic).collect()),
        other => other,
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// `EqualIgnoreHash`: equal templates, ignoring the hash label.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            l.remove(names::POD_TEMPLATE_HASH);
        }
        semantic(serde_json::to_value(t).unwrap_or(Value::Null))
    };
    strip(a) == strip(b)
}

/// Upstream's `ReplicaSetsByCreationTimestamp`: oldest first, then by name.
fn by_age(a: &ReplicaSet, b: &ReplicaSet) -> std::cmp::Ordering {
    created(&a.metadata)
        .cmp(&created(&b.metadata))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// The ReplicaSet running the Deployment's current template, if any (the
/// oldest, should there be several).
pub fn find_new<'a>(d: &Deployment, sets: &[&'a ReplicaSet]) -> Option<&'a ReplicaSet> {
    let t = template(d);
    let mut matching: Vec<&ReplicaSet> = sets
        .iter()
        .copied()
        .filter(|rs| {
            rs.spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .is_some_and(|rt| equal_ignore_hash(rt, &t))
        })
        .collect();
    matching.sort_by(|a, b| by_age(a, b));
    matching.first().copied()
}

/// The ReplicaSet a Deployment creates for its template, with `replicas`.
pub fn new_replica_set(d: &Deployment, replicas: i32, revision: i64) -> ReplicaSet {
    let collision = d.status.as_ref().and_then(|s| s.collision_count);
    let mut t = template(d);
    let hash = crate::hash::pod_template_hash(&t, collision);
    t.metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(names::POD_TEMPLATE_HASH.into(), hash.clone());
    let mut selector: LabelSelector = d
        .spec
        .as_ref()
        .map(|s| s.selector.clone())
        .unwrap_or_default();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(names::POD_TEMPLATE_HASH.into(), hash.clone());
    let owner = Owner::of("apps/v1", "Deployment", &d.metadata).controller_ref();
    let mut rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{}-{hash}", meta::name(&d.metadata))),
            namespace: d.metadata.namespace.clone(),
            labels: t.metadata.as_ref().and_then(|m| m.labels.clone()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: d.spec.as_ref().and_then(|s| s.min_ready_seconds),
            selector,
            template: Some(t),
        }),
        status: None,
    };
    set_new_annotations(d, &mut rs, revision, false);
    rs
}

/// Whether an `AlreadyExists` for the new set's name is a hash collision:
/// the existing set is not this Deployment's, or runs another template.
pub fn collision(d: &Deployment, existing: &ReplicaSet) -> bool {
    let ours = meta::is_controlled_by(
        &existing.metadata,
        d.metadata.uid.as_deref().unwrap_or_default(),
    );
    let same = existing
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .is_some_and(|t| equal_ignore_hash(t, &template(d)));
    !(ours && same)
}

/// `SetNewReplicaSetAnnotations`: copy the Deployment's annotations, raise
/// the revision (remembering the old one when rolling back to this set),
/// and on creation record the desired and maximum replicas. Returns
/// whether anything changed.
fn set_new_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
) -> bool {
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if NOT_COPIED.contains(&k.as_str()) || annotations.get(k) == Some(v) {
            continue;
        }
        annotations.insert(k.clone(), v.clone());
        changed = true;
    }
    let old = annotations.get(names::REVISION).cloned();
    let old_int = match old.as_deref().map(str::parse::<i64>) {
        None => 0,
        Some(Ok(v)) => v,
        // Upstream leaves a set with an unreadable revision alone.
        Some(Err(_)) => return changed,
    };
    if old_int < new_revision {
        annotations.insert(names::REVISION.into(), new_revision.to_string());
        changed = true;
        if let Some(old) = old {
            let history = annotations
                .get(names::REVISION_HISTORY)
                .cloned()
                .unwrap_or_default();
            if history.is_empty() {
                annotations.insert(names::REVISION_HISTORY.into(), old);
            } else {
                let mut parts: Vec<&str> = history.split(',').collect();
                let mut total = history.len() + old.len() + 1;
                while total > MAX_REVISION_HISTORY_CHARS && !parts.is_empty() {
                    total -= parts[0].len() + 1;
                    parts.remove(0);
                }
                if total <= MAX_REVISION_HISTORY_CHARS {
                    parts.push(&old);
                    annotations.insert(names::REVISION_HISTORY.into(), parts.join(","));
                }
            }
        }
    }
    if !exists {
        let r = replicas(d);
        changed |= set_replicas_annotations(rs, r, r + max_surge(d));
    }
    changed
}

/// Records the Deployment's replicas and maximum on a set; returns whether
/// they changed.
fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in [
        (names::DESIRED_REPLICAS, desired),
        (names::MAX_REPLICAS, max),
    ] {
        if a.get(k).map(String::as_str) != Some(v.to_string().as_str()) {
            a.insert(k.into(), v.to_string());
            changed = true;
        }
    }
    changed
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

    /// `calculateStatus` from the sets as this pass leaves them.
    fn calculate_status(&self) -> DeploymentStatus {
        let available: i32 = self.sets.iter().map(|rs| rs_status(rs).2).sum();
        let total: i32 = self.sets.iter().map(rs_replicas).sum();
        let mut s = self.status.clone();
        s.observed_generation = self.d.metadata.generation;
        s.replicas = Some(self.sets.iter().map(|rs| rs_status(rs).0).sum());
        s.updated_replicas = Some(self.new.map_or(0, |n| rs_status(&self.sets[n]).0));
        s.ready_replicas = Some(self.sets.iter().map(|rs| rs_status(rs).1).sum());
        s.available_replicas = Some(available);
        s.unavailable_replicas = Some((total - available).max(0));
        let cond = if available >= replicas(self.d) - max_unavailable(self.d) {
            new_condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
                self.now,
            )
        } else {
            new_condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
                self.now,
            )
        };
        set_condition(&mut s, cond);
        s
    }

    /// `syncRolloutStatus`: the status with the Progressing condition
    /// moved on by what this rollout shows.
    fn rollout_status(&self) -> (DeploymentStatus, Option<Duration>) {
        let d = self.d;
        let mut s = self.calculate_status();
        // Upstream compares with the Deployment as this pass changed it
        // (conditions set on finding or creating the new set).
        let old = self.status.clone();
        let Some(deadline) = progress_deadline(d) else {
            remove_condition(&mut s, "Progressing");
            return (s, None);
        };
        let current = condition(&old, "Progressing").cloned();
        let is_complete = s.replicas == s.updated_replicas
            && current.as_ref().and_then(|c| c.reason.as_deref()) == Some("NewReplicaSetAvailable");
        let new_name = self
            .new
            .map(|n| meta::name(&self.sets[n].metadata).to_string());
        let subject = |fallback: &str| match &new_name {
            Some(n) => format!("ReplicaSet {n:?}"),
            None => format!("Deployment {fallback:?}"),
        };
        let d_name = meta::name(&d.metadata).to_string();
        if !is_complete {
            if complete(d, Some(&s)) {
                let msg = format!("{} has successfully progressed.", subject(&d_name));
                set_condition(
                    &mut s,
                    new_condition(
                        "Progressing",
                        "True",
                        "NewReplicaSetAvailable",
                        msg,
                        self.now,
                    ),
                );
            } else if progressing(&old, &s) {
                let msg = format!("{} is progressing.", subject(&d_name));
                let mut c =
                    new_condition("Progressing", "True", "ReplicaSetUpdated", msg, self.now);
                if let Some(cur) = condition(&old, "Progressing").cloned() {
                    if cur.status == "True" {
                        c.last_transition_time = cur.last_transition_time;
                    }
                    remove_condition(&mut s, "Progressing");
                }
                set_condition(&mut s, c);
            } else if timed_out(d, &s, self.now) {
                let msg = format!("{} has timed out progressing.", subject(&d_name));
                set_condition(
                    &mut s,
                    new_condition(
                        "Progressing",
                        "False",
                        "ProgressDeadlineExceeded",
                        msg,
                        self.now,
                    ),
                );
            }
        }
        match self.replica_failure() {
            Some(c) => set_condition(&mut s, c),
            None => remove_condition(&mut s, "ReplicaFailure"),
        }
        // `requeueStuckDeployment`: check the deadline when it passes.
        let requeue = condition(&s, "Progressing")
            .filter(|c| c.reason.as_deref() != Some("ProgressDeadlineExceeded"))
            .filter(|_| !complete(d, Some(&s)))
            .and_then(|c| c.last_update_time.as_ref())
            .map(|t| {
                let at = to_chrono(t) + chrono::Duration::seconds(i64::from(deadline));
                (at - self.now).to_std().unwrap_or_default() + Duration::from_secs(1)
            });
        (s, requeue)
    }

    /// `getReplicaFailures`: the new set's failure, else an old set's.
    fn replica_failure(&self) -> Option<DeploymentCondition> {
        let failure = |rs: &ReplicaSet| {
            rs.status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "ReplicaFailure")
                .cloned()
        };
        let from_new = self.new.and_then(|n| failure(&self.sets[n]));
        let found =
            from_new.or_else(|| self.olds().iter().find_map(|i| failure(&self.sets[*i])))?;
        Some(DeploymentCondition {
            type_: "ReplicaFailure".into(),
            status: found.status,
            last_transition_time: found.last_transition_time.clone(),
            last_update_time: found.last_transition_time,
            reason: found.reason,
            message: found.message,
        })
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

/// `DeploymentComplete`: every replica updated and available, and the
/// status is of the current generation.
fn complete(d: &Deployment, s: Option<&DeploymentStatus>) -> bool {
    let Some(s) = s else {
        return false;
    };
    let want = Some(replicas(d));
    s.updated_replicas == want
        && s.replicas == want
        && s.available_replicas == want
        && s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: more updated, ready or available replicas, or
/// fewer old ones, than the status recorded.
fn progressing(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// `DeploymentTimedOut`: no progress since the Progressing condition was
/// last updated, for longer than the deadline.
fn timed_out(d: &Deployment, s: &DeploymentStatus, now: DateTime<Utc>) -> bool {
    let Some(deadline) = progress_deadline(d) else {
        return false;
    };
    let Some(c) = condition(s, "Progressing") else {
        return false;
    };
    match c.reason.as_deref() {
        Some("NewReplicaSetAvailable") => false,
        Some("ProgressDeadlineExceeded") => true,
        _ => c
            .last_update_time
            .as_ref()
            .is_some_and(|t| to_chrono(t) + chrono::Duration::seconds(i64::from(deadline)) < now),
    }
}

fn condition<'a>(s: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    s.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: DateTime<Utc>,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(to_time(now)),
        last_transition_time: Some(to_time(now)),
    }
}

/// `SetDeploymentCondition`: unchanged when status and reason are the
/// same; keeps the transition time when only the reason changes; the
/// condition moves to the end.
fn set_condition(s: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(cur) = condition(s, &c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove_condition(s, &c.type_);
    s.conditions.get_or_insert_with(Vec::new).push(c);
}

fn remove_condition(s: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = s.conditions.as_mut() {
        cs.retain(|c| c.type_ != type_);
        if cs.is_empty() {
            s.conditions = None;
        }
    }
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

/// `checkPausedConditions`: Progressing is Unknown while paused.
fn paused_conditions(pass: &mut Pass, paused: bool) {
    if progress_deadline(pass.d).is_none() {
        return;
    }
    let cond_paused = condition(&pass.status, "Progressing")
        .is_some_and(|c| c.reason.as_deref() == Some("DeploymentPaused"));
    if paused && !cond_paused {
        let c = new_condition(
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused".into(),
            pass.now,
        );
        set_condition(&mut pass.status, c);
    } else if !paused && cond_paused {
        let c = new_condition(
            "Progressing",
            "Unknown",
            "DeploymentResumed",
            "Deployment is resumed".into(),
            pass.now,
        );
        set_condition(&mut pass.status, c);
    }
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

/// The status after creating the new set failed (`ReplicaSetCreateError`).
pub fn create_failed(
    d: &Deployment,
    name: &str,
    error: &str,
    now: DateTime<Utc>,
) -> Option<DeploymentStatus> {
    progress_deadline(d)?;
    let mut s = d.status.clone().unwrap_or_default();
    let msg = format!("Failed to create new replica set {name:?}: {error}");
    set_condition(
        &mut s,
        new_condition("Progressing", "False", "ReplicaSetCreateError", msg, now),
    );
    Some(s)
}

/// The status after a hash collision: the collision count goes up, so
/// the next pass names the new set differently.
pub fn collided(d: &Deployment) -> DeploymentStatus {
    let mut s = d.status.clone().unwrap_or_default();
    s.collision_count = Some(s.collision_count.unwrap_or(0) + 1);
    s
}

#[cfg(test)]
mod tests;
