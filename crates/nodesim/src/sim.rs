//! The executor: [`NodeSimulator`] keeps the state of every simulated node
//! and pod of one target cluster, and three background tasks act on it.
//!
//! * The **ticker** wakes every [`SimConfig::tick`] (or at once when a
//!   watcher or a caller signals a change), asks the pure planners
//!   ([`crate::status::plan_node`], [`crate::pods::plan_pod`]) what is due
//!   for every node and pod, and dispatches each due job as a short task
//!   behind one semaphore of [`SimConfig::max_in_flight`] permits. One
//!   ticker for all nodes, not one timer task per node, keeps thousands of
//!   nodes cheap: an idle node costs a map entry and a few comparisons per
//!   tick, and renewals of nodes that fall due together share the permits.
//! * The **node watcher** follows all Nodes and turns the fault annotations
//!   of simulated ones into [`NodeFaults`], and notices deleted Nodes.
//! * The **pod watcher** follows all Pods bound to a node.
//!
//! A node or pod has at most one job in flight (`busy`); a failed job is
//! retried with exponential backoff. Everything the simulator writes goes
//! through the Kubernetes API with kube-rs, so it runs unchanged against a
//! real cluster.
//!
//! What it never does: run containers, re-create a Node object that someone
//! deleted while the kubelet runs (a running kubelet does not re-register),
//! or delete Node objects (the machine controller does).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::{Notify, Semaphore, broadcast, watch};
use tracing::{debug, warn};

mod ticker;
mod watchers;
use ticker::run_ticker;
use watchers::{watch_nodes, watch_pods};

use crate::config::SimConfig;
use crate::error::Error;
use crate::faults::NodeFaults;
use crate::objects::{LEASE_NAMESPACE, lease_object, lease_renewal, node_object, status_patch};
use crate::pods::{PodHost, PodPlan, attached_volume_name, plan_pod, pvc_claims};
use crate::spec::NodeSpec;
use crate::status::{
    NodePlan, NodeView, Posted, booted, first_renewal_due, next_renewal_due, plan_node,
};

/// Simulated kubelets for one target cluster. Cheap to clone; clones share
/// the simulation. The background tasks stop when the last clone is dropped
/// (or on [`NodeSimulator::shutdown`]).
#[derive(Clone)]
pub struct NodeSimulator {
    shared: Arc<Shared>,
    // Held only to be dropped: when the last clone goes, the background
    // tasks see the channel close and stop.
    stop: Arc<watch::Sender<bool>>,
}

/// Counters and gauges of a simulator, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Nodes whose VM exists.
    pub nodes: usize,
    /// Of those, nodes whose last posted status is `Ready=True`.
    pub ready: usize,
    /// Node objects created.
    pub registrations: u64,
    /// Node status patches.
    pub status_posts: u64,
    /// Lease renewals (patches).
    pub lease_renewals: u64,
    /// Leases created.
    pub lease_creates: u64,
    /// Pod status patches.
    pub pod_status_posts: u64,
    /// Pods finished after deletion.
    pub pod_finalizations: u64,
    /// Failed API calls.
    pub api_errors: u64,
}

