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

/// The worker's own memory of a pod (probe states, stops in flight, what
/// it posted last); rebuilt from scratch after a restart.
#[derive(Default)]
struct Memory {
    probes: HashMap<(String, u32), Probes>,
    stopping: HashSet<(String, u32)>,
    watched: HashSet<(String, u32)>,
    last_status: Option<serde_json::Value>,
    reported: HashSet<String>,
    last_hosts: String,
    sources_at: Option<std::time::Instant>,
    sources: Sources,
    volumes: Option<Result<BTreeMap<String, Ready>, Blocked>>,
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

/// One pod's worker.
async fn worker(shared: Arc<Shared>, entry: Arc<Entry>) {
    let mut mem = Memory::default();
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let next = match sync(&shared, &entry, &mut mem).await {
            Some(d) => d,
            None => break,
        };
        tokio::select! {
            _ = entry.wake.notified() => {},
            _ = tokio::time::sleep(next) => {},
        }
    }
    shared.pods.lock().remove(&entry.uid);
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The pod's IP: the recorded one, or a new one from the range.
fn sandbox(shared: &Shared, pod: &Pod, uid: &str) -> Result<PodRecord, String> {
    let dir = shared.rt.layout.pod(uid);
    if let Some(r) = state::read_json::<PodRecord>(&dir, state::POD) {
        return Ok(r);
    }
    let _guard = shared.ips.lock();
    let used: std::collections::BTreeSet<Ipv4Addr> = shared
        .rt
        .pod_uids()
        .iter()
        .filter_map(|u| state::read_json::<PodRecord>(&shared.rt.layout.pod(u), state::POD))
        .filter_map(|r| r.ip.parse().ok())
        .collect();
    let ip = crate::ipam::allocate(shared.cfg.pod_range, &used, uid)
        .ok_or("no free pod IP in the range")?;
    std::fs::create_dir_all(dir.join("tmp")).map_err(|e| e.to_string())?;
    let record = PodRecord {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: uid.to_string(),
        ip: ip.to_string(),
    };
    state::write_json(&dir, state::POD, &record).map_err(|e| e.to_string())?;
    Ok(record)
}

fn pod_files(shared: &Shared, uid: &str) -> PodFiles {
    let dir = shared.rt.layout.pod(uid);
    PodFiles {
        hosts: dir.join("hosts"),
        hostname: dir.join("hostname"),
        tmp: dir.join("tmp"),
    }
}

/// Writes the pod's hosts and hostname files when they changed.
fn write_names(shared: &Shared, pod: &Pod, record: &PodRecord, mem: &mut Memory) {
    let me = PodName {
        namespace: record.namespace.clone(),
        hostname: crate::launch::hostname(pod),
        subdomain: pod
            .spec
            .as_ref()
            .and_then(|s| s.subdomain.clone())
            .filter(|s| !s.is_empty()),
        ip: record.ip.clone(),
    };
    let names = shared.names.borrow().clone();
    let text = crate::hosts::render(&me, &names.pods, &names.services);
    if text != mem.last_hosts {
        let files = pod_files(shared, &record.uid);
        let mut all = crate::volumes::Files::new();
        all.insert("hosts".into(), (text.clone().into_bytes(), 0o644));
        all.insert(
            "hostname".into(),
            (format!("{}\n", me.hostname).into_bytes(), 0o644),
        );
        // In place, not renamed: the containers' bind mounts hold the
        // inodes, so a rename would go unseen.
        for (file, (bytes, _)) in [
            (&files.hosts, &all["hosts"]),
            (&files.hostname, &all["hostname"]),
        ] {
            if let Err(e) = std::fs::write(file, bytes) {
                warn!(error = %e, file = %file.display(), "writing a pod file");
            }
        }
        mem.last_hosts = text;
    }
}

/// How often file volumes and the environment sources are re-read while
/// the pod runs (upstream syncs configMap volumes about every minute).
const SOURCES_REFRESH: Duration = Duration::from_secs(60);

/// One pass over a pod; `None` once the pod is finished with.
async fn sync(shared: &Arc<Shared>, entry: &Entry, mem: &mut Memory) -> Option<Duration> {
    let pod = entry.pod.lock().clone();
    let gone = entry.gone.load(Ordering::SeqCst);
    let uid = entry.uid.clone();
    let spec = pod.spec.clone().unwrap_or_default();
    let deleting = gone || pod.metadata.deletion_timestamp.is_some();
    let finished = matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    let rt = &shared.rt;
    let containers: Vec<_> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| (c, true))
        .chain(spec.containers.iter().map(|c| (c, false)))
        .collect();

