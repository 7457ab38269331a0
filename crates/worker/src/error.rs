//! The crate's one error type. Variants are named after the step that
//! failed; every input problem is an error value, never a panic.

/// Why a plan, hash or distribution could not be computed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A pool lists no zones, so there is nothing to place machines in.
    #[error("worker pool {pool:?} has no zones")]
    NoZones {
        /// The pool.
        pool: String,
    },
    /// Neither the pool nor the control plane names a Kubernetes version.
    #[error("no kubernetes version for worker pool {pool:?}")]
    MissingKubernetesVersion {
        /// The pool.
        pool: String,
    },
    /// The Kubernetes version is not `major.minor[.patch]`.
    #[error("kubernetes version {version:?} of worker pool {pool:?} is not major.minor[.patch]")]
    InvalidKubernetesVersion {
        /// The pool.
        pool: String,
        /// The version as given.
        version: String,
    },
    /// A string maxSurge/maxUnavailable is not a percentage.
    #[error("{value:?} is not a percentage like \"25%\"")]
    InvalidPercent {
        /// The value as given.
        value: String,
    },
    /// The image is in neither the cloud profile nor the Worker status.
    #[error(
        "could not find machine image for {name}/{version}/{architecture} neither in cloud profile nor in worker status"
    )]
    ImageNotFound {
        /// Image name.
        name: String,
        /// Image version.
        version: String,
        /// Architecture asked for.
        architecture: String,
    },
    /// The cloud profile knows the image but could not pick one entry
    /// (no compatible or no unique capability flavor).
    #[error("machine image of worker pool {pool:?}: {message}")]
    ImageResolutionFailed {
        /// The pool.
        pool: String,
        /// The resolver's reason.
        message: String,
    },
    /// No user data was supplied for the pool (neither fetched from
    /// `userDataSecretRef` nor inline).
    #[error("no user data for worker pool {pool:?}")]
    MissingUserData {
        /// The pool.
        pool: String,
    },
    /// The Worker's `status.providerStatus` does not decode.
    #[error("worker status.providerStatus: {0}")]
    InvalidProviderStatus(String),
}
