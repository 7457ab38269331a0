//! The creation flow (spec §2.1) as a state machine, like deletion's: the
//! steps C1–C7 ([`CreationStep`]), what the executor observes at each
//! ([`CreationFact`]), and [`creation_transition`] from the two to the next
//! step or the end of the pass, whose status, requeue and event
//! [`creation_end`] decides. Also the pieces the ends are made of: the
//! create-error handler, the record of a VM on its machine, and the status
//! once the VM exists.
//!
//! ```text
//! C1 GetVmStatus ─found───────────────────────────► C5 RecordVm ─► C7 VerifyVm ─► Created
//!     │ NotFound/Unimplemented, no providerID           ▲   │ new or uninitialized
//!     ▼                                                  │   ▼
//! C2 CreateVm ─created (node name = machine's)──────────┘  C6 InitializeVm ─► C7
//!     │ registers under another name
//!     ▼
//! C3 CheckNodeName ─free─► C5;  taken ─► C4 DeleteStaleVm ─► StaleNode (Failed)
//! ```
//!
//! A driver error at C1 or C2 ends in the create-error handler, one at C6
//! in an initialization failure (except `Unimplemented`, which skips C6),
//! and a VM without a providerID (or node name, with a target) at C7 in
//! the create-error handler with `Internal`.

use std::time::Duration;

use api::{
    LastOperation, Machine, MachineOperationType, MachinePhase, MachineState, MachineStatus, labels,
};
use chrono::{DateTime, Utc};
use driver::{Code, DriverError, LONG_RETRY, MEDIUM_RETRY, Outcome, SHORT_RETRY, Step};
use k8s_openapi::api::core::v1::NodeAddress;
use serde_json::{Map, Value, json};

use super::{
    LAST_APPLIED_PROVIDER_SPEC, MachineEvent, Settings, age, annotation, label, last_op, node_name,
    with_phase,
};
use crate::health;

/// lastOperation description of a machine whose VM was created.
pub const CREATING_DESCRIPTION: &str = "Creating machine on cloud provider";
/// lastOperation description after the stale-node check deleted a new VM.
pub const STALE_NODE_DESCRIPTION: &str = "VM using old node obj";

/// What the create-error handler writes and when it tries again.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateFailure {
    pub phase: MachinePhase,
    pub last_operation: LastOperation,
    pub retry: Duration,
}

/// The create-error handler (spec §2.1): `Failed` once the machine is older
/// than its creation timeout, else `CrashLoopBackOff`; the error code's name
/// goes to `errorCode` (the cluster autoscaler backs off on it). The retry
/// period comes from [`Code::outcome`] at `step`, but is cut to the time
/// left until the creation timeout, so `Failed` is written on time rather
/// than up to a retry period late.
pub fn create_failure(
    code: Code,
    message: &str,
    step: Step,
    age: Duration,
    settings: &Settings,
    now: DateTime<Utc>,
) -> CreateFailure {
    let timed_out = age > settings.creation_timeout;
    let phase = if timed_out {
        MachinePhase::Failed
    } else {
        MachinePhase::CrashLoopBackOff
    };
    let mut retry = match code.outcome(step) {
        Outcome::Retry(r) => r.period(settings.resource_exhausted_retry),
        _ => MEDIUM_RETRY,
    };
    if !timed_out {
        let left = settings.creation_timeout - age + Duration::from_secs(1);
        retry = retry.min(left);
    }
    CreateFailure {
        phase,
        last_operation: last_op(
            MachineOperationType::Create,
            MachineState::Failed,
            format!("Cloud provider message - {message}"),
            Some(code),
            now,
        ),
        retry,
    }
}

