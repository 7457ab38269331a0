//! The storage layer without HTTP: creates, compare-and-swap writes,
//! deletion by kube's rules (finalizers, propagation, a kind's lifecycle and
//! grace), the controllers' read-modify-write, conversion, and watch hubs.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::storage::registry::Resource;

fn storage() -> Storage {
    Storage::new(Arc::new(store::MemoryStore::new()))
}

fn builtin(kind: &str) -> Resource {
    crate::strategy::resources()
        .into_iter()
        .find(|r| r.kind == kind && r.group.is_empty())
        .unwrap_or_else(|| panic!("{kind} is built in"))
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
           "data": {"k": "v"}})
}

fn object_of(out: Output) -> Value {
    match out {
        Output::Object(v) => v,
        Output::Encoded(b) => serde_json::from_slice(&b).unwrap(),
    }
}

async fn create(s: &Storage, res: &Resource, obj: &Value) -> Value {
    let key = res.key(Some("ns"), crate::object::name(obj));
    match s.create(res, &key, obj, false).await.unwrap() {
        Created::Done(out) => object_of(out),
        Created::NameTaken => panic!("name taken"),
    }
}

#[tokio::test]
async fn create_splices_the_revision_and_refuses_a_taken_name() {
    let s = storage();
    let res = builtin("ConfigMap");
    let made = create(&s, &res, &config_map("a")).await;
    let rv = made["metadata"]["resourceVersion"].as_str().unwrap();
    assert_eq!(rv, s.store().current_revision().to_string());
    let key = res.key(Some("ns"), "a");
    assert!(matches!(
        s.create(&res, &key, &config_map("a"), false).await.unwrap(),
        Created::NameTaken
    ));
    assert!(matches!(
        s.create(&res, &key, &config_map("a"), true).await.unwrap(),
        Created::NameTaken
    ));
    let stored = s.get(&key).await.unwrap().unwrap();
    assert!(
        !String::from_utf8_lossy(&stored.value).contains("resourceVersion"),
        "the revision is not stored"
    );
}

#[tokio::test]
async fn an_unchanged_write_keeps_its_revision_and_a_lost_race_is_reported() {
    let s = storage();
    let res = builtin("ConfigMap");
    create(&s, &res, &config_map("a")).await;
    let key = res.key(Some("ns"), "a");
    let (cur, old) = s.read(&res, &key).await.unwrap().unwrap();
    let before = s.store().current_revision();
    let same = s
        .write_over(&res, &key, &cur, old.clone(), false)
        .await
        .unwrap();
    assert!(same.is_ok());
    assert_eq!(
        s.store().current_revision(),
        before,
        "a no-op write is free"
    );
    let mut changed = old.clone();
    changed["data"]["k"] = json!("w");
    let out = s
        .write_over(&res, &key, &cur, changed.clone(), false)
        .await
        .unwrap();
    assert_eq!(object_of(out.unwrap())["data"]["k"], "w");
    let stale = s
        .write_over(&res, &key, &cur, changed, false)
        .await
        .unwrap();
    assert!(
        stale.is_err(),
        "the compare-and-swap lost against the first write"
    );
}

#[tokio::test]
async fn objects_too_large_are_refused() {
    let s = storage();
    let res = builtin("ConfigMap");
    let mut big = config_map("big");
    big["data"]["k"] = json!("x".repeat(MAX_OBJECT_BYTES));
    let key = res.key(Some("ns"), "big");
    let e = s.create(&res, &key, &big, false).await.unwrap_err();
    assert_eq!(e.code, 413);
}

#[tokio::test]
async fn delete_removes_at_once_or_marks_while_finalizers_hold() {
    let s = storage();
    let res = builtin("ConfigMap");
    create(&s, &res, &config_map("plain")).await;
    let opts = DeleteOptions::default();
    s.delete(&res, Some("ns"), "plain", &opts, &Unchecked)
        .await
        .unwrap();
    assert!(
        s.read(&res, &res.key(Some("ns"), "plain"))
            .await
            .unwrap()
            .is_none()
    );

    let mut held = config_map("held");
    held["metadata"]["finalizers"] = json!(["example.com/keep"]);
    create(&s, &res, &held).await;
    let marked = object_of(
        s.delete(&res, Some("ns"), "held", &opts, &Unchecked)
            .await
            .unwrap(),
    );
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0);
    let key = res.key(Some("ns"), "held");
    s.mutate(&key, |o| {
        crate::object::set_finalizers(o, &[]);
        true
    })
    .await
    .unwrap();
    assert!(
        s.get(&key).await.unwrap().is_none(),
        "the last finalizer going removes a deleting object"
    );
}

