//! The built-in kinds the server hosts: their names, scopes and subresources,
//! the field selectors each accepts, the checks that reject malformed objects,
//! and the events.k8s.io ⇄ core/v1 Event mapping (both are one stored kind).

use apimachinery::{ApiError, Cause};
use serde_json::{Map, Value, json};

use crate::registry::{Resource, ScalePaths};

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
}

const fn def(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
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
        verbs: crate::registry::ALL_VERBS,
    }
}

/// Namespaces have no deletecollection in kube: one request must not be
/// able to delete every namespace.
const NAMESPACE_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];
const EVENTS_V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "reason",
    "reportingController",
    "type",
];

fn defs() -> Vec<Def> {
    vec![
        Def {
            short: &["ns"],
            status: true,
            verbs: NAMESPACE_VERBS,
            fields: &["status.phase"],
            ..def("", "v1", "namespaces", "namespace", "Namespace", false)
        },
        Def {
            short: &["no"],
            status: true,
            fields: &["spec.unschedulable"],
            ..def("", "v1", "nodes", "node", "Node", false)
        },
        Def {
            short: &["po"],
            categories: &["all"],
            status: true,
            fields: POD_FIELDS,
            ..def("", "v1", "pods", "pod", "Pod", true)
        },
        Def {
            fields: &["type"],
            ..def("", "v1", "secrets", "secret", "Secret", true)
        },
        Def {
            short: &["cm"],
            ..def("", "v1", "configmaps", "configmap", "ConfigMap", true)
        },
        Def {
            short: &["ev"],
            fields: EVENT_FIELDS,
            ..def("", "v1", "events", "event", "Event", true)
        },
        Def {
            short: &["ev"],
            fields: EVENTS_V1_FIELDS,
            storage: Some("core/events"),
            ..def("events.k8s.io", "v1", "events", "event", "Event", true)
        },
        Def {
            short: &["ep"],
            ..def("", "v1", "endpoints", "endpoints", "Endpoints", true)
        },
        Def {
            short: &["svc"],
            categories: &["all"],
            status: true,
            ..def("", "v1", "services", "service", "Service", true)
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
            )
        },
        def(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            "endpointslice",
            "EndpointSlice",
            true,
        ),
        def(
            "coordination.k8s.io",
            "v1",
            "leases",
            "lease",
            "Lease",
            true,
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
            )
        },
        def(
            "rbac.authorization.k8s.io",
            "v1",
            "roles",
            "role",
            "Role",
            true,
        ),
        def(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "clusterrole",
            "ClusterRole",
            false,
        ),
        def(
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "rolebinding",
            "RoleBinding",
            true,
        ),
        def(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "clusterrolebinding",
            "ClusterRoleBinding",
            false,
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
            )
        },
        Def {
            categories: &["api-extensions"],
            ..def(
                crate::webhook::GROUP,
                "v1",
                "mutatingwebhookconfigurations",
                "mutatingwebhookconfiguration",
                "MutatingWebhookConfiguration",
                false,
            )
        },
        Def {
            categories: &["api-extensions"],
            ..def(
                crate::webhook::GROUP,
                "v1",
                "validatingwebhookconfigurations",
                "validatingwebhookconfiguration",
                "ValidatingWebhookConfiguration",
                false,
            )
        },
    ]
}

/// Every built-in resource, ready for the registry.
pub fn resources() -> Vec<Resource> {
    defs()
        .into_iter()
        .map(|d| {
            let storage = d.storage.map(str::to_string).unwrap_or_else(|| {
                format!(
                    "{}/{}",
                    if d.group.is_empty() { "core" } else { d.group },
                    d.plural
                )
            });
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
            }
        })
        .collect()
}

/// True for the resource view that is converted to and from another stored
/// form (events.k8s.io/v1 events, stored as core/v1 events).
pub fn is_converted(res: &Resource) -> bool {
    res.builtin && res.storage_version != res.version
}

fn take(m: &mut Map<String, Value>, from: &str) -> Option<Value> {
    m.remove(from)
}

fn rename(m: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = take(m, from) {
        m.insert(to.to_string(), v);
    }
}

