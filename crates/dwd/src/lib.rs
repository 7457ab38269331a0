//! dependency-watchdog (seed 003 §1, `shared/spec/dwd.md`): the other half
//! of the machine-controller-manager's meltdown protection.
//!
//! * The **prober** runs one probe loop per shoot control namespace (one
//!   per `Cluster`). Each probe asks the shoot's API server for `/version`
//!   and, if it answers, counts the expired node leases of the nodes MCM
//!   manages. When too many have expired, the seed has lost the nodes, not
//!   the nodes their health: the prober scales the dependants (MCM, KCM,
//!   cluster-autoscaler) down, level by level, with the
//!   `dependency-watchdog.gardener.cloud/*` annotations, and back up once
//!   the leases are renewed again.
//! * The **weeder** watches EndpointSlices of configured services; when one
//!   turns ready it watches the dependant pods for `watchDuration` and
//!   deletes those stuck in `CrashLoopBackOff`, so they restart at once
//!   instead of after the kubelet's back-off.
//!
//! Decisions are pure and table-tested, at the crate root:
//! [`config`] (the upstream config files, defaults and validation),
//! [`lifecycle`] (which Cluster events matter and whether a prober starts,
//! stops or restarts), [`lease`] (candidate nodes, expired leases, the
//! verdict), [`probe`] (throttling back-off and the probe cadence),
//! [`scale`] (level-ordered flows and each resource's scale step) and
//! [`weeder`] (slice readiness, which events start a weeder, which pods
//! go). [`controllers`] carries them out through kube-rs only; [`metrics`]
//! holds the Prometheus metrics (upstream has none); [`ratelimit`] is the
//! client-side QPS/burst limit of `--kube-api-qps`/`--kube-api-burst`;
//! [`run`] wires each half for a binary.

pub mod config;
pub mod controllers;
pub mod lease;
pub mod lifecycle;
pub mod metrics;
pub mod probe;
pub mod ratelimit;
pub mod run;
pub mod scale;
pub mod weeder;

pub use config::{ConfigError, ProberConfig, WeederConfig};
pub use metrics::Metrics;

/// Errors of the controllers, named after the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {what} failed: {source}")]
    Read {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing {what} failed: {source}")]
    Write {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{what} timed out after {after:?}")]
    Timeout {
        what: String,
        after: std::time::Duration,
    },
    #[error("the kubeconfig secret {name} has no key {key:?}")]
    KubeconfigMissing { name: String, key: &'static str },
    #[error("the kubeconfig in secret {name} is unusable: {reason}")]
    KubeconfigInvalid { name: String, reason: String },
    #[error("{0}")]
    Scale(#[from] scale::ScaleError),
    #[error("the watch of {what} ended: {reason}")]
    WatchEnded { what: &'static str, reason: String },
}

impl Error {
    /// Whether the API answered 429 TooManyRequests: the prober then backs
    /// off before its next probe (spec §1.6).
    pub fn is_throttled(&self) -> bool {
        match self {
            Error::Read { source, .. } | Error::Write { source, .. } => {
                matches!(source, kube::Error::Api(s) if s.code == 429)
            }
            _ => false,
        }
    }

    /// Whether the object read was not there.
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::Read { source, .. } | Error::Write { source, .. } => {
                matches!(source, kube::Error::Api(s) if s.code == 404)
            }
            _ => false,
        }
    }
}
