//! Phase 6 of the Machine's plan, deletion: pre-drain hooks, cordon and
//! drain through mcm's drain rounds (with `nodeDrainTimeout`), the volume
//! wait, then the infrastructure object, the bootstrap config and the Node
//! in that order, and finally whether the finalizer may go.

use super::*;

/// A timeout field of the Machine's spec (`None` = unset or invalid).
fn timeout(field: &Option<String>) -> Option<Duration> {
    field.as_deref().and_then(api::parse_duration)
}

/// Phase 6: deletion. Returns whether the Machine's provider objects are
/// gone and the finalizer may be removed (`Deleted`).
pub(super) fn deletion(s: &Scope<'_>, p: &mut Plan) -> bool {
    let m = s.machine;
    let now = s.now;
    let keys: Vec<&String> = m
        .metadata
        .annotations
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .collect();
    let cluster_deleting = s
        .cluster
        .is_none_or(|c| c.metadata.deletion_timestamp.is_some());
    let node = match &s.node {
        NodeLookup::Found(n) => Some(*n),
        _ => None,
    };
    let control_plane = label(&m.metadata, labels::CONTROL_PLANE).is_some();
    let externally_managed = s
        .cluster
        .is_some_and(|c| c.spec.control_plane_ref.is_some());
    // The last control-plane Machine of a cluster keeps its Node: the
    // cluster's API would go with it.
    let node_deletion_allowed = node.is_some()
        && (!control_plane || externally_managed || s.other_control_plane_machines > 0);

    if node_deletion_allowed && !cluster_deleting {
        if labels::has_hook(keys.iter().copied(), labels::PRE_DRAIN_HOOK_PREFIX) {
            p.set(
                cond::false_(
                    ct::PRE_DRAIN_HOOK_SUCCEEDED,
                    reasons::WAITING_EXTERNAL_HOOK,
                    severity::INFO,
                    "Waiting for pre-drain hooks to succeed",
                ),
                now,
            );
            return false;
        }
        if cond::get(&p.status.conditions, ct::PRE_DRAIN_HOOK_SUCCEEDED).is_some() {
            p.set(cond::true_(ct::PRE_DRAIN_HOOK_SUCCEEDED), now);
        }
        if let Some(node) = node
            && !drain(s, node, p)
        {
            return false;
        }
    }

    if labels::has_hook(keys.iter().copied(), labels::PRE_TERMINATE_HOOK_PREFIX) {
        p.set(
            cond::false_(
                ct::PRE_TERMINATE_HOOK_SUCCEEDED,
                reasons::WAITING_EXTERNAL_HOOK,
                severity::INFO,
                "Waiting for pre-terminate hooks to succeed",
            ),
            now,
        );
        return false;
    }
    if cond::get(&p.status.conditions, ct::PRE_TERMINATE_HOOK_SUCCEEDED).is_some() {
        p.set(cond::true_(ct::PRE_TERMINATE_HOOK_SUCCEEDED), now);
    }

    // The server first; its bootstrap config only once it is gone.
    if let Some(obj) = s.infra.found() {
        if !contract::deleting(obj) {
            p.delete_infra = true;
            p.event(
                false,
                "DeletingInfrastructure",
                format!("Deleting {}", ref_display(&m.spec.infrastructure_ref)),
            );
        }
        p.requeue(DELETION_POLL);
        return false;
    }
    if let Some(obj) = s.bootstrap.found() {
        if !contract::deleting(obj) {
            p.delete_bootstrap = true;
        }
        p.requeue(DELETION_POLL);
        return false;
    }
    debug_assert!(s.infra.gone() && s.bootstrap.gone());

    if node_deletion_allowed {
        p.delete_node = true;
        let timeout =
            timeout(&m.spec.node_deletion_timeout).unwrap_or(DEFAULT_NODE_DELETION_TIMEOUT);
        p.node_deletion_deadline = (!timeout.is_zero()).then(|| {
            m.metadata
                .deletion_timestamp
                .as_ref()
                .map(mcm::time::to_chrono)
                .unwrap_or(now)
                + chrono::Duration::from_std(timeout).unwrap_or_default()
        });
    }
    p.remove_finalizer = true;
    true
}

