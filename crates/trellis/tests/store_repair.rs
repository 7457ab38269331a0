//! A damaged write-ahead log, end to end with the real binary: a server
//! whose log has a damaged record in its middle refuses to start and names
//! the file, the offset and the way out; `--repair-store` starts it with
//! the intact prefix and the damaged part moved aside, never deleted.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{have, kubectl, start};

#[test]
fn a_damaged_log_stops_the_start_and_repair_moves_the_damage_aside() {
    if !have("kubectl") {
        eprintln!("kubectl is not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    {
        let server = start(data, &[]);
        let kc = data.join("admin.kubeconfig");
        for i in 0..10 {
            let out = kubectl(
                &kc,
                &[
                    "create",
                    "configmap",
                    &format!("cm-{i}"),
                    "--from-literal=k=v",
                ],
            );
            assert!(out.status.success());
        }
        drop(server);
    }
    // The newest log segment holds every write since the first start; flip
    // one byte in its middle, where acknowledged records follow.
    let store = data.join("store");
    let mut segments: Vec<_> = std::fs::read_dir(&store)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("wal-"))
        .collect();
    segments.sort();
    let segment = segments.last().expect("a log segment").clone();
    let mut bytes = std::fs::read(&segment).unwrap();
    // The segment ends in room reserved for appends (zeros): the records
    // end at the last byte that is not zero.
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    assert!(end > 10_000, "the log's records are only {end} bytes");
    let at = end / 2;
    bytes[at] ^= 0x5a;
    std::fs::write(&segment, &bytes).unwrap();

    // Without the flag: no start, a message naming the file and the way out.
    let refused = Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .env("TRELLIS_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    eprintln!("{stderr}");
    assert!(!refused.status.success(), "a damaged log was opened");
    let name = segment.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        stderr.contains(&name),
        "the error does not name {name}: {stderr}"
    );
    assert!(
        stderr.contains("offset"),
        "the error does not name the offset: {stderr}"
    );
    assert!(
        stderr.contains("--repair-store"),
        "the error does not name the repair flag: {stderr}"
    );
    // Nothing was truncated or moved by the refused start.
    assert_eq!(std::fs::read(&segment).unwrap(), bytes);

    // With the flag: it starts, and the damaged part is kept aside.
    let server = start(data, &["--repair-store"]);
    let moved: Vec<_> = std::fs::read_dir(&store)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("damaged-")
        })
        .collect();
    assert_eq!(
        moved.len(),
        1,
        "expected one damaged-* directory in {}",
        store.display()
    );
    let kept: u64 = std::fs::read_dir(&moved[0])
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    assert!(kept > 0, "the damaged bytes were not kept");
    let kc = data.join("admin.kubeconfig");
    let out = kubectl(&kc, &["get", "namespaces"]);
    assert!(out.status.success(), "the repaired server does not serve");
    // Writes go on after the repair.
    let out = kubectl(&kc, &["create", "configmap", "after-repair"]);
    assert!(out.status.success());
    std::thread::sleep(Duration::from_millis(100));
    drop(server);
}
