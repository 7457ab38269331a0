//! The rules of each kind (kube-apiserver's registry strategies) and the
//! catalogue of built-in kinds.
//!
//! Generic code reaches a kind's rules through `res.strategy` (the
//! [`Strategy`] interface of the storage layer); this module holds the
//! implementations, one file per kind that has rules, and the generic rules
//! every object follows on create and update ([`prepare_for_create`],
//! [`prepare_for_update`], [`validate`]).
//!
//! Adding a built-in kind means a row in [`defs`] naming its strategy, and a
//! file here when the kind has rules of its own; the verbs, the storage
//! layer and the controllers need no change. Kinds without rules of their
//! own use [`Typed`], which only checks that an object decodes as the
//! typed Kubernetes kind.

pub mod controller_revision;
pub mod crd;
pub mod custom;
pub mod defaults;
pub mod endpoints;
pub mod endpointslice;
pub mod event;
pub mod job;
pub mod lease;
pub mod namespace;
pub mod node;
pub mod pdb;
pub mod pod;
pub mod rbac;
pub mod secret;
pub mod volume;
pub mod webhook_configuration;
pub mod workload;

use std::marker::PhantomData;

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::{core::v1 as core, storage::v1 as storage};
use serde_json::{Map, Value, json};

use crate::object::{self, meta_mut};
use crate::storage::registry::{ALL_VERBS, NameRule, Resource, ScalePaths, Strategy};

/// A built-in kind without rules of its own: objects must decode as the
/// typed Kubernetes kind `T` (a wrongly typed field is a 400), after kube's
/// defaults for the kind, if it has any.
pub struct Typed<T> {
    defaults: Option<fn(&mut Map<String, Value>)>,
    kind: PhantomData<fn() -> T>,
}

impl<T> Typed<T> {
    pub const fn new() -> Self {
        Typed {
            defaults: None,
            kind: PhantomData,
        }
    }

    pub const fn with_defaults(defaults: fn(&mut Map<String, Value>)) -> Self {
        Typed {
            defaults: Some(defaults),
            kind: PhantomData,
        }
    }
}

impl<T> Default for Typed<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for Typed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Typed<{}>", short_type_name::<T>())
    }
}

impl<T: serde::de::DeserializeOwned> Strategy for Typed<T> {
    fn apply_defaults(&self, _res: &Resource, obj: &mut Value) {
        if let Some(f) = self.defaults {
            defaults::on(obj, f);
        }
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        typed::<T>(obj)?;
        Ok(Vec::new())
    }
}

static CONFIG_MAP: Typed<core::ConfigMap> = Typed::new();
static SERVICE: Typed<core::Service> = Typed::with_defaults(defaults::service);
static SERVICE_ACCOUNT: Typed<core::ServiceAccount> = Typed::new();
static VOLUME_ATTACHMENT: Typed<storage::VolumeAttachment> = Typed::new();

fn short_type_name<T>() -> &'static str {
    std::any::type_name::<T>()
        .rsplit("::")
        .next()
        .unwrap_or("object")
}

/// Decodes `obj` as the typed kind `T`: a wrongly typed field is a 400.
pub fn typed<T: serde::de::DeserializeOwned>(obj: &Value) -> Result<T, ApiError> {
    serde_json::from_value::<T>(obj.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "the object could not be decoded as {}: {e}",
            short_type_name::<T>()
        ))
    })
}

struct Def {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    scale: bool,
    fields: &'static [&'static str],
    /// Store location when it differs from `<group>/<plural>`.
    storage: Option<&'static str>,
    verbs: &'static [&'static str],
    strategy: &'static dyn Strategy,
}

const fn def(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    strategy: &'static dyn Strategy,
) -> Def {
    Def {
        group,
        version,
        plural,
        singular,
        kind,
        namespaced,
        short: &[],
        categories: &[],
        status: false,
        scale: false,
        fields: &[],
        storage: None,
        verbs: ALL_VERBS,
        strategy,
    }
}

