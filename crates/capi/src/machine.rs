//! The Machine controller's decisions, as one pure function of what it
//! observed ([`Scope`]) returning what to do ([`Plan`]).
//!
//! The phases run in upstream's order (`machine_controller_phases.go`):
//! owner and labels → bootstrap → infrastructure → node → health verdicts
//! → phase; a deleting Machine then runs the deletion flow (hooks, cordon
//! and drain through mcm's drain rounds, volume wait, deleting the
//! infrastructure object, then the bootstrap config, then the Node, then
//! the finalizer). Every phase runs even after an earlier one hit a
//! problem; problems are collected, the status is still written, and the
//! reconcile fails afterwards so it is retried with backoff. The Machine
//! controller is the only writer of Machine status; the health check's
//! verdicts reach it through the MachineHealthCheck's status.
//!
//! Where trellis follows seed 004 rather than upstream v1.10 (see
//! [`crate::phase`]): `nodeRef` is set once a Node with the providerID is
//! Ready; a Machine whose data Secret is given directly skips the
//! bootstrap step and is `bootstrapReady`; the Node is deleted even when
//! the whole Cluster is (upstream leaves it to the cluster's teardown,
//! but trellis's Nodes live in a workload cluster that stays).

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::api::DynamicObject;
use mcm::machine::{DrainPod, DrainRound, EvictRecord, PodAction};
use serde_json::{Value, json};

use crate::conditions::{self as cond, severity};
use crate::contract;
use crate::meta::{self, annotation, label};
use crate::phase::{MachinePhase, PhaseFacts, machine_phase};
use crate::types::labels::{self, conditions as ct, failure, reasons};
use crate::types::{Cluster, Machine, MachineAddress, MachineDeletionStatus, MachineStatus};

mod deletion;
mod node;

use deletion::deletion;
use node::{node, node_condition};
pub use node::{node_ready, node_sync_patch};

/// How long to wait before looking again at a reference that is not there
/// or cannot be resolved (upstream: 30s).
pub const MISSING_REFERENCE_RETRY: Duration = Duration::from_secs(30);
/// How often a drain or volume wait is looked at again (upstream: 20s).
pub const DRAIN_RETRY: Duration = Duration::from_secs(20);
/// How often a deletion waits for its infrastructure and bootstrap objects
/// to go (their deletion also triggers the Machine through its watch).
pub const DELETION_POLL: Duration = Duration::from_secs(5);
/// Upstream's webhook default of `nodeDeletionTimeout`.
pub const DEFAULT_NODE_DELETION_TIMEOUT: Duration = Duration::from_secs(10);

/// What became of a reference to a provider object.
#[derive(Clone, Debug)]
pub enum Lookup<'a> {
    /// There is no reference.
    None,
    /// The reference names a kind no CRD serves, or whose CRD does not
    /// implement the contract; the message says which.
    Invalid(String),
    /// The object does not exist.
    NotFound,
    Found(&'a DynamicObject),
}

impl Lookup<'_> {
    fn found(&self) -> Option<&DynamicObject> {
        match self {
            Lookup::Found(o) => Some(o),
            _ => None,
        }
    }

    /// Nothing to wait for at deletion: never referenced, gone, or of a
    /// kind nobody serves (nothing could exist to delete).
    fn gone(&self) -> bool {
        !matches!(self, Lookup::Found(_))
    }
}

/// What became of the Node with the Machine's providerID.
#[derive(Clone, Debug)]
pub enum NodeLookup<'a> {
    /// The controllers run without a workload cluster: no node step.
    NoTarget,
    NotFound,
    Found(&'a Node),
    /// More than one Node claims the providerID.
    Ambiguous(Vec<String>),
}

/// One MachineHealthCheck's verdict on this Machine, read from its status.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthVerdict {
    /// The check's name.
    pub check: String,
    /// Why the Machine is unhealthy (reason, message); `None` if healthy.
    pub unhealthy: Option<(String, String)>,
    /// The check's `RemediationAllowed` is True.
    pub remediation_allowed: bool,
}

