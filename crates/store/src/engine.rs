//! The in-memory MVCC engine shared by every embedded backend.
//!
//! State lives in memory: the current value of every key plus a log of recent
//! commits, which is the history used for reads at past revisions and for
//! watch replay. All writes go through one committer thread. It takes every
//! pending transaction at once (group commit), evaluates them in order against
//! the current state plus the effects of earlier transactions of the same
//! batch, hands the resulting commits to a [`Persistence`] (which returns only
//! once they are durable), and only then makes them visible to readers and
//! watchers and answers the writers. So nothing is ever observed that a crash
//! could take back, and one fsync covers a whole batch of writers.
//!
//! A batch that fails to persist fails all its writers and none of it becomes
//! visible; the engine stays open. Its health ([`Store::health`]) reports the
//! failure until a later batch persists, or until the committer's own probe
//! of the storage (about once a second while unhealthy, see
//! [`Persistence::probe`]) succeeds, so a full disk heals without a restart
//! and without client writes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
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
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_batch: 1024,
            watch_buffer: 16 * 1024,
            retain_for: Duration::from_secs(10 * 60),
            min_history: 1000,
            max_history: 200_000,
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
}

enum Request {
    Txn(Txn, oneshot::Sender<Result<TxnResponse>>),
    Compact(Revision, oneshot::Sender<Result<()>>),
}

/// The engine handle; cheap to clone. The committer thread stops when the last
/// handle is dropped.
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
        });
        let (tx, rx) = std_mpsc::channel();
        let committer_shared = shared.clone();
        std::thread::Builder::new()
            .name("store-committer".into())
            .spawn(move || committer(committer_shared, rx, persistence))
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

    fn send(&self, req: Request) -> Result<()> {
        self.requests.send(req).map_err(|_| StoreError::Closed)
    }
}

fn committer(
    shared: Arc<Shared>,
    rx: std_mpsc::Receiver<Request>,
    mut persistence: Box<dyn Persistence>,
) {
    loop {
        let first = if shared.unhealthy() {
            // While writes fail, wake up now and then to see whether the
            // storage recovered, so health comes back without client writes.
            match rx.recv_timeout(PROBE_INTERVAL) {
                Ok(r) => r,
                Err(std_mpsc::RecvTimeoutError::Timeout) => {
                    match persistence.probe() {
                        Ok(()) => shared.storage_ok("probe"),
                        Err(e) => shared.probe_failed(&e),
                    }
                    continue;
                }
                Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(r) => r,
                Err(_) => break,
            }
        };
        let mut reqs = vec![first];
        while reqs.len() < shared.config.max_batch {
            match rx.try_recv() {
                Ok(r) => reqs.push(r),
                Err(_) => break,
            }
        }
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
        let (tx, rx) = oneshot::channel();
        self.send(Request::Txn(txn, tx))?;
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
        let (tx, rx) = oneshot::channel();
        self.send(Request::Compact(revision, tx))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}
