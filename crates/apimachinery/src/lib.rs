//! Pure Kubernetes object semantics, with no I/O: `metav1.Status` errors with
//! field causes, label and field selectors, merge and JSON patches, and
//! structural-schema validation, defaulting and pruning for CRDs, and the
//! Go-JSON compatibility helpers the typed resources of `api`, `gardener`
//! and `worker` share.
//!
//! The API server uses all of it; controllers may use the selectors.

pub mod gojson;
pub mod patch;
pub mod schema;
pub mod selector;
pub mod status;

pub use status::{ApiError, Cause};
