//! An embedded cluster: a [`Server`] over a store, serving on a local
//! listener, with a kube-rs client of it.
//!
//! Tests of every crate and gardenlet's per-shoot API servers start the
//! server the same way: open a store, start the server, install CRDs, bind
//! a listener, serve (plain HTTP or TLS with a PKI), and build a client that
//! trusts the server and presents the admin certificate. [`ClusterBuilder`]
//! is that sequence, once.
//!
//! The CRDs are given as manifests: the crates that define trellis's CRDs
//! (`api`, `gardener`, `worker`) sit above this one, so the builder takes
//! whatever they produce and serializes it.
//!
//! This module is behind the `cluster` feature, off by default: it is the
//! only part of the crate that needs a Kubernetes *client*, and `trellis
//! server` has no use for one. Test crates enable it through their
//! dev-dependencies; gardenlet, which hosts each shoot's API, in its
//! dependencies.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use store::Store;
use tokio::sync::oneshot;

use crate::{Config, Pki, Server};

/// A boxed error of a lower layer, for the steps whose callee reports
/// errors of its own shape.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an embedded cluster could not start or stop cleanly, named after the
/// step that failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("opening the file store in {path} failed: {source}")]
    StoreOpenFailed {
        path: PathBuf,
        #[source]
        source: BoxError,
    },
    #[error("starting the API server failed: {0}")]
    ServerStartFailed(#[source] BoxError),
    #[error("a CRD manifest could not be serialized: {0}")]
    CrdUnserializable(#[source] serde_json::Error),
    #[error("installing the CRD {name} failed: {source}")]
    CrdInstallFailed {
        name: String,
        #[source]
        source: BoxError,
    },
    #[error("binding {addr} failed: {source}")]
    BindFailed {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the listener has no local address: {0}")]
    ListenerAddressFailed(#[source] std::io::Error),
    #[error("the server's TLS configuration is unusable: {0}")]
    TlsConfigFailed(#[source] BoxError),
    #[error("building a client of the cluster failed: {0}")]
    ClientFailed(#[source] BoxError),
    #[error("serving the API failed: {0}")]
    ServeFailed(#[source] std::io::Error),
    #[error("the server did not stop within {0:?}; its connections were cut")]
    StopTimedOut(Duration),
}

/// Where the builder keeps the server's data.
enum StoreChoice {
    Memory,
    File(PathBuf),
    Given(Arc<dyn Store>),
}

/// Where the server listens.
enum Listen {
    Addr(SocketAddr),
    Listener(tokio::net::TcpListener),
}

/// Builds a [`Cluster`]: by default an in-memory store, no CRDs, plain HTTP
/// on `127.0.0.1:0`, the default [`Config`] and a client without kube-rs's
/// retries (a test wants to see every 429 and 5xx).
pub struct ClusterBuilder {
    store: StoreChoice,
    config: Config,
    crds: Vec<Value>,
    crd_error: Option<serde_json::Error>,
    tls: Option<Pki>,
    listen: Listen,
    client_retries: bool,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder {
            store: StoreChoice::Memory,
            config: Config::default(),
            crds: Vec::new(),
            crd_error: None,
            tls: None,
            listen: Listen::Addr(SocketAddr::from(([127, 0, 0, 1], 0))),
            client_retries: false,
        }
    }
}

impl ClusterBuilder {
    /// The server's configuration (auth, audit log, limits, ...).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Serves over `store` instead of a fresh in-memory one.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = StoreChoice::Given(store);
        self
    }

    /// Serves over a durable file store in `dir` (created if missing;
    /// reopened with its data if it exists).
    pub fn file_store(mut self, dir: impl Into<PathBuf>) -> Self {
        self.store = StoreChoice::File(dir.into());
        self
    }

    /// Installs these CRD manifests (typed CRDs or JSON) before serving.
    pub fn crds<T: serde::Serialize>(mut self, crds: impl IntoIterator<Item = T>) -> Self {
        for crd in crds {
            match serde_json::to_value(&crd) {
                Ok(v) => self.crds.push(v),
                Err(e) => {
                    self.crd_error.get_or_insert(e);
                }
            }
        }
        self
    }

    /// Serves HTTPS with `pki`'s server certificate, accepting client
    /// certificates its CA signed; the client trusts the CA and presents the
    /// admin certificate (`system:masters`). Authentication is the
    /// [`Config`]'s business: give it an `auth` to turn it on.
    pub fn tls(mut self, pki: Pki) -> Self {
        self.tls = Some(pki);
        self
    }

    /// Listens on `addr` instead of `127.0.0.1:0`.
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = Listen::Addr(addr);
        self
    }

    /// Serves on a listener the caller bound (to choose the port itself).
    pub fn listener(mut self, listener: tokio::net::TcpListener) -> Self {
        self.listen = Listen::Listener(listener);
        self
    }

    /// Whether the client retries throttled and failed requests as kube-rs
    /// does by default (off unless asked for).
    pub fn client_retries(mut self, on: bool) -> Self {
        self.client_retries = on;
        self
    }

    /// Opens the store, starts the server, installs the CRDs and serves.
    /// Must run inside a Tokio runtime: the server's tasks and the client's
    /// connection pool live on it.
    pub async fn start(self) -> Result<Cluster, ClusterError> {
        if let Some(e) = self.crd_error {
            return Err(ClusterError::CrdUnserializable(e));
        }
        let store: Arc<dyn Store> = match self.store {
            StoreChoice::Memory => Arc::new(store::MemoryStore::new()),
            StoreChoice::Given(s) => s,
            StoreChoice::File(dir) => open_file_store(dir)?,
        };
        let server = Server::start(store, self.config)
            .await
            .map_err(|e| ClusterError::ServerStartFailed(e.into()))?;
        for crd in &self.crds {
            crate::server::install_crd(&server, crd)
                .await
                .map_err(|e| ClusterError::CrdInstallFailed {
                    name: crd["metadata"]["name"].as_str().unwrap_or("").to_string(),
                    source: e.into(),
                })?;
        }
        let listener = match self.listen {
            Listen::Listener(l) => l,
            Listen::Addr(addr) => tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| ClusterError::BindFailed { addr, source })?,
        };
        let addr = listener
            .local_addr()
            .map_err(ClusterError::ListenerAddressFailed)?;
        let url = match &self.tls {
            Some(_) => format!("https://{addr}"),
            None => format!("http://{addr}"),
        };
        let mut kube_config = client_config(&url, self.tls.as_ref()).await?;
        kube_config.default_retry = self.client_retries;
        let client = kube::Client::try_from(kube_config.clone())
            .map_err(|e| ClusterError::ClientFailed(e.into()))?;

        let (stop, stopped) = oneshot::channel::<()>();
        // Only `stop` ends serving: a dropped `Cluster` keeps serving until
        // its runtime ends, like the server's own background tasks, so a
        // test may keep just the client.
        let shutdown = async move {
            if stopped.await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let serving = match &self.tls {
            Some(pki) => {
                let tls = pki.tls_config();
                // serve_tls would only report a bad certificate from inside
                // the serving task; check it while start can still fail.
                tls.server_config()
                    .map_err(|e| ClusterError::TlsConfigFailed(e.into()))?;
                let srv = server.clone();
                tokio::spawn(async move { srv.serve_tls(listener, tls, shutdown).await })
            }
            None => {
                let srv = server.clone();
                tokio::spawn(async move { srv.serve(listener, shutdown).await })
            }
        };
        Ok(Cluster {
            server,
            addr,
            url,
            pki: self.tls,
            kube_config,
            client,
            stop,
            serving,
        })
    }
}

fn open_file_store(dir: PathBuf) -> Result<Arc<dyn Store>, ClusterError> {
    let failed = |path: &PathBuf, source: BoxError| ClusterError::StoreOpenFailed {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(|e| failed(&dir, e.into()))?;
    let store = store::FileStore::open(&dir).map_err(|e| failed(&dir, e.into()))?;
    Ok(Arc::new(store))
}

/// The client configuration of the server at `url`: plain, or trusting
/// the PKI's CA and presenting its admin certificate, as a kubeconfig
/// would say it.
async fn client_config(url: &str, pki: Option<&Pki>) -> Result<kube::Config, ClusterError> {
    let failed = |e: BoxError| ClusterError::ClientFailed(e);
    let Some(pki) = pki else {
        let uri = url.parse::<http::Uri>().map_err(|e| failed(e.into()))?;
        return Ok(kube::Config::new(uri));
    };
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "embedded", "cluster": {
            "server": url,
            "certificate-authority-data": b64(&pki.ca_cert_pem),
        }}],
        "users": [{"name": "admin", "user": {
            "client-certificate-data": b64(&pki.admin_cert_pem),
            "client-key-data": b64(&pki.admin_key_pem),
        }}],
        "contexts": [{"name": "embedded", "context": {"cluster": "embedded", "user": "admin"}}],
        "current-context": "embedded",
    });
    let kubeconfig: kube::config::Kubeconfig =
        serde_json::from_value(kubeconfig).map_err(|e| failed(e.into()))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| failed(e.into()))
}

