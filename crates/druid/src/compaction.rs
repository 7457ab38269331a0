//! The compaction controller's decision (spec §7,
//! `internal/controller/compaction/*`): from the snapshot leases' revision
//! delta, the compactor Job's state and the last compaction condition,
//! what to do next. Pure; the controller carries it out.

use std::time::Duration;

/// Upstream's defaults of `eventsThreshold` and
/// `triggerFullSnapshotThreshold`.
pub const DEFAULT_EVENTS_THRESHOLD: i64 = 1_000_000;
pub const DEFAULT_TRIGGER_FULL_SNAPSHOT_THRESHOLD: i64 = 3_000_000;
/// How long to wait before looking again at a Job being deleted or just
/// finished.
pub const REQUEUE: Duration = Duration::from_secs(10);

/// How a finished compactor Job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    Succeeded,
    /// `DeadlineExceeded`, a pod DisruptionTarget reason, `ProcessFailure`
    /// or `Unknown`: the reason the condition records.
    Failed(String),
}

/// The compactor Job `<etcd>-compactor`, if it exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobState {
    Terminating,
    Active,
    Finished(JobOutcome),
}

/// What the reconcile observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub etcd_deleting: bool,
    pub has_store: bool,
    pub job: Option<JobState>,
    /// holderIdentity of `<etcd>-full-snap` and `<etcd>-delta-snap`.
    pub full_holder: Option<String>,
    pub delta_holder: Option<String>,
    pub events_threshold: Option<i64>,
    pub trigger_full_snapshot_threshold: Option<i64>,
    /// The LastSnapshotCompactionSucceeded condition's (status, reason).
    pub last_condition: Option<(String, String)>,
}

/// A condition the decision sets: (status, reason, message).
pub type ConditionUpdate = (&'static str, String, String);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Foreground-delete the job (the Etcd is going or has no store).
    DeleteJob,
    /// Look again later (a job is being deleted).
    Requeue(Duration),
    /// A job is running: wait for its change.
    Wait,
    /// The job finished: record the condition, delete the job, look again.
    Finished {
        condition: ConditionUpdate,
        succeeded: bool,
    },
    /// Not enough new events.
    Nothing,
    /// Create the compactor job; `delta` events are waiting.
    CreateJob { delta: i64 },
    /// Ask backup-restore for a full snapshot (`/snapshot/full`) instead.
    TriggerFullSnapshot { delta: i64 },
    /// A snapshot lease's holder is missing or not a revision.
    BadLease(String),
}

fn revision(holder: &Option<String>, lease: &str) -> Result<i64, String> {
    let h = holder
        .as_deref()
        .ok_or_else(|| format!("{lease} snapshot lease has no holderIdentity"))?;
    h.parse::<i64>()
        .map_err(|_| format!("{lease} snapshot lease holderIdentity {h:?} is not a revision"))
}

pub fn decide(o: &Observed) -> Decision {
    if o.etcd_deleting || !o.has_store {
        return match o.job {
            Some(_) => Decision::DeleteJob,
            None => Decision::Nothing,
        };
    }
    match &o.job {
        Some(JobState::Terminating) => return Decision::Requeue(REQUEUE),
        Some(JobState::Active) => return Decision::Wait,
        Some(JobState::Finished(outcome)) => {
            return match outcome {
                JobOutcome::Succeeded => Decision::Finished {
                    condition: (
                        "True",
                        "None".to_string(),
                        "Compaction job succeeded".to_string(),
                    ),
                    succeeded: true,
                },
                JobOutcome::Failed(reason) => Decision::Finished {
                    condition: (
                        "False",
                        reason.clone(),
                        format!("Compaction job failed: {reason}"),
                    ),
                    succeeded: false,
                },
            };
        }
        None => {}
    }
    let full = match revision(&o.full_holder, "full") {
        Ok(r) => r,
        Err(e) => return Decision::BadLease(e),
    };
    let delta_rev = match revision(&o.delta_holder, "delta") {
        Ok(r) => r,
        Err(e) => return Decision::BadLease(e),
    };
    let delta = delta_rev.saturating_sub(full);
    let trigger = o
        .trigger_full_snapshot_threshold
        .unwrap_or(DEFAULT_TRIGGER_FULL_SNAPSHOT_THRESHOLD);
    let events = o.events_threshold.unwrap_or(DEFAULT_EVENTS_THRESHOLD);
    let last_failed_for_snapshot = matches!(
        &o.last_condition,
        Some((s, r)) if s == "False" && (r == "DeadlineExceeded" || r == "ErrorTriggeringFullSnapshot")
    );
    if delta >= trigger || last_failed_for_snapshot {
        Decision::TriggerFullSnapshot { delta }
    } else if delta >= events {
        Decision::CreateJob { delta }
    } else {
        Decision::Nothing
    }
}

