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
//! Calling one webhook is [`client`]; the configuration kinds' own rules are
//! [`crate::strategy::webhook_configuration`].

mod client;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::selector::LabelSelector;
use apimachinery::{ApiError, Cause};
use k8s_openapi::api::admissionregistration::v1 as admreg;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use store::Revision;

use crate::admission::{AdmissionPlugin, Attributes, Operation};
use crate::storage::Storage;
use crate::storage::keys;
use crate::strategy::webhook_configuration::{
    DEFAULT_TIMEOUT_SECONDS, GROUP, MAX_TIMEOUT_SECONDS, MUTATING_PLURAL, VALIDATING_PLURAL,
};
use client::{call, client_tls, denial, verdict};

const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";

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

// ---------------------------------------------------------------------------
// The admission plugin
// ---------------------------------------------------------------------------

/// Parsed configurations by store key, with the revision they were read at,
/// so a configuration is parsed again only after it changed.
type ConfigCache = Mutex<HashMap<Arc<str>, (Revision, Arc<Vec<Arc<Hook>>>)>>;

/// Calls the webhooks of the stored configurations (see the module docs).
pub struct WebhookAdmission {
    storage: Arc<Storage>,
    mutating: ConfigCache,
    validating: ConfigCache,
}

impl WebhookAdmission {
    pub fn new(storage: Arc<Storage>) -> WebhookAdmission {
        WebhookAdmission {
            storage,
            mutating: Mutex::default(),
            validating: Mutex::default(),
        }
    }

    /// The webhooks of one kind, in kube's order: configurations by name,
    /// webhooks as listed. Reading the store on every request is one
    /// in-memory range; parsing happens only for changed configurations.
    async fn hooks(&self, mutating: bool) -> Result<Vec<Arc<Hook>>, ApiError> {
        let (plural, cache) = if mutating {
            (MUTATING_PLURAL, &self.mutating)
        } else {
            (VALIDATING_PLURAL, &self.validating)
        };
        let kvs = self
            .storage
            .range(&keys::prefix(&keys::storage_of(GROUP, plural)))
            .await?;
        let mut cache = cache.lock();
        let mut fresh = HashMap::with_capacity(kvs.len());
        let mut out = Vec::new();
        for kv in kvs {
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
    storage: &'a Storage,
    namespace_labels: tokio::sync::OnceCell<Result<Map<String, Value>, String>>,
}

impl Scope<'_> {
    async fn namespace_labels(&self, ns: &str) -> Result<&Map<String, Value>, String> {
        self.namespace_labels
            .get_or_init(|| async {
                let key = keys::key(keys::NAMESPACES, None, ns);
                match self.storage.store().get(&key, None).await {
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
            let ok = if a.resource.strategy.is_namespace() {
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
        let response = match call(scope.storage, hook, &review).await {
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
        if exempt(attrs) {
            return Ok(());
        }
        let hooks = self.hooks(true).await?;
        if hooks.is_empty() {
            return Ok(());
        }
        let scope = Scope {
            storage: &self.storage,
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
        if exempt(attrs) {
            return Ok(());
        }
        let delete = attrs.operation == Operation::Delete;
        let call = Call {
            attrs,
            object: (!delete).then_some(obj),
        };
        let scope = Scope {
            storage: &self.storage,
            namespace_labels: Default::default(),
        };
        if delete {
            // Deletes have no mutating phase in the handlers, but mutating
            // webhooks registered for DELETE still get to refuse them; a
            // patch has nothing to apply to.
            for hook in &self.hooks(true).await? {
                call.run(hook, &scope).await?;
            }
        }
        let hooks = self.hooks(false).await?;
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
    crate::strategy::check_type_meta(res, obj)?;
    let causes = crate::strategy::validate(res, obj)?;
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&res.group, &res.kind, a.name, causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::storage::registry::Resource;

    fn resource(group: &str, plural: &str, kind: &str, namespaced: bool) -> Resource {
        let mut r = crate::strategy::resources()
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
}
