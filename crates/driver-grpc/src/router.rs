//! [`Router`]: the machine-controller-manager's side of the protocol, a
//! [`Driver`] that sends each call to the provider serving the class's
//! `provider` and answers with what it answered.
//!
//! Providers are registered sessions (a `Register` stream each, see
//! [`crate::serve`]) or drivers linked in-process ([`Router::serve_in_process`]).
//! The choice of provider is a pure function of the call and the offers
//! ([`choose`]); the rest is bookkeeping: an operation ID per call, a
//! pending answer per ID, the class and secret held in the object table
//! while the call is in flight, and a timeout.
//!
//! What the transport can go wrong with becomes a code the controller
//! already retries soon (the same retry semantics as in-process):
//!
//! | situation | code |
//! |---|---|
//! | no provider registered for the class | `Unavailable` |
//! | the provider's session ends before it answers | `Unavailable` |
//! | no answer within [`RouterConfig::call_timeout`] | `DeadlineExceeded` |
//! | an answer of the wrong kind, or none | `Internal` |
//!
//! Calling again is safe because the contract makes every call idempotent;
//! a late answer to an abandoned call is dropped.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use api::MachineClass;
use async_trait::async_trait;
use driver::{
    Call, Code, CreateMachineRequest, CreateMachineResponse, DeleteMachineRequest,
    DeleteMachineResponse, Driver, DriverError, GenerateMachineClassForMigrationRequest,
    GenerateMachineClassForMigrationResponse, GetMachineStatusRequest, GetMachineStatusResponse,
    GetVolumeIDsRequest, GetVolumeIDsResponse, InitializeMachineRequest, InitializeMachineResponse,
    ListMachinesRequest, ListMachinesResponse, UpdateMachineRequest, UpdateMachineResponse,
};
use k8s_openapi::api::core::v1::Secret;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, watch};

use crate::objects::{self, Key, Kind, Object};
use crate::pb;
use crate::pb::operation::Call as Body;
use crate::pb::operation_result::Outcome;
use crate::wire::{self, ClassParts, SecretParts};

mod choose;

pub(crate) use choose::{Offer, Want, choose};

/// The router's settings.
#[derive(Clone, Debug)]
pub struct RouterConfig {
    /// How long a provider may take to answer one call before the call
    /// fails with `DeadlineExceeded` (and is retried by the controller).
    pub call_timeout: Duration,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            call_timeout: DEFAULT_CALL_TIMEOUT,
        }
    }
}

/// Default of [`RouterConfig::call_timeout`]: long enough for a cloud API
/// that waits for its VM, short enough that a hung provider does not hold
/// a controller worker for long.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Counters of what the router did, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Operations sent to registered providers.
    pub operations: u64,
    /// `GetMachineClass` requests answered with a class.
    pub class_fetches: u64,
    /// `GetSecret` requests answered with a secret.
    pub secret_fetches: u64,
    /// Sessions opened so far.
    pub sessions: u64,
}

/// A provider as the router knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderInfo {
    /// The `provider` values it serves.
    pub providers: Vec<String>,
    /// The class kinds it translates.
    pub class_kinds: Vec<String>,
    /// Its instance name (`in-process` for a linked driver).
    pub instance: String,
    /// Whether it is linked into this process.
    pub in_process: bool,
}

/// The machine-controller-manager's driver for out-of-tree providers.
/// Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Router {
    shared: Arc<Shared>,
}

struct Shared {
    config: RouterConfig,
    state: Mutex<State>,
    next_op: AtomicU64,
    next_seq: AtomicU64,
    /// Bumped whenever the set of providers changes.
    changes: watch::Sender<u64>,
    operations: AtomicU64,
    class_fetches: AtomicU64,
    secret_fetches: AtomicU64,
}

#[derive(Default)]
struct State {
    in_process: Vec<(String, Arc<dyn Driver>)>,
    /// Live sessions, oldest first.
    sessions: Vec<Arc<Session>>,
    objects: objects::Table,
}

/// What [`Session`]'s stream carries to the provider.
pub(crate) type Outbound = Result<pb::McmSide, tonic::Status>;

