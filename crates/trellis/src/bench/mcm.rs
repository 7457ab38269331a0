//! `trellis bench mcm`: the machine controllers at scale. A `trellis server`
//! and a `trellis controller-manager` run as child processes (so each one's
//! memory and CPU are its own); the bench creates one MachineDeployment of N
//! machines with boot delay 0, times it to all Running, then rolls it to a
//! second class and times the rolling update, sampling the machines from a
//! watch cache every few milliseconds to check the surge and availability
//! bounds throughout. API requests are counted by the server
//! (`apiserver_request_total` on its `/metrics`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use api::{Machine, MachineClass, MachineDeployment, MachinePhase};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "default";
/// How often the invariants are sampled.
const SAMPLE: Duration = Duration::from_millis(20);
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);

pub(super) fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// `GET path` over plain HTTP/1.0: status and body.
pub(super) async fn http_get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

pub(super) async fn wait_ready(
    port: u16,
    what: &str,
    child: &mut tokio::process::Child,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("{what} exited ({status}) before it was ready");
        }
        if matches!(http_get(port, "/readyz").await, Ok((200, _))) {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{what} did not become ready");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The server's request counters: (verb, resource) → count.
pub(super) async fn request_counts(port: u16) -> anyhow::Result<BTreeMap<(String, String), u64>> {
    let (_, body) = http_get(port, "/metrics").await?;
    let mut out = BTreeMap::new();
    for line in body.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{verb=\"") else {
            continue;
        };
        let (verb, rest) = rest.split_once("\",resource=\"").unwrap_or_default();
        let (resource, n) = rest.split_once("\"} ").unwrap_or_default();
        out.insert((verb.to_string(), resource.to_string()), n.parse()?);
    }
    Ok(out)
}

pub(super) fn delta(
    after: &BTreeMap<(String, String), u64>,
    before: &BTreeMap<(String, String), u64>,
) -> BTreeMap<(String, String), u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// VmRSS of a process, MiB.
pub(super) fn rss_mib(pid: u32) -> f64 {
    super::rss_of(pid)
}

/// User + system CPU seconds of a process.
pub(super) fn cpu_secs(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    // USER_HZ is 100 on every Linux this runs on.
    ticks / 100.0
}

/// What one sample of the machine cache shows.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Sample {
    /// Machine objects, including those being deleted.
    pub(super) objects: usize,
    /// Machines not being deleted.
    pub(super) live: usize,
    /// Live machines in phase Running.
    pub(super) running: usize,
    /// Live Running machines of the target class.
    pub(super) running_target: usize,
}

fn sample(store: &Store<Machine>, class: &str) -> Sample {
    let mut s = Sample::default();
    for m in store.state() {
        s.objects += 1;
        if m.metadata.deletion_timestamp.is_some() {
            continue;
        }
        s.live += 1;
        if m.phase() == Some(MachinePhase::Running) {
            s.running += 1;
            if m.spec.class.name == class {
                s.running_target += 1;
            }
        }
    }
    s
}

/// Extremes seen by the sampler during one phase.
#[derive(Clone, Copy, Debug)]
pub(super) struct Extremes {
    pub(super) max_objects: usize,
    pub(super) max_live: usize,
    pub(super) min_running: usize,
    pub(super) samples: u64,
}

/// Waits until `done` holds for a sample, tracking extremes meanwhile.
/// Past [`PHASE_TIMEOUT`] it fails, or with `tolerate_timeout` returns
/// what it saw with `false` (so a size's figures are still reported).
async fn phase(
    store: &Store<Machine>,
    class: &str,
    done: impl Fn(&Sample) -> bool,
    tolerate_timeout: bool,
) -> anyhow::Result<(Duration, Extremes, bool)> {
    track(
        || sample(store, class),
        done,
        PHASE_TIMEOUT,
        tolerate_timeout,
    )
    .await
}

