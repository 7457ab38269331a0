//! The safety controller against the embedded API server with the local
//! provider: VMs created behind the controllers' back are collected (and
//! VMs a machine may still adopt are not), Nodes without machines are
//! disowned and reclaimed, an overshooting machine set freezes with its
//! deployment and thaws again, and the API-server freeze stops the machine
//! controller and moves health clocks past the outage.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use api::{
    ConditionStatus, Machine, MachineClass, MachineDeployment, MachineDeploymentConditionType,
    MachinePhase, MachineSet, MachineSetConditionType, labels, machine_deployment_reasons,
};
use common::{provider, run_controllers, system_namespaces};
use driver::{CreateMachineRequest, Driver};
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use mcm::controllers::safety::{self, Probe};
use mcm::controllers::{Config, Context, MachineDeps};
use mcm::safety::Outage;
use parking_lot::Mutex;
use provider_local::LocalProvider;
use serde_json::json;
use testkit::eventually;

const NS: &str = "default";

/// The embedded API server with the machine CRDs and the system
/// namespaces; a client for it.
async fn server() -> kube::Client {
    let client = common::server().await;
    system_namespaces(&client).await;
    client
}

/// The safety periods compressed to test scale.
fn config() -> Config {
    let mut c = Config {
        namespace: NS.into(),
        machine_safety_orphan_vms_period: Duration::from_secs(1),
        machine_safety_overshooting_period: Duration::from_millis(300),
        machine_safety_apiserver_statuscheck_period: Duration::from_millis(200),
        machine_safety_apiserver_statuscheck_timeout: Duration::from_secs(1),
        ..Config::default()
    };
    c.machine.creation_timeout = Duration::from_secs(5);
    c
}

/// The local class `test-class` and its secret.
async fn class(client: &kube::Client) -> (MachineClass, Secret) {
    let classes: Api<MachineClass> = Api::namespaced(client.clone(), NS);
    let mut class = MachineClass::test("test-class");
    class.provider_spec = json!({"bootDelay": "200ms"});
    let class = classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "test-class-secret"},
        "stringData": {"userData": "#cloud-config\n"}
    }))
    .unwrap();
    let secret = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    (class, secret)
}

/// A VM made straight through the driver, as if someone (or a crashed
/// controller) had created it without a machine.
async fn vm_behind_the_back(
    provider: &LocalProvider,
    name: &str,
    class: &MachineClass,
    secret: &Secret,
) -> String {
    provider
        .create_machine(CreateMachineRequest {
            machine: &Machine::test(name),
            machine_class: class,
            secret,
        })
        .await
        .unwrap()
        .provider_id
}

