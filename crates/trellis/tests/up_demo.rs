//! End to end, as a newcomer would: the README's quick start against the
//! real `trellis up --demo` binary, then a kill -9 and a restart that must
//! find the same machines (UIDs, providerIDs), still Running, with no VM
//! created twice; then scales that the live view must follow. With
//! `--in-memory` the demo must not promise to resume.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{free_port, have, kubectl, run, stdout};
use serde_json::Value;

const DEMO_TIMEOUT: Duration = Duration::from_secs(90);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The command lines of the README's "Quick start" block, comments dropped.
fn quick_start() -> Vec<String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let section = readme
        .split("## Quick start")
        .nth(1)
        .expect("the README has a Quick start section");
    let block = section
        .split("```sh")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the Quick start has a sh block");
    let lines: Vec<String> = block
        .lines()
        .map(|l| l.split(" #").next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(
        lines.len() <= 10,
        "the quick start fits in ten lines: {lines:?}"
    );
    lines
}

/// Splits a command line on whitespace, honouring single and double quotes.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// The arguments a `cargo run ... -- ARGS` line gives trellis.
fn trellis_args(line: &str) -> Option<Vec<String>> {
    let w = words(line);
    if w.first().map(String::as_str) != Some("cargo") {
        return None;
    }
    let dash = w.iter().position(|x| x == "--")?;
    Some(w[dash + 1..].to_vec())
}

/// A running `trellis up`, with its stdout lines collected.
struct Up {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Up {
    fn start(args: &[String], data: &Path) -> Up {
        let mut child = Command::new(env!("CARGO_BIN_EXE_trellis"))
            .args(args)
            .arg("--data-dir")
            .arg(data)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", free_port()))
            .env("TRELLIS_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawning trellis up");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().expect("piped stdout");
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                eprintln!("up| {line}");
                sink.lock().unwrap().push(line);
            }
        });
        Up { child, lines }
    }

    /// Waits until a stdout line contains `needle`.
    fn wait_for(&mut self, needle: &str) {
        let deadline = Instant::now() + DEMO_TIMEOUT;
        while Instant::now() < deadline {
            if self
                .lines
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains(needle))
            {
                return;
            }
            if let Some(status) = self.child.try_wait().expect("polling trellis up") {
                panic!("trellis up exited with {status} before printing {needle:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("trellis up did not print {needle:?} within {DEMO_TIMEOUT:?}");
    }

    fn printed(&self, needle: &str) -> bool {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(needle))
    }
}

fn get_json(kc: &Path, args: &[&str]) -> Value {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", "json"]);
    let out = kubectl(kc, &full);
    assert!(out.status.success(), "kubectl get {args:?} failed");
    serde_json::from_slice(&out.stdout).expect("kubectl printed JSON")
}

fn items(v: &Value) -> Vec<Value> {
    v["items"].as_array().cloned().unwrap_or_default()
}

