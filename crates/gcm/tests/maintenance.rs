//! The Shoot maintenance controller against the embedded API server:
//! maintenance on request and in the window, once per window, through an
//! NCP's rendered profile, failures recorded, and shoots outside their
//! window left alone.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use common::*;
use gardener::Shoot;
use kube::api::{Patch, PatchParams};
use serde_json::json;

const ANNOTATION: &str = "gardener.cloud/operation";

fn cp_parent(name: &str) -> serde_json::Value {
    json!({"kind": "CloudProfile", "name": name})
}

fn image_version(s: &Shoot) -> String {
    s.spec.provider.workers[0]
        .machine
        .image
        .as_ref()
        .and_then(|i| i.version.clone())
        .unwrap_or_default()
}

fn annotated(mut obj: serde_json::Value) -> serde_json::Value {
    obj["metadata"]["annotations"] = json!({ANNOTATION: "maintain"});
    obj
}

#[tokio::test]
async fn maintain_annotation_updates_the_image_within_its_strategy() {
    let client = server().await;
    let running = start(&client, gcm::Config::default());
    // Strategy patch: 1.0.0 may move to 1.0.3, never to 1.1.0 or 2.0.0.
    let versions = ["1.0.0", "1.0.3", "1.0.2", "1.1.0", "2.0.0"]
        .map(version)
        .to_vec();
    create(
        &cloud_profiles(&client),
        cloud_profile("local", versions, "patch"),
    )
    .await;
    let far = window_around(Utc::now(), 6, 7);
    let api = shoots(&client);
    create(
        &api,
        shoot("quiet", cp_parent("local"), "1.0.0", Some(far.clone())),
    )
    .await;
    create(
        &api,
        annotated(shoot("asked", cp_parent("local"), "1.0.0", Some(far))),
    )
    .await;

    eventually("the asked-for maintenance", 10, async || {
        let s = api.get("asked").await.unwrap();
        s.status
            .as_ref()
            .and_then(|st| st.last_maintenance.as_ref())
            .is_some_and(|l| l.state == "Succeeded")
    })
    .await;
    let s = api.get("asked").await.unwrap();
    assert_eq!(image_version(&s), "1.0.3");
    assert!(
        !s.metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .contains_key(ANNOTATION),
        "annotation kept: {:?}",
        s.metadata.annotations
    );
    let last = s.status.unwrap().last_maintenance.unwrap();
    assert!(
        last.description.contains("1.0.0") && last.description.contains("1.0.3"),
        "{}",
        last.description
    );
    assert!(last.failure_reason.is_none());
    let triggered = last.triggered_time.expect("triggered time").0;
    assert!((Utc::now() - triggered).num_seconds().abs() < 30);
    eventually("the image maintenance event", 10, async || {
        events_of(&client, "asked")
            .await
            .iter()
            .any(|(t, r, note)| {
                t == "Normal" && r == "MachineImageVersionMaintenance" && note.contains("1.0.3")
            })
    })
    .await;
    // Everything else in the spec is as it was.
    assert_eq!(s.spec.kubernetes.version, "1.31.2");
    assert_eq!(s.spec.provider.workers[0].maximum, 2);
    assert_eq!(s.spec.provider.workers[0].zones, vec!["z1".to_string()]);

    // The shoot outside its window, without annotation, was not touched.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let quiet = api.get("quiet").await.unwrap();
    assert_eq!(image_version(&quiet), "1.0.0");
    assert!(quiet.status.and_then(|s| s.last_maintenance).is_none());
    assert!(events_of(&client, "quiet").await.is_empty());

    // Asking again once more finds nothing to do, and says so.
    let patch = json!({"metadata": {"annotations": {ANNOTATION: "maintain"}}});
    api.patch("asked", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the second request to be handled", 10, async || {
        let s = api.get("asked").await.unwrap();
        !s.metadata
            .annotations
            .unwrap_or_default()
            .contains_key(ANNOTATION)
            && s.status
                .and_then(|st| st.last_maintenance)
                .is_some_and(|l| l.description == gcm::maintain::NOTHING_TO_DO)
    })
    .await;
    assert_eq!(image_version(&api.get("asked").await.unwrap()), "1.0.3");
    running.stop().await;
}

