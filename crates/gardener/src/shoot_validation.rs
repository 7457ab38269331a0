//! Static rules of a Shoot's worker pools (spec §3), checked without the
//! profile: names, bounds, rollout limits, volumes, priorities, pools for
//! system components, the Kubernetes version skew, and what may not change
//! on update. [`crate::shoot_admission::validate_shoot`] runs them first.

use apimachinery::Cause;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::types::{ShootSpec, Worker};
use crate::version;

/// Longest worker pool name (it ends up in machine and node names).
pub const MAX_POOL_NAME: usize = 15;

/// How many minor versions a pool may run behind the control plane.
pub const MAX_MINOR_SKEW: u64 = 3;

fn path(i: usize) -> String {
    format!("spec.provider.workers[{i}]")
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A rollout bound as a number or a percentage; `Err` says what is wrong.
enum Bound {
    Count(i64),
    Percent(i64),
}

fn bound(v: &IntOrString) -> Result<Bound, String> {
    match v {
        IntOrString::Int(i) => Ok(Bound::Count(i64::from(*i))),
        IntOrString::String(s) => match s.strip_suffix('%') {
            Some(p) => p
                .parse::<i64>()
                .map(Bound::Percent)
                .map_err(|_| format!("{s:?} is not a percentage like \"25%\"")),
            None => s
                .parse::<i64>()
                .map(Bound::Count)
                .map_err(|_| format!("{s:?} is neither a number nor a percentage")),
        },
    }
}

fn is_zero(b: &Bound) -> bool {
    matches!(b, Bound::Count(0) | Bound::Percent(0))
}

/// The pool's effective surge and unavailability after upstream's
/// defaults (rolling 1/0, automatic in-place 0/1); manual in-place pools
/// have none.
fn bounds(w: &Worker, causes: &mut Vec<Cause>, p: &str) -> Option<(Bound, Bound)> {
    let strategy = w.update_strategy.unwrap_or_default();
    if matches!(
        strategy,
        crate::types::WorkerUpdateStrategy::ManualInPlaceUpdate
    ) {
        for (field, v) in [
            ("maxSurge", &w.max_surge),
            ("maxUnavailable", &w.max_unavailable),
        ] {
            if v.is_some() {
                causes.push(Cause::new(
                    "FieldValueForbidden",
                    format!("{p}.{field}"),
                    "a ManualInPlaceUpdate pool is updated node by node as operators label them; it takes no maxSurge or maxUnavailable",
                ));
            }
        }
        return None;
    }
    let in_place = strategy.is_in_place();
    let default_surge = IntOrString::Int(if in_place { 0 } else { 1 });
    let default_unavailable = IntOrString::Int(if in_place { 1 } else { 0 });
    let parse = |field: &str, v: &IntOrString, causes: &mut Vec<Cause>| match bound(v) {
        Ok(b) => Some(b),
        Err(e) => {
            causes.push(Cause::invalid(format!("{p}.{field}"), e));
            None
        }
    };
    let surge = parse(
        "maxSurge",
        w.max_surge.as_ref().unwrap_or(&default_surge),
        causes,
    );
    let unavailable = parse(
        "maxUnavailable",
        w.max_unavailable.as_ref().unwrap_or(&default_unavailable),
        causes,
    );
    Some((surge?, unavailable?))
}

/// The rules for `spec.hibernation.schedules`: each names a start or an
/// end (or both), each expression parses as a five-field cron expression,
/// the location is a known time zone, and no schedule appears twice.
pub fn validate_hibernation(spec: &ShootSpec) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(h) = &spec.hibernation else {
        return causes;
    };
    let mut seen = std::collections::BTreeSet::new();
    for (i, sched) in h.schedules.iter().enumerate() {
        let p = format!("spec.hibernation.schedules[{i}]");
        let start = sched.start.as_deref().filter(|s| !s.trim().is_empty());
        let end = sched.end.as_deref().filter(|s| !s.trim().is_empty());
        if start.is_none() && end.is_none() {
            causes.push(Cause::new(
                "FieldValueRequired",
                p.clone(),
                "Required value: either start or end has to be provided",
            ));
        }
        for (field, expr) in [("start", start), ("end", end)] {
            if let Some(expr) = expr
                && let Err(e) = crate::cron::Cron::parse(expr)
            {
                causes.push(Cause::invalid(format!("{p}.{field}"), e.why));
            }
        }
        if let Err(why) = crate::cron::location(sched.location.as_deref()) {
            causes.push(Cause::invalid(format!("{p}.location"), why));
        }
        if !seen.insert((start, end, sched.location.as_deref().unwrap_or(""))) {
            causes.push(Cause::new(
                "FieldValueDuplicate",
                p,
                "Duplicate value: the same schedule appears twice".to_string(),
            ));
        }
    }
    causes
}

