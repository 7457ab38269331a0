//! Rollout arithmetic of machine deployments, as Kubernetes deployments do it
//! and MCM inherited: how far a rollout may surge and dip, how many machines
//! the new machine set may add, how many the old ones may lose, and how a
//! replica change during a rollout is spread over the sets.

/// `maxSurge` / `maxUnavailable`: a count or a percentage of the replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(i64),
    Percent(i64),
}

impl IntOrPercent {
    /// Parses `5` or `"25%"`; `None` for anything else.
    pub fn from_int_or_string(
        v: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString,
    ) -> Option<IntOrPercent> {
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        match v {
            IntOrString::Int(i) => Some(IntOrPercent::Int((*i).into())),
            IntOrString::String(s) => s
                .strip_suffix('%')
                .and_then(|p| p.parse::<i64>().ok())
                .map(IntOrPercent::Percent),
        }
    }

    /// The absolute value against `total`, rounding percentages up or down.
    pub fn scaled(&self, total: i64, round_up: bool) -> i64 {
        match self {
            IntOrPercent::Int(i) => *i,
            IntOrPercent::Percent(p) => {
                let x = p * total;
                if round_up {
                    (x + 99).div_euclid(100)
                } else {
                    x.div_euclid(100)
                }
            }
        }
    }
}

/// The resolved `(max_surge, max_unavailable)` of a rolling update over
/// `replicas`: surge rounds up, unavailability down; both 0 would deadlock,
/// so unavailability becomes 1 (objects admitted by older servers may still
/// carry that); unavailability never exceeds the replicas.
pub fn fenceposts(replicas: i64, surge: &IntOrPercent, unavailable: &IntOrPercent) -> (i64, i64) {
    let s = surge.scaled(replicas, true).max(0);
    let mut u = unavailable.scaled(replicas, false).max(0);
    if s == 0 && u == 0 {
        u = 1;
    }
    (s, u.min(replicas.max(0)))
}

/// One machine set as the rollout math sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetCounts {
    pub name: String,
    /// `spec.replicas`.
    pub spec: i64,
    /// `status.replicas`: machines that exist, Terminating included.
    pub status: i64,
    /// `status.availableReplicas`.
    pub available: i64,
    /// Creation order: smaller is older.
    pub age_rank: i64,
    /// The `deployment.kubernetes.io/max-replicas` annotation, if set.
    pub max_replicas_annotation: Option<i64>,
}

/// How many replicas the new machine set should have in this rolling-update
/// step: grow as far as `replicas + max_surge` total machines allow, never
/// beyond `replicas`, never shrink.
pub fn new_set_replicas(replicas: i64, max_surge: i64, new: &SetCounts, all: &[SetCounts]) -> i64 {
    let max_total = replicas + max_surge;
    let current: i64 = all.iter().map(|s| s.status).sum();
    if current >= max_total {
        return new.spec;
    }
    let up = (max_total - current).min(replicas - new.spec).max(0);
    new.spec + up
}

/// The scale-down of old machine sets in one rolling-update step: returns
/// `(set name, new spec.replicas)` for every old set that shrinks. First,
/// machines that are not available are dropped (they cost no availability),
/// then available ones down to `replicas - max_unavailable`, oldest sets
/// first.
pub fn scale_down_old(
    replicas: i64,
    max_unavailable: i64,
    new: &SetCounts,
    old: &[SetCounts],
) -> Vec<(String, i64)> {
    let all_spec: i64 = old.iter().map(|s| s.spec).sum::<i64>() + new.spec;
    let min_available = replicas - max_unavailable;
    let new_unavailable = (new.spec - new.available).max(0);
    let mut budget = all_spec - min_available - new_unavailable;
    if budget <= 0 {
        return Vec::new();
    }
    let mut sets: Vec<SetCounts> = old.to_vec();
    sets.sort_by_key(|s| s.age_rank);
    let mut changed: Vec<(String, i64)> = Vec::new();
    // 1. Unhealthy replicas of old sets.
    for s in sets.iter_mut() {
        if budget <= 0 {
            break;
        }
        let unhealthy = (s.spec - s.available).max(0);
        let cut = unhealthy.min(budget);
        if cut > 0 {
            s.spec -= cut;
            budget -= cut;
            changed.push((s.name.clone(), s.spec));
        }
    }
    // 2. Available replicas, keeping min_available overall.
    let available: i64 = sets.iter().map(|s| s.available.min(s.spec)).sum::<i64>() + new.available;
    let mut total_cut = (available - min_available).min(budget);
    for s in sets.iter_mut() {
        if total_cut <= 0 {
            break;
        }
        let cut = s.spec.min(total_cut);
        if cut > 0 {
            s.spec -= cut;
            total_cut -= cut;
            match changed.iter_mut().find(|(n, _)| *n == s.name) {
                Some(c) => c.1 = s.spec,
                None => changed.push((s.name.clone(), s.spec)),
            }
        }
    }
    changed
}

