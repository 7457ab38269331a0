//! The API server driven by the kube-rs client, as controllers will drive it:
//! typed CRUD, CRDs, selectors and pagination, watchers and reflectors
//! (including across a 410), finalizers, garbage collection, subresources,
//! generation rules and optimistic concurrency.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::start;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, PropagationPolicy,
};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use testkit::eventually;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().cloned().collect::<BTreeMap<_, _>>()},
        "data": {"k": "v"},
    }))
    .unwrap()
}

fn api_err(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn typed_crud_of_builtins() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let created = cms
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    // kube-apiserver sets no generation on ConfigMaps.
    assert_eq!(meta.generation, None);
    let rv1: i64 = meta.resource_version.as_ref().unwrap().parse().unwrap();

    let got = cms.get("a").await.unwrap();
    assert_eq!(got.data.unwrap()["k"], "v");

    let patched = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w", "n": "1"}})),
        )
        .await
        .unwrap();
    let rv2: i64 = patched
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1, "resource versions increase");
    assert_eq!(patched.data.as_ref().unwrap()["k"], "w");

    // A no-op patch keeps the resource version.
    let same = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        patched.metadata.resource_version
    );

    let mut replaced = patched.clone();
    replaced.data = Some([("only".to_string(), "this".to_string())].into());
    let replaced = cms
        .replace("a", &PostParams::default(), &replaced)
        .await
        .unwrap();
    assert_eq!(replaced.data.unwrap().len(), 1);

    let err = cms
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_err(err).1, "AlreadyExists");

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let err = cms.get("a").await.unwrap_err();
    let (code, reason, msg) = api_err(err);
    assert_eq!((code, reason.as_str()), (404, "NotFound"));
    assert_eq!(msg, "configmaps \"a\" not found");

    // generateName.
    let g: ConfigMap =
        serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).unwrap();
    let g = cms.create(&PostParams::default(), &g).await.unwrap();
    let name = g.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    // Creating into a missing namespace is 404.
    let missing: Api<ConfigMap> = Api::namespaced(t.client.clone(), "nope");
    let err = missing
        .create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_err(err).0, 404);

    // A malformed pod is rejected with field causes.
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let bad: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}),
    )
    .unwrap();
    let err = pods.create(&PostParams::default(), &bad).await.unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message.contains("spec.containers[0].image"),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn stale_update_conflicts() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let v1 = cms
        .create(&PostParams::default(), &cm("c", &[]))
        .await
        .unwrap();
    let mut a = v1.clone();
    a.data = Some([("k".into(), "first".into())].into());
    cms.replace("c", &PostParams::default(), &a).await.unwrap();
    let mut b = v1.clone();
    b.data = Some([("k".into(), "second".into())].into());
    let err = cms
        .replace("c", &PostParams::default(), &b)
        .await
        .unwrap_err();
    let (code, reason, msg) = api_err(err);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(msg.contains("the object has been modified"), "{msg}");
    assert_eq!(cms.get("c").await.unwrap().data.unwrap()["k"], "first");
}

