//! Cluster API end to end with kubectl against the real `trellis up
//! --cluster-api`: upstream-style manifests (examples/cluster-api) make a
//! Cluster and a MachineDeployment of 3 whose Machines pass Pending →
//! Provisioning → Provisioned → Running (the phase history is recorded from
//! a `kubectl get --watch` and asserted, not only the end state); a Machine
//! whose bootstrap config never gets ready stays Pending and says why;
//! admission rejects invalid objects with field causes; a new
//! infrastructure template rolls out within maxSurge/maxUnavailable; a
//! killed node is remediated by the MachineHealthCheck, but not when more
//! than maxUnhealthy are down; deleting the Cluster deletes everything.
//! Then the same controllers as `trellis controller-manager` against a
//! separate `trellis server`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{have, kubectl, start, start_command};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(150);

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster-api")
}

fn example(name: &str) -> String {
    examples().join(name).to_string_lossy().into_owned()
}

fn ok(kc: &Path, args: &[&str]) -> String {
    let out = kubectl(kc, args);
    assert!(out.status.success(), "kubectl {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl apply -f -` with `yaml` on stdin; the output and success.
fn apply_stdin(kc: &Path, yaml: &str) -> (bool, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args(["apply", "-f", "-"])
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning kubectl");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(yaml.as_bytes())
        .expect("writing to kubectl");
    let out = child.wait_with_output().expect("kubectl finished");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("$ kubectl apply -f - <<EOF\n{yaml}EOF\n{text}");
    (out.status.success(), text)
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

fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Machine name → (phase, deleting) of the Cluster API Machines.
fn machines(kc: &Path) -> BTreeMap<String, (String, bool)> {
    items(&json(kc, &["get", "machines.cluster.x-k8s.io"]))
        .iter()
        .map(|m| {
            (
                s(m, "/metadata/name").to_string(),
                (
                    s(m, "/status/phase").to_string(),
                    m.pointer("/metadata/deletionTimestamp").is_some(),
                ),
            )
        })
        .collect()
}

fn running(kc: &Path, prefix: &str) -> usize {
    machines(kc)
        .iter()
        .filter(|(n, (p, d))| n.starts_with(prefix) && p == "Running" && !d)
        .count()
}

/// A `kubectl get --watch` of the Machines' phases, running in the
/// background: each event's (name, phase), in order.
struct PhaseWatch {
    child: Child,
    events: Arc<Mutex<Vec<(String, String)>>>,
}

impl Drop for PhaseWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PhaseWatch {
    fn start(kc: &Path) -> PhaseWatch {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kc)
            .args([
                "get",
                "machines.cluster.x-k8s.io",
                "--watch",
                "--no-headers",
                "-o",
                "custom-columns=NAME:.metadata.name,PHASE:.status.phase",
            ])
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning kubectl --watch");
        let out = child.stdout.take().expect("piped stdout");
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let w: Vec<&str> = line.split_whitespace().collect();
                if let [name, phase] = w.as_slice()
                    && *phase != "<none>"
                {
                    sink.lock()
                        .unwrap()
                        .push((name.to_string(), phase.to_string()));
                }
            }
        });
        PhaseWatch { child, events }
    }

    /// Each Machine's phases as watched, consecutive repeats dropped.
    fn history(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, phase) in self.events.lock().unwrap().iter() {
            let seen = out.entry(name.clone()).or_default();
            if seen.last() != Some(phase) {
                seen.push(phase.clone());
            }
        }
        out
    }
}

const NEVER_READY: &str = r#"apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: stuck, namespace: default}
spec:
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: LocalCluster, name: not-there}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: TrellisConfig
metadata: {name: never-ready, namespace: default}
spec: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: LocalMachine
metadata: {name: never-ready, namespace: default}
spec: {}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Machine
metadata: {name: never-ready, namespace: default}
spec:
  clusterName: stuck
  version: v1.31.2
  bootstrap:
    configRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta1, kind: TrellisConfig, name: never-ready}
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: LocalMachine, name: never-ready}
"#;

