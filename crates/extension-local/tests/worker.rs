//! The Worker controller against the embedded API server. MCM does not run;
//! a stand-in plays its part for machine deployments: it creates a machine
//! set for each deployment's current class (owned by the deployment) and,
//! while "healthy", drops the old sets and reports the deployment rolled
//! out and available. Switching it to unhealthy freezes a rollout half-way.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use api::testing::Fixture;
use api::{Machine, MachineClass, MachineDeployment, MachineSet};
use common::{eventually, fast_config, namespace, server};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use worker::{Cluster, Worker};

const NS: &str = "shoot--foo--bar";

fn b64(s: &str) -> String {
    use k8s_openapi::ByteString;
    serde_json::to_value(ByteString(s.as_bytes().to_vec()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn flavors(version: &str) -> Value {
    json!([
        {"capabilities": {"architecture": ["amd64"]}, "image": format!("local/ubuntu:{version}-amd64")},
        {"capabilities": {"architecture": ["arm64"]}, "image": format!("local/ubuntu:{version}-arm64")},
    ])
}

fn cluster(hibernated: bool) -> Value {
    json!({
        "apiVersion": "extensions.gardener.cloud/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": NS},
        "spec": {
            "seed": {"metadata": {"name": "local"}},
            "shoot": {
                "apiVersion": "core.gardener.cloud/v1beta1",
                "kind": "Shoot",
                "metadata": {"name": "bar", "namespace": "garden-foo"},
                "spec": {
                    "kubernetes": {"version": "1.31.2"},
                    "hibernation": {"enabled": hibernated},
                },
                "status": {"technicalID": NS},
            },
            "cloudProfile": {
                "apiVersion": "core.gardener.cloud/v1beta1",
                "kind": "CloudProfile",
                "metadata": {"name": "local"},
                "spec": {
                    "type": "local",
                    "kubernetes": {"versions": [{"version": "1.31.2"}]},
                    "machineCapabilities": [{"name": "architecture", "values": ["amd64", "arm64"]}],
                    "machineImages": [{"name": "ubuntu", "versions": [
                        {"version": "22.4.0"}, {"version": "24.4.0"},
                    ]}],
                    "machineTypes": [{
                        "name": "local", "cpu": "2", "gpu": "0", "memory": "4Gi",
                        "capabilities": {"architecture": ["amd64"]},
                    }],
                    "regions": [{"name": "local", "zones": [{"name": "z1"}, {"name": "z2"}, {"name": "z3"}]}],
                    "providerConfig": {
                        "apiVersion": "local.provider.extensions.gardener.cloud/v1alpha1",
                        "kind": "CloudProfileConfig",
                        "machineImages": [{"name": "ubuntu", "versions": [
                            {"version": "22.4.0", "capabilityFlavors": flavors("22.04")},
                            {"version": "24.4.0", "capabilityFlavors": flavors("24.04")},
                        ]}],
                    },
                },
            },
        },
    })
}

fn pool(name: &str, version: &str, max: i32) -> Value {
    json!({
        "name": name,
        "machineType": "local",
        "machineImage": {"name": "ubuntu", "version": version},
        "minimum": 5,
        "maximum": max,
        "maxSurge": 1,
        "maxUnavailable": 0,
        "zones": ["z1", "z2", "z3"],
        "labels": {"worker.gardener.cloud/pool": name},
    })
}

fn worker_object() -> Value {
    let mut cpu = pool("cpu", "22.4.0", 5);
    cpu["userData"] = json!(b64("#cloud-config cpu"));
    let mut gpu = pool("gpu", "22.4.0", 10);
    gpu["userDataSecretRef"] = json!({"name": "ud-gpu", "key": "userData"});
    json!({
        "apiVersion": "extensions.gardener.cloud/v1alpha1",
        "kind": "Worker",
        "metadata": {"name": "bar", "namespace": NS},
        "spec": {
            "type": "local",
            "region": "local",
            "secretRef": {"name": "cloudprovider", "namespace": NS},
            "pools": [cpu, gpu],
        },
    })
}

fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| (k.to_string(), json!(b64(v))))
        .collect();
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS}, "data": data}))
        .unwrap()
}