/// Each demo machine as (name, uid, providerID, phase).
fn machines(kc: &Path) -> BTreeSet<(String, String, String, String)> {
    items(&get_json(kc, &["machines", "-l", "name=demo"]))
        .iter()
        .map(|m| {
            let s = |p: &str| {
                m.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (
                s("/metadata/name"),
                s("/metadata/uid"),
                s("/spec/providerID"),
                s("/status/currentStatus/phase"),
            )
        })
        .collect()
}

/// Every VM of the local provider as (record name, record uid, machine).
fn vms(kc: &Path) -> BTreeSet<(String, String, String)> {
    items(&get_json(
        kc,
        &[
            "configmaps",
            "-A",
            "-l",
            "provider.trellis.dev/local-vm=true",
        ],
    ))
    .iter()
    .map(|cm| {
        let s = |p: &str| {
            cm.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        (
            s("/metadata/name"),
            s("/metadata/uid"),
            s("/metadata/labels/provider.trellis.dev~1machine"),
        )
    })
    .collect()
}

fn ready_nodes(kc: &Path) -> BTreeSet<String> {
    items(&get_json(kc, &["nodes"]))
        .iter()
        .filter(|n| {
            n.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
        })
        .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

fn assert_three_running(
    kc: &Path,
    machines: &BTreeSet<(String, String, String, String)>,
    vms: &BTreeSet<(String, String, String)>,
) {
    assert_eq!(machines.len(), 3, "three demo machines: {machines:?}");
    for (name, uid, provider_id, phase) in machines {
        assert_eq!(phase, "Running", "{name}");
        assert!(
            !uid.is_empty() && provider_id.starts_with("local:///"),
            "{name}: {provider_id:?}"
        );
    }
    let ids: BTreeSet<&String> = machines.iter().map(|m| &m.2).collect();
    assert_eq!(ids.len(), 3, "distinct providerIDs");
    let vm_machines: BTreeSet<&String> = vms.iter().map(|v| &v.2).collect();
    let names: BTreeSet<&String> = machines.iter().map(|m| &m.0).collect();
    assert_eq!(vms.len(), 3, "one VM per machine: {vms:?}");
    assert_eq!(vm_machines, names, "every VM belongs to a demo machine");
    let ready = ready_nodes(kc);
    assert!(
        names.iter().all(|n| ready.contains(*n)),
        "each machine's node is Ready: {ready:?}"
    );
}

#[test]
fn up_demo_follows_the_readme_and_resumes_after_a_kill() {
    if !have("kubectl") {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let lines = quick_start();
    let up_args =
        trellis_args(&lines[0]).expect("the quick start begins with `cargo run ... -- up`");
    assert_eq!(
        up_args,
        ["up", "--demo"],
        "the quick start runs `trellis up --demo`"
    );
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("trellis");
    let kc = data.join("admin.kubeconfig");

    let mut up = Up::start(&up_args, &data);
    up.wait_for("demo: 3/3 machines Running");
    assert!(
        up.printed("demo: applied"),
        "the first start applies the demo"
    );

    // Every other line of the quick start, verbatim, against this instance.
    for line in &lines[1..] {
        let w = words(line);
        match w.first().map(String::as_str) {
            Some("export") => assert!(
                line.contains("KUBECONFIG=") && line.ends_with("/admin.kubeconfig"),
                "the quick start points KUBECONFIG at the admin kubeconfig: {line}"
            ),
            Some("kubectl") => {
                let out = run(Command::new("kubectl").args(&w[1..]).env("KUBECONFIG", &kc));
                assert!(out.status.success(), "README line failed: {line}");
                assert!(
                    !stdout(&out).trim().is_empty(),
                    "README line printed nothing: {line}"
                );
            }
            Some("cargo") => {
                let args = trellis_args(line).expect("cargo run -- ARGS");
                let out = run(Command::new(env!("CARGO_BIN_EXE_trellis"))
                    .args(&args)
                    .env("KUBECONFIG", &kc));
                assert!(out.status.success(), "README line failed: {line}");
                let text = stdout(&out);
                if args.first().map(String::as_str) == Some("status") {
                    assert!(text.contains("MachineDeployment/demo"), "{text}");
                    assert!(text.contains("3/3 ready"), "{text}");
                    assert_eq!(text.matches("Running").count(), 3, "{text}");
                }
            }
            _ => panic!("the test does not know how to follow README line {line:?}"),
        }
    }

    let machines_before = machines(&kc);
    let vms_before = vms(&kc);
    assert_three_running(&kc, &machines_before, &vms_before);

    // A crash, not a clean shutdown: whatever was in flight is lost.
    up.child.kill().expect("killing trellis up");
    up.child.wait().unwrap();
    drop(up);

    let mut again = Up::start(&up_args, &data);
    again.wait_for("demo: 3/3 machines Running");
    assert!(
        again.printed("already there"),
        "a restart applies nothing new"
    );
    assert_eq!(
        machines(&kc),
        machines_before,
        "the same machines, still Running"
    );
    assert_eq!(vms(&kc), vms_before, "the same VMs");
    // Give the controllers time to act on anything they would wrongly redo.
    std::thread::sleep(Duration::from_secs(5));
    let machines_after = machines(&kc);
    let vms_after = vms(&kc);
    assert_eq!(
        machines_after, machines_before,
        "nothing replaced after settling"
    );
    assert_eq!(vms_after, vms_before, "no VM created twice");
    assert_three_running(&kc, &machines_after, &vms_after);

    // The hints name a command that runs this binary as the user can:
    // this test's binary is not `trellis` on PATH.
    let status_hint = format!("  {} status ", expected_command());
    assert!(
        again.printed(&status_hint),
        "a hint runs status with {status_hint:?}"
    );

    // The view keeps following after "3/3": up, then down, where the
    // machines being removed must leave the view before it says Running.
    let scale = |n: u32| {
        let replicas = format!("--replicas={n}");
        let out = kubectl(&kc, &["scale", "machinedeployment", "demo", &replicas]);
        assert!(out.status.success(), "kubectl scale {replicas}");
    };
    scale(4);
    again.wait_for("demo: 4/4 machines Running again");
    scale(2);
    again.wait_for("demo: 2/2 machines Running again");
    assert_eq!(
        machines(&kc).len(),
        2,
        "the view said Running only once the removed machines were gone"
    );
}

/// The command the hints should print for this test's binary: `cargo run`
/// as the README has it while it lives in the workspace's target directory
/// (the test runs inside the workspace), else its path; `trellis` when
/// that is this binary on PATH.
fn expected_command() -> String {
    let exe = Path::new(env!("CARGO_BIN_EXE_trellis"))
        .canonicalize()
        .unwrap();
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .filter_map(|d| d.join("trellis").canonicalize().ok())
            .next()
            .is_some_and(|p| p == exe)
    });
    let target = repo_root().canonicalize().unwrap().join("target");
    if on_path {
        "trellis".to_string()
    } else if exe.parent() == Some(&target.join("release")) {
        "cargo run --release -p trellis --".to_string()
    } else if exe.parent() == Some(&target.join("debug")) {
        "cargo run -p trellis --".to_string()
    } else {
        exe.display().to_string()
    }
}

#[test]
fn up_demo_in_memory_says_nothing_is_kept() {
    if !have("kubectl") {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let args = ["up", "--demo", "--in-memory"].map(String::from);
    let mut up = Up::start(&args, &tmp.path().join("trellis"));
    up.wait_for("demo: 3/3 machines Running");
    up.wait_for("Ctrl-C stops trellis");
    assert!(
        up.printed("with --in-memory nothing is kept"),
        "the in-memory demo says nothing is kept"
    );
    assert!(!up.printed("resumes"), "and does not promise to resume");
}

#[test]
fn quick_start_words_split_like_a_shell() {
    assert_eq!(
        words("kubectl get machine -o 'custom-columns=A:.b' \"x y\""),
        [
            "kubectl",
            "get",
            "machine",
            "-o",
            "custom-columns=A:.b",
            "x y"
        ]
    );
    assert_eq!(
        trellis_args("cargo run --release -p trellis -- up --demo"),
        Some(vec!["up".to_string(), "--demo".to_string()])
    );
    assert_eq!(trellis_args("kubectl get nodes"), None);
}