/// Every static rule of every pool, with field paths.
pub fn validate_workers(spec: &ShootSpec, old: Option<&ShootSpec>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let workers = &spec.provider.workers;
    let mut seen = std::collections::BTreeSet::new();
    for (i, w) in workers.iter().enumerate() {
        let p = path(i);
        if w.name.is_empty() {
            causes.push(Cause::required(format!("{p}.name")));
        } else if !is_dns_label(&w.name) || w.name.len() > MAX_POOL_NAME {
            causes.push(Cause::invalid(
                format!("{p}.name"),
                format!(
                    "{:?} must be a DNS label (lowercase letters, digits, '-') of at most {MAX_POOL_NAME} characters",
                    w.name
                ),
            ));
        }
        if !seen.insert(w.name.as_str()) {
            causes.push(Cause::new(
                "FieldValueDuplicate",
                format!("{p}.name"),
                format!("Duplicate value: {:?}", w.name),
            ));
        }
        if w.minimum < 0 {
            causes.push(Cause::invalid(
                format!("{p}.minimum"),
                format!("{} must not be negative", w.minimum),
            ));
        }
        if w.maximum < w.minimum {
            causes.push(Cause::invalid(
                format!("{p}.maximum"),
                format!(
                    "maximum {} must not be smaller than minimum {}",
                    w.maximum, w.minimum
                ),
            ));
        }
        if let Some((surge, unavailable)) = bounds(w, &mut causes, &p) {
            for (field, b) in [("maxSurge", &surge), ("maxUnavailable", &unavailable)] {
                let negative = matches!(b, Bound::Count(n) | Bound::Percent(n) if *n < 0);
                if negative {
                    causes.push(Cause::invalid(
                        format!("{p}.{field}"),
                        "must not be negative",
                    ));
                }
            }
            if matches!(unavailable, Bound::Percent(n) if n > 100) {
                causes.push(Cause::invalid(
                    format!("{p}.maxUnavailable"),
                    "must not be more than 100%",
                ));
            }
            if is_zero(&surge) && is_zero(&unavailable) {
                causes.push(Cause::invalid(
                    format!("{p}.maxUnavailable"),
                    "maxSurge and maxUnavailable may not both be 0: the pool could never be updated",
                ));
            }
        }
        if let Some(v) = &w.volume {
            let digits = v.volume_size.strip_suffix("Gi");
            if !digits.is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) {
                causes.push(Cause::invalid(
                    format!("{p}.volume.size"),
                    format!(
                        "{:?} must be a whole number of Gi, like \"50Gi\"",
                        v.volume_size
                    ),
                ));
            }
        } else if !w.data_volumes.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{p}.volume"),
                "data volumes need a root volume",
            ));
        }
        if w.priority.is_some_and(|x| x < -1) {
            causes.push(Cause::invalid(
                format!("{p}.priority"),
                "must be -1 or more",
            ));
        }
        let allows_system = w.system_components.as_ref().is_none_or(|s| s.allow);
        if allows_system && w.maximum > 0 && (w.maximum as usize) < w.zones.len() {
            causes.push(Cause::invalid(
                format!("{p}.maximum"),
                format!(
                    "a pool for system components needs at least one node per zone: maximum {} < {} zones",
                    w.maximum,
                    w.zones.len()
                ),
            ));
        }
        if let (Some(pool), Some(cp)) = (
            w.kubernetes_version().and_then(version::parse),
            version::parse(&spec.kubernetes.version),
        ) {
            let kp = format!("{p}.kubernetes.version");
            if (pool.major, pool.minor, pool.patch) > (cp.major, cp.minor, cp.patch) {
                causes.push(Cause::new(
                    "FieldValueForbidden",
                    kp,
                    format!(
                        "the pool's Kubernetes version must not be newer than the control plane's {}",
                        spec.kubernetes.version
                    ),
                ));
            } else if pool.major == cp.major && cp.minor.saturating_sub(pool.minor) > MAX_MINOR_SKEW
            {
                causes.push(Cause::new(
                    "FieldValueForbidden",
                    kp,
                    format!(
                        "the pool may run at most {MAX_MINOR_SKEW} minor versions behind the control plane's {}",
                        spec.kubernetes.version
                    ),
                ));
            }
        }
        if let Some(o) = old.and_then(|o| o.provider.workers.iter().find(|x| x.name == w.name)) {
            let was = o.update_strategy.unwrap_or_default().is_in_place();
            let is = w.update_strategy.unwrap_or_default().is_in_place();
            if was != is {
                causes.push(Cause::new(
                    "FieldValueForbidden",
                    format!("{p}.updateStrategy"),
                    "a pool cannot switch between rolling and in-place updates; create a new pool",
                ));
            }
            if was && is && o.machine.type_ != w.machine.type_ {
                causes.push(Cause::new(
                    "FieldValueForbidden",
                    format!("{p}.machine.type"),
                    "an in-place pool keeps its machine type",
                ));
            }
        }
    }
    let any_system = workers
        .iter()
        .any(|w| w.system_components.as_ref().is_none_or(|s| s.allow) && w.maximum > 0);
    if !workers.is_empty() && !any_system {
        causes.push(Cause::new(
            "FieldValueForbidden",
            "spec.provider.workers",
            "at least one pool must allow system components and have maximum > 0",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shoot(workers: serde_json::Value) -> ShootSpec {
        serde_json::from_value(json!({
            "kubernetes": {"version": "1.31.2"},
            "provider": {"type": "local", "workers": workers}
        }))
        .unwrap()
    }

    fn fields(causes: &[Cause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{}:{}", c.reason, c.field))
            .collect()
    }

    fn pool(extra: serde_json::Value) -> serde_json::Value {
        let mut p = json!({"name": "pool", "minimum": 1, "maximum": 3, "zones": ["a"],
            "machine": {"type": "t"}});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    }

    #[test]
    fn static_worker_rules() {
        let w = "spec.provider.workers[0]";
        let cases: Vec<(&str, serde_json::Value, Vec<String>)> = vec![
            ("valid", json!([pool(json!({}))]), vec![]),
            (
                "long name",
                json!([pool(json!({"name": "a-very-long-pool-name"}))]),
                vec![format!("FieldValueInvalid:{w}.name")],
            ),
            (
                "upper case",
                json!([pool(json!({"name": "Pool"}))]),
                vec![format!("FieldValueInvalid:{w}.name")],
            ),
            (
                "duplicate",
                json!([pool(json!({})), pool(json!({}))]),
                vec!["FieldValueDuplicate:spec.provider.workers[1].name".into()],
            ),
            (
                "negative minimum",
                json!([pool(json!({"minimum": -1}))]),
                vec![format!("FieldValueInvalid:{w}.minimum")],
            ),
            (
                "max below min",
                json!([pool(json!({"minimum": 4}))]),
                vec![format!("FieldValueInvalid:{w}.maximum")],
            ),
            (
                "both zero",
                json!([pool(json!({"maxSurge": 0, "maxUnavailable": "0%"}))]),
                vec![format!("FieldValueInvalid:{w}.maxUnavailable")],
            ),
            (
                "unavailable over 100%",
                json!([pool(json!({"maxUnavailable": "150%"}))]),
                vec![format!("FieldValueInvalid:{w}.maxUnavailable")],
            ),
            (
                "bad percent",
                json!([pool(json!({"maxSurge": "x%"}))]),
                vec![format!("FieldValueInvalid:{w}.maxSurge")],
            ),
            (
                "manual in-place with bounds",
                json!([pool(
                    json!({"updateStrategy": "ManualInPlaceUpdate", "maxSurge": 1})
                )]),
                vec![format!("FieldValueForbidden:{w}.maxSurge")],
            ),
            (
                "in-place defaults 0/1",
                json!([pool(json!({"updateStrategy": "AutoInPlaceUpdate"}))]),
                vec![],
            ),
            (
                "volume size",
                json!([pool(json!({"volume": {"size": "50G"}}))]),
                vec![format!("FieldValueInvalid:{w}.volume.size")],
            ),
            (
                "data volume without root",
                json!([pool(
                    json!({"dataVolumes": [{"name": "d", "size": "10Gi"}]})
                )]),
                vec![format!("FieldValueRequired:{w}.volume")],
            ),
            (
                "priority",
                json!([pool(json!({"priority": -2}))]),
                vec![format!("FieldValueInvalid:{w}.priority")],
            ),
            (
                "system pool per zone",
                json!([pool(
                    json!({"maximum": 1, "minimum": 0, "zones": ["a", "b"]})
                )]),
                vec![format!("FieldValueInvalid:{w}.maximum")],
            ),
            (
                "no system pool",
                json!([pool(json!({"systemComponents": {"allow": false}}))]),
                vec!["FieldValueForbidden:spec.provider.workers".into()],
            ),
            (
                "pool newer than control plane",
                json!([pool(json!({"kubernetes": {"version": "1.32.0"}}))]),
                vec![format!("FieldValueForbidden:{w}.kubernetes.version")],
            ),
            (
                "pool four minors behind",
                json!([pool(json!({"kubernetes": {"version": "1.27.9"}}))]),
                vec![format!("FieldValueForbidden:{w}.kubernetes.version")],
            ),
            (
                "pool three minors behind",
                json!([pool(json!({"kubernetes": {"version": "1.28.0"}}))]),
                vec![],
            ),
        ];
        for (name, workers, want) in cases {
            let got = fields(&validate_workers(&shoot(workers), None));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn update_rules() {
        let old = shoot(json!([pool(
            json!({"updateStrategy": "AutoInPlaceUpdate"})
        )]));
        let switched = shoot(json!([pool(json!({}))]));
        assert_eq!(
            fields(&validate_workers(&switched, Some(&old))),
            ["FieldValueForbidden:spec.provider.workers[0].updateStrategy"]
        );
        let retyped = shoot(json!([pool(
            json!({"updateStrategy": "AutoInPlaceUpdate", "machine": {"type": "u"}})
        )]));
        assert_eq!(
            fields(&validate_workers(&retyped, Some(&old))),
            ["FieldValueForbidden:spec.provider.workers[0].machine.type"]
        );
    }

    #[test]
    fn hibernation_schedule_rules() {
        let with = |schedules: serde_json::Value| -> ShootSpec {
            let mut s = shoot(json!([]));
            s.hibernation = serde_json::from_value(json!({"schedules": schedules})).unwrap();
            s
        };
        let rows: [(serde_json::Value, &[&str]); 6] = [
            (
                json!([{"start": "00 17 * * 1,2,3,4,5", "end": "00 08 * * 1,2,3,4,5", "location": "Europe/Berlin"},
                       {"start": "0 20 * * 6"}]),
                &[],
            ),
            (
                json!([{"location": "UTC"}]),
                &["FieldValueRequired:spec.hibernation.schedules[0]"],
            ),
            (
                json!([{"start": "0 25 * * *", "end": "every day"}]),
                &[
                    "FieldValueInvalid:spec.hibernation.schedules[0].start",
                    "FieldValueInvalid:spec.hibernation.schedules[0].end",
                ],
            ),
            (
                json!([{"start": "0 17 * * *", "location": "Mars/Olympus"}]),
                &["FieldValueInvalid:spec.hibernation.schedules[0].location"],
            ),
            (
                json!([{"start": "0 17 * * *"}, {"start": "0 17 * * *"}]),
                &["FieldValueDuplicate:spec.hibernation.schedules[1]"],
            ),
            (json!([]), &[]),
        ];
        for (schedules, want) in rows {
            assert_eq!(
                fields(&validate_hibernation(&with(schedules.clone()))),
                want,
                "{schedules}"
            );
        }
        let bad = validate_hibernation(&with(json!([{"start": "0 25 * * *"}])));
        assert!(
            bad[0].message.contains("hour 25 is outside 0-23"),
            "{bad:?}"
        );
        assert!(validate_hibernation(&shoot(json!([]))).is_empty());
    }
}