/// Converts an object of a converted view into its stored form.
pub fn to_storage(res: &Resource, mut obj: Value) -> Value {
    if res.group == "events.k8s.io"
        && let Some(m) = obj.as_object_mut()
    {
        rename(m, "regarding", "involvedObject");
        rename(m, "note", "message");
        rename(m, "reportingController", "reportingComponent");
        rename(m, "deprecatedSource", "source");
        rename(m, "deprecatedFirstTimestamp", "firstTimestamp");
        rename(m, "deprecatedLastTimestamp", "lastTimestamp");
        rename(m, "deprecatedCount", "count");
        derive_core_event_times(m);
        m.insert("apiVersion".into(), json!("v1"));
    }
    obj
}

/// Converts a stored object into the served form of `res`.
pub fn from_storage(res: &Resource, mut obj: Value) -> Value {
    if res.group == "events.k8s.io"
        && let Some(m) = obj.as_object_mut()
    {
        hide_derived_core_event_times(m);
        rename(m, "involvedObject", "regarding");
        rename(m, "message", "note");
        rename(m, "reportingComponent", "reportingController");
        rename(m, "source", "deprecatedSource");
        rename(m, "firstTimestamp", "deprecatedFirstTimestamp");
        rename(m, "lastTimestamp", "deprecatedLastTimestamp");
        rename(m, "count", "deprecatedCount");
        m.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    }
    obj
}

/// `eventTime` and `series.lastObservedTime` (MicroTimes) as the Time the
/// core/v1 fields hold: whole seconds, as Go's `metav1.Time` marshals.
fn whole_seconds(v: Option<&Value>) -> Option<Value> {
    let t = chrono::DateTime::parse_from_rfc3339(v?.as_str()?).ok()?;
    Some(json!(
        t.with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    ))
}

fn absent(m: &Map<String, Value>, field: &str) -> bool {
    m.get(field).is_none_or(Value::is_null)
}

/// What the core/v1 `firstTimestamp`, `lastTimestamp` and `count` of a
/// stored Event would be if derived from its `eventTime` and `series`.
struct DerivedTimes {
    first: Option<Value>,
    last: Option<Value>,
    count: Option<Value>,
}

fn derived_times(m: &Map<String, Value>) -> DerivedTimes {
    let event_time = whole_seconds(m.get("eventTime"));
    let series = m.get("series").filter(|s| s.is_object());
    let series_last = whole_seconds(series.and_then(|s| s.get("lastObservedTime")));
    let series_count = series
        .and_then(|s| s.get("count"))
        .filter(|c| c.is_number())
        .cloned();
    DerivedTimes {
        first: event_time.clone(),
        last: series_last.or(event_time),
        count: series_count,
    }
}

/// Completes the core/v1 view of an Event written through events.k8s.io/v1.
///
/// The recorders of client-go and kube-rs write only `eventTime` and, on a
/// repeat, `series {count, lastObservedTime}`; upstream's conversion maps
/// just the `deprecated*` fields, so such an Event read as core/v1 has no
/// `lastTimestamp` or `count`, and `kubectl get events
/// --sort-by=.lastTimestamp` (the usual way to read events) finds nothing
/// to sort by. trellis derives them when the Event is stored: the series
/// wins over `deprecatedLastTimestamp`/`deprecatedCount` (it is what a
/// recorder updates on each repeat, the deprecated fields are frozen at the
/// first write), then those, then `eventTime` and a count of one. Stored
/// rather than computed on every read, so core/v1 LISTs, watches, field
/// selectors and sorting see them without converting each object.
fn derive_core_event_times(m: &mut Map<String, Value>) {
    let derived = derived_times(m);
    if let Some(last) = &derived.last
        && (m.get("series").is_some_and(Value::is_object) || absent(m, "lastTimestamp"))
    {
        m.insert("lastTimestamp".into(), last.clone());
    }
    if absent(m, "firstTimestamp")
        && let Some(first) = derived.first
    {
        m.insert("firstTimestamp".into(), first);
    }
    match derived.count {
        Some(count) => {
            m.insert("count".into(), count);
        }
        None if absent(m, "count") => {
            m.insert("count".into(), json!(1));
        }
        None => {}
    }
}