/// The one metadata/spec update after the VM is known (spec §2.1.3): label
/// `node`, priority `3` if missing, `spec.providerID`, and the provider spec
/// the VM was created with (for hot updates) if not recorded yet. `None`
/// when the machine already carries all of it.
pub fn creation_patch(
    m: &Machine,
    provider_id: &str,
    node_name: &str,
    provider_spec: &Value,
) -> Option<Value> {
    let mut patch = json!({});
    if label(&m.metadata, labels::NODE) != Some(node_name) && !node_name.is_empty() {
        patch["metadata"]["labels"] = json!({ labels::NODE: node_name });
    }
    let mut ann = Map::new();
    if annotation(&m.metadata, labels::MACHINE_PRIORITY).is_none() {
        ann.insert(
            labels::MACHINE_PRIORITY.into(),
            labels::DEFAULT_MACHINE_PRIORITY.into(),
        );
    }
    if annotation(&m.metadata, LAST_APPLIED_PROVIDER_SPEC).is_none() {
        ann.insert(
            LAST_APPLIED_PROVIDER_SPEC.into(),
            Value::String(provider_spec.to_string()),
        );
    }
    if !ann.is_empty() {
        patch["metadata"]["annotations"] = Value::Object(ann);
    }
    if m.spec.provider_id != provider_id && !provider_id.is_empty() {
        patch["spec"] = json!({ "providerID": provider_id });
    }
    (patch != json!({})).then_some(patch)
}

/// lastOperation description of a machine that is `Available` right after
/// its VM was created, because there is no target cluster for it to join.
pub const AVAILABLE_DESCRIPTION: &str =
    "Created machine on cloud provider; no target cluster to join";

/// Whether the provider told enough about a VM to record it: a providerID
/// always, and a node name only where there is a target cluster whose Node
/// it names (spec §2.1.3).
pub fn vm_ids_complete(provider_id: &str, node_name: &str, has_target: bool) -> bool {
    !provider_id.is_empty() && (!has_target || !node_name.is_empty())
}

/// Status of a machine whose VM now exists (only from no phase or
/// `CrashLoopBackOff`). With a target cluster: `Pending` with lastOp
/// Create/Processing, until its node joins. Without one there is nothing to
/// join: `Available` with lastOp Create/Successful, and the provider's
/// addresses recorded, since there is no Node to read them from.
pub fn created_status(
    m: &Machine,
    has_target: bool,
    addresses: &[NodeAddress],
    now: DateTime<Utc>,
) -> Option<MachineStatus> {
    let status = m.status.clone().unwrap_or_default();
    if !matches!(
        status.current_status.phase,
        None | Some(MachinePhase::CrashLoopBackOff)
    ) {
        return None;
    }
    Some(if has_target {
        let mut s = with_phase(&status, MachinePhase::Pending, true, now);
        s.last_operation = last_op(
            MachineOperationType::Create,
            MachineState::Processing,
            CREATING_DESCRIPTION,
            None,
            now,
        );
        s
    } else {
        let mut s = with_phase(&status, MachinePhase::Available, false, now);
        s.last_operation = last_op(
            MachineOperationType::Create,
            MachineState::Successful,
            AVAILABLE_DESCRIPTION,
            None,
            now,
        );
        s.addresses = addresses.to_vec();
        s
    })
}

/// When to look at a machine again after its creation flow went through:
/// with a target cluster at the creation timeout (for the health check
/// to fail a machine that never joined), at most a health recheck away;
/// without one nothing is pending, so only the steady-state resync.
pub fn recheck_after_creation(
    m: &Machine,
    has_target: bool,
    settings: &Settings,
    now: DateTime<Utc>,
) -> Duration {
    if !has_target {
        return LONG_RETRY;
    }
    settings
        .creation_timeout
        .saturating_sub(age(m, now))
        .min(health::HEALTH_RECHECK)
}

