//! The machine controller against the embedded API server with the local
//! provider (one server as control and target cluster): machines of a
//! deployment become Running nodes, scale-down runs the full deletion flow,
//! killed nodes fail after the health timeout and are replaced one at a
//! time, creation errors crash-loop then fail, and a drain blocked by a
//! PodDisruptionBudget waits for the drain timeout and then forces.
//! Samplers watch the machines all the time and record every moment an
//! invariant is broken, not only the end state.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::{Machine, MachineClass, MachineDeployment, MachinePhase, MachineState, labels};
use common::{run_controllers, system_namespaces};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use mcm::machine::DELETION_STEP;
use parking_lot::Mutex;
use provider_local::LocalProvider;
use serde_json::{Value, json};
use testkit::eventually_or;

const NS: &str = "default";

struct Env {
    client: kube::Client,
    provider: LocalProvider,
    machines: Api<Machine>,
    mds: Api<MachineDeployment>,
    nodes: Api<Node>,
}

async fn start(config: mcm::controllers::Config) -> Env {
    let client = common::server().await;
    system_namespaces(&client).await;
    let provider = common::provider(&client).await;
    run_controllers(&client, config, Some(Arc::new(provider.clone())));
    Env {
        machines: Api::namespaced(client.clone(), NS),
        mds: Api::namespaced(client.clone(), NS),
        nodes: Api::all(client.clone()),
        client,
        provider,
    }
}

fn config() -> mcm::controllers::Config {
    mcm::controllers::Config {
        namespace: NS.into(),
        ..Default::default()
    }
}

/// A local class `test-class` with `provider_spec` and its secret, whose
/// userData carries both placeholders.
async fn class(env: &Env, provider_spec: Value) {
    let classes: Api<MachineClass> = Api::namespaced(env.client.clone(), NS);
    classes
        .create(
            &PostParams::default(),
            &MachineClass::test("test-class").with_spec(provider_spec),
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NS);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "test-class-secret"},
        "stringData": {"userData": "#cloud-config\ntoken: <<BOOTSTRAP_TOKEN>>\nname: <<MACHINE_NAME>>\n"}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

trait WithSpec {
    fn with_spec(self, spec: Value) -> Self;
}

impl WithSpec for MachineClass {
    fn with_spec(mut self, spec: Value) -> Self {
        self.provider_spec = spec;
        self
    }
}

/// A deployment `web` of `replicas` with the given machine-spec overrides
/// (`healthTimeout`, `creationTimeout`, `drainTimeout`, ...).
async fn deployment(env: &Env, replicas: i32, overrides: Value) {
    let mut md = MachineDeployment::test("web").replicas(replicas);
    let mut spec = serde_json::to_value(&md.spec.template.spec).unwrap();
    for (k, v) in overrides.as_object().cloned().unwrap_or_default() {
        spec[k] = v;
    }
    md.spec.template.spec = serde_json::from_value(spec).unwrap();
    env.mds.create(&PostParams::default(), &md).await.unwrap();
}

async fn list(env: &Env) -> Vec<Machine> {
    env.machines
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

fn ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
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

async fn dump(env: &Env) {
    for m in list(env).await {
        eprintln!(
            "machine {} phase={:?} deleting={} node={:?} step={:?} lastOp={:?}",
            m.metadata.name.as_deref().unwrap_or(""),
            m.phase(),
            m.metadata.deletion_timestamp.is_some(),
            m.metadata.labels.as_ref().and_then(|l| l.get("node")),
            m.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DELETION_STEP)),
            m.status.as_ref().map(|s| &s.last_operation.description),
        );
    }
    for n in env.nodes.list(&ListParams::default()).await.unwrap().items {
        eprintln!(
            "node {} ready={} deleting={}",
            n.metadata.name.as_deref().unwrap_or(""),
            ready(&n),
            n.metadata.deletion_timestamp.is_some()
        );
    }
    eprintln!("vms {:?}", env.provider.vms());
}

/// Polls `f` until it holds; dumps machines, nodes and VMs before failing.
async fn wait_for(env: &Env, what: &str, secs: u64, f: impl AsyncFnMut() -> bool) {
    eventually_or(what, secs, f, async || dump(env).await).await
}

