//! The core controllers: thin executors that observe through caches (and
//! the dynamic watches of provider kinds), call the pure planners, and
//! apply the plans through kube-rs. They never depend on the API server
//! crate, so they run unchanged against any Kubernetes API.

pub mod cluster;
pub mod dynamic;
pub mod informer;
pub mod machine;
pub mod machinedeployment;
pub mod machinehealthcheck;
pub mod machineset;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Resource;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder};
use kube::runtime::reflector::Store;
use mcm::backoff::ItemBackoff;
use mcm::machine::EvictRecord;
use parking_lot::Mutex;

use crate::types::{Cluster, Machine, MachineDeployment, MachineHealthCheck, MachineSet};
use dynamic::Dynamic;
use informer::Triggers;

/// Settings of the core controllers.
#[derive(Clone, Debug)]
pub struct Config {
    /// Objects of one kind reconciled at once.
    pub concurrency: u16,
    /// The first retry delay after a failed reconcile; doubles per failure.
    pub backoff_base: Duration,
    /// The longest retry delay.
    pub backoff_max: Duration,
    /// How often a healthy object is looked at again anyway (a safety net
    /// under the watches; upstream's sync period is 10 minutes).
    pub resync: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            concurrency: 50,
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(60),
            resync: Duration::from_secs(10 * 60),
        }
    }
}

/// The controllers' one error type; each variant names the step that
/// failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what} failed: {source}")]
    Api {
        what: String,
        // Boxed: kube's error is large, and errors travel through every
        // reconcile's `Result`.
        #[source]
        source: Box<kube::Error>,
    },
    /// The plan hit problems; the status says so, and the reconcile is
    /// retried with backoff.
    #[error("{0}")]
    Plan(String),
    /// A cache the controllers need never filled (from [`run`](crate::run::run)).
    #[error(transparent)]
    WatchFailed(#[from] informer::WatchFailed),
}

impl Error {
    pub fn api(what: impl Into<String>, source: kube::Error) -> Error {
        Error::Api {
            what: what.into(),
            source: Box::new(source),
        }
    }
}

/// Whether an API error is a 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether an API error is a 409 (a stale write).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// What every core controller shares: clients, caches, the dynamic
/// watches, retry backoff, the drain's eviction history and the event
/// recorder.
pub struct Context {
    /// The management cluster: Cluster API objects and provider objects.
    pub client: kube::Client,
    /// The workload cluster (Nodes, Pods); `None` runs without one.
    pub target: Option<kube::Client>,
    pub dynamic: Dynamic,
    pub clusters: Store<Cluster>,
    pub machines: Store<Machine>,
    pub sets: Store<MachineSet>,
    pub deployments: Store<MachineDeployment>,
    pub checks: Store<MachineHealthCheck>,
    pub nodes: Option<Store<Node>>,
    pub machine_triggers: Triggers<Machine>,
    pub set_triggers: Triggers<MachineSet>,
    /// Eviction history per Machine UID, then pod UID; in memory (after a
    /// restart a drain starts counting again, which only slows it).
    pub evictions: Mutex<HashMap<String, HashMap<String, EvictRecord>>>,
    backoff: Mutex<ItemBackoff<String>>,
    pub recorder: Recorder,
    pub config: Config,
}

impl Context {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: kube::Client,
        target: Option<kube::Client>,
        dynamic: Dynamic,
        caches: Caches,
        machine_triggers: Triggers<Machine>,
        set_triggers: Triggers<MachineSet>,
        recorder: Recorder,
        config: Config,
    ) -> Context {
        Context {
            client,
            target,
            dynamic,
            clusters: caches.clusters,
            machines: caches.machines,
            sets: caches.sets,
            deployments: caches.deployments,
            checks: caches.checks,
            nodes: caches.nodes,
            machine_triggers,
            set_triggers,
            evictions: Mutex::new(HashMap::new()),
            backoff: Mutex::new(ItemBackoff::new(config.backoff_base, config.backoff_max)),
            recorder,
            config,
        }
    }

    /// A Cluster from the cache.
    pub fn cluster(&self, namespace: &str, name: &str) -> Option<Arc<Cluster>> {
        self.clusters
            .find(|c| c.name() == name && c.namespace() == namespace)
    }

    /// Records an event about `obj`, in the background: a slow event
    /// sink must not hold up reconciles.
    pub fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        warning: bool,
        reason: &str,
        note: String,
    ) {
        let reference = obj.object_ref(&());
        let recorder = self.recorder.clone();
        let ev = KubeEvent {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(note),
            action: reason.to_string(),
            secondary: None,
        };
        tokio::spawn(async move {
            let publish = recorder.publish(&ev, &reference);
            if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(5), publish).await {
                tracing::debug!(error = %e, "publishing an event failed");
            }
        });
    }

    /// After a failure: retry with per-object exponential backoff.
    pub fn error_action(&self, key: String) -> Action {
        Action::requeue(self.backoff.lock().when(&key, Instant::now()))
    }

    /// After a success: forget the object's failures.
    pub fn succeeded(&self, key: &str) {
        self.backoff.lock().forget(&key.to_string());
    }
}

/// The caches the controllers read.
pub struct Caches {
    pub clusters: Store<Cluster>,
    pub machines: Store<Machine>,
    pub sets: Store<MachineSet>,
    pub deployments: Store<MachineDeployment>,
    pub checks: Store<MachineHealthCheck>,
    pub nodes: Option<Store<Node>>,
}

/// `kind/namespace/name`, the backoff key of an object.
pub fn key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default()
    )
}

/// The requeue of a successful reconcile: the plan's hint, else the
/// resync period.
pub fn requeue(hint: Option<Duration>, config: &Config) -> Action {
    Action::requeue(hint.unwrap_or(config.resync).min(config.resync))
}
