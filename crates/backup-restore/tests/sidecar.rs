//! The sidecar's HTTP API as the etcd-wrapper and druid use it, mounted on
//! `127.0.0.1:0`, against a real etcd: the initialization handshake,
//! `/config` for this member, `/snapshot/full` into the Local store, and
//! scenario 21 — a volume whose `safe_guard` names another namespace is
//! refused and etcd gets no configuration.

use std::sync::Arc;
use std::time::Duration;

use backup_restore::gc::Policy;
use backup_restore::restore::Programs;
use backup_restore::sidecar::{Settings, Sidecar, router};
use backup_restore::snapshot::{Compression, Snapshot};
use backup_restore::snapstore::{LocalStore, SnapStore};

const CONFIG: &str = "name: etcd-x\ndata-dir: /var/etcd/data/new.etcd\n\
initial-cluster: e-0=http://e-0.e-peer.ns.svc:2380\ninitial-cluster-token: etcd-cluster\n\
initial-cluster-state: new\n\
advertise-client-urls:\n  e-0: [http://e-0.e-peer.ns.svc:2379]\n\
initial-advertise-peer-urls:\n  e-0: [http://e-0.e-peer.ns.svc:2380]\n";

fn settings(dir: &std::path::Path, endpoint: &str, store: Arc<dyn SnapStore>) -> Settings {
    std::fs::write(dir.join("etcd.conf.yaml"), CONFIG).unwrap();
    Settings {
        data_dir: dir.join("data/new.etcd"),
        temp_dir: dir.join("temp"),
        config_path: dir.join("etcd.conf.yaml"),
        pod_name: "e-0".into(),
        namespace: "ns".into(),
        endpoint: endpoint.into(),
        store: Some(store),
        schedule: None,
        defrag_schedule: None,
        defrag_timeout: Duration::from_secs(30),
        delta_period: Duration::ZERO,
        delta_memory_limit: 1 << 20,
        gc_policy: Policy::LimitBased { max_backups: 7 },
        gc_period: Duration::ZERO,
        delta_retention: Duration::ZERO,
        compression: Compression::None,
        snapshot_timeout: Duration::from_secs(30),
        heartbeat: Duration::from_secs(1),
        reelection_period: Duration::from_secs(1),
        leases: None,
        programs: Programs::default(),
    }
}

async fn serve(sidecar: Arc<Sidecar>) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, router(sidecar)).await });
    format!("{addr}")
}

/// A plain HTTP/1.0 GET: status and body.
async fn get(addr: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.unwrap();
    let (head, body) = buf.split_once("\r\n\r\n").unwrap();
    (head[9..12].parse().unwrap(), body.to_string())
}

async fn wait_status(addr: &str, want: &str) {
    for _ in 0..100 {
        let (_, s) = get(addr, "/initialization/status").await;
        if s == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("initialization never reached {want}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wrapper_handshake_then_config_and_an_on_demand_full_snapshot() {
    let Some(cluster) = etcdv3::testing::cluster_or_skip(1).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SnapStore> = Arc::new(LocalStore::new(dir.path().join("bucket")));
    let sidecar = Sidecar::new(settings(dir.path(), &cluster.endpoints(), store.clone())).unwrap();
    let addr = serve(sidecar.clone()).await;

    assert_eq!(
        get(&addr, "/initialization/status").await,
        (200, "New".into())
    );
    // No configuration before initialization succeeded.
    assert_eq!(get(&addr, "/config").await.0, 503);
    assert_eq!(get(&addr, "/initialization/start?mode=full").await.0, 200);
    wait_status(&addr, "Successful").await;
    // The guard file now names the namespace.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("data/safe_guard")).unwrap(),
        "ns"
    );
    let (code, cfg) = get(&addr, "/config").await;
    assert_eq!(code, 200, "{cfg}");
    assert!(cfg.contains("name: e-0"), "{cfg}");
    assert!(
        cfg.contains("advertise-client-urls: http://e-0.e-peer.ns.svc:2379"),
        "{cfg}"
    );
    assert!(cfg.contains("initial-cluster-state: new"), "{cfg}");

    let (code, body) = get(&addr, "/snapshot/full").await;
    assert_eq!(code, 200, "{body}");
    let snap: serde_json::Value = serde_json::from_str(&body).unwrap();
    let name = snap["snapName"].as_str().unwrap();
    assert!(name.starts_with("Full-00000000-"), "{name}");
    let listed: Vec<String> = store
        .list()
        .await
        .unwrap()
        .iter()
        .map(Snapshot::name)
        .collect();
    assert_eq!(listed, vec![name.to_string()]);
    let (_, latest) = get(&addr, "/snapshot/latest").await;
    assert!(latest.contains(name), "{latest}");
    assert_eq!(
        get(&addr, "/healthz").await,
        (200, r#"{"health":true}"#.into())
    );
}

#[tokio::test]
async fn scenario_21_a_foreign_volume_fails_initialization() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/safe_guard"), "other-namespace").unwrap();
    let store: Arc<dyn SnapStore> = Arc::new(LocalStore::new(dir.path().join("bucket")));
    let sidecar = Sidecar::new(settings(dir.path(), "http://127.0.0.1:1", store)).unwrap();
    let addr = serve(sidecar).await;
    get(&addr, "/initialization/start?mode=sanity").await;
    wait_status(&addr, "Failed").await;
    assert_eq!(get(&addr, "/config").await.0, 503);
    assert_eq!(
        get(&addr, "/healthz").await,
        (200, r#"{"health":false}"#.into())
    );
    // Nothing was written to the foreign volume.
    assert!(!dir.path().join("data/new.etcd").exists());
}