/// Samples every [`SAMPLE`] until `done` holds, tracking extremes; past
/// `timeout` it fails, or with `tolerate_timeout` returns what it saw with
/// `false`. Shared by the MCM and Cluster API benches, each sampling its
/// own Machine kind.
pub(super) async fn track(
    mut sample: impl FnMut() -> Sample,
    done: impl Fn(&Sample) -> bool,
    timeout: Duration,
    tolerate_timeout: bool,
) -> anyhow::Result<(Duration, Extremes, bool)> {
    let start = Instant::now();
    let mut ex = Extremes {
        max_objects: 0,
        max_live: 0,
        min_running: usize::MAX,
        samples: 0,
    };
    loop {
        let s = sample();
        ex.max_objects = ex.max_objects.max(s.objects);
        ex.max_live = ex.max_live.max(s.live);
        ex.min_running = ex.min_running.min(s.running);
        ex.samples += 1;
        if done(&s) {
            return Ok((start.elapsed(), ex, true));
        }
        if start.elapsed() >= timeout {
            anyhow::ensure!(tolerate_timeout, "no convergence within {timeout:?}: {s:?}");
            println!("| no convergence within {timeout:?} | {s:?} |");
            return Ok((start.elapsed(), ex, false));
        }
        tokio::time::sleep(SAMPLE).await;
    }
}

/// Parses a rolling-update bound ("10%" or a count) against `replicas`,
/// rounding as upstream does (surge up, unavailability down).
pub(super) fn bound(s: &str, replicas: usize, round_up: bool) -> anyhow::Result<usize> {
    match s.strip_suffix('%') {
        Some(p) => {
            let p: f64 = p.parse().context("a percentage")?;
            let v = replicas as f64 * p / 100.0;
            Ok(if round_up { v.ceil() } else { v.floor() } as usize)
        }
        None => Ok(s.parse()?),
    }
}

pub(super) fn per_machine_table(
    counts: &BTreeMap<(String, String), u64>,
    machines: usize,
) -> String {
    let mut by_resource: BTreeMap<&str, BTreeMap<&str, u64>> = BTreeMap::new();
    for ((verb, res), n) in counts {
        *by_resource
            .entry(res.as_str())
            .or_default()
            .entry(verb.as_str())
            .or_default() += n;
    }
    let mut out = String::new();
    for (res, verbs) in by_resource {
        let total: u64 = verbs.values().sum();
        let verbs: Vec<String> = verbs.iter().map(|(v, n)| format!("{v} {n}")).collect();
        out.push_str(&format!(
            "| {res} | {:.2} | {} |\n",
            total as f64 / machines as f64,
            verbs.join(", ")
        ));
    }
    out
}

/// What one size of the bench measured, for the summary across sizes.
struct Summary {
    machines: usize,
    up: Duration,
    cm_cpu_up: f64,
    cm_rss_idle: f64,
    cm_rss_up: f64,
    srv_rss_idle: f64,
    srv_rss_up: f64,
    roll: Option<Duration>,
    /// The rollout converged within [`PHASE_TIMEOUT`].
    roll_done: bool,
    cm_cpu_roll: f64,
    invariants_ok: bool,
}

/// Runs the bench once per size in `sizes` (each with its own server and
/// controller-manager), then prints the curve: time to all Running, the
/// controller-manager's CPU and memory per machine at each size.
pub async fn run(
    sizes: Vec<usize>,
    max_surge: String,
    max_unavailable: String,
    in_memory: bool,
    grpc: bool,
    rollout: bool,
) -> anyhow::Result<()> {
    let mut summaries = Vec::new();
    for &machines in &sizes {
        println!("### {machines} machines");
        println!();
        let s = run_one(
            machines,
            &max_surge,
            &max_unavailable,
            in_memory,
            grpc,
            rollout,
        )
        .await?;
        println!();
        summaries.push(s);
    }
    println!("### Per size");
    println!();
    println!(
        "| machines | to all Running | cm CPU | cm CPU per machine | cm RSS (idle → Running) | cm RSS per machine | server RSS (idle → Running) | server RSS per machine | rollout (maxSurge {max_surge}) | cm CPU per machine replaced | invariants |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for s in &summaries {
        let n = s.machines as f64;
        println!(
            "| {} | {:.2} s | {:.1} s | {:.2} ms | {:.0} → {:.0} MiB | {:.1} KiB | {:.0} → {:.0} MiB | {:.1} KiB | {} | {} | {} |",
            s.machines,
            s.up.as_secs_f64(),
            s.cm_cpu_up,
            s.cm_cpu_up * 1000.0 / n,
            s.cm_rss_idle,
            s.cm_rss_up,
            (s.cm_rss_up - s.cm_rss_idle) * 1024.0 / n,
            s.srv_rss_idle,
            s.srv_rss_up,
            (s.srv_rss_up - s.srv_rss_idle) * 1024.0 / n,
            s.roll.map_or("—".to_string(), |d| match s.roll_done {
                true => format!("{:.2} s", d.as_secs_f64()),
                false => format!("not done in {:.0} s", d.as_secs_f64()),
            }),
            s.roll.map_or("—".to_string(), |_| format!(
                "{:.2} ms",
                s.cm_cpu_roll * 1000.0 / n
            )),
            if s.roll.is_none() {
                "—"
            } else if s.invariants_ok {
                "ok"
            } else {
                "VIOLATED"
            },
        );
    }
    anyhow::ensure!(
        summaries.iter().all(|s| s.invariants_ok),
        "a rollout invariant was violated"
    );
    anyhow::ensure!(
        summaries.iter().all(|s| s.roll_done),
        "a rollout did not finish within {PHASE_TIMEOUT:?}"
    );
    Ok(())
}

