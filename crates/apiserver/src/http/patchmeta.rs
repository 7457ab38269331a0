//! Strategic-merge-patch metadata of the built-in kinds: which list fields
//! merge by a key instead of being replaced, as the `patchStrategy` and
//! `patchMergeKey` struct tags of the upstream Go types declare them.
//!
//! k8s-openapi's schemas do not carry these tags, so the published OpenAPI
//! (`x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key`, which
//! kubectl's client-side apply reads) and the server's strategic merge patch
//! both take them from this one table. Lists that upstream leaves atomic
//! (tolerations, readinessGates, taints, envFrom …) are deliberately absent:
//! a patch replaces them whole.

/// How one list field of one schema definition merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchMeta {
    /// `merge`, `retainKeys`, `merge,retainKeys` or (for a map replaced
    /// whole) `replace`.
    pub strategy: &'static str,
    /// The field that identifies an element; `None` for lists of scalars,
    /// which merge as sets (finalizers, podCIDRs).
    pub merge_key: Option<&'static str>,
}

const fn m(strategy: &'static str, key: Option<&'static str>) -> PatchMeta {
    PatchMeta {
        strategy,
        merge_key: key,
    }
}

const CORE: &str = "io.k8s.api.core.v1.";
const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";

/// (definition name without its package prefix, field, metadata). The
/// package prefix is given per block in [`lookup`].
const CORE_TABLE: &[(&str, &str, PatchMeta)] = &[
    ("PodSpec", "volumes", m("merge,retainKeys", Some("name"))),
    ("PodSpec", "initContainers", m("merge", Some("name"))),
    ("PodSpec", "containers", m("merge", Some("name"))),
    ("PodSpec", "ephemeralContainers", m("merge", Some("name"))),
    ("PodSpec", "imagePullSecrets", m("merge", Some("name"))),
    ("PodSpec", "hostAliases", m("merge", Some("ip"))),
    (
        "PodSpec",
        "topologySpreadConstraints",
        m("merge", Some("topologyKey")),
    ),
    ("PodSpec", "schedulingGates", m("merge", Some("name"))),
    (
        "PodSpec",
        "resourceClaims",
        m("merge,retainKeys", Some("name")),
    ),
    ("Container", "ports", m("merge", Some("containerPort"))),
    ("Container", "env", m("merge", Some("name"))),
    ("Container", "volumeMounts", m("merge", Some("mountPath"))),
    ("Container", "volumeDevices", m("merge", Some("devicePath"))),
    (
        "EphemeralContainer",
        "ports",
        m("merge", Some("containerPort")),
    ),
    ("EphemeralContainer", "env", m("merge", Some("name"))),
    (
        "EphemeralContainer",
        "volumeMounts",
        m("merge", Some("mountPath")),
    ),
    (
        "EphemeralContainer",
        "volumeDevices",
        m("merge", Some("devicePath")),
    ),
    ("PodStatus", "conditions", m("merge", Some("type"))),
    ("PodStatus", "podIPs", m("merge", Some("ip"))),
    ("PodStatus", "hostIPs", m("merge", Some("ip"))),
    (
        "PodStatus",
        "resourceClaimStatuses",
        m("merge,retainKeys", Some("name")),
    ),
    ("NodeSpec", "podCIDRs", m("merge", None)),
    ("NodeStatus", "conditions", m("merge", Some("type"))),
    ("NodeStatus", "addresses", m("merge", Some("type"))),
    ("NamespaceStatus", "conditions", m("merge", Some("type"))),
    (
        "PersistentVolumeClaimStatus",
        "conditions",
        m("merge", Some("type")),
    ),
    ("ServiceSpec", "ports", m("merge", Some("port"))),
    ("ServiceStatus", "conditions", m("merge", Some("type"))),
    ("ServiceAccount", "secrets", m("merge", Some("name"))),
];

