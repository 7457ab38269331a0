//! The conformance suite every [`Store`] backend must pass.
//!
//! Each check is an async function taking a fresh, empty store. A backend's
//! test file runs them all with [`store_conformance_tests!`]:
//!
//! ```ignore
//! store::store_conformance_tests!(|| async { store::MemoryStore::new() });
//! ```

use std::sync::Arc;

use bytes::Bytes;

use crate::{
    Condition, EventKind, Op, RangeRequest, Store, StoreError, Txn, TxnResponse, WatchItem,
    WatchStream,
};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

async fn next_event(w: &mut WatchStream) -> crate::Event {
    loop {
        let item = tokio::time::timeout(std::time::Duration::from_secs(5), w.recv())
            .await
            .expect("watch event within 5s")
            .expect("watch still open");
        if let WatchItem::Event(e) = item {
            return e;
        }
    }
}

pub async fn revisions_and_versions(s: Arc<dyn Store>) {
    assert_eq!(s.current_revision(), 0);
    assert!(
        s.health().is_ok(),
        "a fresh store is healthy: {}",
        s.health()
    );
    let a = s.create("/r/a", b("1")).await.unwrap();
    assert_eq!((a.create_revision, a.mod_revision, a.version), (1, 1, 1));
    let b2 = s.create("/r/b", b("1")).await.unwrap();
    assert_eq!(b2.mod_revision, 2);
    let a2 = s.update("/r/a", b("2"), a.mod_revision).await.unwrap();
    assert_eq!((a2.create_revision, a2.mod_revision, a2.version), (1, 3, 2));
    assert_eq!(s.current_revision(), 3);
    let (got, rev) = s.get("/r/a", None).await.unwrap();
    assert_eq!(got.unwrap().value, b("2"));
    assert_eq!(rev, 3);
    // Recreating after a delete starts a new incarnation.
    let (_, del_rev) = s.delete("/r/a", None).await.unwrap();
    assert_eq!(del_rev, 4);
    let a3 = s.create("/r/a", b("3")).await.unwrap();
    assert_eq!((a3.create_revision, a3.version), (5, 1));
    let health = s.health();
    assert_eq!((health.is_ok(), health.write_errors), (true, 0));
    assert_eq!(health.to_string(), "ok");
}