#[tokio::test]
async fn list_selectors_and_pagination() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    for i in 0..25 {
        let tier = if i % 2 == 0 { "web" } else { "db" };
        let mut labels = vec![("tier", tier)];
        if i % 5 == 0 {
            labels.push(("canary", "yes"));
        }
        cms.create(&PostParams::default(), &cm(&format!("cm-{i:02}"), &labels))
            .await
            .unwrap();
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect()
    };
    let web = cms
        .list(&ListParams::default().labels("tier=web"))
        .await
        .unwrap();
    assert_eq!(web.items.len(), 13);
    let not_web = cms
        .list(&ListParams::default().labels("tier!=web"))
        .await
        .unwrap();
    assert_eq!(not_web.items.len(), 12);
    let set = cms
        .list(&ListParams::default().labels("tier in (db),canary"))
        .await
        .unwrap();
    assert_eq!(names(set), ["cm-05", "cm-15"]);
    let no_canary = cms
        .list(&ListParams::default().labels("!canary,tier notin (db)"))
        .await
        .unwrap();
    assert_eq!(no_canary.items.len(), 13 - 3);
    let one = cms
        .list(&ListParams::default().fields("metadata.name=cm-07"))
        .await
        .unwrap();
    assert_eq!(names(one), ["cm-07"]);
    let err = cms
        .list(&ListParams::default().fields("spec.bogus=1"))
        .await
        .unwrap_err();
    assert_eq!(api_err(err).0, 400);

    // Pagination: pages of 10 see a consistent snapshot.
    let first = cms.list(&ListParams::default().limit(10)).await.unwrap();
    assert_eq!(first.items.len(), 10);
    let token = first.metadata.continue_.clone().expect("continue token");
    cms.create(&PostParams::default(), &cm("cm-00a", &[]))
        .await
        .unwrap();
    let second = cms
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    let third = cms
        .list(
            &ListParams::default()
                .limit(10)
                .continue_token(second.metadata.continue_.as_ref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(third.items.len(), 5);
    assert!(third.metadata.continue_.as_deref().unwrap_or("").is_empty());
    let mut all = names(first);
    all.extend(names(second));
    all.extend(names(third));
    assert_eq!(all.len(), 25);
    assert!(
        !all.contains(&"cm-00a".to_string()),
        "a later create is not in the snapshot"
    );
    // Filtered pagination.
    let p = cms
        .list(&ListParams::default().labels("tier=db").limit(5))
        .await
        .unwrap();
    assert_eq!(p.items.len(), 5);
    let p2 = cms
        .list(
            &ListParams::default()
                .labels("tier=db")
                .limit(100)
                .continue_token(p.metadata.continue_.as_ref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(p2.items.len(), 7);
}

#[tokio::test]
async fn reflector_stays_in_sync_across_410() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(
        writer,
        watcher(cms.clone(), watcher::Config::default().labels("app=r")),
    )
    .default_backoff()
    .touched_objects();
    let handle = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(r) = stream.next().await {
            let _ = r;
        }
    });
    for i in 0..5 {
        cms.create(
            &PostParams::default(),
            &cm(&format!("r{i}"), &[("app", "r")]),
        )
        .await
        .unwrap();
    }
    cms.create(&PostParams::default(), &cm("other", &[("app", "x")]))
        .await
        .unwrap();
    let snapshot = |r: &reflector::Store<ConfigMap>| {
        let mut v: Vec<String> = r
            .state()
            .iter()
            .map(|c| {
                format!(
                    "{}={}",
                    c.metadata.name.clone().unwrap(),
                    c.data
                        .as_ref()
                        .and_then(|d| d.get("k"))
                        .cloned()
                        .unwrap_or_default()
                )
            })
            .collect();
        v.sort();
        v
    };
    eventually("the reflector's five ConfigMaps", 5, || {
        let s = snapshot(&reader);
        async move { (s.len() == 5).then_some(()) }
    })
    .await;
    cms.patch(
        "r1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "updated"}})),
    )
    .await
    .unwrap();
    cms.delete("r2", &DeleteParams::default()).await.unwrap();
    // r3 stops matching the selector: the watch must report it deleted.
    cms.patch(
        "r3",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "gone"}}})),
    )
    .await
    .unwrap();
    eventually("the reflector to see the update and the relabel", 5, || {
        let s = snapshot(&reader);
        async move { (s == ["r0=v", "r1=updated", "r4=v"]).then_some(()) }
    })
    .await;

    // Force a 410: history is expired, the watch ends; changes made now are
    // only visible through the relist the 410 forces.
    t.server.expire_watches();
    cms.delete("r0", &DeleteParams::default()).await.unwrap();
    cms.create(&PostParams::default(), &cm("r5", &[("app", "r")]))
        .await
        .unwrap();
    cms.patch(
        "r4",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "after410"}})),
    )
    .await
    .unwrap();
    eventually("the reflector to relist after 410 Gone", 10, || {
        let s = snapshot(&reader);
        async move { (s == ["r1=updated", "r4=after410", "r5=v"]).then_some(()) }
    })
    .await;
    handle.abort();
}

