//! OpenAPI documents, Table / PartialObjectMetadata representations and
//! `fieldValidation` for built-in kinds, checked over raw HTTP the way
//! kubectl and kube-rs ask for them. The documents are also run through the
//! off-the-shelf openapi-spec-validator when python3 has it installed
//! (`scripts/validate-openapi.py`).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::start;
use http::HeaderMap;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use testkit::eventually;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

struct Http {
    c: Client<HttpConnector, Full<Bytes>>,
    base: String,
}

struct Resp {
    code: u16,
    headers: HeaderMap,
    body: Bytes,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

impl Http {
    fn new(base: &str) -> Http {
        Http {
            c: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
            base: base.to_string(),
        }
    }

    async fn call(&self, method: &str, path: &str, accept: &str, ct: &str, body: Vec<u8>) -> Resp {
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if !accept.is_empty() {
            req = req.header("accept", accept);
        }
        if !ct.is_empty() {
            req = req.header("content-type", ct);
        }
        let resp = self
            .c
            .request(req.body(Full::new(Bytes::from(body))).unwrap())
            .await
            .unwrap();
        let code = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        Resp {
            code,
            headers,
            body,
        }
    }

    async fn get(&self, path: &str, accept: &str) -> Resp {
        self.call("GET", path, accept, "", Vec::new()).await
    }

    async fn post(&self, path: &str, body: &Value) -> Resp {
        self.call(
            "POST",
            path,
            "",
            "application/json",
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }
}

fn widget_crd(extra_field: bool) -> Value {
    let mut spec_props = json!({
        "replicas": {"type": "integer", "description": "How many."},
        "mode": {"type": "string"},
        "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
    });
    if extra_field {
        spec_props["color"] = json!({"type": "string"});
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "additionalPrinterColumns": [
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Items", "type": "string", "jsonPath": ".spec.items[*].name"},
                    {"name": "Mode", "type": "string", "priority": 1, "jsonPath": ".spec.mode"},
                    {"name": "Started", "type": "date", "jsonPath": ".status.startTime"},
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object", "description": "A widget.",
                    "properties": {
                        "spec": {"type": "object", "properties": spec_props},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            }],
        },
    })
}

