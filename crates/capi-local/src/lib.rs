//! trellis's Cluster API infrastructure provider ("local"): a
//! `LocalMachine` (infrastructure.cluster.x-k8s.io/v1beta1) is a server of
//! the local machine provider, i.e. a simulated VM whose kubelet registers
//! a Node; a `LocalCluster` is the cluster's infrastructure (its API
//! endpoint); MachineSets clone `LocalMachineTemplate`s.
//!
//! A LocalMachine owned by a Machine waits for its Cluster's
//! infrastructure and for the Machine's `spec.bootstrap.dataSecretName`,
//! then boots the VM with that data ([`boot`]: the kubelet joins with the
//! data's bootstrap token, which must be valid in the workload cluster,
//! registers under the data's host name with the data's labels and
//! taints, and runs the Kubernetes version the data's node agent
//! configuration names), through the `driver::Driver` contract of
//! `provider-local`, so its servers are the same simulated nodes MCM's
//! machines get. It then sets `spec.providerID`, `status.addresses` and
//! `status.ready`. See `crates/capi/CONTRACTS.md`.
//!
//! It only talks through the API (and to its VMs through the driver).

pub mod boot;
pub mod controller;
pub mod types;

pub use controller::{Config, run};
pub use types::{LocalCluster, LocalMachine, LocalMachineTemplate, crds, crds_yaml};
