//! The StatefulSet decision (upstream's `StatefulSetControl`): the
//! revisions of the pod template (ControllerRevisions, current and update
//! revision, rollbacks, history), pods with stable names and ordinals
//! created and deleted in order (OrderedReady) or all at once (Parallel),
//! their PersistentVolumeClaims named `<template>-<set>-<ordinal>` that
//! outlive them unless the retention policy says otherwise, rolling updates
//! from the highest ordinal down to the partition (or none, OnDelete), and
//! the status.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Value, json};

use crate::hash::canonical;
use crate::meta::{self, Owner, label};
use crate::names;
use crate::pods;

/// One write of a pass, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Record the current template. An `AlreadyExists` answer with other
    /// data is a hash collision ([`collided`]).
    CreateRevision(Box<ControllerRevision>),
    /// Roll back to an older template: its revision gets the next number.
    UpdateRevision {
        name: String,
        revision: i64,
    },
    /// A claim of a pod about to be created (or of a pending one).
    CreateClaim(Box<PersistentVolumeClaim>),
    CreatePod(Box<Pod>),
    DeletePod {
        name: String,
    },
    /// Restore a pod's identity labels.
    LabelPod {
        name: String,
        labels: BTreeMap<String, String>,
    },
    /// Set a claim's owners as the retention policy wants them.
    SetClaimOwners {
        name: String,
        owner_references: Vec<OwnerReference>,
        resource_version: Option<String>,
    },
    Event {
        warning: bool,
        reason: &'static str,
        message: String,
    },
}

/// What one pass of a StatefulSet does.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
    /// The status to write, when it differs from the observed one.
    pub status: Option<StatefulSetStatus>,
    /// Old revisions beyond `revisionHistoryLimit`, deleted once the status
    /// is written.
    pub prune: Vec<String>,
    /// Look again then (a Ready pod becomes available).
    pub requeue_after: Option<Duration>,
}

/// What a pass of a StatefulSet sees.
pub struct Observed<'a> {
    pub set: &'a StatefulSet,
    /// The pods it manages (claimed, members by name).
    pub pods: Vec<&'a Pod>,
    /// Its ControllerRevisions.
    pub revisions: Vec<&'a ControllerRevision>,
    /// The claims of its namespace (looked up by name).
    pub claims: Vec<&'a PersistentVolumeClaim>,
}

fn spec_replicas(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
        .max(0)
}

fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
}

fn update_type(set: &StatefulSet) -> &str {
    set.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        .unwrap_or("RollingUpdate")
}

fn partition(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0)
}

fn min_ready_seconds(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

fn monotonic(set: &StatefulSet) -> bool {
    set.spec
        .as_ref()
        .and_then(|s| s.pod_management_policy.as_deref())
        != Some("Parallel")
}

/// `(whenDeleted, whenScaled)`, each `Retain` unless set to `Delete`.
fn retention(set: &StatefulSet) -> (bool, bool) {
    let p = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    let delete = |v: Option<&String>| v.map(String::as_str) == Some("Delete");
    (
        delete(p.and_then(|p| p.when_deleted.as_ref())),
        delete(p.and_then(|p| p.when_scaled.as_ref())),
    )
}

/// The set and ordinal a pod's name says it belongs to (`<set>-<n>`).
pub fn parent_and_ordinal(pod_name: &str) -> Option<(&str, i32)> {
    let (parent, n) = pod_name.rsplit_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((parent, n.parse().ok()?))
}

fn ordinal(pod: &Pod) -> i32 {
    parent_and_ordinal(meta::name(&pod.metadata)).map_or(-1, |(_, o)| o)
}

/// `isMemberOf`: the pod's name puts it in `set`.
pub fn is_member(set: &StatefulSet, pod: &Pod) -> bool {
    parent_and_ordinal(meta::name(&pod.metadata))
        .is_some_and(|(p, _)| p == meta::name(&set.metadata))
}

pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", meta::name(&set.metadata))
}

fn claim_name(template: &str, set: &StatefulSet, ordinal: i32) -> String {
    format!("{template}-{}-{ordinal}", meta::name(&set.metadata))
}

fn pod_revision(pod: &Pod) -> &str {
    label(&pod.metadata, names::CONTROLLER_REVISION_HASH).unwrap_or("")
}

