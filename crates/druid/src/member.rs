//! Member status from member leases (spec §4,
//! `internal/health/etcdmember/check_ready.go`): each backup-restore
//! sidecar renews its member's Lease with holderIdentity
//! `<memberID>:<clusterID>:<role>` (or the older `<memberID>:<role>`);
//! the age of the renewal, and the pod's readiness once it is stale, give
//! the member's status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::types::EtcdMemberStatus;

/// The member-lease facts the check needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeaseFacts {
    pub name: String,
    pub holder_identity: Option<String>,
    pub renew_time: Option<Timestamp>,
}

/// The parts of a member lease's holder identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub member_id: String,
    pub cluster_id: Option<String>,
    pub role: String,
}

/// `<memberID>:<role>` or `<memberID>:<clusterID>:<role>`; `None` if it
/// is neither.
pub fn parse_holder(identity: &str) -> Option<Holder> {
    let parts: Vec<&str> = identity.split(':').collect();
    match parts.as_slice() {
        [id, role] if !id.is_empty() => Some(Holder {
            member_id: id.to_string(),
            cluster_id: None,
            role: role.to_string(),
        }),
        [id, cluster, role] if !id.is_empty() => Some(Holder {
            member_id: id.to_string(),
            cluster_id: Some(cluster.to_string()),
            role: role.to_string(),
        }),
        _ => None,
    }
}

/// `etcdMember.unknownThreshold` and `notReadyThreshold` of druid's config.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    pub unknown: SignedDuration,
    pub not_ready: SignedDuration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            unknown: SignedDuration::from_mins(1),
            not_ready: SignedDuration::from_mins(5),
        }
    }
}

pub const READY: &str = "Ready";
pub const NOT_READY: &str = "NotReady";
pub const UNKNOWN: &str = "Unknown";

