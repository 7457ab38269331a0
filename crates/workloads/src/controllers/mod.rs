//! The executors: thin kube-rs reconcilers that load what a planner needs
//! from the shared caches, call it, and apply its plan through the API.
//!
//! Each reconciler is idempotent and safe to stop at any line: everything
//! it decides is recomputed from the API's state on the next pass, writes
//! are guarded by resource versions or deterministic names, and a write
//! whose result the cache has not shown yet is waited for
//! ([`crate::expectations`]) instead of repeated.

pub mod cronjob;
pub mod deployment;
pub mod endpointslice;
pub mod job;
pub mod replicaset;
pub mod statefulset;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::expectations::Expectations;
use crate::meta::{self, Claim, Owner};

/// Why a pass failed, named after the step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {what} failed: {source}")]
    ReadFailed {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("adopting or releasing {what} failed: {source}")]
    ClaimFailed {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("creating {what} failed: {source}")]
    CreateFailed {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("updating {what} failed: {source}")]
    UpdateFailed {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting {what} failed: {source}")]
    DeleteFailed {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing the status of {what} failed: {source}")]
    StatusFailed {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("watching {kind} failed before the first list")]
    WatchFailed {
        kind: String,
        #[source]
        source: kube::runtime::reflector::store::WriterDropped,
    },
}

/// How the controllers run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Reconciles in flight per controller.
    pub concurrency: u16,
    /// The first wait before a failed Job pod is replaced (upstream's
    /// `DefaultJobPodFailureBackOff`, 10 s); it doubles per failure.
    pub job_backoff: Duration,
    /// The longest such wait (upstream's `MaxJobPodFailureBackOff`).
    pub job_backoff_max: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            concurrency: 8,
            job_backoff: Duration::from_secs(10),
            job_backoff_max: Duration::from_secs(600),
        }
    }
}

/// What every reconciler shares: the client, the caches, the expectations
/// and event recorders per controller, and the configuration.
pub struct Context {
    pub client: kube::Client,
    pub config: Config,
    pub pods: Store<Pod>,
    pub replica_sets: Store<k8s_openapi::api::apps::v1::ReplicaSet>,
    pub revisions: Store<k8s_openapi::api::apps::v1::ControllerRevision>,
    pub claims: Store<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    pub jobs: Store<k8s_openapi::api::batch::v1::Job>,
    pub slices: Store<k8s_openapi::api::discovery::v1::EndpointSlice>,
    pub endpoints: Store<k8s_openapi::api::core::v1::Endpoints>,
    /// Pods expected by ReplicaSets, StatefulSets and Jobs (keyed by owner
    /// UID, pods by `namespace/name`).
    pub pod_expectations: Expectations,
    /// EndpointSlices expected by Services.
    pub slice_expectations: Expectations,
    recorders: Vec<(&'static str, Recorder)>,
}

/// The event sources, as kube-controller-manager names them.
pub const REPORTERS: &[&str] = &[
    deployment::REPORTER,
    replicaset::REPORTER,
    statefulset::REPORTER,
    job::REPORTER,
    cronjob::REPORTER,
    endpointslice::REPORTER,
];

impl Context {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: kube::Client,
        config: Config,
        pods: Store<Pod>,
        replica_sets: Store<k8s_openapi::api::apps::v1::ReplicaSet>,
        revisions: Store<k8s_openapi::api::apps::v1::ControllerRevision>,
        claims: Store<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
        jobs: Store<k8s_openapi::api::batch::v1::Job>,
        slices: Store<k8s_openapi::api::discovery::v1::EndpointSlice>,
        endpoints: Store<k8s_openapi::api::core::v1::Endpoints>,
    ) -> Context {
        let recorders = REPORTERS
            .iter()
            .map(|r| {
                (
                    *r,
                    Recorder::new(
                        client.clone(),
                        Reporter {
                            controller: r.to_string(),
                            instance: None,
                        },
                    ),
                )
            })
            .collect();
        Context {
            client,
            config,
            pods,
            replica_sets,
            revisions,
            claims,
            jobs,
            slices,
            endpoints,
            pod_expectations: Expectations::default(),
            slice_expectations: Expectations::default(),
            recorders,
        }
    }

