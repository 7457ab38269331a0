//! The Machine controller's executor: gathers the Machine's Cluster, its
//! bootstrap config and infrastructure object (through the dynamic
//! watches), the Node with its providerID, the health checks' verdicts and,
//! while deleting, the Node's pods; calls [`crate::machine::plan`]; and
//! applies the plan in a crash-safe order (every step is idempotent, and
//! the finalizer goes last).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use mcm::machine::{EvictRecord, PodAction};
use serde_json::{Value, json};

use super::dynamic::Fetched;
use super::{Context, Error, is_not_found};
use crate::machine::{DrainFacts, HealthVerdict, NodeLookup, Plan, Scope, plan};
use crate::types::labels::{self, conditions as ct};
use crate::types::{Machine, MachineHealthCheck};

/// The controller's name in events and logs.
pub const NAME: &str = "machine";

/// The health checks that target `m`, with their verdicts on it.
pub fn verdicts(m: &Machine, checks: &[Arc<MachineHealthCheck>]) -> Vec<HealthVerdict> {
    checks
        .iter()
        .filter(|c| c.metadata.namespace.as_deref() == m.metadata.namespace.as_deref())
        .filter_map(|c| {
            let status = c.status.as_ref()?;
            if !status.targets.iter().any(|t| t == m.name()) {
                return None;
            }
            Some(HealthVerdict {
                check: c.metadata.name.clone().unwrap_or_default(),
                unhealthy: status
                    .unhealthy_machines
                    .iter()
                    .find(|u| u.name == m.name())
                    .map(|u| (u.reason.clone(), u.message.clone())),
                remediation_allowed: crate::conditions::is_true(
                    &status.conditions,
                    ct::REMEDIATION_ALLOWED,
                ),
            })
        })
        .collect()
}

/// The Nodes with a providerID.
fn nodes_with(ctx: &Context, provider_id: &str) -> Vec<Arc<Node>> {
    ctx.nodes
        .as_ref()
        .map(|nodes| {
            nodes.state_filter(|n| {
                n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id)
            })
        })
        .unwrap_or_default()
}

/// The pods bound to a Node, in the drain's form, without those Cluster
/// API never drains (`cluster.x-k8s.io/drain=skip`).
async fn drain_facts(ctx: &Context, m: &Machine, node: &Node) -> Result<DrainFacts, Error> {
    let Some(target) = &ctx.target else {
        return Ok(DrainFacts::default());
    };
    let name = node.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::all(target.clone());
    let list = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={name}")))
        .await
        .map_err(|e| Error::api(format!("listing the pods of Node {name}"), e))?;
    let drained = list
        .items
        .iter()
        .filter(|p| crate::meta::label(&p.metadata, labels::DRAIN_LABEL) != Some("skip"))
        .filter_map(mcm::machine::drain_pod)
        .collect();
    let uid = m.metadata.uid.clone().unwrap_or_default();
    let records = ctx.evictions.lock().get(&uid).cloned().unwrap_or_default();
    Ok(DrainFacts {
        pods: drained,
        records,
    })
}

/// Reconciles one Machine.
pub async fn reconcile(m: Arc<Machine>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = super::key(m.as_ref());
    let result = reconcile_inner(&m, &ctx).await;
    if result.is_ok() {
        ctx.succeeded(&key);
    }
    result
}

async fn reconcile_inner(m: &Machine, ctx: &Context) -> Result<Action, Error> {
    let now = Utc::now();
    let ns = m.namespace().to_string();
    let cluster = ctx.cluster(&ns, &m.spec.cluster_name);
    let deleting = m.metadata.deletion_timestamp.is_some();
    let bootstrap = ctx
        .dynamic
        .get(m.spec.bootstrap.config_ref.as_ref(), &ns)
        .await
        .map_err(|e| Error::api("reading the bootstrap config", e))?;
    let infra = ctx
        .dynamic
        .get(Some(&m.spec.infrastructure_ref), &ns)
        .await
        .map_err(|e| Error::api("reading the infrastructure object", e))?;
    // The providerID this pass will know: the Machine's, or the one about
    // to be copied from ready infrastructure.
    let provider_id = m
        .spec
        .provider_id
        .clone()
        .or_else(|| infra.found().and_then(crate::contract::provider_id));
    let found_nodes = provider_id
        .as_deref()
        .map(|pid| nodes_with(ctx, pid))
        .unwrap_or_default();
    let node_lookup = match (&ctx.nodes, found_nodes.as_slice()) {
        (None, _) => NodeLookup::NoTarget,
        (Some(_), []) => NodeLookup::NotFound,
        (Some(_), [n]) => NodeLookup::Found(n),
        (Some(_), many) => NodeLookup::Ambiguous(
            many.iter()
                .map(|n| n.metadata.name.clone().unwrap_or_default())
                .collect(),
        ),
    };
    let drain = match (&node_lookup, deleting) {
        (NodeLookup::Found(node), true) => Some(drain_facts(ctx, m, node).await?),
        _ => None,
    };
    let other_control_plane_machines =
        if crate::meta::label(&m.metadata, labels::CONTROL_PLANE).is_some() {
            ctx.machines
                .state_filter(|o| {
                    o.namespace() == ns
                        && o.spec.cluster_name == m.spec.cluster_name
                        && o.name() != m.name()
                        && o.metadata.deletion_timestamp.is_none()
                        && crate::meta::label(&o.metadata, labels::CONTROL_PLANE).is_some()
                })
                .len()
        } else {
            0
        };
    let scope = Scope {
        machine: m,
        cluster: cluster.as_deref(),
        bootstrap: bootstrap.as_lookup(),
        infra: infra.as_lookup(),
        node: node_lookup.clone(),
        health: verdicts(m, &ctx.checks.state()),
        drain,
        other_control_plane_machines,
        now,
    };
    let pods: HashMap<String, (String, String)> = scope
        .drain
        .iter()
        .flat_map(|d| d.pods.iter())
        .map(|p| {
            (
                p.uid.clone(),
                (p.info.namespace.clone(), p.info.name.clone()),
            )
        })
        .collect();
    let p = plan(&scope);
    execute(ctx, m, &bootstrap, &infra, &node_lookup, &pods, p).await
}

