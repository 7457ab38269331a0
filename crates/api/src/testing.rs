//! Small builders for test fixtures, used by this crate's tests and by the
//! controllers' tests: `Machine::test("m1").with_phase(MachinePhase::Running)`.
//!
//! Every `test` constructor returns an object that passes validation, in
//! namespace `default`, referring to the class `test-class`; the builder
//! methods change one thing each.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use serde_json::json;

use crate::machine::{
    ClassSpec, Machine, MachineClass, MachineDeployment, MachineDeploymentSpec,
    MachineDeploymentStrategy, MachineDeploymentStrategyType, MachinePhase, MachineSet,
    MachineSetSpec, MachineSpec, MachineStatus, MachineTemplateSpec,
    RollingUpdateMachineDeployment,
};

/// Namespace of every fixture.
pub const TEST_NAMESPACE: &str = "default";

/// Class name every fixture refers to, and the name of [`MachineClass::test`]'s
/// usual instance.
pub const TEST_CLASS: &str = "test-class";

/// Metadata builders shared by all kinds.
pub trait Fixture: Resource + Sized {
    /// Adds a label.
    fn label(mut self, key: &str, value: &str) -> Self {
        self.meta_mut()
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Adds an annotation.
    fn annotation(mut self, key: &str, value: &str) -> Self {
        self.meta_mut()
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Moves the object to another namespace.
    fn in_namespace(mut self, namespace: &str) -> Self {
        self.meta_mut().namespace = Some(namespace.to_string());
        self
    }

    /// Sets the UID, which owner references need.
    fn with_uid(mut self, uid: &str) -> Self {
        self.meta_mut().uid = Some(uid.to_string());
        self
    }

    /// Adds a finalizer.
    fn finalizer(mut self, finalizer: &str) -> Self {
        self.meta_mut()
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(finalizer.to_string());
        self
    }
}

impl<K: Resource + Sized> Fixture for K {}

fn test_class() -> ClassSpec {
    ClassSpec {
        api_group: crate::API_GROUP.to_string(),
        kind: "MachineClass".to_string(),
        name: TEST_CLASS.to_string(),
    }
}

fn namespaced<K: Resource>(mut obj: K) -> K {
    obj.meta_mut().namespace = Some(TEST_NAMESPACE.to_string());
    obj
}

/// A template whose labels are `name: <owner>`, as Gardener labels its pools.
fn test_template(owner: &str) -> MachineTemplateSpec {
    let mut template = MachineTemplateSpec {
        spec: MachineSpec {
            class: test_class(),
            ..MachineSpec::default()
        },
        ..MachineTemplateSpec::default()
    };
    template.metadata.labels = Some(BTreeMap::from([("name".to_string(), owner.to_string())]));
    template
}

fn test_selector(owner: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([("name".to_string(), owner.to_string())])),
        match_expressions: None,
    }
}

impl Machine {
    /// A new, unprocessed machine of class `test-class`.
    pub fn test(name: &str) -> Machine {
        namespaced(Machine::new(
            name,
            MachineSpec {
                class: test_class(),
                ..MachineSpec::default()
            },
        ))
    }

    /// Refers to another class.
    pub fn class(mut self, name: &str) -> Machine {
        self.spec.class.name = name.to_string();
        self
    }

    /// Sets the phase in the status.
    pub fn with_phase(mut self, phase: MachinePhase) -> Machine {
        self.status
            .get_or_insert_with(MachineStatus::default)
            .current_status
            .phase = Some(phase);
        self
    }

    /// Shorthand for a `Running` machine.
    pub fn running(self) -> Machine {
        self.with_phase(MachinePhase::Running)
    }

    /// Sets the `node` label that maps the machine to its node.
    pub fn with_node(self, node: &str) -> Machine {
        self.label(crate::machine::labels::NODE, node)
    }

    /// Sets `spec.providerID`.
    pub fn provider_id(mut self, id: &str) -> Machine {
        self.spec.provider_id = id.to_string();
        self
    }

