//! Upstream's defaulting and validation webhooks (`internal/webhooks/`) as
//! pure functions: defaulting mutates the typed object, validation returns
//! field causes for a 422. trellis's API server runs them as admission;
//! against a real cluster they run as an admission webhook.

use std::collections::BTreeMap;

use apimachinery::Cause;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::types::labels;
use crate::types::machineset::delete_policy;
use crate::types::{
    Cluster, Machine, MachineDeployment, MachineDeploymentStrategy, MachineHealthCheck, MachineSet,
    MachineSpec, RollingUpdate,
};

/// Upstream's default `nodeDeletionTimeout`.
pub const DEFAULT_NODE_DELETION_TIMEOUT: &str = "10s";

fn meta_label(labels: &mut Option<BTreeMap<String, String>>, k: &str, v: &str) {
    labels
        .get_or_insert_with(BTreeMap::new)
        .insert(k.into(), v.into());
}

/// `v` prefixed to a version that lacks it (`1.31.2` → `v1.31.2`).
fn default_version(spec: &mut MachineSpec) {
    if let Some(v) = spec.version.as_mut()
        && !v.is_empty()
        && !v.starts_with('v')
    {
        *v = format!("v{v}");
    }
}

/// Namespaces of references default to the object's.
fn default_ref(r: &mut ObjectReference, ns: Option<&str>) {
    if r.namespace.as_deref().is_none_or(str::is_empty)
        && let Some(ns) = ns
    {
        r.namespace = Some(ns.to_string());
    }
}

fn default_machine_spec(spec: &mut MachineSpec, ns: Option<&str>) {
    default_version(spec);
    if let Some(r) = spec.bootstrap.config_ref.as_mut() {
        default_ref(r, ns);
    }
    default_ref(&mut spec.infrastructure_ref, ns);
    if spec.node_deletion_timeout.is_none() {
        spec.node_deletion_timeout = Some(DEFAULT_NODE_DELETION_TIMEOUT.into());
    }
}

/// Machine defaults: the cluster-name label, the version's `v`, reference
/// namespaces, `nodeDeletionTimeout` 10s.
pub fn default_machine(m: &mut Machine) {
    let cluster = m.spec.cluster_name.clone();
    meta_label(&mut m.metadata.labels, labels::CLUSTER_NAME, &cluster);
    let ns = m.metadata.namespace.clone();
    default_machine_spec(&mut m.spec, ns.as_deref());
}

/// The replicas default (only when unset): the autoscaler's minimum when
/// both bounds are annotated (an update keeps the old value clamped to
/// them), else 1.
fn default_replicas(
    replicas: &mut Option<i32>,
    annotations: Option<&BTreeMap<String, String>>,
    old: Option<Option<i32>>,
) {
    if replicas.is_some() {
        return;
    }
    let bound = |k: &str| {
        annotations
            .and_then(|a| a.get(k))
            .and_then(|v| v.parse::<i32>().ok())
    };
    *replicas = Some(
        match (
            bound(labels::AUTOSCALER_MIN_SIZE),
            bound(labels::AUTOSCALER_MAX_SIZE),
        ) {
            (Some(min), Some(max)) => match old {
                Some(Some(o)) => o.clamp(min, max.max(min)),
                _ => min,
            },
            _ => 1,
        },
    );
}

/// MachineSet defaults: replicas, `deletePolicy: Random`, a selector of
/// `set-name` when empty, and the cluster-name label on the set, its
/// selector and its template.
pub fn default_machine_set(s: &mut MachineSet, old: Option<&MachineSet>) {
    let name = s.metadata.name.clone().unwrap_or_default();
    let cluster = s.spec.cluster_name.clone();
    default_replicas(
        &mut s.spec.replicas,
        s.metadata.annotations.as_ref(),
        old.map(|o| o.spec.replicas),
    );
    if s.spec.delete_policy.is_none() {
        s.spec.delete_policy = Some(delete_policy::RANDOM.into());
    }
    if selector_empty(&s.spec.selector) {
        let v = crate::machineset::set_name_label(&name);
        s.spec
            .selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(labels::SET_NAME.into(), v.clone());
        s.spec
            .template
            .metadata
            .labels
            .insert(labels::SET_NAME.into(), v);
    }
    meta_label(&mut s.metadata.labels, labels::CLUSTER_NAME, &cluster);
    s.spec
        .selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::CLUSTER_NAME.into(), cluster.clone());
    s.spec
        .template
        .metadata
        .labels
        .insert(labels::CLUSTER_NAME.into(), cluster.clone());
    s.spec.template.spec.cluster_name = cluster;
    let ns = s.metadata.namespace.clone();
    default_machine_spec(&mut s.spec.template.spec, ns.as_deref());
}

