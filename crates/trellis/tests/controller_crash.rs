//! Crash test of the real `trellis controller-manager` process: one
//! `trellis server` stays up while the controller-manager (controllers,
//! local provider and simulated kubelets in one process) is SIGKILLed at 20
//! random moments during rolling updates of a 50-machine deployment and
//! restarted each time, with leader election on (short lease), so every
//! restart also takes the lease over from a dead holder.
//!
//! While it runs, a sampler checks that no machine ever has two VMs. At the
//! end, after a last controller-manager has converged and stopped cleanly on
//! SIGTERM, the test asserts: exactly 50 Running machines of the last
//! rollout's class; no orphaned VM (every VM record in the local provider's
//! inventory names an existing machine whose providerID is that VM's); no
//! duplicated VM (one VM per machine, and every machine's providerID has
//! its VM); and every Node belongs to a machine.
//!
//! `TRELLIS_CRASH_SEED=<n>` replays the kill moments of a run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::{Machine, MachineClass, MachineDeployment, MachinePhase, labels};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use provider_local::inventory::{LABEL_VM, VmRecord};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "default";
const MACHINES: usize = 50;
const KILLS: usize = 20;
/// A controller-manager runs for a random time in this range after it
/// became ready (0: killed right as its controllers start).
const UPTIME_MS: std::ops::Range<u64> = 0..2500;
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(120);
const CLASSES: [&str; 2] = ["class-a", "class-b"];

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding an ephemeral port");
    l.local_addr().expect("local address").port()
}

fn log_tail(path: &Path, lines: usize) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = s.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The HTTP status of `GET path` on a plain-HTTP listener, if it answers.
async fn http_status(port: u16, path: &str) -> Option<u16> {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
            .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(2), io)
        .await
        .ok()?
        .ok()?;
    String::from_utf8_lossy(&buf)
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

struct Env {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    client: kube::Client,
    _server: tokio::process::Child,
}

