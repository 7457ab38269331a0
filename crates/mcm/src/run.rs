//! Wiring: shared caches and the controllers, run until shutdown.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use api::{Machine, MachineClass, MachineDeployment, MachineSet};
use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Api;
use kube::runtime::events::Reporter;
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::WriterDropped;
use kube::runtime::{Controller, WatchStreamExt, controller, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use crate::controllers::cache::{KeysFn, cache, machine_keys, no_keys, node_keys, set_keys};
use crate::controllers::{self, Cache, Config, Context, MachineDeps};

/// Why the controllers could not start: a cache that never filled, named
/// after the watch that failed. The watch gave up before its first list
/// (its writer was dropped), which only happens when the task running it
/// stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("watching machines failed before the first list")]
    WatchMachinesFailed(#[source] WriterDropped),
    #[error("watching machine sets failed before the first list")]
    WatchMachineSetsFailed(#[source] WriterDropped),
    #[error("watching machine classes failed before the first list")]
    WatchMachineClassesFailed(#[source] WriterDropped),
    #[error("watching secrets failed before the first list")]
    WatchSecretsFailed(#[source] WriterDropped),
    #[error("watching the target cluster's nodes failed before the first list")]
    WatchNodesFailed(#[source] WriterDropped),
}

/// One watch of a kind that fills a cache and hands every changed or
/// deleted object to `triggers` controllers, each only after the cache
/// shows it, so a controller never reconciles from a cache older than its
/// trigger.
///
/// This replaces kube-runtime's `reflect_shared`/`subscribe`: in kube 4.2 a
/// `ReflectHandle` whose next object has already left the store returns
/// `Pending` without arranging to be woken, so the trigger stream stalls
/// until some other stream of the same controller happens to wake it (a
/// machine removed right after its last update was enough to stop the
/// machine controller hearing of any machine). It also never passes on
/// deletions, which the machine controller needs for deleted Nodes.
/// Channels are unbounded: a controller's queue takes triggers as they
/// come and deduplicates them, so they never pile up for long.
async fn shared_watch<K>(
    api: Api<K>,
    keys: KeysFn<K>,
    triggers: usize,
) -> Result<
    (
        Cache<K>,
        Vec<impl Stream<Item = Result<K, watcher::Error>> + Send + 'static>,
    ),
    WriterDropped,
>
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, mut writer) = cache::<K>(keys);
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..triggers)
        .map(|_| mpsc::unbounded_channel::<K>())
        .unzip();
    // Once every controller fed by this watch has stopped (its trigger
    // stream dropped), the watch stops too and closes its connection, so
    // an embedded API server can shut down without waiting on it.
    let all_closed = {
        let senders = senders.clone();
        async move {
            for tx in &senders {
                tx.closed().await;
            }
        }
    };
    let pump = watcher(api, watcher::Config::default())
        .default_backoff()
        // No controller reads field ownership, and it is the largest part
        // of a machine or Node once a few managers have written it; a
        // write of a cached object without it keeps the server's
        // (controller-runtime strips it the same way).
        .modify(|obj| obj.meta_mut().managed_fields = None)
        // The store and its indexes change together, before any trigger
        // goes out.
        .map_ok(move |ev| {
            writer.apply(&ev);
            ev
        })
        .touched_objects()
        .for_each(move |obj| {
            // Watch errors are retried by the backoff; nothing to trigger.
            if let Ok(obj) = obj {
                for tx in &senders {
                    let _ = tx.send(obj.clone());
                }
            }
            futures::future::ready(())
        });
    tokio::spawn(async move {
        tokio::select! {
            _ = pump => {}
            _ = all_closed => {}
        }
    });
    store.wait_until_ready().await?;
    let streams = receivers
        .into_iter()
        .map(|rx| {
            futures::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|obj| (Ok(obj), rx))
            })
        })
        .collect();
    Ok((store, streams))
}

