//! What every controller shares: API clients, the machine cache, settings,
//! the record of writes not yet visible in the caches (expectations) and
//! the backoff of failed reconciles; plus what only the machine controller
//! needs ([`MachineDeps`]).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::{Machine, MachineClass, MachineSet};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};

use super::cache::{self, Cache, IndexKey};
use parking_lot::Mutex;

use crate::backoff::RateLimiter;
use crate::machine::{EvictRecord, Settings, merge_secrets};
use crate::metrics::Metrics;

/// Settings of the controllers (upstream's flags).
#[derive(Clone, Debug)]
pub struct Config {
    /// The control namespace holding machines, sets and deployments.
    pub namespace: String,
    /// `--safety-up` / `--safety-down`.
    pub safety_up: i64,
    pub safety_down: i64,
    /// How many machines of one deployment may be failed for health at once
    /// (upstream: always 1).
    pub max_health_replacements: u32,
    /// The machine controller's flags; machines override them in their spec.
    pub machine: Settings,
    /// `--machine-safety-orphan-vms-period`: how often VMs without machines
    /// are looked for.
    pub machine_safety_orphan_vms_period: Duration,
    /// `--machine-safety-overshooting-period`: how often machine sets are
    /// checked for owning too many machines.
    pub machine_safety_overshooting_period: Duration,
    /// `--machine-safety-apiserver-statuscheck-period`: how often the API
    /// servers are probed.
    pub machine_safety_apiserver_statuscheck_period: Duration,
    /// `--machine-safety-apiserver-statuscheck-timeout`: how long the API
    /// servers may be unreachable before the machine controller freezes.
    pub machine_safety_apiserver_statuscheck_timeout: Duration,
    /// Machine sets and deployments reconciled at once (upstream MCM's
    /// `--concurrent-syncs`).
    pub concurrent_syncs: u16,
    /// Machines reconciled at once (the machine controller's
    /// `--concurrent-syncs`).
    pub machine_concurrent_syncs: u16,
    /// Where the controllers record their metrics and readiness.
    pub metrics: Arc<Metrics>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            namespace: "default".into(),
            safety_up: 2,
            safety_down: 1,
            max_health_replacements: 1,
            machine: Settings::default(),
            machine_safety_orphan_vms_period: Duration::from_secs(15 * 60),
            machine_safety_overshooting_period: Duration::from_secs(60),
            machine_safety_apiserver_statuscheck_period: Duration::from_secs(60),
            machine_safety_apiserver_statuscheck_timeout: Duration::from_secs(30),
            concurrent_syncs: 10,
            machine_concurrent_syncs: 50,
            metrics: Arc::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading or writing {what} failed: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("scaling {set} failed: {message}")]
    ScaleFailed { set: String, message: String },
    #[error("serialising {0} failed")]
    Encode(String),
    #[error("freezing or unfreezing {0} failed: its Frozen condition kept conflicting")]
    FreezeConflict(String),
    #[error("a step that works on the target cluster ran without one")]
    NoTarget,
}

impl Error {
    pub fn api(what: impl Into<String>, source: kube::Error) -> Error {
        Error::Api {
            what: what.into(),
            source,
        }
    }
}

/// The secrets of `class` merged (the credentials secret's keys win); a
/// missing secret counts as empty (spec §1). A reference without a
/// namespace means `default_ns`. Each secret comes from `cached` when it
/// holds it, else from the API (a secret just created, or in another
/// namespace). The machine controller and the orphan collector both hand
/// the driver what this returns.
pub async fn class_secret(
    control: &kube::Client,
    default_ns: &str,
    class: &MachineClass,
    cached: Option<&Store<Secret>>,
) -> Result<Secret, Error> {
    let mut found: [Option<Secret>; 2] = [None, None];
    for (slot, r) in found
        .iter_mut()
        .zip([&class.secret_ref, &class.credentials_secret_ref])
    {
        let Some(r) = r else {
            continue;
        };
        let ns = r
            .namespace
            .clone()
            .unwrap_or_else(|| default_ns.to_string());
        let name = r.name.clone().unwrap_or_default();
        if let Some(hit) = cached.and_then(|c| c.get(&ObjectRef::new(&name).within(&ns))) {
            *slot = Some((*hit).clone());
            continue;
        }
        let secrets: Api<Secret> = Api::namespaced(control.clone(), &ns);
        *slot = secrets
            .get_opt(&name)
            .await
            .map_err(|e| Error::api(format!("secret {ns}/{name}"), e))?;
    }
    let [secret_ref, credentials] = &found;
    Ok(merge_secrets(secret_ref.as_ref(), credentials.as_ref()))
}