/// Records, per machine, every value its deletion-step annotation and
/// phase took, from a watch (so no transition is missed between polls).
#[derive(Clone, Default)]
struct History {
    steps: Arc<Mutex<BTreeMap<String, Vec<String>>>>,
    phases: Arc<Mutex<BTreeMap<String, Vec<MachinePhase>>>>,
}

fn record(client: kube::Client) -> History {
    let h = History::default();
    let out = h.clone();
    let machines: Api<Machine> = Api::namespaced(client, NS);
    tokio::spawn(async move {
        let stream = watcher(machines, watcher::Config::default())
            .default_backoff()
            .touched_objects();
        futures::pin_mut!(stream);
        while let Some(Ok(m)) = stream.next().await {
            let name = m.metadata.name.clone().unwrap_or_default();
            if let Some(step) = m
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DELETION_STEP))
            {
                let mut steps = h.steps.lock();
                let v = steps.entry(name.clone()).or_default();
                if v.last() != Some(step) {
                    v.push(step.clone());
                }
            }
            if let Some(p) = m.phase() {
                let mut phases = h.phases.lock();
                let v = phases.entry(name).or_default();
                if v.last() != Some(&p) {
                    v.push(p);
                }
            }
        }
    });
    out
}

impl History {
    /// The deletion steps recorded for a machine that is already gone. The
    /// recorder lags the API by a watch event, so this waits (briefly) for
    /// it to have seen the last step before answering.
    async fn steps_of_deleted(&self, name: &str) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let steps = self.steps.lock().get(name).cloned().unwrap_or_default();
            if steps.last().map(String::as_str) == Some("S6")
                || tokio::time::Instant::now() >= deadline
            {
                return steps;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_scales_up_and_down_through_the_full_flow() {
    let env = start(config()).await;
    class(&env, json!({"bootDelay": "300ms"})).await;
    let history = record(env.client.clone());
    deployment(&env, 3, json!({})).await;
    wait_for(&env, "3 running machines", 30, async || {
        running(&env).await.len() == 3
    })
    .await;

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "kube-system");
    for m in running(&env).await {
        let name = m.metadata.name.clone().unwrap();
        let node_name = m.metadata.labels.as_ref().unwrap()["node"].clone();
        assert_eq!(
            node_name, name,
            "the local provider names nodes after machines"
        );
        assert!(m.spec.provider_id.starts_with("local:///"), "{name}");
        let ann = m.metadata.annotations.clone().unwrap();
        assert_eq!(ann[labels::MACHINE_PRIORITY], "3");
        assert!(ann.contains_key(labels::MACHINE_JOIN_DURATION), "{ann:?}");
        assert!(ann.contains_key(mcm::machine::LAST_APPLIED_PROVIDER_SPEC));
        assert!(
            m.metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| f.iter().any(|f| f == labels::MCM_FINALIZER))
        );
        let st = m.status.clone().unwrap();
        assert_eq!(st.last_operation.state, Some(MachineState::Successful));
        assert!(
            st.last_operation
                .description
                .contains("successfully joined"),
            "{:?}",
            st.last_operation
        );
        assert!(!st.conditions.is_empty(), "node conditions are copied");
        let node = env.nodes.get(&node_name).await.unwrap();
        assert!(ready(&node));
        assert_eq!(
            node.spec.as_ref().unwrap().provider_id.as_deref(),
            Some(m.spec.provider_id.as_str())
        );
        // The node finalizer and machine-name label come with node sync.
        wait_for(&env, "node sync", 10, async || {
            let n = env.nodes.get(&node_name).await.unwrap();
            n.metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| f.iter().any(|f| f == labels::NODE_FINALIZER))
                && n.metadata
                    .labels
                    .as_ref()
                    .unwrap()
                    .get(labels::NODE_MACHINE_NAME)
                    == Some(&name)
        })
        .await;
        // The bootstrap token is gone once the node joined.
        let id = mcm::machine::bootstrap_token_id(&name);
        assert!(
            secrets
                .get_opt(&mcm::machine::bootstrap_token_secret_name(&id))
                .await
                .unwrap()
                .is_none()
        );
    }
    assert_eq!(env.provider.vms().len(), 3);
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(env.client.clone(), NS);
    let reasons: BTreeSet<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("machine-controller"))
        .filter_map(|e| e.reason)
        .collect();
    assert!(
        reasons.contains("Created") && reasons.contains("Joined"),
        "{reasons:?}"
    );

    // Scale down to 1: two machines go through S1 → S2 → S4 → S5 → S6.
    let before: BTreeSet<String> = running(&env)
        .await
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect();
    env.mds
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    wait_for(&env, "one machine left", 30, async || {
        list(&env).await.len() == 1
    })
    .await;
    let left = list(&env).await[0].metadata.name.clone().unwrap();
    wait_for(&env, "one VM left", 10, async || {
        env.provider.vms().len() == 1
    })
    .await;
    let nodes: BTreeSet<String> = env
        .nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(nodes, BTreeSet::from([left.clone()]));
    for gone in before.iter().filter(|n| **n != left) {
        assert_eq!(
            history.steps_of_deleted(gone).await,
            ["S1", "S2", "S4", "S5", "S6"],
            "{gone}"
        );
        let phases = history.phases.lock().get(gone).cloned().unwrap_or_default();
        assert_eq!(
            phases.last(),
            Some(&MachinePhase::Terminating),
            "{phases:?}"
        );
    }

    // Hot update: a changed tag is applied to the VM in place and recorded.
    let classes: Api<MachineClass> = Api::namespaced(env.client.clone(), NS);
    classes
        .patch(
            "test-class",
            &PatchParams::default(),
            &Patch::Merge(json!({"providerSpec": {"tags": {"team": "a"}}})),
        )
        .await
        .unwrap();
    let want = json!({"bootDelay": "300ms", "tags": {"team": "a"}});
    wait_for(&env, "the hot update recorded", 10, async || {
        env.machines
            .get(&left)
            .await
            .unwrap()
            .metadata
            .annotations
            .and_then(|a| a.get(mcm::machine::LAST_APPLIED_PROVIDER_SPEC).cloned())
            .and_then(|v| serde_json::from_str::<Value>(&v).ok())
            == Some(want.clone())
    })
    .await;
    assert_eq!(
        env.provider.vms().len(),
        1,
        "updated in place, not replaced"
    );

    // Deleting the node deletes its machine; the set replaces it.
    env.nodes
        .delete(&left, &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &env,
        "the machine of the deleted node gone",
        20,
        async || env.machines.get_opt(&left).await.unwrap().is_none(),
    )
    .await;
    wait_for(&env, "a replacement", 20, async || {
        let r = running(&env).await;
        r.len() == 1 && r[0].metadata.name.as_deref() != Some(left.as_str())
    })
    .await;
    assert!(env.nodes.get_opt(&left).await.unwrap().is_none());
}