/// The drain and volume wait of a deleting Machine's Node. Returns whether
/// deletion may go on.
fn drain(s: &Scope<'_>, node: &Node, p: &mut Plan) -> bool {
    let m = s.machine;
    let now = s.now;
    let name = node.metadata.name.clone().unwrap_or_default();
    let unreachable = node_condition(node, "Ready") == Some("Unknown");
    let elapsed_since = |t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.as_ref()
            .map(|t| (now - mcm::time::to_chrono(t)).to_std().unwrap_or_default())
    };
    let deletion = p
        .status
        .deletion
        .get_or_insert_with(MachineDeletionStatus::default);
    let drain_timed_out = timeout(&m.spec.node_drain_timeout)
        .filter(|t| !t.is_zero())
        .zip(elapsed_since(&deletion.node_drain_start_time))
        .is_some_and(|(t, e)| e >= t);
    let exclude_drain = annotation(&m.metadata, labels::EXCLUDE_NODE_DRAINING).is_some();

    if !exclude_drain && !drain_timed_out {
        if deletion.node_drain_start_time.is_none() {
            deletion.node_drain_start_time = Some(mcm::time::to_time(now));
        }
        let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        if !cordoned {
            p.patch_node(json!({"spec": {"unschedulable": true}}));
        }
        let facts = s.drain.clone().unwrap_or_default();
        // Cluster API evicts every pod at once and waits for volumes as a
        // whole afterwards, so no pod is treated as having volumes here;
        // evictions are retried until nodeDrainTimeout, never turned into
        // deletions.
        let pods: Vec<DrainPod> = facts
            .pods
            .into_iter()
            .map(|mut d| {
                d.info.has_volumes = false;
                d
            })
            .collect();
        let round = mcm::machine::drain_round(
            &pods,
            &facts.records,
            &[],
            unreachable,
            u32::MAX,
            Duration::ZERO,
            now,
        );
        match round {
            DrainRound::Done => {
                if !cond::is_true(&p.status.conditions, ct::DRAINING_SUCCEEDED) {
                    p.event(
                        false,
                        "SuccessfulDrainNode",
                        format!("success draining Machine's node {name:?}"),
                    );
                }
                p.set(cond::true_(ct::DRAINING_SUCCEEDED), now);
            }
            DrainRound::Act { actions, done, .. } => {
                let n = actions.len();
                p.pod_actions = actions;
                if done {
                    p.set(cond::true_(ct::DRAINING_SUCCEEDED), now);
                } else {
                    p.set(
                        cond::false_(
                            ct::DRAINING_SUCCEEDED,
                            reasons::DRAINING,
                            severity::INFO,
                            format!("Draining Node {name:?}: evicting {n} pods"),
                        ),
                        now,
                    );
                    p.requeue(Duration::from_secs(1));
                    return false;
                }
            }
            DrainRound::Wait(d) => {
                p.set(
                    cond::false_(
                        ct::DRAINING_SUCCEEDED,
                        reasons::DRAINING,
                        severity::INFO,
                        format!("Draining Node {name:?}: waiting for pods to go"),
                    ),
                    now,
                );
                p.requeue(d.min(DRAIN_RETRY));
                return false;
            }
            DrainRound::Failed(why) => {
                p.set(
                    cond::false_(
                        ct::DRAINING_SUCCEEDED,
                        reasons::DRAINING_FAILED,
                        severity::WARNING,
                        why.clone(),
                    ),
                    now,
                );
                p.event(true, "FailedDrainNode", why);
                p.requeue(DRAIN_RETRY);
                return false;
            }
        }
    }

    let deletion = p
        .status
        .deletion
        .get_or_insert_with(MachineDeletionStatus::default);
    let exclude_volumes = annotation(&m.metadata, labels::EXCLUDE_WAIT_FOR_VOLUME_DETACH).is_some();
    let volumes_timed_out = timeout(&m.spec.node_volume_detach_timeout)
        .filter(|t| !t.is_zero())
        .zip(elapsed_since(
            &deletion.wait_for_node_volume_detach_start_time,
        ))
        .is_some_and(|(t, e)| e >= t);
    let attached = node
        .status
        .as_ref()
        .and_then(|s| s.volumes_attached.as_ref())
        .is_some_and(|v| !v.is_empty());
    if !exclude_volumes && !volumes_timed_out && !unreachable && attached {
        if deletion.wait_for_node_volume_detach_start_time.is_none() {
            deletion.wait_for_node_volume_detach_start_time = Some(mcm::time::to_time(now));
        }
        p.set(
            cond::false_(
                ct::VOLUME_DETACH_SUCCEEDED,
                reasons::WAITING_FOR_VOLUME_DETACH,
                severity::INFO,
                format!("Waiting for volumes to detach from Node {name:?}"),
            ),
            now,
        );
        p.requeue(DRAIN_RETRY);
        return false;
    }
    if cond::get(&p.status.conditions, ct::VOLUME_DETACH_SUCCEEDED).is_some() {
        p.set(cond::true_(ct::VOLUME_DETACH_SUCCEEDED), now);
    }
    true
}
