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

/// A machine object created where no machine controller runs is admitted,
/// but kubectl prints a warning that says so and what to do; once a
/// controller's heartbeat Lease is there, the warning is gone.
#[test]
fn creating_in_a_namespace_nobody_serves_warns() {
    if !have("kubectl") {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // `trellis server` alone runs no machine controllers.
    let _server = start(&data, &[]);
    let kc = data.join("admin.kubeconfig");
    let out = kubectl(&kc, &["create", "namespace", "team-a"]);
    assert!(out.status.success());
    // The fixtures name namespace default: the same objects in team-a.
    let in_team_a = |name: &str| {
        let yaml = std::fs::read_to_string(fixture(name))
            .unwrap()
            .replace("namespace: default", "namespace: team-a");
        let path = dir.path().join(name);
        std::fs::write(&path, yaml).unwrap();
        path
    };
    let class = in_team_a("machine-class.yaml");
    let out = kubectl(&kc, &["apply", "-f", class.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Warning: no machine controller serves namespace \"team-a\"")
            && stderr.contains("trellis controller-manager --namespace team-a"),
        "no warning in: {stderr}"
    );
    // A controller serving team-a renews its heartbeat there.
    let now = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let lease = format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: machine-controller-manager-heartbeat\n  namespace: team-a\nspec:\n  holderIdentity: test\n  leaseDurationSeconds: 60\n  renewTime: \"{now}\"\n"
    );
    let lease_file = dir.path().join("lease.yaml");
    std::fs::write(&lease_file, lease).unwrap();
    let out = kubectl(&kc, &["apply", "-f", lease_file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deployment = fixture("machine-deployment.yaml");
    let out = kubectl(
        &kc,
        &["apply", "-n", "team-a", "-f", deployment.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("Warning"),
        "a served namespace warned: {stderr}"
    );
}
