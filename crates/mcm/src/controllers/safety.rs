//! The safety controller: executes `crate::safety`'s decisions in three
//! loops that run beside the other controllers.
//!
//! - **Overshooting** (every `--machine-safety-overshooting-period` and on
//!   every new machine): freezes machine sets that own too many machines,
//!   and their deployments; thaws them when the count is back down.
//! - **Orphan VMs** (every `--machine-safety-orphan-vms-period`, on every
//!   machine deletion, and when a machine's last operation newly reports
//!   `OutOfRange`): deletes VMs no machine owns, and disowns Nodes no machine
//!   maps to (the latter only with a target cluster). Runs only with a
//!   driver.
//! - **API servers** (every `--machine-safety-apiserver-statuscheck-period`):
//!   probes the control and (if there is one) the target API server; down
//!   for longer than
//!   `--machine-safety-apiserver-statuscheck-timeout` sets the frozen flag
//!   in [`SafetyState`], which stops the machine controller (for live
//!   machines) and the orphan collector. Runs only with a driver.
//!
//! Decisions come from the caches; destructive steps are confirmed with a
//! live read first, and status writes are guarded by resource versions.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use api::{
    Machine, MachineClass, MachineDeployment, MachineDeploymentCondition,
    MachineDeploymentConditionType, MachinePhase, MachineSet, MachineSetCondition,
    MachineSetConditionType, MachineSpec, labels,
};
use chrono::{DateTime, Utc};
use driver::{Code, DeleteMachineRequest, ListMachinesRequest};
use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::context::{Context, Error, MachineDeps};
use crate::machine::merge_secrets;
use crate::safety::{self, ApiServerHealth, FreezeChange, NodeAction, Outage, ProbeChange};
use crate::time::{to_chrono, to_time};

/// The event reporter name.
pub const REPORTER: &str = "machine-safety-controller";

/// At most one overshooting pass this often: a burst of new machines (a
/// scale-up of hundreds) costs one pass, not hundreds.
const OVERSHOOT_MIN_GAP: Duration = Duration::from_millis(500);
/// At most one triggered orphan pass this often (or per period, if that is
/// shorter): listing a cloud's VMs is expensive, and a large scale-down
/// deletes machines by the hundred.
const ORPHAN_MIN_GAP: Duration = Duration::from_secs(10);
/// How soon a paused orphan pass (API servers unreachable) is tried again.
const ORPHAN_PAUSED_RETRY: Duration = Duration::from_secs(5);
/// A probe that takes longer than this counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// A name no Machine or Node has: its GET answers NotFound from a healthy
/// API server.
const PROBE_NAME: &str = "trellis-safety-apiserver-probe";
/// How long publishing one event may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts of a status write that loses races to other writers.
const CONFLICT_ATTEMPTS: usize = 3;

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// What the safety controller shares with the other controllers: whether
/// the API servers are reachable, whether the machine controller is
/// frozen, and the trigger that requeues every machine after a freeze.
pub struct SafetyState {
    frozen: AtomicBool,
    /// The last probe succeeded. False until the first probe has answered,
    /// so the orphan collector never runs on an unproven connection.
    reachable: AtomicBool,
    requeue: tokio::sync::watch::Sender<u64>,
}