#[derive(Default)]
struct Counters {
    registrations: AtomicU64,
    status_posts: AtomicU64,
    lease_renewals: AtomicU64,
    lease_creates: AtomicU64,
    pod_status_posts: AtomicU64,
    pod_finalizations: AtomicU64,
    api_errors: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

struct Shared {
    client: Client,
    cfg: SimConfig,
    state: Mutex<State>,
    wake: Notify,
    permits: Arc<Semaphore>,
    counters: Counters,
    vanished: broadcast::Sender<String>,
    generation: AtomicU64,
}

#[derive(Default)]
struct State {
    nodes: HashMap<String, SimNode>,
    pods: HashMap<PodKey, SimPod>,
    /// Nodes changed since the last plan (registered, a job's outcome, a
    /// fault, a pod of theirs): a plan brought on by a wake-up looks only
    /// at these. What time alone makes due (a boot completing, a lease
    /// renewal, a retry) waits for the full plan of the next tick.
    touched: HashSet<String>,
    /// When every node was last planned; `None`: the next plan is full.
    last_full: Option<tokio::time::Instant>,
}

impl State {
    /// Marks `node` for the next plan.
    fn touch(&mut self, node: &str) {
        if !self.touched.contains(node) {
            self.touched.insert(node.to_string());
        }
    }
}

/// Namespace and name.
type PodKey = (String, String);

struct SimNode {
    /// Distinguishes a re-registered node from its previous incarnation, so
    /// that a late job result of the old one is ignored.
    generation: u64,
    spec: Arc<NodeSpec>,
    started: Timestamp,
    /// The VM exists: false after [`NodeSimulator::deregister`] or a vanish
    /// fault. The entry stays so that the lifecycle verdict can still be
    /// given, until the Node object is deleted.
    vm_running: bool,
    /// UID of the Node object once created or adopted.
    uid: Option<String>,
    registered_at: Option<Timestamp>,
    gone: bool,
    faults: NodeFaults,
    last_renewal: Option<Timestamp>,
    renewal_due: Option<Timestamp>,
    posted: Option<Posted>,
    /// The next post must carry the complete status (an adopted node, or a
    /// server that dropped the status sent with the create).
    full_status: bool,
    busy: bool,
    failures: u32,
    retry_at: Option<Timestamp>,
    /// Whether the node could run pods at the last plan; a change marks its
    /// pods for another look.
    pods_up: bool,
}

impl SimNode {
    fn kubelet_running(&self) -> bool {
        self.vm_running && !self.faults.kubelet_stopped
    }

    fn waiting(&self, now: Timestamp) -> bool {
        self.busy || self.retry_at.is_some_and(|t| t > now)
    }
}

enum Volumes {
    /// Attached volume names (empty for pods without claims).
    Resolved(Vec<String>),
    /// Claims whose volumes are still to be looked up.
    Unresolved(Vec<String>),
}

struct SimPod {
    pod: Arc<Pod>,
    uid: String,
    node: String,
    volumes: Volumes,
    /// Changed since the last decision.
    dirty: bool,
    /// A volume lookup failed: post the waiting status before trying again.
    resolve_failed: bool,
    busy: bool,
    failures: u32,
    retry_at: Option<Timestamp>,
}

struct NodeJob {
    name: String,
    generation: u64,
    spec: Arc<NodeSpec>,
    uid: Option<String>,
    plan: NodePlan,
    full_status: bool,
    renewal_due: Option<Timestamp>,
}

#[derive(Default)]
struct NodeOutcome {
    uid: Option<String>,
    adopted_faults: Option<NodeFaults>,
    posted: Option<Posted>,
    /// Whether the complete status still has to be posted, when this job
    /// had a say in it.
    full_pending: Option<bool>,
    renewed: Option<Timestamp>,
    next_renewal_due: Option<Timestamp>,
    gone: bool,
    error: Option<Error>,
}

enum PodAction {
    Post(Box<PodStatus>),
    Finalize,
    Resolve(Vec<String>),
}

struct PodJob {
    key: PodKey,
    uid: String,
    action: PodAction,
}

enum Job {
    Node(NodeJob),
    Pod(PodJob),
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

fn backoff(cfg: &SimConfig, failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(16);
    (cfg.min_backoff * factor).min(cfg.max_backoff)
}

impl NodeSimulator {
    /// Starts simulating against the target cluster behind `client`. Spawns
    /// the background tasks, so it must be called inside a Tokio runtime.
    pub fn new(client: Client, cfg: SimConfig) -> NodeSimulator {
        let (stop, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            client,
            permits: Arc::new(Semaphore::new(cfg.max_in_flight.max(1))),
            cfg,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            counters: Counters::default(),
            vanished: broadcast::channel(1024).0,
            generation: AtomicU64::new(0),
        });
        tokio::spawn(run_ticker(shared.clone(), stop.subscribe()));
        tokio::spawn(watch_nodes(shared.clone(), stop.subscribe()));
        tokio::spawn(watch_pods(shared.clone(), stop.subscribe()));
        NodeSimulator {
            shared,
            stop: Arc::new(stop),
        }
    }

