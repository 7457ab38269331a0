//! Machine classes and the machines that use them, against the embedded API
//! server with the local provider (one server as control and target
//! cluster): an in-use class cannot go away under its machines, a
//! deployment whose class never existed can be deleted, a machine that
//! could not be created for want of its class recovers once the class
//! exists, and a VM whose class is gone is deleted with the class the
//! machine recorded — or, without a record, kept (never orphaned) with a
//! status that says what to do until the class is back.

mod common;

use std::sync::Arc;
use std::time::Duration;

use api::{
    Machine, MachineClass, MachineDeployment, MachineOperationType, MachinePhase, MachineState,
    labels,
};
use common::{run_controllers, system_namespaces};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use mcm::machine::{DELETION_STEP, LAST_KNOWN_CLASS};
use mcm::metrics::Metrics;
use provider_local::LocalProvider;
use serde_json::json;
use testkit::eventually_or;

const NS: &str = "default";

struct Env {
    provider: LocalProvider,
    metrics: Arc<Metrics>,
    machines: Api<Machine>,
    mds: Api<MachineDeployment>,
    classes: Api<MachineClass>,
    secrets: Api<Secret>,
    nodes: Api<Node>,
}

async fn start() -> Env {
    let client = common::server().await;
    system_namespaces(&client).await;
    let provider = common::provider(&client).await;
    let metrics = Arc::new(Metrics::new());
    let config = mcm::controllers::Config {
        namespace: NS.into(),
        metrics: metrics.clone(),
        ..Default::default()
    };
    run_controllers(&client, config, Some(Arc::new(provider.clone())));
    Env {
        machines: Api::namespaced(client.clone(), NS),
        mds: Api::namespaced(client.clone(), NS),
        classes: Api::namespaced(client.clone(), NS),
        secrets: Api::namespaced(client.clone(), NS),
        nodes: Api::all(client),
        provider,
        metrics,
    }
}

/// The secret `<name>-secret` and the local class `name` using it.
async fn class(env: &Env, name: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-secret")},
        "stringData": {"userData": "#cloud-config\nname: <<MACHINE_NAME>>\n"}
    }))
    .unwrap();
    env.secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    create_class(env, name).await;
}

/// The local class `name` (its secret `<name>-secret`).
async fn create_class(env: &Env, name: &str) {
    let mut class = MachineClass::test(name);
    class.provider_spec = json!({"bootDelay": "200ms"});
    env.classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
}

async fn deployment(env: &Env, name: &str, class: &str, replicas: i32) {
    let md = MachineDeployment::test(name)
        .class(class)
        .replicas(replicas);
    env.mds.create(&PostParams::default(), &md).await.unwrap();
}

async fn list(env: &Env) -> Vec<Machine> {
    env.machines
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

async fn running(env: &Env) -> Vec<Machine> {
    list(env)
        .await
        .into_iter()
        .filter(|m| {
            m.metadata.deletion_timestamp.is_none() && m.phase() == Some(MachinePhase::Running)
        })
        .collect()
}

fn last_op(m: &Machine) -> api::LastOperation {
    m.status.clone().unwrap_or_default().last_operation
}

async fn dump(env: &Env) {
    for m in list(env).await {
        eprintln!(
            "machine {} phase={:?} deleting={} step={:?} annotations={:?} lastOp={:?}",
            m.name_any(),
            m.phase(),
            m.metadata.deletion_timestamp.is_some(),
            m.annotations().get(DELETION_STEP),
            m.annotations().keys().collect::<Vec<_>>(),
            last_op(&m),
        );
    }
    for c in env
        .classes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        eprintln!(
            "class {} deleting={} finalizers={:?}",
            c.name_any(),
            c.metadata.deletion_timestamp.is_some(),
            c.metadata.finalizers
        );
    }
    eprintln!("vms {:?}", env.provider.vms());
}

/// Polls `f` until it holds; dumps machines, classes and VMs before
/// failing.
async fn wait_for(env: &Env, what: &str, secs: u64, f: impl AsyncFnMut() -> bool) {
    eventually_or(what, secs, f, async || dump(env).await).await
}

fn has(finalizers: &Option<Vec<String>>, f: &str) -> bool {
    finalizers.iter().flatten().any(|x| x == f)
}

