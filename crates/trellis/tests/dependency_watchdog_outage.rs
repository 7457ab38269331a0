//! A zone outage end to end with kubectl against `trellis up` (issue 14):
//! a Shoot with 10 machines over 3 zones and a short machine health
//! timeout; the simulated kubelets of 7 nodes stop (nodesim's fault
//! annotation on the shoot's Nodes), so their leases stop renewing.
//!
//! 1. With dependency-watchdog's prober: it scales the shoot's
//!    `machine-controller-manager` Deployment to 0 with the meltdown
//!    annotations, which stops the shoot's machine controllers, and no
//!    machine is replaced even after node grace + health timeout have
//!    passed. The kubelets come back → the prober scales it back to 1
//!    (meltdown annotation removed), and the same 10 machines (names, UIDs,
//!    provider IDs) are Running.
//! 2. The same outage with the prober out of the way for this shoot
//!    (`dependency-watchdog.gardener.cloud/ignore-scaling: "true"` on the
//!    Deployment, upstream's switch): machines are replaced.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::{have, kubectl, start_command};
use serde_json::Value;

const NS: &str = "shoot--local--outage";
const MCM: &str = "machine-controller-manager";
const MELTDOWN: &str = "dependency-watchdog.gardener.cloud/meltdown-protection-active";
const REPLICAS: &str = "dependency-watchdog.gardener.cloud/replicas";
const KUBELET_FAULT: &str = "nodesim.trellis.dev/kubelet";
/// The simulated node-lifecycle grace (nodesim's default) and the pools'
/// machine health timeout: past both, an MCM that runs replaces machines.
const NODE_GRACE: Duration = Duration::from_secs(40);
const HEALTH_TIMEOUT: Duration = Duration::from_secs(60);

const SHOOT: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: garden-local
---
apiVersion: core.gardener.cloud/v1beta1
kind: Shoot
metadata:
  name: outage
  namespace: garden-local
spec:
  cloudProfile: {kind: CloudProfile, name: local}
  region: local
  kubernetes:
    version: "1.31.2"
  networking:
    type: calico
    nodes: 10.250.0.0/16
  # The newest versions and no automatic updates: a maintenance rollout
  # would replace machines for reasons of its own.
  maintenance:
    autoUpdate: {kubernetesVersion: false, machineImageVersion: false}
    timeWindow: {begin: 220000+0000, end: 230000+0000}
  provider:
    type: local
    workers:
      - name: system
        machine:
          type: local-small
          image: {name: gardenlinux, version: 1592.2.0}
        minimum: 5
        maximum: 5
        maxSurge: 1
        maxUnavailable: 0
        zones: [zone-a, zone-b, zone-c]
        machineControllerManager: {machineHealthTimeout: 1m}
      - name: apps
        machine:
          type: local-large
          image: {name: gardenlinux, version: 1592.2.0}
        minimum: 5
        maximum: 5
        maxSurge: 1
        maxUnavailable: 0
        zones: [zone-a, zone-b, zone-c]
        machineControllerManager: {machineHealthTimeout: 1m}
"#;

