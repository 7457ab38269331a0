//! What the scenario tests share: an embedded API server with the Worker,
//! Cluster, machine and cloud-profile CRDs on a random local port, and
//! polling.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

/// Starts an embedded API server with every CRD the controller reads and
/// returns a client of it (without kube's retries, so failures show).
pub async fn server() -> kube::Client {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let store: Arc<dyn store::Store> = Arc::new(store::MemoryStore::new());
    let server = apiserver::Server::start(store, apiserver::Config::default())
        .await
        .unwrap();
    let crds = worker::crds()
        .into_iter()
        .chain(api::crds())
        .chain(gardener::crds());
    for crd in crds {
        apiserver::crd::install(&server, &serde_json::to_value(&crd).unwrap())
            .await
            .unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { server.serve(listener, std::future::pending()).await });
    let mut config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// Creates a namespace.
pub async fn namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    namespaces
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

/// Controller settings at test speed.
pub fn fast_config() -> extension_local::Config {
    extension_local::Config {
        wait_interval: Duration::from_millis(150),
        error_retry: Duration::from_millis(300),
        ..extension_local::Config::default()
    }
}

/// Polls `f` every 50 ms until it holds; fails the test after `secs`.
pub async fn wait_for(what: &str, secs: u64, mut f: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
