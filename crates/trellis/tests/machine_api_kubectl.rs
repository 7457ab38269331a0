//! Upstream-style machine.sapcloud.io YAML (the examples of seed 003
//! §2.9–2.12, with a `local` MachineClass) applies unchanged with the real
//! kubectl against a real `trellis server`, shows the upstream printer
//! columns, and invalid objects are refused with 422 and field causes.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const READY_TIMEOUT: Duration = Duration::from_secs(30);

struct Running {
    child: Child,
    #[allow(dead_code)]
    port: u16,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding an ephemeral port");
    l.local_addr().expect("local address").port()
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("running a command");
    eprintln!(
        "$ {cmd:?}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn curl(data: &Path, port: u16, path: &str) -> Output {
    run(Command::new("curl")
        .args(["-sS", "--max-time", "5", "--cacert"])
        .arg(data.join("pki/ca.crt"))
        .arg(format!("https://127.0.0.1:{port}{path}")))
}

/// Starts `trellis server` on `data` (TLS, the default) and waits until
/// curl, trusting the generated CA, gets `/readyz`.
fn start(data: &Path, extra: &[&str]) -> Running {
    for _ in 0..3 {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_trellis"))
            .arg("server")
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

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    run(Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG"))
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../api/tests/fixtures")
        .join(name)
}

#[test]
fn upstream_yaml_applies_and_invalid_objects_are_refused() {
    if !have("kubectl") || !have("curl") {
        eprintln!("SKIPPED: kubectl or curl is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let _server = start(&data, &[]);
    let kc = data.join("admin.kubeconfig");
    let cache = dir.path().join("kube-cache");
    let cache = cache.to_str().unwrap();
    for f in [
        "machine-class.yaml",
        "machine.yaml",
        "machine-set.yaml",
        "machine-deployment.yaml",
    ] {
        let out = kubectl(
            &kc,
            &[
                "--cache-dir",
                cache,
                "apply",
                "-n",
                "default",
                "-f",
                fixture(f).to_str().unwrap(),
            ],
        );
        assert!(
            out.status.success(),
            "kubectl apply -f {f} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The FAQ's pause is a partial object: applied as a merge patch.
    let paused = std::fs::read_to_string(fixture("machine-deployment-paused.yaml")).unwrap();
    assert!(paused.contains("paused: true"));
    let out = kubectl(
        &kc,
        &[
            "--cache-dir",
            cache,
            "patch",
            "mcd",
            "test-machine-deployment",
            "-n",
            "default",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"paused":true}}"#,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Upstream's short names and printer columns.
    let out = kubectl(&kc, &["--cache-dir", cache, "get", "mcd", "-n", "default"]);
    assert!(out.status.success());
    let table = stdout(&out);
    for col in ["NAME", "READY", "DESIRED", "UP-TO-DATE", "AVAILABLE", "AGE"] {
        assert!(table.contains(col), "missing column {col}:\n{table}");
    }
    assert!(table.contains("test-machine-deployment"), "{table}");
    let out = kubectl(
        &kc,
        &[
            "--cache-dir",
            cache,
            "get",
            "mcc,mc,mcs",
            "-n",
            "default",
            "-o",
            "name",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout(&out).lines().count(), 3, "{}", stdout(&out));
    let out = kubectl(
        &kc,
        &[
            "--cache-dir",
            cache,
            "explain",
            "machinedeployments.spec.strategy",
        ],
    );
    assert!(
        out.status.success() && stdout(&out).contains("rollingUpdate"),
        "{}",
        stdout(&out)
    );

    // Invalid: negative replicas, selector not matching the template, and
    // maxSurge = maxUnavailable = 0.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        r#"apiVersion: machine.sapcloud.io/v1alpha1
kind: MachineDeployment
metadata:
  name: bad
  namespace: default
spec:
  replicas: -1
  selector:
    matchLabels:
      app: one
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 0, maxUnavailable: 0}
  template:
    metadata:
      labels:
        app: other
    spec:
      class:
        kind: MachineClass
        name: test-mc-v1
"#,
    )
    .unwrap();
    let out = kubectl(
        &kc,
        &["--cache-dir", cache, "apply", "-f", bad.to_str().unwrap()],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("is invalid"), "{err}");
    for field in [
        "spec.replicas",
        "spec.strategy.rollingUpdate.maxUnavailable",
        "spec.template.metadata.labels",
    ] {
        assert!(err.contains(field), "no cause for {field}: {err}");
    }
    // The same through the raw API: a 422 Status with causes.
    let out = kubectl(
        &kc,
        &[
            "--cache-dir",
            cache,
            "create",
            "-f",
            bad.to_str().unwrap(),
            "-o",
            "json",
            "-v=6",
        ],
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("422"), "{all}");
    let out = kubectl(
        &kc,
        &["--cache-dir", cache, "get", "mcd", "bad", "-n", "default"],
    );
    assert!(!out.status.success(), "the invalid object must not exist");
}