#[test]
fn cluster_api_machines_with_kubectl_against_trellis_up() {
    if !have("kubectl") || !have("curl") {
        eprintln!("skipping: kubectl and curl are needed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let _up = start_command("up", data, &["--cluster-api"]);
    let kc = data.join("admin.kubeconfig");
    let watch = PhaseWatch::start(&kc);

    // A Cluster and a MachineDeployment of 3, as upstream manifests.
    ok(
        &kc,
        &[
            "apply",
            "-f",
            &example("cluster.yaml"),
            "-f",
            &example("machinedeployment.yaml"),
        ],
    );
    wait("3 Running machines", || {
        (running(&kc, "capi-quickstart-md-0") == 3).then_some(())
    });
    // Let the watch catch up with the last writes.
    std::thread::sleep(Duration::from_secs(1));
    let history = watch.history();
    let first: BTreeSet<String> = machines(&kc).keys().cloned().collect();
    for name in &first {
        assert_eq!(
            history.get(name).map(Vec::as_slice),
            Some(
                &[
                    "Pending".to_string(),
                    "Provisioning".into(),
                    "Provisioned".into(),
                    "Running".into()
                ][..]
            ),
            "{name}: phases as watched"
        );
    }
    // kubectl's view: short names, category, printer columns.
    let table = ok(&kc, &["get", "ma", "-o", "wide"]);
    assert!(table.starts_with("NAME "), "{table}");
    for col in [
        "CLUSTER",
        "NODENAME",
        "PROVIDERID",
        "PHASE",
        "AGE",
        "VERSION",
    ] {
        assert!(table.contains(col), "{col} in {table}");
    }
    let all = ok(&kc, &["get", "cluster-api", "-o", "name"]);
    for kind in [
        "cluster.cluster.x-k8s.io/capi-quickstart",
        "machinedeployment.cluster.x-k8s.io/capi-quickstart-md-0",
        "localcluster.infrastructure.cluster.x-k8s.io/capi-quickstart",
        "trellisconfigtemplate.bootstrap.cluster.x-k8s.io/capi-quickstart-md-0",
    ] {
        assert!(all.contains(kind), "{kind} in category cluster-api: {all}");
    }
    // `trellis status`: Cluster → MachineDeployment → MachineSet → Machine
    // → bootstrap, infrastructure and Node, as clusterctl describes it.
    let status = Command::new(env!("CARGO_BIN_EXE_trellis"))
        .arg("status")
        .arg("--kubeconfig")
        .arg(&kc)
        .env("NO_COLOR", "1")
        .output()
        .expect("running trellis status");
    let tree = String::from_utf8_lossy(&status.stdout).into_owned();
    eprintln!("$ trellis status\n{tree}");
    assert!(status.status.success(), "{status:?}");
    assert!(
        tree.starts_with("NAME "),
        "only the Cluster API tree: {tree}"
    );
    for want in [
        "Cluster/capi-quickstart",
        "├─ClusterInfrastructure - LocalCluster/capi-quickstart",
        "└─MachineDeployment/capi-quickstart-md-0",
        "└─MachineSet/capi-quickstart-md-0-",
    ] {
        assert!(tree.contains(want), "{want} in {tree}");
    }
    for name in &first {
        for want in [
            format!("Machine/{name}"),
            format!("BootstrapConfig - TrellisConfig/{name}"),
            format!("MachineInfrastructure - LocalMachine/{name}"),
            format!("Node/{name}"),
        ] {
            let line = tree
                .lines()
                .find(|l| l.contains(&want))
                .unwrap_or_else(|| panic!("{want} in {tree}"));
            assert!(line.contains(" True "), "ready: {line}");
        }
    }
    let md = json(&kc, &["get", "md", "capi-quickstart-md-0"]);
    assert_eq!(s(&md, "/status/phase"), "Running");
    assert_eq!(md.pointer("/status/readyReplicas"), Some(&Value::from(3)));
    // The nodes booted from the bootstrap data.
    for name in &first {
        let node = json(&kc, &["get", "node", name]);
        assert_eq!(s(&node, "/status/nodeInfo/kubeletVersion"), "v1.31.2");
        assert_eq!(
            s(&node, "/metadata/labels/node.kubernetes.io~1pool"),
            "md-0"
        );
    }

    // A Machine whose bootstrap config never gets ready stays Pending and
    // says why.
    let (applied, text) = apply_stdin(&kc, NEVER_READY);
    assert!(applied, "{text}");
    let reason = wait("the stuck Machine to say why", || {
        let m = json(&kc, &["get", "ma", "never-ready"]);
        let c = m["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "BootstrapReady")?
            .clone();
        (c["reason"] == "WaitingForClusterInfrastructure").then_some(c)
    });
    assert!(
        s(&reason, "/message").contains("infrastructure"),
        "{reason}"
    );
    std::thread::sleep(Duration::from_secs(2));
    let stuck = json(&kc, &["get", "ma", "never-ready"]);
    assert_eq!(s(&stuck, "/status/phase"), "Pending");
    let described = ok(&kc, &["describe", "ma", "never-ready"]);
    assert!(
        described.contains("WaitingForClusterInfrastructure"),
        "{described}"
    );
    ok(&kc, &["delete", "cluster", "stuck", "--wait=false"]);

    // Admission: upstream's webhooks, as 422s with field causes.
    let (applied, text) = apply_stdin(
        &kc,
        "apiVersion: cluster.x-k8s.io/v1beta1\nkind: MachineDeployment\nmetadata: {name: bad, namespace: default}\n\
         spec:\n  clusterName: capi-quickstart\n  strategy: {rollingUpdate: {maxSurge: lots}}\n  template:\n    spec:\n      \
         clusterName: capi-quickstart\n      version: '1.x'\n      infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: LocalMachineTemplate, name: t}\n",
    );
    assert!(!applied, "{text}");
    for field in [
        "spec.strategy.rollingUpdate.maxSurge",
        "spec.template.spec.version",
        "spec.template.spec.bootstrap.configRef",
    ] {
        assert!(text.contains(field), "{field} in {text}");
    }
    let out = kubectl(
        &kc,
        &[
            "patch",
            "localmachinetemplate",
            "capi-quickstart-md-0",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"template":{"spec":{"bootDelay":"5s"}}}}"#,
        ],
    );
    assert!(!out.status.success(), "templates are immutable");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("immutable"),
        "{out:?}"
    );

    // A rolling update of the infrastructure template: one Machine at a
    // time (maxSurge 1, maxUnavailable 0).
    let (applied, text) = apply_stdin(
        &kc,
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: LocalMachineTemplate\n\
         metadata: {name: capi-quickstart-md-0-v2, namespace: default}\n\
         spec:\n  template:\n    spec: {bootDelay: 1s, instanceType: local.large}\n",
    );
    assert!(applied, "{text}");
    ok(
        &kc,
        &[
            "patch",
            "md",
            "capi-quickstart-md-0",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"template":{"spec":{"infrastructureRef":{"name":"capi-quickstart-md-0-v2"}}}}}"#,
        ],
    );
    let (mut most, mut fewest) = (0, usize::MAX);
    let second = wait("the rollout to replace every Machine", || {
        let now: BTreeMap<String, (String, bool)> = machines(&kc)
            .into_iter()
            .filter(|(n, _)| n.starts_with("capi-quickstart-md-0"))
            .collect();
        let live = now.values().filter(|(_, d)| !d).count();
        let up = now.values().filter(|(p, d)| p == "Running" && !d).count();
        most = most.max(live);
        fewest = fewest.min(up);
        (now.len() == 3 && up == 3 && now.keys().all(|n| !first.contains(n)))
            .then(|| now.keys().cloned().collect::<Vec<_>>())
    });
    assert!(most <= 4, "maxSurge 1: at most 4 Machines, saw {most}");
    assert!(
        fewest >= 3,
        "maxUnavailable 0: never fewer than 3 Running, saw {fewest}"
    );
    for name in &second {
        let node = json(&kc, &["get", "node", name]);
        assert_eq!(
            s(&node, "/metadata/labels/node.kubernetes.io~1instance-type"),
            "local.large"
        );
    }

    // The MachineHealthCheck replaces a killed node...
    let mhc = std::fs::read_to_string(example("machinehealthcheck.yaml"))
        .unwrap()
        .replace("30s", "3s");
    let (applied, text) = apply_stdin(&kc, &mhc);
    assert!(applied, "{text}");
    let victim = second[0].clone();
    ok(
        &kc,
        &[
            "annotate",
            "node",
            &victim,
            "nodesim.trellis.dev/kubelet=stopped",
        ],
    );
    let third = wait("the killed node's Machine to be replaced", || {
        let now = machines(&kc);
        let live: Vec<String> = now
            .iter()
            .filter(|(n, (p, d))| n.starts_with("capi-quickstart-md-0") && p == "Running" && !d)
            .map(|(n, _)| n.clone())
            .collect();
        (!now.contains_key(&victim) && live.len() == 3).then_some(live)
    });
    let events = ok(&kc, &["get", "events"]);
    assert!(events.contains("MachineMarkedUnhealthy"), "{events}");

    // ...but not when more than maxUnhealthy (1) are down.
    for n in &third[..2] {
        ok(
            &kc,
            &["annotate", "node", n, "nodesim.trellis.dev/ready=false"],
        );
    }
    wait("remediation to be refused", || {
        let c = json(&kc, &["get", "mhc", "capi-quickstart-md-0"]);
        c["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "RemediationAllowed" && c["reason"] == "TooManyUnhealthy")
            .then_some(())
    });
    std::thread::sleep(Duration::from_secs(5));
    let now = machines(&kc);
    for n in &third {
        assert_eq!(now.get(n).map(|x| x.1), Some(false), "{n} is kept: {now:?}");
    }
    let m = json(&kc, &["get", "ma", &third[0]]);
    let hc = m["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "HealthCheckSucceeded")
        .cloned()
        .unwrap_or_default();
    assert_eq!(hc["reason"], "UnhealthyNode", "{m}");

    // Deleting the Cluster deletes everything.
    ok(
        &kc,
        &["delete", "cluster", "capi-quickstart", "--timeout=120s"],
    );
    wait("every Cluster API object, Node and VM to be gone", || {
        let left = ok(&kc, &["get", "cluster-api", "-A", "-o", "name"]);
        let nodes = items(&json(&kc, &["get", "nodes"]))
            .iter()
            .filter(|n| s(n, "/metadata/name").starts_with("capi-quickstart"))
            .count();
        let vms = items(&json(
            &kc,
            &[
                "get",
                "configmaps",
                "-A",
                "-l",
                "provider.trellis.dev/local-vm=true",
            ],
        ))
        .len();
        (left.trim().is_empty() && nodes == 0 && vms == 0).then_some(())
    });
    let history = watch.history();
    for name in first.iter().chain(&second) {
        let phases = &history[name];
        assert!(
            phases.ends_with(&["Deleting".to_string(), "Deleted".into()]),
            "{name}: {phases:?}"
        );
    }
}

#[test]
fn the_same_controllers_run_against_another_api_server() {
    if !have("kubectl") || !have("curl") {
        eprintln!("skipping: kubectl and curl are needed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let _server = start(data, &["--cluster-api"]);
    let kc = data.join("admin.kubeconfig");
    let mut cm = Command::new(env!("CARGO_BIN_EXE_trellis"))
        .arg("controller-manager")
        .arg("--control-kubeconfig")
        .arg(&kc)
        .args([
            "--leader-elect=false",
            "--metrics-listen",
            "127.0.0.1:0",
            "--cluster-api",
        ])
        .env("TRELLIS_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawning trellis controller-manager");
    ok(
        &kc,
        &[
            "apply",
            "-f",
            &example("cluster.yaml"),
            "-f",
            &example("machinedeployment.yaml"),
        ],
    );
    wait("3 Running machines", || {
        (running(&kc, "capi-quickstart-md-0") == 3).then_some(())
    });
    let cluster = json(&kc, &["get", "cluster", "capi-quickstart"]);
    assert_eq!(s(&cluster, "/status/phase"), "Provisioned");
    let _ = cm.kill();
    let _ = cm.wait();
}
