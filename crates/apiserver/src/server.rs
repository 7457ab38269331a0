//! The server: wiring only. [`Server::start`] builds the storage layer, the
//! registry of built-in kinds and stored CRDs, the admission chain
//! (RBAC's escalation check when security is on, webhooks last), the HTTP
//! layer over them and the in-server controllers; [`dispatch`] runs every
//! request through authentication and authorization, the HTTP layer and
//! the audit log. No API semantics live here.

use crate::error::Error;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::Request;
use serde_json::Value;
use store::Store;

use crate::admission::{AdmissionPlugin, Chain};
use crate::auth::Auth;
use crate::auth::audit::AuditLog;
use crate::controllers::{self, Context};
use crate::http::tls::TlsConfig;
use crate::http::{Api, error_response};
use crate::storage::Storage;
use crate::storage::registry::Registry;

pub use crate::http::MAX_BODY_BYTES;

/// How long shutdown waits for open connections (watches never end by
/// themselves) before it returns anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub struct Config {
    /// How often watches with `allowWatchBookmarks` get a bookmark.
    pub bookmark_interval: Duration,
    /// How long core/v1 events live.
    pub event_ttl: Duration,
    /// Authentication and RBAC; `None` lets every request through.
    pub auth: Option<crate::auth::AuthConfig>,
    /// Where the audit log of mutating requests goes; `None` keeps none.
    pub audit_log: Option<std::path::PathBuf>,
    /// Connection caps and timeouts of the listeners.
    pub connections: crate::http::conn::ConnLimits,
    /// Where Service cluster IPs come from (kube-apiserver's
    /// `--service-cluster-ip-range`); loopback by default, so the seed
    /// runtime's proxy can serve them on this machine.
    pub service_cluster_ip_range: String,
    /// The client certificate and key (PEM) the server presents to kubelets
    /// for pods/log and pods/exec.
    pub kubelet_client: Option<(String, String)>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bookmark_interval: Duration::from_secs(60),
            event_ttl: Duration::from_secs(3600),
            auth: None,
            audit_log: None,
            connections: Default::default(),
            service_cluster_ip_range: DEFAULT_SERVICE_CLUSTER_IP_RANGE.to_string(),
            kubelet_client: None,
        }
    }
}

pub struct Server {
    /// The store under everything (for embedding crates that read it).
    pub store: Arc<dyn Store>,
    /// The storage layer over `store`.
    pub storage: Arc<Storage>,
    pub registry: Arc<Registry>,
    pub config: Config,
    admission: Arc<Chain>,
    api: Arc<Api>,
    auth: Option<Arc<Auth>>,
    audit: Option<AuditLog>,
}

/// The default Service range: loopback, served by the seed runtime's proxy.
pub const DEFAULT_SERVICE_CLUSTER_IP_RANGE: &str = "127.2.0.0/16";

/// Namespaces that exist from the first start.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

impl Server {
    /// Builds the server over `store`: registers built-ins and every stored
    /// CRD, creates the system namespaces, and starts the background
    /// controllers. Must run inside a Tokio runtime.
    pub async fn start(store: Arc<dyn Store>, config: Config) -> Result<Arc<Server>, Error> {
        let storage = Arc::new(Storage::new(store.clone()));
        let registry = Arc::new(Registry::with(crate::strategy::resources()));
        let admission = Arc::new(Chain::default());
        let auth = config
            .auth
            .as_ref()
            .map(|c| Auth::new(c, storage.clone()).map(Arc::new))
            .transpose()?;
        let audit = config
            .audit_log
            .as_deref()
            .map(AuditLog::open)
            .transpose()?;
        controllers::crd::load_all(&storage, &registry).await?;
        for ns in SYSTEM_NAMESPACES {
            controllers::namespace::ensure(&storage, ns).await?;
        }
        if let Some(auth) = &auth {
            crate::auth::bootstrap::ensure(&storage).await?;
            admission.add(Arc::new(crate::auth::rbac::EscalationCheck::new(
                auth.clone(),
            )));
        }
        let service_range =
            crate::admission::service_ip::Ipv4Range::parse(&config.service_cluster_ip_range)
                .map_err(Error::ServiceRange)?;
        admission.add(Arc::new(crate::admission::service_ip::ServiceIps::new(
            storage.clone(),
            service_range,
        )));
        admission.set_webhooks(Arc::new(crate::admission::webhook::WebhookAdmission::new(
            storage.clone(),
        )));
        let api = Arc::new(Api::new(
            storage.clone(),
            registry.clone(),
            admission.clone(),
            config.bookmark_interval,
        ));
        if let Some((cert, key)) = &config.kubelet_client {
            api.set_kubelet_client(cert, key)
                .map_err(Error::KubeletClient)?;
        }
        controllers::spawn_all(Arc::new(Context {
            storage: storage.clone(),
            registry: registry.clone(),
            admission: admission.clone(),
            event_ttl: config.event_ttl,
        }));
        Ok(Arc::new(Server {
            store,
            storage,
            registry,
            config,
            admission,
            api,
            auth,
            audit,
        }))
    }

