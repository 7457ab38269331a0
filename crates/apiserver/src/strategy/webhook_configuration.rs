//! The admission webhook configuration kinds (Mutating- and
//! ValidatingWebhookConfiguration): kube-apiserver's defaults and the rules
//! that make a configuration invalid, and `generation`. Calling the
//! webhooks is [`crate::admission::webhook`].

use std::collections::BTreeSet;

use apimachinery::selector::validate_label_selector_json;
use apimachinery::{ApiError, Cause};
use k8s_openapi::api::admissionregistration::v1 as admreg;
use serde_json::{Value, json};

use crate::storage::registry::{Resource, Strategy};

/// The API group of the configuration kinds. Requests on it never reach
/// webhooks, so a broken webhook cannot lock its own configuration in.
pub const GROUP: &str = "admissionregistration.k8s.io";
pub const MUTATING_PLURAL: &str = "mutatingwebhookconfigurations";
pub const VALIDATING_PLURAL: &str = "validatingwebhookconfigurations";
/// `timeoutSeconds` when unset, and the largest the API accepts.
pub const DEFAULT_TIMEOUT_SECONDS: i64 = 10;
pub const MAX_TIMEOUT_SECONDS: i64 = 30;

/// One of the two configuration kinds.
#[derive(Debug)]
pub struct WebhookConfiguration {
    kind: &'static str,
}

pub static MUTATING: WebhookConfiguration = WebhookConfiguration {
    kind: "MutatingWebhookConfiguration",
};
pub static VALIDATING: WebhookConfiguration = WebhookConfiguration {
    kind: "ValidatingWebhookConfiguration",
};

impl Strategy for WebhookConfiguration {
    fn has_generation(&self) -> bool {
        true
    }

    fn normalize(&self, _res: &Resource, obj: &mut Value) {
        default_configuration(self.kind, obj);
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        // Missing required fields are 422 causes, as in kube; the typed
        // decode (which would call them a 400) only checks the shape of an
        // object that has them.
        let causes = validate_configuration(self.kind, obj);
        if causes.is_empty() {
            match self.kind {
                "MutatingWebhookConfiguration" => {
                    drop(super::typed::<admreg::MutatingWebhookConfiguration>(obj)?)
                }
                _ => drop(super::typed::<admreg::ValidatingWebhookConfiguration>(obj)?),
            }
        }
        Ok(causes)
    }
}

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
/// to the typed decode that follows in [`WebhookConfiguration::validate`].
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
