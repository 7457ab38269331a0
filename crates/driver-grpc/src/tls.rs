//! TLS for the driver endpoint, from PEM files: the machine-controller-
//! manager's serving certificate (and, to require client certificates, the
//! CA that signs providers'), and a provider's trust in the MCM's CA (and,
//! when required, its own certificate).
//!
//! TLS is optional because the default endpoint is loopback. Anything that
//! listens beyond it should use TLS with client certificates: a registered
//! provider is handed the credentials in its classes' secrets.

use std::path::Path;

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

use crate::Error;

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::ReadTlsFile {
        path: path.display().to_string(),
        source,
    })
}

/// The machine-controller-manager's TLS settings.
#[derive(Clone, Debug)]
pub struct ServerTls {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    client_ca_pem: Option<Vec<u8>>,
}

impl ServerTls {
    /// From PEM contents; with `client_ca_pem`, providers must present a
    /// certificate it signed.
    pub fn new(cert_pem: Vec<u8>, key_pem: Vec<u8>, client_ca_pem: Option<Vec<u8>>) -> ServerTls {
        ServerTls {
            cert_pem,
            key_pem,
            client_ca_pem,
        }
    }

    /// From PEM files.
    pub fn from_files(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<ServerTls, Error> {
        Ok(ServerTls::new(
            read(cert)?,
            read(key)?,
            client_ca.map(read).transpose()?,
        ))
    }

    pub(crate) fn config(&self) -> ServerTlsConfig {
        let config =
            ServerTlsConfig::new().identity(Identity::from_pem(&self.cert_pem, &self.key_pem));
        match &self.client_ca_pem {
            Some(ca) => config.client_ca_root(Certificate::from_pem(ca)),
            None => config,
        }
    }
}

/// A provider's TLS settings.
#[derive(Clone, Debug)]
pub struct ClientTls {
    ca_pem: Vec<u8>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    domain: Option<String>,
}

impl ClientTls {
    /// Trusts `ca_pem` for the MCM's certificate.
    pub fn new(ca_pem: Vec<u8>) -> ClientTls {
        ClientTls {
            ca_pem,
            identity: None,
            domain: None,
        }
    }

    /// From a CA file.
    pub fn from_file(ca: &Path) -> Result<ClientTls, Error> {
        Ok(ClientTls::new(read(ca)?))
    }

    /// Presents this certificate (for an MCM that requires client
    /// certificates).
    pub fn with_identity(mut self, cert_pem: Vec<u8>, key_pem: Vec<u8>) -> ClientTls {
        self.identity = Some((cert_pem, key_pem));
        self
    }

    /// [`ClientTls::with_identity`] from files.
    pub fn with_identity_files(self, cert: &Path, key: &Path) -> Result<ClientTls, Error> {
        Ok(self.with_identity(read(cert)?, read(key)?))
    }

    /// Checks the MCM's certificate for this name instead of the endpoint's
    /// host.
    pub fn with_domain(mut self, domain: impl Into<String>) -> ClientTls {
        self.domain = Some(domain.into());
        self
    }

    pub(crate) fn config(&self) -> ClientTlsConfig {
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.ca_pem));
        if let Some((cert, key)) = &self.identity {
            config = config.identity(Identity::from_pem(cert, key));
        }
        if let Some(d) = &self.domain {
            config = config.domain_name(d.clone());
        }
        config
    }
}