pub async fn preconditions(s: Arc<dyn Store>) {
    let a = s.create("/p/a", b("1")).await.unwrap();
    match s.create("/p/a", b("x")).await {
        Err(StoreError::AlreadyExists(cur)) => assert_eq!(cur, a),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    let a2 = s.update("/p/a", b("2"), a.mod_revision).await.unwrap();
    match s.update("/p/a", b("3"), a.mod_revision).await {
        Err(StoreError::Conflict(Some(cur))) => assert_eq!(cur, a2),
        other => panic!("expected Conflict, got {other:?}"),
    }
    assert_eq!(
        s.update("/p/missing", b("1"), 1).await,
        Err(StoreError::NotFound)
    );
    match s.delete("/p/a", Some(a.mod_revision)).await {
        Err(StoreError::Conflict(Some(cur))) => assert_eq!(cur, a2),
        other => panic!("expected Conflict, got {other:?}"),
    }
    let (prev, _) = s.delete("/p/a", Some(a2.mod_revision)).await.unwrap();
    assert_eq!(prev.value, b("2"));
    assert_eq!(s.delete("/p/a", None).await, Err(StoreError::NotFound));
    assert_eq!(s.delete("/p/a", Some(7)).await, Err(StoreError::NotFound));
    // Failed writes leave the revision alone.
    assert_eq!(s.current_revision(), 3);
}

pub async fn range_prefix_limit_continue(s: Arc<dyn Store>) {
    for k in ["/x/a", "/x/b", "/x/c", "/x/d", "/xy/a", "/w/a"] {
        s.create(k, b(k)).await.unwrap();
    }
    let all = s
        .range(RangeRequest {
            prefix: "/x/".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let keys: Vec<_> = all.kvs.iter().map(|kv| kv.key.to_string()).collect();
    assert_eq!(keys, ["/x/a", "/x/b", "/x/c", "/x/d"]);
    assert!(!all.more);
    assert_eq!(all.revision, 6);
    let p1 = s
        .range(RangeRequest {
            prefix: "/x/".into(),
            limit: 3,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(p1.kvs.len(), 3);
    assert!(p1.more);
    // A write between pages does not disturb a paginated read at a revision.
    s.create("/x/bb", b("late")).await.unwrap();
    let p2 = s
        .range(RangeRequest {
            prefix: "/x/".into(),
            limit: 3,
            start_after: Some(p1.kvs[2].key.to_string()),
            revision: Some(p1.revision),
        })
        .await
        .unwrap();
    let keys: Vec<_> = p2.kvs.iter().map(|kv| kv.key.to_string()).collect();
    assert_eq!(keys, ["/x/d"]);
    assert!(!p2.more);
    let exact = s
        .range(RangeRequest {
            prefix: "/x/".into(),
            limit: 5,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(exact.kvs.len(), 5);
    assert!(!exact.more, "limit equal to the count leaves nothing more");
}

pub async fn reads_at_past_revisions(s: Arc<dyn Store>) {
    let a = s.create("/h/a", b("a1")).await.unwrap(); // 1
    let _b = s.create("/h/b", b("b1")).await.unwrap(); // 2
    let a2 = s.update("/h/a", b("a2"), a.mod_revision).await.unwrap(); // 3
    s.delete("/h/b", None).await.unwrap(); // 4
    s.create("/h/c", b("c1")).await.unwrap(); // 5
    s.update("/h/a", b("a3"), a2.mod_revision).await.unwrap(); // 6
    let at = |rev| {
        let s = s.clone();
        async move {
            s.range(RangeRequest {
                prefix: "/h/".into(),
                revision: Some(rev),
                ..Default::default()
            })
            .await
            .unwrap()
            .kvs
            .iter()
            .map(|kv| format!("{}={}", kv.key, String::from_utf8_lossy(&kv.value)))
            .collect::<Vec<_>>()
        }
    };
    assert_eq!(at(2).await, ["/h/a=a1", "/h/b=b1"]);
    assert_eq!(at(3).await, ["/h/a=a2", "/h/b=b1"]);
    assert_eq!(at(4).await, ["/h/a=a2"]);
    assert_eq!(at(5).await, ["/h/a=a2", "/h/c=c1"]);
    assert_eq!(at(6).await, ["/h/a=a3", "/h/c=c1"]);
    let (old, rev) = s.get("/h/a", Some(1)).await.unwrap();
    assert_eq!(rev, 1);
    let old = old.unwrap();
    assert_eq!(
        (old.value.clone(), old.mod_revision, old.version),
        (b("a1"), 1, 1)
    );
    assert_eq!(s.get("/h/b", Some(4)).await.unwrap().0, None);
    assert_eq!(
        s.get("/h/a", Some(99)).await,
        Err(StoreError::FutureRevision {
            requested: 99,
            current: 6
        })
    );
}

pub async fn watch_replay_and_live(s: Arc<dyn Store>) {
    let a = s.create("/w/a", b("1")).await.unwrap(); // 1
    s.create("/other/a", b("1")).await.unwrap(); // 2
    let mut w = s.watch("/w/", 0).await.unwrap();
    let e = next_event(&mut w).await;
    assert_eq!(
        (e.kind, e.kv.mod_revision, e.prev.clone()),
        (EventKind::Put, 1, None)
    );
    s.update("/w/a", b("2"), a.mod_revision).await.unwrap(); // 3
    let e = next_event(&mut w).await;
    assert_eq!(e.kind, EventKind::Put);
    assert_eq!(e.kv.value, b("2"));
    assert_eq!(e.prev.unwrap().value, b("1"));
    s.delete("/w/a", None).await.unwrap(); // 4
    let e = next_event(&mut w).await;
    assert_eq!(e.kind, EventKind::Delete);
    assert_eq!(e.kv.mod_revision, 4);
    assert_eq!(
        e.prev.unwrap().value,
        b("2"),
        "a delete carries the previous value"
    );
    // From a revision: only later events.
    let mut w2 = s.watch("/w/", 3).await.unwrap();
    let e = next_event(&mut w2).await;
    assert_eq!((e.kind, e.kv.mod_revision), (EventKind::Delete, 4));
    s.create("/w/b", b("1")).await.unwrap(); // 5
    assert_eq!(next_event(&mut w2).await.kv.mod_revision, 5);
    assert_eq!(next_event(&mut w).await.kv.mod_revision, 5);
}

pub async fn watch_progress_is_ordered(s: Arc<dyn Store>) {
    let mut w = s.watch("/g/", 0).await.unwrap();
    s.create("/g/a", b("1")).await.unwrap();
    s.create("/elsewhere", b("1")).await.unwrap();
    w.request_progress();
    let mut saw_event = false;
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(5), w.recv())
            .await
            .unwrap()
            .unwrap()
        {
            WatchItem::Event(e) => {
                assert_eq!(e.kv.mod_revision, 1);
                saw_event = true;
            }
            WatchItem::Progress(rev) => {
                assert!(saw_event, "progress must come after earlier events");
                assert_eq!(rev, 2);
                break;
            }
        }
    }
}

pub async fn compaction(s: Arc<dyn Store>) {
    let a = s.create("/c/a", b("1")).await.unwrap(); // 1
    let a = s.update("/c/a", b("2"), a.mod_revision).await.unwrap(); // 2
    s.update("/c/a", b("3"), a.mod_revision).await.unwrap(); // 3
    s.compact(2).await.unwrap();
    assert_eq!(s.compacted_revision(), 2);
    assert!(matches!(
        s.get("/c/a", Some(1)).await,
        Err(StoreError::Compacted { requested: 1, .. })
    ));
    assert_eq!(
        s.get("/c/a", Some(2)).await.unwrap().0.unwrap().value,
        b("2")
    );
    assert!(matches!(
        s.watch("/c/", 1).await,
        Err(StoreError::Compacted { .. })
    ));
    let mut w = s.watch("/c/", 2).await.unwrap();
    assert_eq!(next_event(&mut w).await.kv.mod_revision, 3);
    assert!(matches!(
        s.compact(10).await,
        Err(StoreError::FutureRevision { .. })
    ));
}

pub async fn transactions(s: Arc<dyn Store>) {
    let a = s.create("/t/a", b("1")).await.unwrap(); // 1
    let resp = s
        .txn(Txn {
            conditions: vec![
                Condition::ModRevision("/t/a".into(), a.mod_revision),
                Condition::Absent("/t/b".into()),
            ],
            ops: vec![
                Op::Put {
                    key: "/t/b".into(),
                    value: b("b"),
                },
                Op::Delete { key: "/t/a".into() },
            ],
        })
        .await
        .unwrap();
    match resp {
        TxnResponse::Committed { revision, results } => {
            assert_eq!(revision, 2);
            assert_eq!(results[0].kv.as_ref().unwrap().mod_revision, 2);
            assert_eq!(results[1].prev.as_ref().unwrap().value, b("1"));
        }
        other => panic!("expected commit, got {other:?}"),
    }
    // A failed condition changes nothing and reports current values.
    let resp = s
        .txn(Txn {
            conditions: vec![Condition::Absent("/t/b".into())],
            ops: vec![Op::Delete { key: "/t/b".into() }],
        })
        .await
        .unwrap();
    match resp {
        TxnResponse::Failed { current } => {
            assert_eq!(current[0].as_ref().unwrap().value, b("b"))
        }
        other => panic!("expected failure, got {other:?}"),
    }
    // Deleting a missing key changes nothing and does not advance the revision.
    let resp = s
        .txn(Txn {
            conditions: vec![],
            ops: vec![Op::Delete {
                key: "/t/zz".into(),
            }],
        })
        .await
        .unwrap();
    assert_eq!(
        resp,
        TxnResponse::Committed {
            revision: 2,
            results: vec![crate::OpResult {
                prev: None,
                kv: None
            }]
        }
    );
    assert_eq!(s.current_revision(), 2);
}

pub async fn concurrent_writers(s: Arc<dyn Store>) {
    let mut tasks = Vec::new();
    for t in 0..16 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut revs = Vec::new();
            for i in 0..50 {
                let kv = s
                    .create(&format!("/cw/{t:02}/{i:03}"), b("v"))
                    .await
                    .unwrap();
                revs.push(kv.mod_revision);
            }
            revs
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        let revs = t.await.unwrap();
        assert!(
            revs.windows(2).all(|w| w[0] < w[1]),
            "revisions increase per writer"
        );
        all.extend(revs);
    }
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 800, "every write got its own revision");
    assert_eq!(s.current_revision(), 800);
    let r = s
        .range(RangeRequest {
            prefix: "/cw/".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.kvs.len(), 800);
}

/// Runs every conformance check against stores made by `$factory`, an
/// expression that evaluates to `impl Fn() -> impl Future<Output = impl Store>`.
#[macro_export]
macro_rules! store_conformance_tests {
    ($factory:expr) => {
        $crate::store_conformance_tests!(@tests $factory;
            revisions_and_versions, preconditions, range_prefix_limit_continue,
            reads_at_past_revisions, watch_replay_and_live, watch_progress_is_ordered,
            compaction, transactions, concurrent_writers);
    };
    (@tests $factory:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let factory = $factory;
                let store = factory().await;
                $crate::conformance::$name(::std::sync::Arc::new(store)).await;
            }
        )*
    };
}
