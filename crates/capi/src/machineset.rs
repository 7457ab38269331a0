//! The MachineSet controller's decisions (`machineset_controller.go`,
//! `machineset_delete_policy.go`): which Machines it has and adopts, how
//! many to create or which to delete, which unhealthy ones to remediate,
//! the labels kept on its Machines in place, and its status.
//!
//! Deleting Machines stay in the set: they count in `status.replicas` and
//! in the difference to `spec.replicas`, so a Machine is never replaced
//! before the one it replaces is gone. Remediation deletes Machines the
//! Machine controller marked `OwnerRemediated=False` from the health
//! check's verdicts (the MachineSet does not write Machine status), at
//! most `maxInFlight` at a time.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use crate::conditions::{self as cond, severity};
use crate::meta::{self, annotation, label};
use crate::types::labels::{self, conditions as ct, reasons};
use crate::types::machineset::delete_policy;
use crate::types::{Cluster, Machine, MachineDeployment, MachineSet, MachineSetStatus};

/// Look again while Machines are not all ready (upstream: 15s).
pub const NOT_READY_RECHECK: Duration = Duration::from_secs(15);

/// Whether a selector matches labels; an empty selector matches nothing
/// here (a set must say what it owns; the webhook fills one in).
pub fn selects(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let empty = sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty());
    !empty && mcm::machine::selector_matches(sel, labels)
}

/// The selector as a string (`status.selector`, for the scale
/// subresource and `kubectl -l`).
pub fn selector_string(sel: &LabelSelector) -> String {
    let mut parts: Vec<String> = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => format!("{} {other} ({values})", e.key),
        });
    }
    parts.join(",")
}

/// A Machine's delete priority (higher goes first).
pub fn delete_priority(policy: &str, m: &Machine, now: DateTime<Utc>) -> f64 {
    if m.metadata.deletion_timestamp.is_some() {
        return 100.0;
    }
    if annotation(&m.metadata, labels::DELETE_MACHINE).is_some() {
        return 80.0;
    }
    if unhealthy(m) {
        return 50.0;
    }
    let age = m
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| (now - mcm::time::to_chrono(t)).num_seconds())
        .unwrap_or(0);
    let oldest = if age <= 0 {
        0.0
    } else {
        50.0 * (1.0 - (-(age as f64) / 864_000.0).exp())
    };
    match policy {
        delete_policy::OLDEST => oldest,
        delete_policy::NEWEST => 50.0 - oldest,
        // Upstream's Random is a constant, so ties break by name.
        _ => 20.0,
    }
}

/// Upstream's `isMachineHealthy` negated: no Node yet, a failure, or a
/// False `NodeHealthy` or `HealthCheckSucceeded`.
pub fn unhealthy(m: &Machine) -> bool {
    let Some(s) = m.status.as_ref() else {
        return true;
    };
    s.node_ref.is_none()
        || s.failure_reason.is_some()
        || s.failure_message.is_some()
        || cond::is_false(&s.conditions, ct::NODE_HEALTHY)
        || cond::is_false(&s.conditions, ct::HEALTH_CHECK_SUCCEEDED)
}

/// The Machines to delete when `diff` too many: highest priority first,
/// ties by name; those already deleting count but are not deleted again.
pub fn victims(
    policy: &str,
    machines: &[&Machine],
    diff: usize,
    now: DateTime<Utc>,
) -> Vec<String> {
    let mut ranked: Vec<(f64, &str, bool)> = machines
        .iter()
        .map(|m| {
            (
                delete_priority(policy, m, now),
                m.name(),
                m.metadata.deletion_timestamp.is_some(),
            )
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    ranked
        .into_iter()
        .take(diff)
        .filter(|(_, _, deleting)| !deleting)
        .map(|(_, n, _)| n.to_string())
        .collect()
}

/// Whether a Node is Ready, and since when.
fn node_ready_since(node: &Node) -> Option<DateTime<Utc>> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map(mcm::time::to_chrono)
                .unwrap_or(DateTime::<Utc>::MIN_UTC)
        })
}

/// Everything one reconcile of a MachineSet observed.
pub struct SetScope<'a> {
    pub set: &'a MachineSet,
    pub cluster: Option<&'a Cluster>,
    /// The MachineDeployment that owns the set, if any.
    pub deployment: Option<&'a MachineDeployment>,
    /// The namespace's Machines of the set's Cluster (the planner picks
    /// those the selector matches).
    pub machines: Vec<&'a Machine>,
    /// The Nodes of the Machines, by name.
    pub nodes: BTreeMap<String, &'a Node>,
    pub now: DateTime<Utc>,
}

