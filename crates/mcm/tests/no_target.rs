//! The controllers without a target cluster (upstream's
//! `--target-kubeconfig=none`), against the embedded API server with the
//! local provider: machines of a deployment are `Available` as soon as their
//! VM exists, a scale-down deletes VMs without any drain, and no Node is
//! ever touched.
//!
//! The local provider's VMs still boot simulated kubelets; here they
//! register with a second API server (the "VM world"), which the
//! controllers have no client for. The control server must never see a
//! Node, and the kubelets' Nodes must never carry anything the machine
//! controller writes (finalizer, machine-name label, cordon, `Terminating`
//! condition).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use api::{
    ConditionStatus, Machine, MachineClass, MachineDeployment, MachineDeploymentConditionType,
    MachineOperationType, MachinePhase, MachineState, labels,
};
use common::{fast_sim, server, system_namespaces};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use mcm::machine::DELETION_STEP;
use parking_lot::Mutex;
use provider_local::LocalProvider;
use serde_json::json;
use testkit::eventually;

const NS: &str = "default";

/// Per machine, every deletion step, phase and lastOperation description it
/// had, from a watch.
#[derive(Clone, Default)]
struct History {
    steps: Arc<Mutex<BTreeMap<String, Vec<String>>>>,
    phases: Arc<Mutex<BTreeMap<String, Vec<MachinePhase>>>>,
    descriptions: Arc<Mutex<BTreeMap<String, Vec<String>>>>,
}

fn push<T: PartialEq>(map: &Mutex<BTreeMap<String, Vec<T>>>, name: &str, v: T) {
    let mut map = map.lock();
    let seen = map.entry(name.to_string()).or_default();
    if seen.last() != Some(&v) {
        seen.push(v);
    }
}

fn record(machines: Api<Machine>) -> History {
    let h = History::default();
    let out = h.clone();
    tokio::spawn(async move {
        let stream = watcher(machines, watcher::Config::default())
            .default_backoff()
            .applied_objects();
        futures::pin_mut!(stream);
        while let Some(Ok(m)) = stream.next().await {
            let name = m.metadata.name.clone().unwrap_or_default();
            if let Some(step) = m.annotations().get(DELETION_STEP) {
                push(&h.steps, &name, step.clone());
            }
            if let Some(p) = m.phase() {
                push(&h.phases, &name, p);
            }
            if let Some(st) = &m.status {
                push(
                    &h.descriptions,
                    &name,
                    st.last_operation.description.clone(),
                );
            }
        }
    });
    out
}

/// Counts every Node event a watch on `nodes` delivers.
fn count_node_events(nodes: Api<Node>) -> Arc<Mutex<usize>> {
    let count = Arc::new(Mutex::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        let stream = watcher(nodes, watcher::Config::default())
            .default_backoff()
            .touched_objects();
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            if ev.is_ok() {
                *c.lock() += 1;
            }
        }
    });
    count
}

