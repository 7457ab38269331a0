//! `compact` for druid's compaction Job (`br:pkg/compactor`): the store's
//! newest full snapshot plus its deltas are restored into a temporary
//! etcd, compacted at the head revision and defragmented, and saved as
//! one new full snapshot, so the next restore replays no deltas.

use std::path::Path;
use std::time::Duration;

use crate::restore::{self, EmbeddedEtcd, Member, Programs, RestoreError};
use crate::snapshot::{Compression, Snapshot};
use crate::snapshotter::{SnapshotError, Snapshotter};
use crate::snapstore::SnapStore;

#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error(transparent)]
    Restore(#[from] RestoreError),
    #[error("compacting the restored etcd: {0}")]
    CompactFailed(#[from] etcdv3::Error),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

/// Compacts `store` using `work` (a directory, emptied afterwards);
/// `None` when the store holds no full snapshot.
pub async fn compact(
    store: std::sync::Arc<dyn SnapStore>,
    work: &Path,
    programs: &Programs,
    compression: Compression,
    timeout: Duration,
) -> Result<Option<Snapshot>, CompactError> {
    let _ = tokio::fs::remove_dir_all(work).await;
    let data = work.join("compaction.etcd");
    let member = Member {
        name: "compaction".into(),
        initial_cluster: "compaction=http://127.0.0.1:2380".into(),
        initial_cluster_token: "etcd-cluster".into(),
        initial_advertise_peer_urls: "http://127.0.0.1:2380".into(),
    };
    let restored = restore::restore(
        store.as_ref(),
        &data,
        &work.join("restoration.temp"),
        &member,
        programs,
    )
    .await?;
    if restored.is_none() {
        return Ok(None);
    }
    let etcd = EmbeddedEtcd::start(&programs.etcd, &data, "compaction").await?;
    let client = etcd.client()?;
    let head = client.status().await?.header.map_or(0, |h| h.revision);
    // A store compacted before is already compacted at its head.
    match client.compact(head).await {
        Err(e) if !e.is_compacted() => return Err(e.into()),
        _ => {}
    }
    client.defragment(timeout).await?;
    let snapper = Snapshotter::new(client, store, compression, work.join("temp"), timeout);
    let snap = snapper.full(false).await?;
    etcd.stop();
    let _ = tokio::fs::remove_dir_all(work).await;
    Ok(Some(snap))
}
