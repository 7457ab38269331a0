//! External admission webhooks, as kube-apiserver calls them: every
//! MutatingWebhookConfiguration and ValidatingWebhookConfiguration names
//! HTTPS endpoints that receive an `admission.k8s.io/v1 AdmissionReview` for
//! each request their rules, namespace selector and object selector match.
//!
//! [`WebhookAdmission`] is one [`AdmissionPlugin`] that the server runs after
//! every in-process plugin: its mutating hook calls the mutating webhooks in
//! order and applies their JSON patches; its validating hook calls the
//! validating webhooks concurrently (and, for deletes, the mutating ones too,
//! since deletes have no mutating phase here). A webhook that cannot be
//! reached, times out or answers nonsense follows its `failurePolicy`.
//!
//! This module also holds the defaulting and validation of the two
//! configuration kinds, called from [`crate::builtin`].

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use apimachinery::selector::{LabelSelector, validate_label_selector_json};
use apimachinery::{ApiError, Cause};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::admissionregistration::v1 as admreg;
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use store::{RangeRequest, Revision};

use crate::admission::{AdmissionPlugin, Attributes, Operation};
use crate::server::Server;

/// The API group of the configuration kinds. Requests on it never reach
/// webhooks, so a broken webhook cannot lock its own configuration in.
pub const GROUP: &str = "admissionregistration.k8s.io";
const MUTATING_PLURAL: &str = "mutatingwebhookconfigurations";
const VALIDATING_PLURAL: &str = "validatingwebhookconfigurations";
/// `timeoutSeconds` when unset, and the largest the API accepts.
const DEFAULT_TIMEOUT_SECONDS: i64 = 10;
const MAX_TIMEOUT_SECONDS: i64 = 30;
/// A webhook answer larger than this is refused (as the request body limit).
const MAX_RESPONSE_BYTES: usize = crate::server::MAX_BODY_BYTES;
const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";

// ---------------------------------------------------------------------------
// The configuration kinds: defaulting and validation
// ---------------------------------------------------------------------------

/// Fills in what kube-apiserver defaults on the v1 configuration kinds, so
/// stored objects (and `kubectl get -o yaml`) look the same as there.
pub fn default_configuration(kind: &str, obj: &mut Value) {
    let mutating = kind == "MutatingWebhookConfiguration";
    let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in hooks.iter_mut().filter_map(Value::as_object_mut) {
        let mut set = |k: &str, v: Value| {
            if hook.get(k).is_none_or(Value::is_null) {
                hook.insert(k.to_string(), v);
            }
        };
        set("failurePolicy", json!("Fail"));
        set("matchPolicy", json!("Equivalent"));
        set("namespaceSelector", json!({}));
        set("objectSelector", json!({}));
        set("timeoutSeconds", json!(DEFAULT_TIMEOUT_SECONDS));
        if mutating {
            set("reinvocationPolicy", json!("Never"));
        }
        if let Some(rules) = hook.get_mut("rules").and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                if rule.get("scope").is_none_or(Value::is_null) {
                    rule.insert("scope".into(), json!("*"));
                }
            }
        }
        if let Some(svc) = hook
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut)
            && svc.get("port").is_none_or(Value::is_null)
        {
            svc.insert("port".into(), json!(443));
        }
    }
}

