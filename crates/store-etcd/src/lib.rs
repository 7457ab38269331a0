//! The [`store::Store`] contract over an etcd cluster, so the API server can
//! keep its objects in etcd (`trellis server --etcd-servers`) with the same
//! semantics as on the embedded file store.
//!
//! Revisions: a fresh etcd is at revision 1 with no keys, where a fresh
//! store is at 0, so the store's revision is etcd's minus one
//! ([`OFFSET`]). The offset is fixed, so every API server on the same etcd
//! hands out the same resourceVersions. Compaction maps the same way, with
//! one more difference: after etcd compacts at `C` it still replays the
//! event *at* `C`, while the store contract says history up to and including
//! the compacted revision is gone; [`EtcdStore::watch`] checks the start
//! revision against etcd's history first, so both agree.
//!
//! Transactions are etcd transactions: every condition becomes a `Compare`
//! (absent = create revision 0, mod revision = mod revision), the writes go
//! in the success branch with `prev_kv`, and the failure branch reads every
//! condition's key, so a failed compare-and-swap reports the current values
//! atomically. etcd refuses two writes to one key in a transaction; so does
//! this store.
//!
//! `current_revision` must answer without I/O, and must also move when
//! another API server writes; a background watch of the whole key prefix
//! (the *follower*) keeps it current, besides every response header.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use etcdv3::proto;
use parking_lot::Mutex;
use store::{
    Condition, Event, EventKind, KeyValue, Op, OpResult, RangeRequest, RangeResponse, Result,
    Revision, Store, StoreError, StoreHealth, Txn, TxnResponse, WatchItem, WatchStream,
    WriteFailure,
};

/// etcd's revision of a store revision is this much higher.
pub const OFFSET: i64 = 1;
/// Buffered watch items per watch before etcd's stream is back-pressured.
const WATCH_BUFFER: usize = 1024;
/// How long the follower waits before watching again after an error.
const FOLLOWER_RETRY: Duration = Duration::from_millis(500);

/// Where the store lives.
#[derive(Clone, Debug, Default)]
pub struct EtcdOptions {
    pub client: etcdv3::Config,
    /// Prepended to every key (kube-apiserver's `--etcd-prefix` is the
    /// same idea), so several API servers can share one etcd without
    /// seeing each other's objects. Empty by default: trellis's keys already
    /// start with `/registry/`.
    pub prefix: String,
}

/// A store whose data lives in etcd.
pub struct EtcdStore {
    shared: Arc<Shared>,
    follower: tokio::task::JoinHandle<()>,
}

struct Shared {
    client: etcdv3::Client,
    prefix: Vec<u8>,
    /// The newest etcd revision seen in any response.
    current: AtomicI64,
    /// The newest compaction revision known (store numbering).
    compacted: AtomicI64,
    failing: Mutex<Option<WriteFailure>>,
    write_errors: AtomicU64,
}

fn to_etcd(rev: Revision) -> i64 {
    rev + OFFSET
}

fn to_store(rev: i64) -> Revision {
    (rev - OFFSET).max(0)
}

fn io(e: etcdv3::Error) -> StoreError {
    StoreError::Io(e.to_string())
}

impl Shared {
    fn key(&self, key: &str) -> Vec<u8> {
        let mut k = self.prefix.clone();
        k.extend_from_slice(key.as_bytes());
        k
    }

    /// The key range of every key under `prefix`: etcd needs a non-empty
    /// start key, and `\0` is the smallest.
    fn span(&self, prefix: &str) -> (Vec<u8>, Vec<u8>) {
        let start = self.key(prefix);
        let end = proto::prefix_end(&start);
        if start.is_empty() {
            (vec![0], end)
        } else {
            (start, end)
        }
    }

    fn see(&self, header: Option<&proto::ResponseHeader>) {
        if let Some(h) = header {
            self.current.fetch_max(h.revision, Ordering::AcqRel);
        }
    }

    fn kv(&self, kv: proto::KeyValue) -> KeyValue {
        let key = kv.key.get(self.prefix.len()..).unwrap_or_default();
        KeyValue {
            key: Arc::from(String::from_utf8_lossy(key).as_ref()),
            value: Bytes::from(kv.value),
            create_revision: to_store(kv.create_revision),
            mod_revision: to_store(kv.mod_revision),
            version: kv.version,
        }
    }

    fn current(&self) -> Revision {
        to_store(self.current.load(Ordering::Acquire))
    }

    /// The current revision from etcd itself (a count-only read).
    async fn fresh_current(&self) -> Result<Revision> {
        let (key, range_end) = self.span("");
        let resp = self
            .client
            .range(proto::RangeRequest {
                key,
                range_end,
                count_only: true,
                ..Default::default()
            })
            .await
            .map_err(io)?;
        self.see(resp.header.as_ref());
        Ok(self.current())
    }

