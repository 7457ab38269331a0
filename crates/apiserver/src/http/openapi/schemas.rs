//! The schema definitions of the OpenAPI documents: built-in kinds from
//! k8s-openapi's schemars impls (with kube's definition names, `allOf`
//! references, GVK tags and the patch metadata of [`crate::http::patchmeta`]),
//! custom resources from their CRD's structural schema, list kinds, the
//! keyword filtering that keeps CRD JSON Schema valid OpenAPI, and walks
//! over the built-in schemas for unknown-field detection and patch metadata.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use crate::storage::registry::Resource;

pub(super) const V3_REF: &str = "#/components/schemas/";
pub(super) const V2_REF: &str = "#/definitions/";
pub(super) const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";
const OBJECT_META_DESC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const API_VERSION_DESC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// Every built-in schema definition in OpenAPI 3 form (references point at
/// `#/components/schemas/`), and which definition describes which kind.
pub(super) struct Builtins {
    pub(super) defs: BTreeMap<String, Value>,
    /// (group, version, kind) → definition name.
    kinds: BTreeMap<(String, String, String), String>,
}

pub(super) fn builtins() -> &'static Builtins {
    static B: OnceLock<Builtins> = OnceLock::new();
    B.get_or_init(generate_builtins)
}

/// Registers `T` with the generator and returns its definition name.
fn add<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
    generator.subschema_for::<T>();
    T::schema_name().into_owned()
}