fn unsupported(field: String, got: &str, allowed: &[&str]) -> Cause {
    let allowed = allowed
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    Cause::new(
        "FieldValueNotSupported",
        field,
        format!("Unsupported value: {got:?}: supported values: {allowed}"),
    )
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The rules kube-apiserver applies to the v1 configuration kinds, on the
/// defaulted object. Shape errors (a string where a list belongs) are left
/// to the typed decode that follows in [`crate::builtin::validate`].
pub fn validate_configuration(kind: &str, obj: &Value) -> Vec<Cause> {
    let mutating = kind == "MutatingWebhookConfiguration";
    let mut causes = Vec::new();
    let Some(hooks) = obj.get("webhooks").and_then(Value::as_array) else {
        return causes;
    };
    let mut names = BTreeSet::new();
    for (i, hook) in hooks.iter().enumerate() {
        let at = |f: &str| format!("webhooks[{i}].{f}");
        let name = hook.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            causes.push(Cause::required(at("name")));
        } else if let Some(why) = crate::object::check_subdomain(name) {
            causes.push(Cause::invalid(
                at("name"),
                format!("Invalid value: {name:?}: {why}"),
            ));
        } else if name.split('.').count() < 3 {
            causes.push(Cause::invalid(
                at("name"),
                format!(
                    "Invalid value: {name:?}: should be a domain with at least three segments separated by dots"
                ),
            ));
        } else if !names.insert(name) {
            causes.push(Cause::new(
                "FieldValueDuplicate",
                at("name"),
                format!("Duplicate value: {name:?}"),
            ));
        }
        validate_client_config(hook.get("clientConfig"), &at("clientConfig"), &mut causes);
        for (j, rule) in hook
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            validate_rule(rule, &at(&format!("rules[{j}]")), &mut causes);
        }
        let one_of = |f: &str, allowed: &[&str], causes: &mut Vec<Cause>| {
            if let Some(v) = hook.get(f).and_then(Value::as_str)
                && !allowed.contains(&v)
            {
                causes.push(unsupported(at(f), v, allowed));
            }
        };
        one_of("failurePolicy", &["Fail", "Ignore"], &mut causes);
        one_of("matchPolicy", &["Equivalent", "Exact"], &mut causes);
        if mutating {
            one_of("reinvocationPolicy", &["IfNeeded", "Never"], &mut causes);
        }
        // v1 only admits webhooks without side effects on dry runs; `Some`
        // and `Unknown` survive only on objects written through v1beta1.
        match hook.get("sideEffects").and_then(Value::as_str) {
            None | Some("") => causes.push(Cause::new(
                "FieldValueRequired",
                at("sideEffects"),
                "Required value: must specify one of None, NoneOnDryRun",
            )),
            Some(_) => one_of("sideEffects", &["None", "NoneOnDryRun"], &mut causes),
        }
        if let Some(t) = hook.get("timeoutSeconds").and_then(Value::as_i64)
            && !(1..=MAX_TIMEOUT_SECONDS).contains(&t)
        {
            causes.push(Cause::invalid(
                at("timeoutSeconds"),
                format!("Invalid value: {t}: the timeout value must be between 1 and 30 seconds"),
            ));
        }
        let versions = strings(hook.get("admissionReviewVersions"));
        if versions.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                at("admissionReviewVersions"),
                "Required value: must specify one of v1, v1beta1",
            ));
        } else if !versions.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
            causes.push(Cause::invalid(
                at("admissionReviewVersions"),
                format!("Invalid value: {versions:?}: must include at least one of v1, v1beta1"),
            ));
        }
        for f in ["namespaceSelector", "objectSelector"] {
            if let Some(sel) = hook.get(f).filter(|v| !v.is_null()) {
                causes.extend(validate_label_selector_json(sel, &at(f)));
            }
        }
    }
    causes
}

fn validate_client_config(cc: Option<&Value>, at: &str, causes: &mut Vec<Cause>) {
    let url = cc.and_then(|c| c.get("url")).filter(|v| !v.is_null());
    let service = cc.and_then(|c| c.get("service")).filter(|v| !v.is_null());
    match (url, service) {
        (Some(_), Some(_)) => causes.push(Cause::new(
            "FieldValueRequired",
            at,
            "Required value: exactly one of url or service is required",
        )),
        (None, None) => causes.push(Cause::new(
            "FieldValueRequired",
            at,
            "Required value: exactly one of url or service is required",
        )),
        (Some(url), None) => {
            let url = url.as_str().unwrap_or_default();
            if let Err(why) = check_url(url) {
                causes.push(Cause::invalid(
                    format!("{at}.url"),
                    format!("Invalid value: {url:?}: {why}"),
                ));
            }
        }
        (None, Some(svc)) => {
            for f in ["name", "namespace"] {
                if svc.get(f).and_then(Value::as_str).unwrap_or("").is_empty() {
                    causes.push(Cause::required(format!("{at}.service.{f}")));
                }
            }
            if let Some(path) = svc.get("path").and_then(Value::as_str)
                && !path.is_empty()
                && !path.starts_with('/')
            {
                causes.push(Cause::invalid(
                    format!("{at}.service.path"),
                    format!("Invalid value: {path:?}: must start with a '/'"),
                ));
            }
            if let Some(p) = svc.get("port").and_then(Value::as_i64)
                && !(1..=65535).contains(&p)
            {
                causes.push(Cause::invalid(
                    format!("{at}.service.port"),
                    format!("Invalid value: {p}: port is not valid: must be between 1 and 65535, inclusive"),
                ));
            }
        }
    }
}

