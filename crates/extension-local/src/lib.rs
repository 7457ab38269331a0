//! The Worker controller for `type: local`: Gardener's generic worker
//! actuator with the local provider as its delegate, over kube-rs only.
//!
//! It watches `extensions.gardener.cloud/v1alpha1` Workers of type `local`
//! in every namespace (or one), and for each one
//!
//! 1. reads the [`worker::Cluster`] named like the namespace (the Shoot's
//!    facts, hibernation, and the cloud profile whose local `providerConfig`
//!    maps image versions to images, see [`profile`]);
//! 2. plans the machine classes, class secrets and machine deployments with
//!    [`worker::plan`], and applies them (server-side apply, classes and
//!    secrets before deployments; the autoscaler's replicas are kept by the
//!    planner's replica rules);
//! 3. writes `status.machineDeployments`, the provider status (the images in
//!    use), `lastOperation`, `lastError`, the `RollingUpdate` condition and,
//!    on success, `observedGeneration`, and polls while the rollout runs;
//! 4. once the wanted deployments are healthy ([`worker::health`]) deletes
//!    the deployments, classes and class secrets no longer wanted;
//! 5. on deletion, guarded by the finalizer [`decide::FINALIZER`], deletes
//!    the deployments, waits until no machine is left, deletes classes and
//!    class secrets, waits until they are gone, then lets the Worker go.
//!
//! Hibernated shoots get zero replicas (the planner's rule) and every
//! machine the `force-deletion: "True"` label, so MCM skips the drain.
//!
//! Decisions are pure functions in [`decide`] and [`profile`] (besides the
//! `worker` crate's); [`controller`] is the thin executor.

pub mod controller;
pub mod decide;
pub mod error;
pub mod profile;

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use api::{MachineClass, MachineDeployment};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, controller as runtime, watcher};
use kube::{Resource, ResourceExt};
use worker::{Cluster, UpdateBoundsDistribution, Worker};

pub use controller::Context;
pub use error::Error;
pub use profile::{CloudProfileConfig, ProfileImages};

/// Field manager of every object this controller applies.
pub const FIELD_MANAGER: &str = "extension-local";

/// Settings of the Worker controller.
#[derive(Clone, Debug)]
pub struct Config {
    /// Watch Workers of this namespace only; `None` watches all namespaces
    /// (the shoot control namespaces `shoot--<project>--<name>`).
    pub namespace: Option<String>,
    /// Workers reconciled at once.
    pub concurrency: u16,
    /// How often a rollout or deletion in progress is looked at again
    /// (upstream polls every 5 s).
    pub wait_interval: Duration,
    /// How long after a failed reconcile it is retried.
    pub error_retry: Duration,
    /// How often a finished Worker is reconciled again without events.
    pub resync: Duration,
    /// The field manager for server-side apply.
    pub field_manager: String,
    /// How maxSurge/maxUnavailable reach the per-zone deployments. Upstream
    /// provider-local passes the pool's values through to every zone.
    pub update_bounds: UpdateBoundsDistribution,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            namespace: None,
            concurrency: 10,
            wait_interval: Duration::from_secs(5),
            error_retry: Duration::from_secs(15),
            resync: Duration::from_secs(10 * 60),
            field_manager: FIELD_MANAGER.to_string(),
            update_bounds: UpdateBoundsDistribution::PassThrough,
        }
    }
}

fn api<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The Workers of `namespace`: whom a change to one of their objects
/// concerns.
fn workers_in(store: &Store<Worker>, namespace: Option<String>) -> Vec<ObjectRef<Worker>> {
    let Some(namespace) = namespace else {
        return Vec::new();
    };
    store
        .state()
        .iter()
        .filter(|w| w.namespace().as_deref() == Some(namespace.as_str()))
        .map(|w| ObjectRef::from_obj(w.as_ref()))
        .collect()
}

/// Runs the Worker controller until `shutdown` resolves; reconciles under
/// way are finished first. Running cannot fail: a failed reconcile is
/// retried by the controller's error policy.
pub async fn run(
    client: kube::Client,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let ns = config.namespace.clone();
    let workers: Api<Worker> = api(&client, ns.as_deref());
    let ctrl = Controller::new(workers, watcher::Config::default());
    let store = ctrl.store();
    let (s1, s2, s3, s4) = (store.clone(), store.clone(), store.clone(), store);
    let class_secrets = watcher::Config::default().labels(&format!(
        "{}={}",
        worker::labels::PURPOSE,
        worker::labels::PURPOSE_MACHINE_CLASS
    ));
    let ctx = Arc::new(Context {
        client: client.clone(),
        config: config.clone(),
    });
    ctrl.watches(
        api::<MachineDeployment>(&client, ns.as_deref()),
        watcher::Config::default(),
        move |md| workers_in(&s1, md.namespace()),
    )
    .watches(
        api::<MachineClass>(&client, ns.as_deref()),
        watcher::Config::default(),
        move |class| workers_in(&s2, class.namespace()),
    )
    .watches(
        api::<Secret>(&client, ns.as_deref()),
        class_secrets,
        move |secret| workers_in(&s3, secret.namespace()),
    )
    // A Cluster is named like the namespace of the Workers it describes.
    .watches(
        Api::<Cluster>::all(client),
        watcher::Config::default(),
        move |cluster| workers_in(&s4, Some(cluster.name_any())),
    )
    .with_config(runtime::Config::default().concurrency(config.concurrency))
    .graceful_shutdown_on(shutdown)
    .run(controller::reconcile, controller::error_policy, ctx)
    .for_each(|_| futures::future::ready(()))
    .await;
}
