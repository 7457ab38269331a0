//! `trellis dependency-watchdog prober|weeder --config-file FILE`: each half
//! of dependency-watchdog as its own controller manager against the seed,
//! with upstream's flags (spec §0) and config files, and the wiring `trellis
//! up` uses to run both in-process with the default configs of
//! `examples/dwd/`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use futures::FutureExt;
use mcm::leader::{LeaderElector, LeaseTiming};
use tokio_util::sync::CancellationToken;

use crate::controller_manager::parse_duration;

/// `trellis up`'s prober config: every shoot's machine-controller-manager,
/// with kube-controller-manager and cluster-autoscaler optional (trellis
/// runs neither).
pub const DEFAULT_PROBER_CONFIG: &str = include_str!("../../../examples/dwd/prober-config.yaml");
/// `trellis up`'s weeder config: upstream's example.
pub const DEFAULT_WEEDER_CONFIG: &str = include_str!("../../../examples/dwd/weeder-config.yaml");

#[derive(clap::Subcommand)]
pub enum Command {
    /// Probe every shoot's API server and node leases; scale its
    /// dependants (machine-controller-manager, ...) down when the seed
    /// loses its nodes, and back up when they return.
    // Boxed: upstream's many flags would make every `trellis` command as
    // large.
    Prober(Box<Args>),
    /// Delete crash-looping dependant pods when the service they depend on
    /// turns ready again.
    Weeder(Box<Args>),
}

/// Upstream's flags (`cmd/command.go`).
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// The config file (upstream's format; see examples/dwd/).
    #[arg(long, value_name = "FILE")]
    pub config_file: PathBuf,
    /// Kubeconfig of the seed (default: in-cluster, then $KUBECONFIG).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Reconciles at once. Accepted as upstream's; a reconcile here only
    /// updates the in-memory map of probers, so there is nothing to spread.
    #[arg(long, default_value_t = 1)]
    pub concurrent_reconciles: u32,
    /// Queries per second to the seed (0: 5).
    #[arg(long, default_value_t = 5.0)]
    pub kube_api_qps: f64,
    /// Burst of queries to the seed (0: 10).
    #[arg(long, default_value_t = 10)]
    pub kube_api_burst: u32,
    /// Where /metrics is served (`:PORT` for every interface, `0` for off).
    #[arg(long, default_value = ":9643", value_parser = parse_bind)]
    pub metrics_bind_addr: Bind,
    /// Where /healthz and /readyz are served (`0` for off).
    #[arg(long, default_value = ":9644", value_parser = parse_bind)]
    pub health_bind_addr: Bind,
    /// Accepted as upstream's; trellis serves no pprof.
    #[arg(long, default_value = ":8081")]
    pub pprof_bind_addr: String,
    /// Act only while holding the Lease `dwd-prober-leader-election` (or
    /// `dwd-weeder-leader-election`).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub enable_leader_election: bool,
    /// The namespace of the leader Lease.
    #[arg(long, default_value = "garden")]
    pub leader_election_namespace: String,
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// Accepted for upstream's deployments; use the global --log-level.
    #[arg(long, hide = true)]
    pub zap_log_level: Option<String>,
}

/// A bind address in Go's spelling: `:9643` is every interface, `0` off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bind {
    Off,
    At(SocketAddr),
}

