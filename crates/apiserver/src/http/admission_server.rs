//! In-process admission plugins served as an external admission webhook, so
//! the checks the embedded server runs can guard a real kube-apiserver too.
//!
//! A POST of an `admission.k8s.io/v1 AdmissionReview` (on any path) is
//! turned into [`Attributes`] and an object, run through the plugins'
//! mutating hooks and then their validating hooks, and answered with
//! `allowed` plus, when a plugin changed the object, a JSON patch from the
//! object as sent to the object as admitted. A refusal carries the plugin's
//! `metav1.Status` (code, reason, message, causes).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::ApiError;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use http::StatusCode;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Map, Value, json};
use tower::ServiceExt;

use crate::admission::UserInfo;
use crate::admission::{AdmissionPlugin, Attributes, Operation};
use crate::http::tls::TlsConfig;
use crate::storage::registry::Resource;

/// A TLS handshake that has not finished by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

type Plugins = Arc<Vec<Arc<dyn AdmissionPlugin>>>;

/// The webhook's routes: `/healthz`, and a review on every other path (so
/// one server can sit behind any `clientConfig` path).
pub fn router(plugins: Vec<Arc<dyn AdmissionPlugin>>) -> axum::Router {
    axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .fallback(serve_review)
        .layer(DefaultBodyLimit::max(crate::http::MAX_BODY_BYTES))
        .with_state(Arc::new(plugins))
}

async fn serve_review(
    State(plugins): State<Plugins>,
    method: http::Method,
    body: Bytes,
) -> Response {
    if method != http::Method::POST {
        return crate::http::error_response(&ApiError::method_not_allowed(
            "admission reviews are POSTed",
        ));
    }
    let parsed = serde_json::from_slice::<Value>(&body)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")));
    match parsed {
        Ok(review_in) => match review(&plugins, &review_in).await {
            Ok(out) => (
                StatusCode::OK,
                [(http::header::CONTENT_TYPE, "application/json")],
                serde_json::to_vec(&out).unwrap_or_default(),
            )
                .into_response(),
            Err(e) => crate::http::error_response(&e),
        },
        Err(e) => crate::http::error_response(&e),
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Answers one AdmissionReview. `Err` means the review itself is malformed
/// (the caller answers 400); a refusal by a plugin is an `Ok` review with
/// `allowed: false`.
pub async fn review(
    plugins: &[Arc<dyn AdmissionPlugin>],
    review: &Value,
) -> Result<Value, ApiError> {
    if str_at(review, "/apiVersion") != "admission.k8s.io/v1"
        || str_at(review, "/kind") != "AdmissionReview"
    {
        return Err(ApiError::bad_request(
            "expected an admission.k8s.io/v1 AdmissionReview",
        ));
    }
    let req = review
        .get("request")
        .filter(|r| r.is_object())
        .ok_or_else(|| ApiError::bad_request("the AdmissionReview has no request"))?;
    let uid = str_at(req, "/uid");
    if uid.is_empty() {
        return Err(ApiError::bad_request("request.uid is required"));
    }
    let operation = match str_at(req, "/operation") {
        "CREATE" => Some(Operation::Create),
        "UPDATE" => Some(Operation::Update),
        "DELETE" => Some(Operation::Delete),
        // Plugins have no hook for CONNECT: nothing of theirs can object.
        "CONNECT" => None,
        other => {
            return Err(ApiError::bad_request(format!(
                "request.operation {other:?} is not one of CREATE, UPDATE, DELETE, CONNECT"
            )));
        }
    };
    let present = |f: &str| req.get(f).filter(|v| v.is_object());
    let object = present("object");
    let old = present("oldObject");
    let namespace = Some(str_at(req, "/namespace")).filter(|n| !n.is_empty());
    let resource = review_resource(req, namespace.is_some());
    let user = req
        .get("userInfo")
        .and_then(|u| serde_json::from_value::<UserInfo>(u.clone()).ok())
        .map(Arc::new);
    let attrs = Attributes {
        operation: operation.unwrap_or(Operation::Create),
        resource: &resource,
        subresource: Some(str_at(req, "/subResource")).filter(|s| !s.is_empty()),
        namespace,
        name: str_at(req, "/name"),
        old,
        dry_run: req.get("dryRun").and_then(Value::as_bool).unwrap_or(false),
        user,
    };
    let outcome = match operation {
        None => Ok(None),
        Some(Operation::Delete) => {
            let target = old
                .ok_or_else(|| ApiError::bad_request("a DELETE review needs request.oldObject"))?;
            run_validate(plugins, &attrs, target).await.map(|()| None)
        }
        Some(_) => {
            let sent =
                object.ok_or_else(|| ApiError::bad_request("the review needs request.object"))?;
            let mut obj = sent.clone();
            admit(plugins, &attrs, &mut obj).await.map(|()| {
                let ops = json_patch_diff(sent, &obj);
                (!ops.is_empty()).then_some(ops)
            })
        }
    };
    let mut warnings = Vec::new();
    if let (Ok(_), Some(Operation::Create | Operation::Update), Some(obj)) =
        (&outcome, operation, object)
    {
        for p in plugins {
            warnings.extend(p.warnings(&attrs, obj).await);
        }
    }
    let mut response = Map::new();
    response.insert("uid".into(), json!(uid));
    if !warnings.is_empty() {
        response.insert("warnings".into(), json!(warnings));
    }
    match outcome {
        Ok(patch) => {
            response.insert("allowed".into(), json!(true));
            if let Some(ops) = patch {
                let raw = serde_json::to_vec(&ops).unwrap_or_default();
                response.insert("patchType".into(), json!("JSONPatch"));
                response.insert(
                    "patch".into(),
                    json!(base64::engine::general_purpose::STANDARD.encode(raw)),
                );
            }
        }
        Err(e) => {
            response.insert("allowed".into(), json!(false));
            response.insert("status".into(), e.to_status());
        }
    }
    Ok(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    }))
}

