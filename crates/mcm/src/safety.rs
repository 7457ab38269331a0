//! The safety controller's decisions (spec §5), as pure functions of
//! observed objects and the clock; `controllers::safety` executes them.
//!
//! - Orphan VMs: which VMs a provider lists that no machine owns
//!   ([`is_orphan_vm`]), and which Nodes have no machine ([`node_action`]).
//! - Overshooting: the replica bounds of a machine set ([`bounds`]) and the
//!   freeze state of every set and deployment ([`plan_overshoot`]).
//! - API server: when an unreachable API server freezes the machine
//!   controller ([`ApiServerHealth`]), and how a machine's health clock is
//!   carried over an outage ([`health_clock_after_outage`]).
//!
//! Where upstream has known weak points (spec §8.2, §8.3, §8.14, §8.18) the
//! rules here differ on purpose; each function says how.

use std::collections::BTreeMap;
use std::time::Duration;

use api::{
    ConditionStatus, Machine, MachineDeployment, MachineDeploymentConditionType,
    MachineDeploymentStrategyType as Strategy, MachinePhase, MachineSet, MachineSetConditionType,
    labels, machine_deployment_reasons as reasons,
};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::rollout::IntOrPercent;
use crate::time::to_chrono;

// --- Orphan VMs ---------------------------------------------------------------

/// Whether the VM `provider_id`, listed by the provider for the machine
/// name it was created for, is an orphan given the machine of that name
/// (`None`: no such machine).
///
/// A VM is kept when its machine exists and names it, or names no VM yet
/// and is still being created (phase ""/`CrashLoopBackOff`): the creation
/// flow asks the provider before creating, so it adopts this VM. Otherwise
/// the VM backs nothing — its machine is gone, or the machine runs on
/// another VM and this one is a duplicate.
///
/// The executor asks this twice: of the cached machine, to pick candidates
/// cheaply, and of a machine read live right before deleting, because a
/// cache that lags is no proof that a machine is missing (spec §8.2).
pub fn is_orphan_vm(provider_id: &str, machine: Option<&Machine>) -> bool {
    let Some(m) = machine else {
        return true;
    };
    if m.spec.provider_id == provider_id {
        return false;
    }
    !matches!(m.phase(), None | Some(MachinePhase::CrashLoopBackOff))
}

/// What the orphan pass does with a Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeAction {
    /// No machine maps to the node: drop the node finalizer (so the node
    /// can be deleted without a machine to clean up after it) and annotate
    /// it `not-managed-by-mcm=1`, which the machine controller leaves alone.
    Disown,
    /// A machine maps to a node marked not managed: remove the mark, so the
    /// machine controller manages it (and adds its finalizer) again.
    Reclaim,
}

fn has_annotation(meta: &ObjectMeta, key: &str, value: &str) -> bool {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .is_some_and(|v| v == value)
}

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == finalizer)
}

/// The action for `node`, given whether some machine maps to it (its
/// `node` label names the node, or the node's machine-name label names the
/// machine). A node without a machine is disowned only once it is older
/// than the creation timeout: a new VM registers its node before the
/// creation flow has labelled the machine.
pub fn node_action(
    node: &Node,
    mapped: bool,
    creation_timeout: Duration,
    now: DateTime<Utc>,
) -> Option<NodeAction> {
    let meta = &node.metadata;
    let marked = has_annotation(meta, labels::NOT_MANAGED_BY_MCM, "1");
    if mapped {
        return marked.then_some(NodeAction::Reclaim);
    }
    if meta.deletion_timestamp.is_some() {
        return None;
    }
    let created = meta.creation_timestamp.as_ref().map(to_chrono)?;
    let old = (now - created).to_std().unwrap_or_default() > creation_timeout;
    let done = marked && !has_finalizer(meta, labels::NODE_FINALIZER);
    (old && !done).then_some(NodeAction::Disown)
}

// --- Overshooting -------------------------------------------------------------

