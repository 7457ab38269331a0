//! The Worker and Cluster types: the contract example decodes, upstream
//! JSON round-trips unchanged, and the CRDs look like upstream's.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};
use worker::{Cluster, MachineUpdateStrategy, Worker, crds, crds_yaml};

const CONTRACT_WORKER: &str = include_str!("fixtures/contract_worker.yaml");

fn contract_worker() -> Worker {
    serde_yaml::from_str(CONTRACT_WORKER).expect("the contract example decodes")
}

#[test]
fn contract_example_decodes_with_type_local() {
    let w = contract_worker();
    assert_eq!(w.metadata.name.as_deref(), Some("bar"));
    assert_eq!(w.metadata.namespace.as_deref(), Some("shoot--foo--bar"));
    assert_eq!(w.spec.type_, "local");
    assert_eq!(w.spec.region, "eu-west-1");
    assert_eq!(w.spec.secret_ref.name.as_deref(), Some("cloudprovider"));
    let infra = w.spec.infrastructure_provider_status.as_ref().unwrap();
    assert_eq!(infra["vpc"]["subnets"][2]["id"], "subnet-0123a");

    let pool = &w.spec.pools[0];
    assert_eq!(pool.name, "cpu-worker");
    assert_eq!((pool.minimum, pool.maximum), (3, 5));
    assert_eq!(pool.max_surge, IntOrString::Int(1));
    assert_eq!(pool.max_unavailable, IntOrString::Int(0));
    assert_eq!(pool.machine_image.version, "1967.5.0");
    assert_eq!(pool.zones, ["eu-west-1b", "eu-west-1c"]);
    assert_eq!(pool.volume.as_ref().unwrap().type_.as_deref(), Some("gp2"));
    let capacity = &pool.node_template.as_ref().unwrap().capacity;
    assert_eq!(capacity["cpu"].0, "2");
    assert_eq!(capacity["memory"].0, "8Gi");
    assert_eq!(
        pool.user_data.as_ref().unwrap().0,
        b"some data to bootstrap the VM\n"
    );
    // The document's MCM names land in upstream's fields.
    let mcm = pool.machine_controller_manager.as_ref().unwrap();
    assert_eq!(mcm.machine_drain_timeout.as_deref(), Some("10m"));
    assert_eq!(mcm.machine_health_timeout.as_deref(), Some("10m"));
    assert_eq!(mcm.machine_creation_timeout.as_deref(), Some("10m"));
    assert_eq!(mcm.max_evict_retries, Some(30));
    assert_eq!(mcm.node_conditions.len(), 3);
    // The document's number becomes upstream's string.
    let ca = pool.cluster_autoscaler.as_ref().unwrap();
    assert_eq!(ca.scale_down_utilization_threshold.as_deref(), Some("0.5"));
    assert_eq!(ca.scale_down_unready_time.as_deref(), Some("1h"));
}

#[test]
fn contract_example_round_trips() {
    let w = contract_worker();
    let json = serde_json::to_value(&w).unwrap();
    let again: Worker = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(again, w);
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        json,
        "encoding is a fixpoint"
    );
    // Written back under upstream's names.
    let mcm = &json["spec"]["pools"][0]["machineControllerManager"];
    assert_eq!(mcm["machineDrainTimeout"], "10m");
    assert!(mcm.get("drainTimeout").is_none());
    assert_eq!(
        json["spec"]["pools"][0]["userData"],
        "c29tZSBkYXRhIHRvIGJvb3RzdHJhcCB0aGUgVk0K"
    );
    // Through YAML as well.
    let yaml = serde_yaml::to_string(&w).unwrap();
    let from_yaml: Worker = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(from_yaml, w);
}

