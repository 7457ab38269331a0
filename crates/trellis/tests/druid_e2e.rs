//! etcd-druid end to end with kubectl against `trellis up` (issue 13):
//! real etcd members run by the process kubelet, each behind the
//! etcd-wrapper and the etcd-backup-restore sidecar (trellis
//! subcommands, mapped from Gardener's images by the kubelet's table).
//!
//! - an Etcd with 1 replica and a Local store becomes a running etcd
//!   process, the Etcd Ready with BackupReady True, full and delta
//!   snapshots in the bucket and the snapshot Leases following them;
//! - 1,000 keys written through the client Service survive the loss of
//!   the data directory and the pod: the new pod's sidecar restores the
//!   newest full snapshot plus its deltas before etcd starts;
//! - that Etcd scaled out to 3 replicas: the new members join as learners,
//!   are promoted, and each serves the 1,000 keys;
//! - an Etcd with 3 replicas becomes 3 etcd processes, Ready with 3 Ready
//!   members and one Leader among their Leases; one member that stops
//!   answering (its etcd process stopped with SIGSTOP) leaves the cluster
//!   quorate (Ready True) but AllMembersReady False once its lease is past
//!   druid's unknown threshold (1 min), and True again once it answers.
//!
//! The sidecars reach the API as any in-cluster client does: with the
//! token of the Etcd's ServiceAccount that the process kubelet mounts, and
//! the RBAC druid creates for it.

mod common;

use std::path::{Path, PathBuf};

use common::pods::{
    Resume, Shims, apply, etcd_process_of, etcd_processes, etcd_tools, get, signal,
};
use common::{kubectl, start_command, stdout, wait_until};
use serde_json::Value;

fn condition(etcd: &Value, kind: &str) -> String {
    etcd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
        .to_string()
}

fn ready_members(etcd: &Value) -> usize {
    etcd.pointer("/status/members")
        .and_then(Value::as_array)
        .map_or(0, |ms| ms.iter().filter(|m| m["status"] == "Ready").count())
}

fn etcd_yaml(name: &str, replicas: u32) -> String {
    format!(
        r#"
apiVersion: druid.gardener.cloud/v1alpha1
kind: Etcd
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  labels: {{app: etcd-statefulset}}
  etcd: {{}}
  backup:
    store: {{provider: Local, container: default.bkp, prefix: {name}}}
    deltaSnapshotPeriod: 2s
    garbageCollectionPeriod: 30s
"#
    )
}

fn holder(kc: &Path, lease: &str) -> String {
    get(kc, &["lease", lease])
        .pointer("/spec/holderIdentity")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn client_service(kc: &Path, etcd: &str) -> etcdv3::Client {
    let svc = get(kc, &["service", &format!("{etcd}-client")]);
    let ip = svc["spec"]["clusterIP"].as_str().unwrap_or("").to_string();
    assert!(ip.starts_with("127."), "client Service IP {ip:?}");
    etcdv3::Client::single(&format!("http://{ip}:2379"), None).unwrap()
}

/// The data directory of `pod`'s member on the host (its claim's volume).
fn data_dir(data: &Path) -> PathBuf {
    let claims = data.join("kubelet/volumes/pvc");
    std::fs::read_dir(&claims)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("data/new.etcd"))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("no etcd data dir under {}", claims.display()))
}

async fn count(c: &etcdv3::Client) -> Result<i64, etcdv3::Error> {
    Ok(c.range(etcdv3::proto::RangeRequest {
        key: b"/k/".to_vec(),
        range_end: etcdv3::proto::prefix_end(b"/k/"),
        count_only: true,
        ..Default::default()
    })
    .await?
    .count)
}

