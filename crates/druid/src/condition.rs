//! The Etcd's conditions (spec §5, `internal/health/condition/*`): each
//! check is a pure function of observed facts, and [`merge`] folds their
//! results into the previous conditions as upstream's builder does
//! (transition times kept while a status holds, `NotChecked` while the
//! cluster is scaled to zero, conditions of other writers preserved).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::member::{NOT_READY, READY};
use crate::types::{Condition, EtcdMemberStatus};

pub const TYPE_READY: &str = "Ready";
pub const TYPE_ALL_MEMBERS_READY: &str = "AllMembersReady";
pub const TYPE_ALL_MEMBERS_UPDATED: &str = "AllMembersUpdated";
pub const TYPE_BACKUP_READY: &str = "BackupReady";
pub const TYPE_DATA_VOLUMES_READY: &str = "DataVolumesReady";
pub const TYPE_CLUSTER_ID_MISMATCH: &str = "ClusterIDMismatch";
/// Written only by the compaction controller; the etcd controller keeps it.
pub const TYPE_LAST_SNAPSHOT_COMPACTION_SUCCEEDED: &str = "LastSnapshotCompactionSucceeded";

/// The condition types the status flow computes, in the order written.
pub const CHECKED: [&str; 6] = [
    TYPE_READY,
    TYPE_ALL_MEMBERS_READY,
    TYPE_ALL_MEMBERS_UPDATED,
    TYPE_BACKUP_READY,
    TYPE_DATA_VOLUMES_READY,
    TYPE_CLUSTER_ID_MISMATCH,
];

pub const TRUE: &str = "True";
pub const FALSE: &str = "False";
pub const UNKNOWN: &str = "Unknown";

/// One check's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

fn verdict(
    type_: &'static str,
    status: &'static str,
    reason: &'static str,
    message: impl Into<String>,
) -> Verdict {
    Verdict {
        type_,
        status,
        reason,
        message: message.into(),
    }
}

/// What the StatefulSet says, for AllMembersUpdated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StsFacts {
    pub generation: i64,
    pub observed_generation: i64,
    pub updated_replicas: i32,
    pub current_revision: String,
    pub update_revision: String,
}

/// The snapshot leases, for BackupReady.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BackupFacts {
    /// Reading a snapshot lease failed.
    pub lease_error: bool,
    pub delta_renewed: Option<Timestamp>,
    pub full_renewed: Option<Timestamp>,
    pub full_created: Option<Timestamp>,
    /// `deltaSnapshotPeriod` (20 s when unset).
    pub delta_period: SignedDuration,
    /// The full snapshot schedule's interval (24 h by default).
    pub full_interval: SignedDuration,
}

/// Everything the checks look at.
#[derive(Clone, Debug, Default)]
pub struct Facts<'a> {
    pub spec_replicas: i32,
    pub members: &'a [EtcdMemberStatus],
    pub sts: Option<StsFacts>,
    /// `None` without a backup store (no BackupReady at all).
    pub backup: Option<BackupFacts>,
    /// Warning events of the StatefulSet's claims; `None` if the
    /// StatefulSet is missing.
    pub volume_warnings: Option<Vec<String>>,
    /// Distinct cluster IDs of members that are not Unknown.
    pub cluster_ids: Vec<String>,
}

pub fn ready(members: &[EtcdMemberStatus]) -> Verdict {
    if members.is_empty() {
        return verdict(
            TYPE_READY,
            UNKNOWN,
            "NoMembersInStatus",
            "Cannot determine readiness since status has no members",
        );
    }
    let quorum = members.len() / 2 + 1;
    // Unknown members count: their lease is late but their pod is ready.
    let alive = members.iter().filter(|m| m.status != NOT_READY).count();
    if alive >= quorum {
        verdict(
            TYPE_READY,
            TRUE,
            "Quorate",
            "The majority of ETCD members is ready",
        )
    } else {
        verdict(
            TYPE_READY,
            FALSE,
            "QuorumLost",
            "The majority of ETCD members is not ready",
        )
    }
}