/// A running embedded cluster. Dropping it leaves it serving until its
/// runtime ends; [`Cluster::stop`] stops serving.
pub struct Cluster {
    server: Arc<Server>,
    addr: SocketAddr,
    url: String,
    pki: Option<Pki>,
    kube_config: kube::Config,
    client: kube::Client,
    stop: oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Cluster {
    /// A builder with the defaults (see [`ClusterBuilder`]).
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// The server itself (registry, admission plugins, store).
    pub fn server(&self) -> &Arc<Server> {
        &self.server
    }

    /// A client of the cluster; it lives on the runtime that started the
    /// cluster. See [`Cluster::kube_config`] for one on another runtime.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The client's configuration, to build clients on other runtimes.
    pub fn kube_config(&self) -> &kube::Config {
        &self.kube_config
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its base URL, `http://…` or `https://…`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The PKI it serves TLS with, if it does.
    pub fn pki(&self) -> Option<&Pki> {
        self.pki.as_ref()
    }

    /// Stops accepting, lets open requests finish for up to `grace`, then
    /// cuts what is left. The server's background tasks end with its
    /// runtime.
    pub async fn stop(mut self, grace: Duration) -> Result<(), ClusterError> {
        let _ = self.stop.send(());
        match tokio::time::timeout(grace, &mut self.serving).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(ClusterError::ServeFailed(e)),
            // The serving task panicked or was cancelled: it serves no more.
            Ok(Err(join)) => Err(ClusterError::ServeFailed(std::io::Error::other(join))),
            Err(_) => {
                self.serving.abort();
                Err(ClusterError::StopTimedOut(grace))
            }
        }
    }
}

/// The TLS stack the server speaks, for clients that talk to it below
/// kube-rs (`trellis bench apiserver` drives HTTP/1.1 and HTTP/2
/// connections itself).
pub use tokio_rustls;

/// A TLS client configuration for this server: trusting `ca_pem` (the
/// generated CA), presenting `identity` (certificate and key PEMs) if
/// given, offering `alpn` (`h2`, `http/1.1`).
pub fn client_tls(
    ca_pem: &str,
    identity: Option<(&str, &str)>,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| format!("the CA certificate: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("the CA certificate: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut config = match identity {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the client certificate: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
                .map_err(|e| format!("the client key: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the client certificate: {e}"))?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}