    /// The simulator's settings.
    pub fn config(&self) -> &SimConfig {
        &self.shared.cfg
    }

    /// Starts a VM: its kubelet registers the node (or adopts an existing
    /// Node of that name, as after a controller restart), turns it `Ready`
    /// after `spec.boot_delay`, and keeps its lease and status. Returns at
    /// once; the API work happens in the background.
    ///
    /// Registering a node that is already simulated with the same spec does
    /// nothing; with another spec, the VM is restarted with the new one.
    pub fn register(&self, spec: NodeSpec) {
        let now = Timestamp::now();
        let mut st = self.shared.state.lock();
        if let Some(n) = st.nodes.get(&spec.name)
            && n.vm_running
            && *n.spec == spec
        {
            return;
        }
        let generation = self.shared.generation.fetch_add(1, Ordering::Relaxed);
        let faults = NodeFaults::from_annotations(Some(&spec.annotations));
        st.touch(&spec.name);
        st.nodes.insert(
            spec.name.clone(),
            SimNode {
                generation,
                spec: Arc::new(spec),
                started: now,
                vm_running: true,
                uid: None,
                registered_at: None,
                gone: false,
                faults,
                last_renewal: None,
                renewal_due: None,
                posted: None,
                full_status: false,
                busy: false,
                failures: 0,
                retry_at: None,
                pods_up: false,
            },
        );
        drop(st);
        self.shared.wake.notify_one();
    }

    /// Stops a VM: its kubelet stops renewing the lease, posting status and
    /// running pods. The Node object stays (the machine controller deletes
    /// it); standing in for the node-lifecycle controller, the simulator
    /// sets its conditions `Unknown` after the grace period. Returns whether
    /// the VM was running.
    pub fn deregister(&self, name: &str) -> bool {
        let mut st = self.shared.state.lock();
        let Some(n) = st.nodes.get_mut(name) else {
            return false;
        };
        let was = n.vm_running;
        n.vm_running = false;
        if n.uid.is_none() && !n.busy {
            st.nodes.remove(name);
        }
        st.touch(name);
        drop(st);
        self.shared.wake.notify_one();
        was
    }

    /// Whether a VM of that name runs.
    pub fn is_simulated(&self, name: &str) -> bool {
        self.shared
            .state
            .lock()
            .nodes
            .get(name)
            .is_some_and(|n| n.vm_running)
    }

    /// Names of the running VMs, sorted.
    pub fn node_names(&self) -> Vec<String> {
        let st = self.shared.state.lock();
        let mut names: Vec<String> = st
            .nodes
            .iter()
            .filter(|(_, n)| n.vm_running)
            .map(|(k, _)| k.clone())
            .collect();
        names.sort();
        names
    }

    /// Counters and gauges.
    pub fn stats(&self) -> SimStats {
        let (nodes, ready) = {
            let st = self.shared.state.lock();
            let running = st.nodes.values().filter(|n| n.vm_running && !n.gone);
            running.fold((0, 0), |(all, ready), n| {
                let r = n.posted.as_ref().is_some_and(Posted::is_ready);
                (all + 1, ready + usize::from(r))
            })
        };
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SimStats {
            nodes,
            ready,
            registrations: get(&c.registrations),
            status_posts: get(&c.status_posts),
            lease_renewals: get(&c.lease_renewals),
            lease_creates: get(&c.lease_creates),
            pod_status_posts: get(&c.pod_status_posts),
            pod_finalizations: get(&c.pod_finalizations),
            api_errors: get(&c.api_errors),
        }
    }