impl Default for SafetyState {
    fn default() -> Self {
        SafetyState {
            frozen: AtomicBool::new(false),
            reachable: AtomicBool::new(false),
            requeue: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl SafetyState {
    /// The machine controller is frozen because an API server has been
    /// unreachable for longer than the timeout (the value of upstream's
    /// `mcm_machine_controller_frozen`).
    pub fn frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }

    /// The last probe of both API servers succeeded.
    pub fn reachable(&self) -> bool {
        self.reachable.load(Ordering::SeqCst)
    }

    /// Whether the orphan collector may act: never while an API server is
    /// unreachable or the controller is frozen (spec §8.2, §8.3).
    pub fn may_collect_orphans(&self) -> bool {
        self.reachable() && !self.frozen()
    }

    /// Fires whenever every machine should be reconciled again (after a
    /// freeze ends); the machine controller's `reconcile_all_on` input.
    pub fn machine_requeues(&self) -> impl Stream<Item = ()> + Send + 'static {
        futures::stream::unfold(self.requeue.subscribe(), |mut rx| async move {
            rx.changed().await.ok().map(|_| ((), rx))
        })
    }

    fn requeue_all_machines(&self) {
        self.requeue.send_modify(|n| *n += 1);
    }
}

/// Runs the safety loops until `shutdown`. `machine_events` is a trigger
/// stream of the shared machine watch (changed and deleted machines, each
/// after the machine cache shows it).
pub async fn run(
    ctx: Arc<Context>,
    machine_events: impl Stream<Item = Result<Machine, watcher::Error>> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let recorder = Recorder::new(
        ctx.control.clone(),
        Reporter {
            controller: REPORTER.into(),
            instance: None,
        },
    );
    let overshoot_trigger = Arc::new(Notify::new());
    let orphan_trigger = Arc::new(Notify::new());
    let pump = pump(
        &ctx,
        machine_events,
        &overshoot_trigger,
        &orphan_trigger,
        shutdown.clone(),
    );
    let overshoot = overshoot_loop(&ctx, &recorder, &overshoot_trigger, shutdown.clone());
    let machine_side = async {
        let Some(deps) = ctx.machine.as_ref() else {
            return;
        };
        let probe = ApiServerProbe {
            control: ctx.control.clone(),
            target: ctx.target.clone(),
            namespace: ctx.config.namespace.clone(),
        };
        let machines: Api<Machine> = Api::namespaced(ctx.control.clone(), &ctx.config.namespace);
        let recover = |outage: Outage| {
            let machines = machines.clone();
            async move { restart_health_clocks(&machines, &outage).await.map(|_| ()) }
        };
        let api = watch_api_servers(
            &ctx.safety,
            &probe,
            ctx.config.machine_safety_apiserver_statuscheck_period,
            ctx.config.machine_safety_apiserver_statuscheck_timeout,
            recover,
            shutdown.clone(),
        );
        let orphans = orphan_loop(&ctx, deps, &recorder, &orphan_trigger, shutdown.clone());
        futures::join!(api, orphans);
    };
    futures::join!(pump, overshoot, machine_side);
}

/// Turns machine events into triggers: a machine not seen before triggers
/// an overshooting pass; a deleted machine, or one whose last operation
/// newly mentions `OutOfRange` (several VMs claim it), an orphan pass.
async fn pump(
    ctx: &Context,
    events: impl Stream<Item = Result<Machine, watcher::Error>>,
    overshoot: &Notify,
    orphans: &Notify,
    shutdown: impl Future<Output = ()>,
) {
    futures::pin_mut!(events);
    tokio::pin!(shutdown);
    // Per machine UID: whether its last operation mentioned OutOfRange.
    let mut seen: HashMap<String, bool> = HashMap::new();
    loop {
        let m = tokio::select! {
            _ = &mut shutdown => return,
            ev = events.next() => match ev {
                Some(Ok(m)) => m,
                Some(Err(_)) => continue,
                None => return,
            },
        };
        let uid = m.metadata.uid.clone().unwrap_or_default();
        // The cache is updated before the trigger is sent, so a machine
        // that is not in it (under this UID) was deleted.
        let cached = ctx
            .machines
            .get(&ObjectRef::from_obj(&m))
            .is_some_and(|c| c.metadata.uid.as_deref() == Some(uid.as_str()));
        if !cached {
            seen.remove(&uid);
            orphans.notify_one();
            continue;
        }
        let out_of_range = m
            .status
            .as_ref()
            .is_some_and(|s| s.last_operation.description.contains("OutOfRange"));
        match seen.insert(uid, out_of_range) {
            None => {
                overshoot.notify_one();
                if out_of_range {
                    orphans.notify_one();
                }
            }
            Some(before) if out_of_range && !before => orphans.notify_one(),
            Some(_) => {}
        }
    }
}

/// Publishes an event; best effort, bounded so a slow events endpoint never
/// stalls a pass.
async fn publish<K: Resource<DynamicType = ()>>(
    recorder: &Recorder,
    obj: &K,
    warning: bool,
    reason: &str,
    note: String,
) {
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
    let reference = obj.object_ref(&());
    match tokio::time::timeout(EVENT_TIMEOUT, recorder.publish(&ev, &reference)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(reason, error = %e, "publishing an event failed"),
        Err(_) => tracing::warn!(reason, "publishing an event timed out"),
    }
}

// --- Overshooting ---------------------------------------------------------------

async fn overshoot_loop(
    ctx: &Context,
    recorder: &Recorder,
    trigger: &Notify,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let period = ctx.config.machine_safety_overshooting_period;
    let mut next = Instant::now();
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep_until(next) => {}
            _ = trigger.notified() => {}
        }
        let started = Instant::now();
        if let Err(e) = overshoot_pass(ctx, recorder).await {
            tracing::warn!(error = %e, "overshooting check failed");
        }
        next = started + period;
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(OVERSHOOT_MIN_GAP.min(period)) => {}
        }
    }
}

