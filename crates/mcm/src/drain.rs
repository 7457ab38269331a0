//! The drain planner (spec §2.5), the one place that decides what a drain
//! does: which pods of a node it handles and how ([`plan`]: mirror and
//! DaemonSet pods stay; pods without persistent volumes are evicted in
//! parallel; pods with volumes one at a time, highest priority first, each
//! waiting for its volumes to detach), when it is forced ([`force_reason`]:
//! pods deleted with grace 0, no eviction — asked by label, when the drain
//! timeout since the deletion passed, or when the node has been NotReady or
//! read-only for over five minutes), and one level-triggered round of it
//! ([`drain_round`]), with the pod facts it works from and the budgets that
//! fail it at once. Machines (`controllers::machine`) and Cluster API
//! machines (crate `capi`) both drain through [`drain_round`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use api::{Machine, format_duration, labels};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::machine::{DELETION_POLL, Settings, annotation, label, node_conditions, parse_bool};
use crate::time::to_chrono;

/// The part of a pod a drain plan needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    /// A static pod's mirror (annotation `kubernetes.io/config.mirror`).
    pub mirror: bool,
    /// Controlled by a DaemonSet.
    pub daemonset: bool,
    /// Uses a PersistentVolumeClaim.
    pub has_volumes: bool,
    pub priority: i32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainPlan {
    /// Evicted (or, forced, deleted) all at once.
    pub parallel: Vec<PodInfo>,
    /// Evicted one by one in this order, waiting for volume detachment.
    pub serial: Vec<PodInfo>,
    pub force: bool,
}

/// Builds the plan for the pods on a node.
pub fn plan(pods: &[PodInfo], force: bool) -> DrainPlan {
    let mut out = DrainPlan {
        force,
        ..Default::default()
    };
    for p in pods.iter().filter(|p| !p.mirror && !p.daemonset) {
        if force || !p.has_volumes {
            out.parallel.push(p.clone());
        } else {
            out.serial.push(p.clone());
        }
    }
    out.serial
        .sort_by(|a, b| b.priority.cmp(&a.priority).then(a.name.cmp(&b.name)));
    out
}

/// How often eviction is retried after a 429.
pub const EVICTION_RETRY_INTERVAL: Duration = Duration::from_secs(20);
/// How long a node must have been NotReady (or read-only) before a drain is
/// forced.
pub const UNHEALTHY_FORCE_AFTER: Duration = Duration::from_secs(5 * 60);
/// The drain timeout and retries a forced drain uses.
pub const FORCED_DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Eviction attempts per pod: the configured number, but no more than fit in
/// the drain timeout at one try per retry interval (at least one).
pub fn max_evict_retries(configured: u32, drain_timeout: Duration) -> u32 {
    let fit = (drain_timeout.as_secs() / EVICTION_RETRY_INTERVAL.as_secs()).max(1) as u32;
    configured.min(fit).max(1)
}

/// Why a drain is forced, if it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForceReason {
    /// The machine carries `force-deletion: "True"`.
    Label,
    /// The drain timeout since the deletion started has passed.
    DrainTimeout,
    /// Ready has not been True for over five minutes.
    NotReady,
    /// ReadonlyFilesystem has not been False for over five minutes.
    ReadonlyFilesystem,
}

/// The facts behind the force decision.
#[derive(Clone, Debug)]
pub struct ForceInput {
    pub force_label: bool,
    pub deletion_started: DateTime<Utc>,
    pub drain_timeout: Duration,
    /// When Ready last became something other than True, if it is not True.
    pub not_ready_since: Option<DateTime<Utc>>,
    /// When ReadonlyFilesystem last became something other than False.
    pub readonly_since: Option<DateTime<Utc>>,
}

pub fn force_reason(f: &ForceInput, now: DateTime<Utc>) -> Option<ForceReason> {
    let past = |since: DateTime<Utc>, d: Duration| (now - since).to_std().is_ok_and(|e| e > d);
    if f.force_label {
        Some(ForceReason::Label)
    } else if past(f.deletion_started, f.drain_timeout) {
        Some(ForceReason::DrainTimeout)
    } else if f
        .not_ready_since
        .is_some_and(|s| past(s, UNHEALTHY_FORCE_AFTER))
    {
        Some(ForceReason::NotReady)
    } else if f
        .readonly_since
        .is_some_and(|s| past(s, UNHEALTHY_FORCE_AFTER))
    {
        Some(ForceReason::ReadonlyFilesystem)
    } else {
        None
    }
}