async fn run_one(
    machines: usize,
    max_surge: &str,
    max_unavailable: &str,
    in_memory: bool,
    grpc: bool,
    rollout: bool,
) -> anyhow::Result<Summary> {
    let dir = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    let server_port = free_port()?;
    let mut server_cmd = tokio::process::Command::new(&exe);
    server_cmd
        .args(["server", "--insecure-http", "--listen"])
        .arg(format!("127.0.0.1:{server_port}"))
        .arg("--data-dir")
        .arg(dir.path());
    if in_memory {
        server_cmd.arg("--in-memory");
    }
    let mut server = server_cmd
        .env("TRELLIS_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    wait_ready(server_port, "the server", &mut server).await?;
    let server_pid = server.id().unwrap_or(0);
    let kubeconfig = dir.path().join("admin.kubeconfig");
    let client = crate::controller_manager::client_from(&kubeconfig).await?;

    let cm_port = free_port()?;
    let driver_port = if grpc { Some(free_port()?) } else { None };
    let mut cm = start_manager(&exe, &kubeconfig, cm_port, dir.path(), driver_port)?;
    wait_ready(cm_port, "the controller-manager", &mut cm).await?;
    let cm_pid = cm.id().unwrap_or(0);
    let mut provider = match driver_port {
        Some(port) => Some(start_provider(&exe, &kubeconfig, port, dir.path())?),
        None => None,
    };
    let provider_pid = provider.as_ref().and_then(|p| p.id()).unwrap_or(0);
    let provider_cpu = || if grpc { cpu_secs(provider_pid) } else { 0.0 };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cm_rss_idle = rss_mib(cm_pid);
    let srv_rss_idle = rss_mib(server_pid);

    create_classes(&client).await?;
    let (store, watching) = watch_machines(&client).await?;
    let surge = bound(max_surge, machines, true)?;
    let unavailable = bound(max_unavailable, machines, false)?;

    println!("| measurement | result |");
    println!("|---|---|");

    // Phase 1: zero to N Running.
    let before = request_counts(server_port).await?;
    let (cm_cpu0, srv_cpu0, pr_cpu0) = (cpu_secs(cm_pid), cpu_secs(server_pid), provider_cpu());
    create_deployment(&client, machines, max_surge, max_unavailable).await?;
    let (up_time, up_ex, _) =
        phase(&store, "class-a", |s| s.running_target == machines, false).await?;
    let after_up = request_counts(server_port).await?;
    let (cm_cpu1, srv_cpu1, pr_cpu1) = (cpu_secs(cm_pid), cpu_secs(server_pid), provider_cpu());
    let up_requests = delta(&after_up, &before);
    // Let the last status writes and first lease renewals settle.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cm_rss_up = rss_mib(cm_pid);
    let srv_rss_up = rss_mib(server_pid);

    println!(
        "| {machines} machines from zero to all Running (boot delay 0) | {:.2} s |",
        up_time.as_secs_f64()
    );
    if !rollout {
        watching.store(false, Ordering::Relaxed);
        cm.kill().await?;
        if let Some(p) = provider.as_mut() {
            p.kill().await?;
        }
        server.kill().await?;
        return Ok(Summary {
            machines,
            up: up_time,
            cm_cpu_up: cm_cpu1 - cm_cpu0,
            cm_rss_idle,
            cm_rss_up,
            srv_rss_idle,
            srv_rss_up,
            roll: None,
            roll_done: true,
            cm_cpu_roll: 0.0,
            invariants_ok: true,
        });
    }

    // Phase 2: the rolling update to class-b.
    let before_roll = request_counts(server_port).await?;
    let (cm_cpu2, srv_cpu2, pr_cpu2) = (cpu_secs(cm_pid), cpu_secs(server_pid), provider_cpu());
    Api::<MachineDeployment>::namespaced(client.clone(), NS)
        .patch(
            "bench",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"class": {"name": "class-b"}}}}})),
        )
        .await?;
    let (roll_time, roll_ex, roll_done) = phase(
        &store,
        "class-b",
        |s| s.running_target == machines && s.objects == machines,
        true,
    )
    .await?;
    let after_roll = request_counts(server_port).await?;
    let (cm_cpu3, srv_cpu3, pr_cpu3) = (cpu_secs(cm_pid), cpu_secs(server_pid), provider_cpu());
    let roll_requests = delta(&after_roll, &before_roll);
    let cm_rss_roll = rss_mib(cm_pid);
    watching.store(false, Ordering::Relaxed);

    let up_total: u64 = up_requests.values().sum();
    let roll_total: u64 = roll_requests.values().sum();
    let surge_ok = roll_ex.max_live <= machines + surge;
    let avail_ok = roll_ex.min_running >= machines - unavailable;
    println!(
        "| rolling update of {machines} machines, maxSurge {max_surge}, maxUnavailable {max_unavailable} | {:.2} s |",
        roll_time.as_secs_f64()
    );
    println!(
        "| rollout: most live machines (bound {}) / most objects incl. deleting | {} {} / {} |",
        machines + surge,
        roll_ex.max_live,
        if surge_ok { "ok" } else { "VIOLATED" },
        roll_ex.max_objects
    );
    println!(
        "| rollout: fewest Running machines (bound {}) | {} {} |",
        machines - unavailable,
        roll_ex.min_running,
        if avail_ok { "ok" } else { "VIOLATED" }
    );
    println!(
        "| samples (every {} ms): scale-up / rollout | {} / {} |",
        SAMPLE.as_millis(),
        up_ex.samples,
        roll_ex.samples
    );
    println!(
        "| controller-manager RSS: idle / {machines} Running / after the rollout | {cm_rss_idle:.0} / {cm_rss_up:.0} / {cm_rss_roll:.0} MiB |"
    );
    println!(
        "| controller-manager RSS per 1,000 machines (Running − idle) | {:.1} MiB |",
        (cm_rss_up - cm_rss_idle) * 1000.0 / machines as f64
    );
    println!("| server RSS with {machines} machines and nodes | {srv_rss_up:.0} MiB |");
    println!(
        "| CPU seconds, controller-manager / server: scale-up | {:.1} / {:.1} |",
        cm_cpu1 - cm_cpu0,
        srv_cpu1 - srv_cpu0
    );
    println!(
        "| CPU seconds, controller-manager / server: rollout | {:.1} / {:.1} |",
        cm_cpu3 - cm_cpu2,
        srv_cpu3 - srv_cpu2
    );
    if grpc {
        println!(
            "| CPU seconds, provider process (over gRPC): scale-up / rollout | {:.1} / {:.1} |",
            pr_cpu1 - pr_cpu0,
            pr_cpu3 - pr_cpu2
        );
        println!(
            "| provider RSS after the rollout | {:.0} MiB |",
            rss_mib(provider_pid)
        );
    }
    println!(
        "| API requests per machine created: scale-up / rollout | {:.1} / {:.1} |",
        up_total as f64 / machines as f64,
        roll_total as f64 / machines as f64
    );
    println!();
    println!("API requests per machine during the scale-up, by resource:");
    println!();
    println!("| resource | per machine | by verb (total) |");
    println!("|---|---|---|");
    print!("{}", per_machine_table(&up_requests, machines));
    println!();
    println!("During the rollout (per machine replaced):");
    println!();
    println!("| resource | per machine | by verb (total) |");
    println!("|---|---|---|");
    print!("{}", per_machine_table(&roll_requests, machines));

    cm.kill().await?;
    if let Some(p) = provider.as_mut() {
        p.kill().await?;
    }
    server.kill().await?;
    Ok(Summary {
        machines,
        up: up_time,
        cm_cpu_up: cm_cpu1 - cm_cpu0,
        cm_rss_idle,
        cm_rss_up,
        srv_rss_idle,
        srv_rss_up,
        roll: Some(roll_time),
        roll_done,
        cm_cpu_roll: cm_cpu3 - cm_cpu2,
        invariants_ok: surge_ok && avail_ok,
    })
}