/// One overshooting pass over every set and deployment of the namespace.
/// A failed change is logged and the pass goes on: one broken object must
/// not keep the others from being frozen.
pub async fn overshoot_pass(ctx: &Context, recorder: &Recorder) -> Result<(), Error> {
    let ns = &ctx.config.namespace;
    let mds_api: Api<MachineDeployment> = Api::namespaced(ctx.control.clone(), ns);
    let sets_api: Api<MachineSet> = Api::namespaced(ctx.control.clone(), ns);
    let mds = mds_api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::api("machine deployments", e))?
        .items;
    let sets = ctx.sets.state();
    let machines = ctx.machines.state();
    let plan = safety::plan_overshoot(
        &sets.iter().map(|s| s.as_ref()).collect::<Vec<_>>(),
        &mds.iter().collect::<Vec<_>>(),
        &machines.iter().map(|m| m.as_ref()).collect::<Vec<_>>(),
        ctx.config.safety_up,
        ctx.config.safety_down,
    );
    let now = Utc::now();
    for change in &plan.sets {
        match apply_set(&sets_api, change, now).await {
            Ok(Some(set)) => {
                let (warning, reason) = if change.frozen {
                    (true, "FrozeMachineSet")
                } else {
                    (false, "UnfrozeMachineSet")
                };
                tracing::info!(set = %change.name, frozen = change.frozen, reason = change.reason, "{}", change.message);
                publish(
                    recorder,
                    &set,
                    warning,
                    reason,
                    format!("{}: {}", change.reason, change.message),
                )
                .await;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(set = %change.name, error = %e, "freezing or unfreezing failed")
            }
        }
    }
    for change in &plan.deployments {
        match apply_deployment(&mds_api, change, now).await {
            Ok(Some(md)) => {
                let (warning, reason) = if change.frozen {
                    (true, "FrozeMachineDeployment")
                } else {
                    (false, "UnfrozeMachineDeployment")
                };
                tracing::info!(deployment = %change.name, frozen = change.frozen, reason = change.reason, "{}", change.message);
                publish(
                    recorder,
                    &md,
                    warning,
                    reason,
                    format!("{}: {}", change.reason, change.message),
                )
                .await;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(deployment = %change.name, error = %e, "freezing or unfreezing failed")
            }
        }
    }
    Ok(())
}

/// The merge patch of the freeze label (set or removed) and, if honoured,
/// the removal of the unfreeze annotation.
fn freeze_meta_patch(change: &FreezeChange) -> Value {
    let mut meta = json!({"labels": {
        labels::FREEZE: if change.frozen { Value::from(labels::TRUE) } else { Value::Null }
    }});
    if change.clear_unfreeze {
        meta["annotations"] = json!({ labels::UNFREEZE: Value::Null });
    }
    json!({ "metadata": meta })
}

/// Applies a freeze change to a set: the label first (it is what stops
/// scale-up), then the `Frozen` condition on a fresh copy. `None`: the set
/// is gone.
async fn apply_set(
    api: &Api<MachineSet>,
    change: &FreezeChange,
    now: DateTime<Utc>,
) -> Result<Option<MachineSet>, Error> {
    apply_freeze(api, change, "machine set", |set: &mut MachineSet| {
        set_frozen_condition(
            &mut set.status.get_or_insert_default().conditions,
            change,
            now,
        )
    })
    .await
}

/// Applies a freeze change to a deployment, as [`apply_set`].
async fn apply_deployment(
    api: &Api<MachineDeployment>,
    change: &FreezeChange,
    now: DateTime<Utc>,
) -> Result<Option<MachineDeployment>, Error> {
    apply_freeze(
        api,
        change,
        "machine deployment",
        |md: &mut MachineDeployment| {
            set_md_frozen_condition(
                &mut md.status.get_or_insert_default().conditions,
                change,
                now,
            )
        },
    )
    .await
}

