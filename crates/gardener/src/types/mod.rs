//! The core.gardener.cloud/v1beta1 kinds this crate works on, serialized
//! with upstream's field names so upstream YAML round-trips.

pub mod cloudprofile;
pub mod namespaced;
pub mod shoot;
pub mod time;

pub use cloudprofile::*;
pub use namespaced::*;
pub use shoot::*;
pub use time::Time;
