//! The executor: registers the node, binds the pods that fit it, and runs
//! one worker per pod bound to it. A worker observes (the Pod, the
//! attempts on disk, its probes), asks [`crate::plan`] what to do, does
//! it through the runtime, and posts the status the plan computed; it
//! wakes on pod changes, container exits, back-off and probe timers, and a
//! periodic resync.
//!
//! After a restart (a crash included) the state directory is the truth:
//! live attempts are adopted as they are (never started twice, thanks to
//! their locks), and pod directories whose pod is gone from the API are
//! stopped and removed once the first full list of pods has been seen.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::{Notify, watch};
use tracing::{debug, info, warn};

use crate::env::Sources;
use crate::error::Error;
use crate::hosts::PodName;
use crate::imagemap::ImageMap;
use crate::ipam::Range;
use crate::launch::{Inputs, PodFiles};
use crate::names::Names;
use crate::node::NodeInfo;
use crate::plan::{Action, KillReason};
use crate::probe::{Probes, Timing};
use crate::runtime::{Runtime, Stop};
use crate::state::{self, LaunchSpec, PodRecord};
use crate::view::{AttemptState, Blocked, Observed};
use crate::volumes::Ready;

mod worker;

use worker::worker;

/// How the kubelet runs.
#[derive(Clone, Debug)]
pub struct Config {
    pub data_dir: PathBuf,
    pub node_name: String,
    /// The shim command (`trellis kubelet shim`), to which `run DIR` is
    /// appended.
    pub shim: Vec<OsString>,
    pub images: ImageMap,
    pub pod_range: Range,
    /// The node's InternalIP and every pod's hostIP.
    pub address: String,
    /// Where the HTTPS endpoint listens (port 0: any free port).
    pub listen: SocketAddr,
    /// The cluster CA that signs the API server's client certificate;
    /// without it there is no HTTPS endpoint (no logs, no exec).
    pub client_ca_pem: Option<String>,
    /// Where pods reach the API server and its CA: containers get the
    /// `KUBERNETES_SERVICE_*` variables and service account tokens. Without
    /// it, neither.
    pub api_server: Option<crate::serviceaccount::ApiServer>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub max_pods: u32,
    /// Stop every pod's processes when the kubelet stops (not on a crash:
    /// then they are adopted at the next start).
    pub stop_pods_on_shutdown: bool,
    pub resync: Duration,
}

impl Config {
    pub fn new(
        data_dir: PathBuf,
        node_name: String,
        shim: Vec<OsString>,
        trellis: String,
    ) -> Config {
        Config {
            data_dir,
            node_name,
            shim,
            images: ImageMap::new(trellis),
            pod_range: crate::ipam::POD_RANGE,
            address: "127.0.0.1".into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 10250)),
            client_ca_pem: None,
            api_server: None,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            max_pods: 110,
            stop_pods_on_shutdown: true,
            resync: Duration::from_secs(10),
        }
    }
}

/// One pod, as the watcher and its worker share it.
/// Of a node's pod entries (each with whether it is gone from the API), the
/// one a name stands for: see [`Shared::pod`].
fn named(entries: Vec<(bool, Arc<Pod>)>, namespace: &str, name: &str) -> Option<Arc<Pod>> {
    entries
        .into_iter()
        .filter(|(_, p)| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name)
        })
        .min_by_key(|(gone, p)| {
            (
                *gone,
                p.metadata.deletion_timestamp.is_some(),
                std::cmp::Reverse(p.metadata.creation_timestamp.clone().map(|t| t.0)),
            )
        })
        .map(|(_, p)| p)
}

struct Entry {
    uid: String,
    pod: Mutex<Arc<Pod>>,
    gone: AtomicBool,
    wake: Notify,
}

pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) cfg: Config,
    pub(crate) rt: Runtime,
    recorder: Recorder,
    pods: Mutex<HashMap<String, Arc<Entry>>>,
    ips: Mutex<()>,
    pub(crate) names: watch::Receiver<Names>,
    path_env: String,
    /// Set when the kubelet stops: workers act no more, so nothing is
    /// started while the pods' processes are being stopped.
    stopping: AtomicBool,
}

