//! The machine controller: the executor of `crate::machine`'s decisions.
//! It reads machines, classes and secrets in the control cluster and Nodes,
//! Pods, VolumeAttachments and bootstrap tokens in the target cluster, calls
//! the driver, and writes back what the pure functions decided.
//!
//! A live machine gets, in order: the finalizer and the record of its class
//! (`LAST_KNOWN_CLASS`, in one write); health (with the meltdown limit),
//! node sync, and the "node deleted → delete the machine" rule once it has
//! a node, none of which needs the class; a hot update when the class's
//! provider spec changed; the creation flow while it has no VM, only from
//! a class that exists, is not being deleted, holds `userData` and carries
//! the class finalizer (so it cannot vanish under the new VM). A class
//! problem is written to the lastOperation only of a machine still to be
//! created; a running machine keeps its status and gets one event.
//!
//! A deleting machine runs the deletion flow S1–S6, recording each step
//! in an annotation before acting on it, so a restart anywhere resumes at
//! that step; every action is idempotent (the driver's calls, evictions,
//! deletions), and the creation flow asks `GetMachineStatus` before
//! `CreateMachine`, so no crash duplicates or loses a VM. Without its class
//! the deletion calls the driver with the recorded class; a machine with
//! neither a providerID nor a record never had a VM and goes without the
//! driver; one with a VM and nothing to delete it with stays, saying so.
//!
//! Without a target cluster (`Context::target` is `None`) the planners keep
//! every target step out of the pass: no bootstrap token, health check,
//! node sync or drain; a machine is `Available` with the provider's
//! addresses once its VM exists, and deletion goes S1 → S4 → S6.
//!
//! Requeues are returned; every status write also triggers the next pass
//! through the shared machine watch. A failed pass is retried after the
//! machine's backoff (`crate::backoff`), which a successful pass resets.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use api::{
    Machine, MachineClass, MachineOperationType, MachinePhase, MachineState, MachineStatus,
    format_duration, labels,
};
use chrono::{DateTime, Utc};
use driver::{
    Code, CreateMachineRequest, DeleteMachineRequest, DriverError, GetMachineStatusRequest,
    GetVolumeIDsRequest, InitializeMachineRequest, LONG_RETRY, MEDIUM_RETRY, Outcome, SHORT_RETRY,
    Step, UpdateMachineRequest,
};
use futures::future::join_all;
use k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, Pod, Secret,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::context::{Context, Error, MachineDeps};
use crate::drain;
use crate::health::{self, HEALTH_RECHECK, Verdict};
use crate::machine::{
    self as decide, ClassState, DeletionClass, DeletionStep, DrainPod, DrainRound, EvictRecord,
    PodAction, Settings, StepFact, Transition,
};

/// Retry after a write lost a race (upstream's ConflictRetry).
pub const CONFLICT_RETRY: Duration = Duration::from_millis(200);
/// How long a machine that may not be failed yet (meltdown limit) waits
/// before it is looked at again; upstream sleeps 10s.
pub const MELTDOWN_WAIT: Duration = Duration::from_secs(5);
/// How long to wait for the machine cache to show a `Failed` write before
/// the next machine of the deployment is judged.
pub const CACHE_CONFIRM: Duration = Duration::from_secs(2);
/// No requeue sooner than this: a timeout that is due "now" must not spin.
const MIN_REQUEUE: Duration = Duration::from_millis(200);

/// How long publishing one event may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The event reporter name.
pub const REPORTER: &str = "machine-controller";

