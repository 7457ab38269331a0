//! The MachineHealthCheck controller's decisions
//! (`machinehealthcheck_{controller,targets}.go`): which Machines it checks,
//! each one's verdict (first matching rule wins), whether remediation is
//! allowed (`maxUnhealthy` / `unhealthyRange`, counting Machines still
//! starting as not healthy) and when to look again.
//!
//! The check never deletes anything. Its verdicts go into its own status
//! (`targets`, `unhealthyMachines`, `RemediationAllowed`), the Machine
//! controller mirrors them into each Machine's `HealthCheckSucceeded` and
//! `OwnerRemediated`, and the owning MachineSet deletes what is marked.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use mcm::rollout::IntOrPercent;

use crate::conditions::{self as cond, severity};
use crate::meta::{annotation, label};
use crate::types::labels::{self, conditions as ct, reasons};
use crate::types::{
    Cluster, Machine, MachineHealthCheck, MachineHealthCheckStatus, UnhealthyMachine,
};

/// Upstream's default `nodeStartupTimeout`.
pub const DEFAULT_NODE_STARTUP_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// How often to look again when nothing is pending (a net under the
/// watches, which bring Node changes at once).
pub const RESYNC: Duration = Duration::from_secs(60);

/// Whether the check targets a Machine: its selector and Cluster match, it
/// is not paused and not opted out with `skip-remediation`.
pub fn targets(check: &MachineHealthCheck, m: &Machine) -> bool {
    let labels = m.metadata.labels.clone().unwrap_or_default();
    m.metadata.namespace == check.metadata.namespace
        && m.spec.cluster_name == check.spec.cluster_name
        && label(&m.metadata, labels::CLUSTER_NAME) == Some(check.spec.cluster_name.as_str())
        && crate::machineset::selects(&check.spec.selector, &labels)
        && annotation(&m.metadata, labels::PAUSED).is_none()
        && annotation(&m.metadata, labels::SKIP_REMEDIATION).is_none()
}

/// One target's verdict.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Healthy,
    /// Not healthy yet, nothing wrong either (starting, deleting, waiting
    /// for the cluster); `recheck` says when a timeout would expire.
    Pending {
        recheck: Option<Duration>,
    },
    Unhealthy {
        reason: String,
        message: String,
    },
}

fn timeout(s: Option<&str>, default: Duration) -> Duration {
    s.and_then(api::parse_duration).unwrap_or(default)
}

fn condition_true_since(conditions: &[crate::types::Condition], t: &str) -> Option<DateTime<Utc>> {
    cond::get(conditions, t)
        .filter(|c| c.status == cond::TRUE)
        .and_then(|c| c.last_transition_time.as_ref())
        .map(mcm::time::to_chrono)
}

