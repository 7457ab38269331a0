//! External admission webhooks end to end: a small HTTPS webhook server in
//! the test (self-signed certificate from rcgen, passed as `caBundle`)
//! answers AdmissionReviews by path, recording every call, and kube-rs
//! drives the API server as a client would.

mod common;

use std::sync::Arc;
use std::time::Duration;

use apimachinery::ApiError;
use apiserver::admission_server;
use axum::extract::State;
use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, Secret, Service};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde_json::{Value, json};

fn b64(s: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Every review the webhook server received: (path, query, review).
#[derive(Default)]
struct Calls(Mutex<Vec<(String, String, Value)>>);

impl Calls {
    fn count(&self, path: &str) -> usize {
        self.0.lock().iter().filter(|c| c.0 == path).count()
    }

    fn last(&self, path: &str) -> (String, Value) {
        let calls = self.0.lock();
        let c = calls
            .iter()
            .rev()
            .find(|c| c.0 == path)
            .unwrap_or_else(|| panic!("no call to {path}"));
        (c.1.clone(), c.2.clone())
    }
}

/// The test webhook: what it answers depends on the path.
async fn answer(
    State(calls): State<Arc<Calls>>,
    uri: http::Uri,
    body: axum::body::Bytes,
) -> axum::Json<Value> {
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = uri.path().to_string();
    calls.0.lock().push((
        path.clone(),
        uri.query().unwrap_or("").to_string(),
        review.clone(),
    ));
    let mut resp = json!({"uid": review["request"]["uid"], "allowed": true});
    match path.as_str() {
        "/deny" => {
            resp["allowed"] = json!(false);
            resp["status"] = json!({"message": "configmaps are closed today"});
        }
        "/forbid" => {
            resp["allowed"] = json!(false);
            resp["status"] =
                json!({"code": 403, "reason": "Forbidden", "message": "not on my watch"});
        }
        "/label" => {
            let op = if review["request"]["object"]["metadata"]["labels"].is_object() {
                json!({"op": "add", "path": "/metadata/labels/mutated", "value": "yes"})
            } else {
                json!({"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}})
            };
            resp["patchType"] = json!("JSONPatch");
            resp["patch"] = json!(b64(json!([op]).to_string().as_bytes()));
        }
        "/slow" => tokio::time::sleep(Duration::from_secs(3)).await,
        _ => {}
    }
    axum::Json(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": resp,
    }))
}

struct Webhook {
    /// `https://127.0.0.1:<port>`
    base: String,
    port: u16,
    ca_pem: String,
    calls: Arc<Calls>,
}

/// A serving certificate for loopback and `hook.default.svc`, and a server
/// for `router` with it.
async fn serve_https(router: axum::Router) -> (String, u16, String) {
    let ck = rcgen::generate_simple_self_signed(vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "hook.default.svc".to_string(),
    ])
    .unwrap();
    let tls = apiserver::TlsConfig {
        cert_chain_pem: ck.cert.pem(),
        key_pem: ck.signing_key.serialize_pem(),
        client_ca_pem: None,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        admission_server::serve_tls(router, listener, &tls, std::future::pending()).await
    });
    (format!("https://127.0.0.1:{port}"), port, ck.cert.pem())
}

async fn webhook() -> Webhook {
    let calls = Arc::new(Calls::default());
    let router = axum::Router::new()
        .fallback(answer)
        .with_state(calls.clone());
    let (base, port, ca_pem) = serve_https(router).await;
    Webhook {
        base,
        port,
        ca_pem,
        calls,
    }
}

impl Webhook {
    /// One webhook entry calling `path` for `rules`.
    fn hook(&self, name: &str, path: &str, rules: Value) -> Value {
        json!({
            "name": name,
            "clientConfig": {"url": format!("{}{path}", self.base), "caBundle": b64(self.ca_pem.as_bytes())},
            "rules": rules,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        })
    }
}

fn rules(ops: &[&str], resources: &[&str]) -> Value {
    json!([{"operations": ops, "apiGroups": [""], "apiVersions": ["v1"], "resources": resources}])
}

async fn validating(client: &kube::Client, name: &str, hooks: Vec<Value>) {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let obj =
        serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": hooks})).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

async fn mutating(client: &kube::Client, name: &str, hooks: Vec<Value>) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let obj =
        serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": hooks})).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

fn configmap(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )
    .unwrap()
}

