//! The controllers: thin executors that observe through kube-rs caches,
//! call the pure planners, and apply the plans through the API.

pub mod cache;
pub mod context;
pub mod events;
pub mod heartbeat;
pub mod machine;
pub mod machineclass;
pub mod machinedeployment;
pub mod machineset;
pub mod safety;

pub use cache::{Cache, CacheWriter, IndexKey};
pub use context::{Config, Context, Error, ErrorRequeues, MachineDeps, forgetting, requeue_key};
