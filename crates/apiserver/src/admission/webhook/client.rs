//! Calling one admission webhook: where it is (a URL, or a Service's
//! endpoints), TLS trusting its `caBundle`, one HTTPS POST of the
//! AdmissionReview within the webhook's timeout, and checking the answer
//! the way kube-apiserver does before believing it.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apimachinery::{ApiError, Cause};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

use super::{Endpoint, Hook, REVIEW_API_VERSION};
use crate::storage::Storage;
use crate::storage::keys;

/// A webhook answer larger than this is refused (as the request body limit
/// of the server).
const MAX_RESPONSE_BYTES: usize = 3 * 1024 * 1024;

/// Builds the TLS client settings for one `caBundle`.
pub(super) fn client_tls(ca_bundle: Option<&[u8]>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_bundle.filter(|b| !b.is_empty()) {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("unable to load root certificates: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("unable to load root certificates: {e}"))?;
            }
            if roots.is_empty() {
                return Err("unable to load root certificates: no PEM data found".into());
            }
        }
        None => roots = system_roots().clone(),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The platform's trust store, read once: webhooks without a `caBundle`
/// are verified against it, as kube-apiserver does.
fn system_roots() -> &'static rustls::RootCertStore {
    static ROOTS: OnceLock<rustls::RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            tracing::debug!(error = %e, "reading a system root certificate failed");
        }
        roots.add_parsable_certificates(found.certs);
        roots
    })
}

/// Where one call goes.
struct Target {
    /// `https://host:port/path?timeout=Ns`, for messages (kube names it so).
    url: String,
    /// `host:port` to connect to.
    dial: String,
    /// The name the certificate must carry.
    server_name: String,
    authority: String,
    path_and_query: String,
}

fn with_timeout_param(path: &str, timeout: Duration) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}timeout={}s", timeout.as_secs())
}

fn url_target(url: &str, timeout: Duration) -> Result<Target, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("parse {url:?}: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("unsupported protocol scheme in {url:?}"));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| format!("no host in request URL {url:?}"))?
        .as_str()
        .to_string();
    let host = uri.host().unwrap_or_default();
    let port = uri.port_u16().unwrap_or(443);
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let path_and_query = with_timeout_param(path, timeout);
    Ok(Target {
        url: format!("https://{authority}{path_and_query}"),
        dial: format!("{host}:{port}"),
        server_name: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        authority,
        path_and_query,
    })
}

/// Finds where a `service` reference points: the first ready address of the
/// Service's Endpoints for the referenced port (or an ExternalName's host).
/// The certificate must name `<service>.<namespace>.svc`, as in kube.
async fn service_target(
    storage: &Storage,
    namespace: &str,
    name: &str,
    path: &str,
    port: u16,
    timeout: Duration,
) -> Result<Target, String> {
    let host = format!("{name}.{namespace}.svc");
    let path_and_query = with_timeout_param(if path.is_empty() { "/" } else { path }, timeout);
    let url = format!("https://{host}:{port}{path_and_query}");
    let read = |what: &'static str| {
        let key = keys::key(what, Some(namespace), name);
        async move {
            match storage.store().get(&key, None).await {
                Ok((Some(kv), _)) => Ok(serde_json::from_slice::<Value>(&kv.value).ok()),
                Ok((None, _)) => Ok(None),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let with = |dial: String| Target {
        url: url.clone(),
        dial,
        server_name: host.clone(),
        authority: format!("{host}:{port}"),
        path_and_query: path_and_query.clone(),
    };
    let prefix = format!("Post {url:?}");
    let svc = read(keys::SERVICES)
        .await?
        .ok_or_else(|| format!("{prefix}: service {name:?} not found"))?;
    if svc.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        let external = svc
            .pointer("/spec/externalName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Ok(with(format!("{external}:{port}")));
    }
    let svc_port = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_i64) == Some(i64::from(port)))
        .ok_or_else(|| format!("{prefix}: no service port {port} found for service {name:?}"))?;
    let port_name = svc_port.get("name").and_then(Value::as_str).unwrap_or("");
    let endpoints = read(keys::ENDPOINTS).await?.unwrap_or(Value::Null);
    for subset in endpoints
        .get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ep_port = subset
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)
            .and_then(|p| p.get("port").and_then(Value::as_i64));
        let ip = subset
            .get("addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(|a| a.get("ip"))
            .and_then(Value::as_str);
        if let (Some(p), Some(ip)) = (ep_port, ip) {
            let ip = if ip.contains(':') {
                format!("[{ip}]")
            } else {
                ip.to_string()
            };
            return Ok(with(format!("{ip}:{p}")));
        }
    }
    Err(format!(
        "{prefix}: no endpoints available for service {name:?}"
    ))
}

