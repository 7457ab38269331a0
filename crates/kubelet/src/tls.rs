//! TLS of the kubelet's HTTPS endpoint: a serving certificate of its own
//! (self-signed, kept in the state directory; the API server does not
//! verify kubelet certificates unless told to, as kube-apiserver without
//! `--kubelet-certificate-authority`), client certificates verified
//! against the cluster CA, and the client identity read from them. Also
//! the non-verifying client of HTTPS probes.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// The users allowed to call the kubelet: kube-apiserver's kubelet client
/// and cluster admins.
pub const APISERVER_CLIENT: &str = "kube-apiserver-kubelet-client";
pub const MASTERS: &str = "system:masters";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Loads or creates the serving certificate and key in `dir`.
pub fn serving_pair(dir: &Path, node: &str) -> Result<(String, String), String> {
    let cert = dir.join("kubelet.crt");
    let key = dir.join("kubelet.key");
    if let (Ok(c), Ok(k)) = (
        std::fs::read_to_string(&cert),
        std::fs::read_to_string(&key),
    ) {
        return Ok((c, k));
    }
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let names = vec![node.to_string(), "localhost".into(), "127.0.0.1".into()];
    let signed = rcgen::generate_simple_self_signed(names).map_err(|e| e.to_string())?;
    let (c, k) = (signed.cert.pem(), signed.signing_key.serialize_pem());
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::File::options()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&key)
        .map_err(|e| e.to_string())?;
    std::io::Write::write_all(&mut f, k.as_bytes()).map_err(|e| e.to_string())?;
    std::fs::write(&cert, &c).map_err(|e| e.to_string())?;
    Ok((c, k))
}

fn certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("reading certificates: {e}"))
}

/// The server configuration: our pair, clients verified against `ca_pem`.
pub fn server_config(
    cert_pem: &str,
    key_pem: &str,
    ca_pem: &str,
) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(ca_pem)? {
        roots.add(c).map_err(|e| format!("the cluster CA: {e}"))?;
    }
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| format!("client verifier: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| format!("reading the key: {e}"))?;
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(cert_pem)?, key)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(cfg))
}

/// A client configuration with a certificate, trusting any server (the
/// API server's side of the kubelet connection, and tests).
pub fn client_config(cert_pem: &str, key_pem: &str) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| format!("reading the key: {e}"))?;
    let cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer))
        .with_client_auth_cert(certs(cert_pem)?, key)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(cfg))
}

/// A client that accepts any server certificate: HTTPS probes, as the
/// kubelet's.
pub fn insecure_client_config() -> Arc<rustls::ClientConfig> {
    let cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer))
        .with_no_client_auth();
    Arc::new(cfg)
}

#[derive(Debug)]
struct AnyServer;

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            m,
            c,
            d,
            &provider().signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            m,
            c,
            d,
            &provider().signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The user (CommonName) and groups (Organizations) of a client
/// certificate.
pub fn identity(cert: &CertificateDer<'_>) -> Option<(String, Vec<String>)> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let subject = parsed.subject();
    let cn = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some((cn, groups))
}

/// Whether a client may use the kubelet API.
pub fn allowed(user: &str, groups: &[String]) -> bool {
    user == APISERVER_CLIENT || groups.iter().any(|g| g == MASTERS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_apiserver_and_masters_may_call() {
        assert!(allowed(APISERVER_CLIENT, &[]));
        assert!(allowed("admin", &[MASTERS.into()]));
        assert!(!allowed("system:node:x", &["system:nodes".into()]));
    }

    #[test]
    fn identities_come_from_the_subject() {
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:masters");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let (user, groups) = identity(cert.der()).unwrap();
        assert_eq!(user, "alice");
        assert_eq!(groups, ["system:masters"]);
        let dir = tempfile::tempdir().unwrap();
        let (c1, _) = serving_pair(dir.path(), "box").unwrap();
        let (c2, _) = serving_pair(dir.path(), "box").unwrap();
        assert_eq!(c1, c2, "kept across restarts");
    }
}
