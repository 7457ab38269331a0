//! Discovery documents: `/api`, `/apis`, `/apis/<group>`, the per-version
//! APIResourceLists, and the aggregated `APIGroupDiscoveryList` (v2) that
//! kubectl asks for first. Rendered from the registry on every request.

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::ApiError;
use http::StatusCode;
use serde_json::{Value, json};

use crate::http::Reply;
use crate::http::request::Target;
use crate::storage::registry::{Registry, Resource};

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Orders versions as Kubernetes does: GA before beta before alpha, higher
/// numbers first.
pub fn version_priority(v: &str) -> (u8, i64, i64) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let num_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let major: i64 = rest[..num_end].parse().unwrap_or(-1);
    let tail = &rest[num_end..];
    let (kind, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(b) = tail.strip_prefix("beta") {
        (2, b.parse().unwrap_or(0))
    } else if let Some(a) = tail.strip_prefix("alpha") {
        (1, a.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    if major < 0 {
        return (0, 0, 0);
    }
    (kind, major, minor)
}

/// The create-only resources served by `crate::auth::review` ahead of
/// resource dispatch (access and token reviews). They are not in the
/// registry — nothing is stored, watched or garbage collected for them —
/// but kube lists them in discovery, and `kubectl api-resources` and
/// `auth can-i` look for them there.
fn virtual_resources() -> Vec<Resource> {
    const AUTHN: &str = "authentication.k8s.io";
    const AUTHZ: &str = "authorization.k8s.io";
    [
        (AUTHN, "selfsubjectreviews", "SelfSubjectReview", false),
        (AUTHN, "tokenreviews", "TokenReview", false),
        (
            AUTHZ,
            "localsubjectaccessreviews",
            "LocalSubjectAccessReview",
            true,
        ),
        (
            AUTHZ,
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            false,
        ),
        (
            AUTHZ,
            "selfsubjectrulesreviews",
            "SelfSubjectRulesReview",
            false,
        ),
        (AUTHZ, "subjectaccessreviews", "SubjectAccessReview", false),
    ]
    .into_iter()
    .map(|(group, plural, kind, namespaced)| Resource {
        group: group.into(),
        version: "v1".into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        list_kind: String::new(),
        namespaced,
        short_names: Vec::new(),
        categories: Vec::new(),
        status_subresource: false,
        scale: None,
        eviction: false,
        storage: String::new(),
        storage_version: "v1".into(),
        schema: None,
        printer_columns: Vec::new(),
        extra_fields: Vec::new(),
        builtin: true,
        crd_uid: None,
        verbs: vec!["create"],
        strategy: &crate::storage::registry::NoRules,
    })
    .collect()
}

/// Every resource discovery lists: the registry's and the virtual ones,
/// ordered by group, version, plural.
fn listed(registry: &Registry) -> Vec<Arc<Resource>> {
    let mut all = registry.all();
    all.extend(virtual_resources().into_iter().map(Arc::new));
    all.sort_by(|a, b| (&a.group, &a.version, &a.plural).cmp(&(&b.group, &b.version, &b.plural)));
    all
}

/// A subresource as discovery lists it: its name, the group, version and
/// kind it answers with (`None`: the resource's own), and its verbs.
struct Sub {
    name: &'static str,
    gvk: Option<(&'static str, &'static str, &'static str)>,
    verbs: &'static [&'static str],
}

const GET_PATCH_UPDATE: &[&str] = &["get", "patch", "update"];

fn subresources(r: &Resource) -> Vec<Sub> {
    let mut subs = Vec::new();
    if r.status_subresource {
        subs.push(Sub {
            name: "status",
            gvk: None,
            verbs: GET_PATCH_UPDATE,
        });
    }
    if r.scale.is_some() {
        subs.push(Sub {
            name: "scale",
            gvk: Some(("autoscaling", "v1", "Scale")),
            verbs: GET_PATCH_UPDATE,
        });
    }
    if r.eviction {
        subs.push(Sub {
            name: "eviction",
            gvk: Some(("policy", "v1", "Eviction")),
            verbs: &["create"],
        });
        // Served through the pod's kubelet (crate::http::podproxy) and by
        // crate::http::binding.
        subs.push(Sub {
            name: "binding",
            gvk: Some(("", "v1", "Binding")),
            verbs: &["create"],
        });
        subs.push(Sub {
            name: "exec",
            gvk: Some(("", "v1", "PodExecOptions")),
            verbs: &["create", "get"],
        });
        subs.push(Sub {
            name: "log",
            gvk: Some(("", "v1", "Pod")),
            verbs: &["get"],
        });
    }
    let core = r.builtin && r.group.is_empty();
    if r.strategy.finalize_subresource() {
        subs.push(Sub {
            name: "finalize",
            gvk: None,
            verbs: &["update"],
        });
    }
    // TokenRequest, answered by crate::auth::review.
    if core && r.kind == "ServiceAccount" {
        subs.push(Sub {
            name: "token",
            gvk: Some(("authentication.k8s.io", "v1", "TokenRequest")),
            verbs: &["create"],
        });
    }
    subs.sort_by_key(|s| s.name);
    subs
}

fn groups(registry: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in listed(registry) {
        let vs = g.entry(r.group.clone()).or_default();
        if !vs.contains(&r.version) {
            vs.push(r.version.clone());
        }
    }
    for vs in g.values_mut() {
        vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    g
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    json!({
        "name": name,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv).unwrap_or(Value::Null),
    })
}

fn resource_entries(r: &Resource) -> Vec<Value> {
    let mut out = vec![json!({
        "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
        "kind": r.kind, "verbs": r.verbs, "shortNames": r.short_names, "categories": r.categories,
        "storageVersionHash": "",
    })];
    for s in subresources(r) {
        let mut e = json!({"name": format!("{}/{}", r.plural, s.name), "singularName": "",
                           "namespaced": r.namespaced, "kind": r.kind, "verbs": s.verbs});
        if let Some((group, version, kind)) = s.gvk {
            e["group"] = json!(group);
            e["version"] = json!(version);
            e["kind"] = json!(kind);
        }
        out.push(e);
    }
    out
}

fn aggregated_resource(r: &Resource) -> Value {
    let subs: Vec<Value> = subresources(r)
        .into_iter()
        .map(|s| {
            let (group, version, kind) = s
                .gvk
                .unwrap_or((r.group.as_str(), r.version.as_str(), r.kind.as_str()));
            json!({"subresource": s.name, "responseKind": {"group": group, "version": version, "kind": kind}, "verbs": s.verbs})
        })
        .collect();
    let mut v = json!({
        "resource": r.plural, "singularResource": r.singular,
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        v["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        v["categories"] = json!(r.categories);
    }
    if !subs.is_empty() {
        v["subresources"] = json!(subs);
    }
    v
}

fn aggregated(registry: &Registry, legacy: bool) -> Value {
    let all: Vec<Arc<Resource>> = listed(registry);
    let mut items = Vec::new();
    for (group, versions) in groups(registry) {
        if legacy != group.is_empty() {
            continue;
        }
        let vs: Vec<Value> = versions
            .iter()
            .map(|v| {
                let resources: Vec<Value> = all
                    .iter()
                    .filter(|r| r.group == group && &r.version == v)
                    .map(|r| aggregated_resource(r))
                    .collect();
                json!({"version": v, "resources": resources, "freshness": "Current"})
            })
            .collect();
        items.push(json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": vs}));
    }
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let p = part.replace(' ', "");
        p.contains("as=APIGroupDiscoveryList")
            && p.contains("v=v2")
            && p.contains("g=apidiscovery.k8s.io")
    })
}

pub fn serve(registry: &Registry, target: &Target, accept: &str) -> Result<Reply, ApiError> {
    let not_found = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    match target {
        Target::CoreVersions if wants_aggregated(accept) => {
            Ok(Reply::value(StatusCode::OK, &aggregated(registry, true)).content_type(AGGREGATED))
        }
        Target::Groups if wants_aggregated(accept) => {
            Ok(Reply::value(StatusCode::OK, &aggregated(registry, false)).content_type(AGGREGATED))
        }
        Target::CoreVersions => Ok(Reply::value(
            StatusCode::OK,
            &json!({
                "kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
            }),
        )),
        Target::Groups => {
            let gs: Vec<Value> = groups(registry)
                .iter()
                .filter(|(g, _)| !g.is_empty())
                .map(|(g, vs)| group_json(g, vs))
                .collect();
            Ok(Reply::value(
                StatusCode::OK,
                &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs}),
            ))
        }
        Target::Group(g) => {
            let gs = groups(registry);
            let vs = gs.get(g).filter(|_| !g.is_empty()).ok_or_else(not_found)?;
            let mut v = group_json(g, vs);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            Ok(Reply::value(StatusCode::OK, &v))
        }
        Target::ResourceList { group, version } => {
            let resources: Vec<Value> = listed(registry)
                .iter()
                .filter(|r| &r.group == group && &r.version == version)
                .flat_map(|r| resource_entries(r))
                .collect();
            if resources.is_empty() {
                return Err(not_found());
            }
            let gv = if group.is_empty() {
                version.clone()
            } else {
                format!("{group}/{version}")
            };
            Ok(Reply::value(
                StatusCode::OK,
                &json!({
                    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources,
                }),
            ))
        }
        Target::Resource(_) => Err(not_found()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_order() {
        let mut v = vec!["v1alpha1", "v1", "v2beta1", "v1beta2", "v2", "foo"];
        v.sort_by_key(|x| std::cmp::Reverse(version_priority(x)));
        assert_eq!(v, ["v2", "v1", "v2beta1", "v1beta2", "v1alpha1", "foo"]);
    }
}
