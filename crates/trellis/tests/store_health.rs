//! The real `trellis server` (TLS, the default) on a really full disk: its
//! data directory is on a small tmpfs (mounted here; we run as root here and
//! in CI; where mounting is not permitted the test says why and skips), which
//! is filled. Writes fail with a clear 500, no acknowledged write is lost,
//! reads keep being served, a restart on the full disk comes up and serves
//! reads (a start writes nothing that is already in place), and once space
//! is freed writes succeed again without a restart. `/readyz` reports the
//! failing store with a 500 and the reason, and comes back by itself.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Running, free_port, have};
use testkit::disk::Tmpfs;

struct Server {
    running: Running,
    data: PathBuf,
    log: PathBuf,
}

impl Server {
    /// Starts `trellis server` on `data` at `port` and waits until `/readyz`
    /// answers; `None` if it exited first (the port was taken).
    fn start(data: &Path, port: u16, log: PathBuf) -> Option<Server> {
        let child = Command::new(env!("CARGO_BIN_EXE_trellis"))
            .arg("server")
            .arg("--data-dir")
            .arg(data)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env("TRELLIS_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawning trellis server");
        let mut srv = Server {
            running: Running { child, port },
            data: data.to_path_buf(),
            log,
        };
        let deadline = Instant::now() + common::READY_TIMEOUT;
        while Instant::now() < deadline {
            if srv.running.child.try_wait().unwrap().is_some() {
                return None;
            }
            if data.join("pki/ca.crt").exists() && srv.get("/readyz").0 == 200 {
                return Some(srv);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("trellis server not ready; log:\n{}", srv.log_tail());
    }

    fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// curl as the admin (client certificate), trusting the generated CA:
    /// `(status, body)`; status 0 if curl failed.
    fn request(&self, method: &str, path: &str, body: Option<&Path>) -> (u16, String) {
        let pki = self.data.join("pki");
        let mut cmd = Command::new("curl");
        cmd.args([
            "-sS",
            "--max-time",
            "10",
            "-w",
            "\n%{http_code}",
            "-X",
            method,
        ])
        .arg("--cacert")
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .args(["-H", "Content-Type: application/json"]);
        if let Some(b) = body {
            cmd.arg("--data-binary").arg(format!("@{}", b.display()));
        }
        cmd.arg(format!("https://127.0.0.1:{}{path}", self.running.port));
        let out = cmd.output().expect("running curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    fn get(&self, path: &str) -> (u16, String) {
        self.request("GET", path, None)
    }
}

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// Writes a ConfigMap manifest with `size` bytes of data to a file outside
/// the full filesystem; returns its path.
fn manifest(dir: &Path, name: &str, size: usize) -> PathBuf {
    let fill = name.bytes().last().unwrap_or(b'x') as char;
    let doc = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"blob":"{}"}}}}"#,
        fill.to_string().repeat(size)
    );
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, doc).unwrap();
    path
}

/// Fills the filesystem with `path` until a write fails.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    for chunk in [1 << 20, 64 * 1024, 4096, 1] {
        let buf = vec![b'f'; chunk];
        while f.write_all(&buf).is_ok() {}
    }
}

/// Creates 512 KiB ConfigMaps until one fails, then fills what is left of
/// the filesystem: `(acknowledged names, (failed name, status, body))`.
fn fill_with_writes(
    srv: &Server,
    scratch: &Path,
    mnt: &Path,
) -> (Vec<String>, (String, u16, String)) {
    let mut acked = Vec::new();
    let failure = loop {
        let name = format!("blob-{:03}", acked.len());
        let m = manifest(scratch, &name, 512 * 1024);
        let (code, body) = srv.request("POST", CONFIGMAPS, Some(&m));
        match code {
            201 => acked.push(name),
            _ => break (name, code, body),
        }
        assert!(acked.len() < 200, "the disk never filled up");
    };
    println!(
        "{} ConfigMaps acknowledged, then {} {}",
        acked.len(),
        failure.1,
        &failure.2[..failure.2.len().min(300)]
    );
    fill(&mnt.join("filler"));
    (acked, failure)
}

