//! Wire-level semantics checked with raw HTTP: size limits, error bodies,
//! deletecollection, watch bookmarks and timeouts, resourceVersionMatch,
//! the events.k8s.io ⇄ core/v1 Event mapping, and HTTP/2 (h2c).

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{start, start_with};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

type C = Client<HttpConnector, Full<Bytes>>;

fn client(h2: bool) -> C {
    let mut b = Client::builder(TokioExecutor::new());
    if h2 {
        b.http2_only(true);
    }
    b.build(HttpConnector::new())
}

async fn call(c: &C, method: &str, url: String, ct: &str, body: Vec<u8>) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", ct)
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = c.request(req).await.unwrap();
    let code = resp.status().as_u16();
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&b).unwrap_or(Value::Null))
}

fn cm(name: &str, label: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"group": label}}, "data": {"k": "v"}}))
    .unwrap()
}

#[tokio::test]
async fn limits_and_error_bodies() {
    let t = start().await;
    let c = client(false);
    let url = format!("{}/api/v1/namespaces/default/configmaps", t.url);
    // A body over 3 MiB.
    let huge =
        json!({"metadata": {"name": "huge"}, "data": {"k": "x".repeat(3 * 1024 * 1024 + 10)}});
    let (code, status) = call(
        &c,
        "POST",
        url.clone(),
        "application/json",
        serde_json::to_vec(&huge).unwrap(),
    )
    .await;
    assert_eq!(code, 413);
    assert_eq!(status["reason"], "RequestEntityTooLarge");
    // An object over 1.5 MiB (but a body under 3 MiB).
    let big = json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(2 * 1024 * 1024)}});
    let (code, status) = call(
        &c,
        "POST",
        url.clone(),
        "application/json",
        serde_json::to_vec(&big).unwrap(),
    )
    .await;
    assert_eq!(code, 413, "{status}");
    // Malformed JSON is a 400 Status.
    let (code, status) = call(
        &c,
        "POST",
        url.clone(),
        "application/json",
        b"{not json".to_vec(),
    )
    .await;
    assert_eq!((code, status["kind"].as_str()), (400, Some("Status")));
    // A wrong kind for the path.
    let (code, _) = call(
        &c,
        "POST",
        url.clone(),
        "application/json",
        serde_json::to_vec(
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
        )
        .unwrap(),
    )
    .await;
    assert_eq!(code, 400);
    // Unknown patch type.
    call(&c, "POST", url.clone(), "application/json", cm("p", "a")).await;
    let (code, status) = call(
        &c,
        "PATCH",
        format!("{url}/p"),
        "text/plain",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    // A JSON patch whose test fails.
    let (code, _) = call(
        &c,
        "PATCH",
        format!("{url}/p"),
        "application/json-patch+json",
        serde_json::to_vec(&json!([{"op": "test", "path": "/data/k", "value": "other"}])).unwrap(),
    )
    .await;
    assert_eq!(code, 422);
    // Method not allowed, unknown resource, bad selectors, bad resourceVersionMatch.
    let (code, _) = call(&c, "PUT", url.clone(), "application/json", cm("x", "a")).await;
    assert_eq!(code, 405);
    let (code, _) = call(&c, "GET", format!("{}/api/v1/nothings", t.url), "", vec![]).await;
    assert_eq!(code, 404);
    let (code, _) = call(
        &c,
        "GET",
        format!("{url}?labelSelector=a%20in%20(b"),
        "",
        vec![],
    )
    .await;
    assert_eq!(code, 400);
    let (code, _) = call(
        &c,
        "GET",
        format!("{url}?resourceVersionMatch=Exact"),
        "",
        vec![],
    )
    .await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn deletecollection_and_exact_reads() {
    let t = start().await;
    let c = client(false);
    let url = format!("{}/api/v1/namespaces/default/configmaps", t.url);
    for i in 0..6 {
        let (code, _) = call(
            &c,
            "POST",
            url.clone(),
            "application/json",
            cm(&format!("d{i}"), if i < 4 { "a" } else { "b" }),
        )
        .await;
        assert_eq!(code, 201);
    }
    let (_, list) = call(&c, "GET", url.clone(), "", vec![]).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _) = call(
        &c,
        "DELETE",
        format!("{url}?labelSelector=group%3Da"),
        "",
        vec![],
    )
    .await;
    assert_eq!(code, 200);
    let (_, now) = call(&c, "GET", url.clone(), "", vec![]).await;
    assert_eq!(now["items"].as_array().unwrap().len(), 2);
    // Reading exactly at the earlier revision still shows all six.
    let (code, then) = call(
        &c,
        "GET",
        format!("{url}?resourceVersion={rv}&resourceVersionMatch=Exact"),
        "",
        vec![],
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(then["items"].as_array().unwrap().len(), 6);
    assert_eq!(then["metadata"]["resourceVersion"], rv);
}

#[tokio::test]
async fn watch_bookmarks_and_timeout() {
    let t = start_with(apiserver::Config {
        bookmark_interval: Duration::from_millis(300),
        ..Default::default()
    })
    .await;
    let c = client(false);
    let url = format!("{}/api/v1/namespaces/default/configmaps", t.url);
    call(&c, "POST", url.clone(), "application/json", cm("w0", "a")).await;
    let started = Instant::now();
    let req = http::Request::builder()
        .uri(format!(
            "{url}?watch=true&allowWatchBookmarks=true&timeoutSeconds=2"
        ))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = c.request(req).await.unwrap();
    let c2 = c.clone();
    let url2 = url.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        call(&c2, "POST", url2, "application/json", cm("w1", "a")).await;
    });
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1900) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
    let events: Vec<Value> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("each line is one compact JSON event"))
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types.iter().filter(|t| **t == "ADDED").count(),
        2,
        "{types:?}"
    );
    let bookmark = events
        .iter()
        .find(|e| e["type"] == "BOOKMARK")
        .expect("a bookmark");
    assert_eq!(bookmark["object"]["kind"], "ConfigMap");
    assert_eq!(bookmark["object"]["apiVersion"], "v1");
    let added_rv: i64 = events
        .iter()
        .rfind(|e| e["type"] == "ADDED")
        .unwrap()["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let bm_rv: i64 = bookmark["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(bm_rv >= 1 && bm_rv <= added_rv.max(bm_rv));
}

