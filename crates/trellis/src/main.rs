//! The `trellis` command: the embedded API server, the controllers, both
//! in one process (`up`), and benchmarks.

mod admission_webhook;
mod bench;
mod capi_admission;
mod capi_controllers;
mod controller_manager;
mod demo;
mod dependency_watchdog;
mod druid_admission;
mod etcd_backup_restore;
mod etcd_store;
mod gardener_admission;
mod kubeconfig;
mod logging;
mod machine_admission;
mod profile;
mod provider;
mod status;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use futures::future::BoxFuture;
use futures::{FutureExt, TryFutureExt};

#[derive(Parser)]
#[command(
    name = "trellis",
    version,
    about = "A Kubernetes-native control plane for the lifecycle of worker machines"
)]
struct Cli {
    /// Log level: error, warn, info, debug, trace (or a tracing filter).
    /// Default info; warn for `up --demo` on a terminal, whose live table
    /// would drown in log lines.
    #[arg(long, global = true, env = "TRELLIS_LOG")]
    log_level: Option<String>,
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run trellis on this machine: the embedded API server on a durable
    /// store in the per-user data directory, and every controller with the
    /// local provider, in one process.
    // Boxed: its flags make it far larger than every other command.
    Up(Box<UpArgs>),
    /// Show machine deployments, machine sets and machines as a tree with
    /// each machine's phase, node, age and last operation.
    #[command(alias = "describe")]
    Status(status::Args),
    /// Operator tools for cloud profiles: usable images per machine type,
    /// offline rendering of a NamespacedCloudProfile.
    Profile {
        #[command(subcommand)]
        what: profile::Command,
    },
    /// Run the embedded Kubernetes-compatible API server alone.
    Server(ServerArgs),
    /// Run every controller with the local provider against an API server
    /// (the control and target clusters may be the same).
    // Boxed: its many flags would make every variant as large.
    ControllerManager(Box<controller_manager::Args>),
    /// Run one half of dependency-watchdog against a seed: the prober
    /// (scales each shoot's controllers down while its node leases are
    /// lost) or the weeder (restarts crash-looping dependants once the
    /// service they wait for is ready).
    DependencyWatchdog {
        #[command(subcommand)]
        what: dependency_watchdog::Command,
    },
    /// Print every CRD manifest trellis serves, for installing on a real cluster.
    Crds(CrdsArgs),
    /// Run a machine provider out of process: it connects to a
    /// machine-controller-manager's --driver-listen and serves its classes
    /// over gRPC.
    Provider {
        #[command(subcommand)]
        what: provider::ProviderCommand,
    },
    /// Serve the machine.sapcloud.io admission (defaulting and validation)
    /// as an AdmissionReview webhook for a real cluster.
    AdmissionWebhook(admission_webhook::Args),
    /// Measure parts of trellis; results are printed as Markdown.
    Bench {
        #[command(subcommand)]
        what: bench::BenchCommand,
    },
    /// etcd-backup-restore and etcd-wrapper, the containers of a druid
    /// StatefulSet.
    #[command(flatten)]
    Etcd(etcd_backup_restore::Command),
    /// Parts of the process kubelet that run as their own processes.
    #[command(hide = true)]
    Kubelet {
        #[command(subcommand)]
        what: KubeletCommand,
    },
}