/// The verdict on one target (first matching rule wins).
pub fn verdict(
    check: &MachineHealthCheck,
    cluster: &Cluster,
    m: &Machine,
    node: Option<&Node>,
    now: DateTime<Utc>,
) -> Verdict {
    let st = m.status.clone().unwrap_or_default();
    let node_ref = st.node_ref.as_ref().and_then(|r| r.name.clone());
    if annotation(&m.metadata, labels::REMEDIATE_MACHINE).is_some() {
        return Verdict::Unhealthy {
            reason: reasons::HAS_REMEDIATE_ANNOTATION.into(),
            message: "Marked for remediation via remediate-machine annotation".into(),
        };
    }
    if st.failure_reason.is_some() || st.failure_message.is_some() {
        return Verdict::Unhealthy {
            reason: reasons::MACHINE_HAS_FAILURE.into(),
            message: format!(
                "FailureReason: {}, FailureMessage: {}",
                st.failure_reason.as_deref().unwrap_or_default(),
                st.failure_message.as_deref().unwrap_or_default()
            ),
        };
    }
    if node_ref.is_some() && node.is_none() {
        return Verdict::Unhealthy {
            reason: reasons::NODE_NOT_FOUND.into(),
            message: format!("Node {:?} has been deleted", node_ref.unwrap_or_default()),
        };
    }
    let cs = cluster.status.clone().unwrap_or_default();
    let cp_initialized = condition_true_since(&cs.conditions, ct::CONTROL_PLANE_INITIALIZED);
    let infra_ready = condition_true_since(&cs.conditions, ct::INFRASTRUCTURE_READY);
    let control_plane = label(&m.metadata, labels::CONTROL_PLANE).is_some();
    if (cp_initialized.is_none() && !control_plane) || infra_ready.is_none() {
        return Verdict::Pending { recheck: None };
    }
    if m.metadata.deletion_timestamp.is_some() {
        return Verdict::Pending { recheck: None };
    }
    let Some(node) = node else {
        let t = timeout(
            check.spec.node_startup_timeout.as_deref(),
            DEFAULT_NODE_STARTUP_TIMEOUT,
        );
        if t.is_zero() {
            return Verdict::Pending { recheck: None };
        }
        let start = [
            m.metadata
                .creation_timestamp
                .as_ref()
                .map(mcm::time::to_chrono),
            cp_initialized,
            infra_ready,
            condition_true_since(&st.conditions, ct::INFRASTRUCTURE_READY),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(now);
        let deadline = start + chrono::Duration::from_std(t).unwrap_or_default();
        if deadline < now {
            return Verdict::Unhealthy {
                reason: reasons::NODE_STARTUP_TIMEOUT.into(),
                message: format!(
                    "Node failed to report startup in {}",
                    api::format_duration(t)
                ),
            };
        }
        let left = (deadline - now).to_std().unwrap_or_default();
        return Verdict::Pending {
            recheck: Some(left + Duration::from_secs(1)),
        };
    };
    let node_conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut recheck: Option<Duration> = None;
    for u in &check.spec.unhealthy_conditions {
        let Some(c) = node_conditions
            .iter()
            .find(|c| c.type_ == u.type_ && c.status == u.status)
        else {
            continue;
        };
        let t = timeout(Some(&u.timeout), Duration::ZERO);
        let since = c
            .last_transition_time
            .as_ref()
            .map(mcm::time::to_chrono)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let deadline = since + chrono::Duration::from_std(t).unwrap_or_default();
        if deadline < now {
            return Verdict::Unhealthy {
                reason: reasons::UNHEALTHY_NODE.into(),
                message: format!(
                    "Condition {} on node is reporting status {} for more than {}",
                    u.type_,
                    u.status,
                    api::format_duration(t)
                ),
            };
        }
        let left = (deadline - now).to_std().unwrap_or_default() + Duration::from_secs(1);
        recheck = Some(recheck.map_or(left, |r| r.min(left)));
    }
    if recheck.is_some() {
        return Verdict::Pending { recheck };
    }
    Verdict::Healthy
}

/// `maxUnhealthy` / `unhealthyRange` against the counts: `(allowed,
/// remediations still allowed, what the limit was)`.
pub fn remediation_allowed(
    check: &MachineHealthCheck,
    expected: i64,
    unhealthy: i64,
) -> (bool, i64, String) {
    if let Some(range) = check.spec.unhealthy_range.as_deref()
        && let Some((min, max)) = parse_range(range)
    {
        let allowed = unhealthy >= min && unhealthy <= max;
        return (
            allowed,
            if allowed { max - unhealthy } else { 0 },
            range.to_string(),
        );
    }
    let max_unhealthy = check
        .spec
        .max_unhealthy
        .as_ref()
        .and_then(IntOrPercent::from_int_or_string)
        .unwrap_or(IntOrPercent::Percent(100));
    let limit = max_unhealthy.scaled(expected, false);
    let allowed = unhealthy <= limit;
    (
        allowed,
        if allowed { limit - unhealthy } else { 0 },
        match max_unhealthy {
            IntOrPercent::Int(i) => i.to_string(),
            IntOrPercent::Percent(p) => format!("{p}%"),
        },
    )
}

/// Parses `[min-max]`.
pub fn parse_range(s: &str) -> Option<(i64, i64)> {
    let inner = s.trim().strip_prefix('[')?.strip_suffix(']')?;
    let (a, b) = inner.split_once('-')?;
    let (a, b) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
    (a <= b).then_some((a, b))
}

/// What one reconcile of a check decides.
#[derive(Clone, Debug, Default)]
pub struct CheckPlan {
    /// Merge patch of the check's metadata (cluster label, Cluster owner).
    pub check_patch: Option<serde_json::Value>,
    pub status: MachineHealthCheckStatus,
    pub events: Vec<(bool, String, String)>,
    pub requeue: Option<Duration>,
}

/// Decides one reconcile of a check over the namespace's Machines and
/// their Nodes (by name).
pub fn plan(
    check: &MachineHealthCheck,
    cluster: &Cluster,
    machines: &[&Machine],
    nodes: &BTreeMap<String, &Node>,
    now: DateTime<Utc>,
) -> CheckPlan {
    let mut p = CheckPlan {
        status: check.status.clone().unwrap_or_default(),
        ..CheckPlan::default()
    };
    let mut patch = serde_json::json!({});
    if label(&check.metadata, labels::CLUSTER_NAME) != Some(check.spec.cluster_name.as_str()) {
        patch["metadata"]["labels"] =
            serde_json::json!({labels::CLUSTER_NAME: check.spec.cluster_name});
    }
    let cuid = cluster.metadata.uid.as_deref().unwrap_or_default();
    if !crate::meta::has_owner(&check.metadata, cuid) {
        let mut refs = check.metadata.owner_references.clone().unwrap_or_default();
        refs.push(crate::meta::owner_ref(
            crate::API_VERSION,
            "Cluster",
            cluster.name(),
            cuid,
            false,
        ));
        patch["metadata"]["ownerReferences"] = serde_json::json!(refs);
        patch["metadata"]["resourceVersion"] = serde_json::json!(check.metadata.resource_version);
    }
    if patch.as_object().is_some_and(|o| !o.is_empty()) {
        p.check_patch = Some(patch);
    }

    let mut targets: Vec<&Machine> = machines
        .iter()
        .copied()
        .filter(|m| targets(check, m))
        .collect();
    targets.sort_by(|a, b| a.name().cmp(b.name()));
    let mut healthy = 0i64;
    let mut unhealthy: Vec<UnhealthyMachine> = Vec::new();
    let mut recheck: Option<Duration> = None;
    for m in &targets {
        let node = m
            .status
            .as_ref()
            .and_then(|s| s.node_ref.as_ref())
            .and_then(|r| r.name.as_deref())
            .and_then(|n| nodes.get(n).copied());
        match verdict(check, cluster, m, node, now) {
            Verdict::Healthy => healthy += 1,
            Verdict::Pending { recheck: r } => {
                if let Some(r) = r {
                    recheck = Some(recheck.map_or(r, |x| x.min(r)));
                }
            }
            Verdict::Unhealthy { reason, message } => unhealthy.push(UnhealthyMachine {
                name: m.name().to_string(),
                reason,
                message,
            }),
        }
    }
    let expected = targets.len() as i64;
    // Machines still starting count as not healthy, as upstream.
    let not_healthy = expected - healthy;
    let (allowed, remaining, limit) = remediation_allowed(check, expected, not_healthy);
    let st = &mut p.status;
    st.expected_machines = expected as i32;
    st.current_healthy = healthy as i32;
    st.remediations_allowed = remaining as i32;
    st.targets = targets.iter().map(|m| m.name().to_string()).collect();
    let newly: Vec<String> = unhealthy
        .iter()
        .filter(|u| !st.unhealthy_machines.iter().any(|o| o.name == u.name))
        .map(|u| u.name.clone())
        .collect();
    st.unhealthy_machines = unhealthy;
    if allowed {
        cond::set(
            &mut st.conditions,
            cond::true_(ct::REMEDIATION_ALLOWED),
            now,
        );
        for name in newly {
            p.events.push((
                false,
                "MachineMarkedUnhealthy".into(),
                format!("Machine {name:?} has been marked as unhealthy"),
            ));
        }
    } else {
        let message = format!(
            "Remediation is not allowed, the number of not started or unhealthy machines exceeds maxUnhealthy (total: {expected}, unhealthy: {not_healthy}, maxUnhealthy: {limit})"
        );
        if cond::is_true(&st.conditions, ct::REMEDIATION_ALLOWED)
            || cond::get(&st.conditions, ct::REMEDIATION_ALLOWED).is_none()
        {
            p.events
                .push((true, "RemediationRestricted".into(), message.clone()));
        }
        cond::set(
            &mut st.conditions,
            cond::false_(
                ct::REMEDIATION_ALLOWED,
                reasons::TOO_MANY_UNHEALTHY,
                severity::WARNING,
                message,
            ),
            now,
        );
    }
    st.observed_generation = check.metadata.generation;
    p.requeue = Some(recheck.map_or(RESYNC, |r| r.min(RESYNC)));
    p
}

#[cfg(test)]
mod tests;