    /// Makes the machine set its controller and copies the set's template
    /// labels, as the machine set controller does when it creates machines.
    pub fn owned_by(mut self, set: &MachineSet) -> Machine {
        let owner = OwnerReference {
            api_version: crate::GROUP_VERSION.to_string(),
            kind: "MachineSet".to_string(),
            name: set.metadata.name.clone().unwrap_or_default(),
            uid: set.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        self.metadata
            .owner_references
            .get_or_insert_with(Vec::new)
            .push(owner);
        for (k, v) in set.spec.template.metadata.labels.iter().flatten() {
            self = self.label(k, v);
        }
        self
    }
}

impl MachineSet {
    /// One replica, selecting and labelling machines `name: <name>`.
    pub fn test(name: &str) -> MachineSet {
        namespaced(MachineSet::new(
            name,
            MachineSetSpec {
                replicas: 1,
                selector: Some(test_selector(name)),
                template: test_template(name),
                ..MachineSetSpec::default()
            },
        ))
    }

    /// Sets `spec.replicas`.
    pub fn replicas(mut self, replicas: i32) -> MachineSet {
        self.spec.replicas = replicas;
        self
    }

    /// Refers the template to another class.
    pub fn class(mut self, name: &str) -> MachineSet {
        self.spec.template.spec.class.name = name.to_string();
        self
    }
}

impl MachineDeployment {
    /// One replica, a rolling update with `maxSurge: 1, maxUnavailable: 0`,
    /// selecting and labelling machines `name: <name>`.
    pub fn test(name: &str) -> MachineDeployment {
        namespaced(MachineDeployment::new(
            name,
            MachineDeploymentSpec {
                replicas: 1,
                selector: Some(test_selector(name)),
                template: test_template(name),
                strategy: MachineDeploymentStrategy {
                    type_: Some(MachineDeploymentStrategyType::RollingUpdate),
                    rolling_update: Some(RollingUpdateMachineDeployment {
                        max_surge: Some(IntOrString::Int(1)),
                        max_unavailable: Some(IntOrString::Int(0)),
                    }),
                    in_place_update: None,
                },
                ..MachineDeploymentSpec::default()
            },
        ))
    }

    /// Sets `spec.replicas`.
    pub fn replicas(mut self, replicas: i32) -> MachineDeployment {
        self.spec.replicas = replicas;
        self
    }

    /// Refers the template to another class.
    pub fn class(mut self, name: &str) -> MachineDeployment {
        self.spec.template.spec.class.name = name.to_string();
        self
    }

    /// Sets the rolling update bounds; `"25%"` style strings become
    /// percentages, anything else must be a count.
    pub fn rolling(mut self, max_surge: &str, max_unavailable: &str) -> MachineDeployment {
        let bound = |s: &str| match s.parse::<i32>() {
            Ok(n) => IntOrString::Int(n),
            Err(_) => IntOrString::String(s.to_string()),
        };
        self.spec.strategy = MachineDeploymentStrategy {
            type_: Some(MachineDeploymentStrategyType::RollingUpdate),
            rolling_update: Some(RollingUpdateMachineDeployment {
                max_surge: Some(bound(max_surge)),
                max_unavailable: Some(bound(max_unavailable)),
            }),
            in_place_update: None,
        };
        self
    }

    /// Switches to the `Recreate` strategy.
    pub fn recreate(mut self) -> MachineDeployment {
        self.spec.strategy = MachineDeploymentStrategy {
            type_: Some(MachineDeploymentStrategyType::Recreate),
            ..MachineDeploymentStrategy::default()
        };
        self
    }

    /// Pauses the deployment.
    pub fn paused(mut self) -> MachineDeployment {
        self.spec.paused = true;
        self
    }
}

impl MachineClass {
    /// A class for the `local` provider with an empty provider spec and a
    /// secret named `<name>-secret`.
    pub fn test(name: &str) -> MachineClass {
        let mut class = namespaced(MachineClass::new(name, "local", json!({})));
        class.secret_ref = Some(k8s_openapi::api::core::v1::SecretReference {
            name: Some(format!("{name}-secret")),
            namespace: Some(TEST_NAMESPACE.to_string()),
        });
        class
    }
}
