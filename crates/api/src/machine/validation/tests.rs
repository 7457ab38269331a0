//! Table-driven tests of the validation rules: each case mutates a valid
//! fixture and lists the `(reason, field)` pairs it must produce.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{SecretReference, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use super::*;
use crate::machine::{
    InPlaceUpdateMachineDeployment, MachineClass, MachineDeployment, MachineDeploymentStrategy,
    MachineDeploymentStrategyType, MachineSet, NodeTemplate, OrchestrationType, RollbackConfig,
    RollingUpdateMachineDeployment, default_machine_deployment,
};

const INVALID: &str = "FieldValueInvalid";
const REQUIRED: &str = "FieldValueRequired";
const NOT_SUPPORTED: &str = "FieldValueNotSupported";
const FORBIDDEN: &str = "FieldValueForbidden";

type Case<T> = (
    &'static str,
    fn(&mut T),
    &'static [(&'static str, &'static str)],
);

fn run<T: Clone>(base: T, validate: fn(&T) -> Vec<Cause>, cases: &[Case<T>]) {
    assert_eq!(validate(&base), vec![], "the base fixture is valid");
    for (name, mutate, want) in cases {
        let mut obj = base.clone();
        mutate(&mut obj);
        let got: Vec<(String, String)> = validate(&obj)
            .into_iter()
            .map(|c| (c.reason, c.field))
            .collect();
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(r, f)| (r.to_string(), f.to_string()))
            .collect();
        assert_eq!(got, want, "case {name:?}");
    }
}

fn int(n: i32) -> Option<IntOrString> {
    Some(IntOrString::Int(n))
}

fn pct(s: &str) -> Option<IntOrString> {
    Some(IntOrString::String(s.to_string()))
}

fn rolling(
    md: &mut MachineDeployment,
    surge: Option<IntOrString>,
    unavailable: Option<IntOrString>,
) {
    md.spec.strategy = MachineDeploymentStrategy {
        type_: Some(MachineDeploymentStrategyType::RollingUpdate),
        rolling_update: Some(RollingUpdateMachineDeployment {
            max_surge: surge,
            max_unavailable: unavailable,
        }),
        in_place_update: None,
    };
}

fn in_place(md: &mut MachineDeployment, orchestration: Option<OrchestrationType>) {
    md.spec.strategy = MachineDeploymentStrategy {
        type_: Some(MachineDeploymentStrategyType::InPlaceUpdate),
        rolling_update: None,
        in_place_update: Some(InPlaceUpdateMachineDeployment {
            max_surge: int(0),
            max_unavailable: int(1),
            orchestration_type: orchestration,
        }),
    };
}

fn expression(key: &str, operator: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_string(),
        operator: operator.to_string(),
        values: values.map(|v| v.iter().map(|s| s.to_string()).collect()),
    }
}

fn set_expressions(selector: &mut Option<LabelSelector>, exprs: Vec<LabelSelectorRequirement>) {
    *selector = Some(LabelSelector {
        match_labels: None,
        match_expressions: Some(exprs),
    });
}