pub fn all_members_ready(members: &[EtcdMemberStatus], spec_replicas: i32) -> Verdict {
    if members.is_empty() {
        return verdict(
            TYPE_ALL_MEMBERS_READY,
            UNKNOWN,
            "NoMembersInStatus",
            "Cannot determine readiness since status has no members",
        );
    }
    let all =
        members.len() >= spec_replicas.max(0) as usize && members.iter().all(|m| m.status == READY);
    if all {
        verdict(
            TYPE_ALL_MEMBERS_READY,
            TRUE,
            "AllMembersReady",
            "All members are ready",
        )
    } else {
        verdict(
            TYPE_ALL_MEMBERS_READY,
            FALSE,
            "NotAllMembersReady",
            "At least one member is not ready",
        )
    }
}

pub fn all_members_updated(sts: Option<&StsFacts>, spec_replicas: i32) -> Verdict {
    let Some(sts) = sts else {
        return verdict(
            TYPE_ALL_MEMBERS_UPDATED,
            UNKNOWN,
            "StatefulSetNotFound",
            "StatefulSet not found for etcd",
        );
    };
    if sts.observed_generation == sts.generation
        && sts.updated_replicas == spec_replicas
        && sts.update_revision == sts.current_revision
    {
        verdict(
            TYPE_ALL_MEMBERS_UPDATED,
            TRUE,
            "AllMembersUpdated",
            "All members reflect latest desired spec",
        )
    } else {
        verdict(
            TYPE_ALL_MEMBERS_UPDATED,
            FALSE,
            "NotAllMembersUpdated",
            "At least one member is not yet updated",
        )
    }
}

/// BackupReady from the snapshot leases; `previous` is the condition's
/// status before this check (a failure is declared only after Unknown or
/// False, never straight from True).
pub fn backup_ready(b: &BackupFacts, previous: Option<&str>, now: Timestamp) -> Verdict {
    let unknown = |msg: &str| verdict(TYPE_BACKUP_READY, UNKNOWN, "Unknown", msg);
    if b.lease_error {
        return unknown("Unable to fetch snapshot leases");
    }
    let d = b.delta_period;
    let two_d = d.saturating_mul(2);
    let three_d = d.saturating_mul(3);
    let since = |t: Timestamp| crate::time::since(t, now);
    let ok = match (b.delta_renewed, b.full_renewed) {
        (None, None) => return unknown("Snapshot leases have not been renewed yet"),
        (None, Some(_)) => return unknown("Delta snapshot lease not renewed yet"),
        (Some(delta), None) => {
            since(delta) < two_d && b.full_created.is_some_and(|c| since(c) < b.full_interval)
        }
        (Some(delta), Some(full)) => since(delta) < two_d && since(full) < b.full_interval,
    };
    if ok {
        return verdict(
            TYPE_BACKUP_READY,
            TRUE,
            "BackupSucceeded",
            "Snapshot backup succeeded",
        );
    }
    let stale = b.delta_renewed.is_none_or(|t| since(t) > three_d);
    if matches!(previous, Some(UNKNOWN) | Some(FALSE)) && stale {
        verdict(
            TYPE_BACKUP_READY,
            FALSE,
            "BackupFailed",
            "Stale snapshot leases",
        )
    } else {
        unknown("Periodic delta snapshots are late")
    }
}

pub fn data_volumes_ready(warnings: Option<&[String]>) -> Verdict {
    match warnings {
        None => verdict(
            TYPE_DATA_VOLUMES_READY,
            UNKNOWN,
            "StatefulSetNotFound",
            "StatefulSet not found for etcd",
        ),
        Some([]) => verdict(
            TYPE_DATA_VOLUMES_READY,
            TRUE,
            "NoWarningsFoundForDataVolumes",
            "No warning events found for data volumes",
        ),
        Some(w) => verdict(
            TYPE_DATA_VOLUMES_READY,
            FALSE,
            "FoundWarningsForDataVolumes",
            w.join("; "),
        ),
    }
}

