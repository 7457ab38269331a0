//! The server object: shared state (store, registry, watch hubs, admission
//! plugins), the HTTP router, and the background controllers that an API
//! server runs itself (garbage collection, namespace and CRD lifecycle,
//! disruption budgets, event expiry).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::ApiError;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode};
use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};
use store::Store;
use tokio_stream::wrappers::ReceiverStream;

use crate::admission::AdmissionPlugin;
use crate::handlers::{self, Ctx};
use crate::registry::{Registry, Resource};
use crate::request::{Query, Target, parse_path};
use crate::watch::Hub;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bookmark_interval: Duration::from_secs(60),
            event_ttl: Duration::from_secs(3600),
            auth: None,
            audit_log: None,
        }
    }
}

/// A response: JSON bytes, or a stream of watch lines.
pub struct Reply {
    status: StatusCode,
    body: ReplyBody,
    warnings: Vec<String>,
    content_type: Option<&'static str>,
}

enum ReplyBody {
    Json(Bytes),
    Stream(tokio::sync::mpsc::Receiver<Result<Bytes, Infallible>>),
}

impl Reply {
    pub fn json(status: StatusCode, body: Bytes) -> Reply {
        Reply {
            status,
            body: ReplyBody::Json(body),
            warnings: Vec::new(),
            content_type: None,
        }
    }

    pub fn value(status: StatusCode, v: &Value) -> Reply {
        Reply::json(
            status,
            Bytes::from(serde_json::to_vec(v).unwrap_or_default()),
        )
    }

    pub fn stream(rx: tokio::sync::mpsc::Receiver<Result<Bytes, Infallible>>) -> Reply {
        Reply {
            status: StatusCode::OK,
            body: ReplyBody::Stream(rx),
            warnings: Vec::new(),
            content_type: None,
        }
    }

    pub fn warnings(mut self, w: Vec<String>) -> Reply {
        self.warnings.extend(w);
        self
    }

    pub fn content_type(mut self, ct: &'static str) -> Reply {
        self.content_type = Some(ct);
        self
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let mut resp = match self.body {
            ReplyBody::Json(b) => {
                let mut r = Response::new(Body::from(b));
                r.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                r
            }
            ReplyBody::Stream(rx) => {
                let mut r = Response::new(Body::from_stream(ReceiverStream::new(rx)));
                r.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                r.headers_mut().insert(
                    http::header::CACHE_CONTROL,
                    HeaderValue::from_static("no-cache, private"),
                );
                r
            }
        };
        *resp.status_mut() = self.status;
        if let Some(ct) = self.content_type {
            resp.headers_mut()
                .insert(http::header::CONTENT_TYPE, HeaderValue::from_static(ct));
        }
        for w in self.warnings {
            // The warn-text is an RFC 7230 quoted-string: kube escapes quotes
            // and backslashes, and client-go unescapes them for display.
            let v = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
            if let Ok(h) = HeaderValue::from_str(&v) {
                resp.headers_mut().append("warning", h);
            }
        }
        resp
    }
}

/// Renders an error as a `metav1.Status` response.
pub fn error_response(e: &ApiError) -> Response {
    let mut r = Reply::value(
        StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.to_status(),
    )
    .into_response();
    if let Some(s) = e.retry_after_seconds
        && let Ok(h) = HeaderValue::from_str(&s.to_string())
    {
        r.headers_mut().insert(http::header::RETRY_AFTER, h);
    }
    r
}

pub struct Server {
    pub store: Arc<dyn Store>,
    pub registry: Registry,
    pub config: Config,
    hubs: Mutex<HashMap<String, Arc<Hub>>>,
    admission: RwLock<Vec<Arc<dyn AdmissionPlugin>>>,
    /// External admission webhooks: after every in-process plugin, as
    /// kube-apiserver runs its webhook plugins last.
    webhooks: std::sync::OnceLock<Arc<dyn AdmissionPlugin>>,
    auth: Option<crate::auth::Auth>,
    audit: Option<crate::audit::AuditLog>,
    /// Requests served per verb and resource (`/metrics`).
    pub requests: crate::metrics::RequestCounts,
}

/// Namespaces that exist from the first start.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

impl Server {
    /// Builds the server over `store`: registers built-ins and every stored
    /// CRD, creates the system namespaces, and starts the background
    /// controllers. Must run inside a Tokio runtime.
    pub async fn start(store: Arc<dyn Store>, config: Config) -> anyhow::Result<Arc<Server>> {
        let auth = config
            .auth
            .as_ref()
            .map(crate::auth::Auth::new)
            .transpose()?;
        let audit = config
            .audit_log
            .as_deref()
            .map(crate::audit::AuditLog::open)
            .transpose()?;
        let server = Arc::new(Server {
            store,
            registry: Registry::new(),
            config,
            hubs: Mutex::new(HashMap::new()),
            admission: RwLock::new(Vec::new()),
            webhooks: std::sync::OnceLock::new(),
            auth,
            audit,
            requests: Default::default(),
        });
        crate::crd::load_all(&server).await?;
        for ns in SYSTEM_NAMESPACES {
            crate::namespace::ensure(&server, ns).await?;
        }
        if server.auth.is_some() {
            crate::rbac_bootstrap::ensure(&server).await?;
            server.add_admission(Arc::new(crate::rbac::EscalationCheck::new(&server)));
        }
        let webhooks = Arc::new(crate::webhook::WebhookAdmission::new(&server));
        let _ = server.webhooks.set(webhooks);
        crate::gc::spawn(server.clone());
        crate::namespace::spawn(server.clone());
        crate::crd::spawn(server.clone());
        crate::pdb::spawn(server.clone());
        crate::events::spawn(server.clone());
        Ok(server)
    }