    let mut obs = Observed {
        host_ip: shared.cfg.address.clone(),
        gone,
        ..Observed::default()
    };
    for (c, _) in &containers {
        obs.containers
            .insert(c.name.clone(), rt.container(&uid, &c.name));
        obs.spec_hashes
            .insert(c.name.clone(), crate::launch::spec_hash(c));
    }
    let record = if deleting || finished {
        state::read_json::<PodRecord>(&rt.layout.pod(&uid), state::POD)
    } else {
        match sandbox(shared, &pod, &uid) {
            Ok(r) => Some(r),
            Err(e) => {
                warn!(pod_uid = %uid, error = %e, "pod sandbox");
                None
            }
        }
    };
    obs.pod_ip = record.as_ref().map(|r| r.ip.clone());
    let mut launch: BTreeMap<String, LaunchSpec> = BTreeMap::new();
    if let (Some(record), false, false) = (&record, deleting, finished) {
        write_names(shared, &pod, record, mem);
        let needs_start = containers.iter().any(|(c, _)| {
            !obs.containers[&c.name]
                .current
                .as_ref()
                .is_some_and(|a| a.alive())
        });
        let stale = mem.sources_at.is_none_or(|t| t.elapsed() > SOURCES_REFRESH);
        if needs_start || stale {
            match crate::fetch::sources(shared, &pod, &record.ip).await {
                Ok(src) => {
                    mem.volumes = Some(crate::fetch::volumes(shared, &pod, &uid, &src).await);
                    mem.sources = src;
                    mem.sources_at = Some(std::time::Instant::now());
                }
                Err(e) => warn!(error = %e, "reading the pod's sources"),
            }
        }
        let files = pod_files(shared, &uid);
        for (c, _) in &containers {
            let blocked = match &mem.volumes {
                None => Err(Blocked {
                    reason: "ContainerCreating".into(),
                    message: "waiting for the pod's volumes".into(),
                }),
                Some(Err(b)) => Err(b.clone()),
                Some(Ok(volumes)) => {
                    let inputs = Inputs {
                        images: &shared.cfg.images,
                        sources: &mem.sources,
                        volumes,
                        files: &files,
                        data_dir: &shared.cfg.data_dir,
                        path: &shared.path_env,
                    };
                    crate::launch::launch_spec(&pod, c, &inputs)
                }
            };
            match blocked {
                Ok(s) => {
                    launch.insert(c.name.clone(), s);
                }
                Err(b) => {
                    let key = format!("{}:{}:{}", c.name, b.reason, b.message);
                    if !mem.reported.contains(&key) {
                        let note = if b.reason == "ErrImagePull" {
                            format!(
                                "Failed to pull image {:?}: {}",
                                c.image.as_deref().unwrap_or(""),
                                b.message
                            )
                        } else {
                            format!("Error: {}", b.message)
                        };
                        shared.event(&pod, EventType::Warning, "Failed", note).await;
                        mem.reported.insert(key);
                    }
                    obs.blocked.insert(c.name.clone(), b);
                }
            }
        }
    }

    // Probes of running attempts.
    let now = state::now_ms();
    for (c, init) in &containers {
        let rtc = &obs.containers[&c.name];
        let verdict = match rtc.current.as_ref() {
            Some(a) if matches!(a.state, AttemptState::Running { .. }) && !init => mem
                .probes
                .entry((c.name.clone(), a.index))
                .or_default()
                .verdict(c),
            _ => crate::view::ProbeView::default(),
        };
        obs.probes.insert(c.name.clone(), verdict);
    }

    let plan = crate::plan::plan(&pod, &obs, now);

    // Act.
    for action in &plan.actions {
        if shared.stopping.load(Ordering::SeqCst) {
            return None;
        }
        match action {
            Action::Start {
                container, restart, ..
            } => {
                let Some(spec) = launch.get(container) else {
                    continue;
                };
                let rtc = &obs.containers[container];
                let index = rtc.current.as_ref().map_or(0, |a| a.index + 1);
                if let Some(finished_ms) = restart {
                    let _ = rt.save_backoff(&uid, container, &rtc.backoff.next(*finished_ms));
                }
                match rt.start(&uid, container, index, spec) {
                    Ok(_) => {
                        rt.prune(&uid, container);
                        shared
                            .event(
                                &pod,
                                EventType::Normal,
                                "Started",
                                format!("Started container {container}"),
                            )
                            .await;
                    }
                    Err(e) => {
                        warn!(pod_uid = %uid, %container, error = %e, "starting a container");
                        shared
                            .event(
                                &pod,
                                EventType::Warning,
                                "Failed",
                                format!("Error: starting container {container}: {e}"),
                            )
                            .await;
                    }
                }
                entry.wake.notify_one();
            }
            Action::Kill {
                container,
                grace_secs,
                reason,
            } => {
                let Some(cur) = obs.containers[container].current.as_ref() else {
                    continue;
                };
                let key = (container.clone(), cur.index);
                if !mem.stopping.insert(key) {
                    continue;
                }
                let note = match reason {
                    KillReason::Unhealthy => {
                        format!("Container {container} failed liveness probe, will be restarted")
                    }
                    KillReason::Changed => {
                        format!("Container {container} definition changed, will be restarted")
                    }
                    KillReason::PodDeleted => format!("Stopping container {container}"),
                };
                shared.event(&pod, EventType::Normal, "Killing", note).await;
                let (rt2, uid2, name2, index, grace) = (
                    rt.clone(),
                    uid.clone(),
                    container.clone(),
                    cur.index,
                    *grace_secs,
                );
                tokio::spawn(async move { stop_attempt(&rt2, &uid2, &name2, index, grace).await });
            }
        }
    }
    for (name, left) in &plan.backing_off {
        let index = obs.containers[name].current.as_ref().map_or(0, |a| a.index);
        let key = format!("backoff:{name}:{index}");
        if mem.reported.insert(key) {
            shared
                .event(
                    &pod,
                    EventType::Warning,
                    "BackOff",
                    format!(
                        "Back-off restarting failed container {name} in pod {}_{}({uid}) for {}",
                        pod.metadata.name.as_deref().unwrap_or(""),
                        pod.metadata.namespace.as_deref().unwrap_or(""),
                        crate::plan::human(*left)
                    ),
                )
                .await;
        }
    }

