//! Measures durable commits/s on this machine for the storage designs that
//! were candidates for the store crate's file backend:
//!
//! - raw `fdatasync` latency (append 1 KiB, and overwrite of preallocated space),
//! - a minimal write-ahead log (length + CRC32 + record, one write and one
//!   `fdatasync` per batch): the design the store crate uses,
//! - redb with `Durability::Immediate`, one write transaction per batch,
//! - SQLite (bundled) in WAL mode with `synchronous=FULL` and a kine-style
//!   table, one transaction per batch.
//!
//! Every commit writes one 1 KiB value. Each configuration runs `REPS` times on
//! fresh files, in interleaved rounds; the median and the range of commits/s
//! and the per-batch sync latency are printed as a Markdown table.
//!
//! Run: `cargo run --release -- [dir] [commits]` (dir defaults to the system
//! temp dir; it must be on the file system being measured).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const VALUE: usize = 1024;
const REPS: usize = 5;

/// One measured run: commits and the latency of each durable batch.
struct Run {
    commits: usize,
    wall: Duration,
    syncs: Vec<Duration>,
}

fn key(i: usize) -> String {
    format!("/registry/pods/default/pod-{i:08}")
}

fn value(i: usize) -> Vec<u8> {
    let mut v = vec![b'x'; VALUE];
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v
}

/// Times `batch` commits at a time through `commit_batch(first_index, n)`.
fn drive(commits: usize, batch: usize, mut commit_batch: impl FnMut(usize, usize)) -> Run {
    let mut syncs = Vec::with_capacity(commits / batch + 1);
    let started = Instant::now();
    let mut i = 0;
    while i < commits {
        let n = batch.min(commits - i);
        let t = Instant::now();
        commit_batch(i, n);
        syncs.push(t.elapsed());
        i += n;
    }
    Run {
        commits,
        wall: started.elapsed(),
        syncs,
    }
}

fn raw_append(dir: &Path, commits: usize) -> Run {
    let mut f = File::create(dir.join("raw-append")).unwrap();
    let v = value(0);
    drive(commits, 1, |_, _| {
        f.write_all(&v).unwrap();
        f.sync_data().unwrap();
    })
}

fn raw_overwrite(dir: &Path, commits: usize) -> Run {
    let f = File::create(dir.join("raw-overwrite")).unwrap();
    // Written (not just allocated) beforehand, so the syncs below update no
    // file-system metadata.
    f.write_all_at(&vec![0u8; commits * VALUE], 0).unwrap();
    f.sync_all().unwrap();
    let v = value(0);
    drive(commits, 1, |i, _| {
        f.write_all_at(&v, (i * VALUE) as u64).unwrap();
        f.sync_data().unwrap();
    })
}

/// The store crate's design, reduced to its I/O: a batch of records encoded
/// into one buffer, written with one call and made durable with one fdatasync.
fn wal(dir: &Path, commits: usize, batch: usize) -> Run {
    let mut f = File::create(dir.join("wal.log")).unwrap();
    let mut buf = Vec::new();
    drive(commits, batch, |first, n| {
        buf.clear();
        for i in first..first + n {
            let start = buf.len();
            buf.extend_from_slice(&[0u8; 8]);
            let k = key(i);
            let v = value(i);
            buf.extend_from_slice(&(i as i64 + 1).to_le_bytes());
            buf.extend_from_slice(&(k.len() as u32).to_le_bytes());
            buf.extend_from_slice(k.as_bytes());
            buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
            buf.extend_from_slice(&v);
            for m in [i as i64 + 1, i as i64 + 1, 1] {
                buf.extend_from_slice(&m.to_le_bytes());
            }
            let len = (buf.len() - start - 8) as u32;
            let crc = crc32fast::hash(&buf[start + 8..]);
            buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
            buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        }
        f.write_all(&buf).unwrap();
        f.sync_data().unwrap();
    })
}

const LOG: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("log");

/// redb as a revision log: revision -> (key, value) record.
fn redb(dir: &Path, commits: usize, batch: usize) -> Run {
    let db = redb::Database::create(dir.join("redb.db")).unwrap();
    drive(commits, batch, |first, n| {
        let mut tx = db.begin_write().unwrap();
        tx.set_durability(redb::Durability::Immediate).unwrap();
        {
            let mut t = tx.open_table(LOG).unwrap();
            for i in first..first + n {
                let mut rec = key(i).into_bytes();
                rec.extend_from_slice(&value(i));
                t.insert(i as u64 + 1, rec.as_slice()).unwrap();
            }
        }
        tx.commit().unwrap();
    })
}

