//! The machine driver contract over gRPC, for providers that live outside
//! the machine-controller-manager (seed 003 §2.2.2): a provider team ships
//! its driver as its own process, in any language, without building its
//! own controller binary.
//!
//! The direction of connection is the seed's: the machine-controller-manager
//! serves (default port [`DEFAULT_PORT`]) and providers connect to it.
//!
//! * The protocol is `proto/trellis/driver/v1/driver.proto`, compiled into
//!   [`pb`]. A provider opens `Register`, names the MachineClass `provider`
//!   values it serves, and receives the driver calls for them as operations
//!   on that stream. Operations carry the machine but only references to
//!   the class and its secret, which the provider fetches with
//!   `GetMachineClass` and `GetSecret` and caches by resourceVersion.
//! * [`Router`] is the machine-controller-manager's side: a
//!   [`driver::Driver`] that sends each call to the provider registered for
//!   the class's `provider` (or to a driver linked in-process), so the
//!   controllers take it exactly as they take the local driver. A class
//!   whose provider is not registered answers `Unavailable`, which the
//!   controllers retry after the short period: the machine waits, with the
//!   reason in its `lastOperation`, until a provider registers or the
//!   creation timeout fails it. [`serve`] puts a router on a listener.
//! * [`provider::serve`] is the provider SDK: given any [`driver::Driver`],
//!   it connects, registers, runs each operation against the driver and
//!   answers, and reconnects whenever the connection drops.
//! * [`wire`] holds the pure conversions between the driver's types and
//!   the protocol's messages, [`objects`] the router's table of the classes
//!   and secrets it has sent, and [`cache`] the provider's cache of them.
//!
//! Retry semantics are unchanged from in-process: codes travel as numbers
//! (gRPC's, plus 17 for `Uninitialized`) and arrive as the same
//! [`driver::Code`]. What the transport adds maps onto codes the controller
//! already retries soon: no provider registered, or a provider that went
//! away mid-call, is `Unavailable`; a provider that does not answer within
//! the call timeout is `DeadlineExceeded`. Either way the controller calls
//! again, which the contract's idempotency (create returns the existing VM,
//! delete of a missing VM is `Ok`) makes safe: nothing is created twice.

pub mod cache;
mod error;
pub mod objects;
pub mod provider;
mod router;
mod service;
pub mod tls;
pub mod wire;

/// The generated protocol: messages, the `MachineDriver` client and server.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("trellis.driver.v1");
}

pub use error::Error;
pub use router::{ProviderInfo, Router, RouterConfig, Stats};
pub use service::{SESSION_HEADER, serve};

/// The port the seed names for the machine-controller-manager's gRPC
/// service.
pub const DEFAULT_PORT: u16 = 5000;

/// The protocol file, for generating stubs in other languages.
pub const PROTO: &str = include_str!("../proto/trellis/driver/v1/driver.proto");
