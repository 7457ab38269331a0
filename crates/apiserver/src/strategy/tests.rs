//! The generic create and update rules, and the catalogue: every built-in
//! kind has a strategy, and the generic rules ask it instead of the kind.

use serde_json::json;

use super::*;

fn builtin(group: &str, kind: &str) -> Resource {
    resources()
        .into_iter()
        .find(|r| r.group == group && r.kind == kind)
        .unwrap_or_else(|| panic!("{group}/{kind} is built in"))
}

#[test]
fn the_catalogue_names_a_strategy_for_every_kind() {
    let all = resources();
    assert!(all.len() >= 25);
    for r in &all {
        assert!(r.builtin);
        assert!(!format!("{:?}", r.strategy).is_empty());
    }
    let has_generation: Vec<&str> = all
        .iter()
        .filter(|r| r.strategy.has_generation())
        .map(|r| r.kind.as_str())
        .collect();
    assert_eq!(
        has_generation,
        [
            "EndpointSlice",
            "Deployment",
            "ReplicaSet",
            "StatefulSet",
            "Job",
            "CronJob",
            "PodDisruptionBudget",
            "CustomResourceDefinition",
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ]
    );
}

#[test]
fn create_replaces_server_set_metadata() {
    let res = builtin("", "ConfigMap");
    let mut obj = json!({"metadata": {"name": "a", "uid": "mine", "resourceVersion": "7",
                                      "generation": 4, "selfLink": "/x"}});
    prepare_for_create(&res, Some("ns"), &mut obj).unwrap();
    let m = &obj["metadata"];
    assert_ne!(m["uid"], "mine");
    assert!(m.get("resourceVersion").is_none() && m.get("selfLink").is_none());
    assert!(
        m.get("generation").is_none(),
        "ConfigMaps have no generation"
    );
    assert_eq!(m["namespace"], "ns");

    let deploy = builtin("apps", "Deployment");
    let mut d = json!({"metadata": {"name": "d"}});
    prepare_for_create(&deploy, Some("ns"), &mut d).unwrap();
    assert_eq!(d["metadata"]["generation"], 1);

    let mut other = json!({"metadata": {"name": "a", "namespace": "elsewhere"}});
    assert_eq!(
        prepare_for_create(&res, Some("ns"), &mut other)
            .unwrap_err()
            .code,
        400
    );
}

#[test]
fn new_content_gets_the_kinds_status_and_preparation() {
    let ns = builtin("", "Namespace");
    let mut obj = json!({"metadata": {"name": "team"}, "status": {"phase": "Bogus"}});
    prepare_new_content(&ns, &mut obj);
    assert_eq!(obj["status"]["phase"], "Active");
    assert_eq!(
        obj["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team"
    );
    assert_eq!(obj["spec"]["finalizers"], json!(["kubernetes"]));

    let pod = builtin("", "Pod");
    let mut p = json!({"metadata": {"name": "p"}});
    prepare_new_content(&pod, &mut p);
    assert_eq!(p["status"]["phase"], "Pending");

    let node = builtin("", "Node");
    let mut n = json!({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "1"}}});
    prepare_new_content(&node, &mut n);
    assert_eq!(
        n["status"]["capacity"]["cpu"], "1",
        "a node keeps its status"
    );
}

#[test]
fn updates_keep_immutable_metadata_and_move_generation_on_spec_changes() {
    let res = builtin("apps", "Deployment");
    let old = json!({"metadata": {"name": "d", "uid": "u", "generation": 3,
                                  "creationTimestamp": "2026-01-01T00:00:00Z"},
                     "spec": {"replicas": 1}, "status": {"replicas": 1}});
    let mut incoming = old.clone();
    incoming["metadata"]["uid"] = json!("changed");
    incoming["metadata"]["labels"] = json!({"a": "b"});
    incoming["status"] = json!({"replicas": 9});
    let new = prepare_for_update(&res, None, &old, incoming.clone()).unwrap();
    assert_eq!(new["metadata"]["uid"], "u");
    assert_eq!(new["metadata"]["generation"], 3, "metadata-only change");
    assert_eq!(new["status"]["replicas"], 1, "status is a subresource");
    incoming["spec"]["replicas"] = json!(2);
    let mut new = prepare_for_update(&res, None, &old, incoming.clone()).unwrap();
    settle_generation(&res, None, &old, &mut new);
    assert_eq!(new["metadata"]["generation"], 4);
    let mut status = prepare_for_update(&res, Some("status"), &old, incoming).unwrap();
    settle_generation(&res, Some("status"), &old, &mut status);
    assert_eq!(status["status"]["replicas"], 9);
    assert_eq!(
        status["spec"]["replicas"], 1,
        "/status changes nothing else"
    );
    assert_eq!(status["metadata"]["generation"], 3);
}