/// The reverse of [`derive_core_event_times`] for the events.k8s.io/v1
/// view: an Event that has an `eventTime` (written the events.k8s.io way)
/// does not show the derived values as `deprecated*` fields, so a client
/// reads back what it wrote (as from kube-apiserver) and a read-modify-write
/// carries no stale copies. Values that differ from the derived ones were
/// written by someone and are kept; Events written through core/v1 without
/// `eventTime` keep all three, as upstream's conversion gives them.
fn hide_derived_core_event_times(m: &mut Map<String, Value>) {
    if absent(m, "eventTime") {
        return;
    }
    let derived = derived_times(m);
    if derived.first.is_some() && m.get("firstTimestamp") == derived.first.as_ref() {
        m.remove("firstTimestamp");
    }
    if derived.last.is_some() && m.get("lastTimestamp") == derived.last.as_ref() {
        m.remove("lastTimestamp");
    }
    if m.get("count") == Some(derived.count.as_ref().unwrap_or(&json!(1))) {
        m.remove("count");
    }
}

/// A value at a dotted path, rendered as a field-selector value (strings as
/// they are, other scalars as JSON, absent as the empty string).
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        // `source` on events is an object; kube matches its component.
        Value::Object(o) => o
            .get("component")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        Value::Array(_) => String::new(),
    }
}

fn typed<T: serde::de::DeserializeOwned>(obj: &Value) -> Result<T, ApiError> {
    serde_json::from_value::<T>(obj.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "the object could not be decoded as {}: {e}",
            std::any::type_name::<T>()
                .rsplit("::")
                .next()
                .unwrap_or("object")
        ))
    })
}

