//! The file store on a really full disk: a small tmpfs is mounted (we run as
//! root here and in CI; where mounting is not permitted the test says why and
//! skips) and filled. Writes fail with a clear error and health says so, no
//! acknowledged write is lost, the store reopens and serves reads while the
//! disk is full, and once space is freed health comes back by itself and
//! writes succeed again, without a restart.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use store::file::FileOptions;
use store::{Engine, EngineConfig, FileStore, RangeRequest, Store, StoreError};
use testkit::disk::Tmpfs;

fn options() -> FileOptions {
    FileOptions {
        // Snapshots run (and fail) on the full disk too; inline, so that one
        // finishing in the background cannot free space at a random moment.
        snapshot_log_bytes: 96 * 1024,
        background_snapshots: false,
        ..FileOptions::default()
    }
}

fn open(dir: &Path) -> Engine {
    FileStore::open_with_options(dir, EngineConfig::default(), options()).unwrap()
}

/// Fills the filesystem with `path` until a write fails; returns how much
/// was written.
fn fill(path: &Path) -> u64 {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let mut written = 0;
    for chunk in [64 * 1024, 4096, 512, 1] {
        let buf = vec![b'f'; chunk];
        while f.write_all(&buf).is_ok() {
            written += chunk as u64;
        }
    }
    written
}

fn is_enospc(e: &StoreError) -> bool {
    matches!(e, StoreError::Io(m) if m.contains("No space left on device"))
}

/// The write must fail for lack of space.
fn expect_enospc(result: store::Result<store::KeyValue>, what: &str) {
    match result {
        Err(e) => assert!(is_enospc(&e), "{what}: unexpected error: {e}"),
        Ok(kv) => panic!(
            "{what}: acknowledged at revision {} on a full disk",
            kv.mod_revision
        ),
    }
}

async fn check_acked(s: &Engine, acked: &BTreeMap<String, (Bytes, i64)>, failed: &[String]) {
    for (key, (value, rev)) in acked {
        let kv = s
            .get(key, None)
            .await
            .unwrap()
            .0
            .unwrap_or_else(|| panic!("acknowledged {key} is gone"));
        assert_eq!((&kv.value, kv.mod_revision), (value, *rev), "{key}");
    }
    for key in failed {
        assert_eq!(
            s.get(key, None).await.unwrap().0,
            None,
            "failed {key} is visible"
        );
    }
    let all = s.range(RangeRequest::default()).await.unwrap();
    assert_eq!(all.kvs.len(), acked.len(), "unknown keys appeared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_disk_fails_writes_reports_health_and_heals_without_restart() {
    let Some(fs_) = Tmpfs::mount("2m") else {
        return;
    };
    let dir = fs_.path().join("store");
    let filler: PathBuf = fs_.path().join("filler");
    let mut acked: BTreeMap<String, (Bytes, i64)> = BTreeMap::new();
    let mut failed: Vec<String> = Vec::new();

    // Ballast, freed at the end to make room again.
    let ballast = fs_.path().join("ballast");
    fs::write(&ballast, vec![b'b'; 512 * 1024]).unwrap();

    let s = open(&dir);
    // Write until the disk is full: the writes of the failing batches get a
    // clear error, and every acknowledged one stays.
    let mut first_error = None;
    for i in 0..10_000 {
        let key = format!("/k/{i:05}");
        let value = Bytes::from(vec![b'a' + (i % 26) as u8; 8 * 1024]);
        match s.create(&key, value.clone()).await {
            Ok(kv) => {
                acked.insert(key, (value, kv.mod_revision));
            }
            Err(e) => {
                assert!(is_enospc(&e), "unexpected error: {e}");
                failed.push(key);
                first_error = Some(e);
                break;
            }
        }
    }
    let first_error = first_error.expect("the disk never filled up");
    println!("{} writes acknowledged before: {first_error}", acked.len());
    assert!(acked.len() > 20, "too few writes to mean anything");
    // Whatever space is left over goes too, so any write needing a new page
    // fails. (A tiny one could still fit in the last page of the segment.)
    fill(&filler);
    let rev = s.current_revision();
    for i in 0..5 {
        let key = format!("/more/{i}");
        let result = s.create(&key, Bytes::from(vec![b'm'; 8 * 1024])).await;
        expect_enospc(result, &key);
        failed.push(key);
    }
    assert_eq!(s.current_revision(), rev, "failed writes took revisions");
    let health = s.health();
    let failing = health
        .failing
        .as_ref()
        .expect("health reports the full disk");
    assert!(
        failing.error.contains("No space left on device"),
        "{health:?}"
    );
    assert!(health.write_errors >= 6, "{health:?}");
    assert!(!health.is_ok());
    // Reads keep working.
    check_acked(&s, &acked, &failed).await;
    // A snapshot that failed for lack of space does not keep its partial file.
    let leftovers: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A restart on the full disk serves reads (opening writes nothing).
    drop(s);
    let s = open(&dir);
    check_acked(&s, &acked, &failed).await;
    assert!(s.health().is_ok(), "nothing failed yet in this run");
    let result = s
        .create("/after-restart", Bytes::from(vec![b'r'; 8 * 1024]))
        .await;
    expect_enospc(result, "/after-restart");
    failed.push("/after-restart".into());
    assert!(!s.health().is_ok());

    // Free space: health comes back by itself, without writes.
    fs::remove_file(&filler).unwrap();
    fs::remove_file(&ballast).unwrap();
    let freed = Instant::now();
    while !s.health().is_ok() {
        assert!(
            freed.elapsed() < Duration::from_secs(10),
            "health did not recover after space was freed: {}",
            s.health()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("healthy again {:?} after space was freed", freed.elapsed());
    assert_eq!(s.health().write_errors, 1, "counted per run of the store");

    // Writes succeed again, at the next revision.
    let rev = s.current_revision();
    for i in 0..5 {
        let key = format!("/healed/{i}");
        let value = Bytes::from(format!("v{i}"));
        let kv = s.create(&key, value.clone()).await.unwrap();
        assert_eq!(kv.mod_revision, rev + 1 + i as i64);
        acked.insert(key, (value, kv.mod_revision));
    }
    check_acked(&s, &acked, &failed).await;

    // And all of it is durable: a clean reopen finds exactly the acknowledged
    // writes.
    drop(s);
    let s = open(&dir);
    check_acked(&s, &acked, &failed).await;
    assert!(s.health().is_ok());
    drop(s);
}