/// Driver calls of one operation so far, from the metering decorator.
fn driver_calls(env: &Env, operation: &str) -> u64 {
    let text = env.metrics.encode();
    let prefix = format!(
        "mcm_cloud_api_driver_request_duration_seconds_count{{provider=\"local\",operation=\"{operation}\"}} "
    );
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|n| n.trim().parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_use_class_waits_for_its_machines_before_it_goes() {
    let env = start().await;
    class(&env, "test-class").await;
    deployment(&env, "web", "test-class", 2).await;
    wait_for(&env, "2 running machines", 30, async || {
        running(&env).await.len() == 2
    })
    .await;
    let c = env.classes.get("test-class").await.unwrap();
    assert!(has(&c.metadata.finalizers, labels::MCM_FINALIZER), "{c:?}");
    wait_for(&env, "the class secret's finalizer", 10, async || {
        has(
            &env.secrets
                .get("test-class-secret")
                .await
                .unwrap()
                .metadata
                .finalizers,
            labels::MC_FINALIZER,
        )
    })
    .await;
    for m in running(&env).await {
        assert!(
            m.annotations().contains_key(LAST_KNOWN_CLASS),
            "the class is recorded before the VM is created"
        );
    }

    env.classes
        .delete("test-class", &DeleteParams::default())
        .await
        .unwrap();
    // For a while: the class stays, Terminating, and the machines keep
    // running with nothing failed.
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < until {
        let c = env.classes.get_opt("test-class").await.unwrap();
        let c = c.expect("an in-use class must not go away");
        assert!(c.metadata.deletion_timestamp.is_some());
        assert!(has(&c.metadata.finalizers, labels::MCM_FINALIZER));
        let machines = list(&env).await;
        assert_eq!(machines.len(), 2);
        for m in &machines {
            assert_eq!(m.phase(), Some(MachinePhase::Running), "{}", m.name_any());
            assert_ne!(
                last_op(m).state,
                Some(MachineState::Failed),
                "{:?}",
                last_op(m)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        has(
            &env.secrets
                .get("test-class-secret")
                .await
                .unwrap()
                .metadata
                .finalizers,
            labels::MC_FINALIZER
        ),
        "the deleting class still needs its secret"
    );

    // Deleting the deployment completes: machines, VMs and nodes go, then
    // the class, and the secret is released.
    env.mds
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&env, "the machines gone", 40, async || {
        list(&env).await.is_empty()
    })
    .await;
    assert!(env.provider.vms().is_empty(), "{:?}", env.provider.vms());
    wait_for(&env, "the nodes gone", 10, async || {
        env.nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    wait_for(&env, "the class gone", 10, async || {
        env.classes.get_opt("test-class").await.unwrap().is_none()
    })
    .await;
    let secret = env.secrets.get("test-class-secret").await.unwrap();
    assert!(
        !has(&secret.metadata.finalizers, labels::MC_FINALIZER),
        "{:?}",
        secret.metadata.finalizers
    );
    wait_for(&env, "the deployment gone", 10, async || {
        env.mds.get_opt("web").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_whose_class_never_existed_can_be_deleted() {
    let env = start().await;
    class(&env, "test-class").await;
    deployment(&env, "typo", "tset-class", 2).await;
    wait_for(
        &env,
        "2 machines that say their class is missing",
        20,
        async || {
            let l = list(&env).await;
            l.len() == 2
                && l.iter().all(|m| {
                    let op = last_op(m);
                    op.state == Some(MachineState::Failed)
                        && op.type_ == Some(MachineOperationType::Create)
                        && op
                            .description
                            .starts_with("MachineClass default/tset-class not found")
                })
        },
    )
    .await;
    env.mds
        .delete("typo", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&env, "the machines gone", 20, async || {
        list(&env).await.is_empty()
    })
    .await;
    wait_for(&env, "the deployment gone", 10, async || {
        env.mds.get_opt("typo").await.unwrap().is_none()
    })
    .await;
    // The driver was never asked anything: there was no VM to look for.
    for op in ["CreateMachine", "GetMachineStatus", "DeleteMachine"] {
        assert_eq!(driver_calls(&env, op), 0, "{op}");
    }
    assert!(env.provider.vms().is_empty());
    // The unused class never got the finalizer, nor did its secret.
    let c = env.classes.get("test-class").await.unwrap();
    assert!(!has(&c.metadata.finalizers, labels::MCM_FINALIZER));
    let secret = env.secrets.get("test-class-secret").await.unwrap();
    assert!(!has(&secret.metadata.finalizers, labels::MC_FINALIZER));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_waiting_for_its_class_is_created_once_the_class_exists() {
    let env = start().await;
    deployment(&env, "late", "late-class", 1).await;
    wait_for(
        &env,
        "a machine that says its class is missing",
        20,
        async || {
            list(&env).await.iter().any(|m| {
                let op = last_op(m);
                op.state == Some(MachineState::Failed)
                    && op
                        .description
                        .starts_with("MachineClass default/late-class not found")
            })
        },
    )
    .await;
    let name = list(&env).await[0].name_any();
    assert!(env.provider.vms().is_empty());

    class(&env, "late-class").await;
    wait_for(&env, "the machine running", 30, async || {
        running(&env).await.iter().any(|m| m.name_any() == name)
    })
    .await;
    let m = env.machines.get(&name).await.unwrap();
    let op = last_op(&m);
    assert_eq!(op.state, Some(MachineState::Successful), "{op:?}");
    assert!(op.description.contains("successfully joined"), "{op:?}");
    let c = env.classes.get("late-class").await.unwrap();
    assert!(has(&c.metadata.finalizers, labels::MCM_FINALIZER));

    // A running machine whose status still says its class was missing
    // (as earlier versions wrote on every machine) is set right too.
    let mut stale = m.clone();
    stale.status.as_mut().unwrap().last_operation = api::LastOperation {
        description: "MachineClass default/late-class not found".into(),
        state: Some(MachineState::Failed),
        type_: Some(MachineOperationType::Create),
        ..api::LastOperation::default()
    };
    env.machines
        .replace_status(&name, &PostParams::default(), &stale)
        .await
        .unwrap();
    wait_for(&env, "the stale class problem cleared", 20, async || {
        let op = last_op(&env.machines.get(&name).await.unwrap());
        op.description == "MachineClass default/late-class is available again"
            && op.state == Some(MachineState::Successful)
    })
    .await;
    assert_eq!(
        env.machines.get(&name).await.unwrap().phase(),
        Some(MachinePhase::Running)
    );
}

/// Deletes the class out from under its machines the way only a person
/// stripping finalizers can: delete it, then drop the MCM finalizer.
async fn force_delete_class(env: &Env, name: &str) {
    env.classes
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    env.classes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    wait_for(env, "the class gone", 10, async || {
        env.classes.get_opt(name).await.unwrap().is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_whose_class_is_gone_is_deleted_with_the_recorded_class() {
    let env = start().await;
    class(&env, "test-class").await;
    deployment(&env, "web", "test-class", 1).await;
    wait_for(&env, "1 running machine", 30, async || {
        running(&env).await.len() == 1
    })
    .await;
    let name = running(&env).await[0].name_any();
    force_delete_class(&env, "test-class").await;
    // The machine keeps running; its status is left alone.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let m = env.machines.get(&name).await.unwrap();
    assert_eq!(m.phase(), Some(MachinePhase::Running));
    assert_ne!(last_op(&m).state, Some(MachineState::Failed));

    env.mds
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&env, "the machine gone", 30, async || {
        list(&env).await.is_empty()
    })
    .await;
    assert!(
        env.provider.vms().is_empty(),
        "the VM was deleted: {:?}",
        env.provider.vms()
    );
    assert!(env.nodes.get_opt(&name).await.unwrap().is_none());
    assert!(driver_calls(&env, "DeleteMachine") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_without_a_class_or_a_record_is_kept_until_the_class_is_back() {
    let env = start().await;
    class(&env, "test-class").await;
    deployment(&env, "web", "test-class", 1).await;
    wait_for(&env, "1 running machine", 30, async || {
        running(&env).await.len() == 1
    })
    .await;
    let name = running(&env).await[0].name_any();
    force_delete_class(&env, "test-class").await;
    // As a machine from before the record existed.
    env.machines
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {LAST_KNOWN_CLASS: null}}})),
        )
        .await
        .unwrap();
    // Scaled to zero, so no replacement needs the class.
    env.mds
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    wait_for(
        &env,
        "the deletion held with a clear message",
        30,
        async || {
            env.machines.get_opt(&name).await.unwrap().is_some_and(|m| {
                let op = last_op(&m);
                op.type_ == Some(MachineOperationType::Delete)
                    && op.state == Some(MachineState::Failed)
                    && op
                        .description
                        .contains("MachineClass default/test-class not found")
                    && op.description.contains("re-create MachineClass test-class")
            })
        },
    )
    .await;
    assert_eq!(env.provider.vms().len(), 1, "the VM is not orphaned");

    // The class is back (its secret never went): the deletion goes on
    // and the VM goes with it.
    create_class(&env, "test-class").await;
    wait_for(&env, "the machine gone", 30, async || {
        env.machines.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    assert!(env.provider.vms().is_empty(), "{:?}", env.provider.vms());
    assert!(list(&env).await.is_empty());
}