/// etcd-druid found it: applying the same StatefulSet manifest again bumped
/// `generation`, because the manifest (without kube's defaults) was compared
/// with the stored, defaulted object. The generation is settled on the
/// defaulted object, for every kind with defaults.
#[test]
fn an_update_that_leaves_out_defaults_keeps_the_generation() {
    for (group, kind, spec) in [
        (
            "apps",
            "StatefulSet",
            json!({"selector": {"matchLabels": {"a": "b"}}, "serviceName": "s",
                   "template": {"metadata": {"labels": {"a": "b"}},
                                "spec": {"containers": [{"name": "c", "image": "i"}]}}}),
        ),
        (
            "apps",
            "Deployment",
            json!({"selector": {"matchLabels": {"a": "b"}},
                   "template": {"metadata": {"labels": {"a": "b"}},
                                "spec": {"containers": [{"name": "c", "image": "i"}]}}}),
        ),
    ] {
        let res = builtin(group, kind);
        let manifest = json!({"apiVersion": res.api_version(), "kind": kind,
                              "metadata": {"name": "x", "namespace": "ns"}, "spec": spec});
        let mut old = manifest.clone();
        prepare_for_create(&res, Some("ns"), &mut old).unwrap();
        prepare_new_content(&res, &mut old);
        res.strategy.normalize(&res, &mut old);
        assert_ne!(old["spec"], manifest["spec"], "{kind} has defaults");
        // What admission does with an update: normalise, then settle.
        let mut new = prepare_for_update(&res, None, &old, manifest.clone()).unwrap();
        res.strategy.normalize(&res, &mut new);
        settle_generation(&res, None, &old, &mut new);
        assert_eq!(new["metadata"]["generation"], 1, "{kind}: nothing changed");
        assert_eq!(new, old, "{kind}: the same object, so no write");
        let mut changed = manifest.clone();
        changed["spec"]["replicas"] = json!(3);
        let mut new = prepare_for_update(&res, None, &old, changed).unwrap();
        res.strategy.normalize(&res, &mut new);
        settle_generation(&res, None, &old, &mut new);
        assert_eq!(new["metadata"]["generation"], 2, "{kind}: replicas changed");
    }
}

#[test]
fn no_new_finalizers_on_a_deleting_object() {
    let res = builtin("", "ConfigMap");
    let old = json!({"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z",
                                  "finalizers": ["x"]}});
    let mut incoming = old.clone();
    incoming["metadata"]["finalizers"] = json!(["x", "y"]);
    let e = prepare_for_update(&res, None, &old, incoming).unwrap_err();
    assert_eq!(e.code, 422);
    assert!(e.message.contains("no new finalizers"), "{}", e.message);
}

#[test]
fn validation_follows_the_kinds_name_rule() {
    let ns = builtin("", "Namespace");
    let cm = builtin("", "ConfigMap");
    let role = builtin(rbac::GROUP, "ClusterRole");
    let dotted = json!({"metadata": {"name": "a.b"}});
    assert!(validate_meta(&cm, &dotted).is_empty());
    assert_eq!(validate_meta(&ns, &dotted)[0].field, "metadata.name");
    let colon = json!({"metadata": {"name": "system:x"}, "rules": []});
    assert!(
        validate_meta(&role, &colon).is_empty(),
        "RBAC checks its own names"
    );
    let mut bad_role = json!({"metadata": {"name": "a/b"}, "rules": []});
    let causes = validate(&role, &mut bad_role).unwrap();
    assert_eq!(causes[0].field, "metadata.name");
}

#[test]
fn type_meta_must_match_the_served_resource() {
    let res = builtin("", "ConfigMap");
    let mut ok = json!({"metadata": {"name": "a"}});
    check_type_meta(&res, &mut ok).unwrap();
    assert_eq!(
        (ok["apiVersion"].as_str(), ok["kind"].as_str()),
        (Some("v1"), Some("ConfigMap"))
    );
    let mut wrong = json!({"kind": "Secret"});
    assert_eq!(check_type_meta(&res, &mut wrong).unwrap_err().code, 400);
}

#[test]
fn immortal_namespaces_may_not_be_deleted() {
    let ns = builtin("", "Namespace");
    for name in namespace::IMMORTAL {
        assert_eq!(ns.strategy.check_delete(&ns, name).unwrap_err().code, 403);
    }
    assert!(ns.strategy.check_delete(&ns, "team").is_ok());
}

#[test]
fn kinds_written_by_put_are_created_by_it() {
    let all = resources();
    let creates: Vec<&str> = all
        .iter()
        .filter(|r| r.strategy.create_on_update())
        .map(|r| r.kind.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut want = ["Endpoints", "EndpointSlice", "Event", "Lease"];
    want.sort();
    assert_eq!(creates, want);
}