/// The HTTP code and message of a failed call.
fn api_error<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_denying_webhook_fails_the_request_with_its_message_and_code() {
    let t = common::start().await;
    let hook = webhook().await;
    let cm_rules = rules(&["CREATE"], &["configmaps"]);
    let mut plain = hook.hook("deny.test.trellis", "/deny", cm_rules.clone());
    plain["objectSelector"] = json!({"matchLabels": {"mode": "plain"}});
    let mut forbid = hook.hook("forbid.test.trellis", "/forbid", cm_rules);
    forbid["objectSelector"] = json!({"matchLabels": {"mode": "forbid"}});
    validating(&t.client, "deny", vec![plain, forbid]).await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");

    // No code in the webhook's status: kube answers 400.
    let (code, msg) = api_error(
        cms.create(
            &PostParams::default(),
            &configmap("a", json!({"mode": "plain"})),
        )
        .await,
    );
    assert_eq!(code, 400);
    assert_eq!(
        msg,
        "admission webhook \"deny.test.trellis\" denied the request: configmaps are closed today"
    );
    // The webhook's own code and reason are kept.
    let raw = reqwest_like_post(&t.url, "/api/v1/namespaces/default/configmaps", &json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "labels": {"mode": "forbid"}},
    }))
    .await;
    assert_eq!(raw.0, 403);
    assert_eq!(raw.1["reason"], "Forbidden");
    assert_eq!(
        raw.1["message"],
        "admission webhook \"forbid.test.trellis\" denied the request: not on my watch"
    );
    assert!(cms.get_opt("a").await.unwrap().is_none());
    assert!(cms.get_opt("b").await.unwrap().is_none());
}

/// A plain HTTP POST (to read the Status body kube-rs reduces to code and
/// message).
async fn reqwest_like_post(base: &str, path: &str, body: &Value) -> (u16, Value) {
    use http_body_util::BodyExt;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let req = http::Request::post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn an_allowing_webhook_lets_the_request_through_and_sees_a_full_review() {
    let s = common::start_secure("").await;
    let admin = s.admin().await;
    let hook = webhook().await;
    validating(
        &admin,
        "allow",
        vec![hook.hook(
            "allow.test.trellis",
            "/allow",
            rules(&["*"], &["configmaps"]),
        )],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    cms.create(&PostParams::default(), &configmap("c", json!({"app": "x"})))
        .await
        .unwrap();
    assert_eq!(hook.calls.count("/allow"), 1);
    let (query, review) = hook.calls.last("/allow");
    assert_eq!(query, "timeout=5s");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    let req = &review["request"];
    assert!(!req["uid"].as_str().unwrap().is_empty());
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        req["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(req["requestKind"], req["kind"]);
    assert_eq!(
        (req["name"].as_str(), req["namespace"].as_str()),
        (Some("c"), Some("default"))
    );
    assert_eq!(req["userInfo"]["username"], "trellis-admin");
    assert!(
        req["userInfo"]["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:masters"))
    );
    assert_eq!(req["object"]["data"]["k"], "v");
    assert!(req["oldObject"].is_null());
    assert_eq!(req["dryRun"], false);
    assert_eq!(req["options"]["kind"], "CreateOptions");

    // An update carries the old object too.
    cms.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "w"}})),
    )
    .await
    .unwrap();
    let (_, review) = hook.calls.last("/allow");
    assert_eq!(review["request"]["operation"], "UPDATE");
    assert_eq!(review["request"]["oldObject"]["data"]["k"], "v");
    assert_eq!(review["request"]["object"]["data"]["k"], "w");
}

