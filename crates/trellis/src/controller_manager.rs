//! `trellis controller-manager`: every controller with the local provider
//! in-process, against any API server, behind Lease leader election, with
//! `/metrics`, `/healthz` and `/readyz` on one listener. Also the wiring
//! `trellis up` reuses to run the same controllers next to its embedded API
//! server.
//!
//! Upstream runs two processes (machine-controller-manager and the
//! provider's machine-controller, each with its own lease and port); trellis
//! links both halves and the local provider into one process, so there is
//! one lease (`machine-controller-manager`) and one port (10258).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, TryFutureExt};
use mcm::controllers::Config;
use mcm::leader::{LeaderElector, LeaseTiming};
use mcm::metrics::Metrics;

/// How long in-flight reconciles may take to finish after a shutdown
/// signal before the process stops anyway. Every reconcile is idempotent,
/// so cutting one short loses nothing; the bound keeps Ctrl-C snappy.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Go-style durations (`90s`, `20m`, `2h`), as upstream's flags take them.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    api::parse_duration(s).ok_or_else(|| format!("invalid duration {s:?} (try 30s, 20m, 2h)"))
}

/// The controllers' settings as flags, named as upstream's (spec §7).
#[derive(clap::Args, Clone, Debug)]
pub struct ControllerFlags {
    /// The control namespace: machines, machine sets and deployments,
    /// classes, their secrets and the leader lease.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Machine sets and machine deployments reconciled at once.
    #[arg(long, default_value_t = 10)]
    pub concurrent_syncs: u16,
    /// Machines reconciled at once (the machine controller's
    /// --concurrent-syncs upstream).
    #[arg(long, default_value_t = 50)]
    pub machine_concurrent_syncs: u16,
    /// Machines a machine set may have above its deployment's surge before
    /// it is frozen.
    #[arg(long, default_value_t = 2)]
    pub safety_up: i64,
    /// How far below the freeze threshold a frozen set must fall to thaw.
    #[arg(long, default_value_t = 1)]
    pub safety_down: i64,
    /// How long a machine may take to join as a Ready node.
    #[arg(long, default_value = "20m", value_parser = parse_duration)]
    pub machine_creation_timeout: Duration,
    /// How long a machine may stay Unknown before it is Failed.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub machine_health_timeout: Duration,
    /// How long a drain may take before it is forced.
    #[arg(long, default_value = "2h", value_parser = parse_duration)]
    pub machine_drain_timeout: Duration,
    /// Evictions retried per pod before the drain gives up on it.
    #[arg(long, default_value_t = 360)]
    pub machine_max_evict_retries: u32,
    /// How long a drain waits for an evicted pod's volumes to detach.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub machine_pv_detach_timeout: Duration,
    /// Node condition types that make a node unhealthy when True
    /// (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub node_conditions: Option<Vec<String>>,
    /// Extra groups written into bootstrap token secrets.
    #[arg(long, default_value = "")]
    pub bootstrap_token_auth_extra_groups: String,
    /// How long to wait before retrying a creation that failed with
    /// ResourceExhausted.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub resource_exhausted_retry: Duration,
    /// How often VMs without machines are looked for and deleted.
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub machine_safety_orphan_vms_period: Duration,
    /// How often machine sets are checked for owning too many machines.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub machine_safety_overshooting_period: Duration,
    /// How often the control and target API servers are probed.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub machine_safety_apiserver_statuscheck_period: Duration,
    /// How long an API server may be unreachable before the machine
    /// controller freezes.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub machine_safety_apiserver_statuscheck_timeout: Duration,
    /// Machines of one deployment that may be failed for health at once
    /// (upstream: always 1).
    #[arg(long, default_value_t = 1)]
    pub machine_max_health_replacements: u32,
    /// The local provider's instance name: the cluster tag of its VMs and
    /// the owner of its VM records.
    #[arg(long, default_value = "trellis")]
    pub local_cluster_name: String,
}

