//! The controllers on the storage layer, without HTTP and without their
//! loops: one pass of each over a memory store.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::storage::{Created, Unchecked, codec, keys};

fn context() -> Context {
    Context {
        storage: Arc::new(Storage::new(Arc::new(store::MemoryStore::new()))),
        registry: Arc::new(Registry::with(crate::strategy::resources())),
        admission: Arc::new(Chain::default()),
        event_ttl: Duration::from_secs(3600),
    }
}

fn resource(ctx: &Context, kind: &str) -> Arc<Resource> {
    ctx.registry
        .by_kind("v1", kind)
        .unwrap_or_else(|| panic!("{kind} is served"))
}

async fn put(ctx: &Context, kind: &str, obj: Value) {
    let res = resource(ctx, kind);
    let ns = obj["metadata"]["namespace"].as_str().map(str::to_string);
    let key = res.key(ns.as_deref(), obj["metadata"]["name"].as_str().unwrap());
    let created = ctx.storage.create(&res, &key, &obj, false).await.unwrap();
    assert!(matches!(created, Created::Done(_)), "{key} was free");
}

fn config_map(name: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "team", "uid": uid}})
}

async fn exists(ctx: &Context, key: &str) -> bool {
    ctx.storage.get(key).await.unwrap().is_some()
}

#[tokio::test]
async fn a_terminating_namespace_is_emptied_then_goes() {
    let ctx = context();
    namespace::ensure(&ctx.storage, "team").await.unwrap();
    put(&ctx, "ConfigMap", config_map("a", "ua")).await;
    let ns = resource(&ctx, "Namespace");
    ctx.storage
        .delete(&ns, None, "team", &DeleteOptions::default(), &Unchecked)
        .await
        .unwrap();
    let ns_key = keys::key(keys::NAMESPACES, None, "team");
    let cm_key = keys::key("core/configmaps", Some("team"), "a");
    namespace::sweep(&ctx).await;
    assert!(!exists(&ctx, &cm_key).await, "the content is deleted first");
    assert!(exists(&ctx, &ns_key).await, "the namespace waits for it");
    namespace::sweep(&ctx).await;
    assert!(!exists(&ctx, &ns_key).await, "then the namespace goes");
}

#[tokio::test]
async fn dependents_of_a_gone_owner_are_collected() {
    let ctx = context();
    let owner_ref =
        |uid: &str| json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]);
    put(&ctx, "ConfigMap", config_map("owner", "u-owner")).await;
    let mut kept = config_map("kept", "u-kept");
    kept["metadata"]["ownerReferences"] = owner_ref("u-owner");
    put(&ctx, "ConfigMap", kept).await;
    let mut orphan = config_map("orphan", "u-orphan");
    orphan["metadata"]["ownerReferences"] = owner_ref("u-someone-else");
    put(&ctx, "ConfigMap", orphan).await;

    let mut graph = gc::Graph::default();
    for kv in ctx.storage.range(keys::ROOT).await.unwrap() {
        if let Some(p) = gc::parse(&kv.value) {
            graph.upsert(p, &kv.key);
        }
    }
    for uid in ["u-kept", "u-orphan"] {
        gc::attend(&ctx, &graph, uid).await;
    }
    let key = |n: &str| keys::key("core/configmaps", Some("team"), n);
    assert!(exists(&ctx, &key("kept")).await, "its owner exists");
    assert!(
        !exists(&ctx, &key("orphan")).await,
        "an owner of that name with another UID is not its owner"
    );
}

#[tokio::test]
async fn a_deleted_crd_removes_its_objects_then_itself() {
    let ctx = context();
    let manifest = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
                 "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]},
    });
    crd::install(&ctx.storage, &ctx.registry, &manifest)
        .await
        .unwrap();
    let widgets = ctx
        .registry
        .get("example.com", "v1", "widgets")
        .expect("served at once");
    let crd_key = keys::key(keys::CRDS, None, "widgets.example.com");
    let stored: Value =
        serde_json::from_slice(&ctx.storage.get(&crd_key).await.unwrap().unwrap().value).unwrap();
    assert_eq!(stored["status"]["conditions"][1]["type"], "Established");
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "uid": "uw"}});
    let w_key = widgets.key(None, "w");
    ctx.storage
        .create(&widgets, &w_key, &w, false)
        .await
        .unwrap();

    let crds = ctx
        .registry
        .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .unwrap();
    ctx.delete(
        &crds,
        None,
        "widgets.example.com",
        &DeleteOptions::default(),
    )
    .await
    .unwrap();
    assert!(
        exists(&ctx, &crd_key).await,
        "held by the cleanup finalizer"
    );
    crd::reconcile(&ctx, &crd_key).await;
    assert!(!exists(&ctx, &w_key).await, "the objects go first");
    crd::reconcile(&ctx, &crd_key).await;
    assert!(!exists(&ctx, &crd_key).await, "then the definition");
    assert!(ctx.registry.get("example.com", "v1", "widgets").is_none());
}

#[tokio::test]
async fn the_system_namespaces_are_created_once() {
    let ctx = context();
    namespace::ensure(&ctx.storage, "default").await.unwrap();
    let key = keys::key(keys::NAMESPACES, None, "default");
    let first = ctx.storage.get(&key).await.unwrap().unwrap();
    namespace::ensure(&ctx.storage, "default").await.unwrap();
    let again = ctx.storage.get(&key).await.unwrap().unwrap();
    assert_eq!(first.mod_revision, again.mod_revision);
    let ns = codec::decode(&again.value, again.mod_revision).unwrap();
    assert_eq!(ns["status"]["phase"], "Active");
}

#[tokio::test]
async fn every_active_namespace_gets_a_default_service_account_again_after_a_deletion() {
    let ctx = context();
    namespace::ensure(&ctx.storage, "team").await.unwrap();
    namespace::ensure(&ctx.storage, "other").await.unwrap();
    let sa = |ns: &str| keys::key(keys::SERVICE_ACCOUNTS, Some(ns), serviceaccount::DEFAULT);
    assert!(!exists(&ctx, &sa("team")).await);
    let mut seen = std::collections::HashSet::new();
    serviceaccount::pass(&ctx, &mut seen).await;
    assert!(exists(&ctx, &sa("team")).await);
    assert!(exists(&ctx, &sa("other")).await);
    assert_eq!(seen.len(), 2, "both namespaces checked once");
    // Deleted: back once the namespaces are checked again.
    ctx.storage.store().delete(&sa("team"), None).await.unwrap();
    serviceaccount::pass(&ctx, &mut seen).await;
    assert!(
        !exists(&ctx, &sa("team")).await,
        "not until the next full check"
    );
    seen.clear();
    serviceaccount::pass(&ctx, &mut seen).await;
    assert!(exists(&ctx, &sa("team")).await);
}

#[test]
fn terminating_and_already_checked_namespaces_are_left_alone() {
    let ns = |name: &str, uid: &str, deleting: bool| {
        let mut v = json!({"metadata": {"name": name, "uid": uid}});
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        v
    };
    let all = [
        ns("new", "u1", false),
        ns("seen", "u2", false),
        ns("going", "u3", true),
    ];
    let seen = ["u2".to_string()].into_iter().collect();
    assert_eq!(serviceaccount::to_check(&all, &seen), [("new", "u1")]);
}
