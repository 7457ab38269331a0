//! Each shoot's own Kubernetes API and machine controllers, in-process.
//!
//! A [`ShootCluster`] is an embedded API server (`apiserver::cluster`) over
//! its own store (durable under `<data>/shoots/<technicalID>/store`, or
//! memory), served with TLS, authentication and its own PKI on 127.0.0.1,
//! plus the machine controllers of
//! the shoot's control namespace (`mcm`, control client = the seed, target
//! client = this API) with a [`LocalProvider`] whose simulated kubelets
//! register Nodes here. Upstream deploys a kube-apiserver and MCM per shoot
//! into the control namespace; here both are tasks of this process.
//!
//! Every shoot runs on a Tokio runtime of its own, on its own thread. The
//! API server's background tasks (garbage collector, namespace lifecycle,
//! watch hubs) have no stop signal; dropping the runtime ends them, which
//! releases the store and its directory lock, so a shoot can be started
//! again in the same process and its data directory removed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use apiserver::cluster::{BoxError, Cluster, ClusterError};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use provider_local::LocalProvider;
use tokio::sync::oneshot;

use crate::build::{ShootAccess, kubeconfig};
use crate::mcm_deployment;

/// How long the controllers and then the API server get to wind down.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long a crashed set of machine controllers waits before it restarts.
const CONTROLLER_RESTART: Duration = Duration::from_secs(2);
/// Worker threads of one shoot's runtime.
const SHOOT_THREADS: usize = 2;

