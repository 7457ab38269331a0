//! The deletion flow (spec §2.4): the state machine S1–S6 with its
//! progress kept in an annotation, the class a deletion calls the driver
//! with, and the statuses and node condition it writes.

use std::time::Duration;

use api::{LastOperation, Machine, MachineClass, MachineOperationType, MachinePhase, labels};
use api::{MachineState, MachineStatus};
use chrono::{DateTime, Utc};
use driver::{Code, MEDIUM_RETRY, Outcome, SHORT_RETRY, Step};
use k8s_openapi::api::core::v1::{Node, NodeCondition};

use super::{KnownClass, LAST_KNOWN_CLASS, annotation, last_op, node_conditions, with_phase};
use crate::time::to_time;

/// Annotation on a deleting machine holding its [`DeletionStep`]. The flow
/// resumes from it after a restart; `lastOperation.description` is for
/// people only and is never parsed (spec §8.18).
pub const DELETION_STEP: &str = "machine.sapcloud.io/deletion-step";

/// The steps of the deletion flow (spec §2.4). Each is recorded before it
/// acts, and each action is idempotent, so a crash anywhere resumes at the
/// recorded step without losing the machine or its VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeletionStep {
    /// S1: find the node (label, node label, or the VM's status).
    GetVmStatus,
    /// S2: cordon and drain the node.
    DrainNode,
    /// S3: delete the node's VolumeAttachments (after a forced drain).
    DeleteVolumeAttachments,
    /// S4: delete the VM.
    DeleteVm,
    /// S5: delete the Node object.
    DeleteNode,
    /// S6: remove the machine's finalizer.
    RemoveFinalizer,
}

impl DeletionStep {
    /// Every step, in order.
    pub const ALL: [DeletionStep; 6] = [
        DeletionStep::GetVmStatus,
        DeletionStep::DrainNode,
        DeletionStep::DeleteVolumeAttachments,
        DeletionStep::DeleteVm,
        DeletionStep::DeleteNode,
        DeletionStep::RemoveFinalizer,
    ];

    /// The annotation value.
    pub fn as_str(self) -> &'static str {
        match self {
            DeletionStep::GetVmStatus => "S1",
            DeletionStep::DrainNode => "S2",
            DeletionStep::DeleteVolumeAttachments => "S3",
            DeletionStep::DeleteVm => "S4",
            DeletionStep::DeleteNode => "S5",
            DeletionStep::RemoveFinalizer => "S6",
        }
    }

    /// Upstream's lastOperation description of the step (contract for
    /// operators and tools that read it).
    pub fn description(self) -> &'static str {
        match self {
            DeletionStep::GetVmStatus => {
                "Set machine status to termination. Now, getting VM Status"
            }
            DeletionStep::DrainNode => "Initiate node drain",
            DeletionStep::DeleteVolumeAttachments => "Delete Volume Attachments",
            DeletionStep::DeleteVm => "Initiate VM deletion",
            DeletionStep::DeleteNode => "Initiate node object deletion",
            DeletionStep::RemoveFinalizer => "Initiate machine object finalizer removal",
        }
    }

    /// Parses an annotation value.
    pub fn parse(s: &str) -> Option<DeletionStep> {
        DeletionStep::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// The step recorded on a machine; `None` for a deletion that has not
    /// started (or an unreadable value, which restarts the flow at S1 —
    /// every step is safe to repeat).
    pub fn of(m: &Machine) -> Option<DeletionStep> {
        annotation(&m.metadata, DELETION_STEP).and_then(DeletionStep::parse)
    }
}

