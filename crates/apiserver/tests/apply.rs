//! Server-side apply, managedFields and strategic merge patch, driven the
//! way controllers and kubectl drive them: kube-rs `Patch::Apply` (create,
//! re-apply without a field, conflicts between managers, force), the
//! managedFields that ordinary writes record, SMP on a Deployment's
//! containers, list-type maps of a custom resource, and raw YAML bodies.

mod common;

use bytes::Bytes;
use common::start;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

fn cm(data: Value, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cfg", "labels": labels},
        "data": data,
    })
}

fn status_of(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The managedFields entries of an object, as JSON.
fn managed(obj: &impl serde::Serialize) -> Vec<Value> {
    let v = serde_json::to_value(obj).unwrap();
    v.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn entry<'a>(entries: &'a [Value], manager: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| e["manager"] == manager)
        .unwrap_or_else(|| panic!("no entry for {manager} in {entries:?}"))
}

fn deployment(replicas: i32, containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": containers},
            },
        },
    })
}

fn container_names(d: &Deployment) -> Vec<String> {
    d.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.clone())
        .collect()
}

#[tokio::test]
async fn apply_creates_and_reapply_removes_dropped_fields() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let pp = PatchParams::apply("ops");
    let created = cms
        .patch(
            "cfg",
            &pp,
            &Patch::Apply(cm(json!({"a": "1", "b": "2"}), json!({"app": "x"}))),
        )
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some(), "apply creates");
    let entries = managed(&created);
    assert_eq!(entries.len(), 1, "{entries:?}");
    let e = &entries[0];
    assert_eq!(e["manager"], "ops");
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert!(e["time"].is_string());
    assert_eq!(
        e["fieldsV1"],
        json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
    );

    // The same configuration again changes nothing.
    let again = cms
        .patch(
            "cfg",
            &pp,
            &Patch::Apply(cm(json!({"a": "1", "b": "2"}), json!({"app": "x"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        created.metadata.resource_version
    );

    // Dropping `b` and the label removes them.
    let less = cms
        .patch("cfg", &pp, &Patch::Apply(cm(json!({"a": "1"}), json!({}))))
        .await
        .unwrap();
    let data = less.data.clone().unwrap();
    assert_eq!(data.get("a").map(String::as_str), Some("1"));
    assert!(!data.contains_key("b"), "{data:?}");
    assert!(less.metadata.labels.clone().unwrap_or_default().is_empty());
    assert_eq!(
        managed(&less)[0]["fieldsV1"],
        // An applied empty map is owned as a value, as kube-apiserver does.
        json!({"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {}}})
    );
}

#[tokio::test]
async fn conflicting_managers_and_force() {
    let t = start().await;
    let deploys: Api<Deployment> = Api::namespaced(t.client.clone(), "default");
    let one = PatchParams::apply("one");
    let two = PatchParams::apply("two");
    deploys
        .patch(
            "web",
            &one,
            &Patch::Apply(deployment(1, json!([{"name": "app", "image": "nginx"}]))),
        )
        .await
        .unwrap();
    let replicas = |n: i32| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": n}})
    };
    let s = status_of(
        deploys
            .patch("web", &two, &Patch::Apply(replicas(3)))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 409);
    assert_eq!(s.reason, "Conflict");
    assert_eq!(
        s.message,
        "Apply failed with 1 conflict: conflict with \"one\": .spec.replicas"
    );
    let causes = s.details.unwrap().causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".spec.replicas");
    assert_eq!(causes[0].message, "conflict with \"one\"");

    // Applying the value already there shares the field.
    let shared = deploys
        .patch("web", &two, &Patch::Apply(replicas(1)))
        .await
        .unwrap();
    assert_eq!(managed(&shared).len(), 2);

    // Force takes it over.
    let forced = deploys
        .patch("web", &two.clone().force(), &Patch::Apply(replicas(3)))
        .await
        .unwrap();
    assert_eq!(forced.spec.as_ref().unwrap().replicas, Some(3));
    let entries = managed(&forced);
    let one_fields = entry(&entries, "one")["fieldsV1"].to_string();
    assert!(!one_fields.contains("f:replicas"), "{one_fields}");
    assert!(
        entry(&entries, "two")["fieldsV1"]
            .to_string()
            .contains("f:replicas")
    );

    // `one` now applies without replicas: `two` still owns them, they stay.
    let mut without = deployment(1, json!([{"name": "app", "image": "nginx"}]));
    without["spec"].as_object_mut().unwrap().remove("replicas");
    let after = deploys
        .patch("web", &one, &Patch::Apply(without))
        .await
        .unwrap();
    assert_eq!(after.spec.unwrap().replicas, Some(3));
}

#[tokio::test]
async fn ordinary_writes_record_update_entries() {
    let t = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let pp = PostParams {
        field_manager: Some("creator".into()),
        ..Default::default()
    };
    let obj: ConfigMap =
        serde_json::from_value(cm(json!({"k": "v", "j": "w"}), json!({}))).unwrap();
    let created = cms.create(&pp, &obj).await.unwrap();
    let e = managed(&created);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0]["manager"], "creator");
    assert_eq!(e[0]["operation"], "Update");
    assert_eq!(e[0]["apiVersion"], "v1");
    // The map the create added is owned too (`.`), as kube-apiserver has it.
    assert_eq!(
        e[0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:j": {}, "f:k": {}}})
    );

    let patched = cms
        .patch(
            "cfg",
            &PatchParams {
                field_manager: Some("patcher".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({"data": {"k": "changed"}})),
        )
        .await
        .unwrap();
    let e = managed(&patched);
    assert_eq!(
        entry(&e, "creator")["fieldsV1"],
        json!({"f:data": {".": {}, "f:j": {}}})
    );
    assert_eq!(
        entry(&e, "patcher")["fieldsV1"],
        json!({"f:data": {"f:k": {}}})
    );

    // A replace that adds a label: its manager owns just the label.
    let mut obj = patched.clone();
    obj.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("team".into(), "a".into());
    let replaced = cms
        .replace(
            "cfg",
            &PostParams {
                field_manager: Some("replacer".into()),
                ..Default::default()
            },
            &obj,
        )
        .await
        .unwrap();
    let e = managed(&replaced);
    assert_eq!(e.len(), 3, "{e:?}");
    assert_eq!(
        entry(&e, "replacer")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:team": {}}}})
    );

    // An apply that changes a field an Update manager owns names it with
    // its apiVersion.
    let s = status_of(
        cms.patch(
            "cfg",
            &PatchParams::apply("applier"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cfg"}, "data": {"k": "mine"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        s.message,
        "Apply failed with 1 conflict: conflict with \"patcher\" using v1: .data.k"
    );

    // `[{}]` resets managedFields.
    let reset = cms
        .patch(
            "cfg",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"managedFields": [{}]}})),
        )
        .await
        .unwrap();
    assert!(reset.metadata.managed_fields.is_none());
}

#[tokio::test]
async fn strategic_merge_patch_on_deployment_containers() {
    let t = start().await;
    let deploys: Api<Deployment> = Api::namespaced(t.client.clone(), "default");
    let d: Deployment = serde_json::from_value(deployment(
        1,
        json!([
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"},
        ]),
    ))
    .unwrap();
    deploys.create(&PostParams::default(), &d).await.unwrap();
    let pp = PatchParams::default();
    let smp = |p: Value| Patch::Strategic(json!({"spec": {"template": {"spec": p}}}));

    // Add a container by name, keeping the others, in the given order.
    let added = deploys
        .patch(
            "web",
            &pp,
            &smp(json!({
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
                "containers": [{"name": "c", "image": "c:1"}],
            })),
        )
        .await
        .unwrap();
    assert_eq!(container_names(&added), ["a", "b", "c"]);

    // Merge into one container by name; its env merges by name too.
    let merged = deploys
        .patch(
            "web",
            &pp,
            &smp(json!({"containers": [{"name": "a", "image": "a:2",
                "env": [{"name": "Y", "value": "2"}]}]})),
        )
        .await
        .unwrap();
    let spec = merged.spec.unwrap().template.spec.unwrap();
    assert_eq!(spec.containers[0].image.as_deref(), Some("a:2"));
    let env: Vec<String> = spec.containers[0]
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(env, ["Y", "X"]);

    // Delete one with `$patch: delete`.
    let deleted = deploys
        .patch(
            "web",
            &pp,
            &smp(json!({"containers": [{"name": "b", "$patch": "delete"}]})),
        )
        .await
        .unwrap();
    assert_eq!(container_names(&deleted), ["a", "c"]);

    // Reorder with `$setElementOrder` alone.
    let reordered = deploys
        .patch(
            "web",
            &pp,
            &smp(json!({"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}]})),
        )
        .await
        .unwrap();
    assert_eq!(container_names(&reordered), ["c", "a"]);
    let stored = serde_json::to_string(&reordered).unwrap();
    assert!(!stored.contains("$setElementOrder"), "{stored}");

    // A malformed directive is a 400.
    let s = status_of(
        deploys
            .patch(
                "web",
                &pp,
                &smp(json!({"containers": [{"$patch": "explode", "name": "a"}]})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 400);
}

const GADGET_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "gadgets.example.com"},
  "spec": {
    "group": "example.com", "scope": "Namespaced",
    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {
        "type": "object",
        "properties": {
          "spec": {"type": "object", "properties": {
            "size": {"type": "string"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
              "x-kubernetes-list-map-keys": ["name"],
              "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "port": {"type": "integer"}}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "args": {"type": "array", "items": {"type": "string"}}
          }}
        }
      }}
    }]
  }
}"#;

#[tokio::test]
async fn custom_resources_merge_by_list_type() {
    let t = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_str(GADGET_CRD).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    kube::runtime::wait::await_condition(
        crds.clone(),
        "gadgets.example.com",
        kube::runtime::conditions::is_crd_established(),
    )
    .await
    .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Gadget"),
        "gadgets",
    );
    let gadgets: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), "default", &ar);
    let g = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": spec});
    gadgets
        .patch(
            "g",
            &PatchParams::apply("a"),
            &Patch::Apply(g(json!({
                "size": "s",
                "ports": [{"name": "http", "port": 80}],
                "tags": ["x"],
                "args": ["1"],
            }))),
        )
        .await
        .unwrap();
    let both = gadgets
        .patch(
            "g",
            &PatchParams::apply("b"),
            &Patch::Apply(g(
                json!({"ports": [{"name": "https", "port": 443}], "tags": ["y"]}),
            )),
        )
        .await
        .unwrap();
    let spec = &both.data["spec"];
    assert_eq!(spec["ports"].as_array().unwrap().len(), 2, "{spec}");
    assert_eq!(spec["tags"], json!(["x", "y"]));
    let e = managed(&both);
    assert_eq!(
        entry(&e, "b")["fieldsV1"],
        json!({"f:spec": {
            "f:ports": {"k:{\"name\":\"https\"}": {".": {}, "f:name": {}, "f:port": {}}},
            "f:tags": {"v:\"y\"": {}},
        }})
    );
    assert_eq!(
        entry(&e, "a")["fieldsV1"]["f:spec"]["f:args"],
        json!({}),
        "atomic lists are owned whole"
    );

    // `a` drops its port and tag: only those go.
    let dropped = gadgets
        .patch(
            "g",
            &PatchParams::apply("a"),
            &Patch::Apply(g(json!({"size": "s", "args": ["1"]}))),
        )
        .await
        .unwrap();
    assert_eq!(
        dropped.data["spec"]["ports"],
        json!([{"name": "https", "port": 443}])
    );
    assert_eq!(dropped.data["spec"]["tags"], json!(["y"]));

    // Strategic merge patch is refused for custom resources.
    let s = status_of(
        gadgets
            .patch(
                "g",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 415);
}