#[tokio::test]
async fn propagation_policies_add_their_finalizers() {
    let s = storage();
    let res = builtin("ConfigMap");
    for (name, policy, finalizer) in [("o", "Orphan", ORPHAN), ("f", "Foreground", FOREGROUND)] {
        create(&s, &res, &config_map(name)).await;
        let opts = DeleteOptions {
            propagation: Some(policy.into()),
            ..Default::default()
        };
        let out = object_of(
            s.delete(&res, Some("ns"), name, &opts, &Unchecked)
                .await
                .unwrap(),
        );
        assert_eq!(
            out["metadata"]["finalizers"],
            json!([finalizer]),
            "{policy}"
        );
    }
}

#[tokio::test]
async fn preconditions_and_the_admission_check_come_first() {
    struct Refuse;
    #[async_trait::async_trait]
    impl DeleteCheck for Refuse {
        async fn check(&self, _old: &Value) -> Result<(), ApiError> {
            Err(ApiError::forbidden("no"))
        }
    }
    let s = storage();
    let res = builtin("ConfigMap");
    create(&s, &res, &config_map("a")).await;
    let wrong_uid = DeleteOptions {
        uid: Some("other".into()),
        ..Default::default()
    };
    let e = s
        .delete(&res, Some("ns"), "a", &wrong_uid, &Unchecked)
        .await
        .unwrap_err();
    assert_eq!(e.code, 409);
    let e = s
        .delete(&res, Some("ns"), "a", &DeleteOptions::default(), &Refuse)
        .await
        .unwrap_err();
    assert_eq!(e.code, 403);
    let e = s
        .delete(
            &res,
            Some("ns"),
            "gone",
            &DeleteOptions::default(),
            &Unchecked,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn a_kinds_deletion_rules_apply() {
    let s = storage();
    // A namespace is marked Terminating and kept for its controller.
    let ns_res = builtin("Namespace");
    let ns = crate::strategy::namespace::new_object("ns");
    let key = ns_res.key(None, "ns");
    s.create(&ns_res, &key, &ns, false).await.unwrap();
    let out = object_of(
        s.delete(&ns_res, None, "ns", &DeleteOptions::default(), &Unchecked)
            .await
            .unwrap(),
    );
    assert_eq!(out["status"]["phase"], "Terminating");
    assert!(s.get(&key).await.unwrap().is_some());

    // A scheduled pod is deleted gracefully, an unscheduled one at once.
    let pods = builtin("Pod");
    let pod = |name: &str, node: Option<&str>| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        p
    };
    create(&s, &pods, &pod("bound", Some("n1"))).await;
    create(&s, &pods, &pod("loose", None)).await;
    let out = object_of(
        s.delete(
            &pods,
            Some("ns"),
            "bound",
            &DeleteOptions::default(),
            &Unchecked,
        )
        .await
        .unwrap(),
    );
    assert_eq!(out["metadata"]["deletionGracePeriodSeconds"], 30);
    s.delete(
        &pods,
        Some("ns"),
        "loose",
        &DeleteOptions::default(),
        &Unchecked,
    )
    .await
    .unwrap();
    assert!(
        s.get(&pods.key(Some("ns"), "loose"))
            .await
            .unwrap()
            .is_none()
    );
    // A second delete with grace 0 finishes the graceful one.
    let now = DeleteOptions {
        grace: Some(0),
        ..Default::default()
    };
    s.delete(&pods, Some("ns"), "bound", &now, &Unchecked)
        .await
        .unwrap();
    assert!(
        s.get(&pods.key(Some("ns"), "bound"))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn the_events_view_is_converted_both_ways() {
    let s = storage();
    let v1 = crate::strategy::resources()
        .into_iter()
        .find(|r| r.group == "events.k8s.io")
        .unwrap();
    let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e", "namespace": "ns"},
        "regarding": {"kind": "Pod", "name": "p"}, "note": "hello",
        "eventTime": "2026-01-02T03:04:05.000000Z"});
    let out = create(&s, &v1, &ev).await;
    assert_eq!(out["note"], "hello");
    let (kv, _) = s
        .read(&v1, &v1.key(Some("ns"), "e"))
        .await
        .unwrap()
        .unwrap();
    let stored: Value = serde_json::from_slice(&kv.value).unwrap();
    assert_eq!(stored["message"], "hello");
    assert_eq!(stored["apiVersion"], "v1");
    let core = builtin("Event");
    let (_, as_core) = s
        .read(&core, &core.key(Some("ns"), "e"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(as_core["involvedObject"]["name"], "p");
}

#[tokio::test]
async fn a_hub_replays_history_and_expires_it() {
    let s = storage();
    let res = builtin("ConfigMap");
    let hub = s.hub(&res);
    let from = s.store().current_revision();
    create(&s, &res, &config_map("a")).await;
    // The hub follows the store asynchronously.
    for _ in 0..100 {
        if hub.progress() > from {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let (replay, _live) = hub.subscribe(from).unwrap();
    assert_eq!(replay.len(), 1);
    assert_eq!(replay[0].summary.name, "a");
    s.expire_watches();
    assert!(hub.subscribe(from).is_err(), "expired history is too old");
}

#[test]
fn selection_by_namespace_labels_and_fields() {
    use apimachinery::selector::{FieldSelector, LabelSelector};
    use select::{Filter, Summary};
    let pod = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}},
                     "spec": {"nodeName": "n1"}});
    let fields = ["metadata.name", "metadata.namespace", "spec.nodeName"];
    let s = Summary::of(&pod, &fields);
    let filter = |ns: Option<&str>, labels: Option<&str>, f: Option<&str>| Filter {
        namespace: ns.map(str::to_string),
        labels: labels.map(|l| LabelSelector::parse(l).unwrap()),
        fields: f.map(|f| FieldSelector::parse(f).unwrap()),
    };
    assert!(filter(None, None, None).matches(&s));
    assert!(filter(None, None, None).is_trivial());
    assert!(filter(Some("ns"), Some("app=a"), Some("spec.nodeName=n1")).matches(&s));
    assert!(!filter(Some("other"), None, None).matches(&s));
    assert!(!filter(None, Some("app!=a"), None).matches(&s));
    assert!(!filter(None, None, Some("spec.nodeName=n2")).matches(&s));
    assert!(filter(None, None, Some("metadata.name=p")).matches(&s));
}

#[test]
fn watchers_see_objects_enter_and_leave_their_selection() {
    use apimachinery::selector::LabelSelector;
    use hub::HubEvent;
    use select::{Filter, Summary, classify};
    let labelled = |v: &str| {
        Summary::of(
            &json!({"metadata": {"name": "x", "labels": {"app": v}}}),
            &[],
        )
    };
    let event = |kind, now: &str, before: Option<&str>| HubEvent {
        revision: 2,
        kind,
        object: bytes::Bytes::new(),
        summary: labelled(now),
        prev: before.map(labelled),
    };
    let f = Filter {
        labels: Some(LabelSelector::parse("app=a").unwrap()),
        ..Default::default()
    };
    use store::EventKind::{Delete, Put};
    assert_eq!(classify(&event(Put, "a", None), &f), Some("ADDED"));
    assert_eq!(classify(&event(Put, "a", Some("a")), &f), Some("MODIFIED"));
    assert_eq!(classify(&event(Put, "a", Some("b")), &f), Some("ADDED"));
    assert_eq!(classify(&event(Put, "b", Some("a")), &f), Some("DELETED"));
    assert_eq!(classify(&event(Put, "b", Some("b")), &f), None);
    assert_eq!(classify(&event(Delete, "a", None), &f), Some("DELETED"));
    assert_eq!(classify(&event(Delete, "b", None), &f), None);
}

#[tokio::test]
async fn the_update_loop_retries_lost_races_unless_pinned() {
    let s = storage();
    let res = builtin("ConfigMap");
    create(&s, &res, &config_map("a")).await;
    let key = res.key(Some("ns"), "a");
    let missing = s
        .update(&res, &res.key(Some("ns"), "b"), "b", false, true, |_, v| {
            Box::pin(async move { Ok((v, ())) })
        })
        .await
        .unwrap();
    assert!(matches!(missing, Updated::Missing));

    // A step that loses its first race (someone writes in between) is
    // run again on the fresh state when retrying is allowed…
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let race = |retry: bool| {
        let (s, key, rounds) = (&s, &key, &rounds);
        move |cur: Current, mut v: Value| -> UpdateStep<'_, Revision> {
            Box::pin(async move {
                if rounds.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    s.mutate(key, |o| {
                        o["data"]["k"] = json!(format!("other {retry}"));
                        true
                    })
                    .await?;
                }
                v["data"]["mine"] = json!(retry.to_string());
                Ok((v, cur.revision))
            })
        }
    };
    let out = s
        .update(&res, &key, "a", false, true, race(true))
        .await
        .unwrap();
    let Updated::Written(out, seen) = out else {
        panic!("written")
    };
    let out = object_of(out);
    assert_eq!(rounds.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(
        out["data"]["k"], "other true",
        "the second round saw the other write"
    );
    assert_eq!(out["data"]["mine"], "true");
    assert!(seen > 0);
    // …and is a 409 when a precondition pinned the state it meant.
    rounds.store(0, std::sync::atomic::Ordering::SeqCst);
    let e = s
        .update(&res, &key, "a", false, false, race(false))
        .await
        .unwrap_err();
    assert_eq!(e.code, 409);
}
