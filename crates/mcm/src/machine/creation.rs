//! The creation flow (spec §2.1): the create-error handler, the record of
//! a VM on its machine, and the status once the VM exists.

use std::time::Duration;

use api::{
    LastOperation, Machine, MachineOperationType, MachinePhase, MachineState, MachineStatus, labels,
};
use chrono::{DateTime, Utc};
use driver::{Code, LONG_RETRY, MEDIUM_RETRY, Outcome, Step};
use k8s_openapi::api::core::v1::NodeAddress;
use serde_json::{Map, Value, json};

use super::{LAST_APPLIED_PROVIDER_SPEC, Settings, age, annotation, label, last_op, with_phase};
use crate::health;

/// lastOperation description of a machine whose VM was created.
pub const CREATING_DESCRIPTION: &str = "Creating machine on cloud provider";
/// lastOperation description after the stale-node check deleted a new VM.
pub const STALE_NODE_DESCRIPTION: &str = "VM using old node obj";

/// What the create-error handler writes and when it tries again.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateFailure {
    pub phase: MachinePhase,
    pub last_operation: LastOperation,
    pub retry: Duration,
}

/// The create-error handler (spec §2.1): `Failed` once the machine is older
/// than its creation timeout, else `CrashLoopBackOff`; the error code's name
/// goes to `errorCode` (the cluster autoscaler backs off on it). The retry
/// period comes from [`Code::outcome`] at `step`, but is cut to the time
/// left until the creation timeout, so `Failed` is written on time rather
/// than up to a retry period late.
pub fn create_failure(
    code: Code,
    message: &str,
    step: Step,
    age: Duration,
    settings: &Settings,
    now: DateTime<Utc>,
) -> CreateFailure {
    let timed_out = age > settings.creation_timeout;
    let phase = if timed_out {
        MachinePhase::Failed
    } else {
        MachinePhase::CrashLoopBackOff
    };
    let mut retry = match code.outcome(step) {
        Outcome::Retry(r) => r.period(settings.resource_exhausted_retry),
        _ => MEDIUM_RETRY,
    };
    if !timed_out {
        let left = settings.creation_timeout - age + Duration::from_secs(1);
        retry = retry.min(left);
    }
    CreateFailure {
        phase,
        last_operation: last_op(
            MachineOperationType::Create,
            MachineState::Failed,
            format!("Cloud provider message - {message}"),
            Some(code),
            now,
        ),
        retry,
    }
}

/// The one metadata/spec update after the VM is known (spec §2.1.3): label
/// `node`, priority `3` if missing, `spec.providerID`, and the provider spec
/// the VM was created with (for hot updates) if not recorded yet. `None`
/// when the machine already carries all of it.
pub fn creation_patch(
    m: &Machine,
    provider_id: &str,
    node_name: &str,
    provider_spec: &Value,
) -> Option<Value> {
    let mut patch = json!({});
    if label(&m.metadata, labels::NODE) != Some(node_name) && !node_name.is_empty() {
        patch["metadata"]["labels"] = json!({ labels::NODE: node_name });
    }
    let mut ann = Map::new();
    if annotation(&m.metadata, labels::MACHINE_PRIORITY).is_none() {
        ann.insert(
            labels::MACHINE_PRIORITY.into(),
            labels::DEFAULT_MACHINE_PRIORITY.into(),
        );
    }
    if annotation(&m.metadata, LAST_APPLIED_PROVIDER_SPEC).is_none() {
        ann.insert(
            LAST_APPLIED_PROVIDER_SPEC.into(),
            Value::String(provider_spec.to_string()),
        );
    }
    if !ann.is_empty() {
        patch["metadata"]["annotations"] = Value::Object(ann);
    }
    if m.spec.provider_id != provider_id && !provider_id.is_empty() {
        patch["spec"] = json!({ "providerID": provider_id });
    }
    (patch != json!({})).then_some(patch)
}

/// lastOperation description of a machine that is `Available` right after
/// its VM was created, because there is no target cluster for it to join.
pub const AVAILABLE_DESCRIPTION: &str =
    "Created machine on cloud provider; no target cluster to join";

