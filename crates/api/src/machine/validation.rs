//! Validation as pure functions from an object to the list of reasons it is
//! invalid, each tied to a Kubernetes field path.
//!
//! Upstream runs these checks inside its controllers and silently skips
//! invalid objects; here the API server runs them at admission so the author
//! gets a 422 with causes instead. The rules are upstream's (class kind and
//! name required, non-negative replicas, selector matching the template,
//! strategy type and its bounds, a complete class node template) plus what
//! Kubernetes itself checks for the equivalent apps/v1 fields (names,
//! selectors, int-or-percent bounds, non-negative counts) and Go duration
//! syntax for the timeouts. An empty list means valid.
//!
//! `maxSurge` and `maxUnavailable` may not both be 0. Upstream accepts that
//! and its rollout quietly treats it as `maxUnavailable: 1`; we reject it at
//! admission, as apps/v1 Deployments do, so the author sees the problem.

use std::collections::BTreeMap;

use apimachinery::Cause;
use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::duration::parse_signed_duration;
use super::machine_class::{MachineClass, NodeTemplate};
use super::machine_deployment::{
    MachineDeployment, MachineDeploymentStrategy, MachineDeploymentStrategyType,
};
use super::machine_set::MachineSet;
use super::types::{Machine, MachineConfiguration, MachineSpec, MachineTemplateSpec};

/// Checks a machine: its name, class reference, timeouts and node template.
pub fn validate_machine(machine: &Machine) -> Vec<Cause> {
    let mut causes = Vec::new();
    validate_object_meta(&machine.metadata, &mut causes);
    validate_machine_spec(&machine.spec, "spec", &mut causes);
    causes
}

/// Checks a machine set: name, replicas, selector against template, and the
/// template's machine spec.
pub fn validate_machine_set(set: &MachineSet) -> Vec<Cause> {
    let mut causes = Vec::new();
    validate_object_meta(&set.metadata, &mut causes);
    let spec = &set.spec;
    non_negative(spec.replicas.into(), "spec.replicas", &mut causes);
    non_negative(
        spec.min_ready_seconds.into(),
        "spec.minReadySeconds",
        &mut causes,
    );
    if let Some(max) = spec.auto_preserve_failed_machine_max {
        non_negative(max.into(), "spec.autoPreserveFailedMachineMax", &mut causes);
    }
    validate_selector_and_template(spec.selector.as_ref(), &spec.template, &mut causes);
    causes
}

/// Checks a machine deployment: everything a machine set needs plus the
/// strategy and the rollout bookkeeping fields. Call
/// [`default_machine_deployment`](super::default_machine_deployment) first,
/// as the API server does, or a missing strategy is reported.
pub fn validate_machine_deployment(md: &MachineDeployment) -> Vec<Cause> {
    let mut causes = Vec::new();
    validate_object_meta(&md.metadata, &mut causes);
    let spec = &md.spec;
    non_negative(spec.replicas.into(), "spec.replicas", &mut causes);
    non_negative(
        spec.min_ready_seconds.into(),
        "spec.minReadySeconds",
        &mut causes,
    );
    if let Some(limit) = spec.revision_history_limit {
        non_negative(limit.into(), "spec.revisionHistoryLimit", &mut causes);
    }
    if let Some(deadline) = spec.progress_deadline_seconds {
        non_negative(deadline.into(), "spec.progressDeadlineSeconds", &mut causes);
    }
    if let Some(rollback) = &spec.rollback_to {
        non_negative(rollback.revision, "spec.rollbackTo.revision", &mut causes);
    }
    if let Some(max) = spec.auto_preserve_failed_machine_max {
        non_negative(max.into(), "spec.autoPreserveFailedMachineMax", &mut causes);
    }
    validate_selector_and_template(spec.selector.as_ref(), &spec.template, &mut causes);
    validate_strategy(&spec.strategy, &mut causes);
    causes
}

