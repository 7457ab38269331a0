//! Snapshots and restore against a real etcd (Debian's 3.4, see
//! `etcdv3::testing`): scenario 19 — a member whose data is gone comes
//! back from the newest full snapshot plus the deltas after it, at a
//! revision at least the newest snapshot's.

use std::sync::Arc;
use std::time::Duration;

use backup_restore::restore::{self, Member, Programs};
use backup_restore::snapshot::{Compression, Kind};
use backup_restore::snapshotter::Snapshotter;
use backup_restore::snapstore::{LocalStore, SnapStore};
use etcdv3::proto;

async fn put(c: &etcdv3::Client, k: &str, v: &str) {
    c.put(proto::PutRequest {
        key: k.into(),
        value: v.into(),
        ..Default::default()
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_19_restore_brings_back_full_plus_deltas() {
    let Some(cluster) = etcdv3::testing::cluster_or_skip(1).await else {
        return;
    };
    let client = cluster.client();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SnapStore> = Arc::new(LocalStore::new(dir.path().join("bucket/v2")));
    let snapper = Arc::new(Snapshotter::new(
        client.clone(),
        store.clone(),
        Compression::Gzip,
        dir.path().join("tmp"),
        Duration::from_secs(30),
    ));
    for i in 0..50 {
        put(&client, &format!("/full/{i}"), "x").await;
    }
    let full = snapper.full(false).await.unwrap();
    assert!(full.last_revision >= 51, "{full:?}");
    assert!(full.name().starts_with("Full-00000000-") && full.name().ends_with(".gz"));

    // Deltas from a watch: a short period, so two flushes happen.
    let deltas = {
        let s = snapper.clone();
        tokio::spawn(async move { s.run_deltas(Duration::from_millis(300), 1 << 20).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    for i in 0..30 {
        put(&client, &format!("/delta/{i}"), &format!("v{i}")).await;
    }
    client
        .delete_range(proto::DeleteRangeRequest {
            key: b"/full/0".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    deltas.abort();
    snapper.flush_delta().await.unwrap();
    let head = client.status().await.unwrap().header.unwrap().revision;
    let snaps = store.list().await.unwrap();
    let incr: Vec<_> = snaps.iter().filter(|s| s.kind == Kind::Delta).collect();
    assert!(!incr.is_empty(), "{snaps:?}");
    assert_eq!(incr.last().unwrap().last_revision, head);
    assert_eq!(snapper.last_revision().await, head);

    // Restore into a fresh directory and read it with a fresh etcd.
    let data = dir.path().join("restored/new.etcd");
    let member = Member {
        name: "m0".into(),
        initial_cluster: "m0=http://127.0.0.1:2380".into(),
        initial_cluster_token: "etcd-cluster".into(),
        initial_advertise_peer_urls: "http://127.0.0.1:2380".into(),
    };
    let programs = Programs {
        etcd: etcdv3::testing::etcd_binary()
            .unwrap()
            .display()
            .to_string(),
        ..Programs::default()
    };
    let rev = restore::restore(
        store.as_ref(),
        &data,
        &dir.path().join("rtmp"),
        &member,
        &programs,
    )
    .await
    .unwrap();
    assert_eq!(rev, Some(head));
    assert!(!data.with_extension("part").exists());
    let etcd = restore::EmbeddedEtcd::start(&programs.etcd, &data, "m0")
        .await
        .unwrap();
    let c = etcd.client().unwrap();
    let all = c
        .range(proto::RangeRequest {
            key: b"/".to_vec(),
            range_end: proto::prefix_end(b"/"),
            count_only: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.count, 49 + 30);
    let st = c.status().await.unwrap().header.unwrap();
    assert!(st.revision >= head, "restored at {} < {head}", st.revision);
    let v = c
        .range(proto::RangeRequest {
            key: b"/delta/29".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(v.kvs[0].value, b"v29");
    etcd.stop();

    // An empty store restores nothing.
    let empty = LocalStore::new(dir.path().join("empty"));
    let none = restore::restore(
        &empty,
        &dir.path().join("x"),
        &dir.path().join("t2"),
        &member,
        &programs,
    )
    .await
    .unwrap();
    assert_eq!(none, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_folds_deltas_into_one_new_full() {
    let Some(cluster) = etcdv3::testing::cluster_or_skip(1).await else {
        return;
    };
    let client = cluster.client();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SnapStore> = Arc::new(LocalStore::new(dir.path().join("bucket")));
    let snapper = Arc::new(Snapshotter::new(
        client.clone(),
        store.clone(),
        Compression::None,
        dir.path().join("tmp"),
        Duration::from_secs(30),
    ));
    snapper.full(false).await.unwrap();
    let deltas = {
        let s = snapper.clone();
        tokio::spawn(async move { s.run_deltas(Duration::from_millis(200), 1 << 20).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    for i in 0..20 {
        put(&client, &format!("/c/{}", i % 5), &format!("v{i}")).await;
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    deltas.abort();
    snapper.flush_delta().await.unwrap();
    let head = client.status().await.unwrap().header.unwrap().revision;
    let programs = Programs {
        etcd: etcdv3::testing::etcd_binary()
            .unwrap()
            .display()
            .to_string(),
        ..Programs::default()
    };
    let snap = backup_restore::compact::compact(
        store.clone(),
        &dir.path().join("work"),
        &programs,
        Compression::Gzip,
        Duration::from_secs(30),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(snap.kind, Kind::Full);
    assert!(snap.last_revision >= head, "{snap:?} < {head}");
    // The newest set is now that full alone: a restore replays no delta.
    let (full, deltas) = backup_restore::snapshot::latest_set(&store.list().await.unwrap());
    assert_eq!(full.map(|f| f.name()), Some(snap.name()));
    assert!(deltas.is_empty());
    assert!(!dir.path().join("work").exists());
}