impl ControllerFlags {
    pub fn config(&self, metrics: Arc<Metrics>) -> Config {
        let mut config = Config {
            namespace: self.namespace.clone(),
            safety_up: self.safety_up,
            safety_down: self.safety_down,
            max_health_replacements: self.machine_max_health_replacements,
            concurrent_syncs: self.concurrent_syncs.max(1),
            machine_concurrent_syncs: self.machine_concurrent_syncs.max(1),
            machine_safety_orphan_vms_period: self.machine_safety_orphan_vms_period,
            machine_safety_overshooting_period: self.machine_safety_overshooting_period,
            machine_safety_apiserver_statuscheck_period: self
                .machine_safety_apiserver_statuscheck_period,
            machine_safety_apiserver_statuscheck_timeout: self
                .machine_safety_apiserver_statuscheck_timeout,
            metrics,
            ..Config::default()
        };
        let m = &mut config.machine;
        m.creation_timeout = self.machine_creation_timeout;
        m.health_timeout = self.machine_health_timeout;
        m.drain_timeout = self.machine_drain_timeout;
        m.max_evict_retries = self.machine_max_evict_retries;
        m.pv_detach_timeout = self.machine_pv_detach_timeout;
        m.resource_exhausted_retry = self.resource_exhausted_retry;
        m.bootstrap_token_auth_extra_groups = self.bootstrap_token_auth_extra_groups.clone();
        if let Some(conditions) = &self.node_conditions {
            m.node_conditions = conditions.clone();
        }
        config
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Also run the cloud profile controllers (NamespacedCloudProfile
    /// rendering and shoot maintenance) against the control cluster; they
    /// need the core.gardener.cloud CRDs (`trellis crds`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub profile_controllers: bool,
    /// Cloud profile features beyond upstream (see `trellis server --help`).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = crate::PROFILE_EXTENSIONS)]
    pub profile_extensions: Vec<String>,
    /// Kubeconfig of the control cluster (machines, sets, deployments,
    /// classes, secrets, the VM inventory). Default: the target's.
    /// `inClusterConfig` (upstream's spelling): the pod's service account,
    /// as Gardener runs a shoot's machine-controller-manager.
    #[arg(long, value_name = "FILE|inClusterConfig")]
    pub control_kubeconfig: Option<PathBuf>,
    /// Kubeconfig of the target cluster (Nodes, Pods, volumes). Default:
    /// the control's; without either, in-cluster or $KUBECONFIG. `none`
    /// runs without a target cluster: machines are `Available` as soon as
    /// their VM exists, and no Node is drained, synced or watched.
    #[arg(long, value_name = "FILE|none")]
    pub target_kubeconfig: Option<PathBuf>,
    /// Run only while holding the `machine-controller-manager` Lease in the
    /// namespace (--leader-elect=false to run unconditionally).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,
    /// How long a lease is valid without renewal.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// Name of the Lease.
    #[arg(long, default_value = "machine-controller-manager")]
    pub leader_elect_resource_name: String,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:10258")]
    pub metrics_listen: SocketAddr,
    /// Also run Cluster API's controllers (cluster.x-k8s.io Machines with
    /// the TrellisConfig bootstrap and local infrastructure providers);
    /// they need its CRDs (`trellis crds --cluster-api`) and a target
    /// cluster.
    #[arg(long)]
    pub cluster_api: bool,
    /// Also run the workload controllers (Deployments, ReplicaSets,
    /// StatefulSets, Jobs, CronJobs, EndpointSlices) against the control
    /// cluster. Off by default: on a real cluster kube-controller-manager
    /// runs them, and two would fight over the same objects.
    #[arg(long)]
    pub workload_controllers: bool,
    #[command(flatten)]
    pub controllers: ControllerFlags,
    #[command(flatten)]
    pub drivers: crate::provider::DriverFlags,
}

/// The kubeconfig value that means the pod's own service account.
pub const IN_CLUSTER: &str = "inClusterConfig";

/// A kube client from a kubeconfig file, or from the pod's service
/// account for [`IN_CLUSTER`].
pub async fn client_from(path: &Path) -> anyhow::Result<kube::Client> {
    if path == Path::new(IN_CLUSTER) {
        let config = kube::Config::incluster()
            .context("inClusterConfig: no service account token or KUBERNETES_SERVICE_HOST")?;
        return kube::Client::try_from(config).context("an in-cluster client");
    }
    let kc = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading {}", path.display()))?;
    kube::Client::try_from(config).with_context(|| format!("a client for {}", path.display()))
}

/// The value of `--target-kubeconfig` that disables the target cluster
/// (upstream's spelling).
pub const NO_TARGET: &str = "none";

/// Where the clients come from: the control kubeconfig (or `None` for
/// in-cluster / $KUBECONFIG), and the target's — `None` for the control
/// cluster itself, or no target cluster at all.
#[derive(Debug, PartialEq)]
enum Kubeconfigs<'a> {
    Target {
        control: Option<&'a Path>,
        target: Option<&'a Path>,
    },
    NoTarget {
        control: Option<&'a Path>,
    },
}

/// Each flag falls back on the other (upstream's rule), except that
/// `--target-kubeconfig none` is not a file.
fn kubeconfigs(args: &Args) -> Kubeconfigs<'_> {
    let control = args.control_kubeconfig.as_deref();
    match args.target_kubeconfig.as_deref() {
        Some(p) if p == Path::new(NO_TARGET) => Kubeconfigs::NoTarget { control },
        target => {
            let control_path = control.or(target);
            Kubeconfigs::Target {
                control: control_path,
                target: target.or(control).filter(|t| Some(*t) != control_path),
            }
        }
    }
}

