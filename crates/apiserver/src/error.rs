//! The crate's error: why starting the server (or one of its parts that
//! other crates call: the PKI, the token file, TLS settings, installing
//! CRDs) failed, one variant per step. Request errors are
//! [`apimachinery::ApiError`]s, not this.
//!
//! Messages name the step; the underlying error is the `source`, so
//! printing the chain (`{:#}` through anyhow in the binaries) reads
//! "reading /dir/ca.key: Permission denied".

use std::path::PathBuf;

/// A lower layer's error whose type differs from step to step (rustls, PEM
/// parsing).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    // Configuration.
    #[error("--service-cluster-ip-range: {0}")]
    ServiceRange(String),
    #[error("the kubelet client certificate: {0}")]
    KubeletClient(String),

    // Files.
    #[error("creating {}", path.display())]
    DirectoryCreateFailed {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading {}", path.display())]
    FileReadFailed {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing {}", path.display())]
    FileWriteFailed {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("syncing {}", path.display())]
    DirectorySyncFailed {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading the mode of {}", path.display())]
    ModeReadFailed {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("setting the mode of {}", path.display())]
    ModeSetFailed {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("opening the audit log {}", path.display())]
    AuditLogOpenFailed {
        path: PathBuf,
        source: std::io::Error,
    },

    // The PKI.
    #[error("generating {file}")]
    KeyGenerationFailed { file: String, source: rcgen::Error },
    #[error("reading {file}")]
    KeyReadFailed { file: String, source: rcgen::Error },
    #[error("--tls-san {san:?} is neither a DNS name nor an IP address")]
    SanInvalid { san: String },
    #[error("a --tls-san value is neither a DNS name nor an IP address")]
    SanRejected { source: rcgen::Error },
    #[error("signing {what}")]
    CertificateSigningFailed {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("a generated client certificate carries at most one group")]
    TooManyGroups,

    // TLS settings.
    #[error("{step}")]
    TlsSetupFailed {
        step: &'static str,
        source: BoxError,
    },
    #[error("no serving certificate in the PEM")]
    ServingCertificateMissing,

    // Authentication.
    #[error("in {}", path.display())]
    TokenFileInvalid { path: PathBuf, source: Box<Error> },
    #[error("line {line}: {why}")]
    TokenLineInvalid { line: usize, why: String },
    #[error("{0}")]
    SigningKeyInvalid(String),
    #[error("at least one API audience is needed")]
    AudiencesMissing,

    // The store and what the server keeps in it.
    #[error("reading {what} from the store")]
    StoreReadFailed {
        what: String,
        source: store::StoreError,
    },
    #[error("writing {key} to the store")]
    StoreWriteFailed {
        key: String,
        source: store::StoreError,
    },
    #[error("{key} in the store is not a JSON object")]
    StoredObjectInvalid {
        key: String,
        source: serde_json::Error,
    },
    #[error("store watch ended")]
    WatchEnded,
    #[error("a CRD manifest without a name")]
    CrdUnnamed,
    #[error("CRD {name} is invalid: {causes}")]
    CrdInvalid { name: String, causes: String },
    #[error("CRD {name} kept changing while being installed")]
    CrdInstallRaced { name: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its sources in one line (`step: cause: cause`), for logs.
pub fn report(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_step_and_keep_the_cause_as_source() {
        let e = Error::FileReadFailed {
            path: "/pki/ca.key".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert_eq!(e.to_string(), "reading /pki/ca.key");
        let source = std::error::Error::source(&e).expect("a source");
        assert_eq!(source.to_string(), "permission denied");
        let line = Error::TokenFileInvalid {
            path: "/t.csv".into(),
            source: Box::new(Error::TokenLineInvalid {
                line: 3,
                why: "duplicate token".into(),
            }),
        };
        assert_eq!(line.to_string(), "in /t.csv");
        assert_eq!(report(&line), "in /t.csv: line 3: duplicate token");
        assert_eq!(
            std::error::Error::source(&line).unwrap().to_string(),
            "line 3: duplicate token"
        );
    }
}