fn is_healthy(pod: &Pod) -> bool {
    pods::is_running_and_ready(pod) && !pods::is_terminating(pod)
}

/// FNV-1 (not 1a), 32 bit: what `HashControllerRevision` uses.
fn fnv32(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in data {
        h = h.wrapping_mul(0x0100_0193);
        h ^= u32::from(*b);
    }
    h
}

/// The revision data of a template: a strategic merge patch that puts it
/// back (`{"spec":{"template":{…,"$patch":"replace"}}}`), keys sorted as
/// Go's encoder writes them.
pub fn revision_data(template: &PodTemplateSpec) -> Value {
    let mut t = serde_json::to_value(template).unwrap_or(json!({}));
    if let Some(m) = t.as_object_mut() {
        m.insert("$patch".into(), json!("replace"));
    }
    canonical(&json!({"spec": {"template": t}}))
}

/// The template a revision restores (`ApplyRevision`).
pub fn revision_template(rev: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut t = rev.data.as_ref()?.0.pointer("/spec/template")?.clone();
    if let Some(m) = t.as_object_mut() {
        m.remove("$patch");
    }
    serde_json::from_value(t).ok()
}

/// `HashControllerRevision` and `NewControllerRevision`: the revision of
/// the set's current template, numbered `revision`, salted with the
/// collision count.
pub fn new_revision(set: &StatefulSet, revision: i64, collision_count: i32) -> ControllerRevision {
    let template = set
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let data = revision_data(&template);
    let mut bytes = serde_json::to_vec(&data).unwrap_or_default();
    bytes.extend_from_slice(collision_count.to_string().as_bytes());
    let hash = mcm::hash::safe_encode(&fnv32(&bytes).to_string());
    let prefix: String = meta::name(&set.metadata).chars().take(223).collect();
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(names::REVISION_HASH_LABEL.into(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!("{prefix}-{hash}")),
            namespace: set.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: set.metadata.annotations.clone(),
            owner_references: Some(vec![
                Owner::of("apps/v1", "StatefulSet", &set.metadata).controller_ref(),
            ]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

/// `EqualRevision`: the same data.
pub fn equal_revision(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    a.data.as_ref().map(|d| &d.0) == b.data.as_ref().map(|d| &d.0)
}

/// The status after a revision name collided: the count goes up, so the
/// next pass names the revision differently.
pub fn collided(set: &StatefulSet) -> StatefulSetStatus {
    let mut s = set.status.clone().unwrap_or_default();
    s.collision_count = Some(s.collision_count.unwrap_or(0) + 1);
    s
}

/// The claims a pod of `set` at `ordinal` mounts (`getPersistentVolumeClaims`).
fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let spec = set.spec.as_ref();
    let match_labels = spec
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    spec.and_then(|s| s.volume_claim_templates.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|mut c| {
            let template = meta::name(&c.metadata).to_string();
            c.metadata.name = Some(claim_name(&template, set, ordinal));
            c.metadata.namespace = set.metadata.namespace.clone();
            let labels = c.metadata.labels.get_or_insert_with(BTreeMap::new);
            labels.extend(match_labels.clone());
            c.status = None;
            c
        })
        .collect()
}

/// The pod of `set` at `ordinal` from `template` at `revision`
/// (`newStatefulSetPod`): its identity, its claims as volumes.
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, revision: &str, ordinal: i32) -> Pod {
    let name = pod_name(set, ordinal);
    let owner = Owner::of("apps/v1", "StatefulSet", &set.metadata).controller_ref();
    let mut pod = pods::from_template(
        template,
        set.metadata.namespace.as_deref().unwrap_or_default(),
        &name,
        None,
        owner,
    );
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(names::STATEFULSET_POD_NAME.into(), name.clone());
    labels.insert(names::POD_INDEX.into(), ordinal.to_string());
    labels.insert(names::CONTROLLER_REVISION_HASH.into(), revision.to_string());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(name.clone());
    spec.subdomain = set
        .spec
        .as_ref()
        .and_then(|s| s.service_name.clone())
        .filter(|s| !s.is_empty());
    // `updateStorage`: the claims replace template volumes of their name.
    let claims = claims_for(set, ordinal);
    let templates: BTreeSet<String> = set
        .spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.as_ref())
        .into_iter()
        .flatten()
        .map(|c| meta::name(&c.metadata).to_string())
        .collect();
    let mut volumes: Vec<Volume> = templates
        .iter()
        .zip(&claims)
        .map(|(t, c)| Volume {
            name: t.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: meta::name(&c.metadata).to_string(),
                read_only: None,
            }),
            ..Volume::default()
        })
        .collect();
    volumes.extend(
        spec.volumes
            .take()
            .unwrap_or_default()
            .into_iter()
            .filter(|v| !templates.contains(&v.name)),
    );
    spec.volumes = (!volumes.is_empty()).then_some(volumes);
    pod
}