/// Runs the kubelet until `shutdown` resolves.
pub async fn run(
    client: Client,
    cfg: Config,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    let rt = Runtime::new(&cfg.data_dir, cfg.shim.clone());
    std::fs::create_dir_all(rt.layout.pods()).map_err(|source| Error::StateFailed {
        path: rt.layout.pods().display().to_string(),
        source,
    })?;
    let (names_tx, names_rx) = watch::channel(Names::default());
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "kubelet".into(),
            instance: Some(cfg.node_name.clone()),
        },
    );
    let shared = Arc::new(Shared {
        client: client.clone(),
        rt,
        recorder,
        pods: Mutex::new(HashMap::new()),
        ips: Mutex::new(()),
        names: names_rx,
        stopping: AtomicBool::new(false),
        path_env: std::env::var("PATH").unwrap_or_else(|_| {
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
        }),
        cfg,
    });
    let port = match shared.cfg.client_ca_pem.clone() {
        Some(ca) => crate::server::start(shared.clone(), &ca).await?,
        None => shared.cfg.listen.port(),
    };
    let (cpus, memory_bytes) = crate::node::machine();
    let info = NodeInfo {
        name: shared.cfg.node_name.clone(),
        labels: shared.cfg.labels.clone(),
        taints: shared.cfg.taints.clone(),
        address: shared.cfg.address.clone(),
        kubelet_port: port,
        cpus,
        memory_bytes,
        max_pods: shared.cfg.max_pods,
    };
    let node = loop {
        match crate::node::register(&client, &info).await {
            Ok(n) => break n,
            Err(e) => {
                warn!(error = %e, "registering the node; retrying");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    };
    info!(node = %info.name, kubelet_port = port, "process kubelet registered its node");
    let node_uid = node.metadata.uid.clone().unwrap_or_default();
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(heartbeat(client.clone(), info, node_uid));
    tasks.spawn(watch_pods(shared.clone()));
    tasks.spawn(crate::scheduler::run(shared.clone()));
    tasks.spawn(crate::names::watch(client.clone(), names_tx));
    tasks.spawn(crate::names::wake_workers(shared.clone()));
    tasks.spawn(crate::claims::collect(shared.clone()));
    tasks.spawn(crate::proxy::run(client.clone()));
    shutdown.await;
    shared.stopping.store(true, Ordering::SeqCst);
    tasks.abort_all();
    if shared.cfg.stop_pods_on_shutdown {
        // A worker may be in the middle of a start; give it a moment, and
        // go round again for anything started meanwhile.
        tokio::time::sleep(Duration::from_millis(200)).await;
        for _ in 0..3 {
            stop_everything(&shared.rt).await;
            if shared.rt.live().is_empty() {
                break;
            }
        }
    }
    Ok(())
}

/// Stops every live attempt: SIGTERM, then after 10 s SIGKILL.
async fn stop_everything(rt: &Runtime) {
    let live = rt.live();
    if live.is_empty() {
        return;
    }
    info!(containers = live.len(), "stopping the pods' processes");
    for l in &live {
        rt.stop(&l.pod_uid, &l.container, l.index, Stop::Term);
    }
    let waits = live
        .iter()
        .filter_map(|l| l.shim)
        .map(crate::runtime::exited);
    let _ = tokio::time::timeout(Duration::from_secs(10), futures::future::join_all(waits)).await;
    for l in rt.live() {
        rt.stop(&l.pod_uid, &l.container, l.index, Stop::Kill);
    }
    let waits = rt
        .live()
        .into_iter()
        .filter_map(|l| l.shim)
        .map(crate::runtime::exited);
    let _ = tokio::time::timeout(Duration::from_secs(3), futures::future::join_all(waits)).await;
    for l in rt.live() {
        rt.kill_shim(&l.pod_uid, &l.container, l.index);
    }
}

async fn heartbeat(client: Client, info: NodeInfo, node_uid: String) {
    let since = k8s_openapi::jiff::Timestamp::now();
    let mut n: u32 = 0;
    loop {
        if let Err(e) = crate::node::renew(&client, &info.name, &node_uid).await {
            warn!(error = %e, "node lease");
        }
        // The status is restated now and then (a Ready heartbeat), as the
        // kubelet's nodeStatusReportFrequency.
        n += 1;
        if n.is_multiple_of(30)
            && let Err(e) = crate::node::post_status(&client, &info, since).await
        {
            warn!(error = %e, "node status");
        }
        tokio::time::sleep(crate::node::LEASE_RENEW).await;
    }
}

fn uid_of(pod: &Pod) -> Option<String> {
    pod.metadata.uid.clone()
}

impl Shared {
    /// A pod seen in the API.
    fn observe(self: &Arc<Self>, pod: Pod) {
        let Some(uid) = uid_of(&pod) else { return };
        let mut pods = self.pods.lock();
        match pods.get(&uid) {
            Some(e) => {
                *e.pod.lock() = Arc::new(pod);
                e.wake.notify_one();
            }
            None => {
                let entry = Arc::new(Entry {
                    uid: uid.clone(),
                    pod: Mutex::new(Arc::new(pod)),
                    gone: AtomicBool::new(false),
                    wake: Notify::new(),
                });
                pods.insert(uid, entry.clone());
                tokio::spawn(worker(self.clone(), entry));
            }
        }
    }

    /// Wakes every pod worker.
    pub(crate) fn wake_all(&self) {
        for e in self.pods.lock().values() {
            e.wake.notify_one();
        }
    }

    fn forget(&self, uid: &str) {
        if let Some(e) = self.pods.lock().get(uid) {
            e.gone.store(true, Ordering::SeqCst);
            e.wake.notify_one();
        }
    }

    /// The pod of that name on this node. A pod recreated under the same
    /// name (a StatefulSet member) may briefly have its predecessor's entry
    /// beside it while that one winds down: the live one wins, then the one
    /// not being deleted, then the younger.
    pub(crate) fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        let entries: Vec<(bool, Arc<Pod>)> = self
            .pods
            .lock()
            .values()
            .map(|e| (e.gone.load(Ordering::SeqCst), e.pod.lock().clone()))
            .collect();
        named(entries, namespace, name)
    }

    async fn event(&self, pod: &Pod, type_: EventType, reason: &str, note: String) {
        let reference = pod.object_ref(&());
        let ev = KubeEvent {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: reason.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &reference).await {
            debug!(error = %e, "event");
        }
    }
}

