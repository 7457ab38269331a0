//! The `machine.sapcloud.io/v1alpha1` API of machine-controller-manager, in Rust.
//!
//! This crate holds the four custom resources MCM reconciles — [`MachineClass`],
//! [`Machine`], [`MachineSet`] and [`MachineDeployment`] — serialized exactly as
//! upstream writes them, so YAML produced by a Go MCM reads back unchanged and
//! the other way round. Next to the types it offers:
//!
//! * the CRD manifests generated from the types ([`crds`], [`crds_yaml`]),
//! * defaulting and validation as pure functions that return Kubernetes field
//!   causes ([`default_machine_deployment`], [`validate_machine`], ...), so the
//!   API server can reject bad objects at admission instead of controllers
//!   skipping them silently as upstream does,
//! * the well-known labels, annotations, taints and finalizers ([`labels`]),
//! * Go-style duration parsing for the `*Timeout` fields ([`parse_duration`]),
//! * small builders for test fixtures ([`testing`]).
//!
//! The crate does no I/O.

pub mod machine;
pub mod testing;

pub use machine::*;

/// The API group of every type in this crate.
pub const API_GROUP: &str = "machine.sapcloud.io";

/// The only version of the group MCM serves.
pub const API_VERSION: &str = "v1alpha1";

/// `apiVersion` as written in objects: group and version joined by a slash.
pub const GROUP_VERSION: &str = "machine.sapcloud.io/v1alpha1";
