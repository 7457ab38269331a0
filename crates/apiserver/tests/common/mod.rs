//! Test harness: an API server on an ephemeral loopback port over the
//! in-memory store, and a kube-rs client pointed at it.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use apiserver::{Config, Server};

pub struct TestServer {
    pub server: Arc<Server>,
    pub client: kube::Client,
    pub url: String,
}

pub async fn start() -> TestServer {
    start_with(Config::default()).await
}

pub async fn start_with(config: Config) -> TestServer {
    let store: Arc<dyn store::Store> = Arc::new(store::MemoryStore::new());
    let server = Server::start(store, config).await.expect("server starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let srv = server.clone();
    tokio::spawn(async move { srv.serve(listener, std::future::pending()).await });
    let url = format!("http://{addr}");
    let mut config = kube::Config::new(url.parse().unwrap());
    // kube-rs retries 429s by itself; tests want to see them.
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    TestServer {
        server,
        client,
        url,
    }
}

/// Polls `f` until it returns `Some`, for up to `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached within {secs}s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