/// The members' statuses: one per lease that has a parsable holder and a
/// renew time, sorted by name. `containers_ready(pod)` says whether a pod
/// exists with ContainersReady=True (pods are named like their leases).
/// Transition times are kept from `previous` while a status is unchanged.
pub fn member_statuses(
    leases: &[LeaseFacts],
    containers_ready: impl Fn(&str) -> bool,
    previous: &[EtcdMemberStatus],
    thresholds: Thresholds,
    now: Timestamp,
) -> Vec<EtcdMemberStatus> {
    let mut out: Vec<EtcdMemberStatus> = leases
        .iter()
        .filter_map(|lease| {
            let holder = parse_holder(lease.holder_identity.as_deref()?)?;
            let renewed = lease.renew_time?;
            let grace = thresholds.unknown.saturating_add(thresholds.not_ready);
            let (status, reason) = if crate::time::older_than(renewed, grace, now) {
                (NOT_READY, "UnknownGracePeriodExceeded")
            } else if crate::time::older_than(renewed, thresholds.unknown, now) {
                if containers_ready(&lease.name) {
                    (UNKNOWN, "LeaseExpired")
                } else {
                    (NOT_READY, "ContainersNotReady")
                }
            } else {
                (READY, "LeaseSucceeded")
            };
            let kept = previous
                .iter()
                .find(|p| p.name == lease.name && p.status == status)
                .and_then(|p| p.last_transition_time.clone());
            Some(EtcdMemberStatus {
                name: lease.name.clone(),
                id: Some(holder.member_id),
                role: Some(holder.role),
                status: status.to_string(),
                reason: reason.to_string(),
                last_transition_time: kept.or(Some(Time(now))),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The cluster ID of each lease whose member is not Unknown (for
/// ClusterIDMismatch).
pub fn cluster_ids(leases: &[LeaseFacts], members: &[EtcdMemberStatus]) -> Vec<String> {
    let mut ids: Vec<String> = leases
        .iter()
        .filter(|l| {
            members
                .iter()
                .any(|m| m.name == l.name && m.status != UNKNOWN)
        })
        .filter_map(|l| parse_holder(l.holder_identity.as_deref()?)?.cluster_id)
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(name: &str, holder: &str, age_s: i64, now: Timestamp) -> LeaseFacts {
        LeaseFacts {
            name: name.into(),
            holder_identity: Some(holder.into()),
            renew_time: Some(now - SignedDuration::from_secs(age_s)),
        }
    }

    fn statuses(m: &[EtcdMemberStatus]) -> Vec<(String, String, String)> {
        m.iter()
            .map(|s| (s.name.clone(), s.status.clone(), s.reason.clone()))
            .collect()
    }

    #[test]
    fn holder_identities() {
        assert_eq!(
            parse_holder("abc:def:Leader"),
            Some(Holder {
                member_id: "abc".into(),
                cluster_id: Some("def".into()),
                role: "Leader".into()
            })
        );
        assert_eq!(parse_holder("abc:Member").unwrap().cluster_id, None);
        assert_eq!(parse_holder("abc"), None);
        assert_eq!(parse_holder(":x:y"), None);
        assert_eq!(parse_holder("a:b:c:d"), None);
    }

    #[test]
    fn scenario_04_three_fresh_leases_are_three_ready_members() {
        let now = Timestamp::now();
        let leases = [
            lease("e-0", "abc:def:Leader", 10, now),
            lease("e-1", "abd:def:Member", 10, now),
            lease("e-2", "abe:def:Member", 10, now),
        ];
        let m = member_statuses(&leases, |_| true, &[], Thresholds::default(), now);
        assert_eq!(m.len(), 3);
        assert!(
            m.iter()
                .all(|s| s.status == READY && s.reason == "LeaseSucceeded")
        );
        assert_eq!(m[0].role.as_deref(), Some("Leader"));
        assert_eq!(m[0].id.as_deref(), Some("abc"));
    }

    #[test]
    fn scenario_05_a_stale_lease_with_ready_containers_is_unknown() {
        let now = Timestamp::now();
        let leases = [
            lease("e-0", "abc:def:Leader", 10, now),
            lease("e-1", "abd:def:Member", 120, now),
            lease("e-2", "abe:def:Member", 10, now),
        ];
        let m = member_statuses(&leases, |_| true, &[], Thresholds::default(), now);
        assert_eq!(
            statuses(&m)[1],
            ("e-1".into(), UNKNOWN.into(), "LeaseExpired".into())
        );
        // Without ready containers the same lease means NotReady.
        let m = member_statuses(&leases, |p| p != "e-1", &[], Thresholds::default(), now);
        assert_eq!(
            statuses(&m)[1],
            ("e-1".into(), NOT_READY.into(), "ContainersNotReady".into())
        );
    }

    #[test]
    fn scenario_06_leases_past_both_thresholds_are_not_ready() {
        let now = Timestamp::now();
        let leases = [
            lease("e-0", "abc:def:Leader", 10, now),
            lease("e-1", "abd:def:Member", 420, now),
            lease("e-2", "abe:def:Member", 420, now),
        ];
        let m = member_statuses(&leases, |_| true, &[], Thresholds::default(), now);
        let bad: Vec<_> = statuses(&m)
            .into_iter()
            .filter(|s| s.1 == NOT_READY && s.2 == "UnknownGracePeriodExceeded")
            .map(|s| s.0)
            .collect();
        assert_eq!(bad, ["e-1", "e-2"]);
    }

    #[test]
    fn unparsable_or_unrenewed_leases_are_skipped_and_order_is_by_name() {
        let now = Timestamp::now();
        let leases = [
            lease("e-2", "abe:def:Member", 10, now),
            LeaseFacts {
                name: "e-1".into(),
                holder_identity: None,
                renew_time: Some(now),
            },
            lease("e-0", "garbage", 10, now),
            LeaseFacts {
                name: "e-3".into(),
                holder_identity: Some("x:y:Member".into()),
                renew_time: None,
            },
            lease("e-10", "abf:def:Member", 10, now),
        ];
        let m = member_statuses(&leases, |_| true, &[], Thresholds::default(), now);
        let names: Vec<_> = m.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["e-10", "e-2"]);
    }

    #[test]
    fn transition_time_is_kept_while_the_status_is_unchanged() {
        let now = Timestamp::now();
        let before = now - SignedDuration::from_hours(1);
        let prev = vec![EtcdMemberStatus {
            name: "e-0".into(),
            status: READY.into(),
            last_transition_time: Some(Time(before)),
            ..Default::default()
        }];
        let leases = [lease("e-0", "abc:def:Leader", 10, now)];
        let m = member_statuses(&leases, |_| true, &prev, Thresholds::default(), now);
        assert_eq!(m[0].last_transition_time, prev[0].last_transition_time);
        let leases = [lease("e-0", "abc:def:Leader", 400, now)];
        let m = member_statuses(&leases, |_| false, &prev, Thresholds::default(), now);
        assert_ne!(m[0].last_transition_time, prev[0].last_transition_time);
    }

    #[test]
    fn scenario_07_cluster_ids_of_members_that_are_not_unknown() {
        let now = Timestamp::now();
        let leases = [
            lease("e-0", "abc:def:Leader", 10, now),
            lease("e-1", "abd:xyz:Member", 10, now),
            lease("e-2", "abe:zzz:Member", 120, now),
        ];
        let m = member_statuses(&leases, |_| true, &[], Thresholds::default(), now);
        assert_eq!(cluster_ids(&leases, &m), ["def", "xyz"]);
    }
}