/// A machine the machine controller leaves alone (its class does not
/// exist), with the given phase and providerID.
async fn parked_machine(
    machines: &Api<Machine>,
    name: &str,
    phase: MachinePhase,
    provider_id: &str,
    node: Option<&str>,
) {
    let mut m = Machine::test(name).class("no-such-class");
    m.spec.provider_id = provider_id.to_string();
    if let Some(n) = node {
        m = m.with_node(n);
    }
    machines.create(&PostParams::default(), &m).await.unwrap();
    let patch = json!({"status": {"currentStatus": {"phase": phase.to_string()}}});
    machines
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

fn annotated(n: &Node) -> bool {
    n.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::NOT_MANAGED_BY_MCM))
        .is_some_and(|v| v == "1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_vms_are_collected_and_adoptable_ones_kept() {
    let client = server().await;
    let provider = provider(&client).await;
    run_controllers(&client, config(), Some(Arc::new(provider.clone())));
    let (class, secret) = class(&client).await;
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let nodes: Api<Node> = Api::all(client.clone());

    // A real machine with its VM, through the controllers.
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    mds.create(
        &PostParams::default(),
        &MachineDeployment::test("web").replicas(1),
    )
    .await
    .unwrap();
    eventually("a running machine", 30, async || {
        machines
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|m| m.phase() == Some(MachinePhase::Running))
    })
    .await;
    let web = machines.list(&ListParams::default()).await.unwrap().items[0].clone();
    let web_vm = web.spec.provider_id.clone();

    // Behind the controllers' back: a VM without a machine, a VM for a
    // crash-looping machine (which would adopt it), and a VM for a machine
    // that already runs on another VM.
    parked_machine(
        &machines,
        "crashy",
        MachinePhase::CrashLoopBackOff,
        "",
        None,
    )
    .await;
    parked_machine(
        &machines,
        "dup",
        MachinePhase::Running,
        "local:///default/00000000deadbeef",
        None,
    )
    .await;
    let started = tokio::time::Instant::now();
    let ghost = vm_behind_the_back(&provider, "ghost", &class, &secret).await;
    let crashy = vm_behind_the_back(&provider, "crashy", &class, &secret).await;
    let dup = vm_behind_the_back(&provider, "dup", &class, &secret).await;
    assert_eq!(provider.vms().len(), 4);

    eventually("the orphan VMs deleted", 10, async || {
        let vms = provider.vms();
        !vms.contains_key(&ghost) && !vms.contains_key(&dup)
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "collected within a few periods: {:?}",
        started.elapsed()
    );
    // Three more periods: the adoptable VM and the real one stay.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let left: BTreeSet<String> = provider.vms().into_keys().collect();
    assert_eq!(left, BTreeSet::from([web_vm.clone(), crashy.clone()]));
    let m = machines.get("crashy").await.unwrap();
    assert_eq!(m.phase(), Some(MachinePhase::CrashLoopBackOff));

    // Node "ghost" outlived its VM and no machine maps to it: once older
    // than the creation timeout it is marked not managed and loses the
    // node finalizer. The web machine's node is untouched.
    eventually("the ghost node disowned", 15, async || {
        nodes
            .get_opt("ghost")
            .await
            .unwrap()
            .is_some_and(|n| annotated(&n))
    })
    .await;
    let n = nodes.get("ghost").await.unwrap();
    assert!(
        !n.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == labels::NODE_FINALIZER)
    );
    let web_node = nodes
        .get(&web.metadata.name.clone().unwrap())
        .await
        .unwrap();
    assert!(!annotated(&web_node));
    assert!(
        web_node
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == labels::NODE_FINALIZER)
    );

    // A machine that maps to the node reclaims it.
    parked_machine(
        &machines,
        "adopter",
        MachinePhase::Running,
        "",
        Some("ghost"),
    )
    .await;
    eventually("the ghost node reclaimed", 10, async || {
        !annotated(&nodes.get("ghost").await.unwrap())
    })
    .await;
    assert!(provider.vms().contains_key(&web_vm));
}

/// Machines counted against `set` that it does not control: labelled like
/// its machines, with a non-controller owner reference to it, so the set
/// neither deletes them nor counts them as its own replicas.
async fn extra_machines(machines: &Api<Machine>, set: &MachineSet, names: &[&str]) {
    for name in names {
        let mut m = Machine::test(name);
        m.metadata.labels = set.spec.template.metadata.labels.clone();
        m.metadata.owner_references = Some(vec![OwnerReference {
            api_version: api::GROUP_VERSION.into(),
            kind: "MachineSet".into(),
            name: set.metadata.name.clone().unwrap(),
            uid: set.metadata.uid.clone().unwrap(),
            controller: Some(false),
            block_owner_deletion: None,
        }]);
        machines.create(&PostParams::default(), &m).await.unwrap();
    }
}

fn controlled_by(m: &Machine, uid: &str) -> bool {
    m.metadata.deletion_timestamp.is_none()
        && m.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && o.uid == uid)
}

fn frozen_label(meta: &kube::api::ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(labels::FREEZE))
        .is_some_and(|v| v == labels::TRUE)
}

fn set_frozen(s: &MachineSet) -> Option<String> {
    s.status.as_ref().and_then(|st| {
        st.conditions
            .iter()
            .find(|c| {
                c.type_ == MachineSetConditionType::Frozen && c.status == ConditionStatus::True
            })
            .map(|c| c.reason.clone())
    })
}

