//! The RBAC authorizer: Roles, ClusterRoles and their bindings decide
//! whether a user may do what a request asks. The rule matching follows
//! kube-apiserver's: verbs (custom ones and `*` included), API groups,
//! resources with subresources (`pods/eviction`, `*/scale`, `deployments/*`),
//! resource names, and non-resource URLs (exact, or a prefix ending in `*`).
//! ClusterRoles with an `aggregationRule` are evaluated with the rules of
//! the ClusterRoles they select. Members of `system:masters` always pass.
//!
//! The RBAC objects are read from the store and parsed once per change: the
//! parsed snapshot is kept until a range shows another count or a newer
//! revision under any of the four prefixes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use apimachinery::ApiError;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use store::{RangeRequest, Revision};

use crate::auth::{MASTERS_GROUP, RequestAttributes, UserInfo};
use crate::storage::{Storage, keys};

use crate::strategy::rbac::GROUP;

/// The four RBAC kinds, in the order the snapshot reads them.
const PLURALS: [&str; 4] = [
    "clusterroles",
    "clusterrolebindings",
    "roles",
    "rolebindings",
];

/// One `PolicyRule`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    #[serde(
        default,
        rename = "nonResourceURLs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

fn has(list: &[String], v: &str) -> bool {
    list.iter().any(|x| x == "*" || x == v)
}

impl Rule {
    /// Whether this rule allows the request described by `a`.
    pub fn allows(&self, a: &RequestAttributes) -> bool {
        if !has(&self.verbs, &a.verb) {
            return false;
        }
        if !a.resource_request {
            return self.non_resource_urls.iter().any(|u| {
                u == "*"
                    || *u == a.path
                    || u.strip_suffix('*').is_some_and(|p| a.path.starts_with(p))
            });
        }
        has(&self.api_groups, &a.api_group)
            && self.resource_matches(&a.resource, &a.subresource)
            && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
    }

