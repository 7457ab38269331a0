//! A revisioned key-value store with etcd semantics.
//!
//! Every successful write transaction advances one global, strictly increasing
//! revision. Each key carries the revision that created it, the revision that
//! last modified it and a per-key version counter. Reads can be served as of any
//! revision inside the retained window; watches replay history from such a
//! revision and then follow live changes. Compaction drops history older than
//! a revision, after which reads and watches from before it fail with
//! [`StoreError::Compacted`].
//!
//! The [`Store`] trait is the contract; [`MemoryStore`] (tests) and
//! [`FileStore`] (the durable default) implement it on top of one in-memory
//! MVCC engine, differing only in how committed transactions are persisted.
//! [`conformance`] holds the suite every backend must pass.
//!
//! A store that cannot persist a write (a full disk, an I/O error) fails that
//! write and stays open: reads keep working, later writes are retried, and
//! [`Store::health`] reports the failure until writes succeed again, so an
//! API server can answer its readiness check from it.

pub mod conformance;
mod engine;
pub mod file;
mod memory;

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;

pub use engine::{Engine, EngineConfig, Persistence, Recovered};
pub use file::FileStore;
pub use memory::MemoryStore;

/// A store revision. Revision 0 means "nothing written yet".
pub type Revision = i64;

/// One key with its value and MVCC metadata, as of some revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Arc<str>,
    pub value: Bytes,
    /// The revision of the write that created this incarnation of the key.
    pub create_revision: Revision,
    /// The revision of the last write to the key.
    pub mod_revision: Revision,
    /// Number of writes since creation; 1 right after creation.
    pub version: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Put,
    Delete,
}

/// A change to one key. For a delete, `kv` holds the key, the deleting
/// revision as `mod_revision`, an empty value and version 0, and `prev` holds
/// the last value before the delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub kv: KeyValue,
    pub prev: Option<KeyValue>,
}

impl Event {
    pub fn revision(&self) -> Revision {
        self.kv.mod_revision
    }
}

/// What a watch stream yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchItem {
    Event(Event),
    /// Every event with a revision up to and including this one that matches
    /// the watch has already been delivered.
    Progress(Revision),
}

/// A precondition of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    /// The key must not exist.
    Absent(String),
    /// The key must exist with exactly this mod revision.
    ModRevision(String, Revision),
}

impl Condition {
    pub fn key(&self) -> &str {
        match self {
            Condition::Absent(k) | Condition::ModRevision(k, _) => k,
        }
    }
}

/// A write inside a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Put { key: String, value: Bytes },
    Delete { key: String },
}

impl Op {
    pub fn key(&self) -> &str {
        match self {
            Op::Put { key, .. } | Op::Delete { key } => key,
        }
    }
}

/// All conditions must hold for the operations to apply; all operations of a
/// transaction share one revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Txn {
    pub conditions: Vec<Condition>,
    pub ops: Vec<Op>,
}

/// The outcome of one operation of a committed transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpResult {
    /// The key's value before the transaction.
    pub prev: Option<KeyValue>,
    /// The key's value after the transaction (`None` after a delete).
    pub kv: Option<KeyValue>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnResponse {
    /// The conditions held. `revision` is the new revision, or the current one
    /// if no operation changed anything.
    Committed {
        revision: Revision,
        results: Vec<OpResult>,
    },
    /// A condition failed; `current` holds, per condition, the key's current
    /// value.
    Failed { current: Vec<Option<KeyValue>> },
}

/// A range read over every key that starts with `prefix`, in key order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeRequest {
    pub prefix: String,
    /// Continue after this key (exclusive), for pagination.
    pub start_after: Option<String>,
    /// At most this many keys; 0 means no limit.
    pub limit: usize,
    /// Read as of this revision; `None` reads the current state.
    pub revision: Option<Revision>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeResponse {
    pub kvs: Vec<KeyValue>,
    /// More keys match after the last one returned.
    pub more: bool,
    /// The revision the read was served at.
    pub revision: Revision,
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    #[error("key already exists")]
    AlreadyExists(KeyValue),
    #[error("key not found")]
    NotFound,
    #[error("mod revision precondition failed")]
    Conflict(Option<KeyValue>),
    #[error("revision {requested} has been compacted (compacted up to {compacted})")]
    Compacted {
        requested: Revision,
        compacted: Revision,
    },
    #[error("revision {requested} is in the future (current {current})")]
    FutureRevision {
        requested: Revision,
        current: Revision,
    },
    #[error("storage I/O failed: {0}")]
    Io(String),
    #[error("store is closed")]
    Closed,
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Whether a store can currently make writes durable; see [`Store::health`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreHealth {
    /// `None` while writes succeed; set from the first failed write until a
    /// write (or the store's own probe of its storage) succeeds again.
    pub failing: Option<WriteFailure>,
    /// Writes (group-commit batches) that failed to persist since the store
    /// opened; only ever grows, for a metrics counter.
    pub write_errors: u64,
}

/// Why a store's writes are failing, and since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteFailure {
    /// The latest error, e.g. `No space left on device (os error 28)`.
    pub error: String,
    /// When the first write of this run of failures failed.
    pub since: SystemTime,
}

impl StoreHealth {
    /// True while writes are not known to fail.
    pub fn is_ok(&self) -> bool {
        self.failing.is_none()
    }
}

impl std::fmt::Display for StoreHealth {
    /// `ok`, or the error and how long it has lasted: the text of a failing
    /// readiness check.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.failing {
            None => f.write_str("ok"),
            Some(w) => {
                let secs = SystemTime::now()
                    .duration_since(w.since)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                write!(f, "store writes failing for {secs}s: {}", w.error)
            }
        }
    }
}

