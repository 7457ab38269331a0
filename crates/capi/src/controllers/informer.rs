//! One watch per kind that fills a cache and hands every changed or deleted
//! object to any number of sinks, each only after the cache shows it, so a
//! controller triggered by a sink never reconciles from a cache older than
//! its trigger. Deletions reach the sinks too (a Machine waits for its
//! infrastructure object to be gone). The watch stops on shutdown, so an
//! embedded API server can close its connections.
//!
//! Controllers here are all triggered the same way: a channel of
//! [`ObjectRef`]s fed by sinks ([`Triggers`]), run with kube-runtime's
//! `reconcile_on`.

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use futures::StreamExt;
use kube::Api;
use kube::runtime::reflector::store::{Writer, WriterDropped};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

/// Called with every object the watch sees (applied, listed or deleted).
pub type Sink<K> = Box<dyn Fn(&K) + Send + Sync>;

/// A watch that stopped before its first list (only when the task running
/// it ended), named by the kind it watched.
#[derive(Debug, thiserror::Error)]
#[error("watching {kind} failed before the first list")]
pub struct WatchFailed {
    pub kind: String,
    #[source]
    source: WriterDropped,
}

/// Starts watching `api` into a cache; returns the cache once it has been
/// filled. Watch errors are retried with backoff by the watcher.
pub async fn informer<K>(
    api: Api<K>,
    dyntype: K::DynamicType,
    sinks: Vec<Sink<K>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Store<K>, WatchFailed>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    let mut writer = Writer::new(dyntype.clone());
    let store = writer.as_reader();
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let pump = async move {
        while let Some(event) = events.next().await {
            let Ok(event) = event else {
                // Retried by the backoff; nothing changed.
                continue;
            };
            writer.apply_watcher_event(&event);
            match &event {
                watcher::Event::Apply(o)
                | watcher::Event::Delete(o)
                | watcher::Event::InitApply(o) => {
                    for sink in &sinks {
                        sink(o);
                    }
                }
                watcher::Event::Init | watcher::Event::InitDone => {}
            }
        }
    };
    tokio::spawn(async move {
        tokio::select! {
            _ = pump => {}
            _ = shutdown => {}
        }
    });
    store
        .wait_until_ready()
        .await
        .map_err(|source| WatchFailed {
            kind: K::kind(&dyntype).into_owned(),
            source,
        })?;
    Ok(store)
}

/// The trigger channel of one controller.
pub struct Triggers<K: kube::Resource> {
    tx: mpsc::UnboundedSender<ObjectRef<K>>,
}

impl<K: kube::Resource> Clone for Triggers<K> {
    fn clone(&self) -> Self {
        Triggers {
            tx: self.tx.clone(),
        }
    }
}

impl<K> Triggers<K>
where
    K: kube::Resource<DynamicType = ()> + 'static,
{
    /// A channel and the stream a controller's `reconcile_on` takes.
    pub fn new() -> (
        Triggers<K>,
        impl futures::Stream<Item = ObjectRef<K>> + Send + 'static,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let stream =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
        (Triggers { tx }, stream)
    }

    /// Asks for a reconcile of `namespace/name`. A stopped controller is
    /// no error: nothing is left to trigger.
    pub fn trigger(&self, namespace: &str, name: &str) {
        let _ = self.tx.send(ObjectRef::new(name).within(namespace));
    }

    /// Triggers the object itself.
    pub fn trigger_self(&self, obj: &K) {
        if let (Some(ns), Some(name)) =
            (obj.meta().namespace.as_deref(), obj.meta().name.as_deref())
        {
            self.trigger(ns, name);
        }
    }

    /// A sink that triggers each object itself.
    pub fn self_sink(&self) -> Sink<K>
    where
        K: Send + Sync,
    {
        let t = self.clone();
        Box::new(move |o: &K| t.trigger_self(o))
    }
}

/// A sink that triggers the owners of kind `owner_kind` (in the
/// cluster.x-k8s.io group) of any object.
pub fn owner_sink<O, K>(triggers: &Triggers<O>, owner_kind: &'static str) -> Sink<K>
where
    O: kube::Resource<DynamicType = ()> + 'static,
    K: kube::Resource,
{
    let t = triggers.clone();
    Box::new(move |o: &K| {
        let meta = o.meta();
        let ns = meta.namespace.as_deref().unwrap_or_default();
        for r in meta.owner_references.iter().flatten() {
            if r.kind == owner_kind && crate::meta::group_of(&r.api_version) == crate::GROUP {
                t.trigger(ns, &r.name);
            }
        }
    })
}

/// A shared, late-bound list of sinks, for watches that start before the
/// controllers they feed exist.
pub type SharedSinks<K> = Arc<parking_lot::RwLock<Vec<Sink<K>>>>;
