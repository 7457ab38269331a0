//! The node and pod watchers: they hand every Node and Pod event to the
//! simulator's state, and after a relist forget what the relist no longer
//! shows.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tracing::debug;

use super::{PodKey, Shared};

fn pod_key(pod: &Pod) -> Option<PodKey> {
    Some((pod.metadata.namespace.clone()?, pod.metadata.name.clone()?))
}

/// Runs a watcher stream until stop, handing each event to `handle`.
async fn follow<K, F>(api: Api<K>, mut stop: watch::Receiver<bool>, mut handle: F)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: FnMut(Event<K>),
{
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            r = stop.changed() => {
                if r.is_err() || *stop.borrow() {
                    return;
                }
                continue;
            }
        };
        match next {
            None => return,
            Some(Ok(event)) => handle(event),
            // The watcher backs off and relists by itself.
            Some(Err(e)) => debug!(error = %e, "watch"),
        }
    }
}

pub(super) async fn watch_nodes(shared: Arc<Shared>, stop: watch::Receiver<bool>) {
    let api: Api<Node> = Api::all(shared.client.clone());
    // Nodes listed by the current relist, and when it began: a simulated
    // node registered before the relist but missing from it was deleted
    // while the watch was down.
    let mut relist: Option<(Timestamp, HashSet<String>)> = None;
    let sh = shared.clone();
    follow(api, stop, move |event| match event {
        Event::Init => relist = Some((Timestamp::now(), HashSet::new())),
        Event::InitApply(node) => {
            if let (Some((_, seen)), Some(name)) = (relist.as_mut(), node.metadata.name.clone()) {
                seen.insert(name);
            }
            sh.observe_node(&node);
        }
        Event::Apply(node) => sh.observe_node(&node),
        Event::Delete(node) => {
            if let Some(name) = node.metadata.name.as_deref() {
                sh.forget_node(name, node.metadata.uid.as_deref());
            }
        }
        Event::InitDone => {
            let Some((began, seen)) = relist.take() else {
                return;
            };
            let missing: Vec<(String, Option<String>)> = {
                let st = sh.state.lock();
                st.nodes
                    .iter()
                    .filter(|(name, n)| {
                        n.registered_at.is_some_and(|t| t < began) && !seen.contains(*name)
                    })
                    .map(|(name, n)| (name.clone(), n.uid.clone()))
                    .collect()
            };
            for (name, uid) in missing {
                sh.forget_node(&name, uid.as_deref());
            }
        }
    })
    .await;
}

pub(super) async fn watch_pods(shared: Arc<Shared>, stop: watch::Receiver<bool>) {
    let api: Api<Pod> = Api::all(shared.client.clone());
    let mut relist: Option<HashSet<PodKey>> = None;
    let sh = shared.clone();
    follow(api, stop, move |event| match event {
        Event::Init => relist = Some(HashSet::new()),
        Event::InitApply(pod) => {
            if let (Some(seen), Some(key)) = (relist.as_mut(), pod_key(&pod)) {
                seen.insert(key);
            }
            sh.observe_pod(pod);
        }
        Event::Apply(pod) => sh.observe_pod(pod),
        Event::Delete(pod) => {
            if let Some(key) = pod_key(&pod) {
                sh.forget_pod(&key, pod.metadata.uid.as_deref());
            }
        }
        Event::InitDone => {
            if let Some(seen) = relist.take() {
                let mut st = sh.state.lock();
                st.pods.retain(|k, _| seen.contains(k));
                // Volumes may have gone with the dropped pods.
                st.last_full = None;
                drop(st);
                sh.wake.notify_one();
            }
        }
    })
    .await;
}