/// The facts behind the force decision of a drain.
pub fn force_input(m: &Machine, node: &Node, settings: &Settings) -> ForceInput {
    let since = |ty: &str, healthy: &str| {
        node_conditions(node)
            .iter()
            .find(|c| c.type_ == ty && c.status != healthy)
            .map(|c| {
                c.last_transition_time
                    .as_ref()
                    .map(to_chrono)
                    .unwrap_or(DateTime::<Utc>::MIN_UTC)
            })
    };
    ForceInput {
        force_label: label(&m.metadata, labels::FORCE_DELETION).is_some_and(parse_bool),
        deletion_started: m
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(to_chrono)
            .unwrap_or_else(Utc::now),
        drain_timeout: settings.drain_timeout,
        not_ready_since: since("Ready", "True"),
        readonly_since: since("ReadonlyFilesystem", "False"),
    }
}

/// The part of a pod a drain round needs.
#[derive(Clone, Debug, PartialEq)]
pub struct DrainPod {
    pub info: PodInfo,
    pub uid: String,
    /// When the pod started terminating, if it has.
    pub deleting_since: Option<DateTime<Utc>>,
    /// Its termination grace period.
    pub grace: Duration,
}

/// Default grace period of a pod that names none.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// Extra time a terminating pod gets beyond its grace period before the
/// drain reports it stuck (upstream: 30s).
pub const TERMINATION_SLACK: Duration = Duration::from_secs(30);

/// A pod in the drain's form. Pods whose metadata lacks a name or UID are
/// left out (they cannot be evicted by name anyway).
pub fn drain_pod(pod: &Pod) -> Option<DrainPod> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    Some(DrainPod {
        info: PodInfo {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone()?,
            mirror: annotation(meta, "kubernetes.io/config.mirror").is_some(),
            daemonset: meta
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.kind == "DaemonSet"),
            has_volumes: !pvc_names(pod).is_empty(),
            // A nil priority is 0 (upstream dereferenced it, weak point).
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
        },
        uid: meta.uid.clone()?,
        deleting_since: meta.deletion_timestamp.as_ref().map(to_chrono),
        grace: spec
            .and_then(|s| s.termination_grace_period_seconds)
            .and_then(|g| u64::try_from(g).ok())
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_GRACE),
    })
}

/// The PersistentVolumeClaims a pod mounts.
pub fn pvc_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v.persistent_volume_claim.as_ref())
                .map(|c| c.claim_name.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// What the drain remembers about one pod between rounds. Kept in memory:
/// after a restart the counts start over, which only makes that drain
/// slower, never wrong (the drain timeout still forces it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvictRecord {
    /// Evictions refused so far (429 or errors).
    pub attempts: u32,
    /// When eviction was last tried.
    pub last_attempt: Option<DateTime<Utc>>,
    /// When the eviction (or deletion) was accepted.
    pub evicted_at: Option<DateTime<Utc>>,
    /// Volume IDs to wait for after an accepted eviction (serial pods).
    pub volume_ids: Vec<String>,
    /// Grace period of the pod when it was evicted.
    pub grace: Duration,
}

/// What a drain round asks the executor to do to one pod, by UID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodAction {
    /// Evict through the eviction subresource.
    Evict(String),
    /// Delete with the pod's grace period: evictions were refused too often.
    Delete(String),
    /// Delete with grace 0 (forced drain).
    ForceDelete(String),
}

/// The outcome of one drain round.
#[derive(Clone, Debug, PartialEq)]
pub enum DrainRound {
    /// Nothing is left to evict or wait for.
    Done,
    /// Act on these pods, then look again after the duration (a forced
    /// drain is done once its deletions are issued; `done` says so).
    Act {
        actions: Vec<PodAction>,
        recheck: Duration,
        done: bool,
    },
    /// Wait for terminating pods or detaching volumes.
    Wait(Duration),
    /// A pod did not go away in time.
    Failed(String),
}

