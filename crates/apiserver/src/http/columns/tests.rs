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