async fn admit(
    plugins: &[Arc<dyn AdmissionPlugin>],
    attrs: &Attributes<'_>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    for p in plugins {
        p.mutate(attrs, obj).await?;
    }
    run_validate(plugins, attrs, obj).await
}

async fn run_validate(
    plugins: &[Arc<dyn AdmissionPlugin>],
    attrs: &Attributes<'_>,
    obj: &Value,
) -> Result<(), ApiError> {
    for p in plugins {
        p.validate(attrs, obj).await?;
    }
    Ok(())
}

/// The resource a review is about, as far as a plugin can ask: group,
/// version, kind, plural and scope. Nothing here is stored or served.
fn review_resource(req: &Value, namespaced: bool) -> Resource {
    let group = str_at(req, "/kind/group").to_string();
    let version = str_at(req, "/kind/version").to_string();
    let kind = str_at(req, "/kind/kind").to_string();
    let plural = str_at(req, "/resource/resource").to_string();
    let storage = format!(
        "{}/{plural}",
        if group.is_empty() { "core" } else { &group }
    );
    Resource {
        singular: kind.to_lowercase(),
        list_kind: format!("{kind}List"),
        storage_version: version.clone(),
        namespaced,
        short_names: Vec::new(),
        categories: Vec::new(),
        status_subresource: false,
        scale: None,
        eviction: false,
        storage,
        schema: None,
        printer_columns: Vec::new(),
        extra_fields: Vec::new(),
        builtin: false,
        crd_uid: None,
        verbs: crate::storage::registry::ALL_VERBS.to_vec(),
        strategy: &crate::storage::registry::NoRules,
        group,
        version,
        plural,
        kind,
    }
}

/// An RFC 6902 patch that turns `from` into `to`: maps are compared key by
/// key; lists and scalars that differ are replaced whole, which is always
/// correct and keeps patches readable for the small changes defaulting makes.
pub fn json_patch_diff(from: &Value, to: &Value) -> Vec<Value> {
    let mut ops = Vec::new();
    diff_into(from, to, &mut String::new(), &mut ops);
    ops
}

