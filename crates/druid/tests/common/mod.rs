//! What the druid scenario tests share: an embedded API server with the
//! druid CRDs, the controllers running against it with test-scale
//! periods, a stand-in for backup-restore's `/snapshot/full`, and the
//! hands of backup-restore and the StatefulSet controller (leases and
//! StatefulSet status written directly). No etcd process runs.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use druid::controllers::{FullSnapshotTrigger, Options};
use druid::{Etcd, EtcdStatus};
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde_json::{Value, json};

pub use testkit::{Cluster, eventually};

pub const NS: &str = "ns";

/// A full-snapshot trigger that records each call and answers as told.
#[derive(Default)]
pub struct FakeTrigger {
    pub calls: Mutex<Vec<String>>,
    pub fail: Mutex<bool>,
}

impl FullSnapshotTrigger for FakeTrigger {
    fn trigger(&self, url: String, _timeout: Duration) -> BoxFuture<'static, Result<(), String>> {
        self.calls.lock().push(url);
        let fail = *self.fail.lock();
        async move { if fail { Err("503".into()) } else { Ok(()) } }.boxed()
    }
}

pub struct Env {
    pub cluster: Cluster,
    pub client: kube::Client,
    pub trigger: Arc<FakeTrigger>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// A cluster with the druid controllers; `tweak` adjusts the options.
pub async fn start_with(tweak: impl FnOnce(&mut Options)) -> Env {
    let cluster = testkit::cluster(druid::crd::crds()).await;
    let client = cluster.client();
    testkit::namespace(&client, NS).await;
    let trigger = Arc::new(FakeTrigger::default());
    let mut opts = Options {
        status_sync_period: Duration::from_secs(2),
        snapshot_trigger: trigger.clone(),
        ..Options::default()
    };
    tweak(&mut opts);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let c = client.clone();
    tokio::spawn(async move {
        druid::controllers::run(c, opts, async move {
            let _ = stopped.await;
        })
        .await
        .expect("the druid controllers run");
        eprintln!("the druid controllers stopped");
    });
    Env {
        cluster,
        client,
        trigger,
        _stop: stop,
    }
}

pub async fn start() -> Env {
    start_with(|_| {}).await
}

/// The Etcd `e` of the spec's scenarios: `replicas` members, a Local store
/// unless `store` is false, and `extra` merged into its spec.
pub fn etcd_json(name: &str, replicas: i32, store: bool, extra: Value) -> Value {
    let mut spec = json!({
        "replicas": replicas,
        "labels": {"app": "etcd-statefulset"},
        "etcd": {},
        "backup": {},
    });
    if store {
        spec["backup"]["store"] =
            json!({"provider": "Local", "container": "default.bkp", "prefix": name});
    }
    merge(&mut spec, extra);
    json!({
        "apiVersion": "druid.gardener.cloud/v1alpha1",
        "kind": "Etcd",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    })
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

pub async fn create_etcd(client: &kube::Client, obj: Value) -> Etcd {
    let api: Api<Etcd> = Api::namespaced(client.clone(), NS);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(obj).unwrap(),
    )
    .await
    .unwrap()
}

pub async fn etcd(client: &kube::Client, name: &str) -> Etcd {
    Api::<Etcd>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .unwrap()
}

pub async fn status(client: &kube::Client, name: &str) -> EtcdStatus {
    etcd(client, name).await.status.unwrap_or_default()
}

/// Waits for the first successful reconcile of `name`.
pub async fn reconciled(client: &kube::Client, name: &str) -> EtcdStatus {
    testkit::eventually_or(
        "the first reconcile",
        30,
        async || {
            let s = status(client, name).await;
            let ok = s
                .last_operation
                .as_ref()
                .is_some_and(|o| o.type_ == "Reconcile" && o.state == "Succeeded");
            ok.then_some(s)
        },
        async || eprintln!("etcd: {:#?}", etcd(client, name).await),
    )
    .await
}

/// The (status, reason) of a condition.
pub fn condition(s: &EtcdStatus, type_: &str) -> Option<(String, String)> {
    s.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

pub async fn wait_condition(client: &kube::Client, name: &str, type_: &str, want: (&str, &str)) {
    eventually_cond(client, name, &format!("{type_} {want:?}"), |s| {
        condition(s, type_).is_some_and(|c| c.0 == want.0 && c.1 == want.1)
    })
    .await;
}

pub async fn eventually_cond(
    client: &kube::Client,
    name: &str,
    what: &str,
    check: impl Fn(&EtcdStatus) -> bool,
) -> EtcdStatus {
    testkit::eventually_or(
        what,
        30,
        async || {
            let s = status(client, name).await;
            check(&s).then_some(s)
        },
        async || eprintln!("status: {:#?}", status(client, name).await),
    )
    .await
}

pub fn micro(ago: SignedDuration) -> Value {
    serde_json::to_value(MicroTime(Timestamp::now() - ago)).unwrap()
}

/// What backup-restore does to a lease: holder and renew time.
pub async fn renew_lease(client: &kube::Client, name: &str, holder: &str, ago: SignedDuration) {
    let api: Api<Lease> = Api::namespaced(client.clone(), NS);
    eventually(&format!("lease {name} exists"), 30, async || {
        api.get_opt(name).await.ok().flatten().is_some()
    })
    .await;
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"holderIdentity": holder, "renewTime": micro(ago)}})),
    )
    .await
    .unwrap();
}

pub fn secs(s: i64) -> SignedDuration {
    SignedDuration::from_secs(s)
}