#[tokio::test]
async fn raw_watch_gets_410_in_stream() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let c = cms
        .create(&PostParams::default(), &cm("w", &[]))
        .await
        .unwrap();
    let rv = c.metadata.resource_version.unwrap();
    // Touch the hub so it exists, then expire it.
    let _ = cms
        .watch(&kube::api::WatchParams::default().timeout(1), &rv)
        .await
        .unwrap();
    t.server.expire_watches();
    let stream = cms
        .watch(&kube::api::WatchParams::default(), &rv)
        .await
        .unwrap();
    futures::pin_mut!(stream);
    let first = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap();
    match first {
        Ok(Some(kube::api::WatchEvent::Error(e))) => assert_eq!(e.code, 410),
        other => panic!("expected an in-stream 410, got {other:?}"),
    }
}

#[tokio::test]
async fn finalizer_helper_flow() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    cms.create(&PostParams::default(), &cm("f", &[]))
        .await
        .unwrap();
    let cleaned = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let run = |obj: ConfigMap| {
        let cms = cms.clone();
        let cleaned = cleaned.clone();
        async move {
            kube::runtime::finalizer(
                &cms,
                "trellis.test/cleanup",
                Arc::new(obj),
                |ev| async move {
                    match ev {
                        kube::runtime::finalizer::Event::Apply(_) => {
                            Ok::<_, kube::Error>(kube::runtime::controller::Action::await_change())
                        }
                        kube::runtime::finalizer::Event::Cleanup(_) => {
                            cleaned.store(true, std::sync::atomic::Ordering::SeqCst);
                            Ok(kube::runtime::controller::Action::await_change())
                        }
                    }
                },
            )
            .await
            .map_err(|e| format!("{e:?}"))
        }
    };
    run(cms.get("f").await.unwrap()).await.unwrap();
    let got = cms.get("f").await.unwrap();
    assert_eq!(
        got.metadata.finalizers.as_deref(),
        Some(&["trellis.test/cleanup".to_string()][..])
    );
    run(got).await.unwrap();
    cms.delete("f", &DeleteParams::default()).await.unwrap();
    let marked = cms.get("f").await.unwrap();
    assert!(
        marked.metadata.deletion_timestamp.is_some(),
        "an object with finalizers is only marked"
    );
    // No new finalizer while deleting.
    let err = cms
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["trellis.test/cleanup", "another"]}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_err(err).0, 422);
    run(marked).await.unwrap();
    assert!(cleaned.load(std::sync::atomic::Ordering::SeqCst));
    eventually("ConfigMap f to be gone once finalized", 5, || {
        let cms = cms.clone();
        async move { cms.get_opt("f").await.unwrap().is_none().then_some(()) }
    })
    .await;
}

fn owned_cm(name: &str, owner: &ConfigMap, block: bool) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid,
            "blockOwnerDeletion": block,
        }]},
    }))
    .unwrap()
}

