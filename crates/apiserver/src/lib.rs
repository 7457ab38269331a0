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
mod apply;
pub mod builtin;
pub mod crd;
pub mod discovery;
mod events;
pub mod gc;
pub mod handlers;
mod list;
mod namespace;
pub mod object;
pub mod pdb;
pub mod registry;
pub mod request;
pub mod server;
mod smp;
mod subresources;
pub mod watch;

pub use admission::{AdmissionPlugin, Attributes, Operation};
pub use server::{Config, Server};