#[test]
fn machine() {
    let cases: &[Case<Machine>] = &[
        (
            "missing class",
            |m| m.spec.class = Default::default(),
            &[(REQUIRED, "spec.class.kind"), (REQUIRED, "spec.class.name")],
        ),
        (
            "bad class name",
            |m| m.spec.class.name = "Bad_Name".into(),
            &[(INVALID, "spec.class.name")],
        ),
        (
            "upper-case name",
            |m| m.metadata.name = Some("Machine-1".into()),
            &[(INVALID, "metadata.name")],
        ),
        (
            "name too long",
            |m| m.metadata.name = Some("a".repeat(254)),
            &[(INVALID, "metadata.name")],
        ),
        (
            "dotted name is a valid subdomain",
            |m| m.metadata.name = Some("a.b-c.d".into()),
            &[],
        ),
        (
            "no name at all",
            |m| m.metadata.name = None,
            &[(REQUIRED, "metadata.name")],
        ),
        (
            "generateName with a trailing dash",
            |m| {
                m.metadata.name = None;
                m.metadata.generate_name = Some("pool-abc-".into());
            },
            &[],
        ),
        (
            "bad generateName",
            |m| {
                m.metadata.name = None;
                m.metadata.generate_name = Some("-pool".into());
            },
            &[(INVALID, "metadata.generateName")],
        ),
        (
            "valid durations",
            |m| {
                let c = &mut m.spec.configuration;
                c.drain_timeout = Some("2h".into());
                c.health_timeout = Some("10m".into());
                c.creation_timeout = Some("1h30m".into());
                c.in_place_update_timeout = Some("500ms".into());
                c.machine_preserve_timeout = Some("0".into());
                c.max_evict_retries = Some(0);
            },
            &[],
        ),
        (
            "unparsable durations",
            |m| {
                m.spec.configuration.drain_timeout = Some("2 hours".into());
                m.spec.configuration.health_timeout = Some("10".into());
                m.spec.configuration.creation_timeout = Some("".into());
            },
            &[
                (INVALID, "spec.drainTimeout"),
                (INVALID, "spec.healthTimeout"),
                (INVALID, "spec.creationTimeout"),
            ],
        ),
        (
            "negative duration",
            |m| m.spec.configuration.machine_preserve_timeout = Some("-1h".into()),
            &[(INVALID, "spec.machinePreserveTimeout")],
        ),
        (
            "negative evict retries",
            |m| m.spec.configuration.max_evict_retries = Some(-1),
            &[(INVALID, "spec.maxEvictRetries")],
        ),
        (
            "taints need key and known effect",
            |m| {
                m.spec.node_template.spec.taints = Some(vec![
                    Taint {
                        key: "ok".into(),
                        effect: "NoSchedule".into(),
                        ..Default::default()
                    },
                    Taint {
                        key: "".into(),
                        effect: "".into(),
                        ..Default::default()
                    },
                    Taint {
                        key: "k".into(),
                        effect: "Sometimes".into(),
                        ..Default::default()
                    },
                ]);
            },
            &[
                (REQUIRED, "spec.nodeTemplate.spec.taints[1].key"),
                (REQUIRED, "spec.nodeTemplate.spec.taints[1].effect"),
                (NOT_SUPPORTED, "spec.nodeTemplate.spec.taints[2].effect"),
            ],
        ),
    ];
    run(Machine::test("m1"), validate_machine, cases);
}

#[test]
fn machine_set() {
    let cases: &[Case<MachineSet>] = &[
        (
            "negative replicas",
            |s| s.spec.replicas = -1,
            &[(INVALID, "spec.replicas")],
        ),
        ("zero replicas", |s| s.spec.replicas = 0, &[]),
        (
            "negative minReadySeconds",
            |s| s.spec.min_ready_seconds = -5,
            &[(INVALID, "spec.minReadySeconds")],
        ),
        (
            "negative auto-preserve max",
            |s| s.spec.auto_preserve_failed_machine_max = Some(-1),
            &[(INVALID, "spec.autoPreserveFailedMachineMax")],
        ),
        (
            "no selector",
            |s| s.spec.selector = None,
            &[(REQUIRED, "spec.selector")],
        ),
        (
            "empty selector",
            |s| s.spec.selector = Some(LabelSelector::default()),
            &[(REQUIRED, "spec.selector")],
        ),
        (
            "selector not matching the template",
            |s| {
                s.spec.selector.as_mut().unwrap().match_labels =
                    Some(BTreeMap::from([("name".into(), "other".into())]));
            },
            &[(INVALID, "spec.template.metadata.labels")],
        ),
        (
            "template without labels",
            |s| s.spec.template.metadata.labels = None,
            &[(INVALID, "spec.template.metadata.labels")],
        ),
        (
            "template class missing",
            |s| s.spec.template.spec.class.name.clear(),
            &[(REQUIRED, "spec.template.spec.class.name")],
        ),
        (
            "template duration invalid",
            |s| {
                s.spec.template.spec.configuration.creation_timeout = Some("soon".into());
            },
            &[(INVALID, "spec.template.spec.creationTimeout")],
        ),
        (
            "matching expressions",
            |s| {
                set_expressions(
                    &mut s.spec.selector,
                    vec![
                        expression("name", "In", Some(&["ms1", "other"])),
                        expression("zone", "NotIn", Some(&["a"])),
                        expression("name", "Exists", None),
                        expression("gone", "DoesNotExist", None),
                    ],
                )
            },
            &[],
        ),
        (
            "expression that does not match",
            |s| {
                set_expressions(
                    &mut s.spec.selector,
                    vec![expression("name", "NotIn", Some(&["ms1"]))],
                )
            },
            &[(INVALID, "spec.template.metadata.labels")],
        ),
        (
            "malformed expressions",
            |s| {
                set_expressions(
                    &mut s.spec.selector,
                    vec![
                        expression("name", "In", None),
                        expression("name", "Exists", Some(&["x"])),
                        expression("name", "Like", Some(&["x"])),
                        expression("", "Exists", None),
                    ],
                )
            },
            &[
                (REQUIRED, "spec.selector.matchExpressions[0].values"),
                (FORBIDDEN, "spec.selector.matchExpressions[1].values"),
                (NOT_SUPPORTED, "spec.selector.matchExpressions[2].operator"),
                (REQUIRED, "spec.selector.matchExpressions[3].key"),
            ],
        ),
    ];
    run(MachineSet::test("ms1"), validate_machine_set, cases);
}

