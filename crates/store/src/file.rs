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
//! any revision after the snapshot. A torn record is a bad frame with nothing
//! valid after it in the last segment: the only damage a crash can cause.
//! Anything else (a bad frame with a valid one anywhere after it, a bad frame
//! in a sealed segment, a gap between segments, a record that does not replay,
//! a damaged snapshot the log cannot make up for) may hide acknowledged writes,
//! so `open` fails with an `InvalidData` error naming the file, the byte
//! offset and what is there. With `FileOptions::repair` it instead keeps the
//! valid prefix and moves the damaged bytes and every later segment into
//! `damaged-<unix seconds>/` (never deleting them). Opening an undamaged store
//! writes nothing, so it works on a full disk: the first segment after a
//! snapshot is created by the first append, not by `open`.
//!
//! Write errors: a batch whose write or `fdatasync` fails is not acknowledged,
//! and its bytes are cut off the segment again (truncated to the last durable
//! length and fsynced) before anything else is appended; until that cut
//! succeeds every append fails. The store stays open: the next batch, or the
//! engine's probe (which also writes, fsyncs and removes a small probe file),
//! finds out when the disk takes writes again.

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
use wal::{list_segments, open_payload, preallocate, scan_segment, segment_name};

/// The file a storage probe writes, fsyncs and removes.
const PROBE_FILE: &str = "probe.tmp";
/// How much a probe writes: a write of this size succeeding says more than a
/// single block would about whether a batch will fit.
const PROBE_BYTES: usize = 64 << 10;

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
    /// Repair a damaged log instead of refusing to open: keep every record
    /// before the damage, and move the damaged bytes (to the end of their
    /// segment) and every later segment into `damaged-<unix seconds>/` in the
    /// store directory. Off by default: it gives up the writes after the
    /// damage, which an operator should decide.
    pub repair: bool,
    /// Reserve this much room at a time at the end of the log segment being
    /// appended to (`fallocate`), so that a batch's `fdatasync` writes the
    /// batch's pages and nothing about the file's size or blocks: on ext4
    /// that is one device write instead of three, about a fifth less CPU
    /// and latency per acknowledged write. The reserved room reads as zeros
    /// and recovery takes a segment's all-zero end as free room. 0 turns it
    /// off (and where the filesystem cannot reserve, it is off by itself).
    pub preallocate_bytes: u64,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            snapshot_log_bytes: 64 << 20,
            background_snapshots: true,
            lock_timeout: Duration::from_secs(5),
            repair: false,
            preallocate_bytes: 4 << 20,
        }
    }
}

/// Constructors for the durable file backend.
pub struct FileStore;

impl FileStore {
    /// Opens (or creates) the store in `dir`, recovering every acknowledged
    /// write. A damaged log or snapshot is an `InvalidData` error naming the
    /// file and offset (see `FileOptions::repair`).
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

/// A place where the log cannot be trusted: where recovery stops, or, with
/// `FileOptions::repair`, where it cuts.
struct LogDamage {
    /// Index into the segment list.
    segment: usize,
    offset: usize,
    what: String,
}

/// Rebuilds the state from `dir` and readies the log for appending. Writes
/// nothing unless something needs cleaning up or repairing.
fn recover(
    dir: &Path,
    lock: File,
    options: FileOptions,
) -> io::Result<(Recovered, FilePersistence)> {
    // Snapshots that never got renamed into place are incomplete; a probe
    // file is left only by a crash during a probe.
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if (name.starts_with("snap-") && name.ends_with(".tmp")) || name == PROBE_FILE {
            fs::remove_file(&path)?;
        }
    }

    // The newest snapshot that reads back intact. Renamed snapshots were
    // fsynced first, so a bad one means disk damage; an older one still works
    // if the log after it is complete, which replay checks.
    let snapshots = list_snapshots(dir)?;
    let mut base: Option<(Revision, BTreeMap<Arc<str>, KeyValue>, u64)> = None;
    let mut unreadable: Vec<(Revision, PathBuf, io::Error)> = Vec::new();
    for (rev, path) in snapshots.iter().rev() {
        match read_snapshot(path) {
            Ok(s) => {
                base = Some(s);
                break;
            }
            Err(e) => {
                tracing::error!(error = %e, "skipping an unreadable snapshot");
                unreadable.push((*rev, path.clone(), e));
            }
        }
    }
    let (snap_rev, mut kvs, snap_size) = base.unwrap_or_default();
    let snapshot_trouble = || {
        unreadable
            .iter()
            .map(|(_, _, e)| format!("; unreadable snapshot {e}"))
            .collect::<String>()
    };

