//! The in-memory MVCC engine shared by every embedded backend.
//!
//! State lives in memory: the current value of every key plus a log of recent
//! commits, which is the history used for reads at past revisions and for
//! watch replay. Writes are committed in batches by whoever holds the
//! persistence: a writer that finds the store idle (nobody committing, nothing
//! queued) commits its own transaction on its own thread, so a lone client pays
//! no hand-off between threads; otherwise its transaction joins the queue of
//! the committer thread, which takes every queued transaction at once (group
//! commit). Either way a batch is evaluated in order against the current state
//! plus the effects of earlier transactions of the same batch, handed to a
//! [`Persistence`] (which returns only once it is durable), and only then made
//! visible to readers and watchers and answered. So nothing is ever observed
//! that a crash could take back, and one fsync covers a whole batch of writers.
//!
//! A batch that fails to persist fails all its writers and none of it becomes
//! visible; the engine stays open. Its health ([`Store::health`]) reports the
//! failure until a later batch persists, or until the committer's own probe
//! of the storage (about once a second while unhealthy, see
//! [`Persistence::probe`]) succeeds, so a full disk heals without a restart
//! and without client writes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

use crate::{
    Condition, Event, EventKind, KeyValue, Op, OpResult, RangeRequest, RangeResponse, Result,
    Revision, Store, StoreError, StoreHealth, Txn, TxnResponse, WatchItem, WatchStream,
    WriteFailure,
};

/// How often the committer probes the storage while writes are failing.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// One committed transaction: its revision and the changes it made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    pub revision: Revision,
    pub events: Vec<Event>,
}

/// What a backend found on disk when it opened.
#[derive(Clone, Debug, Default)]
pub struct Recovered {
    pub kvs: BTreeMap<Arc<str>, KeyValue>,
    pub revision: Revision,
    /// History before this revision is gone.
    pub compacted: Revision,
    /// Commits after `compacted`, oldest first, to serve as history.
    pub history: Vec<Commit>,
}

/// How committed transactions are made durable.
pub trait Persistence: Send + 'static {
    /// Records `commits` durably; returns only once they would survive a
    /// crash. An error fails every writer of the batch, and the engine drops
    /// the batch: it hands the same revisions to the next batch. So on an
    /// error the backend must leave none of the batch in its durable record
    /// (or, if it cannot clean up, keep failing until it can), and be ready
    /// to try again with the next batch. Errors mark the store unhealthy,
    /// except `InvalidInput`, which means the batch itself cannot be stored.
    fn append(&mut self, commits: &[Arc<Commit>]) -> std::io::Result<()>;

    /// Called about once a second while writes are failing and no writes
    /// arrive: repairs what a failed append left behind and checks that the
    /// storage takes writes again. `Ok` marks the store healthy; the next
    /// append is the real test.
    fn probe(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    /// Called after each applied batch with the full current state, so the
    /// backend may write a snapshot and shorten its log. Must not block long.
    fn after_batch(
        &mut self,
        _kvs: &BTreeMap<Arc<str>, KeyValue>,
        _revision: Revision,
    ) -> std::io::Result<()> {
        Ok(())
    }
}

/// Persistence that keeps nothing: the memory backend.
pub struct NoPersistence;

impl Persistence for NoPersistence {
    fn append(&mut self, _commits: &[Arc<Commit>]) -> std::io::Result<()> {
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Most transactions taken into one group commit.
    pub max_batch: usize,
    /// Items a watcher may have queued before it is cancelled as too slow.
    pub watch_buffer: usize,
    /// History is kept at least this long...
    pub retain_for: Duration,
    /// ...and at least this many commits, but no more than `max_history`.
    pub min_history: usize,
    pub max_history: usize,
    /// How long writers must not have overlapped before one commits inline
    /// again (see [`Engine::submit`]).
    pub inline_after_quiet: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_batch: 1024,
            watch_buffer: 16 * 1024,
            retain_for: Duration::from_secs(10 * 60),
            min_history: 1000,
            max_history: 200_000,
            inline_after_quiet: Duration::from_millis(50),
        }
    }
}