#[tokio::test]
async fn a_mutating_webhooks_patch_is_applied_before_validation() {
    let t = common::start().await;
    let hook = webhook().await;
    let cm_rules = rules(&["CREATE"], &["configmaps"]);
    mutating(
        &t.client,
        "label",
        vec![hook.hook("label.test.trellis", "/label", cm_rules.clone())],
    )
    .await;
    validating(
        &t.client,
        "watch",
        vec![hook.hook("watch.test.trellis", "/watch", cm_rules)],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let created = cms
        .create(&PostParams::default(), &configmap("m", json!({"app": "x"})))
        .await
        .unwrap();
    let labels = created.metadata.labels.unwrap();
    assert_eq!(labels.get("mutated").map(String::as_str), Some("yes"));
    assert_eq!(labels.get("app").map(String::as_str), Some("x"));
    // Validating webhooks see the object as mutated.
    let (_, review) = hook.calls.last("/watch");
    assert_eq!(
        review["request"]["object"]["metadata"]["labels"]["mutated"],
        "yes"
    );
    // Stored so, too.
    let stored = cms.get("m").await.unwrap();
    assert_eq!(
        stored
            .metadata
            .labels
            .unwrap()
            .get("mutated")
            .map(String::as_str),
        Some("yes")
    );
    // Without labels the webhook adds the whole map.
    let created = cms
        .create(&PostParams::default(), &configmap("n", Value::Null))
        .await
        .unwrap();
    assert_eq!(created.metadata.labels.unwrap()["mutated"], "yes");
}

#[tokio::test]
async fn a_timing_out_webhook_follows_its_failure_policy() {
    let t = common::start().await;
    let hook = webhook().await;
    let mut slow = hook.hook(
        "slow.test.trellis",
        "/slow",
        rules(&["CREATE"], &["configmaps"]),
    );
    slow["timeoutSeconds"] = json!(1);
    validating(&t.client, "slow", vec![slow]).await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");

    let started = std::time::Instant::now();
    let (code, msg) = api_error(
        cms.create(&PostParams::default(), &configmap("t1", json!({})))
            .await,
    );
    assert!(started.elapsed() < Duration::from_millis(2500));
    assert_eq!(code, 500);
    assert_eq!(
        msg,
        format!(
            "Internal error occurred: failed calling webhook \"slow.test.trellis\": failed to call webhook: Post \"https://127.0.0.1:{}/slow?timeout=1s\": context deadline exceeded",
            hook.port
        )
    );
    assert!(cms.get_opt("t1").await.unwrap().is_none());

    let configs: Api<ValidatingWebhookConfiguration> = Api::all(t.client.clone());
    let mut cfg = configs.get("slow").await.unwrap();
    cfg.webhooks.as_mut().unwrap()[0].failure_policy = Some("Ignore".into());
    configs
        .replace("slow", &PostParams::default(), &cfg)
        .await
        .unwrap();
    cms.create(&PostParams::default(), &configmap("t2", json!({})))
        .await
        .unwrap();
    assert_eq!(hook.calls.count("/slow"), 2);

    // An unreachable webhook is a call failure as well.
    let mut gone = hook.hook(
        "gone.test.trellis",
        "/x",
        rules(&["CREATE"], &["configmaps"]),
    );
    gone["clientConfig"]["url"] = json!("https://127.0.0.1:1/x");
    validating(&t.client, "gone", vec![gone]).await;
    let (code, msg) = api_error(
        cms.create(&PostParams::default(), &configmap("t3", json!({})))
            .await,
    );
    assert_eq!(code, 500);
    assert!(
        msg.starts_with("Internal error occurred: failed calling webhook \"gone.test.trellis\": failed to call webhook: Post \"https://127.0.0.1:1/x?timeout=5s\": dial tcp"),
        "{msg}"
    );
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(t.client.clone());
    configs
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap();

    // So is a webhook whose certificate the caBundle does not vouch for.
    let stranger = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let mut untrusted = hook.hook(
        "untrusted.test.trellis",
        "/allow",
        rules(&["CREATE"], &["configmaps"]),
    );
    untrusted["clientConfig"]["caBundle"] = json!(b64(stranger.cert.pem().as_bytes()));
    validating(&t.client, "untrusted", vec![untrusted]).await;
    let (code, msg) = api_error(
        cms.create(&PostParams::default(), &configmap("t4", json!({})))
            .await,
    );
    assert_eq!(code, 500);
    assert!(msg.contains("\": tls: "), "{msg}");
    assert_eq!(hook.calls.count("/allow"), 0);
}

#[tokio::test]
async fn rules_and_selectors_decide_which_requests_call_the_webhook() {
    let t = common::start().await;
    let hook = webhook().await;
    let mut counted = hook.hook(
        "count.test.trellis",
        "/count",
        rules(&["CREATE"], &["configmaps"]),
    );
    counted["namespaceSelector"] = json!({"matchLabels": {"webhooks": "on"}});
    counted["objectSelector"] = json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]});
    validating(&t.client, "count", vec![counted]).await;
    let nss: Api<Namespace> = Api::all(t.client.clone());
    for (name, labels) in [("on", json!({"webhooks": "on"})), ("off", json!({}))] {
        let ns =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        nss.create(&PostParams::default(), &ns).await.unwrap();
    }
    let on: Api<ConfigMap> = Api::namespaced(t.client.clone(), "on");
    let off: Api<ConfigMap> = Api::namespaced(t.client.clone(), "off");
    let pp = PostParams::default();

    off.create(&pp, &configmap("a", json!({"app": "x"})))
        .await
        .unwrap();
    assert_eq!(hook.calls.count("/count"), 0, "namespace selector");
    on.create(&pp, &configmap("b", json!({"tier": "x"})))
        .await
        .unwrap();
    assert_eq!(hook.calls.count("/count"), 0, "object selector");
    let secrets: Api<Secret> = Api::namespaced(t.client.clone(), "on");
    let secret =
        serde_json::from_value(json!({"metadata": {"name": "s", "labels": {"app": "x"}}})).unwrap();
    secrets.create(&pp, &secret).await.unwrap();
    assert_eq!(hook.calls.count("/count"), 0, "rule resources");
    on.create(&pp, &configmap("c", json!({"app": "x"})))
        .await
        .unwrap();
    assert_eq!(hook.calls.count("/count"), 1, "a matching request");
    on.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "w"}})),
    )
    .await
    .unwrap();
    on.delete("c", &DeleteParams::default()).await.unwrap();
    assert_eq!(hook.calls.count("/count"), 1, "rule operations");
    // Labelling the namespace brings it in.
    nss.patch(
        "off",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"webhooks": "on"}}})),
    )
    .await
    .unwrap();
    off.create(&pp, &configmap("d", json!({"app": "x"})))
        .await
        .unwrap();
    assert_eq!(hook.calls.count("/count"), 2, "relabelled namespace");
}

