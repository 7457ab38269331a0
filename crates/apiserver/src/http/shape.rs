//! The shape of objects as strategic merge patch and server-side apply see
//! them: which lists merge by key, as sets, or are replaced whole; which maps
//! are atomic; and which definition a nested field has.
//!
//! Built-in kinds are described by OpenAPI definition names
//! (`io.k8s.api.core.v1.PodSpec`), the same names the published OpenAPI and
//! [`crate::http::patchmeta`] use: the merge key of a field depends on where it
//! sits (Service `spec.ports` merge by `port`, container `ports` by
//! `containerPort`), so lookups go (definition, field) → facts, and walking
//! an object moves from definition to definition. Only the definitions on
//! the way to a non-atomic list or an atomic struct are listed; everything
//! else is a granular map with atomic lists, which is what Kubernetes does
//! for fields without list or struct tags.
//!
//! Custom resources use their structural schema
//! (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//! `x-kubernetes-map-type`), with `metadata` as ObjectMeta.

use apimachinery::schema::{ListType, MapType, SchemaNode};

use crate::storage::registry::Resource;

macro_rules! core {
    ($d:literal) => {
        concat!("io.k8s.api.core.v1.", $d)
    };
}
macro_rules! apps {
    ($d:literal) => {
        concat!("io.k8s.api.apps.v1.", $d)
    };
}
macro_rules! batch {
    ($d:literal) => {
        concat!("io.k8s.api.batch.v1.", $d)
    };
}
macro_rules! meta {
    ($d:literal) => {
        concat!("io.k8s.apimachinery.pkg.apis.meta.v1.", $d)
    };
}
macro_rules! policy {
    ($d:literal) => {
        concat!("io.k8s.api.policy.v1.", $d)
    };
}
macro_rules! apiext {
    ($d:literal) => {
        concat!(
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.",
            $d
        )
    };
}

const OBJECT_META: &str = meta!("ObjectMeta");
/// What an unknown built-in kind is taken to be: an object with metadata.
const ANY_OBJECT: &str = meta!("PartialObjectMetadata");

/// (group, kind) → definition of the served built-in kinds.
const ROOTS: &[(&str, &str, &str)] = &[
    ("", "Pod", core!("Pod")),
    ("", "Node", core!("Node")),
    ("", "Namespace", core!("Namespace")),
    ("", "Service", core!("Service")),
    ("", "ServiceAccount", core!("ServiceAccount")),
    ("", "PersistentVolume", core!("PersistentVolume")),
    ("", "PersistentVolumeClaim", core!("PersistentVolumeClaim")),
    ("", "ConfigMap", core!("ConfigMap")),
    ("", "Secret", core!("Secret")),
    ("", "Endpoints", core!("Endpoints")),
    ("", "Event", core!("Event")),
    ("events.k8s.io", "Event", "io.k8s.api.events.v1.Event"),
    ("apps", "Deployment", apps!("Deployment")),
    ("apps", "StatefulSet", apps!("StatefulSet")),
    ("apps", "ReplicaSet", apps!("ReplicaSet")),
    ("apps", "ControllerRevision", apps!("ControllerRevision")),
    ("batch", "Job", batch!("Job")),
    ("batch", "CronJob", batch!("CronJob")),
    (
        "policy",
        "PodDisruptionBudget",
        policy!("PodDisruptionBudget"),
    ),
    (
        "discovery.k8s.io",
        "EndpointSlice",
        "io.k8s.api.discovery.v1.EndpointSlice",
    ),
    (
        "coordination.k8s.io",
        "Lease",
        "io.k8s.api.coordination.v1.Lease",
    ),
    (
        "storage.k8s.io",
        "VolumeAttachment",
        "io.k8s.api.storage.v1.VolumeAttachment",
    ),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        apiext!("CustomResourceDefinition"),
    ),
];

