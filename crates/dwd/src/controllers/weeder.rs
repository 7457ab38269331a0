//! The weeder's executor (spec §2.2–§2.4): a watch of the configured
//! services' EndpointSlices, and per triggering slice a weeder that, for
//! `watchDuration`, watches the dependant pods of each selector in the
//! slice's namespace and deletes those [`weeder::should_delete`] names.
//!
//! A slice that triggers again replaces its weeder, restarting the window.
//! The pod watches are kube-rs watchers: they list first (so pods already
//! crash-looping are seen, as upstream's initial ADDED events show them)
//! and re-establish themselves with back-off when they break.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::config::WeederConfig;
use crate::metrics::Metrics;
use crate::weeder::{self, SliceEvent};

/// The weeders of this process, by `<namespace>/<slice>`.
pub struct WeederManager {
    client: kube::Client,
    config: Arc<WeederConfig>,
    metrics: Arc<Metrics>,
    weeders: Mutex<HashMap<String, CancellationToken>>,
    active: Arc<AtomicUsize>,
    root: CancellationToken,
}

impl WeederManager {
    pub fn new(
        client: kube::Client,
        config: WeederConfig,
        metrics: Arc<Metrics>,
        root: CancellationToken,
    ) -> WeederManager {
        WeederManager {
            client,
            config: Arc::new(config),
            metrics,
            weeders: Mutex::new(HashMap::new()),
            active: Arc::new(AtomicUsize::new(0)),
            root,
        }
    }

    /// Starts a weeder for the slice, replacing the slice's running one.
    pub fn start(&self, slice: &EndpointSlice) {
        let Some(service) = weeder::service_of(slice, &self.config) else {
            return;
        };
        let Some(namespace) = slice.metadata.namespace.clone() else {
            return;
        };
        let key = weeder::key(slice);
        let cancel = self.root.child_token();
        if let Some(old) = self.weeders.lock().insert(key.clone(), cancel.clone()) {
            old.cancel();
        }
        let selectors: Vec<String> = self.config.services_and_dependant_selectors[service]
            .iter()
            .filter_map(|s| s.query())
            .collect();
        self.metrics.weeder_started(&namespace, service);
        tracing::info!(weeder = %key, service, watch = ?self.config.watch_duration, "endpoints are ready: weeding crash-looping dependants");
        let active = self.active.clone();
        let metrics = self.metrics.clone();
        let client = self.client.clone();
        let service = service.to_string();
        let duration = self.config.watch_duration;
        active.fetch_add(1, Ordering::Relaxed);
        metrics.set_weeders(active.load(Ordering::Relaxed));
        tokio::spawn(async move {
            let watches = join_all(
                selectors
                    .iter()
                    .map(|s| watch_pods(client.clone(), &namespace, s, &service, &metrics)),
            );
            tokio::select! {
                _ = watches => {}
                _ = tokio::time::sleep(duration) => {}
                _ = cancel.cancelled() => {}
            }
            let left = active.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
            metrics.set_weeders(left);
            tracing::debug!(weeder = %key, "weeder ended");
        });
    }

    /// Weeders watching now.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }
}

/// Watches the pods of one selector and deletes the crash-looping ones,
/// until the weeder's task is dropped.
async fn watch_pods(
    client: kube::Client,
    namespace: &str,
    selector: &str,
    service: &str,
    metrics: &Metrics,
) {
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let stream =
        watcher(api.clone(), watcher::Config::default().labels(selector)).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        let pod = match event {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!(namespace, selector, error = %e, "watching dependant pods");
                continue;
            }
        };
        if !weeder::should_delete(&pod) {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                metrics.pod_deleted(namespace, service);
                tracing::info!(namespace, pod = %name, service, "deleted a crash-looping dependant");
            }
            // Logged, never fatal: the watch goes on (spec §2.4).
            Err(e) => {
                tracing::warn!(namespace, pod = %name, error = %e, "deleting a crash-looping dependant failed")
            }
        }
    }
}

/// Watches the configured services' EndpointSlices until `shutdown` and
/// starts a weeder for every slice event that triggers one.
pub async fn run(client: kube::Client, manager: Arc<WeederManager>, shutdown: CancellationToken) {
    let api: Api<EndpointSlice> = Api::all(client);
    let selector = weeder::slice_watch_selector(&manager.config);
    let stream = watcher(api, watcher::Config::default().labels(&selector)).default_backoff();
    futures::pin_mut!(stream);
    let mut seen: HashMap<String, EndpointSlice> = HashMap::new();
    let mut listing: Option<HashSet<String>> = None;
    loop {
        let event = tokio::select! {
            e = stream.next() => e,
            _ = shutdown.cancelled() => break,
        };
        let Some(event) = event else { break };
        match event {
            Ok(watcher::Event::Init) => listing = Some(HashSet::new()),
            Ok(watcher::Event::InitApply(s)) => {
                if let Some(l) = listing.as_mut() {
                    l.insert(weeder::key(&s));
                }
                applied(&manager, &mut seen, s);
            }
            Ok(watcher::Event::InitDone) => {
                if let Some(listed) = listing.take() {
                    seen.retain(|k, _| listed.contains(k));
                }
                manager.metrics.set_ready(true);
            }
            Ok(watcher::Event::Apply(s)) => applied(&manager, &mut seen, s),
            // Deletions never trigger; the slice is only forgotten.
            Ok(watcher::Event::Delete(s)) => {
                seen.remove(&weeder::key(&s));
            }
            Err(e) => tracing::warn!(error = %e, "watching endpoint slices"),
        }
    }
    manager.root.cancel();
}

fn applied(manager: &WeederManager, seen: &mut HashMap<String, EndpointSlice>, new: EndpointSlice) {
    let key = weeder::key(&new);
    let event = match seen.get(&key) {
        Some(old) => SliceEvent::Update { old, new: &new },
        None => SliceEvent::Create(&new),
    };
    if weeder::triggers(event, &manager.config) {
        manager.start(&new);
    }
    seen.insert(key, new);
}
