//! RBAC objects (Roles, ClusterRoles and their bindings): names are path
//! segments (they may hold `:`, as in `system:discovery`), rules need verbs
//! and either resources with API groups or non-resource URLs (the latter
//! only in ClusterRoles), and a binding's roleRef names a role of this API
//! group. Bindings get kube's defaults for their subjects.

use std::marker::PhantomData;

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::rbac::v1 as rbac;
use serde::Deserialize;
use serde_json::Value;

use crate::storage::registry::{NameRule, Resource, Strategy};

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// One RBAC kind `T`, named `kind`.
pub struct Rbac<T> {
    kind: &'static str,
    defaults: Option<fn(&mut serde_json::Map<String, Value>)>,
    typed: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Rbac<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rbac({})", self.kind)
    }
}

pub static ROLE: Rbac<rbac::Role> = Rbac {
    kind: "Role",
    defaults: None,
    typed: PhantomData,
};
pub static CLUSTER_ROLE: Rbac<rbac::ClusterRole> = Rbac {
    kind: "ClusterRole",
    defaults: None,
    typed: PhantomData,
};
pub static ROLE_BINDING: Rbac<rbac::RoleBinding> = Rbac {
    kind: "RoleBinding",
    defaults: Some(super::defaults::role_binding),
    typed: PhantomData,
};
pub static CLUSTER_ROLE_BINDING: Rbac<rbac::ClusterRoleBinding> = Rbac {
    kind: "ClusterRoleBinding",
    defaults: Some(super::defaults::role_binding),
    typed: PhantomData,
};

impl<T: serde::de::DeserializeOwned> Strategy for Rbac<T> {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn apply_defaults(&self, _res: &Resource, obj: &mut Value) {
        if let Some(f) = self.defaults {
            super::defaults::on(obj, f);
        }
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        super::typed::<T>(obj)?;
        let mut causes = Vec::new();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(why) = check_name(name) {
            causes.push(Cause::invalid(
                "metadata.name",
                format!("Invalid value: \"{name}\": {why}"),
            ));
        }
        causes.extend(validate(self.kind, obj));
        Ok(causes)
    }
}

/// The fields of a `PolicyRule` the checks look at.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleFields {
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    api_groups: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
}

/// Checks RBAC objects beyond their typed shape, as kube validates them:
/// rules need verbs, Roles cannot hold non-resource URLs, and a binding's
/// roleRef names a Role or ClusterRole of this API group.
pub fn validate(kind: &str, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    match kind {
        "Role" | "ClusterRole" => {
            let rules = obj.get("rules").and_then(Value::as_array);
            for (i, r) in rules.into_iter().flatten().enumerate() {
                let Ok(rule) = serde_json::from_value::<RuleFields>(r.clone()) else {
                    continue;
                };
                let at = format!("rules[{i}]");
                if rule.verbs.is_empty() {
                    causes.push(
                        Cause::required(format!("{at}.verbs"))
                            .with("verbs must contain at least one value"),
                    );
                }
                if !rule.non_resource_urls.is_empty() {
                    if kind == "Role" {
                        causes.push(Cause::invalid(
                            format!("{at}.nonResourceURLs"),
                            "Invalid value: namespaced rules cannot apply to non-resource URLs",
                        ));
                    }
                    if !rule.api_groups.is_empty() || !rule.resources.is_empty() {
                        causes.push(Cause::invalid(
                            format!("{at}.nonResourceURLs"),
                            "Invalid value: rules cannot apply to both regular resources and non-resource URLs",
                        ));
                    }
                } else if rule.resources.is_empty() {
                    causes.push(
                        Cause::required(format!("{at}.resources"))
                            .with("resource rules must supply at least one resource"),
                    );
                } else if rule.api_groups.is_empty() {
                    causes.push(
                        Cause::required(format!("{at}.apiGroups"))
                            .with("resource rules must supply at least one api group"),
                    );
                }
            }
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let rr = obj.get("roleRef").cloned().unwrap_or(Value::Null);
            let s = |k: &str| rr.get(k).and_then(Value::as_str).unwrap_or("");
            let kinds: &[&str] = if kind == "RoleBinding" {
                &["Role", "ClusterRole"]
            } else {
                &["ClusterRole"]
            };
            if !kinds.contains(&s("kind")) {
                causes.push(Cause::new(
                    "FieldValueNotSupported",
                    "roleRef.kind",
                    format!(
                        "Unsupported value: {:?}: supported values: {}",
                        s("kind"),
                        kinds
                            .iter()
                            .map(|k| format!("\"{k}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            if s("apiGroup") != GROUP {
                causes.push(Cause::new(
                    "FieldValueNotSupported",
                    "roleRef.apiGroup",
                    format!(
                        "Unsupported value: {:?}: supported values: \"{GROUP}\"",
                        s("apiGroup")
                    ),
                ));
            }
            if s("name").is_empty() {
                causes.push(Cause::required("roleRef.name"));
            }
            let subjects = obj.get("subjects").and_then(Value::as_array);
            for (i, sub) in subjects.into_iter().flatten().enumerate() {
                let k = sub.get("kind").and_then(Value::as_str).unwrap_or("");
                if !matches!(k, "User" | "Group" | "ServiceAccount") {
                    causes.push(Cause::new(
                        "FieldValueNotSupported",
                        format!("subjects[{i}].kind"),
                        format!("Unsupported value: {k:?}: supported values: \"ServiceAccount\", \"User\", \"Group\""),
                    ));
                }
                if sub
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    causes.push(Cause::required(format!("subjects[{i}].name")));
                }
                if k == "ServiceAccount"
                    && kind == "ClusterRoleBinding"
                    && sub
                        .get("namespace")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .is_empty()
                {
                    causes.push(Cause::required(format!("subjects[{i}].namespace")));
                }
            }
        }
        _ => {}
    }
    causes
}

/// kube's `ValidatePathSegmentName`: RBAC names may hold `:` (as in
/// `system:discovery`), unlike most object names.
pub fn check_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("name or generateName is required".into());
    }
    if name == "." || name == ".." {
        return Some(format!("may not be '{name}'"));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            return Some(format!("may not contain '{bad}'"));
        }
    }
    None
}

trait CauseMessage {
    fn with(self, m: &str) -> Cause;
}

impl CauseMessage for Cause {
    fn with(mut self, m: &str) -> Cause {
        self.message = format!("Required value: {m}");
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        let bad = serde_json::json!({"roleRef": {"kind": "Role", "apiGroup": GROUP, "name": "r"}, "subjects": [{"kind": "Robot", "name": "x"}]});
        let c = validate("ClusterRoleBinding", &bad);
        assert_eq!(c.len(), 2, "{c:?}");
        let bad = serde_json::json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]});
        assert_eq!(validate("Role", &bad).len(), 1);
        assert!(validate("ClusterRole", &bad).is_empty());
        assert!(check_name("system:discovery").is_none());
        assert!(check_name("a/b").is_some());
    }
}
