//! `trellis bench …`: benchmarks as commands, printing Markdown rows for
//! BENCHMARKS.md. They start a real server on loopback and talk HTTP to it;
//! `bench mcm` ([`mcm`]) also runs the controllers as a child process.

mod capi;
mod client;
mod mcm;
mod restore;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Subcommand;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::json;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// The API server. As clients see it (`--mode client`): `trellis
    /// server` as its own process over TLS, load from this one over
    /// HTTP/1.1 and HTTP/2 — throughput, latency, server CPU per request.
    /// In process (`--mode in-process`): the embedded server over plain
    /// HTTP — creates/s, GET and LIST latency, watch delivery latency,
    /// memory. `--mode both` (the default) prints both tables.
    Apiserver {
        /// Which tables to print.
        #[arg(long, value_enum, default_value_t = ApiserverMode::Both)]
        mode: ApiserverMode,
        /// Requests per row of the client table.
        #[arg(long, default_value_t = 2_000)]
        requests: usize,
        /// How the client table's load authenticates.
        #[arg(long, value_enum, default_value_t = client::Auth::Token)]
        auth: client::Auth,
        /// Protocols of the client table.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "http1,http2")]
        protocols: Vec<client::Proto>,
        /// Concurrent clients of the client table's rows.
        #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
        clients: Vec<usize>,
        /// Verbs of the client table.
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "create,update,apply,get"
        )]
        verbs: Vec<client::Verb>,
        /// Objects created for the memory figure.
        #[arg(long, default_value_t = 100_000)]
        objects: usize,
        /// Objects in the listed collection.
        #[arg(long, default_value_t = 10_000)]
        list_objects: usize,
        /// Use the in-memory store instead of the durable file store.
        #[arg(long)]
        in_memory: bool,
        /// The client table's server keeps its objects in this etcd
        /// (`trellis server --etcd-servers`) instead of the file store.
        #[arg(long, value_name = "URL[,URL…]")]
        etcd_servers: Option<String>,
    },
    /// Cloud profiles: filtering the image versions every machine type can
    /// boot, and re-rendering NamespacedCloudProfiles after a parent change.
    Profiles {
        /// Machine types in the profile.
        #[arg(long, default_value_t = 1000)]
        machine_types: usize,
        /// Image versions in the profile.
        #[arg(long, default_value_t = 200)]
        image_versions: usize,
        /// Capability flavors per image version.
        #[arg(long, default_value_t = 8)]
        flavors: usize,
        /// NamespacedCloudProfiles re-rendered.
        #[arg(long, default_value_t = 1000)]
        ncps: usize,
    },
    /// The machine controllers: one MachineDeployment from zero to all
    /// Running, then a rolling update (server and controller-manager run as
    /// child processes).
    Mcm {
        /// Machines of the deployment; several sizes (`1000,3000,10000`)
        /// run one after another, each on a fresh server and
        /// controller-manager, and end with a table of the curve.
        #[arg(long, value_delimiter = ',', default_value = "1000")]
        machines: Vec<usize>,
        /// maxSurge of the rolling update (a count or a percentage).
        #[arg(long, default_value = "10%")]
        max_surge: String,
        /// maxUnavailable of the rolling update.
        #[arg(long, default_value = "0")]
        max_unavailable: String,
        /// Run the server on the in-memory store instead of the durable one.
        #[arg(long)]
        in_memory: bool,
        /// Run the local provider out of process: the controller-manager
        /// serves the driver protocol (--driver-listen,
        /// --local-provider=false) and `trellis provider local` connects.
        #[arg(long)]
        grpc: bool,
        /// Only bring the machines to Running; no rolling update.
        #[arg(long)]
        no_rollout: bool,
    },
    /// Cluster API: one MachineDeployment of N Machines (TrellisConfig
    /// bootstrap, LocalMachine infrastructure) from zero to all Running,
    /// then a rolling update to a new infrastructure template (server and
    /// controller-manager run as child processes, as for `bench mcm`).
    Capi {
        /// Machines of the deployment.
        #[arg(long, default_value_t = 1000)]
        machines: usize,
        /// maxSurge of the rolling update (a count or a percentage).
        #[arg(long, default_value = "10%")]
        max_surge: String,
        /// maxUnavailable of the rolling update.
        #[arg(long, default_value = "0")]
        max_unavailable: String,
        /// Run the server on the in-memory store instead of the durable one.
        #[arg(long)]
        in_memory: bool,
    },
    /// etcd-backup-restore's restore of a member from a full snapshot and
    /// its deltas, against a real etcd (Debian's etcd-server).
    Restore {
        /// Keys in the full snapshot.
        #[arg(long, default_value_t = 100_000)]
        keys: usize,
        /// Keys written after it, into delta snapshots.
        #[arg(long, default_value_t = 10_000)]
        delta_keys: usize,
    },
    /// Memory of a `trellis server` process (run as a child) holding N
    /// ConfigMaps.
    Memory {
        #[arg(long, default_value_t = 8_000)]
        objects: usize,
        /// Bytes of payload per ConfigMap.
        #[arg(long, default_value_t = 500)]
        size: usize,
    },
}