    /// Names of nodes whose VM vanished through the [`crate::faults::VANISH`]
    /// annotation, as they vanish. A provider subscribes to drop the VM
    /// records.
    pub fn subscribe_vanished(&self) -> broadcast::Receiver<String> {
        self.shared.vanished.subscribe()
    }

    /// Stops the background tasks of every clone now. Jobs already in
    /// flight finish.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }
}

impl Shared {
    /// Decides what is due now and marks the chosen nodes and pods busy.
    /// Every node is looked at once per tick; a plan in between (woken by
    /// a change) looks only at the nodes touched since the last one, so
    /// a job finishing costs what its node costs, not what the fleet does.
    fn plan(&self, now: Timestamp) -> Vec<Job> {
        let mut st = self.state.lock();
        let full = st
            .last_full
            .is_none_or(|t| t.elapsed() + ticker::PLAN_GAP >= self.cfg.tick);
        if full {
            st.last_full = Some(tokio::time::Instant::now());
            st.touched.clear();
        }
        let touched = std::mem::take(&mut st.touched);
        let State { nodes, pods, .. } = &mut *st;
        let mut volumes: HashMap<&str, BTreeSet<&String>> = HashMap::new();
        for p in pods.values() {
            if let Volumes::Resolved(v) = &p.volumes
                && !v.is_empty()
            {
                volumes.entry(p.node.as_str()).or_default().extend(v);
            }
        }
        let mut jobs = Vec::new();
        let mut changed_hosts = HashSet::new();
        let mut one = |name: &String, n: &mut SimNode| {
            let up = n.uid.is_some()
                && !n.gone
                && n.kubelet_running()
                && booted(n.started, n.spec.boot_delay, now);
            if up != n.pods_up {
                n.pods_up = up;
                changed_hosts.insert(name.clone());
            }
            if n.waiting(now) {
                return;
            }
            let vols: Vec<String> = volumes
                .get(name.as_str())
                .map(|s| s.iter().map(|v| (*v).clone()).collect())
                .unwrap_or_default();
            let view = NodeView {
                registered: n.uid.is_some(),
                gone: n.gone,
                kubelet_running: n.kubelet_running(),
                started: n.started,
                boot_delay: n.spec.boot_delay,
                faults: &n.faults,
                last_renewal: n.last_renewal,
                renewal_due: n.renewal_due,
                posted: n.posted.as_ref(),
                volumes: &vols,
            };
            let plan = plan_node(&view, &self.cfg, now);
            if plan.is_empty() {
                return;
            }
            n.busy = true;
            jobs.push(Job::Node(NodeJob {
                name: name.clone(),
                generation: n.generation,
                spec: n.spec.clone(),
                uid: n.uid.clone(),
                plan,
                full_status: n.full_status,
                renewal_due: n.renewal_due,
            }));
        };
        if full {
            for (name, n) in nodes.iter_mut() {
                one(name, n);
            }
        } else {
            for name in &touched {
                if let Some(n) = nodes.get_mut(name) {
                    one(name, n);
                }
            }
        }
        drop(volumes);
        for (key, p) in pods.iter_mut() {
            let Some(n) = nodes.get(&p.node) else {
                continue;
            };
            if changed_hosts.contains(&p.node) {
                p.dirty = true;
            }
            if !p.dirty || p.busy || p.retry_at.is_some_and(|t| t > now) {
                continue;
            }
            let host = PodHost {
                running: n.pods_up,
                host_ip: n.spec.internal_ip().unwrap_or_default(),
            };
            p.dirty = false;
            let resolved = matches!(p.volumes, Volumes::Resolved(_));
            let action = match plan_pod(&p.pod, &host, resolved, now) {
                PodPlan::Finalize => PodAction::Finalize,
                PodPlan::Post(s) if resolved || p.resolve_failed => PodAction::Post(s),
                PodPlan::Post(_) | PodPlan::Nothing if !resolved && host.running => {
                    let Volumes::Unresolved(claims) = &p.volumes else {
                        unreachable!("checked above")
                    };
                    PodAction::Resolve(claims.clone())
                }
                PodPlan::Post(_) | PodPlan::Nothing => continue,
            };
            p.busy = true;
            jobs.push(Job::Pod(PodJob {
                key: key.clone(),
                uid: p.uid.clone(),
                action,
            }));
        }
        jobs
    }