/// Checks a built-in object's shape (by decoding it as the typed Kubernetes
/// kind: a wrongly typed field is a 400) and the rules that make it invalid
/// (422 causes).
pub fn validate(res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
    use k8s_openapi::api::{
        apps::v1 as apps, coordination::v1 as coord, core::v1 as core, discovery::v1 as disc,
        policy::v1 as policy, rbac::v1 as rbac, storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    let mut causes = Vec::new();
    match (res.group.as_str(), res.kind.as_str()) {
        ("", "Namespace") => {
            typed::<core::Namespace>(obj)?;
        }
        ("", "Node") => {
            typed::<core::Node>(obj)?;
        }
        ("", "Pod") => {
            let pod = typed::<core::Pod>(obj)?;
            match pod.spec {
                None => causes.push(Cause::required("spec")),
                Some(spec) => {
                    if spec.containers.is_empty() {
                        causes.push(Cause::required("spec.containers"));
                    }
                    let mut names = std::collections::BTreeSet::new();
                    for (i, c) in spec.containers.iter().enumerate() {
                        if c.name.is_empty() {
                            causes.push(Cause::required(format!("spec.containers[{i}].name")));
                        } else if !names.insert(c.name.clone()) {
                            causes.push(Cause::new(
                                "FieldValueDuplicate",
                                format!("spec.containers[{i}].name"),
                                format!("Duplicate value: \"{}\"", c.name),
                            ));
                        }
                        if c.image.as_deref().unwrap_or("").is_empty() {
                            causes.push(Cause::required(format!("spec.containers[{i}].image")));
                        }
                    }
                }
            }
        }
        ("", "Secret") => {
            typed::<core::Secret>(obj)?;
        }
        ("", "ConfigMap") => {
            typed::<core::ConfigMap>(obj)?;
        }
        ("", "Event") | ("events.k8s.io", "Event") => {
            let stored = if res.group.is_empty() {
                obj.clone()
            } else {
                to_storage(res, obj.clone())
            };
            typed::<core::Event>(&stored)?;
            if stored.get("involvedObject").is_none() {
                causes.push(Cause::required(if res.group.is_empty() {
                    "involvedObject"
                } else {
                    "regarding"
                }));
            }
        }
        ("", "Endpoints") => {
            typed::<core::Endpoints>(obj)?;
        }
        ("", "Service") => {
            typed::<core::Service>(obj)?;
        }
        ("", "ServiceAccount") => {
            typed::<core::ServiceAccount>(obj)?;
        }
        ("", "PersistentVolume") => {
            typed::<core::PersistentVolume>(obj)?;
        }
        ("", "PersistentVolumeClaim") => {
            typed::<core::PersistentVolumeClaim>(obj)?;
        }
        ("discovery.k8s.io", "EndpointSlice") => {
            typed::<disc::EndpointSlice>(obj)?;
        }
        ("coordination.k8s.io", "Lease") => {
            typed::<coord::Lease>(obj)?;
        }
        ("apps", "Deployment") => {
            let d = typed::<apps::Deployment>(obj)?;
            if let Some(spec) = d.spec {
                workload_checks(
                    spec.replicas,
                    &spec.selector,
                    spec.template.metadata.as_ref(),
                    &mut causes,
                );
            } else {
                causes.push(Cause::required("spec"));
            }
        }
        ("apps", "StatefulSet") => {
            let s = typed::<apps::StatefulSet>(obj)?;
            if let Some(spec) = s.spec {
                workload_checks(
                    spec.replicas,
                    &spec.selector,
                    spec.template.metadata.as_ref(),
                    &mut causes,
                );
            } else {
                causes.push(Cause::required("spec"));
            }
        }
        ("policy", "PodDisruptionBudget") => {
            let p = typed::<policy::PodDisruptionBudget>(obj)?;
            if let Some(spec) = p.spec
                && spec.min_available.is_some()
                && spec.max_unavailable.is_some()
            {
                causes.push(Cause::invalid(
                    "spec",
                    "minAvailable and maxUnavailable cannot be both set",
                ));
            }
        }
        ("storage.k8s.io", "VolumeAttachment") => {
            typed::<storage::VolumeAttachment>(obj)?;
        }
        (
            "rbac.authorization.k8s.io",
            kind @ ("Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding"),
        ) => {
            match kind {
                "Role" => drop(typed::<rbac::Role>(obj)?),
                "ClusterRole" => drop(typed::<rbac::ClusterRole>(obj)?),
                "RoleBinding" => drop(typed::<rbac::RoleBinding>(obj)?),
                _ => drop(typed::<rbac::ClusterRoleBinding>(obj)?),
            }
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if let Some(why) = crate::rbac::check_name(name) {
                causes.push(Cause::invalid(
                    "metadata.name",
                    format!("Invalid value: \"{name}\": {why}"),
                ));
            }
            causes.extend(crate::rbac::validate(kind, obj));
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            typed::<ext::CustomResourceDefinition>(obj)?;
            causes.extend(crate::crd::validate_crd(obj));
        }
        (
            crate::webhook::GROUP,
            kind @ ("MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration"),
        ) => {
            // Missing required fields are 422 causes, as in kube; the typed
            // decode (which would call them a 400) only checks the shape of
            // an object that has them.
            causes.extend(crate::webhook::validate_configuration(kind, obj));
            if causes.is_empty() {
                use k8s_openapi::api::admissionregistration::v1 as admreg;
                match kind {
                    "MutatingWebhookConfiguration" => {
                        drop(typed::<admreg::MutatingWebhookConfiguration>(obj)?)
                    }
                    _ => drop(typed::<admreg::ValidatingWebhookConfiguration>(obj)?),
                }
            }
        }
        _ => {}
    }
    Ok(causes)
}

/// Kinds whose names are path segments (may hold `:`) rather than DNS
/// subdomains: the RBAC kinds, as in kube.
pub fn path_segment_names(res: &Resource) -> bool {
    res.builtin && res.group == "rbac.authorization.k8s.io"
}

fn workload_checks(
    replicas: Option<i32>,
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    template_meta: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    causes: &mut Vec<Cause>,
) {
    if let Some(r) = replicas
        && r < 0
    {
        causes.push(Cause::invalid(
            "spec.replicas",
            format!("Invalid value: {r}: must be greater than or equal to 0"),
        ));
    }
    let empty_selector = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|m| m.is_empty());
    if empty_selector {
        causes.push(Cause::required("spec.selector"));
        return;
    }
    let sel_json = serde_json::to_value(selector).unwrap_or(Value::Null);
    let labels = template_meta
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let labels: Map<String, Value> = labels.into_iter().map(|(k, v)| (k, json!(v))).collect();
    match apimachinery::selector::LabelSelector::from_json(&sel_json) {
        Ok(sel) if !sel.matches(&labels) => causes.push(Cause::invalid(
            "spec.template.metadata.labels",
            "`selector` does not match template `labels`",
        )),
        Ok(_) => {}
        Err(e) => causes.push(Cause::invalid("spec.selector", e.message)),
    }
}

