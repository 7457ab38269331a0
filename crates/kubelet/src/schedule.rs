//! The scheduler step: whether an unscheduled pod fits the runtime's node,
//! as a user of kube-scheduler would expect for one node: `nodeName`,
//! `nodeSelector`, required node affinity (`matchExpressions` with `In`,
//! `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`; `matchFields` on
//! `metadata.name`), tolerations against the node's `NoSchedule` and
//! `NoExecute` taints, and `spec.unschedulable`. Pure and table-tested.
//!
//! Not considered: resource requests (the node has what the machine has),
//! pod (anti-)affinity and topology spread (there is one node), preferred
//! terms (they cannot change the answer with one node), and pods that name
//! another `schedulerName`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};

/// Why a pod does not fit, in the words of kube-scheduler's
/// `FailedScheduling` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Misfit {
    /// Not ours to schedule: bound already, deleted, or another scheduler.
    NotOurs,
    NodeSelector,
    Affinity,
    Taint(String),
    Unschedulable,
}

impl std::fmt::Display for Misfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Misfit::NotOurs => write!(f, "not for this scheduler"),
            Misfit::NodeSelector | Misfit::Affinity => {
                write!(
                    f,
                    "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
                )
            }
            Misfit::Taint(t) => write!(
                f,
                "0/1 nodes are available: 1 node(s) had untolerated taint {{{t}}}."
            ),
            Misfit::Unschedulable => {
                write!(f, "0/1 nodes are available: 1 node(s) were unschedulable.")
            }
        }
    }
}

/// The scheduler names the runtime answers for.
fn our_scheduler(name: Option<&str>) -> bool {
    matches!(name, None | Some("") | Some("default-scheduler"))
}

/// Whether `pod` should be bound to `node`.
pub fn fits(pod: &Pod, node: &Node) -> Result<(), Misfit> {
    let Some(spec) = pod.spec.as_ref() else {
        return Err(Misfit::NotOurs);
    };
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty())
        || pod.metadata.deletion_timestamp.is_some()
        || !our_scheduler(spec.scheduler_name.as_deref())
        || matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
    {
        return Err(Misfit::NotOurs);
    }
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    if let Some(sel) = &spec.node_selector
        && !sel.iter().all(|(k, v)| labels.get(k) == Some(v))
    {
        return Err(Misfit::NodeSelector);
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    if let Some(required) = required {
        // Terms are ORed; an empty list matches nothing, as upstream.
        if !required
            .node_selector_terms
            .iter()
            .any(|t| term_matches(t, labels, node_name))
        {
            return Err(Misfit::Affinity);
        }
    }
    let tolerations = spec.tolerations.as_deref().unwrap_or(&[]);
    let node_spec = node.spec.as_ref();
    if node_spec.and_then(|s| s.unschedulable).unwrap_or(false) {
        let t = Taint {
            key: "node.kubernetes.io/unschedulable".into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        };
        if !tolerated(&t, tolerations) {
            return Err(Misfit::Unschedulable);
        }
    }
    for taint in node_spec.and_then(|s| s.taints.as_deref()).unwrap_or(&[]) {
        if matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerated(taint, tolerations)
        {
            let value = taint.value.as_deref().unwrap_or("");
            let shown = if value.is_empty() {
                taint.key.clone()
            } else {
                format!("{}: {value}", taint.key)
            };
            return Err(Misfit::Taint(shown));
        }
    }
    Ok(())
}

/// A term's requirements are ANDed; a term with none matches nothing.
fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then_some(name);
            requirement(r, value)
        })
}