async fn raw_apply(url: &str, query: &str, body: &str) -> (u16, Value) {
    let c: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .build(hyper_util::client::legacy::connect::HttpConnector::new());
    let req = http::Request::builder()
        .method("PATCH")
        .uri(format!(
            "{url}/api/v1/namespaces/default/configmaps/yaml?{query}"
        ))
        .header("content-type", "application/apply-patch+yaml")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let resp = c.request(req).await.unwrap();
    let code = resp.status().as_u16();
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&b).unwrap_or(Value::Null))
}

#[tokio::test]
async fn yaml_bodies_and_request_checks() {
    let t = start().await;
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml\ndata:\n  k: v\n";
    let (code, obj) = raw_apply(&t.url, "fieldManager=y", yaml).await;
    assert_eq!(code, 201, "{obj}");
    assert_eq!(obj["data"]["k"], "v");
    let (code, obj) = raw_apply(&t.url, "fieldManager=y", &yaml.replace("k: v", "k: w")).await;
    assert_eq!(code, 200, "{obj}");
    assert_eq!(obj["data"]["k"], "w");

    // No field manager, a wrong apiVersion, a body that is not an object
    // and one that is not YAML are all 400.
    for (query, body) in [
        ("", yaml.to_string()),
        (
            "fieldManager=y",
            yaml.replace("apiVersion: v1", "apiVersion: v2"),
        ),
        ("fieldManager=y", "- a\n- b\n".to_string()),
        ("fieldManager=y", "{{{".to_string()),
    ] {
        let (code, status) = raw_apply(&t.url, query, &body).await;
        assert_eq!(code, 400, "{query} {body}: {status}");
        assert_eq!(status["kind"], "Status");
    }
    let with_managed = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml\n  managedFields:\n  - manager: x\n";
    let (code, status) = raw_apply(&t.url, "fieldManager=y", with_managed).await;
    assert_eq!(code, 400);
    assert_eq!(status["message"], "metadata.managedFields must be nil");
}