/// Normalises a built-in object before it is stored: Secret `stringData` is
/// folded into `data`, and every kind gets kube-apiserver's defaults
/// ([`crate::defaults`]; webhook configurations have their own), as kube
/// does while decoding a create or update body.
pub fn normalize(res: &Resource, obj: &mut Value) {
    if res.builtin && res.group == crate::webhook::GROUP {
        crate::webhook::default_configuration(&res.kind, obj);
    }
    if res.builtin {
        crate::defaults::apply(&res.group, &res.kind, obj);
    }
    if res.builtin
        && res.kind == "Secret"
        && let Some(m) = obj.as_object_mut()
        && let Some(Value::Object(sd)) = m.remove("stringData")
    {
        use base64::Engine as _;
        let data = m.entry("data").or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        if let Some(d) = data.as_object_mut() {
            for (k, v) in sd {
                let s = v.as_str().unwrap_or_default();
                d.insert(
                    k,
                    json!(base64::engine::general_purpose::STANDARD.encode(s)),
                );
            }
        }
    }
}

/// Whether objects of `res` carry `metadata.generation`, as in kube 1.32:
/// custom resources, and the built-in kinds whose registry strategy sets it
/// (workloads, budgets, CRDs, webhook configurations, EndpointSlices —
/// whose strategy bumps it on any non-metadata or label change). Every
/// other built-in kind (ConfigMap, Secret, Pod, Namespace, Service, …) has
/// none, and `kubectl diff` would show a bump kube never makes.
pub fn has_generation(res: &Resource) -> bool {
    if !res.builtin {
        return true;
    }
    match (res.group.as_str(), res.kind.as_str()) {
        ("apps", "Deployment" | "StatefulSet")
        | ("policy", "PodDisruptionBudget")
        | ("apiextensions.k8s.io", "CustomResourceDefinition")
        | ("discovery.k8s.io", "EndpointSlice") => true,
        (g, "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration") => {
            g == crate::webhook::GROUP
        }
        _ => false,
    }
}

/// The pod spec fields kube lets an update change, in the words of its
/// error message (kube 1.32, InPlacePodVerticalScaling off).
const POD_UPDATABLE: &[&str] = &[
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
];

/// Rules an update of the main resource (not a subresource) must follow
/// beyond [`validate`]: for pods, kube's `ValidatePodUpdate` spec rules.
pub fn validate_update(res: &Resource, new: &Value, old: &Value) -> Vec<Cause> {
    if res.builtin && res.group.is_empty() && res.kind == "Pod" {
        pod_update(new, old)
    } else {
        Vec::new()
    }
}

fn forbidden(field: impl Into<String>, why: impl std::fmt::Display) -> Cause {
    Cause::new("FieldValueForbidden", field, format!("Forbidden: {why}"))
}

/// The value compared for "did the spec change": kube compares decoded Go
/// structs semantically, where an absent field, `null` and an empty list
/// are all the same nil slice or pointer.
fn semantic(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null() && !x.as_array().is_some_and(Vec::is_empty))
                .map(|(k, x)| (k.clone(), semantic(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(semantic).collect()),
        other => other.clone(),
    }
}

/// Paths (at most a few) where two semantic values differ, to tell the user
/// what the forbidden change was, as kube's message appends a diff.
fn diff_paths(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    const MAX: usize = 5;
    if out.len() >= MAX || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let none = Value::Null;
                diff_paths(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&none),
                    y.get(k).unwrap_or(&none),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff_paths(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ => out.push(path.to_string()),
    }
}

