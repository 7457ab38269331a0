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

/// An HTTPS server with authentication and RBAC on, over a fresh PKI in a
/// temporary directory, with an audit log there too.
pub struct SecureServer {
    pub server: Arc<Server>,
    pub url: String,
    pub pki: apiserver::Pki,
    pub dir: tempfile::TempDir,
}

/// Starts a [`SecureServer`]; `token_file` is the text of a kube token file.
pub async fn start_secure(token_file: &str) -> SecureServer {
    let dir = tempfile::tempdir().unwrap();
    let pki = apiserver::Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
    let mut auth = apiserver::AuthConfig::new(pki.service_account_key_pem.clone());
    auth.static_tokens = apiserver::auth::token_file::parse(token_file).unwrap();
    let config = Config {
        auth: Some(auth),
        audit_log: Some(dir.path().join("audit.log")),
        ..Config::default()
    };
    let store: Arc<dyn store::Store> = Arc::new(store::MemoryStore::new());
    let server = Server::start(store, config).await.expect("server starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let srv = server.clone();
    let tls = pki.tls_config();
    tokio::spawn(async move { srv.serve_tls(listener, tls, std::future::pending()).await });
    SecureServer {
        server,
        url: format!("https://{addr}"),
        pki,
        dir,
    }
}

/// How a test client proves who it is.
pub enum Creds<'a> {
    Anonymous,
    Cert { cert: &'a str, key: &'a str },
    Token(&'a str),
}

impl SecureServer {
    /// A kube-rs client built from a kubeconfig, as users build them:
    /// trusting `ca` (PEM; `None` leaves the platform's trust store) and
    /// presenting `creds`; `impersonate` sets `--as`.
    pub async fn client_with(
        &self,
        ca: Option<&str>,
        creds: Creds<'_>,
        impersonate: Option<&str>,
    ) -> kube::Client {
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let mut cluster = format!("    server: {}\n", self.url);
        if let Some(ca) = ca {
            cluster.push_str(&format!("    certificate-authority-data: {}\n", b64(ca)));
        }
        let mut user = match creds {
            Creds::Anonymous => String::new(),
            Creds::Cert { cert, key } => format!(
                "    client-certificate-data: {}\n    client-key-data: {}\n",
                b64(cert),
                b64(key)
            ),
            Creds::Token(t) => format!("    token: {t}\n"),
        };
        if let Some(who) = impersonate {
            user.push_str(&format!("    as: {who}\n"));
        }
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n{cluster}contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n{user}"
        );
        let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        config.default_retry = false;
        kube::Client::try_from(config).unwrap()
    }

    /// The admin: client certificate in system:masters, trusting our CA.
    pub async fn admin(&self) -> kube::Client {
        let (cert, key) = (
            self.pki.admin_cert_pem.clone(),
            self.pki.admin_key_pem.clone(),
        );
        self.client_with(
            Some(&self.pki.ca_cert_pem),
            Creds::Cert {
                cert: &cert,
                key: &key,
            },
            None,
        )
        .await
    }

    /// A bearer-token user, trusting our CA.
    pub async fn token_client(&self, token: &str) -> kube::Client {
        self.client_with(Some(&self.pki.ca_cert_pem), Creds::Token(token), None)
            .await
    }

    /// The audit log's lines, parsed.
    pub fn audit_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.path().join("audit.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}