/// The steps of the creation flow (spec §2.1), C1–C7. Unlike deletion's
/// they are not recorded: every pass starts at C1, which finds a VM an
/// earlier pass created (so a crash anywhere never duplicates a VM), and
/// C5 records the VM on the machine before anything else is done with it
/// (so a crash never loses one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CreationStep {
    /// C1: ask the provider for the machine's VM (`GetMachineStatus`).
    GetVmStatus,
    /// C2: create the VM (`CreateMachine`).
    CreateVm,
    /// C3: the new VM registers under another name than the machine's:
    /// look for a Node of that name (spec §2.1.2, "stale node").
    CheckNodeName,
    /// C4: that Node exists, left by an earlier VM: delete the new VM again
    /// rather than let it take the stale Node over.
    DeleteStaleVm,
    /// C5: record the VM on the machine ([`creation_patch`]); then
    /// initialize it (C6) when it is new or uninitialized, else verify (C7).
    RecordVm { initialize: bool },
    /// C6: initialize the VM (`InitializeMachine`).
    InitializeVm,
    /// C7: check that the provider named the VM ([`vm_ids_complete`]).
    VerifyVm,
}

/// What the pass knows of the VM: its providerID, the node name it
/// registers under, and its addresses (recorded only without a target
/// cluster, where no Node carries them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VmIds {
    pub provider_id: String,
    pub node_name: String,
    pub addresses: Vec<NodeAddress>,
}

impl VmIds {
    /// What the machine already records: its providerID and `node` label.
    pub fn of(m: &Machine) -> VmIds {
        VmIds {
            provider_id: m.spec.provider_id.clone(),
            node_name: node_name(m).unwrap_or_default().to_string(),
            addresses: Vec::new(),
        }
    }

    /// Takes in what a fact says about the VM. `GetMachineStatus` (C1)
    /// describes the VM the machine has: its IDs are adopted where it
    /// names them, its addresses always. `CreateMachine` (C2) describes a
    /// new VM: its answer replaces everything. `InitializeMachine` (C6)
    /// only fills in IDs still missing, and addresses when it reports any.
    /// Other facts say nothing about the VM.
    pub fn learn(&mut self, fact: &CreationFact) {
        match fact {
            CreationFact::VmFound(vm) => {
                self.addresses = vm.addresses.clone();
                if !vm.provider_id.is_empty() {
                    self.provider_id = vm.provider_id.clone();
                }
                if !vm.node_name.is_empty() {
                    self.node_name = vm.node_name.clone();
                }
            }
            CreationFact::VmCreated(vm) => *self = vm.clone(),
            CreationFact::Initialized(vm) => {
                if self.provider_id.is_empty() {
                    self.provider_id = vm.provider_id.clone();
                }
                if !vm.addresses.is_empty() {
                    self.addresses = vm.addresses.clone();
                }
                if self.node_name.is_empty() {
                    self.node_name = vm.node_name.clone();
                }
            }
            _ => {}
        }
    }

    /// Whether the provider named the VM well enough to record it.
    pub fn complete(&self, has_target: bool) -> bool {
        vm_ids_complete(&self.provider_id, &self.node_name, has_target)
    }
}

/// What the executor observed or got back at the current creation step.
#[derive(Clone, Debug, PartialEq)]
pub enum CreationFact {
    /// C1: the VM exists; what the provider says of it.
    VmFound(VmIds),
    /// C1: `GetMachineStatus` failed (`NotFound`: there is no VM).
    StatusFailed { code: Code, message: String },
    /// C2: `CreateMachine` answered with the new VM.
    VmCreated(VmIds),
    /// C2: `CreateMachine` failed.
    CreateFailed { code: Code, message: String },
    /// C3: no Node has the new VM's node name.
    NodeNameFree,
    /// C3: a Node with the new VM's node name exists.
    NodeNameTaken,
    /// C4: the new VM is deleted again.
    StaleVmDeleted,
    /// C4: deleting it failed.
    StaleVmDeleteFailed,
    /// C5: the machine carries the record of the VM.
    Recorded,
    /// C6: `InitializeMachine` answered.
    Initialized(VmIds),
    /// C6: `InitializeMachine` failed (`Unimplemented`: nothing to do).
    InitializeFailed { code: Code, message: String },
    /// C7: the VM has a providerID (and, with a target cluster, a node
    /// name).
    VmNamed,
    /// C7: it has not.
    VmUnnamed,
}

