//! Serving HTTPS: a rustls acceptor loop in front of the axum router, with
//! ALPN `h2` and `http/1.1` (kubectl and kube-rs multiplex watches over h2).
//!
//! Client certificates are requested but not required: a certificate that
//! chains to the client CA authenticates its holder, no certificate leaves
//! the request to bearer tokens. The verified chain reaches request handling
//! as a [`PeerCertificates`] request extension; rustls has already checked
//! it, so authentication only reads names out of it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tower::ServiceExt;

use crate::server::Server;

/// A TLS handshake that has not finished by then is dropped, so idle
/// half-open connections cannot pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for open connections (watches never end by
/// themselves) before it returns anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What the HTTPS listener serves with.
#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// The serving certificate, then any intermediates (PEM).
    pub cert_chain_pem: String,
    /// The serving certificate's private key (PEM, PKCS#8, SEC1 or PKCS#1).
    pub key_pem: String,
    /// CA bundle client certificates must chain to; `None` asks for none.
    pub client_ca_pem: Option<String>,
}

/// The client's verified certificate chain, leaf first; empty when the
/// client sent none.
#[derive(Clone, Debug, Default)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

impl TlsConfig {
    /// The rustls server configuration (ring provider, ALPN h2 + http/1.1).
    pub fn server_config(&self) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = CertificateDer::pem_slice_iter(self.cert_chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("reading the serving certificate")?;
        anyhow::ensure!(!chain.is_empty(), "no serving certificate in the PEM");
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .context("reading the serving key")?;
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .context("choosing TLS versions")?;
        let builder = match &self.client_ca_pem {
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                    roots
                        .add(c.context("reading the client CA")?)
                        .context("adding the client CA")?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .allow_unauthenticated()
                        .build()
                        .context("building the client certificate verifier")?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .context("the serving certificate does not match its key")?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl Server {
    /// Serves HTTPS on `listener` until `shutdown`, then gives open
    /// connections a few seconds to finish.
    pub async fn serve_tls(
        self: &Arc<Self>,
        listener: tokio::net::TcpListener,
        tls: TlsConfig,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let config = tls.server_config().map_err(std::io::Error::other)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let router = self.router();
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        tokio::pin!(shutdown);
        loop {
            let (tcp, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off
                        // instead of spinning, and keep serving.
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = &mut shutdown => break,
            };
            let acceptor = acceptor.clone();
            let router = router.clone();
            let builder = builder.clone();
            let watcher = graceful.watcher();
            tokio::spawn(async move {
                let stream =
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    };
                let certs = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
                    .unwrap_or_default();
                let peer_certs = PeerCertificates(Arc::new(certs));
                let service = hyper::service::service_fn(
                    move |mut req: http::Request<hyper::body::Incoming>| {
                        req.extensions_mut().insert(peer_certs.clone());
                        req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                        router.clone().oneshot(req)
                    },
                );
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                if let Err(e) = watcher.watch(conn.into_owned()).await {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            });
        }
        drop(listener);
        tokio::select! {
            _ = graceful.shutdown() => {}
            _ = tokio::time::sleep(SHUTDOWN_GRACE) => {}
        }
        Ok(())
    }
}
