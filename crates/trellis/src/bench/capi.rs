//! `trellis bench capi`: Cluster API machines at scale, beside `bench mcm`'s
//! MCM figure for the same count. A `trellis server --cluster-api` and a
//! `trellis controller-manager --cluster-api` run as child processes; the
//! bench applies a Cluster with a LocalCluster, a TrellisConfigTemplate, a
//! LocalMachineTemplate (boot delay 0) and one MachineDeployment of N,
//! times it to all Machines Running, then rolls it to a second
//! infrastructure template and times the rolling update, sampling the
//! Machines from a watch cache to check the surge and availability bounds.
//! Each Machine is three objects here (Machine, TrellisConfig,
//! LocalMachine) plus a data Secret and a bootstrap token, where MCM has
//! one Machine.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use capi::{Machine, MachineDeployment};
use futures::StreamExt;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::mcm::{
    Extremes, Sample, bound, cpu_secs, delta, free_port, per_machine_table, request_counts,
    rss_mib, track, wait_ready,
};

const NS: &str = "default";
const PHASE_TIMEOUT: Duration = Duration::from_secs(900);

fn sample(store: &Store<Machine>, template: &str) -> Sample {
    let mut s = Sample::default();
    for m in store.state() {
        s.objects += 1;
        if m.metadata.deletion_timestamp.is_some() {
            continue;
        }
        s.live += 1;
        if m.status.as_ref().and_then(|st| st.phase.as_deref()) == Some("Running") {
            s.running += 1;
            let set =
                capi::meta::label(&m.metadata, capi::types::labels::SET_NAME).unwrap_or_default();
            if set.starts_with(template) || template.is_empty() {
                s.running_target += 1;
            }
        }
    }
    s
}

/// Samples the Machine cache until `done` holds (the target template
/// re-read each time), tracking extremes.
async fn phase(
    store: &Store<Machine>,
    done: impl Fn(&Sample) -> bool,
    target: impl Fn() -> String,
) -> anyhow::Result<(Duration, Extremes)> {
    let (took, ex, _) = track(|| sample(store, &target()), done, PHASE_TIMEOUT, false).await?;
    Ok((took, ex))
}

fn start_manager(
    exe: &Path,
    kubeconfig: &Path,
    port: u16,
    dir: &Path,
) -> anyhow::Result<tokio::process::Child> {
    let log = std::fs::File::create(dir.join("controller-manager.log"))?;
    Ok(tokio::process::Command::new(exe)
        .arg("controller-manager")
        .arg("--control-kubeconfig")
        .arg(kubeconfig)
        .args(["--leader-elect=false", "--cluster-api", "--metrics-listen"])
        .arg(format!("127.0.0.1:{port}"))
        .env("TRELLIS_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()?)
}

/// Creates one object from JSON.
async fn create(client: &Client, obj: Value) -> anyhow::Result<()> {
    let o: DynamicObject = serde_json::from_value(obj)?;
    let types = o.types.clone().unwrap_or_default();
    let (group, version) = types
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", &types.api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, &types.kind);
    let (ar, _) = kube::discovery::pinned_kind(client, &gvk).await?;
    Api::<DynamicObject>::namespaced_with(client.clone(), NS, &ar)
        .create(&PostParams::default(), &o)
        .await?;
    Ok(())
}

async fn create_objects(
    client: &Client,
    replicas: usize,
    max_surge: &str,
    max_unavailable: &str,
) -> anyhow::Result<()> {
    let int_or_str = |s: &str| match s.parse::<i64>() {
        Ok(n) => json!(n),
        Err(_) => json!(s),
    };
    create(client, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "bench"},
        "spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "LocalCluster", "name": "bench"}}
    }))
    .await?;
    create(
        client,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "LocalCluster",
            "metadata": {"name": "bench"}, "spec": {}
        }),
    )
    .await?;
    create(
        client,
        json!({
            "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "TrellisConfigTemplate",
            "metadata": {"name": "bench"}, "spec": {"template": {"spec": {}}}
        }),
    )
    .await?;
    for name in ["bench-a", "bench-b"] {
        create(client, json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "LocalMachineTemplate",
            "metadata": {"name": name}, "spec": {"template": {"spec": {"bootDelay": "0s"}}}
        }))
        .await?;
    }
    create(client, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
        "metadata": {"name": "bench"},
        "spec": {
            "clusterName": "bench",
            "replicas": replicas,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxSurge": int_or_str(max_surge), "maxUnavailable": int_or_str(max_unavailable)}},
            "template": {"spec": {
                "clusterName": "bench",
                "version": "v1.31.2",
                "bootstrap": {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "TrellisConfigTemplate", "name": "bench"}},
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "LocalMachineTemplate", "name": "bench-a"}
            }}
        }
    }))
    .await
}