/// Checks a machine class: name, provider spec, secret references and, when
/// present, the node template the autoscaler scales from zero with.
pub fn validate_machine_class(class: &MachineClass) -> Vec<Cause> {
    let mut causes = Vec::new();
    validate_object_meta(&class.metadata, &mut causes);
    match &class.provider_spec {
        serde_json::Value::Null => causes.push(Cause::required("providerSpec")),
        serde_json::Value::Object(_) => {}
        other => causes.push(invalid(
            "providerSpec",
            &other.to_string(),
            "must be an object",
        )),
    }
    validate_secret_ref(class.secret_ref.as_ref(), "secretRef", &mut causes);
    validate_secret_ref(
        class.credentials_secret_ref.as_ref(),
        "credentialsSecretRef",
        &mut causes,
    );
    if let Some(template) = &class.node_template {
        validate_class_node_template(template, &mut causes);
    }
    causes
}

fn validate_machine_spec(spec: &MachineSpec, path: &str, causes: &mut Vec<Cause>) {
    let class = &spec.class;
    if class.kind.is_empty() {
        causes.push(Cause::required(format!("{path}.class.kind")));
    }
    if class.name.is_empty() {
        causes.push(Cause::required(format!("{path}.class.name")));
    } else if let Err(detail) = dns1123_subdomain(&class.name) {
        causes.push(invalid(
            format!("{path}.class.name"),
            &quoted(&class.name),
            &detail,
        ));
    }
    validate_configuration(&spec.configuration, path, causes);
    let taints = spec
        .node_template
        .spec
        .taints
        .as_deref()
        .unwrap_or_default();
    for (i, taint) in taints.iter().enumerate() {
        let taint_path = format!("{path}.nodeTemplate.spec.taints[{i}]");
        if taint.key.is_empty() {
            causes.push(Cause::required(format!("{taint_path}.key")));
        }
        const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
        if taint.effect.is_empty() {
            causes.push(Cause::required(format!("{taint_path}.effect")));
        } else if !EFFECTS.contains(&taint.effect.as_str()) {
            causes.push(not_supported(
                format!("{taint_path}.effect"),
                &taint.effect,
                &EFFECTS,
            ));
        }
    }
}

fn validate_configuration(config: &MachineConfiguration, path: &str, causes: &mut Vec<Cause>) {
    let durations = [
        ("drainTimeout", &config.drain_timeout),
        ("healthTimeout", &config.health_timeout),
        ("creationTimeout", &config.creation_timeout),
        ("inPlaceUpdateTimeout", &config.in_place_update_timeout),
        ("machinePreserveTimeout", &config.machine_preserve_timeout),
    ];
    for (name, value) in durations {
        let Some(value) = value else { continue };
        let field = format!("{path}.{name}");
        match parse_signed_duration(value) {
            Ok((true, d)) if !d.is_zero() => causes.push(invalid(
                field,
                &quoted(value),
                "must be greater than or equal to 0",
            )),
            Ok(_) => {}
            Err(e) => causes.push(invalid(
                field,
                &quoted(value),
                &format!("{e}: must be a Go duration such as \"20m\" or \"1h30m\""),
            )),
        }
    }
    if let Some(retries) = config.max_evict_retries {
        non_negative(retries.into(), &format!("{path}.maxEvictRetries"), causes);
    }
}

fn validate_selector_and_template(
    selector: Option<&LabelSelector>,
    template: &MachineTemplateSpec,
    causes: &mut Vec<Cause>,
) {
    let no_labels = BTreeMap::new();
    let labels = template.metadata.labels.as_ref().unwrap_or(&no_labels);
    let selector = selector.filter(|s| !selector_is_empty(s));
    match selector {
        // Upstream's controllers treat an empty selector as "select
        // nothing"; apps/v1 rejects it outright, and so do we.
        None => causes.push(Cause::new(
            "FieldValueRequired",
            "spec.selector",
            "Required value: an empty selector is invalid",
        )),
        Some(selector) => {
            let before = causes.len();
            validate_selector_syntax(selector, causes);
            if causes.len() == before && !selector_matches(selector, labels) {
                causes.push(invalid(
                    "spec.template.metadata.labels",
                    &format_labels(labels),
                    "`selector` does not match template `labels`",
                ));
            }
        }
    }
    validate_machine_spec(&template.spec, "spec.template.spec", causes);
}

