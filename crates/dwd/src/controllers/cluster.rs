//! The Cluster controller (spec §1.2): a watch of every `Cluster`, the
//! event filter of [`lifecycle::passes_filter`], and the prober manager
//! that starts, stops and restarts one [`Prober`] per shoot namespace as
//! [`lifecycle::decide`] says.
//!
//! The watch keeps the facts of every Cluster it saw, so an update is
//! filtered on old and new like upstream's predicate, and a reconcile
//! reads the latest facts from there, as controller-runtime reads its
//! cache. A reconcile only touches the in-memory map of probers, so it
//! never waits; there is nothing for `--concurrent-reconciles` to spread.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use worker::Cluster;

use crate::config::ProberConfig;
use crate::controllers::prober::{Prober, Shared};
use crate::lifecycle::{self, ClusterEvent, ClusterFacts, Lifecycle, NodeConditions};

struct Running {
    cancel: CancellationToken,
    node_conditions: NodeConditions,
}

/// The probers of this process, by shoot namespace.
pub struct ProberManager {
    config: ProberConfig,
    shared: Shared,
    probers: Mutex<HashMap<String, Running>>,
    /// Probers started so far (restarts included).
    started: std::sync::atomic::AtomicU64,
    /// Cancels every prober at shutdown.
    root: CancellationToken,
}

impl ProberManager {
    pub fn new(config: ProberConfig, shared: Shared, root: CancellationToken) -> ProberManager {
        ProberManager {
            config,
            shared,
            probers: Mutex::new(HashMap::new()),
            started: std::sync::atomic::AtomicU64::new(0),
            root,
        }
    }

    /// The reconcile of one Cluster: decides and acts. `facts` is `None`
    /// for a Cluster that is gone.
    pub fn reconcile(&self, name: &str, facts: Option<&ClusterFacts>) -> Lifecycle {
        let mut probers = self.probers.lock();
        let decision = lifecycle::decide(facts, probers.get(name).map(|r| &r.node_conditions));
        match (&decision, facts) {
            (Lifecycle::Remove(why), _) => {
                if let Some(r) = probers.remove(name) {
                    r.cancel.cancel();
                    tracing::info!(namespace = name, why, "prober removed");
                }
            }
            (Lifecycle::Start | Lifecycle::Restart, Some(facts)) => {
                if let Some(old) = probers.remove(name) {
                    old.cancel.cancel();
                    tracing::info!(
                        namespace = name,
                        "the pools' node conditions changed: prober restarted"
                    );
                }
                let cancel = self.root.child_token();
                let config = lifecycle::effective_config(&self.config, facts);
                let prober = Prober::new(
                    name,
                    config,
                    facts.node_conditions.clone(),
                    self.shared.clone(),
                );
                tokio::spawn(prober.run(cancel.clone()));
                self.started
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                probers.insert(
                    name.to_string(),
                    Running {
                        cancel,
                        node_conditions: facts.node_conditions.clone(),
                    },
                );
                tracing::info!(namespace = name, "prober started");
            }
            _ => {}
        }
        self.shared.metrics.set_probers(probers.len());
        decision
    }

    /// The namespaces with a prober, sorted.
    pub fn running(&self) -> Vec<String> {
        let mut names: Vec<String> = self.probers.lock().keys().cloned().collect();
        names.sort();
        names
    }

    /// Probers started so far, restarts included.
    pub fn started(&self) -> u64 {
        self.started.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops every prober.
    pub fn stop_all(&self) {
        for (_, r) in self.probers.lock().drain() {
            r.cancel.cancel();
        }
        self.shared.metrics.set_probers(0);
    }
}

/// Watches Clusters until `shutdown`, reconciling those whose events pass
/// the filter; then stops every prober.
pub async fn run(seed: kube::Client, manager: Arc<ProberManager>, shutdown: CancellationToken) {
    let api: Api<Cluster> = Api::all(seed);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut seen: HashMap<String, ClusterFacts> = HashMap::new();
    // Names listed since the last (re)start of the watch: those missing at
    // its end were deleted while it was down.
    let mut listing: Option<HashSet<String>> = None;
    loop {
        let event = tokio::select! {
            e = stream.next() => e,
            _ = shutdown.cancelled() => break,
        };
        let Some(event) = event else { break };
        match event {
            Ok(watcher::Event::Init) => listing = Some(HashSet::new()),
            Ok(watcher::Event::InitApply(c)) => {
                if let Some(l) = listing.as_mut() {
                    l.insert(c.name_any());
                }
                applied(&manager, &mut seen, &c);
            }
            Ok(watcher::Event::InitDone) => {
                if let Some(listed) = listing.take() {
                    let gone: Vec<String> = seen
                        .keys()
                        .filter(|n| !listed.contains(*n))
                        .cloned()
                        .collect();
                    for name in gone {
                        deleted(&manager, &mut seen, &name);
                    }
                }
                manager.shared.metrics.set_ready(true);
            }
            Ok(watcher::Event::Apply(c)) => applied(&manager, &mut seen, &c),
            Ok(watcher::Event::Delete(c)) => deleted(&manager, &mut seen, &c.name_any()),
            Err(e) => tracing::warn!(error = %e, "watching clusters"),
        }
    }
    manager.stop_all();
}

fn facts_of(c: &Cluster) -> ClusterFacts {
    ClusterFacts::from_shoot(&c.spec.shoot, c.metadata.deletion_timestamp.is_some())
}

fn applied(manager: &ProberManager, seen: &mut HashMap<String, ClusterFacts>, c: &Cluster) {
    let name = c.name_any();
    let new = facts_of(c);
    let passes = match seen.get(&name) {
        Some(old) => lifecycle::passes_filter(ClusterEvent::Update { old, new: &new }),
        None => lifecycle::passes_filter(ClusterEvent::Create(&new)),
    };
    seen.insert(name.clone(), new);
    if passes {
        manager.reconcile(&name, seen.get(&name));
    }
}

fn deleted(manager: &ProberManager, seen: &mut HashMap<String, ClusterFacts>, name: &str) {
    if let Some(old) = seen.remove(name)
        && lifecycle::passes_filter(ClusterEvent::Delete(&old))
    {
        manager.reconcile(name, None);
    }
}
