//! Test harness: the embedded API server on an ephemeral loopback port over
//! the in-memory store (one server as both control and target cluster), the
//! provider's fixtures, and a polling helper.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::MachineClass;
use driver::conformance::ClassFixture;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodesim::SimConfig;
use serde_json::Value;

pub struct TestServer {
    pub server: Arc<apiserver::Server>,
    pub client: kube::Client,
}

pub async fn start() -> TestServer {
    let store: Arc<dyn store::Store> = Arc::new(store::MemoryStore::new());
    let server = apiserver::Server::start(store, apiserver::Config::default())
        .await
        .expect("server starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let srv = server.clone();
    tokio::spawn(async move { srv.serve(listener, std::future::pending()).await });
    let mut config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    TestServer { server, client }
}

/// Simulator timing compressed to test scale.
pub fn fast() -> SimConfig {
    SimConfig {
        lease_renew_interval: Duration::from_millis(300),
        node_monitor_grace_period: Duration::from_secs(1),
        tick: Duration::from_millis(50),
        min_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        ..SimConfig::default()
    }
}

/// A local class in namespace `default` with the given provider spec, and
/// its secret.
pub fn class(name: &str, provider_spec: Value) -> ClassFixture {
    let mut machine_class = MachineClass::new(name, "local", provider_spec);
    machine_class.metadata.namespace = Some("default".into());
    ClassFixture {
        machine_class,
        secret: Secret {
            metadata: ObjectMeta {
                name: Some(format!("{name}-secret")),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            string_data: Some(BTreeMap::from([(
                "userData".to_string(),
                "#cloud-config".to_string(),
            )])),
            ..Secret::default()
        },
    }
}

/// Polls `f` until it returns `Some`, for up to `secs` seconds.
pub async fn eventually<T, F, Fut>(what: &str, secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not reached within {secs}s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