    fn resource_matches(&self, resource: &str, sub: &str) -> bool {
        let combined = if sub.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}/{sub}")
        };
        self.resources.iter().any(|r| {
            if r == "*" || *r == combined {
                return true;
            }
            if sub.is_empty() {
                return false;
            }
            // `*/scale` is that subresource of anything; `deployments/*`
            // every subresource (but not the resource itself).
            r.strip_prefix("*/") == Some(sub) || r.strip_suffix("/*") == Some(resource)
        })
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    labels: Option<Map<String, Value>>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RoleObject {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    rules: Option<Vec<Rule>>,
    #[serde(default)]
    aggregation_rule: Option<Value>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Subject {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
struct RoleRef {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BindingObject {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    subjects: Option<Vec<Subject>>,
    role_ref: RoleRef,
}

impl Subject {
    /// Whether the subject names `user`; ServiceAccount subjects of a
    /// RoleBinding default to the binding's namespace.
    fn matches(&self, user: &UserInfo, binding_ns: Option<&str>) -> bool {
        match self.kind.as_str() {
            "User" => self.name == user.username,
            "Group" => user.in_group(&self.name),
            "ServiceAccount" => {
                let ns = self
                    .namespace
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .or(binding_ns);
                ns.is_some_and(|ns| {
                    user.username
                        == format!(
                            "{}{ns}:{}",
                            crate::auth::serviceaccount::SA_PREFIX,
                            self.name
                        )
                })
            }
            _ => false,
        }
    }

    fn describe(&self, binding_ns: Option<&str>) -> String {
        match self.kind.as_str() {
            "ServiceAccount" => format!(
                "ServiceAccount \"{}/{}\"",
                self.namespace.as_deref().or(binding_ns).unwrap_or(""),
                self.name
            ),
            k => format!("{k} {:?}", self.name),
        }
    }
}

/// The parsed RBAC objects.
#[derive(Default)]
struct Snapshot {
    /// Rules of every ClusterRole, aggregation applied.
    cluster_roles: HashMap<String, Vec<Rule>>,
    roles: HashMap<(String, String), Vec<Rule>>,
    cluster_bindings: Vec<BindingObject>,
    bindings: HashMap<String, Vec<BindingObject>>,
}

impl Snapshot {
    fn build(ranges: [Vec<Value>; 4]) -> Snapshot {
        let [croles, cbindings, roles, bindings] = ranges;
        let parse_roles = |vs: Vec<Value>| -> Vec<RoleObject> {
            vs.into_iter()
                .filter_map(|v| serde_json::from_value(v).ok())
                .collect()
        };
        let croles = parse_roles(croles);
        let mut s = Snapshot::default();
        for r in &croles {
            let mut rules = r.rules.clone().unwrap_or_default();
            rules.extend(aggregated(r, &croles, &mut BTreeSet::new()));
            s.cluster_roles.insert(r.metadata.name.clone(), rules);
        }
        for r in parse_roles(roles) {
            let ns = r.metadata.namespace.clone().unwrap_or_default();
            s.roles
                .insert((ns, r.metadata.name.clone()), r.rules.unwrap_or_default());
        }
        s.cluster_bindings = cbindings
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect();
        for b in bindings
            .into_iter()
            .filter_map(|v| serde_json::from_value::<BindingObject>(v).ok())
        {
            let ns = b.metadata.namespace.clone().unwrap_or_default();
            s.bindings.entry(ns).or_default().push(b);
        }
        s
    }

    /// The rules a binding grants, and the role it names (for reasons).
    fn rules_of(&self, b: &BindingObject, ns: Option<&str>) -> Option<(&[Rule], String)> {
        match (b.role_ref.kind.as_str(), ns) {
            ("ClusterRole", _) => self
                .cluster_roles
                .get(&b.role_ref.name)
                .map(|r| (r.as_slice(), format!("ClusterRole {:?}", b.role_ref.name))),
            ("Role", Some(ns)) => self
                .roles
                .get(&(ns.to_string(), b.role_ref.name.clone()))
                .map(|r| (r.as_slice(), format!("Role \"{ns}/{}\"", b.role_ref.name))),
            _ => None,
        }
    }

    /// Calls `f` with each binding that applies to `user` in `ns` (cluster
    /// bindings first), until `f` returns true.
    fn visit<'a>(
        &'a self,
        user: &UserInfo,
        ns: &str,
        mut f: impl FnMut(&'a BindingObject, Option<&str>, &'a [Rule], String, &Subject) -> bool,
    ) {
        let cluster = self.cluster_bindings.iter().map(|b| (b, None));
        let local = self
            .bindings
            .get(ns)
            .into_iter()
            .flatten()
            .map(|b| (b, Some(ns)));
        for (b, bns) in cluster.chain(local) {
            let Some(subject) = b.subjects.iter().flatten().find(|s| s.matches(user, bns)) else {
                continue;
            };
            if let Some((rules, role)) = self.rules_of(b, bns)
                && f(b, bns, rules, role, subject)
            {
                return;
            }
        }
    }
}

/// Rules a ClusterRole gains from the ClusterRoles its aggregationRule
/// selects (and, transitively, theirs).
fn aggregated(role: &RoleObject, all: &[RoleObject], seen: &mut BTreeSet<String>) -> Vec<Rule> {
    let Some(selectors) = role
        .aggregation_rule
        .as_ref()
        .and_then(|a| a.get("clusterRoleSelectors"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    if !seen.insert(role.metadata.name.clone()) {
        return Vec::new();
    }
    let selectors: Vec<_> = selectors
        .iter()
        .filter_map(|s| apimachinery::selector::LabelSelector::from_json(s).ok())
        .filter(|s| !s.matches_nothing())
        .collect();
    let mut out = Vec::new();
    for other in all {
        if other.metadata.name == role.metadata.name {
            continue;
        }
        let labels = other.metadata.labels.clone().unwrap_or_default();
        if selectors.iter().any(|s| s.matches(&labels)) {
            out.extend(other.rules.clone().unwrap_or_default());
            out.extend(aggregated(other, all, seen));
        }
    }
    out
}

/// An authorization answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

/// Object count and newest revision under each RBAC prefix: it changes
/// whenever any RBAC object is created, changed or deleted.
type Fingerprint = Vec<(usize, Revision)>;

/// The authorizer, with its cached snapshot.
#[derive(Default)]
pub struct Rbac {
    cache: Mutex<Option<(Fingerprint, Arc<Snapshot>)>>,
}

impl Rbac {
    async fn snapshot(&self, storage: &Storage) -> Result<Arc<Snapshot>, ApiError> {
        let mut ranges: [Vec<store::KeyValue>; 4] = Default::default();
        for (i, plural) in PLURALS.iter().enumerate() {
            ranges[i] = storage
                .store()
                .range(RangeRequest {
                    prefix: keys::prefix(&keys::storage_of(GROUP, plural)),
                    ..Default::default()
                })
                .await
                .map_err(crate::storage::store_err)?
                .kvs;
        }
        let fingerprint: Fingerprint = ranges
            .iter()
            .map(|kvs| {
                (
                    kvs.len(),
                    kvs.iter().map(|kv| kv.mod_revision).max().unwrap_or(0),
                )
            })
            .collect();
        if let Some((fp, snap)) = &*self.cache.lock()
            && *fp == fingerprint
        {
            return Ok(snap.clone());
        }
        let parsed = ranges.map(|kvs| {
            kvs.iter()
                .filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
                .collect::<Vec<_>>()
        });
        let snap = Arc::new(Snapshot::build(parsed));
        *self.cache.lock() = Some((fingerprint, snap.clone()));
        Ok(snap)
    }

    /// May `user` do what `a` describes?
    pub async fn authorize(
        &self,
        storage: &Storage,
        user: &UserInfo,
        a: &RequestAttributes,
    ) -> Result<Decision, ApiError> {
        if user.in_group(MASTERS_GROUP) {
            return Ok(Decision {
                allowed: true,
                reason: format!("allowed as a member of {MASTERS_GROUP}"),
            });
        }
        let snap = self.snapshot(storage).await?;
        let mut reason = None;
        snap.visit(user, &a.namespace, |b, bns, rules, role, subject| {
            if rules.iter().any(|r| r.allows(a)) {
                let kind = if bns.is_some() {
                    "RoleBinding"
                } else {
                    "ClusterRoleBinding"
                };
                let name = match bns {
                    Some(ns) => format!("\"{ns}/{}\"", b.metadata.name),
                    None => format!("{:?}", b.metadata.name),
                };
                reason = Some(format!(
                    "RBAC: allowed by {kind} {name} of {role} to {}",
                    subject.describe(bns)
                ));
                true
            } else {
                false
            }
        });
        Ok(match reason {
            Some(reason) => Decision {
                allowed: true,
                reason,
            },
            None => Decision {
                allowed: false,
                reason: String::new(),
            },
        })
    }

    /// Every rule that applies to `user` in namespace `ns`, cluster-wide
    /// ones included.
    pub async fn user_rules(
        &self,
        storage: &Storage,
        user: &UserInfo,
        ns: &str,
    ) -> Result<Vec<Rule>, ApiError> {
        let snap = self.snapshot(storage).await?;
        let mut out = Vec::new();
        snap.visit(user, ns, |_, _, rules, _, _| {
            out.extend_from_slice(rules);
            false
        });
        Ok(out)
    }

    /// Every rule that applies to `user` in namespace `ns` (cluster-wide
    /// ones included), as SelfSubjectRulesReview reports them:
    /// `(resourceRules, nonResourceRules)`.
    pub async fn rules_for(
        &self,
        storage: &Storage,
        user: &UserInfo,
        ns: &str,
    ) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
        let snap = self.snapshot(storage).await?;
        let mut resource = Vec::new();
        let mut non_resource = Vec::new();
        snap.visit(user, ns, |_, _, rules, _, _| {
            for r in rules {
                if !r.non_resource_urls.is_empty() {
                    non_resource.push(serde_json::json!({
                        "verbs": r.verbs, "nonResourceURLs": r.non_resource_urls,
                    }));
                }
                if !r.resources.is_empty() {
                    let mut v = serde_json::json!({
                        "verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources,
                    });
                    if !r.resource_names.is_empty() {
                        v["resourceNames"] = serde_json::json!(r.resource_names);
                    }
                    resource.push(v);
                }
            }
            false
        });
        Ok((resource, non_resource))
    }
}

/// Whether `owned` covers every permission `wanted` grants, broken down to
/// single verb × group × resource × name (or URL) grants as kube does. A
/// wildcard asked for is covered only by the same wildcard.
pub fn covers(owned: &[Rule], wanted: &[Rule]) -> bool {
    wanted.iter().all(|w| uncovered(owned, w).is_none())
}

/// The first single grant of `w` that `owned` does not cover.
fn uncovered(owned: &[Rule], w: &Rule) -> Option<String> {
    for verb in &w.verbs {
        for url in &w.non_resource_urls {
            let ok = owned.iter().any(|o| {
                has(&o.verbs, verb)
                    && o.non_resource_urls.iter().any(|u| {
                        u == "*"
                            || u == url
                            || (u.ends_with('*') && url.starts_with(u.trim_end_matches('*')))
                    })
            });
            if !ok {
                return Some(format!("{{NonResourceURLs:[{url:?}], Verbs:[{verb:?}]}}"));
            }
        }
        for group in &w.api_groups {
            for resource in &w.resources {
                let (res, sub) = resource.split_once('/').unwrap_or((resource, ""));
                let names: Vec<Option<&String>> = if w.resource_names.is_empty() {
                    vec![None]
                } else {
                    w.resource_names.iter().map(Some).collect()
                };
                for name in names {
                    let ok = owned.iter().any(|o| {
                        has(&o.verbs, verb)
                            && has(&o.api_groups, group)
                            && (o.resources.iter().any(|r| r == "*" || r == resource)
                                || (!sub.is_empty() && o.resource_matches(res, sub)))
                            && (o.resource_names.is_empty()
                                || name.is_some_and(|n| o.resource_names.contains(n)))
                    });
                    if !ok {
                        let names = name
                            .map(|n| format!(", ResourceNames:[{n:?}]"))
                            .unwrap_or_default();
                        return Some(format!(
                            "{{APIGroups:[{group:?}], Resources:[{resource:?}]{names}, Verbs:[{verb:?}]}}"
                        ));
                    }
                }
            }
        }
    }
    None
}

/// Admission plugin that stops privilege escalation through RBAC, as kube
/// does: creating or changing a Role or ClusterRole needs either every
/// permission it grants or the `escalate` verb on it; a binding needs
/// either every permission of the role it binds or the `bind` verb on that
/// role. Requests without a user (the server's own) pass.
pub struct EscalationCheck {
    auth: Arc<super::Auth>,
}

impl EscalationCheck {
    pub fn new(auth: Arc<super::Auth>) -> EscalationCheck {
        EscalationCheck { auth }
    }
}

#[async_trait::async_trait]
impl crate::admission::AdmissionPlugin for EscalationCheck {
    fn name(&self) -> &str {
        "RBACEscalation"
    }

    async fn validate(
        &self,
        attrs: &crate::admission::Attributes<'_>,
        obj: &Value,
    ) -> Result<(), ApiError> {
        let res = attrs.resource;
        if res.group != GROUP || attrs.operation == crate::admission::Operation::Delete {
            return Ok(());
        }
        let Some(user) = &attrs.user else {
            return Ok(());
        };
        let auth = &self.auth;
        let storage = &auth.storage;
        if user.in_group(MASTERS_GROUP) {
            return Ok(());
        }
        let ns = attrs.namespace.unwrap_or("");
        let (verb, role_resource, role_name, wanted) = match res.kind.as_str() {
            "Role" | "ClusterRole" => {
                let rules: Vec<Rule> = obj
                    .get("rules")
                    .and_then(|r| serde_json::from_value(r.clone()).ok())
                    .unwrap_or_default();
                (
                    "escalate",
                    res.plural.clone(),
                    attrs.name.to_string(),
                    Some(rules),
                )
            }
            "RoleBinding" | "ClusterRoleBinding" => {
                let kind = obj
                    .pointer("/roleRef/kind")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let name = obj
                    .pointer("/roleRef/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let snap = auth.rbac.snapshot(storage).await?;
                let rules = match kind {
                    "ClusterRole" => snap.cluster_roles.get(name).cloned(),
                    _ => snap.roles.get(&(ns.to_string(), name.to_string())).cloned(),
                };
                let plural = if kind == "ClusterRole" {
                    "clusterroles"
                } else {
                    "roles"
                };
                ("bind", plural.to_string(), name.to_string(), rules)
            }
            _ => return Ok(()),
        };
        let special = RequestAttributes {
            verb: verb.into(),
            resource_request: true,
            api_group: GROUP.into(),
            api_version: "v1".into(),
            resource: role_resource,
            namespace: ns.into(),
            name: role_name.clone(),
            ..Default::default()
        };
        if auth.rbac.authorize(storage, user, &special).await?.allowed {
            return Ok(());
        }
        let qualified = format!("{}.{GROUP}", res.plural);
        let Some(wanted) = wanted else {
            return Err(ApiError::forbidden(format!(
                "{qualified} {:?} is forbidden: user {:?} may not bind {role_name:?}: the role was not found and the user lacks the bind verb",
                attrs.name, user.username
            ))
            .with_details(GROUP, &res.plural, attrs.name));
        };
        let owned = auth.rbac.user_rules(storage, user, ns).await?;
        let missing: Vec<String> = wanted.iter().filter_map(|w| uncovered(&owned, w)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(ApiError::forbidden(format!(
            "{qualified} {:?} is forbidden: user {:?} (groups={:?}) is attempting to grant RBAC permissions not currently held:\n{}",
            attrs.name,
            user.username,
            user.groups,
            missing.join("\n")
        ))
        .with_details(GROUP, &res.plural, attrs.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Rule {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Rule {
            verbs: v(verbs),
            api_groups: v(groups),
            resources: v(resources),
            resource_names: v(names),
            non_resource_urls: Vec::new(),
        }
    }

    fn req(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> RequestAttributes {
        RequestAttributes {
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            namespace: "ns".into(),
            ..Default::default()
        }
    }

    #[test]
    fn resources_and_subresources() {
        let r = rule(&["create"], &[""], &["pods/eviction"], &[]);
        assert!(r.allows(&req("create", "", "pods", "eviction", "p")));
        assert!(!r.allows(&req("create", "", "pods", "", "p")));
        let r = rule(&["get"], &["apps"], &["*/scale"], &[]);
        assert!(r.allows(&req("get", "apps", "deployments", "scale", "d")));
        assert!(!r.allows(&req("get", "apps", "deployments", "", "d")));
        let r = rule(&["get"], &["apps"], &["deployments/*"], &[]);
        assert!(r.allows(&req("get", "apps", "deployments", "status", "d")));
        assert!(!r.allows(&req("get", "apps", "deployments", "", "d")));
        let r = rule(&["*"], &["*"], &["*"], &[]);
        assert!(r.allows(&req("use", "policy", "podsecuritypolicies", "", "x")));
        assert!(r.allows(&req("get", "", "pods", "log", "x")));
    }

    #[test]
    fn verbs_groups_and_names() {
        let r = rule(&["use", "bind"], &["policy"], &["things"], &["a"]);
        assert!(r.allows(&req("use", "policy", "things", "", "a")));
        assert!(r.allows(&req("bind", "policy", "things", "", "a")));
        assert!(!r.allows(&req("get", "policy", "things", "", "a")));
        assert!(!r.allows(&req("use", "policy", "things", "", "b")));
        // A rule with names never allows requests without a name (list).
        assert!(!r.allows(&req("use", "policy", "things", "", "")));
        assert!(!r.allows(&req("use", "", "things", "", "a")));
    }

    #[test]
    fn non_resource_urls() {
        let r = Rule {
            verbs: vec!["get".into()],
            non_resource_urls: vec!["/healthz".into(), "/apis/*".into()],
            ..Default::default()
        };
        let nr = |path: &str| RequestAttributes {
            verb: "get".into(),
            path: path.into(),
            ..Default::default()
        };
        assert!(r.allows(&nr("/healthz")));
        assert!(r.allows(&nr("/apis/apps/v1")));
        assert!(!r.allows(&nr("/apis")));
        assert!(!r.allows(&nr("/healthz/etcd")));
        // Resource requests never match non-resource rules.
        assert!(!r.allows(&req("get", "", "pods", "", "")));
    }

    #[test]
    fn service_account_subjects_default_to_the_binding_namespace() {
        let s = Subject {
            kind: "ServiceAccount".into(),
            name: "robot".into(),
            namespace: None,
        };
        let user = UserInfo {
            username: "system:serviceaccount:team:robot".into(),
            ..Default::default()
        };
        assert!(s.matches(&user, Some("team")));
        assert!(!s.matches(&user, Some("other")));
        assert!(!s.matches(&user, None));
    }

    #[test]
    fn aggregation() {
        let snap = Snapshot::build([
            vec![
                serde_json::json!({"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}),
                serde_json::json!({"metadata": {"name": "part", "labels": {"x": "y"}}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}),
            ],
            vec![],
            vec![],
            vec![],
        ]);
        assert_eq!(snap.cluster_roles["agg"].len(), 1);
    }

    #[test]
    fn covering() {
        let owned = vec![
            rule(&["get", "list"], &[""], &["pods", "configmaps"], &[]),
            rule(&["*"], &["apps"], &["deployments/*"], &[]),
            rule(&["get"], &[""], &["secrets"], &["s1"]),
        ];
        assert!(covers(&owned, &[rule(&["get"], &[""], &["pods"], &[])]));
        assert!(covers(&owned, &[rule(&["get"], &[""], &["pods"], &["p1"])]));
        assert!(covers(
            &owned,
            &[rule(&["patch"], &["apps"], &["deployments/scale"], &[])]
        ));
        assert!(covers(
            &owned,
            &[rule(&["get"], &[""], &["secrets"], &["s1"])]
        ));
        assert!(!covers(&owned, &[rule(&["get"], &[""], &["secrets"], &[])]));
        assert!(!covers(
            &owned,
            &[rule(&["get"], &[""], &["secrets"], &["s2"])]
        ));
        assert!(!covers(&owned, &[rule(&["delete"], &[""], &["pods"], &[])]));
        assert!(!covers(&owned, &[rule(&["*"], &[""], &["pods"], &[])]));
        assert!(!covers(
            &owned,
            &[rule(&["get"], &["apps"], &["deployments"], &[])]
        ));
        let admin = vec![rule(&["*"], &["*"], &["*"], &[])];
        assert!(covers(&admin, &owned));
    }
}
