//! The HTTP layer: resource paths and verbs over the storage layer, one
//! file per verb, plus what only exists because of HTTP (discovery,
//! OpenAPI, Table output, protobuf, content negotiation, patch formats,
//! managed fields, connection handling and TLS).
//!
//! [`route`] serves the fixed paths, reads the body (large ones on the
//! [`heavy`] lane) and hands resource requests to [`resource::handle`],
//! which dispatches to the verb modules. Every verb parses the request,
//! calls admission and the storage layer, and renders the outcome with
//! [`reply`].

pub mod admission_server;
mod admit;
pub mod apply;
pub mod binding;
pub mod body;
mod columns;
pub mod conn;
pub mod create;
pub mod delete;
pub mod deletecollection;
pub mod discovery;
pub mod eviction;
pub mod fieldmanager;
mod fieldvalidation;
pub mod get;
pub mod heavy;
mod jsonpath;
pub mod list;
pub mod metrics;
pub mod openapi;
pub mod patch;
pub mod patchmeta;
pub mod pki;
pub mod podproxy;
pub mod protobuf;
pub mod reply;
pub mod request;
pub mod resource;
pub mod scale;
mod shape;
mod smp;
pub mod table;
pub mod tls;
pub mod update;
pub mod watch;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apimachinery::ApiError;
use axum::body::Body;
use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::admission::Chain;
use crate::storage::Storage;
use crate::storage::registry::Registry;
use heavy::{HEAVY_BODY_BYTES, HeavyLane};
pub use reply::{Reply, error_response};
use request::{Query, Target, parse_path};
use resource::Ctx;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// What the HTTP layer serves from: the storage layer, the catalogue, the
/// admission chain, and its own state (request counts, rendered OpenAPI
/// documents, the heavy lane).
pub struct Api {
    pub storage: Arc<Storage>,
    pub registry: Arc<Registry>,
    pub admission: Arc<Chain>,
    /// How often watches with `allowWatchBookmarks` get a bookmark.
    pub bookmark_interval: Duration,
    /// Requests served per verb and resource (`/metrics`).
    pub requests: metrics::RequestCounts,
    /// Connections held and refused by the listeners (`/metrics`).
    pub connections: Arc<conn::ConnStats>,
    /// The rendered OpenAPI documents of the registry.
    pub(crate) openapi: openapi::Cache,
    /// The lane for requests with large bodies, started on first use.
    heavy: OnceLock<HeavyLane>,
    /// TLS to kubelets (pods/log, pods/exec): the server's kubelet client
    /// certificate, when it has one.
    kubelet_tls: OnceLock<Arc<rustls::ClientConfig>>,
}

impl Api {
    pub fn new(
        storage: Arc<Storage>,
        registry: Arc<Registry>,
        admission: Arc<Chain>,
        bookmark_interval: Duration,
    ) -> Api {
        Api {
            storage,
            registry,
            admission,
            bookmark_interval,
            requests: Default::default(),
            connections: Default::default(),
            openapi: Default::default(),
            heavy: OnceLock::new(),
            kubelet_tls: OnceLock::new(),
        }
    }

    /// Sets the client certificate the server presents to kubelets (once;
    /// before the first pods/log or pods/exec request).
    pub fn set_kubelet_client(&self, cert_pem: &str, key_pem: &str) -> Result<(), String> {
        let tls = podproxy::kubelet_tls(Some((cert_pem, key_pem)))?;
        let _ = self.kubelet_tls.set(tls);
        Ok(())
    }

    /// TLS to kubelets; without a client certificate when none was set.
    pub(crate) fn kubelet_tls(&self) -> Arc<rustls::ClientConfig> {
        self.kubelet_tls
            .get_or_init(|| {
                podproxy::kubelet_tls(None).expect("a TLS client without certificates builds")
            })
            .clone()
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
        let health = self.storage.store().health();
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
        let h = self.storage.store().health();
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
}

/// Serves the fixed paths, reads the body and hands resource and discovery
/// requests on (large ones through the heavy lane).
pub async fn route(
    api: &Arc<Api>,
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
        "/readyz" | "/readyz/" => return Ok(api.readyz()),
        "/version" | "/version/" => return Ok(Reply::value(StatusCode::OK, &version())),
        "/metrics" => {
            let text = Bytes::from(
                api.requests.render() + &api.connections.render() + &api.store_metrics(),
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
            return openapi::serve(api, p, accept);
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
        Some(n) if n >= HEAVY_BODY_BYTES => match api.heavy()?.admit() {
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
        permit = Some(api.heavy()?.admit()?);
    }
    match permit {
        Some(permit) => {
            let lane = api.heavy()?;
            lane.run(permit, serve_api(api.clone(), parts, body)).await
        }
        None => serve_api(api.clone(), parts, body).await,
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
    api: Arc<Api>,
    mut parts: http::request::Parts,
    body: Bytes,
) -> Result<Reply, ApiError> {
    let upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
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
            let verb = metrics::verb(method, &p, path, &query);
            api.requests.record_resource(verb, &p);
            let res = api
                .registry
                .get(&p.group, &p.version, &p.resource)
                .ok_or_else(|| {
                    ApiError::new(
                        404,
                        "NotFound",
                        "the server could not find the requested resource",
                    )
                })?;
            // exec upgrades the connection: it needs the request's upgrade
            // handle, which no verb does.
            if res.eviction
                && p.name.is_some()
                && p.subresource.as_deref() == Some("exec")
                && matches!(*method, Method::GET | Method::POST)
            {
                return podproxy::exec(
                    &api,
                    &p,
                    &query,
                    parts.uri.query(),
                    &parts.headers,
                    upgrade,
                )
                .await;
            }
            let ctx = Ctx {
                api: &api,
                res,
                path: &p,
                query: &query,
                headers: &parts.headers,
                body,
                raw_query: parts.uri.query(),
            };
            resource::handle(ctx, method).await
        }
        other if *method == Method::GET => discovery::serve(&api.registry, &other, accept),
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
