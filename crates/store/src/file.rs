//! The durable file backend: the MVCC engine persisted to a write-ahead log
//! with periodic snapshots, in one directory.
//!
//! Layout of the directory:
//! - `LOCK`: held with `flock` while a store is open, so two processes (or two
//!   opens in one process) never write the same log.
//! - `wal-<first revision>.log`: log segments (see `wal`). The engine hands us
//!   each group-commit batch once; it is written as one frame and made durable
//!   with one `fdatasync` before the engine acknowledges any writer.
//! - `snap-<revision>.snap`: the full state at a revision (see `snapshot`).
//!
//! Snapshot policy: after a batch, once the current segment holds more than
//! `FileOptions::snapshot_log_bytes` and more than the last snapshot's size
//! (so snapshot writing costs at most about as much I/O as the log itself),
//! the state is copied (cheap: keys and values are reference-counted) and
//! written by a background thread, the next batch starts a new segment, and
//! once the snapshot is durable every older segment and snapshot is deleted.
//!
//! Recovery loads the newest valid snapshot, replays the commits after it from
//! the segments (checking that revisions are contiguous and that every record
//! matches the state it applies to), truncates a torn final record, and hands
//! the replayed commits to the engine as history, so watches can resume from
//! any revision after the snapshot.

mod codec;
mod snapshot;
mod wal;

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::engine::{Commit, Engine, EngineConfig, Persistence, Recovered};
use crate::{KeyValue, Revision};

use codec::invalid;
use snapshot::{list_snapshots, read_snapshot, sync_dir, write_snapshot};
use wal::{list_segments, open_payload, scan_segment, segment_name};

/// Tuning of the file backend.
#[derive(Clone, Debug)]
pub struct FileOptions {
    /// Snapshot once the current log segment holds at least this many bytes
    /// (and at least as many as the last snapshot).
    pub snapshot_log_bytes: u64,
    /// Write snapshots on a background thread (the default). When false they
    /// are written inline, stalling commits meanwhile; for tests.
    pub background_snapshots: bool,
    /// How long `open` waits for the directory lock. A store dropped in this
    /// process releases it only once its committer thread has finished, so a
    /// short wait makes close-then-reopen reliable.
    pub lock_timeout: Duration,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            snapshot_log_bytes: 64 << 20,
            background_snapshots: true,
            lock_timeout: Duration::from_secs(5),
        }
    }
}

/// Constructors for the durable file backend.
pub struct FileStore;

impl FileStore {
    /// Opens (or creates) the store in `dir`, recovering every acknowledged write.
    pub fn open(dir: &Path) -> io::Result<Engine> {
        Self::open_with_config(dir, EngineConfig::default())
    }

    pub fn open_with_config(dir: &Path, config: EngineConfig) -> io::Result<Engine> {
        Self::open_with_options(dir, config, FileOptions::default())
    }

    pub fn open_with_options(
        dir: &Path,
        config: EngineConfig,
        options: FileOptions,
    ) -> io::Result<Engine> {
        fs::create_dir_all(dir)?;
        let lock = lock_dir(dir, options.lock_timeout)?;
        let started = Instant::now();
        let (mut recovered, persistence) = recover(dir, lock, options)?;
        // The engine trims history past `max_history` only after the next
        // batch; trim here so a long log does not sit in memory until then.
        if recovered.history.len() > config.max_history {
            let excess = recovered.history.len() - config.max_history;
            let dropped: Vec<Commit> = recovered.history.drain(..excess).collect();
            if let Some(last) = dropped.last() {
                recovered.compacted = last.revision;
            }
        }
        tracing::info!(
            dir = %dir.display(),
            revision = recovered.revision,
            keys = recovered.kvs.len(),
            history = recovered.history.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "file store recovered"
        );
        Ok(Engine::start(recovered, Box::new(persistence), config))
    }
}

#[cfg(unix)]
fn lock_dir(dir: &Path, timeout: Duration) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("LOCK"))?;
    let deadline = Instant::now() + timeout;
    loop {
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(file);
        }
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if err.kind() != io::ErrorKind::WouldBlock {
            return Err(err);
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "store directory {} is in use by another store",
                    dir.display()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(not(unix))]
fn lock_dir(dir: &Path, _timeout: Duration) -> io::Result<File> {
    // No advisory lock on this platform; the file still marks the directory.
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("LOCK"))
}

