//! Events as trellis's controllers write them (kube-rs's `Recorder`:
//! events.k8s.io/v1 with `eventTime`, and `series` on a repeat) read the
//! way people read events: as core/v1 with `firstTimestamp`,
//! `lastTimestamp` and `count`, and through `kubectl get events
//! --sort-by=.lastTimestamp`, against the real `trellis server` binary.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{have, kubectl, start, stdout};
use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
use kube::api::{Api, ListParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

async fn client(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn event(reason: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(format!("{reason} happened")),
        action: "Test".into(),
        secondary: None,
    }
}

/// Waits until the wall clock is in a later second than `t`, so that
/// whole-second timestamps differ.
async fn next_second(t: chrono::DateTime<chrono::Utc>) {
    let later = t.timestamp() + 1;
    while chrono::Utc::now().timestamp() < later {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_events_have_core_timestamps_and_sort_by_last_timestamp() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("trellis");
    let _server = start(&data, &[]);
    let kc = data.join("admin.kubeconfig");
    let client = client(&kc).await;

    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "trellis-test".into(),
            instance: None,
        },
    );
    let machine = ObjectReference {
        api_version: Some("machine.sapcloud.io/v1alpha1".into()),
        kind: Some("Machine".into()),
        name: Some("m1".into()),
        namespace: Some("default".into()),
        uid: Some("uid-m1".into()),
        ..Default::default()
    };
    // In three successive seconds: Repeated (created), Single, then
    // Repeated again, which the recorder sends as a merge patch adding
    // `series`. Each starts just after a second begins, so the recorder's
    // own clock reading falls in the same second as ours.
    next_second(chrono::Utc::now()).await;
    let t0 = chrono::Utc::now();
    recorder
        .publish(&event("Repeated"), &machine)
        .await
        .unwrap();
    next_second(t0).await;
    let t1 = chrono::Utc::now();
    recorder.publish(&event("Single"), &machine).await.unwrap();
    next_second(t1).await;
    let t2 = chrono::Utc::now();
    recorder
        .publish(&event("Repeated"), &machine)
        .await
        .unwrap();

    let events: Api<CoreEvent> = Api::namespaced(client, "default");
    let list = events.list(&ListParams::default()).await.unwrap().items;
    let by_reason = |reason: &str| {
        list.iter()
            .find(|e| e.reason.as_deref() == Some(reason))
            .unwrap_or_else(|| panic!("an Event {reason}: {list:?}"))
    };
    let secs = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map(|t| t.0.as_second())
            .expect("the timestamp is set when read as core/v1")
    };
    let single = by_reason("Single");
    assert_eq!(single.count, Some(1));
    assert_eq!(secs(single.first_timestamp.as_ref()), t1.timestamp());
    assert_eq!(secs(single.last_timestamp.as_ref()), t1.timestamp());
    let repeated = by_reason("Repeated");
    assert_eq!(repeated.count, Some(2), "from series.count");
    assert_eq!(secs(repeated.first_timestamp.as_ref()), t0.timestamp());
    assert_eq!(
        secs(repeated.last_timestamp.as_ref()),
        t2.timestamp(),
        "from series.lastObservedTime"
    );

    if !have("kubectl") {
        eprintln!("SKIPPED the kubectl half: kubectl is not installed");
        return;
    }
    let out = kubectl(
        &kc,
        &[
            "get",
            "events",
            "--sort-by=.lastTimestamp",
            "-o",
            "custom-columns=REASON:.reason,COUNT:.count",
            "--no-headers",
        ],
    );
    assert!(out.status.success(), "kubectl get events --sort-by failed");
    let rows: Vec<Vec<String>> = stdout(&out)
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    assert_eq!(
        rows,
        [["Single", "1"], ["Repeated", "2"]],
        "the repeated event sorts after the single one: it was seen last"
    );
}
