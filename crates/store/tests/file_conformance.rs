//! The conformance suite on the durable file backend, plus tests of what only
//! a durable backend has: reopening, torn-tail repair, snapshots with log
//! replay, history across restarts and the directory lock.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use store::file::FileOptions;
use store::{
    Engine, EngineConfig, EventKind, FileStore, KeyValue, RangeRequest, Revision, Store,
    StoreError, TxnResponse, WatchItem, WatchStream,
};
use tempfile::TempDir;

/// A file store that deletes its directory when dropped.
struct TempStore {
    engine: Engine,
    _dir: TempDir,
}

#[async_trait::async_trait]
impl Store for TempStore {
    fn current_revision(&self) -> Revision {
        self.engine.current_revision()
    }
    fn compacted_revision(&self) -> Revision {
        self.engine.compacted_revision()
    }
    async fn get(
        &self,
        key: &str,
        revision: Option<Revision>,
    ) -> store::Result<(Option<KeyValue>, Revision)> {
        self.engine.get(key, revision).await
    }
    async fn range(&self, req: RangeRequest) -> store::Result<store::RangeResponse> {
        self.engine.range(req).await
    }
    async fn txn(&self, txn: store::Txn) -> store::Result<TxnResponse> {
        self.engine.txn(txn).await
    }
    async fn watch(&self, prefix: &str, after: Revision) -> store::Result<WatchStream> {
        self.engine.watch(prefix, after).await
    }
    async fn compact(&self, revision: Revision) -> store::Result<()> {
        self.engine.compact(revision).await
    }
    fn health(&self) -> store::StoreHealth {
        self.engine.health()
    }
}

store::store_conformance_tests!(|| async {
    let dir = tempfile::tempdir().unwrap();
    let engine = FileStore::open(dir.path()).unwrap();
    TempStore { engine, _dir: dir }
});

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Inline snapshots after every `log_bytes` of log, so tests are deterministic.
/// A store whose segments end where their records do (no room reserved
/// for appends), for tests that cut and append to the log's bytes.
fn open_exact(dir: &Path) -> std::io::Result<Engine> {
    let opts = FileOptions {
        preallocate_bytes: 0,
        ..FileOptions::default()
    };
    FileStore::open_with_options(dir, EngineConfig::default(), opts)
}

fn small_snapshots(log_bytes: u64) -> FileOptions {
    FileOptions {
        snapshot_log_bytes: log_bytes,
        background_snapshots: false,
        ..FileOptions::default()
    }
}

async fn dump(s: &Engine) -> Vec<KeyValue> {
    s.range(RangeRequest::default()).await.unwrap().kvs
}

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with(prefix))
        .collect();
    v.sort();
    v
}

fn last_segment(dir: &Path) -> PathBuf {
    files(dir, "wal-").pop().expect("a log segment")
}

/// Writes a mix of creates, updates, deletes and a multi-key transaction.
async fn write_mix(s: &Engine, n: usize) {
    for i in 0..n {
        let key = format!("/m/{:04}", i % 37);
        match s.get(&key, None).await.unwrap().0 {
            None => {
                s.create(&key, b(&format!("c{i}"))).await.unwrap();
            }
            Some(kv) if i % 5 == 0 => {
                s.delete(&key, Some(kv.mod_revision)).await.unwrap();
            }
            Some(kv) => {
                s.update(&key, b(&format!("u{i}")), kv.mod_revision)
                    .await
                    .unwrap();
            }
        }
    }
    let resp = s
        .txn(store::Txn {
            conditions: vec![],
            ops: vec![
                store::Op::Put {
                    key: "/m/txn".into(),
                    value: b("1"),
                },
                store::Op::Put {
                    key: "/m/txn".into(),
                    value: b("2"),
                },
                store::Op::Delete {
                    key: "/m/txn".into(),
                },
                store::Op::Put {
                    key: "/m/txn2".into(),
                    value: b("x"),
                },
            ],
        })
        .await
        .unwrap();
    assert!(matches!(resp, TxnResponse::Committed { .. }));
}

#[tokio::test]
async fn reopen_keeps_data_and_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let (before, rev) = {
        let s = FileStore::open(dir.path()).unwrap();
        write_mix(&s, 300).await;
        (dump(&s).await, s.current_revision())
    };
    let s = FileStore::open(dir.path()).unwrap();
    assert_eq!(s.current_revision(), rev);
    assert_eq!(dump(&s).await, before);
    // Without a snapshot the whole log is history: old revisions still read.
    assert_eq!(s.compacted_revision(), 0);
    let (first, _) = s.get("/m/0000", Some(1)).await.unwrap();
    assert_eq!(first.unwrap().value, b("c0"));
    let kv = s.create("/after", b("x")).await.unwrap();
    assert_eq!(kv.mod_revision, rev + 1);
    drop(s);
    let s = FileStore::open(dir.path()).unwrap();
    assert_eq!(s.current_revision(), rev + 1);
    assert_eq!(s.get("/after", None).await.unwrap().0, Some(kv));
}

