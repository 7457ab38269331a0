//! The machine controller: the executor of `crate::machine`'s decisions.
//! It reads machines, classes and secrets in the control cluster and Nodes,
//! Pods, VolumeAttachments and bootstrap tokens in the target cluster, calls
//! the driver, and writes back what the pure functions decided. One module
//! per flow, each adding its steps to `Scope`: `class` (the class and
//! its secrets, class problems), `health` (node deleted, health verdicts,
//! the meltdown limit), `node_sync`, `hot_update`, `creation` (the
//! creation state machine's steps), `deletion` (S1–S6) and `drain`
//! (S2's rounds). This module holds the pass itself: its order, its reads,
//! and its writes.
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
//! **The status is written once per pass**, as Cluster API writes it: the
//! steps only decide it (into the `Scope`'s machine, so later steps see
//! it), and `Scope::finish` writes it at the end — also after a failed
//! step, whose error is then the one reported — guarded by the resource
//! version of the machine as last written. Events go out after that write.
//! What must be durable before a step acts is metadata, written at once:
//! the class record before the driver is asked for a VM, the VM's record
//! before it is initialized, the deletion step before it acts, the join
//! annotation before the phase turns Running. Markers of work done (the
//! provider spec last applied, the join duration) are written only after
//! that work succeeded. The start of a deletion (S0, phase `Terminating`)
//! is a pass of its own, so the phase is seen before any step acts.
//!
//! Requeues are returned; every status write also triggers the next pass
//! through the shared machine watch. A failed pass is retried after the
//! machine's backoff (`crate::backoff`), which a successful pass resets.

use std::sync::Arc;
use std::time::Duration;

use api::{Machine, MachineClass, MachineStatus, labels};
use chrono::{DateTime, Utc};
use driver::{LONG_RETRY, SHORT_RETRY};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::OwnedMutexGuard;

use super::cache::IndexKey;
use super::context::{Context, Error, MachineDeps};
use crate::machine::{self as decide, ClassState, MachineEvent, Settings};

mod class;
mod creation;
mod deletion;
mod drain;
mod health;
mod hot_update;
mod node_sync;

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
    let pass = if machine.metadata.deletion_timestamp.is_some() {
        s.delete().await
    } else {
        s.live().await
    };
    // The status is written once, at the end, also after a failed step;
    // the step's error is the one reported.
    let written = s.finish().await;
    let result = match (pass, written) {
        (Ok(action), Ok(())) => Ok(action),
        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
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
    let mut found = ctx.machines.by(&IndexKey::Node(name.clone()));
    if let Some(named) = node.labels().get(labels::NODE_MACHINE_NAME)
        && !named.is_empty()
    {
        found.extend(ctx.machines.by(&IndexKey::Name(named.clone())));
    }
    let named = node.labels().get(labels::NODE_MACHINE_NAME);
    let mut refs: Vec<ObjectRef<Machine>> = found
        .iter()
        .filter(|m| {
            m.labels().get(labels::NODE) == Some(&name)
                || named.is_some_and(|n| !n.is_empty() && m.name_any() == *n)
        })
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect();
    refs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    refs.dedup();
    refs
}

/// Maps a MachineClass to the machines that use it, so a changed provider
/// spec reaches them (hot update).
pub fn machines_for_class(ctx: &Context, class: &MachineClass) -> Vec<ObjectRef<Machine>> {
    let name = class.metadata.name.clone().unwrap_or_default();
    let ns = class.metadata.namespace.clone();
    let Some(key_ns) = ns.clone() else {
        return Vec::new();
    };
    ctx.machines
        .by(&IndexKey::Class(key_ns, name.clone()))
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
    /// The machine as the API server last returned it, but with the status
    /// this pass means to write: every decision of the pass sees the
    /// status the steps before it decided.
    machine: Machine,
    name: String,
    ns: String,
    settings: Settings,
    now: DateTime<Utc>,
    /// The status as the API server last returned it; [`Self::finish`]
    /// writes `machine.status` once if it differs.
    written: Option<MachineStatus>,
    /// Events of this pass, published once its status is written.
    events: Vec<MachineEvent>,
    /// The meltdown lock of the machine's deployment, held from the
    /// decision to fail the machine for health until the cache shows the
    /// write, so the next machine's check counts this one.
    meltdown: Option<OwnedMutexGuard<()>>,
    /// The machine's finalizer is gone, and with it the machine: there is
    /// no status left to write.
    gone: bool,
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
            written: machine.status.clone(),
            events: Vec::new(),
            meltdown: None,
            gone: false,
        }
    }

    /// A merge patch of the machine (metadata or spec); the result becomes
    /// the machine this pass works with, still carrying the status the
    /// pass has decided so far.
    async fn patch(&mut self, patch: &Value) -> Result<(), Error> {
        let patched = self
            .api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| Error::api(format!("machine {}", self.name), e))?;
        self.adopt(patched);
        Ok(())
    }

    /// Takes the machine the API server returned after a write of its
    /// metadata or spec, keeping the status this pass decided so far.
    fn adopt(&mut self, returned: Machine) {
        let pending = std::mem::replace(&mut self.machine, returned).status;
        self.written = std::mem::replace(&mut self.machine.status, pending);
    }

    /// The status this pass means to write.
    fn status(&self) -> MachineStatus {
        self.machine.status.clone().unwrap_or_default()
    }

    /// Makes `status` the one this pass writes at its end.
    fn set_status(&mut self, status: MachineStatus) {
        self.machine.status = Some(status);
    }

    /// Queues an event on the machine, published after the status write.
    fn event(&mut self, warning: bool, reason: &'static str, note: String) {
        self.events.push(MachineEvent {
            warning,
            reason,
            note,
        });
    }

    /// The end of every pass, failed or not (as Cluster API's deferred
    /// patch): the status the pass decided is written once, guarded by the
    /// resource version of the machine it last saw, then the meltdown lock
    /// is released once the cache shows a health failure, then the events
    /// go out.
    async fn finish(&mut self) -> Result<(), Error> {
        let written = self.write_status().await;
        if let Some(lock) = self.meltdown.take() {
            if written.is_ok() {
                self.confirm_failed().await;
            }
            drop(lock);
        }
        for ev in std::mem::take(&mut self.events) {
            self.publish(ev).await;
        }
        written
    }

    /// Replaces the status if the pass changed it.
    async fn write_status(&mut self) -> Result<(), Error> {
        if self.gone || self.machine.status == self.written {
            return Ok(());
        }
        self.machine = self
            .api
            .replace_status(&self.name, &PostParams::default(), &self.machine)
            .await
            .map_err(|e| Error::api(format!("status of machine {}", self.name), e))?;
        self.written = self.machine.status.clone();
        Ok(())
    }

    /// Publishes an event on the machine. Events are best effort: a failure
    /// is logged, never returned.
    async fn publish(&self, ev: MachineEvent) {
        let reason = ev.reason;
        let ev = Event {
            type_: if ev.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(ev.note),
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

    async fn live(&mut self) -> Result<Action, Error> {
        let class = self.live_class().await?;
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
                    self.set_status(st);
                    self.event(false, "ClassAvailable", note);
                }
                if steps.hot_update
                    && let Some(after) = self.hot_update(class, secret).await?
                {
                    next = next.min(after);
                }
            }
            _ if !steps.create => self.class_gone(),
            _ => {}
        }
        if steps.create {
            let class_name = self.machine.spec.class.name.clone();
            match (
                decide::class_problem(state, &self.ns, &class_name),
                &class,
                &secret,
            ) {
                (Some(problem), _, _) => next = next.min(self.blocked(problem)),
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
