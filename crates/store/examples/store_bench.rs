//! Throughput and snapshot-stall benchmark of the durable file backend.
//!
//! Part 1: N concurrent writers (1 and 16) create 1 KiB values in a fresh
//! store; prints creates/s and commit latency percentiles.
//! Part 2: 100k keys of 1 KiB: recovery time from the log, what a snapshot
//! costs the writers (in the background, the default, and inline), and
//! recovery time from the snapshot.
//!
//! Run: `cargo run --release -p store --example store_bench [-- <creates> [quick]]`
//! (`quick` skips part 2).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use store::file::FileOptions;
use store::{Engine, EngineConfig, FileStore, Store};

const VALUE: usize = 1024;

fn opts(snapshot_log_bytes: u64, background_snapshots: bool) -> FileOptions {
    FileOptions {
        snapshot_log_bytes,
        background_snapshots,
        ..FileOptions::default()
    }
}

/// `writers` tasks create `total` keys between them; returns every latency
/// and the wall time.
async fn load(s: &Engine, prefix: &str, writers: usize, total: usize) -> (Vec<Duration>, Duration) {
    let s = Arc::new(s.clone());
    let value = Bytes::from(vec![b'v'; VALUE]);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (s, value, prefix) = (s.clone(), value.clone(), prefix.to_string());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            for i in (w..total).step_by(writers) {
                let t = Instant::now();
                s.create(&format!("{prefix}/{i:08}"), value.clone())
                    .await
                    .unwrap();
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    (all, started.elapsed())
}

fn pct(lat: &mut [Duration], p: f64) -> f64 {
    lat.sort();
    let i = ((lat.len() as f64 - 1.0) * p).round() as usize;
    lat[i].as_secs_f64() * 1e3
}

fn snapshot_exists(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .unwrap()
        .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".snap"))
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let creates: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);

    println!("## creates of {VALUE} B values, fresh store");
    println!("| writers | creates | creates/s | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|---|");
    for writers in [1usize, 16] {
        let n = if writers == 1 { creates / 4 } else { creates };
        let dir = tempfile::tempdir().unwrap();
        let s = FileStore::open(dir.path()).unwrap();
        let (mut lat, wall) = load(&s, "/b", writers, n).await;
        println!(
            "| {writers} | {n} | {:.0} | {:.2} | {:.2} | {:.2} |",
            n as f64 / wall.as_secs_f64(),
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99),
            pct(&mut lat, 1.0)
        );
    }

    if std::env::args().nth(2).as_deref() == Some("quick") {
        return;
    }
    println!("\n## 100k keys of {VALUE} B: recovery and snapshot cost");
    let keys = 100_000;
    let dir = tempfile::tempdir().unwrap();
    {
        let s =
            FileStore::open_with_options(dir.path(), EngineConfig::default(), opts(u64::MAX, true))
                .unwrap();
        let (_, wall) = load(&s, "/k", 16, keys).await;
        println!("- loaded {keys} keys with 16 writers in {wall:.2?} (no snapshot)");
    }
    let inline_dir = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), inline_dir.path());

    // Background snapshot: what the triggering write and the writes during
    // the snapshot see.
    let t = Instant::now();
    let s =
        FileStore::open_with_options(dir.path(), EngineConfig::default(), opts(1, true)).unwrap();
    println!(
        "- open (replaying ~{} MiB of log): {:.2?}",
        (keys * (VALUE + 40)) >> 20,
        t.elapsed()
    );
    let t = Instant::now();
    s.create("/trigger", Bytes::from_static(b"x"))
        .await
        .unwrap();
    let trigger = t.elapsed();
    let snap_started = Instant::now();
    let (mut lat, _) = load(&s, "/during", 16, 2000).await;
    while !snapshot_exists(dir.path()) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!(
        "- background snapshot: triggering write took {:.2} ms (state copy under the lock + fsync); \
         snapshot durable after {:.2?}; 2000 writes meanwhile: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        trigger.as_secs_f64() * 1e3,
        snap_started.elapsed(),
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        pct(&mut lat, 1.0)
    );
    drop(s);
    let t = Instant::now();
    let s = FileStore::open(dir.path()).unwrap();
    println!(
        "- open (snapshot + short log): {:.2?}, {} keys",
        t.elapsed(),
        s.len()
    );
    drop(s);

    // Inline snapshot: the triggering write waits for the whole snapshot.
    let s =
        FileStore::open_with_options(inline_dir.path(), EngineConfig::default(), opts(1, false))
            .unwrap();
    let t = Instant::now();
    s.create("/trigger", Bytes::from_static(b"x"))
        .await
        .unwrap();
    println!(
        "- inline snapshot (for comparison): triggering write took {:.2?}",
        t.elapsed()
    );
}