/// Spreads a replica change over the active machine sets of a deployment in
/// the middle of a rollout (proportional scaling): each set moves in
/// proportion to its size against the previous maximum, larger sets first;
/// what rounding leaves over goes to the largest set. Returns the new
/// `spec.replicas` per set, in input order.
pub fn proportional(sets: &[SetCounts], replicas: i64, max_surge: i64) -> Vec<i64> {
    let allowed = if replicas == 0 {
        0
    } else {
        replicas + max_surge
    };
    let current: i64 = sets.iter().map(|s| s.spec).sum();
    let delta = allowed - current;
    let mut out: Vec<i64> = sets.iter().map(|s| s.spec).collect();
    if delta == 0 || sets.is_empty() {
        return out;
    }
    // Larger first; older first on ties.
    let mut order: Vec<usize> = (0..sets.len()).collect();
    order.sort_by(|&a, &b| {
        sets[b]
            .spec
            .cmp(&sets[a].spec)
            .then(sets[a].age_rank.cmp(&sets[b].age_rank))
    });
    let mut added = 0i64;
    for &i in &order {
        let s = &sets[i];
        if s.spec == 0 {
            continue;
        }
        let previous_max = s.max_replicas_annotation.unwrap_or(current).max(1);
        let share =
            ((s.spec as f64) * (allowed as f64) / (previous_max as f64)).round() as i64 - s.spec;
        let remaining = delta - added;
        let share = if delta > 0 {
            share.clamp(0, remaining)
        } else {
            share.clamp(remaining, 0)
        };
        out[i] += share;
        added += share;
    }
    // Leftover to the largest set, never below zero.
    if added != delta
        && let Some(&largest) = order.first()
    {
        out[largest] = (out[largest] + delta - added).max(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use IntOrPercent::{Int, Percent};

    fn set(name: &str, spec: i64, status: i64, available: i64, age: i64) -> SetCounts {
        SetCounts {
            name: name.into(),
            spec,
            status,
            available,
            age_rank: age,
            max_replicas_annotation: None,
        }
    }

    #[test]
    fn fencepost_table() {
        let cases = [
            (10, Percent(25), Percent(25), (3, 2)),
            (10, Int(0), Percent(0), (0, 1)),
            (10, Int(1), Int(0), (1, 0)),
            (3, Int(0), Int(5), (0, 3)),
            (0, Int(0), Int(0), (0, 0)),
            (4, Percent(50), Percent(10), (2, 0)),
            (1, Percent(10), Percent(10), (1, 0)),
        ];
        for (replicas, s, u, want) in cases {
            assert_eq!(fenceposts(replicas, &s, &u), want, "{replicas} {s:?} {u:?}");
        }
    }

    #[test]
    fn new_set_growth() {
        // replicas 3, surge 1: 3 old exist, new may add 1.
        let new = set("new", 0, 0, 0, 2);
        let old = set("old", 3, 3, 3, 1);
        assert_eq!(new_set_replicas(3, 1, &new, &[old.clone(), new.clone()]), 1);
        // At the surge limit: no growth.
        let new1 = set("new", 1, 1, 0, 2);
        assert_eq!(
            new_set_replicas(3, 1, &new1, &[old.clone(), new1.clone()]),
            1
        );
        // Never beyond replicas.
        let new3 = set("new", 3, 3, 3, 2);
        assert_eq!(
            new_set_replicas(3, 5, &new3, std::slice::from_ref(&new3)),
            3
        );
        // A big surge fills at once.
        assert_eq!(new_set_replicas(3, 3, &new, &[old, new.clone()]), 3);
    }

    #[test]
    fn old_scale_down_keeps_availability() {
        // replicas 3, maxUnavailable 0, new has 1 available: old may drop 1.
        let new = set("new", 1, 1, 1, 2);
        let old = set("old", 3, 3, 3, 1);
        assert_eq!(
            scale_down_old(3, 0, &new, std::slice::from_ref(&old)),
            vec![("old".into(), 2)]
        );
        // New machine not available yet: nothing may go.
        let new_unready = set("new", 1, 1, 0, 2);
        assert!(scale_down_old(3, 0, &new_unready, std::slice::from_ref(&old)).is_empty());
        // Unhealthy old machines go first, without touching availability.
        let sick = set("old", 3, 3, 1, 1);
        assert_eq!(scale_down_old(3, 0, &new, &[sick]), vec![("old".into(), 2)]);
        // maxUnavailable 1 lets one go even before the new set is ready.
        assert_eq!(
            scale_down_old(3, 1, &set("new", 0, 0, 0, 2), &[old]),
            vec![("old".into(), 2)]
        );
    }

    #[test]
    fn oldest_sets_shrink_first() {
        let new = set("new", 2, 2, 2, 3);
        let a = set("a", 1, 1, 1, 1);
        let b = set("b", 1, 1, 1, 2);
        assert_eq!(
            scale_down_old(2, 0, &new, &[b, a]),
            vec![("a".into(), 0), ("b".into(), 0)]
        );
    }

    #[test]
    fn proportional_scaling() {
        // 10 replicas + surge 3 split 8 old / 5 new (max 13); scale to 20 + surge 5 = 25.
        let mut old = set("old", 8, 8, 8, 1);
        old.max_replicas_annotation = Some(13);
        let mut new = set("new", 5, 5, 5, 2);
        new.max_replicas_annotation = Some(13);
        let out = proportional(&[old.clone(), new.clone()], 20, 5);
        assert_eq!(out.iter().sum::<i64>(), 25);
        assert_eq!(out, vec![15, 10]);
        // Scale down to 5 + surge 1 = 6: cut proportionally, leftover to the largest.
        let out = proportional(&[old, new], 5, 1);
        assert_eq!(out.iter().sum::<i64>(), 6);
        assert!(out[0] >= out[1], "{out:?}");
        // Scale to zero.
        let out = proportional(&[set("a", 3, 3, 3, 1), set("b", 2, 2, 2, 2)], 0, 1);
        assert_eq!(out, vec![0, 0]);
    }
}