/// POSTs the review and returns the decoded answer, or why there is none,
/// worded as kube words it.
pub(super) async fn call(storage: &Storage, hook: &Hook, review: &Value) -> Result<Value, String> {
    if !hook.accepts_v1 {
        return Err("webhook does not accept the v1 AdmissionReview version".into());
    }
    let tls = hook.tls.clone()?;
    let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    let attempt = async {
        let target = match &hook.endpoint {
            Endpoint::Url(url) => url_target(url, hook.timeout)?,
            Endpoint::Service {
                namespace,
                name,
                path,
                port,
            } => service_target(storage, namespace, name, path, *port, hook.timeout).await?,
        };
        let url = target.url.clone();
        post(&target, tls, body)
            .await
            .map_err(|e| format!("Post {url:?}: {e}"))
            .map(|r| (url, r))
    };
    let (url, (status, body)) = match tokio::time::timeout(hook.timeout, attempt).await {
        Ok(r) => r.map_err(|e| format!("failed to call webhook: {e}"))?,
        Err(_) => {
            let url = match &hook.endpoint {
                Endpoint::Url(u) => url_target(u, hook.timeout)
                    .map(|t| t.url)
                    .unwrap_or_else(|_| u.clone()),
                Endpoint::Service {
                    namespace,
                    name,
                    path,
                    port,
                } => format!(
                    "https://{name}.{namespace}.svc:{port}{}",
                    with_timeout_param(if path.is_empty() { "/" } else { path }, hook.timeout)
                ),
            };
            return Err(format!(
                "failed to call webhook: Post {url:?}: context deadline exceeded"
            ));
        }
    };
    if !(200..300).contains(&status) {
        let message = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| {
                let text = String::from_utf8_lossy(&body);
                let text: String = text.chars().take(256).collect();
                format!(
                    "an error on the server ({text:?}) has prevented the request from succeeding"
                )
            });
        return Err(format!(
            "failed to call webhook: Post {url:?}: the server responded with status {status}: {message}"
        ));
    }
    serde_json::from_slice(&body)
        .map_err(|e| format!("received invalid webhook response: the body is not JSON: {e}"))
}

/// One HTTPS/1.1 exchange on a fresh connection.
async fn post(
    t: &Target,
    tls: Arc<rustls::ClientConfig>,
    body: Vec<u8>,
) -> Result<(u16, Bytes), String> {
    let name = ServerName::try_from(t.server_name.clone())
        .map_err(|e| format!("invalid server name {:?}: {e}", t.server_name))?;
    let tcp = tokio::net::TcpStream::connect(&t.dial)
        .await
        .map_err(|e| format!("dial tcp {}: {e}", t.dial))?;
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    // The connection task is aborted when this set is dropped, so a call
    // abandoned by its timeout leaves nothing running.
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(conn);
    let req = http::Request::post(&t.path_and_query)
        .header(http::header::HOST, &t.authority)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .header(http::header::USER_AGENT, "kube-apiserver-admission")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, body))
}

/// What a webhook answered.
pub(super) struct Verdict {
    pub(super) allowed: bool,
    pub(super) status: Option<Value>,
    /// Decoded JSON patch operations.
    pub(super) patch: Option<Value>,
}

/// Checks an AdmissionReview answer the way kube-apiserver does before it
/// believes it.
pub(super) fn verdict(uid: &str, review: &Value) -> Result<Verdict, String> {
    let api_version = review
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = review.get("kind").and_then(Value::as_str).unwrap_or("");
    if api_version != REVIEW_API_VERSION || kind != "AdmissionReview" {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {api_version}, Kind={kind}"
        ));
    }
    let resp = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("webhook response was absent")?;
    let got = resp.get("uid").and_then(Value::as_str).unwrap_or("");
    if got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    let allowed = resp
        .get("allowed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let patch = resp
        .get("patch")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty());
    let patch_type = resp
        .get("patchType")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty());
    let patch = match (patch, patch_type) {
        (None, None) => None,
        (Some(_), None) => {
            return Err("webhook returned response.patch but not response.patchType".into());
        }
        (None, Some(_)) => {
            return Err("webhook returned response.patchType but not response.patch".into());
        }
        (Some(p), Some("JSONPatch")) => {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(p)
                .map_err(|e| format!("response.patch is not base64: {e}"))?;
            Some(
                serde_json::from_slice::<Value>(&raw)
                    .map_err(|e| format!("response.patch is not a JSON patch: {e}"))?,
            )
        }
        (Some(_), Some(t)) => {
            return Err(format!(
                "webhook returned invalid response.patchType of {t:?}"
            ));
        }
    };
    Ok(Verdict {
        allowed,
        status: resp.get("status").filter(|s| s.is_object()).cloned(),
        patch: patch.filter(|_| allowed),
    })
}