#[tokio::test]
async fn apply_to_status_is_owned_per_subresource() {
    let t = start().await;
    let deploys: Api<Deployment> = Api::namespaced(t.client.clone(), "default");
    let mut with_status = deployment(1, json!([{"name": "app", "image": "nginx"}]));
    with_status["status"] = json!({"replicas": 7});
    let created = deploys
        .patch(
            "web",
            &PatchParams::apply("user"),
            &Patch::Apply(with_status),
        )
        .await
        .unwrap();
    assert!(created.status.is_none(), "the main resource ignores status");
    let status = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "status": {"replicas": 1, "readyReplicas": 1}});
    let updated = deploys
        .patch_status(
            "web",
            &PatchParams::apply("controller"),
            &Patch::Apply(status),
        )
        .await
        .unwrap();
    assert_eq!(updated.status.as_ref().unwrap().ready_replicas, Some(1));
    assert_eq!(updated.spec.as_ref().unwrap().replicas, Some(1));
    let e = managed(&updated);
    let ctl = entry(&e, "controller");
    assert_eq!(ctl["subresource"], "status");
    assert_eq!(ctl["operation"], "Apply");
    assert_eq!(
        ctl["fieldsV1"],
        json!({"f:status": {"f:readyReplicas": {}, "f:replicas": {}}})
    );
    assert!(entry(&e, "user").get("subresource").is_none());
}