/// MachineDeployment defaults: replicas, strategy RollingUpdate with surge
/// 1 and unavailable 0, `revisionHistoryLimit` 1, `minReadySeconds` 0,
/// `progressDeadlineSeconds` 600, a `deployment-name` selector when
/// empty, and the cluster-name label everywhere.
pub fn default_machine_deployment(d: &mut MachineDeployment, old: Option<&MachineDeployment>) {
    let name = d.metadata.name.clone().unwrap_or_default();
    let cluster = d.spec.cluster_name.clone();
    default_replicas(
        &mut d.spec.replicas,
        d.metadata.annotations.as_ref(),
        old.map(|o| o.spec.replicas),
    );
    let strategy = d
        .spec
        .strategy
        .get_or_insert_with(MachineDeploymentStrategy::default);
    if strategy.type_.is_none() {
        strategy.type_ = Some(crate::types::machinedeployment::strategy::ROLLING_UPDATE.into());
    }
    if strategy.type_.as_deref() == Some(crate::types::machinedeployment::strategy::ROLLING_UPDATE)
    {
        let ru = strategy
            .rolling_update
            .get_or_insert_with(RollingUpdate::default);
        ru.max_surge.get_or_insert(IntOrString::Int(1));
        ru.max_unavailable.get_or_insert(IntOrString::Int(0));
    }
    d.spec.revision_history_limit.get_or_insert(1);
    d.spec.min_ready_seconds.get_or_insert(0);
    d.spec.progress_deadline_seconds.get_or_insert(600);
    if selector_empty(&d.spec.selector) {
        d.spec
            .selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(labels::DEPLOYMENT_NAME.into(), name.clone());
        d.spec
            .template
            .metadata
            .labels
            .insert(labels::DEPLOYMENT_NAME.into(), name);
    }
    meta_label(&mut d.metadata.labels, labels::CLUSTER_NAME, &cluster);
    d.spec
        .selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::CLUSTER_NAME.into(), cluster.clone());
    d.spec
        .template
        .metadata
        .labels
        .insert(labels::CLUSTER_NAME.into(), cluster.clone());
    d.spec.template.spec.cluster_name = cluster;
    let ns = d.metadata.namespace.clone();
    default_machine_spec(&mut d.spec.template.spec, ns.as_deref());
}

/// MachineHealthCheck defaults: `maxUnhealthy: 100%`, `nodeStartupTimeout:
/// 10m`, the cluster-name label.
pub fn default_machine_health_check(c: &mut MachineHealthCheck) {
    let cluster = c.spec.cluster_name.clone();
    meta_label(&mut c.metadata.labels, labels::CLUSTER_NAME, &cluster);
    c.spec
        .max_unhealthy
        .get_or_insert(IntOrString::String("100%".into()));
    c.spec.node_startup_timeout.get_or_insert("10m0s".into());
    if let Some(r) = c.spec.remediation_template.as_mut() {
        let ns = c.metadata.namespace.clone();
        default_ref(r, ns.as_deref());
    }
}

/// Cluster defaults: reference namespaces.
pub fn default_cluster(c: &mut Cluster) {
    let ns = c.metadata.namespace.clone();
    for r in [
        c.spec.infrastructure_ref.as_mut(),
        c.spec.control_plane_ref.as_mut(),
    ]
    .into_iter()
    .flatten()
    {
        default_ref(r, ns.as_deref());
    }
}

fn selector_empty(s: &LabelSelector) -> bool {
    s.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && s.match_expressions.as_ref().is_none_or(|e| e.is_empty())
}

/// Whether `v` is a semantic version, with or without `v`.
pub fn is_semver(v: &str) -> bool {
    let v = v.strip_prefix('v').unwrap_or(v);
    let core = v.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars().all(|c| c.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
        })
}

