//! The crate's one error type. Variants are named after the step that
//! failed; [`Error::is_configuration`] tells the errors a retry will not fix
//! until someone changes an object from those that are the API's.

/// Why a reconcile of a Worker failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Cluster named like the Worker's namespace does not exist.
    #[error("cluster {0:?} not found")]
    ClusterMissing(String),
    /// The Cluster's embedded cloud profile does not decode.
    #[error("cloud profile of the cluster is invalid: {0}")]
    CloudProfileInvalid(String),
    /// The profile's `providerConfig` is not a local `CloudProfileConfig`.
    #[error("cloud profile providerConfig is invalid: {0}")]
    CloudProfileConfigInvalid(String),
    /// A pool's `userDataSecretRef` names a secret or key that is missing.
    #[error("user data of worker pool {pool:?}: secret {secret:?} has no key {key:?}")]
    UserDataMissing {
        /// The pool.
        pool: String,
        /// The secret.
        secret: String,
        /// The key.
        key: String,
    },
    /// The domain layer could not plan the Worker.
    #[error("planning the worker failed: {0}")]
    PlanFailed(#[from] worker::Error),
    /// Reading objects from the API failed.
    #[error("reading {what} failed: {source}")]
    ReadFailed {
        /// What was read.
        what: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Creating or updating an object failed.
    #[error("applying {what} failed: {source}")]
    ApplyFailed {
        /// What was applied.
        what: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Deleting an object failed.
    #[error("deleting {what} failed: {source}")]
    DeleteFailed {
        /// What was deleted.
        what: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Adding or removing the Worker's finalizer failed.
    #[error("updating the finalizer of worker {worker} failed: {source}")]
    FinalizerFailed {
        /// The Worker.
        worker: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Writing the Worker's status failed.
    #[error("writing the status of worker {worker} failed: {source}")]
    StatusWriteFailed {
        /// The Worker.
        worker: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
}

impl Error {
    /// Whether the error comes from the objects' content rather than from
    /// talking to the API; such errors are reported in the Worker's
    /// `lastError`.
    pub fn is_configuration(&self) -> bool {
        matches!(
            self,
            Error::ClusterMissing(_)
                | Error::CloudProfileInvalid(_)
                | Error::CloudProfileConfigInvalid(_)
                | Error::UserDataMissing { .. }
                | Error::PlanFailed(_)
        )
    }
}