#[derive(Subcommand)]
enum KubeletCommand {
    /// The supervisor of one container (started by the kubelet: `shim run
    /// ATTEMPT_DIR`); it outlives trellis.
    Shim {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(clap::Args)]
struct CrdsArgs {
    /// Also print the Cluster API CRDs (cluster.x-k8s.io and trellis's
    /// bootstrap and infrastructure providers').
    #[arg(long)]
    cluster_api: bool,
}

#[derive(clap::Args)]
struct ServerArgs {
    /// Where the store and the admin kubeconfig live.
    #[arg(long, env = "TRELLIS_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Keep everything in memory (nothing survives a restart).
    #[arg(long)]
    in_memory: bool,
    /// Serve plain HTTP with no authentication or authorization at all
    /// (anyone who can reach the port is cluster-admin). Only for tests and
    /// benchmarks on loopback.
    #[arg(long)]
    insecure_http: bool,
    /// Extra DNS name or IP address for the serving certificate (repeatable);
    /// localhost, 127.0.0.1 and ::1 are always included.
    #[arg(long = "tls-san", value_name = "NAME")]
    tls_sans: Vec<String>,
    /// Static bearer tokens, one `token,user,uid,"group1,group2"` per line
    /// (kube-apiserver's --token-auth-file format).
    #[arg(long, value_name = "FILE")]
    token_auth_file: Option<PathBuf>,
    /// Append one JSON line per mutating request to FILE.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Cloud profile features beyond upstream Gardener, off by default
    /// (comma-separated): `multi-level-inheritance` (an NCP's parent may be
    /// another NCP of its namespace), `cross-project-use` (a Shoot may use
    /// an NCP of another namespace whose `use` verb it is granted).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = PROFILE_EXTENSIONS)]
    profile_extensions: Vec<String>,
    /// Client connections held at once, all clients together (lowered to fit
    /// the open-file limit, which is raised to its hard limit at start)
    #[arg(long, default_value_t = 20_000)]
    max_connections: usize,
    /// Client connections held at once from one client address; a client
    /// over it gets 429 TooManyRequests naming the limit
    #[arg(long, default_value_t = 2_000)]
    max_connections_per_client: usize,
    /// How long a request header may take to arrive (the first one counted
    /// from the TLS handshake), as kube-apiserver's ReadHeaderTimeout
    #[arg(long, default_value = "32s", value_parser = controller_manager::parse_duration)]
    request_header_timeout: std::time::Duration,
    /// How long a connection with no request in flight is kept open (a
    /// watch is in flight until it ends)
    #[arg(long, default_value = "90s", value_parser = controller_manager::parse_duration)]
    idle_connection_timeout: std::time::Duration,
    /// The range Service cluster IPs are allocated from (kube-apiserver's
    /// flag); loopback by default, where the seed runtime's proxy serves them
    #[arg(long, default_value = apiserver::DEFAULT_SERVICE_CLUSTER_IP_RANGE)]
    service_cluster_ip_range: String,
    /// Open a store whose write-ahead log is damaged by moving the damaged
    /// part (and every later log segment) aside into `DIR/store/damaged-*/`
    /// and keeping the intact prefix; without it such a store refuses to
    /// open and names the file and offset
    #[arg(long)]
    repair_store: bool,
    /// Also serve Cluster API (cluster.x-k8s.io Cluster, Machine,
    /// MachineSet, MachineDeployment, MachineHealthCheck and trellis's
    /// TrellisConfig and Local* providers); with `up`, run its controllers
    /// too. Off by default: both APIs have `machines`, `machinesets` and
    /// `machinedeployments`, and kubectl resolves those names to
    /// cluster.x-k8s.io once it is served (as on any cluster with both), so
    /// MCM's objects are then `mc`, `mcs`, `mcd` (or fully qualified).
    #[arg(long)]
    cluster_api: bool,
    /// Serve Kubernetes' built-in kinds only: none of trellis's
    /// CustomResourceDefinitions (machine.sapcloud.io, core.gardener.cloud,
    /// druid.gardener.cloud) and none of their admission, as a shoot's
    /// kube-apiserver (the one gardenlet runs on a shoot's etcd-main).
    #[arg(long, conflicts_with = "cluster_api")]
    builtin_kinds_only: bool,
    #[command(flatten)]
    etcd: etcd_store::EtcdArgs,
}

/// The values `--profile-extensions` accepts.
pub const PROFILE_EXTENSIONS: [&str; 2] = ["multi-level-inheritance", "cross-project-use"];

/// The extensions a `--profile-extensions` list turns on.
pub fn profile_extensions(list: &[String]) -> gardener::Extensions {
    let on = |f: &str| list.iter().any(|x| x == f);
    gardener::Extensions {
        multi_level_inheritance: on("multi-level-inheritance"),
        cross_project_use: on("cross-project-use"),
    }
}

impl ServerArgs {
    fn extensions(&self) -> gardener::Extensions {
        profile_extensions(&self.profile_extensions)
    }
}

#[derive(clap::Args)]
struct UpArgs {
    #[command(flatten)]
    server: ServerArgs,
    #[command(flatten)]
    drivers: provider::DriverFlags,
    /// Also serve the controllers' /metrics, /healthz and /readyz here.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_listen: Option<SocketAddr>,
    /// Apply an example (unless it exists) and show its progress live:
    /// `--demo` (or `--demo machines`) a local MachineClass and a
    /// MachineDeployment of 3 machines; `--demo shoot` a CloudProfile and a
    /// Shoot with two pools over three zones (10 machines, nodes in the
    /// shoot's own API server).
    #[arg(long, num_args = 0..=1, default_missing_value = "machines", value_name = "NAME")]
    demo: Option<demo::Demo>,
    /// Do not run the process kubelet (pods then stay Pending unless some
    /// other kubelet runs them).
    #[arg(long)]
    no_kubelet: bool,
    /// The process kubelet's image → command table (YAML, its entries in
    /// front of the built-in ones; the format is in crates/kubelet/src/imagemap.rs).
    #[arg(long, value_name = "FILE")]
    image_map: Option<PathBuf>,
    /// Where the process kubelet's HTTPS endpoint (logs, exec) listens; the
    /// Node reports the port, so any free one will do.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:0")]
    kubelet_listen: SocketAddr,
    /// The name of the Node that stands for this machine (default: the
    /// host name).
    #[arg(long, value_name = "NAME")]
    node_name: Option<String>,
    /// Where each shoot's API server keeps its objects: `druid` (an
    /// etcd-druid Etcd `etcd-main` in the shoot's control namespace, run by
    /// the process kubelet with Debian's etcd and backed up under
    /// `<data>/backupbuckets/shoots`, with a `kube-apiserver` Deployment on
    /// it, as Gardener deploys them), `embedded` (a store of its own under
    /// the data dir, no etcd needed), or `auto`: druid when `etcd` is on
    /// PATH and the process kubelet runs, embedded otherwise.
    #[arg(long, value_enum, default_value = "auto", value_name = "STORE")]
    shoot_etcd: ShootEtcd,
}

/// `trellis up --shoot-etcd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ShootEtcd {
    Auto,
    Embedded,
    Druid,
}