#[test]
fn machine_deployment() {
    let cases: &[Case<MachineDeployment>] = &[
        (
            "negative replicas",
            |d| d.spec.replicas = -3,
            &[(INVALID, "spec.replicas")],
        ),
        (
            "recreate",
            |d| {
                d.spec.strategy = MachineDeploymentStrategy {
                    type_: Some(MachineDeploymentStrategyType::Recreate),
                    ..Default::default()
                }
            },
            &[],
        ),
        (
            "no strategy type",
            |d| d.spec.strategy.type_ = None,
            &[(REQUIRED, "spec.strategy.type")],
        ),
        (
            "rolling update without parameters",
            |d| d.spec.strategy.rolling_update = None,
            &[(REQUIRED, "spec.strategy.rollingUpdate")],
        ),
        (
            "missing bounds",
            |d| rolling(d, None, None),
            &[
                (REQUIRED, "spec.strategy.rollingUpdate.maxSurge"),
                (REQUIRED, "spec.strategy.rollingUpdate.maxUnavailable"),
            ],
        ),
        ("percentages", |d| rolling(d, pct("25%"), pct("100%")), &[]),
        (
            "surge above 100% is allowed",
            |d| rolling(d, pct("200%"), int(0)),
            &[],
        ),
        (
            "both zero is rejected: the rollout could never make progress",
            |d| rolling(d, int(0), pct("0%")),
            &[(INVALID, "spec.strategy.rollingUpdate.maxUnavailable")],
        ),
        (
            "zero surge with some unavailability is fine",
            |d| rolling(d, int(0), int(1)),
            &[],
        ),
        (
            "unavailable above 100%",
            |d| rolling(d, int(1), pct("101%")),
            &[(INVALID, "spec.strategy.rollingUpdate.maxUnavailable")],
        ),
        (
            "negative counts",
            |d| rolling(d, int(-1), int(-2)),
            &[
                (INVALID, "spec.strategy.rollingUpdate.maxSurge"),
                (INVALID, "spec.strategy.rollingUpdate.maxUnavailable"),
            ],
        ),
        (
            "malformed percentages",
            |d| rolling(d, pct("25"), pct("-5%")),
            &[
                (INVALID, "spec.strategy.rollingUpdate.maxSurge"),
                (INVALID, "spec.strategy.rollingUpdate.maxUnavailable"),
            ],
        ),
        (
            "more malformed percentages",
            |d| rolling(d, pct("%"), pct("1.5%")),
            &[
                (INVALID, "spec.strategy.rollingUpdate.maxSurge"),
                (INVALID, "spec.strategy.rollingUpdate.maxUnavailable"),
            ],
        ),
        (
            "in-place update",
            |d| in_place(d, Some(OrchestrationType::Auto)),
            &[],
        ),
        (
            "in-place update without orchestration",
            |d| in_place(d, None),
            &[(REQUIRED, "spec.strategy.inPlaceUpdate.orchestrationType")],
        ),
        (
            "in-place type without parameters",
            |d| {
                d.spec.strategy = MachineDeploymentStrategy {
                    type_: Some(MachineDeploymentStrategyType::InPlaceUpdate),
                    ..Default::default()
                }
            },
            &[(REQUIRED, "spec.strategy.inPlaceUpdate")],
        ),
        (
            "negative history, deadline, rollback, preserve",
            |d| {
                d.spec.revision_history_limit = Some(-1);
                d.spec.progress_deadline_seconds = Some(-1);
                d.spec.rollback_to = Some(RollbackConfig { revision: -1 });
                d.spec.auto_preserve_failed_machine_max = Some(-1);
            },
            &[
                (INVALID, "spec.revisionHistoryLimit"),
                (INVALID, "spec.progressDeadlineSeconds"),
                (INVALID, "spec.rollbackTo.revision"),
                (INVALID, "spec.autoPreserveFailedMachineMax"),
            ],
        ),
        (
            "zero history and rollback to last",
            |d| {
                d.spec.revision_history_limit = Some(0);
                d.spec.rollback_to = Some(RollbackConfig { revision: 0 });
            },
            &[],
        ),
        (
            "selector mismatch",
            |d| {
                d.spec.template.metadata.labels =
                    Some(BTreeMap::from([("name".into(), "other".into())]));
            },
            &[(INVALID, "spec.template.metadata.labels")],
        ),
        (
            "template class kind missing",
            |d| d.spec.template.spec.class.kind.clear(),
            &[(REQUIRED, "spec.template.spec.class.kind")],
        ),
    ];
    run(
        MachineDeployment::test("md1"),
        validate_machine_deployment,
        cases,
    );
}

