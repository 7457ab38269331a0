//! A Kubernetes-compatible API server over the revisioned [`store`].
//!
//! It serves built-in kinds and CustomResourceDefinitions with the REST and
//! watch semantics real clients (kubectl, kube-rs, client-go) rely on, and
//! runs the controllers an API server needs to be useful on its own: garbage
//! collection, namespace and CRD lifecycle, pod disruption budgets, event
//! expiry. See `ARCHITECTURE.md` for how the parts fit.

// ApiError carries a full metav1.Status; boxing it everywhere would only add
// noise to every handler.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod admission_server;
mod apply;
pub mod audit;
pub mod auth;
pub mod conn;
pub mod builtin;
mod columns;
pub mod crd;
pub mod defaults;
pub mod discovery;
mod events;
mod fieldmanager;
mod fieldvalidation;
pub mod gc;
pub mod handlers;
mod jsonpath;
mod list;
pub mod metrics;
mod namespace;
pub mod object;
pub mod openapi;
pub mod patchmeta;
pub mod pdb;
pub mod pki;
pub mod protobuf;
pub mod rbac;
mod rbac_bootstrap;
pub mod registry;
pub mod request;
pub mod server;
mod shape;
mod smp;
mod subresources;
pub mod table;
pub mod tls;
pub mod watch;
pub mod webhook;

pub use admission::{AdmissionPlugin, Attributes, Operation};
pub use auth::{AuthConfig, UserInfo};
pub use pki::Pki;
pub use server::{Config, Server};
pub use tls::TlsConfig;
