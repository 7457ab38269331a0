//! The kubelet's errors, named after the step that failed.

/// Why a step of the kubelet failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("registering node {node}: {source}")]
    RegisterFailed {
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("renewing the lease of node {node}: {source}")]
    LeaseFailed {
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("binding pod {pod} to node {node}: {source}")]
    BindFailed {
        pod: String,
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading {what} for pod {pod}: {source}")]
    ReadFailed {
        what: String,
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("posting the status of pod {pod}: {source}")]
    StatusFailed {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("the kubelet's HTTPS endpoint: {0}")]
    ServerFailed(String),
    #[error("state directory {path}: {source}")]
    StateFailed {
        path: String,
        #[source]
        source: std::io::Error,
    },
}
