//! The Worker status the actuator writes (§4.3 step 3) and the verdict on
//! whether the wanted machine deployments are rolled out (§4.3 step 4).
//!
//! The executor polls: it lists deployments and machine sets, calls
//! [`health`], and keeps waiting (upstream: every 5 s for up to 5 min) while
//! the verdict is [`HealthVerdict::Waiting`]. [`last_operation`] turns the
//! verdict into the `lastOperation` to write.

use std::collections::BTreeSet;

use api::{ConditionStatus, MachineDeployment, MachineDeploymentConditionType, MachineSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::plan::WantedDeployment;
use crate::types::{LastError, LastOperation, WorkerMachineDeployment};

/// `status.machineDeployments`: name, minimum, maximum and priority of each
/// wanted deployment.
pub fn status_machine_deployments(wanted: &[WantedDeployment]) -> Vec<WorkerMachineDeployment> {
    wanted
        .iter()
        .map(|w| WorkerMachineDeployment {
            name: w.name.clone(),
            minimum: w.minimum,
            maximum: w.maximum,
            priority: w.priority,
        })
        .collect()
}

/// The status update written right after the deployments are applied, so
/// gardenlet can configure the cluster autoscaler before the rollout ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineDeploymentsStatus {
    /// `status.machineDeployments`.
    pub machine_deployments: Vec<WorkerMachineDeployment>,
    /// `status.machineDeploymentsLastUpdateTime`.
    pub last_update_time: Time,
}

/// The update for `wanted` at `now`, or `None` when nothing is wanted
/// (upstream then leaves the status alone).
pub fn machine_deployments_status(
    wanted: &[WantedDeployment],
    now: Time,
) -> Option<MachineDeploymentsStatus> {
    (!wanted.is_empty()).then(|| MachineDeploymentsStatus {
        machine_deployments: status_machine_deployments(wanted),
        last_update_time: now,
    })
}

/// A machine set as far as the health check cares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedMachineSet {
    /// Name of the owning machine deployment.
    pub owner: String,
    /// Name of the class its machines use.
    pub class_name: String,
}

impl ObservedMachineSet {
    /// Reads owner and class from a machine set; `None` if no machine
    /// deployment owns it.
    pub fn from_machine_set(set: &MachineSet) -> Option<ObservedMachineSet> {
        let owner = set
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "MachineDeployment")?;
        Some(ObservedMachineSet {
            owner: owner.name.clone(),
            class_name: set.spec.template.spec.class.name.clone(),
        })
    }
}

/// Whether one machine deployment is healthy, as gardener's health check
/// judges it: its status observed the current generation, `Available` is
/// True, and, when present, `Progressing` is True and `ReplicaFailure` False.
pub fn check_machine_deployment(md: &MachineDeployment) -> Result<(), String> {
    let generation = md.metadata.generation.unwrap_or(0);
    let status = md.status.clone().unwrap_or_default();
    if status.observed_generation < generation {
        return Err(format!(
            "observed generation outdated ({}/{generation})",
            status.observed_generation
        ));
    }
    let condition =
        |t: MachineDeploymentConditionType| status.conditions.iter().find(|c| c.type_ == t);
    let expect =
        |t: MachineDeploymentConditionType, want: ConditionStatus, required: bool| match condition(
            t,
        ) {
            None if required => Err(format!("condition {t:?} is missing")),
            None => Ok(()),
            Some(c) if c.status == want => Ok(()),
            Some(c) => Err(format!(
                "condition {t:?} has invalid status {} (expected {want}) due to {}: {}",
                c.status, c.reason, c.message
            )),
        };
    expect(
        MachineDeploymentConditionType::Available,
        ConditionStatus::True,
        true,
    )?;
    expect(
        MachineDeploymentConditionType::Progressing,
        ConditionStatus::True,
        false,
    )?;
    expect(
        MachineDeploymentConditionType::ReplicaFailure,
        ConditionStatus::False,
        false,
    )
}

/// Everything [`health`] reads.
#[derive(Clone, Copy, Debug)]
pub struct HealthInput<'a> {
    /// The shoot is hibernated.
    pub hibernated: bool,
    /// The wanted deployments from the plan.
    pub wanted: &'a [WantedDeployment],
    /// The machine deployments as listed now.
    pub observed: &'a [MachineDeployment],
    /// The machine sets as listed now.
    pub machine_sets: &'a [ObservedMachineSet],
    /// Names of the deployments that existed before this reconcile.
    pub pre_existing_deployments: &'a BTreeSet<String>,
    /// Names of the classes that existed before this reconcile.
    pub pre_existing_classes: &'a BTreeSet<String>,
}