/// The control client, and the target client (`None` without a target
/// cluster).
async fn clients(args: &Args) -> anyhow::Result<(kube::Client, Option<kube::Client>)> {
    let (control_path, target_path, has_target) = match kubeconfigs(args) {
        Kubeconfigs::Target { control, target } => (control, target, true),
        Kubeconfigs::NoTarget { control } => (control, None, false),
    };
    let control = match control_path {
        Some(p) => client_from(p).await?,
        None => kube::Client::try_default()
            .await
            .context("no --control-kubeconfig, and no in-cluster config or $KUBECONFIG")?,
    };
    let target = match target_path {
        Some(p) => Some(client_from(p).await?),
        None if has_target => Some(control.clone()),
        None => None,
    };
    Ok((control, target))
}

/// The kubeconfig of the target cluster, whose server Cluster API's
/// LocalClusters name as their endpoint: the flag's file, else
/// `$KUBECONFIG`'s (in-cluster: none, and LocalClusters need one set).
fn capi_kubeconfig(args: &Args) -> Option<PathBuf> {
    match kubeconfigs(args) {
        Kubeconfigs::Target { control, target } => target.or(control).map(Path::to_path_buf),
        Kubeconfigs::NoTarget { .. } => None,
    }
    .or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from))
}

/// A shutdown trigger whose future every controller can hold a clone of.
pub fn shutdown_pair() -> (
    tokio::sync::oneshot::Sender<()>,
    Shared<BoxFuture<'static, ()>>,
) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    (tx, rx.map(|_| ()).boxed().shared())
}

