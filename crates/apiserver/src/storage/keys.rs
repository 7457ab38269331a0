//! Where objects live in the store: every `/registry/…` key is spelled here
//! and nowhere else.
//!
//! A key is `/registry/<storage>/<namespace>/<name>` for namespaced objects
//! and `/registry/<storage>/<name>` for cluster-scoped ones, where
//! `<storage>` is `<group or "core">/<plural>`, shared by every served
//! version of a resource (kube-apiserver's etcd layout, so the store can be
//! read with the same mental map).

/// The prefix of every object the server stores.
pub const ROOT: &str = "/registry/";

/// Storage locations the server's own code reads by name (the controllers,
/// authentication, admission); everything else is reached through its
/// [`crate::storage::registry::Resource`].
pub const NAMESPACES: &str = "core/namespaces";
pub const PODS: &str = "core/pods";
pub const NODES: &str = "core/nodes";
pub const EVENTS: &str = "core/events";
pub const SERVICES: &str = "core/services";
pub const ENDPOINTS: &str = "core/endpoints";
pub const SERVICE_ACCOUNTS: &str = "core/serviceaccounts";
pub const POD_DISRUPTION_BUDGETS: &str = "policy/poddisruptionbudgets";
pub const CRDS: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// The storage location of `plural` in `group` (the core group is `core`).
pub fn storage_of(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("core/{plural}")
    } else {
        format!("{group}/{plural}")
    }
}

/// Prefix of every object stored at `storage`.
pub fn prefix(storage: &str) -> String {
    format!("{ROOT}{storage}/")
}

/// Prefix of the objects stored at `storage` in namespace `ns`.
pub fn namespace_prefix(storage: &str, ns: &str) -> String {
    format!("{ROOT}{storage}/{ns}/")
}

/// The key of one object; `ns` is `None` for cluster-scoped objects.
pub fn key(storage: &str, ns: Option<&str>, name: &str) -> String {
    match ns {
        Some(ns) => format!("{ROOT}{storage}/{ns}/{name}"),
        None => format!("{ROOT}{storage}/{name}"),
    }
}

/// The namespace segment of a namespaced key under `prefix(storage)`.
pub fn namespace_of(key: &str, storage: &str) -> Option<String> {
    key.strip_prefix(&prefix(storage))?
        .split('/')
        .next()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_etcd_layout() {
        assert_eq!(storage_of("", "pods"), "core/pods");
        assert_eq!(storage_of("apps", "deployments"), "apps/deployments");
        assert_eq!(key(PODS, Some("ns"), "p"), "/registry/core/pods/ns/p");
        assert_eq!(key(NAMESPACES, None, "ns"), "/registry/core/namespaces/ns");
        assert_eq!(prefix(PODS), "/registry/core/pods/");
        assert_eq!(namespace_prefix(PODS, "a"), "/registry/core/pods/a/");
        assert_eq!(
            namespace_of("/registry/core/pods/a/p", PODS).as_deref(),
            Some("a")
        );
        assert_eq!(namespace_of("/registry/core/nodes/n", PODS), None);
    }
}