fn parse_bind(s: &str) -> Result<Bind, String> {
    let s = s.trim();
    if s.is_empty() || s == "0" {
        return Ok(Bind::Off);
    }
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_string()
    };
    full.parse::<SocketAddr>()
        .map(Bind::At)
        .map_err(|e| format!("invalid address {s:?}: {e}"))
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    let (args, prober) = match command {
        Command::Prober(a) => (*a, true),
        Command::Weeder(a) => (*a, false),
    };
    let text = std::fs::read_to_string(&args.config_file)
        .with_context(|| format!("reading {}", args.config_file.display()))?;
    // Both halves refuse to start on a config they cannot use.
    let half = if prober {
        Half::Prober(
            dwd::ProberConfig::from_yaml(&text)
                .with_context(|| format!("{}", args.config_file.display()))?,
        )
    } else {
        Half::Weeder(
            dwd::WeederConfig::from_yaml(&text)
                .with_context(|| format!("{}", args.config_file.display()))?,
        )
    };
    let config = match &args.kubeconfig {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .with_context(|| format!("reading {}", p.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer()
            .await
            .context("no --kubeconfig, and no in-cluster config or $KUBECONFIG")?,
    };
    let seed = dwd::ratelimit::client(config, args.kube_api_qps, args.kube_api_burst)?;
    let metrics = Arc::new(dwd::Metrics::new());
    serve(args.metrics_bind_addr, metrics_router(metrics.clone())).await?;
    serve(args.health_bind_addr, health_router(metrics.clone())).await?;

    let signal = crate::shutdown_signal().boxed().shared();
    let lease = if prober {
        "dwd-prober-leader-election"
    } else {
        "dwd-weeder-leader-election"
    };
    let elector = if args.enable_leader_election {
        let timing = LeaseTiming {
            lease_duration: args.leader_elect_lease_duration,
            renew_deadline: args.leader_elect_renew_deadline,
            retry_period: args.leader_elect_retry_period,
        };
        timing.validate().map_err(anyhow::Error::msg)?;
        let elector = Arc::new(LeaderElector::new(
            seed.clone(),
            &args.leader_election_namespace,
            lease,
            &mcm::leader::default_identity(),
            timing,
        ));
        tracing::info!(identity = elector.identity(), lease, "waiting to lead");
        tokio::select! {
            _ = elector.acquire() => {}
            _ = signal.clone() => return Ok(()),
        }
        Some(elector)
    } else {
        None
    };
    let shutdown = CancellationToken::new();
    let mut controllers = tokio::spawn(start(seed, half, metrics, shutdown.clone()));
    let lost = async {
        match &elector {
            Some(e) => e.hold().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        // As upstream: a lost lease ends the process at once.
        lost = lost => {
            tracing::error!(error = %lost, "stopping: the leader lease is lost");
            return Err(lost.into());
        }
        finished = &mut controllers => {
            finished.context("dependency-watchdog panicked")?;
            anyhow::bail!("dependency-watchdog stopped unexpectedly");
        }
        _ = signal => tracing::info!("shutting down"),
    }
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), controllers).await;
    if let Some(e) = &elector {
        e.release().await;
    }
    Ok(())
}

enum Half {
    Prober(dwd::ProberConfig),
    Weeder(dwd::WeederConfig),
}

async fn start(
    seed: kube::Client,
    half: Half,
    metrics: Arc<dwd::Metrics>,
    shutdown: CancellationToken,
) {
    match half {
        Half::Prober(config) => {
            let manager = dwd::run::prober_manager(seed.clone(), config, metrics, &shutdown);
            dwd::run::run_prober(seed, manager, shutdown).await;
        }
        Half::Weeder(config) => {
            let manager = dwd::run::weeder_manager(seed.clone(), config, metrics, &shutdown);
            dwd::run::run_weeder(seed, manager, shutdown).await;
        }
    }
}

/// Both halves next to `trellis up`'s controllers, with the default
/// configs, until `shutdown`. `up` is the only process of its data
/// directory, so no leader election; the metrics join `--metrics-listen`
/// ([`serve_up_telemetry`]).
pub async fn run_in_up(
    seed: kube::Client,
    metrics: Arc<dwd::Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let prober =
        dwd::ProberConfig::from_yaml(DEFAULT_PROBER_CONFIG).context("the default prober config")?;
    let weeder =
        dwd::WeederConfig::from_yaml(DEFAULT_WEEDER_CONFIG).context("the default weeder config")?;
    let token = CancellationToken::new();
    let cancel = token.clone();
    let stopper = tokio::spawn(async move {
        shutdown.await;
        cancel.cancel();
    });
    tokio::join!(
        start(
            seed.clone(),
            Half::Prober(prober),
            metrics.clone(),
            token.clone()
        ),
        start(seed, Half::Weeder(weeder), metrics, token),
    );
    stopper.abort();
    Ok(())
}