/// Whether `program` is an executable file in a PATH directory.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            std::fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// The process kubelet of `trellis up`, unless `--no-kubelet`.
fn kubelet_config(
    args: &UpArgs,
    data_dir: &std::path::Path,
) -> anyhow::Result<Option<kubelet::Config>> {
    if args.no_kubelet {
        return Ok(None);
    }
    let exe = std::env::current_exe().context("locating the trellis binary")?;
    let node = args.node_name.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_lowercase())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".to_string())
    });
    let shim = vec![exe.clone().into(), "kubelet".into(), "shim".into()];
    let trellis = exe.display().to_string();
    let mut cfg = kubelet::Config::new(data_dir.to_path_buf(), node, shim, trellis.clone());
    if let Some(f) = &args.image_map {
        let yaml =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        cfg.images = kubelet::imagemap::ImageMap::with_file(trellis, &yaml)
            .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
    }
    cfg.listen = args.kubelet_listen;
    Ok(Some(cfg))
}

/// The per-user default data directory: `$XDG_DATA_HOME/trellis` or
/// `~/.local/share/trellis`.
pub fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("trellis");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/share/trellis")
}

/// Opens the store: the durable file backend under `data_dir/store`, or
/// memory.
pub fn open_store(
    data_dir: &std::path::Path,
    in_memory: bool,
    repair: bool,
) -> anyhow::Result<Arc<dyn store::Store>> {
    if in_memory {
        return Ok(Arc::new(store::MemoryStore::new()));
    }
    let dir = data_dir.join("store");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let options = store::file::FileOptions {
        repair,
        ..Default::default()
    };
    let s = store::FileStore::open_with_options(&dir, store::EngineConfig::default(), options)
        .with_context(|| format!("opening the store in {}", dir.display()))?;
    Ok(Arc::new(s))
}

/// Resolves on the first SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// A started API server: its URL, the admin kubeconfig written for it, and
/// the future that serves until its shutdown signal.
struct StartedServer {
    url: String,
    kubeconfig: PathBuf,
    serve: BoxFuture<'static, std::io::Result<()>>,
}