fn generate_builtins() -> Builtins {
    use k8s_openapi::api::{
        admissionregistration::v1 as admreg, apps::v1 as apps, authentication::v1 as authn,
        authorization::v1 as authz, autoscaling::v1 as autoscaling, batch::v1 as batch,
        coordination::v1 as coord, core::v1 as core, discovery::v1 as disc, events::v1 as events,
        policy::v1 as policy, rbac::v1 as rbac, storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

    let settings = SchemaSettings::draft07().with(|s| {
        s.definitions_path = "/components/schemas".into();
        s.meta_schema = None;
        s.transforms = Vec::new();
    });
    let mut g = SchemaGenerator::new(settings);
    let mut kinds: BTreeMap<(String, String, String), String> = BTreeMap::new();
    // Kinds the server serves or may serve (a kind missing here is published
    // with a permissive schema and skips unknown-field detection).
    macro_rules! kinds {
        ($( $group:literal $version:literal $kind:literal => $t:ty ),* $(,)?) => {
            $( kinds.insert(($group.into(), $version.into(), $kind.into()), add::<$t>(&mut g)); )*
        };
    }
    kinds! {
        "" "v1" "Namespace" => core::Namespace,
        "" "v1" "Node" => core::Node,
        "" "v1" "Pod" => core::Pod,
        "" "v1" "Secret" => core::Secret,
        "" "v1" "ConfigMap" => core::ConfigMap,
        "" "v1" "Event" => core::Event,
        "" "v1" "Endpoints" => core::Endpoints,
        "" "v1" "Service" => core::Service,
        "" "v1" "ServiceAccount" => core::ServiceAccount,
        "" "v1" "PersistentVolume" => core::PersistentVolume,
        "" "v1" "PersistentVolumeClaim" => core::PersistentVolumeClaim,
        "" "v1" "ReplicationController" => core::ReplicationController,
        "" "v1" "LimitRange" => core::LimitRange,
        "" "v1" "ResourceQuota" => core::ResourceQuota,
        "" "v1" "PodTemplate" => core::PodTemplate,
        "" "v1" "Binding" => core::Binding,
        "events.k8s.io" "v1" "Event" => events::Event,
        "discovery.k8s.io" "v1" "EndpointSlice" => disc::EndpointSlice,
        "coordination.k8s.io" "v1" "Lease" => coord::Lease,
        "apps" "v1" "Deployment" => apps::Deployment,
        "apps" "v1" "StatefulSet" => apps::StatefulSet,
        "apps" "v1" "ReplicaSet" => apps::ReplicaSet,
        "apps" "v1" "ControllerRevision" => apps::ControllerRevision,
        "apps" "v1" "DaemonSet" => apps::DaemonSet,
        "batch" "v1" "Job" => batch::Job,
        "batch" "v1" "CronJob" => batch::CronJob,
        "policy" "v1" "PodDisruptionBudget" => policy::PodDisruptionBudget,
        "policy" "v1" "Eviction" => policy::Eviction,
        "autoscaling" "v1" "Scale" => autoscaling::Scale,
        "storage.k8s.io" "v1" "VolumeAttachment" => storage::VolumeAttachment,
        "storage.k8s.io" "v1" "StorageClass" => storage::StorageClass,
        "storage.k8s.io" "v1" "CSIDriver" => storage::CSIDriver,
        "storage.k8s.io" "v1" "CSINode" => storage::CSINode,
        "apiextensions.k8s.io" "v1" "CustomResourceDefinition" => ext::CustomResourceDefinition,
        "rbac.authorization.k8s.io" "v1" "Role" => rbac::Role,
        "rbac.authorization.k8s.io" "v1" "ClusterRole" => rbac::ClusterRole,
        "rbac.authorization.k8s.io" "v1" "RoleBinding" => rbac::RoleBinding,
        "rbac.authorization.k8s.io" "v1" "ClusterRoleBinding" => rbac::ClusterRoleBinding,
        "authorization.k8s.io" "v1" "SubjectAccessReview" => authz::SubjectAccessReview,
        "authorization.k8s.io" "v1" "SelfSubjectAccessReview" => authz::SelfSubjectAccessReview,
        "authorization.k8s.io" "v1" "LocalSubjectAccessReview" => authz::LocalSubjectAccessReview,
        "authorization.k8s.io" "v1" "SelfSubjectRulesReview" => authz::SelfSubjectRulesReview,
        "authentication.k8s.io" "v1" "TokenReview" => authn::TokenReview,
        "authentication.k8s.io" "v1" "TokenRequest" => authn::TokenRequest,
        "authentication.k8s.io" "v1" "SelfSubjectReview" => authn::SelfSubjectReview,
        "admissionregistration.k8s.io" "v1" "MutatingWebhookConfiguration" => admreg::MutatingWebhookConfiguration,
        "admissionregistration.k8s.io" "v1" "ValidatingWebhookConfiguration" => admreg::ValidatingWebhookConfiguration,
    }
    // Operation bodies and responses shared by every document.
    add::<meta::Status>(&mut g);
    add::<meta::DeleteOptions>(&mut g);
    add::<meta::Patch>(&mut g);
    add::<meta::ListMeta>(&mut g);
    add::<meta::WatchEvent<core::Pod>>(&mut g);

    let mut defs: BTreeMap<String, Value> = g.take_definitions(false).into_iter().collect();
    for schema in defs.values_mut() {
        for_each_schema(schema, &mut |node| {
            // kube publishes a `$ref` that carries its own description as
            // `allOf: [{$ref}]` plus the siblings: OpenAPI 3.0 ignores
            // siblings of a bare `$ref`, and kubectl explain reads allOf.
            if node.len() > 1
                && let Some(r) = node.remove("$ref")
            {
                node.insert("allOf".into(), json!([{ "$ref": r }]));
            }
        });
    }
    for (definition, field, meta) in crate::http::patchmeta::all() {
        if let Some(prop) = defs
            .get_mut(&definition)
            .and_then(|d| d.pointer_mut(&format!("/properties/{field}")))
            .and_then(Value::as_object_mut)
        {
            prop.insert("x-kubernetes-patch-strategy".into(), json!(meta.strategy));
            if let Some(k) = meta.merge_key {
                prop.insert("x-kubernetes-patch-merge-key".into(), json!(k));
            }
        }
    }
    for ((group, version, kind), name) in &kinds {
        if let Some(d) = defs.get_mut(name).and_then(Value::as_object_mut) {
            let gvks = d
                .entry("x-kubernetes-group-version-kind")
                .or_insert_with(|| json!([]));
            if let Some(a) = gvks.as_array_mut() {
                a.push(json!({"group": group, "kind": kind, "version": version}));
            }
        }
    }
    Builtins { defs, kinds }
}

/// Calls `f` on `node` and every schema nested in it (properties, items,
/// additionalProperties, allOf/oneOf/anyOf, not), parents first.
fn for_each_schema(node: &mut Value, f: &mut impl FnMut(&mut Map<String, Value>)) {
    let Some(m) = node.as_object_mut() else {
        return;
    };
    f(m);
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        for p in props.values_mut() {
            for_each_schema(p, f);
        }
    }
    for k in ["items", "additionalProperties", "not"] {
        if let Some(v) = m.get_mut(k) {
            for_each_schema(v, f);
        }
    }
    for k in ["allOf", "oneOf", "anyOf"] {
        if let Some(Value::Array(a)) = m.get_mut(k) {
            for v in a {
                for_each_schema(v, f);
            }
        }
    }
}