    // Watch every live attempt's shim, so its end wakes this worker.
    for (c, _) in &containers {
        if let Some(a) = rt.container(&uid, &c.name).current.filter(|a| a.alive()) {
            let key = (c.name.clone(), a.index);
            if mem.watched.insert(key)
                && let Some(shim) = rt.shim_of(&uid, &c.name, a.index)
            {
                let e = shared.pods.lock().get(&uid).cloned();
                tokio::spawn(async move {
                    crate::runtime::exited(shim).await;
                    if let Some(e) = e {
                        e.wake.notify_one();
                    }
                });
            }
        }
    }

    let pods: Api<Pod> = Api::namespaced(
        shared.client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or(""),
    );
    let name = pod.metadata.name.clone().unwrap_or_default();
    if plan.terminated {
        if !gone {
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match pods.delete(&name, &dp).await {
                Ok(_) => {}
                Err(e) if matches!(api_code(&e), Some(404 | 409)) => {}
                Err(e) => {
                    warn!(error = %e, "finishing the deletion of a pod");
                    return Some(Duration::from_secs(2));
                }
            }
        }
        rt.remove_pod(&uid);
        return None;
    }

    // Status, when it changed.
    if !gone {
        let body = json!({ "status": plan.status });
        if mem.last_status.as_ref() != Some(&body) {
            match pods
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Strategic(body.clone()),
                )
                .await
            {
                Ok(_) => mem.last_status = Some(body),
                Err(e) if api_code(&e) == Some(404) => {}
                Err(e) => {
                    warn!(error = %Error::StatusFailed { pod: format!("{}/{name}", pod.metadata.namespace.as_deref().unwrap_or("")), source: e }, "pod status")
                }
            }
        }
    }

    // Probes due now run; the verdicts change the next pass.
    let mut next = plan
        .wake_in
        .unwrap_or(shared.cfg.resync)
        .min(shared.cfg.resync);
    let mut probed = false;
    for (c, init) in &containers {
        if *init {
            continue;
        }
        let Some(a) = obs.containers[&c.name].current.as_ref() else {
            continue;
        };
        let AttemptState::Running { started_ms } = a.state else {
            continue;
        };
        let key = (c.name.clone(), a.index);
        let probes = mem.probes.entry(key.clone()).or_default().clone();
        let (due, wait) = probes.due(c, started_ms, now);
        if let Some(w) = wait {
            next = next.min(w);
        }
        if due.is_empty() {
            continue;
        }
        let init_id = rt.init_of(&uid, &c.name, a.index);
        let spec =
            state::read_json::<LaunchSpec>(&rt.layout.attempt(&uid, &c.name, a.index), state::SPEC)
                .unwrap_or_default();
        let ip = obs.pod_ip.clone().unwrap_or_default();
        let mut updated = probes.clone();
        for kind in due {
            let Some(p) = crate::probe::probe_of(c, kind) else {
                continue;
            };
            let timing = Timing::of(p);
            let check = crate::probe::check(p, c, &ip);
            let result = crate::prober::run(&check, timing.timeout, init_id, &spec).await;
            if let Err(msg) = &result {
                let key = format!("probe:{}:{}:{}", c.name, a.index, kind.as_str());
                if mem.reported.insert(key) {
                    shared
                        .event(
                            &pod,
                            EventType::Warning,
                            "Unhealthy",
                            format!("{} probe failed: {msg}", kind.as_str()),
                        )
                        .await;
                }
            }
            let before = updated.get(kind).result;
            updated.set(
                kind,
                updated
                    .get(kind)
                    .observe(&timing, result.is_ok(), state::now_ms()),
            );
            if updated.get(kind).result != before {
                probed = true;
            }
        }
        let (_, wait) = updated.due(c, started_ms, state::now_ms());
        if let Some(w) = wait {
            next = next.min(w);
        }
        mem.probes.insert(key, updated);
    }
    if probed {
        next = Duration::ZERO;
    }
    Some(next.max(Duration::from_millis(50)))
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
        let cases: Vec<(&str, Vec<(bool, Arc<Pod>)>, Option<&str>)> = vec![
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
