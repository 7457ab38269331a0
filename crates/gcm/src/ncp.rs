//! The NamespacedCloudProfile controller's decisions, as pure functions:
//! which NCPs a change of a CloudProfile, an NCP or a Shoot concerns, the
//! status an NCP should have, and whether a deleting NCP may go.

use gardener::{
    Extensions, KIND_CLOUD_PROFILE, KIND_NAMESPACED_CLOUD_PROFILE, NamespacedCloudProfile,
    NamespacedCloudProfileSpec, NamespacedCloudProfileStatus, Shoot,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use crate::maintain::{ProfileRef, profile_ref};

/// The finalizer Gardener puts on profiles (upstream's `gardener`).
pub const FINALIZER: &str = "gardener";

/// Whether `meta` carries [`FINALIZER`].
pub fn has_finalizer(meta: &ObjectMeta) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == FINALIZER)
}

/// The merge patch that adds or removes [`FINALIZER`] and keeps every other
/// finalizer, guarded by the observed resource version.
pub fn finalizer_patch(meta: &ObjectMeta, present: bool) -> Value {
    let mut finalizers: Vec<String> = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|f| f.as_str() != FINALIZER)
        .cloned()
        .collect();
    if present {
        finalizers.push(FINALIZER.to_string());
    }
    json!({"metadata": {"finalizers": finalizers, "resourceVersion": meta.resource_version}})
}

/// Where following an NCP's parents leads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ancestry {
    /// Names of the NCP ancestors, nearest first (including ones that do
    /// not exist or close a cycle, so their appearance can be noticed).
    pub ncps: Vec<String>,
    /// The CloudProfile the chain ends at, if it ends at one.
    pub root: Option<String>,
}

/// Follows `spec`'s parents through `lookup` (NCPs of the same namespace by
/// name). NCP parents are followed only with multi-level inheritance; the
/// walk stops at a CloudProfile, a missing NCP, a cycle, or after
/// [`gardener::render::MAX_INHERITANCE_DEPTH`] steps.
pub fn ancestry<'a>(
    name: &str,
    spec: &'a NamespacedCloudProfileSpec,
    lookup: impl Fn(&str) -> Option<&'a NamespacedCloudProfileSpec>,
    ext: Extensions,
) -> Ancestry {
    let mut out = Ancestry::default();
    let mut current = spec;
    let mut seen = vec![name.to_string()];
    loop {
        let parent = &current.parent;
        match parent.kind.as_str() {
            "" | KIND_CLOUD_PROFILE => {
                out.root = Some(parent.name.clone());
                return out;
            }
            KIND_NAMESPACED_CLOUD_PROFILE if ext.multi_level_inheritance => {
                out.ncps.push(parent.name.clone());
                if seen.contains(&parent.name)
                    || out.ncps.len() > gardener::render::MAX_INHERITANCE_DEPTH
                {
                    return out;
                }
                seen.push(parent.name.clone());
                match lookup(&parent.name) {
                    Some(next) => current = next,
                    None => return out,
                }
            }
            _ => return out,
        }
    }
}

fn key(ncp: &NamespacedCloudProfile) -> (&str, &str) {
    (
        ncp.metadata.namespace.as_deref().unwrap_or_default(),
        ncp.metadata.name.as_deref().unwrap_or_default(),
    )
}

fn lookup_in<'a>(
    all: &'a [&'a NamespacedCloudProfile],
    namespace: &'a str,
) -> impl Fn(&str) -> Option<&'a NamespacedCloudProfileSpec> + 'a {
    move |name| {
        all.iter()
            .find(|n| key(n) == (namespace, name))
            .map(|n| &n.spec)
    }
}

fn object_ref(ncp: &NamespacedCloudProfile) -> ObjectRef<NamespacedCloudProfile> {
    let (ns, name) = key(ncp);
    ObjectRef::new(name).within(ns)
}

/// The NCPs to render again when the CloudProfile `name` changes: those
/// whose parent is it, and with multi-level inheritance those whose chain
/// of NCP parents ends at it.
pub fn for_cloud_profile(
    name: &str,
    all: &[&NamespacedCloudProfile],
    ext: Extensions,
) -> Vec<ObjectRef<NamespacedCloudProfile>> {
    all.iter()
        .filter(|n| {
            let (ns, own) = key(n);
            ancestry(own, &n.spec, lookup_in(all, ns), ext)
                .root
                .as_deref()
                == Some(name)
        })
        .map(|n| object_ref(n))
        .collect()
}

