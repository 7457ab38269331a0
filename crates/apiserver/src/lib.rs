//! A Kubernetes-compatible API server over the revisioned [`store`].
//!
//! It serves built-in kinds and CustomResourceDefinitions with the REST and
//! watch semantics real clients (kubectl, kube-rs, client-go) rely on, and
//! runs the controllers an API server needs to be useful on its own: garbage
//! collection, namespace and CRD lifecycle, pod disruption budgets, event
//! expiry.
//!
//! The modules are layers, and dependencies run one way (checked by
//! `tests/layers.rs`; see `ARCHITECTURE.md`, "Inside the API server"):
//!
//! ```text
//! server ─► http, auth, controllers ─► admission ─► strategy ─► storage ─► store
//! ```
//!
//! with [`object`] (pure metadata rules) and [`error`] below them all.

// ApiError carries a full metav1.Status; boxing it everywhere would only add
// noise to every handler.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod auth;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod controllers;
pub mod error;
pub mod http;
pub mod object;
pub mod server;
pub mod storage;
pub mod strategy;

pub use admission::{AdmissionPlugin, Attributes, Operation};
pub use auth::{AuthConfig, UserInfo};
pub use error::Error;
pub use http::pki::Pki;
pub use http::tls::TlsConfig;
pub use http::{admission_server, conn};
pub use server::{Config, DEFAULT_SERVICE_CLUSTER_IP_RANGE, Server};
pub use storage::registry;

/// Installing CRDs at start, for embedding crates.
pub mod crd {
    pub use crate::server::install_crd as install;
}