    /// etcd does not say up to where it compacted; a watch from revision 1
    /// is cancelled with the compaction revision, which tells.
    async fn learn_compacted(&self) -> Revision {
        let probe = proto::WatchCreateRequest {
            key: b"\0trellis-compaction-probe".to_vec(),
            start_revision: 1,
            ..Default::default()
        };
        if let Ok(mut w) = self.client.watch(probe).await {
            let cancelled = tokio::time::timeout(Duration::from_secs(1), async {
                loop {
                    match w.message().await {
                        Ok(m) if m.canceled => return Some(m.compact_revision),
                        Ok(_) => continue,
                        Err(_) => return None,
                    }
                }
            })
            .await;
            if let Ok(Some(rev)) = cancelled {
                // etcd keeps revision `rev` itself, which the store counts
                // as not yet compacted.
                self.compacted
                    .fetch_max(to_store(rev) - 1, Ordering::AcqRel);
            }
        }
        self.compacted.load(Ordering::Acquire)
    }

    async fn compacted_error(&self, requested: Revision) -> StoreError {
        let compacted = self.learn_compacted().await.max(requested);
        StoreError::Compacted {
            requested,
            compacted,
        }
    }

    /// Maps a read error at `revision` to the store's error.
    async fn read_error(&self, e: etcdv3::Error, revision: Option<Revision>) -> StoreError {
        match revision {
            Some(r) if e.is_compacted() => self.compacted_error(r).await,
            Some(r) if e.is_future_revision() => StoreError::FutureRevision {
                requested: r,
                current: self
                    .fresh_current()
                    .await
                    .unwrap_or_else(|_| self.current()),
            },
            _ => io(e),
        }
    }

    fn write_result<T>(&self, r: etcdv3::Result<T>) -> Result<T> {
        match r {
            Ok(v) => {
                if self.failing.lock().is_some() {
                    *self.failing.lock() = None;
                }
                Ok(v)
            }
            Err(e) => {
                if e.is_unavailable() {
                    self.write_errors.fetch_add(1, Ordering::Relaxed);
                    let mut f = self.failing.lock();
                    let since = f.as_ref().map(|w| w.since).unwrap_or_else(SystemTime::now);
                    *f = Some(WriteFailure {
                        error: e.to_string(),
                        since,
                    });
                }
                Err(io(e))
            }
        }
    }
}

impl EtcdStore {
    /// Connects and reads the current revision; fails if etcd cannot be
    /// reached (after the client has tried every endpoint).
    pub async fn connect(options: EtcdOptions) -> Result<EtcdStore> {
        let client = etcdv3::Client::new(&options.client).map_err(io)?;
        let shared = Arc::new(Shared {
            client,
            prefix: options.prefix.into_bytes(),
            current: AtomicI64::new(0),
            compacted: AtomicI64::new(0),
            failing: Mutex::new(None),
            write_errors: AtomicU64::new(0),
        });
        shared.fresh_current().await?;
        let follower = tokio::spawn(follow(Arc::downgrade(&shared)));
        Ok(EtcdStore { shared, follower })
    }

    /// The etcd client (for callers that also need maintenance calls).
    pub fn client(&self) -> &etcdv3::Client {
        &self.shared.client
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        self.follower.abort();
    }
}

/// Keeps `current` moving with writes made by anyone: watches the whole
/// prefix from the newest revision seen, values and all (etcd 3.4 has no
/// keys-only watch), and stops when the store is dropped.
async fn follow(shared: std::sync::Weak<Shared>) {
    loop {
        let Some(s) = shared.upgrade() else { return };
        let from = s.current.load(Ordering::Acquire) + 1;
        let (key, range_end) = s.span("");
        let create = proto::WatchCreateRequest {
            key,
            range_end,
            start_revision: from,
            ..Default::default()
        };
        let client = s.client.clone();
        drop(s);
        let mut watch = match client.watch(create).await {
            Ok(w) => w,
            Err(_) => {
                tokio::time::sleep(FOLLOWER_RETRY).await;
                continue;
            }
        };
        loop {
            let m = match watch.message().await {
                Ok(m) => m,
                Err(_) => break,
            };
            let Some(s) = shared.upgrade() else { return };
            s.see(m.header.as_ref());
            if let Some(last) = m.events.iter().rev().find_map(|e| e.kv.as_ref()) {
                s.current.fetch_max(last.mod_revision, Ordering::AcqRel);
            }
            if m.canceled {
                if m.compact_revision > 0 {
                    s.compacted
                        .fetch_max(to_store(m.compact_revision) - 1, Ordering::AcqRel);
                }
                break;
            }
        }
        tokio::time::sleep(FOLLOWER_RETRY).await;
    }
}