/// A set's machine count at or above `upper` freezes it; at or below
/// `lower` unfreezes it; in between nothing changes, so a count hovering at
/// one bound does not flap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub upper: i64,
    pub lower: i64,
}

/// `maxSurge` of the deployment's strategy, resolved against its replicas
/// and rounded up; Recreate never surges. A missing value counts as 1, the
/// rolling-update default, so an object admitted without one is not frozen
/// for a surge it is allowed.
fn max_surge(md: &MachineDeployment) -> i64 {
    let replicas = i64::from(md.spec.replicas.max(0));
    let strategy = &md.spec.strategy;
    let surge = match strategy.type_.unwrap_or(Strategy::RollingUpdate) {
        Strategy::Recreate => return 0,
        Strategy::RollingUpdate => strategy
            .rolling_update
            .as_ref()
            .and_then(|r| r.max_surge.as_ref()),
        Strategy::InPlaceUpdate => strategy
            .in_place_update
            .as_ref()
            .and_then(|r| r.max_surge.as_ref()),
    };
    surge
        .and_then(IntOrPercent::from_int_or_string)
        .unwrap_or(IntOrPercent::Int(1))
        .scaled(replicas, true)
        .max(0)
}

/// The bounds of `set`: its deployment's replicas plus surge plus
/// `safety_up`, or — for a set without a deployment — twice its replicas
/// plus `safety_up`; the lower bound is `safety_down` below the upper.
pub fn bounds(
    set: &MachineSet,
    md: Option<&MachineDeployment>,
    safety_up: i64,
    safety_down: i64,
) -> Bounds {
    let upper = match md {
        Some(md) => i64::from(md.spec.replicas.max(0)) + max_surge(md) + safety_up,
        None => 2 * i64::from(set.spec.replicas.max(0)) + safety_up,
    };
    Bounds {
        upper,
        lower: upper - safety_down,
    }
}

/// The machines that count against a set: labelled with its template's
/// labels and naming it in any owner reference (not only the controller
/// one, so machines the set does not manage still count).
///
/// Unlike upstream, machines being deleted do not count: they are leaving,
/// and counting them froze a set during every large scale-down (its
/// terminating machines can take the drain timeout to go), which then
/// blocked a scale-up that followed.
pub fn counted_machines(set: &MachineSet, machines: &[&Machine]) -> i64 {
    let uid = set.metadata.uid.as_deref().unwrap_or_default();
    let want = set
        .spec
        .template
        .metadata
        .labels
        .clone()
        .unwrap_or_default();
    machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .filter(|m| {
            m.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid)
        })
        .filter(|m| {
            let have = m.metadata.labels.as_ref();
            want.iter()
                .all(|(k, v)| have.and_then(|l| l.get(k)) == Some(v))
        })
        .count() as i64
}

/// Whether the object carries the `freeze=True` label (what the machine set
/// controller obeys).
pub fn freeze_label(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(labels::FREEZE))
        .is_some_and(|v| v == labels::TRUE)
}

fn unfreeze_requested(meta: &ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(labels::UNFREEZE))
}

fn set_condition_frozen(set: &MachineSet) -> bool {
    set.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == MachineSetConditionType::Frozen && c.status == ConditionStatus::True
        })
    })
}

fn md_condition_frozen(md: &MachineDeployment) -> bool {
    md.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == MachineDeploymentConditionType::Frozen && c.status == ConditionStatus::True
        })
    })
}

/// Reason of a forced unfreeze (the unfreeze annotation); trellis's own
/// string, since upstream records none.
pub const UNFREEZE_ANNOTATION_REASON: &str = "UnfreezeAnnotation";

/// The freeze state one set or deployment should have, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreezeChange {
    pub name: String,
    /// Frozen (label `freeze=True` and condition `Frozen` True) or not
    /// (neither).
    pub frozen: bool,
    /// `OverShootingReplicaCount`, `UnderShootingReplicaCount`,
    /// `MachineDeploymentStateSync` or [`UNFREEZE_ANNOTATION_REASON`].
    pub reason: &'static str,
    pub message: String,
    /// Remove the unfreeze annotation (it was honoured).
    pub clear_unfreeze: bool,
}

