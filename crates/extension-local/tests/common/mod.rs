//! What the scenario tests share beyond the test kit: an embedded API
//! server with every CRD the controller reads, and the controller's
//! settings at test speed.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::time::Duration;

pub use testkit::{eventually, namespace};

/// Starts an embedded API server with the Worker, Cluster, machine and
/// cloud-profile CRDs and returns a client of it (without kube's retries,
/// so failures show).
pub async fn server() -> kube::Client {
    let crds = [worker::crds(), api::crds(), gardener::crds()].concat();
    testkit::cluster(crds).await.client()
}

/// Controller settings at test speed.
pub fn fast_config() -> extension_local::Config {
    extension_local::Config {
        wait_interval: Duration::from_millis(150),
        error_retry: Duration::from_millis(300),
        ..extension_local::Config::default()
    }
}
