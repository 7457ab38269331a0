//! Restoring a data directory from the store (`br:pkg/snapshot/restorer`):
//! the newest full snapshot goes through `etcdctl snapshot restore` into
//! `<data-dir>.part`, then the deltas after it are replayed into a
//! temporary etcd on that directory (one transaction per original
//! revision), and only then does the directory replace the data
//! directory, so a restore cut short leaves nothing half-written behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use etcdv3::proto;

use crate::compress;
use crate::delta;
use crate::snapshot::{Snapshot, latest_set};
use crate::snapstore::{SnapStore, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("restore file {path}: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("etcdctl snapshot restore failed: {0}")]
    EtcdctlFailed(String),
    #[error("the temporary etcd for replaying deltas: {0}")]
    EmbeddedEtcdFailed(String),
    #[error("delta {name}: {reason}")]
    DeltaFailed { name: String, reason: String },
}

fn file_err(path: &Path) -> impl FnOnce(std::io::Error) -> RestoreError + '_ {
    move |source| RestoreError::File {
        path: path.display().to_string(),
        source,
    }
}

/// Who the restored member is (what `etcdctl snapshot restore` writes
/// into the new cluster's membership).
#[derive(Clone, Debug)]
pub struct Member {
    pub name: String,
    pub initial_cluster: String,
    pub initial_cluster_token: String,
    pub initial_advertise_peer_urls: String,
}

/// Programs a restore runs.
#[derive(Clone, Debug)]
pub struct Programs {
    pub etcd: String,
    pub etcdctl: String,
}

impl Default for Programs {
    fn default() -> Self {
        Programs {
            etcd: "etcd".into(),
            etcdctl: "etcdctl".into(),
        }
    }
}

