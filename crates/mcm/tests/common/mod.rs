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
/// With `TRELLIS_MCM_DRIVER=grpc` the driver is served out of process's
/// way: the controllers call a [`driver_grpc::Router`] on loopback, and the
/// driver answers through the provider SDK, as `trellis provider local`
/// does (test.sh runs these scenarios in both modes).
pub fn run_controllers(
    client: &kube::Client,
    config: mcm::controllers::Config,
    driver: Option<Arc<dyn driver::Driver>>,
) {
    let c = client.clone();
    tokio::spawn(async move {
        let driver = match driver {
            Some(d) if over_grpc() => Some(through_grpc(d).await),
            d => d,
        };
        mcm::run::run(c.clone(), c, config, driver, std::future::pending::<()>()).await
    });
}

/// Whether the scenarios run with the driver behind gRPC.
pub fn over_grpc() -> bool {
    std::env::var("TRELLIS_MCM_DRIVER").is_ok_and(|v| v == "grpc")
}

/// A router on loopback that `driver` has registered with, for the
/// `local` provider, through the provider SDK.
async fn through_grpc(driver: Arc<dyn driver::Driver>) -> Arc<dyn driver::Driver> {
    use driver_grpc::provider::{Options, Registration};
    let router = driver_grpc::Router::new(driver_grpc::RouterConfig::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding the driver endpoint");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(driver_grpc::serve(
        router.clone(),
        listener,
        None,
        std::future::pending(),
    ));
    tokio::spawn(driver_grpc::provider::serve(
        driver,
        Registration::new([provider_local::PROVIDER_NAME]),
        Options::new(addr.to_string()),
        std::future::pending(),
    ));
    assert!(
        router
            .wait_for(
                provider_local::PROVIDER_NAME,
                std::time::Duration::from_secs(10)
            )
            .await,
        "the provider registered over gRPC"
    );
    Arc::new(router)
}
