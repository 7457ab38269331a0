//! The machine controller's decisions, as pure functions of observed
//! objects and the clock, one module per flow of a machine's pass:
//!
//! - [`class`]: whether the class lets a VM be created, and the record of
//!   it a machine keeps ([`LAST_KNOWN_CLASS`]) so its VM can be deleted
//!   without it;
//! - [`bootstrap`]: the bootstrap token and userData substitution;
//! - [`creation`]: the creation state machine (C1–C7, steps × observed
//!   facts → transition, like deletion's) and what each end of it writes;
//! - [`health`]: the status a health verdict leads to, and how a machine
//!   counts for the meltdown limit;
//! - [`node_sync`]: node template sync as a patch;
//! - [`deletion`]: the deletion state machine (S1–S6) with its progress
//!   kept in an annotation, and the class it calls the driver with;
//! - [`hot_update`]: whether the VM needs the class's provider spec.
//!
//! Drain rounds are [`crate::drain`]'s; they are re-exported here, as every
//! flow's items are, so `mcm::machine::…` paths stay as they were.
//!
//! This module holds what the flows share: the settings with per-machine
//! overrides, small readers of a machine, the lastOperation and phase
//! builders, and which flows a live machine's pass runs ([`live_steps`]).
//! Where running without a target cluster changes a decision, "has target"
//! is an input. Nothing here does I/O; `controllers::machine` gathers the
//! facts, calls these functions and applies what they return.

use std::time::Duration;

use api::{
    CurrentStatus, LastOperation, Machine, MachineOperationType, MachinePhase, MachineState,
    MachineStatus, labels, parse_duration,
};
use chrono::{DateTime, Utc};
use driver::Code;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::time::{to_chrono, to_time};

pub mod bootstrap;
pub mod class;
pub mod creation;
pub mod deletion;
pub mod health;
pub mod hot_update;
pub mod node_sync;
#[cfg(test)]
pub(crate) mod test_support;

pub use bootstrap::*;
pub use class::*;
pub use creation::*;
pub use deletion::*;
pub use health::*;
pub use hot_update::*;
pub use node_sync::*;
// The drain planner is one module; machines use it through these paths.
pub use crate::drain::{
    DrainPod, DrainRound, EvictRecord, PodAction, TERMINATION_SLACK, drain_pod, drain_round,
    force_input, pdb_misconfigured, pvc_names, selector_matches, volume_attached,
};

/// The machine controller's flags (spec §7), before per-machine overrides.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// `--machine-creation-timeout`: how long a machine may take to join.
    pub creation_timeout: Duration,
    /// `--machine-health-timeout`: how long a machine may stay `Unknown`.
    pub health_timeout: Duration,
    /// `--machine-drain-timeout`: how long a normal drain may take, counted
    /// from the deletion timestamp, before it is forced.
    pub drain_timeout: Duration,
    /// `--machine-max-evict-retries`.
    pub max_evict_retries: u32,
    /// `--machine-pv-detach-timeout`: how long a drain waits for the volumes
    /// of an evicted pod to detach.
    pub pv_detach_timeout: Duration,
    /// `--node-conditions`: condition types that must be `False`.
    pub node_conditions: Vec<String>,
    /// `--resource-exhausted-retry`.
    pub resource_exhausted_retry: Duration,
    /// `--bootstrap-token-auth-extra-groups`, written to the token secret.
    pub bootstrap_token_auth_extra_groups: String,
    /// Never fail an `Unknown` machine for health (machine spec only).
    pub disable_health_timeout: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            creation_timeout: Duration::from_secs(20 * 60),
            health_timeout: Duration::from_secs(10 * 60),
            drain_timeout: Duration::from_secs(2 * 3600),
            max_evict_retries: 360,
            pv_detach_timeout: Duration::from_secs(2 * 60),
            node_conditions: crate::health::DEFAULT_NODE_CONDITIONS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            resource_exhausted_retry: driver::DEFAULT_RESOURCE_EXHAUSTED_RETRY,
            bootstrap_token_auth_extra_groups: String::new(),
            disable_health_timeout: false,
        }
    }
}

