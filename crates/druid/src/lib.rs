//! etcd-druid (spec `druid.md`): the `druid.gardener.cloud/v1alpha1` types
//! and CRDs, the admission rules upstream writes as CEL, the pure planners
//! of the etcd controller (the managed components, member status from
//! leases, conditions, the reconcile gates), of compaction and of
//! EtcdCopyBackupsTask, and the controllers that carry them out over
//! kube-rs (so they run unchanged against a real cluster).

pub mod types;

pub use types::*;
pub mod compaction;
pub mod components;
pub mod condition;
pub mod controllers;
pub mod crd;
pub mod duration;
pub mod gate;
pub mod jobs;
pub mod member;
pub mod secrets;
pub mod status;
pub mod sync;
pub mod time;
pub mod tls;
pub mod validation;
