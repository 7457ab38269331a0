//! What kube-controller-manager does for workloads, so the seed runs real
//! Deployments, StatefulSets, Jobs and Services without one: the
//! Deployment, ReplicaSet, StatefulSet, Job, CronJob, TTL-after-finished
//! and EndpointSlice controllers, with upstream's semantics and status
//! fields.
//!
//! Every decision is a pure function of the observed objects and the clock
//! (`plan(observed, now) -> Plan`), table-tested without I/O; thin
//! executors in [`controllers`] apply the plans through kube-rs and talk to
//! nothing but the API, so they run unchanged against a real cluster.
//!
//! - [`meta`]: selectors, controller references and the adopt/release rules.
//! - [`expectations`]: writes not yet visible in the caches.
//! - [`pods`]: readiness, availability and the order pods are given up in.
//! - [`hash`]: pod-template and revision hashes.
//! - [`replicaset`]: the ReplicaSet decision.
//! - [`deployment`]: the Deployment decision.
//! - [`statefulset`]: the StatefulSet decision.
//! - [`job`]: the Job decision, with the time to live after finishing.
//! - [`cronjob`]: the CronJob decision.
//! - [`endpointslice`]: a Service's EndpointSlices; [`endpoints`]: its
//!   core/v1 Endpoints.
//! - [`run`]: the shared caches and the controllers, run until shutdown.

pub mod controllers;
pub mod cronjob;
pub mod deployment;
pub mod endpoints;
pub mod endpointslice;
pub mod expectations;
pub mod hash;
pub mod job;
pub mod meta;
pub mod names;
pub mod pods;
pub mod replicaset;
pub mod run;
pub mod statefulset;

pub use controllers::Config;
pub use run::run;