/// Whether a volume ID shows up among `node.status.volumesAttached` names,
/// which carry a prefix (`kubernetes.io/csi/<driver>^<id>`). Matched as a
/// suffix after a separator, not as a regex (upstream's unescaped regex is
/// a listed weak point).
pub fn volume_attached(attached: &[String], id: &str) -> bool {
    !id.is_empty()
        && attached
            .iter()
            .any(|a| a == id || a.ends_with(&format!("^{id}")) || a.ends_with(&format!("/{id}")))
}

/// One round of a level-triggered drain (spec §2.5): evict pods without
/// volumes all at once; pods with volumes one at a time, highest priority
/// first, each waiting until its volumes leave the node's
/// `volumesAttached` (at most grace + `pv_detach_timeout`); a pod refused
/// `max_retries` times is deleted instead, after one try per
/// [`EVICTION_RETRY_INTERVAL`]; a forced drain deletes everything with
/// grace 0 and waits for nothing. Unlike upstream, no round blocks: the
/// executor acts and comes back, so a long drain never pins a worker.
pub fn drain_round(
    pods: &[DrainPod],
    records: &HashMap<String, EvictRecord>,
    attached: &[String],
    force: bool,
    max_retries: u32,
    pv_detach_timeout: Duration,
    now: DateTime<Utc>,
) -> DrainRound {
    let infos: Vec<PodInfo> = pods.iter().map(|p| p.info.clone()).collect();
    let plan: DrainPlan = plan(&infos, force);
    let by_name = |i: &PodInfo| {
        pods.iter()
            .find(|p| p.info.name == i.name && p.info.namespace == i.namespace)
    };
    if force {
        let actions: Vec<PodAction> = plan
            .parallel
            .iter()
            .filter_map(by_name)
            .map(|p| PodAction::ForceDelete(p.uid.clone()))
            .collect();
        return if actions.is_empty() {
            DrainRound::Done
        } else {
            DrainRound::Act {
                actions,
                recheck: DELETION_POLL,
                done: true,
            }
        };
    }
    let elapsed = |t: DateTime<Utc>| (now - t).to_std().unwrap_or_default();
    let mut actions = Vec::new();
    let mut recheck = DELETION_POLL;
    let mut waiting = false;
    // Evicts (or, out of retries, deletes) one pod that is still there;
    // a terminating pod is waited for, and is an error once it is stuck.
    let handle = |p: &DrainPod,
                  actions: &mut Vec<PodAction>,
                  recheck: &mut Duration|
     -> Result<(), String> {
        if let Some(since) = p.deleting_since {
            if elapsed(since) > p.grace + TERMINATION_SLACK {
                return Err(format!(
                    "pod {}/{} did not terminate within {}",
                    p.info.namespace,
                    p.info.name,
                    format_duration(p.grace + TERMINATION_SLACK)
                ));
            }
            return Ok(());
        }
        let rec = records.get(&p.uid).cloned().unwrap_or_default();
        if rec.attempts >= max_retries {
            actions.push(PodAction::Delete(p.uid.clone()));
        } else {
            match rec.last_attempt.map(elapsed) {
                Some(e) if e < EVICTION_RETRY_INTERVAL => {
                    *recheck = (*recheck).max(EVICTION_RETRY_INTERVAL - e);
                }
                _ => actions.push(PodAction::Evict(p.uid.clone())),
            }
        }
        Ok(())
    };
    for i in &plan.parallel {
        if let Some(p) = by_name(i) {
            waiting = true;
            if let Err(e) = handle(p, &mut actions, &mut recheck) {
                return DrainRound::Failed(e);
            }
        }
    }
    // Serial pods: first wait for the volumes of pods already evicted.
    let present: BTreeSet<&str> = pods.iter().map(|p| p.uid.as_str()).collect();
    let detaching = records.iter().any(|(uid, r)| {
        !present.contains(uid.as_str())
            && r.evicted_at
                .is_some_and(|t| elapsed(t) < r.grace + pv_detach_timeout)
            && r.volume_ids.iter().any(|v| volume_attached(attached, v))
    });
    if detaching {
        waiting = true;
    } else if let Some(p) = plan.serial.first().and_then(by_name) {
        waiting = true;
        let rec = records.get(&p.uid);
        let evicted = rec.and_then(|r| r.evicted_at);
        if p.deleting_since.is_some() || evicted.is_some() {
            // Evicted and still there: wait for it, then for its volumes.
            if let Some(since) = p.deleting_since
                && elapsed(since) > p.grace + pv_detach_timeout + TERMINATION_SLACK
            {
                return DrainRound::Failed(format!(
                    "pod {}/{} with volumes did not terminate in time",
                    p.info.namespace, p.info.name
                ));
            }
        } else if let Err(e) = handle(p, &mut actions, &mut recheck) {
            return DrainRound::Failed(e);
        }
    }
    if !actions.is_empty() {
        DrainRound::Act {
            actions,
            recheck: DELETION_POLL,
            done: false,
        }
    } else if waiting {
        DrainRound::Wait(recheck)
    } else {
        DrainRound::Done
    }
}

