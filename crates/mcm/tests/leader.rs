//! Leader election against the embedded API server: one holder at a time, a
//! successor only after the lease has gone unrenewed for its duration (or
//! at once after a release), and a holder that finds someone else in the
//! record gives up. The controllers' heartbeat Lease, which says a
//! namespace is served, is renewed while they run and released when they
//! stop.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{Patch, PatchParams};
use mcm::leader::{Error, LeaderElector, LeaseTiming};
use serde_json::json;

const NS: &str = "default";
const LEASE: &str = "machine-controller-manager";

/// An embedded API server without CRDs: Leases are all these tests need.
async fn client() -> kube::Client {
    testkit::bare_cluster().await.client()
}

fn timing() -> LeaseTiming {
    LeaseTiming {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
    }
}

fn elector(client: &kube::Client, id: &str) -> Arc<LeaderElector> {
    Arc::new(LeaderElector::new(client.clone(), NS, LEASE, id, timing()))
}

async fn holder(client: &kube::Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    leases
        .get(LEASE)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity)
}

#[tokio::test]
async fn a_successor_waits_for_the_lease_to_expire() {
    let client = client().await;
    let a = elector(&client, "a");
    a.acquire().await;
    assert_eq!(holder(&client).await.as_deref(), Some("a"));

    // While `a` renews, `b` never gets the lease.
    let renewing = tokio::spawn({
        let a = a.clone();
        async move { a.hold().await }
    });
    let b = elector(&client, "b");
    let waited = tokio::time::timeout(Duration::from_secs(4), b.acquire()).await;
    assert!(waited.is_err(), "b acquired a lease that a renews");
    assert_eq!(holder(&client).await.as_deref(), Some("a"));

    // `a` stops renewing (as if killed): `b` takes over after the lease
    // duration, counted from its own last sight of a change.
    renewing.abort();
    let stopped = Instant::now();
    tokio::time::timeout(Duration::from_secs(6), b.acquire())
        .await
        .expect("b acquires an expired lease");
    assert!(
        stopped.elapsed() >= Duration::from_millis(1500),
        "b took the lease {:?} after a's last renewal",
        stopped.elapsed()
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let spec = leases.get(LEASE).await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));

    // `a` resumes renewing long after its deadline: it has lost, and
    // says so at once rather than after another deadline.
    let lost = tokio::time::timeout(Duration::from_secs(1), a.hold())
        .await
        .expect("a gives up at once");
    // Either way it has lost: its deadline passed, or it read b's record
    // first (which of the two it notices first depends on timing).
    assert!(
        matches!(lost, Error::RenewDeadline(_))
            || matches!(&lost, Error::TakenOver { holder, .. } if holder == "b"),
        "{lost}"
    );
    assert_eq!(holder(&client).await.as_deref(), Some("b"));
}

#[tokio::test]
async fn a_released_lease_is_taken_at_once() {
    let client = client().await;
    let a = elector(&client, "a");
    a.acquire().await;
    let b = elector(&client, "b");
    // `b` has seen a's record, so without a release it would wait.
    assert!(
        tokio::time::timeout(Duration::from_millis(500), b.acquire())
            .await
            .is_err()
    );
    a.release().await;
    let start = Instant::now();
    tokio::time::timeout(Duration::from_secs(2), b.acquire())
        .await
        .expect("b acquires a released lease");
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_eq!(holder(&client).await.as_deref(), Some("b"));
}

#[tokio::test]
async fn a_holder_gives_up_when_another_writes_the_record() {
    let client = client().await;
    let a = elector(&client, "a");
    a.acquire().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    leases
        .patch(
            LEASE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"holderIdentity": "intruder"}})),
        )
        .await
        .unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(3), a.hold())
        .await
        .expect("a notices the new holder");
    assert!(matches!(lost, Error::TakenOver { .. }), "{lost}");
}

/// The Leases of the namespace, judged as admission judges them.
async fn served(client: &kube::Client) -> mcm::serving::Served {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let items = leases
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items;
    mcm::serving::served(&items, chrono::Utc::now())
}

#[tokio::test]
async fn the_controllers_heartbeat_while_they_run_and_release_it_when_they_stop() {
    use futures::FutureExt;
    use mcm::serving::{HEARTBEAT_LEASE, Served};
    let client = common::server().await;
    assert_eq!(served(&client).await, Served::No);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = stopped.map(|_| ()).boxed().shared();
    let config = mcm::controllers::Config {
        namespace: NS.into(),
        ..Default::default()
    };
    let run = tokio::spawn(mcm::run::run(
        client.clone(),
        None::<kube::Client>,
        config,
        None,
        shutdown,
    ));
    testkit::eventually("the heartbeat", 10, async || {
        matches!(served(&client).await, Served::Yes { lease, .. } if lease == HEARTBEAT_LEASE)
    })
    .await;
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the controllers stop")
        .unwrap()
        .unwrap();
    match served(&client).await {
        Served::Stale { lease, renewed } => {
            assert_eq!(lease, HEARTBEAT_LEASE);
            assert!(renewed.is_some());
        }
        other => panic!("released, not {other:?}"),
    }
}
