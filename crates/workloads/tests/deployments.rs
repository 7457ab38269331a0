//! Deployments against the embedded API server: ReplicaSets and pods as
//! kube-controller-manager makes them, a rolling update that never leaves
//! the surge and unavailability bounds (sampled throughout), `kubectl
//! rollout restart`, and scaling to zero.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, ListParams, Patch, PatchParams};
use parking_lot::Mutex;
use serde_json::json;

const NS: &str = "default";

fn web(replicas: i32, image: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": image}]}}
        }
    })
}

async fn sets(client: &kube::Client) -> Vec<ReplicaSet> {
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default()).await.unwrap().items
}

async fn deployment(client: &kube::Client) -> Deployment {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NS);
    api.get("web").await.unwrap()
}

/// The rollout is done: every replica updated and available.
async fn rolled_out(client: &kube::Client, replicas: i32) -> bool {
    let d = deployment(client).await;
    let s = d.status.unwrap_or_default();
    s.observed_generation == d.metadata.generation
        && s.updated_replicas == Some(replicas)
        && s.replicas == Some(replicas)
        && s.available_replicas.unwrap_or(0) == replicas
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_rolls_out_within_its_bounds_restarts_and_scales_to_zero() {
    let env = start().await;
    let client = env.client.clone();
    let kubelet = kubelet(client.clone(), NS, Duration::from_millis(150));
    create::<Deployment>(&client, NS, web(3, "nginx:1")).await;

    // Three pods with one ReplicaSet, named and labelled as upstream.
    eventually("3 ready pods", 30, async || rolled_out(&client, 3).await).await;
    let rs = sets(&client).await;
    assert_eq!(rs.len(), 1);
    let first = rs[0].clone();
    let hash = first.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    assert_eq!(
        first.metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    let annotations = first.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["deployment.kubernetes.io/revision"], "1");
    assert_eq!(
        annotations["deployment.kubernetes.io/desired-replicas"],
        "3"
    );
    assert_eq!(annotations["deployment.kubernetes.io/max-replicas"], "4");
    let pods = live_pods(&client, NS).await;
    assert_eq!(pods.len(), 3);
    for p in &pods {
        let name = p.metadata.name.as_deref().unwrap();
        assert!(name.starts_with(&format!("web-{hash}-")), "{name}");
        assert_eq!(name.len(), format!("web-{hash}-").len() + 5);
        let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("ReplicaSet", Some(true))
        );
        assert_eq!(
            p.metadata.labels.as_ref().unwrap()["pod-template-hash"],
            hash
        );
    }
    let d = deployment(&client).await;
    let s = d.status.clone().unwrap();
    let cond = |t: &str| {
        s.conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == t)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        cond("Available").reason.as_deref(),
        Some("MinimumReplicasAvailable")
    );
    assert_eq!(
        cond("Progressing").reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );
    assert_eq!(
        d.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"],
        "1"
    );
    let rs_status = sets(&client).await[0].status.clone().unwrap();
    assert_eq!(
        (
            rs_status.replicas,
            rs_status.ready_replicas,
            rs_status.available_replicas
        ),
        (3, Some(3), Some(3))
    );

    // A template change rolls one pod at a time: never more than 3 + 1
    // pods, never fewer than 3 ready.
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (client, violations, sampling) = (client.clone(), violations.clone(), sampling.clone());
        tokio::spawn(async move {
            let mut samples = 0;
            while sampling.load(Ordering::SeqCst) {
                let pods = live_pods(&client, NS).await;
                let ready = pods.iter().filter(|p| is_ready(p)).count();
                if pods.len() > 4 || ready < 3 {
                    violations
                        .lock()
                        .push(format!("{} pods, {ready} ready", pods.len()));
                }
                samples += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            samples
        })
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(&image))
        .await
        .unwrap();
    eventually("the rollout to nginx:2", 60, async || {
        rolled_out(&client, 3).await && sets(&client).await.len() == 2
    })
    .await;
    sampling.store(false, Ordering::SeqCst);
    let samples = sampler.await.unwrap();
    assert!(samples > 20, "only {samples} samples");
    assert!(violations.lock().is_empty(), "{:?}", violations.lock());
    let all = sets(&client).await;
    let old = all
        .iter()
        .find(|r| r.metadata.name == first.metadata.name)
        .unwrap();
    assert_eq!(old.spec.as_ref().unwrap().replicas, Some(0));
    let new = all
        .iter()
        .find(|r| r.metadata.name != first.metadata.name)
        .unwrap();
    assert_eq!(
        new.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"],
        "2"
    );
    for p in live_pods(&client, NS).await {
        let images: Vec<_> = p
            .spec
            .unwrap()
            .containers
            .into_iter()
            .map(|c| c.image)
            .collect();
        assert_eq!(images, [Some("nginx:2".to_string())]);
    }

    // `kubectl rollout restart`: a restartedAt template annotation.
    let restart = json!({"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(&restart))
        .await
        .unwrap();
    eventually("the restart", 60, async || {
        rolled_out(&client, 3).await && sets(&client).await.len() == 3
    })
    .await;
    let restarted: Vec<String> = live_pods(&client, NS)
        .await
        .into_iter()
        .filter_map(|p| {
            p.metadata
                .annotations?
                .get("kubectl.kubernetes.io/restartedAt")
                .cloned()
        })
        .collect();
    assert_eq!(restarted.len(), 3);

    // Scale to zero: every pod goes, the sets stay as history.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    eventually("no pods", 30, async || {
        live_pods(&client, NS).await.is_empty()
    })
    .await;
    eventually("the status at zero", 30, async || {
        let s = deployment(&client).await.status.unwrap_or_default();
        s.replicas == Some(0) && s.available_replicas == Some(0)
    })
    .await;
    assert!(
        sets(&client)
            .await
            .iter()
            .all(|r| r.spec.as_ref().unwrap().replicas == Some(0))
    );
    kubelet.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_pods_are_adopted_and_released_pods_replaced() {
    let env = start().await;
    let client = env.client.clone();
    // An orphan that matches the set's selector before the set exists.
    create::<k8s_openapi::api::core::v1::Pod>(
        &client,
        NS,
        json!({"metadata": {"name": "stray", "labels": {"app": "db", "tier": "x"}},
               "spec": {"containers": [{"name": "c", "image": "postgres"}]}}),
    )
    .await;
    create::<ReplicaSet>(
        &client,
        NS,
        json!({"metadata": {"name": "db"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "db"}},
                        "template": {"metadata": {"labels": {"app": "db"}},
                                     "spec": {"containers": [{"name": "c", "image": "postgres"}]}}}}),
    )
    .await;
    eventually("the stray pod adopted and one more made", 30, async || {
        let pods = live_pods(&client, NS).await;
        pods.len() == 2
            && pods.iter().all(|p| {
                p.metadata
                    .owner_references
                    .as_ref()
                    .is_some_and(|r| r.iter().any(|r| r.kind == "ReplicaSet" && r.name == "db"))
            })
    })
    .await;
    // A pod relabelled out of the selector is released and replaced.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), NS);
    pods.patch(
        "stray",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await
    .unwrap();
    eventually("the stray pod released and replaced", 30, async || {
        let all = live_pods(&client, NS).await;
        let stray = all
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some("stray"));
        let released = stray.is_some_and(|p| p.metadata.owner_references.is_none());
        let owned = all
            .iter()
            .filter(|p| p.metadata.owner_references.is_some())
            .count();
        released && owned == 2
    })
    .await;
}
