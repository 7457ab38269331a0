//! Crash test of the file backend: a child process (this test executable,
//! re-run with `STORE_CRASH_CHILD=<dir>`) runs concurrent writers and prints
//! every write after it was acknowledged; the parent kills it with SIGKILL at
//! a random moment, reopens the store and checks that no acknowledged write
//! was lost and that revisions are consistent. Repeated on one directory, so
//! later rounds also recover from snapshots and segments earlier rounds left.
//!
//! Reproduce a run with `STORE_CRASH_SEED=<seed printed by the test>`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use store::file::FileOptions;
use store::{EngineConfig, FileStore, RangeRequest, Store, StoreError, WatchItem};

const CHILD_ENV: &str = "STORE_CRASH_CHILD";
const ROUND_ENV: &str = "STORE_CRASH_ROUND";
const ROUNDS: u32 = 24;
const WRITERS: usize = 8;
const SHARED_KEYS: u64 = 16;

/// Small segments so that rounds crash around snapshots and rotations too.
fn options() -> FileOptions {
    FileOptions {
        snapshot_log_bytes: 128 * 1024,
        ..FileOptions::default()
    }
}

/// xorshift64*: enough randomness for kill timing and key choice.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The child entry point; does nothing unless started by the parent.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let round: u64 = std::env::var(ROUND_ENV).unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let s = Arc::new(
            FileStore::open_with_options(Path::new(&dir), EngineConfig::default(), options())
                .unwrap(),
        );
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(round * 1000 + w as u64 + 1);
                for n in 0.. {
                    let value = format!("v{round}.{w}.{n}.{}", "x".repeat(100));
                    let key = if n % 2 == 0 {
                        format!("/own/{round}/{w}/{n}")
                    } else {
                        format!("/shared/{}", rng.below(SHARED_KEYS))
                    };
                    let (cur, _) = s.get(&key, None).await.unwrap();
                    let res = match cur {
                        None => s.create(&key, Bytes::from(value.clone())).await,
                        Some(kv) => {
                            s.update(&key, Bytes::from(value.clone()), kv.mod_revision)
                                .await
                        }
                    };
                    match res {
                        Ok(kv) => {
                            // Printed only after the store acknowledged it.
                            let mut out = std::io::stdout().lock();
                            writeln!(out, "ACK {key} {value} {}", kv.mod_revision).unwrap();
                        }
                        Err(StoreError::AlreadyExists(_) | StoreError::Conflict(_)) => {}
                        Err(e) => panic!("write failed: {e}"),
                    }
                }
            }));
        }
        // A safety net should the parent die without killing us.
        let _ =
            tokio::time::timeout(Duration::from_secs(20), futures::future::join_all(tasks)).await;
    });
}

/// An acknowledged write: value and revision, per key the latest one.
type Model = HashMap<String, (String, i64)>;

