//! Shoots on etcd-druid (issue 13), end to end with kubectl against
//! `trellis up --shoot-etcd druid`: the Shoot's control namespace gets the
//! Etcd `etcd-main` (one real etcd member run by the process kubelet,
//! backed up to a Local store), the shoot's API server keeps its objects
//! there, and they survive the loss of etcd-main's data: 100 ConfigMaps
//! created through the shoot's API are served again after the data
//! directory and the pod are deleted and the sidecar restored the backup.
//! The control namespace's `kube-apiserver` Deployment runs `trellis
//! server` on etcd-main and serves the same objects; when etcd-main stops
//! answering, a restarted kube-apiserver pod crash-loops, and once
//! etcd-main is ready again dependency-watchdog's weeder deletes it, so the
//! Deployment starts a new one at once. Hibernation stops the API servers
//! and scales etcd-main to 0 after a last full snapshot; waking brings
//! every object back from the kept volume. Deleting the Shoot deletes
//! etcd-main and the shoot's backups.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::pods::{Resume, Shims, apply, etcd_process_of, etcd_tools, get, signal};
use common::{kubectl, start_command, stdout, wait_until};
use serde_json::Value;

const NS: &str = "shoot--local--db";

const SHOOT: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: garden-local}
---
apiVersion: core.gardener.cloud/v1beta1
kind: Shoot
metadata: {name: db, namespace: garden-local}
spec:
  cloudProfile: {kind: CloudProfile, name: local}
  region: local
  kubernetes: {version: "1.31"}
  provider:
    type: local
    workers:
    - name: system
      machine:
        type: local-small
        image: {name: gardenlinux, version: 1592.1.0}
      minimum: 1
      maximum: 1
      zones: [zone-a]
"#;

/// The ConfigMaps of the test, as the shoot's API lists them.
fn configmaps(shoot_kc: &Path) -> Option<usize> {
    let out = kubectl(
        shoot_kc,
        &[
            "get",
            "configmaps",
            "-n",
            "default",
            "-l",
            "restore=me",
            "-o",
            "name",
        ],
    );
    out.status
        .success()
        .then(|| stdout(&out).lines().filter(|l| !l.is_empty()).count())
}

/// The data directory of etcd-main's member on the host (its claim).
fn member_data(data: &Path) -> PathBuf {
    let claims = data.join("kubelet/volumes/pvc");
    std::fs::read_dir(&claims)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("data/new.etcd"))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("no etcd data dir under {}", claims.display()))
}

/// Keys under `prefix` in etcd, read directly (not through the API
/// server, whose caches could hide a lost keyspace).
fn etcd_keys(rt: &tokio::runtime::Runtime, client: &etcdv3::Client, prefix: &[u8]) -> Option<i64> {
    rt.block_on(client.range(etcdv3::proto::RangeRequest {
        key: prefix.to_vec(),
        range_end: etcdv3::proto::prefix_end(prefix),
        count_only: true,
        ..Default::default()
    }))
    .ok()
    .map(|r| r.count)
}