#[tokio::test]
async fn deletes_reach_validating_webhooks_with_the_old_object() {
    let t = common::start().await;
    let hook = webhook().await;
    validating(
        &t.client,
        "no-deletes",
        vec![hook.hook(
            "deny.test.trellis",
            "/deny",
            rules(&["DELETE"], &["configmaps"]),
        )],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    cms.create(&PostParams::default(), &configmap("keep", json!({})))
        .await
        .unwrap();
    assert_eq!(hook.calls.count("/deny"), 0);
    let (code, msg) = api_error(cms.delete("keep", &DeleteParams::default()).await);
    assert_eq!(code, 400);
    assert!(msg.contains("configmaps are closed today"), "{msg}");
    let (_, review) = hook.calls.last("/deny");
    assert_eq!(review["request"]["operation"], "DELETE");
    assert_eq!(review["request"]["name"], "keep");
    assert!(review["request"]["object"].is_null());
    assert_eq!(review["request"]["oldObject"]["metadata"]["name"], "keep");
    assert_eq!(review["request"]["options"]["kind"], "DeleteOptions");
    assert!(cms.get_opt("keep").await.unwrap().is_some());
}

#[tokio::test]
async fn dry_runs_skip_nothing_but_refuse_webhooks_with_side_effects() {
    let t = common::start().await;
    let hook = webhook().await;
    // v1 refuses `sideEffects: Some`...
    let mut some = hook.hook(
        "some.test.trellis",
        "/allow",
        rules(&["CREATE"], &["configmaps"]),
    );
    some["sideEffects"] = json!("Some");
    let api: Api<ValidatingWebhookConfiguration> = Api::all(t.client.clone());
    let obj =
        serde_json::from_value(json!({"metadata": {"name": "legacy"}, "webhooks": [some.clone()]}))
            .unwrap();
    let (code, msg) = api_error(api.create(&PostParams::default(), &obj).await);
    assert_eq!(code, 422);
    assert!(
        msg.contains("webhooks[0].sideEffects: Unsupported value: \"Some\""),
        "{msg}"
    );
    // ...but objects written through v1beta1 may still carry it.
    let stored = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "legacy", "uid": "0d6c6f1e-0000-4000-8000-000000000001"},
        "webhooks": [some],
    });
    t.server
        .store
        .create(
            "/registry/admissionregistration.k8s.io/validatingwebhookconfigurations/legacy",
            bytes::Bytes::from(stored.to_string()),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let (code, msg) = api_error(cms.create(&dry, &configmap("d", json!({}))).await);
    assert_eq!(code, 400);
    assert_eq!(
        msg,
        "admission webhook \"some.test.trellis\" does not support dry run"
    );
    assert_eq!(hook.calls.count("/allow"), 0);
    cms.create(&PostParams::default(), &configmap("d", json!({})))
        .await
        .unwrap();
    assert_eq!(hook.calls.count("/allow"), 1);

    // A side-effect-free webhook is called on dry runs, told so.
    api.delete("legacy", &DeleteParams::default())
        .await
        .unwrap();
    validating(
        &t.client,
        "clean",
        vec![hook.hook(
            "clean.test.trellis",
            "/allow",
            rules(&["CREATE"], &["configmaps"]),
        )],
    )
    .await;
    cms.create(&dry, &configmap("e", json!({}))).await.unwrap();
    let (_, review) = hook.calls.last("/allow");
    assert_eq!(review["request"]["dryRun"], true);
    assert!(cms.get_opt("e").await.unwrap().is_none());
}

