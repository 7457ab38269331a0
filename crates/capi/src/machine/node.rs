//! Phase 4 of the Machine's plan, the Node: finding it by providerID,
//! `nodeRef` once it is Ready, the `NodeHealthy` condition from its
//! conditions, and the labels, annotations and taints synced onto it.

use std::collections::BTreeMap;

use super::*;

/// Whether the Node's `Ready` condition is True.
pub fn node_ready(node: &Node) -> bool {
    node_condition(node, "Ready") == Some("True")
}

pub(super) fn node_condition<'a>(node: &'a Node, type_: &str) -> Option<&'a str> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .map(|c| c.status.as_str())
}

/// Upstream's `NodeHealthy` summary of `Ready` and the pressure conditions.
fn node_health(node: &Node) -> crate::types::Condition {
    let ready = node_condition(node, "Ready");
    let pressures = ["MemoryPressure", "DiskPressure", "PIDPressure"];
    let mut bad: Vec<String> = Vec::new();
    match ready {
        Some("False") => bad.push("Node condition Ready is False".into()),
        None => bad.push("Node condition Ready is missing".into()),
        _ => {}
    }
    for t in pressures {
        if node_condition(node, t) == Some("True") {
            bad.push(format!("Node condition {t} is True"));
        }
    }
    let all_unknown = std::iter::once("Ready")
        .chain(pressures)
        .all(|t| node_condition(node, t) == Some("Unknown"));
    if !bad.is_empty() {
        cond::false_(
            ct::NODE_HEALTHY,
            reasons::NODE_CONDITIONS_FAILED,
            severity::WARNING,
            bad.join("; "),
        )
    } else if all_unknown {
        cond::unknown(
            ct::NODE_HEALTHY,
            reasons::NODE_CONDITIONS_FAILED,
            "Node conditions are Unknown",
        )
    } else {
        cond::true_(ct::NODE_HEALTHY)
    }
}

