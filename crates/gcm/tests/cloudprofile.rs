//! The CloudProfile controller against the embedded API server: the
//! classification of every version in status, updated when a lifecycle
//! stage begins, and deletion held while Shoots or NCPs use the profile.

mod common;

use chrono::{SecondsFormat, Utc};
use common::*;
use gardener::{Classification, CloudProfile};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

fn classifications(cp: &CloudProfile) -> Vec<(String, Classification)> {
    let Some(st) = cp.status.as_ref() else {
        return Vec::new();
    };
    let mut out: Vec<(String, Classification)> = st
        .kubernetes
        .iter()
        .flat_map(|k| k.versions.iter())
        .map(|v| (v.version.clone(), v.classification))
        .collect();
    for i in &st.machine_images {
        for v in &i.versions {
            out.push((format!("{} {}", i.name, v.version), v.classification));
        }
    }
    out
}

fn owned(rows: &[(&str, Classification)]) -> Vec<(String, Classification)> {
    rows.iter().map(|(v, c)| (v.to_string(), *c)).collect()
}

#[tokio::test]
async fn status_classifies_versions_and_follows_their_lifecycle() {
    use Classification::*;
    let client = server().await;
    let running = start(&client, gcm::Config::default());
    // 1.0.0 expires in three seconds; 1.1.0 is a preview with a lifecycle
    // that makes it supported at the same moment.
    let soon =
        (Utc::now() + chrono::Duration::seconds(3)).to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut profile = cloud_profile(
        "local",
        vec![
            json!({"version": "1.0.0", "classification": "deprecated", "expirationDate": soon}),
            json!({"version": "1.1.0", "lifecycle": [
                {"classification": "preview"},
                {"classification": "supported", "startTime": soon},
            ]}),
        ],
        "major",
    );
    profile["spec"]["kubernetes"]["versions"] = json!([
        {"version": "1.31.2", "classification": "supported"},
        {"version": "1.30.9", "classification": "deprecated", "expirationDate": "2020-01-01T00:00:00Z"},
    ]);
    create(&cloud_profiles(&client), profile).await;
    let api = cloud_profiles(&client);

    let before = owned(&[
        ("1.31.2", Supported),
        ("1.30.9", Expired),
        ("gardenlinux 1.0.0", Deprecated),
        ("gardenlinux 1.1.0", Preview),
    ]);
    eventually("the classifications in status", 10, async || {
        classifications(&api.get("local").await.unwrap()) == before
    })
    .await;
    let cp = api.get("local").await.unwrap();
    assert_eq!(cp.metadata.finalizers, Some(vec!["gardener".to_string()]));

    // Nothing in the spec changes; the controller wakes at the transition.
    let after = owned(&[
        ("1.31.2", Supported),
        ("1.30.9", Expired),
        ("gardenlinux 1.0.0", Expired),
        ("gardenlinux 1.1.0", Supported),
    ]);
    eventually("the classifications after the transition", 10, async || {
        classifications(&api.get("local").await.unwrap()) == after
    })
    .await;

    running.stop().await;
}

async fn events_about(client: &kube::Client, name: &str) -> Vec<(String, String)> {
    // Events of a cluster-scoped object live in `default`.
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn deletion_waits_for_shoots_and_ncps_using_the_profile() {
    let client = server().await;
    let running = start(&client, gcm::Config::default());
    let cps = cloud_profiles(&client);
    create(
        &cps,
        cloud_profile("local", vec![version("1.0.0")], "major"),
    )
    .await;
    create(
        &cps,
        cloud_profile("other", vec![version("1.0.0")], "major"),
    )
    .await;
    let parent = json!({"kind": "CloudProfile", "name": "local"});
    create(&ncps(&client), ncp("dev", parent.clone(), vec![])).await;
    create(&shoots(&client), shoot("web", parent, "1.0.0", None)).await;
    eventually("finalizers on both profiles", 10, async || {
        let mut all = true;
        for name in ["local", "other"] {
            all &= cps.get(name).await.unwrap().metadata.finalizers
                == Some(vec!["gardener".to_string()]);
        }
        all
    })
    .await;

    // A profile nobody uses goes at once.
    cps.delete("other", &DeleteParams::default()).await.unwrap();
    eventually("the unused profile gone", 10, async || {
        cps.get_opt("other").await.unwrap().is_none()
    })
    .await;

    // The used one stays, with a Warning naming who holds it.
    cps.delete("local", &DeleteParams::default()).await.unwrap();
    eventually("the Warning naming the users", 10, async || {
        events_about(&client, "local")
            .await
            .iter()
            .any(|(reason, note)| {
                reason == "ResourceReferenced"
                    && note.contains("Shoots garden-dev/web")
                    && note.contains("NamespacedCloudProfiles garden-dev/dev")
            })
    })
    .await;
    let held = cps.get("local").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());

    // The Shoot goes: the NCP still holds it. (The Warning's note is not
    // rewritten: kube-runtime's recorder counts repeats of a reason as a
    // series of the first event.)
    shoots(&client)
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let held = cps.get("local").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(held.metadata.finalizers, Some(vec!["gardener".to_string()]));

    // The NCP goes (its own controller releases it): so does the profile,
    // promptly rather than at the 30 s recheck.
    ncps(&client)
        .delete("dev", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the profile gone", 10, async || {
        cps.get_opt("local").await.unwrap().is_none()
    })
    .await;

    running.stop().await;
}
