//! Serving HTTPS: a rustls acceptor loop in front of the axum router, with
//! ALPN `h2` and `http/1.1` (kubectl and kube-rs multiplex watches over h2).
//!
//! Client certificates are requested but not required: a certificate that
//! chains to the client CA authenticates its holder, no certificate leaves
//! the request to bearer tokens. The verified chain reaches request handling
//! as a [`PeerCertificates`] request extension; rustls has already checked
//! it, so authentication only reads names out of it.

use crate::error::Error;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

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
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = CertificateDer::pem_slice_iter(self.cert_chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(failed("reading the serving certificate"))?;
        if chain.is_empty() {
            return Err(Error::ServingCertificateMissing);
        }
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(failed("reading the serving key"))?;
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(failed("choosing TLS versions"))?;
        let builder = match &self.client_ca_pem {
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                    roots
                        .add(c.map_err(failed("reading the client CA"))?)
                        .map_err(failed("adding the client CA"))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .allow_unauthenticated()
                        .build()
                        .map_err(failed("building the client certificate verifier"))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(failed("the serving certificate does not match its key"))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The error of a failed TLS setup step.
fn failed<E: std::error::Error + Send + Sync + 'static>(
    step: &'static str,
) -> impl FnOnce(E) -> Error {
    move |e| Error::TlsSetupFailed {
        step,
        source: Box::new(e),
    }
}
