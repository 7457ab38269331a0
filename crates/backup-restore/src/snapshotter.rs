//! Taking snapshots (`br:pkg/snapshot/snapshotter`): a full snapshot is
//! etcd's Maintenance snapshot of the whole database, saved under
//! upstream's name at the revision it was taken; a delta is the events a
//! watch delivered since the last snapshot, flushed into one `Incr` object
//! per period (or sooner when the buffer passes the memory limit). Nothing
//! buffered means no object.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use etcdv3::proto;
use tokio::sync::Mutex;

use crate::compress;
use crate::delta;
use crate::snapshot::{Compression, Kind, Snapshot};
use crate::snapstore::{SnapStore, StoreError};

/// Why a snapshot failed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("etcd: {0}")]
    Etcd(#[from] etcdv3::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("snapshot file {path}: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the watch for delta snapshots failed: {0}")]
    WatchFailed(String),
}

fn file_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> SnapshotError + '_ {
    move |source| SnapshotError::File {
        path: path.display().to_string(),
        source,
    }
}

/// What the snapshotter last wrote, for the snapshot leases and
/// `/snapshot/latest`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Latest {
    pub full: Option<Snapshot>,
    pub delta: Option<Snapshot>,
}

/// Events watched but not yet in a delta object.
#[derive(Default)]
struct Buffer {
    events: Vec<proto::Event>,
    bytes: usize,
}

/// Full and delta snapshots of one etcd into one store.
pub struct Snapshotter {
    client: etcdv3::Client,
    store: Arc<dyn SnapStore>,
    compression: Compression,
    temp_dir: PathBuf,
    timeout: Duration,
    buffer: Mutex<Buffer>,
    /// The last revision a snapshot covers (full or delta).
    last_revision: Mutex<i64>,
    latest: Mutex<Latest>,
    /// One snapshot at a time: a delta flush and a full never interleave.
    taking: Mutex<()>,
}

impl Snapshotter {
    pub fn new(
        client: etcdv3::Client,
        store: Arc<dyn SnapStore>,
        compression: Compression,
        temp_dir: PathBuf,
        timeout: Duration,
    ) -> Snapshotter {
        Snapshotter {
            client,
            store,
            compression,
            temp_dir,
            timeout,
            buffer: Mutex::new(Buffer::default()),
            last_revision: Mutex::new(0),
            latest: Mutex::new(Latest::default()),
            taking: Mutex::new(()),
        }
    }

    pub fn store(&self) -> &Arc<dyn SnapStore> {
        &self.store
    }

    pub async fn latest(&self) -> Latest {
        self.latest.lock().await.clone()
    }

    pub async fn last_revision(&self) -> i64 {
        *self.last_revision.lock().await
    }

    /// Picks up where the store left off: the newest full and delta, and
    /// the revision the next delta starts after.
    pub async fn load(&self) -> Result<(), SnapshotError> {
        let snaps = self.store.list().await?;
        let (full, deltas) = crate::snapshot::latest_set(&snaps);
        let delta = deltas.last().cloned();
        *self.last_revision.lock().await = crate::snapshot::latest_revision(&snaps);
        *self.latest.lock().await = Latest { full, delta };
        Ok(())
    }

    async fn upload(&self, snap: &Snapshot, raw: &std::path::Path) -> Result<(), SnapshotError> {
        if self.compression == Compression::None {
            self.store.save(snap, raw).await?;
            return Ok(());
        }
        let packed = raw.with_extension("packed");
        let (src, dst, c) = (raw.to_path_buf(), packed.clone(), self.compression);
        tokio::task::spawn_blocking(move || compress::compress_file(&src, &dst, c))
            .await
            .map_err(|e| file_err(&packed)(std::io::Error::other(e)))?
            .map_err(file_err(&packed))?;
        let saved = self.store.save(snap, &packed).await;
        let _ = tokio::fs::remove_file(&packed).await;
        saved?;
        Ok(())
    }

    /// Takes a full snapshot now (`is_final` marks the last one before a
    /// member stops). Buffered events are flushed first, so the store has
    /// no gap between the previous set and this one.
    pub async fn full(&self, is_final: bool) -> Result<Snapshot, SnapshotError> {
        let _one = self.taking.lock().await;
        tokio::fs::create_dir_all(&self.temp_dir)
            .await
            .map_err(file_err(&self.temp_dir))?;
        let raw = self
            .temp_dir
            .join(format!("full-{}.db", std::process::id()));
        let mut file = tokio::fs::File::create(&raw)
            .await
            .map_err(file_err(&raw))?;
        // The revision first: the database streamed after it holds at
        // least everything up to it.
        let revision = self.client.status().await?.header.map_or(0, |h| h.revision);
        let written = self.client.snapshot(&mut file, self.timeout).await;
        drop(file);
        if let Err(e) = written {
            let _ = tokio::fs::remove_file(&raw).await;
            return Err(e.into());
        }
        let mut snap = Snapshot::full(revision, now_unix(), self.compression);
        snap.is_final = is_final;
        let uploaded = self.upload(&snap, &raw).await;
        let _ = tokio::fs::remove_file(&raw).await;
        uploaded?;
        // Events at or below the full are in it.
        {
            let mut buf = self.buffer.lock().await;
            buf.events.retain(|e| delta::revision(e) > revision);
            buf.bytes = buf.events.iter().map(event_size).sum();
        }
        let mut last = self.last_revision.lock().await;
        *last = (*last).max(revision);
        self.latest.lock().await.full = Some(snap.clone());
        tracing::info!(name = %snap.name(), "full snapshot taken");
        Ok(snap)
    }