/// The built-in kinds: one row each, naming its strategy.
fn defs() -> Vec<Def> {
    vec![
        Def {
            short: &["ns"],
            status: true,
            verbs: namespace::VERBS,
            fields: &["status.phase"],
            ..def(
                "",
                "v1",
                "namespaces",
                "namespace",
                "Namespace",
                false,
                &namespace::Namespace,
            )
        },
        Def {
            short: &["no"],
            status: true,
            fields: &["spec.unschedulable"],
            ..def("", "v1", "nodes", "node", "Node", false, &node::Node)
        },
        Def {
            short: &["po"],
            categories: &["all"],
            status: true,
            fields: pod::FIELDS,
            ..def("", "v1", "pods", "pod", "Pod", true, &pod::Pod)
        },
        Def {
            fields: &["type"],
            ..def(
                "",
                "v1",
                "secrets",
                "secret",
                "Secret",
                true,
                &secret::Secret,
            )
        },
        Def {
            short: &["cm"],
            ..def(
                "",
                "v1",
                "configmaps",
                "configmap",
                "ConfigMap",
                true,
                &CONFIG_MAP,
            )
        },
        Def {
            short: &["ev"],
            fields: event::CORE_FIELDS,
            ..def("", "v1", "events", "event", "Event", true, &event::Event)
        },
        Def {
            short: &["ev"],
            fields: event::EVENTS_V1_FIELDS,
            storage: Some("core/events"),
            ..def(
                "events.k8s.io",
                "v1",
                "events",
                "event",
                "Event",
                true,
                &event::Event,
            )
        },
        Def {
            short: &["ep"],
            ..def(
                "",
                "v1",
                "endpoints",
                "endpoints",
                "Endpoints",
                true,
                &endpoints::Endpoints,
            )
        },
        Def {
            short: &["svc"],
            categories: &["all"],
            status: true,
            ..def("", "v1", "services", "service", "Service", true, &SERVICE)
        },
        Def {
            short: &["sa"],
            ..def(
                "",
                "v1",
                "serviceaccounts",
                "serviceaccount",
                "ServiceAccount",
                true,
                &SERVICE_ACCOUNT,
            )
        },
        Def {
            short: &["pv"],
            status: true,
            ..def(
                "",
                "v1",
                "persistentvolumes",
                "persistentvolume",
                "PersistentVolume",
                false,
                &volume::PERSISTENT_VOLUME,
            )
        },
        Def {
            short: &["pvc"],
            status: true,
            ..def(
                "",
                "v1",
                "persistentvolumeclaims",
                "persistentvolumeclaim",
                "PersistentVolumeClaim",
                true,
                &volume::PERSISTENT_VOLUME_CLAIM,
            )
        },
        def(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            "endpointslice",
            "EndpointSlice",
            true,
            &endpointslice::EndpointSlice,
        ),
        def(
            "coordination.k8s.io",
            "v1",
            "leases",
            "lease",
            "Lease",
            true,
            &lease::Lease,
        ),
        Def {
            short: &["deploy"],
            categories: &["all"],
            status: true,
            scale: true,
            ..def(
                "apps",
                "v1",
                "deployments",
                "deployment",
                "Deployment",
                true,
                &workload::DEPLOYMENT,
            )
        },
        Def {
            short: &["rs"],
            categories: &["all"],
            status: true,
            scale: true,
            ..def(
                "apps",
                "v1",
                "replicasets",
                "replicaset",
                "ReplicaSet",
                true,
                &workload::REPLICA_SET,
            )
        },
        Def {
            short: &["sts"],
            categories: &["all"],
            status: true,
            scale: true,
            ..def(
                "apps",
                "v1",
                "statefulsets",
                "statefulset",
                "StatefulSet",
                true,
                &workload::STATEFUL_SET,
            )
        },
        def(
            "apps",
            "v1",
            "controllerrevisions",
            "controllerrevision",
            "ControllerRevision",
            true,
            &controller_revision::ControllerRevision,
        ),
        Def {
            categories: &["all"],
            status: true,
            ..def("batch", "v1", "jobs", "job", "Job", true, &job::Job)
        },
        Def {
            short: &["cj"],
            categories: &["all"],
            status: true,
            ..def(
                "batch",
                "v1",
                "cronjobs",
                "cronjob",
                "CronJob",
                true,
                &job::CronJob,
            )
        },
        Def {
            short: &["pdb"],
            status: true,
            ..def(
                "policy",
                "v1",
                "poddisruptionbudgets",
                "poddisruptionbudget",
                "PodDisruptionBudget",
                true,
                &pdb::PodDisruptionBudget,
            )
        },
        Def {
            status: true,
            ..def(
                "storage.k8s.io",
                "v1",
                "volumeattachments",
                "volumeattachment",
                "VolumeAttachment",
                false,
                &VOLUME_ATTACHMENT,
            )
        },
        def(
            rbac::GROUP,
            "v1",
            "roles",
            "role",
            "Role",
            true,
            &rbac::ROLE,
        ),
        def(
            rbac::GROUP,
            "v1",
            "clusterroles",
            "clusterrole",
            "ClusterRole",
            false,
            &rbac::CLUSTER_ROLE,
        ),
        def(
            rbac::GROUP,
            "v1",
            "rolebindings",
            "rolebinding",
            "RoleBinding",
            true,
            &rbac::ROLE_BINDING,
        ),
        def(
            rbac::GROUP,
            "v1",
            "clusterrolebindings",
            "clusterrolebinding",
            "ClusterRoleBinding",
            false,
            &rbac::CLUSTER_ROLE_BINDING,
        ),
        Def {
            short: &["crd", "crds"],
            categories: &["api-extensions"],
            status: true,
            ..def(
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "customresourcedefinition",
                "CustomResourceDefinition",
                false,
                &crd::CustomResourceDefinition,
            )
        },
        Def {
            categories: &["api-extensions"],
            ..def(
                webhook_configuration::GROUP,
                "v1",
                "mutatingwebhookconfigurations",
                "mutatingwebhookconfiguration",
                "MutatingWebhookConfiguration",
                false,
                &webhook_configuration::MUTATING,
            )
        },
        Def {
            categories: &["api-extensions"],
            ..def(
                webhook_configuration::GROUP,
                "v1",
                "validatingwebhookconfigurations",
                "validatingwebhookconfiguration",
                "ValidatingWebhookConfiguration",
                false,
                &webhook_configuration::VALIDATING,
            )
        },
    ]
}

