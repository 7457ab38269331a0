//! Creating namespaces and objects from JSON, the way tests state them.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// Creates the namespace `name`; one that exists already is fine (the API
/// server creates `default`, `kube-system`, `kube-public` and
/// `kube-node-lease` itself).
pub async fn namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.is_already_exists() => {}
        Err(e) => panic!("creating namespace {name}: {e}"),
    }
}

/// Creates an object given as JSON and returns what the server stored.
pub async fn create<K>(api: &Api<K>, obj: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let typed: K = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &typed).await.unwrap()
}
