//! A kubelet whose containers are local processes, on a Node that stands
//! for this machine: the runtime of trellis's embedded seed (issue 12).
//!
//! Controllers never talk to it: they create Pods through the API, and the
//! kubelet, like a real one, schedules the unbound pods that fit its node,
//! runs the pods bound to it and reports their status back through the
//! API. On a real cluster it is simply not started.
//!
//! Decisions are pure and table-tested:
//!
//! * [`schedule`] — whether a pod fits the node;
//! * [`imagemap`] — which program an image stands for;
//! * [`env`] — a container's environment and `$(VAR)` expansion;
//! * [`plan`] — what to start and stop and the pod status, from [`view`];
//! * [`backoff`] — the crash-loop back-off;
//! * [`probe`] — when probes are due and what their results mean;
//! * [`ipam`] and [`hosts`] — pod addresses and the names pods resolve;
//! * [`crilog`] — the CRI log format;
//! * [`serviceaccount`] — pods' service account credentials.

pub mod backoff;
pub mod claims;
pub mod crilog;
pub mod env;
pub mod error;
pub mod exec;
pub mod hosts;
pub mod imagemap;
pub mod ipam;
pub mod kubelet;
pub mod launch;
pub mod node;
pub mod plan;
pub mod probe;
pub mod prober;
pub mod proxy;
pub mod runtime;
pub mod schedule;
pub mod scheduler;
pub mod server;
pub mod serviceaccount;
pub mod shim;
pub mod state;
pub mod tls;
pub mod view;
pub mod volumes;
pub mod ws;

pub use kubelet::{Config, run};
pub mod fetch;
pub mod names;
