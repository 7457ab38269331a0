//! The prober's life per shoot (spec §1.2, §1.3): which Cluster events
//! reach the reconciler, and whether a Cluster's prober is started,
//! stopped, restarted or left alone.
//!
//! Everything is read from the Cluster's raw `spec.shoot`, the way
//! upstream decodes it, so fields trellis's typed Shoot does not model
//! (`spec.kubernetes.kubeControllerManager`) still count.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::config::ProberConfig;

/// The pools' unhealthy node condition types: pool name → types, only for
/// pools with machine-controller-manager settings (spec §1.5).
pub type NodeConditions = BTreeMap<String, Vec<String>>;

/// What the prober's lifecycle reads from one Cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterFacts {
    /// The Cluster has a deletionTimestamp.
    pub deleting: bool,
    /// `spec.hibernation.enabled` of the shoot.
    pub hibernation_enabled: bool,
    /// `status.hibernated` of the shoot (upstream's `IsHibernated`).
    pub hibernated: bool,
    /// `status.lastOperation` type and state.
    pub last_operation: Option<(String, String)>,
    /// `spec.provider.workers`' length.
    pub workers: usize,
    pub node_conditions: NodeConditions,
    /// `spec.kubernetes.kubeControllerManager.nodeMonitorGracePeriod`.
    pub kcm_node_monitor_grace: Option<Duration>,
}

impl ClusterFacts {
    /// Reads the facts from a Cluster's `spec.shoot` and deletion state.
    /// Missing or malformed fields read as absent.
    pub fn from_shoot(shoot: &Value, deleting: bool) -> ClusterFacts {
        let workers = shoot
            .pointer("/spec/provider/workers")
            .and_then(Value::as_array);
        let mut node_conditions = NodeConditions::new();
        for w in workers.into_iter().flatten() {
            // Upstream's Go field is MachineControllerManagerSettings; its
            // JSON name is `machineControllerManager`.
            let (Some(name), Some(settings)) = (
                w.get("name").and_then(Value::as_str),
                w.get("machineControllerManager").filter(|s| s.is_object()),
            ) else {
                continue;
            };
            let types = settings
                .get("nodeConditions")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            node_conditions.insert(name.to_string(), types);
        }
        let last_operation = shoot
            .pointer("/status/lastOperation")
            .filter(|o| o.is_object())
            .map(|o| {
                let s = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                (s("type"), s("state"))
            });
        ClusterFacts {
            deleting,
            hibernation_enabled: shoot
                .pointer("/spec/hibernation/enabled")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            hibernated: shoot
                .pointer("/status/hibernated")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            last_operation,
            workers: workers.map_or(0, Vec::len),
            node_conditions,
            kcm_node_monitor_grace: shoot
                .pointer("/spec/kubernetes/kubeControllerManager/nodeMonitorGracePeriod")
                .and_then(Value::as_str)
                .and_then(api::parse_duration),
        }
    }

    /// Why no prober may run at all, if so (spec §1.2 step 2).
    pub fn stop_reason(&self) -> Option<&'static str> {
        if self.deleting {
            Some("the cluster is being deleted")
        } else if self.hibernation_enabled {
            Some("the shoot is hibernated")
        } else if self
            .last_operation
            .as_ref()
            .is_some_and(|(t, _)| t == "Migrate")
        {
            Some("the control plane is migrating")
        } else if self.workers == 0 {
            Some("the shoot has no workers")
        } else {
            None
        }
    }

    /// Whether a prober may start (spec §1.2 step 3): not waking up, and a
    /// last operation that says the control plane is in place.
    pub fn may_start(&self) -> bool {
        let waking = !self.hibernation_enabled && self.hibernated;
        let settled = match &self.last_operation {
            None => false,
            Some((t, s)) => {
                t == "Reconcile" || (s == "Succeeded" && (t == "Restore" || t == "Create"))
            }
        };
        !waking && settled
    }
}