fn selector_is_empty(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

fn validate_selector_syntax(selector: &LabelSelector, causes: &mut Vec<Cause>) {
    let expressions = selector.match_expressions.as_deref().unwrap_or_default();
    for (i, expr) in expressions.iter().enumerate() {
        let path = format!("spec.selector.matchExpressions[{i}]");
        let has_values = expr.values.as_ref().is_some_and(|v| !v.is_empty());
        if expr.key.is_empty() {
            causes.push(Cause::required(format!("{path}.key")));
        }
        match expr.operator.as_str() {
            "In" | "NotIn" if !has_values => causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.values"),
                "Required value: must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if has_values => causes.push(Cause::new(
                "FieldValueForbidden",
                format!("{path}.values"),
                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => causes.push(not_supported(
                format!("{path}.operator"),
                other,
                &["In", "NotIn", "Exists", "DoesNotExist"],
            )),
        }
    }
}

/// Whether a (syntactically valid) selector selects a set of labels.
fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let match_labels = selector.match_labels.iter().flatten();
    let labels_ok = match_labels
        .into_iter()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions = selector.match_expressions.iter().flatten();
    let expressions_ok = expressions.into_iter().all(|expr| {
        let value = labels.get(&expr.key);
        let in_values = |v: &String| expr.values.iter().flatten().any(|x| x == v);
        match expr.operator.as_str() {
            "In" => value.is_some_and(in_values),
            "NotIn" => !value.is_some_and(in_values),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

fn validate_strategy(strategy: &MachineDeploymentStrategy, causes: &mut Vec<Cause>) {
    const TYPES: [&str; 3] = ["Recreate", "RollingUpdate", "InPlaceUpdate"];
    match strategy.type_ {
        None => causes.push(Cause::new(
            "FieldValueRequired",
            "spec.strategy.type",
            format!("Required value: supported values: {}", quote_all(&TYPES)),
        )),
        Some(MachineDeploymentStrategyType::Recreate) => {}
        Some(MachineDeploymentStrategyType::RollingUpdate) => match &strategy.rolling_update {
            None => causes.push(Cause::required("spec.strategy.rollingUpdate")),
            Some(rolling) => {
                let path = "spec.strategy.rollingUpdate";
                validate_bounds(&rolling.max_surge, &rolling.max_unavailable, path, causes);
            }
        },
        Some(MachineDeploymentStrategyType::InPlaceUpdate) => match &strategy.in_place_update {
            None => causes.push(Cause::required("spec.strategy.inPlaceUpdate")),
            Some(in_place) => {
                let path = "spec.strategy.inPlaceUpdate";
                validate_bounds(&in_place.max_surge, &in_place.max_unavailable, path, causes);
                if in_place.orchestration_type.is_none() {
                    causes.push(Cause::new(
                        "FieldValueRequired",
                        format!("{path}.orchestrationType"),
                        "Required value: supported values: \"Auto\", \"Manual\"",
                    ));
                }
            }
        },
    }
}

fn validate_bounds(
    surge: &Option<IntOrString>,
    unavailable: &Option<IntOrString>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    match surge {
        None => causes.push(Cause::required(format!("{path}.maxSurge"))),
        Some(v) => validate_int_or_percent(v, &format!("{path}.maxSurge"), false, causes),
    }
    match unavailable {
        None => causes.push(Cause::required(format!("{path}.maxUnavailable"))),
        Some(v) => validate_int_or_percent(v, &format!("{path}.maxUnavailable"), true, causes),
    }
    let is_zero = |v: &Option<IntOrString>| match v {
        Some(IntOrString::Int(0)) => true,
        Some(IntOrString::String(s)) => parse_percent(s) == Some(0),
        _ => false,
    };
    if is_zero(surge) && is_zero(unavailable) {
        causes.push(Cause::invalid(
            format!("{path}.maxUnavailable"),
            "may not be 0 when `maxSurge` is 0",
        ));
    }
}

/// A count must be non-negative; a string must be `<digits>%`. Only
/// unavailability is capped at 100%: a surge of 200% is meaningful, as in
/// apps/v1.
fn validate_int_or_percent(value: &IntOrString, field: &str, cap: bool, causes: &mut Vec<Cause>) {
    match value {
        IntOrString::Int(n) => non_negative((*n).into(), field, causes),
        IntOrString::String(s) => match parse_percent(s) {
            None => causes.push(invalid(
                field,
                &quoted(s),
                "a valid percent string must be a numeric string followed by an ending '%' \
                 (e.g. '1%', or '93%', regex used for validation is '[0-9]+%')",
            )),
            Some(p) if cap && p > 100 => {
                causes.push(invalid(field, &quoted(s), "must not be greater than 100%"))
            }
            Some(_) => {}
        },
    }
}

/// `"25%"` → 25; `None` unless the string is digits followed by `%`.
pub(crate) fn parse_percent(s: &str) -> Option<u32> {
    let digits = s.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn validate_class_node_template(template: &NodeTemplate, causes: &mut Vec<Cause>) {
    for resource in ["cpu", "gpu", "memory"] {
        if !template.capacity.contains_key(resource) {
            causes.push(Cause::required(format!(
                "nodeTemplate.capacity[{resource}]"
            )));
        }
    }
    let fields = [
        ("instanceType", &template.instance_type),
        ("region", &template.region),
        ("zone", &template.zone),
    ];
    for (name, value) in fields {
        if value.is_empty() {
            causes.push(Cause::required(format!("nodeTemplate.{name}")));
        }
    }
}

fn validate_secret_ref(reference: Option<&SecretReference>, path: &str, causes: &mut Vec<Cause>) {
    let Some(reference) = reference else { return };
    match reference.name.as_deref() {
        None | Some("") => causes.push(Cause::required(format!("{path}.name"))),
        Some(name) => {
            if let Err(detail) = dns1123_subdomain(name) {
                causes.push(invalid(format!("{path}.name"), &quoted(name), &detail));
            }
        }
    }
}

fn validate_object_meta(meta: &ObjectMeta, causes: &mut Vec<Cause>) {
    match (meta.name.as_deref(), meta.generate_name.as_deref()) {
        (Some(name), _) if !name.is_empty() => {
            if let Err(detail) = dns1123_subdomain(name) {
                causes.push(invalid("metadata.name", &quoted(name), &detail));
            }
        }
        (_, Some(prefix)) if !prefix.is_empty() => {
            // Like Kubernetes, a prefix may end in '-': the random suffix
            // makes the final name valid.
            let masked = match prefix.strip_suffix('-') {
                Some(rest) => format!("{rest}a"),
                None => prefix.to_string(),
            };
            if let Err(detail) = dns1123_subdomain(&masked) {
                causes.push(invalid("metadata.generateName", &quoted(prefix), &detail));
            }
        }
        _ => causes.push(Cause::new(
            "FieldValueRequired",
            "metadata.name",
            "Required value: name or generateName is required",
        )),
    }
}

/// Checks an RFC 1123 subdomain (the rule for most object names): at most
/// 253 characters, dot-separated labels of lower-case letters, digits and
/// '-' that start and end alphanumerically.
fn dns1123_subdomain(name: &str) -> Result<(), String> {
    const MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
        alphanumeric characters, '-' or '.', and must start and end with an alphanumeric \
        character (e.g. 'example.com', regex used for validation is \
        '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    if name.len() > 253 {
        return Err("must be no more than 253 characters".to_string());
    }
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        !bytes.is_empty()
            && alnum(&bytes[0])
            && alnum(&bytes[bytes.len() - 1])
            && bytes.iter().all(|b| alnum(b) || *b == b'-')
    };
    if name.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(MESSAGE.to_string())
    }
}

fn non_negative(value: i64, field: &str, causes: &mut Vec<Cause>) {
    if value < 0 {
        causes.push(invalid(
            field,
            &value.to_string(),
            "must be greater than or equal to 0",
        ));
    }
}

/// A `FieldValueInvalid` cause worded like Kubernetes' field errors.
fn invalid(field: impl Into<String>, value: &str, detail: &str) -> Cause {
    Cause::invalid(field, format!("Invalid value: {value}: {detail}"))
}

fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Cause {
    Cause::new(
        "FieldValueNotSupported",
        field,
        format!(
            "Unsupported value: {}: supported values: {}",
            quoted(value),
            quote_all(supported)
        ),
    )
}

fn quoted(s: &str) -> String {
    format!("{s:?}")
}

fn quote_all(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| quoted(v))
        .collect::<Vec<_>>()
        .join(", ")
}

fn format_labels(labels: &BTreeMap<String, String>) -> String {
    let pairs = labels
        .iter()
        .map(|(k, v)| format!("{}:{}", quoted(k), quoted(v)))
        .collect::<Vec<_>>();
    format!("map[string]string{{{}}}", pairs.join(", "))
}

#[cfg(test)]
mod tests;