/// One provider's `Register` stream.
pub(crate) struct Session {
    pub(crate) id: String,
    seq: u64,
    pub(crate) providers: Vec<String>,
    pub(crate) class_kinds: Vec<String>,
    pub(crate) instance: String,
    tx: mpsc::Sender<Outbound>,
    /// Answers awaited, by operation ID; guarded with `closed` so that no
    /// call can wait on a session that has already ended.
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    closed: bool,
    waiting: HashMap<u64, oneshot::Sender<Option<Outcome>>>,
}

impl Session {
    /// Hands an answer to the call waiting for it. Late answers (the call
    /// timed out or was dropped) have nobody waiting and are dropped.
    pub(crate) fn complete(&self, result: pb::OperationResult) {
        let waiting = self.pending.lock().waiting.remove(&result.id);
        match waiting {
            Some(tx) => {
                let _ = tx.send(result.outcome);
            }
            None => tracing::debug!(
                session = %self.id,
                operation = result.id,
                "an answer nobody waits for any more (timed out or abandoned)"
            ),
        }
    }

    /// Ends the session's calls: each answers `Unavailable`. Returns how
    /// many were waiting.
    fn close(&self) -> usize {
        let mut p = self.pending.lock();
        p.closed = true;
        // Dropping the senders wakes every waiter.
        let n = p.waiting.len();
        p.waiting.clear();
        n
    }

    fn names(&self) -> String {
        self.providers.join(", ")
    }
}

/// Removes a call's pending entry however the call ends (answered, timed
/// out, or its future dropped by the controller).
struct PendingGuard<'a> {
    session: &'a Session,
    id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.session.pending.lock().waiting.remove(&self.id);
    }
}

/// Releases a call's objects when it ends.
struct Held {
    shared: Arc<Shared>,
    keys: Vec<Key>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let now = Instant::now();
        let mut state = self.shared.state.lock();
        for key in &self.keys {
            state.objects.release(key, now);
        }
    }
}

/// Where a call goes.
#[derive(Clone)]
enum Target {
    InProcess(Arc<dyn Driver>),
    Remote(Arc<Session>, String),
}

fn unavailable(session: &Session, call: Call) -> DriverError {
    DriverError::new(
        Code::Unavailable,
        format!(
            "provider {} (instance {:?}) disconnected before answering {call}; the call is retried once a provider serves the class again",
            session.names(),
            session.instance
        ),
    )
}

fn mismatch(provider: &str, call: Call, outcome: &Outcome) -> DriverError {
    let answered = wire::call_answered(outcome).map_or("an error".to_string(), |c| c.to_string());
    DriverError::new(
        Code::Internal,
        format!("provider {provider:?} answered {call} with the answer to {answered}"),
    )
}

/// Converts an outcome of the expected kind, else reports the mismatch.
macro_rules! expect {
    ($outcome:expr, $provider:expr, $call:expr, $variant:ident => $convert:expr) => {
        match $outcome {
            Outcome::$variant(r) => Ok($convert(r)),
            other => Err(mismatch($provider, $call, &other)),
        }
    };
}

impl Router {
    /// A router with no provider yet.
    pub fn new(config: RouterConfig) -> Router {
        let (changes, _) = watch::channel(0);
        Router {
            shared: Arc::new(Shared {
                config,
                state: Mutex::default(),
                next_op: AtomicU64::new(1),
                next_seq: AtomicU64::new(1),
                changes,
                operations: AtomicU64::new(0),
                class_fetches: AtomicU64::new(0),
                secret_fetches: AtomicU64::new(0),
            }),
        }
    }

    /// Serves classes of `provider` with a driver linked into this process,
    /// for as long as the router lives. A provider of that name can then
    /// not register over the network: two drivers with their own
    /// inventories behind one name would each create VMs for the same
    /// machines.
    pub fn serve_in_process(&self, provider: &str, driver: Arc<dyn Driver>) {
        self.shared
            .state
            .lock()
            .in_process
            .push((provider.to_string(), driver));
        self.changed();
    }

    /// The providers that can take calls: in-process ones first, then
    /// registered sessions, oldest first.
    pub fn providers(&self) -> Vec<ProviderInfo> {
        let state = self.shared.state.lock();
        let local = state.in_process.iter().map(|(name, _)| ProviderInfo {
            providers: vec![name.clone()],
            class_kinds: Vec::new(),
            instance: "in-process".to_string(),
            in_process: true,
        });
        let remote = state.sessions.iter().map(|s| ProviderInfo {
            providers: s.providers.clone(),
            class_kinds: s.class_kinds.clone(),
            instance: s.instance.clone(),
            in_process: false,
        });
        local.chain(remote).collect()
    }

