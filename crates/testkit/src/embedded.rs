//! An embedded cluster for a test: the API server over an in-memory store
//! with the CRDs the test needs, logging to the test's output, and clients
//! built from kubeconfigs as users build theirs.

pub use apiserver::cluster::Cluster;

/// Sends `tracing` output to the test's captured output, filtered by
/// `RUST_LOG`; once per test binary, later calls do nothing.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Starts an embedded cluster (in-memory store, plain HTTP on
/// `127.0.0.1:0`, a client without retries) with `crds` installed, after
/// [`init_tracing`]. Builds that need more (TLS, a file store, a config)
/// use [`Cluster::builder`] themselves.
pub async fn cluster<T: serde::Serialize>(crds: impl IntoIterator<Item = T>) -> Cluster {
    init_tracing();
    Cluster::builder()
        .crds(crds)
        .start()
        .await
        .expect("the embedded cluster starts")
}

/// [`cluster`] without CRDs.
pub async fn bare_cluster() -> Cluster {
    cluster(std::iter::empty::<serde_json::Value>()).await
}

/// The client configuration a kubeconfig document describes (server, CA,
/// credentials, impersonation), with kube-rs's defaults; a test that wants
/// to see every 429 turns `default_retry` off.
pub async fn kubeconfig(
    yaml: &str,
) -> Result<kube::Config, Box<dyn std::error::Error + Send + Sync>> {
    let kc = kube::config::Kubeconfig::from_yaml(yaml)?;
    Ok(kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?)
}