/// What the deletion flow knows about the pods of the Machine's Node.
#[derive(Clone, Debug, Default)]
pub struct DrainFacts {
    /// Pods bound to the Node, in the drain's form, without those labelled
    /// `cluster.x-k8s.io/drain=skip`.
    pub pods: Vec<DrainPod>,
    /// Eviction history per pod UID, kept by the executor between rounds.
    pub records: HashMap<String, EvictRecord>,
}

/// Everything a reconcile of one Machine observed.
#[derive(Clone, Debug)]
pub struct Scope<'a> {
    pub machine: &'a Machine,
    /// The Machine's Cluster; `None` if it does not exist.
    pub cluster: Option<&'a Cluster>,
    pub bootstrap: Lookup<'a>,
    pub infra: Lookup<'a>,
    pub node: NodeLookup<'a>,
    /// Verdicts of the MachineHealthChecks that target this Machine.
    pub health: Vec<HealthVerdict>,
    /// The Node's pods, gathered only while the Machine is deleting.
    pub drain: Option<DrainFacts>,
    /// Other control-plane Machines of the Cluster that are not deleting
    /// (only counted for control-plane Machines).
    pub other_control_plane_machines: usize,
    pub now: DateTime<Utc>,
}

/// An event to record on the Machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub warning: bool,
    pub reason: String,
    pub note: String,
}

/// What to do, in the executor's order: finalizer, patches of the provider
/// objects, the Machine and the Node, pod actions, deletions, status, and
/// last the finalizer's removal.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Add the finalizer and stop; the update triggers the next pass.
    pub add_finalizer: bool,
    /// Merge patch of the Machine's metadata and spec.
    pub machine_patch: Option<Value>,
    /// Merge patches of the bootstrap config's and infrastructure
    /// object's metadata (owner references, labels).
    pub bootstrap_patch: Option<Value>,
    pub infra_patch: Option<Value>,
    /// Merge patch of the Node.
    pub node_patch: Option<Value>,
    /// Evictions and deletions of the Node's pods.
    pub pod_actions: Vec<PodAction>,
    pub delete_infra: bool,
    pub delete_bootstrap: bool,
    pub delete_node: bool,
    /// When the Node deletion may be given up (after `nodeDeletionTimeout`);
    /// `None` retries forever.
    pub node_deletion_deadline: Option<DateTime<Utc>>,
    /// The status to write (always the whole status).
    pub status: MachineStatus,
    pub events: Vec<Event>,
    /// Remove the finalizer after writing the status.
    pub remove_finalizer: bool,
    /// Look again after this long, if nothing else triggers it.
    pub requeue: Option<Duration>,
    /// Problems; the reconcile fails after the writes, and retries.
    pub errors: Vec<String>,
}

impl Plan {
    fn requeue(&mut self, d: Duration) {
        self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
    }

    fn event(&mut self, warning: bool, reason: &str, note: impl Into<String>) {
        self.events.push(Event {
            warning,
            reason: reason.to_string(),
            note: note.into(),
        });
    }

    fn patch_machine(&mut self, patch: Value) {
        match &mut self.machine_patch {
            Some(p) => meta::merge_into(p, patch),
            None => self.machine_patch = Some(patch),
        }
    }

    fn patch_node(&mut self, patch: Value) {
        match &mut self.node_patch {
            Some(p) => meta::merge_into(p, patch),
            None => self.node_patch = Some(patch),
        }
    }

    fn set(&mut self, c: crate::types::Condition, now: DateTime<Utc>) {
        cond::set(&mut self.status.conditions, c, now);
    }
}

/// Whether the Machine carries the finalizer.
pub fn has_finalizer(m: &Machine) -> bool {
    m.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == labels::MACHINE_FINALIZER)
}