const V3_KEYWORDS: &[&str] = &[
    "$ref",
    "title",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "type",
    "not",
    "allOf",
    "oneOf",
    "anyOf",
    "items",
    "properties",
    "additionalProperties",
    "description",
    "format",
    "default",
    "nullable",
    "discriminator",
    "readOnly",
    "writeOnly",
    "example",
    "externalDocs",
    "deprecated",
    "xml",
];

const V2_KEYWORDS: &[&str] = &[
    "$ref",
    "format",
    "title",
    "description",
    "default",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "additionalProperties",
    "type",
    "items",
    "allOf",
    "properties",
    "discriminator",
    "readOnly",
    "xml",
    "externalDocs",
    "example",
];

/// Drops what a schema object of the given OpenAPI version may not hold
/// (CRD schemas are JSON Schema and may say more; Swagger 2.0 knows no
/// `nullable`/`oneOf`/`anyOf`/`not`), so the documents validate.
fn sanitize(node: &mut Value, v2: bool) {
    let allowed = if v2 { V2_KEYWORDS } else { V3_KEYWORDS };
    for_each_schema(node, &mut |m| {
        m.retain(|k, _| k.starts_with("x-") || allowed.contains(&k.as_str()));
        for k in ["required", "enum"] {
            if m.get(k)
                .is_some_and(|v| v.as_array().is_none_or(Vec::is_empty))
            {
                m.remove(k);
            }
        }
        // Tuple-form items and multi-type lists are JSON Schema only.
        if m.get("items").is_some_and(|v| !v.is_object()) {
            m.remove("items");
        }
        if m.get("type").is_some_and(|v| !v.is_string()) {
            m.remove("type");
        }
        if let Some(Value::Object(props)) = m.get_mut("properties") {
            props.retain(|_, p| p.is_object());
        }
    });
}

/// Rewrites an OpenAPI 3 schema into its Swagger 2.0 form.
pub(super) fn to_v2(node: &mut Value) {
    for_each_schema(node, &mut |m| {
        // Swagger 2.0 tools read a `$ref` with siblings, as kube's v2 does.
        let single_ref = match m.get("allOf") {
            Some(Value::Array(a)) if a.len() == 1 => a[0].get("$ref").cloned(),
            _ => None,
        };
        if let Some(r) = single_ref {
            m.remove("allOf");
            m.insert("$ref".into(), r);
        }
        if let Some(Value::String(r)) = m.get_mut("$ref")
            && let Some(name) = r.strip_prefix(V3_REF)
        {
            *r = format!("{V2_REF}{name}");
        }
    });
    sanitize(node, true);
}

