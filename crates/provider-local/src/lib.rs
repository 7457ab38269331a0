//! The local machine provider: trellis's driver for MachineClasses whose
//! `provider` is `local`, where a VM is a simulated node ([`nodesim`]).
//!
//! * [`LocalProvider`] implements [`driver::Driver`] and passes the driver
//!   conformance kit. providerIDs are `local:///<zone-or-default>/<vm-id>`;
//!   the node name is the machine name.
//! * The VM inventory is a ConfigMap per VM in the control cluster
//!   ([`inventory`]), tagged with its provider instance, cluster, class and
//!   machine; a new [`LocalProvider`] re-registers the nodes of every VM it
//!   owns, so VMs survive a controller restart, and `ListMachines` returns
//!   only the VMs of the class's cluster.
//! * The `providerSpec` ([`spec`]) takes `bootDelay`, `zone`, `tags` and two
//!   runtime faults, `failCreate` and `callDelay`.
//! * Faults: every call consults [`LocalProvider::failpoints`] first (the
//!   conformance kit arms them); [`LocalProvider::vanish`] or the node
//!   annotation [`nodesim::faults::VANISH`] make a VM disappear.
//!
//! What it never does: touch Node objects itself (the simulator's kubelets
//! own their nodes; the machine controller deletes them), or keep state
//! that is not in the control cluster, except the counters of the
//! `failCreate` fault, which start over with a new instance.

mod error;
pub mod inventory;
mod node;
mod provider;
pub mod spec;

pub use error::{Error, code_for_status};
pub use node::node_spec;
pub use provider::{LocalProvider, PROVIDER_NAME, volume_ids};