/// Every built-in resource, ready for the registry.
pub fn resources() -> Vec<Resource> {
    defs()
        .into_iter()
        .map(|d| {
            let storage = d
                .storage
                .map(str::to_string)
                .unwrap_or_else(|| crate::storage::keys::storage_of(d.group, d.plural));
            // The events.k8s.io view is served from core/v1 storage.
            let storage_version = if d.storage.is_some() {
                "core-v1".to_string()
            } else {
                d.version.to_string()
            };
            Resource {
                group: d.group.into(),
                version: d.version.into(),
                plural: d.plural.into(),
                singular: d.singular.into(),
                kind: d.kind.into(),
                list_kind: format!("{}List", d.kind),
                namespaced: d.namespaced,
                short_names: d.short.iter().map(|s| s.to_string()).collect(),
                categories: d.categories.iter().map(|s| s.to_string()).collect(),
                status_subresource: d.status,
                scale: d.scale.then(|| ScalePaths {
                    spec_replicas: ".spec.replicas".into(),
                    status_replicas: ".status.replicas".into(),
                    label_selector: Some(".spec.selector".into()),
                    selector_is_structured: true,
                }),
                eviction: d.kind == "Pod",
                storage,
                storage_version,
                schema: None,
                printer_columns: Vec::new(),
                extra_fields: d.fields.to_vec(),
                builtin: true,
                crd_uid: None,
                verbs: d.verbs.to_vec(),
                strategy: d.strategy,
            }
        })
        .collect()
}

/// kube's `NewForbidden`: `<resource> "<name>" is forbidden: <why>` (the
/// name left out when empty), with the resource and name as details.
pub fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> ApiError {
    let resource = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    let message = if name.is_empty() {
        format!("{resource} is forbidden: {why}")
    } else {
        format!("{resource} \"{name}\" is forbidden: {why}")
    };
    ApiError::forbidden(message).with_details(group, plural, name)
}

