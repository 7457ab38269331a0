//! StatefulSets against the embedded API server: OrderedReady creates
//! web-0, web-1, web-2 in order, each only once the one before is Ready;
//! a deleted pod comes back with its name and its claim; revisions and
//! status as upstream reports them.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

const NS: &str = "default";

async fn names(client: &kube::Client) -> Vec<String> {
    let mut n: Vec<String> = live_pods(client, NS)
        .await
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    n.sort();
    n
}

async fn claims(client: &kube::Client) -> BTreeMap<String, String> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| (c.metadata.name.unwrap(), c.metadata.uid.unwrap()))
        .collect()
}

async fn status(client: &kube::Client) -> k8s_openapi::api::apps::v1::StatefulSetStatus {
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    api.get("web").await.unwrap().status.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_pods_keep_their_names_and_claims() {
    let env = start().await;
    let client = env.client.clone();
    create::<StatefulSet>(
        &client,
        NS,
        json!({
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 3,
                "serviceName": "web",
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "www"},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "1Gi"}}}}]
            }
        }),
    )
    .await;

    // Each pod appears only once the one before it is Ready.
    for (i, want) in ["web-0", "web-1", "web-2"].iter().enumerate() {
        eventually(want, 30, async || names(&client).await.len() == i + 1).await;
        assert_eq!(names(&client).await.last().map(String::as_str), Some(*want));
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            names(&client).await.len(),
            i + 1,
            "the next pod must wait for {want} to be Ready"
        );
        mark_ready(&client, NS, want, &format!("127.0.1.{}", i + 2)).await;
    }
    eventually("3 ready replicas", 30, async || {
        status(&client).await.ready_replicas == Some(3)
    })
    .await;
    let s = status(&client).await;
    assert_eq!(
        (s.replicas, s.current_replicas, s.updated_replicas),
        (3, Some(3), Some(3))
    );
    assert!(s.current_revision.is_some());
    assert_eq!(s.current_revision, s.update_revision);
    let revs: Api<ControllerRevision> = Api::namespaced(client.clone(), NS);
    let revs = revs.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(revs.len(), 1);
    assert_eq!(revs[0].metadata.name, s.update_revision);
    assert_eq!(revs[0].revision, 1);

    let before = claims(&client).await;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        ["www-web-0", "www-web-1", "www-web-2"]
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let web1 = pods.get("web-1").await.unwrap();
    let vol = &web1.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
    assert_eq!(
        vol.persistent_volume_claim.as_ref().unwrap().claim_name,
        "www-web-1"
    );
    let labels = web1.metadata.labels.clone().unwrap();
    assert_eq!(labels["statefulset.kubernetes.io/pod-name"], "web-1");
    assert_eq!(labels["apps.kubernetes.io/pod-index"], "1");
    assert_eq!(
        Some(&labels["controller-revision-hash"]),
        s.update_revision.as_ref()
    );

    // A deleted pod comes back under its name, with the same claim.
    pods.delete("web-1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("web-1 to come back", 30, async || {
        pods.get_opt("web-1")
            .await
            .ok()
            .flatten()
            .is_some_and(|p| p.metadata.uid != web1.metadata.uid)
    })
    .await;
    assert_eq!(
        claims(&client).await,
        before,
        "the claims outlive their pods"
    );

    // Scaling down removes the highest ordinal first; claims stay.
    mark_ready(&client, NS, "web-1", "127.0.1.9").await;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    eventually("one pod", 30, async || names(&client).await == ["web-0"]).await;
    assert_eq!(claims(&client).await, before);
}