/// The shared steps of [`apply_set`] and [`apply_deployment`]: the freeze
/// label by merge patch, then `set_condition` on a fresh copy written with
/// the status subresource, retried on conflicts. `set_condition` says
/// whether it changed anything.
async fn apply_freeze<K>(
    api: &Api<K>,
    change: &FreezeChange,
    kind: &str,
    set_condition: impl Fn(&mut K) -> bool,
) -> Result<Option<K>, Error>
where
    K: Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let what = || format!("{kind} {}", change.name);
    match api
        .patch(
            &change.name,
            &PatchParams::default(),
            &Patch::Merge(freeze_meta_patch(change)),
        )
        .await
    {
        Ok(_) => {}
        Err(e) if is_status(&e, 404) => return Ok(None),
        Err(e) => return Err(Error::api(what(), e)),
    }
    for _ in 0..CONFLICT_ATTEMPTS {
        let Some(mut obj) = api
            .get_opt(&change.name)
            .await
            .map_err(|e| Error::api(what(), e))?
        else {
            return Ok(None);
        };
        if !set_condition(&mut obj) {
            return Ok(Some(obj));
        }
        match api
            .replace_status(&change.name, &PostParams::default(), &obj)
            .await
        {
            Ok(obj) => return Ok(Some(obj)),
            Err(e) if is_status(&e, 409) => continue,
            Err(e) if is_status(&e, 404) => return Ok(None),
            Err(e) => return Err(Error::api(what(), e)),
        }
    }
    Err(Error::FreezeConflict(what()))
}

/// Sets (frozen) or removes (thawed) a set's `Frozen` condition, keeping
/// the transition time of one already True; whether anything changed.
fn set_frozen_condition(
    conditions: &mut Vec<MachineSetCondition>,
    change: &FreezeChange,
    now: DateTime<Utc>,
) -> bool {
    let before = conditions.clone();
    let ty = MachineSetConditionType::Frozen;
    if !change.frozen {
        conditions.retain(|c| c.type_ != ty);
        return *conditions != before;
    }
    let since = conditions
        .iter()
        .find(|c| c.type_ == ty && c.status == api::ConditionStatus::True)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| to_time(now));
    conditions.retain(|c| c.type_ != ty);
    conditions.push(MachineSetCondition {
        type_: ty,
        status: api::ConditionStatus::True,
        last_transition_time: Some(since),
        reason: change.reason.to_string(),
        message: change.message.clone(),
    });
    *conditions != before
}

/// [`set_frozen_condition`] for a deployment. As upstream, a thawed
/// deployment has no `Frozen` condition; the reason is in the event.
fn set_md_frozen_condition(
    conditions: &mut Vec<MachineDeploymentCondition>,
    change: &FreezeChange,
    now: DateTime<Utc>,
) -> bool {
    let before = conditions.clone();
    let ty = MachineDeploymentConditionType::Frozen;
    if !change.frozen {
        conditions.retain(|c| c.type_ != ty);
        return *conditions != before;
    }
    let existing = conditions
        .iter()
        .find(|c| c.type_ == ty && c.status == api::ConditionStatus::True)
        .cloned();
    if existing
        .as_ref()
        .is_some_and(|c| c.reason == change.reason && c.message == change.message)
    {
        return false;
    }
    conditions.retain(|c| c.type_ != ty);
    conditions.push(MachineDeploymentCondition {
        type_: ty,
        status: api::ConditionStatus::True,
        last_update_time: Some(to_time(now)),
        last_transition_time: Some(
            existing
                .and_then(|c| c.last_transition_time)
                .unwrap_or_else(|| to_time(now)),
        ),
        reason: change.reason.to_string(),
        message: change.message.clone(),
    });
    true
}

// --- Orphan VMs and nodes -------------------------------------------------------