/// What the executor observed or got back at the current step.
#[derive(Clone, Debug, PartialEq)]
pub enum StepFact {
    /// S1: the node is known (label, node label, or the VM's status said).
    NodeKnown,
    /// S1: `GetMachineStatus` failed.
    StatusFailed { code: Code, message: String },
    /// S2, S3: the node does not exist (any more).
    NodeGone,
    /// S2: the drain finished.
    Drained { forced: bool },
    /// S2: the drain failed.
    DrainFailed { forced: bool, message: String },
    /// S2: the drain is under way; look again after this long.
    Draining(Duration),
    /// S3: no VolumeAttachment of the node is left (or no volume attached).
    VolumesDetached,
    /// S3: this many VolumeAttachments were being deleted.
    VolumeAttachmentsLeft(usize),
    /// S4: `DeleteMachine` answered (`Ok` for success).
    VmDeleteAnswered { code: Code, message: String },
    /// S5: the node is deleted (or there was none).
    NodeDeleted,
    /// S6: the finalizer is gone.
    FinalizerRemoved,
    /// S1, S4: the class is gone and the driver was never asked to create
    /// a VM (no providerID, no [`LAST_KNOWN_CLASS`]): there is no VM to
    /// look for or delete.
    NoVm,
    /// S1, S4: the driver would have to be called, and there is no class
    /// to call it with; the message says what is missing and what to do.
    ClassMissing { message: String },
}

/// The class a deletion hands the driver (at S1 and S4).
#[derive(Clone, Debug, PartialEq)]
pub enum DeletionClass {
    /// Call the driver with this class: the machine's own (being deleted
    /// or not), or, with `last_known`, what the machine recorded of it.
    Use {
        class: Box<MachineClass>,
        last_known: bool,
    },
    /// The class is gone and the driver was never asked to create a VM.
    NoVm,
    /// The class is gone, a VM may exist, and there is nothing to delete it
    /// with; the message says what the user can do.
    Missing(String),
}

/// Which class a deletion calls the driver with; `class` is the machine's
/// class if it exists. A VM is never assumed away while the machine names
/// one (providerID) or recorded a class before creating one: only a
/// machine with neither never had a VM.
pub fn deletion_class(m: &Machine, class: Option<MachineClass>) -> DeletionClass {
    if let Some(class) = class {
        return DeletionClass::Use {
            class: Box::new(class),
            last_known: false,
        };
    }
    let ns = m.metadata.namespace.as_deref().unwrap_or_default();
    let name = m.metadata.name.as_deref().unwrap_or_default();
    let class_name = &m.spec.class.name;
    let vm = if m.spec.provider_id.is_empty() {
        "the VM".to_string()
    } else {
        format!("VM {}", m.spec.provider_id)
    };
    match KnownClass::recorded(m) {
        Some(Some(known)) => DeletionClass::Use {
            class: Box::new(known.to_class(class_name, ns)),
            last_known: true,
        },
        Some(None) => DeletionClass::Missing(format!(
            "Cannot delete {vm} of machine {name}: MachineClass {ns}/{class_name} not found \
             and the machine's record of it ({LAST_KNOWN_CLASS}) is unreadable; \
             re-create MachineClass {class_name} as the VM was created with it \
             and the deletion continues"
        )),
        None if m.spec.provider_id.is_empty() => DeletionClass::NoVm,
        None => DeletionClass::Missing(format!(
            "Cannot delete {vm} of machine {name}: MachineClass {ns}/{class_name} not found \
             and the machine has no record of the class the VM was created with; \
             re-create MachineClass {class_name} (its provider spec and secrets as the VM \
             was created with) and the deletion continues"
        )),
    }
}

/// What happens after a step.
#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    /// Record `step` and go on with it; `note` prefixes its description.
    Next {
        step: DeletionStep,
        note: Option<&'static str>,
    },
    /// Stay at the step and look again after `after`; with a failure, the
    /// lastOperation turns `Failed` with that message and code.
    Stay {
        after: Duration,
        failure: Option<(String, Option<Code>)>,
    },
    /// The machine is gone.
    Finished,
}

/// How often a running drain or VolumeAttachment cleanup is looked at.
pub const DELETION_POLL: Duration = Duration::from_secs(1);

fn next(step: DeletionStep) -> Transition {
    Transition::Next { step, note: None }
}

fn stay_failed(after: Duration, message: String, code: Option<Code>) -> Transition {
    Transition::Stay {
        after,
        failure: Some((message, code)),
    }
}