/// Every change of one overshooting pass. Upstream acts on the first set it
/// finds per pass (spec §8.18); this covers every set and deployment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OvershootPlan {
    pub sets: Vec<FreezeChange>,
    pub deployments: Vec<FreezeChange>,
}

fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == "MachineDeployment")
        .map(|o| o.uid.as_str())
}

/// The overshooting pass over all sets, deployments and machines of a
/// namespace. Per set: an unfreeze annotation (its own or its deployment's)
/// unfreezes; else a count at or above the upper bound freezes; at or below
/// the lower bound unfreezes; in between the set keeps its state. A
/// deployment is frozen exactly when one of its sets is (reason
/// `OverShootingReplicaCount` when a set froze in this pass,
/// `UnderShootingReplicaCount` when its last frozen set thawed in this pass,
/// `MachineDeploymentStateSync` when it only disagreed with its sets).
/// Changes are listed only where the label, condition or annotation differ
/// from what the object carries; sets and deployments being deleted are
/// left alone.
pub fn plan_overshoot(
    sets: &[&MachineSet],
    mds: &[&MachineDeployment],
    machines: &[&Machine],
    safety_up: i64,
    safety_down: i64,
) -> OvershootPlan {
    let md_by_uid: BTreeMap<&str, &MachineDeployment> = mds
        .iter()
        .filter_map(|md| md.metadata.uid.as_deref().map(|u| (u, *md)))
        .collect();
    let mut plan = OvershootPlan::default();
    // Per deployment uid: (any set frozen after this pass, a set froze in
    // this pass, a set thawed in this pass).
    let mut md_sets: BTreeMap<&str, (bool, bool, bool)> = BTreeMap::new();
    for set in sets {
        let name = set.metadata.name.clone().unwrap_or_default();
        let md = controller_uid(&set.metadata).and_then(|u| md_by_uid.get(u).copied());
        let was = freeze_label(&set.metadata);
        let count = counted_machines(set, machines);
        let b = bounds(set, md, safety_up, safety_down);
        let forced = unfreeze_requested(&set.metadata)
            || md.is_some_and(|md| unfreeze_requested(&md.metadata));
        let deleting = set.metadata.deletion_timestamp.is_some();
        let (frozen, reason, message) = if deleting {
            (was, "", String::new())
        } else if forced {
            (
                false,
                UNFREEZE_ANNOTATION_REASON,
                format!("Unfrozen on request ({} annotation)", labels::UNFREEZE),
            )
        } else if count >= b.upper {
            (
                true,
                reasons::OVERSHOOTING_REPLICA_COUNT,
                format!(
                    "MachineSet {name} has {count} machines, at or above the limit of {}",
                    b.upper
                ),
            )
        } else if count <= b.lower {
            (
                false,
                reasons::UNDERSHOOTING_REPLICA_COUNT,
                format!(
                    "MachineSet {name} has {count} machines, at or below {}",
                    b.lower
                ),
            )
        } else {
            (was, "", String::new())
        };
        let clear_unfreeze = !deleting && unfreeze_requested(&set.metadata);
        let differs = frozen != was || frozen != set_condition_frozen(set);
        if !deleting && (differs || clear_unfreeze) {
            plan.sets.push(FreezeChange {
                name,
                frozen,
                reason,
                message: message.clone(),
                clear_unfreeze,
            });
        }
        if let Some(md_uid) = md.and_then(|m| m.metadata.uid.as_deref()) {
            let e = md_sets.entry(md_uid).or_default();
            e.0 |= frozen;
            e.1 |= frozen && !was;
            e.2 |= !frozen && was;
        }
    }
    for md in mds {
        if md.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let uid = md.metadata.uid.as_deref().unwrap_or_default();
        let name = md.metadata.name.clone().unwrap_or_default();
        let (frozen, froze, thawed) = md_sets.get(uid).copied().unwrap_or_default();
        let clear_unfreeze = unfreeze_requested(&md.metadata);
        let was = freeze_label(&md.metadata);
        let differs = frozen != was || frozen != md_condition_frozen(md);
        if !differs && !clear_unfreeze {
            continue;
        }
        let (reason, message) = if clear_unfreeze && !frozen {
            (
                UNFREEZE_ANNOTATION_REASON,
                format!("Unfrozen on request ({} annotation)", labels::UNFREEZE),
            )
        } else if frozen && froze {
            (
                reasons::OVERSHOOTING_REPLICA_COUNT,
                "A MachineSet of the deployment owns too many machines".to_string(),
            )
        } else if !frozen && thawed {
            (
                reasons::UNDERSHOOTING_REPLICA_COUNT,
                "The deployment's MachineSets are back within their limits".to_string(),
            )
        } else {
            (
                reasons::MACHINE_DEPLOYMENT_STATE_SYNC,
                format!(
                    "Made consistent with its MachineSets ({})",
                    if frozen {
                        "one is frozen"
                    } else {
                        "none is frozen"
                    }
                ),
            )
        };
        plan.deployments.push(FreezeChange {
            name,
            frozen,
            reason,
            message,
            clear_unfreeze,
        });
    }
    plan
}