/// Rebuilds the state from `dir` and readies the log for appending.
fn recover(
    dir: &Path,
    lock: File,
    options: FileOptions,
) -> io::Result<(Recovered, FilePersistence)> {
    // Snapshots that never got renamed into place are incomplete.
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("snap-") && name.ends_with(".tmp") {
            fs::remove_file(&path)?;
        }
    }

    // The newest snapshot that reads back intact. Renamed snapshots were
    // fsynced first, so a bad one means disk damage; an older one still works
    // if the log after it is complete, which replay checks.
    let snapshots = list_snapshots(dir)?;
    let mut base: Option<(Revision, BTreeMap<Arc<str>, KeyValue>, u64)> = None;
    for (_, path) in snapshots.iter().rev() {
        match read_snapshot(path) {
            Ok(s) => {
                base = Some(s);
                break;
            }
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, "skipping unreadable snapshot")
            }
        }
    }
    if base.is_none() && !snapshots.is_empty() {
        tracing::error!("no readable snapshot; trying to replay the whole log");
    }
    let (snap_rev, mut kvs, snap_size) = base.unwrap_or_default();

    let segments = list_segments(dir)?;
    let mut history: Vec<Commit> = Vec::new();
    // Last revision seen in the log stream, and last revision applied.
    let mut log_last: Option<Revision> = None;
    let mut revision = snap_rev;
    let mut obsolete = Vec::new();
    let mut last_segment: Option<(Revision, PathBuf, u64)> = None;
    for (i, (start, path)) in segments.iter().enumerate() {
        let is_last = i + 1 == segments.len();
        // A segment followed by one starting at or below snap_rev + 1 holds
        // nothing the snapshot lacks.
        if let Some((next_start, _)) = segments.get(i + 1)
            && *next_start <= snap_rev + 1
        {
            obsolete.push(path.clone());
            continue;
        }
        if log_last.is_none() && *start > snap_rev + 1 {
            return Err(invalid(format!(
                "log starts at revision {start} but the newest usable snapshot is at {snap_rev}"
            )));
        }
        if let Some(last) = log_last
            && *start != last + 1
        {
            return Err(invalid(format!(
                "{} starts at revision {start} but the previous segment ends at {last}",
                path.display()
            )));
        }
        let data = fs::read(path)?;
        let scan = scan_segment(&data, is_last, path)?;
        let mut expected = *start;
        for payload in &scan.frames {
            let (mut r, n) =
                open_payload(payload).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
            for _ in 0..n {
                let (rev, commit) = codec::decode_commit(&mut r, &mut kvs, snap_rev)
                    .map_err(|e| invalid(format!("{}: {e}", path.display())))?;
                if rev != expected {
                    return Err(invalid(format!(
                        "{}: found revision {rev} where {expected} was expected",
                        path.display()
                    )));
                }
                expected += 1;
                if let Some(c) = commit {
                    revision = rev;
                    history.push(c);
                }
            }
            if !r.is_empty() {
                return Err(invalid(format!(
                    "{}: trailing bytes in a log record",
                    path.display()
                )));
            }
        }
        log_last = Some(expected - 1);
        if scan.valid_len < data.len() {
            tracing::warn!(
                path = %path.display(),
                offset = scan.valid_len,
                dropped_bytes = data.len() - scan.valid_len,
                "truncating a torn log record left by a crash"
            );
            let f = OpenOptions::new().write(true).open(path)?;
            f.set_len(scan.valid_len as u64)?;
            f.sync_all()?;
        }
        if is_last {
            last_segment = Some((*start, path.clone(), scan.valid_len as u64));
        }
    }

    // Append to the last segment if it ends exactly at the recovered revision;
    // otherwise (no log, or a log that ends before the snapshot) start anew.
    let (seg_start, seg_file, seg_bytes) = match last_segment {
        Some((start, path, len)) if log_last == Some(revision) => {
            let f = OpenOptions::new().append(true).open(&path)?;
            (start, f, len)
        }
        _ => {
            let start = revision + 1;
            let f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(dir.join(segment_name(start)))?;
            sync_dir(dir)?;
            (start, f, 0)
        }
    };

    // Clean up what the snapshot supersedes (a crash may have interrupted the
    // cleanup after the snapshot was written).
    for path in obsolete {
        fs::remove_file(path)?;
    }
    for (rev, path) in &snapshots {
        if *rev < snap_rev {
            fs::remove_file(path)?;
        }
    }

    let recovered = Recovered {
        kvs,
        revision,
        compacted: snap_rev,
        history,
    };
    let persistence = FilePersistence {
        dir: dir.to_path_buf(),
        seg: seg_file,
        seg_start,
        seg_bytes,
        last_revision: revision,
        rotate_pending: false,
        dir_sync_pending: false,
        buf: Vec::new(),
        last_snapshot_bytes: snap_size,
        snapshot: None,
        options,
        failed: false,
        _lock: lock,
    };
    Ok((recovered, persistence))
}

