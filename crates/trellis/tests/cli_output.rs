//! The client commands as a user meets them, through the real binary: what
//! `trellis status` says when there is no kubeconfig or no server (golden,
//! the whole stderr), which data directory it reads (`--data-dir`,
//! `TRELLIS_DATA_DIR`, shared with `trellis server`), logs without colour
//! codes off a terminal, and `trellis crds | head` without a panic.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Running, curl, free_port, have, run, stdout};

fn trellis() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trellis"));
    // Whatever the developer's shell has must not pick the cluster or
    // change the output; a directory outside the workspace makes the hints
    // name the binary by its path.
    for var in [
        "KUBECONFIG",
        "TRELLIS_DATA_DIR",
        "TRELLIS_LOG",
        "RUST_BACKTRACE",
        "RUST_LIB_BACKTRACE",
        "NO_COLOR",
    ] {
        cmd.env_remove(var);
    }
    cmd.current_dir(std::env::temp_dir());
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// How the hints name this binary when run outside the workspace and not
/// on PATH: its absolute path.
fn exe() -> String {
    Path::new(env!("CARGO_BIN_EXE_trellis"))
        .canonicalize()
        .expect("the binary exists")
        .display()
        .to_string()
}

/// A data directory whose admin kubeconfig names a server that is not
/// there (a port nobody listens on).
fn dead_server_data_dir() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", free_port());
    std::fs::write(
        tmp.path().join("admin.kubeconfig"),
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {url}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: u\ncurrent-context: t\nusers:\n- name: u\n  user:\n    token: x\n"
        ),
    )
    .unwrap();
    (tmp, url)
}

#[test]
fn status_without_a_server_says_so_in_one_sentence() {
    let (data, url) = dead_server_data_dir();
    let kc = data.path().join("admin.kubeconfig");
    let want = format!(
        "Error: cannot reach the API server at {url} (connection refused) named by the admin kubeconfig {}: start trellis with `{} up`, or choose another cluster with --kubeconfig or --data-dir\n",
        kc.display(),
        exe()
    );
    for how in ["flag", "env"] {
        let mut cmd = trellis();
        cmd.arg("status");
        match how {
            "flag" => cmd.arg("--data-dir").arg(data.path()),
            _ => cmd.env("TRELLIS_DATA_DIR", data.path()),
        };
        let out = run(&mut cmd);
        assert!(!out.status.success(), "{how}: exits non-zero");
        assert_eq!(stderr(&out), want, "{how}: the whole stderr");
        assert_eq!(stdout(&out), "", "{how}");
    }

    let out = run(trellis()
        .args(["status", "--kubeconfig"])
        .arg(&kc)
        .args(["--log-level", "debug"]));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("Connection refused"),
        "the library's detail stays behind --log-level debug: {err}"
    );
    assert!(
        !err.contains('\x1b'),
        "no colour codes in logs that are not on a terminal: {err:?}"
    );
    assert!(
        err.ends_with(&format!(
            "Error: cannot reach the API server at {url} (connection refused) named by the kubeconfig {}: start trellis with `{} up`, or choose another cluster with --kubeconfig or --data-dir\n",
            kc.display(),
            exe()
        )),
        "{err}"
    );
}

#[test]
fn status_names_a_missing_kubeconfig_once() {
    let data = tempfile::tempdir().unwrap();
    let out = run(trellis().arg("status").arg("--data-dir").arg(data.path()));
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!(
            "Error: there is no admin kubeconfig {}: start trellis with `{} up`, which writes it, or pass --data-dir or --kubeconfig\n",
            data.path().join("admin.kubeconfig").display(),
            exe()
        )
    );

    let missing = data.path().join("nope.kubeconfig");
    let out = run(trellis().arg("status").env("KUBECONFIG", &missing));
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!(
            "Error: there is no kubeconfig {} (named by $KUBECONFIG): correct or unset KUBECONFIG, or pass --kubeconfig\n",
            missing.display()
        )
    );
}

/// Starts `trellis server` with its data directory given only by
/// `TRELLIS_DATA_DIR`, and waits until it serves.
fn server_with_env_data_dir(data: &Path) -> Running {
    for _ in 0..3 {
        let port = free_port();
        let child = trellis()
            .arg("server")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env("TRELLIS_DATA_DIR", data)
            .env("TRELLIS_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawning trellis server");
        let mut running = Running { child, port };
        let deadline = Instant::now() + common::READY_TIMEOUT;
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

#[test]
fn status_reads_the_data_dir_that_server_writes() {
    if !have("curl") {
        eprintln!("SKIPPED: curl is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("trellis");
    let _server = server_with_env_data_dir(&data);
    assert!(
        data.join("admin.kubeconfig").is_file(),
        "`server` honours TRELLIS_DATA_DIR"
    );
    let empty = "No shoots, machine deployments, machine sets or machines.\n";

    let out = run(trellis().arg("status").env("TRELLIS_DATA_DIR", &data));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), empty);

    let out = run(trellis().arg("status").arg("--data-dir").arg(&data));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), empty);

    // The documented order: --kubeconfig, then $KUBECONFIG, then the data
    // directory.
    let elsewhere = tmp.path().join("elsewhere.kubeconfig");
    let out = run(trellis()
        .arg("status")
        .arg("--data-dir")
        .arg(&data)
        .env("KUBECONFIG", &elsewhere));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("{} (named by $KUBECONFIG)", elsewhere.display())),
        "{}",
        stderr(&out)
    );
    let out = run(trellis()
        .arg("status")
        .arg("--kubeconfig")
        .arg(data.join("admin.kubeconfig"))
        .env("KUBECONFIG", &elsewhere));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), empty);
}

/// Runs `trellis ARGS`, reads one line of its output and closes the pipe,
/// as `trellis ARGS | head -n 1` does; returns the line and the output of
/// the finished process.
fn read_one_line_and_close(args: &[&str]) -> (String, Output) {
    let mut child = trellis()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning trellis");
    let mut first = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut first).unwrap();
    drop(out);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    (
        first,
        Output {
            status,
            stdout: Vec::new(),
            stderr: err.into_bytes(),
        },
    )
}

#[test]
fn crds_into_a_closed_pipe_exit_quietly() {
    // More than a pipe buffer (64 KiB), so some write meets the closed pipe.
    let all = run(trellis().arg("crds"));
    assert!(all.stdout.len() > 128 * 1024, "{}", all.stdout.len());
    let (first, out) = read_one_line_and_close(&["crds"]);
    assert_eq!(first, "apiVersion: apiextensions.k8s.io/v1\n");
    assert_eq!(stderr(&out), "", "no panic, no error");
    assert!(out.status.success(), "{:?}", out.status);
}
