//! The machine class and secret controllers' decisions (spec §2.8), as pure
//! functions of the class, the machines that use it and the other classes.
//!
//! A class carries the `machine.sapcloud.io/machine-controller-manager`
//! finalizer while at least one machine (deleting or not) refers to it, so
//! it cannot disappear under machines whose VMs still need it to be
//! deleted; a class being deleted keeps the finalizer until its last
//! machine is gone. The machine controller creates no VM from a class that
//! does not carry the finalizer yet, which closes the window in which a
//! class could be deleted between the VM's creation and the finalizer.
//!
//! A secret a class refers to carries `machine.sapcloud.io/machine-controller`
//! while machines use that class: their VMs need its credentials to be
//! deleted. Upstream holds it while any class refers to the secret, used or
//! not; here a secret nothing depends on is left free, because a finalizer
//! nobody needs outlives the controllers that would remove it: a shoot's
//! machine controllers stop before its control namespace is deleted, and a
//! secret of an unused class would then hold the namespace forever. The
//! class controller settles a class's secrets before it changes the
//! class's own finalizer, so a class in use never has unprotected secrets
//! and a class let go never leaves its secrets held.
//!
//! Nothing here does I/O; `controllers::machineclass` gathers the facts and
//! applies the decisions.

use api::{Machine, MachineClass, labels};
use k8s_openapi::api::core::v1::SecretReference;

/// Whether `m` refers to the class `name` in namespace `ns`. The kind in
/// `spec.class` is not compared: the machine controller reads the class
/// by name whatever kind the machine names (upstream's provider-specific
/// class kinds are long gone), so the finalizer must count it too.
pub fn uses_class(m: &Machine, ns: &str, name: &str) -> bool {
    m.metadata.namespace.as_deref() == Some(ns) && m.spec.class.name == name
}

/// What a class reconcile decides about the class's finalizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassAction {
    /// Nothing to change.
    Keep,
    /// Add the finalizer: machines use the class.
    AddFinalizer,
    /// Drop the finalizer: no machine uses the class (any more).
    RemoveFinalizer,
    /// The class is being deleted and machines still use it: wait for them
    /// (their deletions trigger the next pass).
    WaitForMachines(usize),
}

/// The class decision (upstream `reconcileClusterMachineClass`):
///
/// | deleting | machines | finalizer | action |
/// |---|---|---|---|
/// | no  | ≥1 | absent  | add |
/// | no  | 0  | present | remove |
/// | yes | ≥1 | any     | wait |
/// | yes | 0  | present | remove |
/// | any | any | as wanted | keep |
///
/// A class being deleted never gets the finalizer added (the API server
/// refuses new finalizers on deleting objects; there is nothing to protect
/// either, since without any finalizer it is already gone).
pub fn class_action(deleting: bool, has_finalizer: bool, machines: usize) -> ClassAction {
    match (deleting, machines, has_finalizer) {
        (_, 0, true) => ClassAction::RemoveFinalizer,
        (_, 0, false) => ClassAction::Keep,
        (false, _, false) => ClassAction::AddFinalizer,
        (false, _, true) => ClassAction::Keep,
        (true, n, _) => ClassAction::WaitForMachines(n),
    }
}

/// Whether the class carries the MCM finalizer.
pub fn has_class_finalizer(class: &MachineClass) -> bool {
    class
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == labels::MCM_FINALIZER)
}

/// One class as the secret decision sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassUse {
    /// The secrets it refers to, as (namespace, name).
    pub secrets: Vec<(String, String)>,
    /// Machines referring to it.
    pub machines: usize,
}

impl ClassUse {
    /// The facts of `class`, given how many machines use it.
    pub fn of(class: &MachineClass, machines: usize) -> ClassUse {
        let ns = class.metadata.namespace.clone().unwrap_or_default();
        ClassUse {
            secrets: secret_refs(class, &ns),
            machines,
        }
    }

    /// Whether the class needs its secrets: machines use it, whose VMs
    /// need the credentials to be deleted (being deleted or not).
    pub fn needs_secrets(&self) -> bool {
        self.machines > 0
    }
}

/// The secrets a class refers to, as (namespace, name); a reference without
/// a namespace means the class's own. References without a name are left
/// out.
pub fn secret_refs(class: &MachineClass, class_ns: &str) -> Vec<(String, String)> {
    let one = |r: &Option<SecretReference>| {
        let r = r.as_ref()?;
        let name = r.name.clone().filter(|n| !n.is_empty())?;
        let ns = r
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| class_ns.to_string());
        Some((ns, name))
    };
    let mut out: Vec<(String, String)> =
        [one(&class.secret_ref), one(&class.credentials_secret_ref)]
            .into_iter()
            .flatten()
            .collect();
    out.dedup();
    out
}

