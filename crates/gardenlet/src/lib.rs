//! A minimal gardenlet: for every Shoot in the seed it deploys the control
//! namespace `shoot--<project>--<name>`, the `Cluster`, the cloud-provider
//! Secret, per-pool bootstrap user data and the `Worker` (type `local`),
//! runs the shoot's own Kubernetes API and machine controllers in-process,
//! reports the Shoot's last operation, conditions and hibernation, and on
//! deletion takes all of it down again in order.
//!
//! * [`build`]: the objects deployed for a Shoot, as pure functions.
//! * [`plan`]: the status and deletion verdicts, as pure functions.
//! * [`shoot_cluster`]: each shoot's embedded API server (own store and
//!   PKI) and its `mcm` controllers with the local provider, MCM's
//!   control/target split made real: machines live in the seed, Nodes in
//!   the shoot.
//! * [`mcm_deployment`]: the Deployment `machine-controller-manager` in
//!   each control namespace, as upstream deploys it, and the switch it is:
//!   the shoot's in-process machine controllers run while its
//!   `spec.replicas` is ≥ 1 and stop at 0, so dependency-watchdog's prober
//!   can hold them down during a meltdown (the design and why it is not a
//!   pod running `trellis controller-manager` yet are in that module).
//! * `controller`: the executor, the only code that reads and writes the
//!   seed through kube-rs.
//!
//! Unlike other controller crates this one depends on `apiserver` and
//! `store`: a shoot's API server is part of what it runs. The reconciler
//! itself still talks to the seed only through kube-rs.

pub mod build;
mod controller;
pub mod etcd_main;
pub mod kube_apiserver;
pub mod mcm_deployment;
pub mod plan;
pub mod shoot_cluster;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use gardener::Shoot;
use kube::api::Api;
use kube::runtime::{Controller, controller as runtime, watcher};
use worker::Worker;

pub use build::technical_id;
pub use controller::ERROR_REQUEUE;
pub use shoot_cluster::{ShootCluster, ShootClusterConfig, ShootClusters, ShootStore};

/// Errors of one Shoot reconcile, named after the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading or writing {what} failed: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("the cloud profile is not usable: {0}")]
    ProfileUnavailable(String),
    #[error("building the worker failed: {0}")]
    BuildFailed(String),
    #[error("the shoot's API server: {0}")]
    ShootClusterFailed(String),
    #[error("encoding the {0} failed")]
    Encode(&'static str),
}

/// Settings of the gardenlet.
#[derive(Clone)]
pub struct Config {
    /// Where shoots keep their stores and PKI (`<data>/shoots/<technicalID>`);
    /// `None` keeps every shoot's store in memory.
    pub data_dir: Option<PathBuf>,
    /// The seed's name in the Cluster's Seed stub.
    pub seed_name: String,
    /// Template of every shoot's machine-controller settings (the
    /// namespace and metrics are set per shoot).
    pub machine_controllers: mcm::controllers::Config,
    /// The simulated kubelets' timing.
    pub simulator: nodesim::SimConfig,
    /// Shoots reconciled at once.
    pub concurrency: u16,
    /// Keep each shoot's objects in an etcd-druid `Etcd` `etcd-main` of its
    /// control namespace ([`etcd_main`]), which needs druid's controllers
    /// and a runtime for its pods; `None` gives each shoot a store of its
    /// own.
    pub etcd_main: Option<etcd_main::EtcdMainConfig>,
    /// Where each shoot's machine controllers run (in this process, or in
    /// the `machine-controller-manager` pod, which needs a runtime for the
    /// seed's pods).
    pub mcm_mode: mcm_deployment::Mode,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: None,
            seed_name: "local".to_string(),
            machine_controllers: mcm::controllers::Config::default(),
            simulator: nodesim::SimConfig::default(),
            concurrency: 5,
            etcd_main: None,
            mcm_mode: mcm_deployment::Mode::InProcess,
        }
    }
}

/// Runs the Shoot reconciler against the seed until `shutdown` resolves,
/// then stops every shoot's controllers and API server. Shoots that exist
/// at start get their API servers back on the same stores. Running cannot
/// fail: a failed reconcile (a shoot's API server that will not start
/// included) is retried by the controller's error policy.
pub async fn run(
    seed: kube::Client,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let clusters = ShootClusters::new(ShootClusterConfig {
        data_dir: config.data_dir.clone(),
        seed: seed.clone(),
        machine_controllers: config.machine_controllers.clone(),
        simulator: config.simulator.clone(),
        mcm_mode: config.mcm_mode,
    });
    let ctx = Arc::new(controller::Context {
        seed: seed.clone(),
        config: config.clone(),
        clusters: clusters.clone(),
        shoots: Default::default(),
    });
    let shutdown = shutdown.boxed().shared();
    let mapper_ctx = ctx.clone();
    Controller::new(Api::<Shoot>::all(seed.clone()), watcher::Config::default())
        .watches(
            Api::<Worker>::all(seed),
            watcher::Config::default(),
            move |w| controller::shoot_for_worker(&mapper_ctx, &w),
        )
        .with_config(runtime::Config::default().concurrency(config.concurrency.max(1)))
        .graceful_shutdown_on(shutdown)
        .run(controller::reconcile, controller::error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
    clusters.stop_all().await;
    tracing::info!("gardenlet stopped");
}
