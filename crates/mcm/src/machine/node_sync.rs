//! Node sync (spec §2.3): the machine's node template, its machine-name
//! label and the node finalizer kept on its node, as one merge patch.

use std::collections::BTreeMap;

use api::{NodeTemplateSpec, labels};
use k8s_openapi::api::core::v1::{Node, Taint};
use serde_json::{Map, Value, json};

use super::{annotation, label};

/// The node template as recorded in the node's last-applied annotation:
/// only labels, annotations and taints, the parts that are synchronized.
fn applied_template(t: &NodeTemplateSpec) -> NodeTemplateSpec {
    let mut out = NodeTemplateSpec::default();
    out.metadata.labels = t.metadata.labels.clone().filter(|l| !l.is_empty());
    out.metadata.annotations = t.metadata.annotations.clone().filter(|a| !a.is_empty());
    out.spec.taints = t.spec.taints.clone().filter(|t| !t.is_empty());
    out
}

/// The node template last applied to `node`, from its annotation. An
/// unreadable annotation counts as none: foreign keys are then never
/// removed, only desired ones added, which is the safe direction.
pub fn last_applied_template(node: &Node) -> Option<NodeTemplateSpec> {
    annotation(&node.metadata, labels::LAST_APPLIED_ANNO_LABELS_TAINTS)
        .and_then(|v| serde_json::from_str(v).ok())
}

/// Desired values for a string map: set what differs, null what was applied
/// before and is no longer desired (and is still present).
fn map_patch(
    have: Option<&BTreeMap<String, String>>,
    want: Option<&BTreeMap<String, String>>,
    applied: Option<&BTreeMap<String, String>>,
    out: &mut Map<String, Value>,
) {
    let empty = BTreeMap::new();
    let have = have.unwrap_or(&empty);
    let want = want.unwrap_or(&empty);
    for (k, v) in want {
        if have.get(k) != Some(v) {
            out.insert(k.clone(), Value::String(v.clone()));
        }
    }
    for k in applied.unwrap_or(&empty).keys() {
        if !want.contains_key(k) && have.contains_key(k) {
            out.insert(k.clone(), Value::Null);
        }
    }
}

/// The node's taints after sync: taints last applied and no longer desired
/// are removed (by key and effect), desired ones added or updated, others
/// kept in place.
fn synced_taints(have: &[Taint], want: &[Taint], applied: &[Taint]) -> Vec<Taint> {
    let same = |a: &Taint, b: &Taint| a.key == b.key && a.effect == b.effect;
    let mut out: Vec<Taint> = have
        .iter()
        // Kept unless we applied it and no longer want it.
        .filter(|t| !applied.iter().any(|a| same(a, t)) || want.iter().any(|w| same(w, t)))
        .cloned()
        .collect();
    for w in want {
        match out.iter_mut().find(|t| same(t, w)) {
            Some(t) if t.value == w.value => {}
            Some(t) => *t = w.clone(),
            None => out.push(w.clone()),
        }
    }
    out
}

/// The merge patch that brings `node` in line with the machine's node
/// template (spec §2.3), given what was applied last time; `None` when the
/// node already matches. The taint list is written whole, so the caller
/// must guard the patch with the node's resourceVersion.
pub fn node_template_patch(
    node: &Node,
    template: &NodeTemplateSpec,
    last_applied: Option<&NodeTemplateSpec>,
) -> Option<Value> {
    let want = applied_template(template);
    let mut labels_out = Map::new();
    map_patch(
        node.metadata.labels.as_ref(),
        want.metadata.labels.as_ref(),
        last_applied.and_then(|a| a.metadata.labels.as_ref()),
        &mut labels_out,
    );
    let mut ann_out = Map::new();
    map_patch(
        node.metadata.annotations.as_ref(),
        want.metadata.annotations.as_ref(),
        last_applied.and_then(|a| a.metadata.annotations.as_ref()),
        &mut ann_out,
    );
    // The record itself is ours, whatever the template says.
    ann_out.remove(labels::LAST_APPLIED_ANNO_LABELS_TAINTS);
    let have_taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let taints = synced_taints(
        &have_taints,
        want.spec.taints.as_deref().unwrap_or(&[]),
        last_applied
            .and_then(|a| a.spec.taints.as_deref())
            .unwrap_or(&[]),
    );
    let record_current = last_applied.map(applied_template).as_ref() == Some(&want)
        || (last_applied.is_none() && want == NodeTemplateSpec::default());
    if !record_current {
        let record = serde_json::to_string(&want).unwrap_or_default();
        ann_out.insert(
            labels::LAST_APPLIED_ANNO_LABELS_TAINTS.to_string(),
            Value::String(record),
        );
    }
    let mut patch = json!({});
    if !labels_out.is_empty() {
        patch["metadata"]["labels"] = Value::Object(labels_out);
    }
    if !ann_out.is_empty() {
        patch["metadata"]["annotations"] = Value::Object(ann_out);
    }
    if taints != have_taints {
        patch["spec"] = json!({ "taints": taints });
    }
    (patch != json!({})).then_some(patch)
}

