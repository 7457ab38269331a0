//! Wiring: shared caches and the controllers, run until shutdown.

use std::future::Future;

use api::{Machine, MachineDeployment, MachineSet};
use futures::StreamExt;
use kube::Api;
use kube::runtime::reflector::{self, ReflectHandle};
use kube::runtime::{Controller, WatchStreamExt, watcher};

use crate::controllers::{self, Config, Context};

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

    let (machine_store, machine_writer) = reflector::store::<Machine>();
    let (set_store, set_writer) = reflector::store::<MachineSet>();
    let machine_cache = watcher(machines.clone(), watcher::Config::default())
        .default_backoff()
        .reflect(machine_writer)
        .for_each(|_| futures::future::ready(()));
    let set_cache = watcher(sets.clone(), watcher::Config::default())
        .default_backoff()
        .reflect(set_writer)
        .for_each(|_| futures::future::ready(()));
    tokio::spawn(machine_cache);
    tokio::spawn(set_cache);
    machine_store.wait_until_ready().await?;
    set_store.wait_until_ready().await?;
    let _: Option<ReflectHandle<Machine>> = None;

    let ctx = Context::new(control, target, machine_store, set_store, config);
    let ms_ctrl = Controller::new(sets.clone(), watcher::Config::default())
        .owns(machines.clone(), watcher::Config::default())
        .graceful_shutdown_on(shutdown.clone())
        .run(
            controllers::machineset::reconcile,
            controllers::machineset::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));
    let md_ctrl = Controller::new(mds, watcher::Config::default())
        .owns(sets, watcher::Config::default())
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