    /// Writes the buffered events as one delta object; `None` when nothing
    /// was buffered.
    pub async fn flush_delta(&self) -> Result<Option<Snapshot>, SnapshotError> {
        let _one = self.taking.lock().await;
        let events = {
            let mut buf = self.buffer.lock().await;
            buf.bytes = 0;
            std::mem::take(&mut buf.events)
        };
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return Ok(None);
        };
        let (start, end) = (delta::revision(first), delta::revision(last));
        let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let data = delta::encode(&events, &time);
        let data =
            compress::compress_bytes(&data, self.compression).map_err(file_err(&self.temp_dir))?;
        tokio::fs::create_dir_all(&self.temp_dir)
            .await
            .map_err(file_err(&self.temp_dir))?;
        let raw = self
            .temp_dir
            .join(format!("delta-{}.json", std::process::id()));
        tokio::fs::write(&raw, &data)
            .await
            .map_err(file_err(&raw))?;
        let snap = Snapshot::delta(start, end, now_unix(), self.compression);
        let saved = self.store.save(&snap, &raw).await;
        let _ = tokio::fs::remove_file(&raw).await;
        if let Err(e) = saved {
            // Put the events back so the next flush retries them.
            let mut buf = self.buffer.lock().await;
            let mut back = events;
            back.append(&mut buf.events);
            buf.bytes = back.iter().map(event_size).sum();
            buf.events = back;
            return Err(e.into());
        }
        let mut last_rev = self.last_revision.lock().await;
        *last_rev = (*last_rev).max(end);
        self.latest.lock().await.delta = Some(snap.clone());
        tracing::debug!(name = %snap.name(), events = events.len(), "delta snapshot taken");
        Ok(Some(snap))
    }

    /// Buffers events; true when the buffer has reached `limit` bytes and
    /// should be flushed now.
    async fn buffer_events(&self, events: Vec<proto::Event>, limit: usize) -> bool {
        let mut buf = self.buffer.lock().await;
        buf.bytes += events.iter().map(event_size).sum::<usize>();
        buf.events.extend(events);
        buf.bytes >= limit
    }

    /// Watches etcd from after the last snapshot and buffers every event;
    /// flushes a delta every `period` and when the buffer reaches
    /// `memory_limit`. Returns when the watch fails (the caller restarts
    /// it, after a full snapshot if the revision was compacted away).
    pub async fn run_deltas(
        &self,
        period: Duration,
        memory_limit: usize,
    ) -> Result<(), SnapshotError> {
        let from = self.last_revision().await + 1;
        let mut watch = self
            .client
            .watch(proto::WatchCreateRequest {
                key: vec![0],
                range_end: vec![0],
                start_revision: from,
                ..Default::default()
            })
            .await?;
        let mut tick = tokio::time::interval(period);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => { self.flush_delta().await?; }
                m = watch.message() => {
                    let m = m?;
                    if m.canceled || m.compact_revision > 0 {
                        return Err(SnapshotError::WatchFailed(format!(
                            "canceled (compacted at {}): {}", m.compact_revision, m.cancel_reason
                        )));
                    }
                    if !m.events.is_empty() && self.buffer_events(m.events, memory_limit).await {
                        self.flush_delta().await?;
                    }
                }
            }
        }
    }
}

fn event_size(e: &proto::Event) -> usize {
    e.kv.as_ref().map_or(0, |kv| kv.key.len() + kv.value.len()) + 32
}

pub fn now_unix() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The snapshots a store holds, newest set: for `/snapshot/latest`.
pub fn describe(s: &Snapshot) -> serde_json::Value {
    serde_json::json!({
        "kind": match s.kind { Kind::Full => "Full", Kind::Delta => "Incr" },
        "startRevision": s.start_revision,
        "lastRevision": s.last_revision,
        "createdOn": chrono::DateTime::from_timestamp(s.created, 0).map(|t| t.to_rfc3339()),
        "snapName": s.name(),
        "isFinal": s.is_final,
        "compressionSuffix": s.compression.suffix(),
    })
}