/// The owner references a claim should have under the retention policy
/// (`updateClaimOwnerRefForSetAndPod`): none on Retain/Retain; the set on
/// `whenDeleted: Delete`; the pod, once scaled away, on `whenScaled:
/// Delete`. References to other owners are kept. `None` when another
/// controller owns the claim: it is left alone.
fn claim_owners(
    set: &StatefulSet,
    claim: &PersistentVolumeClaim,
    pod: Option<&Pod>,
    scaled_down: bool,
) -> Option<Vec<OwnerReference>> {
    let set_uid = set.metadata.uid.as_deref().unwrap_or_default();
    let pod_uid = pod.and_then(|p| p.metadata.uid.as_deref());
    let refs = claim.metadata.owner_references.clone().unwrap_or_default();
    let ours = |r: &OwnerReference| r.uid == set_uid || Some(r.uid.as_str()) == pod_uid;
    if refs.iter().any(|r| !ours(r) && r.controller == Some(true)) {
        return None;
    }
    let mut out: Vec<OwnerReference> = refs.into_iter().filter(|r| !ours(r)).collect();
    let (when_deleted, when_scaled) = retention(set);
    if when_scaled && scaled_down {
        if let Some(p) = pod {
            out.push(Owner::of("v1", "Pod", &p.metadata).controller_ref());
        }
    } else if when_deleted {
        out.push(Owner::of("apps/v1", "StatefulSet", &set.metadata).controller_ref());
    }
    Some(out)
}

/// The claim's owners, if they need to change.
fn claim_owner_step(
    set: &StatefulSet,
    claim: &PersistentVolumeClaim,
    pod: Option<&Pod>,
    scaled_down: bool,
) -> Option<Step> {
    let want = claim_owners(set, claim, pod, scaled_down)?;
    let have = claim.metadata.owner_references.clone().unwrap_or_default();
    let key = |r: &OwnerReference| (r.uid.clone(), r.controller);
    let mut a: Vec<_> = want.iter().map(key).collect();
    let mut b: Vec<_> = have.iter().map(key).collect();
    a.sort();
    b.sort();
    (a != b).then(|| Step::SetClaimOwners {
        name: meta::name(&claim.metadata).to_string(),
        owner_references: want,
        resource_version: claim.metadata.resource_version.clone(),
    })
}

/// One pass in progress.
struct Pass<'a> {
    set: &'a StatefulSet,
    claims: &'a [&'a PersistentVolumeClaim],
    steps: Vec<Step>,
}

impl Pass<'_> {
    fn claim(&self, name: &str) -> Option<&PersistentVolumeClaim> {
        self.claims
            .iter()
            .copied()
            .find(|c| c.metadata.name.as_deref() == Some(name))
    }

    fn set_name(&self) -> &str {
        meta::name(&self.set.metadata)
    }

    fn event(&mut self, reason: &'static str, message: String) {
        self.steps.push(Step::Event {
            warning: false,
            reason,
            message,
        });
    }

    fn delete_pod(&mut self, pod: &Pod) {
        let name = meta::name(&pod.metadata).to_string();
        let msg = format!(
            "delete Pod {name} in StatefulSet {} successful",
            self.set_name()
        );
        self.steps.push(Step::DeletePod { name });
        self.event("SuccessfulDelete", msg);
    }

    /// Creates the claims of the pod at `ordinal` that do not exist yet;
    /// `false` when one is still being deleted (the pod must wait).
    fn create_missing_claims(&mut self, ordinal: i32, pod_name: &str) -> bool {
        let mut ok = true;
        for mut c in claims_for(self.set, ordinal) {
            let name = meta::name(&c.metadata).to_string();
            match self.claim(&name) {
                Some(existing) if existing.metadata.deletion_timestamp.is_some() => ok = false,
                Some(_) => {}
                None => {
                    if let Some(refs) = claim_owners(self.set, &c, None, false) {
                        c.metadata.owner_references = (!refs.is_empty()).then_some(refs);
                    }
                    let msg = format!(
                        "create Claim {name} Pod {pod_name} in StatefulSet {} success",
                        self.set_name()
                    );
                    self.steps.push(Step::CreateClaim(Box::new(c)));
                    self.event("SuccessfulCreate", msg);
                }
            }
        }
        ok
    }

    /// `PodClaimIsStale`: with `whenScaled: Delete`, a claim still owned by
    /// an earlier pod of this name must go before a new pod may use it.
    fn claims_stale(&self, ordinal: i32) -> bool {
        if !retention(self.set).1 {
            return false;
        }
        let pod = pod_name(self.set, ordinal);
        claims_for(self.set, ordinal).iter().any(|c| {
            self.claim(meta::name(&c.metadata)).is_some_and(|existing| {
                existing
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.kind == "Pod" && r.name == pod)
            })
        })
    }
}