/// A temporary etcd on a data directory, on free loopback ports; killed on
/// drop.
pub struct EmbeddedEtcd {
    child: std::process::Child,
    pub client_url: String,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

impl EmbeddedEtcd {
    /// Starts etcd on `data_dir` (already holding a member) and waits
    /// until it answers.
    pub async fn start(program: &str, data_dir: &Path, name: &str) -> Result<Self, RestoreError> {
        let client_url = format!("http://127.0.0.1:{}", free_port());
        let peer_url = format!("http://127.0.0.1:{}", free_port());
        let child = std::process::Command::new(program)
            .arg("--name")
            .arg(name)
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            // A restored member may carry other peers' URLs; this one
            // must come up alone, so membership checks are skipped.
            .args(["--force-new-cluster"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| RestoreError::EmbeddedEtcdFailed(format!("starting {program}: {e}")))?;
        let etcd = EmbeddedEtcd { child, client_url };
        let client = etcd.client()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match client.status().await {
                Ok(_) => return Ok(etcd),
                Err(e) if Instant::now() > deadline => {
                    return Err(RestoreError::EmbeddedEtcdFailed(e.to_string()));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    pub fn client(&self) -> Result<etcdv3::Client, RestoreError> {
        etcdv3::Client::single(&self.client_url, None)
            .map_err(|e| RestoreError::EmbeddedEtcdFailed(e.to_string()))
    }

    /// Stops etcd (SIGTERM would be kinder, but the data is synced on
    /// every commit; what matters is that it is gone before the directory
    /// moves).
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for EmbeddedEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Fetches `snap` into `dir` and returns the path of its plain bytes.
async fn fetch_plain(
    store: &dyn SnapStore,
    snap: &Snapshot,
    dir: &Path,
) -> Result<PathBuf, RestoreError> {
    let packed = dir.join(format!("{}.fetched", snap.name()));
    store.fetch(snap, &packed).await?;
    if snap.compression == crate::snapshot::Compression::None {
        return Ok(packed);
    }
    let plain = dir.join(format!("{}.plain", snap.name()));
    let (src, dst, c) = (packed.clone(), plain.clone(), snap.compression);
    tokio::task::spawn_blocking(move || compress::decompress_file(&src, &dst, c))
        .await
        .map_err(|e| file_err(&plain)(std::io::Error::other(e)))?
        .map_err(file_err(&plain))?;
    let _ = tokio::fs::remove_file(&packed).await;
    Ok(plain)
}

/// Replays the events of `snap` (after `applied`) into `client`; returns
/// the last revision replayed.
pub async fn apply_delta(
    client: &etcdv3::Client,
    store: &dyn SnapStore,
    snap: &Snapshot,
    temp: &Path,
    applied: i64,
) -> Result<i64, RestoreError> {
    let path = fetch_plain(store, snap, temp).await?;
    let data = tokio::fs::read(&path).await.map_err(file_err(&path))?;
    let _ = tokio::fs::remove_file(&path).await;
    let bad = |reason: String| RestoreError::DeltaFailed {
        name: snap.name(),
        reason,
    };
    let events = delta::decode(&data).map_err(|e| bad(e.to_string()))?;
    let mut last = applied;
    for (rev, group) in delta::by_revision(&events, applied) {
        let ops = group
            .into_iter()
            .filter_map(|e| {
                let kv = e.kv?;
                Some(proto::RequestOp {
                    request: Some(if e.r#type == proto::EventType::Delete as i32 {
                        proto::Request::DeleteRange(proto::DeleteRangeRequest {
                            key: kv.key,
                            ..Default::default()
                        })
                    } else {
                        proto::Request::Put(proto::PutRequest {
                            key: kv.key,
                            value: kv.value,
                            ..Default::default()
                        })
                    }),
                })
            })
            .collect();
        client
            .txn(proto::TxnRequest {
                compare: vec![],
                success: ops,
                failure: vec![],
            })
            .await
            .map_err(|e| bad(e.to_string()))?;
        last = rev;
    }
    Ok(last)
}

/// Restores the newest full snapshot and its deltas from `store` into
/// `data_dir` (replacing it). Returns the last revision restored, or
/// `None` when the store holds no full snapshot (nothing to restore).
pub async fn restore(
    store: &dyn SnapStore,
    data_dir: &Path,
    temp_dir: &Path,
    member: &Member,
    programs: &Programs,
) -> Result<Option<i64>, RestoreError> {
    let snaps = store.list().await?;
    let (Some(full), deltas) = latest_set(&snaps) else {
        return Ok(None);
    };
    tokio::fs::create_dir_all(temp_dir)
        .await
        .map_err(file_err(temp_dir))?;
    let db = fetch_plain(store, &full, temp_dir).await?;
    let part = data_dir.with_extension("part");
    let _ = tokio::fs::remove_dir_all(&part).await;
    let out = tokio::process::Command::new(&programs.etcdctl)
        .env("ETCDCTL_API", "3")
        .arg("snapshot")
        .arg("restore")
        .arg(&db)
        .arg(format!("--data-dir={}", part.display()))
        .arg(format!("--name={}", member.name))
        .arg(format!("--initial-cluster={}", member.initial_cluster))
        .arg(format!(
            "--initial-cluster-token={}",
            member.initial_cluster_token
        ))
        .arg(format!(
            "--initial-advertise-peer-urls={}",
            member.initial_advertise_peer_urls
        ))
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| RestoreError::EtcdctlFailed(format!("{}: {e}", programs.etcdctl)))?;
    let _ = tokio::fs::remove_file(&db).await;
    if !out.status.success() {
        return Err(RestoreError::EtcdctlFailed(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    let mut last = full.last_revision;
    if !deltas.is_empty() {
        let etcd = EmbeddedEtcd::start(&programs.etcd, &part, &member.name).await?;
        let client = etcd.client()?;
        for d in &deltas {
            last = apply_delta(&client, store, d, temp_dir, last).await?;
        }
        etcd.stop();
    }
    let _ = tokio::fs::remove_dir_all(data_dir).await;
    if let Some(parent) = data_dir.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(file_err(parent))?;
    }
    tokio::fs::rename(&part, data_dir)
        .await
        .map_err(file_err(data_dir))?;
    tracing::info!(full = %full.name(), deltas = deltas.len(), revision = last, "restored");
    Ok(Some(last))
}