/// Whether `service`'s EndpointSlices have a ready endpoint.
fn endpoint_ready(kc: &Path, service: &str) -> bool {
    let label = format!("kubernetes.io/service-name={service}");
    get(kc, &["endpointslices", "-n", NS, "-l", &label])["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .any(|e| e["conditions"]["ready"] == true)
}

/// Every file below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `GET http://addr/path`, the status code.
fn http_get(addr: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_shoots_objects_live_in_etcd_main_and_survive_its_data_loss() {
    if !etcd_tools() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _in_runtime = rt.enter();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let _shims = Shims(&data);
    let kc = data.join("admin.kubeconfig");
    let _up = start_command("up", &data, &["--shoot-etcd", "druid"]);

    let profile = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/shoot/cloudprofile.yaml"),
    )
    .unwrap();
    apply(&kc, dir.path(), "profile.yaml", &profile);
    apply(&kc, dir.path(), "shoot.yaml", SHOOT);

    // etcd-main in the control namespace, then the shoot's API on it.
    let took = wait_until("etcd-main Ready", 180, || {
        let e = get(&kc, &["etcd", "etcd-main", "-n", NS]);
        e.pointer("/status/ready") == Some(&Value::Bool(true))
    });
    eprintln!("etcd-main Ready {took:?} after the Shoot was applied");
    let etcd = get(&kc, &["etcd", "etcd-main", "-n", NS]);
    assert_eq!(etcd["spec"]["replicas"], 1);
    assert_eq!(
        etcd["spec"]["backup"]["store"]["provider"], "Local",
        "{etcd}"
    );
    let shoot_kc = dir.path().join("shoot.kubeconfig");
    wait_until("the shoot's kubeconfig", 120, || {
        let out = kubectl(
            &kc,
            &[
                "get",
                "secret",
                "kubeconfig",
                "-n",
                NS,
                "-o",
                "jsonpath={.data.kubeconfig}",
            ],
        );
        let b64 = stdout(&out);
        if b64.trim().is_empty() {
            return false;
        }
        use base64::Engine;
        let text = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .unwrap();
        std::fs::write(&shoot_kc, text).unwrap();
        configmaps(&shoot_kc).is_some()
    });

    // 100 ConfigMaps through the shoot's API.
    let items: Vec<Value> = (0..100)
        .map(|i| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i:03}"), "namespace": "default",
                             "labels": {"restore": "me"}},
                "data": {"i": i.to_string()},
            })
        })
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    apply(&shoot_kc, dir.path(), "cms.json", &list.to_string());
    assert_eq!(configmaps(&shoot_kc), Some(100));

    // They are in etcd-main itself.
    let svc = get(&kc, &["service", "etcd-main-client", "-n", NS]);
    let ip = svc["spec"]["clusterIP"].as_str().unwrap_or("").to_string();
    assert!(ip.starts_with("127."), "client Service IP {ip:?}");
    let client = etcdv3::Client::single(&format!("http://{ip}:2379"), None).unwrap();
    let prefix = b"/registry/core/configmaps/default/cm-";
    wait_until("the client Service to answer", 60, || {
        etcd_keys(&rt, &client, prefix).is_some()
    });
    assert_eq!(etcd_keys(&rt, &client, prefix), Some(100));

    // A full snapshot now (the sidecar's API on the client Service), then
    // lose the member's data and its pod.
    assert_eq!(
        http_get(&format!("{ip}:8080"), "/snapshot/full"),
        Some(200),
        "the sidecar takes a full snapshot"
    );
    let old_uid = get(&kc, &["pod", "etcd-main-0", "-n", NS])["metadata"]["uid"].clone();
    std::fs::remove_dir_all(member_data(&data)).unwrap();
    let out = kubectl(
        &kc,
        &["delete", "pod", "etcd-main-0", "-n", NS, "--wait=false"],
    );
    assert!(out.status.success());
    let took = wait_until("a new etcd-main-0 with the 100 ConfigMaps", 180, || {
        let pod = get(&kc, &["pod", "etcd-main-0", "-n", NS]);
        !pod.is_null()
            && pod["metadata"]["uid"] != old_uid
            && etcd_keys(&rt, &client, prefix) == Some(100)
    });
    eprintln!("etcd-main restored in {took:?}");
    let logs = stdout(&kubectl(
        &kc,
        &["logs", "etcd-main-0", "-n", NS, "-c", "backup-restore"],
    ));
    assert!(logs.contains("action=Restore"), "{logs}");
    // The shoot's API serves them again, and takes new writes.
    wait_until("the shoot's API to list the 100 ConfigMaps", 120, || {
        configmaps(&shoot_kc) == Some(100)
    });
    let out = kubectl(
        &shoot_kc,
        &["create", "configmap", "after-restore", "-n", "default"],
    );
    assert!(
        out.status.success(),
        "a write after the restore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until("the new ConfigMap in etcd-main", 30, || {
        etcd_keys(
            &rt,
            &client,
            b"/registry/core/configmaps/default/after-restore",
        ) == Some(1)
    });

    // The kube-apiserver Deployment on etcd-main serves the same objects.
    wait_until("the kube-apiserver Deployment ready", 120, || {
        get(&kc, &["deployment", "kube-apiserver", "-n", NS])["status"]["readyReplicas"] == 1
    });
    let apiserver_pod = || -> Value {
        get(&kc, &["pods", "-n", NS, "-l", "role=apiserver"])["items"]
            .as_array()
            .and_then(|a| a.first().cloned())
            .unwrap_or(Value::Null)
    };
    let pod = apiserver_pod();
    let pod_name = pod["metadata"]["name"].as_str().unwrap().to_string();
    let replica_kc = dir.path().join("replica.kubeconfig");
    let out = kubectl(
        &kc,
        &[
            "exec",
            "-n",
            NS,
            &pod_name,
            "--",
            "cat",
            "/var/lib/kube-apiserver/admin.kubeconfig",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&replica_kc, &out.stdout).unwrap();
    assert_eq!(
        configmaps(&replica_kc),
        Some(100),
        "the kube-apiserver pod serves the shoot's objects"
    );

    // etcd-main stops answering (its etcd process stopped): its client
    // Service loses its ready endpoint, and a kube-apiserver pod started
    // now cannot reach it and crash-loops.
    let etcd_pid = etcd_process_of("etcd-main-0").expect("etcd-main-0's etcd process");
    assert!(signal("-STOP", etcd_pid));
    let _resume = Resume(etcd_pid);
    wait_until("etcd-main-client without a ready endpoint", 120, || {
        !endpoint_ready(&kc, "etcd-main-client")
    });
    let out = kubectl(&kc, &["delete", "pod", "-n", NS, &pod_name, "--wait=false"]);
    assert!(out.status.success());
    let mut looping = String::new();
    wait_until("a kube-apiserver pod in CrashLoopBackOff", 120, || {
        let p = apiserver_pod();
        let reason = p
            .pointer("/status/containerStatuses/0/state/waiting/reason")
            .and_then(Value::as_str)
            .unwrap_or("");
        if p["metadata"]["name"] != pod_name.as_str() && reason == "CrashLoopBackOff" {
            looping = p["metadata"]["uid"].as_str().unwrap_or("").to_string();
        }
        !looping.is_empty()
    });
    // etcd-main answers again: the weeder deletes the crash-looping pod
    // (a pod the kubelet restarts keeps its UID; only a deletion makes
    // the Deployment start another) and the new one is ready.
    assert!(signal("-CONT", etcd_pid));
    let took = wait_until("the weeder to replace the crash-looping pod", 120, || {
        let p = apiserver_pod();
        p["metadata"]["uid"].as_str().is_some_and(|u| u != looping)
            && p.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
    });
    eprintln!(
        "the weeder replaced the crash-looping kube-apiserver pod; ready {took:?} after etcd-main resumed"
    );

    // Hibernation: the machine goes, then the API server, then etcd-main
    // goes to 0 after a last full snapshot; its volume stays.
    let fulls = || -> usize {
        walk(&data.join("backupbuckets/shoots"))
            .iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("Full-"))
            })
            .count()
    };
    let fulls_before = fulls();
    let hibernate = |on: bool| {
        let patch = format!(r#"{{"spec":{{"hibernation":{{"enabled":{on}}}}}}}"#);
        let out = kubectl(
            &kc,
            &[
                "patch",
                "shoot",
                "db",
                "-n",
                "garden-local",
                "--type=merge",
                "-p",
                &patch,
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    hibernate(true);
    let took = wait_until("the shoot hibernated with etcd-main at 0", 240, || {
        let shoot = get(&kc, &["shoot", "db", "-n", "garden-local"]);
        let sts = get(&kc, &["statefulset", "etcd-main", "-n", NS]);
        shoot["status"]["hibernated"] == true
            && sts["spec"]["replicas"] == 0
            && get(&kc, &["pod", "etcd-main-0", "-n", NS]).is_null()
    });
    eprintln!("hibernated in {took:?}");
    let mcm = get(&kc, &["deployment", "machine-controller-manager", "-n", NS]);
    assert_eq!(
        mcm["spec"]["replicas"], 0,
        "no machine controllers while hibernated"
    );
    assert!(
        fulls() > fulls_before,
        "druid took a full snapshot before scaling to 0"
    );
    assert!(
        configmaps(&shoot_kc).is_none(),
        "no API server while hibernated"
    );
    // Waking up: etcd-main back on its kept volume, then the API server.
    hibernate(false);
    let took = wait_until("the woken shoot's API with every ConfigMap", 240, || {
        configmaps(&shoot_kc) == Some(100)
    });
    eprintln!("woke up in {took:?}");
    wait_until("the machine controllers back", 60, || {
        get(&kc, &["deployment", "machine-controller-manager", "-n", NS])["status"]["readyReplicas"]
            == 1
    });
    wait_until("the woken shoot's machine Running again", 120, || {
        get(&kc, &["machines", "-n", NS])["items"]
            .as_array()
            .is_some_and(|ms| {
                ms.len() == 1 && ms[0]["status"]["currentStatus"]["phase"] == "Running"
            })
    });
    assert!(
        !stdout(&kubectl(
            &kc,
            &["logs", "etcd-main-0", "-n", NS, "-c", "backup-restore"],
        ))
        .contains("action=Restore"),
        "the kept volume is used, not a backup"
    );

    // Deleting the Shoot deletes etcd-main and the shoot's backups.
    let backups = data.join("backupbuckets/shoots");
    assert!(
        std::fs::read_dir(&backups).is_ok_and(|mut d| d.next().is_some()),
        "backups under {}",
        backups.display()
    );
    let out = kubectl(
        &kc,
        &[
            "delete",
            "shoot",
            "db",
            "-n",
            "garden-local",
            "--wait=false",
        ],
    );
    assert!(out.status.success());
    wait_until("the Shoot, etcd-main and its backups gone", 240, || {
        get(&kc, &["shoot", "db", "-n", "garden-local"]).is_null()
            && get(&kc, &["etcd", "etcd-main", "-n", NS]).is_null()
            && std::fs::read_dir(&backups).is_ok_and(|mut d| d.next().is_none())
    });
}