/// The NCPs to render again when the NCP `namespace/name` changes (or
/// appears or goes): with multi-level inheritance, every NCP of the
/// namespace that has it among its ancestors; without, none.
pub fn dependents(
    namespace: &str,
    name: &str,
    all: &[&NamespacedCloudProfile],
    ext: Extensions,
) -> Vec<ObjectRef<NamespacedCloudProfile>> {
    if !ext.multi_level_inheritance {
        return Vec::new();
    }
    all.iter()
        .filter(|n| {
            let (ns, own) = key(n);
            ns == namespace
                && own != name
                && ancestry(own, &n.spec, lookup_in(all, ns), ext)
                    .ncps
                    .iter()
                    .any(|a| a == name)
        })
        .map(|n| object_ref(n))
        .collect()
}

/// The NCPs to reconcile when the NCP `changed` changes, appears or goes
/// (multi-level inheritance only): its [`dependents`], and its parent NCP,
/// whose deletion may have waited for it.
pub fn related(
    changed: &NamespacedCloudProfile,
    all: &[&NamespacedCloudProfile],
    ext: Extensions,
) -> Vec<ObjectRef<NamespacedCloudProfile>> {
    if !ext.multi_level_inheritance {
        return Vec::new();
    }
    let (ns, name) = key(changed);
    let mut out = dependents(ns, name, all, ext);
    let parent = &changed.spec.parent;
    if parent.kind == KIND_NAMESPACED_CLOUD_PROFILE && parent.name != name {
        out.push(ObjectRef::new(&parent.name).within(ns));
    }
    out
}

/// The NCP a Shoot uses, if it uses one: a Shoot change (above all its
/// deletion) re-checks that NCP's deletion.
pub fn for_shoot(shoot: &Shoot, ext: Extensions) -> Option<ObjectRef<NamespacedCloudProfile>> {
    let ns = shoot.metadata.namespace.as_deref()?;
    match profile_ref(ns, &shoot.spec, ext)? {
        ProfileRef::Namespaced { namespace, name } => {
            Some(ObjectRef::new(&name).within(&namespace))
        }
        ProfileRef::Cluster(_) => None,
    }
}

/// What still holds a deleting NCP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Blockers {
    /// Shoots that use it, as `namespace/name`, sorted.
    pub shoots: Vec<String>,
    /// NCPs of its namespace that name it as parent (multi-level
    /// inheritance), sorted.
    pub children: Vec<String>,
}

impl Blockers {
    /// Whether nothing holds the NCP any more.
    pub fn is_empty(&self) -> bool {
        self.shoots.is_empty() && self.children.is_empty()
    }

    /// A sentence for the Warning event.
    pub fn message(&self) -> String {
        let mut parts = Vec::new();
        if !self.shoots.is_empty() {
            parts.push(format!("Shoots still use it: {}", self.shoots.join(", ")));
        }
        if !self.children.is_empty() {
            parts.push(format!(
                "NamespacedCloudProfiles still inherit from it: {}",
                self.children.join(", ")
            ));
        }
        format!(
            "Cannot delete the NamespacedCloudProfile yet. {}",
            parts.join("; ")
        )
    }
}