async fn watch_pods(shared: Arc<Shared>) {
    let api: Api<Pod> = Api::all(shared.client.clone());
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", shared.cfg.node_name));
    let mut events = watcher::watcher(api, cfg).default_backoff().boxed();
    let mut relist: Option<HashSet<String>> = None;
    let mut orphans_checked = false;
    while let Some(ev) = events.next().await {
        match ev {
            Ok(Event::Init) => relist = Some(HashSet::new()),
            Ok(Event::InitApply(pod)) => {
                if let (Some(seen), Some(uid)) = (relist.as_mut(), uid_of(&pod)) {
                    seen.insert(uid);
                }
                shared.observe(pod);
            }
            Ok(Event::Apply(pod)) => shared.observe(pod),
            Ok(Event::Delete(pod)) => {
                if let Some(uid) = uid_of(&pod) {
                    shared.forget(&uid);
                }
            }
            Ok(Event::InitDone) => {
                let Some(seen) = relist.take() else { continue };
                let known: Vec<String> = shared.pods.lock().keys().cloned().collect();
                for uid in known.iter().filter(|u| !seen.contains(*u)) {
                    shared.forget(uid);
                }
                if !orphans_checked {
                    orphans_checked = true;
                    for uid in shared.rt.pod_uids() {
                        if !seen.contains(&uid) {
                            tokio::spawn(reap_orphan(shared.clone(), uid));
                        }
                    }
                }
            }
            Err(e) => debug!(error = %e, "pod watch"),
        }
    }
}

/// A pod directory whose pod is not in the API: stop what runs, remove it.
async fn reap_orphan(shared: Arc<Shared>, uid: String) {
    let rt = &shared.rt;
    let live: Vec<_> = rt.live().into_iter().filter(|l| l.pod_uid == uid).collect();
    if !live.is_empty() {
        info!(pod_uid = %uid, containers = live.len(), "stopping the processes of a pod that no longer exists");
    }
    for l in &live {
        stop_attempt(rt, &uid, &l.container, l.index, 30).await;
    }
    rt.remove_pod(&uid);
}