async fn orphan_loop(
    ctx: &Context,
    deps: &MachineDeps,
    recorder: &Recorder,
    trigger: &Notify,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let period = ctx.config.machine_safety_orphan_vms_period;
    let mut next = Instant::now();
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep_until(next) => {}
            _ = trigger.notified() => {}
        }
        if !ctx.safety.may_collect_orphans() {
            tracing::debug!("orphan collection paused: API servers not known to be reachable");
            next = Instant::now() + ORPHAN_PAUSED_RETRY.min(period);
            continue;
        }
        let started = Instant::now();
        match collect_orphans(ctx, deps, recorder).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "orphan collection deleted VMs"),
            Err(e) => tracing::warn!(error = %e, "orphan collection failed"),
        }
        next = started + period;
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(ORPHAN_MIN_GAP.min(period)) => {}
        }
    }
}

/// The class's secrets merged (credentials win); a missing secret counts as
/// empty, as for the machine controller.
async fn class_secret(ctx: &Context, class: &MachineClass) -> Result<Secret, Error> {
    let mut found = Vec::new();
    for r in [&class.secret_ref, &class.credentials_secret_ref] {
        let Some(r) = r else {
            found.push(None);
            continue;
        };
        let ns = r
            .namespace
            .clone()
            .unwrap_or_else(|| ctx.config.namespace.clone());
        let name = r.name.clone().unwrap_or_default();
        let secrets: Api<Secret> = Api::namespaced(ctx.control.clone(), &ns);
        found.push(
            secrets
                .get_opt(&name)
                .await
                .map_err(|e| Error::api(format!("secret {ns}/{name}"), e))?,
        );
    }
    Ok(merge_secrets(found[0].as_ref(), found[1].as_ref()))
}

/// The machine a VM deletion names: only what the driver contract
/// guarantees (name and providerID).
fn bare_machine(ns: &str, name: &str, provider_id: &str) -> Machine {
    let mut m = Machine::new(
        name,
        MachineSpec {
            provider_id: provider_id.to_string(),
            ..MachineSpec::default()
        },
    );
    m.metadata.namespace = Some(ns.to_string());
    m
}

/// One orphan pass: VMs of every class that no machine owns are deleted,
/// then Nodes without machines are disowned (or reclaimed). Returns how
/// many VMs were deleted. Stops as soon as the API servers stop answering.
pub async fn collect_orphans(
    ctx: &Context,
    deps: &MachineDeps,
    recorder: &Recorder,
) -> Result<usize, Error> {
    // The cache picks candidates; it must at least have been filled once.
    if !matches!(ctx.machines.wait_until_ready().now_or_never(), Some(Ok(()))) {
        return Ok(0);
    }
    let ns = ctx.config.namespace.as_str();
    let machines: Api<Machine> = Api::namespaced(ctx.control.clone(), ns);
    let classes: Api<MachineClass> = Api::namespaced(ctx.control.clone(), ns);
    let classes = classes
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::api("machine classes", e))?
        .items;
    let mut seen = BTreeSet::new();
    let mut deleted = 0;
    for class in &classes {
        let class_name = class.name_any();
        let secret = match class_secret(ctx, class).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(class = %class_name, error = %e, "orphan collection skips the class");
                continue;
            }
        };
        let listed = match deps
            .driver
            .list_machines(ListMachinesRequest {
                machine_class: class,
                secret: &secret,
            })
            .await
        {
            Ok(r) => r.machine_list,
            Err(e) if e.code == Code::Unimplemented => continue,
            Err(e) => {
                tracing::warn!(class = %class_name, error = %e, "listing VMs failed");
                continue;
            }
        };
        for (provider_id, name) in listed {
            if !seen.insert(provider_id.clone()) {
                continue;
            }
            let cached = ctx.machines.get(&ObjectRef::new(&name).within(ns));
            if !safety::is_orphan_vm(&provider_id, cached.as_deref()) {
                continue;
            }
            // A cache miss is no proof (spec §8.2): confirm with a live read,
            // and only while the API servers are known to answer.
            if !ctx.safety.may_collect_orphans() {
                return Ok(deleted);
            }
            let live = machines
                .get_opt(&name)
                .await
                .map_err(|e| Error::api(format!("machine {name}"), e))?;
            if !safety::is_orphan_vm(&provider_id, live.as_ref()) {
                continue;
            }
            let vm = bare_machine(ns, &name, &provider_id);
            match deps
                .driver
                .delete_machine(DeleteMachineRequest {
                    machine: &vm,
                    machine_class: class,
                    secret: &secret,
                })
                .await
            {
                Ok(_) => {}
                Err(e) if e.code == Code::NotFound => continue,
                Err(e) => {
                    tracing::warn!(%provider_id, machine = %name, error = %e, "deleting an orphan VM failed");
                    continue;
                }
            }
            deleted += 1;
            let why = if live.is_some() {
                "its machine runs on another VM"
            } else {
                "no machine of that name exists"
            };
            tracing::info!(%provider_id, machine = %name, class = %class_name, why, "deleted an orphan VM");
            publish(
                recorder,
                class,
                true,
                "OrphanVMDeleted",
                format!("Deleted VM {provider_id} created for machine {name}: {why}"),
            )
            .await;
        }
    }
    disown_nodes(ctx, deps, &machines).await?;
    Ok(deleted)
}

