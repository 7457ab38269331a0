//! Columns and cells of built-in kinds and custom resources.

use super::*;
use serde_json::json;

#[test]
fn ages_like_kubectl() {
    let d = chrono::Duration::seconds;
    assert_eq!(human_duration(d(5)), "5s");
    assert_eq!(human_duration(d(119)), "119s");
    assert_eq!(human_duration(d(200)), "3m20s");
    assert_eq!(human_duration(d(300)), "5m");
    assert_eq!(human_duration(d(3 * 3600 + 12 * 60)), "3h12m");
    assert_eq!(human_duration(d(20 * 3600)), "20h");
    assert_eq!(human_duration(d(2 * 86400)), "2d");
    assert_eq!(human_duration(d(2 * 86400 + 5 * 3600)), "2d5h");
    assert_eq!(human_duration(d(40 * 86400)), "40d");
    assert_eq!(human_duration(d(-10)), "<invalid>");
}

#[test]
fn pod_row() {
    let now = Utc::now();
    let created = (now - chrono::Duration::minutes(5)).to_rfc3339();
    let pod = json!({"metadata": {"name": "p", "creationTimestamp": created},
        "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
            {"name": "b", "ready": false, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
    let res = crate::strategy::resources()
        .into_iter()
        .find(|r| r.kind == "Pod")
        .unwrap();
    assert_eq!(
        cells(&res, &pod, now),
        [
            json!("p"),
            json!("1/2"),
            json!("CrashLoopBackOff"),
            json!("2"),
            json!("5m"),
            json!("10.0.0.1"),
            json!("n1"),
            json!("<none>"),
            json!("<none>")
        ]
    );
    assert_eq!(definitions(&res).len(), 9);
}

fn builtin(kind: &str) -> crate::storage::registry::Resource {
    crate::strategy::resources()
        .into_iter()
        .find(|r| r.kind == kind && r.group != "events.k8s.io")
        .unwrap()
}

#[test]
fn workload_rows() {
    let now = Utc::now();
    let ago = |m: i64| (now - chrono::Duration::minutes(m)).to_rfc3339();
    let rs = json!({"metadata": {"name": "web-abc", "creationTimestamp": ago(3)},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
        "status": {"replicas": 3, "readyReplicas": 1}});
    assert_eq!(
        cells(&builtin("ReplicaSet"), &rs, now),
        [
            json!("web-abc"),
            json!(3),
            json!(3),
            json!(1),
            json!("3m"),
            json!("c"),
            json!("nginx"),
            json!("app=web")
        ]
    );
    let cr = json!({"metadata": {"name": "web-7d", "creationTimestamp": ago(1),
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                             "uid": "u", "controller": true}]}, "revision": 2});
    assert_eq!(
        cells(&builtin("ControllerRevision"), &cr, now),
        [
            json!("web-7d"),
            json!("statefulset.apps/web"),
            json!(2),
            json!("60s")
        ]
    );
    let job = json!({"metadata": {"name": "pi", "creationTimestamp": ago(10)},
        "spec": {"completions": 1, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
                 "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}},
        "status": {"succeeded": 1, "startTime": ago(10),
                   "completionTime": (now - chrono::Duration::minutes(10) + chrono::Duration::seconds(42)).to_rfc3339(),
                   "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                                  {"type": "Complete", "status": "True"}]}});
    let row = cells(&builtin("Job"), &job, now);
    assert_eq!(
        &row[..5],
        [
            json!("pi"),
            json!("Complete"),
            json!("1/1"),
            json!("42s"),
            json!("10m")
        ]
    );
    let running = json!({"metadata": {"name": "r"}, "spec": {"parallelism": 2}, "status": {}});
    let row = cells(&builtin("Job"), &running, now);
    assert_eq!(&row[1..4], [json!("Running"), json!("0/1 of 2"), json!("")]);
    let cj = json!({"metadata": {"name": "hello", "creationTimestamp": ago(5)},
        "spec": {"schedule": "*/1 * * * *", "suspend": false, "jobTemplate": {"spec": {
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}},
        "status": {"active": [{"name": "hello-1"}], "lastScheduleTime": ago(1)}});
    let row = cells(&builtin("CronJob"), &cj, now);
    assert_eq!(
        &row[..8],
        [
            json!("hello"),
            json!("*/1 * * * *"),
            json!("<none>"),
            json!("False"),
            json!(1),
            json!("60s"),
            json!("5m"),
            json!("c")
        ]
    );
    assert_eq!(definitions(&builtin("CronJob")).len(), 10);
}