/// Writes a controller made that its cache has not shown yet. A controller
/// does not act on an owner until its cache reflects its own last writes (or
/// they expire), so a slow cache never makes it create a machine twice —
/// upstream records these but does not wait for them.
#[derive(Default)]
pub struct Expectations {
    inner: Mutex<HashMap<String, Expected>>,
}

struct Expected {
    created: Vec<String>,
    deleted: Vec<String>,
    at: Instant,
}

/// After this long, unfulfilled expectations are dropped.
pub const EXPECTATION_TTL: Duration = Duration::from_secs(300);

impl Expectations {
    pub fn expect(&self, owner: &str, created: Vec<String>, deleted: Vec<String>) {
        self.inner.lock().insert(
            owner.to_string(),
            Expected {
                created,
                deleted,
                at: Instant::now(),
            },
        );
    }

    /// Whether the cache shows every expected write of `owner`: created
    /// names present, deleted names gone or deleting.
    pub fn satisfied(&self, owner: &str, present: impl Fn(&str) -> Option<bool>) -> bool {
        let mut map = self.inner.lock();
        let Some(e) = map.get(owner) else {
            return true;
        };
        // `present` answers Some(true) for a live machine, Some(false) for
        // one being deleted, None for one not in the cache.
        let done = e.created.iter().all(|n| present(n).is_some())
            && e.deleted.iter().all(|n| present(n) != Some(true));
        if done || e.at.elapsed() > EXPECTATION_TTL {
            map.remove(owner);
            return true;
        }
        false
    }

    pub fn forget(&self, owner: &str) {
        self.inner.lock().remove(owner);
    }
}

/// How many times its own planning time a machine set waits between two
/// passes that plan. A pass walks every machine of the set, and every
/// machine's status write triggers one, so a set of 10,000 machines being
/// created planned a hundred times a second, each time over all of them:
/// the fleet's cost grew with its square. With the gap a set's planning
/// takes at most 1/(1 + this) of a core, and a pass comes at most this
/// many plan-times late (a few ms at 1,000 machines, ~40 ms at 10,000).
pub const PASS_GAP_FACTOR: u32 = 20;

/// How long a set whose last planning ended at `ended` and took `cost`
/// still waits at `now` before it plans again; `None`: plan now.
pub fn pass_wait(last: Option<(Instant, Duration)>, now: Instant) -> Option<Duration> {
    let (ended, cost) = last?;
    let due = ended + cost * PASS_GAP_FACTOR;
    (due > now).then(|| due - now)
}

/// The planning time of each machine set's last pass (by UID), for
/// [`pass_wait`].
#[derive(Default)]
pub struct PassPacing {
    last: Mutex<HashMap<String, (Instant, Duration)>>,
}

impl PassPacing {
    /// How long the set with `uid` waits before it plans again.
    pub fn wait(&self, uid: &str, now: Instant) -> Option<Duration> {
        pass_wait(self.last.lock().get(uid).copied(), now)
    }

    /// The set with `uid` finished planning at `ended`, which took `cost`.
    pub fn record(&self, uid: &str, ended: Instant, cost: Duration) {
        self.last.lock().insert(uid.to_string(), (ended, cost));
    }

    pub fn forget(&self, uid: &str) {
        self.last.lock().remove(uid);
    }
}