fn check_ref(
    causes: &mut Vec<Cause>,
    field: &str,
    r: &ObjectReference,
    ns: Option<&str>,
    required: bool,
) {
    let empty =
        r.kind.as_deref().is_none_or(str::is_empty) && r.name.as_deref().is_none_or(str::is_empty);
    if empty {
        if required {
            causes.push(Cause::required(field));
        }
        return;
    }
    for (f, v) in [
        ("apiVersion", &r.api_version),
        ("kind", &r.kind),
        ("name", &r.name),
    ] {
        if v.as_deref().is_none_or(str::is_empty) {
            causes.push(Cause::required(format!("{field}.{f}")));
        }
    }
    if let (Some(rns), Some(ns)) = (r.namespace.as_deref(), ns)
        && !rns.is_empty()
        && rns != ns
    {
        causes.push(Cause::invalid(
            format!("{field}.namespace"),
            format!("Invalid value: {rns:?}: must match metadata.namespace"),
        ));
    }
}

fn check_duration(causes: &mut Vec<Cause>, field: &str, v: &Option<String>) {
    if let Some(v) = v
        && api::parse_duration(v).is_none()
    {
        causes.push(Cause::invalid(
            field,
            format!("Invalid value: {v:?}: must be a duration such as 10s or 5m"),
        ));
    }
}

fn validate_machine_spec(
    causes: &mut Vec<Cause>,
    path: &str,
    spec: &MachineSpec,
    ns: Option<&str>,
) {
    if spec.cluster_name.is_empty() {
        causes.push(Cause::required(format!("{path}.clusterName")));
    }
    let b = &spec.bootstrap;
    if b.config_ref.is_none() && b.data_secret_name.is_none() {
        causes.push(Cause::required(format!("{path}.bootstrap.configRef")).with_message(
            "expected either spec.bootstrap.dataSecretName or spec.bootstrap.configRef to be populated",
        ));
    }
    if let Some(r) = &b.config_ref {
        check_ref(causes, &format!("{path}.bootstrap.configRef"), r, ns, true);
    }
    check_ref(
        causes,
        &format!("{path}.infrastructureRef"),
        &spec.infrastructure_ref,
        ns,
        true,
    );
    if let Some(v) = &spec.version
        && !is_semver(v)
    {
        causes.push(Cause::invalid(
            format!("{path}.version"),
            format!("Invalid value: {v:?}: must be a valid semantic version"),
        ));
    }
    check_duration(
        causes,
        &format!("{path}.nodeDrainTimeout"),
        &spec.node_drain_timeout,
    );
    check_duration(
        causes,
        &format!("{path}.nodeVolumeDetachTimeout"),
        &spec.node_volume_detach_timeout,
    );
    check_duration(
        causes,
        &format!("{path}.nodeDeletionTimeout"),
        &spec.node_deletion_timeout,
    );
}

trait WithMessage {
    fn with_message(self, m: &str) -> Self;
}

impl WithMessage for Cause {
    fn with_message(mut self, m: &str) -> Cause {
        self.message = format!("Required value: {m}");
        self
    }
}

fn immutable(causes: &mut Vec<Cause>, field: &str, old: &str, new: &str) {
    if old != new {
        causes.push(Cause::invalid(field, "Invalid value: field is immutable"));
    }
}

/// Machine validation (create, and update against `old`).
pub fn validate_machine(m: &Machine, old: Option<&Machine>) -> Vec<Cause> {
    let mut causes = Vec::new();
    validate_machine_spec(
        &mut causes,
        "spec",
        &m.spec,
        m.metadata.namespace.as_deref(),
    );
    if let Some(old) = old {
        immutable(
            &mut causes,
            "spec.clusterName",
            &old.spec.cluster_name,
            &m.spec.cluster_name,
        );
    }
    causes
}

fn validate_selector_matches(
    causes: &mut Vec<Cause>,
    selector: &LabelSelector,
    template: &BTreeMap<String, String>,
) {
    if selector_empty(selector) {
        causes.push(Cause::required("spec.selector"));
        return;
    }
    if !mcm::machine::selector_matches(selector, template) {
        causes.push(Cause::invalid(
            "spec.template.metadata.labels",
            "Invalid value: must match spec.selector",
        ));
    }
}

fn validate_replicas(causes: &mut Vec<Cause>, replicas: Option<i32>) {
    if replicas.is_some_and(|r| r < 0) {
        causes.push(Cause::invalid(
            "spec.replicas",
            "Invalid value: must be greater than or equal to 0",
        ));
    }
}