    /// Publishes an event about `obj` from `reporter` in the background: an
    /// event that cannot be written never holds up or fails a pass.
    pub fn event<K>(&self, reporter: &str, obj: &K, warning: bool, reason: &str, note: String)
    where
        K: Resource<DynamicType = ()>,
    {
        let Some((_, recorder)) = self.recorders.iter().find(|(r, _)| *r == reporter) else {
            return;
        };
        let ev = Event {
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
        let reference = obj.object_ref(&());
        let recorder = recorder.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(EVENT_TIMEOUT, recorder.publish(&ev, &reference)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, reason = %ev.reason, "publishing an event failed")
                }
                Err(_) => tracing::debug!(reason = %ev.reason, "publishing an event timed out"),
            }
        });
    }

    /// The pods of `namespace` in the cache.
    pub fn pods_in(&self, namespace: &str) -> Vec<Arc<Pod>> {
        self.pods
            .state()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
            .collect()
    }
}

/// How long publishing one event may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

/// How soon a pass waiting for its cache looks again. The watch that fills
/// the cache also triggers the pass, so this is only a safety net.
pub const CACHE_WAIT: Duration = Duration::from_millis(500);

/// How soon a pass that lost a write race looks again.
pub const CONFLICT_WAIT: Duration = Duration::from_millis(200);

/// The retry of a failed pass (kube's rate limiter starts at 5 ms and
/// grows; a fixed short wait keeps tests fast and a broken object cheap).
pub const ERROR_WAIT: Duration = Duration::from_secs(2);

pub fn error_policy<K>(_obj: Arc<K>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(%error, "reconcile failed");
    Action::requeue(ERROR_WAIT)
}

/// Whether `e` is the API's answer `code`.
pub fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// The `namespace/name` key expectations use for an object.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// Settles which `candidates` `owner` manages (upstream's
/// `ControllerRefManager`): owned matching objects are kept, matching
/// orphans adopted, owned objects that stopped matching released. An
/// adoption first re-reads the owner (`recheck`) so a deleted or recreated
/// owner adopts nothing. Objects whose patch fails are left out of this
/// pass; the next decides again.
pub async fn claim<K>(
    api: &Api<K>,
    owner: &Owner,
    candidates: Vec<Arc<K>>,
    matches: impl Fn(&K) -> bool,
    recheck: impl AsyncFnOnce() -> Result<bool, Error>,
) -> Result<Vec<Arc<K>>, Error>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Serialize + Debug,
{
    let mut managed = Vec::new();
    let mut adopt = Vec::new();
    for obj in candidates {
        match meta::claim(owner, obj.meta(), matches(&obj)) {
            Claim::Owned => managed.push(obj),
            Claim::Adopt => adopt.push(obj),
            Claim::Release => {
                let patch = meta::release_patch(owner, obj.meta());
                match api
                    .patch(
                        &obj.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(e) if is_code(&e, 404) || is_code(&e, 409) => {}
                    Err(source) => {
                        return Err(Error::ClaimFailed {
                            what: obj.name_any(),
                            source,
                        });
                    }
                }
            }
            Claim::Ignore => {}
        }
    }
    if adopt.is_empty() || !recheck().await? {
        return Ok(managed);
    }
    for obj in adopt {
        let patch = meta::adopt_patch(owner, obj.meta());
        match api
            .patch(
                &obj.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(adopted) => managed.push(Arc::new(adopted)),
            Err(e) if is_code(&e, 404) || is_code(&e, 409) => {}
            Err(source) => {
                return Err(Error::ClaimFailed {
                    what: obj.name_any(),
                    source,
                });
            }
        }
    }
    Ok(managed)
}

/// `canAdopt`: the owner, read fresh, is still the one we planned for and
/// not being deleted.
pub async fn owner_current<K>(api: &Api<K>, name: &str, uid: &str) -> Result<bool, Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match api.get_opt(name).await {
        Ok(Some(o)) => {
            Ok(o.meta().uid.as_deref() == Some(uid) && o.meta().deletion_timestamp.is_none())
        }
        Ok(None) => Ok(false),
        Err(source) => Err(Error::ReadFailed {
            what: name.to_string(),
            source,
        }),
    }
}

/// How a status write went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    Done,
    /// The object changed since the cache saw it: a newer pass writes.
    Conflict,
    /// The object is gone.
    Gone,
}

/// Replaces the status of `obj` (guarded by its resource version).
pub async fn write_status<K>(api: &Api<K>, obj: &K) -> Result<Written, Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    match api
        .replace_status(&name, &kube::api::PostParams::default(), obj)
        .await
    {
        Ok(_) => Ok(Written::Done),
        Err(e) if is_code(&e, 409) => Ok(Written::Conflict),
        Err(e) if is_code(&e, 404) => Ok(Written::Gone),
        Err(source) => Err(Error::StatusFailed { what: name, source }),
    }
}
