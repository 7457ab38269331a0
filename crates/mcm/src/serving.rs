//! Which namespaces a machine controller serves, told by Leases that anyone
//! who can read the namespace can see (admission, `trellis status`,
//! `kubectl get leases`), so machine objects in a namespace nobody serves
//! do not wait silently.
//!
//! The controllers watch one control namespace (`--namespace`). While they
//! run, [`crate::controllers::heartbeat`] renews the Lease
//! [`HEARTBEAT_LEASE`] there; a clean stop releases it. The leader-election
//! Leases of trellis (`machine-controller-manager`) and of upstream MCM's
//! two processes (`machine-controller-manager`, `machine-controller`) count
//! too, so the verdict also holds on a cluster where upstream MCM serves a
//! namespace.
//!
//! Nobody can write a condition onto an object whose namespace no
//! controller serves, so the verdict is for where the user already looks
//! instead: the admission of such an object (a Warning) and `trellis
//! status`. Everything here is pure.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::time::to_chrono;

/// The Lease the machine controllers renew in the namespace they serve.
pub const HEARTBEAT_LEASE: &str = "machine-controller-manager-heartbeat";

/// Every Lease whose holder serves the namespace it lives in: the
/// heartbeat, trellis's and upstream MCM's leader lock, and upstream's
/// machine-controller lock.
pub const SERVING_LEASES: [&str; 3] = [
    HEARTBEAT_LEASE,
    "machine-controller-manager",
    "machine-controller",
];

/// How often the heartbeat is renewed.
pub const HEARTBEAT_PERIOD: Duration = Duration::from_secs(20);

/// The heartbeat's `leaseDurationSeconds`: three missed renewals.
pub const HEARTBEAT_DURATION_SECONDS: i32 = 60;

/// Allowance for clocks that differ between the controller that renewed a
/// Lease and whoever judges it.
pub const CLOCK_SKEW: Duration = Duration::from_secs(30);

/// Whether a namespace is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Served {
    /// A Lease is held and renewed in time.
    Yes { lease: String, holder: String },
    /// Leases exist, but none is held and current: the controllers that
    /// served the namespace stopped (cleanly, or they crashed). `renewed`
    /// is the latest renewal seen.
    Stale {
        lease: String,
        renewed: Option<DateTime<Utc>>,
    },
    /// No serving Lease at all: no machine controller ever served it.
    No,
}

/// The verdict from the namespace's Leases (others are ignored). A Lease
/// is current when it has a holder and was renewed within its duration
/// (plus [`CLOCK_SKEW`]) before `now`.
pub fn served(leases: &[Lease], now: DateTime<Utc>) -> Served {
    let mut stale: Option<(String, Option<DateTime<Utc>>)> = None;
    for lease in leases {
        let Some(name) = lease.metadata.name.as_deref() else {
            continue;
        };
        if !SERVING_LEASES.contains(&name) {
            continue;
        }
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.unwrap_or_default();
        let renewed = spec.renew_time.as_ref().map(|t| to_chrono(&Time(t.0)));
        let duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        );
        let current = renewed.is_some_and(|r| {
            let age = (now - r).to_std().unwrap_or_default();
            age <= duration + CLOCK_SKEW
        });
        if !holder.is_empty() && current {
            return Served::Yes {
                lease: name.to_string(),
                holder,
            };
        }
        let newer = match (&stale, renewed) {
            (None, _) => true,
            (Some((_, Some(seen))), Some(r)) => r > *seen,
            (Some((_, None)), Some(_)) => true,
            (Some(_), None) => false,
        };
        if newer {
            stale = Some((name.to_string(), renewed));
        }
    }
    match stale {
        Some((lease, renewed)) => Served::Stale { lease, renewed },
        None => Served::No,
    }
}