/// Runs every controller with the local provider (its simulated nodes in
/// the target cluster, its VM inventory in the control cluster) until
/// `shutdown` resolves and the controllers have wound down. `target` is
/// `None` to run without a target cluster; the local provider's VMs still
/// boot simulated kubelets, which then register with the control cluster,
/// where the controllers never look at them. `drivers` may serve
/// out-of-tree providers over gRPC and leave the local one out
/// ([`crate::provider`]).
#[allow(clippy::too_many_arguments)]
pub async fn run_controllers(
    control: kube::Client,
    target: impl Into<Option<kube::Client>>,
    config: Config,
    profiles: Option<gcm::Config>,
    cluster_name: String,
    capi: Option<crate::capi_controllers::Options>,
    drivers: crate::provider::DriverFlags,
    shutdown: Shared<BoxFuture<'static, ()>>,
) -> anyhow::Result<()> {
    let target: Option<kube::Client> = target.into();
    let vm_cluster = target.clone().unwrap_or_else(|| control.clone());
    let started = crate::provider::start(
        &drivers,
        control.clone(),
        vm_cluster,
        &cluster_name,
        shutdown.clone(),
    )
    .await?;
    let (control_for_capi, target_for_capi, capi_shutdown) =
        (control.clone(), target.clone(), shutdown.clone());
    let machines = mcm::run::run(
        control.clone(),
        target,
        config,
        started.driver,
        shutdown.clone(),
    )
    .map(|r| r.context("running the machine controllers"));
    // The cloud profile controllers (NamespacedCloudProfile rendering,
    // shoot maintenance) live in the control cluster, next to the CRDs.
    let profiles = async {
        if let Some(c) = profiles {
            gcm::run(control, c, shutdown).await;
        }
        anyhow::Ok(())
    };
    // Cluster API needs the target cluster's Nodes.
    let capi = async {
        match (capi, &target_for_capi) {
            (Some(options), Some(target)) => {
                crate::capi_controllers::run(
                    control_for_capi,
                    target.clone(),
                    &cluster_name,
                    options,
                    capi_shutdown,
                )
                .await
            }
            _ => Ok(()),
        }
    };
    let result = tokio::try_join!(machines, profiles, capi).map(|_| ());
    if let Some(provider) = &started.local {
        provider.simulator().shutdown();
    }
    result
}

/// `/metrics`, `/healthz` and `/readyz`. Health is the process answering;
/// readiness is the controllers running on synced caches, so a standby
/// waiting for the lease is live but not ready.
pub fn telemetry_router(metrics: Arc<Metrics>) -> axum::Router {
    let scrape = metrics.clone();
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let m = scrape.clone();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        m.encode(),
                    )
                }
            }),
        )
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route("/livez", axum::routing::get(|| async { "ok" }))
        .route(
            "/readyz",
            axum::routing::get(move || {
                let m = metrics.clone();
                async move {
                    if m.is_ready() {
                        (StatusCode::OK, "ok").into_response()
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "controllers not running").into_response()
                    }
                }
            }),
        )
}