/// (definition, field) → the definition of the field's value (of its
/// elements, for lists). Every root also has `metadata` → ObjectMeta.
const CHILDREN: &[(&str, &str, &str)] = &[
    (core!("Pod"), "spec", core!("PodSpec")),
    (core!("Pod"), "status", core!("PodStatus")),
    (core!("PodTemplateSpec"), "metadata", OBJECT_META),
    (core!("PodTemplateSpec"), "spec", core!("PodSpec")),
    (core!("PodSpec"), "containers", core!("Container")),
    (core!("PodSpec"), "initContainers", core!("Container")),
    (
        core!("PodSpec"),
        "ephemeralContainers",
        core!("EphemeralContainer"),
    ),
    (core!("PodSpec"), "volumes", core!("Volume")),
    (
        core!("Container"),
        "resources",
        core!("ResourceRequirements"),
    ),
    (
        core!("EphemeralContainer"),
        "resources",
        core!("ResourceRequirements"),
    ),
    (core!("Node"), "spec", core!("NodeSpec")),
    (core!("Node"), "status", core!("NodeStatus")),
    (core!("Namespace"), "spec", core!("NamespaceSpec")),
    (core!("Namespace"), "status", core!("NamespaceStatus")),
    (core!("Service"), "spec", core!("ServiceSpec")),
    (core!("Service"), "status", core!("ServiceStatus")),
    (
        core!("PersistentVolume"),
        "spec",
        core!("PersistentVolumeSpec"),
    ),
    (
        core!("PersistentVolumeSpec"),
        "claimRef",
        core!("ObjectReference"),
    ),
    (
        core!("PersistentVolumeClaim"),
        "spec",
        core!("PersistentVolumeClaimSpec"),
    ),
    (
        core!("PersistentVolumeClaim"),
        "status",
        core!("PersistentVolumeClaimStatus"),
    ),
    (
        core!("PersistentVolumeClaimSpec"),
        "selector",
        meta!("LabelSelector"),
    ),
    (apps!("Deployment"), "spec", apps!("DeploymentSpec")),
    (apps!("Deployment"), "status", apps!("DeploymentStatus")),
    (
        apps!("DeploymentSpec"),
        "template",
        core!("PodTemplateSpec"),
    ),
    (apps!("DeploymentSpec"), "selector", meta!("LabelSelector")),
    (
        apps!("DeploymentSpec"),
        "strategy",
        apps!("DeploymentStrategy"),
    ),
    (apps!("StatefulSet"), "spec", apps!("StatefulSetSpec")),
    (apps!("StatefulSet"), "status", apps!("StatefulSetStatus")),
    (
        apps!("StatefulSetSpec"),
        "template",
        core!("PodTemplateSpec"),
    ),
    (apps!("StatefulSetSpec"), "selector", meta!("LabelSelector")),
    (apps!("ReplicaSet"), "spec", apps!("ReplicaSetSpec")),
    (apps!("ReplicaSet"), "status", apps!("ReplicaSetStatus")),
    (
        apps!("ReplicaSetSpec"),
        "template",
        core!("PodTemplateSpec"),
    ),
    (apps!("ReplicaSetSpec"), "selector", meta!("LabelSelector")),
    (batch!("Job"), "spec", batch!("JobSpec")),
    (batch!("Job"), "status", batch!("JobStatus")),
    (batch!("JobSpec"), "template", core!("PodTemplateSpec")),
    (batch!("JobSpec"), "selector", meta!("LabelSelector")),
    (batch!("CronJob"), "spec", batch!("CronJobSpec")),
    (batch!("CronJob"), "status", batch!("CronJobStatus")),
    (
        batch!("CronJobSpec"),
        "jobTemplate",
        batch!("JobTemplateSpec"),
    ),
    (batch!("JobTemplateSpec"), "metadata", OBJECT_META),
    (batch!("JobTemplateSpec"), "spec", batch!("JobSpec")),
    (batch!("CronJobStatus"), "active", core!("ObjectReference")),
    (
        policy!("PodDisruptionBudget"),
        "spec",
        policy!("PodDisruptionBudgetSpec"),
    ),
    (
        policy!("PodDisruptionBudget"),
        "status",
        policy!("PodDisruptionBudgetStatus"),
    ),
    (
        policy!("PodDisruptionBudgetSpec"),
        "selector",
        meta!("LabelSelector"),
    ),
    (
        apiext!("CustomResourceDefinition"),
        "spec",
        apiext!("CustomResourceDefinitionSpec"),
    ),
    (
        apiext!("CustomResourceDefinition"),
        "status",
        apiext!("CustomResourceDefinitionStatus"),
    ),
    (OBJECT_META, "ownerReferences", meta!("OwnerReference")),
    (OBJECT_META, "managedFields", meta!("ManagedFieldsEntry")),
];