pub fn cluster_id_mismatch(ids: &[String]) -> Verdict {
    match ids.len() {
        0 => verdict(
            TYPE_CLUSTER_ID_MISMATCH,
            UNKNOWN,
            "NoClusterIDs",
            "No cluster IDs found in member leases",
        ),
        1 => verdict(
            TYPE_CLUSTER_ID_MISMATCH,
            FALSE,
            "NoClusterIDMismatch",
            "All members report the same cluster ID",
        ),
        _ => verdict(
            TYPE_CLUSTER_ID_MISMATCH,
            TRUE,
            "ClusterIDMismatch",
            format!("Members report different cluster IDs: {}", ids.join(", ")),
        ),
    }
}

/// Every check's verdict (BackupReady only with a store).
pub fn checks(f: &Facts, previous: &[Condition], now: Timestamp) -> Vec<Verdict> {
    let mut out = vec![
        ready(f.members),
        all_members_ready(f.members, f.spec_replicas),
        all_members_updated(f.sts.as_ref(), f.spec_replicas),
    ];
    if let Some(b) = &f.backup {
        let prev = previous
            .iter()
            .find(|c| c.type_ == TYPE_BACKUP_READY)
            .map(|c| c.status.as_str());
        out.push(backup_ready(b, prev, now));
    }
    out.push(data_volumes_ready(f.volume_warnings.as_deref()));
    out.push(cluster_id_mismatch(&f.cluster_ids));
    out
}