const OTHER_TABLE: &[(&str, &str, PatchMeta)] = &[
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        "conditions",
        m("merge", Some("type")),
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetStatus",
        "conditions",
        m("merge", Some("type")),
    ),
    (
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        "conditions",
        m("merge", Some("type")),
    ),
    (
        "io.k8s.api.apps.v1.DaemonSetStatus",
        "conditions",
        m("merge", Some("type")),
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        "conditions",
        m("merge", Some("type")),
    ),
    (
        "io.k8s.api.batch.v1.JobStatus",
        "conditions",
        m("merge", Some("type")),
    ),
    // Two map fields carry a strategy too: kubectl sends `$retainKeys` for a
    // Deployment's strategy, and a budget's selector is replaced whole.
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        "strategy",
        m("retainKeys", None),
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        "selector",
        m("replace", None),
    ),
];

const META_TABLE: &[(&str, &str, PatchMeta)] = &[
    ("ObjectMeta", "finalizers", m("merge", None)),
    ("ObjectMeta", "ownerReferences", m("merge", Some("uid"))),
];

/// The patch metadata of `field` in the schema definition named
/// `definition` (a kube OpenAPI name such as `io.k8s.api.core.v1.PodSpec`).
pub fn lookup(definition: &str, field: &str) -> Option<PatchMeta> {
    let find = |table: &[(&str, &str, PatchMeta)], short: &str| {
        table
            .iter()
            .find(|(d, f, _)| *d == short && *f == field)
            .map(|(_, _, meta)| *meta)
    };
    if let Some(short) = definition.strip_prefix(CORE) {
        return find(CORE_TABLE, short);
    }
    if let Some(short) = definition.strip_prefix(META) {
        return find(META_TABLE, short);
    }
    find(OTHER_TABLE, definition)
}

/// Every (definition, field, metadata) the table knows, for publishing.
pub fn all() -> impl Iterator<Item = (String, &'static str, PatchMeta)> {
    let core = CORE_TABLE
        .iter()
        .map(|(d, f, p)| (format!("{CORE}{d}"), *f, *p));
    let meta = META_TABLE
        .iter()
        .map(|(d, f, p)| (format!("{META}{d}"), *f, *p));
    let other = OTHER_TABLE.iter().map(|(d, f, p)| (d.to_string(), *f, *p));
    core.chain(meta).chain(other)
}

/// The patch strategy and merge key of the list at `path` inside a built-in
/// kind, e.g. `merge_key("apps", "Deployment", "spec.template.spec.containers")`
/// → `Some(("merge", "name"))`. `path` is dotted; list indices (`[0]`) may
/// be present or left out. The key is `""` for lists of scalars that merge
/// as sets (`metadata.finalizers`). `None` for atomic lists, unknown kinds
/// and paths that do not exist.
pub fn merge_key(group: &str, kind: &str, path: &str) -> Option<(&'static str, &'static str)> {
    let (definition, field) = crate::http::openapi::builtin_field_owner(group, kind, path)?;
    lookup(&definition, &field).map(|p| (p.strategy, p.merge_key.unwrap_or("")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lookups() {
        assert_eq!(
            lookup("io.k8s.api.core.v1.PodSpec", "containers"),
            Some(m("merge", Some("name")))
        );
        assert_eq!(lookup("io.k8s.api.core.v1.PodSpec", "tolerations"), None);
        assert_eq!(
            lookup(
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                "finalizers"
            ),
            Some(m("merge", None))
        );
        assert_eq!(
            lookup("io.k8s.api.apps.v1.DeploymentStatus", "conditions"),
            Some(m("merge", Some("type")))
        );
    }

    #[test]
    fn paths_through_kinds() {
        assert_eq!(
            merge_key("", "Pod", "spec.containers"),
            Some(("merge", "name"))
        );
        assert_eq!(
            merge_key("apps", "Deployment", "spec.template.spec.containers[0].env"),
            Some(("merge", "name"))
        );
        assert_eq!(
            merge_key("apps", "Deployment", "spec.template.spec.containers.ports"),
            Some(("merge", "containerPort"))
        );
        assert_eq!(
            merge_key("", "Pod", "spec.volumes"),
            Some(("merge,retainKeys", "name"))
        );
        assert_eq!(
            merge_key("", "Pod", "metadata.finalizers"),
            Some(("merge", ""))
        );
        assert_eq!(merge_key("", "Pod", "spec.tolerations"), None);
        assert_eq!(merge_key("", "Pod", "spec.nope"), None);
        assert_eq!(merge_key("", "Nope", "spec.containers"), None);
    }
}
