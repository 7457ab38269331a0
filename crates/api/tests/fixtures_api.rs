//! The test-fixture builders produce valid objects that say what they mean.

use api::testing::{Fixture, TEST_CLASS, TEST_NAMESPACE};
use api::{
    Machine, MachineClass, MachineDeployment, MachineDeploymentStrategyType, MachinePhase,
    MachineSet, labels, validate_machine, validate_machine_class, validate_machine_deployment,
    validate_machine_set,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

#[test]
fn fixtures_are_valid() {
    assert_eq!(validate_machine(&Machine::test("m1")), vec![]);
    assert_eq!(
        validate_machine_set(&MachineSet::test("ms1").replicas(3)),
        vec![]
    );
    assert_eq!(
        validate_machine_deployment(&MachineDeployment::test("md1").replicas(3)),
        vec![]
    );
    assert_eq!(
        validate_machine_class(&MachineClass::test(TEST_CLASS)),
        vec![]
    );
}

#[test]
fn machine_builders() {
    let set = MachineSet::test("ms1").with_uid("uid-1");
    let m = Machine::test("m1")
        .running()
        .with_node("node-1")
        .provider_id("local:///m1")
        .owned_by(&set)
        .annotation(labels::MACHINE_PRIORITY, "1")
        .in_namespace("shoot");
    assert_eq!(m.phase(), Some(MachinePhase::Running));
    let labels_of = m.metadata.labels.clone().unwrap();
    assert_eq!(labels_of[labels::NODE], "node-1");
    assert_eq!(labels_of["name"], "ms1");
    let owner = &m.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("MachineSet", "uid-1")
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(m.metadata.namespace.as_deref(), Some("shoot"));
    assert_eq!(m.spec.class.name, TEST_CLASS);
    assert_eq!(Machine::test("m2").class("other").spec.class.name, "other");
    assert_eq!(
        Machine::test("m3").metadata.namespace.as_deref(),
        Some(TEST_NAMESPACE)
    );
}

#[test]
fn deployment_builders() {
    let md = MachineDeployment::test("md1").rolling("25%", "0").paused();
    let rolling = md.spec.strategy.rolling_update.as_ref().unwrap();
    assert_eq!(rolling.max_surge, Some(IntOrString::String("25%".into())));
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(0)));
    assert!(md.spec.paused);
    let md = MachineDeployment::test("md1").recreate().class("c2");
    assert_eq!(
        md.spec.strategy.type_,
        Some(MachineDeploymentStrategyType::Recreate)
    );
    assert_eq!(md.spec.template.spec.class.name, "c2");
    assert_eq!(validate_machine_deployment(&md), vec![]);
}