#[tokio::test]
async fn in_its_window_a_shoot_is_maintained_once_through_its_ncp() {
    let client = server().await;
    let running = start(&client, gcm::Config::default());
    let versions = ["1.0.0", "1.0.1"].map(version).to_vec();
    create(
        &cloud_profiles(&client),
        cloud_profile("local", versions, "patch"),
    )
    .await;
    // The NCP offers 1.0.5, which only its rendered status knows.
    create(
        &ncps(&client),
        ncp("dev", cp_parent("local"), vec![version("1.0.5")]),
    )
    .await;
    eventually("the NCP to render", 10, async || {
        rendered_versions(&ncps(&client).get("dev").await.unwrap()).contains(&"1.0.5".to_string())
    })
    .await;
    let open = window_around(Utc::now(), -1, 2);
    let api = shoots(&client);
    create(
        &api,
        shoot(
            "windowed",
            json!({"kind": "NamespacedCloudProfile", "name": "dev"}),
            "1.0.0",
            Some(open),
        ),
    )
    .await;
    eventually("maintenance in the window", 10, async || {
        image_version(&api.get("windowed").await.unwrap()) == "1.0.5"
    })
    .await;
    eventually("the record", 10, async || {
        api.get("windowed")
            .await
            .unwrap()
            .status
            .and_then(|s| s.last_maintenance)
            .is_some_and(|l| l.state == "Succeeded")
    })
    .await;
    let first = api
        .get("windowed")
        .await
        .unwrap()
        .status
        .unwrap()
        .last_maintenance
        .unwrap();

    // A newer version appears and the shoot changes (a watch event): it was
    // already maintained in this window, so nothing happens until the next.
    let patch = json!({"spec": {"machineImages": [{"name": "gardenlinux", "versions": [{"version": "1.0.5"}, {"version": "1.0.9"}]}]}});
    ncps(&client)
        .patch("dev", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the NCP to render 1.0.9", 10, async || {
        rendered_versions(&ncps(&client).get("dev").await.unwrap()).contains(&"1.0.9".to_string())
    })
    .await;
    let labels = json!({"metadata": {"labels": {"touched": "yes"}}});
    api.patch("windowed", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let s = api.get("windowed").await.unwrap();
    assert_eq!(image_version(&s), "1.0.5");
    assert_eq!(s.status.unwrap().last_maintenance.unwrap(), first);
    running.stop().await;
}

#[tokio::test]
async fn an_expired_version_without_successor_fails_with_a_warning() {
    let client = server().await;
    let running = start(&client, gcm::Config::default());
    let expired = json!({"version": "1.0.0", "expirationDate": "2020-01-01T00:00:00Z"});
    create(
        &cloud_profiles(&client),
        cloud_profile("local", vec![expired], "major"),
    )
    .await;
    let far = window_around(Utc::now(), 6, 7);
    let api = shoots(&client);
    create(
        &api,
        annotated(shoot("stuck", cp_parent("local"), "1.0.0", Some(far))),
    )
    .await;
    eventually("a failed maintenance", 10, async || {
        api.get("stuck")
            .await
            .unwrap()
            .status
            .and_then(|s| s.last_maintenance)
            .is_some_and(|l| l.state == "Failed")
    })
    .await;
    let s = api.get("stuck").await.unwrap();
    assert_eq!(image_version(&s), "1.0.0");
    let annotations: BTreeMap<String, String> = s.metadata.annotations.clone().unwrap_or_default();
    assert!(!annotations.contains_key(ANNOTATION));
    let reason = s
        .status
        .unwrap()
        .last_maintenance
        .unwrap()
        .failure_reason
        .unwrap_or_default();
    assert!(reason.contains("pool"), "{reason}");
    eventually("the warning", 10, async || {
        events_of(&client, "stuck")
            .await
            .iter()
            .any(|(t, r, _)| t == "Warning" && r == "ShootMaintenanceFailed")
    })
    .await;
    running.stop().await;
}