/// The backoff of failed reconciles: one [`RateLimiter`] per controller
/// (as client-go has one per work queue), keyed by `namespace/name`.
#[derive(Default)]
pub struct ErrorRequeues {
    limiters: Mutex<HashMap<&'static str, RateLimiter<String>>>,
}

impl ErrorRequeues {
    /// Records a failed reconcile of `key` in `controller` at `now`;
    /// returns how long it waits before the retry.
    pub fn failed(&self, controller: &'static str, key: &str, now: Instant) -> Duration {
        self.limiters
            .lock()
            .entry(controller)
            .or_default()
            .when(&key.to_string(), now)
    }

    /// `key` reconciled successfully in `controller`: its next failure
    /// starts over at the base delay.
    pub fn succeeded(&self, controller: &'static str, key: &str) {
        if let Some(l) = self.limiters.lock().get_mut(controller) {
            l.forget(&key.to_string());
        }
    }

    /// Failures of `key` in `controller` since its last success.
    pub fn failures(&self, controller: &'static str, key: &str) -> u32 {
        self.limiters
            .lock()
            .get(controller)
            .map_or(0, |l| l.failures(&key.to_string()))
    }
}

/// The backoff key of an object: `namespace/name`, as a work queue's.
pub fn requeue_key<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// A reconcile wrapped by [`forgetting`].
pub type ReconcileFuture = Pin<Box<dyn Future<Output = Result<Action, Error>> + Send>>;

/// Wraps `controller`'s reconciler so that a successful reconcile forgets
/// the object's past failures (client-go's `Forget`), whatever requeue it
/// asks for.
pub fn forgetting<K, F, Fut>(
    controller: &'static str,
    mut reconcile: F,
) -> impl FnMut(Arc<K>, Arc<Context>) -> ReconcileFuture
where
    K: Resource,
    F: FnMut(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    move |obj, ctx| {
        let key = requeue_key(obj.as_ref());
        let fut = reconcile(obj, ctx.clone());
        Box::pin(async move {
            let result = fut.await;
            if result.is_ok() {
                ctx.requeues.succeeded(controller, &key);
            }
            result
        })
    }
}

/// What the machine controller needs beyond the shared context. Absent
/// when the controllers run without a driver (the machine set and
/// deployment tests stand in for the machine controller themselves).
pub struct MachineDeps {
    /// The provider, linked in-process as upstream does.
    pub driver: Arc<dyn driver::Driver>,
    /// The target cluster's Nodes, filled by the watch that also triggers
    /// the machine controller, indexed by the machine-name label; `None`
    /// without a target cluster.
    pub nodes: Option<Cache<Node>>,
    /// Events on machines (reporter `machine-controller`), sharded by
    /// machine.
    pub recorder: super::events::EventRecorder,
    /// Per deleting machine (by UID), what its drain remembers per pod
    /// (by UID) between rounds.
    pub drains: Mutex<HashMap<String, HashMap<String, EvictRecord>>>,
    /// One lock per deployment (value of the machines' `name` label): the
    /// meltdown check and the `Failed` write it allows happen under it, so
    /// two machines of a deployment are never failed on the same count.
    pub health_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Machines (by UID) already warned that their class is gone, so the
    /// warning is one event, not one per pass.
    pub class_warned: Mutex<HashSet<String>>,
    /// The control namespace's MachineClasses and Secrets, filled by the
    /// watches that also trigger the class and secret controllers (empty
    /// until [`Self::with_classes`]).
    pub classes: Store<MachineClass>,
    pub secrets: Store<Secret>,
}

impl MachineDeps {
    /// `nodes` is the target cluster's Node cache, or `None` without a
    /// target cluster.
    pub fn new(
        driver: Arc<dyn driver::Driver>,
        nodes: impl Into<Option<Cache<Node>>>,
        recorder: super::events::EventRecorder,
    ) -> Self {
        MachineDeps {
            driver,
            nodes: nodes.into(),
            recorder,
            drains: Mutex::new(HashMap::new()),
            health_locks: Mutex::new(HashMap::new()),
            class_warned: Mutex::new(HashSet::new()),
            classes: reflector::store().0,
            secrets: reflector::store().0,
        }
    }

