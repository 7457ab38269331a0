//! Workloads (Deployments, ReplicaSets and StatefulSets): non-negative
//! replicas, a selector that is not empty and matches the pod template's
//! labels, kube's defaults, and `generation`.

use std::marker::PhantomData;

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde_json::{Map, Value, json};

use crate::storage::registry::{Resource, Strategy};

/// What the checks need of a workload kind's spec.
pub trait WorkloadSpec: serde::de::DeserializeOwned {
    /// `(replicas, selector, template metadata)`, or `None` without a spec.
    fn parts(&self) -> Option<(Option<i32>, &LabelSelector, Option<&ObjectMeta>)>;
}

impl WorkloadSpec for apps::Deployment {
    fn parts(&self) -> Option<(Option<i32>, &LabelSelector, Option<&ObjectMeta>)> {
        self.spec
            .as_ref()
            .map(|s| (s.replicas, &s.selector, s.template.metadata.as_ref()))
    }
}

impl WorkloadSpec for apps::StatefulSet {
    fn parts(&self) -> Option<(Option<i32>, &LabelSelector, Option<&ObjectMeta>)> {
        self.spec
            .as_ref()
            .map(|s| (s.replicas, &s.selector, s.template.metadata.as_ref()))
    }
}

impl WorkloadSpec for apps::ReplicaSet {
    fn parts(&self) -> Option<(Option<i32>, &LabelSelector, Option<&ObjectMeta>)> {
        self.spec.as_ref().map(|s| {
            (
                s.replicas,
                &s.selector,
                s.template.as_ref().and_then(|t| t.metadata.as_ref()),
            )
        })
    }
}

/// A workload kind `T`.
pub struct Workload<T> {
    defaults: fn(&mut Map<String, Value>),
    kind: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Workload<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Workload<{}>", std::any::type_name::<T>())
    }
}

pub static DEPLOYMENT: Workload<apps::Deployment> = Workload {
    defaults: super::defaults::deployment,
    kind: PhantomData,
};
pub static REPLICA_SET: Workload<apps::ReplicaSet> = Workload {
    defaults: super::defaults::replica_set,
    kind: PhantomData,
};
pub static STATEFUL_SET: Workload<apps::StatefulSet> = Workload {
    defaults: super::defaults::stateful_set,
    kind: PhantomData,
};

impl<T: WorkloadSpec> Strategy for Workload<T> {
    fn has_generation(&self) -> bool {
        true
    }

    fn apply_defaults(&self, _res: &Resource, obj: &mut Value) {
        super::defaults::on(obj, self.defaults);
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        let w = super::typed::<T>(obj)?;
        let mut causes = Vec::new();
        match w.parts() {
            Some((replicas, selector, template)) => {
                workload_checks(replicas, selector, template, &mut causes)
            }
            None => causes.push(Cause::required("spec")),
        }
        Ok(causes)
    }
}

fn workload_checks(
    replicas: Option<i32>,
    selector: &LabelSelector,
    template_meta: Option<&ObjectMeta>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn res() -> Resource {
        crate::strategy::resources()
            .into_iter()
            .find(|r| r.kind == "Deployment")
            .unwrap()
    }

    #[test]
    fn selectors_must_match_the_template_and_replicas_be_positive() {
        let good = json!({"metadata": {"name": "d"}, "spec": {
            "replicas": 1, "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}}}});
        assert!(DEPLOYMENT.validate(&res(), &good).unwrap().is_empty());
        let mut bad = good.clone();
        bad["spec"]["replicas"] = json!(-1);
        bad["spec"]["template"]["metadata"]["labels"]["app"] = json!("b");
        let fields: Vec<String> = DEPLOYMENT
            .validate(&res(), &bad)
            .unwrap()
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["spec.replicas", "spec.template.metadata.labels"]);
        let none = json!({"metadata": {"name": "d"}});
        assert_eq!(DEPLOYMENT.validate(&res(), &none).unwrap()[0].field, "spec");
    }
}
