//! What the scenario tests share beyond the test kit: an embedded API
//! server with the machine CRDs, the local provider over it with the kit's
//! simulator timing, and the controllers running against it.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::sync::Arc;

use provider_local::LocalProvider;

pub use testkit::sim::fast as fast_sim;

/// Starts an embedded API server with the machine CRDs installed and
/// returns a client of it (without kube's retries, so failures show).
pub async fn server() -> kube::Client {
    testkit::cluster(api::crds()).await.client()
}

/// Creates the namespaces simulated kubelets and bootstrap tokens live in
/// (the server makes them itself; a test states what it relies on).
pub async fn system_namespaces(client: &kube::Client) {
    for ns in ["kube-system", "kube-node-lease"] {
        testkit::namespace(client, ns).await;
    }
}

/// The local provider with `client` as both control and target cluster.
pub async fn provider(client: &kube::Client) -> LocalProvider {
    LocalProvider::with_config(client.clone(), client.clone(), "trellis", fast_sim())
        .await
        .unwrap()
}

/// Runs every controller against `client` (control and target) with
/// `config` until the test ends; the machine controller only with a driver.
pub fn run_controllers(
    client: &kube::Client,
    config: mcm::controllers::Config,
    driver: Option<Arc<dyn driver::Driver>>,
) {
    let c = client.clone();
    tokio::spawn(async move {
        mcm::run::run(c.clone(), c, config, driver, std::future::pending::<()>()).await
    });
}