/// Whether the Machine is paused: its Cluster's `spec.paused` or the
/// `cluster.x-k8s.io/paused` annotation.
pub fn paused(m: &Machine, cluster: Option<&Cluster>) -> bool {
    cluster.is_some_and(Cluster::paused) || annotation(&m.metadata, labels::PAUSED).is_some()
}

fn ref_display(r: &ObjectReference) -> String {
    format!(
        "{} {:?}",
        contract::group_kind_string(r),
        r.name.as_deref().unwrap_or_default()
    )
}

/// The controller reference a Machine puts on its provider objects.
fn machine_owner(m: &Machine) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    meta::owner_ref(
        crate::API_VERSION,
        "Machine",
        m.name(),
        m.metadata.uid.as_deref().unwrap_or_default(),
        true,
    )
}

/// Owner reference and cluster-name label on a provider object, as a merge
/// patch. Computed from a cache that may be a moment old, which is safe:
/// the result depends only on the Machine and on owner references no
/// provider writes, so a stale read computes the same list.
fn ownership_patch(m: &Machine, obj: &DynamicObject) -> Option<Value> {
    let owner = machine_owner(m);
    let refs = meta::with_controller(&obj.metadata, owner, &[(crate::GROUP, "MachineSet")]);
    let mut patch = json!({"metadata": {}});
    if obj.metadata.owner_references.as_deref().unwrap_or(&[]) != refs.as_slice() {
        patch["metadata"]["ownerReferences"] = json!(refs);
    }
    if label(&obj.metadata, labels::CLUSTER_NAME) != Some(m.spec.cluster_name.as_str()) {
        patch["metadata"]["labels"] = json!({ labels::CLUSTER_NAME: m.spec.cluster_name });
    }
    if patch["metadata"].as_object().is_some_and(|o| o.is_empty()) {
        return None;
    }
    Some(patch)
}

/// Copies a provider object's failure fields onto the Machine (never
/// cleared, as upstream).
fn copy_failure(status: &mut MachineStatus, r: &ObjectReference, obj: &DynamicObject) {
    let (reason, message) = contract::failure(obj);
    if let Some(reason) = reason {
        status.failure_reason = Some(reason);
    }
    if let Some(message) = message {
        status.failure_message = Some(format!(
            "Failure detected from referenced resource {} with name {:?}: {message}",
            contract::group_kind_string(r),
            r.name.as_deref().unwrap_or_default()
        ));
    }
}

/// Decides one reconcile of a Machine.
pub fn plan(s: &Scope<'_>) -> Plan {
    let m = s.machine;
    let now = s.now;
    let deleting = m.metadata.deletion_timestamp.is_some();
    let mut p = Plan {
        status: m.status_or_default(),
        ..Plan::default()
    };
    if !deleting && !has_finalizer(m) {
        p.add_finalizer = true;
        return p;
    }
    if paused(m, s.cluster) {
        p.set(cond::true_(ct::PAUSED), now);
        return p;
    }
    cond::delete(&mut p.status.conditions, ct::PAUSED);
    if s.cluster.is_none() && !deleting {
        p.errors.push(format!(
            "Cluster {:?} of Machine {:?} does not exist",
            m.spec.cluster_name,
            m.name()
        ));
        return p;
    }

    owner_and_labels(s, &mut p);
    bootstrap(s, &mut p);
    infrastructure(s, &mut p);
    node(s, &mut p);
    health(s, &mut p);

    let mut dependents_deleted = false;
    if deleting {
        dependents_deleted = deletion(s, &mut p);
    }

    // Phase, from the fields as they will be written.
    let mut written = m.clone();
    if let Some(Value::String(pid)) = p
        .machine_patch
        .as_ref()
        .and_then(|v| v.pointer("/spec/providerID"))
    {
        written.spec.provider_id = Some(pid.clone());
    }
    written.status = Some(p.status.clone());
    let phase = machine_phase(&PhaseFacts::of(&written, dependents_deleted));
    if p.status.phase.as_deref() != Some(phase.as_str()) {
        p.status.phase = Some(phase.as_str().to_string());
        p.status.last_updated = Some(mcm::time::to_time(now));
    }
    let ready = cond::summary(
        &p.status.conditions,
        &[
            ct::BOOTSTRAP_READY,
            ct::INFRASTRUCTURE_READY,
            ct::DRAINING_SUCCEEDED,
            ct::HEALTH_CHECK_SUCCEEDED,
            ct::OWNER_REMEDIATED,
        ],
    );
    p.set(ready, now);
    if p.errors.is_empty() {
        p.status.observed_generation = m.metadata.generation;
    }
    p
}

