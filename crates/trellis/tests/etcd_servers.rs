//! `trellis server --etcd-servers`: two server processes on one 3-member
//! etcd serve the same objects, and each one's watch sees the other's
//! writes; a LIST on one at a resourceVersion the other handed out is
//! served, and the objects outlive both servers (they live in etcd).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

type HttpClient = Client<HttpConnector, Full<Bytes>>;

struct Server {
    child: tokio::process::Child,
    base: String,
    log: std::path::PathBuf,
}

fn free_port() -> u16 {
    etcdv3::testing::free_port()
}

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

async fn send(base: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        )))
        .expect("a request");
    let resp = tokio::time::timeout(Duration::from_secs(10), client().request(req))
        .await
        .expect("an answer within 10 s")
        .expect("a response");
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.expect("a body").to_bytes();
    (
        status,
        serde_json::from_slice(&body)
            .unwrap_or(Value::String(String::from_utf8_lossy(&body).into_owned())),
    )
}

/// Starts `trellis server` (plain HTTP: this test is about the store) on
/// `etcd`, with its own data directory for nothing but its log.
async fn start(data: &Path, etcd: &str, n: usize) -> Server {
    for attempt in 0..5 {
        let port = free_port();
        let log = data.join(format!("server-{n}-{attempt}.log"));
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_trellis"))
            .args(["server", "--insecure-http", "--etcd-servers", etcd])
            .arg("--data-dir")
            .arg(data.join(format!("server-{n}")))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env("TRELLIS_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(&log).expect("a log file"),
            ))
            .kill_on_drop(true)
            .spawn()
            .expect("spawning trellis server");
        let mut srv = Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if srv.child.try_wait().expect("polling").is_some() {
                break;
            }
            let req = http::Request::get(format!("{}/readyz", srv.base))
                .body(Full::new(Bytes::new()))
                .expect("a request");
            if let Ok(Ok(r)) =
                tokio::time::timeout(Duration::from_secs(2), client().request(req)).await
                && r.status() == 200
            {
                return srv;
            }
            assert!(
                Instant::now() < deadline,
                "server {n} not ready: {}",
                std::fs::read_to_string(&srv.log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    panic!("server {n} did not start");
}

/// A watch of ConfigMaps in `default` from `rv`, as a channel of events.
fn watch(base: &str, rv: &str) -> tokio::sync::mpsc::Receiver<Value> {
    let (tx, rx) = tokio::sync::mpsc::channel(100);
    let url = format!("{base}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}");
    tokio::spawn(async move {
        let req = http::Request::get(url)
            .body(Full::new(Bytes::new()))
            .expect("a request");
        let Ok(resp) = client().request(req).await else {
            return;
        };
        let mut body = resp.into_body();
        let mut buf = Vec::new();
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                buf.extend_from_slice(&data);
                while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=nl).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&line)
                        && tx.send(v).await.is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    rx
}

async fn next_added(rx: &mut tokio::sync::mpsc::Receiver<Value>, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = tokio::time::timeout(left, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no ADDED event for {name} within 10 s"))
            .expect("the watch is open");
        if ev["type"] == "ADDED" && ev["object"]["metadata"]["name"] == name {
            return ev;
        }
    }
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_etcd_see_each_others_writes() {
    let Some(etcd) = etcdv3::testing::cluster_or_skip(3).await else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let a = start(dir.path(), &etcd.endpoints(), 0).await;
    let b = start(dir.path(), &etcd.endpoints(), 1).await;

    let (code, list) = send(
        &b.base,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        None,
    )
    .await;
    assert_eq!(code, 200, "{list}");
    let rv0 = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("a list resourceVersion")
        .to_string();
    let mut on_a = watch(&a.base, &rv0);
    let mut on_b = watch(&b.base, &rv0);
    // Let both watches start before the writes.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (code, made) = send(
        &a.base,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(configmap("from-a")),
    )
    .await;
    assert_eq!(code, 201, "{made}");
    let rv_a = made["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let seen = next_added(&mut on_b, "from-a").await;
    assert_eq!(seen["object"]["metadata"]["resourceVersion"], rv_a.as_str());
    next_added(&mut on_a, "from-a").await;

    let (code, made) = send(
        &b.base,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(configmap("from-b")),
    )
    .await;
    assert_eq!(code, 201, "{made}");
    let seen = next_added(&mut on_a, "from-b").await;
    assert_eq!(seen["object"]["data"]["k"], "from-b");
    let rv_b: u64 = made["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv_b > rv_a.parse::<u64>().unwrap(), "one revision sequence");

    // A read on A at the revision B handed out is served at once.
    let (code, list) = send(
        &a.base,
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?resourceVersion={rv_b}"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert!(
        names.contains(&"from-a") && names.contains(&"from-b"),
        "{names:?}"
    );

    // An update through B with A's stale version conflicts, as on one server.
    let mut stale = configmap("from-a");
    stale["metadata"]["resourceVersion"] = json!("1");
    let (code, _) = send(
        &b.base,
        "PUT",
        "/api/v1/namespaces/default/configmaps/from-a",
        Some(stale),
    )
    .await;
    assert_eq!(code, 409);

    // The objects live in etcd: a third server on a fresh data directory
    // serves them after both are gone.
    drop(a);
    drop(b);
    let c = start(dir.path(), &etcd.endpoints(), 2).await;
    let (code, got) = send(
        &c.base,
        "GET",
        "/api/v1/namespaces/default/configmaps/from-b",
        None,
    )
    .await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(
        got["metadata"]["resourceVersion"],
        rv_b.to_string().as_str()
    );
}