/// A webhook URL must be plain `https://host[:port][/path]`.
fn check_url(url: &str) -> Result<(), &'static str> {
    let uri: http::Uri = url.parse().map_err(|_| "url must be a valid URL")?;
    if uri.scheme_str() != Some("https") {
        return Err("'https' is the only allowed URL scheme");
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err("host must be specified");
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err("user information is not permitted in the URL");
    }
    if uri.query().is_some() || url.contains('#') {
        return Err("query parameters and fragments are not permitted");
    }
    Ok(())
}

fn validate_rule(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    const OPS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    let ops = strings(rule.get("operations"));
    if ops.is_empty() {
        causes.push(Cause::required(format!("{at}.operations")));
    }
    for (k, op) in ops.iter().enumerate() {
        if !OPS.contains(op) {
            causes.push(unsupported(format!("{at}.operations[{k}]"), op, OPS));
        }
    }
    if ops.len() > 1 && ops.contains(&"*") {
        causes.push(Cause::invalid(
            format!("{at}.operations"),
            "Invalid value: if '*' is present, must not specify other operations",
        ));
    }
    for f in ["apiGroups", "apiVersions", "resources"] {
        let list = strings(rule.get(f));
        if list.is_empty() {
            causes.push(Cause::required(format!("{at}.{f}")));
        } else if list.len() > 1 && list.contains(&"*") {
            causes.push(Cause::invalid(
                format!("{at}.{f}"),
                "Invalid value: if '*' is present, must not specify other values",
            ));
        }
    }
    for (k, r) in strings(rule.get("resources")).iter().enumerate() {
        if r.is_empty() {
            causes.push(Cause::required(format!("{at}.resources[{k}]")));
        }
    }
    if let Some(scope) = rule.get("scope").and_then(Value::as_str) {
        const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
        if !SCOPES.contains(&scope) {
            causes.push(unsupported(format!("{at}.scope"), scope, SCOPES));
        }
    }
}

// ---------------------------------------------------------------------------
// Parsed webhooks
// ---------------------------------------------------------------------------

/// The fields both webhook kinds share, read leniently: objects reach the
/// store through validation, so only hand-written store entries can miss
/// any, and those are read with the API's defaults.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WebhookSpec {
    name: String,
    client_config: admreg::WebhookClientConfig,
    #[serde(default)]
    rules: Vec<admreg::RuleWithOperations>,
    failure_policy: Option<String>,
    timeout_seconds: Option<i64>,
    side_effects: Option<String>,
    #[serde(default)]
    admission_review_versions: Vec<String>,
    namespace_selector: Option<Value>,
    object_selector: Option<Value>,
}

#[derive(Deserialize)]
struct ConfigurationSpec {
    #[serde(default)]
    webhooks: Vec<WebhookSpec>,
}

