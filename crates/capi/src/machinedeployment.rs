//! The MachineDeployment controller's decisions
//! (`machinedeployment_{sync,rolling,rollout_ondelete}.go`, `mdutil`):
//! which MachineSet is new and which are old, how far each is scaled in
//! one rolling-update step, proportional scaling while paused, the
//! `OnDelete` strategy, history cleanup and status.
//!
//! The arithmetic is Kubernetes Deployment's, which MCM shares: trellis
//! reuses `mcm::rollout` for the fenceposts (surge rounds up,
//! unavailability down, both zero → one unavailable), the new set's
//! growth, the old sets' shrinking (unavailable replicas first, then down
//! to the minimum available, oldest first) and proportional scaling.
//! Where Cluster API differs it says so: a set is "new" when its template
//! matches on the rollout fields only (version, bootstrap and
//! infrastructure references, failure domain), defaults are surge 1 and
//! unavailable 0, and growth counts `spec.replicas` of all sets.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ObjectReference;
use mcm::rollout::{self, IntOrPercent, SetCounts};
use serde_json::{Value, json};

use crate::conditions::{self as cond, severity};
use crate::meta::{self, annotation, label};
use crate::types::labels::{self, conditions as ct, reasons};
use crate::types::machinedeployment::strategy;
use crate::types::{
    Cluster, MachineDeployment, MachineDeploymentStatus, MachineSet, MachineSetSpec, MachineSpec,
};

/// The fields whose change rolls Machines out: version, the bootstrap
/// config reference (group, kind, name) or data Secret, the infrastructure
/// reference (group, kind, name) and the failure domain.
pub fn rollout_fields(spec: &MachineSpec) -> Value {
    let r = |o: &ObjectReference| {
        json!({
            "group": meta::group_of(o.api_version.as_deref().unwrap_or_default()),
            "kind": o.kind,
            "name": o.name,
        })
    };
    json!({
        "version": spec.version,
        "bootstrap": match &spec.bootstrap.config_ref {
            Some(c) => r(c),
            None => json!({"dataSecretName": spec.bootstrap.data_secret_name}),
        },
        "infrastructureRef": r(&spec.infrastructure_ref),
        "failureDomain": spec.failure_domain,
    })
}

/// The fnv32a of the rollout fields, as the hash label's first part.
pub fn template_hash(spec: &MachineSpec) -> u32 {
    mcm::hash::fnv32a(rollout_fields(spec).to_string().as_bytes())
}

fn revision(obj_annotations: Option<&BTreeMap<String, String>>) -> i64 {
    obj_annotations
        .and_then(|a| a.get(labels::REVISION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The resolved `(maxSurge, maxUnavailable)` against the replicas.
pub fn fenceposts(md: &MachineDeployment) -> (i64, i64) {
    let replicas = i64::from(md.spec.replicas.unwrap_or(1));
    let ru = md
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref());
    let parse = |v: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>, default| {
        v.and_then(IntOrPercent::from_int_or_string)
            .unwrap_or(IntOrPercent::Int(default))
    };
    let surge = parse(ru.and_then(|r| r.max_surge.as_ref()), 1);
    let unavailable = parse(ru.and_then(|r| r.max_unavailable.as_ref()), 0);
    rollout::fenceposts(replicas, &surge, &unavailable)
}

/// Everything one reconcile of a MachineDeployment observed.
pub struct DeploymentScope<'a> {
    pub md: &'a MachineDeployment,
    pub cluster: Option<&'a Cluster>,
    /// The namespace's MachineSets (the planner picks its own).
    pub sets: Vec<&'a MachineSet>,
    /// Per set name: (Machines, deleting Machines), for `OnDelete`.
    pub machines_per_set: BTreeMap<String, (usize, usize)>,
    /// Both templates exist.
    pub templates_found: bool,
    /// Five random characters for a new set's name and hash label.
    pub random: String,
    pub now: DateTime<Utc>,
}

/// What to do.
#[derive(Clone, Debug, Default)]
pub struct DeploymentPlan {
    pub add_finalizer: bool,
    /// Merge patch of the deployment's metadata.
    pub md_patch: Option<Value>,
    /// Sets to adopt (controller owner reference, deployment label).
    pub adopt: Vec<String>,
    /// A new MachineSet to create.
    pub create: Option<MachineSet>,
    /// Merge patches of existing sets (replicas, annotations, labels).
    pub set_patches: Vec<(String, Value)>,
    /// Sets to delete (history beyond the limit, or all when deleting).
    pub delete: Vec<String>,
    pub status: MachineDeploymentStatus,
    pub remove_finalizer: bool,
    pub requeue: Option<Duration>,
    pub errors: Vec<String>,
}

fn owned<'a>(md: &MachineDeployment, sets: &[&'a MachineSet]) -> Vec<&'a MachineSet> {
    let uid = md.metadata.uid.as_deref().unwrap_or_default();
    sets.iter()
        .copied()
        .filter(|s| match meta::controller_of(&s.metadata) {
            Some(c) => c.uid == uid,
            None => crate::machineset::selects(
                &md.spec.selector,
                &s.metadata.labels.clone().unwrap_or_default(),
            ),
        })
        .collect()
}

