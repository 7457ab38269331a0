//! gardener-controller-manager in Rust: the CloudProfile controller, the
//! NamespacedCloudProfile controller, and the Shoot maintenance and
//! hibernation schedule controllers.
//!
//! Every decision is a pure function of observed objects and the clock,
//! tested table-driven without I/O; thin executors in [`controllers`] apply
//! them through kube-rs, so the controllers run unchanged against a real
//! kube-apiserver serving Gardener's CRDs. Rendering and maintenance plans
//! themselves come from the [`gardener`] domain crate.
//!
//! - [`schedule`]: maintenance windows in UTC, whether a shoot is due now,
//!   and when to look again.
//! - [`maintain`]: the profile a shoot uses, and what a maintenance run
//!   writes (a JSON patch of the changed leaves, `status.lastMaintenance`,
//!   events).
//! - [`cloudprofile`]: the classifications a CloudProfile's status shows,
//!   when they next change, and who holds a deleting profile.
//! - [`hibernation`]: whether a hibernation schedule's start or end has
//!   come, and when the next one is due.
//! - [`ncp`]: which NCPs a change concerns, the status an NCP should
//!   have, and the deletion verdict.
//! - [`backoff`]: how long a failed reconcile waits before its retry.
//! - [`run`]: the controllers wired together until shutdown.

pub mod backoff;
pub mod cloudprofile;
pub mod controllers;
pub mod hibernation;
pub mod maintain;
pub mod ncp;
pub mod run;
pub mod schedule;

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};

pub use controllers::Error;
pub use run::run;

/// Where the controllers read the time. Tests pin it; everything else uses
/// the system clock ([`Clock::default`]).
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>);

impl Clock {
    /// A clock that reads `f`.
    pub fn new(f: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(f))
    }

    /// The current time.
    pub fn now(&self) -> DateTime<Utc> {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new(Utc::now)
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Clock({})", self.now())
    }
}

/// Settings of both controllers.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Watch NamespacedCloudProfiles and Shoots of this namespace only;
    /// `None` watches all namespaces (upstream's behaviour). CloudProfiles
    /// are cluster-scoped and always watched whole; with cross-project use
    /// enabled, Shoots of every namespace are consulted before an NCP is
    /// released.
    pub namespace: Option<String>,
    /// Behaviour beyond upstream (multi-level inheritance, cross-project
    /// use), off by default.
    pub extensions: gardener::Extensions,
    /// The clock maintenance windows are judged by.
    pub clock: Clock,
}