fn start_manager(
    exe: &Path,
    kubeconfig: &Path,
    port: u16,
    dir: &Path,
    driver_port: Option<u16>,
) -> anyhow::Result<tokio::process::Child> {
    let log = std::fs::File::create(dir.join("controller-manager.log"))?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("controller-manager")
        .arg("--control-kubeconfig")
        .arg(kubeconfig)
        .args(["--leader-elect=false", "--metrics-listen"])
        .arg(format!("127.0.0.1:{port}"));
    if let Some(driver_port) = driver_port {
        cmd.arg(format!("--driver-listen=127.0.0.1:{driver_port}"))
            .arg("--local-provider=false");
    }
    Ok(cmd
        .env("TRELLIS_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()?)
}

/// `trellis provider local`, connecting to the controller-manager's
/// driver endpoint.
fn start_provider(
    exe: &Path,
    kubeconfig: &Path,
    driver_port: u16,
    dir: &Path,
) -> anyhow::Result<tokio::process::Child> {
    let log = std::fs::File::create(dir.join("provider.log"))?;
    Ok(tokio::process::Command::new(exe)
        .args(["provider", "local", "--mcm-endpoint"])
        .arg(format!("127.0.0.1:{driver_port}"))
        .arg("--control-kubeconfig")
        .arg(kubeconfig)
        .env("TRELLIS_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()?)
}

async fn create_classes(client: &Client) -> anyhow::Result<()> {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "bench"},
        "stringData": {"userData": "#cloud-config\n"}
    }))?;
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await?;
    for name in ["class-a", "class-b"] {
        let class: MachineClass = serde_json::from_value(json!({
            "metadata": {"name": name},
            "provider": "local",
            "providerSpec": {"bootDelay": "0s"},
            "secretRef": {"name": "bench", "namespace": NS}
        }))?;
        Api::<MachineClass>::namespaced(client.clone(), NS)
            .create(&PostParams::default(), &class)
            .await?;
    }
    Ok(())
}