#[tokio::test]
async fn garbage_collection_modes() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let pp = PostParams::default();
    let gone = |name: &'static str| {
        let cms = cms.clone();
        async move { cms.get_opt(name).await.unwrap().is_none().then_some(()) }
    };

    // Background: the owner goes at once, dependents follow.
    let owner = cms.create(&pp, &cm("bg-owner", &[])).await.unwrap();
    cms.create(&pp, &owned_cm("bg-dep1", &owner, false))
        .await
        .unwrap();
    cms.create(&pp, &owned_cm("bg-dep2", &owner, false))
        .await
        .unwrap();
    cms.delete("bg-owner", &DeleteParams::background())
        .await
        .unwrap();
    assert!(cms.get_opt("bg-owner").await.unwrap().is_none());
    eventually("bg-dep1 to be collected", 5, || gone("bg-dep1")).await;
    eventually("bg-dep2 to be collected", 5, || gone("bg-dep2")).await;

    // Orphan: dependents stay, without the owner reference.
    let owner = cms.create(&pp, &cm("or-owner", &[])).await.unwrap();
    cms.create(&pp, &owned_cm("or-dep", &owner, false))
        .await
        .unwrap();
    cms.delete("or-owner", &DeleteParams::orphan())
        .await
        .unwrap();
    eventually("or-owner to be gone", 5, || gone("or-owner")).await;
    let dep = cms.get("or-dep").await.unwrap();
    assert!(dep.metadata.owner_references.unwrap_or_default().is_empty());

    // Foreground: the owner waits (with its finalizer) for a blocking
    // dependent that is itself held by a finalizer.
    let owner = cms.create(&pp, &cm("fg-owner", &[])).await.unwrap();
    let mut held = owned_cm("fg-held", &owner, true);
    held.metadata.finalizers = Some(vec!["trellis.test/hold".into()]);
    cms.create(&pp, &held).await.unwrap();
    cms.create(&pp, &owned_cm("fg-free", &owner, false))
        .await
        .unwrap();
    cms.delete("fg-owner", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually("fg-free to be collected", 5, || gone("fg-free")).await;
    let o = cms.get("fg-owner").await.unwrap();
    assert!(
        o.metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    assert!(
        cms.get("fg-held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    cms.patch(
        "fg-held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("fg-held to be gone", 5, || gone("fg-held")).await;
    eventually("fg-owner to be gone", 5, || gone("fg-owner")).await;

    // Explicit propagation policy values are checked.
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    let err = cms.delete("missing", &dp).await.unwrap_err();
    assert_eq!(api_err(err).0, 404);
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                          "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }))
    .unwrap()
}

#[tokio::test]
async fn status_scale_and_generation() {
    let t = start().await;
    let deps: Api<Deployment> = Api::namespaced(t.client.clone(), "default");
    let d = deps
        .create(&PostParams::default(), &deployment("web", 2))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));

    // /status changes status only, and not generation.
    let s = deps
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"replicas": 2, "readyReplicas": 1}, "spec": {"replicas": 9}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(s.status.as_ref().unwrap().replicas, Some(2));
    assert_eq!(s.spec.as_ref().unwrap().replicas, Some(2));
    assert_eq!(s.metadata.generation, Some(1));

    // The main resource ignores status; metadata-only changes keep generation.
    let m = deps
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}, "status": {"replicas": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(m.metadata.generation, Some(1));
    assert_eq!(m.status.as_ref().unwrap().replicas, Some(2));

    // A spec change bumps generation.
    let g = deps
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minReadySeconds": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(g.metadata.generation, Some(2));

    // Scale.
    let scale = deps.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    assert_eq!(
        scale.status.as_ref().unwrap().selector.as_deref(),
        Some("app=web")
    );
    let scaled = deps
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(5));
    let d = deps.get("web").await.unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(5));
    assert_eq!(d.metadata.generation, Some(3));

    // Invalid objects are 422 with causes.
    let mut bad = deployment("bad", -1);
    bad.spec
        .as_mut()
        .unwrap()
        .template
        .metadata
        .as_mut()
        .unwrap()
        .labels = Some([("app".into(), "other".into())].into());
    match deps.create(&PostParams::default(), &bad).await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(s.message.contains("spec.replicas"), "{}", s.message);
            assert!(
                s.message.contains("spec.template.metadata.labels"),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
}

const WIDGET_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.example.com"},
  "spec": {
    "group": "example.com", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
      "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}],
      "schema": {"openAPIV3Schema": {
        "type": "object",
        "properties": {
          "spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "string", "enum": ["small", "large"]},
            "replicas": {"type": "integer", "minimum": 0, "default": 1},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
          }},
          "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
        }
      }}
    }]
  }
}"#;

