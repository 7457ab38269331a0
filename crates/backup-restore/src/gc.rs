//! Garbage collection of snapshots (`br:pkg/snapshot/snapshotter/garbagecollector.go`),
//! decided purely from the store's listing and the clock.
//!
//! Snapshots form *sets*: a full snapshot and the deltas taken after it,
//! up to the next full. The newest set is never touched (it is what a
//! restore needs). Outside it, deltas older than the retention period go;
//! `LimitBased` keeps the newest `max_backups` full snapshots,
//! `Exponential` keeps one full per hour for a day, one per day for a
//! week, one per week for four weeks, and nothing older. Final snapshots
//! (`.final`) count like any other full.

use std::collections::BTreeSet;

use crate::snapshot::{Kind, Snapshot, chronological};

/// br's `--garbage-collection-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    LimitBased { max_backups: usize },
    Exponential,
}

impl Policy {
    /// The policy named by the flags; `None` for an unknown name.
    pub fn from_flags(name: &str, max_backups: usize) -> Option<Policy> {
        match name {
            "LimitBased" => Some(Policy::LimitBased { max_backups }),
            "Exponential" => Some(Policy::Exponential),
            _ => None,
        }
    }
}

const HOUR: i64 = 3600;
const DAY: i64 = 24 * HOUR;
const WEEK: i64 = 7 * DAY;

/// The snapshots to delete, oldest first.
pub fn garbage(
    snaps: &[Snapshot],
    policy: Policy,
    delta_retention_secs: i64,
    now: i64,
) -> Vec<Snapshot> {
    let mut sorted = snaps.to_vec();
    sorted.sort_by(chronological);
    let Some(newest_full) = sorted.iter().rposition(|s| s.kind == Kind::Full) else {
        // Deltas without a full: all one set, all needed.
        return Vec::new();
    };
    let older = &sorted[..newest_full];
    let fulls: Vec<&Snapshot> = older.iter().filter(|s| s.kind == Kind::Full).collect();
    let mut doomed: BTreeSet<usize> = BTreeSet::new();
    let keep_fulls: BTreeSet<&Snapshot> = match policy {
        Policy::LimitBased { max_backups } => {
            // The newest set's full counts as one of the kept backups.
            let keep = max_backups.saturating_sub(1);
            fulls.iter().rev().take(keep).copied().collect()
        }
        Policy::Exponential => exponential_keep(&fulls, now),
    };
    for (i, s) in older.iter().enumerate() {
        let gone = match s.kind {
            Kind::Full => !keep_fulls.contains(s),
            Kind::Delta => s.created < now.saturating_sub(delta_retention_secs.max(0)),
        };
        if gone {
            doomed.insert(i);
        }
    }
    doomed.into_iter().map(|i| older[i].clone()).collect()
}

/// The fulls an exponential policy keeps: the newest in each hour of the
/// last day, each day of the last week, each week of the last four.
fn exponential_keep<'a>(fulls: &[&'a Snapshot], now: i64) -> BTreeSet<&'a Snapshot> {
    let mut seen_buckets = BTreeSet::new();
    let mut keep = BTreeSet::new();
    for s in fulls.iter().rev() {
        let age = now.saturating_sub(s.created);
        let bucket = if age < DAY {
            (0, s.created.div_euclid(HOUR))
        } else if age < WEEK {
            (1, s.created.div_euclid(DAY))
        } else if age < 4 * WEEK {
            (2, s.created.div_euclid(WEEK))
        } else {
            continue;
        };
        if seen_buckets.insert(bucket) {
            keep.insert(*s);
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Compression::None as Plain;

    /// `n` full sets an hour apart, each with one delta 10 minutes later,
    /// the newest ending now.
    fn sets(n: i64, now: i64) -> Vec<Snapshot> {
        (0..n)
            .flat_map(|i| {
                let t = now - (n - 1 - i) * HOUR - 1200;
                let rev = i * 100;
                [
                    Snapshot::full(rev + 1, t, Plain),
                    Snapshot::delta(rev + 2, rev + 50, t + 600, Plain),
                ]
            })
            .collect()
    }

    #[test]
    fn scenario_20_limit_based_seven_of_nine_full_sets_deletes_the_two_oldest_fulls() {
        let now = 1_700_000_000;
        let all = sets(9, now);
        let policy = Policy::from_flags("LimitBased", 7).unwrap();
        // A long retention: only fulls go.
        let gone = garbage(&all, policy, 100 * DAY, now);
        assert_eq!(gone, vec![all[0].clone(), all[2].clone()]);
        // No retention: every delta outside the newest set goes too.
        let gone = garbage(&all, policy, 0, now);
        assert_eq!(gone.iter().filter(|s| s.kind == Kind::Full).count(), 2);
        assert_eq!(gone.iter().filter(|s| s.kind == Kind::Delta).count(), 8);
        assert!(!gone.contains(&all[17]), "the newest set's delta stays");
    }

    #[test]
    fn the_newest_set_and_lone_deltas_are_never_collected() {
        let now = 1_700_000_000;
        let all = sets(1, now);
        assert!(garbage(&all, Policy::LimitBased { max_backups: 0 }, 0, now).is_empty());
        let deltas = vec![Snapshot::delta(1, 5, 1, Plain)];
        assert!(garbage(&deltas, Policy::Exponential, 0, now).is_empty());
    }

    #[test]
    fn exponential_keeps_hourly_daily_and_weekly_fulls() {
        let now = 100 * WEEK;
        let mut all = Vec::new();
        // Every 20 minutes for 6 weeks.
        let mut t = now - 6 * WEEK;
        let mut rev = 1;
        while t <= now {
            all.push(Snapshot::full(rev, t, Plain));
            t += 1200;
            rev += 1;
        }
        let gone: BTreeSet<Snapshot> = garbage(&all, Policy::Exponential, 0, now)
            .into_iter()
            .collect();
        let kept: Vec<&Snapshot> = all.iter().filter(|s| !gone.contains(s)).collect();
        let count = |from: i64, to: i64| {
            kept.iter()
                .filter(|s| now - s.created >= from && now - s.created < to)
                .count()
        };
        // About one per hour of the last day (the newest set included).
        assert!((24..=26).contains(&count(0, DAY)), "{}", count(0, DAY));
        // About one per day of the rest of the week.
        assert!((6..=7).contains(&count(DAY, WEEK)), "{}", count(DAY, WEEK));
        // About one per week up to four weeks.
        assert!((3..=4).contains(&count(WEEK, 4 * WEEK)));
        assert_eq!(count(4 * WEEK, 10 * WEEK), 0);
        assert!(kept.contains(&all.last().unwrap()));
    }
}