/// Forwards one etcd watch into a store watch stream until either side
/// ends.
async fn forward(
    shared: Arc<Shared>,
    mut watch: etcdv3::Watch,
    tx: tokio::sync::mpsc::Sender<WatchItem>,
) {
    loop {
        let m = tokio::select! {
            m = watch.message() => m,
            _ = tx.closed() => return,
        };
        let Ok(m) = m else { return };
        shared.see(m.header.as_ref());
        if m.canceled {
            if m.compact_revision > 0 {
                shared
                    .compacted
                    .fetch_max(to_store(m.compact_revision) - 1, Ordering::AcqRel);
            }
            // Ending the stream makes the consumer watch again from its
            // last revision, which then fails with `Compacted` if that is
            // what happened.
            return;
        }
        if m.created || m.fragment {
            continue;
        }
        if m.events.is_empty() {
            let rev = m.header.as_ref().map(|h| h.revision).unwrap_or(0);
            if tx.send(WatchItem::Progress(to_store(rev))).await.is_err() {
                return;
            }
            continue;
        }
        for e in m.events {
            let Some(kv) = e.kv else { continue };
            let prev = e.prev_kv.map(|p| shared.kv(p));
            let event = if e.r#type == proto::EventType::Delete as i32 {
                let kv = shared.kv(kv);
                Event {
                    kind: EventKind::Delete,
                    kv: KeyValue {
                        value: Bytes::new(),
                        create_revision: 0,
                        version: 0,
                        ..kv
                    },
                    prev,
                }
            } else {
                Event {
                    kind: EventKind::Put,
                    kv: shared.kv(kv),
                    prev,
                }
            };
            if tx.send(WatchItem::Event(event)).await.is_err() {
                return;
            }
        }
    }
}

#[async_trait::async_trait]
impl Store for EtcdStore {
    fn current_revision(&self) -> Revision {
        self.shared.current()
    }

    fn compacted_revision(&self) -> Revision {
        self.shared.compacted.load(Ordering::Acquire)
    }

