//! The in-memory backend: the MVCC engine with nothing persisted. For tests.

use crate::engine::{Engine, EngineConfig, NoPersistence, Recovered};

/// Constructors for the in-memory backend.
pub struct MemoryStore;

impl MemoryStore {
    /// A fresh, empty in-memory store.
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> Engine {
        Self::with_config(EngineConfig::default())
    }

    pub fn with_config(config: EngineConfig) -> Engine {
        Engine::start(Recovered::default(), Box::new(NoPersistence), config)
    }
}
