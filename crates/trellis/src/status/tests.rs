//! Tests of the tree's rendering and the connection messages, on
//! snapshots built in memory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use api::testing::Fixture;
use api::{LastOperation, MachineOperationType, MachinePhase, MachineState};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::connection::*;
use super::paint::*;
use super::render::*;
use super::*;

fn owned<K: kube::Resource>(mut obj: K, owner_uid: &str) -> K {
    obj.meta_mut().owner_references = Some(vec![OwnerReference {
        api_version: "machine.sapcloud.io/v1alpha1".into(),
        kind: "Owner".into(),
        name: "owner".into(),
        uid: owner_uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    obj
}

fn at(mut meta: ObjectMeta, secs: i64) -> ObjectMeta {
    meta.creation_timestamp = Some(Time(Timestamp::from_second(secs).unwrap()));
    meta
}

#[test]
fn ages_read_like_kubectl() {
    for (secs, want) in [
        (0, "0s"),
        (119, "119s"),
        (192, "3m12s"),
        (600, "10m"),
        (2 * 3600 + 59 * 60, "179m"),
        (5 * 3600 + 30 * 60, "5h30m"),
        (30 * 3600, "30h"),
        (3 * 86_400 + 2 * 3600, "3d2h"),
        (40 * 86_400, "40d"),
        (800 * 86_400, "2y"),
    ] {
        assert_eq!(human_age(Duration::from_secs(secs)), want, "{secs}s");
    }
}

fn sample() -> Snapshot {
    let mut md = MachineDeployment::test("demo").replicas(2).with_uid("md-1");
    md.metadata = at(md.metadata, 0);
    md.status = Some(api::MachineDeploymentStatus {
        ready_replicas: 1,
        updated_replicas: 2,
        ..Default::default()
    });
    let mut ms = owned(MachineSet::test("demo-abc").replicas(2), "md-1").with_uid("ms-1");
    ms.metadata = at(ms.metadata, 10);
    let mut running = owned(
        Machine::test("demo-abc-1")
            .running()
            .label("node", "node-1"),
        "ms-1",
    );
    running.metadata = at(running.metadata, 20);
    let mut failed = owned(Machine::test("demo-abc-2"), "ms-1");
    failed.metadata = at(failed.metadata, 20);
    failed.status = Some(api::MachineStatus {
        last_operation: LastOperation {
            description: "Cloud provider message - out of capacity".into(),
            state: Some(MachineState::Failed),
            type_: Some(MachineOperationType::Create),
            error_code: "ResourceExhausted".into(),
            ..Default::default()
        },
        ..Default::default()
    });
    failed = failed.with_phase(MachinePhase::CrashLoopBackOff);
    let mut single = Machine::test("single");
    single.metadata = at(single.metadata, 100);
    Snapshot {
        deployments: vec![md],
        sets: vec![ms],
        machines: vec![failed, single, running],
        nodes: BTreeMap::new(),
        unserved: BTreeMap::new(),
    }
}

#[test]
fn the_tree_nests_sets_under_deployments_and_machines_under_sets() {
    let now = Timestamp::from_second(130).unwrap();
    let tree = render(&sample(), now, Paint::none(), 80);
    let want = "\
NAME                    STATE             NODE    AGE    LAST OPERATION
MachineDeployment/demo  1/2 ready                 2m10s
└─MachineSet/demo-abc   0/2 ready                 2m
  ├─Machine/demo-abc-1  Running           node-1  110s
  └─Machine/demo-abc-2  CrashLoopBackOff          110s   Create Failed: Cloud provider message - out of capacity [ResourceExhausted]
Machine/single          New                       30s
";
    assert_eq!(tree, want, "\n{tree}");
}

#[test]
fn namespaces_nobody_serves_are_named_above_the_tree() {
    let now = Timestamp::from_second(130).unwrap();
    let mut snap = sample();
    snap.unserved.insert(
        "team-a".into(),
        "no machine controller serves namespace \"team-a\" (no Lease machine-controller-manager-heartbeat there)".into(),
    );
    let tree = render(&snap, now, Paint::none(), 80);
    let want = "\
! no machine controller serves namespace \"team-a\" (no Lease machine-controller-manager-heartbeat there)
NAME                    STATE             NODE    AGE    LAST OPERATION
MachineDeployment/demo  1/2 ready                 2m10s
";
    assert!(tree.starts_with(want), "\n{tree}");
}

#[test]
fn colours_mark_failures_red_and_running_green() {
    let now = Timestamp::from_second(130).unwrap();
    let tree = render(&sample(), now, Paint { enabled: true }, 80);
    assert!(tree.contains("\x1b[32mRunning"), "{tree}");
    assert!(tree.contains("\x1b[31mCrashLoopBackOff"), "{tree}");
    assert!(tree.contains("\x1b[31mCreate Failed"), "{tree}");
}

#[test]
fn long_messages_are_truncated() {
    let now = Timestamp::from_second(130).unwrap();
    let tree = render(&sample(), now, Paint::none(), 20);
    assert!(tree.contains("Create Failed: Clou…"), "{tree}");
}

#[test]
fn a_deleting_machine_shows_terminating() {
    let mut m = Machine::test("m").running();
    m.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(5).unwrap()));
    assert_eq!(phase_name(&m), "Terminating");
}

#[test]
fn every_namespace_qualifies_the_top_level_rows() {
    let mut snap = sample();
    snap.machines[1].metadata.namespace = Some("team-b".into());
    let tree = render(
        &snap,
        Timestamp::from_second(130).unwrap(),
        Paint::none(),
        80,
    );
    assert!(tree.contains("\ndefault/MachineDeployment/demo "), "{tree}");
    assert!(tree.contains("\nteam-b/Machine/single "), "{tree}");
    assert!(
        tree.contains("\n  ├─Machine/demo-abc-1 "),
        "children stay short: {tree}"
    );
}

#[test]
fn a_shoot_shows_its_worker_deployments_machines_and_nodes() {
    let mut snap = sample();
    snap.machines
        .retain(|m| m.metadata.name.as_deref() != Some("single"));
    snap.nodes.insert("node-1".into(), true);
    let shoot: gardener::Shoot = serde_json::from_value(serde_json::json!({
        "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
        "metadata": {"name": "demo", "namespace": "garden-local",
            "creationTimestamp": "1970-01-01T00:00:00Z"},
        "spec": {},
        "status": {"technicalID": "shoot--local--demo", "hibernated": false,
            "lastOperation": {"type": "Reconcile", "state": "Succeeded", "progress": 100,
                "description": "Shoot cluster has been successfully reconciled."}}
    }))
    .unwrap();
    let worker: worker::Worker = serde_json::from_value(serde_json::json!({
        "apiVersion": "extensions.gardener.cloud/v1alpha1", "kind": "Worker",
        "metadata": {"name": "shoot--local--demo", "namespace": "shoot--local--demo"},
        "spec": {"type": "local", "region": "local", "secretRef": {"name": "cloudprovider"}, "pools": []},
        "status": {"lastOperation": {"type": "Reconcile", "state": "Processing", "progress": 50,
            "description": "Waiting until machines are available"}}
    }))
    .unwrap();
    let view = ShootView {
        shoot,
        worker: Some(worker),
        snap,
    };
    let now = Timestamp::from_second(130).unwrap();
    let tree = render_all(&Snapshot::default(), &[view], now, Paint::none(), 80);
    let names: Vec<&str> = tree
        .lines()
        .skip(1)
        .map(|l| {
            // The tree prefix and the name: up to the first column gap
            // after the name starts.
            let start = l.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(0);
            let end = l[start..].find("  ").map_or(l.len(), |i| start + i);
            &l[..end]
        })
        .collect();
    assert_eq!(
        names,
        [
            "Shoot/garden-local/demo",
            "└─Worker/shoot--local--demo",
            "  └─MachineDeployment/demo",
            "    └─MachineSet/demo-abc",
            "      ├─Machine/demo-abc-1",
            "      │ └─Node/node-1",
            "      └─Machine/demo-abc-2",
        ],
        "\n{tree}"
    );
    assert!(
        tree.contains("Reconcile Succeeded: Shoot cluster"),
        "{tree}"
    );
    assert!(tree.contains("Processing"), "{tree}");
    let node_line = tree.lines().find(|l| l.contains("Node/node-1")).unwrap();
    assert!(node_line.contains("Ready"), "{node_line}");
}

fn connection(kubeconfig: Option<&str>, data_dir: Option<&str>) -> Connection {
    Connection {
        kubeconfig: kubeconfig.map(PathBuf::from),
        data_dir: data_dir.map(PathBuf::from),
    }
}

fn default_dir() -> PathBuf {
    PathBuf::from("/home/u/.local/share/trellis")
}

#[test]
fn the_kubeconfig_is_the_flag_then_kubeconfig_then_the_data_dir() {
    let flag = connection(Some("/k/flag"), Some("/d"));
    assert_eq!(
        flag.resolve(Some("/k/env".into()), default_dir),
        Kubeconfig {
            paths: vec!["/k/flag".into()],
            origin: Origin::Flag
        }
    );
    let env = connection(None, Some("/d"));
    assert_eq!(
        env.resolve(Some("/k/a:/k/b".into()), default_dir),
        Kubeconfig {
            paths: vec!["/k/a".into(), "/k/b".into()],
            origin: Origin::Env
        },
        "a $KUBECONFIG list, as kubectl reads it"
    );
    assert_eq!(
        env.resolve(Some("".into()), default_dir),
        Kubeconfig {
            paths: vec!["/d/admin.kubeconfig".into()],
            origin: Origin::DataDir
        },
        "an empty $KUBECONFIG is unset"
    );
    assert_eq!(
        connection(Some(""), None).resolve(None, default_dir),
        Kubeconfig {
            paths: vec!["/home/u/.local/share/trellis/admin.kubeconfig".into()],
            origin: Origin::DataDir
        },
        "no data dir: the same default as `up`"
    );
}

#[test]
fn a_missing_kubeconfig_is_named_once_with_what_to_do() {
    let cmd = "cargo run -p trellis --";
    let kc = connection(None, Some("/d")).resolve(None, default_dir);
    assert_eq!(
        missing_kubeconfig(&kc, cmd),
        "there is no admin kubeconfig /d/admin.kubeconfig: start trellis with `cargo run -p trellis -- up`, which writes it, or pass --data-dir or --kubeconfig"
    );
    let kc = connection(None, None).resolve(Some("/k/x".into()), default_dir);
    assert_eq!(
        missing_kubeconfig(&kc, cmd),
        "there is no kubeconfig /k/x (named by $KUBECONFIG): correct or unset KUBECONFIG, or pass --kubeconfig"
    );
    let kc = connection(Some("/k/y"), None).resolve(None, default_dir);
    assert_eq!(
        missing_kubeconfig(&kc, cmd),
        "there is no kubeconfig /k/y (given with --kubeconfig)"
    );
}

#[test]
fn an_unreachable_server_is_one_sentence_with_url_kubeconfig_and_remedy() {
    let refused = std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "Connection refused (os error 111)",
    );
    let err = anyhow::Error::new(kube::Error::Service(Box::new(refused))).context("listing shoots");
    let reason = transport_failure(&err).expect("a transport failure");
    let kc = connection(None, None).resolve(None, default_dir);
    assert_eq!(
        unreachable(&kc, "https://127.0.0.1:6443", &reason, "trellis"),
        "cannot reach the API server at https://127.0.0.1:6443 (connection refused) named by the admin kubeconfig /home/u/.local/share/trellis/admin.kubeconfig: start trellis with `trellis up`, or choose another cluster with --kubeconfig or --data-dir"
    );
    let answered = anyhow::Error::new(kube::Error::Api(Box::new(
        kube::core::Status::failure("forbidden", "Forbidden").with_code(403),
    )));
    assert_eq!(transport_failure(&answered), None, "the server answered");
}