    async fn get(
        &self,
        key: &str,
        revision: Option<Revision>,
    ) -> Result<(Option<KeyValue>, Revision)> {
        let s = &self.shared;
        let req = proto::RangeRequest {
            key: s.key(key),
            revision: revision.map(to_etcd).unwrap_or(0),
            ..Default::default()
        };
        let resp = match s.client.range(req).await {
            Ok(r) => r,
            Err(e) => return Err(s.read_error(e, revision).await),
        };
        s.see(resp.header.as_ref());
        let at = revision.unwrap_or_else(|| to_store(resp.header.map(|h| h.revision).unwrap_or(0)));
        Ok((resp.kvs.into_iter().next().map(|kv| s.kv(kv)), at))
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse> {
        let s = &self.shared;
        let (start, range_end) = s.span(&req.prefix);
        let key = match &req.start_after {
            Some(after) => {
                let mut k = s.key(after);
                k.push(0);
                k
            }
            None => start,
        };
        let resp = s
            .client
            .range(proto::RangeRequest {
                key,
                range_end,
                limit: req.limit as i64,
                revision: req.revision.map(to_etcd).unwrap_or(0),
                ..Default::default()
            })
            .await;
        let resp = match resp {
            Ok(r) => r,
            Err(e) => return Err(s.read_error(e, req.revision).await),
        };
        s.see(resp.header.as_ref());
        let revision = req
            .revision
            .unwrap_or_else(|| to_store(resp.header.map(|h| h.revision).unwrap_or(0)));
        Ok(RangeResponse {
            kvs: resp.kvs.into_iter().map(|kv| s.kv(kv)).collect(),
            more: resp.more,
            revision,
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        let s = &self.shared;
        let mut keys: Vec<&str> = txn.ops.iter().map(Op::key).collect();
        keys.sort_unstable();
        if keys.windows(2).any(|w| w[0] == w[1]) {
            return Err(StoreError::Io(
                "a transaction on etcd may write each key only once".into(),
            ));
        }
        let compare = txn
            .conditions
            .iter()
            .map(|c| match c {
                Condition::Absent(k) => proto::Compare::absent(s.key(k)),
                Condition::ModRevision(k, rev) => {
                    proto::Compare::mod_revision(s.key(k), to_etcd(*rev))
                }
            })
            .collect();
        let success = txn
            .ops
            .iter()
            .map(|op| proto::RequestOp {
                request: Some(match op {
                    Op::Put { key, value } => proto::Request::Put(proto::PutRequest {
                        key: s.key(key),
                        value: value.to_vec(),
                        prev_kv: true,
                        ..Default::default()
                    }),
                    Op::Delete { key } => proto::Request::DeleteRange(proto::DeleteRangeRequest {
                        key: s.key(key),
                        prev_kv: true,
                        ..Default::default()
                    }),
                }),
            })
            .collect();
        let failure = txn
            .conditions
            .iter()
            .map(|c| proto::RequestOp {
                request: Some(proto::Request::Range(proto::RangeRequest {
                    key: s.key(c.key()),
                    ..Default::default()
                })),
            })
            .collect();
        let resp = s.write_result(
            s.client
                .txn(proto::TxnRequest {
                    compare,
                    success,
                    failure,
                })
                .await,
        )?;
        s.see(resp.header.as_ref());
        let revision = to_store(resp.header.as_ref().map(|h| h.revision).unwrap_or(0));
        if !resp.succeeded {
            let current = resp
                .responses
                .into_iter()
                .map(|r| match r.response {
                    Some(proto::Response::Range(rr)) => {
                        rr.kvs.into_iter().next().map(|kv| s.kv(kv))
                    }
                    _ => None,
                })
                .collect();
            return Ok(TxnResponse::Failed { current });
        }
        let mut results = Vec::with_capacity(txn.ops.len());
        for (op, r) in txn.ops.iter().zip(resp.responses) {
            let result = match (op, r.response) {
                (Op::Put { key, value }, Some(proto::Response::Put(p))) => {
                    let prev = p.prev_kv.map(|kv| s.kv(kv));
                    // etcd does not return the written key; it is what a
                    // put makes of the previous one.
                    let kv = KeyValue {
                        key: Arc::from(key.as_str()),
                        value: value.clone(),
                        create_revision: prev.as_ref().map_or(revision, |p| p.create_revision),
                        mod_revision: revision,
                        version: prev.as_ref().map_or(1, |p| p.version + 1),
                    };
                    OpResult { prev, kv: Some(kv) }
                }
                (Op::Delete { .. }, Some(proto::Response::DeleteRange(d))) => OpResult {
                    prev: d.prev_kvs.into_iter().next().map(|kv| s.kv(kv)),
                    kv: None,
                },
                _ => return Err(StoreError::Io("etcd answered a different operation".into())),
            };
            results.push(result);
        }
        Ok(TxnResponse::Committed { revision, results })
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        let s = self.shared.clone();
        let (key, range_end) = s.span(prefix);
        // The store's history must still hold revision `after` itself (see
        // the module comment); a read at it tells, unless it is in the
        // future, which a watch may wait for.
        let probe = s
            .client
            .range(proto::RangeRequest {
                key: key.clone(),
                range_end: range_end.clone(),
                revision: to_etcd(after),
                count_only: true,
                ..Default::default()
            })
            .await;
        match probe {
            Err(e) if e.is_compacted() => return Err(s.compacted_error(after).await),
            Err(e) if e.is_future_revision() => {}
            Err(e) => return Err(io(e)),
            Ok(r) => s.see(r.header.as_ref()),
        }
        let watch = s
            .client
            .watch(proto::WatchCreateRequest {
                key,
                range_end,
                start_revision: to_etcd(after) + 1,
                prev_kv: true,
                ..Default::default()
            })
            .await
            .map_err(io)?;
        let progress = watch.progress_handle();
        let (tx, rx) = tokio::sync::mpsc::channel(WATCH_BUFFER);
        tokio::spawn(forward(s, watch, tx));
        Ok(WatchStream::from_channel(
            rx,
            Some(Box::new(move || progress.request())),
        ))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let s = &self.shared;
        match s.client.compact(to_etcd(revision)).await {
            Ok(resp) => {
                s.see(resp.header.as_ref());
                s.compacted.fetch_max(revision, Ordering::AcqRel);
                Ok(())
            }
            // Someone compacted further already: nothing left to do.
            Err(e) if e.is_compacted() => {
                s.learn_compacted().await;
                Ok(())
            }
            Err(e) if e.is_future_revision() => Err(StoreError::FutureRevision {
                requested: revision,
                current: s.fresh_current().await.unwrap_or_else(|_| s.current()),
            }),
            Err(e) => Err(io(e)),
        }
    }

    fn health(&self) -> StoreHealth {
        StoreHealth {
            failing: self.shared.failing.lock().clone(),
            write_errors: self.shared.write_errors.load(Ordering::Relaxed),
        }
    }
}
