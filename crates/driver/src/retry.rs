//! What a driver's answer means for the machine controller: for each code,
//! at each place a call is made, whether the flow goes on, branches, skips a
//! step or retries, and after how long.
//!
//! Two sources describe this and they do not fully agree:
//!
//! * The driver documentation (seed 003 §2.11) lists, per call, the codes a
//!   driver may return and whether the controller must retry automatically.
//!   [`Code::auto_retry`] reproduces those tables as they are.
//! * The behavioural spec (spec §2.1 creation flow, §2.4 deletion flow)
//!   records what upstream's controller actually does. It is authoritative,
//!   and [`Code::outcome`] follows it. Where the two differ:
//!   - Codes the tables mark "no automatic retry" (`InvalidArgument`,
//!     `PermissionDenied`, ...) are still retried by upstream, after the
//!     medium period (create, status) or the long one (delete). Nothing is
//!     ever abandoned: a creation that keeps failing ends in phase `Failed`
//!     once the creation timeout passes, which is the controller's business,
//!     not the code's.
//!   - `NotFound` from `InitializeMachine`: the table says skip the
//!     initialization; upstream skips only on `Unimplemented` and retries
//!     every other code, so `NotFound` is retried here too.
//!   - `Uninitialized` from `GetMachineStatus`: the table says no automatic
//!     retry, yet its recovery column says initialization is attempted again;
//!     the creation flow does so by calling `InitializeMachine` in the same
//!     pass ([`Outcome::InitializeVm`]).
//!   - `ListMachines`, `GetVolumeIDs` and `GenerateMachineClassForMigration`
//!     have tables but no call site with retry rules in the spec; their
//!     callers (orphan collection, drain) retry on their own schedules, so
//!     they have no [`Step`]. `UpdateMachine` has no table at all.

use std::time::Duration;

use crate::{Call, Code};

/// Upstream's `ShortRetry`: for transient provider errors and for the next
/// step after a successful write.
pub const SHORT_RETRY: Duration = Duration::from_secs(5);

/// Upstream's `MediumRetry`: for errors that will not go away by themselves
/// soon but might after someone fixes a class, secret or quota.
pub const MEDIUM_RETRY: Duration = Duration::from_secs(3 * 60);

/// Upstream's `LongRetry`: the steady-state resync, and the period after a
/// non-transient `DeleteMachine` failure.
pub const LONG_RETRY: Duration = Duration::from_secs(10 * 60);

/// Default of `--resource-exhausted-retry`, the period after
/// `ResourceExhausted` from a creation (spec §7).
pub const DEFAULT_RESOURCE_EXHAUSTED_RETRY: Duration = Duration::from_secs(10 * 60);

/// How long to wait before trying a failed step again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Retry {
    /// [`SHORT_RETRY`] (5s).
    Short,
    /// [`MEDIUM_RETRY`] (3m).
    Medium,
    /// [`LONG_RETRY`] (10m).
    Long,
    /// The configured `--resource-exhausted-retry`
    /// ([`DEFAULT_RESOURCE_EXHAUSTED_RETRY`] unless set). A separate
    /// variant because the period is configuration, not a constant.
    ResourceExhausted,
}

impl Retry {
    /// The period, given the configured `--resource-exhausted-retry`.
    pub fn period(self, resource_exhausted_retry: Duration) -> Duration {
        match self {
            Retry::Short => SHORT_RETRY,
            Retry::Medium => MEDIUM_RETRY,
            Retry::Long => LONG_RETRY,
            Retry::ResourceExhausted => resource_exhausted_retry,
        }
    }
}

/// A place in the machine controller's flows where a driver call's answer
/// decides what happens next. `GetMachineStatus` appears twice because the
/// creation and the deletion flow read its codes differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// `GetMachineStatus` at the start of the creation flow (spec §2.1.2).
    CreationStatus,
    /// `CreateMachine` in the creation flow (spec §2.1.2).
    Create,
    /// `InitializeMachine` after creation, or when the status said
    /// `Uninitialized` (spec §2.1.4).
    Initialize,
    /// `GetMachineStatus` in deletion step S1, looking for the node
    /// (spec §2.4).
    DeletionStatus,
    /// `DeleteMachine` in deletion step S4 (spec §2.4).
    Delete,
    /// `UpdateMachine` for a hot update (seed 003 §2.2.3).
    HotUpdate,
}

impl Step {
    /// Every step.
    pub const ALL: [Step; 6] = [
        Step::CreationStatus,
        Step::Create,
        Step::Initialize,
        Step::DeletionStatus,
        Step::Delete,
        Step::HotUpdate,
    ];