/// What to do.
#[derive(Clone, Debug, Default)]
pub struct SetPlan {
    pub add_finalizer: bool,
    /// Merge patch of the set's metadata (cluster label, Cluster owner).
    pub set_patch: Option<Value>,
    /// Orphan Machines to adopt (controller owner reference).
    pub adopt: Vec<String>,
    /// Labels and annotations to put on live Machines (and their provider
    /// objects) in place: Machine name → merge patch of its metadata.
    pub machine_syncs: Vec<(String, Value)>,
    /// How many Machines to create.
    pub create: usize,
    /// Machines to delete (scale-down, remediation, or the set's deletion).
    pub delete: Vec<String>,
    pub status: MachineSetStatus,
    pub remove_finalizer: bool,
    pub requeue: Option<Duration>,
    pub events: Vec<(bool, String, String)>,
    pub errors: Vec<String>,
}

impl SetPlan {
    fn requeue(&mut self, d: Duration) {
        self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
    }
}

/// The labels a Machine of the set must carry.
pub fn machine_labels(set: &MachineSet) -> BTreeMap<String, String> {
    let mut l = set.spec.template.metadata.labels.clone();
    l.insert(
        labels::SET_NAME.into(),
        set_name_label(set.metadata.name.as_deref().unwrap_or_default()),
    );
    if let Some(d) = label(&set.metadata, labels::DEPLOYMENT_NAME) {
        l.insert(labels::DEPLOYMENT_NAME.into(), d.to_string());
    }
    l.insert(labels::CLUSTER_NAME.into(), set.spec.cluster_name.clone());
    l
}

/// The `set-name` label value: the name, or upstream's hash form when the
/// name is no valid label value (longer than 63).
pub fn set_name_label(name: &str) -> String {
    if name.len() <= 63 {
        name.to_string()
    } else {
        format!(
            "hash_{}_z",
            base64url(&mcm::hash::fnv32a(name.as_bytes()).to_be_bytes())
        )
    }
}

fn base64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Whether a Machine belongs to the set: matched by the selector and not
/// controlled by anything else.
fn belongs(set: &MachineSet, m: &Machine) -> bool {
    let uid = set.metadata.uid.as_deref().unwrap_or_default();
    let labels = m.metadata.labels.clone().unwrap_or_default();
    match meta::controller_of(&m.metadata) {
        Some(c) => c.uid == uid,
        None => selects(&set.spec.selector, &labels),
    }
}