    /// The authenticator and authorizer, when security is on.
    pub fn auth(&self) -> Option<&crate::auth::Auth> {
        self.auth.as_ref()
    }

    pub(crate) fn audit(&self) -> Option<&crate::audit::AuditLog> {
        self.audit.as_ref()
    }

    pub fn add_admission(&self, plugin: Arc<dyn AdmissionPlugin>) {
        self.admission.write().push(plugin);
    }

    pub fn admission_plugins(&self) -> Vec<Arc<dyn AdmissionPlugin>> {
        let mut plugins = self.admission.read().clone();
        plugins.extend(self.webhooks.get().cloned());
        plugins
    }

    /// The watch hub of a resource's storage, started on first use.
    pub fn hub(&self, res: &Resource) -> Arc<Hub> {
        let mut hubs = self.hubs.lock();
        hubs.entry(res.storage.clone())
            .or_insert_with(|| {
                Hub::start(self.store.clone(), res.prefix(), res.selectable_fields())
            })
            .clone()
    }

    /// Expires the watch history of every resource: current watches end and
    /// clients resuming from before now get 410 Gone and relist.
    pub fn expire_watches(&self) {
        for hub in self.hubs.lock().values() {
            hub.expire();
        }
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
        axum::serve(
            listener,
            self.router()
                .into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await
    }
}

/// Every request: authenticate → impersonate → authorize → handle → audit.
/// The gate passes everything when no auth is configured.
async fn dispatch(State(server): State<Arc<Server>>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let gate = crate::auth::gate(&server, &parts).await;
    let user_agent = parts
        .headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let response = match &gate.result {
        Err(e) => error_response(e),
        Ok(()) => {
            match crate::auth::serve_virtual(&server, &gate, Request::from_parts(parts, body)).await
            {
                Ok(r) => r,
                Err(req) => {
                    crate::auth::with_user(
                        gate.user.clone(),
                        handle_request(State(server.clone()), req),
                    )
                    .await
                }
            }
        }
    };
    match server.audit() {
        Some(log) => crate::audit::record(log, &gate, &user_agent, response).await,
        None => response,
    }
}

/// Handles a request that passed the gate.
async fn handle_request(State(server): State<Arc<Server>>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = Query::parse(parts.uri.query());
    let method = parts.method.clone();
    let result = async {
        match path.as_str() {
            "/healthz" | "/livez" | "/readyz" | "/healthz/" | "/livez/" | "/readyz/"
            | "/healthz/ping" | "/livez/ping" | "/readyz/ping" => {
                return Ok(Reply::json(StatusCode::OK, Bytes::from_static(b"ok")));
            }
            "/version" | "/version/" => return Ok(Reply::value(StatusCode::OK, &version())),
            "/metrics" => {
                let text = Bytes::from(server.requests.render());
                return Ok(Reply::json(StatusCode::OK, text)
                    .content_type("text/plain; version=0.0.4; charset=utf-8"));
            }
            p if p.starts_with("/openapi/v2") || p.starts_with("/openapi/v3") => {
                if method != Method::GET {
                    return Err(ApiError::method_not_allowed(
                        "only GET is allowed on OpenAPI paths",
                    ));
                }
                let accept = parts
                    .headers
                    .get(http::header::ACCEPT)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                return crate::openapi::serve(&server, p, accept);
            }
            _ => {}
        }
        let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
            Ok(b) => b,
            Err(_) => {
                return Err(ApiError::request_entity_too_large(format!(
                    "the request body is larger than the limit of {MAX_BODY_BYTES} bytes"
                )));
            }
        };
        let target = parse_path(&path).ok_or_else(|| {
            ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        })?;
        let accept = parts
            .headers
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        match target {
            Target::Resource(p) => {
                let verb = crate::metrics::verb(&method, &p, &path, &query);
                server.requests.record_resource(verb, &p);
                let res = server
                    .registry
                    .get(&p.group, &p.version, &p.resource)
                    .ok_or_else(|| {
                        ApiError::new(
                            404,
                            "NotFound",
                            "the server could not find the requested resource",
                        )
                    })?;
                let ctx = Ctx {
                    server: &server,
                    res,
                    path: &p,
                    query: &query,
                    headers: &parts.headers,
                    body,
                };
                handlers::handle(ctx, &method).await
            }
            other if method == Method::GET => crate::discovery::serve(&server, &other, accept),
            _ => Err(ApiError::method_not_allowed(
                "only GET is allowed on discovery paths",
            )),
        }
    }
    .await;
    match result {
        Ok(reply) => reply.into_response(),
        Err(e) => {
            if e.code >= 500 {
                tracing::warn!(code = e.code, message = %e.message, %path, "request failed");
            }
            error_response(&e)
        }
    }
}

/// `/version`: a 1.32 server, so kubectl 1.32 sees no version skew.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-trellis",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, match std::env::consts::ARCH {
            "x86_64" => "amd64", "aarch64" => "arm64", a => a }),
    })
}