/// The labels, annotations and taints the Machine controller keeps on its
/// Node, as a merge patch, or `None` when they are in place.
pub fn node_sync_patch(m: &Machine, node: &Node) -> Option<Value> {
    let mut annotations: BTreeMap<String, String> = BTreeMap::from([
        (
            labels::NODE_CLUSTER_NAME.into(),
            m.spec.cluster_name.clone(),
        ),
        (labels::NODE_CLUSTER_NAMESPACE.into(), m.namespace().into()),
        (labels::NODE_MACHINE.into(), m.name().into()),
    ]);
    if let Some(owner) = meta::controller_of(&m.metadata) {
        annotations.insert(labels::NODE_OWNER_KIND.into(), owner.kind.clone());
        annotations.insert(labels::NODE_OWNER_NAME.into(), owner.name.clone());
    }
    for (k, v) in m.metadata.annotations.iter().flatten() {
        if labels::in_domain(k, "node.cluster.x-k8s.io") {
            annotations.insert(k.clone(), v.clone());
        }
    }
    let synced: BTreeMap<String, String> = m
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| {
            labels::in_domain(k, "node-role.kubernetes.io")
                || labels::in_domain(k, "node-restriction.kubernetes.io")
                || labels::in_domain(k, "node.cluster.x-k8s.io")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let tracked = synced.keys().cloned().collect::<Vec<_>>().join(",");
    annotations.insert(labels::NODE_LABELS_FROM_MACHINE.into(), tracked);
    // Labels synced before but no longer on the Machine are removed.
    let previously: Vec<String> = annotation(&node.metadata, labels::NODE_LABELS_FROM_MACHINE)
        .unwrap_or_default()
        .split(',')
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .collect();
    let mut patch = json!({});
    if let Some(l) = meta::labels_patch(&node.metadata, &synced, &previously) {
        patch["metadata"]["labels"] = l;
    }
    let have = node.metadata.annotations.clone().unwrap_or_default();
    let ann: serde_json::Map<String, Value> = annotations
        .iter()
        .filter(|(k, v)| have.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    if !ann.is_empty() {
        patch["metadata"]["annotations"] = Value::Object(ann);
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if taints.iter().any(|t| t.key == labels::UNINITIALIZED_TAINT) {
        let kept: Vec<_> = taints
            .into_iter()
            .filter(|t| t.key != labels::UNINITIALIZED_TAINT)
            .collect();
        patch["spec"] = json!({"taints": kept});
    }
    if patch.as_object().is_some_and(|o| o.is_empty()) {
        return None;
    }
    // Optimistic lock: the kubelet also writes its Node.
    patch["metadata"]["resourceVersion"] = json!(node.metadata.resource_version);
    Some(patch)
}

/// Phase 4: the Node. `nodeRef` is set once a Node with the providerID is
/// Ready (seed 004); its labels, annotations and taints are kept.
pub(super) fn node(s: &Scope<'_>, p: &mut Plan) {
    let m = s.machine;
    let now = s.now;
    let deleting = m.metadata.deletion_timestamp.is_some();
    if matches!(s.node, NodeLookup::NoTarget) {
        return;
    }
    let provider_id = p
        .machine_patch
        .as_ref()
        .and_then(|v| v.pointer("/spec/providerID"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| m.spec.provider_id.clone())
        .filter(|s| !s.is_empty());
    if provider_id.is_none() {
        p.set(
            cond::false_(
                ct::NODE_HEALTHY,
                reasons::WAITING_FOR_NODE_REF,
                severity::INFO,
                "",
            ),
            now,
        );
        return;
    }
    match &s.node {
        NodeLookup::NoTarget => {}
        NodeLookup::Ambiguous(names) => {
            p.set(
                cond::unknown(
                    ct::NODE_HEALTHY,
                    reasons::NODE_INSPECTION_FAILED,
                    format!("More than one Node has the Machine's providerID: {names:?}"),
                ),
                now,
            );
            p.errors.push(format!(
                "more than one Node has providerID {provider_id:?}: {names:?}"
            ));
        }
        NodeLookup::NotFound => {
            if deleting {
                return;
            }
            if p.status.node_ref.is_some() {
                let name = p
                    .status
                    .node_ref
                    .as_ref()
                    .and_then(|r| r.name.clone())
                    .unwrap_or_default();
                p.set(
                    cond::false_(
                        ct::NODE_HEALTHY,
                        reasons::NODE_NOT_FOUND,
                        severity::ERROR,
                        format!("Node {name:?} has been deleted"),
                    ),
                    now,
                );
            } else {
                p.set(
                    cond::false_(
                        ct::NODE_HEALTHY,
                        reasons::NODE_PROVISIONING,
                        severity::WARNING,
                        "Waiting for a node with matching ProviderID to exist",
                    ),
                    now,
                );
            }
        }
        NodeLookup::Found(node) => {
            let name = node.metadata.name.clone().unwrap_or_default();
            if p.status.node_ref.is_none() && node_ready(node) {
                p.status.node_ref = Some(ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Node".into()),
                    name: Some(name.clone()),
                    uid: node.metadata.uid.clone(),
                    ..ObjectReference::default()
                });
                p.event(
                    false,
                    "SuccessfulSetNodeRef",
                    format!("Machine's Node {name:?} is Ready"),
                );
            }
            if let Some(info) = node.status.as_ref().and_then(|s| s.node_info.clone()) {
                p.status.node_info = Some(info);
            }
            if !deleting && let Some(patch) = node_sync_patch(m, node) {
                p.patch_node(patch);
            }
            let infra_gone = matches!(s.infra, Lookup::NotFound)
                || s.infra.found().is_some_and(contract::deleting);
            let health = if infra_gone {
                cond::false_(ct::NODE_HEALTHY, reasons::DELETING, severity::INFO, "")
            } else if p.status.node_ref.is_none() {
                cond::false_(
                    ct::NODE_HEALTHY,
                    reasons::NODE_PROVISIONING,
                    severity::WARNING,
                    format!("Waiting for Node {name:?} to become Ready"),
                )
            } else {
                node_health(node)
            };
            p.set(health, now);
        }
    }
}
