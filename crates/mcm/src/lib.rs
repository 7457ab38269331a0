//! machine-controller-manager in Rust: the machine, machine-class,
//! machine-set, machine-deployment and safety controllers.
//!
//! Every decision is a pure function of observed objects and the clock,
//! tested table-driven without I/O; thin executors apply the plans through the
//! Kubernetes API.
//!
//! - [`rollout`]: fenceposts, rolling-update and proportional scaling math.
//! - [`hash`]: machine-template hashes that name machine sets.
//! - [`deletion`]: the order in which a machine set deletes machines.
//! - [`health`]: node health verdicts and machine phase transitions.
//! - [`drain`]: the drain planner — which pods a drain evicts, in what
//!   order, when it is forced, and one level-triggered round of it.
//! - [`machine`]: the machine controller's decisions, one module per flow —
//!   class checks, bootstrap tokens, creation, health statuses, node
//!   template sync, the deletion state machine, hot updates.
//! - [`machineset`]: the machine set plan — what to create, which machines
//!   to delete and in what order, the status.
//! - [`machinedeployment`]: a deployment's whole pass — finalizer, the
//!   autoscaler's triggered deletions, the rollout plan, its status, and
//!   whether it has settled (so when to look again).
//! - [`machineclass`]: the class and secret controllers' decisions — class
//!   finalizers while machines use a class, secret finalizers while a
//!   class needs them.
//! - [`safety`]: the safety controller's decisions — orphan VMs and nodes,
//!   overshooting freezes, API-server outages.
//! - [`serving`]: whether a namespace is served, from the controllers'
//!   heartbeat Lease, and the warning when it is not.
//! - [`backoff`]: how long a failed reconcile waits before its retry
//!   (per-object exponential backoff and an overall token bucket).
//! - [`controllers`]: the executors — observe, call a planner, carry out
//!   its steps; each writes a status once per pass.
//! - [`run`]: the controllers wired to shared caches; [`leader`]: Lease
//!   leader election; [`metrics`]: Prometheus metrics and readiness.

pub mod backoff;
pub mod controllers;
pub mod deletion;
pub mod drain;
pub mod hash;
pub mod health;
pub mod leader;
pub mod machine;
pub mod machineclass;
pub mod machinedeployment;
pub mod machineset;
pub mod metrics;
pub mod rollout;
pub mod run;
pub mod safety;
pub mod serving;
pub mod time;