/// Which tables `bench apiserver` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ApiserverMode {
    /// Both, the client table first.
    Both,
    /// `trellis server` in its own process over TLS.
    Client,
    /// The embedded server over plain HTTP, client in the same process.
    InProcess,
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

struct Target {
    client: HttpClient,
    base: String,
}

impl Target {
    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<(u16, Bytes)> {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let resp = self.client.request(req).await?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn configmap(name: &str, size: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"payload": "x".repeat(size)},
    }))
    .expect("serialising a ConfigMap")
}

async fn create_namespace(t: &Target, ns: &str) -> anyhow::Result<()> {
    let body =
        serde_json::to_vec(&json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name": ns}}))?;
    let (code, b) = t.send("POST", "/api/v1/namespaces", Some(body)).await?;
    anyhow::ensure!(
        code == 201 || code == 409,
        "creating namespace {ns}: {code} {}",
        String::from_utf8_lossy(&b)
    );
    Ok(())
}

/// Creates `n` objects with `conc` concurrent clients; returns creates/s.
async fn creates(
    t: &Arc<Target>,
    ns: &str,
    n: usize,
    conc: usize,
    size: usize,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..conc {
        let t = t.clone();
        let ns = ns.to_string();
        tasks.push(tokio::spawn(async move {
            let mut i = w;
            while i < n {
                let (code, b) = t
                    .send(
                        "POST",
                        &format!("/api/v1/namespaces/{ns}/configmaps"),
                        Some(configmap(&format!("cm-{i:07}"), size)),
                    )
                    .await?;
                anyhow::ensure!(
                    code == 201,
                    "create: {code} {}",
                    String::from_utf8_lossy(&b)
                );
                i += conc;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

async fn apiserver_bench(
    objects: usize,
    list_objects: usize,
    in_memory: bool,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = crate::open_store(dir.path(), in_memory, false)?;
    // Served until the process ends; the bench talks to it over its own
    // HTTP client, not the cluster's kube-rs one.
    let cluster = apiserver::cluster::Cluster::builder()
        .store(store)
        .start()
        .await?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: HttpClient = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(64)
        .build(connector);
    let t = Arc::new(Target {
        client,
        base: cluster.url().to_string(),
    });
    let backend = if in_memory {
        "memory"
    } else {
        "file (durable)"
    };
    println!("| measurement | result |");
    println!("|---|---|");
    println!("| store backend | {backend} |");

    for (ns, conc) in [("c1", 1usize), ("c4", 4), ("c16", 16)] {
        create_namespace(&t, ns).await?;
        let n = match conc {
            1 => 3_000,
            4 => 5_000,
            _ => 10_000,
        };
        let rate = creates(&t, ns, n, conc, 1024).await?;
        println!(
            "| creates/s, 1 KiB ConfigMap, {conc} concurrent client(s), {n} objects | {rate:.0} |"
        );
    }

    // GET latency on one connection.
    let mut lat = Vec::new();
    for i in 0..5_000 {
        let s = Instant::now();
        let (code, _) = t
            .send(
                "GET",
                &format!("/api/v1/namespaces/c16/configmaps/cm-{:07}", i % 10_000),
                None,
            )
            .await?;
        anyhow::ensure!(code == 200, "get: {code}");
        lat.push(s.elapsed());
    }
    lat.sort();
    println!(
        "| GET latency p50 / p99 (5,000 GETs) | {} / {} |",
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99))
    );

    // LIST latency of `list_objects` objects.
    create_namespace(&t, "list").await?;
    creates(&t, "list", list_objects, 16, 1024).await?;
    let mut lat = Vec::new();
    for _ in 0..50 {
        let s = Instant::now();
        let (code, body) = t
            .send("GET", "/api/v1/namespaces/list/configmaps", None)
            .await?;
        anyhow::ensure!(
            code == 200 && body.len() > list_objects * 1000,
            "list: {code}"
        );
        lat.push(s.elapsed());
    }
    lat.sort();
    println!(
        "| LIST latency p50 / p99, {list_objects} × 1 KiB objects (50 LISTs) | {} / {} |",
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99))
    );
    let mut lat = Vec::new();
    create_namespace(&t, "list2k").await?;
    creates(&t, "list2k", 2_000, 16, 500).await?;
    for _ in 0..100 {
        let s = Instant::now();
        let (code, _) = t
            .send("GET", "/api/v1/namespaces/list2k/configmaps", None)
            .await?;
        anyhow::ensure!(code == 200, "list: {code}");
        lat.push(s.elapsed());
    }
    lat.sort();
    println!(
        "| LIST latency p50 / p99, 2,000 × 500 B objects | {} / {} |",
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99))
    );

    // Watch delivery latency with 100 watchers.
    create_namespace(&t, "watch").await?;
    let rv = {
        let (_, b) = t
            .send("GET", "/api/v1/namespaces/watch/configmaps", None)
            .await?;
        let v: serde_json::Value = serde_json::from_slice(&b)?;
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("0")
            .to_string()
    };
    let origin = Instant::now();
    let events = 200usize;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Duration>();
    let mut watchers = Vec::new();
    for _ in 0..100 {
        let t = t.clone();
        let tx = tx.clone();
        let rv = rv.clone();
        watchers.push(tokio::spawn(async move {
            let req = http::Request::builder()
                .uri(format!(
                    "{}/api/v1/namespaces/watch/configmaps?watch=true&resourceVersion={rv}",
                    t.base
                ))
                .body(Full::new(Bytes::new()))?;
            let resp = t.client.request(req).await?;
            let mut body = resp.into_body();
            let mut buf = Vec::new();
            let mut seen = 0;
            while seen < events {
                let Some(frame) = body.frame().await else {
                    break;
                };
                let frame = frame?;
                if let Some(d) = frame.data_ref() {
                    buf.extend_from_slice(d);
                    while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=pos).collect();
                        let v: serde_json::Value = serde_json::from_slice(&line)?;
                        if let Some(sent) = v["object"]["data"]["sentMicros"]
                            .as_str()
                            .and_then(|s| s.parse::<u64>().ok())
                        {
                            let now = origin.elapsed();
                            let _ = tx.send(now.saturating_sub(Duration::from_micros(sent)));
                            seen += 1;
                        }
                    }
                }
            }
            anyhow::Ok(())
        }));
    }
    drop(tx);
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..events {
        let sent = origin.elapsed().as_micros().to_string();
        let body = serde_json::to_vec(
            &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name": format!("w-{i}")},"data":{"sentMicros": sent}}),
        )?;
        let (code, _) = t
            .send("POST", "/api/v1/namespaces/watch/configmaps", Some(body))
            .await?;
        anyhow::ensure!(code == 201, "watch create: {code}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut lat = Vec::new();
    while let Some(d) = rx.recv().await {
        lat.push(d);
    }
    for w in watchers {
        w.await??;
    }
    lat.sort();
    println!(
        "| watch delivery latency p50 / p99, 100 watchers × {events} events ({} deliveries) | {} / {} |",
        lat.len(),
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99))
    );

    // Memory with `objects` stored.
    let stored_now = 3_000 + 5_000 + 10_000 + list_objects + 2_000 + events;
    if objects > stored_now {
        create_namespace(&t, "mem").await?;
        creates(&t, "mem", objects - stored_now, 16, 1024).await?;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!(
        "| process RSS with {} objects stored (server and bench client in one process) | {:.0} MiB |",
        objects.max(stored_now),
        rss_mib()
    );
    Ok(())
}

