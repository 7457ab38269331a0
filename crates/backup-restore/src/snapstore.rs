//! Where snapshots are kept: the [`SnapStore`] contract and upstream's
//! `Local` provider, a directory (`br:pkg/snapstore/local_snapstore.go`).
//!
//! Objects live under `<container>/<prefix>/v2/` with upstream's names
//! ([`crate::snapshot`]), so S3-compatible and other object stores can
//! follow as further implementations of the same trait. A relative
//! container is taken from `$HOME` (`/home/nonroot` when unset): druid
//! mounts the Local bucket at `/home/nonroot/<container>`, the home of the
//! image's user.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use crate::snapshot::Snapshot;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("snapshot store provider {0:?} is not supported here (only Local)")]
    Unsupported(String),
    #[error("snapshot store {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A place snapshots are saved to and fetched from.
#[async_trait]
pub trait SnapStore: Send + Sync {
    /// Where it is, for logs.
    fn describe(&self) -> String;
    /// Every snapshot object, oldest first; objects of other tools are
    /// left out.
    async fn list(&self) -> Result<Vec<Snapshot>, StoreError>;
    /// Stores the file `from` as `snap`, atomically: a reader sees the
    /// whole object or none.
    async fn save(&self, snap: &Snapshot, from: &Path) -> Result<(), StoreError>;
    /// Copies `snap` into the file `to`.
    async fn fetch(&self, snap: &Snapshot, to: &Path) -> Result<(), StoreError>;
    /// Deletes `snap`; deleting a missing object is no error.
    async fn delete(&self, snap: &Snapshot) -> Result<(), StoreError>;
}

/// What the flags say about a store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreConfig {
    /// br's provider name (`Local`, `S3`, `GCS`, …).
    pub provider: String,
    pub container: String,
    pub prefix: String,
}

/// The backup format version upstream writes under the prefix.
pub const FORMAT_DIR: &str = "v2";

/// The directory of a Local store.
pub fn local_dir(container: &str, prefix: &str, home: Option<&str>) -> PathBuf {
    let base = if Path::new(container).is_absolute() {
        PathBuf::from(container)
    } else {
        Path::new(home.filter(|h| !h.is_empty()).unwrap_or("/home/nonroot")).join(container)
    };
    base.join(prefix.trim_start_matches('/')).join(FORMAT_DIR)
}

/// Opens the store the flags describe.
pub fn open(cfg: &StoreConfig) -> Result<Arc<dyn SnapStore>, StoreError> {
    match cfg.provider.as_str() {
        "Local" | "" => {
            let home = std::env::var("HOME").ok();
            Ok(Arc::new(LocalStore::new(local_dir(
                &cfg.container,
                &cfg.prefix,
                home.as_deref(),
            ))))
        }
        other => Err(StoreError::Unsupported(other.to_string())),
    }
}

/// Upstream's `Local` provider: one file per object in a directory.
pub struct LocalStore {
    dir: PathBuf,
}

impl LocalStore {
    pub fn new(dir: impl Into<PathBuf>) -> LocalStore {
        LocalStore { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

const TEMP_PREFIX: &str = ".tmp-";

#[async_trait]
impl SnapStore for LocalStore {
    fn describe(&self) -> String {
        format!("Local {}", self.dir.display())
    }

    async fn list(&self) -> Result<Vec<Snapshot>, StoreError> {
        let dir = self.dir.clone();
        tokio::task::spawn_blocking(move || {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(io(&dir)(e)),
            };
            let mut out: Vec<Snapshot> = entries
                .flatten()
                .filter_map(|e| Snapshot::parse(e.file_name().to_str()?))
                .collect();
            out.sort();
            Ok(out)
        })
        .await
        .unwrap_or_else(|e| Err(io(&self.dir)(std::io::Error::other(e))))
    }

    async fn save(&self, snap: &Snapshot, from: &Path) -> Result<(), StoreError> {
        let dir = self.dir.clone();
        let name = snap.name();
        let from = from.to_path_buf();
        tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            let tmp = dir.join(format!("{TEMP_PREFIX}{name}"));
            let dst = dir.join(&name);
            std::fs::copy(&from, &tmp).map_err(io(&tmp))?;
            std::fs::File::open(&tmp)
                .and_then(|f| f.sync_all())
                .map_err(io(&tmp))?;
            std::fs::rename(&tmp, &dst).map_err(io(&dst))?;
            // The rename is durable once the directory is.
            std::fs::File::open(&dir)
                .and_then(|d| d.sync_all())
                .map_err(io(&dir))
        })
        .await
        .unwrap_or_else(|e| Err(io(&self.dir)(std::io::Error::other(e))))
    }

    async fn fetch(&self, snap: &Snapshot, to: &Path) -> Result<(), StoreError> {
        let src = self.dir.join(snap.name());
        let to = to.to_path_buf();
        tokio::task::spawn_blocking(move || std::fs::copy(&src, &to).map(|_| ()).map_err(io(&src)))
            .await
            .unwrap_or_else(|e| Err(io(&self.dir)(std::io::Error::other(e))))
    }

    async fn delete(&self, snap: &Snapshot) -> Result<(), StoreError> {
        let path = self.dir.join(snap.name());
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(&path)(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Compression;

    #[test]
    fn local_directories_follow_upstreams_layout() {
        assert_eq!(
            local_dir("default.bkp", "etcd-main", None),
            PathBuf::from("/home/nonroot/default.bkp/etcd-main/v2")
        );
        assert_eq!(
            local_dir("/data/b", "/p", Some("/h")),
            PathBuf::from("/data/b/p/v2")
        );
        assert_eq!(local_dir("c", "p", Some("/h")), PathBuf::from("/h/c/p/v2"));
        assert!(matches!(
            open(&StoreConfig {
                provider: "S3".into(),
                ..Default::default()
            }),
            Err(StoreError::Unsupported(_))
        ));
    }

    #[tokio::test]
    async fn save_list_fetch_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path().join("bucket/p/v2"));
        assert!(
            store.list().await.unwrap().is_empty(),
            "missing dir is empty"
        );
        let src = dir.path().join("src");
        std::fs::write(&src, b"snapshot bytes").unwrap();
        let a = Snapshot::full(5, 100, Compression::None);
        let b = Snapshot::delta(6, 9, 120, Compression::Gzip);
        store.save(&b, &src).await.unwrap();
        store.save(&a, &src).await.unwrap();
        // Files of other tools and half-written objects are not listed.
        std::fs::write(store.dir().join("README"), b"x").unwrap();
        std::fs::write(store.dir().join(".tmp-Full-00000000-00000001-1"), b"x").unwrap();
        assert_eq!(store.list().await.unwrap(), vec![a.clone(), b.clone()]);
        let out = dir.path().join("out");
        store.fetch(&a, &out).await.unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"snapshot bytes");
        store.delete(&a).await.unwrap();
        store.delete(&a).await.unwrap();
        assert_eq!(store.list().await.unwrap(), vec![b]);
        assert!(store.fetch(&a, &out).await.is_err());
    }
}