#[tokio::test]
async fn torn_tail_is_truncated_and_earlier_records_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (before, rev) = {
        let s = open_exact(dir.path()).unwrap();
        write_mix(&s, 50).await;
        (dump(&s).await, s.current_revision())
    };
    let seg = last_segment(dir.path());
    let good_len = fs::metadata(&seg).unwrap().len();

    // A frame header promising more bytes than were written.
    let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&200u32.to_le_bytes()).unwrap();
    f.write_all(&[0xAB; 60]).unwrap();
    drop(f);
    {
        let s = open_exact(dir.path()).unwrap();
        assert_eq!(s.current_revision(), rev);
        assert_eq!(dump(&s).await, before);
    }
    assert_eq!(fs::metadata(&seg).unwrap().len(), good_len);

    // Zeros after the end (room reserved for appends) are kept, and a new
    // write goes over them, right after the records.
    let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&[0u8; 4096]).unwrap();
    drop(f);
    {
        let s = open_exact(dir.path()).unwrap();
        assert_eq!(dump(&s).await, before);
        s.create("/new", b("1")).await.unwrap();
    }
    assert_eq!(fs::metadata(&seg).unwrap().len(), good_len + 4096);
    let data = fs::read(&seg).unwrap();
    let at = good_len as usize;
    let frame = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as u64;
    let with_new = good_len + 8 + frame;

    // The last record cut in half: that commit is lost, all before it kept.
    let f = OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(with_new - 3).unwrap();
    drop(f);
    let s = open_exact(dir.path()).unwrap();
    assert_eq!(s.current_revision(), rev);
    assert_eq!(dump(&s).await, before);
    assert_eq!(
        s.create("/new", b("2")).await.unwrap().mod_revision,
        rev + 1
    );
}

/// The default store reserves room after its records; appends write into
/// it (the file does not grow), reopening finds the records' end, and a
/// torn write inside the room is cut off like any torn tail.
#[tokio::test]
async fn reserved_room_is_written_over_and_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let room = FileOptions::default().preallocate_bytes;
    let (before, rev) = {
        let s = FileStore::open(dir.path()).unwrap();
        write_mix(&s, 50).await;
        (dump(&s).await, s.current_revision())
    };
    let seg = last_segment(dir.path());
    let reserved = fs::metadata(&seg).unwrap().len();
    assert!(reserved >= room, "no room reserved: {reserved} bytes");
    let after = {
        let s = FileStore::open(dir.path()).unwrap();
        assert_eq!(
            (s.current_revision(), dump(&s).await),
            (rev, before.clone())
        );
        s.create("/after", b("x")).await.unwrap()
    };
    assert_eq!(after.mod_revision, rev + 1);
    assert_eq!(
        fs::metadata(&seg).unwrap().len(),
        reserved,
        "the append went into the reserved room"
    );
    // A torn write in the room: junk after the records, zeros around it.
    let data = fs::read(&seg).unwrap();
    let end = data.iter().rposition(|&x| x != 0).unwrap() + 1;
    assert!(end + 200 < data.len());
    let f = OpenOptions::new().write(true).open(&seg).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[0xA5; 100], end as u64 + 64).unwrap();
    drop(f);
    {
        let s = FileStore::open(dir.path()).unwrap();
        assert_eq!(s.current_revision(), rev + 1);
        assert_eq!(s.get("/after", None).await.unwrap().0, Some(after.clone()));
        let kv = s.create("/new", b("y")).await.unwrap();
        assert_eq!(kv.mod_revision, rev + 2);
    }
    let s = FileStore::open(dir.path()).unwrap();
    assert_eq!(s.current_revision(), rev + 2);
    let mut want = before;
    want.push(after);
    want.retain(|kv| &*kv.key != "/new");
    let got: Vec<KeyValue> = dump(&s)
        .await
        .into_iter()
        .filter(|kv| &*kv.key != "/new")
        .collect();
    want.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(got, want);
    assert_eq!(s.get("/new", None).await.unwrap().0.unwrap().value, b("y"));
}

#[tokio::test]
async fn corruption_before_the_tail_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = FileStore::open(dir.path()).unwrap();
        write_mix(&s, 20).await;
    }
    let seg = last_segment(dir.path());
    let mut data = fs::read(&seg).unwrap();
    data[20] ^= 0x55; // inside the first record
    fs::write(&seg, &data).unwrap();
    let err = FileStore::open(dir.path()).err().expect("open must fail");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
    // The damaged file is left alone for inspection.
    assert_eq!(fs::read(&seg).unwrap(), data);
}

