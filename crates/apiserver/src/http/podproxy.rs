//! `pods/log` and `pods/exec`: the API server connects to the kubelet of
//! the pod's node, as kube-apiserver does, so clients (kubectl logs, kubectl
//! exec) only ever talk to the API and any node that serves the kubelet's
//! API works.
//!
//! The node is found from the pod's `spec.nodeName`; its address is the
//! node's InternalIP (else its first address) and its port
//! `status.daemonEndpoints.kubeletEndpoint.Port` (10250 when unset). The
//! API server authenticates to the kubelet with its kubelet client
//! certificate and, like kube-apiserver without
//! `--kubelet-certificate-authority`, does not verify the kubelet's serving
//! certificate. Logs are streamed back as they arrive (`follow`); exec is a
//! WebSocket upgrade (the `v5.channel.k8s.io` family kubectl 1.32 speaks)
//! passed through to the kubelet, byte for byte once both sides upgraded.

use std::sync::Arc;

use apimachinery::ApiError;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::Value;

use crate::http::Api;
use crate::http::reply::Reply;
use crate::http::request::{Query, ResourcePath};
use crate::storage::keys;

/// The kubelet's port when the node does not say.
const DEFAULT_KUBELET_PORT: u16 = 10250;
/// How long connecting to a kubelet (TCP and TLS) may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// A kubelet's error answer is read up to this many bytes.
const MAX_ERROR_BYTES: usize = 64 * 1024;

/// Where a pod's container is served: the kubelet address and the names.
#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

/// The container a request means: the one named, or the pod's only one.
/// kube-apiserver's messages for the other cases.
pub fn container_of(pod: &Value, name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let names: Vec<String> = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| {
            pod.pointer(&format!("/spec/{list}"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
        })
        .collect();
    match asked.filter(|a| !a.is_empty()) {
        Some(a) if names.iter().any(|n| n == a) => Ok(a.to_string()),
        Some(a) => Err(ApiError::bad_request(format!(
            "container {a} is not valid for pod {name}"
        ))),
        None => {
            let main: Vec<&str> = pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .collect();
            match main.as_slice() {
                [only] => Ok(only.to_string()),
                _ => Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    main.join(" ")
                ))),
            }
        }
    }
}

/// The kubelet endpoint of a node object: InternalIP (else the first
/// address) and the daemon endpoint port.
pub fn kubelet_of(node: &Value) -> Option<(String, u16)> {
    let addresses = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)?;
    let pick = |kind: Option<&str>| {
        addresses
            .iter()
            .filter(|a| kind.is_none_or(|k| a.get("type").and_then(Value::as_str) == Some(k)))
            .find_map(|a| a.get("address").and_then(Value::as_str))
            .filter(|a| !a.is_empty())
            .map(str::to_string)
    };
    let host = pick(Some("InternalIP")).or_else(|| pick(None))?;
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .unwrap_or(DEFAULT_KUBELET_PORT);
    Some((host, port))
}

/// Finds the kubelet serving `container` of pod `name` in `ns`.
async fn target(
    api: &Api,
    ns: &str,
    name: &str,
    container: Option<&str>,
) -> Result<Target, ApiError> {
    let pod_kv = api
        .storage
        .get(&keys::key(keys::PODS, Some(ns), name))
        .await?
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let pod: Value = serde_json::from_slice(&pod_kv.value)
        .map_err(|e| ApiError::internal(format!("stored pod is not JSON: {e}")))?;
    let container = container_of(&pod, name, container)?;
    let node_name = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!("pod {name} does not have a host assigned"))
        })?;
    let node_kv = api
        .storage
        .get(&keys::key(keys::NODES, None, node_name))
        .await?
        .ok_or_else(|| ApiError::not_found("", "nodes", node_name))?;
    let node: Value = serde_json::from_slice(&node_kv.value)
        .map_err(|e| ApiError::internal(format!("stored node is not JSON: {e}")))?;
    let (host, port) = kubelet_of(&node).ok_or_else(|| {
        ApiError::new(
            503,
            "ServiceUnavailable",
            format!("node {node_name} has no address to reach its kubelet at"),
        )
    })?;
    Ok(Target {
        host,
        port,
        namespace: ns.to_string(),
        pod: name.to_string(),
        container,
    })
}