/// Whether the provider told enough about a VM to record it: a providerID
/// always, and a node name only where there is a target cluster whose Node
/// it names (spec §2.1.3).
pub fn vm_ids_complete(provider_id: &str, node_name: &str, has_target: bool) -> bool {
    !provider_id.is_empty() && (!has_target || !node_name.is_empty())
}

/// Status of a machine whose VM now exists (only from no phase or
/// `CrashLoopBackOff`). With a target cluster: `Pending` with lastOp
/// Create/Processing, until its node joins. Without one there is nothing to
/// join: `Available` with lastOp Create/Successful, and the provider's
/// addresses recorded, since there is no Node to read them from.
pub fn created_status(
    m: &Machine,
    has_target: bool,
    addresses: &[NodeAddress],
    now: DateTime<Utc>,
) -> Option<MachineStatus> {
    let status = m.status.clone().unwrap_or_default();
    if !matches!(
        status.current_status.phase,
        None | Some(MachinePhase::CrashLoopBackOff)
    ) {
        return None;
    }
    Some(if has_target {
        let mut s = with_phase(&status, MachinePhase::Pending, true, now);
        s.last_operation = last_op(
            MachineOperationType::Create,
            MachineState::Processing,
            CREATING_DESCRIPTION,
            None,
            now,
        );
        s
    } else {
        let mut s = with_phase(&status, MachinePhase::Available, false, now);
        s.last_operation = last_op(
            MachineOperationType::Create,
            MachineState::Successful,
            AVAILABLE_DESCRIPTION,
            None,
            now,
        );
        s.addresses = addresses.to_vec();
        s
    })
}

