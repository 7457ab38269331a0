//! The server object: shared state (store, registry, watch hubs, admission
//! plugins), the HTTP router, and the background controllers that an API
//! server runs itself (garbage collection, namespace and CRD lifecycle,
//! disruption budgets, event expiry).

use std::collections::HashMap;
use std::convert::Infallible;
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
    /// Connection caps and timeouts of the listeners.
    pub connections: crate::conn::ConnLimits,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bookmark_interval: Duration::from_secs(60),
            event_ttl: Duration::from_secs(3600),
            auth: None,
            audit_log: None,
            connections: Default::default(),
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
    /// Connections held and refused by the listeners (`/metrics`).
    pub connections: Arc<crate::conn::ConnStats>,
    /// The lane for requests with large bodies, started on first use.
    heavy: std::sync::OnceLock<HeavyLane>,
    /// The runtime the server started on: long-lived tasks (watch hubs)
    /// belong there even when a request on the heavy lane starts them.
    runtime: tokio::runtime::Handle,
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
            connections: Default::default(),
            heavy: std::sync::OnceLock::new(),
            runtime: tokio::runtime::Handle::current(),
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

    /// The heavy lane, started on first use.
    fn heavy(&self) -> Result<&HeavyLane, ApiError> {
        if let Some(lane) = self.heavy.get() {
            return Ok(lane);
        }
        let lane = HeavyLane::start()
            .map_err(|e| ApiError::internal(format!("starting the heavy request lane: {e}")))?;
        Ok(self.heavy.get_or_init(|| lane))
    }

    /// `/readyz`: ok, or 500 naming what is wrong (a store that cannot
    /// write).
    fn readyz(&self) -> Reply {
        let health = self.store.health();
        if health.is_ok() {
            return Reply::json(StatusCode::OK, Bytes::from_static(b"ok"));
        }
        Reply::json(
            StatusCode::INTERNAL_SERVER_ERROR,
            Bytes::from(format!("[-]store failed: {health}\nreadyz check failed")),
        )
        .content_type("text/plain; charset=utf-8")
    }

    /// The store's health as Prometheus text.
    fn store_metrics(&self) -> String {
        let h = self.store.health();
        format!(
            "# HELP trellis_store_healthy 1 while the store can write, 0 after a write error until it recovers.\n\
             # TYPE trellis_store_healthy gauge\n\
             trellis_store_healthy {}\n\
             # HELP trellis_store_write_errors_total Store writes that failed to persist.\n\
             # TYPE trellis_store_write_errors_total counter\n\
             trellis_store_write_errors_total {}\n",
            u8::from(h.is_ok()),
            h.write_errors,
        )
    }

    /// The watch hub of a resource's storage, started on first use.
    pub fn hub(&self, res: &Resource) -> Arc<Hub> {
        let _on_main_runtime = self.runtime.enter();
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
        let l = crate::conn::Listener {
            router: self.router(),
            tls: None,
            limits: self.config.connections.clone(),
            stats: self.connections.clone(),
        };
        crate::conn::serve(l, listener, shutdown, Duration::from_secs(5)).await
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

/// Bodies at least this large are decoded, patched and encoded on the
/// heavy lane (see [`HeavyLane`]).
pub const HEAVY_BODY_BYTES: usize = 128 * 1024;
/// Large requests admitted at once (queued or running on the heavy lane);
/// more get 429 with Retry-After, as kube-apiserver's in-flight limit does.
pub const MAX_HEAVY_IN_FLIGHT: usize = 8;

/// Where requests with large bodies run: one thread with its own Tokio
/// runtime. Decoding, patching, validating and encoding a body of megabytes
/// costs CPU for a long stretch without an await; on the shared runtime two
/// such requests would hold both workers of a 2-core machine and stall every
/// small request behind them. On the lane they take at most one core
/// between them, one after another, and the lane hands the memory they
/// peaked at back to the system afterwards.
pub(crate) struct HeavyLane {
    handle: tokio::runtime::Handle,
    permits: Arc<tokio::sync::Semaphore>,
    /// Dropping it (with the server) ends the lane's thread.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl HeavyLane {
    fn start() -> std::io::Result<HeavyLane> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("apiserver-heavy".into())
            .spawn(move || {
                let _ = rt.block_on(stopped);
            })?;
        Ok(HeavyLane {
            handle,
            permits: Arc::new(tokio::sync::Semaphore::new(MAX_HEAVY_IN_FLIGHT)),
            _stop: stop,
        })
    }

    /// A place for one large request, or a 429 when the lane is full.
    fn admit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
        self.permits.clone().try_acquire_owned().map_err(|_| {
            let mut e = ApiError::too_many_requests(format!(
                "too many large requests in flight (at most {MAX_HEAVY_IN_FLIGHT} with bodies of \
                 {HEAVY_BODY_BYTES} bytes or more); retry later"
            ));
            e.retry_after_seconds = Some(1);
            e
        })
    }

    /// Runs `work` on the lane and returns its outcome.
    async fn run<F>(&self, permit: tokio::sync::OwnedSemaphorePermit, work: F) -> F::Output
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let task = self.handle.spawn(async move {
            let out = work.await;
            drop(permit);
            release_memory();
            out
        });
        match task.await {
            Ok(out) => out,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

/// Gives memory freed after a large request back to the system. glibc keeps
/// freed heap in its arenas; after a request that peaked at hundreds of MB
/// the process would otherwise stay that large.
fn release_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Handles a request that passed the gate.
async fn handle_request(State(server): State<Arc<Server>>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let result = route(&server, parts, body).await;
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

/// Serves the fixed paths, reads the body and hands resource and discovery
/// requests on (large ones through the heavy lane).
async fn route(
    server: &Arc<Server>,
    parts: http::request::Parts,
    body: Body,
) -> Result<Reply, ApiError> {
    let path = parts.uri.path();
    let method = &parts.method;
    match path {
        "/healthz" | "/livez" | "/healthz/" | "/livez/" | "/healthz/ping" | "/livez/ping"
        | "/readyz/ping" => {
            return Ok(Reply::json(StatusCode::OK, Bytes::from_static(b"ok")));
        }
        "/readyz" | "/readyz/" => return Ok(server.readyz()),
        "/version" | "/version/" => return Ok(Reply::value(StatusCode::OK, &version())),
        "/metrics" => {
            let text = Bytes::from(
                server.requests.render() + &server.connections.render() + &server.store_metrics(),
            );
            return Ok(Reply::json(StatusCode::OK, text)
                .content_type("text/plain; version=0.0.4; charset=utf-8"));
        }
        p if p.starts_with("/openapi/v2") || p.starts_with("/openapi/v3") => {
            if *method != Method::GET {
                return Err(ApiError::method_not_allowed(
                    "only GET is allowed on OpenAPI paths",
                ));
            }
            let accept = parts
                .headers
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            return crate::openapi::serve(server, p, accept);
        }
        _ => {}
    }
    // A declared large body takes its place on the heavy lane before it is
    // read, so a flood of them is refused without buffering megabytes each.
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(too_large_body());
    }
    let mut permit = match declared {
        Some(n) if n >= HEAVY_BODY_BYTES => match server.heavy()?.admit() {
            Ok(p) => Some(p),
            Err(e) => {
                // Read the body without keeping it before answering: a
                // client still sending would otherwise see its connection
                // reset instead of the 429 and its Retry-After.
                discard(body).await;
                return Err(e);
            }
        },
        _ => None,
    };
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| too_large_body())?;
    if permit.is_none() && body.len() >= HEAVY_BODY_BYTES {
        permit = Some(server.heavy()?.admit()?);
    }
    match permit {
        Some(permit) => {
            let lane = server.heavy()?;
            lane.run(permit, serve_api(server.clone(), parts, body))
                .await
        }
        None => serve_api(server.clone(), parts, body).await,
    }
}

/// Reads a request body to its end (or the body limit), keeping nothing.
async fn discard(body: Body) {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut seen = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            seen += data.len();
            if seen > MAX_BODY_BYTES {
                break;
            }
        }
    }
}

fn too_large_body() -> ApiError {
    ApiError::request_entity_too_large(format!(
        "the request body is larger than the limit of {MAX_BODY_BYTES} bytes"
    ))
}

/// Resource and discovery paths, with the body read.
async fn serve_api(
    server: Arc<Server>,
    parts: http::request::Parts,
    body: Bytes,
) -> Result<Reply, ApiError> {
    let path = parts.uri.path();
    let query = Query::parse(parts.uri.query());
    let method = &parts.method;
    let target = parse_path(path).ok_or_else(|| {
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
            let verb = crate::metrics::verb(method, &p, path, &query);
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
            handlers::handle(ctx, method).await
        }
        other if *method == Method::GET => crate::discovery::serve(&server, &other, accept),
        _ => Err(ApiError::method_not_allowed(
            "only GET is allowed on discovery paths",
        )),
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
