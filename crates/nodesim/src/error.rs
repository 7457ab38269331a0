//! The simulator's error type: one variant per kubelet step that can fail.
//! Errors are logged and retried by the executor; they never reach callers
//! of [`crate::NodeSimulator`], whose methods only change in-memory state.

/// A failed step of a simulated kubelet.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating or adopting the Node object failed.
    #[error("registering node {node}: {source}")]
    Register {
        /// Node name.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// Patching the node status failed.
    #[error("posting status of node {node}: {source}")]
    PostStatus {
        /// Node name.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// Renewing or creating the node lease failed.
    #[error("renewing lease of node {node}: {source}")]
    RenewLease {
        /// Node name.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// Writing a pod's status, finishing its deletion, or looking up its
    /// volumes failed.
    #[error("pod {pod}: {source}")]
    Pod {
        /// `namespace/name`.
        pod: String,
        /// The API error.
        source: kube::Error,
    },
    /// A pod's claim does not exist or is not bound to a volume yet; the
    /// pod waits.
    #[error("pod {pod}: claim {claim} is missing or not bound")]
    ClaimUnbound {
        /// `namespace/name`.
        pod: String,
        /// The claim's name.
        claim: String,
    },
}