enum Endpoint {
    Url(String),
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// One webhook, ready to call.
struct Hook {
    name: String,
    endpoint: Endpoint,
    /// TLS settings trusting the webhook's `caBundle` (or the system roots);
    /// an unusable bundle is an error of every call.
    tls: Result<Arc<rustls::ClientConfig>, String>,
    rules: Vec<admreg::RuleWithOperations>,
    ignore_failures: bool,
    timeout: Duration,
    /// `sideEffects` is None or NoneOnDryRun: dry runs may be sent.
    dry_run_safe: bool,
    accepts_v1: bool,
    namespace_selector: Result<LabelSelector, String>,
    object_selector: Result<LabelSelector, String>,
}

fn selector(v: Option<Value>) -> Result<LabelSelector, String> {
    match v {
        // Unset means `{}` (everything), not `null` (nothing).
        None | Some(Value::Null) => Ok(LabelSelector::everything()),
        Some(v) => LabelSelector::from_json(&v).map_err(|e| e.message),
    }
}

impl Hook {
    fn new(w: WebhookSpec) -> Hook {
        let endpoint = match (w.client_config.url, w.client_config.service) {
            (Some(url), _) => Endpoint::Url(url),
            (None, Some(svc)) => Endpoint::Service {
                namespace: svc.namespace,
                name: svc.name,
                path: svc.path.unwrap_or_default(),
                port: svc.port.and_then(|p| u16::try_from(p).ok()).unwrap_or(443),
            },
            (None, None) => Endpoint::Url(String::new()),
        };
        let timeout = w
            .timeout_seconds
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
            .clamp(1, MAX_TIMEOUT_SECONDS);
        Hook {
            name: w.name,
            endpoint,
            tls: client_tls(w.client_config.ca_bundle.as_ref().map(|b| b.0.as_slice())),
            rules: w.rules,
            ignore_failures: w.failure_policy.as_deref() == Some("Ignore"),
            timeout: Duration::from_secs(timeout.unsigned_abs()),
            dry_run_safe: matches!(w.side_effects.as_deref(), Some("None" | "NoneOnDryRun")),
            accepts_v1: w.admission_review_versions.iter().any(|v| v == "v1"),
            namespace_selector: selector(w.namespace_selector),
            object_selector: selector(w.object_selector),
        }
    }

