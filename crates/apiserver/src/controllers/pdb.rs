//! The disruption controller: keeps every PodDisruptionBudget's status
//! (expected, healthy and desired pods, allowed disruptions) current from the
//! pods it selects, which is what the eviction subresource checks.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::selector::LabelSelector;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use store::{RangeRequest, WatchItem};

use super::Context;
use crate::object;
use crate::storage::{Storage, keys};
use crate::strategy::pdb::DISRUPTED_POD_TIMEOUT_SECS;

/// `5` or `"50%"` of `total`, rounding percentages up.
fn scaled(v: &Value, total: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((pct * total + 99) / 100)
        }
        _ => None,
    }
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("Ready")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
}

/// The status a budget should have given the pods of its namespace.
pub fn compute_status(pdb: &Value, pods: &[Value], now: DateTime<Utc>) -> Value {
    let sel = pdb
        .pointer("/spec/selector")
        .cloned()
        .unwrap_or(Value::Null);
    let selector = LabelSelector::from_json(&sel).unwrap_or_else(|_| LabelSelector::nothing());
    let matching: Vec<&Value> = pods
        .iter()
        .filter(|p| {
            !matches!(
                p.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            ) && selector.matches_object(p)
        })
        .collect();
    let expected = matching.len() as i64;
    // Pods recently evicted stay discounted until they are gone.
    let mut disrupted = Map::new();
    if let Some(d) = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
    {
        for (name, at) in d {
            let fresh = at
                .as_str()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .is_some_and(|t| {
                    (now - t.with_timezone(&Utc)).num_seconds() < DISRUPTED_POD_TIMEOUT_SECS
                });
            let still_there = matching
                .iter()
                .any(|p| object::name(p) == name && !object::is_deleting(p));
            if fresh && still_there {
                disrupted.insert(name.clone(), at.clone());
            }
        }
    }
    let healthy = matching
        .iter()
        .filter(|p| {
            !object::is_deleting(p) && is_ready(p) && !disrupted.contains_key(object::name(p))
        })
        .count() as i64;
    let desired = if let Some(min) = pdb.pointer("/spec/minAvailable") {
        scaled(min, expected).unwrap_or(expected)
    } else if let Some(max) = pdb.pointer("/spec/maxUnavailable") {
        (expected - scaled(max, expected).unwrap_or(0)).max(0)
    } else {
        1.min(expected)
    };
    let allowed = (healthy - desired).max(0);
    let generation = object::meta(pdb)
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let (status, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let prev = pdb
        .pointer("/status/conditions/0")
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(object::now_rfc3339()));
    let mut out = json!({
        "observedGeneration": generation,
        "expectedPods": expected,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": allowed,
        "conditions": [{
            "type": "DisruptionAllowed", "status": status, "reason": reason, "message": "",
            "lastTransitionTime": prev, "observedGeneration": generation,
        }],
    });
    if !disrupted.is_empty() {
        out["disruptedPods"] = Value::Object(disrupted);
    }
    out
}

async fn sync_namespace(storage: &Storage, ns: &str) {
    let range = |prefix: String| async move {
        storage
            .store()
            .range(RangeRequest {
                prefix,
                ..Default::default()
            })
            .await
            .map(|r| r.kvs)
            .unwrap_or_default()
    };
    let pdbs = range(keys::namespace_prefix(keys::POD_DISRUPTION_BUDGETS, ns)).await;
    if pdbs.is_empty() {
        return;
    }
    let pods: Vec<Value> = range(keys::namespace_prefix(keys::PODS, ns))
        .await
        .iter()
        .filter_map(|kv| serde_json::from_slice(&kv.value).ok())
        .collect();
    for kv in pdbs {
        let _ = storage
            .mutate(&kv.key, |pdb| {
                let want = compute_status(pdb, &pods, Utc::now());
                if pdb.get("status") == Some(&want) {
                    return false;
                }
                pdb["status"] = want;
                true
            })
            .await;
    }
}

