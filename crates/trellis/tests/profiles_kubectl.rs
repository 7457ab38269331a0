//! Cloud profiles end to end with kubectl against the real `trellis up`
//! binary (TLS, RBAC): capability admission of Shoot workers, rendering of
//! a NamespacedCloudProfile and its re-rendering when the parent changes,
//! the custom RBAC verbs, and parent protection.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{have, kubectl, start_command, stdout};
use serde_json::Value;

const PROFILE: &str = r#"
apiVersion: core.gardener.cloud/v1beta1
kind: CloudProfile
metadata:
  name: local
spec:
  type: local
  kubernetes:
    versions:
      - version: 1.31.2
        classification: supported
      - version: 1.30.5
        classification: supported
  machineCapabilities:
    - name: architecture
      values: [amd64, arm64]
    - name: hypervisorType
      values: [gen2, gen1]
  machineImages:
    - name: ubuntu
      updateStrategy: minor
      versions:
        - version: 1.0.0
          classification: supported
          capabilityFlavors:
            - architecture: [amd64]
              hypervisorType: [gen1]
            - architecture: [arm64]
              hypervisorType: [gen1]
        - version: 2.0.0
          classification: supported
          capabilityFlavors:
            - architecture: [amd64]
              hypervisorType: [gen2]
  machineTypes:
    - name: gen2-only
      cpu: "2"
      gpu: "0"
      memory: 4Gi
      usable: true
      architecture: amd64
      capabilities:
        architecture: [amd64]
        hypervisorType: [gen2]
  regions:
    - name: local
      zones: [{name: a}, {name: b}, {name: c}]
"#;

fn shoot(name: &str, image_version: &str) -> String {
    format!(
        r#"
apiVersion: core.gardener.cloud/v1beta1
kind: Shoot
metadata:
  name: {name}
  namespace: garden-dev
spec:
  cloudProfile: {{kind: CloudProfile, name: local}}
  region: local
  kubernetes: {{version: 1.31.2}}
  networking: {{type: calico, nodes: 10.250.0.0/16}}
  provider:
    type: local
    workers:
      - name: pool
        minimum: 1
        maximum: 2
        zones: [a]
        machine:
          type: gen2-only
          image: {{name: ubuntu, version: {image_version}}}
"#
    )
}

const NCP: &str = r#"
apiVersion: core.gardener.cloud/v1beta1
kind: NamespacedCloudProfile
metadata:
  name: dev
  namespace: garden-dev
spec:
  parent: {kind: CloudProfile, name: local}
  kubernetes:
    versions:
      - version: 1.30.5
        expirationDate: "2099-01-01T00:00:00Z"
"#;