/// The deletion state machine (spec §2.4): from a step and what was
/// observed there to the next step or a retry. A fact that does not belong
/// to the step leaves the machine where it is and looks again soon.
pub fn deletion_transition(
    step: DeletionStep,
    fact: &StepFact,
    resource_exhausted_retry: Duration,
) -> Transition {
    use DeletionStep::*;
    use StepFact::*;
    let retry = |code: Code, s: Step, what: &str, message: &str| match code.outcome(s) {
        Outcome::Retry(r) => stay_failed(
            r.period(resource_exhausted_retry),
            format!("{what}: {message}"),
            Some(code),
        ),
        _ => stay_failed(MEDIUM_RETRY, format!("{what}: {message}"), Some(code)),
    };
    match (step, fact) {
        (GetVmStatus, NodeKnown) => next(DrainNode),
        (GetVmStatus, StatusFailed { code, message }) => {
            match code.outcome(Step::DeletionStatus) {
                // No VM, or the driver cannot tell: still drain and delete,
                // so that NICs and disks are cleaned up (weak point #850).
                Outcome::Proceed => next(DrainNode),
                _ => retry(
                    *code,
                    Step::DeletionStatus,
                    "Getting the VM status failed",
                    message,
                ),
            }
        }
        (DrainNode | DeleteVolumeAttachments, NodeGone) => next(DeleteVm),
        (DrainNode, Drained { forced: true }) => Transition::Next {
            step: DeleteVolumeAttachments,
            note: Some("Force Drain successful."),
        },
        (DrainNode, Drained { forced: false }) => Transition::Next {
            step: DeleteVm,
            note: Some("Drain successful."),
        },
        // A forced drain does not wait for anything, so its failures (a pod
        // that could not be deleted) do not hold the deletion up; S3 makes
        // sure the volumes are released before the VM goes.
        (DrainNode, DrainFailed { forced: true, .. }) => next(DeleteVolumeAttachments),
        (DrainNode, DrainFailed { message, .. }) => stay_failed(
            SHORT_RETRY,
            format!("Drain failed due to - {message}. Will retry in next sync"),
            None,
        ),
        (DrainNode, Draining(after)) => Transition::Stay {
            after: *after,
            failure: None,
        },
        (DeleteVolumeAttachments, VolumesDetached) => next(DeleteVm),
        (DeleteVolumeAttachments, VolumeAttachmentsLeft(_)) => Transition::Stay {
            after: DELETION_POLL,
            failure: None,
        },
        (DeleteVm, VmDeleteAnswered { code, message }) => match code.outcome(Step::Delete) {
            Outcome::Proceed => next(DeleteNode),
            _ => retry(*code, Step::Delete, "Deleting the VM failed", message),
        },
        (DeleteNode, NodeDeleted) => next(RemoveFinalizer),
        // No VM: nothing to look up. The drain still runs, and finds no
        // node unless someone labelled one for this machine.
        (GetVmStatus, NoVm) => next(DrainNode),
        (DeleteVm, NoVm) => Transition::Next {
            step: DeleteNode,
            note: Some("No VM to delete."),
        },
        // Never skip a VM that may exist: stay, say why, look again when
        // the class comes back (its creation requeues the machine) or
        // after the medium period.
        (GetVmStatus | DeleteVm, ClassMissing { message }) => {
            stay_failed(MEDIUM_RETRY, message.clone(), None)
        }
        (RemoveFinalizer, FinalizerRemoved) => Transition::Finished,
        _ => Transition::Stay {
            after: SHORT_RETRY,
            failure: None,
        },
    }
}

/// Where a deletion goes without a target cluster (spec §2.4, "S1: no
/// target → S4"): the steps that work on the machine's Node, its pods and
/// volumes are passed over — S1, S2 and S3 go to S4, S5 to S6 — without
/// looking at anything. `None`: the step runs as usual.
pub fn skip_without_target(step: DeletionStep, has_target: bool) -> Option<Transition> {
    use DeletionStep::*;
    if has_target {
        return None;
    }
    match step {
        GetVmStatus | DrainNode | DeleteVolumeAttachments => Some(next(DeleteVm)),
        DeleteNode => Some(next(RemoveFinalizer)),
        DeleteVm | RemoveFinalizer => None,
    }
}