/// kube's StatusReasons; a webhook's own reason string is kept when it is
/// one of them (our errors carry static reasons).
const REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

/// The error for a webhook's refusal: the webhook's status with kube's
/// wording; a code below 400 (or none) becomes 400.
pub(super) fn denial(webhook: &str, status: Option<&Value>) -> ApiError {
    let empty = Value::Null;
    let s = status.unwrap_or(&empty);
    let text = |f: &str| s.get(f).and_then(Value::as_str).unwrap_or("").to_string();
    let code = s.get("code").and_then(Value::as_i64).unwrap_or(0);
    let code = match code {
        ..400 => 400,
        600.. => 500,
        c => c as u16,
    };
    let reason_text = text("reason");
    let reason = REASONS
        .iter()
        .find(|r| **r == reason_text)
        .copied()
        .unwrap_or("");
    let denied = format!("admission webhook {webhook:?} denied the request");
    let message = match (text("message"), reason_text.as_str()) {
        (m, _) if !m.is_empty() => format!("{denied}: {m}"),
        (_, r) if !r.is_empty() => format!("{denied}: {r}"),
        _ => format!("{denied} without explanation"),
    };
    let mut e = ApiError::new(code, reason, message);
    if let Some(d) = s.get("details") {
        let detail = |f: &str| d.get(f).and_then(Value::as_str).map(str::to_string);
        e.name = detail("name");
        e.group = detail("group");
        e.kind = detail("kind");
        e.causes = d
            .get("causes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let f = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
                Cause {
                    reason: f("reason").to_string(),
                    message: f("message").to_string(),
                    field: f("field").to_string(),
                }
            })
            .collect();
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_refusal_carries_the_webhook_status_in_kube_words() {
        let e = denial(
            "d.example.com",
            Some(&json!({"code": 403, "message": "no"})),
        );
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "admission webhook \"d.example.com\" denied the request: no"
        );
        let e = denial("d.example.com", Some(&json!({"code": 200})));
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "admission webhook \"d.example.com\" denied the request without explanation"
        );
        let e = denial("d.example.com", Some(&json!({"reason": "Forbidden"})));
        assert_eq!((e.code, e.reason), (400, "Forbidden"));
        assert_eq!(
            e.message,
            "admission webhook \"d.example.com\" denied the request: Forbidden"
        );
        assert_eq!(denial("d.example.com", None).code, 400);
    }

    #[test]
    fn answers_are_checked_before_they_are_believed() {
        let ok = |resp: Value| json!({"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": resp});
        assert!(verdict("u", &ok(json!({"uid": "u", "allowed": true}))).is_ok_and(|v| v.allowed));
        assert!(verdict("u", &ok(json!({"uid": "v", "allowed": true}))).is_err());
        assert!(verdict("u", &json!({"response": {"uid": "u", "allowed": true}})).is_err());
        assert!(
            verdict(
                "u",
                &ok(json!({"uid": "u", "allowed": true, "patch": "W10="}))
            )
            .is_err()
        );
        let patch = base64::engine::general_purpose::STANDARD
            .encode(r#"[{"op":"add","path":"/a","value":1}]"#);
        let v = verdict(
            "u",
            &ok(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": patch})),
        )
        .unwrap();
        assert_eq!(v.patch.unwrap()[0]["op"], "add");
        assert!(
            verdict(
                "u",
                &ok(json!({"uid": "u", "allowed": true, "patchType": "Merge", "patch": "e30="}))
            )
            .is_err()
        );
    }

    #[test]
    fn urls_carry_kubes_timeout_parameter() {
        let t = url_target("https://127.0.0.1:8443/check", Duration::from_secs(5)).unwrap();
        assert_eq!(t.url, "https://127.0.0.1:8443/check?timeout=5s");
        assert_eq!(t.dial, "127.0.0.1:8443");
        assert_eq!(t.server_name, "127.0.0.1");
        let t = url_target("https://[::1]/", Duration::from_secs(1)).unwrap();
        assert_eq!(
            (t.dial.as_str(), t.server_name.as_str()),
            ("[::1]:443", "::1")
        );
        assert!(url_target("http://x/", Duration::from_secs(1)).is_err());
    }
}