/// `/readyz` says 500 with the store's error while the disk is full, and 200
/// again once space is freed, without any write in between.
#[test]
fn full_disk_makes_readyz_fail_until_space_is_freed() {
    if !have("curl") {
        eprintln!("SKIPPED: curl is not installed");
        return;
    }
    let Some(fs_) = Tmpfs::mount("48m") else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let data = fs_.path().join("data");
    let srv = Server::start(&data, free_port(), scratch.path().join("server.log"))
        .expect("the server exited before it was ready");
    let ballast = fs_.path().join("ballast");
    std::fs::write(&ballast, vec![b'b'; 4 << 20]).unwrap();
    let (_, failure) = fill_with_writes(&srv, scratch.path(), fs_.path());
    assert_eq!(failure.1, 500, "{}", failure.2);
    let (code, body) = srv.get("/readyz");
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("No space left on device"), "{body}");

    std::fs::remove_file(fs_.path().join("filler")).unwrap();
    std::fs::remove_file(&ballast).unwrap();
    let freed = Instant::now();
    loop {
        let (code, body) = srv.get("/readyz");
        if code == 200 {
            break;
        }
        assert!(
            freed.elapsed() < Duration::from_secs(10),
            "/readyz still {code} after space was freed: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let m = manifest(scratch.path(), "after", 1024);
    let (code, body) = srv.request("POST", CONFIGMAPS, Some(&m));
    assert_eq!(code, 201, "{body}");
}

#[test]
fn full_disk_server_fails_writes_keeps_serving_reads_and_heals() {
    if !have("curl") {
        eprintln!("SKIPPED: curl is not installed");
        return;
    }
    let Some(fs_) = Tmpfs::mount("48m") else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let data = fs_.path().join("data");
    let port = free_port();
    let srv = Server::start(&data, port, scratch.path().join("server-1.log"))
        .expect("the server exited before it was ready");
    // Ballast, freed at the end to make room again.
    let ballast = fs_.path().join("ballast");
    std::fs::write(&ballast, vec![b'b'; 4 << 20]).unwrap();

    // Create ConfigMaps until the disk is full: the failing create gets a
    // 500 that says why.
    let (mut acked, failure) = fill_with_writes(&srv, scratch.path(), fs_.path());
    assert_eq!(failure.1, 500, "{}", failure.2);
    assert!(
        failure.2.contains("No space left on device"),
        "{}",
        failure.2
    );
    assert!(acked.len() >= 5, "too few writes to mean anything");

    let check_reads = |srv: &Server, acked: &[String], missing: &str| {
        for name in acked {
            let (code, body) = srv.get(&format!("{CONFIGMAPS}/{name}"));
            assert_eq!(code, 200, "acknowledged {name}: {body}");
            let size = if name.starts_with("blob-") {
                512 * 1024
            } else {
                64 * 1024
            };
            assert!(body.len() > size, "{name} came back short");
        }
        let (code, _) = srv.get(&format!("{CONFIGMAPS}/{missing}"));
        assert_eq!(code, 404, "the failed create of {missing} is visible");
    };
    check_reads(&srv, &acked, &failure.0);
    let m = manifest(scratch.path(), "still-full", 64 * 1024);
    let (code, body) = srv.request("POST", CONFIGMAPS, Some(&m));
    assert_eq!(code, 500, "{body}");

    // A restart on the full disk (same port, so the kubeconfig is unchanged):
    // the server comes up and serves reads.
    drop(srv);
    let srv =
        Server::start(&data, port, scratch.path().join("server-2.log")).unwrap_or_else(|| {
            let log =
                std::fs::read_to_string(scratch.path().join("server-2.log")).unwrap_or_default();
            panic!("the server did not start on a full disk; log:\n{log}")
        });
    check_reads(&srv, &acked, &failure.0);

    // Free space: writes succeed again without a restart.
    std::fs::remove_file(fs_.path().join("filler")).unwrap();
    std::fs::remove_file(&ballast).unwrap();
    let mut healed = Vec::new();
    for i in 0..3 {
        let name = format!("healed-{i}");
        let m = manifest(scratch.path(), &name, 64 * 1024);
        let (code, body) = srv.request("POST", CONFIGMAPS, Some(&m));
        assert_eq!(code, 201, "{name}: {body}\nlog:\n{}", srv.log_tail());
        healed.push(name);
    }
    acked.extend(healed);
    check_reads(&srv, &acked, &failure.0);
    drop(srv);
}