fn requirement(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or(&[]);
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => !value.is_some_and(|v| values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), Some(bound)) = (
                value.and_then(number),
                values.first().and_then(|s| number(s)),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

/// Upstream `Toleration.ToleratesTaint`.
pub fn tolerated(taint: &Taint, tolerations: &[Toleration]) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == taint.effect);
        let key = t.key.as_deref().unwrap_or("");
        let key_ok = key.is_empty() || key == taint.key;
        let value_ok = match t.operator.as_deref().unwrap_or("Equal") {
            "Exists" => true,
            "Equal" | "" => {
                t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
            }
            _ => false,
        };
        // An empty key with Exists tolerates everything; with Equal, nothing.
        effect_ok
            && key_ok
            && value_ok
            && (!key.is_empty() || t.operator.as_deref() == Some("Exists"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: serde_json::Value, taints: serde_json::Value, unschedulable: bool) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "box", "labels": labels},
            "spec": {"taints": taints, "unschedulable": unschedulable},
        }))
        .unwrap()
    }

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c", "image": "trellis.dev/exec"}]);
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    #[test]
    fn fit_table() {
        let plain = node(
            json!({"kubernetes.io/hostname": "box", "disk": "ssd", "gen": "5"}),
            json!([]),
            false,
        );
        let tainted = node(
            json!({}),
            json!([{"key": "dedicated", "value": "etcd", "effect": "NoSchedule"},
                   {"key": "soft", "effect": "PreferNoSchedule"}]),
            false,
        );
        let cordoned = node(json!({}), json!([]), true);
        let expr = |key: &str, op: &str, values: serde_json::Value| {
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": op, "values": values}]}]}}}})
        };
        let cases: Vec<(&str, &Node, serde_json::Value, Result<(), Misfit>)> = vec![
            ("no constraints", &plain, json!({}), Ok(())),
            (
                "bound elsewhere",
                &plain,
                json!({"nodeName": "sim-1"}),
                Err(Misfit::NotOurs),
            ),
            (
                "other scheduler",
                &plain,
                json!({"schedulerName": "custom"}),
                Err(Misfit::NotOurs),
            ),
            (
                "selector matches",
                &plain,
                json!({"nodeSelector": {"disk": "ssd"}}),
                Ok(()),
            ),
            (
                "selector misses",
                &plain,
                json!({"nodeSelector": {"disk": "hdd"}}),
                Err(Misfit::NodeSelector),
            ),
            (
                "selector on a worker pool label",
                &plain,
                json!({"nodeSelector": {"worker.gardener.cloud/pool": "a"}}),
                Err(Misfit::NodeSelector),
            ),
            (
                "In",
                &plain,
                expr("disk", "In", json!(["ssd", "nvme"])),
                Ok(()),
            ),
            (
                "NotIn",
                &plain,
                expr("disk", "NotIn", json!(["ssd"])),
                Err(Misfit::Affinity),
            ),
            (
                "NotIn absent key",
                &plain,
                expr("zone", "NotIn", json!(["a"])),
                Ok(()),
            ),
            (
                "Exists",
                &plain,
                expr("disk", "Exists", json!(null)),
                Ok(()),
            ),
            (
                "DoesNotExist",
                &plain,
                expr("disk", "DoesNotExist", json!(null)),
                Err(Misfit::Affinity),
            ),
            ("Gt", &plain, expr("gen", "Gt", json!(["4"])), Ok(())),
            (
                "Lt",
                &plain,
                expr("gen", "Lt", json!(["4"])),
                Err(Misfit::Affinity),
            ),
            (
                "Gt not a number",
                &plain,
                expr("disk", "Gt", json!(["4"])),
                Err(Misfit::Affinity),
            ),
            (
                "matchFields name",
                &plain,
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["box"]}]}]}}}}),
                Ok(()),
            ),
            (
                "empty term matches nothing",
                &plain,
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{}]}}}}),
                Err(Misfit::Affinity),
            ),
            (
                "untolerated taint",
                &tainted,
                json!({}),
                Err(Misfit::Taint("dedicated: etcd".into())),
            ),
            (
                "tolerated by value",
                &tainted,
                json!({"tolerations": [{"key": "dedicated", "value": "etcd", "effect": "NoSchedule"}]}),
                Ok(()),
            ),
            (
                "wrong value",
                &tainted,
                json!({"tolerations": [{"key": "dedicated", "value": "web"}]}),
                Err(Misfit::Taint("dedicated: etcd".into())),
            ),
            (
                "Exists on the key",
                &tainted,
                json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
                Ok(()),
            ),
            (
                "Exists on everything",
                &tainted,
                json!({"tolerations": [{"operator": "Exists"}]}),
                Ok(()),
            ),
            (
                "other effect",
                &tainted,
                json!({"tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]}),
                Err(Misfit::Taint("dedicated: etcd".into())),
            ),
            ("cordoned", &cordoned, json!({}), Err(Misfit::Unschedulable)),
            (
                "cordoned, tolerated",
                &cordoned,
                json!({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}),
                Ok(()),
            ),
        ];
        for (name, node, spec, want) in cases {
            assert_eq!(fits(&pod(spec), node), want, "{name}");
        }
    }

    #[test]
    fn finished_and_deleted_pods_are_not_scheduled() {
        let n = node(json!({}), json!([]), false);
        let mut p = pod(json!({}));
        p.status = Some(serde_json::from_value(json!({"phase": "Failed"})).unwrap());
        assert_eq!(fits(&p, &n), Err(Misfit::NotOurs));
        let mut p = pod(json!({}));
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert_eq!(fits(&p, &n), Err(Misfit::NotOurs));
        let no_spec = Pod::default();
        assert_eq!(fits(&no_spec, &n), Err(Misfit::NotOurs));
    }
}
