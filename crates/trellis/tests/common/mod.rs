//! Shared harness for end-to-end tests that start the real `trellis server`
//! binary (TLS, the default) and drive it with the real kubectl and curl.

#![allow(dead_code)]

pub mod pods;
pub mod raw;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Running {
    pub child: Child,
    pub port: u16,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding an ephemeral port");
    l.local_addr().expect("local address").port()
}

pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("running a command");
    eprintln!(
        "$ {cmd:?}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn curl(data: &Path, port: u16, path: &str) -> Output {
    run(Command::new("curl")
        .args(["-sS", "--max-time", "5", "--cacert"])
        .arg(data.join("pki/ca.crt"))
        .arg(format!("https://127.0.0.1:{port}{path}")))
}

/// Starts `trellis server` on `data` (TLS, the default) and waits until
/// curl, trusting the generated CA, gets `/readyz`.
pub fn start(data: &Path, extra: &[&str]) -> Running {
    start_command("server", data, extra)
}

/// [`start`] for another serving command (`up`).
/// The trellis binary the servers are started from: the one cargo built,
/// or `TRELLIS_TEST_BIN` (to try a copy elsewhere, e.g. under /tmp).
pub fn trellis_bin() -> std::path::PathBuf {
    std::env::var_os("TRELLIS_TEST_BIN")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_trellis").into())
}

pub fn start_command(command: &str, data: &Path, extra: &[&str]) -> Running {
    start_with(command, data, extra, None)
}

/// [`start`] with the soft open-file limit most systems start processes
/// with (`ulimit -Sn`), e.g. 1024, whatever the test runner's is.
pub fn start_with_nofile(data: &Path, extra: &[&str], soft: u64) -> Running {
    start_with("server", data, extra, Some(soft))
}

fn start_with(command: &str, data: &Path, extra: &[&str], nofile: Option<u64>) -> Running {
    for _ in 0..3 {
        let port = free_port();
        let mut cmd = match nofile {
            None => Command::new(trellis_bin()),
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -Sn {n} && exec \"$0\" \"$@\""))
                    .arg(trellis_bin());
                c
            }
        };
        let child = cmd
            .arg(command)
            .arg("--data-dir")
            .arg(data)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(extra)
            .env("TRELLIS_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawning trellis server");
        let mut running = Running { child, port };
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if running.child.try_wait().expect("polling").is_some() {
                break; // the port was taken; try another
            }
            if data.join("pki/ca.crt").exists() {
                let out = curl(data, port, "/readyz");
                if out.status.success() && stdout(&out) == "ok" {
                    return running;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = running.child.kill();
    }
    panic!("trellis server did not become ready");
}

pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    run(Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG"))
}

/// Polls `f` (typically a kubectl call, so not too often: each costs a
/// process start) until it holds; panics naming `what` after `secs`.
/// Returns how long it took.
pub fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
    start.elapsed()
}