    /// Whether the request is of a kind this webhook's rules name.
    fn rules_match(&self, a: &Attributes<'_>) -> bool {
        self.rules.iter().any(|r| rule_matches(r, a))
    }
}

fn rule_matches(rule: &admreg::RuleWithOperations, a: &Attributes<'_>) -> bool {
    let has =
        |list: &Option<Vec<String>>, v: &str| list.iter().flatten().any(|x| x == "*" || x == v);
    let res = a.resource;
    let sub = a.subresource.unwrap_or("");
    // `pods` is the resource alone, `pods/status` one subresource,
    // `pods/*` the resource and all its subresources, `*/status` that
    // subresource of anything, `*` every resource without its subresources.
    let resource = rule.resources.iter().flatten().any(|entry| {
        let (r, s) = entry.split_once('/').unwrap_or((entry.as_str(), ""));
        (r == "*" || r == res.plural) && (s == "*" || s == sub)
    });
    let scope = match rule.scope.as_deref() {
        Some("Cluster") => !res.namespaced,
        Some("Namespaced") => res.namespaced,
        _ => true,
    };
    has(&rule.operations, a.operation.as_str())
        && has(&rule.api_groups, &res.group)
        && has(&rule.api_versions, &res.version)
        && resource
        && scope
}

/// Builds the TLS client settings for one `caBundle`.
fn client_tls(ca_bundle: Option<&[u8]>) -> Result<Arc<rustls::ClientConfig>, String> {
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

// ---------------------------------------------------------------------------
// The admission plugin
// ---------------------------------------------------------------------------

/// Parsed configurations by store key, with the revision they were read at,
/// so a configuration is parsed again only after it changed.
type ConfigCache = Mutex<HashMap<Arc<str>, (Revision, Arc<Vec<Arc<Hook>>>)>>;

/// Calls the webhooks of the stored configurations (see the module docs).
pub struct WebhookAdmission {
    server: Weak<Server>,
    mutating: ConfigCache,
    validating: ConfigCache,
}

impl WebhookAdmission {
    pub fn new(server: &Arc<Server>) -> WebhookAdmission {
        WebhookAdmission {
            server: Arc::downgrade(server),
            mutating: Mutex::default(),
            validating: Mutex::default(),
        }
    }

    /// The webhooks of one kind, in kube's order: configurations by name,
    /// webhooks as listed. Reading the store on every request is one
    /// in-memory range; parsing happens only for changed configurations.
    async fn hooks(&self, server: &Server, mutating: bool) -> Result<Vec<Arc<Hook>>, ApiError> {
        let (plural, cache) = if mutating {
            (MUTATING_PLURAL, &self.mutating)
        } else {
            (VALIDATING_PLURAL, &self.validating)
        };
        let r = server
            .store
            .range(RangeRequest {
                prefix: format!("/registry/{GROUP}/{plural}/"),
                ..Default::default()
            })
            .await
            .map_err(crate::handlers::store_err)?;
        let mut cache = cache.lock();
        let mut fresh = HashMap::with_capacity(r.kvs.len());
        let mut out = Vec::new();
        for kv in r.kvs {
            let hooks = match cache.remove(&kv.key) {
                Some((rev, hooks)) if rev == kv.mod_revision => hooks,
                _ => Arc::new(parse_configuration(&kv.key, &kv.value)),
            };
            out.extend(hooks.iter().cloned());
            fresh.insert(kv.key, (kv.mod_revision, hooks));
        }
        *cache = fresh;
        Ok(out)
    }
}

fn parse_configuration(key: &str, stored: &[u8]) -> Vec<Arc<Hook>> {
    match serde_json::from_slice::<ConfigurationSpec>(stored) {
        Ok(c) => c
            .webhooks
            .into_iter()
            .map(|w| Arc::new(Hook::new(w)))
            .collect(),
        Err(e) => {
            tracing::warn!(%key, error = %e, "skipping a webhook configuration that does not decode");
            Vec::new()
        }
    }
}

/// Requests webhooks never see.
fn exempt(a: &Attributes<'_>) -> bool {
    a.resource.group == GROUP
}

/// Labels of a namespace, read at most once per admission phase.
struct Scope<'a> {
    server: &'a Server,
    namespace_labels: tokio::sync::OnceCell<Result<Map<String, Value>, String>>,
}

impl Scope<'_> {
    async fn namespace_labels(&self, ns: &str) -> Result<&Map<String, Value>, String> {
        self.namespace_labels
            .get_or_init(|| async {
                let key = format!("/registry/core/namespaces/{ns}");
                match self.server.store.get(&key, None).await {
                    Ok((Some(kv), _)) => {
                        let ns: Value =
                            serde_json::from_slice(&kv.value).map_err(|e| e.to_string())?;
                        Ok(labels_of(&ns).cloned().unwrap_or_default())
                    }
                    // kube looks namespaces up for this and fails the same way.
                    Ok((None, _)) => Err(format!("namespaces {ns:?} not found")),
                    Err(e) => Err(e.to_string()),
                }
            })
            .await
            .as_ref()
            .map_err(Clone::clone)
    }
}

fn labels_of(obj: &Value) -> Option<&Map<String, Value>> {
    obj.pointer("/metadata/labels").and_then(Value::as_object)
}

fn selector_matches(sel: &LabelSelector, obj: Option<&Value>) -> bool {
    obj.is_some_and(|o| sel.matches(labels_of(o).unwrap_or(&Map::new())))
}

/// The request as one webhook call sees it: `object` is `None` for deletes.
struct Call<'a, 'b> {
    attrs: &'a Attributes<'b>,
    object: Option<&'a Value>,
}

impl Call<'_, '_> {
    /// Whether `hook` wants this request: rules, then the namespace
    /// selector, then the object selector, as kube evaluates them. Errors
    /// (a selector that does not parse, a namespace that cannot be read)
    /// are call failures of the webhook.
    async fn matches(&self, hook: &Hook, scope: &Scope<'_>) -> Result<bool, String> {
        let a = self.attrs;
        if !hook.rules_match(a) {
            return Ok(false);
        }
        let ns_sel = hook.namespace_selector.as_ref().map_err(Clone::clone)?;
        if !ns_sel.is_empty() {
            let ok = if a.resource.builtin
                && a.resource.group.is_empty()
                && a.resource.kind == "Namespace"
            {
                // A namespace is matched by its own labels.
                selector_matches(ns_sel, self.object.or(a.old))
            } else {
                match a.namespace.filter(|_| a.resource.namespaced) {
                    Some(ns) => ns_sel.matches(scope.namespace_labels(ns).await?),
                    // Cluster-scoped objects are never excluded by it.
                    None => true,
                }
            };
            if !ok {
                return Ok(false);
            }
        }
        let obj_sel = hook.object_selector.as_ref().map_err(Clone::clone)?;
        Ok(obj_sel.is_empty()
            || selector_matches(obj_sel, self.object)
            || selector_matches(obj_sel, a.old))
    }