/// Decides one reconcile of a MachineSet.
pub fn plan(s: &SetScope<'_>) -> SetPlan {
    let set = s.set;
    let now = s.now;
    let mut p = SetPlan {
        status: set.status.clone().unwrap_or_default(),
        ..SetPlan::default()
    };
    let deleting = set.metadata.deletion_timestamp.is_some();
    let has_finalizer = set
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == labels::MACHINE_SET_FINALIZER);
    if !deleting && !has_finalizer {
        p.add_finalizer = true;
        return p;
    }
    if s.cluster.is_some_and(Cluster::paused) || annotation(&set.metadata, labels::PAUSED).is_some()
    {
        cond::set(&mut p.status.conditions, cond::true_(ct::PAUSED), now);
        return p;
    }
    cond::delete(&mut p.status.conditions, ct::PAUSED);
    let machines: Vec<&Machine> = s
        .machines
        .iter()
        .copied()
        .filter(|m| belongs(set, m))
        .collect();
    if deleting {
        p.delete = machines
            .iter()
            .filter(|m| m.metadata.deletion_timestamp.is_none())
            .map(|m| m.name().to_string())
            .collect();
        p.remove_finalizer = machines.is_empty();
        if !p.remove_finalizer {
            p.requeue(Duration::from_secs(5));
        }
        return p;
    }
    if s.cluster.is_none() {
        p.errors.push(format!(
            "Cluster {:?} does not exist",
            set.spec.cluster_name
        ));
        return p;
    }

    // Owner and labels of the set itself.
    let mut set_patch = json!({});
    if label(&set.metadata, labels::CLUSTER_NAME) != Some(set.spec.cluster_name.as_str()) {
        set_patch["metadata"]["labels"] = json!({labels::CLUSTER_NAME: set.spec.cluster_name});
    }
    if let Some(cluster) = s.cluster {
        let cuid = cluster.metadata.uid.as_deref().unwrap_or_default();
        let standalone = meta::controller_of(&set.metadata).is_none()
            && label(&set.metadata, labels::DEPLOYMENT_NAME).is_none()
            && !meta::has_owner(&set.metadata, cuid);
        if standalone {
            let mut refs = set.metadata.owner_references.clone().unwrap_or_default();
            refs.push(meta::owner_ref(
                crate::API_VERSION,
                "Cluster",
                cluster.name(),
                cuid,
                false,
            ));
            set_patch["metadata"]["ownerReferences"] = json!(refs);
            set_patch["metadata"]["resourceVersion"] = json!(set.metadata.resource_version);
        }
    }
    if set_patch.as_object().is_some_and(|o| !o.is_empty()) {
        p.set_patch = Some(set_patch);
    }

    // Adoption and in-place labels.
    let want = machine_labels(set);
    for m in &machines {
        if meta::controller_of(&m.metadata).is_none() {
            p.adopt.push(m.name().to_string());
        }
        if m.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let mut patch = json!({});
        if let Some(l) = meta::labels_patch(&m.metadata, &want, &[]) {
            patch["labels"] = l;
        }
        let have = m.metadata.annotations.clone().unwrap_or_default();
        let ann: serde_json::Map<String, Value> = set
            .spec
            .template
            .metadata
            .annotations
            .iter()
            .filter(|(k, v)| have.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        if !ann.is_empty() {
            patch["annotations"] = Value::Object(ann);
        }
        if patch.as_object().is_some_and(|o| !o.is_empty()) {
            p.machine_syncs.push((m.name().to_string(), patch));
        }
    }

    // Remediation: delete what the health checks marked, within maxInFlight,
    // unless a rollout is about to replace it anyway.
    let live: Vec<&Machine> = machines
        .iter()
        .copied()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .collect();
    let mut remediate: Vec<&Machine> = live
        .iter()
        .copied()
        .filter(|m| {
            m.status.as_ref().is_some_and(|st| {
                cond::is_false(&st.conditions, ct::HEALTH_CHECK_SUCCEEDED)
                    && cond::is_false(&st.conditions, ct::OWNER_REMEDIATED)
            })
        })
        .collect();
    let current_revision = s.deployment.is_none_or(|md| {
        annotation(&md.metadata, labels::REVISION) == annotation(&set.metadata, labels::REVISION)
    });
    if !remediate.is_empty() && current_revision {
        let in_flight = machines
            .iter()
            .filter(|m| {
                m.metadata.deletion_timestamp.is_some()
                    && m.status.as_ref().is_some_and(|st| {
                        cond::is_false(&st.conditions, ct::HEALTH_CHECK_SUCCEEDED)
                    })
            })
            .count();
        let max_in_flight = s
            .deployment
            .and_then(|md| {
                let v = md
                    .spec
                    .strategy
                    .as_ref()?
                    .remediation
                    .as_ref()?
                    .max_in_flight
                    .as_ref()?;
                let replicas = i64::from(md.spec.replicas.unwrap_or(1));
                mcm::rollout::IntOrPercent::from_int_or_string(v).map(|x| x.scaled(replicas, true))
            })
            .unwrap_or(i64::MAX);
        let room = (max_in_flight - in_flight as i64).max(0) as usize;
        remediate.sort_by(|a, b| {
            let marked = |m: &Machine| annotation(&m.metadata, labels::REMEDIATE_MACHINE).is_none();
            marked(a)
                .cmp(&marked(b))
                .then_with(|| {
                    b.metadata
                        .creation_timestamp
                        .cmp(&a.metadata.creation_timestamp)
                })
                .then_with(|| a.name().cmp(b.name()))
        });
        for m in remediate.iter().take(room) {
            p.delete.push(m.name().to_string());
            p.events.push((
                false,
                "MachineRemediated".into(),
                format!("deleting unhealthy Machine {:?}", m.name()),
            ));
        }
        if remediate.len() > room {
            p.requeue(NOT_READY_RECHECK);
        }
    }

    // Replicas.
    let desired = set.spec.replicas.unwrap_or(1).max(0) as usize;
    let counted = machines.len();
    if p.delete.is_empty() {
        if counted < desired {
            if annotation(&set.metadata, labels::DISABLE_MACHINE_CREATE).is_none() {
                p.create = desired - counted;
            }
        } else if counted > desired {
            let policy = set
                .spec
                .delete_policy
                .as_deref()
                .unwrap_or(delete_policy::RANDOM);
            p.delete = victims(policy, &machines, counted - desired, now);
        }
    }

    // Status.
    let template_labels = &set.spec.template.metadata.labels;
    let min_ready = chrono::Duration::seconds(i64::from(set.spec.min_ready_seconds.max(0)));
    let mut ready = 0;
    let mut available = 0;
    let mut soonest_available: Option<Duration> = None;
    for m in &machines {
        let node = m
            .status
            .as_ref()
            .and_then(|st| st.node_ref.as_ref())
            .and_then(|r| r.name.as_deref())
            .and_then(|n| s.nodes.get(n));
        if let Some(since) = node.and_then(|n| node_ready_since(n)) {
            ready += 1;
            if since + min_ready <= now {
                available += 1;
            } else {
                let wait = (since + min_ready - now).to_std().unwrap_or_default();
                soonest_available = Some(soonest_available.map_or(wait, |w| w.min(wait)));
            }
        }
    }
    let labeled = machines
        .iter()
        .filter(|m| {
            let l = m.metadata.labels.clone().unwrap_or_default();
            template_labels.iter().all(|(k, v)| l.get(k) == Some(v))
        })
        .count();
    let st = &mut p.status;
    st.selector = Some(selector_string(&set.spec.selector));
    st.replicas = machines.len() as i32;
    st.fully_labeled_replicas = labeled as i32;
    st.ready_replicas = ready;
    st.available_replicas = available;
    let created = if p.create > 0 {
        cond::false_(
            ct::RESIZED,
            reasons::SCALING_UP,
            severity::WARNING,
            format!("Scaling up MachineSet to {desired} replicas (actual {counted})"),
        )
    } else if counted > desired {
        cond::false_(
            ct::RESIZED,
            reasons::SCALING_DOWN,
            severity::WARNING,
            format!("Scaling down MachineSet to {desired} replicas (actual {counted})"),
        )
    } else {
        cond::true_(ct::RESIZED)
    };
    cond::set(&mut st.conditions, created, now);
    let not_ready: Vec<&str> = machines
        .iter()
        .filter(|m| {
            m.status
                .as_ref()
                .is_none_or(|s| !cond::is_true(&s.conditions, ct::READY))
        })
        .map(|m| m.name())
        .collect();
    let machines_ready = if not_ready.is_empty() {
        cond::true_(ct::MACHINES_READY)
    } else {
        cond::false_(
            ct::MACHINES_READY,
            reasons::WAITING_FOR_INFRASTRUCTURE,
            severity::INFO,
            format!(
                "{} of {} Machines are not Ready",
                not_ready.len(),
                machines.len()
            ),
        )
    };
    cond::set(&mut st.conditions, machines_ready, now);
    if cond::get(&st.conditions, ct::MACHINES_CREATED).is_none() {
        cond::set(&mut st.conditions, cond::true_(ct::MACHINES_CREATED), now);
    }
    let summary = cond::summary(
        &st.conditions,
        &[ct::MACHINES_CREATED, ct::RESIZED, ct::MACHINES_READY],
    );
    cond::set(&mut st.conditions, summary, now);
    if p.errors.is_empty() {
        st.observed_generation = set.metadata.generation;
    }
    if ready as usize != desired {
        p.requeue(NOT_READY_RECHECK);
    } else if available as usize != desired
        && let Some(w) = soonest_available
    {
        p.requeue(w + Duration::from_secs(1));
    }
    p
}