async fn watch_machines(client: &Client) -> anyhow::Result<(Store<Machine>, Arc<AtomicBool>)> {
    let (store, writer) = reflector::store::<Machine>();
    let api: Api<Machine> = Api::namespaced(client.clone(), NS);
    let watching = Arc::new(AtomicBool::new(true));
    let flag = watching.clone();
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

/// The name of the MachineDeployment's newest MachineSet (the rollout's
/// target), once there is one other than `old`.
async fn newest_set(client: &Client, old: &str) -> Option<String> {
    let sets = Api::<capi::MachineSet>::namespaced(client.clone(), NS)
        .list(&Default::default())
        .await
        .ok()?;
    sets.items
        .iter()
        .filter(|s| s.spec.template.spec.infrastructure_ref.name.as_deref() == Some("bench-b"))
        .filter_map(|s| s.metadata.name.clone())
        .find(|n| n != old)
}

pub async fn run(
    machines: usize,
    max_surge: String,
    max_unavailable: String,
    in_memory: bool,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    let server_port = free_port()?;
    let mut server_cmd = tokio::process::Command::new(&exe);
    server_cmd
        .args(["server", "--cluster-api", "--insecure-http", "--listen"])
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
    let mut cm = start_manager(&exe, &kubeconfig, cm_port, dir.path())?;
    wait_ready(cm_port, "the controller-manager", &mut cm).await?;
    let cm_pid = cm.id().unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cm_rss_idle = rss_mib(cm_pid);
    let (store, watching) = watch_machines(&client).await?;
    let surge = bound(&max_surge, machines, true)?;
    let unavailable = bound(&max_unavailable, machines, false)?;

    // Phase 1: zero to N Running.
    let before = request_counts(server_port).await?;
    let (cm_cpu0, srv_cpu0) = (cpu_secs(cm_pid), cpu_secs(server_pid));
    create_objects(&client, machines, &max_surge, &max_unavailable).await?;
    let (up_time, _) = phase(
        &store,
        |s| s.running == machines && s.objects == machines,
        String::new,
    )
    .await?;
    let after_up = request_counts(server_port).await?;
    let (cm_cpu1, srv_cpu1) = (cpu_secs(cm_pid), cpu_secs(server_pid));
    let up_requests = delta(&after_up, &before);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cm_rss_up = rss_mib(cm_pid);
    let srv_rss_up = rss_mib(server_pid);
    let first_set = Api::<capi::MachineSet>::namespaced(client.clone(), NS)
        .list(&Default::default())
        .await?
        .items
        .first()
        .and_then(|s| s.metadata.name.clone())
        .unwrap_or_default();

    // Phase 2: the rolling update to the second infrastructure template.
    let before_roll = request_counts(server_port).await?;
    let (cm_cpu2, srv_cpu2) = (cpu_secs(cm_pid), cpu_secs(server_pid));
    Api::<MachineDeployment>::namespaced(client.clone(), NS)
        .patch(
            "bench",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"template": {"spec": {"infrastructureRef": {"name": "bench-b"}}}}}),
            ),
        )
        .await?;
    let target = Arc::new(std::sync::Mutex::new(String::from("\u{0}")));
    let (t, c, old) = (target.clone(), client.clone(), first_set.clone());
    let finder = tokio::spawn(async move {
        loop {
            if let Some(n) = newest_set(&c, &old).await {
                *t.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = n;
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let tgt = target.clone();
    let (roll_time, roll_ex) = phase(
        &store,
        |s| s.running_target == machines && s.objects == machines,
        move || {
            tgt.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        },
    )
    .await?;
    finder.abort();
    let after_roll = request_counts(server_port).await?;
    let (cm_cpu3, srv_cpu3) = (cpu_secs(cm_pid), cpu_secs(server_pid));
    let roll_requests = delta(&after_roll, &before_roll);
    watching.store(false, Ordering::Relaxed);

    let set_count = Api::<capi::MachineSet>::namespaced(client.clone(), NS)
        .list(&Default::default())
        .await?
        .items
        .len();
    let up_total: u64 = up_requests.values().sum();
    let roll_total: u64 = roll_requests.values().sum();
    let surge_ok = roll_ex.max_live <= machines + surge;
    let avail_ok = roll_ex.min_running >= machines - unavailable;
    println!("| measurement | result |");
    println!("|---|---|");
    println!(
        "| {machines} Cluster API machines of one MachineDeployment from zero to all Running (boot delay 0) | {:.2} s |",
        up_time.as_secs_f64()
    );
    println!(
        "| rolling update of {machines} machines to a new LocalMachineTemplate, maxSurge {max_surge}, maxUnavailable {max_unavailable} | {:.2} s |",
        roll_time.as_secs_f64()
    );
    println!(
        "| rollout: most live machines (bound {}) / most objects incl. deleting | {} {} / {} |",
        machines + surge,
        roll_ex.max_live,
        if surge_ok { "ok" } else { "VIOLATED" },
        roll_ex.max_objects
    );
    println!("| MachineSets after the rollout | {set_count} |");
    println!(
        "| rollout: fewest Running machines (bound {}) | {} {} |",
        machines - unavailable,
        roll_ex.min_running,
        if avail_ok { "ok" } else { "VIOLATED" }
    );
    println!(
        "| controller-manager RSS: idle / {machines} Running | {cm_rss_idle:.0} / {cm_rss_up:.0} MiB |"
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
    cm.kill().await?;
    server.kill().await?;
    anyhow::ensure!(surge_ok && avail_ok, "a rollout invariant was violated");
    Ok(())
}