/// The revisions, sorted by number (then age and name), and the current
/// and update revision with the writes that establish them
/// (`getStatefulSetRevisions`).
fn revisions(
    set: &StatefulSet,
    observed: &[&ControllerRevision],
    steps: &mut Vec<Step>,
) -> (ControllerRevision, ControllerRevision, i32) {
    let mut revs: Vec<ControllerRevision> = observed.iter().map(|r| (*r).clone()).collect();
    revs.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| meta::created(&a.metadata).cmp(&meta::created(&b.metadata)))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    let collision = set
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let next = revs.last().map_or(1, |r| r.revision + 1);
    let candidate = new_revision(set, next, collision);
    let equal: Vec<&ControllerRevision> = revs
        .iter()
        .filter(|r| equal_revision(r, &candidate))
        .collect();
    let update = match (equal.last(), revs.last()) {
        (Some(e), Some(last)) if equal_revision(last, e) => last.clone(),
        (Some(e), _) => {
            let mut rolled = (*e).clone();
            rolled.revision = next;
            steps.push(Step::UpdateRevision {
                name: meta::name(&rolled.metadata).to_string(),
                revision: next,
            });
            rolled
        }
        (None, _) => {
            steps.push(Step::CreateRevision(Box::new(candidate.clone())));
            candidate
        }
    };
    let current_name = set.status.as_ref().and_then(|s| s.current_revision.clone());
    let current = revs
        .iter()
        .find(|r| r.metadata.name.is_some() && r.metadata.name == current_name)
        .cloned()
        .unwrap_or_else(|| update.clone());
    (current, update, collision)
}

/// Counts of `pods` at the two revisions (`updateStatus`).
fn count(
    status: &mut StatefulSetStatus,
    pods: &[&Pod],
    min_ready: i32,
    current: &str,
    update: &str,
    now: DateTime<Utc>,
) {
    let (mut replicas, mut ready, mut available, mut cur, mut upd) = (0, 0, 0, 0, 0);
    for p in pods {
        replicas += 1;
        if pods::is_running_and_ready(p) {
            ready += 1;
            if pods::is_available(p, min_ready, now) {
                available += 1;
            }
        }
        if !pods::is_terminating(p) {
            if pod_revision(p) == current {
                cur += 1;
            }
            if pod_revision(p) == update {
                upd += 1;
            }
        }
    }
    status.replicas = replicas;
    status.ready_replicas = Some(ready);
    status.available_replicas = Some(available);
    status.current_replicas = Some(cur);
    status.updated_replicas = Some(upd);
}