/// `up`'s telemetry listener: the controllers' `/metrics`, `/healthz` and
/// `/readyz`, and dependency-watchdog's metrics under
/// `/dependency-watchdog/metrics` (both registries name a metric alike
/// nowhere, but one path per registry keeps each exposition whole).
pub async fn serve_up_telemetry(
    addr: SocketAddr,
    controllers: Arc<mcm::metrics::Metrics>,
    watchdog: Arc<dwd::Metrics>,
) -> anyhow::Result<SocketAddr> {
    let router = crate::controller_manager::telemetry_router(controllers)
        .nest("/dependency-watchdog", metrics_router(watchdog));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr} for metrics"))?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "the metrics listener failed");
        }
    });
    Ok(bound)
}

/// `/metrics`.
pub fn metrics_router(metrics: Arc<dwd::Metrics>) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let m = metrics.clone();
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
}

/// `/healthz` (the process answers) and `/readyz` (the watch is synced).
fn health_router(metrics: Arc<dwd::Metrics>) -> axum::Router {
    axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/readyz",
            axum::routing::get(move || {
                let m = metrics.clone();
                async move {
                    if m.is_ready() {
                        (StatusCode::OK, "ok").into_response()
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not synced").into_response()
                    }
                }
            }),
        )
}

async fn serve(bind: Bind, router: axum::Router) -> anyhow::Result<()> {
    let Bind::At(addr) = bind else {
        return Ok(());
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    tracing::info!(addr = %listener.local_addr()?, "serving");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "a dependency-watchdog listener failed");
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[test]
    fn upstream_flags_parse_with_upstream_defaults() {
        let cli = Cli::try_parse_from([
            "dwd",
            "prober",
            "--config-file=/etc/dependency-watchdog/config/dep-config.yaml",
            "--kube-api-qps=20.0",
            "--kube-api-burst=100",
            "--zap-log-level=INFO",
            "--concurrent-reconciles=1",
            "--enable-leader-election=true",
        ])
        .expect("the upstream deployment's arguments parse");
        let Command::Prober(a) = cli.command else {
            panic!("prober")
        };
        assert_eq!(a.kube_api_qps, 20.0);
        assert_eq!(a.kube_api_burst, 100);
        assert!(a.enable_leader_election);
        assert_eq!(a.leader_election_namespace, "garden");
        assert_eq!(a.leader_elect_lease_duration, Duration::from_secs(15));
        assert_eq!(
            a.metrics_bind_addr,
            Bind::At("0.0.0.0:9643".parse().unwrap())
        );
        assert_eq!(
            a.health_bind_addr,
            Bind::At("0.0.0.0:9644".parse().unwrap())
        );
        let cli = Cli::try_parse_from([
            "dwd",
            "weeder",
            "--config-file",
            "f",
            "--metrics-bind-addr",
            "0",
        ])
        .unwrap();
        let Command::Weeder(a) = cli.command else {
            panic!("weeder")
        };
        assert_eq!(a.metrics_bind_addr, Bind::Off);
        assert!(!a.enable_leader_election);
    }

    #[test]
    fn the_default_configs_parse() {
        let p = dwd::ProberConfig::from_yaml(DEFAULT_PROBER_CONFIG).expect("prober");
        assert_eq!(
            p.kube_config_secret_name,
            "shoot-access-dependency-watchdog-probe"
        );
        let optional: Vec<(&str, bool)> = p
            .dependent_resource_infos
            .iter()
            .map(|d| (d.reference.name.as_str(), d.optional))
            .collect();
        assert_eq!(
            optional,
            [
                ("kube-controller-manager", true),
                ("machine-controller-manager", false),
                ("cluster-autoscaler", true)
            ]
        );
        dwd::WeederConfig::from_yaml(DEFAULT_WEEDER_CONFIG).expect("weeder");
    }
}