/// Starts `trellis server` (plain HTTP, in memory: this test is about the
/// controllers, not the store) and a client from the kubeconfig it writes.
async fn start_server() -> Env {
    let dir = tempfile::tempdir().expect("a temp dir");
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("server.log")).expect("the server log");
    let server = tokio::process::Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(["server", "--insecure-http", "--in-memory", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(dir.path())
        .env("TRELLIS_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("spawning trellis server");
    let kubeconfig = dir.path().join("admin.kubeconfig");
    let deadline = Instant::now() + READY_TIMEOUT;
    while !(kubeconfig.exists() && http_status(port, "/readyz").await == Some(200)) {
        assert!(
            Instant::now() < deadline,
            "the server did not become ready:\n{}",
            log_tail(&dir.path().join("server.log"), 30)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).expect("reading the kubeconfig");
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("loading the kubeconfig");
    config.default_retry = false;
    let client = kube::Client::try_from(config).expect("a client");
    Env {
        dir,
        kubeconfig,
        client,
        _server: server,
    }
}

/// One controller-manager process.
struct Manager {
    child: tokio::process::Child,
    port: u16,
    log: PathBuf,
}

impl Env {
    async fn spawn_manager(&self, n: usize) -> Manager {
        let port = free_port();
        let log = self.dir.path().join(format!("cm-{n}.log"));
        let file = std::fs::File::create(&log).expect("the controller-manager log");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_trellis"))
            .arg("controller-manager")
            .arg("--control-kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--target-kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--namespace", NS, "--leader-elect=true"])
            // A short lease: each restart waits for the killed holder's
            // lease to run out, 20 times over.
            .args(["--leader-elect-lease-duration", "2s"])
            .args(["--leader-elect-renew-deadline", "1500ms"])
            .args(["--leader-elect-retry-period", "250ms"])
            .arg("--metrics-listen")
            .arg(format!("127.0.0.1:{port}"))
            .env("TRELLIS_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(file))
            .kill_on_drop(true)
            .spawn()
            .expect("spawning trellis controller-manager");
        Manager { child, port, log }
    }
}

impl Manager {
    /// Waits until the controllers run (lease held, caches synced).
    async fn ready(&mut self) -> Duration {
        let start = Instant::now();
        loop {
            if let Some(status) = self
                .child
                .try_wait()
                .expect("polling the controller-manager")
            {
                panic!(
                    "the controller-manager exited before it was ready ({status}):\n{}",
                    log_tail(&self.log, 40)
                );
            }
            if http_status(self.port, "/readyz").await == Some(200) {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < READY_TIMEOUT,
                "the controller-manager did not become ready:\n{}",
                log_tail(&self.log, 40)
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// SIGKILL, then reap. A process that already exited on its own is a
    /// failure (it must run until killed).
    async fn kill(&mut self) {
        if let Some(status) = self
            .child
            .try_wait()
            .expect("polling the controller-manager")
        {
            panic!(
                "the controller-manager exited on its own ({status}):\n{}",
                log_tail(&self.log, 40)
            );
        }
        self.child.start_kill().expect("SIGKILL");
        let _ = self.child.wait().await;
    }
}

/// Creates `obj` through the typed API of `K`.
async fn create<K>(env: &Env, obj: serde_json::Value)
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).expect("a valid object");
    Api::<K>::namespaced(env.client.clone(), NS)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {obj:?}: {e}"));
}

async fn setup(env: &Env) {
    create::<Secret>(
        env,
        json!({"metadata": {"name": "local"}, "stringData": {"userData": "#cloud-config\n"}}),
    )
    .await;
    for class in CLASSES {
        create::<MachineClass>(
            env,
            json!({"metadata": {"name": class}, "provider": "local",
                   "providerSpec": {"bootDelay": "200ms"},
                   "secretRef": {"name": "local", "namespace": NS}}),
        )
        .await;
    }
    create::<MachineDeployment>(
        env,
        json!({"metadata": {"name": "web"},
               "spec": {"replicas": MACHINES,
                        "selector": {"matchLabels": {"name": "web"}},
                        "strategy": {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxSurge": "10%", "maxUnavailable": 0}},
                        "template": {"metadata": {"labels": {"name": "web"}},
                                     "spec": {"class": {"kind": "MachineClass", "name": CLASSES[0]}}}}}),
    )
    .await;
}

async fn machines(env: &Env) -> Vec<Machine> {
    Api::<Machine>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("listing machines")
        .items
}

async fn vms(env: &Env) -> Vec<VmRecord> {
    Api::<ConfigMap>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default().labels(&format!("{LABEL_VM}=true")))
        .await
        .expect("listing VM records")
        .items
        .iter()
        .map(|cm| VmRecord::from_config_map(cm).expect("a readable VM record"))
        .collect()
}

/// Machine names with more than one VM.
fn duplicated(vms: &[VmRecord]) -> Vec<String> {
    let mut per_machine: BTreeMap<&str, usize> = BTreeMap::new();
    for vm in vms {
        *per_machine.entry(&vm.machine_name).or_default() += 1;
    }
    per_machine
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(m, _)| m.to_string())
        .collect()
}

/// Whether the deployment has settled on `class`: exactly the desired
/// machines, all Running on it, none deleting.
fn settled(ms: &[Machine], class: &str) -> bool {
    ms.len() == MACHINES
        && ms.iter().all(|m| {
            m.metadata.deletion_timestamp.is_none()
                && m.spec.class.name == class
                && m.phase() == Some(MachinePhase::Running)
        })
}

async fn set_class(env: &Env, class: &str) {
    Api::<MachineDeployment>::namespaced(env.client.clone(), NS)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"class": {"name": class}}}}})),
        )
        .await
        .expect("changing the deployment's class");
}

