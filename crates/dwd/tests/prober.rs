//! The prober against embedded API servers (a seed and a shoot): one
//! probe's failure modes (scenarios 9–11), a probe's verdict on real
//! nodes, machines and leases (12–14), and the Cluster watch running,
//! replacing and removing probers as the shoot changes (1–8).

mod common;

use std::time::Duration;

use chrono::Utc;
use common::*;
use dwd::controllers::prober::Prober;
use dwd::lifecycle::NodeConditions;
use dwd::probe::RunResult;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use worker::Cluster;

fn mcm_only() -> String {
    [
        dependant("kube-controller-manager", true, 0, 1, "0s"),
        dependant("machine-controller-manager", false, 1, 0, "0s"),
    ]
    .concat()
}

#[tokio::test]
async fn scenario_9_an_unanswered_version_probe_stops_the_run() {
    let seed = seed().await;
    let client = seed.client();
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let silent = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            open.push(s);
        }
    });
    write_secret(&client, &url).await;
    let shared = shared(&client);
    let config = prober_config("probeTimeout: 300ms", &mcm_only());
    let mut prober = Prober::new(NS, config, NodeConditions::new(), shared.clone());
    let report = prober.probe(&CancellationToken::new()).await;
    assert_eq!(report.result, RunResult::ApiServerUnreachable);
    assert!(report.verdict.is_none() && report.flow.is_none());
    assert_eq!(
        shared.metrics.requests(),
        (1, 1),
        "the secret and /version, no node or lease calls"
    );
    silent.abort();
}

#[tokio::test]
async fn scenario_10_a_missing_secret_is_read_once_and_again_next_cycle() {
    let seed = seed().await;
    let shoot = shoot().await;
    let client = seed.client();
    let shared = shared(&client);
    let mut prober = Prober::new(
        NS,
        prober_config("", &mcm_only()),
        NodeConditions::new(),
        shared.clone(),
    );
    let cancel = CancellationToken::new();
    let report = prober.probe(&cancel).await;
    assert_eq!(report.result, RunResult::NoKubeconfig);
    assert_eq!(shared.metrics.requests(), (1, 0), "exactly one Get");
    prober.probe(&cancel).await;
    assert_eq!(
        shared.metrics.requests(),
        (2, 0),
        "the next cycle tries again"
    );
    // Once the Secret is there, probing goes on: no nodes means scale-up,
    // which finds nothing to do.
    write_secret(&client, shoot.url()).await;
    deployment(&client, "machine-controller-manager", 1, json!({})).await;
    let report = prober.probe(&cancel).await;
    assert_eq!(report.result, RunResult::Healthy);
    assert!(matches!(report.flow, Some(Ok(_))), "{:?}", report.flow);
    assert_eq!(replicas(&client, "machine-controller-manager").await.0, 1);
}

/// Stands in front of a shoot that throttles: `/version` answers, the
/// node list is empty, everything else is 429 TooManyRequests.
async fn throttling_api() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let mut chunk = [0u8; 4096];
                    let Ok(n) = s.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        buf.drain(..end + 4);
                        let path = head.split(' ').nth(1).unwrap_or("").to_string();
                        let (status, body) = if path.starts_with("/version") {
                            (
                                "200 OK",
                                json!({"major": "1", "minor": "32", "gitVersion": "v1.32.0",
                                "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "",
                                "compiler": "", "platform": ""}),
                            )
                        } else if path.starts_with("/api/v1/nodes") {
                            (
                                "200 OK",
                                json!({"kind": "NodeList", "apiVersion": "v1",
                                "metadata": {"resourceVersion": "1"}, "items": []}),
                            )
                        } else {
                            (
                                "429 Too Many Requests",
                                json!({"kind": "Status", "apiVersion": "v1",
                                "status": "Failure", "message": "too many requests",
                                "reason": "TooManyRequests", "code": 429}),
                            )
                        };
                        let body = body.to_string();
                        let reply = format!(
                            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if s.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (url, task)
}