impl StartedServer {
    fn print_usage(&self, what: &str) {
        tracing::info!(url = %self.url, kubeconfig = %self.kubeconfig.display(), "{what} listening");
        println!("trellis {what} listening on {}", self.url);
        println!("  export KUBECONFIG={}", self.kubeconfig.display());
        println!("  kubectl get namespaces");
    }
}

async fn run_server(args: ServerArgs) -> anyhow::Result<()> {
    let started = start_server(args, shutdown_signal()).await?;
    started.print_usage("API server");
    started.serve.await?;
    tracing::info!("API server stopped");
    Ok(())
}

/// How long `up` waits, after the controllers stopped, for the API server's
/// connections to close. Every acknowledged write is already durable, so
/// giving up on a slow client loses nothing.
const SERVER_SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// `trellis up`: the API server and, against it through the admin
/// kubeconfig it just wrote, every controller with the local provider. On
/// a signal the controllers stop first, then the server, so no controller
/// sees its API vanish mid-reconcile.
async fn run_up(args: UpArgs, launched: std::time::Instant) -> anyhow::Result<()> {
    let (server_stop, server_shutdown) = controller_manager::shutdown_pair();
    let extensions = args.server.extensions();
    let launch = demo::Launch {
        command: status::invocation(),
        data_dir: args.server.data_dir.clone(),
        in_memory: args.server.in_memory,
    };
    // Shoots keep their own API servers' stores next to the seed's.
    let shoots_dir = (!args.server.in_memory).then(|| {
        args.server
            .data_dir
            .clone()
            .unwrap_or_else(default_data_dir)
    });
    let data_dir = args
        .server
        .data_dir
        .clone()
        .unwrap_or_else(default_data_dir);
    let tls = !args.server.insecure_http;
    let kubelet_config = kubelet_config(&args, &data_dir)?;
    anyhow::ensure!(
        !args.server.builtin_kinds_only,
        "--builtin-kinds-only is for `trellis server`: `up` runs controllers of trellis's own kinds"
    );
    anyhow::ensure!(
        args.shoot_etcd != ShootEtcd::Druid || kubelet_config.is_some(),
        "--shoot-etcd druid needs the process kubelet (it runs the etcd members): drop --no-kubelet"
    );
    let shoot_etcd = match args.shoot_etcd {
        ShootEtcd::Auto if kubelet_config.is_some() && on_path("etcd") => ShootEtcd::Druid,
        ShootEtcd::Auto => {
            tracing::info!(
                "shoots keep their objects in stores of their own: etcd-main needs `etcd` on PATH (Debian's etcd-server) and the process kubelet"
            );
            ShootEtcd::Embedded
        }
        chosen => chosen,
    };
    let etcd_main =
        (shoot_etcd == ShootEtcd::Druid).then(|| gardenlet::etcd_main::EtcdMainConfig {
            local_backup_root: Some(data_dir.join("backupbuckets")),
            ..Default::default()
        });
    let cluster_api = args.server.cluster_api;
    let started = start_server(args.server, server_shutdown).await?;
    let mut serving = tokio::spawn(started.serve);
    let client = controller_manager::client_from(&started.kubeconfig).await?;
    // The process kubelet: the seed's pods run on this machine. It talks
    // to the server through the API only, like any kubelet.
    let (kubelet_stop, kubelet_shutdown) = controller_manager::shutdown_pair();
    let kubelet = match kubelet_config {
        Some(mut cfg) => {
            if tls {
                let ca = data_dir.join("pki").join("ca.crt");
                let pem = std::fs::read_to_string(&ca)
                    .with_context(|| format!("reading {}", ca.display()))?;
                cfg.client_ca_pem = Some(pem.clone());
                // Pods get service account tokens and this address (they
                // share the host's network).
                if let Some(addr) = started
                    .url
                    .strip_prefix("https://")
                    .and_then(|a| a.parse::<SocketAddr>().ok())
                {
                    let host = if addr.ip().is_unspecified() {
                        "127.0.0.1".to_string()
                    } else {
                        addr.ip().to_string()
                    };
                    cfg.api_server = Some(kubelet::serviceaccount::ApiServer {
                        host,
                        port: addr.port(),
                        ca_pem: pem,
                    });
                }
            }
            Some(tokio::spawn(kubelet::run(
                client.clone(),
                cfg,
                kubelet_shutdown,
            )))
        }
        None => None,
    };
    let metrics = Arc::new(mcm::metrics::Metrics::new());
    let dwd_metrics = Arc::new(dwd::Metrics::new());
    if let Some(addr) = args.metrics_listen {
        let addr =
            dependency_watchdog::serve_up_telemetry(addr, metrics.clone(), dwd_metrics.clone())
                .await?;
        tracing::info!(%addr, "serving the controllers' /metrics, /healthz and /readyz, and dependency-watchdog's /dependency-watchdog/metrics");
    }
    // `up` is the only process of its data directory, so no leader
    // election: it would only delay every restart by a lease duration.
    let config = mcm::controllers::Config {
        metrics,
        ..mcm::controllers::Config::default()
    };
    let (controllers_stop, controllers_shutdown) = controller_manager::shutdown_pair();
    let profiles = gcm::Config {
        extensions,
        ..gcm::Config::default()
    };
    let capi = cluster_api.then(|| capi_controllers::Options {
        endpoint: capi_controllers::endpoint_of_kubeconfig(&started.kubeconfig),
    });
    let machines = controller_manager::run_controllers(
        client.clone(),
        client.clone(),
        config,
        Some(profiles),
        "trellis".to_string(),
        capi,
        args.drivers.clone(),
        controllers_shutdown.clone(),
    );
    // The shoot flow: gardenlet (a control namespace, a Cluster, a Worker
    // and an own API server with machine controllers per Shoot) and the
    // Worker controller for `type: local`.
    // Neither can fail, only end; `try_join!` below needs them as results
    // so that a failing machine controller still ends the join at once.
    let gardenlet = gardenlet::run(
        client.clone(),
        gardenlet::Config {
            data_dir: shoots_dir,
            etcd_main,
            // With a runtime for the seed's pods each shoot's machine
            // controllers run in their Deployment's pod, as upstream.
            mcm_mode: if kubelet.is_some() {
                gardenlet::mcm_deployment::Mode::Pod
            } else {
                gardenlet::mcm_deployment::Mode::InProcess
            },
            ..gardenlet::Config::default()
        },
        controllers_shutdown.clone(),
    )
    .map(anyhow::Ok);
    let workers = extension_local::run(
        client.clone(),
        extension_local::Config::default(),
        controllers_shutdown.clone(),
    )
    .map(anyhow::Ok);
    // kube-controller-manager's part for the seed's workloads: Deployments,
    // ReplicaSets, StatefulSets, Jobs, CronJobs and EndpointSlices (on a
    // real cluster its own kube-controller-manager does this).
    // dependency-watchdog's prober and weeder with the default configs of
    // examples/dwd/: every shoot's control namespace is protected.
    let watchdog =
        dependency_watchdog::run_in_up(client.clone(), dwd_metrics, controllers_shutdown.clone());
    // etcd-druid: Etcds become StatefulSets of etcd members run by the
    // kubelet above, backed up to Local stores under the data dir.
    let druid = druid::controllers::run(
        client.clone(),
        druid::controllers::Options {
            settings: druid::components::Settings {
                local_backup_root: data_dir.join("backupbuckets").display().to_string(),
                ..Default::default()
            },
            // This process is outside the seed's DNS: backup-restore's
            // Service names resolve through the API.
            snapshot_trigger: Arc::new(druid::controllers::ServiceIpTrigger::new(client.clone())),
            ..Default::default()
        },
        controllers_shutdown.clone(),
    )
    .map_err(anyhow::Error::from);
    let workloads = workloads::run(
        client.clone(),
        workloads::Config::default(),
        controllers_shutdown,
    )
    .map_err(anyhow::Error::from);
    let mut controllers = tokio::spawn(async move {
        tokio::try_join!(machines, gardenlet, workers, workloads, watchdog, druid).map(|_| ())
    });
    println!(
        "trellis is up: API server on {} with every controller",
        started.url
    );
    println!("  export KUBECONFIG={}", started.kubeconfig.display());
    if args.demo.is_none() {
        println!("  kubectl get machinedeployments,machinesets,machines,nodes");
        println!("  kubectl apply -f examples/machine_classes/local-machine-class.yaml");
    }
    let mut demo = args
        .demo
        .map(|which| tokio::spawn(demo::run_demo(client.clone(), launched, which, launch)));
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            finished = &mut controllers => {
                finished.context("the controllers panicked")??;
                anyhow::bail!("the controllers stopped unexpectedly");
            }
            served = &mut serving => {
                served.context("the API server panicked")??;
                anyhow::bail!("the API server stopped unexpectedly");
            }
            shown = async { demo.as_mut().expect("guarded").await }, if demo.is_some() => {
                demo = None;
                // The demo follows until it is aborted below; ending by
                // itself means it failed. The controllers and the server
                // keep running: the demo is only a view on them.
                let ended = shown.context("the demo panicked")?.err();
                let why = ended.map_or_else(|| "it ended".to_string(), |e| format!("{e:#}"));
                eprintln!("demo: stopped following the machines: {why}");
            }
            _ = &mut shutdown => {
                tracing::info!("shutting down");
                break;
            }
        }
    }
    if let Some(d) = demo {
        d.abort();
    }
    let _ = controllers_stop.send(());
    if tokio::time::timeout(SERVER_SHUTDOWN_GRACE, &mut controllers)
        .await
        .is_err()
    {
        controllers.abort();
        tracing::warn!("in-flight reconciles did not finish in time");
    }
    // The kubelet stops the pods' processes (a crash would leave them to
    // be adopted at the next start instead).
    let _ = kubelet_stop.send(());
    if let Some(k) = kubelet {
        match tokio::time::timeout(std::time::Duration::from_secs(20), k).await {
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "the process kubelet"),
            Err(_) => tracing::warn!("the process kubelet did not stop in time"),
            _ => {}
        }
    }
    let _ = server_stop.send(());
    match tokio::time::timeout(SERVER_SHUTDOWN_GRACE, &mut serving).await {
        Ok(served) => served.context("the API server panicked")??,
        Err(_) => tracing::debug!("closing the API server's remaining connections"),
    }
    tracing::info!("trellis stopped");
    Ok(())
}