/// The lastOperation of a deletion at `step`: Processing with the step's
/// description (after `note`), or Failed with the failure before it.
pub fn deletion_last_op(
    step: DeletionStep,
    note: Option<&str>,
    failure: Option<(&str, Option<Code>)>,
    now: DateTime<Utc>,
) -> LastOperation {
    match failure {
        Some((message, code)) => last_op(
            MachineOperationType::Delete,
            MachineState::Failed,
            format!("{message}. {}", step.description()),
            code,
            now,
        ),
        None => last_op(
            MachineOperationType::Delete,
            MachineState::Processing,
            match note {
                Some(n) => format!("{n} {}", step.description()),
                None => step.description().to_string(),
            },
            None,
            now,
        ),
    }
}

/// S0: the status of a machine whose deletion starts — `Terminating`,
/// lastOp Delete/Processing at S1, preservation cleared. After this the
/// phase stays frozen until the machine is gone.
pub fn terminating_status(m: &Machine, now: DateTime<Utc>) -> MachineStatus {
    let old = m.status.clone().unwrap_or_default();
    let mut s = with_phase(&old, MachinePhase::Terminating, false, now);
    s.current_status.preserve_expiry_time = None;
    s.last_operation = deletion_last_op(DeletionStep::GetVmStatus, None, None, now);
    s
}