    fn review(&self, uid: &str) -> Value {
        let a = self.attrs;
        let res = a.resource;
        let kind = json!({"group": res.group, "version": res.version, "kind": res.kind});
        let resource = json!({"group": res.group, "version": res.version, "resource": res.plural});
        let mut req = Map::new();
        req.insert("uid".into(), json!(uid));
        req.insert("kind".into(), kind.clone());
        req.insert("resource".into(), resource.clone());
        if let Some(sub) = a.subresource {
            req.insert("subResource".into(), json!(sub));
        }
        req.insert("requestKind".into(), kind);
        req.insert("requestResource".into(), resource);
        if let Some(sub) = a.subresource {
            req.insert("requestSubResource".into(), json!(sub));
        }
        if !a.name.is_empty() {
            req.insert("name".into(), json!(a.name));
        }
        if let Some(ns) = a.namespace {
            req.insert("namespace".into(), json!(ns));
        }
        req.insert("operation".into(), json!(a.operation.as_str()));
        let user = a
            .user
            .as_deref()
            .and_then(|u| serde_json::to_value(u).ok())
            .unwrap_or_else(|| json!({}));
        req.insert("userInfo".into(), user);
        req.insert("object".into(), self.object.cloned().unwrap_or(Value::Null));
        req.insert("oldObject".into(), a.old.cloned().unwrap_or(Value::Null));
        req.insert("dryRun".into(), json!(a.dry_run));
        let options_kind = match a.operation {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        };
        let mut options = json!({"kind": options_kind, "apiVersion": "meta.k8s.io/v1"});
        if a.dry_run {
            options["dryRun"] = json!(["All"]);
        }
        req.insert("options".into(), options);
        json!({
            "kind": "AdmissionReview",
            "apiVersion": REVIEW_API_VERSION,
            "request": req,
        })
    }

    /// Runs one webhook: `Ok(Some(ops))` is a JSON patch to apply, `Ok(None)`
    /// lets the request through unchanged, `Err` rejects it.
    async fn run(&self, hook: &Hook, scope: &Scope<'_>) -> Result<Option<Value>, ApiError> {
        match self.matches(hook, scope).await {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(why) => return failed(hook, why),
        }
        if self.attrs.dry_run && !hook.dry_run_safe {
            return Err(ApiError::bad_request(format!(
                "admission webhook {:?} does not support dry run",
                hook.name
            )));
        }
        let uid = uuid::Uuid::new_v4().to_string();
        let review = self.review(&uid);
        let response = match call(scope.server, hook, &review).await {
            Ok(body) => body,
            Err(why) => return failed(hook, why),
        };
        match verdict(&uid, &response) {
            Err(why) => failed(hook, format!("received invalid webhook response: {why}")),
            Ok(v) if !v.allowed => Err(denial(&hook.name, v.status.as_ref())),
            Ok(v) => Ok(v.patch),
        }
    }
}

/// A webhook that could not give an answer: `failurePolicy: Ignore` lets
/// the request through, `Fail` turns it into kube's 500.
fn failed(hook: &Hook, why: String) -> Result<Option<Value>, ApiError> {
    let err = format!("failed calling webhook {:?}: {why}", hook.name);
    if hook.ignore_failures {
        tracing::warn!(webhook = %hook.name, error = %why, "webhook failed; failurePolicy is Ignore");
        return Ok(None);
    }
    let mut e = ApiError::internal(format!("Internal error occurred: {err}"));
    e.causes = vec![Cause::new("", "", err)];
    Err(e)
}