/// How one list field merges under server-side apply
/// (`+listType` / `+listMapKey` of the upstream Go types). Lists not named
/// here are atomic.
const LISTS: &[(&str, &str, BuiltinList)] = &[
    (OBJECT_META, "finalizers", BuiltinList::Set),
    (OBJECT_META, "ownerReferences", BuiltinList::Map(&["uid"])),
    (core!("PodSpec"), "volumes", BuiltinList::Map(&["name"])),
    (core!("PodSpec"), "containers", BuiltinList::Map(&["name"])),
    (
        core!("PodSpec"),
        "initContainers",
        BuiltinList::Map(&["name"]),
    ),
    (
        core!("PodSpec"),
        "ephemeralContainers",
        BuiltinList::Map(&["name"]),
    ),
    (
        core!("PodSpec"),
        "imagePullSecrets",
        BuiltinList::Map(&["name"]),
    ),
    (core!("PodSpec"), "hostAliases", BuiltinList::Map(&["ip"])),
    (
        core!("PodSpec"),
        "topologySpreadConstraints",
        BuiltinList::Map(&["topologyKey", "whenUnsatisfiable"]),
    ),
    (
        core!("PodSpec"),
        "schedulingGates",
        BuiltinList::Map(&["name"]),
    ),
    (
        core!("PodSpec"),
        "resourceClaims",
        BuiltinList::Map(&["name"]),
    ),
    (
        core!("Container"),
        "ports",
        BuiltinList::Map(&["containerPort", "protocol"]),
    ),
    (core!("Container"), "env", BuiltinList::Map(&["name"])),
    (
        core!("Container"),
        "volumeMounts",
        BuiltinList::Map(&["mountPath"]),
    ),
    (
        core!("Container"),
        "volumeDevices",
        BuiltinList::Map(&["devicePath"]),
    ),
    (
        core!("EphemeralContainer"),
        "ports",
        BuiltinList::Map(&["containerPort", "protocol"]),
    ),
    (
        core!("EphemeralContainer"),
        "env",
        BuiltinList::Map(&["name"]),
    ),
    (
        core!("EphemeralContainer"),
        "volumeMounts",
        BuiltinList::Map(&["mountPath"]),
    ),
    (
        core!("EphemeralContainer"),
        "volumeDevices",
        BuiltinList::Map(&["devicePath"]),
    ),
    (
        core!("ResourceRequirements"),
        "claims",
        BuiltinList::Map(&["name"]),
    ),
    (
        core!("PodStatus"),
        "conditions",
        BuiltinList::Map(&["type"]),
    ),
    (core!("PodStatus"), "podIPs", BuiltinList::Map(&["ip"])),
    (
        core!("PodStatus"),
        "resourceClaimStatuses",
        BuiltinList::Map(&["name"]),
    ),
    (core!("NodeSpec"), "podCIDRs", BuiltinList::Set),
    (
        core!("NodeStatus"),
        "conditions",
        BuiltinList::Map(&["type"]),
    ),
    (
        core!("NodeStatus"),
        "addresses",
        BuiltinList::Map(&["type"]),
    ),
    (
        core!("NamespaceStatus"),
        "conditions",
        BuiltinList::Map(&["type"]),
    ),
    (
        core!("PersistentVolumeClaimStatus"),
        "conditions",
        BuiltinList::Map(&["type"]),
    ),
    (
        core!("ServiceSpec"),
        "ports",
        BuiltinList::Map(&["port", "protocol"]),
    ),
    (
        core!("ServiceStatus"),
        "conditions",
        BuiltinList::Map(&["type"]),
    ),
    (
        core!("ServiceAccount"),
        "secrets",
        BuiltinList::Map(&["name"]),
    ),
    (
        apps!("DeploymentStatus"),
        "conditions",
        BuiltinList::Map(&["type"]),
    ),
    (
        apps!("StatefulSetStatus"),
        "conditions",
        BuiltinList::Map(&["type"]),
    ),
    (
        apps!("ReplicaSetStatus"),
        "conditions",
        BuiltinList::Map(&["type"]),
    ),
    (
        batch!("JobStatus"),
        "conditions",
        BuiltinList::Map(&["type"]),
    ),
    (
        policy!("PodDisruptionBudgetStatus"),
        "conditions",
        BuiltinList::Map(&["type"]),
    ),
    (
        apiext!("CustomResourceDefinitionStatus"),
        "conditions",
        BuiltinList::Map(&["type"]),
    ),
];