fn pod_update(new: &Value, old: &Value) -> Vec<Cause> {
    // A pod stored before defaulting existed compares as if defaulted, so
    // its first update is not refused for the defaults it now gets.
    let mut old = old.clone();
    crate::defaults::apply("", "Pod", &mut old);
    let empty = Map::new();
    let new_spec = new.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let old_spec = old.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let list = |m: &Map<String, Value>, k: &str| -> Vec<Value> {
        m.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut causes = Vec::new();
    for key in ["containers", "initContainers"] {
        if list(new_spec, key).len() != list(old_spec, key).len() {
            causes.push(forbidden(
                format!("spec.{key}"),
                "pod updates may not add or remove containers",
            ));
            return causes;
        }
    }
    let ads = |m: &Map<String, Value>| m.get("activeDeadlineSeconds").and_then(Value::as_i64);
    match (ads(new_spec), ads(old_spec)) {
        (Some(n), _) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            causes.push(Cause::invalid(
                "spec.activeDeadlineSeconds",
                format!("Invalid value: {n}: must be between 0 and 2147483647, inclusive"),
            ));
            return causes;
        }
        (Some(n), Some(o)) if o < n => {
            causes.push(Cause::invalid(
                "spec.activeDeadlineSeconds",
                format!("Invalid value: {n}: must be less than or equal to previous value"),
            ));
            return causes;
        }
        (None, Some(_)) => causes.push(Cause::invalid(
            "spec.activeDeadlineSeconds",
            "Invalid value: \"null\": must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    // Existing tolerations stay (only their tolerationSeconds may change);
    // new ones may be added.
    let strip_seconds = |t: &Value| {
        let mut t = semantic(t);
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    let new_tols: Vec<Value> = list(new_spec, "tolerations")
        .iter()
        .map(strip_seconds)
        .collect();
    if list(old_spec, "tolerations")
        .iter()
        .any(|t| !new_tols.contains(&strip_seconds(t)))
    {
        causes.push(forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }
    // Scheduling gates may only be removed.
    let old_gates = list(old_spec, "schedulingGates");
    if list(new_spec, "schedulingGates")
        .iter()
        .any(|g| !old_gates.contains(g))
    {
        causes.push(forbidden(
            "spec.schedulingGates",
            "only deletion is allowed, but found new scheduling gate",
        ));
    }
    let old_sem = semantic(&Value::Object(old_spec.clone()));
    if semantic(&Value::Object(new_spec.clone())) == old_sem {
        return causes;
    }
    // Take every field an update may change from the old spec; whatever
    // still differs is a forbidden change.
    let mut munged = new_spec.clone();
    for key in ["containers", "initContainers"] {
        let old_list = list(old_spec, key);
        if let Some(cs) = munged.get_mut(key).and_then(Value::as_array_mut) {
            for (c, o) in cs.iter_mut().zip(&old_list) {
                if let Some(c) = c.as_object_mut() {
                    match o.get("image") {
                        Some(img) => c.insert("image".into(), img.clone()),
                        None => c.remove("image"),
                    };
                }
            }
        }
    }
    for key in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
        match old_spec.get(key) {
            Some(v) => munged.insert(key.into(), v.clone()),
            None => munged.remove(key),
        };
    }
    let grace = |m: &Map<String, Value>| {
        m.get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
    };
    if grace(old_spec).is_some_and(|g| g < 0) && grace(&munged) == Some(1) {
        munged.insert(
            "terminationGracePeriodSeconds".into(),
            old_spec["terminationGracePeriodSeconds"].clone(),
        );
    }
    // kube binds a pod to its node through the `pods/binding` subresource,
    // which this server does not serve; a scheduler-like client sets
    // `spec.nodeName` by update instead, so setting it once (from empty) is
    // allowed. Changing or clearing it stays forbidden.
    let node = |m: &Map<String, Value>| {
        m.get("nodeName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if node(old_spec).is_empty() && !node(&munged).is_empty() {
        match old_spec.get("nodeName") {
            Some(v) => munged.insert("nodeName".into(), v.clone()),
            None => munged.remove("nodeName"),
        };
    }
    let munged_sem = semantic(&Value::Object(munged));
    if munged_sem != old_sem {
        let mut paths = Vec::new();
        diff_paths("spec", &old_sem, &munged_sem, &mut paths);
        causes.push(forbidden(
            "spec",
            format!(
                "pod updates may not change fields other than {}\n  changed: {}",
                POD_UPDATABLE.join(","),
                paths.join(", ")
            ),
        ));
    }
    causes
}

#[cfg(test)]
mod event_conversion_tests {
    use super::*;

    fn events_v1() -> Resource {
        resources()
            .into_iter()
            .find(|r| r.group == "events.k8s.io")
            .expect("events.k8s.io/v1 is served")
    }

    /// An Event as kube-rs's `Recorder` first creates it: `eventTime` and
    /// no `deprecated*` field.
    fn recorded() -> Value {
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "m1.17f", "namespace": "default"},
            "action": "Create", "reason": "Created", "type": "Normal",
            "eventTime": "2026-01-02T03:04:05.678901Z",
            "note": "created the VM",
            "regarding": {"kind": "Machine", "name": "m1", "namespace": "default"},
            "reportingController": "trellis/machine", "reportingInstance": "trellis",
        })
    }

    #[test]
    fn a_recorded_event_reads_as_core_v1_with_first_and_last_timestamp_and_count() {
        let stored = to_storage(&events_v1(), recorded());
        let want = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "m1.17f", "namespace": "default"},
            "action": "Create", "reason": "Created", "type": "Normal",
            "eventTime": "2026-01-02T03:04:05.678901Z",
            "message": "created the VM",
            "involvedObject": {"kind": "Machine", "name": "m1", "namespace": "default"},
            "reportingComponent": "trellis/machine", "reportingInstance": "trellis",
            "lastTimestamp": "2026-01-02T03:04:05Z",
            "firstTimestamp": "2026-01-02T03:04:05Z",
            "count": 1,
        });
        assert_eq!(stored, want);
        assert_eq!(
            from_storage(&events_v1(), stored),
            recorded(),
            "the events.k8s.io client reads back what it wrote"
        );
    }

    #[test]
    fn a_series_sets_last_timestamp_and_count() {
        let mut ev = recorded();
        ev["series"] = json!({"count": 3, "lastObservedTime": "2026-01-02T03:09:10.500000Z"});
        let stored = to_storage(&events_v1(), ev.clone());
        assert_eq!(stored["firstTimestamp"], "2026-01-02T03:04:05Z");
        assert_eq!(stored["lastTimestamp"], "2026-01-02T03:09:10Z");
        assert_eq!(stored["count"], 3);
        assert_eq!(from_storage(&events_v1(), stored), ev);
    }

    #[test]
    fn a_series_patched_onto_a_stored_event_moves_last_timestamp() {
        // kube-rs's Recorder repeats an event with a merge patch that adds
        // `series` to the object it created: the server reads the stored
        // Event in the events.k8s.io form, patches it and stores it again.
        let v1 = events_v1();
        let mut served = from_storage(&v1, to_storage(&v1, recorded()));
        served["series"] = json!({"count": 2, "lastObservedTime": "2026-01-02T03:05:00.000001Z"});
        let stored = to_storage(&v1, served);
        assert_eq!(stored["firstTimestamp"], "2026-01-02T03:04:05Z");
        assert_eq!(stored["lastTimestamp"], "2026-01-02T03:05:00Z");
        assert_eq!(stored["count"], 2);
    }

    #[test]
    fn the_series_wins_over_deprecated_fields_and_other_values_are_kept() {
        let mut ev = recorded();
        ev["deprecatedFirstTimestamp"] = json!("2026-01-01T00:00:00Z");
        ev["deprecatedLastTimestamp"] = json!("2026-01-01T00:00:01Z");
        ev["deprecatedCount"] = json!(7);
        let stored = to_storage(&events_v1(), ev.clone());
        assert_eq!(stored["firstTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(stored["lastTimestamp"], "2026-01-01T00:00:01Z");
        assert_eq!(stored["count"], 7);
        assert_eq!(from_storage(&events_v1(), stored), ev, "written, so shown");
        ev["series"] = json!({"count": 9, "lastObservedTime": "2026-01-02T04:00:00Z"});
        let stored = to_storage(&events_v1(), ev);
        assert_eq!(stored["lastTimestamp"], "2026-01-02T04:00:00Z");
        assert_eq!(stored["count"], 9);
    }

    #[test]
    fn a_core_v1_event_reads_as_events_k8s_io_with_its_deprecated_fields() {
        let legacy = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "n1.1", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": "n1"},
            "reason": "NodeReady", "message": "ready", "type": "Normal",
            "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2026-01-02T03:00:00Z",
            "lastTimestamp": "2026-01-02T03:10:00Z",
            "count": 1,
        });
        let served = from_storage(&events_v1(), legacy.clone());
        let want = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "n1.1", "namespace": "default"},
            "regarding": {"kind": "Node", "name": "n1"},
            "reason": "NodeReady", "note": "ready", "type": "Normal",
            "deprecatedSource": {"component": "kubelet", "host": "n1"},
            "deprecatedFirstTimestamp": "2026-01-02T03:00:00Z",
            "deprecatedLastTimestamp": "2026-01-02T03:10:00Z",
            "deprecatedCount": 1,
        });
        assert_eq!(served, want);
        assert_eq!(to_storage(&events_v1(), served), legacy, "and back");
    }
}
