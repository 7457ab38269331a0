//! `trellis up`'s process kubelet across a crash: pods applied with kubectl
//! run as processes with their own pod IPs; after `kill -9` of trellis and
//! a restart, exactly the same processes run (adopted: no duplicate, no
//! orphan, no restart counted); deleting a pod then stops its processes.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::{have, kubectl, start_command, stdout, wait_until};
use serde_json::Value;

/// Kills every shim of the test's data dir, whatever happened.
struct Cleanup<'a>(&'a Path);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        kubelet::runtime::kill_all(self.0);
    }
}

/// The shims of `dir` (not trellis itself) and their descendants.
fn processes_of(dir: &Path) -> BTreeSet<i32> {
    let needle = dir.display().to_string();
    let mut parents: Vec<(i32, i32)> = Vec::new();
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<i32>().ok())
        else {
            continue;
        };
        if stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().next())
            == Some("Z")
        {
            continue;
        }
        parents.push((pid, ppid));
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd);
        if cmd.contains("shim") && cmd.contains(&needle) {
            out.insert(pid);
        }
    }
    loop {
        let before = out.len();
        for (pid, ppid) in &parents {
            if out.contains(ppid) {
                out.insert(*pid);
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web-a}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: web
    image: trellis.dev/exec
    command: [python3, -m, http.server, --bind, $(POD_IP), "8080"]
    env:
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    readinessProbe: {httpGet: {port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: web-b}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: web
    image: trellis.dev/exec
    command: [python3, -m, http.server, --bind, $(POD_IP), "8080"]
    env:
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    readinessProbe: {httpGet: {port: 8080}, periodSeconds: 1}
"#;

fn pods(kc: &Path) -> Vec<Value> {
    let out = kubectl(kc, &["get", "pods", "-o", "json"]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap_or(Value::Null);
    v["items"].as_array().cloned().unwrap_or_default()
}

fn ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

#[test]
fn a_crash_of_trellis_leaves_exactly_the_same_processes_running() {
    if !have("kubectl") || !have("python3") {
        eprintln!("SKIPPED: kubectl or python3 is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let _cleanup = Cleanup(data);
    let kc = data.join("admin.kubeconfig");
    let mut up = start_command("up", data, &[]);
    let manifest = data.join("pods.yaml");
    std::fs::write(&manifest, PODS).unwrap();
    let out = kubectl(&kc, &["apply", "-f", manifest.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    wait_until("two Ready pods", 90, || {
        pods(&kc).iter().filter(|p| ready(p)).count() == 2
    });
    let ips: BTreeSet<String> = pods(&kc)
        .iter()
        .filter_map(|p| p.pointer("/status/podIP")?.as_str().map(str::to_string))
        .collect();
    assert_eq!(ips.len(), 2, "distinct pod IPs: {ips:?}");
    let before = processes_of(data);
    assert!(
        before.len() >= 6,
        "two shims, two inits, two servers: {before:?}"
    );

    // kill -9, and start again on the same data dir.
    up.child.kill().unwrap();
    up.child.wait().unwrap();
    assert_eq!(
        processes_of(data),
        before,
        "the pods' processes outlive trellis"
    );
    drop(up);
    let _up = start_command("up", data, &[]);
    // Give the kubelet time to adopt (and, were it wrong, to restart).
    std::thread::sleep(Duration::from_secs(6));
    wait_until("two Ready pods again", 60, || {
        pods(&kc).iter().filter(|p| ready(p)).count() == 2
    });
    assert_eq!(
        processes_of(data),
        before,
        "adopted: no duplicate, no orphan"
    );
    for p in pods(&kc) {
        assert_eq!(
            p.pointer("/status/containerStatuses/0/restartCount"),
            Some(&Value::from(0)),
            "{p:#}"
        );
        assert!(
            ips.contains(
                p.pointer("/status/podIP")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ),
            "the same IPs"
        );
    }

    // Deleting a pod stops its processes, and only those.
    let out = kubectl(&kc, &["delete", "pod", "web-a", "--wait=true"]);
    assert!(out.status.success(), "{out:?}");
    wait_until("web-a's processes to end", 30, || {
        processes_of(data).len() == before.len() / 2
    });
    assert!(processes_of(data).is_subset(&before));
}