#[tokio::test]
async fn scenario_11_a_throttled_lease_list_backs_off_the_next_probe() {
    let seed = seed().await;
    let client = seed.client();
    let (url, api) = throttling_api().await;
    write_secret(&client, &url).await;
    deployment(&client, "machine-controller-manager", 1, json!({})).await;
    let shared = shared(&client);
    let mut prober = Prober::new(
        NS,
        prober_config("", &mcm_only()),
        NodeConditions::new(),
        shared.clone(),
    );
    let report = prober.probe(&CancellationToken::new()).await;
    assert_eq!(report.result, RunResult::LeaseProbeFailed);
    assert!(report.throttled, "the 429 arms the back-off: {report:?}");
    assert!(report.flow.is_none(), "no scaling");

    // The loop: a 200 ms interval would give about 15 probes in 3 s; the
    // back-off holds the second one for 10 s more.
    let cancel = CancellationToken::new();
    tokio::spawn(prober.run(cancel.clone()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(shared.metrics.probes_with(NS, "lease_probe_failed"), 1);
    cancel.cancel();
    assert_eq!(replicas(&client, "machine-controller-manager").await.0, 1);
    api.abort();
}

#[tokio::test]
async fn scenarios_12_to_14_verdicts_on_real_leases() {
    let seed = seed().await;
    let shoot = shoot().await;
    let (client, target) = (seed.client(), shoot.client());
    let mirror = mirror_readiness(client.clone());
    write_secret(&client, shoot.url()).await;
    deployment(&client, "machine-controller-manager", 2, json!({})).await;
    let shared = shared(&client);
    let mut prober = Prober::new(
        NS,
        prober_config("", &mcm_only()),
        NodeConditions::new(),
        shared.clone(),
    );
    let cancel = CancellationToken::new();
    // 12: 6 of 10 expired.
    fleet(&client, &target, 10, 6).await;
    let report = prober.probe(&cancel).await;
    let v = report.verdict.clone().unwrap();
    assert_eq!((v.candidates, v.expired), (10, 6));
    assert_eq!(report.result, RunResult::LeasesExpired);
    assert!(matches!(report.flow, Some(Ok(_))), "{:?}", report.flow);
    let r = replicas(&client, "machine-controller-manager").await;
    assert_eq!(r.0, 0);
    assert_eq!(
        r.1.get(dwd::scale::REPLICAS_ANNOTATION).map(String::as_str),
        Some("2")
    );
    let notes = events(&client, "machine-controller-manager").await;
    assert!(
        notes
            .iter()
            .any(|(reason, note)| reason == "ScaledDown"
                && note.contains("6 of 10 node leases expired")),
        "{notes:?}"
    );
    // 13: one renewed again, 5 of 10: scale-up to the annotation's 2.
    renew(&target, "n0", Utc::now()).await;
    let report = prober.probe(&cancel).await;
    assert_eq!(report.verdict.as_ref().unwrap().expired, 5);
    assert_eq!(report.result, RunResult::Healthy);
    let r = replicas(&client, "machine-controller-manager").await;
    assert_eq!(r.0, 2);
    assert!(!r.1.contains_key(dwd::scale::MELTDOWN_ANNOTATION));
    mirror.cancel();
}

#[tokio::test]
async fn scenario_14_excluded_nodes_never_count() {
    let seed = seed().await;
    let shoot = shoot().await;
    let (client, target) = (seed.client(), shoot.client());
    write_secret(&client, shoot.url()).await;
    deployment(&client, "machine-controller-manager", 1, json!({})).await;
    testkit::namespace(&target, "kube-node-lease").await;
    let old = Utc::now() - chrono::Duration::seconds(60);
    let ready = json!([{"type": "Ready", "status": "True"}]);
    node(
        &target,
        "unmanaged",
        ready.clone(),
        json!({"node.machine.sapcloud.io/not-managed-by-mcm": "1"}),
    )
    .await;
    machine(&client, "unmanaged", "Running").await;
    node(
        &target,
        "pressured",
        json!([{"type": "DiskPressure", "status": "True"}]),
        json!({}),
    )
    .await;
    machine(&client, "pressured", "Running").await;
    node(&target, "leaving", ready, json!({})).await;
    machine(&client, "leaving", "Terminating").await;
    for n in ["unmanaged", "pressured", "leaving"] {
        renew(&target, n, old).await;
    }
    let mut prober = Prober::new(
        NS,
        prober_config("", &mcm_only()),
        NodeConditions::new(),
        shared(&client),
    );
    let report = prober.probe(&CancellationToken::new()).await;
    let v = report.verdict.unwrap();
    assert_eq!((v.candidates, v.expired), (0, 0));
    assert_eq!(v.excluded.len(), 3);
    assert_eq!(
        report.result,
        RunResult::Healthy,
        "scale-up, never scale-down"
    );
    assert_eq!(replicas(&client, "machine-controller-manager").await.0, 1);
}

fn cluster_shoot(op: Option<(&str, &str)>, workers: usize) -> Value {
    let workers: Vec<Value> = (0..workers)
        .map(|i| json!({"name": format!("pool-{i}"), "machine": {"type": "local"}, "minimum": 1, "maximum": 3}))
        .collect();
    let mut shoot = json!({
        "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
        "metadata": {"name": "a", "namespace": "garden-p"},
        "spec": {"provider": {"type": "local", "workers": workers}, "region": "local"},
        "status": {"technicalID": NS},
    });
    if let Some((t, s)) = op {
        shoot["status"]["lastOperation"] = json!({"type": t, "state": s, "progress": 100});
    }
    shoot
}

async fn set_shoot(clusters: &Api<Cluster>, shoot: Value) {
    match clusters.get_opt(NS).await.unwrap() {
        None => {
            let c: Cluster = serde_json::from_value(json!({
                "apiVersion": "extensions.gardener.cloud/v1alpha1", "kind": "Cluster",
                "metadata": {"name": NS},
                "spec": {"cloudProfile": {}, "seed": {}, "shoot": shoot},
            }))
            .unwrap();
            clusters.create(&PostParams::default(), &c).await.unwrap();
        }
        // Replaced whole, not merged: a merge patch would keep fields
        // the new shoot leaves out (`spec.hibernation`, `status.hibernated`).
        Some(mut c) => {
            c.spec.shoot = shoot;
            clusters
                .replace(NS, &PostParams::default(), &c)
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn scenarios_1_to_8_the_cluster_watch_runs_probers_as_the_shoot_says() {
    let seed = seed().await;
    let shoot = shoot().await;
    let (client, target) = (seed.client(), shoot.client());
    let mirror = mirror_readiness(client.clone());
    write_secret(&client, shoot.url()).await;
    deployment(&client, "machine-controller-manager", 1, json!({})).await;
    fleet(&client, &target, 4, 0).await;
    let metrics = std::sync::Arc::new(dwd::Metrics::new());
    let shutdown = CancellationToken::new();
    let config = prober_config("initialDelay: 1s", &mcm_only());
    let manager = dwd::run::prober_manager(client.clone(), config, metrics.clone(), &shutdown);
    tokio::spawn(dwd::run::run_prober(
        client.clone(),
        manager.clone(),
        shutdown.clone(),
    ));
    let clusters: Api<Cluster> = Api::all(client.clone());
    let running = |m: &dwd::controllers::cluster::ProberManager| m.running() == [NS.to_string()];
    let settle = || tokio::time::sleep(Duration::from_millis(500));

    // 2: no lastOperation, then Create/Processing: no prober.
    set_shoot(&clusters, cluster_shoot(None, 2)).await;
    settle().await;
    assert!(manager.running().is_empty());
    set_shoot(&clusters, cluster_shoot(Some(("Create", "Processing")), 2)).await;
    settle().await;
    assert!(manager.running().is_empty());

    // 1: Create/Succeeded starts one, which probes after its initial delay.
    set_shoot(&clusters, cluster_shoot(Some(("Create", "Succeeded")), 2)).await;
    eventually("a prober", 5, async || running(&manager)).await;
    assert_eq!(
        metrics.probes_with(NS, "healthy"),
        0,
        "not before the initial delay"
    );
    eventually("a first probe", 5, async || {
        metrics.probes_with(NS, "healthy") > 0
    })
    .await;

    // 8: a label change leaves it alone; a node-condition change replaces it.
    let started = manager.started();
    let mut labelled = cluster_shoot(Some(("Reconcile", "Succeeded")), 2);
    labelled["spec"]["provider"]["workers"][0]["labels"] = json!({"team": "a"});
    set_shoot(&clusters, labelled.clone()).await;
    settle().await;
    assert_eq!(manager.started(), started, "no restart on a label change");
    labelled["spec"]["provider"]["workers"][0]["machineControllerManager"] =
        json!({"nodeConditions": ["KernelDeadlock"]});
    set_shoot(&clusters, labelled.clone()).await;
    eventually("a restarted prober", 5, async || {
        manager.started() == started + 1
    })
    .await;
    assert!(running(&manager));

    // 12 through the watch: most leases expire, MCM goes down.
    for n in ["n0", "n1", "n2"] {
        renew(&target, n, Utc::now() - chrono::Duration::seconds(31)).await;
    }
    eventually("MCM scaled down", 10, async || {
        replicas(&client, "machine-controller-manager").await.0 == 0
    })
    .await;
    for n in ["n0", "n1", "n2"] {
        renew(&target, n, Utc::now()).await;
    }
    eventually("MCM scaled up", 10, async || {
        replicas(&client, "machine-controller-manager").await.0 == 1
    })
    .await;

    // 4: hibernation removes it, and nothing is scaled afterwards.
    let mut hibernating = labelled.clone();
    hibernating["spec"]["hibernation"] = json!({"enabled": true});
    set_shoot(&clusters, hibernating).await;
    eventually("no prober", 5, async || manager.running().is_empty()).await;
    for n in ["n0", "n1", "n2", "n3"] {
        renew(&target, n, Utc::now() - chrono::Duration::seconds(60)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        replicas(&client, "machine-controller-manager").await.0,
        1,
        "nothing scaled while hibernated"
    );
    for n in ["n0", "n1", "n2", "n3"] {
        renew(&target, n, Utc::now()).await;
    }

    // 5: waking up (hibernation off, still hibernated): none starts.
    let mut waking = labelled.clone();
    waking["status"]["hibernated"] = json!(true);
    set_shoot(&clusters, waking).await;
    settle().await;
    assert!(manager.running().is_empty());

    // 3: Reconcile/Error starts one.
    let mut erring = labelled.clone();
    erring["status"]["lastOperation"] = json!({"type": "Reconcile", "state": "Error"});
    set_shoot(&clusters, erring).await;
    eventually("a prober", 5, async || running(&manager)).await;

    // 6: Migrate removes it.
    let mut migrating = labelled.clone();
    migrating["status"]["lastOperation"] = json!({"type": "Migrate", "state": "Processing"});
    set_shoot(&clusters, migrating).await;
    eventually("no prober", 5, async || manager.running().is_empty()).await;

    // 7: zero workers removes it.
    set_shoot(&clusters, labelled.clone()).await;
    eventually("a prober", 5, async || running(&manager)).await;
    set_shoot(
        &clusters,
        cluster_shoot(Some(("Reconcile", "Succeeded")), 0),
    )
    .await;
    eventually("no prober", 5, async || manager.running().is_empty()).await;

    // 6: deleting the Cluster removes it.
    set_shoot(&clusters, labelled).await;
    eventually("a prober", 5, async || running(&manager)).await;
    clusters.delete(NS, &DeleteParams::default()).await.unwrap();
    eventually("no prober", 5, async || manager.running().is_empty()).await;

    shutdown.cancel();
    mirror.cancel();
}

#[tokio::test]
async fn scenario_7_a_cluster_created_without_workers_gets_no_prober() {
    let seed = seed().await;
    let client = seed.client();
    let metrics = std::sync::Arc::new(dwd::Metrics::new());
    let shutdown = CancellationToken::new();
    let manager = dwd::run::prober_manager(
        client.clone(),
        prober_config("", &mcm_only()),
        metrics.clone(),
        &shutdown,
    );
    tokio::spawn(dwd::run::run_prober(
        client.clone(),
        manager.clone(),
        shutdown.clone(),
    ));
    eventually("the watch is synced", 5, async || metrics.is_ready()).await;
    let clusters: Api<Cluster> = Api::all(client.clone());
    set_shoot(&clusters, cluster_shoot(Some(("Create", "Succeeded")), 0)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(manager.running().is_empty());
    assert_eq!(manager.started(), 0);
    shutdown.cancel();
}
