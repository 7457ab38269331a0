//! The machine deployment decision: which machine sets to create, scale or
//! delete, how to change the deployment itself (rollback), the status to
//! report and when to look again — from the deployment and the machine
//! sets it owns.
//!
//! [`plan_pass`] plans a whole reconcile ([`pass`]): the finalizer, the
//! wait for the cache, the autoscaler's triggered deletions ([`trigger`]),
//! or the rollout plan of [`plan`], whose status comes from `status`.
//! The rollout order follows upstream: a deleting deployment deletes its
//! sets; a rollback request is handled alone; a replica change (a "scaling
//! event") is applied proportionally and ends the pass; otherwise the
//! strategy (RollingUpdate or Recreate) takes one step. A paused deployment
//! only scales and prunes history. The plan also says whether the
//! deployment has settled and so when to look again ([`Plan::requeue`]).

use std::collections::BTreeMap;
use std::time::Duration;

use api::labels;
use api::{
    MachineDeployment, MachineDeploymentStatus, MachineDeploymentStrategyType as Strategy,
    MachineSet, MachineSetSpec, MachineTemplateSpec,
};
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use serde_json::Value;

pub mod pass;
mod status;
pub mod trigger;

pub use pass::*;
pub use trigger::{TriggeredDeletion, triggered_deletions};

use crate::hash;
use crate::machineset::{CACHE_WAIT, RESYNC};
use crate::rollout::{self, IntOrPercent, SetCounts};
use crate::time::to_chrono;
// What the table tests (`tests.rs`) take from here besides the planner.
#[cfg(test)]
use {
    crate::time::to_time,
    api::{ConditionStatus, MachineDeploymentConditionType as CondType},
};

/// One change the executor makes.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Create the new machine set (built by [`new_machine_set`]).
    CreateSet {
        set: Box<MachineSet>,
    },
    /// Change a set's replicas and annotations (absent value = remove), and
    /// optionally the in-place parts of its template.
    UpdateSet {
        name: String,
        replicas: i32,
        annotations: BTreeMap<String, Option<String>>,
        template: Option<Box<MachineTemplateSpec>>,
    },
    DeleteSet {
        name: String,
    },
    /// Change the deployment: restore a template (rollback), set the
    /// revision annotation, clear `rollbackTo`.
    UpdateDeployment {
        template: Option<Box<MachineTemplateSpec>>,
        revision: Option<String>,
        clear_rollback: bool,
    },
    Event {
        reason: &'static str,
        message: String,
        warning: bool,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub status: MachineDeploymentStatus,
    /// Look again this soon even without changes (progress deadline).
    pub requeue_after: Option<Duration>,
    /// When to look again, all told: soon after acting (once the cache
    /// shows the writes), every [`ROLLOUT_RECHECK`] while a rollout is
    /// unsettled, else at the progress deadline or the resync.
    pub requeue: Duration,
}

/// How often an unsettled rollout is looked at without events:
/// reconciles are level-triggered, so a missed wake-up costs a second,
/// not the resync period.
pub const ROLLOUT_RECHECK: Duration = Duration::from_secs(2);

/// Fields of a machine spec that change in place, without a rollout.
const IN_PLACE_FIELDS: &[&str] = &[
    "nodeTemplate",
    "drainTimeout",
    "healthTimeout",
    "creationTimeout",
    "inPlaceUpdateTimeout",
    "machinePreserveTimeout",
    "disableHealthTimeout",
    "maxEvictRetries",
    "nodeConditions",
];

/// Annotations of a deployment that are not copied to its machine sets.
const NOT_COPIED: &[&str] = &[
    labels::KUBECTL_LAST_APPLIED,
    labels::REVISION,
    labels::REVISION_HISTORY,
    labels::DESIRED_REPLICAS,
    labels::MAX_REPLICAS,
    labels::PREFER_NO_SCHEDULE,
    labels::UNFREEZE,
    labels::TRIGGER_DELETION_BY_MCM,
];

