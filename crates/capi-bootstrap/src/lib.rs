//! trellis's Cluster API bootstrap provider ("trellis"): a `TrellisConfig`
//! (bootstrap.cluster.x-k8s.io/v1beta1) turns one server into a node of its
//! Cluster; `TrellisConfigTemplate` is what MachineSets clone per Machine.
//!
//! For a config owned by a Machine whose Cluster's infrastructure is ready
//! it creates a bootstrap token in the workload cluster (`kube-system`,
//! `bootstrap-token-<id>`, kubeadm's format), renders the node's cloud-init
//! ([`data`]: a bootstrap kubeconfig with that token for the Cluster's
//! `controlPlaneEndpoint`, the node agent configuration naming the
//! Machine's Kubernetes version, and the kubelet command line with the
//! config's node labels and taints plus Cluster API's
//! `node.cluster.x-k8s.io/uninitialized` taint), writes it to the Secret
//! named like the config (key `value`, `format: cloud-config`, type
//! `cluster.x-k8s.io/secret`), and sets `status.dataSecretName` and
//! `status.ready`. The Machine controller copies the name into the
//! Machine's `spec.bootstrap.dataSecretName`; the infrastructure provider
//! boots the server with it. See `crates/capi/CONTRACTS.md`.
//!
//! It only talks through the API: it reads Machines and Clusters, writes
//! its own configs' status, their data Secrets and bootstrap tokens.

pub mod controller;
pub mod data;
pub mod types;

pub use controller::{Config, run};
pub use types::{
    TrellisConfig, TrellisConfigSpec, TrellisConfigStatus, TrellisConfigTemplate, crds, crds_yaml,
};