/// A watch event on a Cluster, with what the filter needs.
#[derive(Clone, Copy, Debug)]
pub enum ClusterEvent<'a> {
    Create(&'a ClusterFacts),
    Update {
        old: &'a ClusterFacts,
        new: &'a ClusterFacts,
    },
    Delete(&'a ClusterFacts),
}

/// Upstream's event filter: only shoots with workers matter (spec §1.2).
pub fn passes_filter(event: ClusterEvent<'_>) -> bool {
    match event {
        ClusterEvent::Create(c) | ClusterEvent::Delete(c) => c.workers > 0,
        ClusterEvent::Update { old, new } => old.workers > 0 || new.workers > 0,
    }
}

/// What to do with a Cluster's prober.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// Remove the prober, if one runs.
    Remove(&'static str),
    /// Start a prober (none runs).
    Start,
    /// Replace the running prober: the pools' node conditions changed.
    Restart,
    /// Leave things as they are.
    Keep,
}

/// The reconcile decision (spec §1.2 steps 1–5). `facts` is `None` when
/// the Cluster is gone; `running` is the node-condition map the running
/// prober was created with, if one runs.
pub fn decide(facts: Option<&ClusterFacts>, running: Option<&NodeConditions>) -> Lifecycle {
    let Some(facts) = facts else {
        return Lifecycle::Remove("the cluster is gone");
    };
    if let Some(why) = facts.stop_reason() {
        return Lifecycle::Remove(why);
    }
    if !facts.may_start() {
        // An existing prober is not stopped (upstream): a shoot being
        // reconciled keeps its protection.
        return Lifecycle::Keep;
    }
    match running {
        None => Lifecycle::Start,
        Some(conditions) if *conditions != facts.node_conditions => Lifecycle::Restart,
        Some(_) => Lifecycle::Keep,
    }
}

/// The per-shoot config (spec §1.3): the file's, with the shoot's own KCM
/// grace period when it sets one.
pub fn effective_config(file: &ProberConfig, facts: &ClusterFacts) -> ProberConfig {
    let mut c = file.clone();
    if let Some(grace) = facts.kcm_node_monitor_grace {
        c.kcm_node_monitor_grace_duration = grace;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shoot(op: Option<(&str, &str)>, workers: usize) -> Value {
        let workers: Vec<Value> = (0..workers)
            .map(|i| json!({"name": format!("pool-{i}"), "machine": {"type": "local"}}))
            .collect();
        let mut s =
            json!({"spec": {"provider": {"type": "local", "workers": workers}}, "status": {}});
        if let Some((t, st)) = op {
            s["status"]["lastOperation"] = json!({"type": t, "state": st, "progress": 100});
        }
        s
    }

    fn facts(op: Option<(&str, &str)>, workers: usize) -> ClusterFacts {
        ClusterFacts::from_shoot(&shoot(op, workers), false)
    }

    #[test]
    fn scenarios_1_to_7_which_clusters_get_a_prober() {
        let none = NodeConditions::new();
        let mut hibernating = shoot(Some(("Reconcile", "Succeeded")), 2);
        hibernating["spec"]["hibernation"] = json!({"enabled": true});
        let mut waking = shoot(Some(("Reconcile", "Processing")), 2);
        waking["status"]["hibernated"] = json!(true);
        let deleting = ClusterFacts::from_shoot(&shoot(Some(("Create", "Succeeded")), 2), true);
        // (scenario, facts, prober running, decision)
        let table: Vec<(&str, Option<ClusterFacts>, bool, Lifecycle)> = vec![
            (
                "1 Create/Succeeded",
                Some(facts(Some(("Create", "Succeeded")), 2)),
                false,
                Lifecycle::Start,
            ),
            (
                "2 no lastOperation",
                Some(facts(None, 2)),
                false,
                Lifecycle::Keep,
            ),
            (
                "2 Create/Processing",
                Some(facts(Some(("Create", "Processing")), 2)),
                false,
                Lifecycle::Keep,
            ),
            (
                "3 Reconcile/Error",
                Some(facts(Some(("Reconcile", "Error")), 2)),
                false,
                Lifecycle::Start,
            ),
            (
                "Restore/Succeeded",
                Some(facts(Some(("Restore", "Succeeded")), 2)),
                false,
                Lifecycle::Start,
            ),
            (
                "Restore/Processing",
                Some(facts(Some(("Restore", "Processing")), 2)),
                false,
                Lifecycle::Keep,
            ),
            (
                "Delete/Processing keeps a running prober",
                Some(facts(Some(("Delete", "Processing")), 2)),
                true,
                Lifecycle::Keep,
            ),
            (
                "4 hibernation enabled",
                Some(ClusterFacts::from_shoot(&hibernating, false)),
                true,
                Lifecycle::Remove("the shoot is hibernated"),
            ),
            (
                "5 waking up",
                Some(ClusterFacts::from_shoot(&waking, false)),
                false,
                Lifecycle::Keep,
            ),
            (
                "6 Migrate",
                Some(facts(Some(("Migrate", "Processing")), 2)),
                true,
                Lifecycle::Remove("the control plane is migrating"),
            ),
            (
                "6 deletionTimestamp",
                Some(deleting),
                true,
                Lifecycle::Remove("the cluster is being deleted"),
            ),
            (
                "6 cluster deleted",
                None,
                true,
                Lifecycle::Remove("the cluster is gone"),
            ),
            (
                "7 zero workers",
                Some(facts(Some(("Create", "Succeeded")), 0)),
                true,
                Lifecycle::Remove("the shoot has no workers"),
            ),
            (
                "running, nothing changed",
                Some(facts(Some(("Reconcile", "Succeeded")), 2)),
                true,
                Lifecycle::Keep,
            ),
        ];
        for (name, f, running, want) in table {
            let r = running.then_some(&none);
            assert_eq!(decide(f.as_ref(), r), want, "{name}");
        }
    }

    #[test]
    fn scenario_7_the_event_filter_drops_workerless_shoots() {
        let with = facts(Some(("Create", "Succeeded")), 2);
        let without = facts(Some(("Create", "Succeeded")), 0);
        let table: Vec<(&str, ClusterEvent<'_>, bool)> = vec![
            ("create with workers", ClusterEvent::Create(&with), true),
            (
                "create without workers",
                ClusterEvent::Create(&without),
                false,
            ),
            (
                "update to zero workers",
                ClusterEvent::Update {
                    old: &with,
                    new: &without,
                },
                true,
            ),
            (
                "update from zero workers",
                ClusterEvent::Update {
                    old: &without,
                    new: &with,
                },
                true,
            ),
            (
                "update without workers",
                ClusterEvent::Update {
                    old: &without,
                    new: &without,
                },
                false,
            ),
            ("delete with workers", ClusterEvent::Delete(&with), true),
            (
                "delete without workers",
                ClusterEvent::Delete(&without),
                false,
            ),
        ];
        for (name, ev, want) in table {
            assert_eq!(passes_filter(ev), want, "{name}");
        }
    }

    #[test]
    fn scenario_8_only_node_condition_changes_restart_a_prober() {
        let mut s = shoot(Some(("Reconcile", "Succeeded")), 2);
        s["spec"]["provider"]["workers"][0]["machineControllerManager"] =
            json!({"nodeConditions": ["DiskPressure"], "machineDrainTimeout": "2h"});
        let before = ClusterFacts::from_shoot(&s, false);
        assert_eq!(
            before.node_conditions,
            NodeConditions::from([("pool-0".into(), vec!["DiskPressure".into()])])
        );
        let mut labelled = s.clone();
        labelled["spec"]["provider"]["workers"][0]["labels"] = json!({"team": "a"});
        labelled["spec"]["kubernetes"] =
            json!({"kubeControllerManager": {"nodeMonitorGracePeriod": "1m"}});
        let labelled = ClusterFacts::from_shoot(&labelled, false);
        assert_eq!(
            decide(Some(&labelled), Some(&before.node_conditions)),
            Lifecycle::Keep
        );
        let mut changed = s.clone();
        changed["spec"]["provider"]["workers"][0]["machineControllerManager"]["nodeConditions"] =
            json!(["DiskPressure", "KernelDeadlock"]);
        let changed = ClusterFacts::from_shoot(&changed, false);
        assert_eq!(
            decide(Some(&changed), Some(&before.node_conditions)),
            Lifecycle::Restart
        );
    }

    #[test]
    fn the_shoots_kcm_grace_period_replaces_the_files() {
        let file = ProberConfig::from_yaml(crate::config::tests::UPSTREAM_PROBER_EXAMPLE).unwrap();
        let mut s = shoot(Some(("Reconcile", "Succeeded")), 1);
        assert_eq!(
            effective_config(&file, &ClusterFacts::from_shoot(&s, false))
                .kcm_node_monitor_grace_duration,
            Duration::from_secs(40)
        );
        s["spec"]["kubernetes"] =
            json!({"kubeControllerManager": {"nodeMonitorGracePeriod": "1m20s"}});
        assert_eq!(
            effective_config(&file, &ClusterFacts::from_shoot(&s, false))
                .kcm_node_monitor_grace_duration,
            Duration::from_secs(80)
        );
    }
}
