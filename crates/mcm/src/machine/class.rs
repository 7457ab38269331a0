//! The machine's class: whether a VM may be created from it, what a
//! machine records of it (so that its VM can still be deleted once the
//! class is gone), and clearing a class problem once the class is back.

use api::{
    Machine, MachineClass, MachineOperationType, MachinePhase, MachineState, MachineStatus, labels,
};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{AVAILABLE_DESCRIPTION, CREATING_DESCRIPTION, annotation, last_op};

/// Annotation on a machine recording the class its VM is (to be) created
/// with, as JSON [`KnownClass`]: provider, provider spec and secret
/// references. It is written on a live pass before the driver is first
/// asked to create the VM, and kept up to date while the class exists, so
/// a machine without it and without a providerID never had a VM, and a VM
/// whose class is gone can still be deleted with what the class was.
pub const LAST_KNOWN_CLASS: &str = "machine.sapcloud.io/last-known-class";

/// What a machine remembers of its class: what the driver needs to find
/// and delete the VM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KnownClass {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    #[serde(default)]
    pub provider_spec: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<SecretReference>,
}

impl KnownClass {
    /// The parts of `class` worth remembering.
    pub fn of(class: &MachineClass) -> KnownClass {
        KnownClass {
            provider: class.provider.clone(),
            provider_spec: class.provider_spec.clone(),
            secret_ref: class.secret_ref.clone(),
            credentials_secret_ref: class.credentials_secret_ref.clone(),
        }
    }

    /// The record on `m`: `None` without one, `Some(None)` for one that
    /// cannot be read.
    pub fn recorded(m: &Machine) -> Option<Option<KnownClass>> {
        annotation(&m.metadata, LAST_KNOWN_CLASS).map(|v| serde_json::from_str(v).ok())
    }

    /// A class named `name` in `ns` made from the record, to hand the
    /// driver in place of one that is gone.
    pub fn to_class(&self, name: &str, ns: &str) -> MachineClass {
        MachineClass {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(ns.to_string()),
                ..ObjectMeta::default()
            },
            provider: self.provider.clone(),
            provider_spec: self.provider_spec.clone(),
            secret_ref: self.secret_ref.clone(),
            credentials_secret_ref: self.credentials_secret_ref.clone(),
            node_template: None,
        }
    }
}

/// The annotation patch that records `class` on `m`; `None` when the
/// record is current.
pub fn known_class_patch(m: &Machine, class: &MachineClass) -> Option<Value> {
    let want = KnownClass::of(class);
    if KnownClass::recorded(m) == Some(Some(want.clone())) {
        return None;
    }
    let text = serde_json::to_string(&want).ok()?;
    Some(json!({"metadata": {"annotations": {LAST_KNOWN_CLASS: text}}}))
}

/// How a live machine's class stands for creating a VM from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassState {
    /// It exists, carries the class finalizer, is not being deleted, and
    /// its secrets hold `userData`.
    Ready,
    /// It does not exist (not yet, not any more, or a misspelt name).
    Missing,
    /// It is being deleted.
    Deleting,
    /// Its secrets hold no `userData`.
    NoUserData,
    /// The class controller has not put the class finalizer on it yet.
    NoFinalizer,
}

/// The state of `class` (`None`: not found) whose merged secrets do or do
/// not hold `userData`.
pub fn class_state(class: Option<&MachineClass>, has_user_data: bool) -> ClassState {
    let Some(class) = class else {
        return ClassState::Missing;
    };
    if class.metadata.deletion_timestamp.is_some() {
        ClassState::Deleting
    } else if !has_user_data {
        ClassState::NoUserData
    } else if !crate::machineclass::has_class_finalizer(class) {
        ClassState::NoFinalizer
    } else {
        ClassState::Ready
    }
}