fn diff_into(from: &Value, to: &Value, path: &mut String, ops: &mut Vec<Value>) {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                let len = path.len();
                push_token(path, k);
                match b.get(k) {
                    Some(vb) => diff_into(va, vb, path, ops),
                    None => ops.push(json!({"op": "remove", "path": path.as_str()})),
                }
                path.truncate(len);
            }
            for (k, vb) in b {
                if !a.contains_key(k) {
                    let len = path.len();
                    push_token(path, k);
                    ops.push(json!({"op": "add", "path": path.as_str(), "value": vb}));
                    path.truncate(len);
                }
            }
        }
        (a, b) if a == b => {}
        (_, b) => ops.push(json!({"op": "replace", "path": path.as_str(), "value": b})),
    }
}

/// Appends `/token`, escaped as JSON pointers require.
fn push_token(path: &mut String, token: &str) {
    path.push('/');
    path.push_str(&token.replace('~', "~0").replace('/', "~1"));
}

/// Serves `router` over HTTPS on `listener` until `shutdown`: the webhook
/// side needs only a serving certificate, no client authentication.
pub async fn serve_tls(
    router: axum::Router,
    listener: tokio::net::TcpListener,
    tls: &TlsConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), crate::error::Error> {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.server_config()?);
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer): (_, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => return Ok(()),
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let service = hyper::service::service_fn(move |req| router.clone().oneshot(req));
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_are_patches_that_reproduce_the_target() {
        let from = json!({"a": 1, "b": {"c": [1, 2], "d/e": "x"}, "gone": true});
        let to = json!({"a": 2, "b": {"c": [1, 2, 3], "d/e": "x", "new~": {}}});
        let ops = json_patch_diff(&from, &to);
        let mut patched = from.clone();
        apimachinery::patch::json_patch(&mut patched, &Value::Array(ops.clone())).unwrap();
        assert_eq!(patched, to);
        assert!(ops.iter().any(|o| o["path"] == "/b/new~0"));
        assert!(json_patch_diff(&to, &to).is_empty());
    }

    struct LabelAndDeny;

    #[async_trait::async_trait]
    impl AdmissionPlugin for LabelAndDeny {
        fn name(&self) -> &str {
            "test"
        }
        async fn mutate(&self, _a: &Attributes<'_>, obj: &mut Value) -> Result<(), ApiError> {
            obj["metadata"]["labels"] = json!({"seen": "yes"});
            Ok(())
        }
        async fn validate(&self, a: &Attributes<'_>, _obj: &Value) -> Result<(), ApiError> {
            if a.name == "bad" {
                return Err(ApiError::forbidden("not this one"));
            }
            Ok(())
        }
        async fn warnings(&self, a: &Attributes<'_>, _obj: &Value) -> Vec<String> {
            vec![format!("{} is watched", a.name)]
        }
    }

    fn request(name: &str, op: &str) -> Value {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u1", "operation": op, "name": name, "namespace": "default",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "object": {"metadata": {"name": name}}, "oldObject": {"metadata": {"name": name}},
        }})
    }

    #[tokio::test]
    async fn reviews_are_answered_with_patches_or_refusals() {
        let plugins: Vec<Arc<dyn AdmissionPlugin>> = vec![Arc::new(LabelAndDeny)];
        let out = review(&plugins, &request("good", "CREATE")).await.unwrap();
        assert_eq!(out["response"]["uid"], "u1");
        assert_eq!(out["response"]["allowed"], true);
        assert_eq!(out["response"]["patchType"], "JSONPatch");
        assert_eq!(out["response"]["warnings"], json!(["good is watched"]));
        let out = review(&plugins, &request("bad", "DELETE")).await.unwrap();
        assert!(out["response"].get("warnings").is_none());
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["code"], 403);
        assert!(out["response"].get("patch").is_none());
        assert!(
            review(&plugins, &json!({"kind": "AdmissionReview"}))
                .await
                .is_err()
        );
    }
}
