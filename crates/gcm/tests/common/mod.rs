//! What the scenario tests share beyond the test kit: an embedded API
//! server with Gardener's CRDs and the project namespace, the controllers
//! running against it, and object builders.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::FutureExt;
use futures::future::Shared;
use gardener::{CloudProfile, NamespacedCloudProfile, Shoot};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use tokio::sync::oneshot;

pub use testkit::{create, eventually};

/// The namespace (project) the tests work in.
pub const NS: &str = "garden-dev";

/// Starts an embedded API server with the Gardener CRDs installed and
/// the namespace [`NS`], and returns a client of it (without kube's
/// retries, so failures show).
pub async fn server() -> kube::Client {
    let client = testkit::cluster(gardener::crds()).await.client();
    testkit::namespace(&client, NS).await;
    client
}

/// The running controllers; dropping this does not stop them, `stop` does.
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops the controllers and waits for them to finish.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), &mut self.done)
            .await
            .expect("controllers stop")
            .expect("controller task");
    }
}

/// Starts both controllers with `config`.
pub fn start(client: &kube::Client, config: gcm::Config) -> Running {
    let (tx, rx) = oneshot::channel::<()>();
    let shutdown: Shared<_> = rx.map(|_| ()).shared();
    let done = tokio::spawn(gcm::run(client.clone(), config, shutdown));
    Running {
        stop: Some(tx),
        done,
    }
}

/// A machine image version entry.
pub fn version(v: &str) -> Value {
    json!({"version": v})
}

/// A CloudProfile `name` of type local with Kubernetes 1.31.x, one machine
/// type `m1` and the image `gardenlinux` with `versions`.
pub fn cloud_profile(name: &str, versions: Vec<Value>, strategy: &str) -> Value {
    json!({
        "apiVersion": gardener::GROUP_VERSION,
        "kind": "CloudProfile",
        "metadata": {"name": name},
        "spec": {
            "type": "local",
            "kubernetes": {"versions": [{"version": "1.31.2"}, {"version": "1.31.1"}]},
            "machineImages": [{
                "name": "gardenlinux",
                "updateStrategy": strategy,
                "versions": versions,
            }],
            "machineTypes": [{"name": "m1", "cpu": "2", "gpu": "0", "memory": "4Gi", "usable": true}],
            "regions": [{"name": "local", "zones": [{"name": "z1"}]}],
        }
    })
}

/// An NCP `name` in [`NS`] with parent `parent` (`{kind, name}`) adding
/// `versions` to `gardenlinux`.
pub fn ncp(name: &str, parent: Value, versions: Vec<Value>) -> Value {
    let mut spec = json!({"parent": parent});
    if !versions.is_empty() {
        spec["machineImages"] = json!([{"name": "gardenlinux", "versions": versions}]);
    }
    json!({
        "apiVersion": gardener::GROUP_VERSION,
        "kind": "NamespacedCloudProfile",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    })
}

/// A Shoot `name` in [`NS`] using `profile` (`{kind, name}`) with one pool
/// on `gardenlinux` `image_version` and an optional time window.
pub fn shoot(
    name: &str,
    profile: Value,
    image_version: &str,
    window: Option<(String, String)>,
) -> Value {
    let mut s = json!({
        "apiVersion": gardener::GROUP_VERSION,
        "kind": "Shoot",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "cloudProfile": profile,
            "kubernetes": {"version": "1.31.2"},
            "region": "local",
            "provider": {
                "type": "local",
                "workers": [{
                    "name": "pool",
                    "machine": {"type": "m1", "image": {"name": "gardenlinux", "version": image_version}},
                    "minimum": 1,
                    "maximum": 2,
                    "zones": ["z1"],
                }],
            },
        }
    });
    if let Some((begin, end)) = window {
        s["spec"]["maintenance"] = json!({"timeWindow": {"begin": begin, "end": end}});
    }
    s
}

/// A window in UTC from `now + from_h` to `now + to_h` hours, as
/// `HHMMSS+0000`.
pub fn window_around(now: DateTime<Utc>, from_h: i64, to_h: i64) -> (String, String) {
    let fmt = |t: DateTime<Utc>| t.format("%H%M%S+0000").to_string();
    (
        fmt(now + chrono::Duration::hours(from_h)),
        fmt(now + chrono::Duration::hours(to_h)),
    )
}

pub fn cloud_profiles(client: &kube::Client) -> Api<CloudProfile> {
    Api::all(client.clone())
}

pub fn ncps(client: &kube::Client) -> Api<NamespacedCloudProfile> {
    Api::namespaced(client.clone(), NS)
}

pub fn shoots(client: &kube::Client) -> Api<Shoot> {
    Api::namespaced(client.clone(), NS)
}

/// Events in [`NS`] about the object `name`, as `(type, reason, note)`.
pub async fn events_of(client: &kube::Client, name: &str) -> Vec<(String, String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

/// The versions of `gardenlinux` in a rendered NCP status.
pub fn rendered_versions(n: &NamespacedCloudProfile) -> Vec<String> {
    n.status
        .as_ref()
        .and_then(|s| s.cloud_profile_spec.machine_image("gardenlinux"))
        .map(|i| i.versions.iter().map(|v| v.version().to_string()).collect())
        .unwrap_or_default()
}