/// Phase 1: the cluster-name label, and a Cluster owner reference on a
/// stand-alone Machine.
fn owner_and_labels(s: &Scope<'_>, p: &mut Plan) {
    let m = s.machine;
    if label(&m.metadata, labels::CLUSTER_NAME) != Some(m.spec.cluster_name.as_str()) {
        p.patch_machine(
            json!({"metadata": {"labels": {labels::CLUSTER_NAME: m.spec.cluster_name}}}),
        );
    }
    let Some(cluster) = s.cluster else {
        return;
    };
    let cluster_uid = cluster.metadata.uid.as_deref().unwrap_or_default();
    let standalone = meta::controller_of(&m.metadata).is_none()
        && !meta::has_owner(&m.metadata, cluster_uid)
        && [
            labels::SET_NAME,
            labels::POOL_NAME,
            labels::CONTROL_PLANE_NAME,
        ]
        .iter()
        .all(|k| label(&m.metadata, k).is_none());
    if standalone {
        let mut refs = m.metadata.owner_references.clone().unwrap_or_default();
        refs.push(meta::owner_ref(
            crate::API_VERSION,
            "Cluster",
            cluster.name(),
            cluster_uid,
            false,
        ));
        p.patch_machine(json!({"metadata": {
            "ownerReferences": refs,
            "resourceVersion": m.metadata.resource_version,
        }}));
    }
}

/// Phase 2: bootstrap. Takes the data Secret's name from a ready config;
/// a Machine whose Secret is given directly (seed: `data: ""`) skips the
/// step.
fn bootstrap(s: &Scope<'_>, p: &mut Plan) {
    let m = s.machine;
    let now = s.now;
    let deleting = m.metadata.deletion_timestamp.is_some();
    let data_secret = m
        .spec
        .bootstrap
        .data_secret_name
        .as_deref()
        .filter(|n| !n.is_empty());
    let Some(config_ref) = m.spec.bootstrap.config_ref.as_ref() else {
        // No provider: the data is given directly, or there is none yet.
        match data_secret {
            Some(_) => {
                p.status.bootstrap_ready = true;
                p.set(cond::true_(ct::BOOTSTRAP_READY), now);
            }
            None => p.set(
                cond::false_(
                    ct::BOOTSTRAP_READY,
                    reasons::WAITING_FOR_DATA_SECRET,
                    severity::INFO,
                    "Waiting for spec.bootstrap.dataSecretName",
                ),
                now,
            ),
        }
        return;
    };
    let what = ref_display(config_ref);
    let obj = match &s.bootstrap {
        Lookup::Found(obj) => obj,
        Lookup::Invalid(why) => {
            p.set(
                cond::false_(
                    ct::BOOTSTRAP_READY,
                    reasons::INVALID_REFERENCE,
                    severity::ERROR,
                    format!("spec.bootstrap.configRef: {what} cannot be read: {why}"),
                ),
                now,
            );
            p.requeue(MISSING_REFERENCE_RETRY);
            return;
        }
        Lookup::NotFound | Lookup::None => {
            if !deleting && data_secret.is_none() {
                p.set(
                    cond::false_(
                        ct::BOOTSTRAP_READY,
                        reasons::REFERENCE_NOT_FOUND,
                        severity::WARNING,
                        format!("spec.bootstrap.configRef: {what} does not exist"),
                    ),
                    now,
                );
                p.requeue(MISSING_REFERENCE_RETRY);
            }
            return;
        }
    };
    if let Some(patch) = ownership_patch(m, obj) {
        p.bootstrap_patch = Some(patch);
    }
    copy_failure(&mut p.status, config_ref, obj);
    if data_secret.is_some() {
        p.status.bootstrap_ready = true;
        p.set(cond::true_(ct::BOOTSTRAP_READY), now);
        return;
    }
    let fallback = if contract::deleting(obj) {
        cond::false_(ct::BOOTSTRAP_READY, reasons::DELETING, severity::INFO, "")
    } else {
        cond::false_(
            ct::BOOTSTRAP_READY,
            reasons::WAITING_FOR_DATA_SECRET,
            severity::INFO,
            format!("Waiting for {what} to be ready (status.ready) with status.dataSecretName"),
        )
    };
    p.set(
        cond::mirror(&contract::conditions(obj), ct::BOOTSTRAP_READY, fallback),
        now,
    );
    if contract::deleting(obj) || !contract::ready(obj) {
        // The config's watch triggers the next pass.
        return;
    }
    match contract::data_secret_name(obj) {
        None => p
            .errors
            .push(format!("{what} is ready but has no status.dataSecretName")),
        Some(name) => {
            p.patch_machine(json!({"spec": {"bootstrap": {"dataSecretName": name}}}));
            p.status.bootstrap_ready = true;
            p.set(cond::true_(ct::BOOTSTRAP_READY), now);
        }
    }
}