/// Everything wrong with the end state, empty when it is right.
async fn end_state_problems(env: &Env, class: &str) -> Vec<String> {
    let ms = machines(env).await;
    let vms = vms(env).await;
    let nodes = Api::<Node>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("listing nodes")
        .items;
    let mut problems = Vec::new();
    if !settled(&ms, class) {
        let summary: Vec<String> = ms
            .iter()
            .map(|m| {
                format!(
                    "{} {}/{:?}{}",
                    m.metadata.name.as_deref().unwrap_or(""),
                    m.spec.class.name,
                    m.phase(),
                    if m.metadata.deletion_timestamp.is_some() {
                        " deleting"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        problems.push(format!(
            "want {MACHINES} Running machines of {class}, have {}: {summary:?}",
            ms.len()
        ));
    }
    let by_name: BTreeMap<&str, &Machine> = ms
        .iter()
        .map(|m| (m.metadata.name.as_deref().unwrap_or(""), m))
        .collect();
    for vm in &vms {
        match by_name.get(vm.machine_name.as_str()) {
            None => problems.push(format!(
                "orphaned VM {} of machine {} (no such machine)",
                vm.provider_id, vm.machine_name
            )),
            Some(m) if m.spec.provider_id != vm.provider_id => problems.push(format!(
                "orphaned VM {} of machine {} (whose providerID is {:?})",
                vm.provider_id, vm.machine_name, m.spec.provider_id
            )),
            Some(_) => {}
        }
    }
    for name in duplicated(&vms) {
        problems.push(format!("machine {name} has more than one VM"));
    }
    let vm_ids: BTreeSet<&str> = vms.iter().map(|v| v.provider_id.as_str()).collect();
    for m in &ms {
        match m.spec.provider_id.as_str() {
            id if vm_ids.contains(id) => {}
            other => problems.push(format!(
                "machine {} has providerID {other:?} with no VM",
                m.metadata.name.as_deref().unwrap_or("")
            )),
        }
    }
    let machine_nodes: BTreeSet<&str> = ms
        .iter()
        .filter_map(|m| m.metadata.labels.as_ref()?.get(labels::NODE))
        .map(String::as_str)
        .collect();
    for n in &nodes {
        let name = n.metadata.name.as_deref().unwrap_or("");
        if !machine_nodes.contains(name) {
            problems.push(format!("node {name} belongs to no machine"));
        }
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_manager_killed_20_times_during_rollouts_converges() {
    let test_start = Instant::now();
    let seed = std::env::var("TRELLIS_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    eprintln!("TRELLIS_CRASH_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let env = start_server().await;
    setup(&env).await;

    // The sampler: no machine may ever have two VMs.
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let sampler = {
        let client = env.client.clone();
        let violations = violations.clone();
        tokio::spawn(async move {
            let api: Api<ConfigMap> = Api::namespaced(client, NS);
            let lp = ListParams::default().labels(&format!("{LABEL_VM}=true"));
            loop {
                if let Ok(list) = api.list(&lp).await {
                    let vms: Vec<VmRecord> = list
                        .items
                        .iter()
                        .filter_map(|cm| VmRecord::from_config_map(cm).ok())
                        .collect();
                    for name in duplicated(&vms) {
                        violations
                            .lock()
                            .unwrap()
                            .push(format!("machine {name} had two VMs at once"));
                    }
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };

    // The deployment's first 50 machines, with no kills.
    let mut runs = 0;
    let mut manager = env.spawn_manager(runs).await;
    manager.ready().await;
    let deadline = Instant::now() + CONVERGE_TIMEOUT;
    while !settled(&machines(&env).await, CLASSES[0]) {
        assert!(
            Instant::now() < deadline,
            "the first {MACHINES} machines never ran:\n{}",
            log_tail(&manager.log, 40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "{MACHINES} machines Running after {:?}",
        test_start.elapsed()
    );

    // Roll to the other class; kill the controller-manager at random
    // moments, and start the next rollout whenever one finishes so every
    // kill lands in one.
    let mut class = 1;
    set_class(&env, CLASSES[class]).await;
    let mut rollouts = 1;
    let mut restart_costs = Vec::new();
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(rng.random_range(UPTIME_MS))).await;
        manager.kill().await;
        if settled(&machines(&env).await, CLASSES[class]) {
            class = 1 - class;
            set_class(&env, CLASSES[class]).await;
            rollouts += 1;
        }
        runs += 1;
        manager = env.spawn_manager(runs).await;
        restart_costs.push(manager.ready().await);
    }
    let total: Duration = restart_costs.iter().sum();
    eprintln!(
        "{KILLS} kills over {rollouts} rollouts; restart to ready: mean {:?}, max {:?}",
        total / KILLS as u32,
        restart_costs.iter().max().copied().unwrap_or_default()
    );

    // The last controller-manager converges, then stops cleanly.
    let deadline = Instant::now() + CONVERGE_TIMEOUT;
    loop {
        let problems = end_state_problems(&env, CLASSES[class]).await;
        if problems.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no convergence within {CONVERGE_TIMEOUT:?} (seed {seed}):\n{}\nlog:\n{}",
            problems.join("\n"),
            log_tail(&manager.log, 40)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("converged after {:?}", test_start.elapsed());
    let pid = manager.child.id().expect("a running controller-manager") as i32;
    // kill(1) sends SIGTERM without unsafe FFI.
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("sending SIGTERM");
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(15), manager.child.wait())
        .await
        .expect("the controller-manager stops on SIGTERM")
        .expect("reaping the controller-manager");
    assert!(
        exit.success(),
        "unclean exit {exit}:\n{}",
        log_tail(&manager.log, 20)
    );
    sampler.abort();
    let problems = end_state_problems(&env, CLASSES[class]).await;
    assert!(
        problems.is_empty(),
        "after shutdown:\n{}",
        problems.join("\n")
    );
    let violations = violations.lock().unwrap().clone();
    assert!(
        violations.is_empty(),
        "seed {seed}:\n{}",
        violations.join("\n")
    );
    eprintln!("done in {:?}", test_start.elapsed());
}
