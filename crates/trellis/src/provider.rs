//! Out-of-tree machine providers (seed 003 §2.2.2): the flags with which
//! `controller-manager` and `up` serve them over gRPC (`--driver-listen`,
//! `--local-provider`), the driver those two hand the machine controller,
//! and `trellis provider local`, the local provider as a process of its own
//! that connects to them.
//!
//! Without `--driver-listen` nothing changes: the local provider is linked
//! in and called directly. With it, the machine controller's driver is a
//! [`driver_grpc::Router`] that sends each call to the provider registered
//! for the class's `provider` (the linked local provider included, unless
//! `--local-provider=false` leaves `local` classes to a `trellis provider
//! local` process).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use driver_grpc::provider::{Options, Registration};
use driver_grpc::tls::{ClientTls, ServerTls};
use driver_grpc::{Router, RouterConfig};
use futures::future::{BoxFuture, Shared};
use provider_local::{LocalProvider, PROVIDER_NAME};

use crate::controller_manager::{client_from, parse_duration};

/// Where providers connect and which provider runs in-process.
#[derive(clap::Args, Clone, Debug)]
pub struct DriverFlags {
    /// Serve out-of-tree machine providers over gRPC (the driver protocol,
    /// crates/driver-grpc/proto) on HOST:PORT; `--driver-listen` alone is
    /// 127.0.0.1:5000, the seed's port. Providers register the
    /// MachineClass `provider` values they serve; a class whose provider is
    /// not registered waits (lastOperation says why) until one does or its
    /// creation timeout passes. A registered provider is handed its
    /// classes' secrets: beyond loopback, use TLS with client certificates.
    #[arg(long, value_name = "HOST:PORT", num_args = 0..=1,
          default_missing_value = "127.0.0.1:5000")]
    pub driver_listen: Option<SocketAddr>,
    /// Run the local provider in this process. `--local-provider=false`
    /// leaves `local` classes to a `trellis provider local` that registers
    /// over --driver-listen.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub local_provider: bool,
    /// TLS certificate (PEM) of --driver-listen.
    #[arg(long, value_name = "FILE", requires = "driver_tls_key")]
    pub driver_tls_cert: Option<PathBuf>,
    /// TLS key (PEM) of --driver-listen.
    #[arg(long, value_name = "FILE", requires = "driver_tls_cert")]
    pub driver_tls_key: Option<PathBuf>,
    /// Require providers to present a client certificate signed by this CA
    /// (PEM).
    #[arg(long, value_name = "FILE", requires = "driver_tls_cert")]
    pub driver_tls_client_ca: Option<PathBuf>,
    /// How long a provider may take to answer one driver call before it
    /// fails with DeadlineExceeded (and is retried).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub driver_call_timeout: Duration,
}

impl Default for DriverFlags {
    /// As today: the local provider in-process, no gRPC endpoint.
    fn default() -> Self {
        DriverFlags {
            driver_listen: None,
            local_provider: true,
            driver_tls_cert: None,
            driver_tls_key: None,
            driver_tls_client_ca: None,
            driver_call_timeout: driver_grpc::RouterConfig::default().call_timeout,
        }
    }
}

/// The machine controller's driver and what runs it.
pub struct Drivers {
    /// `None` when no provider can ever serve: the machine controller does
    /// not run.
    pub driver: Option<Arc<dyn driver::Driver>>,
    /// The in-process local provider, to stop its simulator at the end.
    pub local: Option<LocalProvider>,
}

/// Starts the in-process local provider (unless disabled) and the gRPC
/// endpoint (when asked for), serving until `shutdown`.
pub async fn start(
    flags: &DriverFlags,
    control: kube::Client,
    vm_cluster: kube::Client,
    cluster_name: &str,
    shutdown: Shared<BoxFuture<'static, ()>>,
) -> anyhow::Result<Drivers> {
    let local = match flags.local_provider {
        true => Some(
            LocalProvider::new(control, vm_cluster, cluster_name)
                .await
                .context("starting the local provider")?,
        ),
        false => None,
    };
    let driver: Option<Arc<dyn driver::Driver>> = match (flags.driver_listen, &local) {
        (None, Some(p)) => Some(Arc::new(p.clone())),
        (None, None) => {
            tracing::warn!(
                "--local-provider=false without --driver-listen: no provider can serve machines, so the machine controller does not run"
            );
            None
        }
        (Some(addr), local) => {
            let router = Router::new(RouterConfig {
                call_timeout: flags.driver_call_timeout,
            });
            if let Some(p) = local {
                router.serve_in_process(PROVIDER_NAME, Arc::new(p.clone()));
            }
            let tls = match (&flags.driver_tls_cert, &flags.driver_tls_key) {
                (Some(cert), Some(key)) => Some(ServerTls::from_files(
                    cert,
                    key,
                    flags.driver_tls_client_ca.as_deref(),
                )?),
                _ => None,
            };
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("listening on {addr} for machine providers"))?;
            let bound = listener.local_addr()?;
            tracing::info!(addr = %bound, tls = tls.is_some(), in_process = local.is_some(),
                "serving out-of-tree machine providers over gRPC");
            let served = router.clone();
            tokio::spawn(async move {
                if let Err(e) = driver_grpc::serve(served, listener, tls, shutdown).await {
                    tracing::error!(error = %e, "the machine provider endpoint failed");
                }
            });
            Some(Arc::new(router))
        }
    };
    Ok(Drivers { driver, local })
}

