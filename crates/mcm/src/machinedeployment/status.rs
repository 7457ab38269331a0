//! The status a deployment reports (spec §4, "Status"): replica counts
//! summed over its sets, and the Available, Progressing and ReplicaFailure
//! conditions with stable transition times; the safety controller's Frozen
//! condition is kept as it is.

use api::{
    ConditionStatus, MachineDeployment, MachineDeploymentCondition,
    MachineDeploymentConditionType as CondType, MachineDeploymentStatus, MachineSet,
    MachineSetConditionType,
};
use chrono::{DateTime, Utc};

use super::name;
use crate::time::{to_chrono, to_time};

/// Whether a rollout is under way (Progressing True, not complete).
pub(super) fn progressing(s: &MachineDeploymentStatus) -> bool {
    s.conditions.iter().any(|c| {
        c.type_ == CondType::Progressing
            && c.status == ConditionStatus::True
            && c.reason != "NewMachineSetAvailable"
    })
}

fn condition(
    old: &[MachineDeploymentCondition],
    ty: CondType,
    status: ConditionStatus,
    reason: &str,
    message: String,
    now: DateTime<Utc>,
    progressed: bool,
) -> MachineDeploymentCondition {
    let prev = old.iter().find(|c| c.type_ == ty);
    let transition = prev
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| to_time(now));
    let update = if progressed || prev.is_none_or(|c| c.reason != reason) {
        to_time(now)
    } else {
        prev.and_then(|c| c.last_update_time.clone())
            .unwrap_or_else(|| to_time(now))
    };
    MachineDeploymentCondition {
        type_: ty,
        status,
        last_update_time: Some(update),
        last_transition_time: Some(transition),
        reason: reason.to_string(),
        message,
    }
}

/// The status of `md` over its `new` set, its `old` ones and `all` of them.
pub(super) fn status(
    md: &MachineDeployment,
    new: Option<&MachineSet>,
    old: &[&MachineSet],
    all: &[&MachineSet],
    now: DateTime<Utc>,
    max_unavailable: i64,
) -> MachineDeploymentStatus {
    let st = |s: &MachineSet| s.status.clone().unwrap_or_default();
    let sum = |f: fn(&api::MachineSetStatus) -> i32| all.iter().map(|s| f(&st(s))).sum::<i32>();
    let replicas = sum(|s| s.replicas);
    let available = sum(|s| s.available_replicas);
    let ready = sum(|s| s.ready_replicas);
    let updated = new.map(|n| st(n).replicas).unwrap_or(0);
    let spec_sum: i32 = all.iter().map(|s| s.spec.replicas).sum();
    let prev = md.status.clone().unwrap_or_default();
    let old_conditions = prev.conditions.clone();
    let mut conditions = Vec::new();
    let min_available = (i64::from(md.spec.replicas) - max_unavailable).max(0);
    conditions.push(if i64::from(available) >= min_available {
        condition(
            &old_conditions,
            CondType::Available,
            ConditionStatus::True,
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
            now,
            false,
        )
    } else {
        condition(
            &old_conditions,
            CondType::Available,
            ConditionStatus::False,
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
            now,
            false,
        )
    });
    let old_replicas: i32 = old.iter().map(|s| st(s).replicas).sum();
    let complete = updated == md.spec.replicas
        && available >= md.spec.replicas
        && old_replicas == 0
        && new.is_some_and(|n| n.spec.replicas == md.spec.replicas);
    let prev_prog = old_conditions
        .iter()
        .find(|c| c.type_ == CondType::Progressing);
    let progressed = updated > prev.updated_replicas
        || available > prev.available_replicas
        || ready > prev.ready_replicas
        || replicas - updated < prev.replicas - prev.updated_replicas;
    let progressing = if md.spec.paused {
        if prev_prog.is_some_and(|c| c.reason == "ProgressDeadlineExceeded") {
            prev_prog.cloned()
        } else {
            Some(condition(
                &old_conditions,
                CondType::Progressing,
                ConditionStatus::Unknown,
                "DeploymentPaused",
                "Deployment is paused".into(),
                now,
                false,
            ))
        }
    } else if complete {
        Some(condition(
            &old_conditions,
            CondType::Progressing,
            ConditionStatus::True,
            "NewMachineSetAvailable",
            format!(
                "MachineSet {:?} has successfully progressed.",
                new.map(name).unwrap_or_default()
            ),
            now,
            false,
        ))
    } else if progressed
        || prev_prog
            .is_none_or(|c| c.reason == "DeploymentPaused" || c.reason == "NewMachineSetAvailable")
    {
        let reason = if prev_prog.is_some_and(|c| c.reason == "DeploymentPaused") {
            "DeploymentResumed"
        } else {
            "MachineSetUpdated"
        };
        Some(condition(
            &old_conditions,
            CondType::Progressing,
            ConditionStatus::True,
            reason,
            format!(
                "MachineSet {:?} is progressing.",
                new.map(name).unwrap_or_default()
            ),
            now,
            true,
        ))
    } else {
        let last = prev_prog
            .and_then(|c| c.last_update_time.as_ref())
            .map(to_chrono);
        let exceeded = match (md.spec.progress_deadline_seconds, last) {
            (Some(d), Some(l)) => (now - l).num_seconds() > i64::from(d),
            _ => false,
        };
        if exceeded || prev_prog.is_some_and(|c| c.reason == "ProgressDeadlineExceeded") {
            Some(condition(
                &old_conditions,
                CondType::Progressing,
                ConditionStatus::False,
                "ProgressDeadlineExceeded",
                format!(
                    "MachineSet {:?} has timed out progressing.",
                    new.map(name).unwrap_or_default()
                ),
                now,
                false,
            ))
        } else {
            prev_prog.cloned()
        }
    };
    conditions.extend(progressing);
    // ReplicaFailure mirrors the new set's (else any set's).
    let failure = new.into_iter().chain(all.iter().copied()).find_map(|s| {
        st(s)
            .conditions
            .into_iter()
            .find(|c| c.type_ == MachineSetConditionType::ReplicaFailure)
    });
    if let Some(f) = failure {
        conditions.push(condition(
            &old_conditions,
            CondType::ReplicaFailure,
            ConditionStatus::True,
            &f.reason,
            f.message,
            now,
            false,
        ));
    }
    // A Frozen condition is the safety controller's; keep it.
    conditions.extend(
        old_conditions
            .iter()
            .filter(|c| c.type_ == CondType::Frozen)
            .cloned(),
    );
    MachineDeploymentStatus {
        observed_generation: md.metadata.generation.unwrap_or(0),
        replicas,
        updated_replicas: updated,
        ready_replicas: ready,
        available_replicas: available,
        unavailable_replicas: (spec_sum - available).max(0),
        conditions,
        collision_count: prev.collision_count,
        failed_machines: all
            .iter()
            .flat_map(|s| st(s).failed_machines.unwrap_or_default())
            .collect(),
        ..prev
    }
}
