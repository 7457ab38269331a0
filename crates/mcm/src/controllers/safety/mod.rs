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

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use api::Machine;
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use tokio::sync::Notify;

use super::context::Context;

mod apiserver;
mod orphans;
mod overshoot;

use crate::safety::Outage;
pub use apiserver::{ApiServerProbe, Probe, restart_health_clocks, watch_api_servers};
pub use orphans::collect_orphans;
use orphans::orphan_loop;
use overshoot::overshoot_loop;
pub use overshoot::overshoot_pass;

/// The event reporter name.
pub const REPORTER: &str = "machine-safety-controller";

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