/// A TLS connection to the kubelet at `t`, speaking HTTP/1.1.
async fn connect(
    api: &Api,
    t: &Target,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, ApiError> {
    let unreachable = |e: String| {
        ApiError::new(
            502,
            "InternalError",
            format!(
                "error dialing the kubelet at {}:{} for pod {}/{}: {e}",
                t.host, t.port, t.namespace, t.pod
            ),
        )
    };
    let connect = async {
        let tcp = tokio::net::TcpStream::connect((t.host.as_str(), t.port))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let name = ServerName::try_from(t.host.clone())
            .map_err(|e| unreachable(format!("bad kubelet address: {e}")))?;
        tokio_rustls::TlsConnector::from(api.kubelet_tls())
            .connect(name, tcp)
            .await
            .map_err(|e| unreachable(e.to_string()))
    };
    tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| unreachable("timed out".into()))?
}

/// The kubelet path with the request's query passed on (minus `container`,
/// which is in the path).
fn kubelet_uri(kind: &str, t: &Target, raw_query: Option<&str>) -> String {
    let kept: Vec<&str> = raw_query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("container="))
        .collect();
    let enc = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    let mut uri = format!(
        "/{kind}/{}/{}/{}",
        enc(&t.namespace),
        enc(&t.pod),
        enc(&t.container)
    );
    if !kept.is_empty() {
        uri.push('?');
        uri.push_str(&kept.join("&"));
    }
    uri
}

/// The kubelet's error answer as an API error with its status and text.
async fn kubelet_error(resp: http::Response<hyper::body::Incoming>) -> ApiError {
    let status = resp.status();
    let body = http_body_util::Limited::new(resp.into_body(), MAX_ERROR_BYTES)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body).trim().to_string();
    // A Status from the kubelet is passed on as it is.
    if let Ok(v) = serde_json::from_slice::<Value>(&body)
        && v.get("kind").and_then(Value::as_str) == Some("Status")
    {
        let message = v.get("message").and_then(Value::as_str).unwrap_or(&text);
        return ApiError::new(status.as_u16(), reason_of(status), message.to_string());
    }
    ApiError::new(status.as_u16(), reason_of(status), text)
}

fn reason_of(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        _ => "InternalError",
    }
}

/// GET `pods/{name}/log`: the container's log from its kubelet, streamed.
pub async fn logs(
    api: &Arc<Api>,
    path: &ResourcePath,
    query: &Query,
    raw_query: Option<&str>,
) -> Result<Reply, ApiError> {
    let ns = path.namespace.as_deref().unwrap_or_default();
    let name = path.name.as_deref().unwrap_or_default();
    let t = target(api, ns, name, query.get("container")).await?;
    let stream = connect(api, &t).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ApiError::internal(format!("talking to the kubelet: {e}")))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = Request::get(kubelet_uri("containerLogs", &t, raw_query))
        .header(header::HOST, format!("{}:{}", t.host, t.port))
        .body(Empty::<Bytes>::new())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| ApiError::internal(format!("talking to the kubelet: {e}")))?;
    if resp.status() != StatusCode::OK {
        return Err(kubelet_error(resp).await);
    }
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let mut body = resp.into_body();
    tokio::spawn(async move {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            if let Ok(data) = frame.into_data()
                && tx.send(Ok(data)).await.is_err()
            {
                // The client went away: stop reading from the kubelet.
                break;
            }
        }
    });
    Ok(Reply::stream(rx).content_type("text/plain"))
}

/// The headers of a WebSocket (or SPDY) upgrade, passed on both ways.
const UPGRADE_REQUEST_HEADERS: &[header::HeaderName] = &[
    header::CONNECTION,
    header::UPGRADE,
    header::SEC_WEBSOCKET_KEY,
    header::SEC_WEBSOCKET_VERSION,
    header::SEC_WEBSOCKET_PROTOCOL,
    header::SEC_WEBSOCKET_EXTENSIONS,
];
const UPGRADE_RESPONSE_HEADERS: &[header::HeaderName] = &[
    header::CONNECTION,
    header::UPGRADE,
    header::SEC_WEBSOCKET_ACCEPT,
    header::SEC_WEBSOCKET_PROTOCOL,
    header::SEC_WEBSOCKET_EXTENSIONS,
];