struct Watcher {
    id: u64,
    prefix: String,
    tx: mpsc::Sender<WatchItem>,
}

struct State {
    kvs: BTreeMap<Arc<str>, KeyValue>,
    revision: Revision,
    compacted: Revision,
    log: VecDeque<(Instant, Arc<Commit>)>,
    watchers: Vec<Watcher>,
    next_watcher: u64,
}

struct Shared {
    state: RwLock<State>,
    /// Apart from `state`, so a readiness check never waits for a batch.
    health: Mutex<StoreHealth>,
    config: EngineConfig,
    /// Held by whoever runs a batch: a writer committing inline, or the
    /// committer thread.
    persistence: Mutex<Box<dyn Persistence>>,
    /// Requests sent to the committer thread and not yet in a running batch.
    /// While any are queued, new writers queue behind them instead of
    /// committing inline, so the queue is never starved.
    queued: AtomicUsize,
    /// Writes (transactions and compactions) between their start and their
    /// answer.
    in_flight: AtomicUsize,
    /// When a write last started while another was in flight, in
    /// microseconds since `started`; [`NEVER`] if none has.
    last_overlap: AtomicU64,
    started: Instant,
}

impl Shared {
    fn write_failed(&self, error: &std::io::Error) {
        let mut health = self.health.lock();
        health.write_errors += 1;
        match &mut health.failing {
            Some(failure) => {
                // Logged once when the failures begin; every writer gets the
                // error anyway.
                tracing::debug!(%error, "store write failed again");
                failure.error = error.to_string();
            }
            None => {
                tracing::error!(
                    %error,
                    "store write failed; the store keeps serving reads and retries writes"
                );
                health.failing = Some(WriteFailure {
                    error: error.to_string(),
                    since: SystemTime::now(),
                });
            }
        }
    }

    fn probe_failed(&self, error: &std::io::Error) {
        tracing::debug!(%error, "store storage probe failed");
        if let Some(failure) = &mut self.health.lock().failing {
            failure.error = error.to_string();
        }
    }

    fn storage_ok(&self, how: &str) {
        let mut health = self.health.lock();
        if let Some(failure) = health.failing.take() {
            let secs = SystemTime::now()
                .duration_since(failure.since)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            tracing::info!(
                failed_for_secs = secs,
                write_errors = health.write_errors,
                "store writes work again ({how})"
            );
        }
    }

    fn unhealthy(&self) -> bool {
        self.health.lock().failing.is_some()
    }

    fn micros(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }
}

/// A write between its start and its answer (or its cancellation); notes an
/// overlap with writes already in flight.
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn enter(shared: &'a Shared) -> Self {
        if shared.in_flight.fetch_add(1, Ordering::AcqRel) > 0 {
            shared
                .last_overlap
                .store(shared.micros(), Ordering::Release);
        }
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

enum Request {
    Txn(Txn, oneshot::Sender<Result<TxnResponse>>),
    Compact(Revision, oneshot::Sender<Result<()>>),
}

/// The engine handle; cheap to clone. The committer thread stops, and the
/// persistence is dropped, when the last handle is dropped.
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
    requests: std_mpsc::Sender<Request>,
}

impl Engine {
    /// Starts an engine on recovered state, persisting through `persistence`.
    pub fn start(
        recovered: Recovered,
        persistence: Box<dyn Persistence>,
        config: EngineConfig,
    ) -> Engine {
        let now = Instant::now();
        let state = State {
            kvs: recovered.kvs,
            revision: recovered.revision,
            compacted: recovered.compacted,
            log: recovered
                .history
                .into_iter()
                .map(|c| (now, Arc::new(c)))
                .collect(),
            watchers: Vec::new(),
            next_watcher: 1,
        };
        let shared = Arc::new(Shared {
            state: RwLock::new(state),
            health: Mutex::new(StoreHealth::default()),
            config,
            persistence: Mutex::new(persistence),
            queued: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            last_overlap: AtomicU64::new(NEVER),
            started: now,
        });
        let (tx, rx) = std_mpsc::channel();
        let committer_shared = shared.clone();
        std::thread::Builder::new()
            .name("store-committer".into())
            .spawn(move || committer(committer_shared, rx))
            .expect("spawning the store committer thread");
        Engine {
            shared,
            requests: tx,
        }
    }