fn machines(ctx: &Context, ns: &str) -> Api<Machine> {
    Api::namespaced(ctx.client.clone(), ns)
}

async fn patch_external(
    ctx: &Context,
    obj: &DynamicObjectRef<'_>,
    patch: &Value,
) -> Result<(), Error> {
    let ar = ctx
        .dynamic
        .resolve(obj.reference)
        .await
        .map_err(Error::Plan)?;
    let name = obj.object.metadata.name.clone().unwrap_or_default();
    ctx.dynamic
        .api(&ar, obj.namespace)
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
        .or_else(|e| if is_not_found(&e) { Ok(()) } else { Err(e) })
        .map_err(|e| Error::api(format!("patching {} {name}", ar.kind), e))
}

async fn delete_external(ctx: &Context, obj: &DynamicObjectRef<'_>) -> Result<(), Error> {
    let ar = ctx
        .dynamic
        .resolve(obj.reference)
        .await
        .map_err(Error::Plan)?;
    let name = obj.object.metadata.name.clone().unwrap_or_default();
    match ctx
        .dynamic
        .api(&ar, obj.namespace)
        .delete(&name, &DeleteParams::background())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(Error::api(format!("deleting {} {name}", ar.kind), e)),
    }
}

struct DynamicObjectRef<'a> {
    reference: &'a k8s_openapi::api::core::v1::ObjectReference,
    object: &'a kube::api::DynamicObject,
    namespace: &'a str,
}

/// Evicts (or deletes) the pods a drain round named, and remembers the
/// outcome for the next round.
async fn act_on_pods(
    ctx: &Context,
    m: &Machine,
    pods: &HashMap<String, (String, String)>,
    actions: &[PodAction],
) {
    let Some(target) = &ctx.target else {
        return;
    };
    let uid = m.metadata.uid.clone().unwrap_or_default();
    let now = Utc::now();
    for action in actions {
        let (pod_uid, force, evict) = match action {
            PodAction::Evict(u) => (u, false, true),
            PodAction::Delete(u) => (u, false, false),
            PodAction::ForceDelete(u) => (u, true, false),
        };
        let Some((pns, pname)) = pods.get(pod_uid) else {
            continue;
        };
        let api: Api<Pod> = Api::namespaced(target.clone(), pns);
        let outcome = if evict {
            api.evict(pname, &EvictParams::default()).await.map(|_| ())
        } else {
            let dp = DeleteParams {
                grace_period_seconds: force.then_some(0),
                ..DeleteParams::default()
            };
            api.delete(pname, &dp).await.map(|_| ())
        };
        let mut all = ctx.evictions.lock();
        let rec: &mut EvictRecord = all
            .entry(uid.clone())
            .or_default()
            .entry(pod_uid.clone())
            .or_default();
        rec.last_attempt = Some(now);
        match outcome {
            Ok(()) => rec.evicted_at = Some(now),
            Err(e) if is_not_found(&e) => rec.evicted_at = Some(now),
            Err(e) => {
                rec.attempts += 1;
                tracing::debug!(pod = %pname, error = %e, "eviction refused");
            }
        }
    }
}

fn finalizers_without(meta: &ObjectMeta, f: &str) -> Vec<String> {
    meta.finalizers
        .iter()
        .flatten()
        .filter(|x| *x != f)
        .cloned()
        .collect()
}