pub fn spawn(ctx: Arc<Context>) {
    const PODS: &str = keys::PODS;
    const PDBS: &str = keys::POD_DISRUPTION_BUDGETS;
    let namespace_of = keys::namespace_of;
    tokio::spawn(async move {
        let storage = &ctx.storage;
        let pods_prefix = keys::prefix(PODS);
        let pdbs_prefix = keys::prefix(PDBS);
        loop {
            let from = storage.store().current_revision();
            let (Ok(mut pods), Ok(mut pdbs)) = (
                storage.store().watch(&pods_prefix, from).await,
                storage.store().watch(&pdbs_prefix, from).await,
            ) else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            let mut dirty: BTreeSet<String> = BTreeSet::new();
            // Resync everything at start and then every 30 s.
            if let Ok(r) = storage
                .store()
                .range(RangeRequest {
                    prefix: pdbs_prefix.clone(),
                    ..Default::default()
                })
                .await
            {
                for kv in r.kvs {
                    if let Some(ns) = namespace_of(&kv.key, PDBS) {
                        dirty.insert(ns);
                    }
                }
            }
            let mut flush = tokio::time::interval(Duration::from_millis(100));
            let mut resync = tokio::time::interval(Duration::from_secs(30));
            loop {
                tokio::select! {
                    item = pods.recv() => match item {
                        Some(WatchItem::Event(ev)) => { if let Some(ns) = namespace_of(&ev.kv.key, PODS) { dirty.insert(ns); } }
                        Some(_) => {}
                        None => break,
                    },
                    item = pdbs.recv() => match item {
                        Some(WatchItem::Event(ev)) => { if let Some(ns) = namespace_of(&ev.kv.key, PDBS) { dirty.insert(ns); } }
                        Some(_) => {}
                        None => break,
                    },
                    _ = flush.tick() => {
                        for ns in std::mem::take(&mut dirty) { sync_namespace(storage, &ns).await; }
                    }
                    _ = resync.tick() => {
                        if let Ok(r) = storage.store().range(RangeRequest { prefix: pdbs_prefix.clone(), ..Default::default() }).await {
                            for kv in r.kvs { if let Some(ns) = namespace_of(&kv.key, PDBS) { dirty.insert(ns); } }
                        }
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "labels": {"app": "a"}},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}})
    }

    #[test]
    fn budgets() {
        let pods = vec![pod("a", true), pod("b", true), pod("c", false)];
        let cases = [
            (json!({"minAvailable": 2}), 3, 2, 2, 0),
            (json!({"minAvailable": 1}), 3, 2, 1, 1),
            (json!({"maxUnavailable": 1}), 3, 2, 2, 0),
            (json!({"minAvailable": "50%"}), 3, 2, 2, 0),
            (json!({"maxUnavailable": "34%"}), 3, 2, 1, 1),
        ];
        for (spec, expected, healthy, desired, allowed) in cases {
            let mut spec = spec;
            spec["selector"] = json!({"matchLabels": {"app": "a"}});
            let pdb = json!({"metadata": {"name": "p", "generation": 1}, "spec": spec});
            let s = compute_status(&pdb, &pods, Utc::now());
            assert_eq!(
                (
                    s["expectedPods"].as_i64(),
                    s["currentHealthy"].as_i64(),
                    s["desiredHealthy"].as_i64(),
                    s["disruptionsAllowed"].as_i64()
                ),
                (Some(expected), Some(healthy), Some(desired), Some(allowed)),
                "{spec}"
            );
        }
    }

    #[test]
    fn disrupted_pods_are_not_healthy() {
        let pods = vec![pod("a", true), pod("b", true)];
        let pdb = json!({"metadata": {"name": "p", "generation": 1},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
            "status": {"disruptedPods": {"a": object::now_rfc3339()}}});
        let s = compute_status(&pdb, &pods, Utc::now());
        assert_eq!(s["currentHealthy"], 1);
        assert_eq!(s["disruptionsAllowed"], 0);
    }
}