/// The class and secret controllers, which keep what the machine
/// controller needs (spec §2.8); they run with it, so `None` streams (no
/// driver) run nothing.
#[allow(clippy::too_many_arguments)]
async fn class_controllers<C, M, S, SC>(
    ctx: Arc<Context>,
    classes: Option<(Store<MachineClass>, C)>,
    machine_events: Option<M>,
    secrets: Option<(Store<Secret>, S)>,
    secret_class_events: Option<SC>,
    workers: controller::Config,
    metrics: Arc<crate::metrics::Metrics>,
    shutdown: impl Future<Output = ()> + Send + Sync + Clone + 'static,
) where
    C: Stream<Item = Result<MachineClass, watcher::Error>> + Send + 'static,
    M: Stream<Item = Result<Machine, watcher::Error>> + Send + 'static,
    S: Stream<Item = Result<Secret, watcher::Error>> + Send + 'static,
    SC: Stream<Item = Result<MachineClass, watcher::Error>> + Send + 'static,
{
    use controllers::machineclass as mc;
    let (
        Some((class_store, class_events)),
        Some(machine_events),
        Some((secret_store, secret_events)),
        Some(secret_class_events),
    ) = (classes, machine_events, secrets, secret_class_events)
    else {
        return;
    };
    let class_ctrl = Controller::for_stream(class_events, class_store)
        .watches_stream(machine_events, |m: Machine| mc::class_of_machine(&m))
        .with_config(workers.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(
            metrics.timed(mc::NAME, controllers::forgetting(mc::NAME, mc::reconcile)),
            mc::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));
    let mapped = secret_store.clone();
    let secret_ctrl = Controller::for_stream(secret_events, secret_store)
        .watches_stream(secret_class_events, move |class: MachineClass| {
            mc::secrets_for_class(&class, &mapped)
        })
        .with_config(workers)
        .graceful_shutdown_on(shutdown)
        .run(
            metrics.timed(
                mc::SECRET_NAME,
                controllers::forgetting(mc::SECRET_NAME, mc::reconcile_secret),
            ),
            mc::secret_error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));
    futures::join!(class_ctrl, secret_ctrl);
    // Stopped cleanly: what the caches may not have shown yet is settled
    // from live reads, so no finalizer that nobody needs is left behind
    // for controllers that may not come back (a shoot's namespace is
    // deleted right after its controllers stop).
    let settled = tokio::time::timeout(SETTLE_TIMEOUT, mc::settle(&ctx, &ctx.config.namespace));
    match settled.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "settling class finalizers at shutdown failed"),
        Err(_) => tracing::warn!("settling class finalizers at shutdown timed out"),
    }
}

