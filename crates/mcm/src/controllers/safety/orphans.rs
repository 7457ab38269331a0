//! The orphan collector (spec §5): deletes VMs no machine owns, and
//! disowns Nodes no machine maps to (only with a target cluster). Runs
//! every `--machine-safety-orphan-vms-period`, on every machine deletion,
//! and when a machine's last operation newly reports `OutOfRange`; never
//! while an API server is not known to answer.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use api::{Machine, MachineClass, MachineSpec, labels};
use chrono::Utc;
use driver::{Code, DeleteMachineRequest, ListMachinesRequest};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams};
use kube::runtime::events::Recorder;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{is_status, publish};
use crate::controllers::cache::IndexKey;
use crate::controllers::context::{Context, Error, MachineDeps, class_secret};
use crate::safety::{self, NodeAction};

/// At most one triggered orphan pass this often (or per period, if that is
/// shorter): listing a cloud's VMs is expensive, and a large scale-down
/// deletes machines by the hundred.
const ORPHAN_MIN_GAP: Duration = Duration::from_secs(10);
/// How soon a paused orphan pass (API servers unreachable) is tried again.
const ORPHAN_PAUSED_RETRY: Duration = Duration::from_secs(5);

/// Runs an orphan pass every period and on every trigger, at most one per
/// [`ORPHAN_MIN_GAP`], while the API servers are known to answer, until
/// `shutdown`.
pub(super) async fn orphan_loop(
    ctx: &Context,
    deps: &MachineDeps,
    recorder: &Recorder,
    trigger: &Notify,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let period = ctx.config.machine_safety_orphan_vms_period;
    let mut next = Instant::now();
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep_until(next) => {}
            _ = trigger.notified() => {}
        }
        if !ctx.safety.may_collect_orphans() {
            tracing::debug!("orphan collection paused: API servers not known to be reachable");
            next = Instant::now() + ORPHAN_PAUSED_RETRY.min(period);
            continue;
        }
        let started = Instant::now();
        match collect_orphans(ctx, deps, recorder).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "orphan collection deleted VMs"),
            Err(e) => tracing::warn!(error = %e, "orphan collection failed"),
        }
        next = started + period;
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(ORPHAN_MIN_GAP.min(period)) => {}
        }
    }
}

/// The machine a VM deletion names: only what the driver contract
/// guarantees (name and providerID).
fn bare_machine(ns: &str, name: &str, provider_id: &str) -> Machine {
    let mut m = Machine::new(
        name,
        MachineSpec {
            provider_id: provider_id.to_string(),
            ..MachineSpec::default()
        },
    );
    m.metadata.namespace = Some(ns.to_string());
    m
}

/// One orphan pass: VMs of every class that no machine owns are deleted,
/// then Nodes without machines are disowned (or reclaimed). Returns how
/// many VMs were deleted. Stops as soon as the API servers stop answering.
pub async fn collect_orphans(
    ctx: &Context,
    deps: &MachineDeps,
    recorder: &Recorder,
) -> Result<usize, Error> {
    // The cache picks candidates; it must at least have been filled once.
    if !matches!(ctx.machines.wait_until_ready().now_or_never(), Some(Ok(()))) {
        return Ok(0);
    }
    let ns = ctx.config.namespace.as_str();
    let machines: Api<Machine> = Api::namespaced(ctx.control.clone(), ns);
    let classes: Api<MachineClass> = Api::namespaced(ctx.control.clone(), ns);
    let classes = classes
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::api("machine classes", e))?
        .items;
    let mut seen = BTreeSet::new();
    let mut deleted = 0;
    for class in &classes {
        let class_name = class.name_any();
        let secret = match class_secret(&ctx.control, &ctx.config.namespace, class, None).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(class = %class_name, error = %e, "orphan collection skips the class");
                continue;
            }
        };
        let listed = match deps
            .driver
            .list_machines(ListMachinesRequest {
                machine_class: class,
                secret: &secret,
            })
            .await
        {
            Ok(r) => r.machine_list,
            Err(e) if e.code == Code::Unimplemented => continue,
            Err(e) => {
                tracing::warn!(class = %class_name, error = %e, "listing VMs failed");
                continue;
            }
        };
        for (provider_id, name) in listed {
            if !seen.insert(provider_id.clone()) {
                continue;
            }
            let cached = ctx.machines.get(&ObjectRef::new(&name).within(ns));
            if !safety::is_orphan_vm(&provider_id, cached.as_deref()) {
                continue;
            }
            // A cache miss is no proof (spec §8.2): confirm with a live read,
            // and only while the API servers are known to answer.
            if !ctx.safety.may_collect_orphans() {
                return Ok(deleted);
            }
            let live = machines
                .get_opt(&name)
                .await
                .map_err(|e| Error::api(format!("machine {name}"), e))?;
            if !safety::is_orphan_vm(&provider_id, live.as_ref()) {
                continue;
            }
            let vm = bare_machine(ns, &name, &provider_id);
            match deps
                .driver
                .delete_machine(DeleteMachineRequest {
                    machine: &vm,
                    machine_class: class,
                    secret: &secret,
                })
                .await
            {
                Ok(_) => {}
                Err(e) if e.code == Code::NotFound => continue,
                Err(e) => {
                    tracing::warn!(%provider_id, machine = %name, error = %e, "deleting an orphan VM failed");
                    continue;
                }
            }
            deleted += 1;
            let why = if live.is_some() {
                "its machine runs on another VM"
            } else {
                "no machine of that name exists"
            };
            tracing::info!(%provider_id, machine = %name, class = %class_name, why, "deleted an orphan VM");
            publish(
                recorder,
                class,
                true,
                "OrphanVMDeleted",
                format!("Deleted VM {provider_id} created for machine {name}: {why}"),
            )
            .await;
        }
    }
    disown_nodes(ctx, deps, &machines).await?;
    Ok(deleted)
}