/// The Machine a set creates as `name`, before its clones exist: template
/// metadata and spec, the set's labels, the set as controller, the
/// finalizer preset, and references to the clones (named like it).
pub fn new_machine(set: &MachineSet, name: &str) -> Machine {
    let mut spec = set.spec.template.spec.clone();
    spec.cluster_name = set.spec.cluster_name.clone();
    if let Some(r) = spec.bootstrap.config_ref.as_mut() {
        if let Some(kind) = r.kind.as_deref().and_then(crate::clone::cloned_kind) {
            r.kind = Some(kind.to_string());
        }
        r.name = Some(name.to_string());
        r.namespace = set.metadata.namespace.clone();
    }
    let r = &mut spec.infrastructure_ref;
    if let Some(kind) = r.kind.as_deref().and_then(crate::clone::cloned_kind) {
        r.kind = Some(kind.to_string());
    }
    r.name = Some(name.to_string());
    r.namespace = set.metadata.namespace.clone();
    // The data Secret and providerID belong to each Machine.
    spec.provider_id = None;
    let mut m = Machine::new(name, spec);
    m.metadata.namespace = set.metadata.namespace.clone();
    m.metadata.labels = Some(machine_labels(set));
    let annotations = set.spec.template.metadata.annotations.clone();
    m.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    m.metadata.owner_references = Some(vec![meta::owner_ref(
        crate::API_VERSION,
        "MachineSet",
        set.metadata.name.as_deref().unwrap_or_default(),
        set.metadata.uid.as_deref().unwrap_or_default(),
        true,
    )]);
    m.metadata.finalizers = Some(vec![labels::MACHINE_FINALIZER.into()]);
    m
}

/// A Machine name: the set's name (cut to 58) and five random lowercase
/// consonants and digits, as upstream's default naming strategy.
pub fn machine_name(set_name: &str, rng: &mut impl rand::Rng) -> String {
    let base: String = set_name.chars().take(58).collect();
    format!("{base}-{}", random_suffix(rng))
}

/// Five characters from upstream's `utilrand.String` alphabet (no vowels,
/// so no words).
pub fn random_suffix(rng: &mut impl rand::Rng) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests;