/// A Worker as upstream writes it, with every pool field and a status.
fn upstream_worker_json() -> Value {
    json!({
        "apiVersion": "extensions.gardener.cloud/v1alpha1",
        "kind": "Worker",
        "metadata": {"name": "worker", "namespace": "shoot--dev--local"},
        "spec": {
            "type": "local",
            "region": "local",
            "secretRef": {"name": "cloudprovider", "namespace": "shoot--dev--local"},
            "sshPublicKey": "c3NoLXJzYSBBQUFB",
            "pools": [{
                "name": "pool",
                "machineType": "local",
                "machineImage": {"name": "local", "version": "1.0.0"},
                "minimum": 1,
                "maximum": 3,
                "maxSurge": "25%",
                "maxUnavailable": 0,
                "labels": {"worker.gardener.cloud/pool": "pool"},
                "annotations": {"a": "b"},
                "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
                "zones": ["0", "1"],
                "volume": {"name": "root", "type": "default", "size": "10Gi", "encrypted": true},
                "dataVolumes": [{"name": "data", "type": "default", "size": "20Gi"}],
                "kubeletDataVolumeName": "data",
                "nodeTemplate": {"capacity": {"cpu": "2", "memory": "4Gi"}},
                "machineControllerManager": {
                    "machineDrainTimeout": "2h0m0s",
                    "machineHealthTimeout": "10m0s",
                    "machineCreationTimeout": "20m0s",
                    "maxEvictRetries": 10,
                    "nodeConditions": ["KernelDeadlock"],
                    "inPlaceUpdateTimeout": "10m0s",
                    "disableHealthTimeout": true,
                    "machinePreserveTimeout": "1h0m0s",
                    "autoPreserveFailedMachineMax": 1
                },
                "clusterAutoscaler": {
                    "scaleDownUtilizationThreshold": "0.5",
                    "scaleDownUnneededTime": "30m0s"
                },
                "userDataSecretRef": {"name": "user-data", "key": "cloud-config"},
                "nodeAgentSecretName": "gardener-node-agent-pool-0123456789abcdef",
                "kubernetesVersion": "1.31.1",
                "kubeletConfig": {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "100m"}},
                "providerConfig": {"apiVersion": "x/v1", "kind": "WorkerConfig"},
                "architecture": "amd64",
                "priority": 10,
                "updateStrategy": "AutoInPlaceUpdate"
            }]
        },
        "status": {
            "providerStatus": {"apiVersion": "local.provider.extensions.gardener.cloud/v1alpha1", "kind": "WorkerStatus"},
            "lastOperation": {
                "description": "Successfully reconciled Worker",
                "lastUpdateTime": "2024-05-01T12:00:00Z",
                "progress": 100,
                "state": "Succeeded",
                "type": "Reconcile"
            },
            "observedGeneration": 3,
            "machineDeployments": [
                {"name": "shoot--dev--local-pool-z1", "minimum": 1, "maximum": 2, "priority": 10},
                {"name": "shoot--dev--local-pool-z2", "minimum": 0, "maximum": 1}
            ],
            "machineDeploymentsLastUpdateTime": "2024-05-01T12:00:00Z",
            "inPlaceUpdates": {"workerPoolToHashMap": {"pool": "0123456789abcdef"}}
        }
    })
}

#[test]
fn upstream_json_round_trips_unchanged() {
    let input = upstream_worker_json();
    let w: Worker = serde_json::from_value(input.clone()).unwrap();
    assert_eq!(
        w.spec.pools[0].update_strategy,
        Some(MachineUpdateStrategy::AutoInPlaceUpdate)
    );
    assert!(w.spec.pools[0].is_in_place());
    assert_eq!(w.spec.ssh_public_key.as_ref().unwrap().0, b"ssh-rsa AAAA");
    assert_eq!(serde_json::to_value(&w).unwrap(), input);
}

#[test]
fn cluster_round_trips_raw_objects() {
    let input = json!({
        "apiVersion": "extensions.gardener.cloud/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "shoot--dev--local"},
        "spec": {
            "cloudProfile": {"apiVersion": "core.gardener.cloud/v1beta1", "kind": "CloudProfile", "metadata": {"name": "local"}},
            "seed": {"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Seed", "metadata": {"name": "local"}},
            "shoot": {"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot", "spec": {"hibernation": {"enabled": true}}}
        }
    });
    let c: Cluster = serde_json::from_value(input.clone()).unwrap();
    assert_eq!(c.spec.shoot["spec"]["hibernation"]["enabled"], true);
    assert_eq!(serde_json::to_value(&c).unwrap(), input);
}

#[test]
fn crds_match_upstream_names_scope_and_columns() {
    let crds = crds();
    assert_eq!(crds.len(), 2);
    let worker = &crds[0];
    assert_eq!(
        worker.metadata.name.as_deref(),
        Some("workers.extensions.gardener.cloud")
    );
    assert_eq!(worker.spec.group, "extensions.gardener.cloud");
    assert_eq!(worker.spec.scope, "Namespaced");
    assert_eq!(worker.spec.names.kind, "Worker");
    assert_eq!(worker.spec.names.plural, "workers");
    assert_eq!(worker.spec.names.short_names, None);
    let version = &worker.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let columns: Vec<&str> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(columns, ["Type", "Region", "Status", "Age"]);

    let schema = serde_json::to_value(version.schema.as_ref().unwrap()).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(
        spec["properties"]["infrastructureProviderStatus"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
    assert_eq!(
        spec["properties"]["pools"]["items"]["properties"]["providerConfig"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
    let required: Vec<&str> = spec["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(required, ["pools", "region", "secretRef", "type"]);
    assert_eq!(
        spec["properties"]["pools"]["items"]["properties"]["maxSurge"]["x-kubernetes-int-or-string"],
        true
    );

    let cluster = &crds[1];
    assert_eq!(
        cluster.metadata.name.as_deref(),
        Some("clusters.extensions.gardener.cloud")
    );
    assert_eq!(cluster.spec.scope, "Cluster");
    assert!(
        cluster.spec.versions[0]
            .subresources
            .as_ref()
            .is_none_or(|s| s.status.is_none())
    );
    let schema = serde_json::to_value(cluster.spec.versions[0].schema.as_ref().unwrap()).unwrap();
    assert_eq!(
        schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["shoot"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
}

#[test]
fn crds_yaml_holds_both_documents() {
    let yaml = crds_yaml();
    let docs: Vec<Value> = yaml
        .split("---\n")
        .map(|d| serde_yaml::from_str(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[1]["spec"]["names"]["kind"], "Cluster");
}