#[async_trait::async_trait]
impl AdmissionPlugin for WebhookAdmission {
    fn name(&self) -> &str {
        "AdmissionWebhook"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), ApiError> {
        let Some(server) = self.server.upgrade() else {
            return Ok(());
        };
        if exempt(attrs) {
            return Ok(());
        }
        let hooks = self.hooks(&server, true).await?;
        if hooks.is_empty() {
            return Ok(());
        }
        let scope = Scope {
            server: &server,
            namespace_labels: Default::default(),
        };
        let mut patched = false;
        for hook in &hooks {
            // Each webhook sees the object as the ones before it left it.
            let ops = Call {
                attrs,
                object: Some(&*obj),
            }
            .run(hook, &scope)
            .await?;
            if let Some(ops) = ops {
                apimachinery::patch::json_patch(obj, &ops).map_err(|e| {
                    ApiError::internal(format!(
                        "Internal error occurred: applying the patch of webhook {:?}: {}",
                        hook.name, e.message
                    ))
                })?;
                patched = true;
            }
        }
        if patched {
            revalidate(attrs, obj)?;
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), ApiError> {
        let Some(server) = self.server.upgrade() else {
            return Ok(());
        };
        if exempt(attrs) {
            return Ok(());
        }
        let delete = attrs.operation == Operation::Delete;
        let call = Call {
            attrs,
            object: (!delete).then_some(obj),
        };
        let scope = Scope {
            server: &server,
            namespace_labels: Default::default(),
        };
        if delete {
            // Deletes have no mutating phase in the handlers, but mutating
            // webhooks registered for DELETE still get to refuse them; a
            // patch has nothing to apply to.
            for hook in &self.hooks(&server, true).await? {
                call.run(hook, &scope).await?;
            }
        }
        let hooks = self.hooks(&server, false).await?;
        // Validating webhooks cannot change anything, so kube calls them
        // all at once; the first refusal in order is the answer.
        let results = futures::future::join_all(hooks.iter().map(|h| call.run(h, &scope))).await;
        for r in results {
            r?;
        }
        Ok(())
    }
}

/// Checks an object again after webhooks patched it: the handlers validated
/// it before the mutating phase, and a patch may have broken it.
fn revalidate(a: &Attributes<'_>, obj: &mut Value) -> Result<(), ApiError> {
    let res = a.resource;
    crate::handlers::check_type_meta(res, obj)?;
    let mut causes = Vec::new();
    if let Some(schema) = &res.schema {
        causes.extend(schema.process(obj, "").causes);
    }
    causes.extend(
        crate::object::validate_meta(obj, res.builtin && res.kind == "Namespace")
            .into_iter()
            .filter(|c| !(crate::builtin::path_segment_names(res) && c.field == "metadata.name")),
    );
    if res.builtin {
        causes.extend(crate::builtin::validate(res, obj)?);
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&res.group, &res.kind, a.name, causes))
    }
}