/// The stand-in for MCM's machine deployment controller.
fn fake_mcm(client: kube::Client, healthy: Arc<AtomicBool>) {
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let sets: Api<MachineSet> = Api::namespaced(client, NS);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let (Ok(md_list), Ok(set_list)) = (
                mds.list(&ListParams::default()).await,
                sets.list(&ListParams::default()).await,
            ) else {
                continue;
            };
            let healthy = healthy.load(Ordering::SeqCst);
            for md in md_list.items {
                if md.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let name = md.metadata.name.clone().unwrap_or_default();
                let class = md.spec.template.spec.class.name.clone();
                let owned: Vec<&MachineSet> = set_list
                    .items
                    .iter()
                    .filter(|s| {
                        s.metadata
                            .owner_references
                            .iter()
                            .flatten()
                            .any(|o| o.name == name)
                    })
                    .collect();
                if !owned
                    .iter()
                    .any(|s| s.spec.template.spec.class.name == class)
                {
                    let set = json!({
                        "apiVersion": "machine.sapcloud.io/v1alpha1",
                        "kind": "MachineSet",
                        "metadata": {
                            "name": class,
                            "namespace": NS,
                            "ownerReferences": [{
                                "apiVersion": "machine.sapcloud.io/v1alpha1",
                                "kind": "MachineDeployment",
                                "name": name,
                                "uid": md.metadata.uid,
                                "controller": true,
                            }],
                        },
                        "spec": {
                            "replicas": md.spec.replicas,
                            "selector": {"matchLabels": {"name": name}},
                            "template": {
                                "metadata": {"labels": {"name": name}},
                                "spec": {"class": {"kind": "MachineClass", "name": class}},
                            },
                        },
                    });
                    if let Ok(set) = serde_json::from_value::<MachineSet>(set) {
                        let _ = sets.create(&PostParams::default(), &set).await;
                    }
                }
                if healthy {
                    for old in owned
                        .iter()
                        .filter(|s| s.spec.template.spec.class.name != class)
                    {
                        let old = old.metadata.name.clone().unwrap_or_default();
                        let _ = sets.delete(&old, &DeleteParams::default()).await;
                    }
                }
                let replicas = md.spec.replicas;
                let (updated, available, state) = if healthy {
                    (replicas, replicas, "True")
                } else {
                    (0, 0, "False")
                };
                let status = json!({"status": {
                    "observedGeneration": md.metadata.generation.unwrap_or(0),
                    "replicas": replicas,
                    "updatedReplicas": updated,
                    "readyReplicas": available,
                    "availableReplicas": available,
                    "unavailableReplicas": replicas - available,
                    "conditions": [{"type": "Available", "status": state}],
                }});
                let _ = mds
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await;
            }
        }
    });
}

async fn names<K>(api: &Api<K>) -> BTreeSet<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter_map(|o| o.meta().name.clone())
                .collect()
        })
        .unwrap_or_default()
}

async fn class_secret_names(secrets: &Api<Secret>) -> BTreeSet<String> {
    let lp = ListParams::default().labels("gardener.cloud/purpose=machineclass");
    secrets
        .list(&lp)
        .await
        .map(|l| {
            l.items
                .iter()
                .filter_map(|s| s.metadata.name.clone())
                .collect()
        })
        .unwrap_or_default()
}

async fn op_state(workers: &Api<Worker>) -> (String, i64, i64) {
    let Ok(w) = workers.get("bar").await else {
        return (String::new(), -1, -2);
    };
    let status = w.status.clone().unwrap_or_default();
    (
        status.last_operation.map(|o| o.state).unwrap_or_default(),
        status.observed_generation,
        w.metadata.generation.unwrap_or(0),
    )
}

async fn succeeded_at_generation(workers: &Api<Worker>) -> bool {
    let (state, observed, generation) = op_state(workers).await;
    state == "Succeeded" && observed == generation
}

fn deployment(pool: &str, zone: usize) -> String {
    format!("{NS}-{pool}-z{zone}")
}

async fn class_of(mds: &Api<MachineDeployment>, name: &str) -> String {
    mds.get(name)
        .await
        .map(|md| md.spec.template.spec.class.name)
        .unwrap_or_default()
}