// --- API server ---------------------------------------------------------------

/// A stretch of time during which the API servers could not be relied on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outage {
    /// The last successful probe before the outage (or the first failed
    /// one, when none had succeeded): the earliest the outage can have
    /// begun, so the window errs on the side of not failing machines.
    pub since: DateTime<Utc>,
    /// The first successful probe after it.
    pub until: DateTime<Utc>,
}

/// What a probe result changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeChange {
    None,
    /// Down for longer than the timeout: freeze the machine controller.
    Freeze,
    /// Reachable again after a freeze: run the recovery, then call
    /// [`ApiServerHealth::recovered`] (until then the state stays frozen, so
    /// a recovery that fails is attempted again on the next good probe).
    Recover(Outage),
}

/// The API-server safety state machine, fed one probe result at a time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiServerHealth {
    last_ok: Option<DateTime<Utc>>,
    /// The first failed probe of the current failure streak.
    failing_since: Option<DateTime<Utc>>,
    /// Start of the outage window of the current failure streak.
    outage_since: Option<DateTime<Utc>>,
    frozen: bool,
}

impl ApiServerHealth {
    /// Takes one probe result (`ok`: both API servers answered). The
    /// freeze comes once probes have failed for longer than `timeout`,
    /// counted from the first failure, as upstream does.
    pub fn observe(&mut self, ok: bool, now: DateTime<Utc>, timeout: Duration) -> ProbeChange {
        if ok {
            if self.frozen {
                return ProbeChange::Recover(Outage {
                    since: self.outage_since.unwrap_or(now),
                    until: now,
                });
            }
            self.last_ok = Some(now);
            self.failing_since = None;
            self.outage_since = None;
            return ProbeChange::None;
        }
        let first = *self.failing_since.get_or_insert(now);
        if self.outage_since.is_none() {
            self.outage_since = Some(self.last_ok.unwrap_or(now));
        }
        let down_for = (now - first).to_std().unwrap_or_default();
        if !self.frozen && down_for > timeout {
            self.frozen = true;
            return ProbeChange::Freeze;
        }
        ProbeChange::None
    }

    /// The recovery after [`ProbeChange::Recover`] is done: unfreeze.
    pub fn recovered(&mut self, now: DateTime<Utc>) {
        *self = ApiServerHealth {
            last_ok: Some(now),
            ..ApiServerHealth::default()
        };
    }

    pub fn frozen(&self) -> bool {
        self.frozen
    }
}

