//! The executors: they observe through kube-rs, call the pure decisions
//! and carry them out.
//!
//! * [`cluster`]: the Cluster watch and the prober manager.
//! * [`prober`]: one shoot's probe loop and its shoot client.
//! * [`scaler`]: the scale flows.
//! * [`weeder`]: the EndpointSlice watch and the weeders' pod watches.

pub mod cluster;
pub mod prober;
pub mod scaler;
pub mod weeder;