    /// Number of keys currently stored.
    pub fn len(&self) -> usize {
        self.shared.state.read().kvs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Commits `req` inline when the store is idle and has been for a while,
    /// or queues it for the committer thread. Never waits for I/O other than
    /// its own batch's.
    ///
    /// Inline commits save a lone writer two thread hand-offs, but they hold
    /// the caller's thread (a runtime worker) for the fsync and never share
    /// it. So as soon as writers overlap, everyone goes through the committer
    /// (group commit, workers free meanwhile) until no overlap has been seen
    /// for [`EngineConfig::inline_after_quiet`].
    fn submit(&self, req: Request) -> Result<()> {
        // Overlaps are noted by `InFlight::enter`: every write is in flight
        // from before it is submitted until it is answered, so a queued
        // request or a running batch is always someone else's write in
        // flight.
        let shared = &self.shared;
        if quiet_since(
            shared.last_overlap.load(Ordering::Acquire),
            shared.micros(),
            shared.config.inline_after_quiet,
        ) && let Some(mut persistence) = shared.persistence.try_lock()
        {
            // The lock may be free while requests wait for the committer
            // (between its receive and its lock); those go first.
            if shared.queued.load(Ordering::Acquire) == 0 {
                run_batch(shared, vec![req], persistence.as_mut());
                return Ok(());
            }
        }
        shared.queued.fetch_add(1, Ordering::AcqRel);
        self.requests.send(req).map_err(|_| {
            shared.queued.fetch_sub(1, Ordering::AcqRel);
            StoreError::Closed
        })
    }
}

/// `last_overlap` before any overlap was seen.
const NEVER: u64 = u64::MAX;

/// Whether writers have not overlapped for `quiet` at `now`.
fn quiet_since(last_overlap: u64, now: u64, quiet: Duration) -> bool {
    last_overlap == NEVER || now.saturating_sub(last_overlap) >= quiet.as_micros() as u64
}

fn committer(shared: Arc<Shared>, rx: std_mpsc::Receiver<Request>) {
    loop {
        // While writes fail, wake up now and then to see whether the storage
        // recovered, so health comes back without client writes. (A failure
        // may come from a writer committing inline, so the committer cannot
        // just block until its next request.)
        let first = match rx.recv_timeout(PROBE_INTERVAL) {
            Ok(r) => r,
            Err(std_mpsc::RecvTimeoutError::Timeout) => {
                if shared.unhealthy() {
                    let mut persistence = shared.persistence.lock();
                    if shared.unhealthy() {
                        match persistence.probe() {
                            Ok(()) => shared.storage_ok("probe"),
                            Err(e) => shared.probe_failed(&e),
                        }
                    }
                }
                continue;
            }
            Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut reqs = vec![first];
        while reqs.len() < shared.config.max_batch {
            match rx.try_recv() {
                Ok(r) => reqs.push(r),
                Err(_) => break,
            }
        }
        let mut persistence = shared.persistence.lock();
        shared.queued.fetch_sub(reqs.len(), Ordering::AcqRel);
        run_batch(&shared, reqs, persistence.as_mut());
    }
}

type TxnReply = (oneshot::Sender<Result<TxnResponse>>, Result<TxnResponse>);

fn run_batch(shared: &Shared, reqs: Vec<Request>, persistence: &mut dyn Persistence) {
    let mut replies: Vec<TxnReply> = Vec::with_capacity(reqs.len());
    let mut compactions = Vec::new();
    let mut commits: Vec<Arc<Commit>> = Vec::new();
    {
        let state = shared.state.read();
        // Effects of earlier transactions in this batch, not yet applied.
        let mut overlay: HashMap<Arc<str>, Option<KeyValue>> = HashMap::new();
        let mut next = state.revision;
        for req in reqs {
            match req {
                Request::Compact(rev, reply) => compactions.push((rev, reply)),
                Request::Txn(txn, reply) => {
                    let lookup =
                        |overlay: &HashMap<Arc<str>, Option<KeyValue>>, key: &str| match overlay
                            .get(key)
                        {
                            Some(v) => v.clone(),
                            None => state.kvs.get(key).cloned(),
                        };
                    let holds = txn.conditions.iter().all(|c| {
                        let cur = lookup(&overlay, c.key());
                        match c {
                            Condition::Absent(_) => cur.is_none(),
                            Condition::ModRevision(_, rev) => {
                                cur.map(|kv| kv.mod_revision == *rev).unwrap_or(false)
                            }
                        }
                    });
                    if !holds {
                        let current = txn
                            .conditions
                            .iter()
                            .map(|c| lookup(&overlay, c.key()))
                            .collect();
                        replies.push((reply, Ok(TxnResponse::Failed { current })));
                        continue;
                    }
                    let rev = next + 1;
                    let mut events = Vec::new();
                    let mut results = Vec::with_capacity(txn.ops.len());
                    for op in txn.ops {
                        let key: Arc<str> = Arc::from(op.key());
                        let prev = lookup(&overlay, &key);
                        match op {
                            Op::Put { value, .. } => {
                                let kv = KeyValue {
                                    key: key.clone(),
                                    value,
                                    create_revision: prev
                                        .as_ref()
                                        .map(|p| p.create_revision)
                                        .unwrap_or(rev),
                                    mod_revision: rev,
                                    version: prev.as_ref().map(|p| p.version + 1).unwrap_or(1),
                                };
                                overlay.insert(key, Some(kv.clone()));
                                events.push(Event {
                                    kind: EventKind::Put,
                                    kv: kv.clone(),
                                    prev: prev.clone(),
                                });
                                results.push(OpResult { prev, kv: Some(kv) });
                            }
                            Op::Delete { .. } => {
                                if let Some(p) = &prev {
                                    overlay.insert(key.clone(), None);
                                    events.push(Event {
                                        kind: EventKind::Delete,
                                        kv: KeyValue {
                                            key,
                                            value: Bytes::new(),
                                            create_revision: 0,
                                            mod_revision: rev,
                                            version: 0,
                                        },
                                        prev: Some(p.clone()),
                                    });
                                }
                                results.push(OpResult { prev, kv: None });
                            }
                        }
                    }
                    if events.is_empty() {
                        replies.push((
                            reply,
                            Ok(TxnResponse::Committed {
                                revision: next,
                                results,
                            }),
                        ));
                    } else {
                        next = rev;
                        commits.push(Arc::new(Commit {
                            revision: rev,
                            events,
                        }));
                        replies.push((
                            reply,
                            Ok(TxnResponse::Committed {
                                revision: rev,
                                results,
                            }),
                        ));
                    }
                }
            }
        }
    }

    if !commits.is_empty() {
        match persistence.append(&commits) {
            Ok(()) => shared.storage_ok("a write persisted"),
            Err(e) => {
                // Nothing of the batch was applied, so the state is exactly as
                // before it and the next batch reuses its revisions. Every
                // reply of the batch fails, failed preconditions included:
                // they were judged against the batch's own, now dropped,
                // commits. Compactions touch no storage and go ahead.
                // `InvalidInput` rejects the batch itself (a commit too big to
                // encode), which says nothing about the storage.
                if e.kind() != std::io::ErrorKind::InvalidInput {
                    shared.write_failed(&e);
                }
                let why = format!("persisting a commit failed, the write was not applied: {e}");
                for (reply, _) in replies {
                    let _ = reply.send(Err(StoreError::Io(why.clone())));
                }
                commits.clear();
                replies = Vec::new();
            }
        }
    }

    let mut state = shared.state.write();
    let now = Instant::now();
    for commit in &commits {
        apply(&mut state, commit);
        state.log.push_back((now, commit.clone()));
        notify(&mut state, commit);
    }
    let mut compact_replies = Vec::new();
    for (rev, reply) in compactions {
        compact_replies.push((reply, compact_locked(&mut state, rev)));
    }
    auto_compact(&mut state, &shared.config, now);
    let snapshot_result = if commits.is_empty() {
        Ok(())
    } else {
        persistence.after_batch(&state.kvs, state.revision)
    };
    drop(state);
    if let Err(e) = snapshot_result {
        // A failed snapshot loses nothing: the log still holds every commit.
        tracing::warn!(error = %e, "writing a store snapshot failed");
    }
    for (reply, result) in replies {
        let _ = reply.send(result);
    }
    for (reply, result) in compact_replies {
        let _ = reply.send(result);
    }
}

fn apply(state: &mut State, commit: &Commit) {
    for ev in &commit.events {
        match ev.kind {
            EventKind::Put => {
                state.kvs.insert(ev.kv.key.clone(), ev.kv.clone());
            }
            EventKind::Delete => {
                state.kvs.remove(&ev.kv.key);
            }
        }
    }
    state.revision = commit.revision;
}

fn notify(state: &mut State, commit: &Commit) {
    state.watchers.retain(|w| {
        for ev in &commit.events {
            if ev.kv.key.starts_with(w.prefix.as_str())
                && w.tx.try_send(WatchItem::Event(ev.clone())).is_err()
            {
                // Full or closed: cancel; the consumer re-watches from the
                // last revision it saw.
                return false;
            }
        }
        true
    });
}

fn compact_locked(state: &mut State, rev: Revision) -> Result<()> {
    if rev > state.revision {
        return Err(StoreError::FutureRevision {
            requested: rev,
            current: state.revision,
        });
    }
    if rev <= state.compacted {
        return Ok(());
    }
    while state.log.front().is_some_and(|(_, c)| c.revision <= rev) {
        state.log.pop_front();
    }
    state.compacted = rev;
    Ok(())
}

fn auto_compact(state: &mut State, config: &EngineConfig, now: Instant) {
    let mut upto = None;
    while state.log.len() > config.min_history {
        let (at, commit) = &state.log[0];
        let too_many = state.log.len() > config.max_history;
        let too_old = now.duration_since(*at) > config.retain_for;
        if !(too_many || too_old) {
            break;
        }
        upto = Some(commit.revision);
        state.log.pop_front();
    }
    if let Some(rev) = upto {
        state.compacted = state.compacted.max(rev);
    }
}

fn check_revision(state: &State, rev: Revision) -> Result<()> {
    if rev > state.revision {
        return Err(StoreError::FutureRevision {
            requested: rev,
            current: state.revision,
        });
    }
    if rev < state.compacted {
        return Err(StoreError::Compacted {
            requested: rev,
            compacted: state.compacted,
        });
    }
    Ok(())
}

/// Undoes, on `map`, every change with a revision above `rev` to keys that
/// `keep` accepts, turning the current state into the state as of `rev`.
fn rewind(
    state: &State,
    rev: Revision,
    map: &mut BTreeMap<Arc<str>, KeyValue>,
    keep: impl Fn(&str) -> bool,
) {
    for (_, commit) in state.log.iter().rev() {
        if commit.revision <= rev {
            break;
        }
        for ev in commit.events.iter().rev() {
            if !keep(&ev.kv.key) {
                continue;
            }
            match &ev.prev {
                Some(p) => {
                    map.insert(ev.kv.key.clone(), p.clone());
                }
                None => {
                    map.remove(&ev.kv.key);
                }
            }
        }
    }
}

fn range_locked(state: &State, req: &RangeRequest) -> Result<RangeResponse> {
    let rev = req.revision.unwrap_or(state.revision);
    check_revision(state, rev)?;
    let prefix = req.prefix.as_str();
    let lower: Bound<&str> = match &req.start_after {
        Some(k) if k.as_str() >= prefix => Bound::Excluded(k.as_str()),
        _ => Bound::Included(prefix),
    };
    let after_start = |k: &str| match lower {
        Bound::Excluded(s) => k > s,
        Bound::Included(s) => k >= s,
        Bound::Unbounded => true,
    };
    let limit = if req.limit == 0 {
        usize::MAX
    } else {
        req.limit
    };
    let mut kvs = Vec::new();
    let mut more = false;
    if rev == state.revision {
        for (k, kv) in state
            .kvs
            .range::<str, _>((lower, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
        {
            let _ = k;
            if kvs.len() == limit {
                more = true;
                break;
            }
            kvs.push(kv.clone());
        }
    } else {
        let mut map: BTreeMap<Arc<str>, KeyValue> = state
            .kvs
            .range::<str, _>((lower, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        rewind(state, rev, &mut map, |k| {
            k.starts_with(prefix) && after_start(k)
        });
        for kv in map.into_values() {
            if kvs.len() == limit {
                more = true;
                break;
            }
            kvs.push(kv);
        }
    }
    Ok(RangeResponse {
        kvs,
        more,
        revision: rev,
    })
}

#[async_trait::async_trait]
impl Store for Engine {
    fn current_revision(&self) -> Revision {
        self.shared.state.read().revision
    }

    fn compacted_revision(&self) -> Revision {
        self.shared.state.read().compacted
    }

    fn health(&self) -> StoreHealth {
        self.shared.health.lock().clone()
    }

    async fn get(
        &self,
        key: &str,
        revision: Option<Revision>,
    ) -> Result<(Option<KeyValue>, Revision)> {
        let state = self.shared.state.read();
        let rev = revision.unwrap_or(state.revision);
        check_revision(&state, rev)?;
        if rev == state.revision {
            return Ok((state.kvs.get(key).cloned(), rev));
        }
        let mut map = BTreeMap::new();
        if let Some(kv) = state.kvs.get(key) {
            map.insert(kv.key.clone(), kv.clone());
        }
        rewind(&state, rev, &mut map, |k| k == key);
        Ok((map.into_values().next(), rev))
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse> {
        let state = self.shared.state.read();
        range_locked(&state, &req)
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        let _in_flight = InFlight::enter(&self.shared);
        let (tx, rx) = oneshot::channel();
        self.submit(Request::Txn(txn, tx))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        let mut state = self.shared.state.write();
        if after < state.compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted: state.compacted,
            });
        }
        let replay: Vec<WatchItem> = state
            .log
            .iter()
            .filter(|(_, c)| c.revision > after)
            .flat_map(|(_, c)| c.events.iter())
            .filter(|ev| ev.kv.key.starts_with(prefix))
            .map(|ev| WatchItem::Event(ev.clone()))
            .collect();
        let (tx, rx) = mpsc::channel(replay.len() + self.shared.config.watch_buffer);
        for item in replay {
            // Cannot fail: the channel was sized for the replay.
            let _ = tx.try_send(item);
        }
        let id = state.next_watcher;
        state.next_watcher += 1;
        state.watchers.push(Watcher {
            id,
            prefix: prefix.to_string(),
            tx,
        });
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        let progress = move || {
            if let Some(shared) = weak.upgrade() {
                let state = shared.state.read();
                let rev = state.revision;
                if let Some(w) = state.watchers.iter().find(|w| w.id == id) {
                    let _ = w.tx.try_send(WatchItem::Progress(rev));
                }
            }
        };
        Ok(WatchStream {
            rx,
            progress: Some(Box::new(progress)),
        })
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let _in_flight = InFlight::enter(&self.shared);
        let (tx, rx) = oneshot::channel();
        self.submit(Request::Compact(revision, tx))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Persistence that records which thread appended each batch and how
    /// big it was, taking `delay` per append like a slow fsync.
    /// Each batch: the thread that appended it and its size.
    type Batches = Arc<Mutex<Vec<(Option<String>, usize)>>>;

    struct Recording {
        batches: Batches,
        delay: Duration,
    }

    impl Persistence for Recording {
        fn append(&mut self, commits: &[Arc<Commit>]) -> std::io::Result<()> {
            std::thread::sleep(self.delay);
            let thread = std::thread::current().name().map(str::to_string);
            self.batches.lock().push((thread, commits.len()));
            Ok(())
        }
    }

    fn engine(delay: Duration, config: EngineConfig) -> (Engine, Batches) {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let persistence = Recording {
            batches: batches.clone(),
            delay,
        };
        let engine = Engine::start(Recovered::default(), Box::new(persistence), config);
        (engine, batches)
    }

    /// A writer that finds the store idle commits on its own thread: no
    /// hand-off to the committer thread and back.
    #[tokio::test]
    async fn a_lone_writer_commits_on_its_own_thread() {
        let (s, batches) = engine(Duration::ZERO, EngineConfig::default());
        for i in 0..3 {
            let kv = s.create(&format!("/k{i}"), Bytes::from("v")).await.unwrap();
            assert_eq!(kv.mod_revision, i + 1);
        }
        let batches = batches.lock().clone();
        assert_eq!(batches.len(), 3, "{batches:?}");
        for (thread, size) in batches {
            assert_ne!(thread.as_deref(), Some("store-committer"));
            assert_eq!(size, 1);
        }
    }

    /// Writers arriving while a batch is being persisted queue for the
    /// committer thread, which takes them as one batch: every writer gets
    /// its own revision, revisions are contiguous, and fewer fsyncs than
    /// writers were needed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_writers_share_batches_and_revisions_stay_contiguous() {
        let (s, batches) = engine(Duration::from_millis(20), EngineConfig::default());
        let writers: Vec<_> = (0..64)
            .map(|i| {
                let s = s.clone();
                tokio::spawn(async move { s.create(&format!("/w{i}"), Bytes::from("v")).await })
            })
            .collect();
        let mut revisions = Vec::new();
        for w in writers {
            revisions.push(w.await.unwrap().unwrap().mod_revision);
        }
        revisions.sort_unstable();
        assert_eq!(revisions, (1..=64).collect::<Vec<_>>());
        assert_eq!(s.current_revision(), 64);
        let batches = batches.lock().clone();
        assert_eq!(batches.iter().map(|b| b.1).sum::<usize>(), 64);
        assert!(batches.len() < 64, "no batch had two writers: {batches:?}");
        assert!(
            batches
                .iter()
                .any(|(t, n)| t.as_deref() == Some("store-committer") && *n > 1),
            "the committer thread never took a queued batch: {batches:?}"
        );
    }

    /// Once writers overlapped, a lone writer still queues for the committer
    /// until they have not overlapped for `inline_after_quiet`, so a busy
    /// store keeps its group commits and its runtime workers free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn after_an_overlap_writers_queue_until_it_has_been_quiet() {
        let config = EngineConfig {
            inline_after_quiet: Duration::from_millis(300),
            ..EngineConfig::default()
        };
        let (s, batches) = engine(Duration::from_millis(20), config);
        let writers: Vec<_> = (0..8)
            .map(|i| {
                let s = s.clone();
                tokio::spawn(async move { s.create(&format!("/w{i}"), Bytes::from("v")).await })
            })
            .collect();
        for w in writers {
            w.await.unwrap().unwrap();
        }
        let overlapped = std::time::Instant::now();
        s.create("/c", Bytes::from("v")).await.unwrap();
        let c_inline = {
            let batches = batches.lock();
            batches.last().unwrap().0.as_deref() != Some("store-committer")
        };
        if overlapped.elapsed() < Duration::from_millis(250) {
            assert!(!c_inline, "committed inline right after an overlap");
        }
        tokio::time::sleep(Duration::from_millis(350)).await;
        s.create("/d", Bytes::from("v")).await.unwrap();
        let batches = batches.lock().clone();
        assert_ne!(
            batches.last().unwrap().0.as_deref(),
            Some("store-committer"),
            "a lone writer after a quiet spell commits inline: {batches:?}"
        );
    }
}
