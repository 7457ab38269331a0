//! The Cluster API stack end to end against the embedded API server: the
//! core controllers, the TrellisConfig bootstrap provider and the local
//! infrastructure provider, each talking only through the API.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use capi::types::labels;
use capi::{Cluster, Machine, MachineDeployment, MachineSet};
use common::{apply, dynamic, eventually, stack};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use serde_json::json;

const CLUSTER: &str = include_str!("../../../examples/cluster-api/cluster.yaml");
const DEPLOYMENT: &str = include_str!("../../../examples/cluster-api/machinedeployment.yaml");

type History = Arc<Mutex<BTreeMap<String, Vec<String>>>>;

/// Records each Machine's phases in the order the watch shows them.
fn record_phases(client: &kube::Client) -> History {
    let history: History = Arc::default();
    let h = history.clone();
    let api: Api<Machine> = Api::namespaced(client.clone(), "default");
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(m)) = events.next().await {
            let Some(phase) = m.status.as_ref().and_then(|s| s.phase.clone()) else {
                continue;
            };
            let mut h = h.lock();
            let seen = h.entry(m.name().to_string()).or_default();
            if seen.last() != Some(&phase) {
                seen.push(phase);
            }
        }
    });
    history
}

async fn machines(client: &kube::Client) -> Vec<Machine> {
    Api::<Machine>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

async fn running(client: &kube::Client) -> usize {
    machines(client)
        .await
        .iter()
        .filter(|m| m.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_machine_deployment_comes_up_through_every_phase_and_goes_away_with_its_cluster() {
    let s = stack().await;
    let history = record_phases(&s.client);
    apply(&s.client, CLUSTER).await;
    apply(&s.client, DEPLOYMENT).await;
    eventually("3 Running machines", 60, async || {
        running(&s.client).await == 3
    })
    .await;

    // Every Machine passed Pending → Provisioning → Provisioned → Running.
    let h = history.lock().clone();
    assert_eq!(h.len(), 3, "{h:?}");
    for (name, phases) in &h {
        assert_eq!(
            phases,
            &["Pending", "Provisioning", "Provisioned", "Running"],
            "{name}"
        );
    }

    // Each Machine's bootstrap and infrastructure objects were cloned from
    // the templates and are owned by the Machine.
    let configs = dynamic(
        &s.client,
        "bootstrap.cluster.x-k8s.io/v1beta1",
        "TrellisConfig",
    )
    .await;
    let locals = dynamic(
        &s.client,
        "infrastructure.cluster.x-k8s.io/v1beta1",
        "LocalMachine",
    )
    .await;
    for m in machines(&s.client).await {
        let cfg = configs.get(m.name()).await.unwrap();
        let ann = cfg.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(ann[labels::CLONED_FROM_NAME], "capi-quickstart-md-0");
        assert_eq!(
            ann[labels::CLONED_FROM_GROUP_KIND],
            "TrellisConfigTemplate.bootstrap.cluster.x-k8s.io"
        );
        let owner = capi::meta::controller_of(&cfg.metadata).unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Machine", m.name())
        );
        let lm = locals.get(m.name()).await.unwrap();
        assert_eq!(
            capi::meta::controller_of(&lm.metadata).unwrap().kind,
            "Machine"
        );
        assert_eq!(
            lm.data["spec"]["providerID"].as_str(),
            m.spec.provider_id.as_deref()
        );
        // The data Secret holds cloud-init with a bootstrap token.
        let secret: Secret = Api::<Secret>::namespaced(s.client.clone(), "default")
            .get(m.spec.bootstrap.data_secret_name.as_deref().unwrap())
            .await
            .unwrap();
        let data = String::from_utf8(secret.data.unwrap()["value"].0.clone()).unwrap();
        assert!(data.starts_with("#cloud-config"), "{data}");
        assert_eq!(secret.type_.as_deref(), Some("cluster.x-k8s.io/secret"));
        // The Node booted from it: its kubelet version, its labels, and the
        // uninitialized taint removed once the Machine's labels were synced.
        let node_name = m
            .status
            .as_ref()
            .unwrap()
            .node_ref
            .as_ref()
            .unwrap()
            .name
            .clone()
            .unwrap();
        let node: Node = Api::<Node>::all(s.client.clone())
            .get(&node_name)
            .await
            .unwrap();
        let info = node.status.as_ref().unwrap().node_info.as_ref().unwrap();
        assert_eq!(info.kubelet_version, "v1.31.2");
        let nl = node.metadata.labels.clone().unwrap();
        assert_eq!(nl["node.kubernetes.io/pool"], "md-0");
        assert_eq!(nl["node-role.kubernetes.io/worker"], "");
        assert_eq!(nl["node.kubernetes.io/instance-type"], "local.small");
        let taints = node
            .spec
            .as_ref()
            .unwrap()
            .taints
            .clone()
            .unwrap_or_default();
        assert!(
            taints.iter().all(|t| t.key != labels::UNINITIALIZED_TAINT),
            "{taints:?}"
        );
        let na = node.metadata.annotations.clone().unwrap();
        assert_eq!(na[labels::NODE_MACHINE], m.name());
    }
    // The deployment reports them.
    eventually("deployment status", 30, async || {
        let md = Api::<MachineDeployment>::namespaced(s.client.clone(), "default")
            .get("capi-quickstart-md-0")
            .await
            .unwrap();
        md.status.as_ref().is_some_and(|st| {
            st.ready_replicas == 3
                && st.updated_replicas == 3
                && st.phase.as_deref() == Some("Running")
        })
    })
    .await;
    let cluster: Cluster = Api::namespaced(s.client.clone(), "default")
        .get("capi-quickstart")
        .await
        .unwrap();
    assert_eq!(
        cluster.status.unwrap().phase.as_deref(),
        Some("Provisioned")
    );

    // Deleting the Cluster deletes everything: Machines, their objects,
    // VMs and Nodes, the templates (owned by the Cluster), the
    // LocalCluster.
    Api::<Cluster>::namespaced(s.client.clone(), "default")
        .delete("capi-quickstart", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Cluster to be gone", 60, async || {
        Api::<Cluster>::namespaced(s.client.clone(), "default")
            .get_opt("capi-quickstart")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    eventually("everything else to be gone", 60, async || {
        let md = Api::<MachineDeployment>::namespaced(s.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        let ms = Api::<MachineSet>::namespaced(s.client.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        let nodes = Api::<Node>::all(s.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        let lms = locals
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        let templates = dynamic(
            &s.client,
            "infrastructure.cluster.x-k8s.io/v1beta1",
            "LocalMachineTemplate",
        )
        .await
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len();
        let m = machines(&s.client).await.len();
        md + ms + m + nodes + lms + templates == 0 && s.provider.vms().is_empty()
    })
    .await;
    // Each Machine ended Deleting → Deleted.
    let h = history.lock().clone();
    for (name, phases) in h {
        assert!(
            phases.ends_with(&["Deleting".into(), "Deleted".into()]),
            "{name}: {phases:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn references_to_unknown_kinds_and_configs_that_never_get_ready_say_why() {
    let s = stack().await;
    apply(&s.client, CLUSTER).await;
    // A Machine whose infrastructure kind nobody serves, and one in a
    // Cluster whose infrastructure never gets ready (so its bootstrap
    // config never does).
    apply(
        &s.client,
        r#"
apiVersion: cluster.x-k8s.io/v1beta1
kind: Machine
metadata: {name: unknown-kind, namespace: default}
spec:
  clusterName: capi-quickstart
  bootstrap: {dataSecretName: handmade}
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: AWSMachine, name: x}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: stuck, namespace: default}
spec:
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: LocalCluster, name: missing}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: TrellisConfig
metadata: {name: never-ready, namespace: default}
spec: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: LocalMachine
metadata: {name: never-ready, namespace: default}
spec: {}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Machine
metadata: {name: never-ready, namespace: default}
spec:
  clusterName: stuck
  bootstrap:
    configRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta1, kind: TrellisConfig, name: never-ready}
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: LocalMachine, name: never-ready}
"#,
    )
    .await;
    let api: Api<Machine> = Api::namespaced(s.client.clone(), "default");
    let condition = |m: &Machine, t: &str| {
        m.condition(t)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
            .unwrap_or_default()
    };
    eventually("the unknown kind to be reported", 30, async || {
        let m = api.get("unknown-kind").await.unwrap();
        condition(&m, "InfrastructureReady").1 == "InvalidReference"
    })
    .await;
    let m = api.get("unknown-kind").await.unwrap();
    let (_, _, message) = condition(&m, "InfrastructureReady");
    assert!(message.contains("AWSMachine"), "{message}");
    // Its data Secret was given directly: the bootstrap step is skipped.
    assert!(m.status.as_ref().unwrap().bootstrap_ready);
    assert_eq!(
        m.status.as_ref().unwrap().phase.as_deref(),
        Some("Provisioning")
    );

    eventually("the stuck Machine to say why", 30, async || {
        let m = api.get("never-ready").await.unwrap();
        condition(&m, "BootstrapReady").1 == "WaitingForClusterInfrastructure"
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let m = api.get("never-ready").await.unwrap();
    assert_eq!(m.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    assert!(m.spec.bootstrap.data_secret_name.is_none());
    let ready = m.condition("Ready").unwrap();
    assert_eq!(ready.status, "False");
    assert!(
        ready.message.contains("infrastructure"),
        "{}",
        ready.message
    );

    // The owner references the Machine controller put on them.
    let configs = dynamic(
        &s.client,
        "bootstrap.cluster.x-k8s.io/v1beta1",
        "TrellisConfig",
    )
    .await;
    let cfg = configs.get("never-ready").await.unwrap();
    assert_eq!(
        capi::meta::controller_of(&cfg.metadata).unwrap().name,
        "never-ready"
    );
}

/// Machine name → (phase, deleting).
async fn snapshot(client: &kube::Client) -> BTreeMap<String, (String, bool)> {
    machines(client)
        .await
        .into_iter()
        .map(|m| {
            (
                m.name().to_string(),
                (
                    m.status
                        .as_ref()
                        .and_then(|s| s.phase.clone())
                        .unwrap_or_default(),
                    m.metadata.deletion_timestamp.is_some(),
                ),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_infrastructure_template_rolls_out_within_surge_and_unavailable() {
    let s = stack().await;
    apply(&s.client, CLUSTER).await;
    apply(&s.client, DEPLOYMENT).await;
    eventually("3 Running machines", 60, async || {
        running(&s.client).await == 3
    })
    .await;
    let before: Vec<String> = machines(&s.client)
        .await
        .iter()
        .map(|m| m.name().to_string())
        .collect();
    apply(
        &s.client,
        r#"
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: LocalMachineTemplate
metadata: {name: capi-quickstart-md-0-v2, namespace: default}
spec:
  template:
    spec: {bootDelay: 1s, instanceType: local.large}
"#,
    )
    .await;
    Api::<MachineDeployment>::namespaced(s.client.clone(), "default")
        .patch(
            "capi-quickstart-md-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"infrastructureRef": {"name": "capi-quickstart-md-0-v2"}}}}})),
        )
        .await
        .unwrap();
    let locals = dynamic(
        &s.client,
        "infrastructure.cluster.x-k8s.io/v1beta1",
        "LocalMachine",
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut max_total = 0;
    let mut min_running = usize::MAX;
    loop {
        let snap = snapshot(&s.client).await;
        // Deleting Machines are on their way out (a Deployment's
        // terminating Pods do not count toward maxSurge either).
        max_total = max_total.max(snap.values().filter(|(_, d)| !d).count());
        let live_running = snap.values().filter(|(p, d)| p == "Running" && !d).count();
        min_running = min_running.min(live_running);
        let replaced =
            snap.len() == 3 && live_running == 3 && snap.keys().all(|n| !before.contains(n));
        if replaced {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rollout did not finish: {snap:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        max_total <= 4,
        "maxSurge 1 exceeded: {max_total} Machines at once"
    );
    assert!(
        min_running >= 3,
        "maxUnavailable 0 violated: {min_running} Running"
    );
    for m in machines(&s.client).await {
        let lm = locals.get(m.name()).await.unwrap();
        assert_eq!(
            lm.metadata.annotations.unwrap()[labels::CLONED_FROM_NAME],
            "capi-quickstart-md-0-v2"
        );
    }
    let sets = Api::<MachineSet>::namespaced(s.client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(sets.len(), 2, "the old set is kept as history");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_node_is_remediated_but_not_when_too_many_are_down() {
    let s = stack().await;
    apply(&s.client, CLUSTER).await;
    apply(&s.client, DEPLOYMENT).await;
    let mhc =
        include_str!("../../../examples/cluster-api/machinehealthcheck.yaml").replace("30s", "2s");
    apply(&s.client, &mhc).await;
    eventually("3 Running machines", 60, async || {
        running(&s.client).await == 3
    })
    .await;
    let nodes: Api<Node> = Api::all(s.client.clone());
    let kill = async |name: &str| {
        nodes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {nodesim::faults::KUBELET: nodesim::faults::KUBELET_STOPPED}}})),
            )
            .await
            .unwrap();
    };
    let first: Vec<Machine> = machines(&s.client).await;
    let victim = first[0].name().to_string();
    kill(&victim).await;
    eventually("the killed Machine to be replaced", 60, async || {
        let snap = snapshot(&s.client).await;
        !snap.contains_key(&victim)
            && snap.values().filter(|(p, d)| p == "Running" && !d).count() == 3
    })
    .await;

    // Two of three down is more than maxUnhealthy 1: nothing is replaced.
    let now: Vec<String> = machines(&s.client)
        .await
        .iter()
        .map(|m| m.name().to_string())
        .collect();
    kill(&now[0]).await;
    kill(&now[1]).await;
    let checks = dynamic(&s.client, "cluster.x-k8s.io/v1beta1", "MachineHealthCheck").await;
    eventually("remediation to be refused", 30, async || {
        let c = checks.get("capi-quickstart-md-0").await.unwrap();
        c.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "RemediationAllowed" && c["reason"] == "TooManyUnhealthy")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let snap = snapshot(&s.client).await;
    assert_eq!(snap.len(), 3, "{snap:?}");
    assert!(
        snap.values().all(|(_, deleting)| !deleting),
        "nothing deleted: {snap:?}"
    );
    assert!(now.iter().all(|n| snap.contains_key(n)));
    let m: Machine = Api::namespaced(s.client.clone(), "default")
        .get(&now[0])
        .await
        .unwrap();
    assert_eq!(
        m.condition("HealthCheckSucceeded")
            .map(|c| c.reason.as_str()),
        Some("UnhealthyNode")
    );
    assert!(
        m.condition("OwnerRemediated").is_none(),
        "not marked for remediation"
    );
}