fn md_frozen(d: &MachineDeployment) -> Option<String> {
    d.status.as_ref().and_then(|st| {
        st.conditions
            .iter()
            .find(|c| {
                c.type_ == MachineDeploymentConditionType::Frozen
                    && c.status == ConditionStatus::True
            })
            .map(|c| c.reason.clone())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overshooting_freezes_the_set_and_deployment_then_thaws() {
    let client = server().await;
    // No driver: machines are only objects, which is all the count needs.
    run_controllers(&client, config(), None);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let sets: Api<MachineSet> = Api::namespaced(client.clone(), NS);
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    // replicas 1 + maxSurge 1 + safety-up 2: frozen at 4, thawed at 3.
    mds.create(
        &PostParams::default(),
        &MachineDeployment::test("web").replicas(1),
    )
    .await
    .unwrap();
    eventually("the set and its machine", 20, async || {
        let l = sets.list(&ListParams::default()).await.unwrap().items;
        l.len() == 1
            && machines
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len()
                == 1
    })
    .await;
    let set = sets.list(&ListParams::default()).await.unwrap().items[0].clone();
    let set_name = set.metadata.name.clone().unwrap();
    let uid = set.metadata.uid.clone().unwrap();

    extra_machines(&machines, &set, &["x0", "x1", "x2", "x3", "x4", "x5"]).await;
    eventually("the set and deployment frozen", 10, async || {
        let s = sets.get(&set_name).await.unwrap();
        let d = mds.get("web").await.unwrap();
        frozen_label(&s.metadata)
            && set_frozen(&s).as_deref()
                == Some(machine_deployment_reasons::OVERSHOOTING_REPLICA_COUNT)
            && frozen_label(&d.metadata)
            && md_frozen(&d).as_deref()
                == Some(machine_deployment_reasons::OVERSHOOTING_REPLICA_COUNT)
    })
    .await;

    // While frozen, nothing is created: not to replace a deleted machine,
    // not for a scale-up. The deployment itself is still processed.
    let created = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (created, machines, uid) = (created.clone(), machines.clone(), uid.clone());
        let own: Vec<Machine> = machines.list(&ListParams::default()).await.unwrap().items;
        let before: BTreeSet<String> = own
            .iter()
            .filter(|m| controlled_by(m, &uid))
            .filter_map(|m| m.metadata.name.clone())
            .collect();
        tokio::spawn(async move {
            loop {
                if let Ok(l) = machines.list(&ListParams::default()).await
                    && l.items.iter().any(|m| {
                        controlled_by(m, &uid)
                            && !before.contains(m.metadata.name.as_deref().unwrap_or(""))
                    })
                {
                    created.store(true, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    for m in machines.list(&ListParams::default()).await.unwrap().items {
        if controlled_by(&m, &uid) {
            machines
                .delete(&m.metadata.name.unwrap(), &DeleteParams::default())
                .await
                .unwrap();
        }
    }
    // replicas 2: frozen at 5, thawed at 4; 6 extra machines keep it frozen.
    mds.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .unwrap();
    eventually("the set scaled by its deployment", 10, async || {
        sets.get(&set_name).await.unwrap().spec.replicas == 2
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    sampler.abort();
    assert!(
        !created.load(Ordering::SeqCst),
        "a frozen set created a machine"
    );
    let s = sets.get(&set_name).await.unwrap();
    assert!(frozen_label(&s.metadata) && set_frozen(&s).is_some());

    // Back to 2 counted machines (at most 4): both thaw, and the set
    // creates its two machines.
    for name in ["x0", "x1", "x2", "x3"] {
        machines
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("the set and deployment thawed", 10, async || {
        let s = sets.get(&set_name).await.unwrap();
        let d = mds.get("web").await.unwrap();
        !frozen_label(&s.metadata)
            && set_frozen(&s).is_none()
            && !frozen_label(&d.metadata)
            && md_frozen(&d).is_none()
    })
    .await;
    eventually("the set's machines created", 10, async || {
        machines
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|m| controlled_by(m, &uid))
            .count()
            == 2
    })
    .await;
    // Events are recorded after the writes waited on above, so they may
    // arrive a moment later.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    let wanted = [
        "FrozeMachineSet",
        "UnfrozeMachineSet",
        "FrozeMachineDeployment",
        "UnfrozeMachineDeployment",
    ];
    eventually("the freeze and thaw events", 10, async || {
        let reasons: BTreeSet<String> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reporting_controller.as_deref() == Some(safety::REPORTER))
            .filter_map(|e| e.reason)
            .collect();
        wanted.iter().all(|w| reasons.contains(*w))
    })
    .await;

    // The unfreeze annotation forces a thaw and is removed.
    extra_machines(&machines, &set, &["y0", "y1", "y2"]).await;
    eventually("frozen again", 10, async || {
        frozen_label(&sets.get(&set_name).await.unwrap().metadata)
    })
    .await;
    sets.patch(
        &set_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {labels::UNFREEZE: "true"}}})),
    )
    .await
    .unwrap();
    eventually("the annotation honoured", 10, async || {
        let s = sets.get(&set_name).await.unwrap();
        !s.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(labels::UNFREEZE))
    })
    .await;
}

/// A probe whose answer the test switches.
struct SwitchProbe(Arc<AtomicBool>);

impl Probe for SwitchProbe {
    fn probe(&self) -> BoxFuture<'_, Result<(), String>> {
        let up = self.0.load(Ordering::SeqCst);
        async move {
            if up {
                Ok(())
            } else {
                Err("injected outage".into())
            }
        }
        .boxed()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_machine_controller_leaves_live_machines_alone() {
    let client = server().await;
    let provider = provider(&client).await;
    let (machine_store, set_store) = mcm::controllers::context::empty_caches();
    let (node_store, _node_writer) =
        mcm::controllers::cache::cache::<Node>(mcm::controllers::cache::node_keys);
    let recorder = mcm::controllers::events::EventRecorder::new(
        client.clone(),
        Reporter {
            controller: "test".into(),
            instance: None,
        },
    );
    let deps = MachineDeps::new(Arc::new(provider), node_store, recorder);
    let ctx = Context::new(
        client.clone(),
        client.clone(),
        machine_store,
        set_store,
        config(),
        Some(deps),
    );
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let m = machines
        .create(&PostParams::default(), &Machine::test("m1"))
        .await
        .unwrap();

    // The probe fails for longer than the timeout: frozen.
    let up = Arc::new(AtomicBool::new(false));
    let outages: Arc<Mutex<Vec<Outage>>> = Arc::default();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let watcher = {
        let (ctx, up, outages) = (ctx.clone(), up.clone(), outages.clone());
        tokio::spawn(async move {
            let probe = SwitchProbe(up);
            safety::watch_api_servers(
                &ctx.safety,
                &probe,
                Duration::from_millis(50),
                Duration::from_millis(300),
                |o| {
                    outages.lock().push(o);
                    futures::future::ready(Ok(()))
                },
                async {
                    let _ = stop_rx.await;
                },
            )
            .await
        })
    };
    eventually("frozen", 5, async || ctx.safety.frozen()).await;
    assert!(!ctx.safety.may_collect_orphans());

    // A live machine is not reconciled: no finalizer, requeued after the
    // long period.
    let action = mcm::controllers::machine::reconcile(Arc::new(m.clone()), ctx.clone())
        .await
        .unwrap();
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(driver::LONG_RETRY)
    );
    let now = machines.get("m1").await.unwrap();
    assert!(now.metadata.finalizers.is_none(), "reconciled while frozen");

    // Recovery: one recovery with the outage, unfrozen, and the machine is
    // reconciled again.
    up.store(true, Ordering::SeqCst);
    eventually("unfrozen", 5, async || !ctx.safety.frozen()).await;
    assert_eq!(outages.lock().len(), 1);
    let _ = mcm::controllers::machine::reconcile(Arc::new(m), ctx.clone()).await;
    let now = machines.get("m1").await.unwrap();
    assert!(
        now.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == labels::MCM_FINALIZER)
    );
    let _ = stop_tx.send(());
    watcher.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_moves_health_clocks_past_the_outage() {
    let client = server().await;
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let now = chrono::Utc::now();
    let at = |secs: i64| {
        (now - chrono::Duration::seconds(secs)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    for (name, phase, since) in [
        ("before", "Unknown", at(100)),
        ("during", "Unknown", at(20)),
        ("running", "Running", at(100)),
    ] {
        machines
            .create(&PostParams::default(), &Machine::test(name))
            .await
            .unwrap();
        let patch = json!({"status": {"currentStatus": {"phase": phase, "lastUpdateTime": since}}});
        machines
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let outage = Outage {
        since: now - chrono::Duration::seconds(50),
        until: now,
    };
    let updated = safety::restart_health_clocks(&machines, &outage)
        .await
        .unwrap();
    assert_eq!(updated, 2);
    let since = |m: &Machine| {
        m.status
            .as_ref()
            .and_then(|s| s.current_status.last_update_time.as_ref())
            .map(|t| t.0.as_second())
            .unwrap()
    };
    let secs = |d: chrono::DateTime<chrono::Utc>| d.timestamp();
    // Unknown 50s before the outage: 50s used up, the outage not counted.
    assert_eq!(
        since(&machines.get("before").await.unwrap()),
        secs(now) - 100 + 50
    );
    // Unknown during the outage: counts from the recovery.
    assert_eq!(since(&machines.get("during").await.unwrap()), secs(now));
    // Running machines keep their clock; phases are never reset.
    assert_eq!(
        since(&machines.get("running").await.unwrap()),
        secs(now) - 100
    );
    for name in ["before", "during"] {
        assert_eq!(
            machines.get(name).await.unwrap().phase(),
            Some(MachinePhase::Unknown)
        );
    }
}