/// Folds verdicts into the previous conditions. With `spec.replicas` 0
/// nothing is checked: each condition keeps its old status (Unknown if new)
/// with reason `NotChecked`. Checked types without a verdict vanish;
/// types nobody here checks are kept as they were, after the checked ones.
pub fn merge(
    previous: &[Condition],
    verdicts: &[Verdict],
    replicas_zero: bool,
    now: Timestamp,
) -> Vec<Condition> {
    let mut out = Vec::new();
    for v in verdicts {
        let old = previous.iter().find(|c| c.type_ == v.type_);
        let (status, reason, message) = if replicas_zero {
            (
                old.map_or(UNKNOWN.to_string(), |c| c.status.clone()),
                "NotChecked".to_string(),
                "etcd cluster has been scaled down".to_string(),
            )
        } else {
            (
                v.status.to_string(),
                v.reason.to_string(),
                v.message.clone(),
            )
        };
        let transition = match old {
            Some(c) if c.status == status => c.last_transition_time.clone(),
            _ => Some(Time(now)),
        };
        out.push(Condition {
            type_: v.type_.to_string(),
            status,
            last_transition_time: transition,
            last_update_time: Some(Time(now)),
            reason,
            message,
        });
    }
    out.extend(
        previous
            .iter()
            .filter(|c| !CHECKED.contains(&c.type_.as_str()))
            .cloned(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::UNKNOWN as MEMBER_UNKNOWN;

    fn members(statuses: &[&str]) -> Vec<EtcdMemberStatus> {
        statuses
            .iter()
            .enumerate()
            .map(|(i, s)| EtcdMemberStatus {
                name: format!("e-{i}"),
                status: s.to_string(),
                ..Default::default()
            })
            .collect()
    }

    fn ago(now: Timestamp, secs: i64) -> Option<Timestamp> {
        Some(now - SignedDuration::from_secs(secs))
    }

    #[test]
    fn scenario_04_three_ready_members_are_quorate_and_all_ready() {
        let m = members(&[READY, READY, READY]);
        assert_eq!((ready(&m).status, ready(&m).reason), (TRUE, "Quorate"));
        assert_eq!(all_members_ready(&m, 3).status, TRUE);
    }

    #[test]
    fn scenario_05_an_unknown_member_keeps_quorum_but_not_all_ready() {
        let m = members(&[READY, MEMBER_UNKNOWN, READY]);
        assert_eq!(ready(&m).status, TRUE);
        let v = all_members_ready(&m, 3);
        assert_eq!((v.status, v.reason), (FALSE, "NotAllMembersReady"));
    }

    #[test]
    fn scenario_06_two_not_ready_of_three_lose_quorum() {
        let m = members(&[READY, NOT_READY, NOT_READY]);
        let v = ready(&m);
        assert_eq!((v.status, v.reason), (FALSE, "QuorumLost"));
        // Unknown counts towards quorum.
        let m = members(&[MEMBER_UNKNOWN, MEMBER_UNKNOWN, NOT_READY]);
        assert_eq!(ready(&m).status, TRUE);
    }

    #[test]
    fn no_members_are_unknown_and_fewer_members_than_replicas_are_not_all_ready() {
        assert_eq!(ready(&[]).status, UNKNOWN);
        assert_eq!(all_members_ready(&[], 3).status, UNKNOWN);
        let m = members(&[READY]);
        assert_eq!(all_members_ready(&m, 3).status, FALSE);
    }

    #[test]
    fn scenario_07_two_cluster_ids_are_a_mismatch() {
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(cluster_id_mismatch(&ids(&["def", "xyz"])).status, TRUE);
        assert_eq!(cluster_id_mismatch(&ids(&["def"])).status, FALSE);
        assert_eq!(cluster_id_mismatch(&[]).status, UNKNOWN);
    }

    #[test]
    fn scenario_08_backup_ready_from_snapshot_lease_ages() {
        let now = Timestamp::now();
        let facts = |delta: i64, full: i64| BackupFacts {
            lease_error: false,
            delta_renewed: ago(now, delta),
            full_renewed: ago(now, full),
            full_created: ago(now, full),
            delta_period: SignedDuration::from_mins(5),
            full_interval: SignedDuration::from_hours(24),
        };
        let v = backup_ready(&facts(180, 3600), None, now);
        assert_eq!((v.status, v.reason), (TRUE, "BackupSucceeded"));
        let v = backup_ready(&facts(16 * 60, 3600), Some(UNKNOWN), now);
        assert_eq!((v.status, v.reason), (FALSE, "BackupFailed"));
        // From True a stale lease is first Unknown.
        assert_eq!(
            backup_ready(&facts(16 * 60, 3600), Some(TRUE), now).status,
            UNKNOWN
        );
        // Late but not yet 3 periods: Unknown.
        assert_eq!(
            backup_ready(&facts(12 * 60, 3600), Some(UNKNOWN), now).status,
            UNKNOWN
        );
        // A full snapshot older than its interval.
        assert_eq!(
            backup_ready(&facts(60, 25 * 3600), Some(TRUE), now).status,
            UNKNOWN
        );
    }

    #[test]
    fn backup_ready_is_unknown_without_renewals_or_with_only_a_full_one() {
        let now = Timestamp::now();
        let mut b = BackupFacts {
            delta_period: SignedDuration::from_secs(20),
            full_interval: SignedDuration::from_hours(24),
            ..Default::default()
        };
        assert_eq!(backup_ready(&b, Some(FALSE), now).status, UNKNOWN);
        b.full_renewed = ago(now, 10);
        assert_eq!(backup_ready(&b, Some(FALSE), now).status, UNKNOWN);
        // Only the delta lease renewed: the full lease's creation counts.
        b.full_renewed = None;
        b.delta_renewed = ago(now, 10);
        b.full_created = ago(now, 60);
        assert_eq!(backup_ready(&b, None, now).status, TRUE);
        b.lease_error = true;
        assert_eq!(backup_ready(&b, None, now).status, UNKNOWN);
    }

    #[test]
    fn scenario_09_no_store_means_no_backup_ready() {
        let m = members(&[READY]);
        let f = Facts {
            spec_replicas: 1,
            members: &m,
            ..Default::default()
        };
        let types: Vec<_> = checks(&f, &[], Timestamp::now())
            .iter()
            .map(|v| v.type_)
            .collect();
        assert!(!types.contains(&TYPE_BACKUP_READY), "{types:?}");
        assert_eq!(types.len(), 5);
    }

    #[test]
    fn all_members_updated_and_data_volumes() {
        let sts = StsFacts {
            generation: 2,
            observed_generation: 2,
            updated_replicas: 3,
            current_revision: "r1".into(),
            update_revision: "r1".into(),
        };
        assert_eq!(all_members_updated(Some(&sts), 3).status, TRUE);
        let rolling = StsFacts {
            update_revision: "r2".into(),
            ..sts.clone()
        };
        assert_eq!(all_members_updated(Some(&rolling), 3).status, FALSE);
        assert_eq!(all_members_updated(None, 3).status, UNKNOWN);
        assert_eq!(data_volumes_ready(None).status, UNKNOWN);
        assert_eq!(data_volumes_ready(Some(&[])).status, TRUE);
        let w = vec!["ProvisioningFailed: no space".to_string()];
        let v = data_volumes_ready(Some(&w));
        assert_eq!((v.status, v.reason), (FALSE, "FoundWarningsForDataVolumes"));
        assert!(v.message.contains("no space"));
    }

    #[test]
    fn scenario_11_scaled_to_zero_keeps_statuses_with_reason_not_checked() {
        let now = Timestamp::now();
        let earlier = now - SignedDuration::from_hours(1);
        let previous = vec![
            Condition {
                type_: TYPE_READY.into(),
                status: TRUE.into(),
                reason: "Quorate".into(),
                last_transition_time: Some(Time(earlier)),
                ..Default::default()
            },
            Condition {
                type_: TYPE_LAST_SNAPSHOT_COMPACTION_SUCCEEDED.into(),
                status: TRUE.into(),
                reason: "None".into(),
                ..Default::default()
            },
        ];
        let f = Facts::default();
        let merged = merge(&previous, &checks(&f, &previous, now), true, now);
        let ready = merged.iter().find(|c| c.type_ == TYPE_READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            (TRUE, "NotChecked")
        );
        assert_eq!(ready.last_transition_time, Some(Time(earlier)));
        let new = merged
            .iter()
            .find(|c| c.type_ == TYPE_ALL_MEMBERS_READY)
            .unwrap();
        assert_eq!(
            (new.status.as_str(), new.reason.as_str()),
            (UNKNOWN, "NotChecked")
        );
        // The compaction controller's condition is kept, last.
        assert_eq!(
            merged.last().unwrap().type_,
            TYPE_LAST_SNAPSHOT_COMPACTION_SUCCEEDED
        );
    }

    #[test]
    fn merge_moves_transition_time_only_on_a_status_change_and_drops_unchecked_types() {
        let now = Timestamp::now();
        let earlier = now - SignedDuration::from_hours(1);
        let previous = vec![
            Condition {
                type_: TYPE_READY.into(),
                status: TRUE.into(),
                last_transition_time: Some(Time(earlier)),
                ..Default::default()
            },
            Condition {
                type_: TYPE_BACKUP_READY.into(),
                status: TRUE.into(),
                ..Default::default()
            },
        ];
        let m = members(&[READY, READY, READY]);
        let f = Facts {
            spec_replicas: 3,
            members: &m,
            ..Default::default()
        };
        let merged = merge(&previous, &checks(&f, &previous, now), false, now);
        assert_eq!(merged[0].last_transition_time, Some(Time(earlier)));
        assert_eq!(merged[0].last_update_time, Some(Time(now)));
        // The store went away: BackupReady is gone.
        assert!(!merged.iter().any(|c| c.type_ == TYPE_BACKUP_READY));
        let lost = members(&[READY, NOT_READY, NOT_READY]);
        let f = Facts {
            spec_replicas: 3,
            members: &lost,
            ..Default::default()
        };
        let merged = merge(&previous, &checks(&f, &previous, now), false, now);
        assert_eq!(merged[0].status, FALSE);
        assert_eq!(merged[0].last_transition_time, Some(Time(now)));
    }
}
