//! Request counters of the API server, served on `/metrics` in the
//! Prometheus text format as `apiserver_request_total{verb,resource}` (the
//! name and labels kube-apiserver uses), so benchmarks and operators can
//! see what clients cost.
//!
//! Counting must not slow requests down: each (verb, resource) pair gets
//! one atomic counter, found under a read lock; the write lock is taken
//! only the first time a pair is seen.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::Method;
use parking_lot::RwLock;

use crate::http::request::{Query, ResourcePath};

#[derive(Default)]
pub struct RequestCounts {
    counters: RwLock<HashMap<(&'static str, String), Arc<AtomicU64>>>,
}

/// kube-apiserver's verb for a request on a resource path.
pub fn verb(method: &Method, path: &ResourcePath, raw_path: &str, query: &Query) -> &'static str {
    let watch = query.flag("watch") || raw_path.contains("/watch/");
    match *method {
        Method::GET if watch => "WATCH",
        Method::GET if path.name.is_none() => "LIST",
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE if path.name.is_none() => "DELETECOLLECTION",
        Method::DELETE => "DELETE",
        _ => "OTHER",
    }
}

impl RequestCounts {
    /// Counts one request; `resource` is `resource` or
    /// `resource/subresource`.
    pub fn record(&self, verb: &'static str, resource: &str) {
        // The key is built per request: a short allocation, far cheaper
        // than anything else a request does.
        let key = (verb, resource.to_string());
        if let Some(c) = self.counters.read().get(&key) {
            c.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.counters
            .write()
            .entry(key)
            .or_default()
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one request on a resource path.
    pub fn record_resource(&self, verb: &'static str, path: &ResourcePath) {
        match &path.subresource {
            Some(sub) => self.record(verb, &format!("{}/{sub}", path.resource)),
            None => self.record(verb, &path.resource),
        }
    }

    /// Every request counted so far.
    pub fn total(&self) -> u64 {
        self.counters
            .read()
            .values()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// The Prometheus text exposition, sorted for stable output.
    pub fn render(&self) -> String {
        let sorted: BTreeMap<(String, &'static str), u64> = self
            .counters
            .read()
            .iter()
            .map(|((verb, res), c)| ((res.clone(), *verb), c.load(Ordering::Relaxed)))
            .collect();
        let mut out = String::from(
            "# HELP apiserver_request_total Requests served, by verb and resource.\n\
             # TYPE apiserver_request_total counter\n",
        );
        for ((resource, verb), n) in sorted {
            let _ = writeln!(
                out,
                "apiserver_request_total{{verb=\"{verb}\",resource=\"{resource}\"}} {n}"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(name: Option<&str>) -> ResourcePath {
        ResourcePath {
            group: String::new(),
            version: "v1".into(),
            namespace: Some("default".into()),
            resource: "configmaps".into(),
            name: name.map(str::to_string),
            subresource: None,
        }
    }

    #[test]
    fn verbs_follow_kube_apiserver() {
        let q = Query::parse(None);
        let w = Query::parse(Some("watch=true"));
        let p = "/api/v1/namespaces/default/configmaps";
        let cases = [
            (Method::GET, path(None), p, &q, "LIST"),
            (Method::GET, path(None), p, &w, "WATCH"),
            (
                Method::GET,
                path(None),
                "/api/v1/watch/configmaps",
                &q,
                "WATCH",
            ),
            (Method::GET, path(Some("a")), p, &q, "GET"),
            (Method::POST, path(None), p, &q, "POST"),
            (Method::DELETE, path(None), p, &q, "DELETECOLLECTION"),
            (Method::DELETE, path(Some("a")), p, &q, "DELETE"),
        ];
        for (m, rp, raw, query, want) in cases {
            assert_eq!(verb(&m, &rp, raw, query), want, "{m} {raw}");
        }
    }

    #[test]
    fn counts_and_renders() {
        let c = RequestCounts::default();
        c.record("POST", "machines");
        c.record("POST", "machines");
        c.record("PUT", "machines/status");
        assert_eq!(c.total(), 3);
        let text = c.render();
        assert!(text.contains("apiserver_request_total{verb=\"POST\",resource=\"machines\"} 2"));
        assert!(
            text.contains("apiserver_request_total{verb=\"PUT\",resource=\"machines/status\"} 1")
        );
    }
}