/// Checks `apiVersion`/`kind` against the served resource (either may be
/// absent) and sets them.
pub fn check_type_meta(res: &Resource, obj: &mut Value) -> Result<(), ApiError> {
    let av = res.api_version();
    let m = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the body must be a JSON object"))?;
    if let Some(v) = m.get("apiVersion").and_then(Value::as_str)
        && !v.is_empty()
        && v != av
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({av})"
        )));
    }
    if let Some(k) = m.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != res.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            res.kind
        )));
    }
    m.insert("apiVersion".into(), json!(av));
    m.insert("kind".into(), json!(res.kind));
    if m.get("metadata")
        .is_some_and(|v| !v.is_object() && !v.is_null())
    {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

/// The metadata checks every object gets, with the kind's name rule.
pub fn validate_meta(res: &Resource, obj: &Value) -> Vec<Cause> {
    let rule = res.strategy.name_rule();
    object::validate_meta(obj, rule == NameRule::Label)
        .into_iter()
        // Path-segment names follow the kind's own rule (in its validate).
        .filter(|c| !(rule == NameRule::PathSegment && c.field == "metadata.name"))
        .collect()
}

/// What makes an object of `res` invalid: its schema (custom resources),
/// the metadata rules and the kind's own rules. Used again after mutating
/// webhooks changed an object.
pub fn validate(res: &Resource, obj: &mut Value) -> Result<Vec<Cause>, ApiError> {
    let mut causes = Vec::new();
    if let Some(schema) = &res.schema {
        causes.extend(schema.process(obj, "").causes);
    }
    causes.extend(validate_meta(res, obj));
    causes.extend(res.strategy.validate(res, obj)?);
    Ok(causes)
}

/// The generic metadata of a new object of `res` in namespace `ns`
/// (kube's `BeforeCreate`): server-set fields replaced, the namespace
/// checked against the request's, `generation` where the kind has one, the
/// initial status and the kind's own preparation.
pub fn prepare_for_create(
    res: &Resource,
    ns: Option<&str>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    {
        let m = meta_mut(obj).ok_or_else(|| ApiError::bad_request("bad metadata"))?;
        if let Some(ns_body) = m.get("namespace").and_then(Value::as_str)
            && !ns_body.is_empty()
            && Some(ns_body) != ns
            && res.namespaced
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        match ns {
            Some(ns) => {
                m.insert("namespace".into(), json!(ns));
            }
            None => {
                m.remove("namespace");
            }
        }
        for f in [
            "resourceVersion",
            "uid",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "managedFields",
        ] {
            m.remove(f);
        }
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(object::now_rfc3339()));
        if res.strategy.has_generation() {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
    }
    Ok(())
}

/// The status and kind-specific parts of a new object, after the
/// namespace it goes into was found open.
pub fn prepare_new_content(res: &Resource, obj: &mut Value) {
    if res.status_subresource {
        let given = obj.as_object_mut().and_then(|m| m.remove("status"));
        if let Some(s) = res.strategy.initial_status(given) {
            obj["status"] = s;
        }
    }
    res.strategy.prepare_for_create(obj);
    object::tidy(obj);
}

/// Builds the object an update stores from the current one and what the
/// client sent, following kube-apiserver: immutable metadata is kept
/// (`generation` included: [`settle_generation`] moves it once the object
/// is defaulted and mutated), and the main resource cannot change status
/// (and `/status` can change nothing else) where a status subresource
/// exists.
pub fn prepare_for_update(
    res: &Resource,
    sub: Option<&str>,
    old: &Value,
    incoming: Value,
) -> Result<Value, ApiError> {
    let mut new = match sub {
        Some("status") => {
            let mut n = old.clone();
            match incoming.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            // Only a resource version precondition comes from the request.
            if let Some(rv) = object::meta_str(&incoming, "resourceVersion") {
                meta_mut(&mut n)
                    .expect("metadata")
                    .insert("resourceVersion".into(), json!(rv));
            }
            n
        }
        Some("finalize") => {
            let mut n = old.clone();
            n["spec"] = incoming.get("spec").cloned().unwrap_or_else(|| json!({}));
            n
        }
        _ => {
            let mut n = incoming;
            if res.status_subresource {
                match old.get("status") {
                    Some(s) => n["status"] = s.clone(),
                    None => {
                        if let Some(m) = n.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            n
        }
    };
    let old_meta = object::meta(old).cloned().unwrap_or_default();
    let m = meta_mut(&mut new).ok_or_else(|| ApiError::bad_request("bad metadata"))?;
    for f in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "name",
        "namespace",
        "generateName",
    ] {
        match old_meta.get(f) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    m.remove("selfLink");
    if !res.strategy.has_generation() {
        // Also drops one stored by an older version of this server.
        m.remove("generation");
    }
    if object::is_deleting(old) {
        let before = object::finalizers(old);
        let added: Vec<String> = object::finalizers(&new)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(
                &res.group,
                &res.kind,
                object::name(old),
                vec![Cause::new(
                    "FieldValueForbidden",
                    "metadata.finalizers",
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                    ),
                )],
            ));
        }
    }
    object::tidy(&mut new);
    Ok(new)
}

/// Moves `generation` of an update of `old` to `new` when the change is one
/// the kind counts (by default the spec-like part), as kube's
/// `PrepareForUpdate` does. It runs after defaulting and the mutating
/// plugins: compared before them, an update that leaves out a defaulted
/// field (any server-side apply of a manifest) would look like a change of
/// spec, and a no-op would bump the generation and be written.
/// `/status` never moves it; the main resource, `/scale` and `/finalize`
/// do.
pub fn settle_generation(res: &Resource, sub: Option<&str>, old: &Value, new: &mut Value) {
    if !res.strategy.has_generation() {
        return;
    }
    let before = object::meta(old).and_then(|m| m.get("generation")).cloned();
    let moves = matches!(sub, None | Some("scale") | Some("finalize"))
        && res
            .strategy
            .generation_changed(old, new, res.status_subresource);
    let Some(m) = meta_mut(new) else { return };
    if moves {
        let g = before.as_ref().and_then(Value::as_i64).unwrap_or(0);
        m.insert("generation".into(), json!(g + 1));
    } else {
        // What a mutating plugin may have set does not count either.
        match before {
            Some(g) => m.insert("generation".into(), g),
            None => m.remove("generation"),
        };
    }
}

#[cfg(test)]
mod tests;