/// Plans one pass of a StatefulSet.
pub fn plan(o: &Observed, now: DateTime<Utc>) -> Plan {
    let set = o.set;
    let mut pass = Pass {
        set,
        claims: &o.claims,
        steps: Vec::new(),
    };
    let (current, update, collision) = revisions(set, &o.revisions, &mut pass.steps);
    let current_name = meta::name(&current.metadata).to_string();
    let update_name = meta::name(&update.metadata).to_string();
    let min_ready = min_ready_seconds(set);
    let mut status = set.status.clone().unwrap_or_default();
    status.observed_generation = set.metadata.generation;
    status.current_revision = Some(current_name.clone());
    status.update_revision = Some(update_name.clone());
    status.collision_count = Some(collision);

    let replicas = spec_replicas(set);
    let start = start_ordinal(set);
    let end = start + replicas - 1;
    // Pods in range by slot, the others condemned (highest ordinal first).
    let mut slots: Vec<Option<&Pod>> = vec![None; replicas as usize];
    let mut condemned: Vec<&Pod> = Vec::new();
    for p in &o.pods {
        let ord = ordinal(p);
        if ord >= start && ord <= end {
            slots[(ord - start) as usize] = Some(p);
        } else if ord >= 0 {
            condemned.push(p);
        }
    }
    condemned.sort_by_key(|p| std::cmp::Reverse(ordinal(p)));
    let first_unhealthy: Option<String> = slots
        .iter()
        .enumerate()
        .find(|(_, p)| p.is_none_or(|p| !is_healthy(p)))
        .map(|(i, p)| match p {
            Some(p) => meta::name(&p.metadata).to_string(),
            None => pod_name(set, start + i as i32),
        })
        .or_else(|| {
            condemned
                .iter()
                .rev()
                .find(|p| !is_healthy(p))
                .map(|p| meta::name(&p.metadata).to_string())
        });
    let existing: Vec<&Pod> = slots
        .iter()
        .flatten()
        .copied()
        .chain(condemned.iter().copied())
        .collect();
    count(
        &mut status,
        &o.pods,
        min_ready,
        &current_name,
        &update_name,
        now,
    );
    if set.metadata.deletion_timestamp.is_some() {
        return finish(pass, o, status, None);
    }
    count(
        &mut status,
        &existing,
        min_ready,
        &current_name,
        &update_name,
        now,
    );
    let requeue = existing
        .iter()
        .filter(|p| pods::is_ready(p) && !pods::is_available(p, min_ready, now))
        .filter_map(|p| pods::available_at(p, min_ready))
        .min()
        .map(|t| (t - now).to_std().unwrap_or_default() + Duration::from_secs(1));
    let monotonic = monotonic(set);
    let current_template = revision_template(&current).unwrap_or_default();
    let update_template = revision_template(&update).unwrap_or_else(|| {
        set.spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default()
    });
    let rolling = update_type(set) == "RollingUpdate";
    let partition = partition(set);

    // Each replica in order: replace finished pods, create missing ones,
    // and (OrderedReady) go no further than the first that is not Running,
    // Ready and available.
    let mut exit = false;
    for (i, slot) in slots.iter().enumerate() {
        let ord = start + i as i32;
        match slot {
            Some(p) if pods::is_terminal(p) => {
                if !pods::is_terminating(p) {
                    pass.delete_pod(p);
                }
                exit = true;
            }
            None => {
                if pass.claims_stale(ord) {
                    exit = true;
                } else {
                    let (template, revision) = if rolling && ord < start + partition {
                        (&current_template, current_name.as_str())
                    } else {
                        (&update_template, update_name.as_str())
                    };
                    let pod = new_pod(set, template, revision, ord);
                    let name = meta::name(&pod.metadata).to_string();
                    if pass.create_missing_claims(ord, &name) {
                        let msg = format!(
                            "create Pod {name} in StatefulSet {} successful",
                            pass.set_name()
                        );
                        pass.steps.push(Step::CreatePod(Box::new(pod)));
                        pass.event("SuccessfulCreate", msg);
                    }
                    exit = monotonic;
                }
            }
            Some(p) => {
                if pods::phase(p) == "Pending" {
                    pass.create_missing_claims(ord, meta::name(&p.metadata));
                }
                if monotonic
                    && (!pods::is_running_and_ready(p) || !pods::is_available(p, min_ready, now))
                {
                    exit = true;
                } else {
                    fix_identity(&mut pass, p, ord);
                }
            }
        }
        if exit && monotonic {
            break;
        }
    }
    if exit && monotonic {
        return finish(pass, o, status, requeue);
    }
    // Claims of condemned pods follow the retention policy.
    for p in &condemned {
        for c in claims_for(set, ordinal(p)) {
            if let Some(existing_claim) = pass.claim(meta::name(&c.metadata))
                && let Some(step) = claim_owner_step(set, existing_claim, Some(p), true)
            {
                pass.steps.push(step);
            }
        }
    }
    // Scale down from the highest ordinal; OrderedReady one at a time,
    // only while every other pod is healthy.
    for p in &condemned {
        let name = meta::name(&p.metadata).to_string();
        if pods::is_terminating(p) {
            if monotonic {
                return finish(pass, o, status, requeue);
            }
            continue;
        }
        let is_first_unhealthy = first_unhealthy.as_deref() == Some(name.as_str());
        if monotonic
            && !is_first_unhealthy
            && (!pods::is_running_and_ready(p) || !pods::is_available(p, min_ready, now))
        {
            return finish(pass, o, status, requeue);
        }
        pass.delete_pod(p);
        if monotonic {
            return finish(pass, o, status, requeue);
        }
    }
    if !rolling {
        return finish(pass, o, status, requeue);
    }
    // Rolling update: replace the highest pod not at the update revision,
    // down to the partition, one at a time, each only once the ones above
    // are healthy.
    for target in (partition.max(0)..replicas).rev() {
        let Some(p) = slots[target as usize] else {
            break;
        };
        if pod_revision(p) != update_name && !pods::is_terminating(p) {
            pass.delete_pod(p);
            status.current_replicas = Some(status.current_replicas.unwrap_or(0) - 1);
            break;
        }
        if !is_healthy(p) {
            break;
        }
    }
    finish(pass, o, status, requeue)
}