    /// The authenticator and authorizer, when security is on.
    pub fn auth(&self) -> Option<&Auth> {
        self.auth.as_deref()
    }

    pub fn add_admission(&self, plugin: Arc<dyn AdmissionPlugin>) {
        self.admission.add(plugin);
    }

    pub fn admission_plugins(&self) -> Vec<Arc<dyn AdmissionPlugin>> {
        self.admission.plugins()
    }

    /// Expires the watch history of every resource: current watches end and
    /// clients resuming from before now get 410 Gone and relist.
    pub fn expire_watches(&self) {
        self.storage.expire_watches();
    }

    /// The HTTP router: every path is dispatched by [`dispatch`].
    pub fn router(self: &Arc<Self>) -> axum::Router {
        axum::Router::new()
            .fallback(dispatch)
            .with_state(self.clone())
    }

    /// Serves plain HTTP (HTTP/1.1 and h2c) on `listener` until `shutdown`.
    pub async fn serve(
        self: &Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let l = crate::http::conn::Listener {
            router: self.router(),
            tls: None,
            limits: self.config.connections.clone(),
            stats: self.api.connections.clone(),
        };
        crate::http::conn::serve(l, listener, shutdown, SHUTDOWN_GRACE).await
    }

    /// Serves HTTPS on `listener` until `shutdown`, then gives open
    /// connections a few seconds to finish. Connections are held and
    /// limited as [`crate::http::conn`] describes.
    pub async fn serve_tls(
        self: &Arc<Self>,
        listener: tokio::net::TcpListener,
        tls: TlsConfig,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let config = tls.server_config().map_err(std::io::Error::other)?;
        let l = crate::http::conn::Listener {
            router: self.router(),
            tls: Some(tokio_rustls::TlsAcceptor::from(config)),
            limits: self.config.connections.clone(),
            stats: self.api.connections.clone(),
        };
        crate::http::conn::serve(l, listener, shutdown, SHUTDOWN_GRACE).await
    }
}

/// Installs (or upgrades) a CRD directly in the store, as a server does for
/// its own kinds at start: created when missing, its spec replaced when it
/// differs, and served at once. Idempotent.
pub async fn install_crd(server: &Server, manifest: &Value) -> Result<(), Error> {
    controllers::crd::install(&server.storage, &server.registry, manifest).await
}

/// Every request: authenticate → impersonate → authorize → handle → audit.
/// The gate passes everything when no auth is configured.
async fn dispatch(State(server): State<Arc<Server>>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let auth = server.auth();
    let gate = crate::auth::gate(auth, server.audit.is_some(), &parts).await;
    let user_agent = parts
        .headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let response = match &gate.result {
        Err(e) => error_response(e),
        Ok(()) => {
            let req = Request::from_parts(parts, body);
            match crate::auth::serve_virtual(auth, &server.storage, &gate, req).await {
                Ok(r) => r,
                Err(req) => {
                    crate::admission::with_user(
                        gate.user.clone(),
                        handle_request(server.api.clone(), req),
                    )
                    .await
                }
            }
        }
    };
    match &server.audit {
        Some(log) => crate::auth::audit::record(log, &gate, &user_agent, response).await,
        None => response,
    }
}

/// Handles a request that passed the gate.
async fn handle_request(api: Arc<Api>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    match crate::http::route(&api, parts, body).await {
        Ok(reply) => reply.into_response(),
        Err(e) => {
            if e.code >= 500 {
                tracing::warn!(code = e.code, message = %e.message, %path, "request failed");
            }
            error_response(&e)
        }
    }
}
