//! Wiring: shared caches and the controllers, run until shutdown.

use std::future::Future;

use api::{Machine, MachineDeployment, MachineSet};
use futures::StreamExt;
use kube::Api;
use kube::runtime::reflector::{self, ReflectHandle};
use kube::runtime::{Controller, WatchStreamExt, watcher};

use crate::controllers::{self, Config, Context};

/// Events a slow controller may fall behind its cache before the watch waits.
const SUBSCRIBER_BUFFER: usize = 4096;

/// Runs the machine set and machine deployment controllers against the
/// control cluster until `shutdown` resolves.
pub async fn run(
    control: kube::Client,
    target: kube::Client,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + Sync + Clone + 'static,
) -> anyhow::Result<()> {
    let ns = config.namespace.clone();
    let machines: Api<Machine> = Api::namespaced(control.clone(), &ns);
    let sets: Api<MachineSet> = Api::namespaced(control.clone(), &ns);
    let mds: Api<MachineDeployment> = Api::namespaced(control.clone(), &ns);

    // One watch per kind fills a shared cache and, after each update, fans
    // the object out to the controllers that own it: a controller is never
    // triggered by a change its cache does not show yet.
    let (machine_store, machine_writer) = reflector::store_shared::<Machine>(SUBSCRIBER_BUFFER);
    let (set_store, set_writer) = reflector::store_shared::<MachineSet>(SUBSCRIBER_BUFFER);
    let machine_events: ReflectHandle<Machine> = machine_writer
        .subscribe()
        .expect("a shared store has subscribers");
    let set_events: ReflectHandle<MachineSet> = set_writer
        .subscribe()
        .expect("a shared store has subscribers");
    let machine_cache = watcher(machines.clone(), watcher::Config::default())
        .default_backoff()
        .reflect_shared(machine_writer)
        .for_each(|_| futures::future::ready(()));
    let set_cache = watcher(sets.clone(), watcher::Config::default())
        .default_backoff()
        .reflect_shared(set_writer)
        .for_each(|_| futures::future::ready(()));
    tokio::spawn(machine_cache);
    tokio::spawn(set_cache);
    machine_store.wait_until_ready().await?;
    set_store.wait_until_ready().await?;

    let ctx = Context::new(control, target, machine_store, set_store, config);
    let ms_ctrl = Controller::new(sets.clone(), watcher::Config::default())
        .owns_shared_stream(machine_events)
        .graceful_shutdown_on(shutdown.clone())
        .run(
            controllers::machineset::reconcile,
            controllers::machineset::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));
    let md_ctrl = Controller::new(mds, watcher::Config::default())
        .owns_shared_stream(set_events)
        .graceful_shutdown_on(shutdown)
        .run(
            controllers::machinedeployment::reconcile,
            controllers::machinedeployment::error_policy,
            ctx,
        )
        .for_each(|_| futures::future::ready(()));
    futures::join!(ms_ctrl, md_ctrl);
    Ok(())
}