fn rss_of(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

async fn memory_bench(objects: usize, size: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .args([
            "server",
            // The benchmark measures the server, not TLS or RBAC.
            "--insecure-http",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path())
        .env("TRELLIS_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().unwrap_or(0);
    let client: HttpClient = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let t = Arc::new(Target {
        client,
        base: format!("http://127.0.0.1:{port}"),
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while t
        .send("GET", "/readyz", None)
        .await
        .map(|r| r.0)
        .unwrap_or(0)
        != 200
    {
        anyhow::ensure!(Instant::now() < deadline, "server did not become ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let idle = rss_of(pid);
    create_namespace(&t, "mem").await?;
    creates(&t, "mem", objects, 4, size).await?;
    // A few full LISTs, as clients with informers would do.
    for _ in 0..5 {
        t.send("GET", "/api/v1/namespaces/mem/configmaps", None)
            .await?;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!("| measurement | result |");
    println!("|---|---|");
    println!("| server RSS idle (durable store, empty) | {idle:.0} MiB |");
    println!(
        "| server RSS with {objects} ConfigMaps of {size} B (after 5 full LISTs) | {:.0} MiB |",
        rss_of(pid)
    );
    child.kill().await?;
    Ok(())
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Profiles {
            machine_types,
            image_versions,
            flavors,
            ncps,
        } => {
            let report = gardener::bench::run(gardener::bench::BenchConfig {
                machine_types,
                image_versions,
                flavors,
                ncps,
            });
            println!("{report}");
            Ok(())
        }
        BenchCommand::Memory { objects, size } => memory_bench(objects, size).await,
        BenchCommand::Mcm {
            machines,
            max_surge,
            max_unavailable,
            in_memory,
            grpc,
            no_rollout,
        } => {
            mcm::run(
                machines,
                max_surge,
                max_unavailable,
                in_memory,
                grpc,
                !no_rollout,
            )
            .await
        }
        BenchCommand::Restore { keys, delta_keys } => restore::run(keys, delta_keys).await,
        BenchCommand::Capi {
            machines,
            max_surge,
            max_unavailable,
            in_memory,
        } => capi::run(machines, max_surge, max_unavailable, in_memory).await,
        BenchCommand::Apiserver {
            mode,
            requests,
            auth,
            protocols,
            clients,
            verbs,
            objects,
            list_objects,
            in_memory,
            etcd_servers,
        } => {
            if mode != ApiserverMode::InProcess {
                println!("### As clients see it: `trellis server` in its own process, TLS");
                println!();
                client::run(client::Plan {
                    requests,
                    etcd_servers,
                    auth,
                    protocols,
                    clients,
                    verbs,
                })
                .await?;
                println!();
            }
            if mode != ApiserverMode::Client {
                println!(
                    "### In process: embedded server over plain HTTP, client in the same process"
                );
                println!();
                apiserver_bench(objects, list_objects, in_memory).await?;
            }
            Ok(())
        }
    }
}