/// Whether a machine maps to the node: its `node` label names the node, or
/// the node's machine-name label names it.
fn maps_to<'a>(node: &Node, machines: impl IntoIterator<Item = &'a Machine>) -> bool {
    let name = node.name_any();
    let named = node.labels().get(labels::NODE_MACHINE_NAME);
    machines.into_iter().any(|m| {
        m.labels().get(labels::NODE) == Some(&name) || named.is_some_and(|n| *n == m.name_any())
    })
}

/// Nodes no machine maps to, older than the creation timeout, lose the node
/// finalizer and are marked `not-managed-by-mcm`; the mark goes once a
/// machine maps to them. Disowning is confirmed against a live list of
/// machines.
async fn disown_nodes(ctx: &Context, deps: &MachineDeps, api: &Api<Machine>) -> Result<(), Error> {
    let now = Utc::now();
    let cached = ctx.machines.state();
    // Without a target cluster there are no nodes to disown.
    let (Some(target), Some(node_store)) = (ctx.target.clone(), deps.nodes.as_ref()) else {
        return Ok(());
    };
    let mut live: Option<Vec<Machine>> = None;
    let nodes: Api<Node> = Api::all(target);
    for node in node_store.state() {
        let mapped = maps_to(&node, cached.iter().map(|m| m.as_ref()));
        let Some(action) =
            safety::node_action(&node, mapped, ctx.config.machine.creation_timeout, now)
        else {
            continue;
        };
        let name = node.name_any();
        let patch = match action {
            NodeAction::Disown => {
                if live.is_none() {
                    live = Some(
                        api.list(&ListParams::default())
                            .await
                            .map_err(|e| Error::api("machines", e))?
                            .items,
                    );
                }
                if maps_to(&node, live.iter().flatten()) {
                    continue;
                }
                disown_patch(&node.metadata)
            }
            NodeAction::Reclaim => {
                json!({"metadata": {"annotations": {labels::NOT_MANAGED_BY_MCM: Value::Null}}})
            }
        };
        match nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(node = %name, ?action, "node without a machine");
            }
            // Gone, or changed since the cache saw it: the next pass decides
            // again from the newer node.
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => {}
            Err(e) => return Err(Error::api(format!("node {name}"), e)),
        }
    }
    Ok(())
}

fn disown_patch(meta: &ObjectMeta) -> Value {
    let fins: Vec<String> = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != labels::NODE_FINALIZER)
        .cloned()
        .collect();
    json!({"metadata": {
        "annotations": {labels::NOT_MANAGED_BY_MCM: "1"},
        "finalizers": fins,
        "resourceVersion": meta.resource_version,
    }})
}

// --- API servers ----------------------------------------------------------------

/// A check of the API servers the controllers depend on.
pub trait Probe: Send + Sync {
    /// `Ok` when every API server answered; `Err` says which did not.
    fn probe(&self) -> BoxFuture<'_, Result<(), String>>;
}

/// GETs a Machine and a Node that do not exist: NotFound (or, should
/// they exist, the object) means the server answers. Without a target
/// cluster only the control cluster is probed.
pub struct ApiServerProbe {
    pub control: kube::Client,
    pub target: Option<kube::Client>,
    pub namespace: String,
}

fn answered<K>(r: Result<K, kube::Error>, which: &str) -> Result<(), String> {
    match r {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(format!("{which} API server: {e}")),
    }
}

