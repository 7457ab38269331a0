//! Simulated kubelets: the "VMs" of trellis's local provider, in the spirit
//! of kwok.
//!
//! A [`NodeSimulator`] serves one target cluster through the Kubernetes API
//! (kube-rs), so it works against the embedded API server and a real one
//! alike. For each registered [`NodeSpec`] it
//!
//! * creates the Node (providerID, labels, taints, capacity, allocatable,
//!   addresses, `nodeInfo`) or adopts an existing one,
//! * reports `Ready=False` while the VM boots and `Ready=True` afterwards,
//!   with `MemoryPressure`, `DiskPressure` and `PIDPressure` `False`,
//!   posting the status only on change and on a slow heartbeat,
//! * renews its Lease in `kube-node-lease` (every 10 s by default),
//! * runs the pods bound to it (`Pending` → `Running`), crash-loops and
//!   restarts them on demand, finishes their deletion, and reports the
//!   volumes of their claims in `volumesAttached`/`volumesInUse`,
//! * obeys the fault annotations documented in [`faults`].
//!
//! Modules:
//!
//! * [`status`] and [`pods`] — the decisions, pure and table-tested;
//! * [`objects`] — the API objects built from them;
//! * [`faults`] — the fault annotation keys;
//! * `sim` — the executor ([`NodeSimulator`]): state, one ticker for all
//!   nodes, and the node and pod watchers.

mod config;
mod error;
pub mod faults;
pub mod objects;
pub mod pods;
mod sim;
mod spec;
pub mod status;

pub use config::SimConfig;
pub use error::Error;
pub use sim::{NodeSimulator, SimStats};
pub use spec::NodeSpec;
