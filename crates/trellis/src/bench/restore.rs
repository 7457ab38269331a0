//! `trellis bench restore`: how long etcd-backup-restore takes to bring a
//! member back from its backups (issue 13). A real etcd (Debian's) gets
//! `keys` keys, a full snapshot is taken into a Local store, `delta_keys`
//! more keys go into delta snapshots from the watch, and then the restore
//! (the full snapshot through etcdctl, the deltas replayed into a
//! temporary etcd) runs into an empty directory, as a member's sidecar
//! does after its data is lost. The restored data is then opened and
//! counted, so a fast but wrong restore cannot pass.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use backup_restore::restore::{self, EmbeddedEtcd, Member, Programs};
use backup_restore::snapshot::Compression;
use backup_restore::snapshotter::Snapshotter;
use backup_restore::snapstore::{LocalStore, SnapStore};
use etcdv3::proto;

/// Puts in flight at once while loading.
const IN_FLIGHT: usize = 64;
const VALUE: &[u8] = &[b'v'; 256];

async fn load(client: &etcdv3::Client, prefix: &str, n: usize) -> anyhow::Result<()> {
    use futures::StreamExt;
    let mut results = futures::stream::iter(0..n)
        .map(|i| {
            let c = client.clone();
            let key = format!("{prefix}{i:08}").into_bytes();
            async move {
                c.put(proto::PutRequest {
                    key,
                    value: VALUE.to_vec(),
                    ..Default::default()
                })
                .await
            }
        })
        .buffer_unordered(IN_FLIGHT);
    while let Some(r) = results.next().await {
        r.context("loading keys")?;
    }
    Ok(())
}

async fn count(client: &etcdv3::Client) -> anyhow::Result<i64> {
    Ok(client
        .range(proto::RangeRequest {
            key: b"/".to_vec(),
            range_end: proto::prefix_end(b"/"),
            count_only: true,
            ..Default::default()
        })
        .await?
        .count)
}

pub async fn run(keys: usize, delta_keys: usize) -> anyhow::Result<()> {
    let programs = Programs::default();
    let dir = tempfile::tempdir_in(std::env::current_dir()?)?;
    let source = EmbeddedEtcd::start(&programs.etcd, &dir.path().join("source"), "m0")
        .await
        .context("starting etcd (Debian's etcd-server)")?;
    let client = source.client()?;
    let store: Arc<dyn SnapStore> = Arc::new(LocalStore::new(dir.path().join("bucket/v2")));
    let snapper = Arc::new(Snapshotter::new(
        client.clone(),
        store.clone(),
        Compression::Gzip,
        dir.path().join("tmp"),
        Duration::from_secs(300),
    ));
    let started = Instant::now();
    load(&client, "/full/", keys).await?;
    let loaded = started.elapsed();
    let t = Instant::now();
    let full = snapper.full(false).await?;
    let full_took = t.elapsed();
    let deltas = {
        let s = snapper.clone();
        tokio::spawn(async move { s.run_deltas(Duration::from_secs(2), 8 << 20).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    load(&client, "/delta/", delta_keys).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    deltas.abort();
    snapper.flush_delta().await?;
    let head = client.status().await?.header.unwrap_or_default().revision;
    let snapshots = store.list().await?;
    let bytes: u64 = walk_size(&dir.path().join("bucket"));
    source.stop();

    let data = dir.path().join("restored/new.etcd");
    let member = Member {
        name: "m0".into(),
        initial_cluster: "m0=http://127.0.0.1:2380".into(),
        initial_cluster_token: "etcd-cluster".into(),
        initial_advertise_peer_urls: "http://127.0.0.1:2380".into(),
    };
    let t = Instant::now();
    let rev = restore::restore(
        store.as_ref(),
        &data,
        &dir.path().join("rtmp"),
        &member,
        &programs,
    )
    .await?;
    let restore_took = t.elapsed();
    anyhow::ensure!(
        rev == Some(head),
        "restored to revision {rev:?}, not {head}"
    );
    let restored = EmbeddedEtcd::start(&programs.etcd, &data, "m0").await?;
    let n = count(&restored.client()?).await?;
    restored.stop();
    anyhow::ensure!(
        n == (keys + delta_keys) as i64,
        "the restored etcd holds {n} keys, not {}",
        keys + delta_keys
    );

    println!("| measurement | result |");
    println!("|---|---|");
    println!(
        "| keys loaded (256 B values, {IN_FLIGHT} puts in flight) | {keys} + {delta_keys} in {:.1} s |",
        loaded.as_secs_f64()
    );
    println!(
        "| full snapshot of {keys} keys (gzip, Local store) | {:.2} s, revision {} |",
        full_took.as_secs_f64(),
        full.last_revision
    );
    println!(
        "| snapshots in the store | {} ({:.1} MiB) |",
        snapshots.len(),
        bytes as f64 / (1024.0 * 1024.0)
    );
    println!(
        "| **restore** (full + {} deltas) into an empty directory | **{:.2} s** |",
        snapshots.len().saturating_sub(1),
        restore_took.as_secs_f64()
    );
    println!("| keys in the restored etcd | {n} (revision {head}) |");
    Ok(())
}

fn walk_size(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                walk_size(&p)
            } else {
                e.metadata().map_or(0, |m| m.len())
            }
        })
        .sum()
}
