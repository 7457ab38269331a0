//! The durable file backend (being written): the MVCC engine persisted to a
//! write-ahead log with snapshots.

use std::path::Path;

use crate::engine::{Engine, EngineConfig};

/// Constructors for the durable file backend.
pub struct FileStore;

impl FileStore {
    /// Opens (or creates) the store in `dir`, recovering every acknowledged write.
    pub fn open(dir: &Path) -> std::io::Result<Engine> {
        Self::open_with_config(dir, EngineConfig::default())
    }

    pub fn open_with_config(_dir: &Path, _config: EngineConfig) -> std::io::Result<Engine> {
        Err(std::io::Error::other("the file backend is not built yet"))
    }
}