    async fn run_node_job(&self, job: NodeJob) -> NodeOutcome {
        let mut out = NodeOutcome {
            uid: job.uid.clone(),
            ..NodeOutcome::default()
        };
        if let Err(e) = self.node_job_steps(&job, &mut out).await {
            bump(&self.counters.api_errors);
            out.error = Some(e);
        }
        out
    }

    async fn node_job_steps(&self, job: &NodeJob, out: &mut NodeOutcome) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let name = job.name.as_str();
        let mut full = job.full_status;
        let mut post = job.plan.post.clone();
        out.full_pending = Some(full);
        if job.plan.register {
            let posted = post.as_ref().expect("a registration always posts");
            let node = node_object(&job.spec, &self.cfg, posted);
            match nodes.create(&PostParams::default(), &node).await {
                Ok(created) => {
                    bump(&self.counters.registrations);
                    out.uid = created.metadata.uid.clone();
                    // Some servers ignore the status sent with a create;
                    // then it goes in full with the first status patch.
                    let kept = created
                        .status
                        .as_ref()
                        .is_some_and(|s| s.node_info.is_some());
                    if kept {
                        out.posted = post.take();
                    } else {
                        full = true;
                        out.full_pending = Some(true);
                    }
                }
                Err(e) if api_code(&e) == Some(409) => {
                    // A Node of that name exists: a restarted controller's
                    // VM, or a new VM reusing the name. Adopt it.
                    let existing = nodes.get(name).await.map_err(|source| Error::Register {
                        node: name.to_string(),
                        source,
                    })?;
                    out.uid = existing.metadata.uid.clone();
                    out.adopted_faults = Some(NodeFaults::from_annotations(
                        existing.metadata.annotations.as_ref(),
                    ));
                    full = true;
                    out.full_pending = Some(true);
                }
                Err(source) => {
                    return Err(Error::Register {
                        node: name.to_string(),
                        source,
                    });
                }
            }
        }
        if let Some(posted) = post {
            let patch = status_patch(&job.spec, &self.cfg, &posted, full);
            let pp = PatchParams::default();
            match nodes
                .patch_status(name, &pp, &Patch::Strategic(patch))
                .await
            {
                Ok(_) => {
                    bump(&self.counters.status_posts);
                    out.posted = Some(posted);
                    out.full_pending = Some(false);
                }
                Err(e) if api_code(&e) == Some(404) => {
                    out.gone = true;
                    return Ok(());
                }
                Err(source) => {
                    return Err(Error::PostStatus {
                        node: name.to_string(),
                        source,
                    });
                }
            }
        }
        if job.plan.renew_lease
            && let Some(uid) = out.uid.clone()
        {
            let now = Timestamp::now();
            let leases: Api<Lease> = Api::namespaced(self.client.clone(), LEASE_NAMESPACE);
            let renewal = lease_renewal(name, &self.cfg, now);
            let interval = self.cfg.lease_renew_interval;
            let renewed = match leases
                .patch(name, &PatchParams::default(), &Patch::Merge(renewal))
                .await
            {
                Ok(_) => {
                    bump(&self.counters.lease_renewals);
                    // A node this simulator has not renewed before (adopted
                    // after a restart) is spread like a new one.
                    Ok(match job.renewal_due {
                        None => first_renewal_due(name, now, interval),
                        due => next_renewal_due(due, now, interval),
                    })
                }
                Err(e) if api_code(&e) == Some(404) => {
                    let lease = lease_object(name, &uid, &self.cfg, now);
                    let r = leases.create(&PostParams::default(), &lease).await;
                    r.map(|_| {
                        bump(&self.counters.lease_creates);
                        first_renewal_due(name, now, interval)
                    })
                }
                Err(e) => Err(e),
            };
            let due = renewed.map_err(|source| Error::RenewLease {
                node: name.to_string(),
                source,
            })?;
            out.renewed = Some(now);
            out.next_renewal_due = Some(due);
        }
        Ok(())
    }