/// Why a shoot's API server could not start or its data not be removed,
/// named after the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum ShootClusterError {
    #[error("starting the thread or runtime of shoot {id} failed: {source}")]
    RuntimeFailed {
        id: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the thread of shoot {id} ended before its API server started")]
    ThreadEnded { id: String },
    #[error("preparing the PKI of shoot {id} failed: {source}")]
    PkiFailed {
        id: String,
        #[source]
        source: BoxError,
    },
    #[error("connecting the API server of shoot {id} to its etcd at {endpoint} failed: {source}")]
    EtcdFailed {
        id: String,
        endpoint: String,
        #[source]
        source: BoxError,
    },
    #[error("binding the API server of shoot {id} failed: {source}")]
    BindFailed {
        id: String,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the API server of {id} failed: {source}")]
    StartFailed {
        id: String,
        #[source]
        source: ClusterError,
    },
    #[error("building a client of shoot {id} failed: {source}")]
    ClientFailed {
        id: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("removing {path} failed: {source}")]
    RemoveDataFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where a shoot's API server keeps its objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShootStore {
    /// A store of its own: durable under `<data>/shoots/<technicalID>/store`,
    /// or in memory.
    Own,
    /// The shoot's etcd-main, at this client URL ([`crate::etcd_main`]).
    Etcd { endpoint: String },
}

/// Settings every shoot's API server and controllers share.
#[derive(Clone)]
pub struct ShootClusterConfig {
    /// `<data>/shoots/<technicalID>` holds each shoot; `None` keeps stores
    /// in memory (PKI in a temporary directory).
    pub data_dir: Option<PathBuf>,
    /// The seed's client: the machine controllers' control cluster.
    pub seed: kube::Client,
    /// The machine controllers' settings; the namespace is set per shoot.
    pub machine_controllers: mcm::controllers::Config,
    /// The simulated kubelets' timing.
    pub simulator: nodesim::SimConfig,
    /// Where the machine controllers run: here, or in the
    /// `machine-controller-manager` Deployment's pod with this process's
    /// local provider attached over gRPC ([`mcm_deployment::Mode`]).
    pub mcm_mode: mcm_deployment::Mode,
}

/// A running shoot: where its API is, and the handle that stops it.
pub struct ShootCluster {
    technical_id: String,
    access: ShootAccess,
    kubeconfig: String,
    client: kube::Client,
    stop: parking_lot::Mutex<Option<oneshot::Sender<()>>>,
    thread: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl ShootCluster {
    pub fn technical_id(&self) -> &str {
        &self.technical_id
    }

    /// URL, CA and admin credentials.
    pub fn access(&self) -> &ShootAccess {
        &self.access
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &str {
        &self.kubeconfig
    }

    /// An admin client of the shoot's API (on the caller's runtime).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Stops controllers, then the API server, and waits until the
    /// shoot's runtime is gone (its store closed).
    async fn stop(&self) {
        if let Some(tx) = self.stop.lock().take() {
            let _ = tx.send(());
        }
        let thread = self.thread.lock().take();
        if let Some(t) = thread {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

/// The running shoots of this gardenlet, by technical ID.
#[derive(Clone)]
pub struct ShootClusters {
    config: ShootClusterConfig,
    running: Arc<tokio::sync::Mutex<HashMap<String, Arc<ShootCluster>>>>,
}

impl ShootClusters {
    pub fn new(config: ShootClusterConfig) -> ShootClusters {
        ShootClusters {
            config,
            running: Arc::default(),
        }
    }

    /// Where a shoot's files live (`None` in memory mode).
    pub fn data_dir(&self, technical_id: &str) -> Option<PathBuf> {
        self.config
            .data_dir
            .as_ref()
            .map(|d| d.join("shoots").join(technical_id))
    }

    /// The running shoot, if any.
    pub async fn get(&self, technical_id: &str) -> Option<Arc<ShootCluster>> {
        self.running.lock().await.get(technical_id).cloned()
    }

    /// The shoot's API server and controllers, started if they do not run
    /// (on the same store as before, so its state survives restarts).
    pub async fn ensure(
        &self,
        technical_id: &str,
        store: &ShootStore,
    ) -> Result<Arc<ShootCluster>, ShootClusterError> {
        let mut running = self.running.lock().await;
        if let Some(c) = running.get(technical_id) {
            return Ok(c.clone());
        }
        let cluster = Arc::new(
            start(
                &self.config,
                technical_id,
                self.data_dir(technical_id),
                store.clone(),
            )
            .await?,
        );
        running.insert(technical_id.to_string(), cluster.clone());
        Ok(cluster)
    }

    /// Stops the shoot's controllers and API server, if they run.
    pub async fn stop(&self, technical_id: &str) {
        let cluster = self.running.lock().await.remove(technical_id);
        if let Some(c) = cluster {
            c.stop().await;
            tracing::info!(
                shoot = technical_id,
                "stopped the shoot's API server and controllers"
            );
        }
    }

    /// Stops every shoot (gardenlet's shutdown).
    pub async fn stop_all(&self) {
        let all: Vec<_> = self.running.lock().await.drain().collect();
        for (_, c) in all {
            c.stop().await;
        }
    }

    /// Removes the shoot's data directory; it must be stopped.
    pub fn remove_data(&self, technical_id: &str) -> Result<(), ShootClusterError> {
        let Some(dir) = self.data_dir(technical_id) else {
            return Ok(());
        };
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(ShootClusterError::RemoveDataFailed { path: dir, source }),
        }
    }
}

/// What the shoot's thread reports once its API server listens.
struct Started {
    access: ShootAccess,
    /// How to reach the API from another runtime (the client the thread
    /// uses lives on the shoot's runtime).
    kube_config: kube::Config,
}

async fn start(
    config: &ShootClusterConfig,
    technical_id: &str,
    dir: Option<PathBuf>,
    store: ShootStore,
) -> Result<ShootCluster, ShootClusterError> {
    let id = || technical_id.to_string();
    let (ready_tx, ready_rx) = oneshot::channel::<Result<Started, ShootClusterError>>();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let setup = Setup {
        id: id(),
        dir,
        store,
        config: config.clone(),
    };
    let thread = std::thread::Builder::new()
        .name(format!("shoot-{technical_id}"))
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(SHOOT_THREADS)
                .thread_name("shoot-worker")
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(source) => {
                    let id = setup.id.clone();
                    let _ = ready_tx.send(Err(ShootClusterError::RuntimeFailed { id, source }));
                    return;
                }
            };
            rt.block_on(run_shoot(setup, ready_tx, stop_rx));
            // Ends the API server's background tasks and with them the
            // store.
            rt.shutdown_timeout(STOP_GRACE);
        })
        .map_err(|source| ShootClusterError::RuntimeFailed { id: id(), source })?;
    let started = match ready_rx.await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
            return Err(e);
        }
        Err(_) => return Err(ShootClusterError::ThreadEnded { id: id() }),
    };
    let kubeconfig = kubeconfig(technical_id, &started.access);
    let client = kube::Client::try_from(started.kube_config).map_err(|e| {
        ShootClusterError::ClientFailed {
            id: id(),
            source: Box::new(e),
        }
    })?;
    tracing::info!(shoot = technical_id, url = %started.access.url, "shoot API server started");
    Ok(ShootCluster {
        technical_id: id(),
        access: started.access,
        kubeconfig,
        client,
        stop: parking_lot::Mutex::new(Some(stop_tx)),
        thread: parking_lot::Mutex::new(Some(thread)),
    })
}

