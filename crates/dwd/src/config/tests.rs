//! Table tests of the config files: upstream's examples parse unchanged,
//! defaults are upstream's, and every invalid field is named.

use super::*;

/// `example/01-dwd-prober-configmap.yaml`'s `dep-config.yaml`, verbatim.
pub const UPSTREAM_PROBER_EXAMPLE: &str = r#"kubeConfigSecretName: "dwd-api-server-probe-secret"
kcmNodeMonitorGraceDuration: 40s
nodeLeaseFailureFraction: 0.6
dependentResourceInfos:
  - ref:
      kind: "Deployment"
      name: "kube-controller-manager"
      apiVersion: "apps/v1"
    optional: false
    scaleUp:
      level: 0
    scaleDown:
      level: 1
  - ref:
      kind: "Deployment"
      name: "machine-controller-manager"
      apiVersion: "apps/v1"
    optional: false
    scaleUp:
      level: 1
      initialDelay: 30s
    scaleDown:
      level: 0
  - ref:
      kind: "Deployment"
      name: "cluster-autoscaler"
      apiVersion: "apps/v1"
    optional: true
    scaleUp:
      level: 2
    scaleDown:
      level: 0
"#;

/// `example/02-dwd-weeder-configmap.yaml`'s `dep-config.yaml`, verbatim.
pub const UPSTREAM_WEEDER_EXAMPLE: &str = r#"watchDuration: 5m0s
servicesAndDependantSelectors:
  etcd-main-client:
    podSelectors:
      - matchExpressions:
          - key: gardener.cloud/role
            operator: In
            values:
              - controlplane
          - key: role
            operator: In
            values:
              - apiserver
  kube-apiserver:
    podSelectors:
      - matchExpressions:
          - key: gardener.cloud/role
            operator: In
            values:
              - controlplane
          - key: role
            operator: NotIn
            values:
              - main
              - apiserver
"#;

#[test]
fn the_upstream_prober_example_parses_with_upstream_defaults() {
    let c = ProberConfig::from_yaml(UPSTREAM_PROBER_EXAMPLE).expect("parses");
    assert_eq!(c.kube_config_secret_name, "dwd-api-server-probe-secret");
    assert_eq!(c.probe_interval, Duration::from_secs(10));
    assert_eq!(c.initial_delay, Duration::from_secs(30));
    assert_eq!(c.probe_timeout, Duration::from_secs(30));
    assert_eq!(c.backoff_jitter_factor, 0.2);
    assert_eq!(c.kcm_node_monitor_grace_duration, Duration::from_secs(40));
    assert_eq!(c.node_lease_failure_fraction, 0.6);
    let names: Vec<_> = c
        .dependent_resource_infos
        .iter()
        .map(|d| (d.reference.name.as_str(), d.optional))
        .collect();
    assert_eq!(
        names,
        [
            ("kube-controller-manager", false),
            ("machine-controller-manager", false),
            ("cluster-autoscaler", true)
        ]
    );
    let mcm = &c.dependent_resource_infos[1];
    assert_eq!(mcm.scale_up.level, 1);
    assert_eq!(mcm.scale_up.initial_delay, Duration::from_secs(30));
    assert_eq!(mcm.scale_up.timeout, Duration::from_secs(30));
    assert_eq!(mcm.scale_down.level, 0);
    assert_eq!(mcm.scale_down.initial_delay, Duration::ZERO);
    assert_eq!(mcm.reference.group_version(), ("apps", "v1"));
}

#[test]
fn the_upstream_weeder_example_parses() {
    let c = WeederConfig::from_yaml(UPSTREAM_WEEDER_EXAMPLE).expect("parses");
    assert_eq!(c.watch_duration, Duration::from_secs(300));
    let etcd = &c.services_and_dependant_selectors["etcd-main-client"];
    assert_eq!(etcd.len(), 1);
    assert_eq!(
        etcd[0].query().as_deref(),
        Some("gardener.cloud/role in (controlplane),role in (apiserver)")
    );
    let kapi = &c.services_and_dependant_selectors["kube-apiserver"];
    assert_eq!(
        kapi[0].query().as_deref(),
        Some("gardener.cloud/role in (controlplane),role notin (apiserver,main)")
    );
}