/// `90s`, `5m`, `3h`, `2d`: how long ago, roughly.
fn ago(d: chrono::Duration) -> String {
    let s = d.num_seconds().max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// What is wrong with serving `ns`, in one sentence for a person; `None`
/// when it is served.
pub fn problem(ns: &str, verdict: &Served, now: DateTime<Utc>) -> Option<String> {
    match verdict {
        Served::Yes { .. } => None,
        Served::No => Some(format!(
            "no machine controller serves namespace {ns:?} (no Lease {HEARTBEAT_LEASE} there)"
        )),
        Served::Stale { lease, renewed } => Some(match renewed {
            Some(r) => format!(
                "the machine controllers of namespace {ns:?} are not running \
                 (Lease {lease} last renewed {} ago)",
                ago(now - *r)
            ),
            None => format!(
                "the machine controllers of namespace {ns:?} are not running \
                 (Lease {lease} has no holder)"
            ),
        }),
    }
}

/// The admission Warning for creating `kind` `name` in `ns`; `None` when
/// the namespace is served. Says what will (not) happen and what to do.
pub fn warning(
    kind: &str,
    name: &str,
    ns: &str,
    verdict: &Served,
    now: DateTime<Utc>,
) -> Option<String> {
    let problem = problem(ns, verdict, now)?;
    let what = if name.is_empty() {
        kind.to_string()
    } else {
        format!("{kind} {name}")
    };
    Some(format!(
        "{problem}: {what} will not be reconciled until one does; \
         run one for it (trellis controller-manager --namespace {ns}) \
         or create the object in a served namespace (trellis up serves \"default\")"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    fn lease(name: &str, holder: Option<&str>, renewed: Option<i64>, duration: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                renew_time: renewed.map(|s| MicroTime(crate::time::to_time(t(s)).0)),
                lease_duration_seconds: Some(duration),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn verdicts() {
        let yes = |lease: &str| Served::Yes {
            lease: lease.into(),
            holder: "h".into(),
        };
        let stale = |lease: &str, s: Option<i64>| Served::Stale {
            lease: lease.into(),
            renewed: s.map(t),
        };
        // (leases, now, verdict)
        let table: Vec<(Vec<Lease>, i64, Served)> = vec![
            (vec![], 0, Served::No),
            // Somebody else's Lease says nothing.
            (vec![lease("other", Some("h"), Some(0), 60)], 0, Served::No),
            (
                vec![lease(HEARTBEAT_LEASE, Some("h"), Some(0), 60)],
                10,
                yes(HEARTBEAT_LEASE),
            ),
            // Within duration + skew.
            (
                vec![lease(HEARTBEAT_LEASE, Some("h"), Some(0), 60)],
                90,
                yes(HEARTBEAT_LEASE),
            ),
            (
                vec![lease(HEARTBEAT_LEASE, Some("h"), Some(0), 60)],
                91,
                stale(HEARTBEAT_LEASE, Some(0)),
            ),
            // Released (no holder).
            (
                vec![lease(HEARTBEAT_LEASE, None, Some(0), 60)],
                1,
                stale(HEARTBEAT_LEASE, Some(0)),
            ),
            // An upstream leader lock counts.
            (
                vec![lease("machine-controller", Some("h"), Some(0), 15)],
                5,
                yes("machine-controller"),
            ),
            // One current Lease is enough; the stale one is ignored.
            (
                vec![
                    lease(HEARTBEAT_LEASE, None, Some(0), 60),
                    lease("machine-controller-manager", Some("h"), Some(100), 15),
                ],
                110,
                yes("machine-controller-manager"),
            ),
            // Of stale Leases the latest renewal is reported.
            (
                vec![
                    lease("machine-controller-manager", Some("h"), Some(50), 15),
                    lease(HEARTBEAT_LEASE, Some("h"), Some(10), 60),
                ],
                1000,
                stale("machine-controller-manager", Some(50)),
            ),
            (
                vec![lease(HEARTBEAT_LEASE, Some("h"), None, 60)],
                0,
                stale(HEARTBEAT_LEASE, None),
            ),
        ];
        for (i, (leases, now, want)) in table.into_iter().enumerate() {
            assert_eq!(served(&leases, t(now)), want, "case {i}");
        }
    }

    #[test]
    fn warnings_say_what_is_missing_and_what_to_do() {
        let w = warning("MachineDeployment", "web", "team-a", &Served::No, t(0)).unwrap();
        assert!(
            w.starts_with("no machine controller serves namespace \"team-a\""),
            "{w}"
        );
        assert!(
            w.contains("MachineDeployment web will not be reconciled"),
            "{w}"
        );
        assert!(w.contains("--namespace team-a"), "{w}");
        let stale = Served::Stale {
            lease: HEARTBEAT_LEASE.into(),
            renewed: Some(t(0)),
        };
        let w = warning("Machine", "", "default", &stale, t(600)).unwrap();
        assert!(w.contains("last renewed 10m ago"), "{w}");
        assert!(w.contains(": Machine will not be reconciled"), "{w}");
        let served = Served::Yes {
            lease: HEARTBEAT_LEASE.into(),
            holder: "h".into(),
        };
        assert_eq!(warning("Machine", "m", "default", &served, t(0)), None);
        assert_eq!(problem("default", &served, t(0)), None);
    }
}