#[tokio::test]
async fn service_references_resolve_through_endpoints() {
    let t = common::start().await;
    let hook = webhook().await;
    let services: Api<Service> = Api::namespaced(t.client.clone(), "default");
    let svc = serde_json::from_value(json!({"metadata": {"name": "hook"},
        "spec": {"ports": [{"port": 443, "targetPort": hook.port}]}}))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    let endpoints: Api<Endpoints> = Api::namespaced(t.client.clone(), "default");
    let ep = serde_json::from_value(json!({"metadata": {"name": "hook"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": hook.port}]}]}))
    .unwrap();
    endpoints.create(&PostParams::default(), &ep).await.unwrap();
    let mut by_service = hook.hook("svc.test.trellis", "", rules(&["CREATE"], &["configmaps"]));
    by_service["clientConfig"] = json!({
        "service": {"namespace": "default", "name": "hook", "path": "/allow"},
        "caBundle": b64(hook.ca_pem.as_bytes()),
    });
    validating(&t.client, "svc", vec![by_service.clone()]).await;
    let stored: Api<ValidatingWebhookConfiguration> = Api::all(t.client.clone());
    let cfg = stored.get("svc").await.unwrap();
    let webhook = &cfg.webhooks.unwrap()[0];
    assert_eq!(
        webhook.client_config.service.as_ref().unwrap().port,
        Some(443)
    );
    assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"));
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    cms.create(&PostParams::default(), &configmap("s", json!({})))
        .await
        .unwrap();
    assert_eq!(hook.calls.count("/allow"), 1);

    by_service["name"] = json!("missing.test.trellis");
    by_service["clientConfig"]["service"]["name"] = json!("missing");
    validating(&t.client, "missing", vec![by_service]).await;
    let (code, msg) = api_error(
        cms.create(&PostParams::default(), &configmap("s2", json!({})))
            .await,
    );
    assert_eq!(code, 500);
    assert!(msg.ends_with(": service \"missing\" not found"), "{msg}");
}

/// A plugin served through [`admission_server`]: labels what it admits and
/// refuses objects named `bad`.
struct Stamp;

#[async_trait::async_trait]
impl apiserver::AdmissionPlugin for Stamp {
    fn name(&self) -> &str {
        "Stamp"
    }
    async fn mutate(
        &self,
        _a: &apiserver::Attributes<'_>,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        obj["metadata"]["annotations"] = json!({"stamped": "true"});
        Ok(())
    }
    async fn validate(&self, a: &apiserver::Attributes<'_>, _obj: &Value) -> Result<(), ApiError> {
        if a.name == "bad" {
            return Err(ApiError::forbidden(format!(
                "{} may not be called bad",
                a.resource.kind
            )));
        }
        Ok(())
    }
}

#[tokio::test]
async fn in_process_plugins_serve_as_a_webhook_for_another_server() {
    let t = common::start().await;
    let (base, _, ca) = serve_https(admission_server::router(vec![Arc::new(Stamp)])).await;
    let entry = |name: &str| {
        json!({
            "name": name,
            "clientConfig": {"url": format!("{base}/admit"), "caBundle": b64(ca.as_bytes())},
            "rules": rules(&["CREATE", "UPDATE"], &["configmaps"]),
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    };
    mutating(&t.client, "stamp", vec![entry("stamp.test.trellis")]).await;
    validating(&t.client, "stamp", vec![entry("stamp.test.trellis")]).await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let cm = cms
        .create(&PostParams::default(), &configmap("good", json!({})))
        .await
        .unwrap();
    assert_eq!(cm.metadata.annotations.unwrap()["stamped"], "true");
    let (code, msg) = api_error(
        cms.create(&PostParams::default(), &configmap("bad", json!({})))
            .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        msg,
        "admission webhook \"stamp.test.trellis\" denied the request: ConfigMap may not be called bad"
    );
}