/// A template as it matters for "is this the same rollout": without the
/// hash label and the parts that change in place.
fn rollout_identity(t: &MachineTemplateSpec) -> Value {
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    if let Some(l) = v
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        l.remove(labels::MACHINE_TEMPLATE_HASH);
        if l.is_empty()
            && let Some(m) = v.pointer_mut("/metadata").and_then(Value::as_object_mut)
        {
            m.remove("labels");
        }
    }
    if let Some(spec) = v.pointer_mut("/spec").and_then(Value::as_object_mut) {
        for f in IN_PLACE_FIELDS {
            spec.remove(*f);
        }
        if let Some(class) = spec.get_mut("class").and_then(Value::as_object_mut) {
            class.remove("kind");
        }
    }
    if let Some(m) = v.pointer_mut("/metadata").and_then(Value::as_object_mut)
        && m.is_empty()
    {
        v.as_object_mut().map(|o| o.remove("metadata"));
    }
    v
}

fn annotation(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).cloned()
}

fn revision_of(set: &MachineSet) -> i64 {
    annotation(&set.metadata, labels::REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn created(set: &MachineSet) -> DateTime<Utc> {
    set.metadata
        .creation_timestamp
        .as_ref()
        .map(to_chrono)
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

fn name(set: &MachineSet) -> String {
    set.metadata.name.clone().unwrap_or_default()
}

fn counts(set: &MachineSet, rank: i64) -> SetCounts {
    let st = set.status.clone().unwrap_or_default();
    SetCounts {
        name: name(set),
        spec: i64::from(set.spec.replicas),
        // A set's status trails the machines it just created; counting
        // spec as well keeps the surge bound even before the status shows
        // them (and status covers machines still terminating).
        status: i64::from(st.replicas.max(set.spec.replicas)),
        available: i64::from(st.available_replicas),
        age_rank: rank,
        max_replicas_annotation: annotation(&set.metadata, labels::MAX_REPLICAS)
            .and_then(|v| v.parse().ok()),
    }
}

/// The deployment's strategy type, RollingUpdate when unset.
pub fn strategy(md: &MachineDeployment) -> Strategy {
    md.spec.strategy.type_.unwrap_or(Strategy::RollingUpdate)
}

/// `(max_surge, max_unavailable)` resolved against the replicas.
pub fn fenceposts(md: &MachineDeployment) -> (i64, i64) {
    let replicas = i64::from(md.spec.replicas.max(0));
    if strategy(md) == Strategy::Recreate || replicas == 0 {
        return (0, 0);
    }
    let ru = md.spec.strategy.rolling_update.clone().unwrap_or_default();
    let parse = |v: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>, d| {
        v.and_then(IntOrPercent::from_int_or_string)
            .unwrap_or(IntOrPercent::Int(d))
    };
    rollout::fenceposts(
        replicas,
        &parse(ru.max_surge.as_ref(), 1),
        &parse(ru.max_unavailable.as_ref(), 0),
    )
}

/// The machine set a deployment creates for its current template.
pub fn new_machine_set(md: &MachineDeployment, replicas: i32, revision: i64) -> MachineSet {
    let collision = md.status.as_ref().and_then(|s| s.collision_count);
    let template_json = serde_json::to_value(&md.spec.template).unwrap_or(Value::Null);
    let h = hash::template_hash(&template_json, collision);
    let md_name = md.metadata.name.clone().unwrap_or_default();
    let hash_label = h.to_string();
    let mut template = md.spec.template.clone();
    template
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::MACHINE_TEMPLATE_HASH.into(), hash_label.clone());
    let mut selector = md.spec.selector.clone().unwrap_or(LabelSelector {
        match_labels: None,
        match_expressions: None,
    });
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::MACHINE_TEMPLATE_HASH.into(), hash_label.clone());
    let mut annotations: BTreeMap<String, String> = md
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !NOT_COPIED.contains(&k.as_str()))
        .collect();
    let (surge, _) = fenceposts(md);
    annotations.insert(labels::REVISION.into(), revision.to_string());
    annotations.insert(
        labels::DESIRED_REPLICAS.into(),
        md.spec.replicas.to_string(),
    );
    annotations.insert(
        labels::MAX_REPLICAS.into(),
        (i64::from(md.spec.replicas) + surge).to_string(),
    );
    let mut set_labels = md.spec.template.metadata.labels.clone().unwrap_or_default();
    set_labels.insert(labels::MACHINE_TEMPLATE_HASH.into(), hash_label);
    MachineSet {
        metadata: ObjectMeta {
            name: Some(hash::machine_set_name(&md_name, h)),
            namespace: md.metadata.namespace.clone(),
            labels: Some(set_labels),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: api::GROUP_VERSION.into(),
                kind: "MachineDeployment".into(),
                name: md_name,
                uid: md.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: MachineSetSpec {
            replicas,
            selector: Some(selector),
            machine_class: md.spec.template.spec.class.clone(),
            template,
            min_ready_seconds: md.spec.min_ready_seconds,
            auto_preserve_failed_machine_max: md.spec.auto_preserve_failed_machine_max,
        },
        status: None,
    }
}

/// Sets' replica annotations after a scale: desired = the deployment's
/// replicas, max = replicas + surge.
fn scale_annotations(md: &MachineDeployment, surge: i64) -> BTreeMap<String, Option<String>> {
    BTreeMap::from([
        (
            labels::DESIRED_REPLICAS.to_string(),
            Some(md.spec.replicas.to_string()),
        ),
        (
            labels::MAX_REPLICAS.to_string(),
            Some((i64::from(md.spec.replicas) + surge).to_string()),
        ),
    ])
}

fn update(set: &MachineSet, replicas: i64, ann: BTreeMap<String, Option<String>>) -> Step {
    Step::UpdateSet {
        name: name(set),
        replicas: replicas.clamp(0, i64::from(i32::MAX)) as i32,
        annotations: ann,
        template: None,
    }
}

/// The decision for one deployment over the sets it owns.
pub fn plan(md: &MachineDeployment, owned: &[&MachineSet], now: DateTime<Utc>) -> Plan {
    let mut sets: Vec<&MachineSet> = owned.to_vec();
    sets.sort_by_key(|s| (created(s), name(s)));
    let identity = rollout_identity(&md.spec.template);
    let new = sets
        .iter()
        .copied()
        .find(|s| rollout_identity(&s.spec.template) == identity);
    let old: Vec<&MachineSet> = sets
        .iter()
        .copied()
        .filter(|s| Some(name(s)) != new.map(name))
        .collect();
    let (surge, unavailable) = fenceposts(md);
    let replicas = i64::from(md.spec.replicas.max(0));
    let mut steps = Vec::new();

    let status = status::status(md, new, &old, &sets, now, unavailable);
    let deadline_requeue = md.spec.progress_deadline_seconds.and_then(|d| {
        (!md.spec.paused && status::progressing(&status))
            .then(|| Duration::from_secs(d.max(1) as u64))
    });
    let done = |steps: Vec<Step>| Plan {
        requeue: requeue(md, &steps, &status, deadline_requeue),
        steps,
        status: status.clone(),
        requeue_after: deadline_requeue,
    };

    if md.metadata.deletion_timestamp.is_some() {
        for s in &sets {
            if s.metadata.deletion_timestamp.is_none() {
                steps.push(Step::DeleteSet { name: name(s) });
            }
        }
        return done(steps);
    }

    // Rollback: restore the template of the requested revision, alone.
    if let Some(rb) = &md.spec.rollback_to {
        let mut revs: Vec<(i64, &MachineSet)> = sets.iter().map(|s| (revision_of(s), *s)).collect();
        revs.sort_by_key(|(r, _)| std::cmp::Reverse(*r));
        let target = if rb.revision == 0 {
            revs.get(1).copied()
        } else {
            revs.iter().copied().find(|(r, _)| *r == rb.revision)
        };
        match target {
            None => {
                steps.push(Step::Event {
                    reason: "DeploymentRollbackRevisionNotFound",
                    message: format!(
                        "Unable to find the revision to roll back to ({})",
                        rb.revision
                    ),
                    warning: true,
                });
                steps.push(Step::UpdateDeployment {
                    template: None,
                    revision: None,
                    clear_rollback: true,
                });
            }
            Some((rev, set)) => {
                let mut t = set.spec.template.clone();
                if let Some(l) = t.metadata.labels.as_mut() {
                    l.remove(labels::MACHINE_TEMPLATE_HASH);
                }
                let unchanged = rollout_identity(&t) == identity;
                steps.push(Step::Event {
                    reason: if unchanged {
                        "DeploymentRollbackTemplateUnchanged"
                    } else {
                        "DeploymentRollback"
                    },
                    message: format!("Rolled back deployment to revision {rev}"),
                    warning: false,
                });
                steps.push(Step::UpdateDeployment {
                    template: (!unchanged).then(|| Box::new(t)),
                    revision: None,
                    clear_rollback: true,
                });
            }
        }
        return done(steps);
    }

    // A replica change: scale proportionally and end the pass.
    let active: Vec<&MachineSet> = sets
        .iter()
        .copied()
        .filter(|s| s.spec.replicas > 0)
        .collect();
    let scaling_event = active.iter().any(|s| {
        annotation(&s.metadata, labels::DESIRED_REPLICAS) != Some(md.spec.replicas.to_string())
    }) || (active.is_empty()
        && replicas > 0
        && !sets.is_empty()
        && new.is_some_and(|n| n.spec.replicas == 0)
        && md.spec.paused);
    if scaling_event && !sets.is_empty() {
        let ann = scale_annotations(md, surge);
        let saturated = new.is_some_and(|n| {
            i64::from(n.spec.replicas) == replicas
                && n.status
                    .as_ref()
                    .is_some_and(|st| i64::from(st.available_replicas) >= replicas)
        });
        if active.len() <= 1 || saturated {
            let target = new
                .filter(|_| saturated)
                .or_else(|| active.first().copied())
                .or_else(|| sets.last().copied());
            for s in &sets {
                let is_target = target.is_some_and(|t| name(t) == name(s));
                let want = if is_target { replicas } else { 0 };
                // The target gets the replicas; every other set goes to zero.
                if is_target || s.spec.replicas > 0 {
                    steps.push(update(s, want, ann.clone()));
                }
            }
        } else {
            let views: Vec<SetCounts> = active
                .iter()
                .enumerate()
                .map(|(i, s)| counts(s, i as i64))
                .collect();
            let out = rollout::proportional(&views, replicas, surge);
            for (s, r) in active.iter().zip(out) {
                steps.push(update(s, r, ann.clone()));
            }
        }
        return done(steps);
    }

    if md.spec.paused {
        steps.extend(cleanup(md, new, &old));
        return done(steps);
    }

    let next_revision = sets.iter().map(|s| revision_of(s)).max().unwrap_or(0) + 1;
    let all: Vec<SetCounts> = sets
        .iter()
        .enumerate()
        .map(|(i, s)| counts(s, i as i64))
        .collect();
    match strategy(md) {
        Strategy::Recreate => {
            let shrinking: Vec<&&MachineSet> = old.iter().filter(|s| s.spec.replicas > 0).collect();
            if !shrinking.is_empty() {
                for s in shrinking {
                    steps.push(update(s, 0, scale_annotations(md, surge)));
                }
                return done(steps);
            }
            if old
                .iter()
                .any(|s| s.status.as_ref().is_some_and(|st| st.replicas > 0))
            {
                return done(steps);
            }
            match new {
                None => steps.push(Step::CreateSet {
                    set: Box::new(new_machine_set(md, replicas as i32, next_revision)),
                }),
                Some(n) if i64::from(n.spec.replicas) != replicas => {
                    steps.push(update(n, replicas, scale_annotations(md, surge)))
                }
                Some(_) => {}
            }
        }
        _ => {
            let Some(n) = new else {
                let zero = SetCounts {
                    name: String::new(),
                    spec: 0,
                    status: 0,
                    available: 0,
                    age_rank: i64::MAX,
                    max_replicas_annotation: None,
                };
                let start = rollout::new_set_replicas(replicas, surge, &zero, &all);
                steps.push(Step::CreateSet {
                    set: Box::new(new_machine_set(md, start as i32, next_revision)),
                });
                return done(steps);
            };
            steps.extend(sync_new_set(md, n, next_revision));
            let nc = all
                .iter()
                .find(|c| c.name == name(n))
                .cloned()
                .unwrap_or_else(|| counts(n, 0));
            let target = rollout::new_set_replicas(replicas, surge, &nc, &all);
            if target != nc.spec {
                steps.push(update(n, target, scale_annotations(md, surge)));
                return done(steps);
            }
            let old_counts: Vec<SetCounts> =
                all.iter().filter(|c| c.name != nc.name).cloned().collect();
            for (set_name, r) in rollout::scale_down_old(replicas, unavailable, &nc, &old_counts) {
                if let Some(s) = old.iter().find(|s| name(s) == set_name) {
                    steps.push(update(s, r, scale_annotations(md, surge)));
                }
            }
        }
    }
    if steps
        .iter()
        .all(|s| matches!(s, Step::UpdateDeployment { .. }))
    {
        steps.extend(cleanup(md, new, &old));
    }
    done(steps)
}

/// When a deployment with this plan is looked at again. A plan that acts
/// waits for the cache to show its writes; a deployment is settled when
/// all its replicas are updated, present and available, and until then
/// (unless paused) it is rechecked often; a settled one at its progress
/// deadline, if that comes before the resync.
fn requeue(
    md: &MachineDeployment,
    steps: &[Step],
    status: &MachineDeploymentStatus,
    deadline: Option<Duration>,
) -> Duration {
    if steps.iter().any(|s| !matches!(s, Step::Event { .. })) {
        return CACHE_WAIT;
    }
    let settled = status.updated_replicas == md.spec.replicas
        && status.replicas == md.spec.replicas
        && status.available_replicas == md.spec.replicas;
    if !settled && !md.spec.paused {
        return ROLLOUT_RECHECK;
    }
    deadline.unwrap_or(RESYNC).min(RESYNC)
}

/// Keeps the new set's revision and in-place template parts current; copies
/// the revision to the deployment.
fn sync_new_set(md: &MachineDeployment, new: &MachineSet, next_revision: i64) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut ann = BTreeMap::new();
    let rev = revision_of(new);
    // A set reused from the history gets the next revision; its old number
    // goes to the revision history.
    let others_max = next_revision - 1;
    let wanted_rev = if rev < others_max {
        next_revision
    } else {
        rev.max(1)
    };
    if wanted_rev != rev {
        ann.insert(labels::REVISION.to_string(), Some(wanted_rev.to_string()));
        if rev > 0 {
            let mut hist: Vec<String> = annotation(&new.metadata, labels::REVISION_HISTORY)
                .map(|h| h.split(',').map(str::to_string).collect())
                .unwrap_or_default();
            hist.push(rev.to_string());
            ann.insert(labels::REVISION_HISTORY.to_string(), Some(hist.join(",")));
        }
    }
    let mut template = new.spec.template.clone();
    let before = serde_json::to_value(&template).ok();
    template.spec.node_template = md.spec.template.spec.node_template.clone();
    template.spec.configuration = md.spec.template.spec.configuration.clone();
    template.spec.class.kind = md.spec.template.spec.class.kind.clone();
    let changed_template = serde_json::to_value(&template).ok() != before;
    if !ann.is_empty() || changed_template {
        steps.push(Step::UpdateSet {
            name: name(new),
            replicas: new.spec.replicas,
            annotations: ann,
            template: changed_template.then(|| Box::new(template)),
        });
    }
    let md_rev = annotation(&md.metadata, labels::REVISION);
    if md_rev != Some(wanted_rev.to_string()) {
        steps.push(Step::UpdateDeployment {
            template: None,
            revision: Some(wanted_rev.to_string()),
            clear_rollback: false,
        });
    }
    steps
}

/// Deletes old, empty sets beyond `revisionHistoryLimit`, oldest first.
fn cleanup(md: &MachineDeployment, new: Option<&MachineSet>, old: &[&MachineSet]) -> Vec<Step> {
    let Some(limit) = md.spec.revision_history_limit else {
        return Vec::new();
    };
    let empty: Vec<&&MachineSet> = old
        .iter()
        .filter(|s| {
            s.spec.replicas == 0
                && s.status.as_ref().is_none_or(|st| st.replicas == 0)
                && s.metadata.deletion_timestamp.is_none()
                && Some(name(s)) != new.map(name)
        })
        .collect();
    let excess = empty.len().saturating_sub(limit.max(0) as usize);
    empty
        .iter()
        .take(excess)
        .map(|s| Step::DeleteSet { name: name(s) })
        .collect()
}

#[cfg(test)]
mod tests;