/// MachineSet validation.
pub fn validate_machine_set(s: &MachineSet, old: Option<&MachineSet>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let ns = s.metadata.namespace.as_deref();
    validate_replicas(&mut causes, s.spec.replicas);
    validate_selector_matches(
        &mut causes,
        &s.spec.selector,
        &s.spec.template.metadata.labels,
    );
    if let Some(p) = &s.spec.delete_policy
        && !delete_policy::ALL.contains(&p.as_str())
    {
        causes.push(Cause::new(
            "FieldValueNotSupported",
            "spec.deletePolicy",
            format!(
                "Unsupported value: {p:?}: supported values: \"Random\", \"Newest\", \"Oldest\""
            ),
        ));
    }
    if s.spec.template.spec.cluster_name != s.spec.cluster_name
        && !s.spec.template.spec.cluster_name.is_empty()
    {
        causes.push(Cause::invalid(
            "spec.template.spec.clusterName",
            "Invalid value: must match spec.clusterName",
        ));
    }
    validate_machine_spec(&mut causes, "spec.template.spec", &s.spec.template.spec, ns);
    if let Some(old) = old {
        immutable(
            &mut causes,
            "spec.clusterName",
            &old.spec.cluster_name,
            &s.spec.cluster_name,
        );
    }
    causes
}

fn validate_int_or_percent(causes: &mut Vec<Cause>, field: &str, v: &Option<IntOrString>) {
    if let Some(v) = v {
        match mcm::rollout::IntOrPercent::from_int_or_string(v) {
            Some(x) if x.scaled(100, false) >= 0 => {}
            _ => causes.push(Cause::invalid(
                field,
                format!("Invalid value: {v:?}: must be a non-negative integer or percentage"),
            )),
        }
    }
}

/// MachineDeployment validation.
pub fn validate_machine_deployment(
    d: &MachineDeployment,
    old: Option<&MachineDeployment>,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let ns = d.metadata.namespace.as_deref();
    let name = d.metadata.name.clone().unwrap_or_default();
    if name.len() > 63 {
        causes.push(Cause::invalid(
            "metadata.name",
            "Invalid value: must be no more than 63 characters",
        ));
    }
    validate_replicas(&mut causes, d.spec.replicas);
    validate_selector_matches(
        &mut causes,
        &d.spec.selector,
        &d.spec.template.metadata.labels,
    );
    if let Some(st) = &d.spec.strategy {
        match st.type_.as_deref() {
            None | Some("RollingUpdate") | Some("OnDelete") => {}
            Some(t) => causes.push(Cause::new(
                "FieldValueNotSupported",
                "spec.strategy.type",
                format!(
                    "Unsupported value: {t:?}: supported values: \"RollingUpdate\", \"OnDelete\""
                ),
            )),
        }
        if let Some(ru) = &st.rolling_update {
            validate_int_or_percent(
                &mut causes,
                "spec.strategy.rollingUpdate.maxSurge",
                &ru.max_surge,
            );
            validate_int_or_percent(
                &mut causes,
                "spec.strategy.rollingUpdate.maxUnavailable",
                &ru.max_unavailable,
            );
            if let Some(p) = &ru.delete_policy
                && !delete_policy::ALL.contains(&p.as_str())
            {
                causes.push(Cause::new(
                    "FieldValueNotSupported",
                    "spec.strategy.rollingUpdate.deletePolicy",
                    format!("Unsupported value: {p:?}"),
                ));
            }
        }
        if let Some(r) = &st.remediation {
            validate_int_or_percent(
                &mut causes,
                "spec.strategy.remediation.maxInFlight",
                &r.max_in_flight,
            );
        }
    }
    if d.spec.template.spec.cluster_name != d.spec.cluster_name
        && !d.spec.template.spec.cluster_name.is_empty()
    {
        causes.push(Cause::invalid(
            "spec.template.spec.clusterName",
            "Invalid value: must match spec.clusterName",
        ));
    }
    validate_machine_spec(&mut causes, "spec.template.spec", &d.spec.template.spec, ns);
    if let Some(old) = old {
        immutable(
            &mut causes,
            "spec.clusterName",
            &old.spec.cluster_name,
            &d.spec.cluster_name,
        );
    }
    causes
}

