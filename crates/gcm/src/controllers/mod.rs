//! The controllers: thin executors that read through kube-rs, call the
//! pure decisions, and write the results. Each reconcile is idempotent and
//! safe to interrupt at any line: it decides again from what the API shows.

pub mod cloudprofile;
pub mod hibernation;
pub mod maintenance;
pub mod namespacedcloudprofile;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::Config;
use crate::backoff::Backoff;
use crate::maintain::PlannedEvent;

/// The event reporter (upstream's process name).
pub const REPORTER: &str = "gardener-controller-manager";

/// How long publishing one event may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a reconcile failed; each is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("reading or writing {what} failed: {source}")]
    Api {
        /// What was read or written.
        what: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The profile a shoot references does not exist.
    #[error("{0} does not exist")]
    ProfileNotFound(String),
    /// The NCP a shoot references has not been rendered yet.
    #[error("{0} has not been rendered into its status yet")]
    ProfileNotRendered(String),
    /// The shoot references no profile at all.
    #[error("shoot {0} references no cloud profile")]
    NoProfile(String),
    /// A patch could not be encoded.
    #[error("encoding the patch of {0} failed")]
    Encode(String),
}

impl Error {
    pub(crate) fn api(what: impl Into<String>, source: kube::Error) -> Error {
        Error::Api {
            what: what.into(),
            source,
        }
    }
}

/// What both controllers share.
pub struct Context {
    /// The garden cluster's API.
    pub client: kube::Client,
    /// Settings.
    pub config: Config,
    /// Events on NCPs and Shoots.
    pub recorder: Recorder,
    /// Retry delays of failed reconciles.
    pub backoff: Backoff,
}

impl Context {
    /// A context over `client`.
    pub fn new(client: kube::Client, config: Config) -> Arc<Context> {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: REPORTER.into(),
                instance: None,
            },
        );
        Arc::new(Context {
            client,
            config,
            recorder,
            backoff: Backoff::default(),
        })
    }

    /// Publishes `ev` on `obj` in the background: events are best effort
    /// and never delay or fail a reconcile.
    pub fn publish<K: Resource<DynamicType = ()>>(&self, obj: &K, ev: &PlannedEvent) {
        let event = Event {
            type_: if ev.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: ev.reason.to_string(),
            note: Some(ev.note.clone()),
            action: ev.reason.to_string(),
            secondary: None,
        };
        let reference = obj.object_ref(&());
        let recorder = self.recorder.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(EVENT_TIMEOUT, recorder.publish(&event, &reference)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, reason = %event.reason, "publishing an event failed")
                }
                Err(_) => tracing::debug!(reason = %event.reason, "publishing an event timed out"),
            }
        });
    }
}

/// The backoff key of an object in `controller`.
fn backoff_key<K: Resource>(controller: &str, obj: &K) -> String {
    let meta = obj.meta();
    format!(
        "{controller}/{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// A reconcile wrapped by [`forgetting`].
pub(crate) type ReconcileFuture =
    std::pin::Pin<Box<dyn Future<Output = Result<Action, Error>> + Send>>;

/// Wraps `reconcile` so that a success forgets the object's past failures.
pub(crate) fn forgetting<K, F, Fut>(
    controller: &'static str,
    reconcile: F,
) -> impl FnMut(Arc<K>, Arc<Context>) -> ReconcileFuture
where
    K: Resource + Send + Sync + 'static,
    F: Fn(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    move |obj, ctx| {
        let key = backoff_key(controller, obj.as_ref());
        let fut = reconcile(obj, ctx.clone());
        Box::pin(async move {
            let result = fut.await;
            if result.is_ok() {
                ctx.backoff.succeeded(&key);
            }
            result
        })
    }
}

/// The error policy of both controllers: log once, retry with per-object
/// exponential backoff.
pub(crate) fn error_policy<K: Resource>(
    controller: &'static str,
) -> impl Fn(Arc<K>, &Error, Arc<Context>) -> Action {
    move |obj, err, ctx| {
        let key = backoff_key(controller, obj.as_ref());
        let after = ctx.backoff.failed(&key);
        tracing::warn!(controller, object = %key, error = %err, retry_in = ?after, "reconcile failed");
        Action::requeue(after)
    }
}

/// Adds or removes the `gardener` finalizer on a profile, guarded by the
/// observed resource version; an object already gone is fine.
pub(crate) async fn patch_finalizer<K>(
    api: &kube::Api<K>,
    obj: &K,
    present: bool,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + for<'de> k8s_openapi::serde::Deserialize<'de> + std::fmt::Debug,
{
    let name = obj.meta().name.as_deref().unwrap_or_default();
    let patch = crate::ncp::finalizer_patch(obj.meta(), present);
    match api
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