/// Where the health-timeout clock (`currentStatus.lastUpdateTime`) of an
/// `Unknown` machine should stand after `outage`.
///
/// Upstream sets every `Unknown` machine `Running` on recovery, whatever
/// its node says. Here the clock only stops for the outage: time the
/// controller could not observe does not count toward the health timeout.
/// A machine that went `Unknown` before the outage keeps what it had used
/// up before it; one that went `Unknown` during it starts counting at the
/// recovery. The machine's phase is then decided again from its node as it
/// is now — a healthy node makes it `Running` at once — so nothing is reset
/// without being observed.
pub fn health_clock_after_outage(since: DateTime<Utc>, outage: &Outage) -> DateTime<Utc> {
    if since < outage.since {
        since + (outage.until - outage.since)
    } else {
        since.max(outage.until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::to_time;
    use api::testing::Fixture;
    use api::{MachineDeploymentCondition, MachineSetCondition, MachineSetStatus};
    use chrono::TimeZone;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    #[test]
    fn orphan_vms() {
        use MachinePhase::*;
        let pid = "local:///z/vm1";
        let m = |phase: Option<MachinePhase>, id: &str| {
            let m = Machine::test("m").provider_id(id);
            match phase {
                Some(p) => m.with_phase(p),
                None => m,
            }
        };
        let cases: &[(&str, Option<Machine>, bool)] = &[
            ("no machine of that name", None, true),
            (
                "the machine names the VM",
                Some(m(Some(Running), pid)),
                false,
            ),
            ("a new machine adopts it", Some(m(None, "")), false),
            (
                "a crash-looping machine adopts it",
                Some(m(Some(CrashLoopBackOff), "")),
                false,
            ),
            (
                "the machine runs on another VM",
                Some(m(Some(Running), "local:///z/vm2")),
                true,
            ),
            (
                "a pending machine with another VM",
                Some(m(Some(Pending), "local:///z/vm2")),
                true,
            ),
            (
                "a failed machine without a VM",
                Some(m(Some(Failed), "")),
                true,
            ),
        ];
        for (what, machine, want) in cases {
            assert_eq!(is_orphan_vm(pid, machine.as_ref()), *want, "{what}");
        }
    }

    fn node(marked: bool, finalizer: bool) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("n1".into());
        n.metadata.creation_timestamp = Some(to_time(t(0)));
        if marked {
            n = n.annotation(labels::NOT_MANAGED_BY_MCM, "1");
        }
        if finalizer {
            n = n.finalizer(labels::NODE_FINALIZER);
        }
        n
    }

    #[test]
    fn orphan_nodes() {
        let timeout = Duration::from_secs(60);
        // (what, mapped, marked, finalizer, now, action)
        type Case = (&'static str, bool, bool, bool, i64, Option<NodeAction>);
        let cases: &[Case] = &[
            ("young unmapped node", false, false, true, 30, None),
            (
                "old unmapped node",
                false,
                false,
                true,
                61,
                Some(NodeAction::Disown),
            ),
            (
                "marked but still with finalizer",
                false,
                true,
                true,
                61,
                Some(NodeAction::Disown),
            ),
            ("already disowned", false, true, false, 600, None),
            ("mapped node", true, false, true, 600, None),
            (
                "mapped again after disowning",
                true,
                true,
                false,
                600,
                Some(NodeAction::Reclaim),
            ),
        ];
        for (what, mapped, marked, fin, now, want) in cases {
            let n = node(*marked, *fin);
            assert_eq!(node_action(&n, *mapped, timeout, t(*now)), *want, "{what}");
        }
        let mut deleting = node(false, true);
        deleting.metadata.deletion_timestamp = Some(to_time(t(1)));
        assert_eq!(node_action(&deleting, false, timeout, t(600)), None);
    }

    fn md(replicas: i32) -> MachineDeployment {
        MachineDeployment::test("web")
            .replicas(replicas)
            .with_uid("md-uid")
    }

    fn set_of(md: &MachineDeployment, name: &str, replicas: i32) -> MachineSet {
        let mut s = MachineSet::test("web").replicas(replicas).with_uid(name);
        s.metadata.name = Some(name.into());
        s.metadata.owner_references = Some(vec![OwnerReference {
            api_version: api::GROUP_VERSION.into(),
            kind: "MachineDeployment".into(),
            name: md.metadata.name.clone().unwrap(),
            uid: md.metadata.uid.clone().unwrap(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        s
    }

    fn machines(set: &MachineSet, n: usize) -> Vec<Machine> {
        (0..n)
            .map(|i| Machine::test(&format!("m{i}")).owned_by(set))
            .collect()
    }

    #[test]
    fn bounds_follow_the_strategy() {
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        let d = md(10);
        let s = set_of(&d, "ms", 10);
        let cases: Vec<(&str, MachineDeployment, Option<Bounds>)> = vec![
            ("rolling, surge 1", d.clone(), None),
            (
                "rolling, surge 25% of 10 rounds up",
                d.clone().rolling("25%", "0"),
                Some(Bounds {
                    upper: 10 + 3 + 2,
                    lower: 14,
                }),
            ),
            (
                "recreate never surges",
                d.clone().recreate(),
                Some(Bounds {
                    upper: 12,
                    lower: 11,
                }),
            ),
            (
                "in place, surge 2",
                {
                    let mut x = d.clone();
                    x.spec.strategy.type_ = Some(Strategy::InPlaceUpdate);
                    x.spec.strategy.in_place_update = Some(api::InPlaceUpdateMachineDeployment {
                        max_surge: Some(IntOrString::Int(2)),
                        ..Default::default()
                    });
                    x
                },
                Some(Bounds {
                    upper: 14,
                    lower: 13,
                }),
            ),
        ];
        for (what, d, want) in cases {
            let want = want.unwrap_or(Bounds {
                upper: 13,
                lower: 12,
            });
            assert_eq!(bounds(&s, Some(&d), 2, 1), want, "{what}");
        }
        assert_eq!(
            bounds(&s, None, 2, 1),
            Bounds {
                upper: 22,
                lower: 21
            },
            "without a deployment: twice the set's replicas"
        );
    }

    #[test]
    fn counts_owned_labelled_live_machines() {
        let d = md(2);
        let s = set_of(&d, "ms", 2);
        let mut ms = machines(&s, 3);
        // Another set's machine, one without the template labels, and one
        // being deleted do not count.
        ms.push(Machine::test("other").owned_by(&set_of(&d, "ms2", 1)));
        let mut unlabelled = Machine::test("bare").owned_by(&s);
        unlabelled.metadata.labels = None;
        ms.push(unlabelled);
        let mut leaving = Machine::test("leaving").owned_by(&s);
        leaving.metadata.deletion_timestamp = Some(to_time(t(0)));
        ms.push(leaving);
        let refs: Vec<&Machine> = ms.iter().collect();
        assert_eq!(counted_machines(&s, &refs), 3);
    }

    fn frozen_set(mut s: MachineSet) -> MachineSet {
        s = s.label(labels::FREEZE, labels::TRUE);
        s.status = Some(MachineSetStatus {
            conditions: vec![MachineSetCondition {
                type_: MachineSetConditionType::Frozen,
                status: ConditionStatus::True,
                last_transition_time: None,
                reason: reasons::OVERSHOOTING_REPLICA_COUNT.into(),
                message: String::new(),
            }],
            ..Default::default()
        });
        s
    }

    fn frozen_md(mut d: MachineDeployment) -> MachineDeployment {
        d = d.label(labels::FREEZE, labels::TRUE);
        d.status.get_or_insert_default().conditions = vec![MachineDeploymentCondition {
            type_: MachineDeploymentConditionType::Frozen,
            status: ConditionStatus::True,
            last_update_time: None,
            last_transition_time: None,
            reason: reasons::OVERSHOOTING_REPLICA_COUNT.into(),
            message: String::new(),
        }];
        d
    }

    /// (frozen?, reason) of each change.
    type Changes<'a> = Vec<(bool, &'a str)>;

    /// The set changes and the deployment changes of a plan.
    fn summary(p: &OvershootPlan) -> (Changes<'_>, Changes<'_>) {
        (
            p.sets.iter().map(|c| (c.frozen, c.reason)).collect(),
            p.deployments.iter().map(|c| (c.frozen, c.reason)).collect(),
        )
    }

    #[test]
    fn overshooting_freezes_and_unfreezes_with_hysteresis() {
        use reasons::*;
        // md 1 replica, surge 1, safety up 2 / down 1: upper 4, lower 3.
        let d = md(1);
        let s = set_of(&d, "ms", 1);
        type Case<'a> = (&'a str, bool, bool, usize, (Changes<'a>, Changes<'a>));
        let cases: Vec<Case> = vec![
            // (what, set frozen, md frozen, machines, expected changes)
            ("within bounds", false, false, 2, (vec![], vec![])),
            (
                "at the upper bound",
                false,
                false,
                4,
                (
                    vec![(true, OVERSHOOTING_REPLICA_COUNT)],
                    vec![(true, OVERSHOOTING_REPLICA_COUNT)],
                ),
            ),
            ("frozen, between bounds", true, true, 4, (vec![], vec![])),
            (
                "frozen, down to the lower bound",
                true,
                true,
                3,
                (
                    vec![(false, UNDERSHOOTING_REPLICA_COUNT)],
                    vec![(false, UNDERSHOOTING_REPLICA_COUNT)],
                ),
            ),
            (
                "set frozen, deployment not",
                true,
                false,
                5,
                (vec![], vec![(true, MACHINE_DEPLOYMENT_STATE_SYNC)]),
            ),
            (
                "deployment frozen, set not",
                false,
                true,
                2,
                (vec![], vec![(false, MACHINE_DEPLOYMENT_STATE_SYNC)]),
            ),
        ];
        for (what, set_frozen, md_frozen, n, want) in cases {
            let s = if set_frozen {
                frozen_set(s.clone())
            } else {
                s.clone()
            };
            let d = if md_frozen {
                frozen_md(d.clone())
            } else {
                d.clone()
            };
            let ms = machines(&s, n);
            let refs: Vec<&Machine> = ms.iter().collect();
            let p = plan_overshoot(&[&s], &[&d], &refs, 2, 1);
            assert_eq!(summary(&p), want, "{what}");
        }
    }

    #[test]
    fn every_overshooting_set_is_frozen_in_one_pass() {
        let d = md(1);
        let a = set_of(&d, "a", 1);
        let b = set_of(&d, "b", 1);
        let loose = MachineSet::test("loose").replicas(1).with_uid("loose");
        let mut ms = machines(&a, 4);
        ms.extend(machines(&b, 4));
        ms.extend(machines(&loose, 4)); // 2×1 + 2 = 4: frozen too
        let refs: Vec<&Machine> = ms.iter().collect();
        let p = plan_overshoot(&[&a, &b, &loose], &[&d], &refs, 2, 1);
        let names: Vec<&str> = p.sets.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "loose"]);
        assert!(p.sets.iter().all(|c| c.frozen));
        assert_eq!(p.deployments.len(), 1);
    }

    #[test]
    fn unfreeze_annotations_force_an_unfreeze() {
        let d = md(1);
        let s = frozen_set(set_of(&d, "ms", 1)).annotation(labels::UNFREEZE, "true");
        let ms = machines(&s, 9);
        let refs: Vec<&Machine> = ms.iter().collect();
        let p = plan_overshoot(&[&s], &[&frozen_md(d.clone())], &refs, 2, 1);
        assert_eq!(p.sets.len(), 1);
        assert!(!p.sets[0].frozen && p.sets[0].clear_unfreeze);
        assert_eq!(p.sets[0].reason, UNFREEZE_ANNOTATION_REASON);
        assert!(!p.deployments[0].frozen);

        // The deployment's annotation thaws its sets and is removed.
        let s = frozen_set(set_of(&d, "ms", 1));
        let dm = frozen_md(d).annotation(labels::UNFREEZE, "true");
        let p = plan_overshoot(&[&s], &[&dm], &refs, 2, 1);
        assert!(!p.sets[0].frozen && !p.sets[0].clear_unfreeze);
        assert!(!p.deployments[0].frozen && p.deployments[0].clear_unfreeze);
        assert_eq!(p.deployments[0].reason, UNFREEZE_ANNOTATION_REASON);
    }

    #[test]
    fn a_label_without_its_condition_is_repaired() {
        let d = md(1);
        let s = set_of(&d, "ms", 1).label(labels::FREEZE, labels::TRUE);
        let ms = machines(&s, 4);
        let refs: Vec<&Machine> = ms.iter().collect();
        let p = plan_overshoot(&[&s], &[&frozen_md(d)], &refs, 2, 1);
        assert_eq!(summary(&p).0, [(true, reasons::OVERSHOOTING_REPLICA_COUNT)]);
        assert!(p.deployments.is_empty());
    }

    #[test]
    fn deleting_sets_are_left_alone() {
        let d = md(1);
        let mut s = set_of(&d, "ms", 1);
        s.metadata.deletion_timestamp = Some(to_time(t(0)));
        let ms = machines(&s, 9);
        let refs: Vec<&Machine> = ms.iter().collect();
        assert_eq!(
            plan_overshoot(&[&s], &[&d], &refs, 2, 1),
            OvershootPlan::default()
        );
    }

    #[test]
    fn api_server_freezes_after_the_timeout_and_recovers_once() {
        let timeout = Duration::from_secs(30);
        let mut h = ApiServerHealth::default();
        assert_eq!(h.observe(true, t(0), timeout), ProbeChange::None);
        assert_eq!(h.observe(false, t(60), timeout), ProbeChange::None);
        assert_eq!(h.observe(false, t(80), timeout), ProbeChange::None);
        assert_eq!(
            h.observe(false, t(91), timeout),
            ProbeChange::Freeze,
            "31s after the first failure"
        );
        assert!(h.frozen());
        assert_eq!(h.observe(false, t(100), timeout), ProbeChange::None);
        let outage = Outage {
            since: t(0),
            until: t(120),
        };
        assert_eq!(
            h.observe(true, t(120), timeout),
            ProbeChange::Recover(outage)
        );
        // The recovery failed: the next good probe tries again, with the
        // window extended.
        assert_eq!(
            h.observe(true, t(130), timeout),
            ProbeChange::Recover(Outage {
                since: t(0),
                until: t(130)
            })
        );
        h.recovered(t(130));
        assert!(!h.frozen());
        assert_eq!(h.observe(true, t(140), timeout), ProbeChange::None);
        // A blip shorter than the timeout never freezes.
        assert_eq!(h.observe(false, t(150), timeout), ProbeChange::None);
        assert_eq!(h.observe(true, t(160), timeout), ProbeChange::None);
        assert!(!h.frozen());
        // Down from the start: the window begins at the first failure.
        let mut h = ApiServerHealth::default();
        h.observe(false, t(0), timeout);
        assert_eq!(h.observe(false, t(31), timeout), ProbeChange::Freeze);
        assert_eq!(
            h.observe(true, t(40), timeout),
            ProbeChange::Recover(Outage {
                since: t(0),
                until: t(40)
            })
        );
    }

    #[test]
    fn health_clock_stops_for_the_outage() {
        let outage = Outage {
            since: t(100),
            until: t(400),
        };
        let cases = [
            ("unknown long before: keeps what it used", t(40), t(340)),
            (
                "unknown during the outage: starts at recovery",
                t(250),
                t(400),
            ),
            ("unknown since the outage began", t(100), t(400)),
            ("unknown after recovery: unchanged", t(410), t(410)),
        ];
        for (what, since, want) in cases {
            assert_eq!(health_clock_after_outage(since, &outage), want, "{what}");
        }
    }
}
