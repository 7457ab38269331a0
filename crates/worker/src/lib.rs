//! The domain layer of the Gardener Worker actuator for `type: local`:
//! pure functions from a [`Worker`] (and the Shoot facts of its
//! [`Cluster`]) to the machine classes, class secrets and machine
//! deployments machine-controller-manager reconciles, following the Worker
//! extension contract and upstream's generic actuator.
//!
//! * [`types`]: `extensions.gardener.cloud/v1alpha1` Worker and Cluster,
//!   serialized like upstream, with CRDs ([`crds`], [`crds_yaml`]).
//! * [`naming`]: deployment and class names, the worker-pool hash.
//! * [`zones`]: spreading sizes and update bounds over zones.
//! * [`replicas`]: the replica rules around the cluster autoscaler and
//!   hibernation.
//! * [`image`]: the image resolver seam and the provider status.
//! * [`plan()`]: the desired state; [`cleanup_plan`] what to delete;
//!   [`status`]: status entries and the rollout health verdict.
//! * [`bootstrap`]: cloud-init user data with MCM's placeholders.
//! * [`labels`]: the contract's label and annotation keys.
//!
//! The crate does no I/O and has no async code; the controller that wires
//! it to the API lives elsewhere.

pub mod bootstrap;
pub mod cleanup;
mod crd;
pub mod error;
pub mod image;
pub mod labels;
pub mod naming;
pub mod plan;
pub mod replicas;
pub mod shoot;
pub mod status;
pub mod types;
pub mod zones;

pub use cleanup::{CleanupPlan, ExistingSecret, cleanup_plan, deletion_plan};
pub use crd::{crds, crds_yaml};
pub use error::Error;
pub use image::{ImageEntry, ImageRequest, ImageResolver, ImageTable, LocalWorkerStatus};
pub use plan::{
    ClassSecret, DesiredState, ExistingDeployment, PlanInput, UpdateBoundsDistribution,
    WantedDeployment, plan,
};
pub use shoot::{RotationTimes, ShootFacts};
pub use status::{HealthInput, HealthVerdict, ObservedMachineSet, health};
pub use types::*;

/// The API group of Worker and Cluster.
pub const API_GROUP: &str = "extensions.gardener.cloud";

/// The version of the group.
pub const API_VERSION: &str = "v1alpha1";

/// The Worker `spec.type` this crate serves.
pub const WORKER_TYPE_LOCAL: &str = "local";
