//! Wiring of the prober and the weeder: each runs until its shutdown
//! token is cancelled, then stops everything it started. A binary adds
//! flags, leader election and the metrics listener around these.

use std::sync::Arc;

use kube::runtime::events::{Recorder, Reporter};
use tokio_util::sync::CancellationToken;

use crate::config::{ProberConfig, WeederConfig};
use crate::controllers::cluster::{self, ProberManager};
use crate::controllers::prober::Shared;
use crate::controllers::weeder::{self, WeederManager};
use crate::metrics::Metrics;

/// The controller name the prober's Events carry.
pub const PROBER_REPORTER: &str = "dependency-watchdog-prober";

/// The prober's manager for `seed`: create it, then [`run_prober`] it. The
/// manager is handed out so tests and `trellis up` can see which probers
/// run.
pub fn prober_manager(
    seed: kube::Client,
    config: ProberConfig,
    metrics: Arc<Metrics>,
    shutdown: &CancellationToken,
) -> Arc<ProberManager> {
    let recorder = Recorder::new(
        seed.clone(),
        Reporter {
            controller: PROBER_REPORTER.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        },
    );
    let shared = Shared {
        seed,
        metrics,
        recorder: Arc::new(recorder),
    };
    Arc::new(ProberManager::new(config, shared, shutdown.child_token()))
}

/// Runs the prober: one probe loop per shoot with workers, until
/// `shutdown`.
pub async fn run_prober(
    seed: kube::Client,
    manager: Arc<ProberManager>,
    shutdown: CancellationToken,
) {
    cluster::run(seed, manager, shutdown).await;
}

/// The weeder's manager for `client`.
pub fn weeder_manager(
    client: kube::Client,
    config: WeederConfig,
    metrics: Arc<Metrics>,
    shutdown: &CancellationToken,
) -> Arc<WeederManager> {
    Arc::new(WeederManager::new(
        client,
        config,
        metrics,
        shutdown.child_token(),
    ))
}

/// Runs the weeder until `shutdown`.
pub async fn run_weeder(
    client: kube::Client,
    manager: Arc<WeederManager>,
    shutdown: CancellationToken,
) {
    weeder::run(client, manager, shutdown).await;
}
