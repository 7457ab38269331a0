//! Turning an HTTP request line into what it asks for: the resource path
//! (group, version, namespace, resource, name, subresource) and the query
//! options kube-apiserver understands.

use std::collections::HashMap;

use apimachinery::ApiError;

/// A parsed resource path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/<group>`
    Group(String),
    /// `/api/v1`, `/apis/<group>/<version>`
    ResourceList {
        group: String,
        version: String,
    },
    Resource(ResourcePath),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect()
}

/// Parses a path under `/api` or `/apis`; `None` when it is neither.
pub fn parse_path(path: &str) -> Option<Target> {
    let segs = segments(path);
    let (group, version, rest) = match segs.first().map(String::as_str) {
        Some("api") => match segs.len() {
            1 => return Some(Target::CoreVersions),
            _ => (String::new(), segs[1].clone(), &segs[2..]),
        },
        Some("apis") => match segs.len() {
            1 => return Some(Target::Groups),
            2 => return Some(Target::Group(segs[1].clone())),
            _ => (segs[1].clone(), segs[2].clone(), &segs[3..]),
        },
        _ => return None,
    };
    if rest.is_empty() {
        return Some(Target::ResourceList { group, version });
    }
    // The legacy `/watch/` prefix.
    let rest: &[String] = if rest[0] == "watch" { &rest[1..] } else { rest };
    let mut p = ResourcePath {
        group,
        version,
        namespace: None,
        resource: String::new(),
        name: None,
        subresource: None,
    };
    match rest {
        [r] => p.resource = r.clone(),
        [r, n] => {
            p.resource = r.clone();
            p.name = Some(n.clone());
        }
        // `namespaces/<ns>/status` and `namespaces/<ns>/finalize` are
        // subresources of the namespace itself.
        [r, n, s] if r == "namespaces" && (s == "status" || s == "finalize") => {
            p.resource = r.clone();
            p.name = Some(n.clone());
            p.subresource = Some(s.clone());
        }
        [r, n, s] if r != "namespaces" => {
            p.resource = r.clone();
            p.name = Some(n.clone());
            p.subresource = Some(s.clone());
        }
        [ns_kw, ns, r] if ns_kw == "namespaces" => {
            p.namespace = Some(ns.clone());
            p.resource = r.clone();
        }
        [ns_kw, ns, r, n] if ns_kw == "namespaces" => {
            p.namespace = Some(ns.clone());
            p.resource = r.clone();
            p.name = Some(n.clone());
        }
        [ns_kw, ns, r, n, s] if ns_kw == "namespaces" => {
            p.namespace = Some(ns.clone());
            p.resource = r.clone();
            p.name = Some(n.clone());
            p.subresource = Some(s.clone());
        }
        _ => return None,
    }
    Some(Target::Resource(p))
}

/// Query options of reads and writes.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pub raw: HashMap<String, String>,
}

impl Query {
    pub fn parse(q: Option<&str>) -> Query {
        let mut raw = HashMap::new();
        if let Some(q) = q {
            for (k, v) in form_urlencoded::parse(q.as_bytes()) {
                if !k.is_empty() {
                    raw.insert(k.into_owned(), v.into_owned());
                }
            }
        }
        Query { raw }
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.raw
            .get(k)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    pub fn flag(&self, k: &str) -> bool {
        matches!(self.raw.get(k).map(String::as_str), Some("true" | "1"))
    }

    pub fn int(&self, k: &str) -> Result<Option<i64>, ApiError> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid value for {k}: {v:?}"))),
        }
    }

    /// `dryRun=All` (the only value kube-apiserver accepts besides unset).
    pub fn dry_run(&self) -> Result<bool, ApiError> {
        match self.raw.get("dryRun").map(String::as_str) {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "Invalid dryRun value {other:?}: supported values are \"All\""
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse_path(path) {
            Some(Target::Resource(p)) => p,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn paths() {
        assert_eq!(parse_path("/api"), Some(Target::CoreVersions));
        assert_eq!(parse_path("/apis/"), Some(Target::Groups));
        assert_eq!(parse_path("/apis/apps"), Some(Target::Group("apps".into())));
        assert_eq!(
            parse_path("/api/v1"),
            Some(Target::ResourceList {
                group: "".into(),
                version: "v1".into()
            })
        );
        let p = res("/api/v1/namespaces/default/pods/p1/status");
        assert_eq!(
            (
                p.namespace.as_deref(),
                p.resource.as_str(),
                p.name.as_deref(),
                p.subresource.as_deref()
            ),
            (Some("default"), "pods", Some("p1"), Some("status"))
        );
        let p = res("/api/v1/namespaces/default");
        assert_eq!(
            (p.resource.as_str(), p.name.as_deref(), p.namespace),
            ("namespaces", Some("default"), None)
        );
        let p = res("/api/v1/namespaces/kube-system/status");
        assert_eq!(
            (p.name.as_deref(), p.subresource.as_deref()),
            (Some("kube-system"), Some("status"))
        );
        let p = res("/api/v1/namespaces/x/configmaps");
        assert_eq!(
            (p.namespace.as_deref(), p.resource.as_str(), p.name),
            (Some("x"), "configmaps", None)
        );
        let p = res("/apis/apps/v1/namespaces/d/deployments/web/scale");
        assert_eq!(
            (p.group.as_str(), p.subresource.as_deref()),
            ("apps", Some("scale"))
        );
        let p = res("/api/v1/nodes/n1/status");
        assert_eq!(
            (p.resource.as_str(), p.subresource.as_deref()),
            ("nodes", Some("status"))
        );
        assert_eq!(parse_path("/version"), None);
    }

    #[test]
    fn queries_with_leading_ampersand() {
        let q = Query::parse(Some("&limit=500&labelSelector=a%3Db&watch=true"));
        assert_eq!(q.get("limit"), Some("500"));
        assert_eq!(q.get("labelSelector"), Some("a=b"));
        assert!(q.flag("watch"));
        assert!(Query::parse(Some("")).raw.is_empty());
    }
}