impl Probe for ApiServerProbe {
    fn probe(&self) -> BoxFuture<'_, Result<(), String>> {
        async move {
            let machines: Api<Machine> = Api::namespaced(self.control.clone(), &self.namespace);
            let node = async {
                match &self.target {
                    Some(target) => Some(Api::<Node>::all(target.clone()).get(PROBE_NAME).await),
                    None => None,
                }
            };
            let (m, n) = futures::join!(machines.get(PROBE_NAME), node);
            answered(m, "control")?;
            n.map_or(Ok(()), |n| answered(n, "target"))
        }
        .boxed()
    }
}

/// Probes every `period` (every `timeout / 5` while probes fail, so the
/// freeze lands close to `timeout`) and keeps `state` current. After a
/// freeze, the first good probe runs `recover` with the outage; only when
/// it succeeds is the controller unfrozen and every machine requeued.
pub async fn watch_api_servers<F, Fut>(
    state: &SafetyState,
    probe: &dyn Probe,
    period: Duration,
    timeout: Duration,
    mut recover: F,
    shutdown: impl Future<Output = ()>,
) where
    F: FnMut(Outage) -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    tokio::pin!(shutdown);
    let mut health = ApiServerHealth::default();
    let probe_timeout = timeout.clamp(Duration::from_millis(100), PROBE_TIMEOUT);
    loop {
        let ok = match tokio::time::timeout(probe_timeout, probe.probe()).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "API server probe failed");
                false
            }
            Err(_) => {
                tracing::warn!("API server probe timed out");
                false
            }
        };
        state.reachable.store(ok, Ordering::SeqCst);
        match health.observe(ok, Utc::now(), timeout) {
            ProbeChange::None => {}
            ProbeChange::Freeze => {
                state.frozen.store(true, Ordering::SeqCst);
                tracing::error!(
                    ?timeout,
                    "API server unreachable for longer than the timeout: machine controller frozen"
                );
            }
            ProbeChange::Recover(outage) => match recover(outage).await {
                Ok(()) => {
                    health.recovered(Utc::now());
                    state.frozen.store(false, Ordering::SeqCst);
                    state.requeue_all_machines();
                    tracing::info!(
                        outage_since = %outage.since,
                        "API servers reachable again: machine controller unfrozen"
                    );
                }
                Err(e) => {
                    tracing::warn!(error = %e, "recovery after the API server outage failed; staying frozen")
                }
            },
        }
        let wait = if ok && !health.frozen() {
            period
        } else {
            (timeout / 5).max(Duration::from_millis(10))
        };
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// The recovery after an outage: the health-timeout clock of every
/// `Unknown` machine stops for the outage
/// ([`safety::health_clock_after_outage`]); phases are left to the machine
/// controller, which decides them from the nodes as they are now. Returns
/// how many machines were updated.
pub async fn restart_health_clocks(api: &Api<Machine>, outage: &Outage) -> Result<usize, Error> {
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::api("machines", e))?;
    let mut updated = 0;
    for m in list.items {
        let name = m.name_any();
        let mut m = m;
        for attempt in 0..CONFLICT_ATTEMPTS {
            if m.metadata.deletion_timestamp.is_some() || m.phase() != Some(MachinePhase::Unknown) {
                break;
            }
            let st = m.status.get_or_insert_default();
            let Some(since) = st.current_status.last_update_time.as_ref().map(to_chrono) else {
                break;
            };
            let moved = safety::health_clock_after_outage(since, outage);
            if moved == since {
                break;
            }
            st.current_status.last_update_time = Some(to_time(moved));
            match api.replace_status(&name, &PostParams::default(), &m).await {
                Ok(_) => {
                    updated += 1;
                    tracing::info!(machine = %name, from = %since, to = %moved, "health timeout clock moved past the API server outage");
                    break;
                }
                Err(e) if is_status(&e, 404) => break,
                Err(e) if is_status(&e, 409) && attempt + 1 < CONFLICT_ATTEMPTS => {
                    match api
                        .get_opt(&name)
                        .await
                        .map_err(|e| Error::api(format!("machine {name}"), e))?
                    {
                        Some(fresh) => m = fresh,
                        None => break,
                    }
                }
                Err(e) => return Err(Error::api(format!("status of machine {name}"), e)),
            }
        }
    }
    Ok(updated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    /// A probe that answers from a switch the test flips.
    struct FakeProbe(Arc<AtomicBool>);

    impl Probe for FakeProbe {
        fn probe(&self) -> BoxFuture<'_, Result<(), String>> {
            let up = self.0.load(Ordering::SeqCst);
            async move {
                if up {
                    Ok(())
                } else {
                    Err("injected outage".into())
                }
            }
            .boxed()
        }
    }

    async fn until(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn the_frozen_flag_follows_the_probe() {
        let state = Arc::new(SafetyState::default());
        let up = Arc::new(AtomicBool::new(true));
        let probe = FakeProbe(up.clone());
        let outages: Arc<Mutex<Vec<Outage>>> = Arc::default();
        let fail_recovery = Arc::new(AtomicBool::new(true));
        let requeues = state.machine_requeues();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (s, o, f) = (state.clone(), outages.clone(), fail_recovery.clone());
        let task = tokio::spawn(async move {
            let recover = |outage: Outage| {
                o.lock().push(outage);
                let fail = f.load(Ordering::SeqCst);
                async move {
                    if fail {
                        Err(Error::Encode("injected recovery failure".into()))
                    } else {
                        Ok(())
                    }
                }
            };
            watch_api_servers(
                &s,
                &probe,
                Duration::from_millis(20),
                Duration::from_millis(200),
                recover,
                async {
                    let _ = stop_rx.await;
                },
            )
            .await
        });
        until("the first probe", || state.reachable()).await;
        assert!(!state.frozen() && state.may_collect_orphans());

        let down_at = Instant::now();
        up.store(false, Ordering::SeqCst);
        until("unreachable", || !state.reachable()).await;
        assert!(!state.frozen(), "not frozen before the timeout");
        assert!(!state.may_collect_orphans(), "orphans wait at once");
        until("frozen", || state.frozen()).await;
        assert!(down_at.elapsed() >= Duration::from_millis(200));

        // Back up, but the recovery fails: still frozen, retried.
        up.store(true, Ordering::SeqCst);
        until("two recovery attempts", || outages.lock().len() >= 2).await;
        assert!(state.frozen() && !state.may_collect_orphans());
        fail_recovery.store(false, Ordering::SeqCst);
        until("unfrozen", || !state.frozen()).await;
        assert!(state.may_collect_orphans());
        let o = outages.lock().clone();
        assert!(
            o.windows(2)
                .all(|w| w[0].since == w[1].since && w[0].until <= w[1].until)
        );
        // Every machine is requeued once the freeze ends.
        futures::pin_mut!(requeues);
        assert!(
            tokio::time::timeout(Duration::from_secs(1), requeues.next())
                .await
                .is_ok()
        );
        let _ = stop_tx.send(());
        task.await.unwrap();
    }

    fn change(frozen: bool, reason: &'static str) -> FreezeChange {
        FreezeChange {
            name: "ms".into(),
            frozen,
            reason,
            message: "m".into(),
            clear_unfreeze: false,
        }
    }

    #[test]
    fn frozen_conditions_keep_their_transition_time() {
        let t0 = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let t1 = DateTime::from_timestamp(1_700_000_100, 0).unwrap();
        let mut c = Vec::new();
        assert!(set_frozen_condition(&mut c, &change(true, "A"), t0));
        assert!(!set_frozen_condition(&mut c, &change(true, "A"), t1));
        assert!(set_frozen_condition(&mut c, &change(true, "B"), t1));
        assert_eq!(c[0].last_transition_time, Some(to_time(t0)));
        assert!(set_frozen_condition(&mut c, &change(false, "C"), t1));
        assert!(c.is_empty());
        assert!(!set_frozen_condition(&mut c, &change(false, "C"), t1));

        let mut d = Vec::new();
        assert!(set_md_frozen_condition(&mut d, &change(true, "A"), t0));
        assert!(!set_md_frozen_condition(&mut d, &change(true, "A"), t1));
        assert!(set_md_frozen_condition(&mut d, &change(true, "B"), t1));
        assert_eq!(d[0].last_transition_time, Some(to_time(t0)));
        assert_eq!(d[0].last_update_time, Some(to_time(t1)));
        assert!(set_md_frozen_condition(&mut d, &change(false, "C"), t1));
        assert!(d.is_empty());
    }
}