#[test]
fn defaulting_makes_a_bare_deployment_valid() {
    let mut md = MachineDeployment::test("md1");
    md.spec.strategy = MachineDeploymentStrategy::default();
    assert_eq!(
        validate_machine_deployment(&md)
            .into_iter()
            .map(|c| c.field)
            .collect::<Vec<_>>(),
        vec!["spec.strategy.type"]
    );
    default_machine_deployment(&mut md);
    assert_eq!(validate_machine_deployment(&md), vec![]);
}

#[test]
fn machine_class() {
    fn complete_template() -> NodeTemplate {
        NodeTemplate {
            capacity: ["cpu", "gpu", "memory"]
                .into_iter()
                .map(|r| (r.to_string(), Quantity("1".into())))
                .collect(),
            instance_type: "small".into(),
            region: "local-1".into(),
            zone: "local-1a".into(),
            ..NodeTemplate::default()
        }
    }
    let cases: &[Case<MachineClass>] = &[
        (
            "no provider spec",
            |c| c.provider_spec = serde_json::Value::Null,
            &[(REQUIRED, "providerSpec")],
        ),
        (
            "provider spec not an object",
            |c| c.provider_spec = json!([1, 2]),
            &[(INVALID, "providerSpec")],
        ),
        (
            "bad name",
            |c| c.metadata.name = Some("Class".into()),
            &[(INVALID, "metadata.name")],
        ),
        (
            "secret refs without names",
            |c| {
                c.secret_ref = Some(SecretReference::default());
                c.credentials_secret_ref = Some(SecretReference {
                    name: Some("Bad".into()),
                    namespace: None,
                });
            },
            &[
                (REQUIRED, "secretRef.name"),
                (INVALID, "credentialsSecretRef.name"),
            ],
        ),
        ("no secret refs at all", |c| c.secret_ref = None, &[]),
        (
            "complete node template",
            |c| c.node_template = Some(complete_template()),
            &[],
        ),
        (
            "incomplete node template",
            |c| {
                let mut t = complete_template();
                t.capacity.remove("gpu");
                t.zone.clear();
                c.node_template = Some(t);
            },
            &[
                (REQUIRED, "nodeTemplate.capacity[gpu]"),
                (REQUIRED, "nodeTemplate.zone"),
            ],
        ),
        (
            "empty node template",
            |c| c.node_template = Some(NodeTemplate::default()),
            &[
                (REQUIRED, "nodeTemplate.capacity[cpu]"),
                (REQUIRED, "nodeTemplate.capacity[gpu]"),
                (REQUIRED, "nodeTemplate.capacity[memory]"),
                (REQUIRED, "nodeTemplate.instanceType"),
                (REQUIRED, "nodeTemplate.region"),
                (REQUIRED, "nodeTemplate.zone"),
            ],
        ),
    ];
    run(MachineClass::test("class1"), validate_machine_class, cases);
}

#[test]
fn messages_read_like_kubernetes() {
    let md = MachineDeployment::test("md1").replicas(-1);
    let causes = validate_machine_deployment(&md);
    assert_eq!(
        causes[0].message,
        "Invalid value: -1: must be greater than or equal to 0"
    );
    let mut md = MachineDeployment::test("md1");
    md.spec.strategy.type_ = None;
    assert_eq!(
        validate_machine_deployment(&md)[0].message,
        "Required value: supported values: \"Recreate\", \"RollingUpdate\", \"InPlaceUpdate\""
    );
    let err = apimachinery::ApiError::invalid(
        crate::API_GROUP,
        "MachineDeployment",
        "md1",
        validate_machine_deployment(&MachineDeployment::test("md1").replicas(-1)),
    );
    assert_eq!(
        err.message,
        "MachineDeployment.machine.sapcloud.io \"md1\" is invalid: spec.replicas: \
         Invalid value: -1: must be greater than or equal to 0"
    );
}

#[test]
fn percent_parsing() {
    let cases: &[(&str, Option<u32>)] = &[
        ("0%", Some(0)),
        ("25%", Some(25)),
        ("100%", Some(100)),
        ("250%", Some(250)),
        ("25", None),
        ("%", None),
        ("-1%", None),
        ("1.5%", None),
        (" 5%", None),
        ("99999999999%", None),
    ];
    for (input, want) in cases {
        assert_eq!(parse_percent(input), *want, "{input:?}");
    }
}