/// Fields whose Go type is a struct value rather than a pointer or map:
/// the typed object always has them, so a write never "adds" them (besides
/// every root's `spec` and `status`).
const VALUE_FIELDS: &[(&str, &str)] = &[
    (core!("PodTemplateSpec"), "metadata"),
    (core!("PodTemplateSpec"), "spec"),
    (apps!("DeploymentSpec"), "template"),
    (apps!("DeploymentSpec"), "strategy"),
    (apps!("StatefulSetSpec"), "template"),
    (apps!("StatefulSetSpec"), "updateStrategy"),
    (batch!("JobSpec"), "template"),
    (batch!("CronJobSpec"), "jobTemplate"),
    (core!("Container"), "resources"),
    (core!("EphemeralContainer"), "resources"),
    (core!("ServiceStatus"), "loadBalancer"),
    (core!("NodeStatus"), "daemonEndpoints"),
    (core!("NodeStatus"), "nodeInfo"),
    (core!("PersistentVolumeClaimSpec"), "resources"),
    (apiext!("CustomResourceDefinitionSpec"), "names"),
    (apiext!("CustomResourceDefinitionStatus"), "acceptedNames"),
];

/// Definitions upstream marks `+structType=atomic`: owned and replaced as
/// one value.
const ATOMIC_STRUCTS: &[&str] = &[meta!("LabelSelector"), core!("ObjectReference")];

/// How a built-in list merges, when it is not atomic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuiltinList {
    Set,
    Map(&'static [&'static str]),
}

/// The key fields of an associative list.
#[derive(Clone, Copy, Debug)]
pub enum Keys<'a> {
    Static(&'static [&'static str]),
    Schema(&'a [String]),
}

impl<'a> Keys<'a> {
    /// The value a key field takes when an element leaves it out: its
    /// default, as structured-merge-diff reads it from the schema. Among
    /// the built-in associative lists only the ports' `protocol` has one
    /// (`TCP`); without it a port applied without a protocol would be a
    /// second element beside the stored, defaulted one.
    pub fn default_of(&self, key: &str) -> Option<serde_json::Value> {
        match self {
            Keys::Static(_) if key == "protocol" => Some(serde_json::Value::from("TCP")),
            _ => None,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &'a str> + '_ {
        let (s, o): (&'static [&'static str], &'a [String]) = match *self {
            Keys::Static(s) => (s, &[]),
            Keys::Schema(o) => (&[], o),
        };
        s.iter().copied().chain(o.iter().map(String::as_str))
    }
}

/// How a list merges under server-side apply.
#[derive(Clone, Copy, Debug)]
pub enum ListKind<'a> {
    /// Replaced whole, owned as one field.
    Atomic,
    /// A set of scalars, each owned on its own (`v:` paths).
    Set,
    /// Elements identified by key fields (`k:` paths).
    Map(Keys<'a>),
}

/// How a strategic merge patch treats one field of a built-in kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmpField {
    /// Lists merge element-wise (by `merge_key`, or as a set of scalars).
    pub merge: bool,
    /// Maps are replaced whole (`patchStrategy:"replace"`).
    pub replace: bool,
    pub merge_key: Option<&'static str>,
}