    /// The driver call made at this step.
    pub fn call(self) -> Call {
        match self {
            Step::CreationStatus | Step::DeletionStatus => Call::GetMachineStatus,
            Step::Create => Call::CreateMachine,
            Step::Initialize => Call::InitializeMachine,
            Step::Delete => Call::DeleteMachine,
            Step::HotUpdate => Call::UpdateMachine,
        }
    }
}

/// What the controller does after a driver answer at a [`Step`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Go on with the flow: the call succeeded, or its code says the step's
    /// goal already holds (the VM to delete is gone).
    Proceed,
    /// The status found no VM, or the driver cannot tell: call
    /// `CreateMachine`. A machine that already has a providerID keeps it
    /// instead (spec §2.1.2).
    CreateVm,
    /// The VM exists but is not initialized: call `InitializeMachine`.
    InitializeVm,
    /// The driver does not offer this optional call: leave the step out.
    Skip,
    /// Record the failure in `lastOperation` and try again after the period.
    Retry(Retry),
}

impl Code {
    /// What the machine controller does when the call at `step` answers with
    /// this code (`Ok` for success). Follows spec §2.1 and §2.4; see the
    /// module documentation for where that differs from the driver tables.
    pub fn outcome(self, step: Step) -> Outcome {
        match (step, self) {
            (_, Code::Ok) => Outcome::Proceed,

            // The creation flow asks before it creates. "No VM" and "cannot
            // tell" both lead to CreateMachine, which is idempotent, so a
            // driver without GetMachineStatus still works.
            (Step::CreationStatus, Code::NotFound | Code::Unimplemented) => Outcome::CreateVm,
            (Step::CreationStatus, Code::Uninitialized) => Outcome::InitializeVm,
            // Any other status error goes through the same handler as a
            // failed CreateMachine.
            (Step::CreationStatus | Step::Create, code) => Outcome::Retry(create_error_retry(code)),

            // Upstream's creation flow skips initialization only for
            // Unimplemented and retries anything else quickly: the VM exists,
            // and initialization failures are usually short-lived (the
            // InitializeMachine proposal, seed 003 §2.2.4, returns ShortRetry).
            (Step::Initialize, Code::Unimplemented) => Outcome::Skip,
            (Step::Initialize, _) => Outcome::Retry(Retry::Short),

            // Deletion looks up the node through the VM only to drain it.
            // When there is no VM, or the driver cannot say, deletion goes on
            // anyway: draining and DeleteMachine still clean up NICs and disks.
            (Step::DeletionStatus, Code::NotFound | Code::Unimplemented | Code::Uninitialized) => {
                Outcome::Proceed
            }
            (Step::DeletionStatus, code) if code.is_transient() => Outcome::Retry(Retry::Short),
            (Step::DeletionStatus, _) => Outcome::Retry(Retry::Medium),

            // A VM that is already gone is what deletion wants.
            (Step::Delete, Code::NotFound) => Outcome::Proceed,
            (Step::Delete, code) if code.is_transient() => Outcome::Retry(Retry::Short),
            (Step::Delete, _) => Outcome::Retry(Retry::Long),

            // The hot-update proposal says an unimplemented UpdateMachine
            // only gets logged, and any other failure is requeued without
            // recording the spec as applied. It names no periods; trellis uses
            // the machine controller's usual ones.
            (Step::HotUpdate, Code::Unimplemented) => Outcome::Skip,
            (Step::HotUpdate, code) if code.is_transient() => Outcome::Retry(Retry::Short),
            (Step::HotUpdate, _) => Outcome::Retry(Retry::Medium),
        }
    }

    /// The "Auto Retry Required" column of the driver documentation's table
    /// for `call` (seed 003 §2.11): `Some(true)` when the controller is meant
    /// to retry by itself, `Some(false)` when it is not, `None` when the table
    /// does not list the code for that call (or, for `UpdateMachine`, there
    /// is no table). This is the documented intent; [`Code::outcome`] is what
    /// the controller does.
    pub fn auto_retry(self, call: Call) -> Option<bool> {
        auto_retry_table(call)
            .iter()
            .find(|(code, _)| *code == self)
            .map(|(_, retry)| *retry)
    }
}

/// Upstream's create-error handler (spec §2.1): quota errors wait for the
/// configured period, transient errors are retried soon, everything else
/// every three minutes until the creation timeout fails the machine.
fn create_error_retry(code: Code) -> Retry {
    if code == Code::ResourceExhausted {
        Retry::ResourceExhausted
    } else if code.is_transient() {
        Retry::Short
    } else {
        Retry::Medium
    }
}