fn requeue(d: Duration) -> Action {
    Action::requeue(d.max(MIN_REQUEUE))
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

fn has_finalizer(m: &Machine) -> bool {
    m.finalizers().iter().any(|f| f == labels::MCM_FINALIZER)
}

/// The finalizer list with ours added or removed, guarded by the version.
fn finalizer_patch(meta: &kube::api::ObjectMeta, finalizer: &str, present: bool) -> Value {
    let mut fins: Vec<String> = meta.finalizers.clone().unwrap_or_default();
    fins.retain(|f| f != finalizer);
    if present {
        fins.push(finalizer.to_string());
    }
    json!({"metadata": {"finalizers": fins, "resourceVersion": meta.resource_version}})
}

/// Reconciles one machine.
pub async fn reconcile(machine: Arc<Machine>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Some(deps) = ctx.machine.as_ref() else {
        return Ok(Action::await_change());
    };
    // API-server safety (spec §5): while an API server is unreachable, live
    // machines are left alone (deletions go on); the end of the freeze
    // requeues every machine.
    if machine.metadata.deletion_timestamp.is_none() && ctx.safety.frozen() {
        return Ok(requeue(LONG_RETRY));
    }
    let mut s = Scope::new(&ctx, deps, &machine);
    let result = if machine.metadata.deletion_timestamp.is_some() {
        s.delete().await
    } else {
        s.live().await
    };
    match result {
        // Usually the machine itself is gone (a pass that started from the
        // cache just before its finalizer was removed); a pass on a machine
        // missing from the cache is never run, so a quiet retry ends it.
        Err(Error::Api { source, what }) if is_status(&source, 404) => {
            tracing::debug!(machine = %machine.name_any(), %what, "not found");
            Ok(requeue(SHORT_RETRY))
        }
        other => other,
    }
}

/// The controller's name in metrics and its backoff.
pub const NAME: &str = "machine";

/// Failures are retried after the machine's backoff (see
/// [`crate::backoff`]). A conflict waits at least [`CONFLICT_RETRY`], so
/// that the cache has caught up with the write that won; its first retries
/// would otherwise come sooner and only conflict again.
pub fn error_policy(machine: Arc<Machine>, err: &Error, ctx: Arc<Context>) -> Action {
    let after = ctx.error_requeue(NAME, machine.as_ref());
    if let Error::Api { source, .. } = err
        && is_status(source, 409)
    {
        return Action::requeue(after.max(CONFLICT_RETRY));
    }
    tracing::warn!(machine = %machine.name_any(), error = %err, retry_in = ?after, "machine reconcile failed");
    Action::requeue(after)
}

/// Maps a Node to the machines it belongs to: those whose `node` label
/// names it, and the one its `machine-name` label names.
pub fn machines_for_node(ctx: &Context, node: &Node) -> Vec<ObjectRef<Machine>> {
    let name = node.name_any();
    let named = node
        .labels()
        .get(labels::NODE_MACHINE_NAME)
        .cloned()
        .unwrap_or_default();
    ctx.machines
        .state()
        .iter()
        .filter(|m| {
            m.labels().get(labels::NODE) == Some(&name)
                || (!named.is_empty() && m.name_any() == named)
        })
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

/// Maps a MachineClass to the machines that use it, so a changed provider
/// spec reaches them (hot update).
pub fn machines_for_class(ctx: &Context, class: &MachineClass) -> Vec<ObjectRef<Machine>> {
    let name = class.metadata.name.clone().unwrap_or_default();
    let ns = class.metadata.namespace.clone();
    ctx.machines
        .state()
        .iter()
        .filter(|m| m.spec.class.name == name && m.metadata.namespace == ns)
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

/// One pass over one machine: the clients, the machine as last written, and
/// the settings in effect for it.
struct Scope<'a> {
    ctx: &'a Context,
    deps: &'a MachineDeps,
    api: Api<Machine>,
    machine: Machine,
    name: String,
    ns: String,
    settings: Settings,
    now: DateTime<Utc>,
}

impl<'a> Scope<'a> {
    fn new(ctx: &'a Context, deps: &'a MachineDeps, machine: &Machine) -> Scope<'a> {
        let ns = machine.namespace().unwrap_or_default();
        Scope {
            ctx,
            deps,
            api: Api::namespaced(ctx.control.clone(), &ns),
            machine: machine.clone(),
            name: machine.name_any(),
            ns,
            settings: ctx.config.machine.for_machine(machine),
            now: Utc::now(),
        }
    }

    // --- Writes -------------------------------------------------------------

    /// A merge patch of the machine (metadata or spec); the result becomes
    /// the machine this pass works with.
    async fn patch(&mut self, patch: &Value) -> Result<(), Error> {
        self.machine = self
            .api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| Error::api(format!("machine {}", self.name), e))?;
        Ok(())
    }

    /// Replaces the status, guarded by the resource version of the machine
    /// this pass last saw or wrote.
    async fn write_status(&mut self, status: MachineStatus) -> Result<(), Error> {
        if self.machine.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let mut m = self.machine.clone();
        m.status = Some(status);
        self.machine = self
            .api
            .replace_status(&self.name, &PostParams::default(), &m)
            .await
            .map_err(|e| Error::api(format!("status of machine {}", self.name), e))?;
        Ok(())
    }

    fn status(&self) -> MachineStatus {
        self.machine.status.clone().unwrap_or_default()
    }

    /// Publishes an event on the machine. Events are best effort: a failure
    /// is logged, never returned.
    async fn event(&self, warning: bool, reason: &str, note: String) {
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(note),
            action: reason.to_string(),
            secondary: None,
        };
        let reference = self.machine.object_ref(&());
        let publish = self.deps.recorder.publish(&ev, &reference);
        // Bounded, so that a slow events endpoint never stalls a machine.
        match tokio::time::timeout(EVENT_TIMEOUT, publish).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(machine = %self.name, error = %e, "publishing an event failed")
            }
            Err(_) => {
                tracing::warn!(machine = %self.name, reason, "publishing an event timed out")
            }
        }
    }

    // --- Reads --------------------------------------------------------------

    /// Whether there is a target cluster: without one, no Node, pod, volume
    /// or bootstrap token is ever looked at.
    fn has_target(&self) -> bool {
        self.ctx.has_target()
    }

    /// The target cluster's client. The planners keep every target step
    /// out of a pass without a target, so the error is a bug guard.
    fn target(&self) -> Result<kube::Client, NoTarget> {
        self.ctx.target.clone().ok_or(NoTarget)
    }

    fn cached_node(&self, name: &str) -> Option<Arc<Node>> {
        self.deps.nodes.as_ref()?.get(&ObjectRef::new(name))
    }

    fn nodes(&self) -> Result<Api<Node>, NoTarget> {
        Ok(Api::all(self.target()?))
    }

    /// The node, read from the API: the deletion flow acts on it and must
    /// not act on a stale copy.
    async fn live_node(&self, name: &str) -> Result<Option<Node>, Error> {
        self.nodes()?
            .get_opt(name)
            .await
            .map_err(|e| Error::api(format!("node {name}"), e))
    }

    /// The machine's class, read from the API (`None`: not found): what
    /// the driver is called with must not be a stale copy.
    async fn class(&self) -> Result<Option<MachineClass>, Error> {
        let class_name = &self.machine.spec.class.name;
        let classes: Api<MachineClass> = Api::namespaced(self.ctx.control.clone(), &self.ns);
        classes
            .get_opt(class_name)
            .await
            .map_err(|e| Error::api(format!("machine class {class_name}"), e))
    }

    /// The class's secrets merged (the credentials win); a missing secret
    /// counts as empty (spec §1).
    async fn secret_of(&self, class: &MachineClass) -> Result<Secret, Error> {
        let mut found: [Option<Secret>; 2] = [None, None];
        for (slot, r) in found
            .iter_mut()
            .zip([&class.secret_ref, &class.credentials_secret_ref])
        {
            let Some(r) = r else {
                continue;
            };
            let ns = r.namespace.clone().unwrap_or_else(|| self.ns.clone());
            let name = r.name.clone().unwrap_or_default();
            let secrets: Api<Secret> = Api::namespaced(self.ctx.control.clone(), &ns);
            *slot = secrets
                .get_opt(&name)
                .await
                .map_err(|e| Error::api(format!("secret {ns}/{name}"), e))?;
        }
        let [secret_ref, credentials] = &found;
        Ok(decide::merge_secrets(
            secret_ref.as_ref(),
            credentials.as_ref(),
        ))
    }

    /// The class and secret a deletion calls the driver with, or the fact
    /// that stops it from calling: no VM ever, or no class to call with.
    async fn deletion_class(&self) -> Result<Result<(MachineClass, Secret), StepFact>, Error> {
        let (class, last_known) = match decide::deletion_class(&self.machine, self.class().await?) {
            DeletionClass::Use { class, last_known } => (*class, last_known),
            DeletionClass::NoVm => return Ok(Err(StepFact::NoVm)),
            DeletionClass::Missing(message) => {
                return Ok(Err(StepFact::ClassMissing { message }));
            }
        };
        if last_known {
            tracing::info!(machine = %self.name, class = %self.machine.spec.class.name,
                "the machine class is gone; calling the driver with the class the machine recorded");
        }
        let secret = self.secret_of(&class).await?;
        Ok(Ok((class, secret)))
    }

    // --- Live machines ------------------------------------------------------

    async fn live(&mut self) -> Result<Action, Error> {
        let class = self.class().await?;
        let secret = match &class {
            Some(c) => Some(self.secret_of(c).await?),
            None => None,
        };
        // One write for our finalizer and the record of the class, which
        // must be on the machine before the driver is asked for a VM.
        let mut patch = json!({});
        if !has_finalizer(&self.machine) {
            patch = finalizer_patch(&self.machine.metadata, labels::MCM_FINALIZER, true);
        }
        if let Some(c) = &class
            && let Some(p) = decide::known_class_patch(&self.machine, c)
        {
            patch["metadata"]["annotations"] = p["metadata"]["annotations"].clone();
        }
        if patch != json!({}) {
            self.patch(&patch).await?;
        }
        let user_data = secret
            .as_ref()
            .is_some_and(|s| decide::secret_value(s, labels::USER_DATA_KEY).is_some());
        let state = decide::class_state(class.as_ref(), user_data);

        // Health and node sync need no class: a machine whose class is
        // missing keeps its phase and is still replaced when it fails.
        let mut next = LONG_RETRY;
        if decide::live_steps(&self.machine, self.has_target()).node
            && let Some(node_name) = decide::node_name(&self.machine)
        {
            let node_name = node_name.to_string();
            let node = self.cached_node(&node_name);
            if self.node_deleted(node.as_deref(), &node_name).await? {
                return Ok(Action::await_change());
            }
            next = next.min(self.health(node.as_deref()).await?);
            if let Some(node) = node {
                self.sync_node(&node).await?;
            }
        }
        // Health may have changed the phase.
        let steps = decide::live_steps(&self.machine, self.has_target());
        match (&class, &secret) {
            (Some(class), Some(secret)) => {
                self.class_found();
                if let Some(st) = decide::class_recovered_status(&self.machine, self.now) {
                    let note = st.last_operation.description.clone();
                    self.write_status(st).await?;
                    self.event(false, "ClassAvailable", note).await;
                }
                if steps.hot_update
                    && let Some(after) = self.hot_update(class, secret).await?
                {
                    next = next.min(after);
                }
            }
            _ if !steps.create => self.class_gone().await,
            _ => {}
        }
        if steps.create {
            let class_name = self.machine.spec.class.name.clone();
            match (
                decide::class_problem(state, &self.ns, &class_name),
                &class,
                &secret,
            ) {
                (Some(problem), _, _) => next = next.min(self.blocked(problem).await?),
                (None, Some(class), Some(secret)) if state == ClassState::Ready => {
                    next = next.min(self.create(class, secret).await?)
                }
                // The class controller is about to put its finalizer on
                // the class; the class's update brings the machine back.
                _ => {
                    tracing::debug!(machine = %self.name, class = %class_name,
                        "waiting for the class finalizer before creating the VM");
                    next = next.min(SHORT_RETRY);
                }
            }
        }
        Ok(requeue(next))
    }

    /// No VM can be created from the class: say so in the last operation
    /// (once; the phase stays) and look again after the medium period, or
    /// as soon as the class changes.
    async fn blocked(&mut self, problem: String) -> Result<Duration, Error> {
        let mut st = self.status();
        if st.last_operation.description != problem
            || st.last_operation.state != Some(MachineState::Failed)
        {
            st.last_operation = decide::last_op(
                MachineOperationType::Create,
                MachineState::Failed,
                problem.clone(),
                None,
                self.now,
            );
            self.write_status(st).await?;
            self.event(true, "InvalidClass", problem).await;
        }
        Ok(MEDIUM_RETRY)
    }

    /// The class of a machine that has its VM is gone. Nothing fails now
    /// (health goes on, the status is left alone), but a hot update cannot
    /// run and deleting the VM will rely on the machine's record of the
    /// class: one Warning event per machine says so.
    async fn class_gone(&self) {
        let uid = self.machine.uid().unwrap_or_default();
        if !self.deps.class_warned.lock().insert(uid) {
            return;
        }
        let class_name = &self.machine.spec.class.name;
        let deletion = match decide::KnownClass::recorded(&self.machine) {
            Some(Some(_)) => {
                "deleting it relies on the class the machine recorded; \
                              re-create the class to be safe"
            }
            _ => {
                "the machine has no record of the class, so the VM cannot be deleted \
                  until the class is back: re-create it"
            }
        };
        let note = format!(
            "MachineClass {}/{class_name} not found: the VM keeps running, but cannot be \
             updated in place, and {deletion}",
            self.ns
        );
        self.event(true, "ClassMissing", note).await;
    }

    /// The class is there (again): losing it later warns again.
    fn class_found(&self) {
        if let Some(uid) = self.machine.uid() {
            self.deps.class_warned.lock().remove(&uid);
        }
    }

    /// A Node that is being deleted, or that is gone after the machine had
    /// joined, makes the machine go too (spec §2: deleting a Node replaces
    /// its machine). A missing node is confirmed with a read, so a cache
    /// that lags never deletes a machine.
    async fn node_deleted(&mut self, node: Option<&Node>, node_name: &str) -> Result<bool, Error> {
        let deleted = match node {
            Some(n) => n.metadata.deletion_timestamp.is_some(),
            None => {
                matches!(
                    self.machine.phase(),
                    Some(MachinePhase::Running) | Some(MachinePhase::Unknown)
                ) && self.live_node(node_name).await?.is_none()
            }
        };
        if !deleted {
            return Ok(false);
        }
        match self
            .api
            .delete(&self.name, &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(Error::api(format!("deleting machine {}", self.name), e)),
        }
        tracing::info!(machine = %self.name, node = node_name, "node deleted, deleting its machine");
        self.event(
            false,
            "NodeDeleted",
            format!("Node {node_name} was deleted; deleting the machine"),
        )
        .await;
        Ok(true)
    }

    /// The health check (spec §2.2); returns when to look again.
    async fn health(&mut self, node: Option<&Node>) -> Result<Duration, Error> {
        let obs = decide::observe_health(&self.machine, node, &self.settings, self.now);
        let verdict = health::decide(&obs, self.now);
        if verdict == Verdict::FailedHealthTimeout {
            return self.fail_for_health(node).await;
        }
        if verdict == (Verdict::Running { first_join: true }) {
            self.first_join().await?;
        }
        let Some(st) =
            decide::health_status(&self.machine, &verdict, node, &self.settings, self.now)
        else {
            return Ok(match verdict {
                Verdict::Wait(d) => d,
                _ => HEALTH_RECHECK,
            });
        };
        let description = st.last_operation.description.clone();
        self.write_status(st).await?;
        match verdict {
            Verdict::Running { first_join: false } => {
                self.event(false, "Rejoined", description).await
            }
            Verdict::Unknown { .. } => self.event(true, "Unhealthy", description).await,
            Verdict::FailedCreationTimeout => {
                self.event(true, "CreationTimeout", description).await
            }
            _ => {}
        }
        Ok(match verdict {
            Verdict::Wait(d) => d,
            _ => SHORT_RETRY,
        })
    }

    /// First join: the bootstrap token is no longer needed, and the join
    /// duration is recorded. Both are idempotent, and happen before the
    /// phase turns Running so a crash in between repeats them.
    async fn first_join(&mut self) -> Result<(), Error> {
        let id = decide::bootstrap_token_id(&self.name);
        let secrets: Api<Secret> =
            Api::namespaced(self.target()?, decide::BOOTSTRAP_TOKEN_NAMESPACE);
        match secrets
            .delete(
                &decide::bootstrap_token_secret_name(&id),
                &DeleteParams::default(),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(Error::api("deleting the bootstrap token", e)),
        }
        let took = format_duration(Duration::from_secs(
            decide::age(&self.machine, self.now).as_secs(),
        ));
        if !self
            .machine
            .annotations()
            .contains_key(labels::MACHINE_JOIN_DURATION)
        {
            let p = json!({"metadata": {"annotations": {labels::MACHINE_JOIN_DURATION: took}}});
            self.patch(&p).await?;
        }
        self.event(
            false,
            "Joined",
            format!("Machine {} joined the cluster in {took}", self.name),
        )
        .await;
        Ok(())
    }

    /// `Unknown` past the health timeout: fail the machine if the meltdown
    /// limit of its deployment allows it. The check and the write happen
    /// under the deployment's lock, and the lock is held until the cache
    /// shows the write, so the next machine's check counts this one.
    async fn fail_for_health(&mut self, node: Option<&Node>) -> Result<Duration, Error> {
        let key = self
            .machine
            .labels()
            .get(labels::NAME)
            .cloned()
            .unwrap_or_else(|| self.name.clone());
        let lock = self.deps.health_lock(&format!("{}/{key}", self.ns));
        let _held = lock.lock().await;
        let me = self.machine.uid();
        let siblings: Vec<health::Sibling> = self
            .ctx
            .machines
            .state()
            .iter()
            .filter(|m| {
                m.metadata.namespace.as_deref() == Some(self.ns.as_str())
                    && m.uid() != me
                    && m.labels().get(labels::NAME).unwrap_or(&m.name_any()) == &key
            })
            .map(|m| decide::sibling(m))
            .collect();
        if !health::may_fail_for_health(&siblings, self.ctx.config.max_health_replacements) {
            tracing::debug!(machine = %self.name, deployment = %key, "health failure held back by the meltdown limit");
            return Ok(MELTDOWN_WAIT);
        }
        let Some(st) = decide::health_status(
            &self.machine,
            &Verdict::FailedHealthTimeout,
            node,
            &self.settings,
            self.now,
        ) else {
            return Ok(SHORT_RETRY);
        };
        let description = st.last_operation.description.clone();
        self.write_status(st).await?;
        self.event(true, "HealthTimeout", description).await;
        let key = ObjectRef::from_obj(&self.machine);
        let deadline = tokio::time::Instant::now() + CACHE_CONFIRM;
        while tokio::time::Instant::now() < deadline {
            if self
                .ctx
                .machines
                .get(&key)
                .is_some_and(|m| m.phase() == Some(MachinePhase::Failed))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(SHORT_RETRY)
    }

    /// Keeps the node template, the machine-name label and the node
    /// finalizer on the node (spec §2.3). The finalizer goes only on a node
    /// exactly one live machine maps to. A conflict is left to the next
    /// pass, which sees the newer node.
    async fn sync_node(&self, node: &Node) -> Result<(), Error> {
        if node
            .annotations()
            .get(labels::NOT_MANAGED_BY_MCM)
            .is_some_and(|v| v == "1")
        {
            return Ok(());
        }
        let node_name = node.name_any();
        let owners = self
            .ctx
            .machines
            .state()
            .iter()
            .filter(|m| {
                m.metadata.deletion_timestamp.is_none()
                    && m.labels().get(labels::NODE) == Some(&node_name)
            })
            .count();
        let Some(patch) = decide::node_sync_patch(
            node,
            &self.name,
            &self.machine.spec.node_template,
            owners == 1,
        ) else {
            return Ok(());
        };
        match self
            .nodes()?
            .patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 409) || is_status(&e, 404) => Ok(()),
            Err(e) => Err(Error::api(format!("node {node_name}"), e)),
        }
    }

    /// Hot update (seed 003 §2.2.3, option 2): when the class's provider
    /// spec differs from the one last applied to the VM, the driver applies
    /// what it can in place. What counts as hot-updatable is the driver's
    /// decision (the local provider: tags); it refuses other changes, which
    /// then only take effect for new machines, since MCM never rolls
    /// machines out for class changes. `Unimplemented` skips quietly.
    async fn hot_update(
        &mut self,
        class: &MachineClass,
        secret: &Secret,
    ) -> Result<Option<Duration>, Error> {
        let Some(last) = decide::hot_update_needed(&self.machine, &class.provider_spec) else {
            return Ok(None);
        };
        let answer = self
            .deps
            .driver
            .update_machine(UpdateMachineRequest {
                machine: &self.machine,
                machine_class: class,
                secret,
                last_applied_provider_spec: last.as_ref(),
            })
            .await;
        match answer {
            Ok(_) => {
                let p = json!({"metadata": {"annotations": {
                    decide::LAST_APPLIED_PROVIDER_SPEC: class.provider_spec.to_string()
                }}});
                self.patch(&p).await?;
                self.event(
                    false,
                    "HotUpdated",
                    "Applied the class's provider spec to the VM in place".into(),
                )
                .await;
                Ok(None)
            }
            Err(e) => match e.code.outcome(Step::HotUpdate) {
                Outcome::Retry(r) => {
                    self.event(true, "HotUpdateFailed", e.to_string()).await;
                    Ok(Some(r.period(self.settings.resource_exhausted_retry)))
                }
                _ => Ok(None),
            },
        }
    }

    // --- Creation -----------------------------------------------------------

    /// Gets or creates the machine's bootstrap token in the target cluster
    /// and returns it as `<id>.<secret>`. An existing token is reused, so
    /// retries hand the driver the same userData.
    async fn bootstrap_token(&self) -> Result<String, Error> {
        let id = decide::bootstrap_token_id(&self.name);
        let secret_name = decide::bootstrap_token_secret_name(&id);
        let secrets: Api<Secret> =
            Api::namespaced(self.target()?, decide::BOOTSTRAP_TOKEN_NAMESPACE);
        let read = |e| Error::api(format!("bootstrap token {secret_name}"), e);
        if let Some(token) = secrets
            .get_opt(&secret_name)
            .await
            .map_err(read)?
            .as_ref()
            .and_then(decide::token_of)
        {
            return Ok(token);
        }
        let token_secret = decide::generate_token_secret(&mut rand::rng());
        let expiry = self.now
            + chrono::Duration::from_std(self.settings.creation_timeout)
                .unwrap_or(chrono::Duration::MAX);
        let secret = decide::bootstrap_token_secret(
            &id,
            &token_secret,
            expiry,
            &self.settings.bootstrap_token_auth_extra_groups,
        );
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => Ok(format!("{id}.{token_secret}")),
            // Created concurrently (another machine with the same ID
            // suffix, or a replaced secret): use whatever is stored.
            Err(e) if is_status(&e, 409) => secrets
                .get_opt(&secret_name)
                .await
                .map_err(read)?
                .as_ref()
                .and_then(decide::token_of)
                .ok_or_else(|| {
                    Error::Encode(format!("bootstrap token {secret_name} without a token"))
                }),
            Err(e) => Err(read(e)),
        }
    }

    /// The creation flow (spec §2.1); returns when to look again.
    async fn create(&mut self, class: &MachineClass, secret: &Secret) -> Result<Duration, Error> {
        let user_data = decide::secret_value(secret, labels::USER_DATA_KEY).unwrap_or_default();
        // Without a target cluster there is nothing to join, so no token.
        let token = if self.has_target() {
            self.bootstrap_token().await?
        } else {
            String::new()
        };
        let driver_secret = decide::with_user_data(
            secret,
            &decide::substitute_user_data(&user_data, &token, &self.name),
        );
        let driver = self.deps.driver.clone();
        let mut provider_id = self.machine.spec.provider_id.clone();
        let mut node_name = decide::node_name(&self.machine)
            .unwrap_or_default()
            .to_string();
        let mut initialize = false;
        // The provider's addresses of the VM; recorded only without a
        // target cluster, where no Node carries them.
        let mut addresses = Vec::new();
        let status = driver
            .get_machine_status(GetMachineStatusRequest {
                machine: &self.machine,
                machine_class: class,
                secret: &driver_secret,
            })
            .await;
        match status {
            Ok(r) => {
                // The VM exists: adopt it.
                addresses = r.addresses;
                if !r.provider_id.is_empty() {
                    provider_id = r.provider_id;
                }
                if !r.node_name.is_empty() {
                    node_name = r.node_name;
                }
            }
            Err(e) => match e.code.outcome(Step::CreationStatus) {
                Outcome::CreateVm if provider_id.is_empty() => {
                    let created = driver
                        .create_machine(CreateMachineRequest {
                            machine: &self.machine,
                            machine_class: class,
                            secret: &driver_secret,
                        })
                        .await;
                    let r = match created {
                        Ok(r) => r,
                        Err(e) => return self.create_failed(e, Step::Create).await,
                    };
                    tracing::info!(machine = %self.name, provider_id = %r.provider_id, "VM created");
                    self.event(false, "Created", format!("Created VM {}", r.provider_id))
                        .await;
                    if self.has_target()
                        && r.node_name != self.name
                        && !r.node_name.is_empty()
                        && self.live_node(&r.node_name).await?.is_some()
                    {
                        return self.stale_node(class, &driver_secret, &r.provider_id).await;
                    }
                    provider_id = r.provider_id;
                    node_name = r.node_name;
                    addresses = r.addresses;
                    initialize = true;
                }
                // The machine already names its VM; keep it.
                Outcome::CreateVm => {}
                Outcome::InitializeVm => initialize = true,
                _ => return self.create_failed(e, Step::CreationStatus).await,
            },
        }
        // Record the VM before initializing it, so it is never lost.
        if let Some(p) = decide::creation_patch(
            &self.machine,
            &provider_id,
            &node_name,
            &class.provider_spec,
        ) {
            self.patch(&p).await?;
        }
        if initialize {
            let init = driver
                .initialize_machine(InitializeMachineRequest {
                    machine: &self.machine,
                    machine_class: class,
                    secret: &driver_secret,
                })
                .await;
            match init {
                Ok(r) => {
                    if provider_id.is_empty() {
                        provider_id = r.provider_id;
                    }
                    if !r.addresses.is_empty() {
                        addresses = r.addresses;
                    }
                    if node_name.is_empty() {
                        node_name = r.node_name;
                    }
                }
                Err(e) => match e.code.outcome(Step::Initialize) {
                    Outcome::Skip => {}
                    outcome => {
                        let after = match outcome {
                            Outcome::Retry(r) => r.period(self.settings.resource_exhausted_retry),
                            _ => SHORT_RETRY,
                        };
                        let mut st = self.status();
                        st.last_operation = decide::last_op(
                            MachineOperationType::Create,
                            MachineState::Failed,
                            format!("Provider error: {}. Initialize VM Instance", e.message),
                            Some(e.code),
                            self.now,
                        );
                        self.write_status(st).await?;
                        self.event(true, "InitializeFailed", e.to_string()).await;
                        return Ok(after);
                    }
                },
            }
        }
        if !decide::vm_ids_complete(&provider_id, &node_name, self.has_target()) {
            let e = DriverError::new(
                Code::Internal,
                "the provider reported no providerID or node name for the VM",
            );
            return self.create_failed(e, Step::Create).await;
        }
        if let Some(p) = decide::creation_patch(
            &self.machine,
            &provider_id,
            &node_name,
            &class.provider_spec,
        ) {
            self.patch(&p).await?;
        }
        if let Some(st) =
            decide::created_status(&self.machine, self.has_target(), &addresses, self.now)
        {
            self.write_status(st).await?;
        }
        Ok(decide::recheck_after_creation(
            &self.machine,
            self.has_target(),
            &self.settings,
            self.now,
        ))
    }

    /// The create-error handler (spec §2.1).
    async fn create_failed(&mut self, e: DriverError, step: Step) -> Result<Duration, Error> {
        let f = decide::create_failure(
            e.code,
            &e.message,
            step,
            decide::age(&self.machine, self.now),
            &self.settings,
            self.now,
        );
        let mut st = decide::with_phase(&self.status(), f.phase, false, self.now);
        st.last_operation = f.last_operation;
        self.write_status(st).await?;
        tracing::info!(machine = %self.name, code = %e.code, phase = %f.phase, "creating the VM failed");
        self.event(true, "CreateFailed", e.to_string()).await;
        Ok(f.retry)
    }

    /// The new VM registered as a node that already exists under another
    /// name: delete the VM and fail the machine (spec §2.1.2).
    async fn stale_node(
        &mut self,
        class: &MachineClass,
        secret: &Secret,
        provider_id: &str,
    ) -> Result<Duration, Error> {
        let mut vm = self.machine.clone();
        vm.spec.provider_id = provider_id.to_string();
        if let Err(e) = self
            .deps
            .driver
            .delete_machine(DeleteMachineRequest {
                machine: &vm,
                machine_class: class,
                secret,
            })
            .await
        {
            tracing::warn!(machine = %self.name, error = %e, "deleting a VM with a stale node failed");
            return Ok(SHORT_RETRY);
        }
        let mut st = decide::with_phase(&self.status(), MachinePhase::Failed, false, self.now);
        st.last_operation = decide::last_op(
            MachineOperationType::Create,
            MachineState::Failed,
            decide::STALE_NODE_DESCRIPTION,
            None,
            self.now,
        );
        self.write_status(st).await?;
        self.event(true, "StaleNode", decide::STALE_NODE_DESCRIPTION.into())
            .await;
        Ok(LONG_RETRY)
    }

    // --- Deletion -----------------------------------------------------------

    async fn set_step(&mut self, step: DeletionStep) -> Result<(), Error> {
        let p = json!({"metadata": {"annotations": {decide::DELETION_STEP: step.as_str()}}});
        self.patch(&p).await
    }

    /// The deletion flow (spec §2.4): advances as far as it can in this
    /// pass, recording each step before acting on it.
    async fn delete(&mut self) -> Result<Action, Error> {
        if !has_finalizer(&self.machine) {
            // Someone else's finalizer holds the machine; nothing is ours.
            return Ok(Action::await_change());
        }
        let mut step = match DeletionStep::of(&self.machine) {
            Some(step) => step,
            None => {
                self.start_deletion().await?;
                DeletionStep::GetVmStatus
            }
        };
        loop {
            let transition = match decide::skip_without_target(step, self.has_target()) {
                Some(skip) => skip,
                None => {
                    let fact = self.step_fact(step).await?;
                    decide::deletion_transition(step, &fact, self.settings.resource_exhausted_retry)
                }
            };
            match transition {
                Transition::Next { step: next, note } => {
                    if step == DeletionStep::DrainNode && self.has_target() {
                        self.drained();
                    }
                    self.set_step(next).await?;
                    let mut st = self.status();
                    st.last_operation = decide::deletion_last_op(next, note, None, self.now);
                    self.write_status(st).await?;
                    step = next;
                }
                Transition::Stay { after, failure } => {
                    if let Some((message, code)) = failure {
                        self.step_failed(step, &message, code).await?;
                    }
                    // A blocked drain is looked at again when it turns
                    // forced, not up to a retry period later.
                    let after = match step {
                        DeletionStep::DrainNode => after.min(self.until_forced()),
                        _ => after,
                    };
                    return Ok(requeue(after));
                }
                Transition::Finished => return Ok(Action::await_change()),
            }
        }
    }

    async fn step_failed(
        &mut self,
        step: DeletionStep,
        message: &str,
        code: Option<Code>,
    ) -> Result<(), Error> {
        let op = decide::deletion_last_op(step, None, Some((message, code)), self.now);
        let mut st = self.status();
        // Only the description and state matter; a new timestamp alone is
        // not worth a write every few seconds.
        if st.last_operation.description != op.description || st.last_operation.state != op.state {
            st.last_operation = op;
            self.write_status(st).await?;
            self.event(true, "DeletionStepFailed", format!("{message} ({step:?})"))
                .await;
        }
        Ok(())
    }

    /// S0: record S1, mark the node Terminating while the machine's phase
    /// (Failed or not) still tells the reason, then freeze the phase at
    /// Terminating.
    async fn start_deletion(&mut self) -> Result<(), Error> {
        self.set_step(DeletionStep::GetVmStatus).await?;
        if let Some(node_name) = decide::node_name(&self.machine)
            && let Some(node) = self.cached_node(node_name)
        {
            let failed = self.machine.phase() == Some(MachinePhase::Failed);
            if let Err(e) = self.mark_terminating(&node, failed).await {
                tracing::debug!(machine = %self.name, error = %e, "marking the node Terminating");
            }
        }
        let st = decide::terminating_status(&self.machine, self.now);
        self.write_status(st).await?;
        self.event(false, "Deleting", "Deletion started".into())
            .await;
        Ok(())
    }

    async fn mark_terminating(&self, node: &Node, failed: bool) -> Result<(), Error> {
        let Some(c) = decide::terminating_condition(node, failed, self.now) else {
            return Ok(());
        };
        let p = json!({"status": {"conditions": [c]}});
        self.nodes()?
            .patch_status(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&p),
            )
            .await
            .map_err(|e| Error::api(format!("conditions of node {}", node.name_any()), e))?;
        Ok(())
    }

    /// Gathers the fact the current step turns on, acting where the step
    /// acts.
    async fn step_fact(&mut self, step: DeletionStep) -> Result<StepFact, Error> {
        Ok(match step {
            DeletionStep::GetVmStatus => self.s1_find_node().await?,
            DeletionStep::DrainNode => self.s2_drain().await?,
            DeletionStep::DeleteVolumeAttachments => self.s3_volume_attachments().await?,
            DeletionStep::DeleteVm => self.s4_delete_vm().await?,
            DeletionStep::DeleteNode => self.s5_delete_node().await?,
            DeletionStep::RemoveFinalizer => {
                let p = finalizer_patch(&self.machine.metadata, labels::MCM_FINALIZER, false);
                match self
                    .api
                    .patch(&self.name, &PatchParams::default(), &Patch::Merge(&p))
                    .await
                {
                    Ok(_) => {}
                    Err(e) if is_status(&e, 404) => {}
                    Err(e) => {
                        return Err(Error::api(
                            format!("finalizers of machine {}", self.name),
                            e,
                        ));
                    }
                }
                let uid = self.machine.uid().unwrap_or_default();
                self.deps.drains.lock().remove(&uid);
                self.deps.class_warned.lock().remove(&uid);
                tracing::info!(machine = %self.name, "machine deleted");
                self.event(false, "Deleted", "The machine and its VM are gone".into())
                    .await;
                StepFact::FinalizerRemoved
            }
        })
    }

    /// S1: find the node to drain: the `node` label, a node labelled with
    /// the machine's name, or what the VM's status reports.
    async fn s1_find_node(&mut self) -> Result<StepFact, Error> {
        if decide::node_name(&self.machine).is_some() {
            return Ok(StepFact::NodeKnown);
        }
        let by_label = self
            .deps
            .nodes
            .iter()
            .flat_map(|nodes| nodes.state())
            .find(|n| n.labels().get(labels::NODE_MACHINE_NAME) == Some(&self.name));
        if let Some(node) = by_label {
            let p = json!({"metadata": {"labels": {labels::NODE: node.name_any()}}});
            self.patch(&p).await?;
            return Ok(StepFact::NodeKnown);
        }
        let (class, secret) = match self.deletion_class().await? {
            Ok(found) => found,
            Err(fact) => return Ok(fact),
        };
        let answer = self
            .deps
            .driver
            .get_machine_status(GetMachineStatusRequest {
                machine: &self.machine,
                machine_class: &class,
                secret: &secret,
            })
            .await;
        Ok(match answer {
            Ok(r) => {
                if !r.node_name.is_empty() {
                    let p = json!({"metadata": {"labels": {labels::NODE: r.node_name}}});
                    self.patch(&p).await?;
                }
                StepFact::NodeKnown
            }
            Err(e) => StepFact::StatusFailed {
                code: e.code,
                message: e.message,
            },
        })
    }

    /// S2: cordon, mark Terminating and run one drain round.
    async fn s2_drain(&mut self) -> Result<StepFact, Error> {
        let Some(node_name) = decide::node_name(&self.machine).map(str::to_string) else {
            return Ok(StepFact::NodeGone);
        };
        let Some(node) = self.live_node(&node_name).await? else {
            return Ok(StepFact::NodeGone);
        };
        let reason = drain::force_reason(
            &decide::force_input(&self.machine, &node, &self.settings),
            self.now,
        );
        let forced = reason.is_some();
        // The condition is informational; only a normal drain insists.
        if let Err(e) = self.mark_terminating(&node, false).await
            && !forced
        {
            return Ok(StepFact::DrainFailed {
                forced,
                message: e.to_string(),
            });
        }
        if node.spec.as_ref().and_then(|s| s.unschedulable) != Some(true) {
            let p = json!({"spec": {"unschedulable": true}});
            if let Err(e) = self
                .nodes()?
                .patch(&node_name, &PatchParams::default(), &Patch::Merge(&p))
                .await
                && !is_status(&e, 404)
            {
                return Ok(StepFact::DrainFailed {
                    forced,
                    message: format!("cordoning node {node_name}: {e}"),
                });
            }
        }
        let pods: Api<Pod> = Api::all(self.target()?);
        let on_node = pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={node_name}")))
            .await
            .map_err(|e| Error::api(format!("pods of node {node_name}"), e))?
            .items;
        let drain_pods: Vec<DrainPod> = on_node.iter().filter_map(decide::drain_pod).collect();
        let uid = self.machine.uid().unwrap_or_default();
        let records = self
            .deps
            .drains
            .lock()
            .get(&uid)
            .cloned()
            .unwrap_or_default();
        let attached: Vec<String> = node
            .status
            .as_ref()
            .and_then(|s| s.volumes_attached.as_ref())
            .map(|vs| vs.iter().map(|v| v.name.clone()).collect())
            .unwrap_or_default();
        let max_retries =
            drain::max_evict_retries(self.settings.max_evict_retries, self.settings.drain_timeout);
        let round = decide::drain_round(
            &drain_pods,
            &records,
            &attached,
            forced,
            max_retries,
            self.settings.pv_detach_timeout,
            self.now,
        );
        if let Some(r) = &reason
            && round != DrainRound::Done
        {
            tracing::info!(machine = %self.name, node = %node_name, reason = ?r, "forced drain");
        }
        Ok(match round {
            DrainRound::Done => StepFact::Drained { forced },
            // Never wait past the moment the drain turns forced.
            DrainRound::Wait(d) => StepFact::Draining(d.min(self.until_forced())),
            DrainRound::Failed(message) => StepFact::DrainFailed { forced, message },
            DrainRound::Act {
                actions,
                recheck,
                done,
            } => {
                let failures = self.act_on_pods(&actions, &on_node, records).await?;
                match failures.into_iter().next() {
                    Some(message) if !forced => StepFact::DrainFailed { forced, message },
                    Some(message) => {
                        tracing::warn!(machine = %self.name, %message, "forced drain left a pod");
                        StepFact::Drained { forced }
                    }
                    None if done => StepFact::Drained { forced },
                    None => StepFact::Draining(recheck.min(self.until_forced())),
                }
            }
        })
    }

    /// Records the drain's duration, counted from the deletion as the
    /// drain timeout is.
    fn drained(&self) {
        if let Some(started) = self.machine.metadata.deletion_timestamp.as_ref() {
            let took = (Utc::now() - crate::time::to_chrono(started)).to_std();
            self.ctx.config.metrics.drained(took.unwrap_or_default());
        }
    }

    /// Time left until the drain timeout (since the deletion) forces the
    /// drain.
    fn until_forced(&self) -> Duration {
        let started = self
            .machine
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(crate::time::to_chrono)
            .unwrap_or(self.now);
        let elapsed = (self.now - started).to_std().unwrap_or_default();
        self.settings.drain_timeout.saturating_sub(elapsed) + Duration::from_millis(100)
    }

    /// Carries out a drain round's pod actions concurrently, records their
    /// outcome for the next round, and returns what failed the drain.
    async fn act_on_pods(
        &self,
        actions: &[PodAction],
        pods: &[Pod],
        mut records: HashMap<String, EvictRecord>,
    ) -> Result<Vec<String>, Error> {
        let find = |uid: &str| pods.iter().find(|p| p.metadata.uid.as_deref() == Some(uid));
        // Claims used by more than one pod of the node are not waited for:
        // their volume stays attached while any user remains (spec §2.5).
        let mut claim_users: BTreeMap<(String, String), usize> = BTreeMap::new();
        for p in pods {
            for c in decide::pvc_names(p) {
                *claim_users
                    .entry((p.namespace().unwrap_or_default(), c))
                    .or_default() += 1;
            }
        }
        let results = join_all(actions.iter().map(|a| async {
            let (uid, pod) = match a {
                PodAction::Evict(u) | PodAction::Delete(u) | PodAction::ForceDelete(u) => {
                    (u.clone(), find(u))
                }
            };
            let Some(pod) = pod else {
                return (uid, PodOutcome::Gone, Vec::new());
            };
            let volume_ids = match a {
                PodAction::Evict(_) | PodAction::Delete(_) => {
                    self.volume_ids(pod, &claim_users).await
                }
                PodAction::ForceDelete(_) => Vec::new(),
            };
            (uid, self.act_on_pod(a, pod).await, volume_ids)
        }))
        .await;
        let mut failures = Vec::new();
        for (uid, outcome, volume_ids) in results {
            let grace = find(&uid)
                .and_then(decide::drain_pod)
                .map(|p| p.grace)
                .unwrap_or_default();
            let rec = records.entry(uid).or_default();
            match outcome {
                PodOutcome::Gone | PodOutcome::Accepted => {
                    rec.evicted_at = Some(self.now);
                    rec.volume_ids = volume_ids;
                    rec.grace = grace;
                }
                PodOutcome::Refused => {
                    rec.attempts += 1;
                    rec.last_attempt = Some(self.now);
                }
                // Not an attempt that counts towards deleting the pod: a
                // budget that can never allow the eviction fails the drain,
                // which is tried again after the short period until the
                // drain timeout forces it (spec §2.5).
                PodOutcome::Failed(message) => failures.push(message),
            }
        }
        self.deps
            .drains
            .lock()
            .insert(self.machine.uid().unwrap_or_default(), records);
        Ok(failures)
    }

    async fn act_on_pod(&self, action: &PodAction, pod: &Pod) -> PodOutcome {
        let ns = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let target = match self.target() {
            Ok(t) => t,
            Err(NoTarget) => return PodOutcome::Failed(Error::NoTarget.to_string()),
        };
        let pods: Api<Pod> = Api::namespaced(target, &ns);
        let result = match action {
            PodAction::Evict(_) => pods.evict(&name, &EvictParams::default()).await.map(|_| ()),
            PodAction::Delete(_) => pods
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ()),
            PodAction::ForceDelete(_) => pods
                .delete(
                    &name,
                    &DeleteParams {
                        grace_period_seconds: Some(0),
                        ..DeleteParams::default()
                    },
                )
                .await
                .map(|_| ()),
        };
        match result {
            Ok(()) => PodOutcome::Accepted,
            Err(e) if is_status(&e, 404) => PodOutcome::Gone,
            Err(e) if is_status(&e, 429) => match self.misconfigured_pdb(pod).await {
                Some(pdb) => PodOutcome::Failed(format!(
                    "eviction of pod {ns}/{name} is blocked by PodDisruptionBudget {pdb}, \
                     which allows no disruption although all its pods are healthy"
                )),
                None => PodOutcome::Refused,
            },
            Err(e) if matches!(action, PodAction::ForceDelete(_)) => {
                PodOutcome::Failed(format!("deleting pod {ns}/{name}: {e}"))
            }
            Err(e) => {
                tracing::debug!(pod = %name, error = %e, "eviction failed, retrying");
                PodOutcome::Refused
            }
        }
    }

    /// The name of a misconfigured PodDisruptionBudget covering the pod.
    async fn misconfigured_pdb(&self, pod: &Pod) -> Option<String> {
        let ns = pod.namespace().unwrap_or_default();
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(self.target().ok()?, &ns);
        let list = pdbs.list(&ListParams::default()).await.ok()?;
        let labels = pod.labels();
        list.items
            .iter()
            .filter(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.selector.as_ref())
                    .is_some_and(|sel| decide::selector_matches(sel, labels))
            })
            .find(|p| decide::pdb_misconfigured(p))
            .map(|p| p.name_any())
    }

    /// The provider's IDs of the volumes a pod alone uses, to wait for them
    /// to detach after its eviction. Lookup failures give no IDs: the drain
    /// then does not wait, and S3/S4 still release the volumes.
    async fn volume_ids(
        &self,
        pod: &Pod,
        claim_users: &BTreeMap<(String, String), usize>,
    ) -> Vec<String> {
        let ns = pod.namespace().unwrap_or_default();
        let Ok(target) = self.target() else {
            return Vec::new();
        };
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(target.clone(), &ns);
        let pvs: Api<PersistentVolume> = Api::all(target);
        let mut specs: Vec<PersistentVolumeSpec> = Vec::new();
        for claim in decide::pvc_names(pod) {
            if claim_users.get(&(ns.clone(), claim.clone())).copied() != Some(1) {
                continue;
            }
            let Ok(Some(pvc)) = pvcs.get_opt(&claim).await else {
                continue;
            };
            let Some(pv_name) = pvc.spec.and_then(|s| s.volume_name) else {
                continue;
            };
            if let Ok(Some(pv)) = pvs.get_opt(&pv_name).await
                && let Some(spec) = pv.spec
            {
                specs.push(spec);
            }
        }
        if specs.is_empty() {
            return Vec::new();
        }
        match self
            .deps
            .driver
            .get_volume_ids(GetVolumeIDsRequest { pv_specs: &specs })
            .await
        {
            Ok(r) => r.volume_ids,
            Err(e) => {
                tracing::debug!(machine = %self.name, error = %e, "GetVolumeIDs failed");
                Vec::new()
            }
        }
    }

    /// S3: delete the node's VolumeAttachments until none is left.
    async fn s3_volume_attachments(&self) -> Result<StepFact, Error> {
        let Some(node_name) = decide::node_name(&self.machine).map(str::to_string) else {
            return Ok(StepFact::NodeGone);
        };
        let Some(node) = self.live_node(&node_name).await? else {
            return Ok(StepFact::NodeGone);
        };
        let attached = node
            .status
            .as_ref()
            .and_then(|s| s.volumes_attached.as_ref())
            .is_some_and(|v| !v.is_empty());
        if !attached {
            return Ok(StepFact::VolumesDetached);
        }
        let vas: Api<VolumeAttachment> = Api::all(self.target()?);
        let mine: Vec<VolumeAttachment> = vas
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::api("volume attachments", e))?
            .items
            .into_iter()
            .filter(|va| va.spec.node_name == node_name)
            .collect();
        if mine.is_empty() {
            return Ok(StepFact::VolumesDetached);
        }
        for va in mine
            .iter()
            .filter(|va| va.metadata.deletion_timestamp.is_none())
        {
            match vas.delete(&va.name_any(), &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 404) => {}
                Err(e) => {
                    return Err(Error::api(
                        format!("volume attachment {}", va.name_any()),
                        e,
                    ));
                }
            }
        }
        Ok(StepFact::VolumeAttachmentsLeft(mine.len()))
    }

    /// S4: delete the VM.
    async fn s4_delete_vm(&mut self) -> Result<StepFact, Error> {
        let (class, secret) = match self.deletion_class().await? {
            Ok(found) => found,
            Err(fact) => return Ok(fact),
        };
        let answer = self
            .deps
            .driver
            .delete_machine(DeleteMachineRequest {
                machine: &self.machine,
                machine_class: &class,
                secret: &secret,
            })
            .await;
        Ok(match answer {
            Ok(r) => {
                if !r.last_known_state.is_empty() {
                    let mut st = self.status();
                    st.last_known_state = r.last_known_state;
                    self.write_status(st).await?;
                }
                tracing::info!(machine = %self.name, "VM deleted");
                StepFact::VmDeleteAnswered {
                    code: Code::Ok,
                    message: String::new(),
                }
            }
            Err(e) => StepFact::VmDeleteAnswered {
                code: e.code,
                message: e.message,
            },
        })
    }

    /// S5: release and delete the Node object.
    async fn s5_delete_node(&self) -> Result<StepFact, Error> {
        let Some(node_name) = decide::node_name(&self.machine).map(str::to_string) else {
            return Ok(StepFact::NodeDeleted);
        };
        let Some(node) = self.live_node(&node_name).await? else {
            return Ok(StepFact::NodeDeleted);
        };
        if node
            .finalizers()
            .iter()
            .any(|f| f == labels::NODE_FINALIZER)
        {
            let p = finalizer_patch(&node.metadata, labels::NODE_FINALIZER, false);
            match self
                .nodes()?
                .patch(&node_name, &PatchParams::default(), &Patch::Merge(&p))
                .await
            {
                Ok(_) => {}
                Err(e) if is_status(&e, 404) => return Ok(StepFact::NodeDeleted),
                Err(e) => return Err(Error::api(format!("finalizers of node {node_name}"), e)),
            }
        }
        match self
            .nodes()?
            .delete(&node_name, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(Error::api(format!("deleting node {node_name}"), e)),
        }
        Ok(StepFact::NodeDeleted)
    }
}

/// A step that works on the target cluster ran without one; becomes
/// [`Error::NoTarget`]. Small, unlike [`Error`], for the synchronous
/// accessors that return it.
struct NoTarget;

impl From<NoTarget> for Error {
    fn from(_: NoTarget) -> Error {
        Error::NoTarget
    }
}

/// What happened to one pod a drain round acted on.
enum PodOutcome {
    /// The pod was already gone.
    Gone,
    /// The eviction or deletion was accepted.
    Accepted,
    /// The eviction was refused (429 or a transient error): retry later.
    Refused,
    /// The drain fails because of this pod.
    Failed(String),
}