#[test]
fn invalid_prober_configs_name_every_problem() {
    let one = |extra: &str| {
        format!(
            "kubeConfigSecretName: s\ndependentResourceInfos:\n- ref: {{apiVersion: apps/v1, kind: Deployment, name: a}}\n  scaleUp: {{level: 0}}\n  scaleDown: {{level: 0}}\n{extra}"
        )
    };
    // (name, file, a fragment every expected problem message contains)
    let table: Vec<(&str, String, Vec<&str>)> = vec![
        ("valid", one(""), vec![]),
        (
            "blank secret name",
            one("").replace("kubeConfigSecretName: s", "kubeConfigSecretName: ' '"),
            vec!["kubeConfigSecretName"],
        ),
        (
            "no dependants",
            "kubeConfigSecretName: s\n".into(),
            vec!["dependentResourceInfos: must not be empty"],
        ),
        (
            "scaleUp and scaleDown both required",
            "kubeConfigSecretName: s\ndependentResourceInfos:\n- ref: {apiVersion: apps/v1, kind: Deployment, name: a}\n".into(),
            vec!["scaleUp: required", "scaleDown: required"],
        ),
        (
            "ref required",
            "kubeConfigSecretName: s\ndependentResourceInfos:\n- scaleUp: {level: 0}\n  scaleDown: {level: 0}\n".into(),
            vec!["ref: required"],
        ),
        (
            "bad apiVersion",
            one("").replace("apps/v1", "apps/v1/x"),
            vec!["ref.apiVersion"],
        ),
        (
            "kcm grace 0",
            one("kcmNodeMonitorGraceDuration: 0s\n"),
            vec!["kcmNodeMonitorGraceDuration: must not be 0"],
        ),
        (
            "bad duration",
            one("probeTimeout: soon\n"),
            vec!["probeTimeout"],
        ),
        (
            "negative duration",
            one("initialDelay: -5s\n"),
            vec!["initialDelay"],
        ),
        (
            "zero interval",
            one("probeInterval: 0s\n"),
            vec!["probeInterval"],
        ),
    ];
    for (name, yaml, expected) in table {
        match ProberConfig::from_yaml(&yaml) {
            Ok(_) => assert!(expected.is_empty(), "{name}: accepted"),
            Err(ConfigError::Invalid(problems)) => {
                assert_eq!(problems.len(), expected.len(), "{name}: {problems:?}");
                for e in expected {
                    assert!(
                        problems.iter().any(|p| p.contains(e)),
                        "{name}: {e:?} not in {problems:?}"
                    );
                }
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

#[test]
fn prober_config_syntax_errors_and_unknown_keys() {
    assert!(matches!(
        ProberConfig::from_yaml("dependentResourceInfos: [unclosed"),
        Err(ConfigError::Syntax(_))
    ));
    // An older upstream file (two secret names) has unknown keys, which are
    // ignored, and lacks kubeConfigSecretName, which is not.
    let old = UPSTREAM_PROBER_EXAMPLE.replace(
        "kubeConfigSecretName: \"dwd-api-server-probe-secret\"",
        "internalKubeConfigSecretName: a\nexternalKubeConfigSecretName: b",
    );
    assert_eq!(
        ProberConfig::from_yaml(&old),
        Err(ConfigError::Invalid(vec![
            "kubeConfigSecretName: must not be blank".into()
        ]))
    );
}

#[test]
fn weeder_configs() {
    // (name, file, Ok(watch seconds) or a fragment of the problem)
    let table: Vec<(&str, &str, Result<u64, &str>)> = vec![
        (
            "default watch duration",
            "servicesAndDependantSelectors:\n  s:\n    podSelectors:\n    - matchLabels: {role: apiserver}\n",
            Ok(300),
        ),
        (
            "watch duration set",
            "watchDuration: 2m\nservicesAndDependantSelectors:\n  s:\n    podSelectors:\n    - {}\n",
            Ok(120),
        ),
        (
            "no services",
            "watchDuration: 2m\n",
            Err("servicesAndDependantSelectors"),
        ),
        (
            "no selectors",
            "servicesAndDependantSelectors:\n  s:\n    podSelectors: []\n",
            Err("podSelectors: must not be empty"),
        ),
        (
            "invalid selector",
            "servicesAndDependantSelectors:\n  s:\n    podSelectors:\n    - matchExpressions: [{key: a, operator: Sometimes}]\n",
            Err("podSelectors[0]"),
        ),
        (
            "bad watch duration",
            "watchDuration: forever\nservicesAndDependantSelectors:\n  s:\n    podSelectors:\n    - {}\n",
            Err("watchDuration"),
        ),
    ];
    for (name, yaml, want) in table {
        match (WeederConfig::from_yaml(yaml), want) {
            (Ok(c), Ok(secs)) => assert_eq!(c.watch_duration.as_secs(), secs, "{name}"),
            (Err(ConfigError::Invalid(p)), Err(fragment)) => {
                assert!(p.iter().any(|p| p.contains(fragment)), "{name}: {p:?}")
            }
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn a_null_pod_selector_matches_nothing_and_an_empty_one_everything() {
    let c = WeederConfig::from_yaml(
        "servicesAndDependantSelectors:\n  s:\n    podSelectors:\n    - null\n    - {}\n",
    )
    .expect("parses");
    let s = &c.services_and_dependant_selectors["s"];
    assert_eq!(s[0].query(), None);
    assert_eq!(s[1].query().as_deref(), Some(""));
}