#[test]
fn hints_run_this_binary_as_the_user_can() {
    let ws = |root: &Path| root == Path::new("/src/trellis");
    let release = Path::new("/src/trellis/target/release/trellis");
    let debug = Path::new("/src/trellis/target/debug/trellis");
    let inside = Some(Path::new("/src/trellis/crates"));
    let outside = Some(Path::new("/home/u"));
    assert_eq!(invocation_of(release, true, outside, ws), "trellis");
    assert_eq!(
        invocation_of(release, false, inside, ws),
        "cargo run --release -p trellis --"
    );
    assert_eq!(
        invocation_of(debug, false, inside, ws),
        "cargo run -p trellis --"
    );
    assert_eq!(
        invocation_of(release, false, outside, ws),
        "/src/trellis/target/release/trellis",
        "cargo run needs the workspace as the current directory"
    );
    assert_eq!(
        invocation_of(Path::new("/opt/my tools/trellis"), false, outside, ws),
        "'/opt/my tools/trellis'"
    );
}

#[test]
fn shell_words_are_quoted_only_when_needed() {
    assert_eq!(shell_quote("/a/b-c_d.e"), "/a/b-c_d.e");
    assert_eq!(shell_quote("/a b"), "'/a b'");
    assert_eq!(shell_quote("it's"), "'it'\\''s'");
    assert_eq!(shell_quote(""), "''");
}

#[test]
fn an_empty_namespace_says_so() {
    let tree = render(&Snapshot::default(), Timestamp::now(), Paint::none(), 80);
    assert!(tree.starts_with("No shoots, machine deployments"));
}