/// Everything the machine controller keeps on a healthy machine's node, as
/// one merge patch: the node template, the `machine-name` label, and the
/// node finalizer (only when `finalizer` — the node maps to exactly one
/// non-deleting machine). `None` when the node already has it all.
pub fn node_sync_patch(
    node: &Node,
    machine_name: &str,
    template: &NodeTemplateSpec,
    finalizer: bool,
) -> Option<Value> {
    let last = last_applied_template(node);
    let mut patch = node_template_patch(node, template, last.as_ref()).unwrap_or(json!({}));
    if label(&node.metadata, labels::NODE_MACHINE_NAME) != Some(machine_name) {
        patch["metadata"]["labels"][labels::NODE_MACHINE_NAME] =
            Value::String(machine_name.to_string());
    }
    let fins = node.metadata.finalizers.clone().unwrap_or_default();
    if finalizer && !fins.iter().any(|f| f == labels::NODE_FINALIZER) {
        let mut f = fins;
        f.push(labels::NODE_FINALIZER.to_string());
        patch["metadata"]["finalizers"] = json!(f);
    }
    if patch == json!({}) {
        return None;
    }
    patch["metadata"]["resourceVersion"] = json!(node.metadata.resource_version);
    Some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::test_support::node;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn template(labels: &[(&str, &str)], taints: Vec<Taint>) -> NodeTemplateSpec {
        let mut t = NodeTemplateSpec::default();
        t.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        t.spec.taints = Some(taints);
        t
    }

    #[test]
    fn node_template_sync() {
        let mut n = node(&[]);
        n.metadata.labels = Some(BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "1".to_string()),
            ("foreign".to_string(), "x".to_string()),
        ]));
        n.spec.as_mut().unwrap().taints = Some(vec![
            taint("t1", "v", "NoSchedule"),
            taint("t2", "v", "NoSchedule"),
            taint("foreign", "v", "NoExecute"),
        ]);
        let applied = template(
            &[("a", "1"), ("b", "1")],
            vec![
                taint("t1", "v", "NoSchedule"),
                taint("t2", "v", "NoSchedule"),
            ],
        );
        // b and t2 dropped from the template, a changed, c and t3 added.
        let want = template(
            &[("a", "2"), ("c", "3")],
            vec![
                taint("t1", "v", "NoSchedule"),
                taint("t3", "w", "NoExecute"),
            ],
        );
        let p = node_template_patch(&n, &want, Some(&applied)).unwrap();
        assert_eq!(
            p["metadata"]["labels"],
            json!({"a": "2", "b": null, "c": "3"})
        );
        let taints: Vec<Taint> = serde_json::from_value(p["spec"]["taints"].clone()).unwrap();
        let keys: Vec<&str> = taints.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["t1", "foreign", "t3"]);
        let record: NodeTemplateSpec = serde_json::from_str(
            p["metadata"]["annotations"][labels::LAST_APPLIED_ANNO_LABELS_TAINTS]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(record, applied_template(&want));

        // Without a record, nothing foreign is removed.
        let p = node_template_patch(&n, &want, None).unwrap();
        assert_eq!(p["metadata"]["labels"], json!({"a": "2", "c": "3"}));

        // In sync: no patch.
        let mut synced = n.clone();
        synced.metadata.labels = Some(BTreeMap::from([("a".to_string(), "1".to_string())]));
        synced.spec.as_mut().unwrap().taints = Some(vec![taint("t1", "v", "NoSchedule")]);
        let t = template(&[("a", "1")], vec![taint("t1", "v", "NoSchedule")]);
        synced.metadata.annotations = Some(BTreeMap::from([(
            labels::LAST_APPLIED_ANNO_LABELS_TAINTS.to_string(),
            serde_json::to_string(&applied_template(&t)).unwrap(),
        )]));
        assert_eq!(
            node_template_patch(&synced, &t, last_applied_template(&synced).as_ref()),
            None
        );
        // An empty template on an untouched node needs nothing either.
        assert_eq!(
            node_template_patch(&node(&[]), &NodeTemplateSpec::default(), None),
            None
        );
    }

    #[test]
    fn node_sync_adds_finalizer_and_machine_label_guarded_by_version() {
        let n = node(&[]);
        let p = node_sync_patch(&n, "m1", &NodeTemplateSpec::default(), true).unwrap();
        assert_eq!(p["metadata"]["labels"][labels::NODE_MACHINE_NAME], "m1");
        assert_eq!(p["metadata"]["finalizers"], json!([labels::NODE_FINALIZER]));
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        let p = node_sync_patch(&n, "m1", &NodeTemplateSpec::default(), false).unwrap();
        assert!(p["metadata"].get("finalizers").is_none());
        let mut done = n.clone();
        done.metadata.labels = Some(BTreeMap::from([(
            labels::NODE_MACHINE_NAME.to_string(),
            "m1".to_string(),
        )]));
        done.metadata.finalizers = Some(vec![labels::NODE_FINALIZER.to_string()]);
        assert_eq!(
            node_sync_patch(&done, "m1", &NodeTemplateSpec::default(), true),
            None
        );
    }
}