/// Whether the secret `(ns, name)` is needed by one of `classes`.
pub fn secret_wanted(ns: &str, name: &str, classes: &[ClassUse]) -> bool {
    classes
        .iter()
        .any(|c| c.needs_secrets() && c.secrets.iter().any(|(n, s)| n == ns && s == name))
}

/// How a secret's `machine.sapcloud.io/machine-controller` finalizer
/// changes: `Some(true)` add, `Some(false)` remove, `None` leave. A secret
/// being deleted never gets it added.
pub fn secret_finalizer_change(has: bool, wanted: bool, deleting: bool) -> Option<bool> {
    match (has, wanted) {
        (false, true) if !deleting => Some(true),
        (true, false) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::testing::{Fixture, TEST_NAMESPACE};

    #[test]
    fn class_decisions() {
        use ClassAction::*;
        // (deleting, has finalizer, machines, action)
        let table = [
            (false, false, 0, Keep),
            (false, false, 2, AddFinalizer),
            (false, true, 2, Keep),
            (false, true, 0, RemoveFinalizer),
            (true, true, 3, WaitForMachines(3)),
            (true, false, 1, WaitForMachines(1)),
            (true, true, 0, RemoveFinalizer),
            (true, false, 0, Keep),
        ];
        for (deleting, has, machines, want) in table {
            assert_eq!(
                class_action(deleting, has, machines),
                want,
                "deleting={deleting} finalizer={has} machines={machines}"
            );
        }
    }

    #[test]
    fn machines_use_classes_by_namespace_and_name() {
        let m = Machine::test("m1").class("a");
        assert!(uses_class(&m, TEST_NAMESPACE, "a"));
        assert!(!uses_class(&m, TEST_NAMESPACE, "b"));
        assert!(!uses_class(&m, "other", "a"));
        let mut other_kind = m;
        other_kind.spec.class.kind = "AWSMachineClass".into();
        assert!(uses_class(&other_kind, TEST_NAMESPACE, "a"));
    }

    #[test]
    fn secret_references_default_to_the_class_namespace() {
        let mut class = MachineClass::test("c");
        class.credentials_secret_ref = Some(SecretReference {
            name: Some("creds".into()),
            namespace: None,
        });
        assert_eq!(
            secret_refs(&class, "default"),
            [
                ("default".to_string(), "c-secret".to_string()),
                ("default".to_string(), "creds".to_string())
            ]
        );
        class.secret_ref = Some(SecretReference {
            name: None,
            namespace: Some("x".into()),
        });
        class.credentials_secret_ref = None;
        assert!(secret_refs(&class, "default").is_empty());
    }

    fn use_of(secrets: &[&str], machines: usize) -> ClassUse {
        ClassUse {
            secrets: secrets
                .iter()
                .map(|s| ("default".to_string(), s.to_string()))
                .collect(),
            machines,
        }
    }

    #[test]
    fn secrets_are_wanted_while_machines_use_a_class_of_theirs() {
        let classes = [
            use_of(&["shared", "used-only"], 2),
            use_of(&["shared", "unused-only"], 0),
        ];
        // (secret, wanted)
        let table = [
            ("shared", true),
            ("used-only", true),
            ("unused-only", false),
            ("unreferenced", false),
        ];
        for (secret, want) in table {
            assert_eq!(secret_wanted("default", secret, &classes), want, "{secret}");
        }
        assert!(!secret_wanted("other", "shared", &classes));
    }

    #[test]
    fn secret_finalizer_changes() {
        // (has, wanted, deleting, change)
        let table = [
            (false, true, false, Some(true)),
            (false, true, true, None),
            (true, true, false, None),
            (true, false, false, Some(false)),
            (true, false, true, Some(false)),
            (false, false, false, None),
        ];
        for (has, wanted, deleting, want) in table {
            assert_eq!(
                secret_finalizer_change(has, wanted, deleting),
                want,
                "has={has} wanted={wanted} deleting={deleting}"
            );
        }
    }

    #[test]
    fn class_use_from_a_class() {
        let class = MachineClass::test("c").finalizer(labels::MCM_FINALIZER);
        assert!(has_class_finalizer(&class));
        assert!(!has_class_finalizer(&MachineClass::test("c")));
        let u = ClassUse::of(&class, 0);
        assert_eq!(u.secrets, [("default".to_string(), "c-secret".to_string())]);
        assert!(!u.needs_secrets());
        assert!(ClassUse::of(&class, 1).needs_secrets());
    }
}
