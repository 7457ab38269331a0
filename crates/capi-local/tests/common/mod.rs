//! What the Cluster API stack tests share: an embedded API server with the
//! core and both providers' CRDs, the three controller sets running against
//! it (the server is both management and workload cluster), objects from
//! YAML, and polling.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use nodesim::SimConfig;
use serde_json::{Value, json};

pub struct Stack {
    pub client: kube::Client,
    pub url: String,
    pub provider: provider_local::LocalProvider,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.provider.simulator().shutdown();
    }
}

/// Simulator timing compressed to test scale.
pub fn fast_sim() -> SimConfig {
    SimConfig {
        lease_renew_interval: Duration::from_millis(300),
        node_monitor_grace_period: Duration::from_secs(1),
        tick: Duration::from_millis(50),
        min_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        ..SimConfig::default()
    }
}

/// Starts a server, installs the CRDs and runs the core controllers and
/// both providers against it.
pub async fn stack() -> Stack {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let store: Arc<dyn store::Store> = Arc::new(store::MemoryStore::new());
    let server = apiserver::Server::start(store, apiserver::Config::default())
        .await
        .unwrap();
    for crd in capi::crds()
        .into_iter()
        .chain(capi_bootstrap::crds())
        .chain(capi_local::crds())
    {
        apiserver::crd::install(&server, &serde_json::to_value(&crd).unwrap())
            .await
            .unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { server.serve(listener, std::future::pending()).await });
    let url = format!("http://{addr}");
    let mut config = kube::Config::new(url.parse().unwrap());
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in ["kube-system", "kube-node-lease"] {
        let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        let _ = namespaces.create(&PostParams::default(), &obj).await;
    }
    let provider = provider_local::LocalProvider::with_config(
        client.clone(),
        client.clone(),
        "capi-test",
        fast_sim(),
    )
    .await
    .unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let shutdown: Shared<BoxFuture<'static, ()>> = rx.map(|_| ()).boxed().shared();
    let core_config = capi::controllers::Config {
        backoff_max: Duration::from_secs(2),
        ..Default::default()
    };
    tokio::spawn(capi::run::run(
        client.clone(),
        Some(client.clone()),
        core_config,
        shutdown.clone(),
    ));
    tokio::spawn(capi_bootstrap::run(
        client.clone(),
        client.clone(),
        capi_bootstrap::Config::default(),
        shutdown.clone(),
    ));
    tokio::spawn(capi_local::run(
        client.clone(),
        client.clone(),
        Arc::new(provider.clone()),
        capi_local::Config {
            endpoint: capi_local::controller::endpoint_of(&url),
            ..Default::default()
        },
        shutdown,
    ));
    Stack {
        client,
        url,
        provider,
        stop: Some(stop),
    }
}

/// Creates every document of a YAML stream (namespace `default`).
pub async fn apply(client: &kube::Client, yaml: &str) {
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let mut v: Value = serde::Deserialize::deserialize(doc).unwrap();
        if v.is_null() {
            continue;
        }
        // What trellis's admission does to the core kinds.
        if v["apiVersion"] == capi::API_VERSION {
            let kind = v["kind"].as_str().unwrap_or_default().to_string();
            capi::webhooks::default_object(&kind, &mut v, None);
        }
        let obj: DynamicObject = serde_json::from_value(v.clone()).unwrap();
        let types = obj.types.clone().unwrap();
        let (group, version) = types
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &types.api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, &types.kind);
        let (ar, _) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
        api.create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("creating {}: {e}", types.kind));
    }
}

/// The API of a kind by group, version and kind.
pub async fn dynamic(client: &kube::Client, api_version: &str, kind: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (ar, _): (ApiResource, _) = kube::discovery::pinned_kind(
        client,
        &kube::api::GroupVersionKind::gvk(group, version, kind),
    )
    .await
    .unwrap();
    Api::namespaced_with(client.clone(), "default", &ar)
}

/// Polls `f` every 100 ms until it holds; fails the test after `secs`.
pub async fn wait_for(what: &str, secs: u64, mut f: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