#[tokio::test]
async fn snapshot_then_log_replay() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_snapshots(4096);
    let (before, rev) = {
        let s = FileStore::open_with_options(dir.path(), EngineConfig::default(), opts.clone())
            .unwrap();
        write_mix(&s, 400).await;
        (dump(&s).await, s.current_revision())
    };
    let snaps = files(dir.path(), "snap-");
    assert_eq!(snaps.len(), 1, "older snapshots are deleted: {snaps:?}");
    let segs = files(dir.path(), "wal-");
    assert!(
        segs.len() <= 1,
        "segments before the snapshot are deleted: {segs:?}"
    );
    let s = FileStore::open_with_options(dir.path(), EngineConfig::default(), opts).unwrap();
    assert_eq!(s.current_revision(), rev);
    assert_eq!(dump(&s).await, before);
    let compacted = s.compacted_revision();
    assert!(
        compacted > 0 && compacted < rev,
        "snapshot at {compacted}, head {rev}"
    );
    // Past reads work back to the snapshot and fail before it.
    let (_, at) = s.get("/m/0001", Some(compacted)).await.unwrap();
    assert_eq!(at, compacted);
    assert!(matches!(
        s.get("/m/0001", Some(compacted - 1)).await,
        Err(StoreError::Compacted { .. })
    ));
}

#[tokio::test]
async fn damaged_snapshot_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_snapshots(4096);
    {
        let s = FileStore::open_with_options(dir.path(), EngineConfig::default(), opts.clone())
            .unwrap();
        write_mix(&s, 300).await;
    }
    // An interrupted snapshot write is ignored and removed.
    let tmp = dir.path().join("snap-00000000000000099999.tmp");
    fs::write(&tmp, b"partial").unwrap();
    drop(FileStore::open_with_options(dir.path(), EngineConfig::default(), opts.clone()).unwrap());
    assert!(!tmp.exists());
    // A damaged snapshot whose log was already deleted cannot be recovered.
    let snap = files(dir.path(), "snap-").pop().unwrap();
    let mut data = fs::read(&snap).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 1;
    fs::write(&snap, &data).unwrap();
    let err = FileStore::open_with_options(dir.path(), EngineConfig::default(), opts)
        .err()
        .expect("open must fail");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
}

/// A snapshot written on the background thread (the default mode).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_snapshots_recover() {
    let dir = tempfile::tempdir().unwrap();
    let opts = FileOptions {
        snapshot_log_bytes: 16 * 1024,
        ..FileOptions::default()
    };
    let (before, rev) = {
        let s = FileStore::open_with_options(dir.path(), EngineConfig::default(), opts.clone())
            .unwrap();
        let mut tasks = Vec::new();
        for t in 0..8 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..150 {
                    s.create(&format!("/bg/{t}/{i:04}"), Bytes::from(vec![t as u8; 200]))
                        .await
                        .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        (dump(&s).await, s.current_revision())
    };
    assert!(!files(dir.path(), "snap-").is_empty());
    let s = FileStore::open_with_options(dir.path(), EngineConfig::default(), opts).unwrap();
    assert_eq!(s.current_revision(), rev);
    assert_eq!(dump(&s).await, before);
}

#[tokio::test]
async fn watch_resumes_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_snapshots(2048);
    let rev = {
        let s = FileStore::open_with_options(dir.path(), EngineConfig::default(), opts.clone())
            .unwrap();
        write_mix(&s, 200).await;
        s.current_revision()
    };
    let s = FileStore::open_with_options(dir.path(), EngineConfig::default(), opts).unwrap();
    let compacted = s.compacted_revision();
    assert!(compacted > 0 && compacted + 3 < rev, "{compacted} {rev}");
    assert!(matches!(
        s.watch("/m/", compacted - 1).await,
        Err(StoreError::Compacted { .. })
    ));
    let from = compacted + 1;
    let mut w = s.watch("/", from).await.unwrap();
    // A live write right after the watch starts must follow the replay.
    s.create("/live", b("1")).await.unwrap();
    let mut seen = Vec::new();
    while seen.last().copied() != Some(rev + 1) {
        match tokio::time::timeout(Duration::from_secs(5), w.recv()).await {
            Ok(Some(WatchItem::Event(e))) => {
                if e.kind == EventKind::Delete {
                    assert!(e.prev.is_some(), "a replayed delete carries prev");
                }
                seen.push(e.kv.mod_revision);
            }
            other => panic!("expected replayed events, got {other:?}"),
        }
    }
    assert!(seen.windows(2).all(|p| p[0] <= p[1]), "in revision order");
    seen.dedup();
    assert_eq!(seen, ((from + 1)..=rev + 1).collect::<Vec<_>>());
}

#[tokio::test]
async fn directory_is_locked_while_open() {
    let dir = tempfile::tempdir().unwrap();
    let opts = FileOptions {
        lock_timeout: Duration::from_millis(50),
        ..FileOptions::default()
    };
    let s = FileStore::open(dir.path()).unwrap();
    let err = FileStore::open_with_options(dir.path(), EngineConfig::default(), opts)
        .err()
        .expect("second open must fail");
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    drop(s);
    // Released once the first store is gone (open waits for its shutdown).
    FileStore::open(dir.path()).unwrap();
}