impl Settings {
    /// The settings in effect for one machine: its spec's overrides win,
    /// then (for the creation timeout) the effective-creation-timeout
    /// annotation passed down from the deployment, then the flags.
    /// Unparsable overrides are ignored (admission rejects them anyway).
    pub fn for_machine(&self, m: &Machine) -> Settings {
        let c = &m.spec.configuration;
        let annotated_creation =
            annotation(&m.metadata, labels::EFFECTIVE_CREATION_TIMEOUT).and_then(parse_duration);
        Settings {
            creation_timeout: c
                .creation_timeout()
                .or(annotated_creation)
                .unwrap_or(self.creation_timeout),
            health_timeout: c.health_timeout().unwrap_or(self.health_timeout),
            drain_timeout: c.drain_timeout().unwrap_or(self.drain_timeout),
            max_evict_retries: c
                .max_evict_retries
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(self.max_evict_retries),
            pv_detach_timeout: self.pv_detach_timeout,
            node_conditions: c
                .node_condition_types()
                .unwrap_or_else(|| self.node_conditions.clone()),
            resource_exhausted_retry: self.resource_exhausted_retry,
            bootstrap_token_auth_extra_groups: self.bootstrap_token_auth_extra_groups.clone(),
            disable_health_timeout: c
                .disable_health_timeout
                .unwrap_or(self.disable_health_timeout),
        }
    }
}

pub(crate) fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

pub(crate) fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The machine's node name (label `node`), if set and non-empty.
pub fn node_name(m: &Machine) -> Option<&str> {
    label(&m.metadata, labels::NODE).filter(|n| !n.is_empty())
}

/// Time since the machine was created (zero without a creation timestamp).
pub fn age(m: &Machine, now: DateTime<Utc>) -> Duration {
    m.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| (now - to_chrono(t)).to_std().unwrap_or_default())
        .unwrap_or_default()
}

/// An event the machine controller publishes on the machine, once the
/// pass that decided it has written its status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

/// Go's `strconv.ParseBool` truth values, which the `force-deletion` label
/// is read with.
pub fn parse_bool(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// A last operation stamped `now`.
pub fn last_op(
    type_: MachineOperationType,
    state: MachineState,
    description: impl Into<String>,
    error_code: Option<Code>,
    now: DateTime<Utc>,
) -> LastOperation {
    LastOperation {
        description: description.into(),
        error_code: error_code.map(|c| c.name().to_string()).unwrap_or_default(),
        last_update_time: Some(to_time(now)),
        state: Some(state),
        type_: Some(type_),
    }
}

/// The machine's status with a new phase: `lastUpdateTime` moves only when
/// the phase changes, because the health timeout counts from it (upstream
/// bumps it on every write, which restarts the clock while conditions keep
/// changing, weak point #811).
pub fn with_phase(
    status: &MachineStatus,
    phase: MachinePhase,
    timeout_active: bool,
    now: DateTime<Utc>,
) -> MachineStatus {
    let mut s = status.clone();
    if s.current_status.phase != Some(phase) {
        s.current_status = CurrentStatus {
            phase: Some(phase),
            timeout_active,
            last_update_time: Some(to_time(now)),
            preserve_expiry_time: s.current_status.preserve_expiry_time.clone(),
        };
    } else {
        s.current_status.timeout_active = timeout_active;
    }
    s
}

/// Which parts of a live machine's pass run (spec §2, "Order").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveSteps {
    /// Health, node sync and the "node deleted → delete the machine" rule:
    /// only with a target cluster, once the machine names its node and has
    /// a phase.
    pub node: bool,
    /// Hot update of the VM: it exists and the machine is neither new,
    /// crash-looping nor failed.
    pub hot_update: bool,
    /// The creation flow: no VM recorded yet, or a phase that says the
    /// creation has not gone through; never for a Failed machine, which is
    /// about to be replaced (a new VM would only be deleted again).
    pub create: bool,
}