/// When to look at a machine again after its creation flow went through:
/// with a target cluster at the creation timeout (for the health check
/// to fail a machine that never joined), at most a health recheck away;
/// without one nothing is pending, so only the steady-state resync.
pub fn recheck_after_creation(
    m: &Machine,
    has_target: bool,
    settings: &Settings,
    now: DateTime<Utc>,
) -> Duration {
    if !has_target {
        return LONG_RETRY;
    }
    settings
        .creation_timeout
        .saturating_sub(age(m, now))
        .min(health::HEALTH_RECHECK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::test_support::{created_at, t};
    use api::testing::Fixture;

    #[test]
    fn create_errors() {
        let s = Settings {
            creation_timeout: Duration::from_secs(1200),
            resource_exhausted_retry: Duration::from_secs(600),
            ..Settings::default()
        };
        // (code, age, phase, retry)
        let cases = [
            (
                Code::ResourceExhausted,
                60,
                MachinePhase::CrashLoopBackOff,
                600,
            ),
            (Code::Unavailable, 60, MachinePhase::CrashLoopBackOff, 5),
            (
                Code::InvalidArgument,
                60,
                MachinePhase::CrashLoopBackOff,
                180,
            ),
            // Cut to the time left until the creation timeout (+1s).
            (
                Code::ResourceExhausted,
                1100,
                MachinePhase::CrashLoopBackOff,
                101,
            ),
            (Code::ResourceExhausted, 1201, MachinePhase::Failed, 600),
            (Code::Internal, 1201, MachinePhase::Failed, 180),
        ];
        for (code, age, phase, retry) in cases {
            let f = create_failure(
                code,
                "quota",
                Step::Create,
                Duration::from_secs(age),
                &s,
                t(0),
            );
            assert_eq!(f.phase, phase, "{code} {age}");
            assert_eq!(f.retry, Duration::from_secs(retry), "{code} {age}");
            assert_eq!(
                f.last_operation.description,
                "Cloud provider message - quota"
            );
            assert_eq!(f.last_operation.error_code, code.name());
            assert_eq!(f.last_operation.state, Some(MachineState::Failed));
            assert_eq!(f.last_operation.type_, Some(MachineOperationType::Create));
        }
    }

    #[test]
    fn creation_patch_sets_only_what_is_missing() {
        let m = Machine::test("m1");
        let p = creation_patch(&m, "local:///a/1", "m1", &json!({"zone": "a"})).unwrap();
        assert_eq!(p["metadata"]["labels"]["node"], "m1");
        assert_eq!(p["metadata"]["annotations"][labels::MACHINE_PRIORITY], "3");
        assert_eq!(
            p["metadata"]["annotations"][LAST_APPLIED_PROVIDER_SPEC],
            r#"{"zone":"a"}"#
        );
        assert_eq!(p["spec"]["providerID"], "local:///a/1");
        let done = Machine::test("m1")
            .with_node("m1")
            .provider_id("local:///a/1")
            .annotation(labels::MACHINE_PRIORITY, "1")
            .annotation(LAST_APPLIED_PROVIDER_SPEC, "{}");
        assert_eq!(
            creation_patch(&done, "local:///a/1", "m1", &json!({})),
            None
        );
    }

    #[test]
    fn created_status_is_pending_with_a_target_and_available_without() {
        use MachinePhase::*;
        let addr = NodeAddress {
            type_: "InternalIP".into(),
            address: "10.0.0.7".into(),
        };
        // (phase before, has target, phase after or None, lastOp state)
        let table = [
            (None, true, Some(Pending), MachineState::Processing),
            (
                Some(CrashLoopBackOff),
                true,
                Some(Pending),
                MachineState::Processing,
            ),
            (Some(Pending), true, None, MachineState::Processing),
            (Some(Running), true, None, MachineState::Processing),
            (Some(Failed), true, None, MachineState::Processing),
            (None, false, Some(Available), MachineState::Successful),
            (
                Some(CrashLoopBackOff),
                false,
                Some(Available),
                MachineState::Successful,
            ),
            (Some(Available), false, None, MachineState::Successful),
            (Some(Failed), false, None, MachineState::Successful),
        ];
        for (before, has_target, after, state) in table {
            let mut m = Machine::test("m1");
            if let Some(p) = before {
                m = m.with_phase(p);
            }
            let s = created_status(&m, has_target, std::slice::from_ref(&addr), t(0));
            let case = format!("{before:?} target={has_target}");
            assert_eq!(
                s.as_ref().map(|s| s.current_status.phase),
                after.map(Some),
                "{case}"
            );
            let Some(s) = s else { continue };
            assert_eq!(s.last_operation.state, Some(state), "{case}");
            assert_eq!(
                s.last_operation.type_,
                Some(MachineOperationType::Create),
                "{case}"
            );
            if has_target {
                assert_eq!(s.last_operation.description, CREATING_DESCRIPTION);
                assert!(s.current_status.timeout_active, "the creation timeout runs");
                assert!(s.addresses.is_empty(), "a node carries the addresses");
            } else {
                assert_eq!(s.last_operation.description, AVAILABLE_DESCRIPTION);
                assert!(!s.current_status.timeout_active, "nothing to time out");
                assert_eq!(s.addresses, vec![addr.clone()], "{case}");
            }
        }
    }

    #[test]
    fn a_node_name_is_needed_only_with_a_target() {
        // (providerID, node name, has target, complete)
        let table = [
            ("local:///a/1", "m1", true, true),
            ("local:///a/1", "", true, false),
            ("", "m1", true, false),
            ("local:///a/1", "", false, true),
            ("local:///a/1", "m1", false, true),
            ("", "m1", false, false),
            ("", "", false, false),
        ];
        for (pid, node, has_target, want) in table {
            assert_eq!(
                vm_ids_complete(pid, node, has_target),
                want,
                "{pid:?} {node:?} target={has_target}"
            );
        }
    }

    #[test]
    fn recheck_after_creation_waits_for_the_join_only_with_a_target() {
        let settings = Settings {
            creation_timeout: Duration::from_secs(120),
            ..Settings::default()
        };
        let m = created_at(Machine::test("m1"), 0);
        // (seconds since creation, has target, wait)
        let table = [
            (0, true, Duration::from_secs(60)),
            (100, true, Duration::from_secs(20)),
            (500, true, Duration::ZERO),
            (0, false, LONG_RETRY),
            (500, false, LONG_RETRY),
        ];
        for (at, has_target, want) in table {
            assert_eq!(
                recheck_after_creation(&m, has_target, &settings, t(at)),
                want,
                "{at}s target={has_target}"
            );
        }
    }
}