/// The cached machines that may map to `node` (by the indexes): those
/// labelled with its name and the one it names. [`maps_to`] decides.
fn cached_candidates(ctx: &Context, node: &Node) -> Vec<std::sync::Arc<Machine>> {
    let mut found = ctx.machines.by(&IndexKey::Node(node.name_any()));
    if let Some(named) = node.labels().get(labels::NODE_MACHINE_NAME) {
        found.extend(ctx.machines.by(&IndexKey::Name(named.clone())));
    }
    found
}

/// Whether a machine maps to the node: its `node` label names the node, or
/// the node's machine-name label names it.
fn maps_to<'a>(node: &Node, machines: impl IntoIterator<Item = &'a Machine>) -> bool {
    let name = node.name_any();
    let named = node.labels().get(labels::NODE_MACHINE_NAME);
    machines.into_iter().any(|m| {
        m.labels().get(labels::NODE) == Some(&name) || named.is_some_and(|n| *n == m.name_any())
    })
}

/// Nodes no machine maps to, older than the creation timeout, lose the node
/// finalizer and are marked `not-managed-by-mcm`; the mark goes once a
/// machine maps to them. Disowning is confirmed against a live list of
/// machines.
async fn disown_nodes(ctx: &Context, deps: &MachineDeps, api: &Api<Machine>) -> Result<(), Error> {
    let now = Utc::now();
    // Without a target cluster there are no nodes to disown.
    let (Some(target), Some(node_store)) = (ctx.target.clone(), deps.nodes.as_ref()) else {
        return Ok(());
    };
    let mut live: Option<Vec<Machine>> = None;
    let nodes: Api<Node> = Api::all(target);
    for node in node_store.state() {
        let mapped = maps_to(
            &node,
            cached_candidates(ctx, &node).iter().map(|m| m.as_ref()),
        );
        let Some(action) =
            safety::node_action(&node, mapped, ctx.config.machine.creation_timeout, now)
        else {
            continue;
        };
        let name = node.name_any();
        let patch = match action {
            NodeAction::Disown => {
                if live.is_none() {
                    live = Some(
                        api.list(&ListParams::default())
                            .await
                            .map_err(|e| Error::api("machines", e))?
                            .items,
                    );
                }
                if maps_to(&node, live.iter().flatten()) {
                    continue;
                }
                disown_patch(&node.metadata)
            }
            NodeAction::Reclaim => {
                json!({"metadata": {"annotations": {labels::NOT_MANAGED_BY_MCM: Value::Null}}})
            }
        };
        match nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(node = %name, ?action, "node without a machine");
            }
            // Gone, or changed since the cache saw it: the next pass decides
            // again from the newer node.
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => {}
            Err(e) => return Err(Error::api(format!("node {name}"), e)),
        }
    }
    Ok(())
}

fn disown_patch(meta: &ObjectMeta) -> Value {
    let fins: Vec<String> = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != labels::NODE_FINALIZER)
        .cloned()
        .collect();
    json!({"metadata": {
        "annotations": {labels::NOT_MANAGED_BY_MCM: "1"},
        "finalizers": fins,
        "resourceVersion": meta.resource_version,
    }})
}