#[test]
fn acknowledged_writes_survive_sigkill() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let seed = std::env::var("STORE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("STORE_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut model = Model::new();
    let mut total_acks = 0;
    let mut truncations = 0;
    let started = Instant::now();
    for round in 0..ROUNDS {
        let mut child = Command::new(&exe)
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .env(ROUND_ENV, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut lines = Vec::new();
            let mut line = Vec::new();
            loop {
                line.clear();
                match r.read_until(b'\n', &mut line) {
                    // A line cut short by the kill was never fully reported.
                    Ok(0) | Err(_) => break,
                    Ok(_) if line.ends_with(b"\n") => {
                        lines.push(String::from_utf8_lossy(&line).trim_end().to_string())
                    }
                    Ok(_) => break,
                }
            }
            lines
        });
        std::thread::sleep(Duration::from_millis(50 + rng.below(350)));
        // The child writes until killed; exiting by itself means it failed
        // (e.g. could not open the store).
        if let Some(status) = child.try_wait().unwrap() {
            panic!("round {round}: the writer exited by itself: {status}");
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let lines = reader.join().unwrap();

        let mut acks = 0;
        for line in lines.iter().filter(|l| l.starts_with("ACK ")) {
            let parts: Vec<&str> = line.split(' ').collect();
            assert_eq!(parts.len(), 4, "bad line {line:?}");
            let rev: i64 = parts[3].parse().unwrap();
            let e = model
                .entry(parts[1].to_string())
                .or_insert_with(|| (String::new(), 0));
            if rev > e.1 {
                *e = (parts[2].to_string(), rev);
            }
            acks += 1;
        }
        total_acks += acks;

        // Every fourth round, also leave a torn frame as a crash in the middle
        // of writing an (unacknowledged) batch would: garbage or zeros after
        // the last complete record.
        if round % 4 == 3
            && let Some(seg) = last_segment(dir.path())
        {
            let len = 1 + rng.below(3000) as usize;
            let junk: Vec<u8> = if rng.below(2) == 0 {
                vec![0; len]
            } else {
                (0..len).map(|_| rng.next() as u8).collect()
            };
            let mut f = std::fs::OpenOptions::new().append(true).open(seg).unwrap();
            f.write_all(&junk).unwrap();
        }
        let log_bytes_before = wal_bytes(dir.path());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = FileStore::open_with_options(dir.path(), EngineConfig::default(), options())
                .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
            if wal_bytes(dir.path()) < log_bytes_before {
                truncations += 1;
            }
            verify(&s, &model, round).await;
            // The store takes new writes at the next revision.
            let rev = s.current_revision();
            let key = format!("/parent/{round}");
            let kv = s.create(&key, Bytes::from("p")).await.unwrap();
            assert_eq!(kv.mod_revision, rev + 1, "round {round}");
            model.insert(key, ("p".into(), kv.mod_revision));
        });
        println!(
            "round {round}: {acks} acknowledged writes, {} keys tracked",
            model.len()
        );
    }
    println!(
        "{ROUNDS} crashes, {total_acks} acknowledged writes, {truncations} torn tails truncated, {:?}",
        started.elapsed()
    );
    assert!(
        total_acks > 200,
        "too few writes to mean anything: {total_acks}"
    );
}

fn last_segment(dir: &Path) -> Option<std::path::PathBuf> {
    let mut segs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("wal-"))
        .collect();
    segs.sort();
    segs.pop()
}

fn wal_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with("wal-"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

async fn verify(s: &store::Engine, model: &Model, round: u32) {
    let current = s.current_revision();
    let all = s.range(RangeRequest::default()).await.unwrap();
    assert_eq!(all.revision, current);
    let by_key: HashMap<&str, &store::KeyValue> = all.kvs.iter().map(|kv| (&*kv.key, kv)).collect();
    for kv in &all.kvs {
        assert!(
            kv.create_revision >= 1
                && kv.create_revision <= kv.mod_revision
                && kv.mod_revision <= current
                && kv.version >= 1,
            "round {round}: inconsistent {kv:?} at revision {current}"
        );
    }
    for (key, (value, rev)) in model {
        assert!(
            *rev <= current,
            "round {round}: acked revision {rev} > current {current}"
        );
        let kv = by_key
            .get(key.as_str())
            .unwrap_or_else(|| panic!("round {round}: acknowledged {key}@{rev} is gone"));
        // Either the acknowledged value, or a later write (acknowledged or
        // not) replaced it.
        assert!(
            kv.mod_revision > *rev || (kv.mod_revision == *rev && kv.value == value.as_bytes()),
            "round {round}: {key} acked {value}@{rev} but found {:?}@{}",
            String::from_utf8_lossy(&kv.value),
            kv.mod_revision
        );
    }
    // The history handed to the engine replays in order up to the head.
    let from = s.compacted_revision();
    let mut w = s.watch("/", from).await.unwrap();
    let mut last = from;
    if current > from {
        loop {
            match tokio::time::timeout(Duration::from_secs(5), w.recv()).await {
                Ok(Some(WatchItem::Event(e))) => {
                    let rev = e.kv.mod_revision;
                    assert!(rev >= last && rev > from && rev <= current, "round {round}");
                    last = rev;
                    if rev == current {
                        break;
                    }
                }
                other => panic!("round {round}: history replay stopped: {other:?}"),
            }
        }
    }
}