pub(super) fn refs_in(node: &Value, out: &mut BTreeSet<String>) {
    match node {
        Value::Object(m) => {
            for (k, v) in m {
                if k == "$ref"
                    && let Some(name) = v.as_str().and_then(|r| r.strip_prefix(V3_REF))
                {
                    out.insert(name.to_string());
                } else {
                    refs_in(v, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| refs_in(v, out)),
        _ => {}
    }
}

/// `example.com` → `com.example`, as kube names CRD definitions.
fn reversed_group(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

/// The definition name of a served kind: kube's for built-ins,
/// `<reversed group>.<version>.<Kind>` for custom resources.
pub fn definition_name(res: &Resource) -> String {
    if res.builtin
        && let Some(n) =
            builtins()
                .kinds
                .get(&(res.group.clone(), res.version.clone(), res.kind.clone()))
    {
        return n.clone();
    }
    if res.builtin {
        let group = if res.group.is_empty() {
            "core".to_string()
        } else {
            res.group.trim_end_matches(".k8s.io").to_string()
        };
        return format!("io.k8s.api.{group}.{}.{}", res.version, res.kind);
    }
    format!(
        "{}.{}.{}",
        reversed_group(&res.group),
        res.version,
        res.kind
    )
}

pub(super) fn list_definition_name(res: &Resource) -> String {
    let kind_def = definition_name(res);
    match kind_def.rsplit_once('.') {
        Some((pkg, _)) => format!("{pkg}.{}", res.list_kind),
        None => res.list_kind.clone(),
    }
}

pub(super) fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

fn meta_ref(desc: &str) -> Value {
    json!({"allOf": [{"$ref": format!("{V3_REF}{META}ObjectMeta")}], "description": desc})
}

/// The schema of a custom resource version (or of a built-in kind that has
/// no k8s-openapi type here): the CRD's structural schema with kube's
/// standard apiVersion/kind/metadata properties.
fn custom_kind_schema(res: &Resource) -> Value {
    let mut s = res
        .schema
        .as_ref()
        .map(|s| s.source().clone())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    sanitize(&mut s, false);
    let mut m = match s {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let mut props = match m.remove("properties") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    props.insert(
        "apiVersion".into(),
        json!({"type": "string", "description": API_VERSION_DESC}),
    );
    props.insert(
        "kind".into(),
        json!({"type": "string", "description": KIND_DESC}),
    );
    props.insert("metadata".into(), meta_ref(OBJECT_META_DESC));
    m.insert("type".into(), json!("object"));
    m.insert("properties".into(), Value::Object(props));
    m.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([gvk(&res.group, &res.version, &res.kind)]),
    );
    Value::Object(m)
}

fn list_schema(res: &Resource, kind_def: &str) -> Value {
    json!({
        "description": format!("{} is a list of {}", res.list_kind, res.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": API_VERSION_DESC},
            "items": {
                "type": "array",
                "description": format!("List of {}.", res.plural),
                "items": {"$ref": format!("{V3_REF}{kind_def}")},
            },
            "kind": {"type": "string", "description": KIND_DESC},
            "metadata": {
                "allOf": [{"$ref": format!("{V3_REF}{META}ListMeta")}],
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            },
        },
        "x-kubernetes-group-version-kind": [gvk(&res.group, &res.version, &res.list_kind)],
    })
}

/// The kind and list definitions a resource contributes beyond the
/// built-in ones.
pub(super) fn own_definitions(res: &Resource) -> Vec<(String, Value)> {
    let kind_def = definition_name(res);
    let mut out = Vec::new();
    if !builtins().defs.contains_key(&kind_def) {
        out.push((kind_def.clone(), custom_kind_schema(res)));
    }
    out.push((list_definition_name(res), list_schema(res, &kind_def)));
    out
}

/// Follows `$ref` and single-element `allOf` to the schema they name,
/// tracking the definition name.
fn resolve<'a>(
    defs: &'a BTreeMap<String, Value>,
    mut node: &'a Value,
    mut name: Option<&'a str>,
) -> (&'a Value, Option<&'a str>) {
    for _ in 0..16 {
        if let Some(r) = node.get("$ref").and_then(Value::as_str) {
            let Some(target) = r.strip_prefix(V3_REF) else {
                break;
            };
            match defs.get_key_value(target) {
                Some((k, v)) => {
                    node = v;
                    name = Some(k.as_str());
                }
                None => break,
            }
        } else if let Some(Value::Array(a)) = node.get("allOf")
            && a.len() == 1
        {
            node = &a[0];
        } else {
            break;
        }
    }
    (node, name)
}

fn prune_in(
    defs: &BTreeMap<String, Value>,
    schema: &Value,
    obj: &mut Value,
    path: &str,
    out: &mut Vec<String>,
) {
    let (schema, _) = resolve(defs, schema, None);
    if schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return;
    }
    match obj {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let mut unknown = Vec::new();
            for (k, v) in m.iter_mut() {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(s), _) => prune_in(defs, s, v, &child, out),
                    (None, Some(s)) if s.is_object() => prune_in(defs, s, v, &child, out),
                    (None, Some(_)) => {}
                    // An object schema without properties is free-form
                    // (RawExtension, FieldsV1, JSON).
                    (None, None) if props.is_some() => {
                        out.push(child);
                        unknown.push(k.clone());
                    }
                    (None, None) => {}
                }
            }
            if !unknown.is_empty() {
                m.retain(|k, _| !unknown.contains(k));
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for (i, v) in a.iter_mut().enumerate() {
                    prune_in(defs, items, v, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Removes the fields of a built-in object that its kind's schema does not
/// know (kube-apiserver loses them when it decodes into its Go types) and
/// returns their paths as kube names them in strict decoding errors
/// (`spec.containers[0].foo`). Nothing for kinds without a built-in schema.
pub fn prune_unknown(res: &Resource, obj: &mut Value) -> Vec<String> {
    let b = builtins();
    let Some(name) = b
        .kinds
        .get(&(res.group.clone(), res.version.clone(), res.kind.clone()))
    else {
        return Vec::new();
    };
    let Some(schema) = b.defs.get(name) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    prune_in(&b.defs, schema, obj, "", &mut out);
    out
}

/// For a dotted field path inside a built-in kind (list indices optional),
/// the definition that declares the last field, and that field's name.
pub(crate) fn builtin_field_owner(group: &str, kind: &str, path: &str) -> Option<(String, String)> {
    let b = builtins();
    let name = b
        .kinds
        .iter()
        .find(|((g, _, k), _)| g == group && k == kind)
        .map(|(_, n)| n.as_str())?;
    let mut node = b.defs.get(name)?;
    let mut owner = name;
    let segments: Vec<&str> = path
        .split('.')
        .map(|s| s.split('[').next().unwrap_or(s))
        .filter(|s| !s.is_empty())
        .collect();
    let (last, walk) = segments.split_last()?;
    for seg in walk {
        let (n, o) = resolve(&b.defs, node, Some(owner));
        owner = o.unwrap_or(owner);
        let mut next = n.pointer(&format!("/properties/{seg}"))?;
        // Stepping through a list lands on its element schema.
        let (r, _) = resolve(&b.defs, next, None);
        if let Some(items) = r.get("items") {
            next = items;
        }
        node = next;
    }
    let (n, o) = resolve(&b.defs, node, Some(owner));
    n.pointer(&format!("/properties/{last}"))?;
    Some((o.unwrap_or(owner).to_string(), last.to_string()))
}

/// Exposed for tests of other modules: whether the built-in definitions
/// include `name`.
#[cfg(test)]
pub(crate) fn has_builtin_definition(name: &str) -> bool {
    builtins().defs.contains_key(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_definitions_have_kube_names_and_gvk() {
        let b = builtins();
        let pod = &b.defs["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "Pod", "version": "v1"}])
        );
        assert_eq!(
            pod.pointer("/properties/metadata/allOf/0/$ref"),
            Some(&json!(
                "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
            ))
        );
        let containers = &b.defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert!(has_builtin_definition("io.k8s.api.autoscaling.v1.Scale"));
    }

    #[test]
    fn unknown_fields_of_a_pod_are_pruned() {
        let res = crate::strategy::resources()
            .into_iter()
            .find(|r| r.kind == "Pod")
            .unwrap();
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}, "bogus": 1},
            "spec": {"containers": [{"name": "c", "image": "i", "foo": true,
                                     "resources": {"limits": {"cpu": "1"}}}],
                     "nodeSelector": {"x": "y"}}});
        assert_eq!(
            prune_unknown(&res, &mut pod),
            ["metadata.bogus", "spec.containers[0].foo"]
        );
        assert_eq!(pod["metadata"], json!({"name": "p", "labels": {"a": "b"}}));
        assert!(pod.pointer("/spec/containers/0/foo").is_none());
    }

    #[test]
    fn crd_names() {
        assert_eq!(reversed_group("machine.sapcloud.io"), "io.sapcloud.machine");
    }

    #[test]
    fn sanitize_drops_json_schema_only_keywords() {
        let mut s = json!({"type": "object", "required": [], "$schema": "x",
            "properties": {"a": {"type": ["string", "null"], "nullable": true, "anyOf": [{"type": "string"}]}}});
        sanitize(&mut s, true);
        assert_eq!(s, json!({"type": "object", "properties": {"a": {}}}));
    }
}
