//! The machine controller's event recorder against the embedded API
//! server: a new event is an events.k8s.io/v1 Event, a repeat about the same
//! object is a series on it, and another object's event is its own.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::events::{Event, EventType, Reporter};
use mcm::controllers::events::EventRecorder;

const NS: &str = "default";

/// An event's object, reason, series count and note.
type Summary = (Option<String>, Option<String>, Option<i32>, Option<String>);

fn machine(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(api::GROUP_VERSION.into()),
        kind: Some("Machine".into()),
        name: Some(name.into()),
        namespace: Some(NS.into()),
        uid: Some(format!("uid-{name}")),
        ..ObjectReference::default()
    }
}

fn created(note: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: "Created".into(),
        note: Some(note.into()),
        action: "Created".into(),
        secondary: None,
    }
}

#[tokio::test]
async fn repeats_become_a_series_on_the_first_event() {
    let client = testkit::bare_cluster().await.client();
    let r = EventRecorder::new(
        client.clone(),
        Reporter {
            controller: "machine-controller".into(),
            instance: None,
        },
    );
    r.publish(&created("first"), &machine("a")).await.unwrap();
    r.publish(&created("second"), &machine("a")).await.unwrap();
    r.publish(&created("third"), &machine("a")).await.unwrap();
    r.publish(&created("other"), &machine("b")).await.unwrap();

    let events: Api<K8sEvent> = Api::namespaced(client, NS);
    let mut list = events.list(&ListParams::default()).await.unwrap().items;
    list.sort_by_key(|e| e.regarding.as_ref().and_then(|r| r.name.clone()));
    let summary: Vec<Summary> = list
        .iter()
        .map(|e| {
            (
                e.regarding.as_ref().and_then(|r| r.name.clone()),
                e.reason.clone(),
                e.series.as_ref().map(|s| s.count),
                e.note.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                Some("a".into()),
                Some("Created".into()),
                Some(3),
                Some("first".into())
            ),
            (
                Some("b".into()),
                Some("Created".into()),
                None,
                Some("other".into())
            ),
        ]
    );
    let a = &list[0];
    assert_eq!(
        a.reporting_controller.as_deref(),
        Some("machine-controller")
    );
    assert_eq!(a.type_.as_deref(), Some("Normal"));
    assert!(a.event_time.is_some());
}