    /// Waits until some provider serves `provider`, at most `timeout`;
    /// whether one does.
    pub async fn wait_for(&self, provider: &str, timeout: Duration) -> bool {
        let mut changes = self.shared.changes.subscribe();
        let serving = || {
            self.providers()
                .iter()
                .any(|p| p.providers.iter().any(|n| n == provider))
        };
        let wait = async {
            while !serving() {
                if changes.changed().await.is_err() {
                    return false;
                }
            }
            true
        };
        tokio::time::timeout(timeout, wait).await.unwrap_or(false)
    }

    /// What the router did so far.
    pub fn stats(&self) -> Stats {
        let s = &self.shared;
        Stats {
            operations: s.operations.load(Ordering::Relaxed),
            class_fetches: s.class_fetches.load(Ordering::Relaxed),
            secret_fetches: s.secret_fetches.load(Ordering::Relaxed),
            sessions: s.next_seq.load(Ordering::Relaxed) - 1,
        }
    }

    fn changed(&self) {
        self.shared.changes.send_modify(|n| *n += 1);
    }

    /// Checks a registration before its session opens: it must name
    /// providers, none empty, none served in-process.
    pub(crate) fn check_registration(&self, reg: &pb::Registration) -> Result<(), String> {
        if reg.providers.is_empty() {
            return Err("the registration names no provider".to_string());
        }
        if reg.providers.iter().any(|p| p.trim().is_empty()) {
            return Err("a provider name is empty".to_string());
        }
        let state = self.shared.state.lock();
        if let Some(p) = reg
            .providers
            .iter()
            .find(|p| state.in_process.iter().any(|(name, _)| name == *p))
        {
            return Err(format!(
                "provider {p:?} is served in-process by this machine-controller-manager (start it with the in-process provider disabled to serve {p:?} out of process)"
            ));
        }
        Ok(())
    }

    /// A new session for a registration (see [`Router::check_registration`]);
    /// it takes calls only once [`Router::publish`]ed.
    pub(crate) fn new_session(
        &self,
        reg: pb::Registration,
        tx: mpsc::Sender<Outbound>,
    ) -> Arc<Session> {
        let seq = self.shared.next_seq.fetch_add(1, Ordering::Relaxed);
        Arc::new(Session {
            id: format!("{:032x}", rand::random::<u128>()),
            seq,
            providers: reg.providers,
            class_kinds: reg.class_kinds,
            instance: reg.instance,
            tx,
            pending: Mutex::default(),
        })
    }

    /// Makes a session take calls: from now on it is the newest provider
    /// of its names.
    pub(crate) fn publish(&self, session: Arc<Session>) {
        tracing::info!(
            providers = %session.names(),
            instance = %session.instance,
            session = session.seq,
            "provider registered"
        );
        self.shared.state.lock().sessions.push(session);
        self.changed();
    }

    /// Ends a session: it takes no more calls, and its calls in flight
    /// answer `Unavailable`.
    pub(crate) fn close(&self, session: &Arc<Session>) {
        self.shared
            .state
            .lock()
            .sessions
            .retain(|s| !Arc::ptr_eq(s, session));
        let abandoned = session.close();
        tracing::info!(
            providers = %session.names(),
            instance = %session.instance,
            session = session.seq,
            calls_in_flight = abandoned,
            "provider disconnected"
        );
        self.changed();
    }