    fn apply_node_outcome(&self, name: &str, generation: u64, out: NodeOutcome) {
        let now = Timestamp::now();
        let mut st = self.state.lock();
        let Some(n) = st.nodes.get_mut(name) else {
            return;
        };
        if n.generation != generation {
            return;
        }
        n.busy = false;
        st.touch(name);
        let Some(n) = st.nodes.get_mut(name) else {
            return;
        };
        if n.uid.is_none() && out.uid.is_some() {
            n.registered_at = Some(now);
        }
        n.uid = out.uid.or(n.uid.take());
        if let Some(f) = out.adopted_faults {
            n.faults = f;
        }
        if let Some(p) = out.posted {
            n.posted = Some(p);
        }
        if let Some(full) = out.full_pending {
            n.full_status = full;
        }
        if out.renewed.is_some() {
            n.last_renewal = out.renewed;
            n.renewal_due = out.next_renewal_due;
        }
        if out.gone {
            n.gone = true;
        }
        match out.error {
            None => {
                n.failures = 0;
                n.retry_at = None;
            }
            Some(e) => {
                n.failures += 1;
                let delay = backoff(&self.cfg, n.failures);
                n.retry_at = now.checked_add(delay).ok();
                warn!(error = %e, retry_in = ?delay, "simulated kubelet");
            }
        }
    }