/// Appends batches to the current segment; rotates segments and writes
/// snapshots.
struct FilePersistence {
    dir: PathBuf,
    seg: File,
    seg_start: Revision,
    seg_bytes: u64,
    /// Revision of the last commit appended.
    last_revision: Revision,
    /// A snapshot at `last_revision` has been started: the next append opens
    /// a new segment, so older segments hold only what the snapshot covers.
    rotate_pending: bool,
    /// A new segment's directory entry is not yet durable.
    dir_sync_pending: bool,
    buf: Vec<u8>,
    last_snapshot_bytes: u64,
    snapshot: Option<JoinHandle<io::Result<u64>>>,
    options: FileOptions,
    /// A write failed: the segment may end in a partial frame, so never
    /// append after it (the engine refuses writes from then on anyway).
    failed: bool,
    /// Released when this is dropped, after the snapshot thread is joined.
    _lock: File,
}

impl FilePersistence {
    fn rotate(&mut self) -> io::Result<()> {
        let start = self.last_revision + 1;
        let f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(self.dir.join(segment_name(start)))?;
        self.seg = f;
        self.seg_start = start;
        self.seg_bytes = 0;
        self.dir_sync_pending = true;
        self.rotate_pending = false;
        Ok(())
    }

    fn try_append(&mut self, commits: &[Arc<Commit>]) -> io::Result<()> {
        if self.rotate_pending {
            self.rotate()?;
        }
        let ends = wal::encode_frames(&mut self.buf, commits)?;
        let mut from = 0;
        for end in ends {
            self.seg.write_all(&self.buf[from..end])?;
            self.seg.sync_data()?;
            from = end;
        }
        if self.dir_sync_pending {
            sync_dir(&self.dir)?;
            self.dir_sync_pending = false;
        }
        self.seg_bytes += self.buf.len() as u64;
        if let Some(last) = commits.last() {
            self.last_revision = last.revision;
        }
        // Do not keep a buffer sized for one huge batch forever.
        if self.buf.capacity() > 16 << 20 {
            self.buf = Vec::new();
        }
        Ok(())
    }

    /// Collects a finished snapshot thread's outcome; true if one is running.
    fn snapshot_running(&mut self) -> bool {
        match &self.snapshot {
            Some(h) if !h.is_finished() => true,
            Some(_) => {
                if let Some(h) = self.snapshot.take() {
                    self.collect(h);
                }
                false
            }
            None => false,
        }
    }

    fn collect(&mut self, handle: JoinHandle<io::Result<u64>>) {
        match handle.join() {
            Ok(Ok(size)) => self.last_snapshot_bytes = size,
            // Nothing is lost: the old segments stay until a snapshot succeeds.
            Ok(Err(e)) => tracing::warn!(error = %e, "writing a store snapshot failed"),
            Err(_) => tracing::error!("the store snapshot thread panicked"),
        }
    }
}

impl Persistence for FilePersistence {
    fn append(&mut self, commits: &[Arc<Commit>]) -> io::Result<()> {
        if self.failed {
            return Err(io::Error::other("an earlier log write failed"));
        }
        let result = self.try_append(commits);
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    fn after_batch(
        &mut self,
        kvs: &BTreeMap<Arc<str>, KeyValue>,
        revision: Revision,
    ) -> io::Result<()> {
        if self.failed || self.snapshot_running() || self.rotate_pending {
            return Ok(());
        }
        let threshold = self
            .options
            .snapshot_log_bytes
            .max(self.last_snapshot_bytes);
        if self.seg_bytes < threshold || revision != self.last_revision {
            return Ok(());
        }
        // Runs under the engine's state lock: only copy references here.
        let started = Instant::now();
        let state: Vec<KeyValue> = kvs.values().cloned().collect();
        tracing::debug!(
            keys = state.len(),
            copy_us = started.elapsed().as_micros() as u64,
            "starting a store snapshot"
        );
        self.rotate_pending = true;
        let dir = self.dir.clone();
        let handle = std::thread::Builder::new()
            .name("store-snapshot".into())
            .spawn(move || {
                let started = Instant::now();
                let size = write_snapshot(&dir, revision, &state)?;
                drop(state);
                remove_superseded(&dir, revision)?;
                tracing::info!(
                    revision,
                    bytes = size,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "wrote store snapshot"
                );
                Ok(size)
            })?;
        if self.options.background_snapshots {
            self.snapshot = Some(handle);
        } else {
            self.collect(handle);
        }
        Ok(())
    }
}

/// Deletes the snapshots and segments that the snapshot at `revision` makes
/// unnecessary. Segments are cut at snapshot revisions, so a segment starting
/// at or below `revision` holds nothing after it.
fn remove_superseded(dir: &Path, revision: Revision) -> io::Result<()> {
    for (rev, path) in list_snapshots(dir)? {
        if rev < revision {
            fs::remove_file(path)?;
        }
    }
    for (start, path) in list_segments(dir)? {
        if start <= revision {
            fs::remove_file(path)?;
        }
    }
    Ok(())
}

impl Drop for FilePersistence {
    fn drop(&mut self) {
        // Finish a snapshot in progress before the lock is released, so a
        // reopen never races with it.
        if let Some(h) = self.snapshot.take() {
            self.collect(h);
        }
    }
}