/// Kills the kubelet of a node.
async fn kill(env: &Env, node: &str) {
    env.nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                nodesim::faults::KUBELET: nodesim::faults::KUBELET_STOPPED
            }}})),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_node_goes_unknown_then_failed_and_is_replaced() {
    let env = start(config()).await;
    class(&env, json!({"bootDelay": "200ms"})).await;
    let history = record(env.client.clone());
    deployment(&env, 2, json!({"healthTimeout": "3s"})).await;
    wait_for(&env, "2 running", 30, async || {
        running(&env).await.len() == 2
    })
    .await;
    let victim = running(&env).await[0].metadata.name.clone().unwrap();
    let killed_at = Instant::now();
    kill(&env, &victim).await;
    wait_for(&env, "the victim gone", 40, async || {
        env.machines.get_opt(&victim).await.unwrap().is_none()
    })
    .await;
    assert!(
        killed_at.elapsed() >= Duration::from_secs(3),
        "failed before the health timeout"
    );
    history.steps_of_deleted(&victim).await;
    let phases = history.phases.lock().get(&victim).cloned().unwrap();
    use MachinePhase::*;
    assert_eq!(
        phases,
        [Pending, Running, Unknown, Failed, Terminating],
        "{phases:?}"
    );
    wait_for(&env, "a replacement running", 30, async || {
        let r = running(&env).await;
        r.len() == 2
            && r.iter()
                .all(|m| m.metadata.name.as_deref() != Some(&victim))
    })
    .await;
    assert!(env.nodes.get_opt(&victim).await.unwrap().is_none());
    assert!(!env.provider.vms().values().any(|m| *m == victim));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_killed_nodes_are_replaced_one_at_a_time() {
    let env = start(config()).await;
    class(&env, json!({"bootDelay": "200ms"})).await;
    deployment(&env, 5, json!({"healthTimeout": "2s"})).await;
    wait_for(&env, "5 running", 30, async || {
        running(&env).await.len() == 5
    })
    .await;
    let originals: BTreeSet<String> = running(&env)
        .await
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect();

    // Sample all the time: never more than one machine Failed or being
    // deleted at once.
    let violations = Arc::new(Mutex::new(Vec::new()));
    let max_seen = Arc::new(Mutex::new(0usize));
    let (v, mx, machines) = (violations.clone(), max_seen.clone(), env.machines.clone());
    let sampler = tokio::spawn(async move {
        loop {
            if let Ok(l) = machines.list(&ListParams::default()).await {
                let busy: Vec<String> = l
                    .items
                    .iter()
                    .filter(|m| {
                        m.metadata.deletion_timestamp.is_some()
                            || matches!(
                                m.phase(),
                                Some(MachinePhase::Failed) | Some(MachinePhase::Terminating)
                            )
                    })
                    .filter_map(|m| m.metadata.name.clone())
                    .collect();
                let mut mx = mx.lock();
                *mx = (*mx).max(busy.len());
                if busy.len() > 1 {
                    v.lock().push(busy);
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    for n in &originals {
        kill(&env, n).await;
    }
    wait_for(&env, "all five replaced", 60, async || {
        let r = running(&env).await;
        r.len() == 5
            && r.iter()
                .all(|m| !originals.contains(m.metadata.name.as_deref().unwrap_or("")))
    })
    .await;
    sampler.abort();
    let v = violations.lock().clone();
    assert!(
        v.is_empty(),
        "several machines replaced at once: {:?}",
        &v[..v.len().min(5)]
    );
    assert_eq!(*max_seen.lock(), 1, "the sampler saw the replacements");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_exhausted_crash_loops_then_fails_after_the_creation_timeout() {
    let mut cfg = config();
    cfg.machine.resource_exhausted_retry = Duration::from_millis(500);
    let env = start(cfg).await;
    class(
        &env,
        json!({"failCreate": {"code": "RESOURCE_EXHAUSTED", "times": 1000}}),
    )
    .await;
    let history = record(env.client.clone());
    deployment(&env, 1, json!({"creationTimeout": "4s"})).await;
    wait_for(&env, "a crash-looping machine", 20, async || {
        list(&env)
            .await
            .iter()
            .any(|m| m.phase() == Some(MachinePhase::CrashLoopBackOff))
    })
    .await;
    let m = list(&env)
        .await
        .into_iter()
        .find(|m| m.phase() == Some(MachinePhase::CrashLoopBackOff))
        .unwrap();
    let name = m.metadata.name.clone().unwrap();
    let op = m.status.unwrap().last_operation;
    assert_eq!(op.error_code, "ResourceExhausted");
    assert_eq!(op.state, Some(MachineState::Failed));
    assert!(
        op.description.starts_with("Cloud provider message - "),
        "{op:?}"
    );
    wait_for(&env, "the machine failed", 20, async || {
        history
            .phases
            .lock()
            .get(&name)
            .is_some_and(|p| p.contains(&MachinePhase::Failed))
    })
    .await;
    let created = m.metadata.creation_timestamp.unwrap();
    let age = k8s_openapi::jiff::Timestamp::now().duration_since(created.0);
    assert!(age.as_secs_f64() >= 4.0, "failed after {age:?}");
    let phases = history.phases.lock().get(&name).cloned().unwrap();
    assert_eq!(
        &phases[..2],
        [MachinePhase::CrashLoopBackOff, MachinePhase::Failed],
        "{phases:?}"
    );
    // No VM was ever created; the failed machine is deleted and replaced.
    wait_for(&env, "the failed machine replaced", 20, async || {
        let l = list(&env).await;
        env.machines.get_opt(&name).await.unwrap().is_none() && l.len() == 1
    })
    .await;
    assert!(env.provider.vms().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_blocked_by_a_pdb_waits_for_the_drain_timeout_then_forces() {
    let env = start(config()).await;
    class(&env, json!({"bootDelay": "200ms"})).await;
    let history = record(env.client.clone());
    deployment(&env, 1, json!({"drainTimeout": "6s"})).await;
    wait_for(&env, "1 running", 30, async || {
        running(&env).await.len() == 1
    })
    .await;
    let name = running(&env).await[0].metadata.name.clone().unwrap();

    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    for i in 0..2 {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("app-{i}"), "labels": {"app": "guarded"}},
            "spec": {"nodeName": name, "containers": [{"name": "c", "image": "busybox"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), NS);
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    wait_for(&env, "the PDB to see 2 healthy pods", 20, async || {
        pdbs.get("guard")
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.current_healthy == 2 && s.disruptions_allowed == 0)
    })
    .await;

    let deleted_at = Instant::now();
    env.machines
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    // The drain fails (misconfigured PDB) and is retried at S2.
    wait_for(&env, "a failed drain at S2", 10, async || {
        env.machines.get_opt(&name).await.unwrap().is_some_and(|m| {
            m.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DELETION_STEP))
                == Some(&"S2".to_string())
                && m.status.as_ref().is_some_and(|s| {
                    s.last_operation.state == Some(MachineState::Failed)
                        && s.last_operation.description.contains("Drain failed")
                })
        })
    })
    .await;
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        2,
        "the PDB held the pods"
    );
    wait_for(&env, "the machine gone", 30, async || {
        env.machines.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    let took = deleted_at.elapsed();
    // deletionTimestamp has whole seconds, so the timeout may count from
    // up to a second before the delete call.
    assert!(
        took >= Duration::from_secs(5),
        "forced before the drain timeout: {took:?}"
    );
    assert!(took < Duration::from_secs(9), "forced late: {took:?}");
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(env.nodes.get_opt(&name).await.unwrap().is_none());
    let steps = history.steps_of_deleted(&name).await;
    assert_eq!(
        steps,
        ["S1", "S2", "S3", "S4", "S5", "S6"],
        "forced drains go through S3"
    );
}

/// When each pod was first seen terminating and gone, and when each volume
/// left the node's `volumesAttached`, from watches.
#[derive(Clone, Default)]
struct DrainLog {
    terminating: Arc<Mutex<BTreeMap<String, Instant>>>,
    gone: Arc<Mutex<BTreeMap<String, Instant>>>,
    detached: Arc<Mutex<BTreeMap<String, Instant>>>,
    /// The node was seen cordoned with condition Terminating/ScaleDown.
    cordoned_terminating: Arc<Mutex<bool>>,
}

fn log_drain(client: kube::Client, node: String) -> DrainLog {
    let log = DrainLog::default();
    let l = log.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    tokio::spawn(async move {
        let stream = watcher(pods, watcher::Config::default()).default_backoff();
        futures::pin_mut!(stream);
        while let Some(Ok(ev)) = stream.next().await {
            match ev {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p)
                    if p.metadata.deletion_timestamp.is_some() =>
                {
                    l.terminating
                        .lock()
                        .entry(p.metadata.name.unwrap_or_default())
                        .or_insert_with(Instant::now);
                }
                watcher::Event::Delete(p) => {
                    let name = p.metadata.name.unwrap_or_default();
                    l.terminating
                        .lock()
                        .entry(name.clone())
                        .or_insert_with(Instant::now);
                    l.gone.lock().entry(name).or_insert_with(Instant::now);
                }
                _ => {}
            }
        }
    });
    let l = log.clone();
    let nodes: Api<Node> = Api::all(client);
    tokio::spawn(async move {
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let stream = watcher(nodes, watcher::Config::default())
            .default_backoff()
            .applied_objects();
        futures::pin_mut!(stream);
        while let Some(Ok(n)) = stream.next().await {
            if n.metadata.name.as_deref() != Some(node.as_str()) {
                continue;
            }
            let terminating = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.type_ == "Terminating" && c.reason.as_deref() == Some("ScaleDown")
                    })
                });
            if terminating && n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
                *l.cordoned_terminating.lock() = true;
            }
            let now: BTreeSet<String> = n
                .status
                .and_then(|s| s.volumes_attached)
                .unwrap_or_default()
                .into_iter()
                .map(|v| v.name)
                .collect();
            for v in seen.difference(&now) {
                l.detached
                    .lock()
                    .entry(v.clone())
                    .or_insert_with(Instant::now);
            }
            seen = now;
        }
    });
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_evicts_stateless_pods_together_and_volume_pods_one_by_one() {
    let env = start(config()).await;
    class(&env, json!({"bootDelay": "200ms"})).await;
    let history = record(env.client.clone());
    deployment(&env, 1, json!({})).await;
    wait_for(&env, "1 running", 30, async || {
        running(&env).await.len() == 1
    })
    .await;
    let name = running(&env).await[0].metadata.name.clone().unwrap();

    // Two stateless pods, and two pods with a volume each; db-b has the
    // higher priority and goes first.
    let pvs: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(env.client.clone());
    let pvcs: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(env.client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    for (db, priority) in [("db-a", 1), ("db-b", 100)] {
        let pv = serde_json::from_value(json!({
            "metadata": {"name": format!("pv-{db}")},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "csi": {"driver": "local.csi", "volumeHandle": format!("vol-{db}")}}
        }))
        .unwrap();
        pvs.create(&PostParams::default(), &pv).await.unwrap();
        let pvc = serde_json::from_value(json!({
            "metadata": {"name": format!("claim-{db}")},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": format!("pv-{db}"),
                     "resources": {"requests": {"storage": "1Gi"}}}
        }))
        .unwrap();
        pvcs.create(&PostParams::default(), &pvc).await.unwrap();
        let pod = serde_json::from_value(json!({
            "metadata": {"name": db},
            "spec": {"nodeName": name, "priority": priority,
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "postgres"}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": format!("claim-{db}")}}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    for web in ["web-1", "web-2"] {
        let pod = serde_json::from_value(json!({
            "metadata": {"name": web},
            "spec": {"nodeName": name, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "nginx"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    wait_for(&env, "both volumes attached", 20, async || {
        env.nodes
            .get(&name)
            .await
            .unwrap()
            .status
            .and_then(|s| s.volumes_attached)
            .is_some_and(|v| v.len() == 2)
    })
    .await;

    let log = log_drain(env.client.clone(), name.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    env.machines
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&env, "the machine gone", 30, async || {
        env.machines.get_opt(&name).await.unwrap().is_none()
    })
    .await;

    // The log follows watches, a little behind the API.
    wait_for(&env, "the drain log to catch up", 5, async || {
        let term = log.terminating.lock();
        ["web-1", "web-2", "db-a", "db-b"]
            .iter()
            .all(|p| term.contains_key(*p))
            && log.gone.lock().contains_key("db-b")
            && log
                .detached
                .lock()
                .contains_key("kubernetes.io/csi/local.csi^vol-db-b")
    })
    .await;
    let term = log.terminating.lock().clone();
    let gone = log.gone.lock().clone();
    let detached = log.detached.lock().clone();
    let at = |m: &BTreeMap<String, Instant>, k: &str| {
        *m.get(k)
            .unwrap_or_else(|| panic!("{k} missing from {:?}", m.keys()))
    };
    // Stateless pods were evicted in the same round as the first db pod.
    let first_round = at(&term, "web-1").min(at(&term, "web-2"));
    let spread = at(&term, "web-1").max(at(&term, "web-2")) - first_round;
    assert!(
        spread < Duration::from_millis(500),
        "web pods evicted {spread:?} apart"
    );
    // db-b (priority 100) first; db-a only after db-b is gone and its
    // volume left the node.
    assert!(at(&term, "db-b") < at(&term, "db-a"));
    assert!(at(&gone, "db-b") <= at(&term, "db-a"));
    let vol_b = "kubernetes.io/csi/local.csi^vol-db-b";
    assert!(
        at(&detached, vol_b) <= at(&term, "db-a"),
        "db-a evicted before db-b's volume detached"
    );
    let steps = history.steps_of_deleted(&name).await;
    assert_eq!(steps, ["S1", "S2", "S4", "S5", "S6"]);
    assert!(
        *log.cordoned_terminating.lock(),
        "node cordoned and marked Terminating"
    );
    assert!(env.nodes.get_opt(&name).await.unwrap().is_none());
}