async fn create_deployment(
    client: &Client,
    replicas: usize,
    max_surge: &str,
    max_unavailable: &str,
) -> anyhow::Result<()> {
    let int_or_str = |s: &str| match s.parse::<i64>() {
        Ok(n) => json!(n),
        Err(_) => json!(s),
    };
    let md: MachineDeployment = serde_json::from_value(json!({
        "metadata": {"name": "bench"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"name": "bench"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxSurge": int_or_str(max_surge),
                "maxUnavailable": int_or_str(max_unavailable)}},
            "template": {
                "metadata": {"labels": {"name": "bench"}},
                "spec": {"class": {"kind": "MachineClass", "name": "class-a"}}
            }
        }
    }))?;
    Api::<MachineDeployment>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &md)
        .await?;
    Ok(())
}

/// A watch cache of the machines, kept until `watching` turns false.
async fn watch_machines(client: &Client) -> anyhow::Result<(Store<Machine>, Arc<AtomicBool>)> {
    let (store, writer) = reflector::store::<Machine>();
    let api: Api<Machine> = Api::namespaced(client.clone(), NS);
    let watching = Arc::new(AtomicBool::new(true));
    let flag = watching.clone();
    // Watch errors are retried by the backoff; the samples only read the
    // cache.
    tokio::spawn(
        watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .take_while(move |_| futures::future::ready(flag.load(Ordering::Relaxed)))
            .for_each(|_| futures::future::ready(())),
    );
    store.wait_until_ready().await?;
    Ok((store, watching))
}