fn age_key(s: &MachineSet) -> (Option<DateTime<Utc>>, String) {
    (
        s.metadata
            .creation_timestamp
            .as_ref()
            .map(mcm::time::to_chrono),
        s.metadata.name.clone().unwrap_or_default(),
    )
}

fn counts(s: &MachineSet, rank: i64) -> SetCounts {
    let st = s.status.clone().unwrap_or_default();
    let spec = i64::from(s.spec.replicas.unwrap_or(0));
    SetCounts {
        name: s.metadata.name.clone().unwrap_or_default(),
        spec,
        // Upstream's growth counts spec replicas of all sets (a Kubernetes
        // Deployment's `GetReplicaCountForReplicaSets`). trellis counts a
        // set's Machines instead while it still has more than its spec (an
        // old set scaled down whose Machines are not gone yet), so the
        // surge bound holds for Machines that exist, as MCM's does, not
        // only for specs; `new_set_replicas` reads this field for it.
        status: spec.max(i64::from(st.replicas)),
        available: i64::from(st.available_replicas),
        age_rank: rank,
        max_replicas_annotation: annotation(&s.metadata, labels::MAX_REPLICAS)
            .and_then(|v| v.parse().ok()),
    }
}

/// The annotations and labels the deployment keeps on a set of it.
fn set_bookkeeping(md: &MachineDeployment, rev: i64, max_surge: i64) -> BTreeMap<String, String> {
    let desired = md.spec.replicas.unwrap_or(1);
    let mut ann = BTreeMap::from([
        (labels::REVISION.to_string(), rev.to_string()),
        (labels::DESIRED_REPLICAS.to_string(), desired.to_string()),
        (
            labels::MAX_REPLICAS.to_string(),
            (i64::from(desired) + max_surge).to_string(),
        ),
    ]);
    for (k, v) in md.metadata.annotations.iter().flatten() {
        let skip = k == "kubectl.kubernetes.io/last-applied-configuration"
            || k == labels::REVISION
            || k == labels::REVISION_HISTORY
            || k == labels::DESIRED_REPLICAS
            || k == labels::MAX_REPLICAS;
        if !skip {
            ann.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    ann
}

/// The new MachineSet of a deployment.
pub fn new_set(
    md: &MachineDeployment,
    random: &str,
    rev: i64,
    replicas: i32,
    max_surge: i64,
) -> MachineSet {
    let md_name = md.metadata.name.clone().unwrap_or_default();
    let base: String = md_name.chars().take(58).collect();
    let name = format!("{base}-{random}");
    let hash = format!("{}-{random}", template_hash(&md.spec.template.spec));
    let mut template = md.spec.template.clone();
    template
        .metadata
        .labels
        .insert(labels::MACHINE_TEMPLATE_HASH.into(), hash.clone());
    template
        .metadata
        .labels
        .insert(labels::DEPLOYMENT_NAME.into(), md_name.clone());
    template
        .metadata
        .labels
        .insert(labels::CLUSTER_NAME.into(), md.spec.cluster_name.clone());
    let mut selector = md.spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::MACHINE_TEMPLATE_HASH.into(), hash);
    let mut set_labels = template.metadata.labels.clone();
    set_labels.insert(labels::DEPLOYMENT_NAME.into(), md_name.clone());
    let annotations = set_bookkeeping(md, rev, max_surge);
    let mut s = MachineSet::new(
        &name,
        MachineSetSpec {
            cluster_name: md.spec.cluster_name.clone(),
            replicas: Some(replicas),
            min_ready_seconds: md.spec.min_ready_seconds.unwrap_or(0),
            delete_policy: md
                .spec
                .strategy
                .as_ref()
                .and_then(|s| s.rolling_update.as_ref())
                .and_then(|r| r.delete_policy.clone()),
            selector,
            template,
            machine_naming_strategy: md.spec.machine_naming_strategy.clone(),
        },
    );
    s.metadata.namespace = md.metadata.namespace.clone();
    s.metadata.labels = Some(set_labels);
    s.metadata.annotations = Some(annotations);
    s.metadata.owner_references = Some(vec![meta::owner_ref(
        crate::API_VERSION,
        "MachineDeployment",
        &md_name,
        md.metadata.uid.as_deref().unwrap_or_default(),
        true,
    )]);
    s
}

/// Template metadata, timeouts and minReadySeconds of the new set, kept
/// equal to the deployment's without a rollout (they are not rollout
/// fields).
fn in_place_patch(md: &MachineDeployment, n: &MachineSet) -> Option<Value> {
    let md_name = md.metadata.name.clone().unwrap_or_default();
    let mut tmpl = md.spec.template.clone();
    if let Some(hash) = n
        .spec
        .template
        .metadata
        .labels
        .get(labels::MACHINE_TEMPLATE_HASH)
    {
        tmpl.metadata
            .labels
            .insert(labels::MACHINE_TEMPLATE_HASH.into(), hash.clone());
    }
    tmpl.metadata
        .labels
        .insert(labels::DEPLOYMENT_NAME.into(), md_name);
    tmpl.metadata
        .labels
        .insert(labels::CLUSTER_NAME.into(), md.spec.cluster_name.clone());
    let mut inplace = json!({});
    if tmpl.metadata != n.spec.template.metadata {
        inplace["spec"]["template"]["metadata"] = json!(tmpl.metadata);
    }
    let t = &md.spec.template.spec;
    let nt = &n.spec.template.spec;
    let timeouts = |s: &MachineSpec| {
        (
            s.node_drain_timeout.clone(),
            s.node_volume_detach_timeout.clone(),
            s.node_deletion_timeout.clone(),
        )
    };
    if timeouts(t) != timeouts(nt) {
        inplace["spec"]["template"]["spec"]["nodeDrainTimeout"] = json!(t.node_drain_timeout);
        inplace["spec"]["template"]["spec"]["nodeVolumeDetachTimeout"] =
            json!(t.node_volume_detach_timeout);
        inplace["spec"]["template"]["spec"]["nodeDeletionTimeout"] = json!(t.node_deletion_timeout);
    }
    let min_ready = md.spec.min_ready_seconds.unwrap_or(0);
    if n.spec.min_ready_seconds != min_ready {
        inplace["spec"]["minReadySeconds"] = json!(min_ready);
    }
    inplace
        .as_object()
        .is_some_and(|o| !o.is_empty())
        .then_some(inplace)
}

/// `OnDelete`: old sets never create again and follow their Machines'
/// deletions; the new set grows by what is missing; any excess comes off
/// old sets.
fn on_delete_step(
    desired: i64,
    new: &SetCounts,
    old: &[&MachineSet],
    machines_per_set: &BTreeMap<String, (usize, usize)>,
    spec: &mut BTreeMap<String, i64>,
    patch_set: &mut impl FnMut(&str, Value),
) {
    for o in old {
        let oname = o.metadata.name.clone().unwrap_or_default();
        if o.spec.replicas.unwrap_or(0) > 0 {
            let (machines, deleting) = machines_per_set.get(&oname).copied().unwrap_or((0, 0));
            spec.insert(oname.clone(), machines.saturating_sub(deleting) as i64);
            if annotation(&o.metadata, labels::DISABLE_MACHINE_CREATE).is_none() {
                patch_set(
                    &oname,
                    json!({"metadata": {"annotations": {labels::DISABLE_MACHINE_CREATE: "true"}}}),
                );
            }
        }
    }
    let total: i64 = spec.values().sum();
    let current = spec.get(&new.name).copied().unwrap_or(new.spec);
    let grown = (current + (desired - total).max(0)).min(desired);
    spec.insert(new.name.clone(), grown);
    let mut excess = spec.values().sum::<i64>() - desired;
    for o in old {
        if excess <= 0 {
            break;
        }
        let oname = o.metadata.name.clone().unwrap_or_default();
        let cur = spec.get(&oname).copied().unwrap_or(0);
        let cut = cur.min(excess);
        spec.insert(oname, cur - cut);
        excess -= cut;
    }
}

/// Decides one reconcile of a MachineDeployment.
pub fn plan(s: &DeploymentScope<'_>) -> DeploymentPlan {
    let md = s.md;
    let now = s.now;
    let mut p = DeploymentPlan {
        status: md.status.clone().unwrap_or_default(),
        ..DeploymentPlan::default()
    };
    let deleting = md.metadata.deletion_timestamp.is_some();
    let has_finalizer = md
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == labels::MACHINE_DEPLOYMENT_FINALIZER);
    if !deleting && !has_finalizer {
        p.add_finalizer = true;
        return p;
    }
    if s.cluster.is_some_and(Cluster::paused) || annotation(&md.metadata, labels::PAUSED).is_some()
    {
        cond::set(&mut p.status.conditions, cond::true_(ct::PAUSED), now);
        return p;
    }
    cond::delete(&mut p.status.conditions, ct::PAUSED);
    let mut sets = owned(md, &s.sets);
    sets.sort_by_key(|s| age_key(s));
    if deleting {
        p.delete = sets
            .iter()
            .filter(|s| s.metadata.deletion_timestamp.is_none())
            .map(|s| s.metadata.name.clone().unwrap_or_default())
            .collect();
        p.remove_finalizer = sets.is_empty();
        if !p.remove_finalizer {
            p.requeue = Some(Duration::from_secs(5));
        }
        return p;
    }
    let Some(cluster) = s.cluster else {
        p.errors
            .push(format!("Cluster {:?} does not exist", md.spec.cluster_name));
        return p;
    };

    // Labels and the Cluster owner of the deployment itself.
    let mut md_patch = json!({});
    if label(&md.metadata, labels::CLUSTER_NAME) != Some(md.spec.cluster_name.as_str()) {
        md_patch["metadata"]["labels"] = json!({labels::CLUSTER_NAME: md.spec.cluster_name});
    }
    let cuid = cluster.metadata.uid.as_deref().unwrap_or_default();
    if !meta::has_owner(&md.metadata, cuid) {
        let mut refs = md.metadata.owner_references.clone().unwrap_or_default();
        refs.push(meta::owner_ref(
            crate::API_VERSION,
            "Cluster",
            cluster.name(),
            cuid,
            false,
        ));
        md_patch["metadata"]["ownerReferences"] = json!(refs);
        md_patch["metadata"]["resourceVersion"] = json!(md.metadata.resource_version);
    }
    if md_patch.as_object().is_some_and(|o| !o.is_empty()) {
        p.md_patch = Some(md_patch);
    }
    for set in &sets {
        if meta::controller_of(&set.metadata).is_none() {
            p.adopt.push(set.metadata.name.clone().unwrap_or_default());
        }
    }

    let desired = i64::from(md.spec.replicas.unwrap_or(1).max(0));
    let (max_surge, max_unavailable) = fenceposts(md);
    let want = rollout_fields(&md.spec.template.spec);
    let rollout_after = md
        .spec
        .rollout_after
        .as_ref()
        .map(mcm::time::to_chrono)
        .filter(|t| *t <= now);
    // The new set: the largest matching set (then oldest, then by name).
    let mut matching: Vec<&MachineSet> = sets
        .iter()
        .copied()
        .filter(|set| rollout_fields(&set.spec.template.spec) == want)
        .filter(|set| {
            rollout_after.is_none_or(|after| {
                set.metadata
                    .creation_timestamp
                    .as_ref()
                    .is_some_and(|c| mcm::time::to_chrono(c) > after)
            })
        })
        .collect();
    matching.sort_by(|a, b| {
        b.spec
            .replicas
            .unwrap_or(0)
            .cmp(&a.spec.replicas.unwrap_or(0))
            .then_with(|| age_key(a).cmp(&age_key(b)))
    });
    let new = matching.first().copied();
    let old: Vec<&MachineSet> = sets
        .iter()
        .copied()
        .filter(|set| new.is_none_or(|n| n.metadata.uid != set.metadata.uid))
        .collect();
    let max_old_revision = old
        .iter()
        .map(|s| revision(s.metadata.annotations.as_ref()))
        .max()
        .unwrap_or(0);
    let on_delete =
        md.spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some(strategy::ON_DELETE);

    let mut patches: BTreeMap<String, Value> = BTreeMap::new();
    let mut patch_set = |name: &str, v: Value| {
        let e = patches.entry(name.to_string()).or_insert_with(|| json!({}));
        meta::merge_into(e, v);
    };
    // Sets' current spec replicas, updated as this plan scales them.
    let mut spec: BTreeMap<String, i64> = sets
        .iter()
        .map(|s| {
            (
                s.metadata.name.clone().unwrap_or_default(),
                i64::from(s.spec.replicas.unwrap_or(0)),
            )
        })
        .collect();
    let rank = |set: &MachineSet| {
        sets.iter()
            .position(|x| x.metadata.uid == set.metadata.uid)
            .unwrap_or(0) as i64
    };

    let old_counts: Vec<SetCounts> = old.iter().map(|s| counts(s, rank(s))).collect();
    if md.spec.paused {
        // Paused: only scaling, spread proportionally; no new set, no rollout.
        let active = sets
            .iter()
            .filter(|s| s.spec.replicas.unwrap_or(0) > 0)
            .count();
        let targets: Vec<i64> = if active <= 1 {
            let target = sets
                .iter()
                .position(|s| s.spec.replicas.unwrap_or(0) > 0)
                .or_else(|| {
                    new.and_then(|n| sets.iter().position(|s| s.metadata.uid == n.metadata.uid))
                })
                .or_else(|| sets.len().checked_sub(1));
            (0..sets.len())
                .map(|i| if Some(i) == target { desired } else { 0 })
                .collect()
        } else {
            let all: Vec<SetCounts> = sets.iter().map(|s| counts(s, rank(s))).collect();
            rollout::proportional(&all, desired, max_surge)
        };
        for (set, t) in sets.iter().zip(targets) {
            spec.insert(set.metadata.name.clone().unwrap_or_default(), t);
        }
    } else {
        // The new set: found, or created now.
        let mut new_revision = None;
        let new_counts = match new {
            Some(n) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                let current = revision(n.metadata.annotations.as_ref());
                // An old set that becomes new again gets a new revision.
                let new_rev = if current <= max_old_revision && !old.is_empty() {
                    max_old_revision + 1
                } else {
                    current.max(1)
                };
                new_revision = Some(new_rev);
                let ann = set_bookkeeping(md, new_rev, max_surge);
                let have = n.metadata.annotations.clone().unwrap_or_default();
                let mut ann_patch = serde_json::Map::new();
                for (k, v) in &ann {
                    if have.get(k) != Some(v) {
                        ann_patch.insert(k.clone(), json!(v));
                    }
                }
                if current != new_rev && current > 0 {
                    let history = match have.get(labels::REVISION_HISTORY) {
                        Some(h) if !h.is_empty() => format!("{h},{current}"),
                        _ => current.to_string(),
                    };
                    ann_patch.insert(labels::REVISION_HISTORY.into(), json!(history));
                }
                if have.contains_key(labels::DISABLE_MACHINE_CREATE) {
                    ann_patch.insert(labels::DISABLE_MACHINE_CREATE.into(), Value::Null);
                }
                if !ann_patch.is_empty() {
                    patch_set(&name, json!({"metadata": {"annotations": ann_patch}}));
                }
                if let Some(inplace) = in_place_patch(md, n) {
                    patch_set(&name, inplace);
                }
                Some(counts(n, rank(n)))
            }
            None if !s.templates_found => {
                p.errors
                    .push("the bootstrap or infrastructure template does not exist".into());
                None
            }
            None => {
                let total: i64 = spec.values().sum();
                let start = if on_delete {
                    (desired - total).max(0)
                } else if old.is_empty() {
                    desired
                } else {
                    let fresh = SetCounts {
                        name: String::new(),
                        spec: 0,
                        status: 0,
                        available: 0,
                        age_rank: i64::MAX,
                        max_replicas_annotation: None,
                    };
                    rollout::new_set_replicas(desired, max_surge, &fresh, &old_counts)
                };
                new_revision = Some(max_old_revision + 1);
                let set = new_set(md, &s.random, max_old_revision + 1, start as i32, max_surge);
                let name = set.metadata.name.clone().unwrap_or_default();
                spec.insert(name.clone(), start);
                p.create = Some(set);
                Some(SetCounts {
                    name,
                    spec: start,
                    status: start,
                    available: 0,
                    age_rank: i64::MAX,
                    max_replicas_annotation: None,
                })
            }
        };
        // The deployment's revision is its new set's (MachineSets compare
        // theirs to it to tell whether they are current).
        if let Some(rev) = new_revision
            && annotation(&md.metadata, labels::REVISION) != Some(rev.to_string().as_str())
        {
            let patch = p.md_patch.get_or_insert_with(|| json!({}));
            meta::merge_into(
                patch,
                json!({"metadata": {"annotations": {labels::REVISION: rev.to_string()}}}),
            );
        }
        if let Some(new_counts) = new_counts {
            if on_delete {
                on_delete_step(
                    desired,
                    &new_counts,
                    &old,
                    &s.machines_per_set,
                    &mut spec,
                    &mut patch_set,
                );
            } else {
                // RollingUpdate: grow the new set, then shrink the old ones,
                // in the same pass.
                let mut all = old_counts.clone();
                all.push(new_counts.clone());
                let grown = if new_counts.spec > desired {
                    desired
                } else {
                    rollout::new_set_replicas(desired, max_surge, &new_counts, &all)
                };
                spec.insert(new_counts.name.clone(), grown);
                let new_now = SetCounts {
                    spec: grown,
                    status: grown,
                    ..new_counts
                };
                for (oname, r) in
                    rollout::scale_down_old(desired, max_unavailable, &new_now, &old_counts)
                {
                    spec.insert(oname, r);
                }
            }
        }
    }
    for set in &sets {
        let name = set.metadata.name.clone().unwrap_or_default();
        let want = spec.get(&name).copied().unwrap_or(0);
        if i64::from(set.spec.replicas.unwrap_or(0)) != want {
            patch_set(&name, json!({"spec": {"replicas": want}}));
        }
    }
    p.set_patches = patches.into_iter().collect();

    // Status.
    let new_status = new.and_then(|n| n.status.clone()).unwrap_or_default();
    let sum = |f: fn(&crate::types::MachineSetStatus) -> i32| -> i32 {
        sets.iter().map(|s| s.status.as_ref().map_or(0, f)).sum()
    };
    let st = &mut p.status;
    st.selector = Some(crate::machineset::selector_string(&md.spec.selector));
    st.replicas = sum(|s| s.replicas);
    st.updated_replicas = new_status.replicas;
    st.ready_replicas = sum(|s| s.ready_replicas);
    st.available_replicas = sum(|s| s.available_replicas);
    st.unavailable_replicas = (desired as i32 - st.available_replicas).max(0);
    let failed = sets.iter().any(|s| {
        s.status
            .as_ref()
            .is_some_and(|x| x.failure_reason.is_some() || x.failure_message.is_some())
    });
    st.phase = Some(
        if failed {
            "Failed"
        } else if desired as i32 == st.ready_replicas && st.replicas == desired as i32 {
            "Running"
        } else if desired as i32 > st.ready_replicas {
            "ScalingUp"
        } else {
            "ScalingDown"
        }
        .to_string(),
    );
    let available = if i64::from(st.available_replicas) >= desired - max_unavailable {
        cond::true_(ct::AVAILABLE)
    } else {
        cond::false_(
            ct::AVAILABLE,
            reasons::WAITING_FOR_AVAILABLE_MACHINES,
            severity::WARNING,
            format!(
                "Minimum availability requires {} replicas, current {} available",
                desired - max_unavailable,
                st.available_replicas
            ),
        )
    };
    cond::set(&mut st.conditions, available, now);
    if let Some(n) = new.and_then(|n| n.status.as_ref()) {
        let ready = cond::mirror(
            &n.conditions,
            ct::MACHINE_SET_READY,
            cond::false_(
                ct::MACHINE_SET_READY,
                reasons::WAITING_FOR_AVAILABLE_MACHINES,
                severity::INFO,
                "",
            ),
        );
        cond::set(&mut st.conditions, ready, now);
    }
    let summary = cond::summary(&st.conditions, &[ct::AVAILABLE, ct::MACHINE_SET_READY]);
    cond::set(&mut st.conditions, summary, now);
    if p.errors.is_empty() {
        st.observed_generation = md.metadata.generation;
    }

    // History: once the rollout is complete, old empty sets beyond the
    // limit go, oldest first.
    let complete = new.is_some()
        && st.updated_replicas == desired as i32
        && st.replicas == desired as i32
        && st.available_replicas == desired as i32;
    if complete {
        let limit = md.spec.revision_history_limit.unwrap_or(1).max(0) as usize;
        let removable: Vec<&&MachineSet> = old
            .iter()
            .filter(|s| {
                s.spec.replicas.unwrap_or(0) == 0
                    && s.status
                        .as_ref()
                        .is_some_and(|x| x.replicas == 0 && x.observed_generation.is_some())
                    && s.metadata.deletion_timestamp.is_none()
            })
            .collect();
        let excess = removable.len().saturating_sub(limit);
        p.delete = removable
            .iter()
            .take(excess)
            .map(|s| s.metadata.name.clone().unwrap_or_default())
            .collect();
    }
    if p.create.is_some() || !p.set_patches.is_empty() {
        p.requeue = Some(Duration::from_secs(1));
    }
    p
}

#[cfg(test)]
mod tests;
