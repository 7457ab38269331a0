//! The machine set and machine deployment controllers against the real
//! embedded API server. A stand-in for the machine controller turns every new
//! machine Running after a short delay; a monitor samples the machines all
//! the time and records any moment a rollout invariant is broken.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use api::{Machine, MachineDeployment, MachinePhase, MachineSet};
use common::{run_controllers, server};
use futures::StreamExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use serde_json::json;
use testkit::eventually;

/// Turns machines without a phase Running after `delay` (what the machine
/// controller and a booting VM would do).
fn fake_machine_controller(client: kube::Client, delay: Duration) {
    let machines: Api<Machine> = Api::namespaced(client, "default");
    tokio::spawn(async move {
        let stream = watcher(machines.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects();
        futures::pin_mut!(stream);
        while let Some(Ok(m)) = stream.next().await {
            if m.phase().is_some() || m.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let machines = machines.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                let patch = json!({"status": {"currentStatus": {"phase": "Running", "lastUpdateTime": now}}});
                let _ = machines
                    .patch_status(
                        m.metadata.name.as_deref().unwrap_or(""),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await;
            });
        }
    });
}

struct Monitor {
    violations: Arc<Mutex<Vec<String>>>,
    armed: Arc<AtomicBool>,
}

/// Samples machines every 10 ms: never more than `max_total` live machines,
/// and (once armed) never fewer than `min_running` Running ones.
fn monitor(client: kube::Client, max_total: usize, min_running: usize) -> Monitor {
    let violations = Arc::new(Mutex::new(Vec::new()));
    let armed = Arc::new(AtomicBool::new(false));
    let (v, a) = (violations.clone(), armed.clone());
    let machines: Api<Machine> = Api::namespaced(client, "default");
    tokio::spawn(async move {
        loop {
            if let Ok(list) = machines.list(&ListParams::default()).await {
                let live: Vec<&Machine> = list
                    .items
                    .iter()
                    .filter(|m| m.metadata.deletion_timestamp.is_none())
                    .collect();
                let running = live
                    .iter()
                    .filter(|m| m.phase() == Some(MachinePhase::Running))
                    .count();
                if live.len() > max_total {
                    v.lock()
                        .push(format!("{} live machines (max {max_total})", live.len()));
                }
                if a.load(Ordering::SeqCst) && running < min_running {
                    v.lock()
                        .push(format!("{running} running machines (min {min_running})"));
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    Monitor { violations, armed }
}

async fn running(machines: &Api<Machine>, class: &str) -> usize {
    machines
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|m| {
            m.metadata.deletion_timestamp.is_none()
                && m.phase() == Some(MachinePhase::Running)
                && m.spec.class.name == class
        })
        .count()
}

async fn live(machines: &Api<Machine>) -> usize {
    machines
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .count()
}

/// An embedded server with the machine set and deployment controllers in
/// namespace `default`, and a stand-in machine controller that turns
/// machines Running after `boot`.
async fn controllers_over_fake_machines(boot: Duration) -> kube::Client {
    let client = server().await;
    fake_machine_controller(client.clone(), boot);
    let config = mcm::controllers::Config {
        namespace: "default".into(),
        ..Default::default()
    };
    run_controllers(&client, config, None);
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_keeps_capacity_and_surge() {
    let client = controllers_over_fake_machines(Duration::from_millis(150)).await;

    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), "default");
    let machines: Api<Machine> = Api::namespaced(client.clone(), "default");
    let sets: Api<MachineSet> = Api::namespaced(client.clone(), "default");
    let md = MachineDeployment::test("web").replicas(3).rolling("1", "0");
    mds.create(&PostParams::default(), &md).await.unwrap();
    eventually("3 running machines", 30, async || {
        running(&machines, "test-class").await == 3
    })
    .await;
    eventually("deployment status", 30, async || {
        mds.get("web")
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.available_replicas == 3 && s.updated_replicas == 3)
    })
    .await;

    // A rollout: never more than 4 machines, never fewer than 3 Running.
    let m = monitor(client.clone(), 4, 3);
    m.armed.store(true, Ordering::SeqCst);
    mds.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"class": {"name": "next-class"}}}}})),
    )
    .await
    .unwrap();
    let done = tokio::time::timeout(Duration::from_secs(60), async {
        while !(running(&machines, "next-class").await == 3 && live(&machines).await == 3) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    if done.is_err() {
        for s in sets.list(&ListParams::default()).await.unwrap().items {
            eprintln!(
                "set {:?} spec={} status={:?} ann={:?} class={}",
                s.metadata.name,
                s.spec.replicas,
                s.status
                    .map(|x| (x.replicas, x.available_replicas, x.ready_replicas)),
                s.metadata.annotations,
                s.spec.template.spec.class.name
            );
        }
        for m in machines.list(&ListParams::default()).await.unwrap().items {
            eprintln!(
                "machine {:?} phase={:?} class={} deleting={}",
                m.metadata.name,
                m.phase(),
                m.spec.class.name,
                m.metadata.deletion_timestamp.is_some()
            );
        }
        eprintln!("md status {:?}", mds.get("web").await.unwrap().status);
        panic!("the rollout did not finish");
    }
    let v = m.violations.lock().clone();
    assert!(
        v.is_empty(),
        "rollout invariants broken: {:?}",
        &v[..v.len().min(10)]
    );
    let all_sets = sets.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(all_sets.len(), 2, "the old set is kept as history");
    let md = mds.get("web").await.unwrap();
    assert_eq!(
        md.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"],
        "2"
    );
    m.armed.store(false, Ordering::SeqCst);

    // Scale up and down.
    mds.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    eventually("5 machines", 30, async || {
        running(&machines, "next-class").await == 5
    })
    .await;
    mds.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .unwrap();
    eventually("2 machines", 30, async || live(&machines).await == 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_pause_and_failed_replacement() {
    let client = controllers_over_fake_machines(Duration::from_millis(100)).await;
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), "default");
    let machines: Api<Machine> = Api::namespaced(client.clone(), "default");
    mds.create(
        &PostParams::default(),
        &MachineDeployment::test("db").replicas(2).recreate(),
    )
    .await
    .unwrap();
    eventually("2 running", 30, async || {
        running(&machines, "test-class").await == 2
    })
    .await;

    // Paused: a template change rolls nothing out.
    mds.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"paused": true, "template": {"spec": {"class": {"name": "v2"}}}}}),
        ),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(running(&machines, "v2").await, 0);
    assert_eq!(running(&machines, "test-class").await, 2);

    // Resumed with Recreate: old and new machines never coexist.
    let m = monitor(client.clone(), 2, 0);
    mds.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": false}})),
    )
    .await
    .unwrap();
    eventually("2 running v2", 60, async || {
        running(&machines, "v2").await == 2
    })
    .await;
    let v = m.violations.lock().clone();
    assert!(v.is_empty(), "{v:?}");

    // A Failed machine is deleted and replaced.
    let victim = machines
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|m| m.metadata.deletion_timestamp.is_none())
        .unwrap();
    let victim_name = victim.metadata.name.clone().unwrap();
    machines
        .patch_status(
            &victim_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"currentStatus": {"phase": "Failed"}}})),
        )
        .await
        .unwrap();
    eventually("the failed machine gone", 30, async || {
        machines.get_opt(&victim_name).await.unwrap().is_none()
    })
    .await;
    eventually("a replacement", 30, async || {
        running(&machines, "v2").await == 2
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscaler_targeted_deletion_removes_exactly_the_named_machine() {
    let client = controllers_over_fake_machines(Duration::from_millis(100)).await;
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), "default");
    let machines: Api<Machine> = Api::namespaced(client.clone(), "default");
    mds.create(
        &PostParams::default(),
        &MachineDeployment::test("ca").replicas(3),
    )
    .await
    .unwrap();
    eventually("3 running", 30, async || {
        running(&machines, "test-class").await == 3
    })
    .await;
    // The youngest machine would be kept by the default order (older first);
    // the autoscaler names it.
    let mut all = machines.list(&ListParams::default()).await.unwrap().items;
    all.sort_by_key(|m| m.metadata.creation_timestamp.clone().map(|t| t.0));
    let victim = all.last().unwrap().metadata.name.clone().unwrap();
    let keep: Vec<String> = all[..2]
        .iter()
        .map(|m| m.metadata.name.clone().unwrap())
        .collect();
    mds.patch(
        "ca",
        &PatchParams::default(),
        &Patch::Merge(json!({
            "metadata": {"annotations": {"node.machine.sapcloud.io/trigger-deletion-by-mcm": victim}},
            "spec": {"replicas": 2},
        })),
    )
    .await
    .unwrap();
    eventually("the named machine gone", 30, async || {
        machines.get_opt(&victim).await.unwrap().is_none()
    })
    .await;
    eventually("2 machines", 30, async || live(&machines).await == 2).await;
    for k in &keep {
        assert!(
            machines.get_opt(k).await.unwrap().is_some(),
            "{k} must survive"
        );
    }
    let md = mds.get("ca").await.unwrap();
    assert!(
        !md.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("node.machine.sapcloud.io/trigger-deletion-by-mcm"),
        "the request is consumed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_restores_the_previous_template() {
    let client = controllers_over_fake_machines(Duration::from_millis(100)).await;
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), "default");
    let machines: Api<Machine> = Api::namespaced(client.clone(), "default");
    mds.create(
        &PostParams::default(),
        &MachineDeployment::test("rb").replicas(2),
    )
    .await
    .unwrap();
    eventually("2 running", 30, async || {
        running(&machines, "test-class").await == 2
    })
    .await;
    mds.patch(
        "rb",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"class": {"name": "v2"}}}}})),
    )
    .await
    .unwrap();
    eventually("2 running v2", 30, async || {
        running(&machines, "v2").await == 2 && live(&machines).await == 2
    })
    .await;
    // Roll back to the previous revision, with surge/availability held.
    let m = monitor(client.clone(), 3, 2);
    m.armed.store(true, Ordering::SeqCst);
    mds.patch(
        "rb",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"rollbackTo": {"revision": 0}}})),
    )
    .await
    .unwrap();
    eventually("2 running of the first class again", 30, async || {
        running(&machines, "test-class").await == 2 && live(&machines).await == 2
    })
    .await;
    let v = m.violations.lock().clone();
    assert!(v.is_empty(), "{:?}", &v[..v.len().min(5)]);
    let md = mds.get("rb").await.unwrap();
    assert!(md.spec.rollback_to.is_none(), "rollbackTo is cleared");
    assert_eq!(md.spec.template.spec.class.name, "test-class");
    assert_eq!(
        md.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"],
        "3"
    );
}
