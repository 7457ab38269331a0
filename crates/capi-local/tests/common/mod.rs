//! What the Cluster API stack tests share: an embedded API server with the
//! core and both providers' CRDs, the three controller sets running against
//! it (the server is both management and workload cluster), objects from
//! YAML, and polling (testkit's).

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::Value;
pub use testkit::eventually;

pub struct Stack {
    pub cluster: testkit::Cluster,
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

/// Starts a server, installs the CRDs and runs the core controllers and
/// both providers against it.
pub async fn stack() -> Stack {
    let cluster = testkit::cluster(
        capi::crds()
            .into_iter()
            .chain(capi_bootstrap::crds())
            .chain(capi_local::crds()),
    )
    .await;
    let client = cluster.client();
    let url = cluster.url().to_string();
    for ns in ["kube-system", "kube-node-lease"] {
        testkit::namespace(&client, ns).await;
    }
    let provider = provider_local::LocalProvider::with_config(
        client.clone(),
        client.clone(),
        "capi-test",
        testkit::sim::fast(),
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
        cluster,
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