/// What the creation transitions depend on besides the step and the fact.
#[derive(Clone, Debug, PartialEq)]
pub struct CreationContext {
    /// The machine's name, which its node is expected to register under.
    pub machine_name: String,
    /// The machine already names a VM (`spec.providerID`) when the pass
    /// starts: that VM is kept, never replaced by a new one.
    pub has_provider_id: bool,
    pub has_target: bool,
    /// `--resource-exhausted-retry`.
    pub resource_exhausted_retry: Duration,
}

impl CreationContext {
    /// The context of a pass over `m`.
    pub fn of(m: &Machine, has_target: bool, settings: &Settings) -> CreationContext {
        CreationContext {
            machine_name: m.metadata.name.clone().unwrap_or_default(),
            has_provider_id: !m.spec.provider_id.is_empty(),
            has_target,
            resource_exhausted_retry: settings.resource_exhausted_retry,
        }
    }
}

/// What happens after a creation step.
#[derive(Clone, Debug, PartialEq)]
pub enum CreationTransition {
    /// Go on with `step`.
    Next(CreationStep),
    /// The VM exists, is recorded and named: record what initialization
    /// added, and the machine is `Pending` (`Available` without a target
    /// cluster).
    Created,
    /// The create-error handler ([`create_failure`]) for `code` at the
    /// driver step `at`.
    CreateFailed {
        code: Code,
        message: String,
        at: Step,
    },
    /// Initialization failed: lastOperation Create/Failed with the
    /// provider's error, phase kept; try again after `after`.
    InitializeFailed {
        code: Code,
        message: String,
        after: Duration,
    },
    /// The new VM was deleted for taking over a stale Node: the machine
    /// fails ([`STALE_NODE_DESCRIPTION`]).
    StaleNode,
    /// Look again after this long; nothing to write.
    Retry(Duration),
}

/// Why C7 fails a VM the provider did not name.
pub const UNNAMED_VM_MESSAGE: &str = "the provider reported no providerID or node name for the VM";

/// The creation state machine (spec §2.1): from a step and what was
/// observed there to the next step or an end of the pass. A fact that does
/// not belong to the step ends the pass and looks again soon.
pub fn creation_transition(
    step: CreationStep,
    fact: &CreationFact,
    cx: &CreationContext,
) -> CreationTransition {
    use CreationFact::*;
    use CreationStep::*;
    use CreationTransition::Next;
    let failed = |code: &Code, message: &str, at| CreationTransition::CreateFailed {
        code: *code,
        message: message.to_string(),
        at,
    };
    match (step, fact) {
        // The VM exists: adopt it, never create another.
        (GetVmStatus, VmFound(_)) => Next(RecordVm { initialize: false }),
        (GetVmStatus, StatusFailed { code, message }) => match code.outcome(Step::CreationStatus) {
            Outcome::CreateVm if !cx.has_provider_id => Next(CreateVm),
            // The machine already names its VM; keep it.
            Outcome::CreateVm => Next(RecordVm { initialize: false }),
            Outcome::InitializeVm => Next(RecordVm { initialize: true }),
            _ => failed(code, message, Step::CreationStatus),
        },
        (CreateVm, VmCreated(vm))
            if cx.has_target && !vm.node_name.is_empty() && vm.node_name != cx.machine_name =>
        {
            Next(CheckNodeName)
        }
        (CreateVm, VmCreated(_)) => Next(RecordVm { initialize: true }),
        (CreateVm, CreateFailed { code, message }) => failed(code, message, Step::Create),
        (CheckNodeName, NodeNameFree) => Next(RecordVm { initialize: true }),
        (CheckNodeName, NodeNameTaken) => Next(DeleteStaleVm),
        (DeleteStaleVm, StaleVmDeleted) => CreationTransition::StaleNode,
        (DeleteStaleVm, StaleVmDeleteFailed) => CreationTransition::Retry(SHORT_RETRY),
        (RecordVm { initialize: true }, Recorded) => Next(InitializeVm),
        (RecordVm { initialize: false }, Recorded) => Next(VerifyVm),
        (InitializeVm, Initialized(_)) => Next(VerifyVm),
        (InitializeVm, InitializeFailed { code, message }) => {
            match code.outcome(Step::Initialize) {
                Outcome::Skip => Next(VerifyVm),
                outcome => CreationTransition::InitializeFailed {
                    code: *code,
                    message: message.clone(),
                    after: match outcome {
                        Outcome::Retry(r) => r.period(cx.resource_exhausted_retry),
                        _ => SHORT_RETRY,
                    },
                },
            }
        }
        (VerifyVm, VmNamed) => CreationTransition::Created,
        (VerifyVm, VmUnnamed) => failed(&Code::Internal, UNNAMED_VM_MESSAGE, Step::Create),
        _ => CreationTransition::Retry(SHORT_RETRY),
    }
}