#[test]
fn etcd_members_back_up_and_restore_under_trellis_up() {
    if !etcd_tools() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    // The etcd client's channels need the runtime's reactor.
    let _in_runtime = rt.enter();
    // Not under /tmp: a pod's /tmp is its own.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let _shims = Shims(&data);
    let kc = data.join("admin.kubeconfig");
    let _up = start_command("up", &data, &[]);

    // One member with a Local store.
    apply(&kc, dir.path(), "e.yaml", &etcd_yaml("e", 1));
    let took = wait_until("Etcd e Ready with BackupReady True", 120, || {
        let e = get(&kc, &["etcd", "e"]);
        condition(&e, "Ready") == "True" && condition(&e, "BackupReady") == "True"
    });
    eprintln!("1-member Etcd Ready with BackupReady in {took:?}");
    assert!(etcd_processes() >= 1, "an etcd process runs");
    assert!(
        holder(&kc, "e-0").ends_with(":Leader"),
        "{}",
        holder(&kc, "e-0")
    );

    let client = client_service(&kc, "e");
    // Ready comes from the member Lease; the Service forwards once the
    // pod's readiness probe (15 s initial delay) passes.
    wait_until("the client Service to answer", 60, || {
        rt.block_on(count(&client)).is_ok()
    });
    let head = rt.block_on(async {
        let mut last = 0;
        for i in 0..1000 {
            let r = client
                .put(etcdv3::proto::PutRequest {
                    key: format!("/k/{i:04}").into_bytes(),
                    value: format!("v{i}").into_bytes(),
                    ..Default::default()
                })
                .await
                .unwrap();
            last = r.header.unwrap().revision;
        }
        last
    });
    wait_until("the delta-snapshot Lease at the head revision", 60, || {
        holder(&kc, "e-delta-snap").parse::<i64>().unwrap_or(0) >= head
    });
    let bucket = data.join("backupbuckets/default.bkp/e/v2");
    let objects: Vec<String> = std::fs::read_dir(&bucket)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        objects.iter().any(|o| o.starts_with("Full-00000000-"))
            && objects.iter().any(|o| o.starts_with("Incr-")),
        "{objects:?}"
    );
    assert!(holder(&kc, "e-full-snap").parse::<i64>().is_ok());

    // Lose the data and the pod: the restore brings every key back.
    let old_uid = get(&kc, &["pod", "e-0"])["metadata"]["uid"].clone();
    std::fs::remove_dir_all(data_dir(&data)).unwrap();
    let out = kubectl(&kc, &["delete", "pod", "e-0", "--wait=false"]);
    assert!(out.status.success());
    let took = wait_until("a new e-0 serving all 1,000 keys", 120, || {
        let pod = get(&kc, &["pod", "e-0"]);
        pod["metadata"]["uid"] != old_uid
            && !pod.is_null()
            && rt.block_on(count(&client)).is_ok_and(|n| n == 1000)
    });
    eprintln!("restored 1,000 keys in {took:?}");
    let v = rt
        .block_on(client.range(etcdv3::proto::RangeRequest {
            key: b"/k/0999".to_vec(),
            ..Default::default()
        }))
        .unwrap();
    assert_eq!(v.kvs[0].value, b"v999");
    let logs = stdout(&kubectl(&kc, &["logs", "e-0", "-c", "backup-restore"]));
    assert!(logs.contains("action=Restore"), "{logs}");

    // Scale-out 1 → 3: the new members join as learners and are
    // promoted; every member holds the 1,000 keys.
    let out = kubectl(
        &kc,
        &[
            "patch",
            "etcd",
            "e",
            "--type=merge",
            "-p",
            r#"{"metadata":{"annotations":{"gardener.cloud/operation":"reconcile"}},"spec":{"replicas":3}}"#,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let took = wait_until("Etcd e scaled out to 3 Ready members", 240, || {
        let e = get(&kc, &["etcd", "e"]);
        condition(&e, "Ready") == "True"
            && condition(&e, "AllMembersReady") == "True"
            && ready_members(&e) == 3
    });
    eprintln!("scaled out 1 → 3 in {took:?}");
    let members = rt.block_on(client.member_list()).unwrap().members;
    assert_eq!(members.len(), 3, "{members:?}");
    assert!(members.iter().all(|m| !m.is_learner), "{members:?}");
    // Each member serves the keys; a member's pod may still be replaced by
    // the StatefulSet's rolling update (its template names the new
    // configuration), so its address is looked up on every try.
    for pod in ["e-0", "e-1", "e-2"] {
        wait_until(&format!("{pod} to serve the 1,000 keys"), 120, || {
            let ip = get(&kc, &["pod", pod])["status"]["podIP"]
                .as_str()
                .unwrap_or("")
                .to_string();
            !ip.is_empty()
                && etcdv3::Client::single(&format!("http://{ip}:2379"), None)
                    .is_ok_and(|member| rt.block_on(count(&member)).is_ok_and(|n| n == 1000))
        });
    }
    let logs = stdout(&kubectl(&kc, &["logs", "e-2", "-c", "backup-restore"]));
    assert!(logs.contains("added as a learner"), "{logs}");

    // Three members.
    apply(&kc, dir.path(), "t.yaml", &etcd_yaml("t", 3));
    let took = wait_until("Etcd t Ready with 3 Ready members", 180, || {
        let t = get(&kc, &["etcd", "t"]);
        condition(&t, "Ready") == "True"
            && condition(&t, "AllMembersReady") == "True"
            && ready_members(&t) == 3
    });
    eprintln!("3-member Etcd Ready in {took:?}");
    assert!(etcd_processes() >= 4, "1 + 3 etcd processes");
    let roles: Vec<String> = (0..3).map(|i| holder(&kc, &format!("t-{i}"))).collect();
    assert_eq!(
        roles.iter().filter(|h| h.ends_with(":Leader")).count(),
        1,
        "{roles:?}"
    );
    let cluster_ids: std::collections::BTreeSet<&str> =
        roles.iter().filter_map(|h| h.split(':').nth(1)).collect();
    assert_eq!(cluster_ids.len(), 1, "{roles:?}");

    // One member stops answering: quorate, but not all members ready.
    let pid = etcd_process_of("t-2").expect("the etcd process of t-2");
    assert!(signal("-STOP", pid), "stopping etcd {pid}");
    let resume = Resume(pid);
    let took = wait_until("AllMembersReady False with Ready True", 180, || {
        let t = get(&kc, &["etcd", "t"]);
        condition(&t, "AllMembersReady") == "False" && condition(&t, "Ready") == "True"
    });
    eprintln!("a stopped member made AllMembersReady False in {took:?}");
    let t = get(&kc, &["etcd", "t"]);
    let t2 = t
        .pointer("/status/members")
        .and_then(Value::as_array)
        .and_then(|ms| ms.iter().find(|m| m["name"] == "t-2"))
        .cloned()
        .unwrap_or_default();
    assert_ne!(t2["status"], "Ready", "{t2}");
    drop(resume);
    let took = wait_until("AllMembersReady True again", 120, || {
        let t = get(&kc, &["etcd", "t"]);
        condition(&t, "AllMembersReady") == "True" && ready_members(&t) == 3
    });
    eprintln!("the member answered again; AllMembersReady True in {took:?}");
}