/// What keeps a VM from being created from the class, in words that say
/// what to do; `None` when nothing does, or only the class finalizer is
/// missing (the class controller adds it at once, and the class's update
/// brings the machine back).
pub fn class_problem(state: ClassState, ns: &str, class_name: &str) -> Option<String> {
    match state {
        ClassState::Ready | ClassState::NoFinalizer => None,
        ClassState::Missing => Some(format!(
            "MachineClass {ns}/{class_name} not found: create it (or correct the class name) \
             and the VM is created"
        )),
        ClassState::Deleting => Some(format!(
            "MachineClass {ns}/{class_name} is being deleted: no new VM is created from it"
        )),
        ClassState::NoUserData => Some(format!(
            "the secrets of MachineClass {ns}/{class_name} have no {}",
            labels::USER_DATA_KEY
        )),
    }
}

/// Every lastOperation description a class problem of this machine's
/// class was written with, including the one earlier versions wrote for
/// every machine, running or not.
fn class_problem_descriptions(ns: &str, class_name: &str) -> Vec<String> {
    let mut out: Vec<String> = [
        ClassState::Missing,
        ClassState::Deleting,
        ClassState::NoUserData,
    ]
    .into_iter()
    .filter_map(|s| class_problem(s, ns, class_name))
    .collect();
    out.push(format!("MachineClass {ns}/{class_name} not found"));
    out.push(format!(
        "the secrets of MachineClass {class_name} have no {}",
        labels::USER_DATA_KEY
    ));
    out
}

/// lastOperation description of a machine whose class problem is gone.
pub fn class_available_description(ns: &str, class_name: &str) -> String {
    format!("MachineClass {ns}/{class_name} is available again")
}

