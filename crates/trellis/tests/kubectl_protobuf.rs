//! kubectl's typed commands against the real `trellis server`: `create
//! namespace|configmap|secret|serviceaccount|deployment|role|rolebinding|
//! clusterrole|clusterrolebinding|pdb|service`, `expose`, `debug node` and
//! `drain --disable-eviction` send their bodies as
//! `application/vnd.kubernetes.protobuf`; the server must store the same
//! objects a JSON client would have created. `run` and the eviction of
//! `drain` send JSON and are checked alongside.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{READY_TIMEOUT, Running, free_port, have, run};
use serde_json::{Value, json};

/// Starts `trellis server` on `data` (TLS, the default) and waits until
/// kubectl with the admin kubeconfig it writes can list namespaces.
fn start(data: &Path) -> Running {
    for _ in 0..3 {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_trellis"))
            .arg("server")
            .arg("--data-dir")
            .arg(data)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env("TRELLIS_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawning trellis server");
        let mut running = Running { child, port };
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if running.child.try_wait().expect("polling").is_some() {
                break; // the port was taken; try another
            }
            let kc = data.join("admin.kubeconfig");
            if kc.exists()
                && std::fs::read_to_string(&kc).is_ok_and(|s| s.contains(&format!(":{port}")))
            {
                let out = Command::new("kubectl")
                    .arg("--kubeconfig")
                    .arg(&kc)
                    .args(["get", "--raw", "/readyz"])
                    .env_remove("KUBECONFIG")
                    .output()
                    .expect("running kubectl");
                if out.status.success() {
                    return running;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = running.child.kill();
    }
    panic!("trellis server did not become ready");
}

/// Runs kubectl with the admin kubeconfig (and a private discovery cache).
struct Kubectl<'a> {
    data: &'a Path,
}

impl Kubectl<'_> {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(self.data.join("admin.kubeconfig"))
            .arg("--cache-dir")
            .arg(self.data.join("kubectl-cache"))
            .args(args)
            .env_remove("KUBECONFIG");
        c
    }

    fn try_run(&self, args: &[&str]) -> Output {
        run(&mut self.cmd(args))
    }

    /// Runs a command that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.try_run(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Feeds `obj` to `kubectl <args> -f -`.
    fn with_stdin(&self, args: &[&str], obj: &Value) {
        use std::io::Write as _;
        let mut child = self
            .cmd(args)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning kubectl");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(obj.to_string().as_bytes())
            .expect("writing stdin");
        let out = child.wait_with_output().expect("waiting for kubectl");
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn get(&self, what: &[&str]) -> Value {
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        args.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&args)).expect("kubectl printed JSON")
    }

    fn gone(&self, what: &[&str]) -> bool {
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        let out = self.try_run(&args);
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound")
    }
}