// ---------------------------------------------------------------------------
// Calling a webhook
// ---------------------------------------------------------------------------

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
    server: &Server,
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
        let key = format!("/registry/core/{what}/{namespace}/{name}");
        async move {
            match server.store.get(&key, None).await {
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
    let svc = read("services")
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
    let endpoints = read("endpoints").await?.unwrap_or(Value::Null);
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
async fn call(server: &Server, hook: &Hook, review: &Value) -> Result<Value, String> {
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
            } => service_target(server, namespace, name, path, *port, hook.timeout).await?,
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
struct Verdict {
    allowed: bool,
    status: Option<Value>,
    /// Decoded JSON patch operations.
    patch: Option<Value>,
}

/// Checks an AdmissionReview answer the way kube-apiserver does before it
/// believes it.
fn verdict(uid: &str, review: &Value) -> Result<Verdict, String> {
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
fn denial(webhook: &str, status: Option<&Value>) -> ApiError {
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
    use crate::registry::Resource;

    fn resource(group: &str, plural: &str, kind: &str, namespaced: bool) -> Resource {
        let mut r = crate::builtin::resources()
            .into_iter()
            .next()
            .expect("built-ins");
        r.group = group.into();
        r.version = "v1".into();
        r.plural = plural.into();
        r.kind = kind.into();
        r.namespaced = namespaced;
        r
    }

    fn attrs<'a>(res: &'a Resource, op: Operation, sub: Option<&'a str>) -> Attributes<'a> {
        Attributes {
            operation: op,
            resource: res,
            subresource: sub,
            namespace: res.namespaced.then_some("default"),
            name: "x",
            old: None,
            dry_run: false,
            user: None,
        }
    }

    fn rule(resources: &[&str], scope: Option<&str>) -> admreg::RuleWithOperations {
        admreg::RuleWithOperations {
            api_groups: Some(vec!["".into()]),
            api_versions: Some(vec!["v1".into()]),
            operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
            resources: Some(resources.iter().map(|s| s.to_string()).collect()),
            scope: scope.map(str::to_string),
        }
    }

    #[test]
    fn resources_and_subresources_match_as_in_kube() {
        let pods = resource("", "pods", "Pod", true);
        let main = attrs(&pods, Operation::Create, None);
        let status = attrs(&pods, Operation::Update, Some("status"));
        assert!(rule_matches(&rule(&["pods"], None), &main));
        assert!(!rule_matches(&rule(&["pods"], None), &status));
        assert!(rule_matches(&rule(&["pods/status"], None), &status));
        assert!(rule_matches(&rule(&["pods/*"], None), &main));
        assert!(rule_matches(&rule(&["pods/*"], None), &status));
        assert!(rule_matches(&rule(&["*"], None), &main));
        assert!(!rule_matches(&rule(&["*"], None), &status));
        assert!(rule_matches(&rule(&["*/*"], None), &status));
        assert!(rule_matches(&rule(&["*/status"], None), &status));
        assert!(!rule_matches(&rule(&["configmaps"], None), &main));
        assert!(!rule_matches(&rule(&["pods"], Some("Cluster")), &main));
        assert!(rule_matches(&rule(&["pods"], Some("Namespaced")), &main));
        let delete = attrs(&pods, Operation::Delete, None);
        assert!(!rule_matches(&rule(&["pods"], None), &delete));
    }

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
    fn configurations_are_defaulted_and_checked() {
        let mut obj = json!({"webhooks": [{
            "name": "a.b.c",
            "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }]});
        default_configuration("MutatingWebhookConfiguration", &mut obj);
        let hook = &obj["webhooks"][0];
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["timeoutSeconds"], 10);
        assert_eq!(hook["reinvocationPolicy"], "Never");
        assert_eq!(hook["rules"][0]["scope"], "*");
        assert_eq!(hook["clientConfig"]["service"]["port"], 443);
        assert!(validate_configuration("MutatingWebhookConfiguration", &obj).is_empty());

        let bad = json!({"webhooks": [
            {"name": "short", "clientConfig": {"url": "http://x/y"}, "sideEffects": "Some",
             "admissionReviewVersions": ["v2"], "timeoutSeconds": 31, "failurePolicy": "Maybe",
             "rules": [{"operations": ["GET"], "apiGroups": [], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Everywhere"}]},
            {"name": "a.b.c", "clientConfig": {}, "sideEffects": "None", "admissionReviewVersions": ["v1"]},
        ]});
        let fields: Vec<String> = validate_configuration("ValidatingWebhookConfiguration", &bad)
            .into_iter()
            .map(|c| c.field)
            .collect();
        for f in [
            "webhooks[0].name",
            "webhooks[0].clientConfig.url",
            "webhooks[0].sideEffects",
            "webhooks[0].admissionReviewVersions",
            "webhooks[0].timeoutSeconds",
            "webhooks[0].failurePolicy",
            "webhooks[0].rules[0].operations[0]",
            "webhooks[0].rules[0].apiGroups",
            "webhooks[0].rules[0].scope",
            "webhooks[1].clientConfig",
        ] {
            assert!(fields.iter().any(|x| x == f), "{f} missing from {fields:?}");
        }
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