/// SQLite the way kine uses it: one row per revision.
fn sqlite(dir: &Path, commits: usize, batch: usize) -> Run {
    let mut db = rusqlite::Connection::open(dir.join("kine.db")).unwrap();
    db.execute_batch(
        "PRAGMA journal_mode=WAL;
         PRAGMA synchronous=FULL;
         CREATE TABLE kine (
             id INTEGER PRIMARY KEY AUTOINCREMENT,
             name TEXT, created INTEGER, deleted INTEGER,
             create_revision INTEGER, prev_revision INTEGER, value BLOB);
         CREATE INDEX kine_name_index ON kine (name);
         CREATE UNIQUE INDEX kine_name_prev_revision_uindex ON kine (name, prev_revision);",
    )
    .unwrap();
    drive(commits, batch, |first, n| {
        let tx = db
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO kine (name, created, deleted, create_revision, prev_revision, value)
                     VALUES (?1, 1, 0, 0, 0, ?2)",
                )
                .unwrap();
            for i in first..first + n {
                stmt.execute(rusqlite::params![key(i), value(i)]).unwrap();
            }
        }
        tx.commit().unwrap();
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let mut args = std::env::args().skip(1);
    let base: PathBuf = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let commits: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let root = base.join(format!("store-engines-{}", std::process::id()));

    type Bench = Box<dyn Fn(&Path, usize) -> Run>;
    let configs: Vec<(&str, usize, Bench)> = vec![
        ("raw fdatasync, append 1 KiB", 1, Box::new(raw_append)),
        (
            "raw fdatasync, overwrite preallocated 1 KiB",
            1,
            Box::new(raw_overwrite),
        ),
        ("WAL (store design)", 1, Box::new(|d, c| wal(d, c, 1))),
        ("WAL (store design)", 16, Box::new(|d, c| wal(d, c, 16))),
        (
            "redb, Durability::Immediate",
            1,
            Box::new(|d, c| redb(d, c, 1)),
        ),
        (
            "redb, Durability::Immediate",
            16,
            Box::new(|d, c| redb(d, c, 16)),
        ),
        (
            "SQLite WAL, synchronous=FULL (kine table)",
            1,
            Box::new(|d, c| sqlite(d, c, 1)),
        ),
        (
            "SQLite WAL, synchronous=FULL (kine table)",
            16,
            Box::new(|d, c| sqlite(d, c, 16)),
        ),
    ];

    println!(
        "{commits} commits of {VALUE} B per run, {REPS} runs per configuration, in {}",
        base.display()
    );
    println!();
    println!(
        "| engine | batch | commits/s (median) | commits/s (min–max) | sync p50 ms | sync p99 ms |"
    );
    println!("|---|---|---|---|---|---|");
    // Rounds interleave the configurations, so that a burst of I/O from
    // something else on the machine hits them all alike.
    let mut rates = vec![Vec::new(); configs.len()];
    let mut syncs = vec![Vec::new(); configs.len()];
    for rep in 0..REPS {
        for (c, (name, batch, bench)) in configs.iter().enumerate() {
            let dir = root.join(format!("{}-{batch}-{rep}", name.split(' ').next().unwrap()));
            std::fs::create_dir_all(&dir).unwrap();
            let run = bench(&dir, commits);
            rates[c].push(run.commits as f64 / run.wall.as_secs_f64());
            syncs[c].extend(run.syncs);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
    for (c, (name, batch, _)) in configs.iter().enumerate() {
        let rates = &mut rates[c];
        let syncs = &mut syncs[c];
        rates.sort_by(f64::total_cmp);
        syncs.sort();
        let p = |q: f64| ms(syncs[((syncs.len() - 1) as f64 * q).round() as usize]);
        println!(
            "| {name} | {batch} | {:.0} | {:.0}–{:.0} | {:.2} | {:.2} |",
            rates[rates.len() / 2],
            rates[0],
            rates[rates.len() - 1],
            p(0.5),
            p(0.99)
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}