    /// The live session with this ID.
    pub(crate) fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.shared
            .state
            .lock()
            .sessions
            .iter()
            .find(|s| s.id == id)
            .cloned()
    }

    /// An object for `GetMachineClass` / `GetSecret`, if it was sent to one
    /// of `session`'s providers.
    pub(crate) fn fetch(&self, session: &Session, key: &Key) -> Option<Object> {
        let found = self
            .shared
            .state
            .lock()
            .objects
            .get(key, &session.providers);
        if found.is_some() {
            let counter = match key.kind {
                Kind::Class => &self.shared.class_fetches,
                Kind::Secret => &self.shared.secret_fetches,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Where a call goes, by [`choose`].
    fn target(&self, call: Call, want: Want) -> Result<Target, DriverError> {
        let state = self.shared.state.lock();
        let local_names: Vec<[String; 1]> =
            state.in_process.iter().map(|(n, _)| [n.clone()]).collect();
        let none: [String; 0] = [];
        let offers: Vec<Offer> = local_names
            .iter()
            .map(|n| Offer {
                providers: n,
                kinds: &none,
            })
            .chain(state.sessions.iter().map(|s| Offer {
                providers: &s.providers,
                kinds: &s.class_kinds,
            }))
            .collect();
        let (i, name) = choose(call, &offers, want)?;
        Ok(match state.in_process.get(i) {
            Some((_, driver)) => Target::InProcess(driver.clone()),
            None => Target::Remote(state.sessions[i - state.in_process.len()].clone(), name),
        })
    }

    fn class_target(&self, call: Call, class: &MachineClass) -> Result<Target, DriverError> {
        let want = Want::Class {
            provider: &class.provider,
            class: class.metadata.name.as_deref().unwrap_or_default(),
        };
        self.target(call, want)
    }

    /// The class and secret as the wire refers to them, held in the object
    /// table for `provider` until the returned guard drops.
    fn hold(
        &self,
        provider: &str,
        class: &MachineClass,
        secret: &Secret,
    ) -> Result<(ClassParts, SecretParts, Held), DriverError> {
        let class = wire::class_parts(class)?;
        let secret = wire::secret_parts(secret);
        let class_key = Key {
            kind: Kind::Class,
            namespace: class.meta.namespace.clone(),
            name: class.meta.name.clone(),
            version: class.meta.resource_version.clone(),
        };
        let secret_key = Key {
            kind: Kind::Secret,
            namespace: secret.meta.namespace.clone(),
            name: secret.meta.name.clone(),
            version: secret.meta.resource_version.clone(),
        };
        let now = Instant::now();
        {
            let mut state = self.shared.state.lock();
            state.objects.hold(
                class_key.clone(),
                Object::Class(Arc::new(class.class.clone())),
                provider,
                now,
            );
            state.objects.hold(
                secret_key.clone(),
                Object::Secret(Arc::new(secret.secret.clone())),
                provider,
                now,
            );
        }
        let held = Held {
            shared: self.shared.clone(),
            keys: vec![class_key, secret_key],
        };
        Ok((class, secret, held))
    }

    /// Sends one operation on a session and waits for its answer: a
    /// successful outcome of the call's kind, or the driver error.
    async fn remote(
        &self,
        session: &Session,
        call: Call,
        body: Body,
    ) -> Result<Outcome, DriverError> {
        let id = self.shared.next_op.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut p = session.pending.lock();
            if p.closed {
                return Err(unavailable(session, call));
            }
            p.waiting.insert(id, tx);
        }
        let _pending = PendingGuard { session, id };
        let op = pb::McmSide {
            message: Some(pb::mcm_side::Message::Operation(pb::Operation {
                id,
                call: Some(body),
            })),
        };
        let timeout = self.shared.config.call_timeout;
        let answered = tokio::time::timeout(timeout, async {
            session
                .tx
                .send(Ok(op))
                .await
                .map_err(|_| unavailable(session, call))?;
            self.shared.operations.fetch_add(1, Ordering::Relaxed);
            rx.await.map_err(|_| unavailable(session, call))
        })
        .await
        .map_err(|_| {
            DriverError::new(
                Code::DeadlineExceeded,
                format!(
                    "provider {} (instance {:?}) did not answer {call} within {timeout:?}",
                    session.names(),
                    session.instance
                ),
            )
        })??;
        let provider = session.names();
        match answered {
            None => Err(DriverError::new(
                Code::Internal,
                format!("provider {provider:?} answered {call} with an empty result"),
            )),
            Some(Outcome::Error(status)) => Err(wire::error_of(&status, &provider, call)),
            Some(outcome) => Ok(outcome),
        }
    }

    /// A call on one machine of a class: in-process, or as an operation
    /// with the class and secret held for the provider to fetch.
    async fn machine_call<T, F, Fut>(
        &self,
        call: Call,
        (machine, class, secret): (&api::Machine, &MachineClass, &Secret),
        in_process: F,
        body: fn(pb::MachineCall) -> Body,
        decode: fn(Outcome, &str) -> Result<T, DriverError>,
    ) -> Result<T, DriverError>
    where
        F: FnOnce(Arc<dyn Driver>) -> Fut,
        Fut: Future<Output = Result<T, DriverError>>,
    {
        match self.class_target(call, class)? {
            Target::InProcess(d) => in_process(d).await,
            Target::Remote(session, provider) => {
                let (class, secret, _held) = self.hold(&provider, class, secret)?;
                let op = body(wire::machine_call(machine, &class, &secret)?);
                let outcome = self.remote(&session, call, op).await?;
                decode(outcome, &session.names())
            }
        }
    }
}

#[async_trait]
impl Driver for Router {
    async fn create_machine(
        &self,
        req: CreateMachineRequest<'_>,
    ) -> Result<CreateMachineResponse, DriverError> {
        let call = Call::CreateMachine;
        self.machine_call(
            call,
            (req.machine, req.machine_class, req.secret),
            |d| async move { d.create_machine(req).await },
            Body::CreateMachine,
            |o, p| expect!(o, p, Call::CreateMachine, CreateMachine => |r| wire::create_from_wire(&r)),
        )
        .await
    }

    async fn initialize_machine(
        &self,
        req: InitializeMachineRequest<'_>,
    ) -> Result<InitializeMachineResponse, DriverError> {
        self.machine_call(
            Call::InitializeMachine,
            (req.machine, req.machine_class, req.secret),
            |d| async move { d.initialize_machine(req).await },
            Body::InitializeMachine,
            |o, p| expect!(o, p, Call::InitializeMachine, InitializeMachine => |r| wire::initialize_from_wire(&r)),
        )
        .await
    }

    async fn delete_machine(
        &self,
        req: DeleteMachineRequest<'_>,
    ) -> Result<DeleteMachineResponse, DriverError> {
        self.machine_call(
            Call::DeleteMachine,
            (req.machine, req.machine_class, req.secret),
            |d| async move { d.delete_machine(req).await },
            Body::DeleteMachine,
            |o, p| expect!(o, p, Call::DeleteMachine, DeleteMachine => |r| wire::delete_from_wire(&r)),
        )
        .await
    }

    async fn get_machine_status(
        &self,
        req: GetMachineStatusRequest<'_>,
    ) -> Result<GetMachineStatusResponse, DriverError> {
        self.machine_call(
            Call::GetMachineStatus,
            (req.machine, req.machine_class, req.secret),
            |d| async move { d.get_machine_status(req).await },
            Body::GetMachineStatus,
            |o, p| expect!(o, p, Call::GetMachineStatus, GetMachineStatus => |r| wire::status_from_wire(&r)),
        )
        .await
    }

    async fn list_machines(
        &self,
        req: ListMachinesRequest<'_>,
    ) -> Result<ListMachinesResponse, DriverError> {
        let call = Call::ListMachines;
        match self.class_target(call, req.machine_class)? {
            Target::InProcess(d) => d.list_machines(req).await,
            Target::Remote(session, provider) => {
                let (class, secret, _held) = self.hold(&provider, req.machine_class, req.secret)?;
                let body = Body::ListMachines(pb::ListMachines {
                    machine_class: Some(class.meta),
                    secret: Some(secret.meta),
                });
                let outcome = self.remote(&session, call, body).await?;
                expect!(outcome, &session.names(), call, ListMachines => |r| wire::list_from_wire(&r))
            }
        }
    }

    /// Asks every provider (the request names no class) and reports the
    /// volumes any of them claims. A provider that fails only loses its
    /// own volumes' IDs, as long as another answered: drain then does not
    /// wait for those volumes to detach, which is what an error means for
    /// it anyway.
    async fn get_volume_ids(
        &self,
        req: GetVolumeIDsRequest<'_>,
    ) -> Result<GetVolumeIDsResponse, DriverError> {
        let call = Call::GetVolumeIds;
        let names: Vec<String> = {
            let names: BTreeSet<String> = self
                .providers()
                .into_iter()
                .flat_map(|p| p.providers)
                .collect();
            names.into_iter().collect()
        };
        // One target per provider, each session or linked driver once.
        let mut targets: Vec<Target> = Vec::new();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for name in &names {
            let want = Want::Class {
                provider: name,
                class: "",
            };
            let Ok(target) = self.target(call, want) else {
                continue;
            };
            let identity = match &target {
                Target::InProcess(_) => format!("in-process/{name}"),
                Target::Remote(s, _) => s.id.clone(),
            };
            if seen.insert(identity) {
                targets.push(target);
            }
        }
        if targets.is_empty() {
            return Err(DriverError::new(
                Code::Unavailable,
                format!(
                    "no provider is registered with the machine-controller-manager to answer {call}"
                ),
            ));
        }
        let body = wire::volume_ids_call(req.pv_specs)?;
        let answers = futures::future::join_all(targets.into_iter().map(|t| {
            let body = body.clone();
            async move {
                match t {
                    Target::InProcess(d) => d.get_volume_ids(req).await,
                    Target::Remote(session, _) => {
                        let outcome = self.remote(&session, call, Body::GetVolumeIds(body)).await?;
                        expect!(outcome, &session.names(), call, GetVolumeIds => |r| wire::volume_ids_from_wire(&r))
                    }
                }
            }
        }))
        .await;
        let mut volume_ids: Vec<String> = Vec::new();
        let mut answered = false;
        let mut failure: Option<DriverError> = None;
        for answer in answers {
            match answer {
                Ok(r) => {
                    answered = true;
                    for id in r.volume_ids {
                        if !volume_ids.contains(&id) {
                            volume_ids.push(id);
                        }
                    }
                }
                Err(e) if e.code == Code::Unimplemented => {}
                Err(e) => {
                    tracing::debug!(error = %e, "a provider failed GetVolumeIDs");
                    failure.get_or_insert(e);
                }
            }
        }
        match (answered, failure) {
            (true, _) => Ok(GetVolumeIDsResponse { volume_ids }),
            (false, Some(e)) => Err(e),
            (false, None) => Err(DriverError::unimplemented(call)),
        }
    }

    async fn generate_machine_class_for_migration(
        &self,
        req: GenerateMachineClassForMigrationRequest<'_>,
    ) -> Result<GenerateMachineClassForMigrationResponse, DriverError> {
        let call = Call::GenerateMachineClassForMigration;
        let want = Want::Migration {
            provider: &req.machine_class.provider,
            kind: &req.class_spec.kind,
        };
        match self.target(call, want)? {
            Target::InProcess(d) => d.generate_machine_class_for_migration(req).await,
            Target::Remote(session, _) => {
                let body = Body::GenerateMachineClassForMigration(wire::migration_call(
                    req.provider_specific_machine_class,
                    req.machine_class,
                    req.class_spec,
                )?);
                let provider = session.names();
                match self.remote(&session, call, body).await? {
                    Outcome::GenerateMachineClassForMigration(r) => {
                        wire::migration_from_wire(&r, &provider)
                    }
                    other => Err(mismatch(&provider, call, &other)),
                }
            }
        }
    }

    async fn update_machine(
        &self,
        req: UpdateMachineRequest<'_>,
    ) -> Result<UpdateMachineResponse, DriverError> {
        let call = Call::UpdateMachine;
        match self.class_target(call, req.machine_class)? {
            Target::InProcess(d) => d.update_machine(req).await,
            Target::Remote(session, provider) => {
                let (class, secret, _held) = self.hold(&provider, req.machine_class, req.secret)?;
                let last_applied = req
                    .last_applied_provider_spec
                    .map(serde_json::to_vec)
                    .transpose()
                    .map_err(|e| {
                        DriverError::new(
                            Code::Internal,
                            format!("encoding the last applied spec: {e}"),
                        )
                    })?;
                let body = Body::UpdateMachine(pb::UpdateMachine {
                    machine: Some(wire::machine_call(req.machine, &class, &secret)?),
                    last_applied_provider_spec: last_applied,
                });
                let outcome = self.remote(&session, call, body).await?;
                expect!(outcome, &session.names(), call, UpdateMachine => |_r: pb::UpdateMachineResponse| UpdateMachineResponse::default())
            }
        }
    }
}