    /// Uses `classes` and `secrets` as the caches of the control
    /// namespace's classes and secrets.
    pub fn with_classes(mut self, classes: Store<MachineClass>, secrets: Store<Secret>) -> Self {
        self.classes = classes;
        self.secrets = secrets;
        self
    }

    /// The meltdown lock of one deployment.
    pub fn health_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.health_locks
            .lock()
            .entry(key.to_string())
            .or_default()
            .clone()
    }
}

/// The event reporter of the machine set and deployment controllers
/// (upstream's process name).
pub const REPORTER: &str = "machine-controller-manager";

pub struct Context {
    /// The control cluster: machines, sets, deployments, classes.
    pub control: kube::Client,
    /// The target cluster: nodes, pods, volumes, bootstrap tokens. `None`
    /// runs without one (upstream's `--target-kubeconfig=none`): machines
    /// are `Available` as soon as their VM exists, and nothing is drained,
    /// synced or probed there.
    pub target: Option<kube::Client>,
    /// The control namespace's machines and machine sets, indexed
    /// ([`cache`]).
    pub machines: Cache<Machine>,
    pub sets: Cache<MachineSet>,
    pub config: Config,
    pub expectations: Expectations,
    /// Events on machine sets and deployments (reporter
    /// `machine-controller-manager`).
    pub recorder: Recorder,
    /// Set when the machine controller runs.
    pub machine: Option<MachineDeps>,
    /// API-server reachability and the machine controller's freeze, kept
    /// by the safety controller.
    pub safety: super::safety::SafetyState,
    /// The backoff of failed reconciles, per controller and object.
    pub requeues: ErrorRequeues,
    /// The gap between two planning passes of each machine set.
    pub pacing: PassPacing,
}

impl Context {
    /// `target` is the target cluster's client, or `None` to run without
    /// one.
    pub fn new(
        control: kube::Client,
        target: impl Into<Option<kube::Client>>,
        machines: Cache<Machine>,
        sets: Cache<MachineSet>,
        config: Config,
        machine: Option<MachineDeps>,
    ) -> Arc<Context> {
        let recorder = Recorder::new(
            control.clone(),
            Reporter {
                controller: REPORTER.into(),
                instance: None,
            },
        );
        Arc::new(Context {
            control,
            target: target.into(),
            recorder,
            machines,
            sets,
            config,
            expectations: Expectations::default(),
            machine,
            safety: super::safety::SafetyState::default(),
            requeues: ErrorRequeues::default(),
            pacing: PassPacing::default(),
        })
    }

    /// Whether a target cluster is configured.
    pub fn has_target(&self) -> bool {
        self.target.is_some()
    }

    /// The requeue of an object whose reconcile by `controller` failed:
    /// rate limited per object and overall ([`crate::backoff`]), and
    /// counted in the retry metric.
    pub fn error_requeue<K: Resource>(&self, controller: &'static str, obj: &K) -> Duration {
        let after = self
            .requeues
            .failed(controller, &requeue_key(obj), Instant::now());
        self.config.metrics.retried(controller);
        after
    }

    /// Cached machine sets controlled by the deployment with `uid`.
    pub fn sets_of(&self, uid: &str) -> Vec<Arc<MachineSet>> {
        let mut sets = self.sets.by(&IndexKey::Controller(uid.to_string()));
        sets.retain(|s| controlled_by(&s.metadata, uid));
        sets
    }

    /// Cached machines controlled by the owner with `uid`.
    pub fn machines_of(&self, uid: &str) -> Vec<Arc<Machine>> {
        let mut machines = self.machines.by(&IndexKey::Controller(uid.to_string()));
        machines.retain(|m| controlled_by(&m.metadata, uid));
        machines
    }
}

