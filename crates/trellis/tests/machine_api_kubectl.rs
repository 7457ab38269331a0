//! Upstream-style machine.sapcloud.io YAML (the examples of seed 003
//! §2.9–2.12, with a `local` MachineClass) applies unchanged with the real
//! kubectl against a real `trellis server`, shows the upstream printer
//! columns, and invalid objects are refused with 422 and field causes.

mod common;

use std::path::Path;

use common::*;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../api/tests/fixtures")
        .join(name)
}

#[test]
fn upstream_yaml_applies_and_invalid_objects_are_refused() {
    if !have("kubectl") || !have("curl") {
        eprintln!("SKIPPED: kubectl or curl is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let _server = start(&data, &[]);
    let kc = data.join("admin.kubeconfig");
    let cache = dir.path().join("kube-cache");
    let cache = cache.to_str().unwrap();
    for f in [
        "machine-class.yaml",
        "machine.yaml",
        "machine-set.yaml",
        "machine-deployment.yaml",
    ] {
        let out = kubectl(
            &kc,
            &[
                "--cache-dir",
                cache,
                "apply",
                "-n",
                "default",
                "-f",
                fixture(f).to_str().unwrap(),
            ],
        );
        assert!(
            out.status.success(),
            "kubectl apply -f {f} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The FAQ's pause is a partial object: applied as a merge patch.
    let paused = std::fs::read_to_string(fixture("machine-deployment-paused.yaml")).unwrap();
    assert!(paused.contains("paused: true"));
    let out = kubectl(
        &kc,
        &[
            "--cache-dir",
            cache,
            "patch",
            "mcd",
            "test-machine-deployment",
            "-n",
            "default",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"paused":true}}"#,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Upstream's short names and printer columns.
    let out = kubectl(&kc, &["--cache-dir", cache, "get", "mcd", "-n", "default"]);
    assert!(out.status.success());
    let table = stdout(&out);
    for col in ["NAME", "READY", "DESIRED", "UP-TO-DATE", "AVAILABLE", "AGE"] {
        assert!(table.contains(col), "missing column {col}:\n{table}");
    }
    assert!(table.contains("test-machine-deployment"), "{table}");
    let out = kubectl(
        &kc,
        &[
            "--cache-dir",
            cache,
            "get",
            "mcc,mc,mcs",
            "-n",
            "default",
            "-o",
            "name",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout(&out).lines().count(), 3, "{}", stdout(&out));
    let out = kubectl(
        &kc,
        &[
            "--cache-dir",
            cache,
            "explain",
            "machinedeployments.spec.strategy",
        ],
    );
    assert!(
        out.status.success() && stdout(&out).contains("rollingUpdate"),
        "{}",
        stdout(&out)
    );

    // Invalid: negative replicas, selector not matching the template, and
    // maxSurge = maxUnavailable = 0.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        r#"apiVersion: machine.sapcloud.io/v1alpha1
kind: MachineDeployment
metadata:
  name: bad
  namespace: default
spec:
  replicas: -1
  selector:
    matchLabels:
      app: one
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 0, maxUnavailable: 0}
  template:
    metadata:
      labels:
        app: other
    spec:
      class:
        kind: MachineClass
        name: test-mc-v1
"#,
    )
    .unwrap();
    let out = kubectl(
        &kc,
        &["--cache-dir", cache, "apply", "-f", bad.to_str().unwrap()],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("is invalid"), "{err}");
    for field in [
        "spec.replicas",
        "spec.strategy.rollingUpdate.maxUnavailable",
        "spec.template.metadata.labels",
    ] {
        assert!(err.contains(field), "no cause for {field}: {err}");
    }
    // The same through the raw API: a 422 Status with causes.
    let out = kubectl(
        &kc,
        &[
            "--cache-dir",
            cache,
            "create",
            "-f",
            bad.to_str().unwrap(),
            "-o",
            "json",
            "-v=6",
        ],
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("422"), "{all}");
    let out = kubectl(
        &kc,
        &["--cache-dir", cache, "get", "mcd", "bad", "-n", "default"],
    );
    assert!(!out.status.success(), "the invalid object must not exist");
}