/// Whether the machine controller left a mark on the node.
fn touched_by_mcm(n: &Node) -> Option<String> {
    let name = n.metadata.name.clone().unwrap_or_default();
    if n.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == labels::NODE_FINALIZER)
    {
        return Some(format!("{name} has the node finalizer"));
    }
    if n.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(labels::NODE_MACHINE_NAME))
    {
        return Some(format!("{name} has the machine-name label"));
    }
    if n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Some(format!("{name} is cordoned"));
    }
    let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
    if conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Terminating")
    {
        return Some(format!("{name} has a Terminating condition"));
    }
    if n.metadata.deletion_timestamp.is_some() {
        return Some(format!("{name} is being deleted"));
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_is_available_without_a_target_and_scales_down_without_drains() {
    let control = server().await;
    let vm_world = server().await;
    system_namespaces(&control).await;
    system_namespaces(&vm_world).await;
    let control_node_events = count_node_events(Api::all(control.clone()));

    let provider =
        LocalProvider::with_config(control.clone(), vm_world.clone(), "trellis", fast_sim())
            .await
            .unwrap();
    let driver: Arc<dyn driver::Driver> = Arc::new(provider.clone());
    let config = mcm::controllers::Config {
        namespace: NS.into(),
        ..Default::default()
    };
    let c = control.clone();
    tokio::spawn(async move {
        mcm::run::run(c, None, config, Some(driver), std::future::pending::<()>()).await
    });

    let classes: Api<MachineClass> = Api::namespaced(control.clone(), NS);
    let mut class = MachineClass::test("test-class");
    class.provider_spec = json!({"bootDelay": "100ms"});
    classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(control.clone(), NS);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "test-class-secret"},
        "stringData": {"userData": "token: <<BOOTSTRAP_TOKEN>>\nname: <<MACHINE_NAME>>\n"}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let machines: Api<Machine> = Api::namespaced(control.clone(), NS);
    let mds: Api<MachineDeployment> = Api::namespaced(control.clone(), NS);
    let history = record(machines.clone());
    mds.create(
        &PostParams::default(),
        &MachineDeployment::test("web").replicas(3),
    )
    .await
    .unwrap();

    let live = async || -> Vec<Machine> {
        machines
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|m| m.metadata.deletion_timestamp.is_none())
            .collect()
    };
    eventually("3 Available machines", 30, async || {
        let ms = live().await;
        ms.len() == 3
            && ms
                .iter()
                .all(|m| m.phase() == Some(MachinePhase::Available))
    })
    .await;
    eventually("the deployment to count 3 available", 30, async || {
        let md = mds.get("web").await.unwrap();
        let st = md.status.unwrap_or_default();
        st.available_replicas == 3
            && st.conditions.iter().any(|c| {
                c.type_ == MachineDeploymentConditionType::Available
                    && c.status == ConditionStatus::True
            })
    })
    .await;

    let tokens: Api<Secret> = Api::namespaced(control.clone(), "kube-system");
    let world_tokens: Api<Secret> = Api::namespaced(vm_world.clone(), "kube-system");
    for m in live().await {
        let name = m.name_any();
        assert!(m.spec.provider_id.starts_with("local:///"), "{name}");
        let st = m.status.clone().unwrap();
        assert_eq!(
            st.last_operation.type_,
            Some(MachineOperationType::Create),
            "{name}"
        );
        assert_eq!(
            st.last_operation.state,
            Some(MachineState::Successful),
            "{name}"
        );
        assert!(
            st.addresses.iter().any(|a| a.type_ == "InternalIP"),
            "{name}: the provider's addresses are recorded: {:?}",
            st.addresses
        );
        assert!(st.conditions.is_empty(), "{name}: no node conditions");
        assert!(
            !m.annotations().contains_key(labels::MACHINE_JOIN_DURATION),
            "{name}: nothing joined"
        );
        // Never Pending: there is no node to wait for.
        let phases = history
            .phases
            .lock()
            .get(&name)
            .cloned()
            .unwrap_or_default();
        assert_eq!(phases, vec![MachinePhase::Available], "{name}");
        // No bootstrap token anywhere.
        let secret_name =
            mcm::machine::bootstrap_token_secret_name(&mcm::machine::bootstrap_token_id(&name));
        assert!(tokens.get_opt(&secret_name).await.unwrap().is_none());
        assert!(world_tokens.get_opt(&secret_name).await.unwrap().is_none());
    }
    assert_eq!(provider.vms().len(), 3);
    // The kubelets registered in the VM world, untouched.
    let world_nodes: Api<Node> = Api::all(vm_world.clone());
    eventually("3 simulated kubelets", 30, async || {
        world_nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            == 3
    })
    .await;

    // Scale down to 1: two VMs are deleted, without any drain.
    mds.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    eventually("1 machine and 1 VM left", 30, async || {
        machines
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            == 1
            && provider.vms().len() == 1
    })
    .await;
    eventually("the deployment to count 1 available", 30, async || {
        let st = mds.get("web").await.unwrap().status.unwrap_or_default();
        st.replicas == 1 && st.available_replicas == 1
    })
    .await;

    let remaining: Vec<String> = live().await.iter().map(|m| m.name_any()).collect();
    // The recorder follows a watch, a little behind the list above.
    eventually(
        "the recorder to see both deletions reach S4",
        5,
        async || {
            let steps = history.steps.lock();
            steps
                .iter()
                .filter(|(n, seen)| !remaining.contains(n) && seen.iter().any(|s| s == "S4"))
                .count()
                == 2
        },
    )
    .await;
    let steps = history.steps.lock().clone();
    let deleted: Vec<&String> = steps.keys().filter(|n| !remaining.contains(n)).collect();
    assert_eq!(
        deleted.len(),
        2,
        "two machines went through deletion: {steps:?}"
    );
    for name in deleted {
        let seen = &steps[name];
        assert!(
            !seen.iter().any(|s| s == "S2" || s == "S3"),
            "{name} was never drained: {seen:?}"
        );
        assert_eq!(seen.first().map(String::as_str), Some("S1"), "{name}");
        assert!(seen.iter().any(|s| s == "S4"), "{name}: {seen:?}");
        let descriptions = history
            .descriptions
            .lock()
            .get(name)
            .cloned()
            .unwrap_or_default();
        assert!(
            !descriptions.iter().any(|d| d.contains("drain")),
            "{name}: {descriptions:?}"
        );
        let phases = history.phases.lock().get(name).cloned().unwrap_or_default();
        assert_eq!(
            phases,
            vec![MachinePhase::Available, MachinePhase::Terminating],
            "{name}"
        );
    }

    // No Node was touched: none ever existed in the control cluster, and
    // the kubelets' own Nodes (all three still there, since nothing
    // deletes them without a target) carry no mark of the controller.
    assert!(
        Api::<Node>::all(control.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(*control_node_events.lock(), 0);
    let nodes = world_nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(nodes.len(), 3);
    let marks: Vec<String> = nodes.iter().filter_map(touched_by_mcm).collect();
    assert!(marks.is_empty(), "{marks:?}");
    provider.simulator().shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_probe_checks_only_the_control_cluster_without_a_target() {
    use mcm::controllers::safety::{ApiServerProbe, Probe};
    let control = server().await;
    // Nothing listens on the discard port.
    let mut dead = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    dead.default_retry = false;
    let dead = kube::Client::try_from(dead).unwrap();
    // (target, probe succeeds)
    let table = [
        (None, true),
        (Some(control.clone()), true),
        (Some(dead), false),
    ];
    for (target, ok) in table {
        let has_target = target.is_some();
        let probe = ApiServerProbe {
            control: control.clone(),
            target,
            namespace: NS.into(),
        };
        let answer = probe.probe().await;
        assert_eq!(answer.is_ok(), ok, "target={has_target}: {answer:?}");
        if let Err(e) = answer {
            assert!(e.starts_with("target API server"), "{e}");
        }
    }
}
