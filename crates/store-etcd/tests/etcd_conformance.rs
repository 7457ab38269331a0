//! The store conformance suite against real etcd: each check gets a fresh
//! single-member etcd process (the suite counts revisions from an empty
//! store), killed when the check ends.

use etcdv3::testing::{EtcdCluster, cluster_or_skip};
use store::{KeyValue, RangeRequest, Revision, Store, TxnResponse, WatchStream};
use store_etcd::{EtcdOptions, EtcdStore};

/// An etcd store that owns its etcd process.
struct TempEtcd {
    store: EtcdStore,
    _cluster: EtcdCluster,
}

#[async_trait::async_trait]
impl Store for TempEtcd {
    fn current_revision(&self) -> Revision {
        self.store.current_revision()
    }
    fn compacted_revision(&self) -> Revision {
        self.store.compacted_revision()
    }
    async fn get(
        &self,
        key: &str,
        revision: Option<Revision>,
    ) -> store::Result<(Option<KeyValue>, Revision)> {
        self.store.get(key, revision).await
    }
    async fn range(&self, req: RangeRequest) -> store::Result<store::RangeResponse> {
        self.store.range(req).await
    }
    async fn txn(&self, txn: store::Txn) -> store::Result<TxnResponse> {
        self.store.txn(txn).await
    }
    async fn watch(&self, prefix: &str, after: Revision) -> store::Result<WatchStream> {
        self.store.watch(prefix, after).await
    }
    async fn compact(&self, revision: Revision) -> store::Result<()> {
        self.store.compact(revision).await
    }
    fn health(&self) -> store::StoreHealth {
        self.store.health()
    }
}

async fn fresh() -> Option<TempEtcd> {
    let cluster = cluster_or_skip(1).await?;
    let store = EtcdStore::connect(EtcdOptions {
        client: etcdv3::Config::from_list(&cluster.endpoints()),
        prefix: String::new(),
    })
    .await
    .expect("connecting to etcd");
    Some(TempEtcd {
        store,
        _cluster: cluster,
    })
}

macro_rules! on_etcd {
    ($($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some(s) = fresh().await else { return };
                store::conformance::$name(std::sync::Arc::new(s)).await;
            }
        )*
    };
}

on_etcd!(
    revisions_and_versions,
    preconditions,
    range_prefix_limit_continue,
    reads_at_past_revisions,
    watch_replay_and_live,
    watch_progress_is_ordered,
    compaction,
    transactions,
    concurrent_writers
);