    async fn run_pod_job(&self, job: PodJob) -> Result<Option<Vec<String>>, Error> {
        let (ns, name) = &job.key;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let pod_err = |source| Error::Pod {
            pod: format!("{ns}/{name}"),
            source,
        };
        match job.action {
            PodAction::Post(status) => {
                let patch = json!({ "status": status });
                let pp = PatchParams::default();
                match pods.patch_status(name, &pp, &Patch::Strategic(patch)).await {
                    Ok(_) => bump(&self.counters.pod_status_posts),
                    Err(e) if api_code(&e) == Some(404) => {}
                    Err(e) => return Err(pod_err(e)),
                }
                Ok(None)
            }
            PodAction::Finalize => {
                let dp = DeleteParams {
                    grace_period_seconds: Some(0),
                    preconditions: Some(Preconditions {
                        uid: Some(job.uid.clone()),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match pods.delete(name, &dp).await {
                    Ok(_) => bump(&self.counters.pod_finalizations),
                    // Gone already, or replaced by a new pod of that name.
                    Err(e) if matches!(api_code(&e), Some(404 | 409)) => {}
                    Err(e) => return Err(pod_err(e)),
                }
                Ok(None)
            }
            PodAction::Resolve(claims) => {
                let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
                let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
                let mut names = Vec::new();
                for claim in claims {
                    let pvc = pvcs.get_opt(&claim).await.map_err(pod_err)?;
                    let Some(pv_name) = pvc.and_then(|c| c.spec).and_then(|s| s.volume_name) else {
                        return Err(Error::ClaimUnbound {
                            pod: format!("{ns}/{name}"),
                            claim,
                        });
                    };
                    let pv = pvs.get_opt(&pv_name).await.map_err(pod_err)?;
                    let spec = pv.and_then(|pv| pv.spec);
                    names.push(attached_volume_name(&pv_name, spec.as_ref()));
                }
                names.sort();
                names.dedup();
                Ok(Some(names))
            }
        }
    }

    fn apply_pod_outcome(
        &self,
        key: &PodKey,
        uid: &str,
        result: Result<Option<Vec<String>>, Error>,
    ) {
        let now = Timestamp::now();
        let mut st = self.state.lock();
        let Some(p) = st.pods.get_mut(key) else {
            return;
        };
        if p.uid != uid {
            return;
        }
        p.busy = false;
        match result {
            Ok(resolved) => {
                p.failures = 0;
                p.retry_at = None;
                if let Some(names) = resolved {
                    p.volumes = Volumes::Resolved(names);
                    p.dirty = true;
                    let node = p.node.clone();
                    st.touch(&node);
                }
            }
            Err(e) => {
                if matches!(e, Error::ClaimUnbound { .. }) {
                    debug!(error = %e, "waiting for volume");
                    p.resolve_failed = true;
                } else {
                    bump(&self.counters.api_errors);
                    warn!(error = %e, "simulated kubelet");
                }
                p.failures += 1;
                p.retry_at = now.checked_add(backoff(&self.cfg, p.failures)).ok();
                p.dirty = true;
            }
        }
        drop(st);
        self.wake.notify_one();
    }

    /// A Node was added or changed.
    fn observe_node(&self, node: &Node) {
        let Some(name) = node.metadata.name.as_deref() else {
            return;
        };
        let mut st = self.state.lock();
        let Some(n) = st.nodes.get_mut(name) else {
            return;
        };
        if n.uid.is_some() && n.uid != node.metadata.uid {
            return;
        }
        let faults = NodeFaults::from_annotations(node.metadata.annotations.as_ref());
        if faults == n.faults {
            return;
        }
        let vanish = faults.vanish && !n.faults.vanish && n.vm_running;
        n.faults = faults;
        if vanish {
            n.vm_running = false;
        }
        st.touch(name);
        drop(st);
        if vanish {
            // Nobody listening is fine: the VM is gone either way.
            let _ = self.vanished.send(name.to_string());
        }
        self.wake.notify_one();
    }

    /// A Node was deleted (or missed in a relist).
    fn forget_node(&self, name: &str, uid: Option<&str>) {
        let mut st = self.state.lock();
        let Some(n) = st.nodes.get_mut(name) else {
            return;
        };
        if n.uid.is_none() || n.uid.as_deref() != uid {
            return;
        }
        n.gone = true;
        if !n.vm_running && !n.busy {
            st.nodes.remove(name);
        }
        st.touch(name);
    }

    fn observe_pod(&self, pod: Pod) {
        let (Some(ns), Some(name), Some(uid)) = (
            pod.metadata.namespace.clone(),
            pod.metadata.name.clone(),
            pod.metadata.uid.clone(),
        ) else {
            return;
        };
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            return;
        };
        let mut st = self.state.lock();
        let ours = st.nodes.contains_key(&node);
        if ours {
            // Its volumes may change the node's status.
            st.touch(&node);
        }
        let key = (ns, name);
        match st.pods.get_mut(&key) {
            Some(p) if p.uid == uid => {
                p.pod = Arc::new(pod);
                p.dirty = true;
            }
            _ => {
                let claims = pvc_claims(&pod);
                let volumes = if claims.is_empty() {
                    Volumes::Resolved(Vec::new())
                } else {
                    Volumes::Unresolved(claims)
                };
                st.pods.insert(
                    key,
                    SimPod {
                        pod: Arc::new(pod),
                        uid,
                        node,
                        volumes,
                        dirty: true,
                        resolve_failed: false,
                        busy: false,
                        failures: 0,
                        retry_at: None,
                    },
                );
            }
        }
        drop(st);
        if ours {
            self.wake.notify_one();
        }
    }

    fn forget_pod(&self, key: &PodKey, uid: Option<&str>) {
        let mut st = self.state.lock();
        if st
            .pods
            .get(key)
            .is_some_and(|p| Some(p.uid.as_str()) == uid)
        {
            if let Some(p) = st.pods.remove(key) {
                st.touch(&p.node);
            }
            drop(st);
            // Its volumes may detach.
            self.wake.notify_one();
        }
    }
}
