//! Cluster API core in Rust: the cluster.x-k8s.io/v1beta1 kinds (Cluster,
//! Machine, MachineSet, MachineDeployment, MachineHealthCheck), the
//! provider contracts the controllers read through, pure planners and the
//! kube-rs controllers that execute them.
//!
//! The split is seed 004's: a generic Machine controller that owns the
//! Machine (and is the only writer of its status), a bootstrap provider
//! that turns a server into a node (its config produces a data Secret) and
//! an infrastructure provider that is the server. This crate never knows a
//! provider's kinds: it reads whatever the references name, through the
//! API, as unstructured objects ([`contract`]), so any provider that speaks
//! the v1beta1 contract works (trellis's own are `capi-bootstrap` and
//! `capi-local`).
//!
//! - [`types`]: the kinds and their CRDs; [`types::labels`]: upstream's
//!   labels, annotations, finalizers and condition vocabulary.
//! - [`conditions`]: v1beta1 conditions (set with transition times, the
//!   `Ready` summary, mirroring a provider's `Ready`).
//! - [`phase`]: the Machine and Cluster phase as pure functions of fields.
//! - [`contract`]: what the controllers read from provider objects and how
//!   a reference's version is resolved from the CRD's contract label.
//! - [`clone`]: template → object cloning for MachineSets.
//! - [`machine`], [`machineset`], [`machinedeployment`], [`mhc`],
//!   [`cluster`]: each controller's decisions, pure and table-tested.
//! - [`webhooks`]: upstream's defaulting and validation webhooks as pure
//!   functions returning field causes.
//! - [`controllers`]: the thin executors over kube-rs; [`run`] wires them.

pub mod clone;
pub mod cluster;
pub mod conditions;
pub mod contract;
pub mod controllers;
pub mod machine;
pub mod machinedeployment;
pub mod machineset;
pub mod meta;
pub mod mhc;
pub mod phase;
pub mod run;
pub mod testing;
pub mod types;
pub mod webhooks;

pub use types::*;