/// SIGTERM, then after `grace_secs` a kill of the whole container, then
/// of its shim if that does not react.
async fn stop_attempt(rt: &Runtime, uid: &str, name: &str, index: u32, grace_secs: i64) {
    let Some(shim) = rt.shim_of(uid, name, index) else {
        return;
    };
    rt.stop(uid, name, index, Stop::Term);
    let grace = Duration::from_secs(grace_secs.max(0) as u64);
    if tokio::time::timeout(grace, crate::runtime::exited(shim))
        .await
        .is_ok()
    {
        return;
    }
    rt.stop(uid, name, index, Stop::Kill);
    if tokio::time::timeout(Duration::from_secs(5), crate::runtime::exited(shim))
        .await
        .is_ok()
    {
        return;
    }
    rt.kill_shim(uid, name, index);
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The Node object of this kubelet.
pub(crate) async fn node(shared: &Shared) -> Option<Node> {
    Api::<Node>::all(shared.client.clone())
        .get_opt(&shared.cfg.node_name)
        .await
        .ok()
        .flatten()
}

/// Binds `pod` to this node through the binding subresource.
pub(crate) async fn bind(shared: &Shared, pod: &Pod) -> Result<(), Error> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(shared.client.clone(), &ns);
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": ns, "uid": pod.metadata.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": shared.cfg.node_name},
    });
    let err = |source| Error::BindFailed {
        pod: format!("{ns}/{name}"),
        node: shared.cfg.node_name.clone(),
        source,
    };
    match api
        .create_subresource::<_, serde_json::Value>(
            "binding",
            &name,
            &PostParams::default(),
            &binding,
        )
        .await
    {
        Ok(_) => Ok(()),
        // A server without pods/binding: set spec.nodeName, which the
        // server lets a pod get once. The UID in the patch makes a pod
        // re-created under the same name refuse it.
        Err(e) if matches!(api_code(&e), Some(404 | 405)) => {
            let patch = json!({"metadata": {"uid": pod.metadata.uid}, "spec": {"nodeName": shared.cfg.node_name}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|_| ())
                .map_err(err)
        }
        Err(e) => Err(err(e)),
    }
}

pub(crate) async fn scheduled_event(shared: &Shared, pod: &Pod, ok: Result<(), String>) {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    match ok {
        Ok(()) => {
            shared
                .event(
                    pod,
                    EventType::Normal,
                    "Scheduled",
                    format!(
                        "Successfully assigned {ns}/{name} to {}",
                        shared.cfg.node_name
                    ),
                )
                .await
        }
        Err(why) => {
            shared
                .event(pod, EventType::Warning, "FailedScheduling", why)
                .await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, created: &str, deleting: bool) -> Arc<Pod> {
        let mut v = serde_json::json!({"metadata": {
            "name": "db-1", "namespace": "ns", "uid": uid, "creationTimestamp": created}});
        if deleting {
            v["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:09Z".into();
        }
        Arc::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn a_recreated_pod_name_stands_for_the_live_successor() {
        let old = || pod("old", "2026-01-01T00:00:00Z", false);
        let old_deleting = || pod("old", "2026-01-01T00:00:00Z", true);
        let new = || pod("new", "2026-01-01T00:00:10Z", false);
        // (case, the node's entries of that name, the UID it stands for)
        type Case = (&'static str, Vec<(bool, Arc<Pod>)>, Option<&'static str>);
        let cases: Vec<Case> = vec![
            (
                "predecessor gone",
                vec![(true, old()), (false, new())],
                Some("new"),
            ),
            (
                "successor listed first",
                vec![(false, new()), (true, old())],
                Some("new"),
            ),
            (
                "predecessor being deleted",
                vec![(false, old_deleting()), (false, new())],
                Some("new"),
            ),
            (
                "both live: the younger",
                vec![(false, old()), (false, new())],
                Some("new"),
            ),
            ("only the predecessor", vec![(true, old())], Some("old")),
            ("none of that name", vec![], None),
        ];
        for (case, entries, want) in cases {
            let got = named(entries, "ns", "db-1");
            assert_eq!(
                got.and_then(|p| p.metadata.uid.clone()).as_deref(),
                want,
                "{case}"
            );
        }
        assert!(named(vec![(false, new())], "other", "db-1").is_none());
    }
}