/// The node condition set when a drain starts: `Terminating`, with reason
/// `Unhealthy` for a failed machine and `ScaleDown` otherwise. `None` when
/// the node has it already (an earlier reason is kept).
pub fn terminating_condition(
    node: &Node,
    machine_failed: bool,
    now: DateTime<Utc>,
) -> Option<NodeCondition> {
    if node_conditions(node)
        .iter()
        .any(|c| c.type_ == labels::NODE_TERMINATING)
    {
        return None;
    }
    let reason = if machine_failed {
        labels::TERMINATING_UNHEALTHY
    } else {
        labels::TERMINATING_SCALE_DOWN
    };
    Some(NodeCondition {
        type_: labels::NODE_TERMINATING.to_string(),
        status: "True".to_string(),
        reason: Some(reason.to_string()),
        message: Some("The machine controller is deleting this node's machine".to_string()),
        last_transition_time: Some(to_time(now)),
        last_heartbeat_time: Some(to_time(now)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::test_support::{node, t};
    use api::testing::Fixture;
    use serde_json::json;

    #[test]
    fn deletion_steps_round_trip() {
        for s in DeletionStep::ALL {
            assert_eq!(DeletionStep::parse(s.as_str()), Some(s));
        }
        assert_eq!(DeletionStep::parse("Initiate node drain"), None);
        let m = Machine::test("m1").annotation(DELETION_STEP, "S4");
        assert_eq!(DeletionStep::of(&m), Some(DeletionStep::DeleteVm));
        assert_eq!(DeletionStep::of(&Machine::test("m1")), None);
    }

    #[test]
    fn deletion_state_machine() {
        use DeletionStep::*;
        use StepFact::*;
        let rx = Duration::from_secs(600);
        let nx = |s| Transition::Next {
            step: s,
            note: None,
        };
        let failed = |secs: u64, code: Option<Code>| {
            move |t: &Transition| {
                matches!(t, Transition::Stay { after, failure: Some((_, c)) }
                    if *after == Duration::from_secs(secs) && *c == code)
            }
        };
        let status = |code| StatusFailed {
            code,
            message: "m".into(),
        };
        let delete = |code| VmDeleteAnswered {
            code,
            message: "m".into(),
        };
        // (step, fact, expected next)
        let table: Vec<(DeletionStep, StepFact, Transition)> = vec![
            (GetVmStatus, NodeKnown, nx(DrainNode)),
            (GetVmStatus, status(Code::NotFound), nx(DrainNode)),
            (GetVmStatus, status(Code::Unimplemented), nx(DrainNode)),
            (GetVmStatus, status(Code::Uninitialized), nx(DrainNode)),
            (DrainNode, NodeGone, nx(DeleteVm)),
            (
                DrainNode,
                Drained { forced: false },
                Transition::Next {
                    step: DeleteVm,
                    note: Some("Drain successful."),
                },
            ),
            (
                DrainNode,
                Drained { forced: true },
                Transition::Next {
                    step: DeleteVolumeAttachments,
                    note: Some("Force Drain successful."),
                },
            ),
            (
                DrainNode,
                DrainFailed {
                    forced: true,
                    message: "x".into(),
                },
                nx(DeleteVolumeAttachments),
            ),
            (
                DrainNode,
                Draining(Duration::from_secs(2)),
                Transition::Stay {
                    after: Duration::from_secs(2),
                    failure: None,
                },
            ),
            (DeleteVolumeAttachments, NodeGone, nx(DeleteVm)),
            (DeleteVolumeAttachments, VolumesDetached, nx(DeleteVm)),
            (
                DeleteVolumeAttachments,
                VolumeAttachmentsLeft(2),
                Transition::Stay {
                    after: DELETION_POLL,
                    failure: None,
                },
            ),
            (DeleteVm, delete(Code::Ok), nx(DeleteNode)),
            (DeleteVm, delete(Code::NotFound), nx(DeleteNode)),
            (DeleteNode, NodeDeleted, nx(RemoveFinalizer)),
            (RemoveFinalizer, FinalizerRemoved, Transition::Finished),
            // A fact from another step changes nothing.
            (
                DeleteVm,
                NodeKnown,
                Transition::Stay {
                    after: SHORT_RETRY,
                    failure: None,
                },
            ),
        ];
        for (step, fact, want) in table {
            assert_eq!(
                deletion_transition(step, &fact, rx),
                want,
                "{step:?} {fact:?}"
            );
        }
        // Failures: (step, fact, retry seconds, code)
        let failures: Vec<(DeletionStep, StepFact, u64, Option<Code>)> = vec![
            (
                GetVmStatus,
                status(Code::Unavailable),
                5,
                Some(Code::Unavailable),
            ),
            (
                GetVmStatus,
                status(Code::Internal),
                180,
                Some(Code::Internal),
            ),
            (
                DrainNode,
                DrainFailed {
                    forced: false,
                    message: "pdb".into(),
                },
                5,
                None,
            ),
            (
                DeleteVm,
                delete(Code::Unavailable),
                5,
                Some(Code::Unavailable),
            ),
            (DeleteVm, delete(Code::Aborted), 5, Some(Code::Aborted)),
            (
                DeleteVm,
                delete(Code::PermissionDenied),
                600,
                Some(Code::PermissionDenied),
            ),
        ];
        for (step, fact, secs, code) in failures {
            let got = deletion_transition(step, &fact, rx);
            assert!(failed(secs, code)(&got), "{step:?} {fact:?}: {got:?}");
        }
    }

    #[test]
    fn deletion_without_a_vm_or_a_class() {
        use DeletionStep::*;
        use StepFact::*;
        let rx = Duration::from_secs(600);
        // (step, fact, expected)
        let table = [
            (GetVmStatus, NoVm, next(DrainNode)),
            (
                DeleteVm,
                NoVm,
                Transition::Next {
                    step: DeleteNode,
                    note: Some("No VM to delete."),
                },
            ),
            // A fact that does not belong to the step changes nothing.
            (
                DrainNode,
                NoVm,
                Transition::Stay {
                    after: SHORT_RETRY,
                    failure: None,
                },
            ),
        ];
        for (step, fact, want) in table {
            assert_eq!(deletion_transition(step, &fact, rx), want, "{step:?}");
        }
        for step in [GetVmStatus, DeleteVm] {
            let fact = ClassMissing {
                message: "re-create it".into(),
            };
            assert_eq!(
                deletion_transition(step, &fact, rx),
                Transition::Stay {
                    after: MEDIUM_RETRY,
                    failure: Some(("re-create it".into(), None)),
                },
                "{step:?}"
            );
        }
    }

    #[test]
    fn deletion_classes() {
        let class = MachineClass::test("test-class").with_uid("c1");
        let known = KnownClass::of(&MachineClass {
            provider_spec: json!({"zone": "a"}),
            ..MachineClass::test("test-class")
        });
        let recorded =
            |m: Machine| m.annotation(LAST_KNOWN_CLASS, &serde_json::to_string(&known).unwrap());
        let use_ = |c: &MachineClass, last_known| DeletionClass::Use {
            class: Box::new(c.clone()),
            last_known,
        };
        let rebuilt = known.to_class("test-class", "default");
        assert_eq!(rebuilt.provider_spec, json!({"zone": "a"}));
        assert_eq!(rebuilt.secret_ref, class.secret_ref);
        let missing = |d: &DeletionClass, what: &str| {
            matches!(d, DeletionClass::Missing(m)
                if m.contains("MachineClass default/test-class not found")
                    && m.contains("re-create MachineClass test-class")
                    && m.contains(what))
        };
        let bare = Machine::test("m1");
        let with_vm = Machine::test("m1").provider_id("local:///a/1");
        // (machine, class exists, expected)
        type Check<'a> = Box<dyn Fn(&DeletionClass) -> bool + 'a>;
        let table: Vec<(Machine, bool, Check)> = vec![
            // The class is there: always the driver, VM or not.
            (bare.clone(), true, Box::new(|d| *d == use_(&class, false))),
            (
                with_vm.clone(),
                true,
                Box::new(|d| *d == use_(&class, false)),
            ),
            // Gone: the record, whether or not a providerID was written.
            (
                recorded(bare.clone()),
                false,
                Box::new(|d| *d == use_(&rebuilt, true)),
            ),
            (
                recorded(with_vm.clone()),
                false,
                Box::new(|d| *d == use_(&rebuilt, true)),
            ),
            // Never recorded and no providerID: the driver was never asked.
            (bare.clone(), false, Box::new(|d| *d == DeletionClass::NoVm)),
            // A VM and nothing to delete it with: say so.
            (
                with_vm.clone(),
                false,
                Box::new(|d| missing(d, "VM local:///a/1 of machine m1")),
            ),
            // An unreadable record means the driver was asked.
            (
                bare.annotation(LAST_KNOWN_CLASS, "{not json"),
                false,
                Box::new(|d| missing(d, "unreadable")),
            ),
        ];
        for (i, (m, exists, check)) in table.into_iter().enumerate() {
            let got = deletion_class(&m, exists.then(|| class.clone()));
            assert!(check(&got), "case {i}: {got:?}");
        }
    }

    #[test]
    fn deletion_skips_target_steps_without_a_target() {
        use DeletionStep::*;
        let nx = |step| Some(Transition::Next { step, note: None });
        // (step, has target, transition)
        let table = [
            (GetVmStatus, false, nx(DeleteVm)),
            (DrainNode, false, nx(DeleteVm)),
            (DeleteVolumeAttachments, false, nx(DeleteVm)),
            (DeleteVm, false, None),
            (DeleteNode, false, nx(RemoveFinalizer)),
            (RemoveFinalizer, false, None),
        ];
        for (step, has_target, want) in table {
            assert_eq!(skip_without_target(step, has_target), want, "{step:?}");
        }
        for step in DeletionStep::ALL {
            assert_eq!(
                skip_without_target(step, true),
                None,
                "{step:?} with a target"
            );
        }
    }

    #[test]
    fn deletion_descriptions() {
        let op = deletion_last_op(
            DeletionStep::DeleteVm,
            Some("Drain successful."),
            None,
            t(0),
        );
        assert_eq!(op.description, "Drain successful. Initiate VM deletion");
        assert_eq!(op.state, Some(MachineState::Processing));
        let op = deletion_last_op(
            DeletionStep::DrainNode,
            None,
            Some(("Drain failed due to - x", None)),
            t(0),
        );
        assert_eq!(
            op.description,
            "Drain failed due to - x. Initiate node drain"
        );
        assert_eq!(op.state, Some(MachineState::Failed));
        let m = Machine::test("m1").running();
        let s = terminating_status(&m, t(3));
        assert_eq!(s.current_status.phase, Some(MachinePhase::Terminating));
        assert_eq!(
            s.last_operation.description,
            "Set machine status to termination. Now, getting VM Status"
        );
        assert_eq!(s.last_operation.type_, Some(MachineOperationType::Delete));
    }

    #[test]
    fn terminating_condition_reason_and_kept() {
        let n = node(&[("Ready", "True")]);
        let c = terminating_condition(&n, true, t(0)).unwrap();
        assert_eq!(c.reason.as_deref(), Some("Unhealthy"));
        let c = terminating_condition(&n, false, t(0)).unwrap();
        assert_eq!(c.reason.as_deref(), Some("ScaleDown"));
        let n = node(&[("Terminating", "True")]);
        assert_eq!(terminating_condition(&n, false, t(0)), None);
    }
}