/// kubectl apply with the manifest on stdin, optionally as another user.
fn apply(kc: &Path, manifest: &str, as_user: Option<&str>) -> Output {
    let mut cmd = Command::new("kubectl");
    cmd.arg("--kubeconfig").arg(kc).env_remove("KUBECONFIG");
    if let Some(u) = as_user {
        cmd.arg(format!("--as={u}"));
    }
    let mut child = cmd
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running kubectl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    eprintln!(
        "$ kubectl apply ({})\n{}{}",
        as_user.unwrap_or("admin"),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn get(kc: &Path, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    let out = kubectl(kc, &args);
    assert!(out.status.success(), "kubectl get {what:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Polls until `f` holds for the NCP (rendering is asynchronous).
fn wait_ncp(kc: &Path, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ncp = get(kc, &["namespacedcloudprofile", "dev", "-n", "garden-dev"]);
        if f(&ncp) {
            return ncp;
        }
        assert!(Instant::now() < deadline, "the NCP never {what}: {ncp:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn rendered_k8s(ncp: &Value) -> Vec<(String, String)> {
    ncp.pointer("/status/cloudProfileSpec/kubernetes/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .map(|v| {
                    (
                        v["version"].as_str().unwrap_or("").to_string(),
                        v["expirationDate"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn cloud_profiles_with_kubectl() {
    if !have("kubectl") {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let _up = start_command("up", data, &[]);
    let kc = data.join("admin.kubeconfig");
    assert!(
        kubectl(&kc, &["create", "namespace", "garden-dev"])
            .status
            .success()
    );
    let out = apply(&kc, PROFILE, None);
    assert!(out.status.success(), "the CloudProfile applies");

    // An image version whose flavors are all gen1 on a gen2-only type.
    let out = apply(&kc, &shoot("incompatible", "1.0.0"), None);
    assert!(!out.status.success(), "an incompatible worker is rejected");
    let err = stderr(&out);
    assert!(
        err.contains("spec.provider.workers[0].machine.image.version"),
        "{err}"
    );
    assert!(
        err.contains("hypervisorType"),
        "the message names the capability: {err}"
    );
    assert!(err.contains("gen1"), "and what the flavors offer: {err}");

    let out = apply(&kc, &shoot("compatible", "2.0.0"), None);
    assert!(out.status.success(), "a compatible worker is admitted");
    let s = get(&kc, &["shoot", "compatible", "-n", "garden-dev"]);
    assert_eq!(
        s.pointer("/spec/networking/type").and_then(Value::as_str),
        Some("calico"),
        "fields trellis does not model are kept: {s:#}"
    );
    assert_eq!(
        s.pointer("/spec/provider/workers/0/machine/architecture")
            .and_then(Value::as_str),
        Some("amd64"),
        "the pool's architecture is defaulted from its machine type"
    );

    // A hibernation schedule that is not a cron expression is rejected
    // with its field; a valid one is admitted.
    let bad = kubectl(
        &kc,
        &[
            "patch",
            "shoot",
            "compatible",
            "-n",
            "garden-dev",
            "--type=merge",
            "-p",
            r#"{"spec":{"hibernation":{"schedules":[{"start":"00 25 * * 1-5","location":"Europe/Berlin"}]}}}"#,
        ],
    );
    assert!(!bad.status.success(), "an invalid schedule is rejected");
    let err = stderr(&bad);
    assert!(
        err.contains("spec.hibernation.schedules[0].start") && err.contains("hour 25"),
        "{err}"
    );
    let good = kubectl(
        &kc,
        &[
            "patch",
            "shoot",
            "compatible",
            "-n",
            "garden-dev",
            "--type=merge",
            "-p",
            r#"{"spec":{"hibernation":{"schedules":[{"start":"00 17 * * 1-5","end":"00 08 * * 1-5","location":"Europe/Berlin"}]}}}"#,
        ],
    );
    assert!(good.status.success(), "{}", stderr(&good));

    // The CloudProfile's status classifies every version; it carries the
    // finalizer.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let cp = get(&kc, &["cloudprofile", "local"]);
        let classes: Vec<(String, String)> = cp
            .pointer("/status/kubernetes/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|v| {
                (
                    v["version"].as_str().unwrap_or("").to_string(),
                    v["classification"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        let finalized = cp
            .pointer("/metadata/finalizers")
            .is_some_and(|f| f == &serde_json::json!(["gardener"]));
        if finalized
            && classes
                == [
                    ("1.31.2".to_string(), "supported".to_string()),
                    ("1.30.5".to_string(), "supported".to_string()),
                ]
        {
            break;
        }
        assert!(Instant::now() < deadline, "CloudProfile status: {cp:#}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // The NCP renders into its status ...
    assert!(apply(&kc, NCP, None).status.success());
    let ncp = wait_ncp(&kc, "rendered", |n| !rendered_k8s(n).is_empty());
    assert_eq!(
        rendered_k8s(&ncp),
        [
            ("1.31.2".to_string(), String::new()),
            ("1.30.5".to_string(), "2099-01-01T00:00:00Z".to_string())
        ],
        "parent order, the override in place"
    );
    // ... and again when its parent changes.
    let grown = PROFILE.replace(
        "      - version: 1.30.5\n",
        "      - version: 1.29.9\n        classification: deprecated\n      - version: 1.30.5\n",
    );
    assert!(apply(&kc, &grown, None).status.success());
    wait_ncp(&kc, "re-rendered after its parent changed", |n| {
        rendered_k8s(n).iter().any(|(v, _)| v == "1.29.9")
    });

    // Removing a parent version the NCP overrides is rejected, naming it.
    let shrunk = grown.replace(
        "      - version: 1.30.5\n        classification: supported\n",
        "",
    );
    let out = apply(&kc, &shrunk, None);
    assert!(!out.status.success(), "parent protection");
    let err = stderr(&out);
    assert!(err.contains("garden-dev/dev"), "the NCP is named: {err}");
    assert!(err.contains("1.30.5"), "{err}");

    // Custom verbs: alice may edit NCPs but not modify-spec-machineimages.
    let rbac = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ncp-editor, namespace: garden-dev}
rules:
  - apiGroups: [core.gardener.cloud]
    resources: [namespacedcloudprofiles]
    verbs: [get, list, watch, create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-ncp-editor, namespace: garden-dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ncp-editor}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
"#;
    assert!(apply(&kc, rbac, None).status.success());
    let with_type = format!(
        "{NCP}  machineTypes:\n    - {{name: dev-large, cpu: \"8\", gpu: \"0\", memory: 32Gi, usable: true, architecture: amd64}}\n"
    );
    let out = apply(&kc, &with_type, Some("alice"));
    assert!(
        out.status.success(),
        "adding a machine type needs no custom verb"
    );
    let with_image = format!(
        "{with_type}  machineImages:\n    - name: ubuntu\n      versions:\n        - {{version: 3.0.0, classification: preview, capabilityFlavors: [{{architecture: [amd64], hypervisorType: [gen2]}}]}}\n"
    );
    let out = apply(&kc, &with_image, Some("alice"));
    assert!(
        !out.status.success(),
        "adding an image version needs the verb"
    );
    let err = stderr(&out);
    assert!(err.contains("modify-spec-machineimages"), "{err}");
    assert!(err.contains("spec.machineImages"), "{err}");

    let grant = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ncp-images, namespace: garden-dev}
rules:
  - apiGroups: [core.gardener.cloud]
    resources: [namespacedcloudprofiles]
    verbs: [modify-spec-machineimages]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-ncp-images, namespace: garden-dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ncp-images}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
"#;
    assert!(apply(&kc, grant, None).status.success());
    let out = apply(&kc, &with_image, Some("alice"));
    assert!(
        out.status.success(),
        "with the verb granted: {}",
        stderr(&out)
    );
    let ncp = wait_ncp(&kc, "rendered the new image version", |n| {
        n.pointer("/status/cloudProfileSpec/machineImages/0/versions")
            .and_then(Value::as_array)
            .is_some_and(|vs| vs.iter().any(|v| v["version"] == "3.0.0"))
    });
    assert!(
        stdout(&kubectl(&kc, &["get", "nscpfl", "-n", "garden-dev"])).contains("dev"),
        "the short name works: {ncp:#}"
    );
}