/// Applying the same manifest twice changes nothing: the second apply is
/// not written (same resourceVersion) and `generation` stays, for a kind
/// whose stored form carries defaults the manifest leaves out (etcd-druid
/// found this on its StatefulSets) and for one without a generation.
#[tokio::test]
async fn reapplying_the_same_manifest_writes_nothing() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    let t = start().await;
    let sets: Api<StatefulSet> = Api::namespaced(t.client.clone(), "default");
    let manifest: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "etcd", "labels": {"app": "etcd"}},
        "spec": {
            "replicas": 3, "serviceName": "etcd",
            "selector": {"matchLabels": {"app": "etcd"}},
            "template": {
                "metadata": {"labels": {"app": "etcd"}},
                "spec": {"containers": [{"name": "etcd", "image": "etcd:3.5",
                                         "ports": [{"containerPort": 2379}]}]},
            },
        },
    }))
    .unwrap();
    let pp = PatchParams::apply("druid");
    let first = sets
        .patch("etcd", &pp, &Patch::Apply(&manifest))
        .await
        .unwrap();
    let second = sets
        .patch("etcd", &pp, &Patch::Apply(&manifest))
        .await
        .unwrap();
    assert_eq!(first.metadata.generation, Some(1));
    assert_eq!(second.metadata.generation, Some(1), "no-op apply");
    assert_eq!(
        first.metadata.resource_version, second.metadata.resource_version,
        "a no-op apply is not written"
    );
    let mut scaled = manifest.clone();
    scaled.spec.as_mut().unwrap().replicas = Some(5);
    let third = sets
        .patch("etcd", &pp, &Patch::Apply(&scaled))
        .await
        .unwrap();
    assert_eq!(third.metadata.generation, Some(2), "spec changed");

    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let body = cm(json!({"k": "v"}), json!({"a": "b"}));
    let first = cms.patch("cfg", &pp, &Patch::Apply(&body)).await.unwrap();
    let second = cms.patch("cfg", &pp, &Patch::Apply(&body)).await.unwrap();
    assert_eq!(
        first.metadata.resource_version,
        second.metadata.resource_version
    );
}