/// `identityMatches` and the claims' retention: restore what drifted.
fn fix_identity(pass: &mut Pass, p: &Pod, ord: i32) {
    let name = meta::name(&p.metadata).to_string();
    let mut labels = p.metadata.labels.clone().unwrap_or_default();
    let mut changed = false;
    for (k, v) in [
        (names::STATEFULSET_POD_NAME, name.clone()),
        (names::POD_INDEX, ord.to_string()),
    ] {
        if labels.get(k) != Some(&v) {
            labels.insert(k.to_string(), v);
            changed = true;
        }
    }
    if changed {
        pass.steps.push(Step::LabelPod { name, labels });
    }
    for c in claims_for(pass.set, ord) {
        if let Some(existing) = pass.claim(meta::name(&c.metadata))
            && let Some(step) = claim_owner_step(pass.set, existing, Some(p), false)
        {
            pass.steps.push(step);
        }
    }
}

/// The status as it comes out of the pass (`completeRollingUpdate`; only
/// written when it changed) and the revisions beyond the history limit.
fn finish(
    pass: Pass,
    o: &Observed,
    mut status: StatefulSetStatus,
    requeue_after: Option<Duration>,
) -> Plan {
    let set = o.set;
    let replicas = spec_replicas(set);
    if update_type(set) == "RollingUpdate"
        && status.updated_replicas == Some(replicas)
        && status.ready_replicas == Some(replicas)
        && status.replicas == replicas
    {
        status.current_replicas = status.updated_replicas;
        status.current_revision = status.update_revision.clone();
    }
    let prune = prune(
        set,
        &o.pods,
        &o.revisions,
        status.current_revision.as_deref().unwrap_or_default(),
        status.update_revision.as_deref().unwrap_or_default(),
    );
    let observed = set.status.clone().unwrap_or_default();
    Plan {
        steps: pass.steps,
        status: (status != observed).then_some(status),
        prune,
        requeue_after,
    }
}

/// `truncateHistory`: revisions no pod and neither current nor update
/// revision uses, oldest first, beyond `revisionHistoryLimit`.
pub fn prune(
    set: &StatefulSet,
    pods: &[&Pod],
    revisions: &[&ControllerRevision],
    current: &str,
    update: &str,
) -> Vec<String> {
    let limit = set
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10)
        .max(0) as usize;
    let live: BTreeSet<&str> = pods
        .iter()
        .map(|p| pod_revision(p))
        .chain([current, update])
        .collect();
    let mut history: Vec<&ControllerRevision> = revisions
        .iter()
        .copied()
        .filter(|r| !live.contains(meta::name(&r.metadata)))
        .collect();
    history.sort_by_key(|r| r.revision);
    let excess = history.len().saturating_sub(limit);
    history
        .iter()
        .take(excess)
        .map(|r| meta::name(&r.metadata).to_string())
        .collect()
}

#[cfg(test)]
mod tests;