/// Opens the store, starts the API server with its admission and writes the
/// admin kubeconfig; the returned future serves until `shutdown`.
async fn start_server(
    args: ServerArgs,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<StartedServer> {
    let extensions = args.extensions();
    let data_dir = args.data_dir.unwrap_or_else(default_data_dir);
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let store = match etcd_store::open(&args.etcd).await? {
        Some(etcd) => etcd,
        None => open_store(&data_dir, args.in_memory, args.repair_store)?,
    };
    let mut config = apiserver::Config {
        audit_log: args.audit_log.clone(),
        service_cluster_ip_range: args.service_cluster_ip_range.clone(),
        connections: apiserver::conn::ConnLimits {
            max_connections: args.max_connections,
            max_per_client: args.max_connections_per_client,
            header_read_timeout: args.request_header_timeout,
            idle_timeout: args.idle_connection_timeout,
            ..Default::default()
        },
        ..Default::default()
    };
    // With TLS the PKI is created (first start) or loaded before anything
    // listens, and the server signs ServiceAccount tokens with its key.
    let pki = if args.insecure_http {
        anyhow::ensure!(
            args.token_auth_file.is_none(),
            "--token-auth-file needs TLS: drop --insecure-http"
        );
        tracing::warn!("--insecure-http: no TLS, no authentication, no authorization");
        None
    } else {
        let pki = apiserver::Pki::ensure(&data_dir.join("pki"), &args.tls_sans)?;
        // pods/log and pods/exec reach kubelets with this identity (the
        // kubelet admits it by its common name, as kube's does).
        config.kubelet_client = Some(
            pki.issue_client_cert("kube-apiserver-kubelet-client", &[])
                .context("issuing the kubelet client certificate")?,
        );
        let mut auth = apiserver::AuthConfig::new(pki.service_account_key_pem.clone());
        if let Some(f) = &args.token_auth_file {
            auth = auth.with_token_file(f)?;
        }
        config.auth = Some(auth);
        Some(pki)
    };
    let server = apiserver::Server::start(store, config).await?;
    if !args.builtin_kinds_only {
        machine_admission::prepare(&server).await?;
        gardener_admission::prepare(&server, extensions).await?;
        druid_admission::prepare(&server).await?;
    }
    if args.cluster_api {
        capi_admission::prepare(&server).await?;
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let kc = data_dir.join("admin.kubeconfig");
    let (url, written) = match &pki {
        Some(pki) => {
            let url = format!("https://{addr}");
            let written = kubeconfig::write_tls(
                &kc,
                &url,
                &pki.ca_cert_pem,
                &pki.admin_cert_pem,
                &pki.admin_key_pem,
            );
            (url, written)
        }
        None => {
            let url = format!("http://{addr}");
            let written = kubeconfig::write_plain(&kc, &url);
            (url, written)
        }
    };
    // The kubeconfig changes when the port does (`--listen …:0`). On a full
    // disk the write fails; serving reads matters more than the file, so
    // the start goes on and says so.
    if let Err(e) = written {
        tracing::warn!(path = %kc.display(), error = %format!("{e:#}"), "could not write the admin kubeconfig; the server starts anyway");
    }
    let serve = async move {
        match pki {
            Some(pki) => server.serve_tls(listener, pki.tls_config(), shutdown).await,
            None => server.serve(listener, shutdown).await,
        }
    }
    .boxed();
    Ok(StartedServer {
        url,
        kubeconfig: kc,
        serve,
    })
}

fn main() -> anyhow::Result<()> {
    let launched = std::time::Instant::now();
    let cli = Cli::parse();
    // The shim creates namespaces, which needs a single-threaded process:
    // it runs before logging and the async runtime start any thread.
    if let Command::Kubelet {
        what: KubeletCommand::Shim { args },
    } = &cli.command
    {
        std::process::exit(kubelet::shim::main(args));
    }
    let level = cli.log_level.clone().unwrap_or_else(|| {
        use std::io::IsTerminal as _;
        let demo_on_terminal = matches!(&cli.command, Command::Up(a) if a.demo.is_some())
            && std::io::stdout().is_terminal();
        // The client commands report their failures themselves, in one
        // sentence; kube's own error log of the same failed request would
        // only repeat it as a library's chain.
        let client_command = matches!(&cli.command, Command::Status(_) | Command::Profile { .. });
        match () {
            _ if demo_on_terminal => "warn",
            _ if client_command => "info,kube_client=off",
            _ => "info",
        }
        .to_string()
    });
    logging::init(&level, cli.log_json);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async move {
        match cli.command {
            Command::Up(args) => run_up(*args, launched).await,
            // Handled before the runtime started.
            Command::Kubelet { .. } => Ok(()),
            Command::Status(args) => status::run(args).await,
            Command::Profile { what } => profile::run(what).await,
            Command::Server(args) => run_server(args).await,
            Command::ControllerManager(args) => controller_manager::run(*args).await,
            Command::Provider { what } => provider::run(what).await,
            Command::Bench { what } => bench::run(what).await,
            Command::AdmissionWebhook(args) => admission_webhook::run(args).await,
            Command::DependencyWatchdog { what } => dependency_watchdog::run(what).await,
            Command::Etcd(what) => etcd_backup_restore::run(what).await,
            Command::Crds(args) => {
                let mut docs = vec![
                    api::crds_yaml(),
                    gardener::crds_yaml(),
                    worker::crds_yaml(),
                    druid::crd::crds_yaml(),
                ];
                if args.cluster_api {
                    docs.push(capi_admission::crds_yaml());
                }
                let all = docs
                    .iter()
                    .map(|d| d.trim_end().to_string())
                    .collect::<Vec<_>>()
                    .join("\n---\n");
                status::write_stdout(&format!("{all}\n"))
            }
        }
    });
    // `trellis crds | head`: the reader left once it had what it wanted.
    // Rust ignores SIGPIPE, so the write failed with EPIPE instead of the
    // process being stopped; that is no error of ours, so exit quietly and
    // successfully (as ripgrep does) rather than print it.
    match result {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        other => other,
    }
}

/// Whether `e` comes from writing to a pipe whose reader has gone.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