/// The driver documentation's tables, one per call: code and "Auto Retry
/// Required".
fn auto_retry_table(call: Call) -> &'static [(Code, bool)] {
    use Code::*;
    match call {
        Call::CreateMachine => &[
            (Ok, false),
            (Canceled, false),
            (Unknown, true),
            (InvalidArgument, false),
            (DeadlineExceeded, true),
            (AlreadyExists, false),
            (PermissionDenied, false),
            (ResourceExhausted, false),
            (FailedPrecondition, false),
            (Aborted, true),
            (OutOfRange, false),
            (Unimplemented, false),
            (Internal, false),
            (Unavailable, true),
            (Unauthenticated, false),
        ],
        Call::InitializeMachine => &[
            (Ok, false),
            (NotFound, false),
            (Unimplemented, false),
            (Internal, true),
            (Uninitialized, true),
        ],
        Call::DeleteMachine => &[
            (Ok, false),
            (Canceled, false),
            (Unknown, true),
            (InvalidArgument, false),
            (DeadlineExceeded, true),
            (PermissionDenied, false),
            (FailedPrecondition, false),
            (Aborted, true),
            (Unimplemented, false),
            (Internal, false),
            (Unavailable, true),
            (Unauthenticated, false),
        ],
        Call::GetMachineStatus => &[
            (Ok, false),
            (Canceled, false),
            (Unknown, true),
            (InvalidArgument, false),
            (DeadlineExceeded, true),
            (NotFound, false),
            (PermissionDenied, false),
            (FailedPrecondition, false),
            // Several VMs claim the machine; the orphan collector resolves it.
            (OutOfRange, true),
            (Unimplemented, false),
            (Internal, false),
            (Unavailable, true),
            (Unauthenticated, false),
            (Uninitialized, false),
        ],
        Call::ListMachines => &[
            (Ok, false),
            (Canceled, false),
            (Unknown, true),
            (InvalidArgument, false),
            (DeadlineExceeded, true),
            (PermissionDenied, false),
            (Unimplemented, false),
            (Internal, false),
            (Unavailable, true),
            (Unauthenticated, false),
        ],
        Call::GetVolumeIds => &[
            (Ok, false),
            (Canceled, false),
            (Unknown, true),
            (InvalidArgument, false),
            (DeadlineExceeded, true),
            (Unimplemented, false),
            (Internal, false),
            (Unavailable, true),
        ],
        // Even success is "retried": reconciliation resumes once the
        // generated class exists.
        Call::GenerateMachineClassForMigration => {
            &[(Ok, true), (Unimplemented, false), (Internal, true)]
        }
        Call::UpdateMachine => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Code::*;

    /// Expected outcome of every code at one step: the listed groups, and
    /// `rest` for every code not listed.
    struct Case {
        step: Step,
        groups: &'static [(&'static [Code], Outcome)],
        rest: Outcome,
    }

    const TRANSIENT: &[Code] = &[Unknown, DeadlineExceeded, Aborted, Unavailable];

    const CASES: &[Case] = &[
        Case {
            step: Step::CreationStatus,
            groups: &[
                (&[Ok], Outcome::Proceed),
                (&[NotFound, Unimplemented], Outcome::CreateVm),
                (&[Uninitialized], Outcome::InitializeVm),
                (
                    &[ResourceExhausted],
                    Outcome::Retry(Retry::ResourceExhausted),
                ),
                (TRANSIENT, Outcome::Retry(Retry::Short)),
            ],
            rest: Outcome::Retry(Retry::Medium),
        },
        Case {
            step: Step::Create,
            groups: &[
                (&[Ok], Outcome::Proceed),
                (
                    &[ResourceExhausted],
                    Outcome::Retry(Retry::ResourceExhausted),
                ),
                (TRANSIENT, Outcome::Retry(Retry::Short)),
            ],
            rest: Outcome::Retry(Retry::Medium),
        },
        Case {
            step: Step::Initialize,
            groups: &[(&[Ok], Outcome::Proceed), (&[Unimplemented], Outcome::Skip)],
            rest: Outcome::Retry(Retry::Short),
        },
        Case {
            step: Step::DeletionStatus,
            groups: &[
                (
                    &[Ok, NotFound, Unimplemented, Uninitialized],
                    Outcome::Proceed,
                ),
                (TRANSIENT, Outcome::Retry(Retry::Short)),
            ],
            rest: Outcome::Retry(Retry::Medium),
        },
        Case {
            step: Step::Delete,
            groups: &[
                (&[Ok, NotFound], Outcome::Proceed),
                (TRANSIENT, Outcome::Retry(Retry::Short)),
            ],
            rest: Outcome::Retry(Retry::Long),
        },
        Case {
            step: Step::HotUpdate,
            groups: &[
                (&[Ok], Outcome::Proceed),
                (&[Unimplemented], Outcome::Skip),
                (TRANSIENT, Outcome::Retry(Retry::Short)),
            ],
            rest: Outcome::Retry(Retry::Medium),
        },
    ];

    #[test]
    fn outcome_of_every_code_at_every_step() {
        assert_eq!(CASES.len(), Step::ALL.len());
        for case in CASES {
            for code in Code::ALL {
                let want = case
                    .groups
                    .iter()
                    .find(|(codes, _)| codes.contains(&code))
                    .map_or(case.rest, |(_, outcome)| *outcome);
                assert_eq!(code.outcome(case.step), want, "{:?} {code}", case.step);
            }
        }
    }

    #[test]
    fn spec_examples() {
        // spec §8 scenario 6: ResourceExhausted waits for the flag's period,
        // Unavailable 5s, InvalidArgument 3m.
        let flag = Duration::from_secs(42);
        let period = |code: Code| match code.outcome(Step::Create) {
            Outcome::Retry(r) => r.period(flag),
            other => panic!("{code}: {other:?}"),
        };
        assert_eq!(period(ResourceExhausted), flag);
        assert_eq!(period(Unavailable), Duration::from_secs(5));
        assert_eq!(period(InvalidArgument), Duration::from_secs(180));
        // spec §2.4 S4: non-transient delete errors wait ten minutes.
        assert_eq!(
            PermissionDenied.outcome(Step::Delete),
            Outcome::Retry(Retry::Long)
        );
        assert_eq!(Retry::Long.period(flag), Duration::from_secs(600));
    }

    #[test]
    fn steps_name_their_calls() {
        for (step, call) in [
            (Step::CreationStatus, Call::GetMachineStatus),
            (Step::Create, Call::CreateMachine),
            (Step::Initialize, Call::InitializeMachine),
            (Step::DeletionStatus, Call::GetMachineStatus),
            (Step::Delete, Call::DeleteMachine),
            (Step::HotUpdate, Call::UpdateMachine),
        ] {
            assert_eq!(step.call(), call);
        }
    }

    #[test]
    fn documented_auto_retry_column() {
        // (call, codes with "Y", codes with "N"); codes in neither list are
        // not in that call's table.
        let rows: &[(Call, &[Code], &[Code])] = &[
            (
                Call::CreateMachine,
                TRANSIENT,
                &[
                    Ok,
                    Canceled,
                    InvalidArgument,
                    AlreadyExists,
                    PermissionDenied,
                    ResourceExhausted,
                    FailedPrecondition,
                    OutOfRange,
                    Unimplemented,
                    Internal,
                    Unauthenticated,
                ],
            ),
            (
                Call::InitializeMachine,
                &[Internal, Uninitialized],
                &[Ok, NotFound, Unimplemented],
            ),
            (
                Call::DeleteMachine,
                TRANSIENT,
                &[
                    Ok,
                    Canceled,
                    InvalidArgument,
                    PermissionDenied,
                    FailedPrecondition,
                    Unimplemented,
                    Internal,
                    Unauthenticated,
                ],
            ),
            (
                Call::GetMachineStatus,
                &[Unknown, DeadlineExceeded, OutOfRange, Unavailable],
                &[
                    Ok,
                    Canceled,
                    InvalidArgument,
                    NotFound,
                    PermissionDenied,
                    FailedPrecondition,
                    Unimplemented,
                    Internal,
                    Unauthenticated,
                    Uninitialized,
                ],
            ),
            (
                Call::ListMachines,
                &[Unknown, DeadlineExceeded, Unavailable],
                &[
                    Ok,
                    Canceled,
                    InvalidArgument,
                    PermissionDenied,
                    Unimplemented,
                    Internal,
                    Unauthenticated,
                ],
            ),
            (
                Call::GetVolumeIds,
                &[Unknown, DeadlineExceeded, Unavailable],
                &[Ok, Canceled, InvalidArgument, Unimplemented, Internal],
            ),
            (
                Call::GenerateMachineClassForMigration,
                &[Ok, Internal],
                &[Unimplemented],
            ),
            (Call::UpdateMachine, &[], &[]),
        ];
        assert_eq!(rows.len(), Call::ALL.len());
        for (call, yes, no) in rows {
            for code in Code::ALL {
                let want = if yes.contains(&code) {
                    Some(true)
                } else if no.contains(&code) {
                    Some(false)
                } else {
                    None
                };
                assert_eq!(code.auto_retry(*call), want, "{call} {code}");
            }
        }
        // DataLoss appears in no table.
        assert!(Call::ALL.iter().all(|c| DataLoss.auto_retry(*c).is_none()));
    }
}