async fn execute(
    ctx: &Context,
    m: &Machine,
    bootstrap: &Fetched,
    infra: &Fetched,
    node: &NodeLookup<'_>,
    pods: &HashMap<String, (String, String)>,
    p: Plan,
) -> Result<Action, Error> {
    let ns = m.namespace().to_string();
    let name = m.name().to_string();
    let api = machines(ctx, &ns);
    if p.add_finalizer {
        let mut finalizers = m.metadata.finalizers.clone().unwrap_or_default();
        finalizers.push(labels::MACHINE_FINALIZER.to_string());
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": m.metadata.resource_version}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::api("adding the finalizer", e))?;
        return Ok(Action::await_change());
    }
    // Provider objects: owner references and labels.
    if let (Some(patch), Some(obj), Some(r)) = (
        &p.bootstrap_patch,
        bootstrap.found(),
        m.spec.bootstrap.config_ref.as_ref(),
    ) {
        patch_external(
            ctx,
            &DynamicObjectRef {
                reference: r,
                object: obj,
                namespace: &ns,
            },
            patch,
        )
        .await?;
    }
    if let (Some(patch), Some(obj)) = (&p.infra_patch, infra.found()) {
        let r = &m.spec.infrastructure_ref;
        patch_external(
            ctx,
            &DynamicObjectRef {
                reference: r,
                object: obj,
                namespace: &ns,
            },
            patch,
        )
        .await?;
    }
    if let Some(patch) = &p.machine_patch {
        api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| Error::api("patching the Machine", e))?;
    }
    if let (Some(patch), NodeLookup::Found(n), Some(target)) = (&p.node_patch, node, &ctx.target) {
        let node_name = n.metadata.name.clone().unwrap_or_default();
        let nodes: Api<Node> = Api::all(target.clone());
        match nodes
            .patch(&node_name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::api(format!("patching Node {node_name}"), e)),
        }
    }
    if !p.pod_actions.is_empty() {
        act_on_pods(ctx, m, pods, &p.pod_actions).await;
    }
    if p.delete_infra
        && let Some(obj) = infra.found()
    {
        let r = &m.spec.infrastructure_ref;
        delete_external(
            ctx,
            &DynamicObjectRef {
                reference: r,
                object: obj,
                namespace: &ns,
            },
        )
        .await?;
    }
    if p.delete_bootstrap
        && let (Some(obj), Some(r)) = (bootstrap.found(), m.spec.bootstrap.config_ref.as_ref())
    {
        delete_external(
            ctx,
            &DynamicObjectRef {
                reference: r,
                object: obj,
                namespace: &ns,
            },
        )
        .await?;
    }
    let mut errors = p.errors.clone();
    if p.delete_node
        && let (NodeLookup::Found(n), Some(target)) = (node, &ctx.target)
    {
        let node_name = n.metadata.name.clone().unwrap_or_default();
        let nodes: Api<Node> = Api::all(target.clone());
        match nodes.delete(&node_name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                let give_up = p.node_deletion_deadline.is_some_and(|d| Utc::now() > d);
                ctx.event(
                    m,
                    true,
                    "FailedDeleteNode",
                    format!("error deleting Machine's node {node_name:?}: {e}"),
                );
                if !give_up {
                    return Err(Error::api(format!("deleting Node {node_name}"), e));
                }
                tracing::warn!(machine = %name, node = %node_name, "giving up deleting the Node after nodeDeletionTimeout");
            }
        }
    }
    for e in &p.events {
        ctx.event(m, e.warning, &e.reason, e.note.clone());
    }
    // The status, as a diff against what the Machine had.
    let old = serde_json::to_value(m.status_or_default()).unwrap_or(Value::Null);
    let new = serde_json::to_value(&p.status).unwrap_or(Value::Null);
    let mut latest_meta = m.metadata.clone();
    if let Some(diff) = apimachinery::patch::merge_patch_diff(&old, &new) {
        match api
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": diff})),
            )
            .await
        {
            Ok(updated) => latest_meta = updated.metadata,
            Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
            Err(e) => return Err(Error::api("writing the Machine status", e)),
        }
    }
    if p.remove_finalizer {
        let uid = m.metadata.uid.clone().unwrap_or_default();
        let patch = json!({"metadata": {
            "finalizers": finalizers_without(&latest_meta, labels::MACHINE_FINALIZER),
            "resourceVersion": latest_meta.resource_version,
        }});
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::api("removing the finalizer", e)),
        }
        ctx.evictions.lock().remove(&uid);
        return Ok(Action::await_change());
    }
    if !errors.is_empty() {
        return Err(Error::Plan(std::mem::take(&mut errors).join("; ")));
    }
    Ok(super::requeue(p.requeue, &ctx.config))
}

/// After a failed reconcile: back off per Machine.
pub fn error_policy(m: Arc<Machine>, e: &Error, ctx: Arc<Context>) -> Action {
    tracing::debug!(machine = %m.name(), error = %e, "reconcile failed");
    ctx.error_action(super::key(m.as_ref()))
}