/// Phase 3: infrastructure. Copies the providerID, addresses and failure
/// domain of a ready infrastructure object; `infrastructureReady` latches.
fn infrastructure(s: &Scope<'_>, p: &mut Plan) {
    let m = s.machine;
    let now = s.now;
    let deleting = m.metadata.deletion_timestamp.is_some();
    let r = &m.spec.infrastructure_ref;
    let what = ref_display(r);
    let obj = match &s.infra {
        Lookup::Found(obj) => obj,
        Lookup::Invalid(why) => {
            p.set(
                cond::false_(
                    ct::INFRASTRUCTURE_READY,
                    reasons::INVALID_REFERENCE,
                    severity::ERROR,
                    format!("spec.infrastructureRef: {what} cannot be read: {why}"),
                ),
                now,
            );
            p.requeue(MISSING_REFERENCE_RETRY);
            return;
        }
        Lookup::NotFound | Lookup::None => {
            if deleting {
                p.set(
                    cond::false_(
                        ct::INFRASTRUCTURE_READY,
                        reasons::DELETED,
                        severity::INFO,
                        "",
                    ),
                    now,
                );
            } else if p.status.infrastructure_ready {
                // A server that was there is gone: only a person can say
                // what happened to it.
                let message = format!(
                    "Machine infrastructure resource {what} has been deleted after being ready"
                );
                p.status.failure_reason = Some(failure::INVALID_CONFIGURATION.to_string());
                p.status.failure_message = Some(message.clone());
                p.set(
                    cond::false_(
                        ct::INFRASTRUCTURE_READY,
                        reasons::REFERENCE_NOT_FOUND,
                        severity::ERROR,
                        message.clone(),
                    ),
                    now,
                );
                p.errors.push(message);
            } else {
                p.set(
                    cond::false_(
                        ct::INFRASTRUCTURE_READY,
                        reasons::REFERENCE_NOT_FOUND,
                        severity::WARNING,
                        format!("spec.infrastructureRef: {what} does not exist"),
                    ),
                    now,
                );
                p.requeue(MISSING_REFERENCE_RETRY);
            }
            return;
        }
    };
    if let Some(patch) = ownership_patch(m, obj) {
        p.infra_patch = Some(patch);
    }
    copy_failure(&mut p.status, r, obj);
    let fallback = if contract::deleting(obj) {
        cond::false_(
            ct::INFRASTRUCTURE_READY,
            reasons::DELETING,
            severity::INFO,
            "",
        )
    } else {
        cond::false_(
            ct::INFRASTRUCTURE_READY,
            reasons::WAITING_FOR_INFRASTRUCTURE,
            severity::INFO,
            format!("Waiting for {what} to be ready"),
        )
    };
    p.set(
        cond::mirror(
            &contract::conditions(obj),
            ct::INFRASTRUCTURE_READY,
            fallback,
        ),
        now,
    );
    if contract::deleting(obj) {
        return;
    }
    let ready = contract::ready(obj);
    if !ready && !p.status.infrastructure_ready {
        return;
    }
    let Some(provider_id) = contract::provider_id(obj) else {
        p.errors
            .push(format!("{what} is ready but has no spec.providerID"));
        return;
    };
    if let Some(addresses) = contract::addresses(obj) {
        p.status.addresses = addresses;
    }
    if m.spec.failure_domain.is_none()
        && let Some(fd) = contract::failure_domain(obj)
    {
        p.patch_machine(json!({"spec": {"failureDomain": fd}}));
    }
    if m.spec.provider_id.as_deref() != Some(provider_id.as_str()) {
        p.patch_machine(json!({"spec": {"providerID": provider_id}}));
    }
    p.status.infrastructure_ready = true;
    if ready {
        p.set(cond::true_(ct::INFRASTRUCTURE_READY), now);
    }
}