#[derive(clap::Subcommand)]
pub enum ProviderCommand {
    /// Run the local provider (VMs are simulated nodes, the VM inventory
    /// ConfigMaps in the control cluster) as its own process, serving
    /// `local` MachineClasses for a machine-controller-manager started
    /// with --driver-listen (and --local-provider=false).
    Local(LocalArgs),
}

#[derive(clap::Args)]
pub struct LocalArgs {
    /// The machine-controller-manager's --driver-listen address.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:5000")]
    mcm_endpoint: String,
    /// Kubeconfig of the control cluster, where the VM inventory lives.
    /// Default: the target's; without either, in-cluster or $KUBECONFIG.
    #[arg(long, value_name = "FILE")]
    control_kubeconfig: Option<PathBuf>,
    /// Kubeconfig of the target cluster, where the VMs' nodes register.
    /// Default: the control's.
    #[arg(long, value_name = "FILE")]
    target_kubeconfig: Option<PathBuf>,
    /// The provider instance: the owner of its VM records and the cluster
    /// tag of VMs whose class names none. The default is the in-process
    /// provider's, so either can take over the other's VMs. Run one
    /// process per name: two would each create VMs for the same machines.
    #[arg(long, default_value = "trellis")]
    local_cluster_name: String,
    /// The MachineClass `provider` value served.
    #[arg(long, default_value = PROVIDER_NAME)]
    provider: String,
    /// CA (PEM) of the machine-controller-manager's certificate; connects
    /// with TLS.
    #[arg(long, value_name = "FILE")]
    mcm_ca: Option<PathBuf>,
    /// Client certificate (PEM), for a machine-controller-manager that
    /// requires one.
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "mcm_ca"])]
    tls_cert: Option<PathBuf>,
    /// Client key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The name the machine-controller-manager's certificate is checked
    /// for (default: the endpoint's host).
    #[arg(long, value_name = "NAME", requires = "mcm_ca")]
    tls_server_name: Option<String>,
}

pub async fn run(command: ProviderCommand) -> anyhow::Result<()> {
    let ProviderCommand::Local(args) = command;
    // Each kubeconfig falls back on the other, as for controller-manager.
    let control = match args
        .control_kubeconfig
        .as_ref()
        .or(args.target_kubeconfig.as_ref())
    {
        Some(p) => client_from(p).await?,
        None => kube::Client::try_default()
            .await
            .context("no --control-kubeconfig, and no in-cluster config or $KUBECONFIG")?,
    };
    let target = match &args.target_kubeconfig {
        Some(p) if args.control_kubeconfig.is_some() => client_from(p).await?,
        _ => control.clone(),
    };
    let mut options = Options::new(args.mcm_endpoint.clone());
    if let Some(ca) = &args.mcm_ca {
        let mut tls = ClientTls::from_file(ca)?;
        if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
            tls = tls.with_identity_files(cert, key)?;
        }
        if let Some(name) = &args.tls_server_name {
            tls = tls.with_domain(name.clone());
        }
        options = options.with_tls(tls);
    }
    let provider = LocalProvider::new(control, target, &args.local_cluster_name)
        .await
        .context("starting the local provider")?;
    tracing::info!(endpoint = %args.mcm_endpoint, provider = %args.provider,
        instance = %args.local_cluster_name, "serving the local provider out of process");
    let served = driver_grpc::provider::serve(
        Arc::new(provider.clone()),
        Registration::new([args.provider.clone()]),
        options,
        crate::shutdown_signal(),
    )
    .await;
    provider.simulator().shutdown();
    served?;
    tracing::info!("local provider stopped");
    Ok(())
}
