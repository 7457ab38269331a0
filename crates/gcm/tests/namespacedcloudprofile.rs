//! The NamespacedCloudProfile controller against the embedded API server:
//! rendering into status, re-rendering on parent changes, multi-level
//! chains, and deletion held while Shoots use the profile.

mod common;

use std::time::Duration;

use common::*;
use gardener::Extensions;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

fn cp_parent(name: &str) -> serde_json::Value {
    json!({"kind": "CloudProfile", "name": name})
}

fn ncp_parent(name: &str) -> serde_json::Value {
    json!({"kind": "NamespacedCloudProfile", "name": name})
}

#[tokio::test]
async fn renders_into_status_and_follows_its_parent() {
    let client = server().await;
    let running = start(&client, gcm::Config::default());
    create(
        &cloud_profiles(&client),
        cloud_profile("local", vec![version("1.0.0")], "major"),
    )
    .await;
    create(
        &ncps(&client),
        ncp("dev", cp_parent("local"), vec![version("1.5.0")]),
    )
    .await;

    let api = ncps(&client);
    eventually("the NCP to be rendered", 10, async || {
        let n = api.get("dev").await.unwrap();
        rendered_versions(&n) == ["1.0.0", "1.5.0"]
            && n.status.as_ref().and_then(|s| s.observed_generation) == n.metadata.generation
    })
    .await;
    let n = api.get("dev").await.unwrap();
    assert_eq!(n.metadata.finalizers, Some(vec!["gardener".to_string()]));
    let status = n.status.clone().unwrap();
    assert_eq!(status.cloud_profile_spec.type_, "local");
    assert_eq!(status.cloud_profile_spec.regions.len(), 1);

    // Written once: nothing changes while nothing changes.
    let rv = n.metadata.resource_version.clone();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        api.get("dev").await.unwrap().metadata.resource_version,
        rv,
        "status rewritten without a change"
    );

    // The parent gains a version: the NCP follows.
    let cps = cloud_profiles(&client);
    let patch = json!({"spec": {"machineImages": [{
        "name": "gardenlinux", "updateStrategy": "major",
        "versions": [{"version": "1.0.0"}, {"version": "1.1.0"}],
    }]}});
    cps.patch("local", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the NCP to follow its parent", 10, async || {
        rendered_versions(&api.get("dev").await.unwrap()) == ["1.0.0", "1.1.0", "1.5.0"]
    })
    .await;

    // The NCP's own spec changes: a new generation is rendered.
    let patch = json!({"spec": {"machineImages": [{"name": "gardenlinux", "versions": [{"version": "1.6.0"}]}]}});
    api.patch("dev", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the new generation to be rendered", 10, async || {
        let n = api.get("dev").await.unwrap();
        rendered_versions(&n) == ["1.0.0", "1.1.0", "1.6.0"]
            && n.status.as_ref().and_then(|s| s.observed_generation) == n.metadata.generation
            && n.metadata.generation == Some(2)
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn a_missing_parent_is_reported_then_rendered_once_it_appears() {
    let client = server().await;
    let running = start(&client, gcm::Config::default());
    create(&ncps(&client), ncp("early", cp_parent("later"), vec![])).await;
    eventually("a warning about the missing parent", 10, async || {
        events_of(&client, "early")
            .await
            .iter()
            .any(|(t, r, note)| {
                t == "Warning" && r == "ParentNotAvailable" && note.contains("later")
            })
    })
    .await;
    assert!(ncps(&client).get("early").await.unwrap().status.is_none());
    create(
        &cloud_profiles(&client),
        cloud_profile("later", vec![version("2.0.0")], "major"),
    )
    .await;
    eventually("the NCP to render once its parent exists", 10, async || {
        rendered_versions(&ncps(&client).get("early").await.unwrap()) == ["2.0.0"]
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn multi_level_chains_render_and_follow_ancestors() {
    let client = server().await;
    let config = gcm::Config {
        extensions: Extensions {
            multi_level_inheritance: true,
            cross_project_use: false,
        },
        ..Default::default()
    };
    let running = start(&client, config);
    create(
        &cloud_profiles(&client),
        cloud_profile("local", vec![version("1.0.0")], "major"),
    )
    .await;
    create(
        &ncps(&client),
        ncp("team", cp_parent("local"), vec![version("1.1.0")]),
    )
    .await;
    create(
        &ncps(&client),
        ncp("squad", ncp_parent("team"), vec![version("1.2.0")]),
    )
    .await;
    let api = ncps(&client);
    eventually(
        "the grandchild to render through the chain",
        10,
        async || rendered_versions(&api.get("squad").await.unwrap()) == ["1.0.0", "1.1.0", "1.2.0"],
    )
    .await;

    // The middle of the chain changes: the grandchild follows.
    let patch = json!({"spec": {"machineImages": [{"name": "gardenlinux", "versions": [{"version": "1.1.5"}]}]}});
    api.patch("team", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the grandchild to follow its parent NCP", 10, async || {
        rendered_versions(&api.get("squad").await.unwrap()) == ["1.0.0", "1.1.5", "1.2.0"]
    })
    .await;

    // The root changes: both levels follow.
    let patch = json!({"spec": {"machineImages": [{
        "name": "gardenlinux", "updateStrategy": "major", "versions": [{"version": "0.9.0"}],
    }]}});
    cloud_profiles(&client)
        .patch("local", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("both levels to follow the root", 10, async || {
        rendered_versions(&api.get("team").await.unwrap()) == ["0.9.0", "1.1.5"]
            && rendered_versions(&api.get("squad").await.unwrap()) == ["0.9.0", "1.1.5", "1.2.0"]
    })
    .await;

    // A cycle is reported, not a crash; the rest keeps working.
    create(&api, ncp("loop-a", ncp_parent("loop-b"), vec![])).await;
    create(&api, ncp("loop-b", ncp_parent("loop-a"), vec![])).await;
    eventually("a warning about the cycle", 10, async || {
        events_of(&client, "loop-a")
            .await
            .iter()
            .any(|(t, r, note)| {
                t == "Warning" && r == "ParentNotAvailable" && note.contains("cycle")
            })
    })
    .await;

    // The parent NCP cannot go while its child inherits from it.
    api.delete("team", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        api.get("team")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    let held = api.get("team").await.unwrap();
    assert_eq!(held.metadata.finalizers, Some(vec!["gardener".to_string()]));
    assert!(events_of(&client, "team").await.iter().any(|(t, r, note)| {
        t == "Warning" && r == "ResourceReferenced" && note.contains("squad")
    }));
    // The child goes, and the parent follows promptly (the child's
    // deletion triggers the parent's check, well before the re-check).
    api.delete("squad", &DeleteParams::default()).await.unwrap();
    eventually("both to go", 10, async || {
        api.get_opt("squad").await.unwrap().is_none()
            && api.get_opt("team").await.unwrap().is_none()
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn without_multi_level_an_ncp_parent_is_reported() {
    let client = server().await;
    let running = start(&client, gcm::Config::default());
    create(
        &cloud_profiles(&client),
        cloud_profile("local", vec![version("1.0.0")], "major"),
    )
    .await;
    create(&ncps(&client), ncp("team", cp_parent("local"), vec![])).await;
    create(&ncps(&client), ncp("squad", ncp_parent("team"), vec![])).await;
    eventually(
        "a warning that multi-level inheritance is off",
        10,
        async || {
            events_of(&client, "squad")
                .await
                .iter()
                .any(|(t, _, note)| t == "Warning" && note.contains("multi-level"))
        },
    )
    .await;
    assert!(ncps(&client).get("squad").await.unwrap().status.is_none());
    assert!(ncps(&client).get("team").await.unwrap().status.is_some());
    running.stop().await;
}

#[tokio::test]
async fn deletion_waits_for_the_shoots_that_use_it() {
    let client = server().await;
    let running = start(&client, gcm::Config::default());
    create(
        &cloud_profiles(&client),
        cloud_profile("local", vec![version("1.0.0")], "major"),
    )
    .await;
    create(&ncps(&client), ncp("dev", cp_parent("local"), vec![])).await;
    let api = ncps(&client);
    eventually("the finalizer", 10, async || {
        api.get("dev").await.unwrap().metadata.finalizers == Some(vec!["gardener".to_string()])
    })
    .await;
    // A shoot using it (maintenance is kept out of the way by a window
    // far from now).
    let far = window_around(chrono::Utc::now(), 6, 7);
    create(
        &shoots(&client),
        shoot("user", ncp_parent("dev"), "1.0.0", Some(far.clone())),
    )
    .await;
    // A shoot using another profile does not hold it.
    create(
        &shoots(&client),
        shoot("bystander", cp_parent("local"), "1.0.0", Some(far)),
    )
    .await;

    api.delete("dev", &DeleteParams::default()).await.unwrap();
    eventually("a warning naming the shoot", 10, async || {
        events_of(&client, "dev").await.iter().any(|(t, r, note)| {
            t == "Warning"
                && r == "ResourceReferenced"
                && note.contains("garden-dev/user")
                && !note.contains("bystander")
        })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = api.get("dev").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(held.metadata.finalizers, Some(vec!["gardener".to_string()]));

    // The shoot goes: the NCP follows promptly (well before the periodic
    // re-check), because the Shoot's deletion triggers the check.
    shoots(&client)
        .delete("user", &DeleteParams::default())
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    eventually("the NCP to be deleted", 10, async || {
        api.get_opt("dev").await.unwrap().is_none()
    })
    .await;
    assert!(started.elapsed() < gcm::controllers::namespacedcloudprofile::DELETION_RECHECK);
    running.stop().await;
}