/// How long the class finalizers may take to settle when the controllers
/// stop.
const SETTLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs the machine set and machine deployment controllers against the
/// control cluster, and — given a driver — the machine controller against
/// the control and target clusters with its class and secret controllers,
/// until `shutdown` resolves. Without a driver no machine is ever created
/// or deleted for real; tests use that to stand in for the machine
/// controller. `target` is the target cluster's client, or `None` to run
/// without one (upstream's `--target-kubeconfig=none`): no Node is watched,
/// and machines are `Available` once their VM exists. Meanwhile the
/// heartbeat Lease of the namespace says it is served
/// ([`crate::serving`]).
pub async fn run(
    control: kube::Client,
    target: impl Into<Option<kube::Client>>,
    config: Config,
    driver: Option<Arc<dyn driver::Driver>>,
    shutdown: impl Future<Output = ()> + Send + Sync + Clone + 'static,
) -> Result<(), Error> {
    let target: Option<kube::Client> = target.into();
    let ns = config.namespace.clone();
    // The namespace is served from now on: the heartbeat starts before the
    // caches fill, so objects created meanwhile are not warned about. An
    // early return (a watch that cannot start) drops and so stops it.
    let mut heartbeat = AbortOnDrop(tokio::spawn(controllers::heartbeat::run(
        control.clone(),
        ns.clone(),
        crate::leader::default_identity(),
        shutdown.clone(),
    )));
    let metrics = config.metrics.clone();
    // Worker limits bound the load on the API servers and the provider
    // when thousands of objects change together.
    let workers = controller::Config::default().concurrency(config.concurrent_syncs);
    let machine_workers =
        controller::Config::default().concurrency(config.machine_concurrent_syncs);
    let driver = driver.map(|d| crate::metrics::MeteredDriver::wrap(d, metrics.clone()));
    let machines: Api<Machine> = Api::namespaced(control.clone(), &ns);
    let sets: Api<MachineSet> = Api::namespaced(control.clone(), &ns);
    let mds: Api<MachineDeployment> = Api::namespaced(control.clone(), &ns);

    // Machine events trigger the machine set controller, the safety
    // controller and, with a driver, the machine and class controllers.
    let machine_triggers = if driver.is_some() { 4 } else { 2 };
    let (machine_store, mut machine_events) =
        shared_watch(machines, machine_keys, machine_triggers)
            .await
            .map_err(Error::WatchMachinesFailed)?;
    let (set_store, mut set_events) = shared_watch(sets.clone(), set_keys, 1)
        .await
        .map_err(Error::WatchMachineSetsFailed)?;
    metrics.observe_machines(machine_store.store());
    let ms_machine_events = machine_events.remove(0);
    let safety_machine_events = machine_events.remove(0);
    let mc_machine_events = machine_events.pop();
    let class_machine_events = machine_events.pop();

    // With a driver, the machine controller's halves that keep classes and
    // their secrets: class events trigger the class controller, the
    // machines of the class and the secrets the class may release.
    let (class_store, mut class_events, secrets) = if driver.is_some() {
        let classes: Api<MachineClass> = Api::namespaced(control.clone(), &ns);
        let (store, events) = shared_watch(classes, no_keys, 3)
            .await
            .map_err(Error::WatchMachineClassesFailed)?;
        let secrets: Api<Secret> = Api::namespaced(control.clone(), &ns);
        let (secret_store, mut secret_events) = shared_watch(secrets, no_keys, 1)
            .await
            .map_err(Error::WatchSecretsFailed)?;
        (
            Some(store.store()),
            events,
            secret_events.pop().map(|e| (secret_store.store(), e)),
        )
    } else {
        (None, Vec::new(), None)
    };
    let mc_class_events = class_events.pop();
    let secret_class_events = class_events.pop();
    let class_class_events = class_events.pop();

    // The machine controller's node cache: every Node of the target
    // cluster, whose changes also trigger the machine they belong to.
    let (machine_deps, node_events) = match driver {
        Some(driver) => {
            let (node_store, node_events) = match &target {
                Some(target) => {
                    let (store, mut events) =
                        shared_watch(Api::<Node>::all(target.clone()), node_keys, 1)
                            .await
                            .map_err(Error::WatchNodesFailed)?;
                    (Some(store), events.pop())
                }
                None => (None, None),
            };
            let recorder = controllers::events::EventRecorder::new(
                control.clone(),
                Reporter {
                    controller: controllers::machine::REPORTER.into(),
                    instance: None,
                },
            );
            let mut deps = MachineDeps::new(driver, node_store, recorder);
            if let (Some(classes), Some((secrets, _))) = (&class_store, &secrets) {
                deps = deps.with_classes(classes.clone(), secrets.clone());
            }
            (Some(deps), node_events)
        }
        None => (None, None),
    };

    let ctx = Context::new(
        control.clone(),
        target,
        machine_store.clone(),
        set_store,
        config,
        machine_deps,
    );
    let class_workers = workers.clone();
    let ms_ctrl = Controller::new(sets, watcher::Config::default())
        .owns_stream(ms_machine_events)
        .with_config(workers.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(
            metrics.timed(
                controllers::machineset::NAME,
                controllers::forgetting(
                    controllers::machineset::NAME,
                    controllers::machineset::reconcile,
                ),
            ),
            controllers::machineset::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));
    let md_ctrl = Controller::new(mds, watcher::Config::default())
        .owns_stream(set_events.remove(0))
        .with_config(workers)
        .graceful_shutdown_on(shutdown.clone())
        .run(
            metrics.timed(
                controllers::machinedeployment::NAME,
                controllers::forgetting(
                    controllers::machinedeployment::NAME,
                    controllers::machinedeployment::reconcile,
                ),
            ),
            controllers::machinedeployment::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));
    let safety = controllers::safety::run(ctx.clone(), safety_machine_events, shutdown.clone());
    let class_ctrls = class_controllers(
        ctx.clone(),
        class_store.zip(class_class_events),
        class_machine_events,
        secrets,
        secret_class_events,
        class_workers,
        metrics.clone(),
        shutdown.clone(),
    );
    let mc_metrics = metrics.clone();
    let mc_ctrl = async move {
        let (Some(machine_events), Some(class_events)) = (mc_machine_events, mc_class_events)
        else {
            return;
        };
        let (node_ctx, class_ctx) = (ctx.clone(), ctx.clone());
        let mut mc = Controller::for_stream(machine_events, machine_store.store());
        if let Some(node_events) = node_events {
            mc = mc.watches_stream(node_events, move |node: Node| {
                controllers::machine::machines_for_node(&node_ctx, &node)
            });
        }
        mc.watches_stream(class_events, move |class| {
            controllers::machine::machines_for_class(&class_ctx, &class)
        })
        .with_config(machine_workers)
        .reconcile_all_on(ctx.safety.machine_requeues())
        .graceful_shutdown_on(shutdown)
        .run(
            mc_metrics.timed(
                controllers::machine::NAME,
                controllers::forgetting(
                    controllers::machine::NAME,
                    controllers::machine::reconcile,
                ),
            ),
            controllers::machine::error_policy,
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
        .await;
    };
    // Every cache is synced by now (`shared_watch` waits for it).
    metrics.set_ready(true);
    futures::join!(ms_ctrl, md_ctrl, mc_ctrl, safety, class_ctrls);
    metrics.set_ready(false);
    // It releases the Lease on the same shutdown signal.
    let _ = (&mut heartbeat.0).await;
    Ok(())
}

/// A task that is aborted when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