struct Setup {
    id: String,
    dir: Option<PathBuf>,
    store: ShootStore,
    config: ShootClusterConfig,
}

type StopSignal = Shared<BoxFuture<'static, ()>>;

fn stop_pair() -> (oneshot::Sender<()>, StopSignal) {
    let (tx, rx) = oneshot::channel::<()>();
    (tx, rx.map(|_| ()).boxed().shared())
}

/// The shoot's life on its own runtime: start the API server, report,
/// run the machine controllers, and on the stop signal wind down in order
/// (controllers first, so none sees its API vanish mid-reconcile).
async fn run_shoot(
    setup: Setup,
    ready: oneshot::Sender<Result<Started, ShootClusterError>>,
    stop: oneshot::Receiver<()>,
) {
    // Memory mode keeps the PKI in a directory that lives as long as the
    // shoot runs.
    let temp = match &setup.dir {
        Some(_) => None,
        None => match tempfile::tempdir() {
            Ok(t) => Some(t),
            Err(e) => {
                let id = setup.id.clone();
                let _ = ready.send(Err(ShootClusterError::PkiFailed {
                    id,
                    source: e.into(),
                }));
                return;
            }
        },
    };
    let pki_dir = match (&setup.dir, &temp) {
        (Some(d), _) => d.join("pki"),
        (None, Some(t)) => t.path().join("pki"),
        (None, None) => return,
    };
    let cluster = match start_api(&setup.id, setup.dir.as_deref(), &setup.store, &pki_dir).await {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let pki = cluster.pki();
    let access = ShootAccess {
        url: cluster.url().to_string(),
        ca_pem: pki.map(|p| p.ca_cert_pem.clone()),
        client_cert_pem: pki.map(|p| p.admin_cert_pem.clone()),
        client_key_pem: pki.map(|p| p.admin_key_pem.clone()),
    };
    let target = cluster.client();
    let kube_config = cluster.kube_config().clone();
    let _ = ready.send(Ok(Started {
        access,
        kube_config,
    }));

    let (controllers_stop, controllers_shutdown) = stop_pair();
    let mut controllers = tokio::spawn(run_controllers(
        setup.config.clone(),
        setup.id.clone(),
        target,
        controllers_shutdown,
    ));
    // A dropped sender (gardenlet gone) stops the shoot too.
    let _ = stop.await;
    let _ = controllers_stop.send(());
    if tokio::time::timeout(STOP_GRACE, &mut controllers)
        .await
        .is_err()
    {
        controllers.abort();
        tracing::warn!(shoot = %setup.id, "the shoot's controllers did not stop in time");
    }
    if let Err(e) = cluster.stop(STOP_GRACE).await {
        tracing::warn!(shoot = %setup.id, error = %e, "the shoot's API server did not stop cleanly");
    }
}

/// Ensures the PKI, binds the listener (on the port of the last run when
/// it is free, so kubeconfigs handed out before stay valid) and starts the
/// API server with authentication over the shoot's store. Its client
/// retries as kube-rs does by default: it serves the shoot's controllers,
/// not a test.
async fn start_api(
    id: &str,
    dir: Option<&Path>,
    store: &ShootStore,
    pki_dir: &Path,
) -> Result<Cluster, ShootClusterError> {
    let pki = apiserver::Pki::ensure(pki_dir, &[]).map_err(|e| ShootClusterError::PkiFailed {
        id: id.to_string(),
        source: e.into(),
    })?;
    let listener = bind(dir)
        .await
        .map_err(|source| ShootClusterError::BindFailed {
            id: id.to_string(),
            source,
        })?;
    let config = apiserver::Config {
        auth: Some(apiserver::AuthConfig::new(
            pki.service_account_key_pem.clone(),
        )),
        ..apiserver::Config::default()
    };
    let mut builder = Cluster::builder()
        .config(config)
        .tls(pki)
        .listener(listener)
        .client_retries(true);
    match (store, dir) {
        (ShootStore::Etcd { endpoint }, _) => {
            let etcd = store_etcd::EtcdStore::connect(store_etcd::EtcdOptions {
                client: etcdv3::Config::from_list(endpoint),
                prefix: String::new(),
            })
            .await
            .map_err(|e| ShootClusterError::EtcdFailed {
                id: id.to_string(),
                endpoint: endpoint.clone(),
                source: e.into(),
            })?;
            builder = builder.store(Arc::new(etcd));
        }
        (ShootStore::Own, Some(d)) => builder = builder.file_store(d.join("store")),
        (ShootStore::Own, None) => {}
    }
    builder
        .start()
        .await
        .map_err(|source| ShootClusterError::StartFailed {
            id: id.to_string(),
            source,
        })
}

/// The shoot's listener on 127.0.0.1: the port recorded in `<dir>/port`
/// when it is free, any port otherwise (recorded for the next run).
async fn bind(dir: Option<&Path>) -> std::io::Result<tokio::net::TcpListener> {
    let port_file = dir.map(|d| d.join("port"));
    let previous = port_file
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|s| s.trim().parse::<u16>().ok());
    let listener = match previous {
        Some(port) => match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => l,
            Err(_) => tokio::net::TcpListener::bind("127.0.0.1:0").await?,
        },
        None => tokio::net::TcpListener::bind("127.0.0.1:0").await?,
    };
    if let (Some(d), Some(f)) = (dir, port_file) {
        std::fs::create_dir_all(d)?;
        std::fs::write(f, listener.local_addr()?.port().to_string())?;
    }
    Ok(listener)
}