/// Where a value sits, for deciding how it merges.
#[derive(Clone, Copy, Debug)]
pub enum Shape<'a> {
    /// Inside a built-in kind. `def` is the definition of this value (of its
    /// elements, for a list), `list` how it merges if it is a list, and
    /// `atomic` whether it is an atomic struct.
    Builtin {
        def: Option<&'static str>,
        list: Option<BuiltinList>,
        atomic: bool,
        present: bool,
    },
    /// The root of a custom resource: `metadata` is ObjectMeta, the rest
    /// follows the schema (absent for a CRD without one).
    CrdRoot(Option<SchemaNode<'a>>),
    /// A node of a custom resource's structural schema.
    Schema(SchemaNode<'a>),
    /// Outside any schema (`x-kubernetes-preserve-unknown-fields`): maps are
    /// granular and lists atomic, as Kubernetes deduces them.
    Deduced,
}

impl<'a> Shape<'a> {
    /// The shape of a whole object of `res`.
    pub fn for_resource(res: &'a Resource) -> Shape<'a> {
        if res.builtin {
            let def = ROOTS
                .iter()
                .find(|(g, k, _)| *g == res.group && *k == res.kind)
                .map_or(ANY_OBJECT, |r| r.2);
            Shape::builtin(Some(def), None, true)
        } else {
            Shape::CrdRoot(res.schema.as_deref().map(|s| s.root()))
        }
    }

    fn builtin(def: Option<&'static str>, list: Option<BuiltinList>, present: bool) -> Shape<'a> {
        Shape::Builtin {
            def,
            list,
            atomic: def.is_some_and(|d| ATOMIC_STRUCTS.contains(&d)),
            present,
        }
    }

    /// The shape of the value of map entry `name`.
    pub fn field(&self, name: &str) -> Shape<'a> {
        match *self {
            Shape::Builtin { def: Some(def), .. } => {
                let is_root = def == ANY_OBJECT || ROOTS.iter().any(|r| r.2 == def);
                let child = if is_root && name == "metadata" {
                    Some(OBJECT_META)
                } else {
                    CHILDREN
                        .iter()
                        .find(|(d, f, _)| *d == def && *f == name)
                        .map(|c| c.2)
                };
                let list = LISTS
                    .iter()
                    .find(|(d, f, _)| *d == def && *f == name)
                    .map(|l| l.2);
                let present = (is_root && matches!(name, "metadata" | "spec" | "status"))
                    || VALUE_FIELDS.contains(&(def, name));
                Shape::builtin(child, list, present)
            }
            Shape::Builtin { def: None, .. } => Shape::builtin(None, None, false),
            Shape::CrdRoot(_) if name == "metadata" => {
                Shape::builtin(Some(OBJECT_META), None, true)
            }
            Shape::CrdRoot(None) => Shape::Deduced,
            Shape::CrdRoot(Some(node)) | Shape::Schema(node) => {
                match node.property(name).or_else(|| node.additional_properties()) {
                    Some(child) => Shape::Schema(child),
                    None => Shape::Deduced,
                }
            }
            Shape::Deduced => Shape::Deduced,
        }
    }

    /// The shape of the elements of a list with this shape.
    pub fn items(&self) -> Shape<'a> {
        match *self {
            Shape::Builtin { def, .. } => Shape::builtin(def, None, false),
            Shape::Schema(node) => node.items().map_or(Shape::Deduced, Shape::Schema),
            Shape::CrdRoot(_) | Shape::Deduced => Shape::Deduced,
        }
    }

    /// How a list with this shape merges under server-side apply.
    pub fn list_kind(&self) -> ListKind<'a> {
        match *self {
            Shape::Builtin { list, .. } => match list {
                Some(BuiltinList::Set) => ListKind::Set,
                Some(BuiltinList::Map(keys)) => ListKind::Map(Keys::Static(keys)),
                None => ListKind::Atomic,
            },
            Shape::Schema(node) => match node.list_type() {
                Some(ListType::Set) => ListKind::Set,
                Some(ListType::Map) if !node.list_map_keys().is_empty() => {
                    ListKind::Map(Keys::Schema(node.list_map_keys()))
                }
                _ => ListKind::Atomic,
            },
            Shape::CrdRoot(_) | Shape::Deduced => ListKind::Atomic,
        }
    }

    /// Whether an object always has this map, even when it is not written
    /// out (a Go value struct of a built-in kind).
    pub fn always_present(&self) -> bool {
        matches!(*self, Shape::Builtin { present: true, .. })
    }

    /// Whether a map with this shape is owned and replaced as one value.
    pub fn is_atomic_map(&self) -> bool {
        match *self {
            Shape::Builtin { atomic, .. } => atomic,
            Shape::Schema(node) => node.map_type() == Some(MapType::Atomic),
            Shape::CrdRoot(_) | Shape::Deduced => false,
        }
    }

    /// Whether `name` is a declared field of this object rather than an
    /// entry of a free-form map. Server-side apply owns map entries
    /// themselves but only the leaves below declared fields. Built-in kinds
    /// are treated as all-declared: their free-form maps (labels, data,
    /// selectors) hold scalars, which are owned either way.
    pub fn declared(&self, name: &str) -> bool {
        match *self {
            Shape::Builtin { .. } => true,
            Shape::CrdRoot(_) => true,
            Shape::Schema(node) => node.property(name).is_some(),
            Shape::Deduced => false,
        }
    }

    /// The strategic-merge-patch treatment of field `name` of a built-in
    /// object with this shape; `None` when the field merges as a plain map
    /// or is replaced (scalars, atomic lists).
    pub fn smp_field(&self, name: &str) -> Option<SmpField> {
        let Shape::Builtin { def: Some(def), .. } = *self else {
            return None;
        };
        if let Some(p) = crate::http::patchmeta::lookup(def, name) {
            let strategies = || p.strategy.split(',').map(str::trim);
            return Some(SmpField {
                merge: strategies().any(|s| s == "merge"),
                replace: strategies().any(|s| s == "replace"),
                merge_key: p.merge_key,
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin(group: &str, kind: &str) -> Resource {
        crate::strategy::resources()
            .into_iter()
            .find(|r| r.group == group && r.kind == kind)
            .expect("a served kind")
    }

    fn keys(k: ListKind<'_>) -> Option<Vec<String>> {
        match k {
            ListKind::Map(keys) => Some(keys.iter().map(str::to_string).collect()),
            _ => None,
        }
    }

    #[test]
    fn merge_keys_depend_on_the_path() {
        let svc = builtin("", "Service");
        let ports = Shape::for_resource(&svc).field("spec").field("ports");
        assert_eq!(keys(ports.list_kind()).unwrap(), ["port", "protocol"]);
        let deploy = builtin("apps", "Deployment");
        let pod = Shape::for_resource(&deploy)
            .field("spec")
            .field("template")
            .field("spec");
        let containers = pod.field("containers");
        assert_eq!(keys(containers.list_kind()).unwrap(), ["name"]);
        let cports = containers.items().field("ports");
        assert_eq!(
            keys(cports.list_kind()).unwrap(),
            ["containerPort", "protocol"]
        );
        assert!(matches!(
            pod.field("tolerations").list_kind(),
            ListKind::Atomic
        ));
        assert!(
            Shape::for_resource(&deploy)
                .field("spec")
                .field("selector")
                .is_atomic_map()
        );
        let meta = Shape::for_resource(&deploy).field("metadata");
        assert!(matches!(
            meta.field("finalizers").list_kind(),
            ListKind::Set
        ));
    }

    #[test]
    fn unknown_builtin_kinds_still_have_metadata() {
        let mut cm = builtin("", "ConfigMap");
        cm.kind = "Nope".into();
        let shape = Shape::for_resource(&cm);
        assert_eq!(
            keys(shape.field("metadata").field("ownerReferences").list_kind()).unwrap(),
            ["uid"]
        );
    }
}
