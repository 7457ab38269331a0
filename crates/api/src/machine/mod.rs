//! The machine API: types, CRDs, defaulting, validation and well-known keys.
//!
//! Serialization follows the Go types field by field, and decoding accepts
//! everything Go writes (`null` slices, zero times, `""` enum values).
//! Zero values that Go omits (`omitempty`) are omitted here too, so a status
//! written with a JSON merge patch cannot reset a field to zero: controllers
//! replace the status subresource or use server-side apply, as upstream's
//! `UpdateStatus` does. Where the output differs from Go's it only drops
//! what Go readers treat as absent (empty non-pointer structs such as
//! `class: {}`, a nil `providerSpec`), with one addition: `spec.replicas` is
//! always written, because the scale subresource refuses objects that lack
//! it.

mod crd;
mod defaults;
mod duration;
pub mod labels;
mod machine_class;
mod machine_deployment;
mod machine_set;
mod types;
mod validation;

pub use crd::{crds, crds_yaml};
pub use defaults::{DEFAULT_MAX_SURGE, DEFAULT_MAX_UNAVAILABLE, default_machine_deployment};
pub use duration::{DurationError, format_duration, parse_duration, parse_signed_duration};
pub use machine_class::{MachineClass, NodeTemplate};
pub use machine_deployment::*;
pub use machine_set::*;
pub use types::*;
pub use validation::{
    validate_machine, validate_machine_class, validate_machine_deployment, validate_machine_set,
};