#[tokio::test]
async fn events_are_one_kind_in_two_groups() {
    let t = start().await;
    let c = client(false);
    let ev = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e1"},
        "eventTime": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        "regarding": {"kind": "Machine", "name": "m1", "namespace": "default"},
        "note": "created the VM", "reason": "Created", "type": "Normal",
        "reportingController": "trellis/machine", "reportingInstance": "x", "action": "Create",
    });
    let (code, created) = call(
        &c,
        "POST",
        format!("{}/apis/events.k8s.io/v1/namespaces/default/events", t.url),
        "application/json",
        serde_json::to_vec(&ev).unwrap(),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["note"], "created the VM");
    let (code, list) = call(&c, "GET",
        format!("{}/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dm1,involvedObject.kind%3DMachine", t.url),
        "", vec![]).await;
    assert_eq!(code, 200);
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["message"], "created the VM");
    assert_eq!(items[0]["involvedObject"]["name"], "m1");
    assert_eq!(items[0]["apiVersion"], "v1");
    let (_, none) = call(
        &c,
        "GET",
        format!(
            "{}/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dother",
            t.url
        ),
        "",
        vec![],
    )
    .await;
    assert!(none["items"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn http2_cleartext() {
    let t = start().await;
    let c = client(true);
    let (code, v) = call(
        &c,
        "GET",
        format!("{}/api/v1/namespaces", t.url),
        "",
        vec![],
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(v["kind"], "NamespaceList");
    let (code, _) = call(&c, "GET", format!("{}/readyz", t.url), "", vec![]).await;
    assert_eq!(code, 200);
}