async fn update_worker(workers: &Api<Worker>, f: impl Fn(&mut Worker)) {
    let mut w = workers.get("bar").await.unwrap();
    f(&mut w);
    workers
        .replace("bar", &PostParams::default(), &w)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_lifecycle() {
    let client = server().await;
    namespace(&client, NS).await;
    let healthy = Arc::new(AtomicBool::new(true));
    fake_mcm(client.clone(), healthy.clone());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let ctrl = tokio::spawn(extension_local::run(
        client.clone(),
        fast_config(),
        async move {
            let _ = stop_rx.await;
        },
    ));

    let clusters: Api<Cluster> = Api::all(client.clone());
    let workers: Api<Worker> = Api::namespaced(client.clone(), NS);
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let classes: Api<MachineClass> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();

    secrets
        .create(&pp, &secret("ud-gpu", &[("userData", "#cloud-config gpu")]))
        .await
        .unwrap();
    secrets
        .create(&pp, &secret("cloudprovider", &[("token", "t")]))
        .await
        .unwrap();
    clusters
        .create(&pp, &serde_json::from_value(cluster(false)).unwrap())
        .await
        .unwrap();
    workers
        .create(&pp, &serde_json::from_value(worker_object()).unwrap())
        .await
        .unwrap();

    // Two pools over three zones: three deployments each, 2/2/1 machines.
    eventually("the worker to succeed", 30, async || {
        succeeded_at_generation(&workers).await
    })
    .await;
    let want_mds: BTreeSet<String> = ["cpu", "gpu"]
        .iter()
        .flat_map(|p| (1..=3).map(move |z| deployment(p, z)))
        .collect();
    assert_eq!(names(&mds).await, want_mds);
    for pool in ["cpu", "gpu"] {
        let mut replicas = Vec::new();
        for z in 1..=3 {
            replicas.push(mds.get(&deployment(pool, z)).await.unwrap().spec.replicas);
        }
        assert_eq!(replicas, vec![2, 2, 1], "pool {pool}");
    }
    let w = workers.get("bar").await.unwrap();
    assert!(
        w.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "extensions.gardener.cloud/worker")
    );
    let status = w.status.clone().unwrap_or_default();
    let listed: BTreeMap<String, (i32, i32)> = status
        .machine_deployments
        .iter()
        .map(|m| (m.name.clone(), (m.minimum, m.maximum)))
        .collect();
    assert_eq!(listed.len(), 6);
    assert_eq!(listed[&deployment("cpu", 3)], (1, 1));
    assert_eq!(listed[&deployment("gpu", 1)], (2, 4));
    assert_eq!(listed[&deployment("gpu", 3)], (1, 3));
    assert!(status.machine_deployments_last_update_time.is_some());
    let images = &status.provider_status.clone().unwrap_or_default()["machineImages"];
    assert_eq!(images[0]["image"], json!("local/ubuntu:22.04-amd64"));
    let rolling = status
        .conditions
        .iter()
        .find(|c| c.type_ == "RollingUpdate");
    assert_eq!(rolling.map(|c| c.status.as_str()), Some("False"));

    // Classes: one per deployment, the flavor's image, the pool's user data.
    let initial_classes = names(&classes).await;
    assert_eq!(initial_classes.len(), 6);
    assert_eq!(class_secret_names(&secrets).await, initial_classes);
    let gpu_class = class_of(&mds, &deployment("gpu", 1)).await;
    assert!(gpu_class.starts_with(&format!("{}-", deployment("gpu", 1))));
    let class = classes.get(&gpu_class).await.unwrap();
    assert_eq!(
        class.provider_spec["tags"]["image"],
        json!("local/ubuntu:22.04-amd64")
    );
    assert_eq!(class.provider_spec["zone"], json!("z1"));
    let class_secret = secrets.get(&gpu_class).await.unwrap();
    let user_data = class_secret.data.unwrap_or_default();
    assert_eq!(
        user_data.get("userData").map(|b| b.0.clone()),
        Some(b"#cloud-config gpu".to_vec())
    );
    let cpu_secret = secrets
        .get(&class_of(&mds, &deployment("cpu", 2)).await)
        .await
        .unwrap();
    assert_eq!(
        cpu_secret
            .data
            .unwrap_or_default()
            .get("userData")
            .map(|b| b.0.clone()),
        Some(b"#cloud-config cpu".to_vec())
    );

    // The autoscaler's choice within bounds is kept; pool labels reach
    // the node templates without renaming any class.
    mds.patch(
        &deployment("gpu", 1),
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    update_worker(&workers, |w| {
        w.spec.pools[0].labels.insert("team".into(), "blue".into());
    })
    .await;
    eventually("the label to reach the cpu deployments", 20, async || {
        let Ok(md) = mds.get(&deployment("cpu", 1)).await else {
            return false;
        };
        md.spec
            .template
            .spec
            .node_template
            .metadata
            .labels
            .unwrap_or_default()
            .get("team")
            .map(String::as_str)
            == Some("blue")
    })
    .await;
    eventually("the worker to succeed again", 20, async || {
        succeeded_at_generation(&workers).await
    })
    .await;
    assert_eq!(
        names(&classes).await,
        initial_classes,
        "labels rename nothing"
    );
    assert_eq!(
        mds.get(&deployment("gpu", 1)).await.unwrap().spec.replicas,
        3,
        "autoscaled replicas are kept"
    );

    // A new image version of one pool: new classes for that pool only, and
    // the old ones stay while the new deployments are not healthy.
    healthy.store(false, Ordering::SeqCst);
    let old_gpu: BTreeSet<String> = initial_classes
        .iter()
        .filter(|c| c.contains("-gpu-"))
        .cloned()
        .collect();
    let cpu_classes: BTreeSet<String> = initial_classes.difference(&old_gpu).cloned().collect();
    update_worker(&workers, |w| {
        w.spec.pools[1].machine_image.version = "24.4.0".into();
    })
    .await;
    eventually(
        "the gpu deployments to point at new classes",
        20,
        async || {
            let mut moved = true;
            for z in 1..=3 {
                moved &= !old_gpu.contains(&class_of(&mds, &deployment("gpu", z)).await);
            }
            moved
        },
    )
    .await;
    for z in 1..=3 {
        assert!(cpu_classes.contains(&class_of(&mds, &deployment("cpu", z)).await));
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let during = names(&classes).await;
    assert_eq!(during.len(), 9, "old classes wait for healthy deployments");
    assert!(old_gpu.is_subset(&during) && cpu_classes.is_subset(&during));
    assert_eq!(class_secret_names(&secrets).await, during);
    let w = workers.get("bar").await.unwrap();
    let status = w.status.clone().unwrap_or_default();
    assert_eq!(
        status.last_operation.map(|o| o.state),
        Some("Processing".to_string())
    );
    assert!(status.observed_generation < w.metadata.generation.unwrap_or(0));
    assert_eq!(
        status
            .conditions
            .iter()
            .find(|c| c.type_ == "RollingUpdate")
            .map(|c| c.status.clone()),
        Some("True".to_string())
    );

    healthy.store(true, Ordering::SeqCst);
    eventually("the rollout to finish and clean up", 20, async || {
        succeeded_at_generation(&workers).await && names(&classes).await.len() == 6
    })
    .await;
    let after = names(&classes).await;
    assert!(after.is_disjoint(&old_gpu), "old gpu classes are gone");
    assert!(cpu_classes.is_subset(&after), "cpu classes are untouched");
    assert_eq!(class_secret_names(&secrets).await, after);
    let new_class = classes
        .get(&class_of(&mds, &deployment("gpu", 2)).await)
        .await
        .unwrap();
    assert_eq!(
        new_class.provider_spec["tags"]["image"],
        json!("local/ubuntu:24.04-amd64")
    );
    assert_eq!(
        mds.get(&deployment("gpu", 1)).await.unwrap().spec.replicas,
        3,
        "a rollout keeps autoscaled replicas"
    );

    // Hibernation: every deployment at zero, machines force-deleted.
    let mut machine = Machine::test("m1").in_namespace(NS);
    machine.spec.class.name = class_of(&mds, &deployment("cpu", 1)).await;
    machines.create(&pp, &machine).await.unwrap();
    clusters
        .patch(
            NS,
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"spec": {"shoot": {"spec": {"hibernation": {"enabled": true}}}}}),
            ),
        )
        .await
        .unwrap();
    eventually("hibernation to scale everything to zero", 20, async || {
        let Ok(list) = mds.list(&ListParams::default()).await else {
            return false;
        };
        list.items.len() == 6 && list.items.iter().all(|md| md.spec.replicas == 0)
    })
    .await;
    eventually("the machine to be force-labelled", 20, async || {
        machines
            .get("m1")
            .await
            .ok()
            .and_then(|m| m.metadata.labels)
            .and_then(|l| l.get("force-deletion").cloned())
            .as_deref()
            == Some("True")
    })
    .await;
    eventually("the hibernated worker to succeed", 20, async || {
        op_state(&workers).await.0 == "Succeeded"
    })
    .await;
    assert_eq!(
        names(&classes).await,
        after,
        "hibernation keeps the classes"
    );

    // Deletion: deployments go at once; classes wait for the machines.
    workers
        .delete("bar", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deployments to be deleted", 20, async || {
        names(&mds).await.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(workers.get("bar").await.is_ok(), "the finalizer holds");
    assert_eq!(names(&classes).await, after, "classes wait for machines");
    let w = workers.get("bar").await.unwrap();
    let op = w.status.and_then(|s| s.last_operation).unwrap_or_default();
    assert_eq!(
        (op.type_.as_str(), op.state.as_str()),
        ("Delete", "Processing")
    );

    machines
        .delete("m1", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the worker to be gone",
        20,
        async || matches!(workers.get("bar").await, Err(kube::Error::Api(s)) if s.code == 404),
    )
    .await;
    assert!(names(&classes).await.is_empty());
    assert!(class_secret_names(&secrets).await.is_empty());
    assert!(names(&mds).await.is_empty());
    let left = names(&secrets).await;
    assert!(left.contains("ud-gpu") && left.contains("cloudprovider"));

    let _ = stop_tx.send(());
    tokio::time::timeout(Duration::from_secs(10), ctrl)
        .await
        .expect("the controller stops on shutdown")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_errors_are_reported_and_other_types_ignored() {
    let client = server().await;
    namespace(&client, NS).await;
    let (_stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(extension_local::run(
        client.clone(),
        fast_config(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let clusters: Api<Cluster> = Api::all(client.clone());
    let workers: Api<Worker> = Api::namespaced(client.clone(), NS);
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();

    // A Worker of another provider is left alone.
    let mut other = worker_object();
    other["metadata"]["name"] = json!("aws");
    other["spec"]["type"] = json!("aws");
    workers
        .create(&pp, &serde_json::from_value(other).unwrap())
        .await
        .unwrap();

    // Without a Cluster, then without the user data secret: lastError says why.
    workers
        .create(&pp, &serde_json::from_value(worker_object()).unwrap())
        .await
        .unwrap();
    eventually("the missing cluster to be reported", 20, async || {
        let w = workers.get("bar").await.ok();
        let err = w.and_then(|w| w.status).and_then(|s| s.last_error);
        err.is_some_and(|e| e.description.contains("cluster"))
    })
    .await;
    clusters
        .create(&pp, &serde_json::from_value(cluster(false)).unwrap())
        .await
        .unwrap();
    eventually("the missing user data to be reported", 20, async || {
        let w = workers.get("bar").await.ok();
        let err = w.and_then(|w| w.status).and_then(|s| s.last_error);
        err.is_some_and(|e| e.description.contains("ud-gpu"))
    })
    .await;
    assert!(names(&mds).await.is_empty(), "nothing is applied half-way");

    secrets
        .create(&pp, &secret("ud-gpu", &[("userData", "#cloud-config gpu")]))
        .await
        .unwrap();
    eventually("the deployments once the secret exists", 20, async || {
        names(&mds).await.len() == 6
    })
    .await;
    eventually("the error to be cleared or superseded", 20, async || {
        let w = workers.get("bar").await.ok();
        let op = w.and_then(|w| w.status).and_then(|s| s.last_operation);
        op.is_some_and(|o| o.state == "Processing")
    })
    .await;

    let aws = workers.get("aws").await.unwrap();
    assert!(aws.metadata.finalizers.unwrap_or_default().is_empty());
    assert!(
        aws.status.is_none(),
        "no status written for other providers"
    );
}
