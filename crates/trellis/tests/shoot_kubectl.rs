//! From Shoot to machines, end to end with kubectl against the real
//! `trellis up`: the examples' CloudProfile and Shoot (two pools over three
//! zones, minimum 5 each) become three MachineDeployments per pool with
//! replicas 2/2/1, Running machines and Ready nodes in the shoot's own API
//! server carrying their pool label and zone; an image change rolls only
//! its pool; a label change replaces nothing and relabels the nodes;
//! hibernation removes every machine and VM; waking brings the pools back;
//! deleting the Shoot leaves nothing behind.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{have, kubectl, start_command};
use serde_json::Value;

const NS: &str = "shoot--local--demo";
const TIMEOUT: Duration = Duration::from_secs(120);

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/shoot")
}

fn ok(kc: &Path, args: &[&str]) -> String {
    let out = kubectl(kc, args);
    assert!(out.status.success(), "kubectl {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(kc: &Path, args: &[&str]) -> Value {
    let mut full = args.to_vec();
    full.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&ok(kc, &full)).expect("kubectl printed JSON")
}

fn items(v: &Value) -> Vec<Value> {
    v["items"].as_array().cloned().unwrap_or_default()
}

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// Polls `f` until it returns `Some`, failing after [`TIMEOUT`].
fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// [`wait`], but on a timeout first prints what the shoot's control plane
/// looks like (the shoot's status, its workloads, pods and machines), so a
/// failure in CI says where it stopped.
fn wait_explained<T>(kc: &Path, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(t) = f() {
            return t;
        }
        if Instant::now() >= deadline {
            let shoot = json(kc, &["get", "shoot", "demo", "-n", "garden-local"]);
            eprintln!(
                "shoot status: {}",
                serde_json::to_string_pretty(&shoot["status"]).unwrap_or_default()
            );
            for args in [
                &["get", "deploy,sts,pods,etcd", "-n", NS, "-o", "wide"][..],
                &["get", "machinedeployments,machinesets,machines", "-n", NS][..],
                &["get", "events", "-n", NS, "--sort-by=.lastTimestamp"][..],
            ] {
                let out = kubectl(kc, args);
                eprintln!(
                    "$ kubectl {}\n{}{}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            panic!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Machines of the shoot: name → (phase, deployment, class).
fn machines(kc: &Path) -> BTreeMap<String, (String, String)> {
    items(&json(kc, &["get", "machines", "-n", NS]))
        .iter()
        .map(|m| {
            (
                s(m, "/metadata/name").to_string(),
                (
                    s(m, "/status/currentStatus/phase").to_string(),
                    s(m, "/spec/class/name").to_string(),
                ),
            )
        })
        .collect()
}

fn running(kc: &Path) -> usize {
    machines(kc)
        .values()
        .filter(|(p, _)| p == "Running")
        .count()
}

fn vms(kc: &Path) -> usize {
    items(&json(
        kc,
        &[
            "get",
            "configmaps",
            "-A",
            "-l",
            "provider.trellis.dev/local-vm=true",
        ],
    ))
    .len()
}

/// Deployment name → (replicas, class).
fn deployments(kc: &Path) -> BTreeMap<String, (i64, String)> {
    items(&json(kc, &["get", "machinedeployments", "-n", NS]))
        .iter()
        .map(|d| {
            (
                s(d, "/metadata/name").to_string(),
                (
                    d.pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(0),
                    s(d, "/spec/template/spec/class/name").to_string(),
                ),
            )
        })
        .collect()
}

fn shoot_state(kc: &Path) -> (String, String, i64, i64) {
    let shoot = json(kc, &["get", "shoot", "demo", "-n", "garden-local"]);
    (
        s(&shoot, "/status/lastOperation/state").to_string(),
        s(&shoot, "/status/lastOperation/type").to_string(),
        shoot
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        shoot
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64)
            .unwrap_or(-1),
    )
}

/// Waits until the shoot's current generation reconciled successfully.
fn wait_succeeded(kc: &Path, what: &str) {
    wait(what, || {
        let (state, _, generation, observed) = shoot_state(kc);
        (state == "Succeeded" && observed >= generation).then_some(())
    });
}

/// The shoot API's nodes: name → (ready, labels).
fn shoot_nodes(shoot_kc: &Path) -> BTreeMap<String, (bool, BTreeMap<String, String>)> {
    items(&json(shoot_kc, &["get", "nodes"]))
        .iter()
        .map(|n| {
            let ready = n
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                });
            let labels = n
                .pointer("/metadata/labels")
                .cloned()
                .and_then(|l| serde_json::from_value(l).ok())
                .unwrap_or_default();
            (s(n, "/metadata/name").to_string(), (ready, labels))
        })
        .collect()
}

fn patch_shoot(kc: &Path, patch: &str) {
    ok(
        kc,
        &[
            "patch",
            "shoot",
            "demo",
            "-n",
            "garden-local",
            "--type",
            "json",
            "-p",
            patch,
        ],
    );
}

#[test]
fn a_shoot_becomes_machines_and_nodes_and_goes_away() {
    if !have("kubectl") {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let _up = start_command("up", data, &[]);
    let kc = data.join("admin.kubeconfig");

    // The Worker contract's documented example applies as it is.
    ok(&kc, &["create", "namespace", "shoot--foo--bar"]);
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seed-worker.yaml");
    ok(&kc, &["apply", "-f", seed.to_str().unwrap()]);
    let documented = json(&kc, &["get", "worker", "bar", "-n", "shoot--foo--bar"]);
    assert_eq!(
        s(&documented, "/spec/pools/0/machineImage/version"),
        "1967.5.0"
    );
    assert_eq!(
        s(
            &documented,
            "/spec/pools/0/machineControllerManager/drainTimeout"
        ),
        "10m"
    );
    ok(
        &kc,
        &["delete", "namespace", "shoot--foo--bar", "--wait=false"],
    );

    let ex = examples();
    ok(
        &kc,
        &[
            "apply",
            "-f",
            ex.join("cloudprofile.yaml").to_str().unwrap(),
        ],
    );
    ok(
        &kc,
        &["apply", "-f", ex.join("shoot.yaml").to_str().unwrap()],
    );

    // Three deployments per pool with 2/2/1, all machines Running.
    wait_succeeded(&kc, "the shoot to be created");
    let mds = deployments(&kc);
    let replicas: Vec<(&str, i64)> = mds.iter().map(|(n, (r, _))| (n.as_str(), *r)).collect();
    assert_eq!(
        replicas,
        [
            ("shoot--local--demo-apps-z1", 2),
            ("shoot--local--demo-apps-z2", 2),
            ("shoot--local--demo-apps-z3", 1),
            ("shoot--local--demo-system-z1", 2),
            ("shoot--local--demo-system-z2", 2),
            ("shoot--local--demo-system-z3", 1),
        ]
    );
    let worker = json(&kc, &["get", "worker", NS, "-n", NS]);
    let listed: BTreeSet<&str> = worker
        .pointer("/status/machineDeployments")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|d| s(d, "/name")).collect())
        .unwrap_or_default();
    assert_eq!(
        listed,
        mds.keys().map(String::as_str).collect(),
        "{worker:#}"
    );
    wait("10 Running machines", || (running(&kc) == 10).then_some(()));

    // The nodes live in the shoot's own API server, not in the seed's.
    let secret = json(&kc, &["get", "secret", "kubeconfig", "-n", NS]);
    let shoot_kc = data.join("shoot.kubeconfig");
    let b64 = s(&secret, "/data/kubeconfig");
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("the kubeconfig Secret holds base64");
    std::fs::write(&shoot_kc, decoded).unwrap();
    let nodes = wait("10 Ready nodes in the shoot", || {
        let n = shoot_nodes(&shoot_kc);
        (n.len() == 10 && n.values().all(|(ready, _)| *ready)).then_some(n)
    });
    for (name, (_, labels)) in &nodes {
        let pool = labels.get("worker.gardener.cloud/pool").map(String::as_str);
        assert!(
            name.contains(&format!("-{}-z", pool.unwrap_or("?"))),
            "{name} carries its pool label: {labels:?}"
        );
        let zone = labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str);
        let want = match &name[name.find("-z").map(|i| i + 2).unwrap_or(0)..][..1] {
            "1" => "zone-a",
            "2" => "zone-b",
            _ => "zone-c",
        };
        assert_eq!(zone, Some(want), "{name}: {labels:?}");
    }
    // Each kubelet runs the shoot's Kubernetes version (the bootstrap user
    // data names it; admission defaulted "1.31" to the newest patch).
    let shoot = json(&kc, &["get", "shoot", "demo", "-n", "garden-local"]);
    let version = format!("v{}", s(&shoot, "/spec/kubernetes/version"));
    assert!(version.starts_with("v1.31."), "{version}");
    for n in items(&json(&shoot_kc, &["get", "nodes"])) {
        assert_eq!(s(&n, "/status/nodeInfo/kubeletVersion"), version, "{n:#}");
    }
    // The seed's only node is the process kubelet's (this machine).
    assert!(
        items(&json(
            &kc,
            &["get", "nodes", "-l", "node.trellis.dev/runtime!=process"]
        ))
        .is_empty(),
        "no shoot node registers in the seed"
    );
    assert_eq!(vms(&kc), 10);

    // A new image version for `system` rolls that pool only.
    let before = machines(&kc);
    let apps_before: BTreeMap<&String, &(String, String)> = before
        .iter()
        .filter(|(n, _)| n.contains("-apps-"))
        .collect();
    patch_shoot(
        &kc,
        r#"[{"op":"replace","path":"/spec/provider/workers/0/machine/image/version","value":"1592.2.0"}]"#,
    );
    wait_succeeded(&kc, "the system pool to roll");
    let after = wait("the rolled pool to settle at 10 Running", || {
        let m = machines(&kc);
        (m.len() == 10 && m.values().all(|(p, _)| p == "Running")).then_some(m)
    });
    let apps_after: BTreeMap<&String, &(String, String)> =
        after.iter().filter(|(n, _)| n.contains("-apps-")).collect();
    assert_eq!(apps_after, apps_before, "the apps pool is untouched");
    for (name, (_, class)) in after.iter().filter(|(n, _)| n.contains("-system-")) {
        assert!(!before.contains_key(name), "{name} was replaced");
        assert!(
            !before.values().any(|(_, c)| c == class),
            "{name} uses a new class"
        );
    }
    let classes = items(&json(&kc, &["get", "machineclasses", "-n", NS]));
    assert_eq!(classes.len(), 6, "old classes are cleaned up");

    // New labels for `apps`: nothing replaced, the nodes relabelled.
    let before = machines(&kc);
    patch_shoot(
        &kc,
        r#"[{"op":"replace","path":"/spec/provider/workers/1/labels","value":{"role":"web"}}]"#,
    );
    wait_succeeded(&kc, "the label change");
    wait("the apps nodes to be relabelled", || {
        let n = shoot_nodes(&shoot_kc);
        n.iter()
            .filter(|(name, _)| name.contains("-apps-"))
            .all(|(_, (_, l))| l.get("role").map(String::as_str) == Some("web"))
            .then_some(())
    });
    assert_eq!(machines(&kc), before, "a label change replaces no machine");

    // Hibernation removes every machine and VM.
    patch_shoot(
        &kc,
        r#"[{"op":"add","path":"/spec/hibernation","value":{"enabled":true}}]"#,
    );
    wait_explained(&kc, "every machine and VM to be gone", || {
        (machines(&kc).is_empty() && vms(&kc) == 0).then_some(())
    });
    wait("the shoot to report hibernated", || {
        let shoot = json(&kc, &["get", "shoot", "demo", "-n", "garden-local"]);
        (shoot.pointer("/status/hibernated") == Some(&Value::Bool(true))).then_some(())
    });

    // Waking brings the pools back to their minimum.
    patch_shoot(
        &kc,
        r#"[{"op":"replace","path":"/spec/hibernation/enabled","value":false}]"#,
    );
    wait_explained(&kc, "10 Running machines after waking", || {
        (running(&kc) == 10).then_some(())
    });
    wait_succeeded(&kc, "the shoot to be awake");

    // Deleting the Shoot leaves nothing behind.
    ok(
        &kc,
        &[
            "delete",
            "shoot",
            "demo",
            "-n",
            "garden-local",
            "--wait=false",
        ],
    );
    wait("the shoot to be gone", || {
        let out = kubectl(&kc, &["get", "shoot", "demo", "-n", "garden-local"]);
        (!out.status.success()).then_some(())
    });
    assert!(machines_anywhere(&kc).is_empty(), "no machine left");
    assert_eq!(vms(&kc), 0, "no VM left");
    for kind in ["machineclasses", "machinedeployments", "machinesets"] {
        assert!(
            items(&json(&kc, &["get", kind, "-A"])).is_empty(),
            "no {kind} left"
        );
    }
    let out = kubectl(&kc, &["get", "namespace", NS]);
    assert!(!out.status.success(), "the control namespace is gone");
    assert!(
        !data.join("shoots").join(NS).exists(),
        "the shoot API's data is gone"
    );
}

fn machines_anywhere(kc: &Path) -> Vec<Value> {
    items(&json(kc, &["get", "machines", "-A"]))
}