/// A stream of watch items for one prefix. The stream ending (`None`) means the
/// watch was cancelled (the store closed, or the consumer fell too far behind);
/// the consumer re-watches from the last revision it saw.
pub struct WatchStream {
    pub(crate) rx: tokio::sync::mpsc::Receiver<WatchItem>,
    pub(crate) progress: Option<Box<dyn Fn() + Send + Sync>>,
}

impl WatchStream {
    /// Receives the next item; `None` once the watch is cancelled.
    pub async fn recv(&mut self) -> Option<WatchItem> {
        self.rx.recv().await
    }

    /// An item if one is ready: `Some(Some(item))`; `Some(None)` once the
    /// watch is cancelled; `None` when nothing is waiting.
    pub fn try_recv(&mut self) -> Option<Option<WatchItem>> {
        use tokio::sync::mpsc::error::TryRecvError;
        match self.rx.try_recv() {
            Ok(item) => Some(Some(item)),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(None),
        }
    }

    /// Asks the store to send a [`WatchItem::Progress`] with the current
    /// revision, ordered after every event already delivered.
    pub fn request_progress(&self) {
        if let Some(p) = &self.progress {
            p()
        }
    }

    /// Builds a stream from a channel, for backends that are not built on the
    /// in-memory engine.
    pub fn from_channel(
        rx: tokio::sync::mpsc::Receiver<WatchItem>,
        progress: Option<Box<dyn Fn() + Send + Sync>>,
    ) -> Self {
        WatchStream { rx, progress }
    }
}

impl futures::Stream for WatchStream {
    type Item = WatchItem;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<WatchItem>> {
        self.rx.poll_recv(cx)
    }
}

/// The store contract. Every backend passes [`conformance`].
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// The latest committed revision.
    fn current_revision(&self) -> Revision;

    /// The revision up to which history has been compacted.
    fn compacted_revision(&self) -> Revision;

    /// One key, as of `revision` (current if `None`); also returns the revision
    /// the read was served at.
    async fn get(
        &self,
        key: &str,
        revision: Option<Revision>,
    ) -> Result<(Option<KeyValue>, Revision)>;

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse>;

    /// Applies a transaction atomically. Returns once it is durable.
    async fn txn(&self, txn: Txn) -> Result<TxnResponse>;

    /// Watches every key under `prefix` for changes with a revision greater
    /// than `after`. Fails with [`StoreError::Compacted`] if `after` is older
    /// than the retained history.
    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream>;

    /// Drops history up to and including `revision`.
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// Whether writes currently persist. Cheap (no I/O): meant for every
    /// readiness check and metrics scrape. Backends without storage that can
    /// fail are always healthy.
    fn health(&self) -> StoreHealth {
        StoreHealth::default()
    }

    /// Creates `key`; fails with [`StoreError::AlreadyExists`] if present.
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let txn = Txn {
            conditions: vec![Condition::Absent(key.to_string())],
            ops: vec![Op::Put {
                key: key.to_string(),
                value,
            }],
        };
        match self.txn(txn).await? {
            TxnResponse::Committed { mut results, .. } => results
                .pop()
                .and_then(|r| r.kv)
                .ok_or_else(|| StoreError::Io("put returned no value".into())),
            TxnResponse::Failed { mut current } => match current.pop().flatten() {
                Some(kv) => Err(StoreError::AlreadyExists(kv)),
                None => Err(StoreError::Io(
                    "create failed without a current value".into(),
                )),
            },
        }
    }

    /// Replaces `key` if its mod revision is `expected`; fails with
    /// [`StoreError::NotFound`] or [`StoreError::Conflict`] otherwise.
    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue> {
        let txn = Txn {
            conditions: vec![Condition::ModRevision(key.to_string(), expected)],
            ops: vec![Op::Put {
                key: key.to_string(),
                value,
            }],
        };
        match self.txn(txn).await? {
            TxnResponse::Committed { mut results, .. } => results
                .pop()
                .and_then(|r| r.kv)
                .ok_or_else(|| StoreError::Io("put returned no value".into())),
            TxnResponse::Failed { mut current } => match current.pop().flatten() {
                Some(kv) => Err(StoreError::Conflict(Some(kv))),
                None => Err(StoreError::NotFound),
            },
        }
    }

    /// Deletes `key`, if `expected` is given only when its mod revision
    /// matches. Returns the deleted value and the deleting revision.
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(KeyValue, Revision)> {
        let (conditions, expected_present) = match expected {
            Some(rev) => (vec![Condition::ModRevision(key.to_string(), rev)], true),
            None => (vec![], false),
        };
        let txn = Txn {
            conditions,
            ops: vec![Op::Delete {
                key: key.to_string(),
            }],
        };
        match self.txn(txn).await? {
            TxnResponse::Committed {
                revision,
                mut results,
            } => match results.pop().and_then(|r| r.prev) {
                Some(prev) => Ok((prev, revision)),
                None => Err(StoreError::NotFound),
            },
            TxnResponse::Failed { mut current } => match current.pop().flatten() {
                Some(kv) if expected_present => Err(StoreError::Conflict(Some(kv))),
                _ => Err(StoreError::NotFound),
            },
        }
    }
}