fn wait<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn get_json(kc: &Path, args: &[&str]) -> Option<Value> {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = kubectl(kc, &all);
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn ok(kc: &Path, args: &[&str]) {
    let out = kubectl(kc, args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A machine as the test tells them apart: name, UID, provider ID, phase.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct MachineId {
    name: String,
    uid: String,
    provider_id: String,
}

struct Machines {
    ids: BTreeSet<MachineId>,
    running: usize,
    /// Failed, Terminating or being deleted.
    going: Vec<String>,
}

fn machines(kc: &Path) -> Option<Machines> {
    let list = get_json(kc, &["get", "machines", "-n", NS])?;
    let items = list["items"].as_array()?;
    let mut out = Machines {
        ids: BTreeSet::new(),
        running: 0,
        going: Vec::new(),
    };
    for m in items {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let name = s(&m["metadata"]["name"]);
        let phase = s(&m["status"]["currentStatus"]["phase"]);
        if phase == "Running" {
            out.running += 1;
        }
        if phase == "Failed"
            || phase == "Terminating"
            || !m["metadata"]["deletionTimestamp"].is_null()
        {
            out.going.push(format!("{name} ({phase})"));
        }
        out.ids.insert(MachineId {
            name,
            uid: s(&m["metadata"]["uid"]),
            provider_id: s(&m["spec"]["providerID"]),
        });
    }
    Some(out)
}

fn mcm_deployment(kc: &Path) -> Option<Value> {
    get_json(kc, &["get", "deployment", MCM, "-n", NS])
}

fn replicas(d: &Value) -> i64 {
    d["spec"]["replicas"].as_i64().unwrap_or(1)
}

fn annotation<'a>(d: &'a Value, key: &str) -> Option<&'a str> {
    d["metadata"]["annotations"][key].as_str()
}

/// The shoot's admin kubeconfig, from the Secret gardenlet writes.
fn shoot_kubeconfig(kc: &Path, dir: &Path) -> PathBuf {
    let secret = wait(
        "the shoot's kubeconfig secret",
        Duration::from_secs(60),
        || get_json(kc, &["get", "secret", "kubeconfig", "-n", NS]),
    );
    let text = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["kubeconfig"].as_str().unwrap())
        .unwrap();
    let path = dir.join("shoot.kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}

/// The shoot's node names, sorted.
fn nodes(shoot: &Path) -> Vec<String> {
    let list = get_json(shoot, &["get", "nodes"]).expect("the shoot's nodes");
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn stop_kubelets(shoot: &Path, names: &[String]) {
    for n in names {
        ok(
            shoot,
            &[
                "annotate",
                "node",
                n,
                &format!("{KUBELET_FAULT}=stopped"),
                "--overwrite",
            ],
        );
    }
}

fn restore_kubelets(shoot: &Path, names: &[String]) {
    for n in names {
        ok(
            shoot,
            &["annotate", "node", n, &format!("{KUBELET_FAULT}-")],
        );
    }
}

#[test]
fn a_zone_outage_scales_mcm_down_and_no_machine_is_replaced() {
    if !have("kubectl") {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let _up = start_command("up", data, &[]);
    let kc = data.join("admin.kubeconfig");
    let profile =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/shoot/cloudprofile.yaml");
    ok(&kc, &["apply", "-f", profile.to_str().unwrap()]);
    let shoot_file = data.join("shoot.yaml");
    std::fs::write(&shoot_file, SHOOT).unwrap();
    ok(&kc, &["apply", "-f", shoot_file.to_str().unwrap()]);

    // The shoot runs: 10 machines, and its machine-controller-manager
    // Deployment with a ready (stand-in) pod.
    let before = wait("10 running machines", Duration::from_secs(180), || {
        machines(&kc).filter(|m| m.running == 10 && m.ids.len() == 10)
    })
    .ids;
    wait("the MCM deployment ready", Duration::from_secs(60), || {
        mcm_deployment(&kc).filter(|d| d["status"]["readyReplicas"].as_i64() == Some(1))
    });
    let shoot = shoot_kubeconfig(&kc, data);
    let all_nodes = wait("10 nodes in the shoot", Duration::from_secs(60), || {
        Some(nodes(&shoot)).filter(|n| n.len() == 10)
    });
    // The Cluster shows the shoot created, so the prober starts and, after
    // its initial delay, probes; give it that delay before the outage.
    wait("the shoot created", Duration::from_secs(120), || {
        get_json(&kc, &["get", "shoot", "outage", "-n", "garden-local"])
            .filter(|s| s["status"]["lastOperation"]["state"] == "Succeeded")
    });
    std::thread::sleep(Duration::from_secs(30));

    // The outage: 7 of 10 kubelets stop.
    let lost: Vec<String> = all_nodes[..7].to_vec();
    let outage = Instant::now();
    stop_kubelets(&shoot, &lost);
    let down = wait(
        "the prober to scale MCM to 0",
        Duration::from_secs(120),
        || mcm_deployment(&kc).filter(|d| replicas(d) == 0),
    );
    assert_eq!(annotation(&down, MELTDOWN), Some(""), "{down}");
    assert_eq!(annotation(&down, REPLICAS), Some("1"), "{down}");
    eprintln!("scaled down {:?} after the outage began", outage.elapsed());

    // Past node grace and health timeout: nothing replaced, MCM held down.
    let past = NODE_GRACE + HEALTH_TIMEOUT + Duration::from_secs(30);
    while outage.elapsed() < past {
        let m = machines(&kc).expect("machines");
        assert_eq!(m.ids, before, "no machine is replaced during the outage");
        assert!(
            m.going.is_empty(),
            "no machine fails or goes: {:?}",
            m.going
        );
        let d = mcm_deployment(&kc).expect("the MCM deployment");
        assert_eq!(replicas(&d), 0, "held down while the leases are lost");
        std::thread::sleep(Duration::from_secs(5));
    }

    // The kubelets come back: scaled back up, the same machines Running.
    restore_kubelets(&shoot, &lost);
    let up = wait(
        "the prober to scale MCM back to 1",
        Duration::from_secs(150),
        || mcm_deployment(&kc).filter(|d| replicas(d) == 1 && annotation(d, MELTDOWN).is_none()),
    );
    assert_eq!(
        annotation(&up, REPLICAS),
        Some("1"),
        "kept, as upstream's code does"
    );
    wait(
        "10 running machines again",
        Duration::from_secs(120),
        || machines(&kc).filter(|m| m.running == 10),
    );
    assert_eq!(
        machines(&kc).unwrap().ids,
        before,
        "the same 10 machines (names, UIDs, provider IDs)"
    );

    // Both flows found the Deployment and its pod: no failed scale.
    let events = get_json(&kc, &["get", "events", "-n", NS]).expect("events");
    let failed: Vec<&Value> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == "ScaleFailed")
        .collect();
    assert!(failed.is_empty(), "{failed:?}");

    // The same outage without the prober's protection (upstream's switch
    // for one resource): machines are replaced.
    ok(
        &kc,
        &[
            "annotate",
            "deployment",
            MCM,
            "-n",
            NS,
            "dependency-watchdog.gardener.cloud/ignore-scaling=true",
        ],
    );
    stop_kubelets(&shoot, &lost);
    let replaced = wait(
        "machines to be replaced without the prober",
        NODE_GRACE + HEALTH_TIMEOUT + Duration::from_secs(180),
        || {
            let d = mcm_deployment(&kc)?;
            assert_eq!(replicas(&d), 1, "ignore-scaling: the prober leaves it");
            let m = machines(&kc)?;
            let gone: Vec<&MachineId> = before.difference(&m.ids).collect();
            let new: Vec<&MachineId> = m.ids.difference(&before).collect();
            (!m.going.is_empty() || !gone.is_empty() || !new.is_empty())
                .then(|| format!("going {:?}, gone {gone:?}, new {new:?}", m.going))
        },
    );
    eprintln!("without the prober: {replaced}");
}
