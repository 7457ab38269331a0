//! What the API server's tests share: servers started through the
//! embedded-cluster builder (plain, or HTTPS with authentication, RBAC and
//! an audit log) with the fields the tests read, and clients built from
//! kubeconfigs as users build them.

#![allow(dead_code)]

use std::sync::Arc;

use apiserver::cluster::Cluster;
use apiserver::{Config, Server};

pub struct TestServer {
    pub server: Arc<Server>,
    pub client: kube::Client,
    pub url: String,
}

pub async fn start() -> TestServer {
    start_with(Config::default()).await
}

/// A server with `config` on an in-memory store, over plain HTTP; its
/// client does not retry (kube-rs retries 429s by itself; tests want to
/// see them).
pub async fn start_with(config: Config) -> TestServer {
    testkit::init_tracing();
    let cluster = Cluster::builder()
        .config(config)
        .start()
        .await
        .expect("server starts");
    TestServer {
        server: cluster.server().clone(),
        client: cluster.client(),
        url: cluster.url().to_string(),
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
    let cluster = Cluster::builder()
        .config(config)
        .tls(pki.clone())
        .start()
        .await
        .expect("server starts");
    SecureServer {
        server: cluster.server().clone(),
        url: cluster.url().to_string(),
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
        let mut config = testkit::kubeconfig(&yaml).await.unwrap();
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