/// What a creation pass that ended writes, when it looks again and what it
/// tells in an event.
#[derive(Clone, Debug, PartialEq)]
pub struct CreationEnd {
    /// The machine's new status; `None`: unchanged.
    pub status: Option<MachineStatus>,
    pub after: Duration,
    pub event: Option<MachineEvent>,
}

/// The end of a creation pass over `m` (as recorded by then) that ended
/// with `end`; `None` for [`CreationTransition::Next`], which is no end.
pub fn creation_end(
    m: &Machine,
    end: &CreationTransition,
    vm: &VmIds,
    has_target: bool,
    settings: &Settings,
    now: DateTime<Utc>,
) -> Option<CreationEnd> {
    let status = m.status.clone().unwrap_or_default();
    let warn = |reason, note| {
        Some(MachineEvent {
            warning: true,
            reason,
            note,
        })
    };
    Some(match end {
        CreationTransition::Next(_) => return None,
        CreationTransition::Created => CreationEnd {
            status: created_status(m, has_target, &vm.addresses, now),
            after: recheck_after_creation(m, has_target, settings, now),
            event: None,
        },
        CreationTransition::CreateFailed { code, message, at } => {
            let f = create_failure(*code, message, *at, age(m, now), settings, now);
            let mut s = with_phase(&status, f.phase, false, now);
            s.last_operation = f.last_operation;
            CreationEnd {
                status: Some(s),
                after: f.retry,
                event: warn(
                    "CreateFailed",
                    DriverError::new(*code, message.clone()).to_string(),
                ),
            }
        }
        CreationTransition::InitializeFailed {
            code,
            message,
            after,
        } => {
            let mut s = status;
            s.last_operation = last_op(
                MachineOperationType::Create,
                MachineState::Failed,
                format!("Provider error: {message}. Initialize VM Instance"),
                Some(*code),
                now,
            );
            CreationEnd {
                status: Some(s),
                after: *after,
                event: warn(
                    "InitializeFailed",
                    DriverError::new(*code, message.clone()).to_string(),
                ),
            }
        }
        CreationTransition::StaleNode => {
            let mut s = with_phase(&status, MachinePhase::Failed, false, now);
            s.last_operation = last_op(
                MachineOperationType::Create,
                MachineState::Failed,
                STALE_NODE_DESCRIPTION,
                None,
                now,
            );
            CreationEnd {
                status: Some(s),
                after: LONG_RETRY,
                event: warn("StaleNode", STALE_NODE_DESCRIPTION.into()),
            }
        }
        CreationTransition::Retry(after) => CreationEnd {
            status: None,
            after: *after,
            event: None,
        },
    })
}

#[cfg(test)]
mod tests;