#[test]
fn typed_kubectl_commands_send_protobuf_and_work() {
    if !have("kubectl") {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let _server = start(&data);
    let k = Kubectl { data: &data };
    let ns = ["-n", "pb"];

    k.ok(&["create", "namespace", "pb"]);
    let obj = k.get(&["namespace", "pb"]);
    assert_eq!(obj["status"]["phase"], "Active");
    assert_eq!(
        obj["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "pb"
    );

    // ConfigMap with text and binary data.
    let bin = dir.path().join("bin.dat");
    std::fs::write(&bin, b"\x00\x01\xff").unwrap();
    let from_file = format!("--from-file=blob={}", bin.display());
    k.ok(&[
        "create",
        "configmap",
        "cm",
        "--from-literal=a=b",
        &from_file,
        "-n",
        "pb",
    ]);
    let obj = k.get(&["configmap", "cm", "-n", "pb"]);
    assert_eq!(obj["data"], json!({"a": "b"}));
    assert_eq!(obj["binaryData"], json!({"blob": "AAH/"}));

    k.ok(&[
        "create",
        "secret",
        "generic",
        "s",
        "--from-literal=user=admin",
        "-n",
        "pb",
    ]);
    assert_eq!(
        k.get(&["secret", "s", "-n", "pb"])["data"],
        json!({"user": "YWRtaW4="})
    );

    k.ok(&["create", "serviceaccount", "sa", "-n", "pb"]);
    assert_eq!(
        k.get(&["serviceaccount", "sa", "-n", "pb"])["metadata"]["name"],
        "sa"
    );
    // TokenRequest goes through the identity endpoints' protobuf reader.
    assert!(
        k.ok(&["create", "token", "sa", "-n", "pb"])
            .starts_with("ey")
    );

    k.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.25",
        "--replicas=2",
        "--port=80",
        "-n",
        "pb",
    ]);
    let obj = k.get(&["deployment", "web", "-n", "pb"]);
    assert_eq!(obj["spec"]["replicas"], 2);
    assert_eq!(
        obj["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    let c = &obj["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "nginx:1.25");
    // kube defaults the port protocol.
    assert_eq!(
        c["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    assert_eq!(
        obj["spec"]["template"]["metadata"]["labels"],
        json!({"app": "web"})
    );

    k.ok(&[
        "create",
        "role",
        "r",
        "--verb=get,list",
        "--resource=pods,configmaps",
        "-n",
        "pb",
    ]);
    assert_eq!(
        k.get(&["role", "r", "-n", "pb"])["rules"],
        json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "configmaps"]}])
    );
    k.ok(&[
        "create",
        "rolebinding",
        "rb",
        "--role=r",
        "--serviceaccount=pb:sa",
        "-n",
        "pb",
    ]);
    let obj = k.get(&["rolebinding", "rb", "-n", "pb"]);
    assert_eq!(
        obj["subjects"],
        json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "pb"}])
    );
    assert_eq!(
        obj["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"})
    );
    // The binding took effect: the ServiceAccount may now list pods.
    assert_eq!(
        k.ok(&[
            "auth",
            "can-i",
            "list",
            "pods",
            "--as=system:serviceaccount:pb:sa",
            "-n",
            "pb"
        ])
        .trim(),
        "yes"
    );
    k.ok(&[
        "create",
        "clusterrole",
        "pb-health",
        "--verb=get",
        "--non-resource-url=/healthz",
    ]);
    assert_eq!(
        k.get(&["clusterrole", "pb-health"])["rules"],
        json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}])
    );
    k.ok(&[
        "create",
        "clusterrolebinding",
        "pb-health",
        "--clusterrole=pb-health",
        "--group=devs",
    ]);
    assert_eq!(
        k.get(&["clusterrolebinding", "pb-health"])["subjects"],
        json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"}])
    );

    // `auth reconcile` creates, then updates (PUT), RBAC objects in protobuf.
    let reconcile = dir.path().join("rbac.json");
    let role = |verbs: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "pb-reconciled"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}]})
    };
    for verbs in [json!(["get"]), json!(["get", "list"])] {
        std::fs::write(&reconcile, role(verbs).to_string()).unwrap();
        k.ok(&["auth", "reconcile", "-f", reconcile.to_str().unwrap()]);
    }
    let rules = k.get(&["clusterrole", "pb-reconciled"])["rules"].clone();
    let verbs: Vec<&Value> = rules
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["verbs"].as_array().unwrap())
        .collect();
    assert_eq!(verbs, [&json!("get"), &json!("list")], "{rules}");

    k.ok(&[
        "create",
        "pdb",
        "web",
        "--selector=app=web",
        "--min-available=1",
        "-n",
        "pb",
    ]);
    k.ok(&[
        "create",
        "pdb",
        "web-pct",
        "--selector=app=web",
        "--max-unavailable=50%",
        "-n",
        "pb",
    ]);
    let spec = &k.get(&["pdb", "web", "-n", "pb"])["spec"];
    assert_eq!(spec["minAvailable"], 1);
    assert_eq!(spec["selector"], json!({"matchLabels": {"app": "web"}}));
    assert_eq!(
        k.get(&["pdb", "web-pct", "-n", "pb"])["spec"]["maxUnavailable"],
        "50%"
    );

    k.ok(&[
        "run",
        "runner",
        "--image=busybox",
        "--labels=app=runner",
        "--env=A=B",
        "-n",
        "pb",
    ]);
    let obj = k.get(&["pod", "runner", "-n", "pb"]);
    assert_eq!(
        obj["spec"]["containers"][0]["env"],
        json!([{"name": "A", "value": "B"}])
    );

    k.ok(&[
        "expose",
        "deployment",
        "web",
        "--port=80",
        "--target-port=8080",
        "-n",
        "pb",
    ]);
    let spec = &k.get(&["service", "web", "-n", "pb"])["spec"];
    assert_eq!(spec["selector"], json!({"app": "web"}));
    assert_eq!(spec["ports"][0]["port"], 80);
    assert_eq!(spec["ports"][0]["targetPort"], 8080);
    k.ok(&[
        "create",
        "service",
        "clusterip",
        "svc",
        "--tcp=5678:8080",
        "-n",
        "pb",
    ]);
    let spec = &k.get(&["service", "svc", "-n", "pb"])["spec"];
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(
        spec["ports"],
        json!([{"name": "5678-8080", "protocol": "TCP", "port": 5678, "targetPort": 8080}])
    );

    // A node with pods bound to it, for debug and drain.
    k.with_stdin(
        &["create"],
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "pb-node"}}),
    );
    // `debug node` creates its pod in protobuf: host namespaces, a hostPath
    // volume, a toleration.
    k.ok(&[
        "debug",
        "node/pb-node",
        "--image=busybox",
        "--profile=general",
        "-n",
        "pb",
        "--",
        "true",
    ]);
    let pods = k.get(&["pods", "-n", "pb", "--field-selector=spec.nodeName=pb-node"]);
    let debug = &pods["items"][0]["spec"];
    assert_eq!(debug["hostPID"], true);
    assert_eq!(debug["hostNetwork"], true);
    assert_eq!(debug["volumes"][0]["hostPath"]["path"], "/");
    assert_eq!(debug["tolerations"], json!([{"operator": "Exists"}]));

    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "pb", "labels": {"app": "drain"}},
            "spec": {"nodeName": "pb-node", "containers": [{"name": "c", "image": "busybox"}]}})
    };
    let running =
        r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#;
    let drain = [
        "drain",
        "pb-node",
        "--pod-selector=app=drain",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--force",
        "--timeout=20s",
        "--grace-period=0",
    ];
    // Eviction (a JSON body from drain).
    k.with_stdin(&["create"], &pod("evicted"));
    k.ok(&[
        "patch",
        "pod",
        "evicted",
        "-n",
        "pb",
        "--subresource=status",
        "--type=merge",
        "-p",
        running,
    ]);
    let out = k.ok(&drain);
    assert!(out.contains("pod/evicted evicted"), "{out}");
    assert!(k.gone(&["pod", "evicted", "-n", "pb"]));
    // Plain deletion sends protobuf DeleteOptions.
    k.ok(&["uncordon", "pb-node"]);
    k.with_stdin(&["create"], &pod("deleted"));
    let mut disable = drain.to_vec();
    disable.push("--disable-eviction");
    let out = k.ok(&disable);
    assert!(out.contains("pod/deleted deleted"), "{out}");
    assert!(k.gone(&["pod", "deleted", "-n", "pb"]));
    assert_eq!(k.get(&["node", "pb-node"])["spec"]["unschedulable"], true);

    // Everything kubectl created lists back.
    let mut args = vec![
        "get",
        "cm,secret,sa,deploy,role,rolebinding,pdb,svc",
        "-o",
        "name",
    ];
    args.extend(ns);
    let names = k.ok(&args);
    for want in [
        "configmap/cm",
        "secret/s",
        "serviceaccount/sa",
        "deployment.apps/web",
        "role.rbac.authorization.k8s.io/r",
        "rolebinding.rbac.authorization.k8s.io/rb",
        "poddisruptionbudget.policy/web",
        "service/web",
        "service/svc",
    ] {
        assert!(names.lines().any(|l| l == want), "{want} in {names}");
    }
}