/// The parts of a live machine's pass, from the machine as it is now. The
/// executor asks again after the node checks, which may change the phase.
pub fn live_steps(m: &Machine, has_target: bool) -> LiveSteps {
    let phase = m.phase();
    let created = !m.spec.provider_id.is_empty();
    let early = matches!(phase, None | Some(MachinePhase::CrashLoopBackOff));
    LiveSteps {
        node: has_target && node_name(m).is_some() && phase.is_some(),
        hot_update: created && !early && phase != Some(MachinePhase::Failed),
        create: (!created || early) && phase != Some(MachinePhase::Failed),
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::t;
    use super::*;
    use api::testing::Fixture;

    #[test]
    fn settings_overrides() {
        let base = Settings::default();
        let mut m = Machine::test("m1");
        assert_eq!(base.for_machine(&m), base);
        m.spec.configuration.health_timeout = Some("3s".into());
        m.spec.configuration.drain_timeout = Some("bogus".into());
        m.spec.configuration.max_evict_retries = Some(-1);
        m.spec.configuration.node_conditions = Some("A, B".into());
        m.spec.configuration.disable_health_timeout = Some(true);
        let m = m.annotation(labels::EFFECTIVE_CREATION_TIMEOUT, "5m");
        let s = base.for_machine(&m);
        assert_eq!(s.health_timeout, Duration::from_secs(3));
        assert_eq!(s.drain_timeout, base.drain_timeout);
        assert_eq!(s.max_evict_retries, 360);
        assert_eq!(s.node_conditions, ["A", "B"]);
        assert!(s.disable_health_timeout);
        assert_eq!(s.creation_timeout, Duration::from_secs(300));
        let mut m2 = m.clone();
        m2.spec.configuration.creation_timeout = Some("7s".into());
        assert_eq!(
            base.for_machine(&m2).creation_timeout,
            Duration::from_secs(7)
        );
    }

    #[test]
    fn live_steps_leave_nodes_alone_without_a_target() {
        use MachinePhase::*;
        let vm = |phase: Option<MachinePhase>| {
            let m = Machine::test("m1")
                .with_node("m1")
                .provider_id("local:///a/1");
            match phase {
                Some(p) => m.with_phase(p),
                None => m,
            }
        };
        let steps = |node, hot_update, create| LiveSteps {
            node,
            hot_update,
            create,
        };
        let table = [
            // (machine, has target, want)
            (Machine::test("m1"), true, steps(false, false, true)),
            (Machine::test("m1"), false, steps(false, false, true)),
            (vm(None), true, steps(false, false, true)),
            (vm(Some(CrashLoopBackOff)), true, steps(true, false, true)),
            (vm(Some(Pending)), true, steps(true, true, false)),
            (vm(Some(Running)), true, steps(true, true, false)),
            (vm(Some(Unknown)), true, steps(true, true, false)),
            (vm(Some(Failed)), true, steps(true, false, false)),
            // Without a target no node is ever looked at.
            (vm(Some(Available)), false, steps(false, true, false)),
            (vm(Some(Running)), false, steps(false, true, false)),
            (vm(Some(Pending)), false, steps(false, true, false)),
            (vm(Some(CrashLoopBackOff)), false, steps(false, false, true)),
            (vm(Some(Failed)), false, steps(false, false, false)),
            // A machine with a phase but no VM yet (a failed creation).
            (
                Machine::test("m1").with_phase(CrashLoopBackOff),
                false,
                steps(false, false, true),
            ),
        ];
        for (m, has_target, want) in table {
            assert_eq!(
                live_steps(&m, has_target),
                want,
                "{:?} node={:?} target={has_target}",
                m.phase(),
                node_name(&m)
            );
        }
    }

    #[test]
    fn phase_clock_moves_only_on_phase_change() {
        let mut m = Machine::test("m1").with_phase(MachinePhase::Unknown);
        m.status.as_mut().unwrap().current_status.last_update_time = Some(to_time(t(5)));
        let s = with_phase(
            m.status.as_ref().unwrap(),
            MachinePhase::Unknown,
            true,
            t(50),
        );
        assert_eq!(s.current_status.last_update_time, Some(to_time(t(5))));
        let s = with_phase(
            m.status.as_ref().unwrap(),
            MachinePhase::Failed,
            false,
            t(50),
        );
        assert_eq!(s.current_status.last_update_time, Some(to_time(t(50))));
    }
}