/// Phase 5: the health checks' verdicts, mirrored into
/// `HealthCheckSucceeded` and `OwnerRemediated`.
fn health(s: &Scope<'_>, p: &mut Plan) {
    let now = s.now;
    if s.machine.metadata.deletion_timestamp.is_some() {
        return;
    }
    if s.health.is_empty() {
        cond::delete(&mut p.status.conditions, ct::HEALTH_CHECK_SUCCEEDED);
        cond::delete(&mut p.status.conditions, ct::OWNER_REMEDIATED);
        return;
    }
    let mut verdicts = s.health.clone();
    verdicts.sort_by(|a, b| a.check.cmp(&b.check));
    match verdicts.iter().find(|v| v.unhealthy.is_some()) {
        Some(v) => {
            let (reason, message) = v.unhealthy.clone().unwrap_or_default();
            p.set(
                cond::false_(
                    ct::HEALTH_CHECK_SUCCEEDED,
                    &reason,
                    severity::WARNING,
                    message,
                ),
                now,
            );
            let allowed = verdicts
                .iter()
                .any(|v| v.unhealthy.is_some() && v.remediation_allowed);
            if allowed && !cond::is_false(&p.status.conditions, ct::OWNER_REMEDIATED) {
                p.set(
                    cond::false_(
                        ct::OWNER_REMEDIATED,
                        reasons::WAITING_FOR_REMEDIATION,
                        severity::WARNING,
                        "",
                    ),
                    now,
                );
                p.event(
                    true,
                    "MachineMarkedUnhealthy",
                    format!(
                        "Machine marked unhealthy by MachineHealthCheck {:?}: {reason}",
                        v.check
                    ),
                );
            }
        }
        None => {
            p.set(cond::true_(ct::HEALTH_CHECK_SUCCEEDED), now);
            cond::delete(&mut p.status.conditions, ct::OWNER_REMEDIATED);
        }
    }
}

/// The phase the plan writes.
pub fn planned_phase(p: &Plan) -> MachinePhase {
    MachinePhase::parse(p.status.phase.as_deref().unwrap_or_default())
}

/// A Machine's addresses in the Node's form, for display.
pub fn address_list(addresses: &[MachineAddress]) -> String {
    addresses
        .iter()
        .map(|a| a.address.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests;