/// MachineHealthCheck validation.
pub fn validate_machine_health_check(
    c: &MachineHealthCheck,
    old: Option<&MachineHealthCheck>,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    if c.spec.cluster_name.is_empty() {
        causes.push(Cause::required("spec.clusterName"));
    }
    if selector_empty(&c.spec.selector) {
        causes.push(Cause::required("spec.selector").with_message("selector must not be empty"));
    }
    if let Some(v) = c
        .spec
        .selector
        .match_labels
        .as_ref()
        .and_then(|m| m.get(labels::CLUSTER_NAME))
        && *v != c.spec.cluster_name
    {
        causes.push(Cause::invalid(
            format!("spec.selector.matchLabels.{}", labels::CLUSTER_NAME),
            "Invalid value: must match spec.clusterName",
        ));
    }
    if c.spec.unhealthy_conditions.len() > 100 {
        causes.push(Cause::new(
            "FieldValueTooMany",
            "spec.unhealthyConditions",
            "Too many: must have at most 100 items",
        ));
    }
    for (i, u) in c.spec.unhealthy_conditions.iter().enumerate() {
        if u.type_.is_empty() {
            causes.push(Cause::required(format!(
                "spec.unhealthyConditions[{i}].type"
            )));
        }
        if u.status.is_empty() {
            causes.push(Cause::required(format!(
                "spec.unhealthyConditions[{i}].status"
            )));
        }
        check_duration(
            &mut causes,
            &format!("spec.unhealthyConditions[{i}].timeout"),
            &Some(u.timeout.clone()),
        );
    }
    if let Some(t) = &c.spec.node_startup_timeout {
        match api::parse_duration(t) {
            None => check_duration(&mut causes, "spec.nodeStartupTimeout", &Some(t.clone())),
            Some(d) if !d.is_zero() && d.as_secs() < 30 => causes.push(Cause::invalid(
                "spec.nodeStartupTimeout",
                format!("Invalid value: {t:?}: must be at least 30s (or 0 to disable)"),
            )),
            Some(_) => {}
        }
    }
    validate_int_or_percent(&mut causes, "spec.maxUnhealthy", &c.spec.max_unhealthy);
    if let Some(r) = &c.spec.unhealthy_range
        && crate::mhc::parse_range(r).is_none()
    {
        causes.push(Cause::invalid(
            "spec.unhealthyRange",
            format!("Invalid value: {r:?}: must be of the form [min-max] with min <= max"),
        ));
    }
    if let Some(old) = old {
        immutable(
            &mut causes,
            "spec.clusterName",
            &old.spec.cluster_name,
            &c.spec.cluster_name,
        );
    }
    causes
}

/// Cluster validation.
pub fn validate_cluster(c: &Cluster, old: Option<&Cluster>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let ns = c.metadata.namespace.as_deref();
    if let Some(r) = &c.spec.infrastructure_ref {
        check_ref(&mut causes, "spec.infrastructureRef", r, ns, false);
    }
    if let Some(r) = &c.spec.control_plane_ref {
        check_ref(&mut causes, "spec.controlPlaneRef", r, ns, false);
    }
    if let (Some(old), Some(new)) = (
        old.and_then(|o| o.spec.infrastructure_ref.as_ref()),
        &c.spec.infrastructure_ref,
    ) && (old.kind != new.kind || old.name != new.name)
        && old.name.as_deref().is_some_and(|n| !n.is_empty())
    {
        causes.push(Cause::invalid(
            "spec.infrastructureRef",
            "Invalid value: cannot be changed once set",
        ));
    }
    causes
}

/// Defaults an object of a core kind given as JSON (admission's form);
/// other kinds and objects that do not decode are left as they are (schema
/// validation reports the latter). `old` is the object before an update.
pub fn default_object(kind: &str, obj: &mut serde_json::Value, old: Option<&serde_json::Value>) {
    fn typed<T: serde::de::DeserializeOwned>(v: &serde_json::Value) -> Option<T> {
        serde_json::from_value(v.clone()).ok()
    }
    let defaulted = match kind {
        "Machine" => typed::<Machine>(obj).map(|mut m| {
            default_machine(&mut m);
            serde_json::to_value(m)
        }),
        "MachineSet" => typed::<MachineSet>(obj).map(|mut s| {
            default_machine_set(&mut s, old.and_then(typed).as_ref());
            serde_json::to_value(s)
        }),
        "MachineDeployment" => typed::<MachineDeployment>(obj).map(|mut d| {
            default_machine_deployment(&mut d, old.and_then(typed).as_ref());
            serde_json::to_value(d)
        }),
        "MachineHealthCheck" => typed::<MachineHealthCheck>(obj).map(|mut c| {
            default_machine_health_check(&mut c);
            serde_json::to_value(c)
        }),
        "Cluster" => typed::<Cluster>(obj).map(|mut c| {
            default_cluster(&mut c);
            serde_json::to_value(c)
        }),
        _ => None,
    };
    // Only spec and metadata labels are taken back: everything else stays
    // as sent (unknown fields are the schema's business).
    if let Some(Ok(v)) = defaulted {
        if let Some(spec) = v.get("spec") {
            obj["spec"] = spec.clone();
        }
        if let Some(labels) = v.pointer("/metadata/labels") {
            obj["metadata"]["labels"] = labels.clone();
        }
    }
}

