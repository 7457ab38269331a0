//! The machine driver contract: the boundary between the machine controller
//! and whatever actually runs VMs (a cloud API, or trellis's simulated
//! nodes).
//!
//! * [`Driver`] — the async trait a provider implements, one method per
//!   upstream driver call, and its request and response types
//!   ([`CreateMachineRequest`], [`CreateMachineResponse`], ...).
//! * [`Code`] and [`DriverError`] — the machine error codes (gRPC's 0–16
//!   plus `Uninitialized` = 17) every call answers with.
//! * [`Code::outcome`] — what the controller does after each code at each
//!   [`Step`] of its flows, and after how long it retries ([`Retry`]);
//!   [`Code::auto_retry`] — the driver documentation's per-call table.
//! * [`FaultInjector`] and [`Failpoints`] — failing a driver's next calls on
//!   purpose, for tests.
//! * [`conformance`] — the checks every driver must pass, run with
//!   [`driver_conformance_tests!`].
//!
//! The crate does no I/O of its own and knows no provider.

mod codes;
pub mod conformance;
mod driver;
mod faults;
mod messages;
mod retry;

pub use codes::{Code, DriverError, ParseError};
pub use driver::{Call, Driver};
pub use faults::{Failpoints, FaultInjector};
pub use messages::*;
pub use retry::{
    DEFAULT_RESOURCE_EXHAUSTED_RETRY, LONG_RETRY, MEDIUM_RETRY, Outcome, Retry, SHORT_RETRY, Step,
};