/// `pods/{name}/exec`: the client's upgrade request is repeated to the
/// kubelet; when the kubelet switches protocols, the client gets the same
/// 101 and the two upgraded connections are joined.
pub async fn exec(
    api: &Arc<Api>,
    path: &ResourcePath,
    query: &Query,
    raw_query: Option<&str>,
    headers: &HeaderMap,
    upgrade: Option<hyper::upgrade::OnUpgrade>,
) -> Result<Reply, ApiError> {
    let Some(client_upgrade) = upgrade else {
        return Err(ApiError::bad_request(
            "Upgrade request required: pods/exec is served over a WebSocket (v5.channel.k8s.io)",
        ));
    };
    let ns = path.namespace.as_deref().unwrap_or_default();
    let name = path.name.as_deref().unwrap_or_default();
    let t = target(api, ns, name, query.get("container")).await?;
    let stream = connect(api, &t).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ApiError::internal(format!("talking to the kubelet: {e}")))?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    let mut req = Request::get(kubelet_uri("exec", &t, raw_query))
        .header(header::HOST, format!("{}:{}", t.host, t.port))
        .body(Empty::<Bytes>::new())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    for h in UPGRADE_REQUEST_HEADERS {
        for v in headers.get_all(h) {
            req.headers_mut().append(h.clone(), v.clone());
        }
    }
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| ApiError::internal(format!("talking to the kubelet: {e}")))?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Err(kubelet_error(resp).await);
    }
    let mut answer = http::Response::new(axum::body::Body::empty());
    *answer.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for h in UPGRADE_RESPONSE_HEADERS {
        for v in resp.headers().get_all(h) {
            answer.headers_mut().append(h.clone(), v.clone());
        }
    }
    if !answer.headers().contains_key(header::CONNECTION) {
        answer
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    }
    let kubelet_upgrade = hyper::upgrade::on(resp);
    tokio::spawn(async move {
        let (Ok(client), Ok(kubelet)) = (client_upgrade.await, kubelet_upgrade.await) else {
            return;
        };
        let mut client = TokioIo::new(client);
        let mut kubelet = TokioIo::new(kubelet);
        let _ = tokio::io::copy_bidirectional(&mut client, &mut kubelet).await;
    });
    Ok(Reply::raw(answer))
}

/// TLS to kubelets: the API server's kubelet client certificate if it has
/// one, and no verification of the kubelet's own certificate (kube's
/// default without `--kubelet-certificate-authority`).
pub fn kubelet_tls(client_cert: Option<(&str, &str)>) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyKubelet(provider)));
    let mut config = match client_cert {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the kubelet client certificate: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
                .map_err(|e| format!("the kubelet client key: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the kubelet client certificate: {e}"))?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts any kubelet serving certificate, still checking that the
/// handshake's signatures are made with the presented key.
#[derive(Debug)]
struct AnyKubelet(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyKubelet {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_container_is_the_named_one_or_the_only_one() {
        let one = json!({"spec": {"containers": [{"name": "web"}]}});
        assert_eq!(container_of(&one, "p", None).unwrap(), "web");
        assert_eq!(container_of(&one, "p", Some("")).unwrap(), "web");
        assert_eq!(container_of(&one, "p", Some("web")).unwrap(), "web");
        let e = container_of(&one, "p", Some("db")).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "container db is not valid for pod p")
        );
        let two = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}],
                                  "initContainers": [{"name": "init"}]}});
        let e = container_of(&two, "p", None).unwrap_err();
        assert_eq!(
            e.message,
            "a container name must be specified for pod p, choose one of: [a b]"
        );
        assert_eq!(container_of(&two, "p", Some("init")).unwrap(), "init");
    }

    #[test]
    fn the_kubelet_is_at_the_internal_ip_and_the_daemon_port() {
        let node = json!({"status": {
            "addresses": [{"type": "Hostname", "address": "seed"},
                          {"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 41234}}}});
        assert_eq!(kubelet_of(&node), Some(("127.0.0.1".into(), 41234)));
        let bare = json!({"status": {"addresses": [{"type": "Hostname", "address": "n1"}]}});
        assert_eq!(kubelet_of(&bare), Some(("n1".into(), DEFAULT_KUBELET_PORT)));
        assert_eq!(kubelet_of(&json!({"status": {}})), None);
    }

    #[test]
    fn the_query_goes_on_without_the_container() {
        let t = Target {
            host: "h".into(),
            port: 1,
            namespace: "ns".into(),
            pod: "p".into(),
            container: "c".into(),
        };
        assert_eq!(
            kubelet_uri(
                "exec",
                &t,
                Some("command=ls&command=-l&container=c&stdout=true")
            ),
            "/exec/ns/p/c?command=ls&command=-l&stdout=true"
        );
        assert_eq!(
            kubelet_uri("containerLogs", &t, None),
            "/containerLogs/ns/p/c"
        );
    }
}