/// Serves the telemetry router on `addr` in the background; returns the
/// bound address.
pub async fn serve_telemetry(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr} for metrics"))?;
    let bound = listener.local_addr()?;
    let app = telemetry_router(metrics);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the metrics listener failed");
        }
    });
    Ok(bound)
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let metrics = Arc::new(Metrics::new());
    let (control, target) = clients(&args).await?;
    if target.is_none() {
        tracing::info!("running without a target cluster (--target-kubeconfig none)");
    }
    let addr = serve_telemetry(args.metrics_listen, metrics.clone()).await?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    let config = args.controllers.config(metrics.clone());
    let signal = crate::shutdown_signal().boxed().shared();

    let elector = if args.leader_elect {
        let timing = LeaseTiming {
            lease_duration: args.leader_elect_lease_duration,
            renew_deadline: args.leader_elect_renew_deadline,
            retry_period: args.leader_elect_retry_period,
        };
        timing.validate().map_err(anyhow::Error::msg)?;
        let elector = Arc::new(LeaderElector::new(
            control.clone(),
            &config.namespace,
            &args.leader_elect_resource_name,
            &mcm::leader::default_identity(),
            timing,
        ));
        tracing::info!(identity = elector.identity(), lease = %args.leader_elect_resource_name, "waiting to lead");
        tokio::select! {
            _ = elector.acquire() => {}
            _ = signal.clone() => {
                tracing::info!("stopped before acquiring the lease");
                return Ok(());
            }
        }
        Some(elector)
    } else {
        None
    };

    let (stop, shutdown) = shutdown_pair();
    let cluster = args.controllers.local_cluster_name.clone();
    let profiles = args.profile_controllers.then(|| gcm::Config {
        extensions: crate::profile_extensions(&args.profile_extensions),
        ..gcm::Config::default()
    });
    let capi = args.cluster_api.then(|| crate::capi_controllers::Options {
        endpoint: capi_kubeconfig(&args)
            .and_then(|p| crate::capi_controllers::endpoint_of_kubeconfig(&p)),
    });
    let workloads = args.workload_controllers.then(|| {
        workloads::run(
            control.clone(),
            workloads::Config::default(),
            shutdown.clone(),
        )
        .map_err(anyhow::Error::from)
    });
    let machines = run_controllers(
        control,
        target,
        config,
        profiles,
        cluster,
        capi,
        args.drivers.clone(),
        shutdown,
    );
    let mut controllers = tokio::spawn(async move {
        match workloads {
            Some(w) => tokio::try_join!(machines, w).map(|_| ()),
            None => machines.await,
        }
    });
    let lost = async {
        match &elector {
            Some(e) => e.hold().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        // Losing the lease ends the process at once, as upstream does: a
        // successor may be about to start, and nothing here may act after
        // that. Returning drops the runtime and with it every controller.
        lost = lost => {
            tracing::error!(error = %lost, "stopping: the leader lease is lost");
            return Err(lost.into());
        }
        finished = &mut controllers => {
            finished.context("the controllers panicked")??;
            anyhow::bail!("the controllers stopped unexpectedly");
        }
        _ = signal => {
            tracing::info!("shutting down");
        }
    }
    let _ = stop.send(());
    // Nothing renews the lease from here on: the controllers must be done
    // before it could expire.
    let grace = match &elector {
        Some(_) => SHUTDOWN_GRACE.min(args.leader_elect_renew_deadline),
        None => SHUTDOWN_GRACE,
    };
    match tokio::time::timeout(grace, &mut controllers).await {
        Ok(finished) => finished.context("the controllers panicked")??,
        Err(_) => {
            // Cut them short before the lease is released: no reconcile
            // may overlap a successor's.
            controllers.abort();
            tracing::warn!("in-flight reconciles did not finish in time");
        }
    }
    if let Some(e) = &elector {
        e.release().await;
    }
    tracing::info!("controllers stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Args {
        Cli::try_parse_from(std::iter::once("controller-manager").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn target_kubeconfig_none_disables_the_target() {
        let (c, t) = (Path::new("c.yaml"), Path::new("t.yaml"));
        let table: Vec<(&[&str], Kubeconfigs)> = vec![
            (
                &[],
                Kubeconfigs::Target {
                    control: None,
                    target: None,
                },
            ),
            (
                &["--control-kubeconfig", "c.yaml"],
                Kubeconfigs::Target {
                    control: Some(c),
                    target: None,
                },
            ),
            (
                &["--target-kubeconfig", "t.yaml"],
                Kubeconfigs::Target {
                    control: Some(t),
                    target: None,
                },
            ),
            (
                &[
                    "--control-kubeconfig",
                    "c.yaml",
                    "--target-kubeconfig",
                    "t.yaml",
                ],
                Kubeconfigs::Target {
                    control: Some(c),
                    target: Some(t),
                },
            ),
            (
                &["--target-kubeconfig", "none"],
                Kubeconfigs::NoTarget { control: None },
            ),
            (
                &["--target-kubeconfig=none", "--control-kubeconfig", "c.yaml"],
                Kubeconfigs::NoTarget { control: Some(c) },
            ),
        ];
        for (argv, want) in table {
            let args = parse(argv);
            assert_eq!(kubeconfigs(&args), want, "{argv:?}");
        }
    }
}