/// Whether the rollout is complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthVerdict {
    /// Every wanted deployment is updated and available (or, hibernated,
    /// every machine is gone).
    Done,
    /// Still rolling; the message says what is awaited.
    Waiting(String),
    /// A machine failed; waiting longer will not help.
    Failed(String),
}

/// Judges the rollout of the wanted deployments.
pub fn health(input: &HealthInput<'_>) -> HealthVerdict {
    let (mut healthy, mut updated, mut available, mut unavailable, mut desired, mut awake) =
        (0usize, 0i32, 0i32, 0i32, 0i32, 0i32);
    for md in input.observed {
        let name = md.metadata.name.as_deref().unwrap_or_default();
        let Some(wanted) = input.wanted.iter().find(|w| w.name == name) else {
            continue;
        };
        let status = md.status.clone().unwrap_or_default();
        if !status.failed_machines.is_empty() {
            let failures: Vec<String> = status
                .failed_machines
                .iter()
                .map(|m| {
                    format!(
                        "machine {} failed: {}",
                        m.name, m.last_operation.description
                    )
                })
                .collect();
            return HealthVerdict::Failed(failures.join(", "));
        }
        awake = awake.saturating_add(status.replicas);
        if input.hibernated {
            continue;
        }
        let namespace = md.metadata.namespace.as_deref().unwrap_or_default();
        let sets: Vec<&ObservedMachineSet> = input
            .machine_sets
            .iter()
            .filter(|s| s.owner == wanted.name)
            .collect();
        let rolling = input.pre_existing_deployments.contains(&wanted.name)
            && !input.pre_existing_classes.contains(&wanted.class_name);
        if rolling && sets.len() <= 1 {
            return HealthVerdict::Waiting(format!(
                "waiting for the machine-controller-manager to create the machine sets for the machine deployment ({namespace}/{name})"
            ));
        }
        if !sets.iter().any(|s| s.class_name == wanted.class_name) {
            return HealthVerdict::Waiting(format!(
                "waiting for the machine-controller-manager to create the updated machine set for the machine deployment ({namespace}/{name})"
            ));
        }
        if check_machine_deployment(md).is_ok() {
            healthy += 1;
        }
        desired = desired.saturating_add(md.spec.replicas);
        updated = updated.saturating_add(status.updated_replicas);
        available = available.saturating_add(status.available_replicas);
        unavailable = unavailable.saturating_add(status.unavailable_replicas);
    }

    if input.hibernated {
        return if awake == 0 {
            HealthVerdict::Done
        } else {
            HealthVerdict::Waiting(format!(
                "Waiting until all machines have been hibernated ({awake} still awake)..."
            ))
        };
    }
    if unavailable == 0 && updated == awake && healthy == input.wanted.len() {
        return HealthVerdict::Done;
    }
    if unavailable == 0 && available == desired && updated < awake {
        return HealthVerdict::Waiting(format!(
            "Waiting until all old machines are drained and terminated. Waiting for {} machine(s)...",
            awake.saturating_sub(updated)
        ));
    }
    HealthVerdict::Waiting(format!(
        "Waiting until machines are available ({available}/{desired} desired machine(s) available, {updated}/{desired} machine(s) updated, {unavailable} machine(s) pending, {healthy}/{} machinedeployments available)...",
        input.wanted.len()
    ))
}

/// The `lastOperation` for a verdict of an operation of type `type_`
/// (`Reconcile`, `Create`, ...): Succeeded at 100 %, Processing with the
/// awaited step as description, or Error.
pub fn last_operation(type_: &str, verdict: &HealthVerdict, now: Time) -> LastOperation {
    let (state, progress, description) = match verdict {
        HealthVerdict::Done => (
            "Succeeded",
            100,
            "Successfully reconciled Worker".to_string(),
        ),
        HealthVerdict::Waiting(msg) => ("Processing", 50, msg.clone()),
        HealthVerdict::Failed(msg) => ("Error", 50, format!("Error reconciling Worker: {msg}")),
    };
    LastOperation {
        description,
        last_update_time: Some(now.into()),
        progress,
        state: state.to_string(),
        type_: type_.to_string(),
    }
}

/// The `lastError` for a verdict: set only when it failed.
pub fn last_error(verdict: &HealthVerdict, now: Time) -> Option<LastError> {
    match verdict {
        HealthVerdict::Failed(msg) => Some(LastError {
            description: msg.clone(),
            task_id: None,
            codes: Vec::new(),
            last_update_time: Some(now.into()),
        }),
        _ => None,
    }
}
