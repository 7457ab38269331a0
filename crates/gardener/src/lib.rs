//! Gardener's cloud profiles as a pure domain layer (issue 7).
//!
//! This crate holds the core.gardener.cloud/v1beta1 `CloudProfile`,
//! `NamespacedCloudProfile` and (a machine-management subset of) `Shoot`,
//! their CRDs, and every decision Gardener takes on them, each as a pure
//! function that the API server, admission and controllers call:
//!
//! * [`capabilities`]: defaulting, validation and matching of machine
//!   capabilities, and the choice of an image flavor (GEP-33 as built);
//! * [`lifecycle`] and [`version`]: version classifications and semver
//!   helpers, including kubelet version constraints;
//! * [`validation`]: static validation of a profile spec;
//! * [`shoot_admission`]: defaulting and validation of worker pools against
//!   the profile, and the rules for a Shoot's profile reference;
//! * [`cron`]: the five-field cron expressions of hibernation schedules,
//!   in a time zone;
//! * [`maintenance`]: the plan of automatic and forced version updates and
//!   the maintenance time window;
//! * [`render`]: merging an NCP into its parent (GEP-25 as built), also
//!   through chains of NCPs;
//! * [`ncp_admission`]: validation of NCPs, custom verbs and protection of
//!   parents that NCPs depend on;
//! * [`bench`]: synthetic large profiles and timings for a CLI.
//!
//! Architecture invariant: no I/O, no async, no dependency on the
//! `apiserver` or `store` crates. Callers look objects up and check RBAC;
//! functions here receive what they need and return decisions and field
//! causes ([`apimachinery::status::Cause`]).

pub mod bench;
pub mod capabilities;
pub mod crd;
pub mod cron;
pub mod lifecycle;
pub mod maintenance;
pub mod ncp_admission;
pub mod quantity;
pub mod render;
pub mod shoot_admission;
pub mod shoot_validation;
pub mod types;
pub mod validation;
pub mod version;

pub use crd::{crds, crds_yaml};
pub use types::*;

/// The API group of every kind in this crate.
pub const API_GROUP: &str = "core.gardener.cloud";
/// The version of the group.
pub const API_VERSION: &str = "v1beta1";
/// `apiVersion` as written in objects.
pub const GROUP_VERSION: &str = "core.gardener.cloud/v1beta1";

/// Behaviour beyond upstream Gardener, from GEP-25's outlook. Everything is
/// off by default so that trellis behaves like upstream unless an operator
/// opts in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extensions {
    /// An NCP may name another NCP of its namespace as parent
    /// (`spec.parent.kind: NamespacedCloudProfile`).
    pub multi_level_inheritance: bool,
    /// A Shoot may reference an NCP of another namespace
    /// (`spec.cloudProfile.namespace`) if its creator may `use` that NCP.
    pub cross_project_use: bool,
}

/// Errors of the operations that cannot be expressed as field causes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No image flavor is compatible with the machine type.
    #[error("no compatible flavor found: {0}")]
    NoCompatibleFlavor(String),
    /// More than one flavor remains after preference narrowing; the profile
    /// is ambiguous.
    #[error("could not determine a unique capability flavor: {0}")]
    AmbiguousFlavor(String),
    /// Maintenance cannot find a version to move an expired one to.
    #[error("maintenance of worker pool {pool:?} failed: {reason}")]
    MaintenanceFailed {
        /// The pool.
        pool: String,
        /// Why.
        reason: String,
    },
    /// A maintenance time window is not in `HHMMSS+ZZZZ` format.
    #[error("invalid maintenance time window: {0}")]
    InvalidTimeWindow(String),
    /// An NCP's parent chain loops or is too deep.
    #[error("invalid namespaced cloud profile parent chain: {0}")]
    ParentChainInvalid(String),
}
