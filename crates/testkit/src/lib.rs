//! What the tests of several trellis crates share, so that each crate's
//! `tests/common` holds only what is its own.
//!
//! * [`cluster`] and [`bare_cluster`]: an embedded API server with CRDs and
//!   a client of it (over [`apiserver::cluster`]), logging to the test's
//!   output; [`kubeconfig`]: a client configuration from a kubeconfig
//!   document, as users build theirs.
//! * [`eventually`]: poll until a condition holds or a timeout fails the
//!   test ([`eventually_or`]: reporting what it saw first;
//!   [`eventually_blocking`]: for tests without an async runtime).
//! * [`sim`]: the simulated kubelets' timing at test scale.
//! * [`objects`]: namespaces and objects created from JSON.
//! * [`disk`]: a really full disk (a small tmpfs).
//!
//! Only ever a dev-dependency: nothing here is fit for production (it
//! panics on failure, which is what a test wants). Everything that talks
//! to a cluster sits behind the default `cluster` feature, so that the
//! store's tests, below the API server, can use the rest alone.

pub mod disk;
#[cfg(feature = "cluster")]
mod embedded;
#[cfg(feature = "cluster")]
pub mod objects;
mod poll;
#[cfg(feature = "cluster")]
pub mod sim;

#[cfg(feature = "cluster")]
pub use embedded::{Cluster, bare_cluster, cluster, init_tracing, kubeconfig};
#[cfg(feature = "cluster")]
pub use objects::{create, namespace};
pub use poll::{Outcome, eventually, eventually_blocking, eventually_or};
