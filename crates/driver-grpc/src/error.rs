//! The crate's error: the steps of serving, connecting and configuring TLS
//! that can fail. Driver calls answer with [`driver::DriverError`] instead.

/// A failed step outside the driver calls.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a certificate, key or CA file.
    #[error("reading {path}: {source}")]
    ReadTlsFile {
        path: String,
        source: std::io::Error,
    },
    /// The TLS settings were refused by the transport.
    #[error("configuring TLS: {0}")]
    Tls(#[source] tonic::transport::Error),
    /// Serving the gRPC endpoint stopped with an error.
    #[error("serving the driver endpoint: {0}")]
    Serve(#[source] tonic::transport::Error),
    /// The endpoint is not a valid URI.
    #[error("invalid machine-controller-manager endpoint {endpoint:?}: {reason}")]
    Endpoint { endpoint: String, reason: String },
    /// The registration names nothing to serve.
    #[error("a provider must serve at least one MachineClass provider value")]
    NothingToServe,
}
