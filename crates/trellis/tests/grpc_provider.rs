//! End to end: `trellis up --local-provider=false --driver-listen …` runs
//! the machine controllers with no provider of its own, and `trellis
//! provider local` serves the `local` classes from a process of its own
//! over gRPC.
//!
//! * Machines created before any provider registers wait: phase
//!   CrashLoopBackOff (never Failed), `lastOperation` naming the missing
//!   provider with code `Unavailable`. Once the provider registers they
//!   become Running nodes; a scale-down deletes their VMs through it; the
//!   provider stops cleanly on SIGTERM.
//! * The provider process is SIGKILLed at random moments during rolling
//!   updates of a 50-machine deployment and restarted each time. A sampler
//!   checks that no machine ever has two VMs; at the end, the provider's VM
//!   records (its whole inventory) must match the machines one to one: no
//!   orphaned VM, no duplicated VM, every machine's providerID backed.
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
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(180);
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
    /// The machine-controller-manager's driver endpoint.
    driver_port: u16,
    _up: tokio::process::Child,
}

/// Starts `trellis up` (plain HTTP, in memory, no process kubelet) with the
/// in-process provider off and the driver endpoint on, and a client.
async fn start_up() -> Env {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (port, driver_port) = (free_port(), free_port());
    let log = std::fs::File::create(dir.path().join("up.log")).expect("the up log");
    let up = tokio::process::Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(["up", "--insecure-http", "--in-memory", "--no-kubelet"])
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--local-provider=false")
        .arg("--driver-listen")
        .arg(format!("127.0.0.1:{driver_port}"))
        .env("TRELLIS_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("spawning trellis up");
    let kubeconfig = dir.path().join("admin.kubeconfig");
    let deadline = Instant::now() + READY_TIMEOUT;
    while !(kubeconfig.exists() && http_status(port, "/readyz").await == Some(200)) {
        assert!(
            Instant::now() < deadline,
            "trellis up did not become ready:\n{}",
            log_tail(&dir.path().join("up.log"), 30)
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
        driver_port,
        _up: up,
    }
}

/// One `trellis provider local` process.
struct Provider {
    child: tokio::process::Child,
    log: PathBuf,
}

impl Env {
    fn spawn_provider(&self, n: usize) -> Provider {
        let log = self.dir.path().join(format!("provider-{n}.log"));
        let file = std::fs::File::create(&log).expect("the provider log");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_trellis"))
            .args(["provider", "local", "--mcm-endpoint"])
            .arg(format!("127.0.0.1:{}", self.driver_port))
            .arg("--control-kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--target-kubeconfig")
            .arg(&self.kubeconfig)
            .env("TRELLIS_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(file))
            .kill_on_drop(true)
            .spawn()
            .expect("spawning trellis provider local");
        Provider { child, log }
    }

    fn up_log(&self) -> String {
        log_tail(&self.dir.path().join("up.log"), 40)
    }
}

impl Provider {
    /// Waits until the provider says it registered.
    async fn registered(&mut self) -> Duration {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("polling the provider") {
                panic!(
                    "the provider exited before it registered ({status}):\n{}",
                    log_tail(&self.log, 40)
                );
            }
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if log.contains("registered with the machine-controller-manager") {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < READY_TIMEOUT,
                "the provider did not register:\n{}",
                log_tail(&self.log, 40)
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// SIGKILL, then reap; a provider that exited by itself is a failure.
    async fn kill(&mut self) {
        if let Some(status) = self.child.try_wait().expect("polling the provider") {
            panic!(
                "the provider exited on its own ({status}):\n{}",
                log_tail(&self.log, 40)
            );
        }
        self.child.start_kill().expect("SIGKILL");
        let _ = self.child.wait().await;
    }

    /// SIGTERM; it must exit cleanly.
    async fn stop(&mut self) {
        let pid = self.child.id().expect("a running provider");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("sending SIGTERM");
        assert!(status.success());
        let exit = tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("the provider stops on SIGTERM")
            .expect("reaping the provider");
        assert!(
            exit.success(),
            "unclean exit {exit}:\n{}",
            log_tail(&self.log, 20)
        );
    }
}

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

async fn setup(env: &Env, replicas: usize) {
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
               "spec": {"replicas": replicas,
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

/// The provider's whole inventory: every VM record.
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

fn settled(ms: &[Machine], class: &str, replicas: usize) -> bool {
    ms.len() == replicas
        && ms.iter().all(|m| {
            m.metadata.deletion_timestamp.is_none()
                && m.spec.class.name == class
                && m.phase() == Some(MachinePhase::Running)
        })
}

async fn set_deployment(env: &Env, patch: serde_json::Value) {
    Api::<MachineDeployment>::namespaced(env.client.clone(), NS)
        .patch("web", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patching the deployment");
}

async fn set_class(env: &Env, class: &str) {
    set_deployment(
        env,
        json!({"spec": {"template": {"spec": {"class": {"name": class}}}}}),
    )
    .await;
}

/// Everything wrong with the end state, empty when it is right.
async fn end_state_problems(env: &Env, class: &str, replicas: usize) -> Vec<String> {
    let ms = machines(env).await;
    let vms = vms(env).await;
    let nodes = Api::<Node>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("listing nodes")
        .items;
    let mut problems = Vec::new();
    if !settled(&ms, class, replicas) {
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
            "want {replicas} Running machines of {class}, have {}: {summary:?}",
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
    if vms.len() != replicas {
        problems.push(format!(
            "want {replicas} VMs, the provider has {}",
            vms.len()
        ));
    }
    let machine_nodes: BTreeSet<&str> = ms
        .iter()
        .filter_map(|m| m.metadata.labels.as_ref()?.get(labels::NODE))
        .map(String::as_str)
        .collect();
    for n in &nodes {
        let name = n.metadata.name.as_deref().unwrap_or("");
        // The host's own Node (the process kubelet) is off here, but say
        // so rather than assume it.
        if !machine_nodes.contains(name) {
            problems.push(format!("node {name} belongs to no machine"));
        }
    }
    problems
}

async fn converge(env: &Env, provider: &Provider, class: &str, replicas: usize, seed: u64) {
    let deadline = Instant::now() + CONVERGE_TIMEOUT;
    loop {
        let problems = end_state_problems(env, class, replicas).await;
        if problems.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no convergence within {CONVERGE_TIMEOUT:?} (seed {seed}):\n{}\nprovider log:\n{}\nup log:\n{}",
            problems.join("\n"),
            log_tail(&provider.log, 30),
            env.up_log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machines_wait_for_the_provider_then_run_through_it() {
    let env = start_up().await;
    setup(&env, 3).await;

    // No provider yet: the machines wait, saying why, and do not fail.
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let ms = machines(&env).await;
        assert!(
            ms.iter().all(|m| m.phase() != Some(MachinePhase::Failed)),
            "a machine failed while waiting for its provider"
        );
        let waiting = ms
            .iter()
            .filter(|m| {
                m.status.as_ref().is_some_and(|s| {
                    let op = &s.last_operation;
                    op.description
                        .contains("no provider \"local\" is registered")
                        && op.error_code == "Unavailable"
                })
            })
            .count();
        if ms.len() == 3 && waiting == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "machines never reported the missing provider: {:?}\n{}",
            ms.iter()
                .map(|m| (m.metadata.name.clone(), m.status.clone()))
                .collect::<Vec<_>>(),
            env.up_log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(vms(&env).await.is_empty());

    // The provider registers: the machines run on its VMs.
    let mut provider = env.spawn_provider(0);
    provider.registered().await;
    converge(&env, &provider, CLASSES[0], 3, 0).await;

    // A scale-down deletes VMs through it.
    set_deployment(&env, json!({"spec": {"replicas": 1}})).await;
    converge(&env, &provider, CLASSES[0], 1, 0).await;
    provider.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_killed_during_a_50_machine_rollout_converges() {
    const MACHINES: usize = 50;
    const KILLS: usize = 4;
    let seed = std::env::var("TRELLIS_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    eprintln!("TRELLIS_CRASH_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let test_start = Instant::now();
    let env = start_up().await;
    setup(&env, MACHINES).await;

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

    let mut runs = 0;
    let mut provider = env.spawn_provider(runs);
    provider.registered().await;
    converge(&env, &provider, CLASSES[0], MACHINES, seed).await;
    eprintln!(
        "{MACHINES} machines Running after {:?}",
        test_start.elapsed()
    );

    // Roll to the other class and kill the provider at random moments,
    // starting the next rollout whenever one finishes so that every kill
    // lands in one.
    let mut class = 1;
    set_class(&env, CLASSES[class]).await;
    let mut rollouts = 1;
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(rng.random_range(500..3000))).await;
        provider.kill().await;
        // Down for a while: calls fail over to Unavailable and are retried.
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..2000))).await;
        if settled(&machines(&env).await, CLASSES[class], MACHINES) {
            class = 1 - class;
            set_class(&env, CLASSES[class]).await;
            rollouts += 1;
        }
        runs += 1;
        provider = env.spawn_provider(runs);
        provider.registered().await;
    }
    eprintln!("{KILLS} kills over {rollouts} rollouts");

    converge(&env, &provider, CLASSES[class], MACHINES, seed).await;
    eprintln!("converged after {:?}", test_start.elapsed());
    sampler.abort();
    let violations = violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "seed {seed}: {violations:?}");
    provider.stop().await;
}