/// Which Shoots and child NCPs keep the NCP `namespace/name` from being
/// deleted. A Shoot counts when its profile reference resolves to this NCP
/// ([`profile_ref`]: same namespace, or the named one with cross-project
/// use); a Shoot that is itself being deleted still counts until it is gone.
pub fn blockers(
    namespace: &str,
    name: &str,
    shoots: &[&Shoot],
    ncps: &[&NamespacedCloudProfile],
    ext: Extensions,
) -> Blockers {
    let target = ProfileRef::Namespaced {
        namespace: namespace.to_string(),
        name: name.to_string(),
    };
    let mut out = Blockers::default();
    for s in shoots {
        let Some(ns) = s.metadata.namespace.as_deref() else {
            continue;
        };
        if profile_ref(ns, &s.spec, ext).as_ref() == Some(&target) {
            out.shoots.push(format!(
                "{ns}/{}",
                s.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
    if ext.multi_level_inheritance {
        for n in ncps {
            let (ns, own) = key(n);
            if ns == namespace
                && own != name
                && n.spec.parent.kind == KIND_NAMESPACED_CLOUD_PROFILE
                && n.spec.parent.name == name
            {
                out.children.push(own.to_string());
            }
        }
    }
    out.shoots.sort();
    out.children.sort();
    out
}

/// The status an NCP should have once rendered.
pub fn desired_status(
    ncp: &NamespacedCloudProfile,
    rendered: gardener::CloudProfileSpec,
) -> NamespacedCloudProfileStatus {
    NamespacedCloudProfileStatus {
        cloud_profile_spec: rendered,
        observed_generation: ncp.metadata.generation,
    }
}

/// Whether the status must be written: only when it differs.
pub fn status_differs(
    current: Option<&NamespacedCloudProfileStatus>,
    desired: &NamespacedCloudProfileStatus,
) -> bool {
    current != Some(desired)
}

/// The JSON patch that replaces the whole status (it holds nothing but
/// the rendering): a merge patch could not remove a field the new
/// rendering no longer has.
pub fn status_patch(desired: &NamespacedCloudProfileStatus) -> Value {
    json!([{"op": "add", "path": "/status", "value": desired}])
}

#[cfg(test)]
mod tests {
    use super::*;
    use gardener::{CloudProfileReference, ShootSpec};

    fn ncp(ns: &str, name: &str, parent: CloudProfileReference) -> NamespacedCloudProfile {
        let mut n = NamespacedCloudProfile::new(
            name,
            NamespacedCloudProfileSpec {
                parent,
                ..Default::default()
            },
        );
        n.metadata.namespace = Some(ns.into());
        n
    }

    fn cp(name: &str) -> CloudProfileReference {
        CloudProfileReference::cloud_profile(name)
    }

    fn nc(name: &str) -> CloudProfileReference {
        CloudProfileReference::namespaced(name)
    }

    fn shoot(ns: &str, name: &str, r: Option<CloudProfileReference>) -> Shoot {
        let mut s = Shoot::new(
            name,
            ShootSpec {
                cloud_profile: r,
                ..Default::default()
            },
        );
        s.metadata.namespace = Some(ns.into());
        s
    }

    fn names(refs: Vec<ObjectRef<NamespacedCloudProfile>>) -> Vec<String> {
        let mut v: Vec<String> = refs
            .iter()
            .map(|r| format!("{}/{}", r.namespace.as_deref().unwrap_or(""), r.name))
            .collect();
        v.sort();
        v
    }

    const OFF: Extensions = Extensions {
        multi_level_inheritance: false,
        cross_project_use: false,
    };
    const MULTI: Extensions = Extensions {
        multi_level_inheritance: true,
        cross_project_use: false,
    };
    const CROSS: Extensions = Extensions {
        multi_level_inheritance: false,
        cross_project_use: true,
    };

    /// a/p1 -> cp "local"; a/p2 -> a/p1; a/p3 -> a/p2; a/q -> cp "other";
    /// b/p1 -> cp "local"; a/orphan -> a/missing; a/x <-> a/y (cycle).
    fn landscape() -> Vec<NamespacedCloudProfile> {
        vec![
            ncp("a", "p1", cp("local")),
            ncp("a", "p2", nc("p1")),
            ncp("a", "p3", nc("p2")),
            ncp("a", "q", cp("other")),
            ncp("b", "p1", cp("local")),
            ncp("a", "orphan", nc("missing")),
            ncp("a", "x", nc("y")),
            ncp("a", "y", nc("x")),
        ]
    }

    #[test]
    fn cloud_profile_changes_enqueue() {
        let all = landscape();
        let refs: Vec<&NamespacedCloudProfile> = all.iter().collect();
        let cases: &[(&str, Extensions, &[&str])] = &[
            ("local", OFF, &["a/p1", "b/p1"]),
            ("local", MULTI, &["a/p1", "a/p2", "a/p3", "b/p1"]),
            ("other", MULTI, &["a/q"]),
            ("missing", MULTI, &[]),
            ("unknown", OFF, &[]),
        ];
        for (name, ext, want) in cases {
            assert_eq!(
                names(for_cloud_profile(name, &refs, *ext)),
                *want,
                "{name} {ext:?}"
            );
        }
    }

    #[test]
    fn ncp_changes_enqueue_descendants() {
        let all = landscape();
        let refs: Vec<&NamespacedCloudProfile> = all.iter().collect();
        let cases: &[(&str, &str, Extensions, &[&str])] = &[
            ("a", "p1", OFF, &[]),
            ("a", "p1", MULTI, &["a/p2", "a/p3"]),
            ("a", "p2", MULTI, &["a/p3"]),
            ("a", "p3", MULTI, &[]),
            // Another namespace's p1 has no children.
            ("b", "p1", MULTI, &[]),
            // A parent that does not exist yet: its child renders once it appears.
            ("a", "missing", MULTI, &["a/orphan"]),
            // A cycle enqueues its members once each, and terminates.
            ("a", "x", MULTI, &["a/y"]),
        ];
        for (ns, name, ext, want) in cases {
            assert_eq!(
                names(dependents(ns, name, &refs, *ext)),
                *want,
                "{ns}/{name} {ext:?}"
            );
        }
    }

    #[test]
    fn ncp_changes_enqueue_their_parent_too() {
        let all = landscape();
        let refs: Vec<&NamespacedCloudProfile> = all.iter().collect();
        let p2 = &all[1];
        assert_eq!(names(related(p2, &refs, MULTI)), ["a/p1", "a/p3"]);
        assert_eq!(names(related(p2, &refs, OFF)), Vec::<String>::new());
        // A root-level NCP has no parent NCP to enqueue.
        assert_eq!(names(related(&all[0], &refs, MULTI)), ["a/p2", "a/p3"]);
    }

    #[test]
    fn ancestry_walks() {
        let all = landscape();
        let refs: Vec<&NamespacedCloudProfile> = all.iter().collect();
        let walk = |name: &str, ext| {
            let n = refs.iter().find(|n| key(n) == ("a", name)).unwrap();
            ancestry(name, &n.spec, lookup_in(&refs, "a"), ext)
        };
        assert_eq!(
            walk("p3", MULTI),
            Ancestry {
                ncps: vec!["p2".into(), "p1".into()],
                root: Some("local".into())
            }
        );
        assert_eq!(
            walk("p3", OFF),
            Ancestry {
                ncps: vec![],
                root: None
            }
        );
        assert_eq!(
            walk("orphan", MULTI),
            Ancestry {
                ncps: vec!["missing".into()],
                root: None
            }
        );
        assert_eq!(
            walk("x", MULTI),
            Ancestry {
                ncps: vec!["y".into(), "x".into()],
                root: None
            }
        );
        // An endless chain is cut off after the depth limit.
        let long: Vec<NamespacedCloudProfile> = (0..20)
            .map(|i| ncp("a", &format!("n{i}"), nc(&format!("n{}", i + 1))))
            .collect();
        let lrefs: Vec<&NamespacedCloudProfile> = long.iter().collect();
        let a = ancestry("n0", &long[0].spec, lookup_in(&lrefs, "a"), MULTI);
        assert_eq!(a.ncps.len(), gardener::render::MAX_INHERITANCE_DEPTH + 1);
        assert_eq!(a.root, None);
    }

    #[test]
    fn shoots_map_to_their_ncp() {
        let cross = CloudProfileReference {
            namespace: Some("b".into()),
            ..nc("p1")
        };
        let cases: Vec<(Shoot, Extensions, Option<&str>)> = vec![
            (shoot("a", "s", Some(nc("p1"))), OFF, Some("a/p1")),
            (shoot("a", "s", Some(cp("local"))), OFF, None),
            (shoot("a", "s", None), OFF, None),
            (shoot("a", "s", Some(cross.clone())), OFF, Some("a/p1")),
            (shoot("a", "s", Some(cross)), CROSS, Some("b/p1")),
        ];
        for (s, ext, want) in cases {
            let got = for_shoot(&s, ext)
                .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name));
            assert_eq!(got.as_deref(), want, "{:?} {ext:?}", s.spec.cloud_profile);
        }
    }

    #[test]
    fn deletion_verdicts() {
        let cross = CloudProfileReference {
            namespace: Some("a".into()),
            ..nc("p1")
        };
        let shoots = [
            shoot("a", "uses", Some(nc("p1"))),
            shoot("a", "other-ncp", Some(nc("q"))),
            shoot("a", "cluster", Some(cp("p1"))),
            shoot("b", "same-name-elsewhere", Some(nc("p1"))),
            shoot("c", "cross", Some(cross)),
        ];
        let ncps = landscape();
        let s: Vec<&Shoot> = shoots.iter().collect();
        let n: Vec<&NamespacedCloudProfile> = ncps.iter().collect();
        let none: Vec<&Shoot> = vec![];
        type Row<'a> = (
            &'a str,
            &'a str,
            &'a [&'a Shoot],
            Extensions,
            &'a [&'a str],
            &'a [&'a str],
        );
        let cases: Vec<Row> = vec![
            ("a", "p1", &s, OFF, &["a/uses"], &[]),
            ("a", "p1", &s, CROSS, &["a/uses", "c/cross"], &[]),
            ("a", "p1", &s, MULTI, &["a/uses"], &["p2"]),
            ("a", "p1", &none, MULTI, &[], &["p2"]),
            ("a", "p3", &s, MULTI, &[], &[]),
            ("b", "p1", &s, OFF, &["b/same-name-elsewhere"], &[]),
            ("a", "p2", &none, OFF, &[], &[]),
        ];
        for (ns, name, shoots, ext, want_shoots, want_children) in cases {
            let b = blockers(ns, name, shoots, &n, ext);
            assert_eq!(b.shoots, *want_shoots, "{ns}/{name} {ext:?}");
            assert_eq!(b.children, *want_children, "{ns}/{name} {ext:?}");
            assert_eq!(
                b.is_empty(),
                want_shoots.is_empty() && want_children.is_empty()
            );
        }
        let msg = blockers("a", "p1", &s, &n, MULTI).message();
        assert!(msg.contains("a/uses") && msg.contains("p2"), "{msg}");
    }

    #[test]
    fn finalizers() {
        let meta = |f: &[&str]| ObjectMeta {
            finalizers: Some(f.iter().map(|s| s.to_string()).collect()),
            resource_version: Some("5".into()),
            ..Default::default()
        };
        assert!(!has_finalizer(&ObjectMeta::default()));
        assert!(has_finalizer(&meta(&["x", FINALIZER])));
        assert_eq!(
            finalizer_patch(&meta(&["x"]), true),
            json!({"metadata": {"finalizers": ["x", "gardener"], "resourceVersion": "5"}})
        );
        assert_eq!(
            finalizer_patch(&meta(&["gardener", "x"]), false),
            json!({"metadata": {"finalizers": ["x"], "resourceVersion": "5"}})
        );
        // Adding twice does not duplicate.
        assert_eq!(
            finalizer_patch(&meta(&["gardener"]), true),
            json!({"metadata": {"finalizers": ["gardener"], "resourceVersion": "5"}})
        );
    }

    #[test]
    fn status_is_written_only_when_it_differs() {
        let mut n = ncp("a", "p1", cp("local"));
        n.metadata.generation = Some(3);
        let rendered = gardener::CloudProfileSpec {
            type_: "local".into(),
            ..Default::default()
        };
        let desired = desired_status(&n, rendered.clone());
        assert_eq!(desired.observed_generation, Some(3));
        assert!(status_differs(None, &desired));
        assert!(!status_differs(Some(&desired), &desired));
        let stale_gen = NamespacedCloudProfileStatus {
            observed_generation: Some(2),
            ..desired.clone()
        };
        assert!(status_differs(Some(&stale_gen), &desired));
        let stale_spec = NamespacedCloudProfileStatus {
            cloud_profile_spec: gardener::CloudProfileSpec::default(),
            ..desired.clone()
        };
        assert!(status_differs(Some(&stale_spec), &desired));
        assert_eq!(status_patch(&desired)[0]["path"], json!("/status"));
        assert_eq!(
            status_patch(&desired)[0]["value"]["observedGeneration"],
            json!(3)
        );
    }
}