/// The condition after a triggered full snapshot.
pub fn full_snapshot_result(ok: Result<(), String>) -> ConditionUpdate {
    match ok {
        Ok(()) => (
            "True",
            "FullSnapshotTakenSuccessfully".to_string(),
            "Full snapshot taken successfully".to_string(),
        ),
        Err(e) => (
            "False",
            "ErrorTriggeringFullSnapshot".to_string(),
            format!("Error triggering full snapshot: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_leases(full: &str, delta: &str) -> Observed {
        Observed {
            has_store: true,
            full_holder: Some(full.into()),
            delta_holder: Some(delta.into()),
            ..Default::default()
        }
    }

    #[test]
    fn scenario_13_a_million_new_events_create_the_compactor_job() {
        assert_eq!(
            decide(&with_leases("1000", "1000500")),
            Decision::Nothing,
            "500 below the threshold"
        );
        assert_eq!(
            decide(&with_leases("1000", "1001000")),
            Decision::CreateJob { delta: 1_000_000 }
        );
        let mut o = with_leases("1000", "1000500");
        o.events_threshold = Some(400);
        assert_eq!(decide(&o), Decision::CreateJob { delta: 999_500 });
    }

    #[test]
    fn scenario_14_a_finished_job_sets_the_condition_and_is_deleted() {
        let mut o = with_leases("1", "2");
        o.job = Some(JobState::Finished(JobOutcome::Succeeded));
        match decide(&o) {
            Decision::Finished {
                condition: (status, reason, _),
                succeeded,
            } => {
                assert_eq!((status, reason.as_str(), succeeded), ("True", "None", true));
            }
            other => panic!("{other:?}"),
        }
        o.job = Some(JobState::Finished(JobOutcome::Failed(
            "DeadlineExceeded".into(),
        )));
        assert!(matches!(
            decide(&o),
            Decision::Finished { condition: ("False", ref r, _), succeeded: false } if r == "DeadlineExceeded"
        ));
        o.job = Some(JobState::Active);
        assert_eq!(decide(&o), Decision::Wait);
        o.job = Some(JobState::Terminating);
        assert_eq!(decide(&o), Decision::Requeue(REQUEUE));
    }

    #[test]
    fn scenario_15_after_a_deadline_the_next_trigger_is_a_full_snapshot() {
        let mut o = with_leases("1000", "1001000");
        o.last_condition = Some(("False".into(), "DeadlineExceeded".into()));
        assert_eq!(
            decide(&o),
            Decision::TriggerFullSnapshot { delta: 1_000_000 }
        );
        assert_eq!(
            full_snapshot_result(Ok(())).1,
            "FullSnapshotTakenSuccessfully"
        );
        assert_eq!(
            full_snapshot_result(Err("503".into())).1,
            "ErrorTriggeringFullSnapshot"
        );
        // A failed trigger is tried again, never a job.
        o.last_condition = Some(("False".into(), "ErrorTriggeringFullSnapshot".into()));
        assert!(matches!(decide(&o), Decision::TriggerFullSnapshot { .. }));
    }

    #[test]
    fn scenario_16_three_million_events_trigger_a_full_snapshot() {
        assert_eq!(
            decide(&with_leases("0", "3000000")),
            Decision::TriggerFullSnapshot { delta: 3_000_000 }
        );
    }

    #[test]
    fn deleting_or_storeless_etcds_only_lose_their_job_and_bad_leases_are_errors() {
        let mut o = with_leases("1", "2");
        o.etcd_deleting = true;
        o.job = Some(JobState::Active);
        assert_eq!(decide(&o), Decision::DeleteJob);
        o.job = None;
        assert_eq!(decide(&o), Decision::Nothing);
        let o = with_leases("x", "2");
        assert!(matches!(decide(&o), Decision::BadLease(_)));
        let mut o = with_leases("1", "2");
        o.delta_holder = None;
        assert!(matches!(decide(&o), Decision::BadLease(_)));
    }
}