/// The machine controllers of the control namespace `id`, with a local
/// provider whose kubelets register in the shoot (`target`); restarted
/// after a pause if they fail, until `shutdown`. They run only while the
/// Deployment `machine-controller-manager` asks for them
/// ([`mcm_deployment`]); the provider, and with it the simulated VMs,
/// runs throughout, as a cloud's VMs do while their MCM is scaled down.
async fn run_controllers(
    config: ShootClusterConfig,
    id: String,
    target: kube::Client,
    shutdown: StopSignal,
) {
    let (wanted_tx, wanted) = tokio::sync::watch::channel(None);
    let follower = tokio::spawn(mcm_deployment::follow(
        config.seed.clone(),
        id.clone(),
        wanted_tx,
    ));
    loop {
        let attempt = async {
            let provider = LocalProvider::with_config(
                config.seed.clone(),
                target.clone(),
                &id,
                config.simulator.clone(),
            )
            .await?;
            let driver: Arc<dyn driver::Driver> = Arc::new(provider.clone());
            let result = match config.mcm_mode {
                mcm_deployment::Mode::InProcess => {
                    follow_scale(&config, &id, &target, driver, wanted.clone(), &shutdown).await
                }
                mcm_deployment::Mode::Pod => {
                    serve_provider(&config.seed, &id, driver, &shutdown).await
                }
            };
            provider.simulator().shutdown();
            result
        };
        // mcm winds down on `shutdown` by itself; racing it here would cut
        // its graceful stop short.
        let result = attempt.await;
        if shutdown.clone().now_or_never().is_some() {
            break;
        }
        match result {
            Ok(()) => {
                tracing::warn!(shoot = %id, "the shoot's machine controllers stopped; restarting")
            }
            Err(e) => {
                tracing::warn!(shoot = %id, error = %e, "the shoot's machine controllers failed; restarting")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(CONTROLLER_RESTART) => {}
            _ = shutdown.clone() => break,
        }
    }
    follower.abort();
}

/// Attaches the shoot's local provider to the machine-controller-manager
/// pod: registers over gRPC at the `machine-controller-manager` Service
/// (its cluster IP: this process is outside the seed's DNS) and serves its
/// driver calls, reconnecting while the pod restarts or is scaled to 0,
/// until `shutdown`.
async fn serve_provider(
    seed: &kube::Client,
    id: &str,
    driver: Arc<dyn driver::Driver>,
    shutdown: &StopSignal,
) -> Result<(), BoxError> {
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(seed.clone(), id);
    let ip = loop {
        let ip = services
            .get_opt(mcm_deployment::NAME)
            .await?
            .and_then(|s| s.spec)
            .and_then(|s| s.cluster_ip)
            .filter(|ip| !ip.is_empty() && ip != "None");
        if let Some(ip) = ip {
            break ip;
        }
        tokio::select! {
            _ = tokio::time::sleep(CONTROLLER_RESTART) => {}
            _ = shutdown.clone() => return Ok(()),
        }
    };
    let endpoint = format!("{ip}:{}", mcm_deployment::DRIVER_PORT);
    tracing::info!(shoot = %id, %endpoint, "attaching the local provider to the shoot's machine-controller-manager");
    driver_grpc::provider::serve(
        driver,
        driver_grpc::provider::Registration::new([provider_local::PROVIDER_NAME]),
        // The pod starts with the shoot: reconnect soon, so machines do not
        // wait long for their provider.
        driver_grpc::provider::Options {
            max_backoff: std::time::Duration::from_secs(1),
            ..driver_grpc::provider::Options::new(endpoint)
        },
        shutdown.clone(),
    )
    .await
    .map_err(BoxError::from)
}

/// Runs the machine controllers whenever `wanted` says so and stops them
/// when it turns false, until `shutdown` (then `Ok`) or until they end by
/// themselves (their result).
async fn follow_scale(
    config: &ShootClusterConfig,
    id: &str,
    target: &kube::Client,
    driver: Arc<dyn driver::Driver>,
    mut wanted: tokio::sync::watch::Receiver<Option<bool>>,
    shutdown: &StopSignal,
) -> Result<(), BoxError> {
    loop {
        tokio::select! {
            r = wanted.wait_for(|w| *w == Some(true)) => {
                if r.is_err() {
                    // The follower is gone: only a shutdown does that.
                    return Ok(());
                }
            }
            _ = shutdown.clone() => return Ok(()),
        }
        tracing::info!(shoot = %id, "starting the shoot's machine controllers");
        let stop = {
            let shutdown = shutdown.clone();
            let mut wanted = wanted.clone();
            async move {
                tokio::select! {
                    _ = shutdown => {}
                    _ = wanted.wait_for(|w| *w == Some(false)) => {}
                }
            }
            .boxed()
            .shared()
        };
        let mcm_config = mcm::controllers::Config {
            namespace: id.to_string(),
            metrics: Arc::default(),
            ..config.machine_controllers.clone()
        };
        let result = mcm::run::run(
            config.seed.clone(),
            target.clone(),
            mcm_config,
            Some(driver.clone()),
            stop,
        )
        .await;
        if shutdown.clone().now_or_never().is_some() {
            return Ok(());
        }
        if *wanted.borrow() == Some(false) {
            tracing::info!(
                shoot = %id,
                "machine-controller-manager scaled to 0: the shoot's machine controllers stopped"
            );
            continue;
        }
        return result.map_err(BoxError::from);
    }
}