/// Whether `uid` is the controller among the owners in `meta`.
pub fn controlled_by(meta: &kube::api::ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// Empty caches for machines and machine sets, indexed as the controllers
/// need (tests that run controllers without watches use them).
pub fn empty_caches() -> (Cache<Machine>, Cache<MachineSet>) {
    (
        cache::cache(cache::machine_keys).0,
        cache::cache(cache::set_keys).0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn error_requeues_are_kept_per_controller_and_object() {
        let r = ErrorRequeues::default();
        let t0 = Instant::now();
        // (controller, key, forget it first, expected wait)
        let table = [
            ("machine", "ns/a", false, ms(5)),
            ("machine", "ns/a", false, ms(10)),
            ("machineset", "ns/a", false, ms(5)),
            ("machine", "ns/b", false, ms(5)),
            ("machine", "ns/a", false, ms(20)),
            ("machine", "ns/a", true, ms(5)),
            ("machineset", "ns/a", false, ms(10)),
        ];
        for (i, (controller, key, forget, want)) in table.into_iter().enumerate() {
            if forget {
                r.succeeded(controller, key);
            }
            assert_eq!(r.failed(controller, key, t0), want, "case {i}");
        }
        assert_eq!(r.failures("machine", "ns/a"), 1);
        assert_eq!(r.failures("machineset", "ns/a"), 2);
        assert_eq!(r.failures("machinedeployment", "ns/a"), 0);
    }

    #[test]
    fn a_set_plans_again_after_its_gap() {
        let t0 = Instant::now();
        // (last planning: ended at t0 + ms, took ms; now at t0 + ms; wait)
        let table = [
            (None, 0, None),
            (Some((0, 1)), 0, Some(ms(20))),
            (Some((0, 1)), 5, Some(ms(15))),
            (Some((0, 1)), 20, None),
            (Some((0, 1)), 30, None),
            (Some((10, 2)), 10, Some(ms(40))),
            (Some((10, 2)), 49, Some(ms(1))),
            (Some((10, 0)), 10, None),
        ];
        for (i, (last, now, want)) in table.into_iter().enumerate() {
            let last = last.map(|(end, cost)| (t0 + ms(end), ms(cost)));
            assert_eq!(pass_wait(last, t0 + ms(now)), want, "case {i}");
        }
        let p = PassPacing::default();
        assert_eq!(p.wait("a", t0), None);
        p.record("a", t0, ms(3));
        assert_eq!(p.wait("a", t0 + ms(10)), Some(ms(50)));
        assert_eq!(p.wait("b", t0), None);
        p.forget("a");
        assert_eq!(p.wait("a", t0), None);
    }

    #[tokio::test]
    async fn a_successful_reconcile_forgets_past_failures() {
        // Never connected to: nothing here makes a request.
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let (machines, sets) = empty_caches();
        let ctx = Context::new(client, None, machines, sets, Config::default(), None);
        assert!(!ctx.has_target());
        let m = Arc::new(Machine::test("m1"));
        assert_eq!(requeue_key(m.as_ref()), "default/m1");
        assert_eq!(ctx.error_requeue("machine", m.as_ref()), ms(5));
        assert_eq!(ctx.error_requeue("machine", m.as_ref()), ms(10));

        // A failing reconcile leaves the count to the error policy.
        let mut failing = forgetting("machine", |_: Arc<Machine>, _| async {
            Err(Error::NoTarget)
        });
        assert!(failing(m.clone(), ctx.clone()).await.is_err());
        assert_eq!(ctx.requeues.failures("machine", "default/m1"), 2);

        // Success, whatever requeue it asks for, starts the object over.
        let mut ok = forgetting("machine", |_: Arc<Machine>, _| async {
            Ok(Action::requeue(Duration::from_secs(30)))
        });
        assert!(ok(m.clone(), ctx.clone()).await.is_ok());
        assert_eq!(ctx.requeues.failures("machine", "default/m1"), 0);
        assert_eq!(ctx.error_requeue("machine", m.as_ref()), ms(5));

        let text = ctx.config.metrics.encode();
        assert!(
            text.contains("mcm_workqueue_retries_total{name=\"machine\"} 3"),
            "{text}"
        );
    }
}