/// Creates (or replaces) the widget CRD and waits until it is served.
async fn install_widgets(h: &Http, extra_field: bool) {
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let existing = h.get(&format!("{crds}/widgets.example.com"), "").await;
    if existing.code == 200 {
        let mut crd = widget_crd(extra_field);
        crd["metadata"]["resourceVersion"] = existing.json()["metadata"]["resourceVersion"].clone();
        let r = h
            .call(
                "PUT",
                &format!("{crds}/widgets.example.com"),
                "",
                "application/json",
                serde_json::to_vec(&crd).unwrap(),
            )
            .await;
        assert_eq!(r.code, 200, "{}", String::from_utf8_lossy(&r.body));
    } else {
        let r = h.post(crds, &widget_crd(extra_field)).await;
        assert_eq!(r.code, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    eventually("widgets to be served", 10, || async {
        (h.get("/apis/example.com/v1/widgets", "").await.code == 200).then_some(())
    })
    .await;
}

async fn root_hashes(h: &Http) -> Value {
    let r = h.get("/openapi/v3", "application/json").await;
    assert_eq!(r.code, 200);
    r.json()["paths"].clone()
}

#[tokio::test]
async fn openapi_v3_root_and_group_version_documents() {
    let t = start().await;
    let h = Http::new(&t.url);
    let paths = root_hashes(&h).await;
    for gv in ["api/v1", "apis/apps/v1", "apis/coordination.k8s.io/v1"] {
        let url = paths[gv]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with(&format!("/openapi/v3/{gv}?hash=")), "{url}");
    }
    let url = paths["api/v1"]["serverRelativeURL"].as_str().unwrap();
    let doc = h.get(url, "application/json").await.json();
    assert_eq!(doc["openapi"], "3.0.0");
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"],
        json!([{"group": "", "kind": "Pod", "version": "v1"}])
    );
    assert!(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    let containers = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");

    // What kubectl's --validate=strict looks for: every PATCH operation of a
    // kind carries its GVK and a query parameter fieldValidation.
    let item = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"];
    let patch = &item["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "", "kind": "Pod", "version": "v1"})
    );
    assert_eq!(patch["x-kubernetes-action"], "patch");
    assert!(
        patch["requestBody"]["content"]
            .get("application/strategic-merge-patch+json")
            .is_some()
    );
    for (p, ops) in doc["paths"].as_object().unwrap() {
        if let Some(op) = ops.get("patch") {
            assert!(
                op["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x["name"] == "fieldValidation" && x["in"] == "query"),
                "{p}"
            );
            assert!(op["x-kubernetes-group-version-kind"].is_object(), "{p}");
        }
    }
    assert_eq!(
        doc["paths"]["/api/v1/namespaces/{namespace}/pods"]["get"]["x-kubernetes-action"],
        "list"
    );
    assert_eq!(
        doc["paths"]["/api/v1/watch/namespaces/{namespace}/pods/{name}"]["get"]["x-kubernetes-action"],
        "watch"
    );
    assert_eq!(
        doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]["post"]["x-kubernetes-group-version-kind"]
            ["kind"],
        "Eviction"
    );
    // A scale subresource answers autoscaling/v1 Scale.
    let apps = h
        .get(
            paths["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap(),
            "",
        )
        .await
        .json();
    assert_eq!(
        apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["patch"]["x-kubernetes-group-version-kind"],
        json!({"group": "autoscaling", "kind": "Scale", "version": "v1"})
    );
    assert!(apps["components"]["schemas"]["io.k8s.api.autoscaling.v1.Scale"].is_object());
    assert_eq!(h.get("/openapi/v3/apis/nope/v1", "").await.code, 404);
}

#[tokio::test]
async fn openapi_hash_follows_crds() {
    let t = start().await;
    let h = Http::new(&t.url);
    let before = root_hashes(&h).await;
    assert!(before.get("apis/example.com/v1").is_none());
    install_widgets(&h, false).await;
    let after = eventually("the widgets group in the OpenAPI v3 root", 10, || async {
        let p = root_hashes(&h).await;
        p.get("apis/example.com/v1").is_some().then_some(p)
    })
    .await;
    // Built-in documents are unchanged, and so are their hashes.
    assert_eq!(before["api/v1"], after["api/v1"]);
    let url = after["apis/example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let doc = h.get(&url, "").await.json();
    let w = &doc["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(
        w["x-kubernetes-group-version-kind"],
        json!([{"group": "example.com", "kind": "Widget", "version": "v1"}])
    );
    assert_eq!(
        w["properties"]["metadata"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert_eq!(
        w["properties"]["spec"]["properties"]["replicas"]["type"],
        "integer"
    );
    assert!(
        doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object()
    );
    let patch =
        &doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
    // Custom resources take no strategic merge patch.
    assert!(
        patch["requestBody"]["content"]
            .get("application/strategic-merge-patch+json")
            .is_none()
    );
    // A schema change moves the hash of that document only.
    install_widgets(&h, true).await;
    let changed = eventually("the widgets document's hash to change", 10, || async {
        let p = root_hashes(&h).await;
        (p["apis/example.com/v1"]["serverRelativeURL"].as_str() != Some(url.as_str())).then_some(p)
    })
    .await;
    assert_eq!(changed["api/v1"], before["api/v1"]);
    let doc = h
        .get(
            changed["apis/example.com/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap(),
            "",
        )
        .await
        .json();
    assert!(
        doc["components"]["schemas"]["com.example.v1.Widget"]["properties"]["spec"]["properties"]["color"]
            .is_object()
    );
}

#[tokio::test]
async fn openapi_v2_in_json_and_protobuf() {
    let t = start().await;
    let h = Http::new(&t.url);
    let r = h.get("/openapi/v2", "application/json").await;
    assert_eq!(r.code, 200);
    let doc = r.json();
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(
        doc["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-action"], "patch");
    // client-go asks for gnostic protobuf only (kubectl's client-side
    // validation needs it): a Document whose field 1 is `swagger`.
    let r = h
        .get(
            "/openapi/v2",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )
        .await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.headers["content-type"],
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    assert!(r.body.starts_with(b"\x0a\x032.0"), "{:?}", &r.body[..8]);
    // Other media types are still refused.
    let r = h.get("/openapi/v2", "application/xml").await;
    assert_eq!(r.code, 406);
    assert_eq!(r.json()["reason"], "NotAcceptable");
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
           "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}})
}

fn column_names(table: &Value) -> Vec<String> {
    table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn tables_for_builtins() {
    let t = start().await;
    let h = Http::new(&t.url);
    assert_eq!(
        h.post("/api/v1/namespaces/default/pods", &pod("p1"))
            .await
            .code,
        201
    );
    let cm = json!({"metadata": {"name": "cm1"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
    assert_eq!(
        h.post("/api/v1/namespaces/default/configmaps", &cm)
            .await
            .code,
        201
    );

    let r = h.get("/api/v1/namespaces/default/pods", TABLE).await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.headers["content-type"],
        "application/json;as=Table;v=v1;g=meta.k8s.io"
    );
    let table = r.json();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    assert!(table["metadata"]["resourceVersion"].as_str().is_some());
    assert_eq!(
        column_names(&table),
        [
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "IP",
            "Node",
            "Nominated Node",
            "Readiness Gates"
        ]
    );
    let priorities: Vec<i64> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["priority"].as_i64().unwrap())
        .collect();
    assert_eq!(priorities, [0, 0, 0, 0, 0, 1, 1, 1, 1]);
    let row = &table["rows"][0];
    assert_eq!(row["cells"][0], "p1");
    assert_eq!(row["cells"][1], "0/1");
    assert_eq!(row["cells"][2], "Pending");
    assert_eq!(row["cells"][6], "n1");
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["metadata"]["labels"]["app"], "web");
    assert!(row["object"].get("spec").is_none());

    // --sort-by asks for the whole object.
    let full = h
        .get(
            "/api/v1/namespaces/default/pods?includeObject=Object",
            TABLE,
        )
        .await
        .json();
    assert_eq!(full["rows"][0]["object"]["kind"], "Pod");
    assert_eq!(full["rows"][0]["object"]["spec"]["nodeName"], "n1");
    let none = h
        .get("/api/v1/namespaces/default/pods?includeObject=None", TABLE)
        .await
        .json();
    assert!(none["rows"][0].get("object").is_none());

    // GET of one object is a one-row table.
    let one = h
        .get("/api/v1/namespaces/default/configmaps/cm1", TABLE)
        .await
        .json();
    assert_eq!(column_names(&one), ["Name", "Data", "Age"]);
    assert_eq!(one["rows"].as_array().unwrap().len(), 1);
    assert_eq!(one["rows"][0]["cells"][0], "cm1");
    assert_eq!(one["rows"][0]["cells"][1], 3);
    // Plain JSON stays plain.
    let plain = h
        .get(
            "/api/v1/namespaces/default/configmaps/cm1",
            "application/json",
        )
        .await;
    assert_eq!(plain.json()["kind"], "ConfigMap");
    assert_eq!(plain.headers["content-type"], "application/json");
}

#[tokio::test]
async fn tables_for_custom_resources() {
    let t = start().await;
    let h = Http::new(&t.url);
    install_widgets(&h, false).await;
    let started = (chrono::Utc::now() - chrono::Duration::minutes(5))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
        "spec": {"replicas": 3, "mode": "fast", "items": [{"name": "a"}, {"name": "b"}]},
        "status": {"startTime": started, "conditions": [{"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]}});
    let r = h
        .post("/apis/example.com/v1/namespaces/default/widgets", &w)
        .await;
    assert_eq!(r.code, 201, "{}", String::from_utf8_lossy(&r.body));
    let table = h
        .get("/apis/example.com/v1/namespaces/default/widgets", TABLE)
        .await
        .json();
    assert_eq!(
        column_names(&table),
        ["Name", "Replicas", "Ready", "Items", "Mode", "Started"]
    );
    let defs = table["columnDefinitions"].as_array().unwrap();
    assert_eq!(defs[0]["format"], "name");
    assert_eq!(defs[1]["type"], "integer");
    assert_eq!(defs[4]["priority"], 1);
    assert_eq!(defs[5]["type"], "date");
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["w1", 3, "True", "a,b", "fast", "5m"])
    );

    // Without printer columns a custom resource shows its age.
    let mut crd = widget_crd(false);
    crd["metadata"]["name"] = json!("gadgets.example.com");
    crd["spec"]["names"] = json!({"plural": "gadgets", "singular": "gadget", "kind": "Gadget"});
    crd["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("additionalPrinterColumns");
    assert_eq!(
        h.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd
        )
        .await
        .code,
        201
    );
    eventually("gadgets to be served", 10, || async {
        (h.get("/apis/example.com/v1/gadgets", "").await.code == 200).then_some(())
    })
    .await;
    let g = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}});
    assert_eq!(
        h.post("/apis/example.com/v1/namespaces/default/gadgets", &g)
            .await
            .code,
        201
    );
    let table = h
        .get("/apis/example.com/v1/namespaces/default/gadgets/g1", TABLE)
        .await
        .json();
    assert_eq!(column_names(&table), ["Name", "Age"]);
    assert_eq!(table["rows"][0]["cells"], json!(["g1", "0s"]));
}

#[tokio::test]
async fn table_watch_events() {
    let t = start().await;
    let h = Http::new(&t.url);
    assert_eq!(
        h.post("/api/v1/namespaces/default/pods", &pod("p1"))
            .await
            .code,
        201
    );
    let url = t.url.clone();
    let watch = tokio::spawn(async move {
        Http::new(&url)
            .get(
                "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=2",
                TABLE,
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        h.post("/api/v1/namespaces/default/pods", &pod("p2"))
            .await
            .code,
        201
    );
    let r = watch.await.unwrap();
    assert_eq!(
        r.headers["content-type"],
        "application/json;as=Table;v=v1;g=meta.k8s.io"
    );
    let events: Vec<Value> = String::from_utf8_lossy(&r.body)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["kind"], "Table");
    assert_eq!(events[0]["object"]["rows"][0]["cells"][0], "p1");
    assert!(events[0]["object"]["columnDefinitions"].is_array());
    // Like kube-apiserver, the column definitions come with the first event.
    assert_eq!(events[1]["object"]["rows"][0]["cells"][0], "p2");
    assert!(events[1]["object"].get("columnDefinitions").is_none());
}

#[tokio::test]
async fn partial_object_metadata() {
    let t = start().await;
    let h = Http::new(&t.url);
    let cm = json!({"metadata": {"name": "cm1", "labels": {"a": "b"}}, "data": {"secret": "x"}});
    assert_eq!(
        h.post("/api/v1/namespaces/default/configmaps", &cm)
            .await
            .code,
        201
    );
    let list_accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let r = h
        .get("/api/v1/namespaces/default/configmaps", list_accept)
        .await;
    assert_eq!(
        r.headers["content-type"],
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
    );
    let list = r.json();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert!(list["metadata"]["resourceVersion"].as_str().is_some());
    assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");
    assert_eq!(list["items"][0]["metadata"]["labels"]["a"], "b");
    assert!(list["items"][0].get("data").is_none());

    let one = h
        .get(
            "/api/v1/namespaces/default/configmaps/cm1",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .await
        .json();
    assert_eq!(one["kind"], "PartialObjectMetadata");
    assert_eq!(one["metadata"]["name"], "cm1");

    let w = h
        .get(
            "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .await;
    let ev: Value =
        serde_json::from_str(String::from_utf8_lossy(&w.body).lines().next().unwrap()).unwrap();
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
    assert!(ev["object"].get("data").is_none());
}

#[tokio::test]
async fn field_validation_for_builtins() {
    let t = start().await;
    let h = Http::new(&t.url);
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "bogus": 1},
               "data": {"a": "1"}, "extra": {"x": 1}})
    };
    // Strict: 400 naming every unknown field.
    let r = h
        .post(&format!("{cms}?fieldValidation=Strict"), &cm("s"))
        .await;
    assert_eq!(r.code, 400);
    assert_eq!(
        r.json()["message"],
        "strict decoding error: unknown field \"metadata.bogus\", unknown field \"extra\""
    );
    // Warn (the default): created without the fields, with Warning headers.
    let r = h.post(cms, &cm("w")).await;
    assert_eq!(r.code, 201);
    let warnings: Vec<&str> = r
        .headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(
        warnings,
        [
            "299 - \"unknown field \\\"metadata.bogus\\\"\"",
            "299 - \"unknown field \\\"extra\\\"\""
        ]
    );
    let stored = h.get(&format!("{cms}/w"), "").await.json();
    assert!(stored.get("extra").is_none());
    assert!(stored["metadata"].get("bogus").is_none());
    // Ignore: silent.
    let r = h
        .post(&format!("{cms}?fieldValidation=Ignore"), &cm("i"))
        .await;
    assert_eq!(r.code, 201);
    assert!(r.headers.get("warning").is_none());
    // Nested fields are named by their path, as kube does.
    let mut p = pod("p1");
    p["spec"]["containers"][0]["imagePullPolicyX"] = json!("Always");
    let r = h
        .post("/api/v1/namespaces/default/pods?fieldValidation=Strict", &p)
        .await;
    assert_eq!(r.code, 400);
    assert_eq!(
        r.json()["message"],
        "strict decoding error: unknown field \"spec.containers[0].imagePullPolicyX\""
    );
    // Duplicate keys in a JSON body are caught under Strict.
    let dup = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"},"data":{"a":"1"},"data":{"b":"2"}}"#;
    let r = h
        .call(
            "POST",
            &format!("{cms}?fieldValidation=Strict"),
            "",
            "application/json",
            dup.to_vec(),
        )
        .await;
    assert_eq!(r.code, 400);
    assert_eq!(
        r.json()["message"],
        "strict decoding error: duplicate field \"data\""
    );
    // An unknown mode is rejected.
    let r = h
        .post(&format!("{cms}?fieldValidation=Loud"), &cm("l"))
        .await;
    assert_eq!(r.code, 400);
    // Patches are validated on their result.
    let r = h
        .call(
            "PATCH",
            &format!("{cms}/w?fieldValidation=Strict"),
            "",
            "application/merge-patch+json",
            br#"{"spec":{"x":1}}"#.to_vec(),
        )
        .await;
    assert_eq!(r.code, 400);
    assert_eq!(
        r.json()["message"],
        "strict decoding error: unknown field \"spec\""
    );
}

/// Runs `scripts/validate-openapi.py` (openapi-spec-validator) over every
/// document, a custom resource's included. Skipped, loudly, when python3 or
/// the module is missing: `pip install openapi-spec-validator`.
#[tokio::test]
async fn documents_pass_openapi_spec_validator() {
    let has_validator = std::process::Command::new("python3")
        .args(["-c", "import openapi_spec_validator"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !has_validator {
        eprintln!(
            "SKIPPED: python3 with openapi-spec-validator is not available (pip install openapi-spec-validator)"
        );
        return;
    }
    let t = start().await;
    let h = Http::new(&t.url);
    install_widgets(&h, false).await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/validate-openapi.py"
    );
    let url = t.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .args([script, &url])
            .output()
            .expect("python3 runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ok      /openapi/v3/apis/example.com/v1"));
    assert!(stdout.contains("ok      /openapi/v2"));
}