/// A PodDisruptionBudget that can never allow an eviction: observed,
/// selecting pods, all of them healthy, none disrupted, and still zero
/// disruptions allowed. Evictions it refuses fail the drain at once instead
/// of being retried (spec §2.5).
pub fn pdb_misconfigured(pdb: &PodDisruptionBudget) -> bool {
    let Some(s) = pdb.status.as_ref() else {
        return false;
    };
    s.observed_generation.is_some()
        && s.observed_generation == pdb.metadata.generation
        && s.expected_pods > 0
        && s.current_healthy >= s.expected_pods
        && s.disrupted_pods.as_ref().is_none_or(|d| d.is_empty())
        && s.disruptions_allowed == 0
}

/// Whether a label selector (as in PodDisruptionBudgets) matches `labels`.
/// An empty selector matches everything (policy/v1 semantics); an operator
/// this code does not know matches nothing, the safe reading for a drain.
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let exact = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    exact
        && sel.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or(&[]);
            let have = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => have.is_some_and(|v| values.contains(v)),
                "NotIn" => have.is_none_or(|v| !values.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::test_support::{node, t};
    use crate::time::to_time;
    use api::testing::Fixture;
    use chrono::TimeZone;
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, volumes: bool, priority: i32) -> PodInfo {
        PodInfo {
            namespace: "default".into(),
            name: name.into(),
            mirror: false,
            daemonset: false,
            has_volumes: volumes,
            priority,
        }
    }

    #[test]
    fn plans() {
        let mut mirror = pod("mirror", false, 0);
        mirror.mirror = true;
        let mut ds = pod("ds", false, 0);
        ds.daemonset = true;
        let pods = vec![
            pod("web", false, 0),
            pod("db-low", true, 1),
            pod("db-high", true, 100),
            mirror,
            ds,
        ];
        let p = plan(&pods, false);
        assert_eq!(
            p.parallel
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>(),
            ["web"]
        );
        assert_eq!(
            p.serial.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["db-high", "db-low"]
        );
        let f = plan(&pods, true);
        assert_eq!(f.parallel.len(), 3);
        assert!(f.serial.is_empty());
    }

    #[test]
    fn retries_fit_the_timeout() {
        assert_eq!(max_evict_retries(360, Duration::from_secs(2 * 3600)), 360);
        assert_eq!(max_evict_retries(360, Duration::from_secs(600)), 30);
        assert_eq!(max_evict_retries(360, Duration::from_secs(5)), 1);
        assert_eq!(max_evict_retries(3, Duration::from_secs(600)), 3);
    }

    #[test]
    fn force_reasons() {
        let t = |s: i64| Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap();
        let base = ForceInput {
            force_label: false,
            deletion_started: t(0),
            drain_timeout: Duration::from_secs(600),
            not_ready_since: None,
            readonly_since: None,
        };
        assert_eq!(force_reason(&base, t(100)), None);
        assert_eq!(force_reason(&base, t(601)), Some(ForceReason::DrainTimeout));
        let label = ForceInput {
            force_label: true,
            ..base.clone()
        };
        assert_eq!(force_reason(&label, t(0)), Some(ForceReason::Label));
        let nr = ForceInput {
            not_ready_since: Some(t(0)),
            ..base.clone()
        };
        assert_eq!(force_reason(&nr, t(299)), None);
        assert_eq!(force_reason(&nr, t(301)), Some(ForceReason::NotReady));
        let ro = ForceInput {
            readonly_since: Some(t(0)),
            ..base
        };
        assert_eq!(
            force_reason(&ro, t(301)),
            Some(ForceReason::ReadonlyFilesystem)
        );
    }

    #[test]
    fn force_inputs_from_labels_and_conditions() {
        let mut m = Machine::test("m1").label(labels::FORCE_DELETION, "True");
        m.metadata.deletion_timestamp = Some(to_time(t(10)));
        let n = node(&[("Ready", "Unknown"), ("ReadonlyFilesystem", "False")]);
        let f = force_input(&m, &n, &Settings::default());
        assert!(f.force_label);
        assert_eq!(f.deletion_started, t(10));
        assert_eq!(f.not_ready_since, Some(t(0)));
        assert_eq!(f.readonly_since, None);
        for (v, want) in [
            ("1", true),
            ("true", true),
            ("yes", false),
            ("False", false),
        ] {
            assert_eq!(parse_bool(v), want, "{v}");
        }
    }

    fn dpod(name: &str, volumes: bool, priority: i32) -> DrainPod {
        DrainPod {
            info: PodInfo {
                namespace: "default".into(),
                name: name.into(),
                mirror: false,
                daemonset: false,
                has_volumes: volumes,
                priority,
            },
            uid: format!("uid-{name}"),
            deleting_since: None,
            grace: Duration::from_secs(30),
        }
    }

    #[test]
    fn drain_rounds() {
        let none = HashMap::new();
        let d = Duration::from_secs(120);
        let uid = |n: &str| format!("uid-{n}");
        // Nothing on the node.
        assert_eq!(
            drain_round(&[], &none, &[], false, 5, d, t(0)),
            DrainRound::Done
        );
        // Stateless pods together, the higher-priority volume pod first.
        let pods = vec![
            dpod("web", false, 0),
            dpod("db-low", true, 1),
            dpod("db-high", true, 9),
        ];
        assert_eq!(
            drain_round(&pods, &none, &[], false, 5, d, t(0)),
            DrainRound::Act {
                actions: vec![
                    PodAction::Evict(uid("web")),
                    PodAction::Evict(uid("db-high"))
                ],
                recheck: DELETION_POLL,
                done: false
            }
        );
        // Refused 10s ago: wait out the retry interval.
        let refused = HashMap::from([(
            uid("web"),
            EvictRecord {
                attempts: 1,
                last_attempt: Some(t(0)),
                ..EvictRecord::default()
            },
        )]);
        assert_eq!(
            drain_round(&pods[..1], &refused, &[], false, 5, d, t(10)),
            DrainRound::Wait(Duration::from_secs(10))
        );
        assert_eq!(
            drain_round(&pods[..1], &refused, &[], false, 5, d, t(20)),
            DrainRound::Act {
                actions: vec![PodAction::Evict(uid("web"))],
                recheck: DELETION_POLL,
                done: false
            }
        );
        // Out of retries: deleted.
        assert_eq!(
            drain_round(&pods[..1], &refused, &[], false, 1, d, t(20)),
            DrainRound::Act {
                actions: vec![PodAction::Delete(uid("web"))],
                recheck: DELETION_POLL,
                done: false
            }
        );
        // db-high evicted and gone, its volume still attached: db-low waits.
        let evicted = HashMap::from([(
            uid("db-high"),
            EvictRecord {
                evicted_at: Some(t(0)),
                volume_ids: vec!["vol-1".into()],
                grace: Duration::from_secs(30),
                ..EvictRecord::default()
            },
        )]);
        let attached = vec!["kubernetes.io/csi/local^vol-1".to_string()];
        let rest = vec![dpod("db-low", true, 1)];
        assert_eq!(
            drain_round(&rest, &evicted, &attached, false, 5, d, t(5)),
            DrainRound::Wait(DELETION_POLL)
        );
        // Detached, or the detach timeout passed: next.
        for (attached, now) in [(vec![], 5), (attached.clone(), 151)] {
            assert_eq!(
                drain_round(&rest, &evicted, &attached, false, 5, d, t(now)),
                DrainRound::Act {
                    actions: vec![PodAction::Evict(uid("db-low"))],
                    recheck: DELETION_POLL,
                    done: false
                }
            );
        }
        // A terminating pod is waited for, until it is stuck.
        let mut term = dpod("web", false, 0);
        term.deleting_since = Some(t(0));
        assert_eq!(
            drain_round(std::slice::from_ref(&term), &none, &[], false, 5, d, t(30)),
            DrainRound::Wait(DELETION_POLL)
        );
        assert!(matches!(
            drain_round(&[term], &none, &[], false, 5, d, t(61)),
            DrainRound::Failed(_)
        ));
        // Forced: everything deleted with grace 0, nothing waited for;
        // DaemonSet and mirror pods stay.
        let mut ds = dpod("ds", false, 0);
        ds.info.daemonset = true;
        let mut all = pods.clone();
        all.push(ds.clone());
        match drain_round(&all, &none, &attached, true, 5, d, t(0)) {
            DrainRound::Act { actions, done, .. } => {
                assert!(done);
                assert_eq!(actions.len(), 3);
                assert!(
                    actions
                        .iter()
                        .all(|a| matches!(a, PodAction::ForceDelete(_)))
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            drain_round(&[ds], &none, &[], false, 5, d, t(0)),
            DrainRound::Done
        );
    }

    #[test]
    fn volume_matching() {
        let attached = vec![
            "kubernetes.io/csi/ebs^vol-12".to_string(),
            "kubernetes.io/host-path//data/x".to_string(),
        ];
        for (id, want) in [
            ("vol-12", true),
            ("vol-1", false),
            ("/data/x", true),
            ("vol.12", false),
            ("", false),
        ] {
            assert_eq!(volume_attached(&attached, id), want, "{id}");
        }
    }

    #[test]
    fn misconfigured_pdbs() {
        let pdb = |gen_seen: i64, expected: i32, healthy: i32, allowed: i32| PodDisruptionBudget {
            metadata: ObjectMeta {
                generation: Some(2),
                ..ObjectMeta::default()
            },
            status: Some(PodDisruptionBudgetStatus {
                observed_generation: Some(gen_seen),
                expected_pods: expected,
                current_healthy: healthy,
                desired_healthy: expected,
                disruptions_allowed: allowed,
                ..PodDisruptionBudgetStatus::default()
            }),
            ..PodDisruptionBudget::default()
        };
        assert!(pdb_misconfigured(&pdb(2, 3, 3, 0)));
        assert!(!pdb_misconfigured(&pdb(1, 3, 3, 0)), "not observed yet");
        assert!(!pdb_misconfigured(&pdb(2, 3, 2, 0)), "a pod is unhealthy");
        assert!(!pdb_misconfigured(&pdb(2, 0, 0, 0)), "selects nothing");
        assert!(!pdb_misconfigured(&pdb(2, 3, 3, 1)), "allows one");
    }

    #[test]
    fn selectors() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let labels = BTreeMap::from([("app".to_string(), "db".to_string())]);
        let req = |op: &str, values: &[&str]| LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: op.into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
        };
        assert!(selector_matches(&LabelSelector::default(), &labels));
        let exact = LabelSelector {
            match_labels: Some(labels.clone()),
            match_expressions: None,
        };
        assert!(selector_matches(&exact, &labels));
        assert!(!selector_matches(&exact, &BTreeMap::new()));
        for (op, values, want) in [
            ("In", &["db", "web"][..], true),
            ("In", &["web"][..], false),
            ("NotIn", &["web"][..], true),
            ("Exists", &[][..], true),
            ("DoesNotExist", &[][..], false),
            ("Bogus", &[][..], false),
        ] {
            assert_eq!(selector_matches(&req(op, values), &labels), want, "{op}");
        }
    }

    #[test]
    fn drain_pods_from_api_pods() {
        use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, PodSpec, Volume};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let mut pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                owner_references: Some(vec![OwnerReference {
                    kind: "DaemonSet".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                volumes: Some(vec![Volume {
                    name: "v".into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: "c".into(),
                        read_only: None,
                    }),
                    ..Volume::default()
                }]),
                termination_grace_period_seconds: Some(5),
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let d = drain_pod(&pod).unwrap();
        assert!(d.info.daemonset && d.info.has_volumes);
        assert_eq!(d.info.priority, 0);
        assert_eq!(d.grace, Duration::from_secs(5));
        assert_eq!(pvc_names(&pod), ["c"]);
        pod.metadata.uid = None;
        assert_eq!(drain_pod(&pod), None);
    }
}