    let segments = list_segments(dir)?;
    let mut history: Vec<Commit> = Vec::new();
    // Last revision seen in the log stream, and last revision applied.
    let mut log_last: Option<Revision> = None;
    let mut revision = snap_rev;
    let mut obsolete = Vec::new();
    // The last segment kept, to append to: its start, path and valid length.
    let mut tail: Option<(Revision, PathBuf, u64)> = None;
    let mut damage: Option<LogDamage> = None;
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
                "{}: the log starts at revision {start} but the newest usable snapshot is at \
                 revision {snap_rev} (byte offset 0){}; the revisions in between are in no \
                 readable file, so the repair option cannot help",
                path.display(),
                snapshot_trouble()
            )));
        }
        if let Some(last) = log_last
            && *start != last + 1
        {
            let previous = tail
                .as_ref()
                .map_or(String::new(), |(_, p, _)| format!(" {}", p.display()));
            damage = Some(LogDamage {
                segment: i,
                offset: 0,
                what: format!(
                    "the segment starts at revision {start} where {} was expected (the \
                     previous segment{previous} ends at revision {last}: it was cut short or \
                     records are missing)",
                    last + 1
                ),
            });
            break;
        }
        let data = fs::read(path)?;
        let scan = scan_segment(&data);
        let mut expected = *start;
        for &(offset, payload) in &scan.frames {
            match replay_frame(payload, &mut kvs, snap_rev, expected, &mut history) {
                Ok(next) => {
                    expected = next;
                    if expected - 1 > snap_rev {
                        revision = expected - 1;
                    }
                }
                Err(e) => {
                    damage = Some(LogDamage {
                        segment: i,
                        offset,
                        what: format!("a record that does not replay ({e})"),
                    });
                    break;
                }
            }
        }
        if damage.is_none()
            && let Some(d) = &scan.damage
        {
            if d.is_torn_tail(is_last) {
                tracing::warn!(
                    path = %path.display(),
                    offset = d.offset,
                    found = %d.found,
                    dropped_bytes = data.len() - d.offset,
                    "truncating a torn log record left by a crash"
                );
                let f = OpenOptions::new().write(true).open(path)?;
                f.set_len(d.offset as u64)?;
                f.sync_all()?;
            } else {
                damage = Some(LogDamage {
                    segment: i,
                    offset: d.offset,
                    what: d.describe(is_last),
                });
            }
        }
        // What is kept of this segment: everything before the damage, if any.
        let kept = damage.as_ref().map_or(scan.valid_len, |d| d.offset);
        if kept > 0 || damage.is_none() {
            log_last = Some(expected - 1);
            tail = Some((*start, path.clone(), kept as u64));
        }
        if damage.is_some() {
            break;
        }
    }

    // A snapshot proves that every revision up to its own was acknowledged;
    // ending below an unreadable one means those writes are in no readable
    // file.
    if let Some((rev, path, e)) = unreadable.iter().find(|(rev, _, _)| *rev > revision) {
        return Err(invalid(format!(
            "{}: the snapshot at revision {rev} is unreadable ({e}) and the log recovers only \
             up to revision {revision}; the repair option cannot help",
            path.display()
        )));
    }

    if let Some(d) = &damage {
        let (_, path) = &segments[d.segment];
        if !options.repair {
            let later = if d.segment + 1 < segments.len() {
                " and every later segment"
            } else {
                ""
            };
            return Err(invalid(format!(
                "{}: damaged log at byte offset {}: {}. Acknowledged writes may lie after it, \
                 so the store refuses to start rather than drop them silently. To start with \
                 the records before it (up to revision {revision}) and move the rest of the \
                 file{later} into {}/damaged-<unix seconds>/, open the store with repair \
                 enabled (FileOptions::repair; trellis: --repair-store){}",
                path.display(),
                d.offset,
                d.what,
                dir.display(),
                snapshot_trouble()
            )));
        }
        repair_log(dir, &segments[d.segment..], d, revision)?;
    }

    // Append to the last segment if it ends exactly at the recovered revision;
    // otherwise (no log, or a log that ends before the snapshot) the first
    // append starts a new one, so opening needs no free space.
    // The file may be longer than its records: room reserved for appends
    // (zeros), which the next append writes over.
    let (seg, seg_start, seg_bytes, allocated, rotate_pending) = match tail {
        Some((start, path, len)) if log_last == Some(revision) => {
            let f = OpenOptions::new().write(true).open(&path)?;
            let allocated = f.metadata()?.len().max(len);
            (Some(f), start, len, allocated, false)
        }
        _ => (None, revision + 1, 0, 0, true),
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
    // Unreadable snapshots the log made up for are kept for inspection, out
    // of the way; failing to move them costs nothing but a warning.
    let damaged: Vec<&PathBuf> = unreadable
        .iter()
        .filter(|(_, _, e)| e.kind() == io::ErrorKind::InvalidData)
        .map(|(_, path, _)| path)
        .collect();
    if !damaged.is_empty() {
        let moved = Quarantine::new(dir).and_then(|q| {
            for path in &damaged {
                q.take(path)?;
            }
            q.sync()?;
            Ok(q.dir)
        });
        match moved {
            Ok(into) => tracing::error!(
                into = %into.display(),
                revision,
                "moved unreadable snapshots aside; the log held every revision they did"
            ),
            Err(e) => tracing::warn!(error = %e, "could not move unreadable snapshots aside"),
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
        seg,
        seg_start,
        seg_bytes,
        allocated,
        last_revision: revision,
        rotate_pending,
        dir_sync_pending: false,
        buf: Vec::new(),
        last_snapshot_bytes: snap_size,
        snapshot: None,
        options,
        dirty: false,
        #[cfg(test)]
        fail_sync: Arc::default(),
        _lock: lock,
    };
    Ok((recovered, persistence))
}

/// Replays one frame's commits onto `kvs` and `history`, expecting revisions
/// from `expected` on; returns the next expected revision. On an error `kvs`
/// and `history` are left as they were before the frame.
fn replay_frame(
    payload: &[u8],
    kvs: &mut BTreeMap<Arc<str>, KeyValue>,
    snap_rev: Revision,
    expected: Revision,
    history: &mut Vec<Commit>,
) -> io::Result<Revision> {
    let mark = history.len();
    let mut replay = || {
        let (mut r, n) = open_payload(payload)?;
        let mut expected = expected;
        for _ in 0..n {
            let (rev, commit) = codec::decode_commit(&mut r, kvs, snap_rev)?;
            // Into the history first, so an error below reverts it too.
            if let Some(c) = commit {
                history.push(c);
            }
            if rev != expected {
                return Err(invalid(format!(
                    "found revision {rev} where {expected} was expected"
                )));
            }
            expected += 1;
        }
        if !r.is_empty() {
            return Err(invalid("trailing bytes after the record's commits"));
        }
        Ok(expected)
    };
    let result = replay();
    if result.is_err() {
        for c in history.drain(mark..).rev() {
            codec::revert(kvs, &c.events);
        }
    }
    result
}

/// `DIR/damaged-<unix seconds>/`: where damaged files go instead of being
/// deleted.
struct Quarantine {
    dir: PathBuf,
}

impl Quarantine {
    fn new(store_dir: &Path) -> io::Result<Quarantine> {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        // Two repairs within a second get their own directories.
        for n in 0u32.. {
            let name = match n {
                0 => format!("damaged-{secs}"),
                n => format!("damaged-{secs}-{n}"),
            };
            let dir = store_dir.join(name);
            match fs::create_dir(&dir) {
                Ok(()) => {
                    sync_dir(store_dir)?;
                    return Ok(Quarantine { dir });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other("no free damaged-* directory name"))
    }

    /// Moves `path` in (a rename: no copy, no free space needed).
    fn take(&self, path: &Path) -> io::Result<PathBuf> {
        let name = path.file_name().unwrap_or_default();
        let to = self.dir.join(name);
        fs::rename(path, &to)?;
        Ok(to)
    }

    /// Makes everything moved in durable.
    fn sync(&self) -> io::Result<()> {
        sync_dir(&self.dir)?;
        if let Some(parent) = self.dir.parent() {
            sync_dir(parent)?;
        }
        Ok(())
    }
}

/// Moves the damaged part of the log aside: the bytes of `segments[0]` from
/// the damage to its end (the whole file if the damage is at offset 0), and
/// every later segment. The copy is durable before the segment is cut, so a
/// crash during repair loses nothing (the next repair finds the same damage).
fn repair_log(
    dir: &Path,
    segments: &[(Revision, PathBuf)],
    damage: &LogDamage,
    kept_revision: Revision,
) -> io::Result<()> {
    let q = Quarantine::new(dir)?;
    let (_, path) = &segments[0];
    let mut moved = Vec::new();
    if damage.offset == 0 {
        moved.push(q.take(path)?);
    } else {
        let data = fs::read(path)?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let to = q.dir.join(format!("{name}.from-offset-{}", damage.offset));
        let mut f = File::create(&to)?;
        f.write_all(data.get(damage.offset..).unwrap_or_default())?;
        f.sync_all()?;
        moved.push(to);
    }
    for (_, later) in &segments[1..] {
        moved.push(q.take(later)?);
    }
    q.sync()?;
    if damage.offset > 0 {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(damage.offset as u64)?;
        f.sync_all()?;
    }
    tracing::error!(
        path = %path.display(),
        offset = damage.offset,
        found = %damage.what,
        moved = ?moved,
        kept_revision,
        "repaired the store log: kept every record before the damage, moved the rest aside"
    );
    Ok(())
}

/// Appends batches to the current segment; rotates segments and writes
/// snapshots.
struct FilePersistence {
    dir: PathBuf,
    /// The segment appended to; `None` until the first append after an open
    /// that found no segment to continue creates one.
    seg: Option<File>,
    seg_start: Revision,
    /// The segment's durable length: everything up to here is acknowledged.
    seg_bytes: u64,
    /// The segment file's length: `seg_bytes` plus room reserved for
    /// appends, which reads as zeros.
    allocated: u64,
    /// Revision of the last commit appended.
    last_revision: Revision,
    /// The next append opens a new segment: a snapshot at `last_revision`
    /// has been started (so older segments hold only what it covers), or no
    /// segment is open yet.
    rotate_pending: bool,
    /// A new segment's directory entry is not yet durable.
    dir_sync_pending: bool,
    buf: Vec<u8>,
    last_snapshot_bytes: u64,
    snapshot: Option<JoinHandle<io::Result<u64>>>,
    options: FileOptions,
    /// A failed append may have left bytes of its batch after `seg_bytes`.
    /// Nothing is appended until they are cut off durably: a frame written
    /// after them would turn them into corruption, and a complete one among
    /// them would bring back a batch whose writers were told it failed.
    dirty: bool,
    /// Failpoint: the next `fdatasync` of the log fails after the write.
    #[cfg(test)]
    fail_sync: Arc<std::sync::atomic::AtomicBool>,
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
        self.seg = Some(f);
        self.seg_start = start;
        self.seg_bytes = 0;
        self.allocated = 0;
        self.dir_sync_pending = true;
        self.rotate_pending = false;
        Ok(())
    }

    /// Writes the frames encoded in `buf` (ending at `ends`) and makes them
    /// durable.
    fn try_append(&mut self, ends: Vec<usize>, commits: &[Arc<Commit>]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        if self.rotate_pending {
            self.rotate()?;
        }
        self.reserve(self.buf.len() as u64);
        let Some(seg) = self.seg.as_mut() else {
            return Err(io::Error::other("no log segment is open"));
        };
        let mut from = 0;
        for end in ends {
            // Positioned writes: the file may extend past the records.
            seg.write_all_at(&self.buf[from..end], self.seg_bytes + from as u64)?;
            #[cfg(test)]
            if self
                .fail_sync
                .swap(false, std::sync::atomic::Ordering::SeqCst)
            {
                return Err(io::Error::other("injected fdatasync failure"));
            }
            seg.sync_data()?;
            from = end;
        }
        if self.dir_sync_pending {
            sync_dir(&self.dir)?;
            self.dir_sync_pending = false;
        }
        self.seg_bytes += self.buf.len() as u64;
        self.allocated = self.allocated.max(self.seg_bytes);
        if let Some(last) = commits.last() {
            self.last_revision = last.revision;
        }
        // Do not keep a buffer sized for one huge batch forever.
        if self.buf.capacity() > 16 << 20 {
            self.buf = Vec::new();
        }
        Ok(())
    }

    /// Reserves room for `len` more bytes of log, and `preallocate_bytes`
    /// beyond them, when the segment has less. Best effort: a filesystem
    /// that cannot reserve (full, or no `fallocate`) gets plain appends.
    fn reserve(&mut self, len: u64) {
        let step = self.options.preallocate_bytes;
        let Some(seg) = &self.seg else { return };
        if step == 0 || self.seg_bytes + len <= self.allocated {
            return;
        }
        let want = self.seg_bytes + len + step;
        match preallocate(seg, want) {
            Ok(()) => self.allocated = want,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {}
            Err(e) => {
                tracing::debug!(error = %e, "the log cannot reserve room; appending without");
                self.options.preallocate_bytes = 0;
            }
        }
    }

    /// Cuts the segment back to its durable length and makes the cut
    /// durable. After a failed `fdatasync` the kernel may have dropped or
    /// kept the batch's pages; either way they are gone once this succeeds.
    fn cut_back(&mut self) -> io::Result<()> {
        if let Some(seg) = &mut self.seg {
            // Reserved room goes too; the next append reserves again.
            seg.set_len(self.seg_bytes)?;
            seg.sync_all()?;
            self.allocated = self.seg_bytes;
        }
        self.dirty = false;
        Ok(())
    }

    /// Cuts off what a failed append left, then writes, fsyncs and removes
    /// a probe file: whether the directory takes writes again.
    fn probe_storage(&mut self) -> io::Result<()> {
        if self.dirty {
            self.cut_back()?;
        }
        let path = self.dir.join(PROBE_FILE);
        let written = (|| {
            let mut f = File::create(&path)?;
            f.write_all(&[0u8; PROBE_BYTES])?;
            f.sync_all()
        })();
        // Removed whether or not the write worked: it must not hold space.
        let removed = fs::remove_file(&path);
        written?;
        removed?;
        if let Some(seg) = &self.seg {
            seg.sync_data()?;
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

/// An I/O error as the engine should see it: `EINVAL` from the kernel
/// (`InvalidInput`) is trouble with the storage, not a batch that cannot be
/// stored, which is what the engine takes `InvalidInput` for.
fn storage_error(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::InvalidInput {
        io::Error::other(e)
    } else {
        e
    }
}

impl Persistence for FilePersistence {
    fn append(&mut self, commits: &[Arc<Commit>]) -> io::Result<()> {
        // Encoded before any I/O: a batch that cannot be encoded (too big)
        // is rejected as `InvalidInput` and touches nothing.
        let ends = wal::encode_frames(&mut self.buf, commits)?;
        if self.dirty {
            self.cut_back().map_err(|e| {
                let e = storage_error(e);
                io::Error::new(
                    e.kind(),
                    format!("cutting an earlier failed write off the log: {e}"),
                )
            })?;
        }
        let result = self.try_append(ends, commits).map_err(storage_error);
        if result.is_err() {
            self.dirty = true;
            if let Err(e) = self.cut_back() {
                tracing::warn!(
                    error = %e,
                    "cutting a failed write off the log failed; retrying before the next write"
                );
            }
        }
        result
    }

    fn probe(&mut self) -> io::Result<()> {
        self.probe_storage().map_err(storage_error)
    }

    fn after_batch(
        &mut self,
        kvs: &BTreeMap<Arc<str>, KeyValue>,
        revision: Revision,
    ) -> io::Result<()> {
        if self.dirty || self.snapshot_running() || self.rotate_pending {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Store, StoreError};
    use bytes::Bytes;
    use std::sync::atomic::Ordering;

    /// A batch whose `fdatasync` fails after its bytes reached the file is
    /// not acknowledged, leaves no trace in the log, does not close the
    /// store, and health reports it until the engine's probe finds the
    /// storage working again.
    #[tokio::test]
    async fn failed_fsync_drops_the_batch_and_the_store_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let opts = FileOptions::default();
        let fail = {
            let lock = lock_dir(dir.path(), opts.lock_timeout).unwrap();
            let (recovered, persistence) = recover(dir.path(), lock, opts.clone()).unwrap();
            let fail = persistence.fail_sync.clone();
            let s = Engine::start(recovered, Box::new(persistence), EngineConfig::default());
            s.create("/a", Bytes::from("1")).await.unwrap();
            assert!(s.health().is_ok());

            fail.store(true, Ordering::SeqCst);
            let err = s.create("/lost", Bytes::from("never-acknowledged")).await;
            assert!(
                matches!(&err, Err(StoreError::Io(m)) if m.contains("injected fdatasync failure")),
                "{err:?}"
            );
            assert_eq!(s.get("/lost", None).await.unwrap().0, None);
            assert_eq!(s.current_revision(), 1);
            let health = s.health();
            let failing = health.failing.as_ref().expect("health reports the failure");
            assert!(failing.error.contains("injected"), "{health:?}");
            assert_eq!(health.write_errors, 1);
            assert!(health.to_string().contains("injected"), "{health}");

            // The probe (about once a second) finds the disk fine again.
            let deadline = Instant::now() + Duration::from_secs(5);
            while !s.health().is_ok() {
                assert!(Instant::now() < deadline, "health never came back");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert_eq!(s.health().write_errors, 1, "the counter only grows");

            // The failed batch's revision is reused; its bytes are gone.
            let kv = s.create("/b", Bytes::from("2")).await.unwrap();
            assert_eq!(kv.mod_revision, 2);
            fail
        };
        let _ = fail;
        let log = fs::read(dir.path().join(segment_name(1))).unwrap();
        assert!(
            !log.windows(18).any(|w| w == b"never-acknowledged"),
            "the failed batch's bytes stayed in the log"
        );
        let s = FileStore::open(dir.path()).unwrap();
        assert_eq!(s.current_revision(), 2);
        assert_eq!(s.get("/lost", None).await.unwrap().0, None);
        assert_eq!(
            s.get("/b", None).await.unwrap().0.unwrap().value,
            Bytes::from("2")
        );
    }

    /// A write error also fails the batch's failed preconditions (they were
    /// judged against the dropped commits) while compactions go ahead.
    #[tokio::test]
    async fn a_failed_batch_fails_every_writer_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let opts = FileOptions::default();
        let lock = lock_dir(dir.path(), opts.lock_timeout).unwrap();
        let (recovered, persistence) = recover(dir.path(), lock, opts).unwrap();
        let fail = persistence.fail_sync.clone();
        let s = Engine::start(recovered, Box::new(persistence), EngineConfig::default());
        s.create("/a", Bytes::from("1")).await.unwrap();
        fail.store(true, Ordering::SeqCst);
        let (x, y, c) = tokio::join!(
            s.create("/x", Bytes::from("1")),
            s.create("/x", Bytes::from("2")),
            s.compact(1)
        );
        // Both creates land in one batch unless the committer was quick; in
        // any case neither may report success and the second may not report
        // a conflict with the dropped first.
        for r in [&x, &y] {
            assert!(
                matches!(r, Err(StoreError::Io(_))) || r.is_ok(),
                "unexpected {r:?}"
            );
        }
        assert!(x.is_err() || y.is_err(), "the injected failure hit nobody");
        let present = s.get("/x", None).await.unwrap().0;
        assert_eq!(present.is_some(), x.is_ok() || y.is_ok());
        assert!(c.is_ok(), "{c:?}");
    }
}