/// Validates an object of a core kind given as JSON; `Err` when it does
/// not decode (with the decoding problem), else the field causes.
pub fn validate_object(
    kind: &str,
    obj: &serde_json::Value,
    old: Option<&serde_json::Value>,
) -> Result<Vec<Cause>, String> {
    fn typed<T: serde::de::DeserializeOwned>(v: &serde_json::Value) -> Result<T, String> {
        serde_json::from_value(v.clone()).map_err(|e| e.to_string())
    }
    fn old_typed<T: serde::de::DeserializeOwned>(v: Option<&serde_json::Value>) -> Option<T> {
        v.and_then(|v| serde_json::from_value(v.clone()).ok())
    }
    Ok(match kind {
        "Machine" => validate_machine(&typed(obj)?, old_typed(old).as_ref()),
        "MachineSet" => validate_machine_set(&typed(obj)?, old_typed(old).as_ref()),
        "MachineDeployment" => validate_machine_deployment(&typed(obj)?, old_typed(old).as_ref()),
        "MachineHealthCheck" => {
            validate_machine_health_check(&typed(obj)?, old_typed(old).as_ref())
        }
        "Cluster" => validate_cluster(&typed(obj)?, old_typed(old).as_ref()),
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::machine;

    fn fields(causes: &[Cause]) -> Vec<&str> {
        causes.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn machine_defaults_and_validation() {
        let mut m = machine("m1");
        m.metadata.labels = None;
        m.spec.version = Some("1.31.2".into());
        m.spec.infrastructure_ref.namespace = None;
        default_machine(&mut m);
        assert_eq!(m.spec.version.as_deref(), Some("v1.31.2"));
        assert_eq!(
            m.metadata.labels.as_ref().unwrap()[labels::CLUSTER_NAME],
            "c1"
        );
        assert_eq!(
            m.spec.infrastructure_ref.namespace.as_deref(),
            Some("default")
        );
        assert_eq!(m.spec.node_deletion_timeout.as_deref(), Some("10s"));
        assert!(validate_machine(&m, None).is_empty());

        let mut bad = machine("m1");
        bad.spec.bootstrap.config_ref = None;
        bad.spec.version = Some("1.x".into());
        bad.spec.node_drain_timeout = Some("soon".into());
        bad.spec.infrastructure_ref.namespace = Some("other".into());
        assert_eq!(
            fields(&validate_machine(&bad, None)),
            [
                "spec.bootstrap.configRef",
                "spec.infrastructureRef.namespace",
                "spec.version",
                "spec.nodeDrainTimeout"
            ]
        );
        let mut moved = machine("m1");
        moved.spec.cluster_name = "c2".into();
        assert_eq!(
            fields(&validate_machine(&moved, Some(&machine("m1")))),
            ["spec.clusterName"]
        );
    }

    #[test]
    fn deployment_defaults() {
        let mut d = MachineDeployment::new("md", Default::default());
        d.metadata.namespace = Some("default".into());
        d.spec.cluster_name = "c1".into();
        d.spec.template.spec = machine("x").spec;
        default_machine_deployment(&mut d, None);
        let ru = d
            .spec
            .strategy
            .as_ref()
            .unwrap()
            .rolling_update
            .as_ref()
            .unwrap();
        assert_eq!(ru.max_surge, Some(IntOrString::Int(1)));
        assert_eq!(ru.max_unavailable, Some(IntOrString::Int(0)));
        assert_eq!(d.spec.replicas, Some(1));
        assert_eq!(d.spec.revision_history_limit, Some(1));
        let sel = d.spec.selector.match_labels.as_ref().unwrap();
        assert_eq!(sel[labels::DEPLOYMENT_NAME], "md");
        assert_eq!(sel[labels::CLUSTER_NAME], "c1");
        assert_eq!(
            d.spec.template.metadata.labels[labels::DEPLOYMENT_NAME],
            "md"
        );
        assert!(
            validate_machine_deployment(&d, None).is_empty(),
            "{:?}",
            validate_machine_deployment(&d, None)
        );

        // Autoscaler bounds drive replicas.
        let mut a = MachineDeployment::new("md", Default::default());
        a.metadata.annotations = Some(BTreeMap::from([
            (labels::AUTOSCALER_MIN_SIZE.into(), "2".into()),
            (labels::AUTOSCALER_MAX_SIZE.into(), "5".into()),
        ]));
        default_machine_deployment(&mut a, None);
        assert_eq!(a.spec.replicas, Some(2));
        let mut b = a.clone();
        b.spec.replicas = None;
        let mut old = a.clone();
        old.spec.replicas = Some(9);
        default_machine_deployment(&mut b, Some(&old));
        assert_eq!(b.spec.replicas, Some(5));
    }

    #[test]
    fn deployment_validation() {
        let mut d = MachineDeployment::new("md", Default::default());
        d.metadata.namespace = Some("default".into());
        d.spec.cluster_name = "c1".into();
        d.spec.template.spec = machine("x").spec;
        default_machine_deployment(&mut d, None);
        d.spec.replicas = Some(-1);
        d.spec.template.metadata.labels.clear();
        d.spec
            .strategy
            .as_mut()
            .unwrap()
            .rolling_update
            .as_mut()
            .unwrap()
            .max_surge = Some(IntOrString::String("lots".into()));
        d.spec.strategy.as_mut().unwrap().type_ = Some("Recreate".into());
        assert_eq!(
            fields(&validate_machine_deployment(&d, None)),
            [
                "spec.replicas",
                "spec.template.metadata.labels",
                "spec.strategy.type",
                "spec.strategy.rollingUpdate.maxSurge"
            ]
        );
    }

    #[test]
    fn set_defaults_and_validation() {
        let mut s = MachineSet::new("ms", Default::default());
        s.metadata.namespace = Some("default".into());
        s.spec.cluster_name = "c1".into();
        s.spec.template.spec = machine("x").spec;
        default_machine_set(&mut s, None);
        assert_eq!(s.spec.delete_policy.as_deref(), Some("Random"));
        assert_eq!(
            s.spec.selector.match_labels.as_ref().unwrap()[labels::SET_NAME],
            "ms"
        );
        assert!(validate_machine_set(&s, None).is_empty());
        s.spec.delete_policy = Some("Whatever".into());
        assert_eq!(
            fields(&validate_machine_set(&s, None)),
            ["spec.deletePolicy"]
        );
    }

    #[test]
    fn health_check_validation() {
        let mut c = MachineHealthCheck::new("mhc", Default::default());
        c.spec.cluster_name = "c1".into();
        default_machine_health_check(&mut c);
        assert_eq!(
            c.spec.max_unhealthy,
            Some(IntOrString::String("100%".into()))
        );
        assert_eq!(c.spec.node_startup_timeout.as_deref(), Some("10m0s"));
        c.spec.node_startup_timeout = Some("10s".into());
        c.spec.unhealthy_range = Some("[3-1]".into());
        c.spec.unhealthy_conditions = vec![crate::types::UnhealthyCondition {
            type_: "Ready".into(),
            status: "Unknown".into(),
            timeout: "x".into(),
        }];
        c.spec.selector.match_labels =
            Some(BTreeMap::from([(labels::CLUSTER_NAME.into(), "c2".into())]));
        assert_eq!(
            fields(&validate_machine_health_check(&c, None)),
            [
                "spec.selector.matchLabels.cluster.x-k8s.io/cluster-name",
                "spec.unhealthyConditions[0].timeout",
                "spec.nodeStartupTimeout",
                "spec.unhealthyRange"
            ]
        );
        c.spec.selector = LabelSelector::default();
        c.spec.node_startup_timeout = Some("0".into());
        c.spec.unhealthy_range = None;
        c.spec.unhealthy_conditions.clear();
        assert_eq!(
            fields(&validate_machine_health_check(&c, None)),
            ["spec.selector"]
        );
    }

    #[test]
    fn semver() {
        for ok in ["v1.31.2", "1.31.2", "v1.30.0-rc.1", "v1.2.3+meta"] {
            assert!(is_semver(ok), "{ok}");
        }
        for bad in ["v1.31", "1.x.2", "v01.2.3", ""] {
            assert!(!is_semver(bad), "{bad}");
        }
    }
}