/// The status of a machine with a VM whose lastOperation still reports a
/// class problem that is gone (written before the class came back, or by
/// an earlier version, which wrote it onto running machines too): the
/// lastOperation of the phase it is in. `None` when there is nothing to
/// clear, or when the creation flow is about to overwrite it anyway.
pub fn class_recovered_status(m: &Machine, now: DateTime<Utc>) -> Option<MachineStatus> {
    let status = m.status.as_ref()?;
    let op = &status.last_operation;
    let ns = m.metadata.namespace.as_deref().unwrap_or_default();
    let class_name = &m.spec.class.name;
    let phase = status.current_status.phase;
    let creating = m.spec.provider_id.is_empty()
        || matches!(phase, None | Some(MachinePhase::CrashLoopBackOff));
    if creating
        || op.type_ != Some(MachineOperationType::Create)
        || op.state != Some(MachineState::Failed)
        || !class_problem_descriptions(ns, class_name).contains(&op.description)
    {
        return None;
    }
    let mut s = status.clone();
    s.last_operation = match phase {
        Some(MachinePhase::Pending) => last_op(
            MachineOperationType::Create,
            MachineState::Processing,
            CREATING_DESCRIPTION,
            None,
            now,
        ),
        Some(MachinePhase::Available) => last_op(
            MachineOperationType::Create,
            MachineState::Successful,
            AVAILABLE_DESCRIPTION,
            None,
            now,
        ),
        _ => last_op(
            MachineOperationType::HealthCheck,
            MachineState::Successful,
            class_available_description(ns, class_name),
            None,
            now,
        ),
    };
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::test_support::t;
    use crate::time::to_time;
    use api::LastOperation;
    use api::testing::Fixture;

    #[test]
    fn the_class_is_recorded_once_and_when_it_changes() {
        let class = MachineClass::test("test-class");
        let m = Machine::test("m1");
        let p = known_class_patch(&m, &class).unwrap();
        let text = p["metadata"]["annotations"][LAST_KNOWN_CLASS]
            .as_str()
            .unwrap()
            .to_string();
        let recorded: KnownClass = serde_json::from_str(&text).unwrap();
        assert_eq!(recorded, KnownClass::of(&class));
        assert_eq!(recorded.provider, "local");
        let m = m.annotation(LAST_KNOWN_CLASS, &text);
        assert_eq!(known_class_patch(&m, &class), None);
        // Finalizers and other metadata are not part of the record.
        let with_meta = class.clone().finalizer(labels::MCM_FINALIZER);
        assert_eq!(known_class_patch(&m, &with_meta), None);
        let mut changed = class;
        changed.provider_spec = json!({"tags": {"a": "1"}});
        assert!(known_class_patch(&m, &changed).is_some());
    }

    #[test]
    fn class_states_and_problems() {
        let ready = MachineClass::test("c").finalizer(labels::MCM_FINALIZER);
        let mut deleting = ready.clone();
        deleting.metadata.deletion_timestamp = Some(to_time(t(0)));
        // (class, userData, state)
        let table = [
            (None, true, ClassState::Missing),
            (Some(&ready), true, ClassState::Ready),
            (Some(&ready), false, ClassState::NoUserData),
            (Some(&deleting), true, ClassState::Deleting),
            (
                Some(&MachineClass::test("c")),
                true,
                ClassState::NoFinalizer,
            ),
        ];
        for (class, user_data, want) in table {
            assert_eq!(class_state(class, user_data), want, "{want:?}");
        }
        assert_eq!(class_problem(ClassState::Ready, "ns", "c"), None);
        assert_eq!(class_problem(ClassState::NoFinalizer, "ns", "c"), None);
        let missing = class_problem(ClassState::Missing, "ns", "c").unwrap();
        assert!(
            missing.starts_with("MachineClass ns/c not found: create it"),
            "{missing}"
        );
        let deleting = class_problem(ClassState::Deleting, "ns", "c").unwrap();
        assert!(deleting.contains("is being deleted"), "{deleting}");
        let no_ud = class_problem(ClassState::NoUserData, "ns", "c").unwrap();
        assert!(no_ud.contains("have no userData"), "{no_ud}");
    }

    #[test]
    fn stale_class_problems_are_cleared_once_the_class_is_back() {
        let failed_op = |d: &str| LastOperation {
            description: d.into(),
            state: Some(MachineState::Failed),
            type_: Some(MachineOperationType::Create),
            ..LastOperation::default()
        };
        let with_op = |m: Machine, d: &str| {
            let mut m = m;
            m.status
                .get_or_insert_with(MachineStatus::default)
                .last_operation = failed_op(d);
            m
        };
        let legacy = "MachineClass default/test-class not found";
        let current = class_problem(ClassState::Missing, "default", "test-class").unwrap();
        let running = Machine::test("m1").provider_id("local:///a/1").running();
        let pending = Machine::test("m1")
            .provider_id("local:///a/1")
            .with_phase(MachinePhase::Pending);
        // (machine, expected lastOperation description and state)
        let table = [
            (
                with_op(running.clone(), legacy),
                Some((
                    "MachineClass default/test-class is available again".to_string(),
                    MachineState::Successful,
                )),
            ),
            (
                with_op(running.clone(), &current),
                Some((
                    class_available_description("default", "test-class"),
                    MachineState::Successful,
                )),
            ),
            (
                with_op(pending.clone(), legacy),
                Some((CREATING_DESCRIPTION.to_string(), MachineState::Processing)),
            ),
            // Not a class problem: left alone.
            (with_op(running.clone(), "Cloud provider message - x"), None),
            // Another class's problem: left alone.
            (
                with_op(running.clone(), "MachineClass default/other not found"),
                None,
            ),
            // No VM yet: the creation flow overwrites it.
            (
                with_op(Machine::test("m1").class("test-class"), legacy),
                None,
            ),
            (
                with_op(
                    Machine::test("m1")
                        .provider_id("local:///a/1")
                        .with_phase(MachinePhase::CrashLoopBackOff),
                    legacy,
                ),
                None,
            ),
            (running, None),
        ];
        for (i, (m, want)) in table.into_iter().enumerate() {
            let got = class_recovered_status(&m, t(5)).map(|s| {
                (
                    s.last_operation.description,
                    s.last_operation.state.unwrap(),
                )
            });
            assert_eq!(got, want, "case {i}");
        }
    }
}