#[tokio::test]
async fn custom_resources() {
    let t = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_str(WIDGET_CRD).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    kube::runtime::wait::await_condition(
        crds.clone(),
        "widgets.example.com",
        kube::runtime::conditions::is_crd_established(),
    )
    .await
    .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), "default", &ar);
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": "small", "unknown": 1, "extra": {"anything": {"goes": true}}},
        "status": {"replicas": 3},
    }))
    .unwrap();
    let created = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.data["spec"]["replicas"], 1, "defaulted");
    assert!(created.data["spec"].get("unknown").is_none(), "pruned");
    assert_eq!(
        created.data["spec"]["extra"]["anything"]["goes"], true,
        "preserved"
    );
    assert!(
        created.data.get("status").is_none(),
        "status is ignored on create"
    );

    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"},
        "spec": {"size": "huge", "replicas": -2},
    }))
    .unwrap();
    match widgets
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422, "{}", s.message);
            assert!(s.message.contains("spec.size"), "{}", s.message);
            assert!(s.message.contains("spec.replicas"), "{}", s.message);
        }
        other => panic!("{other:?}"),
    }

    // Status and scale subresources on a custom resource.
    let st = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["replicas"], 1);
    widgets
        .patch_scale(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    let w1 = widgets.get("w1").await.unwrap();
    assert_eq!(w1.data["spec"]["replicas"], 4);
    assert_eq!(w1.metadata.generation, Some(2));

    // Strategic merge patch is not for custom resources.
    let err = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": "large"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_err(err).0, 415);

    // Updates to custom resources need a resourceVersion.
    let mut no_rv = w1.clone();
    no_rv.metadata.resource_version = None;
    let err = widgets
        .replace("w1", &PostParams::default(), &no_rv)
        .await
        .unwrap_err();
    assert_eq!(api_err(err).0, 422);

    // Deleting the CRD deletes its objects and stops serving it.
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the CRD widgets.example.com to be gone", 10, || {
        let crds = crds.clone();
        async move {
            crds.get_opt("widgets.example.com")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    let err = widgets.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_err(err).0, 404);
}

#[tokio::test]
async fn namespace_deletion_empties_it() {
    let t = start().await;
    let nss: Api<Namespace> = Api::all(t.client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "scratch"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "scratch");
    for i in 0..3 {
        cms.create(&PostParams::default(), &cm(&format!("c{i}"), &[]))
            .await
            .unwrap();
    }
    nss.delete("scratch", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = nss.get("scratch").await.unwrap();
    assert_eq!(
        terminating.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    let err = cms
        .create(&PostParams::default(), &cm("late", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_err(err).0, 403);
    eventually("namespace scratch to be gone", 10, || {
        let nss = nss.clone();
        async move {
            nss.get_opt("scratch")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    assert!(
        cms.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

fn ready_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "guarded"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn eviction_respects_disruption_budgets() {
    let t = start().await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    for n in ["p1", "p2"] {
        pods.create(&PostParams::default(), &ready_pod(n))
            .await
            .unwrap();
        pods.patch_status(
            n,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(t.client.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    eventually("the disruption budget's status", 5, || {
        let pdbs = pdbs.clone();
        async move {
            let s = pdbs.get("guard").await.unwrap().status?;
            (s.disruptions_allowed == 1).then_some(())
        }
    })
    .await;
    pods.evict("p1", &kube::api::EvictParams::default())
        .await
        .unwrap();
    eventually("pod p1 to be evicted", 5, || {
        let pods = pods.clone();
        async move { pods.get_opt("p1").await.unwrap().is_none().then_some(()) }
    })
    .await;
    match pods
        .evict("p2", &kube::api::EvictParams::default())
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 429);
            assert!(s.message.contains("disruption budget"), "{}", s.message);
        }
        other => panic!("{other:?}"),
    }
    assert!(pods.get_opt("p2").await.unwrap().is_some());
}
