//! The desired-state planner over whole Workers.

mod common;

use std::collections::BTreeMap;

use api::{MachineDeploymentStrategyType, OrchestrationType};
use k8s_openapi::ByteString;
use worker::labels;
use worker::plan::{ExistingDeployment, MIN_READY_SECONDS, UpdateBoundsDistribution};
use worker::{
    ClusterAutoscalerOptions, Error, ImageEntry, ImageRequest, LocalWorkerStatus,
    MachineControllerManagerSettings, MachineUpdateStrategy, PlanInput, WorkerStatus, plan,
};

use common::{NAMESPACE, image, images, input, pool, shoot, worker_with};

#[test]
fn planner_pool_min_5_max_5_over_3_zones_yields_2_2_1() {
    let w = worker_with(vec![pool("cpu", &["z-a", "z-b", "z-c"], 5, 5)]);
    let (shoot, images) = (shoot(), images());
    let desired = plan(&input(&w, &shoot, &images)).unwrap();

    let names: Vec<&str> = desired
        .machine_deployments
        .iter()
        .map(|m| m.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "shoot--dev--local-cpu-z1",
            "shoot--dev--local-cpu-z2",
            "shoot--dev--local-cpu-z3"
        ]
    );
    let replicas: Vec<i32> = desired
        .machine_deployments
        .iter()
        .map(|m| m.spec.replicas)
        .collect();
    assert_eq!(replicas, [2, 2, 1]);
    assert_eq!(desired.machine_classes.len(), 3);
    assert_eq!(desired.class_secrets.len(), 3);
    for ((md, class), secret) in desired
        .machine_deployments
        .iter()
        .zip(&desired.machine_classes)
        .zip(&desired.class_secrets)
    {
        let class_name = class.metadata.name.clone().unwrap();
        assert_eq!(md.spec.template.spec.class.name, class_name);
        assert_eq!(md.spec.template.spec.class.kind, "MachineClass");
        assert_eq!(secret.name, class_name);
        let prefix = format!("{}-", md.metadata.name.as_deref().unwrap());
        let hash = class_name
            .strip_prefix(&prefix)
            .expect("class = <deployment>-<hash>");
        assert_eq!(hash.len(), 5);
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
    }
}

#[test]
fn planner_machine_deployment_shape() {
    let mut p = pool("cpu", &["z-a", "z-b"], 1, 3);
    p.labels = BTreeMap::from([("team".to_string(), "a".to_string())]);
    p.annotations = BTreeMap::from([("note".to_string(), "x".to_string())]);
    p.machine_controller_manager = Some(MachineControllerManagerSettings {
        machine_drain_timeout: Some("10m".into()),
        max_evict_retries: Some(30),
        node_conditions: vec!["ReadonlyFilesystem".into(), "DiskPressure".into()],
        auto_preserve_failed_machine_max: Some(3),
        ..MachineControllerManagerSettings::default()
    });
    p.cluster_autoscaler = Some(ClusterAutoscalerOptions {
        scale_down_utilization_threshold: Some("0.5".into()),
        scale_down_unneeded_time: Some("30m".into()),
        ..ClusterAutoscalerOptions::default()
    });
    p.priority = Some(5);
    let w = worker_with(vec![p]);
    let (shoot, images) = (shoot(), images());
    let desired = plan(&input(&w, &shoot, &images)).unwrap();
    let md = &desired.machine_deployments[0];
    let name = md.metadata.name.clone().unwrap();

    assert_eq!(md.metadata.namespace.as_deref(), Some(NAMESPACE));
    assert_eq!(
        md.metadata.labels.as_ref().unwrap()[labels::WORKER_POOL],
        "cpu"
    );
    assert_eq!(md.spec.min_ready_seconds, MIN_READY_SECONDS);
    assert_eq!(md.spec.revision_history_limit, Some(0));
    assert_eq!(
        md.spec
            .selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref()
            .unwrap()["name"],
        name
    );
    assert_eq!(
        md.spec.template.metadata.labels.as_ref().unwrap()["name"],
        name
    );
    assert_eq!(
        md.spec.strategy.type_,
        Some(MachineDeploymentStrategyType::RollingUpdate)
    );
    assert_eq!(
        md.spec.auto_preserve_failed_machine_max,
        Some(2),
        "3 over 2 zones, first zone"
    );

    let node = &md.spec.template.spec.node_template.metadata;
    let node_labels = node.labels.as_ref().unwrap();
    assert_eq!(node_labels["team"], "a");
    assert_eq!(node_labels[labels::WORKER_POOL], "cpu");
    assert_eq!(node_labels[labels::TOPOLOGY_ZONE], "z-a");
    assert_eq!(node.annotations.as_ref().unwrap()["note"], "x");

    let config = &md.spec.template.spec.configuration;
    assert_eq!(config.drain_timeout.as_deref(), Some("10m0s"));
    assert_eq!(config.max_evict_retries, Some(30));
    assert_eq!(
        config.node_conditions.as_deref(),
        Some("ReadonlyFilesystem,DiskPressure")
    );

    let annotations = md.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        annotations[labels::CA_SCALE_DOWN_UTILIZATION_THRESHOLD],
        "0.5"
    );
    assert_eq!(annotations[labels::CA_SCALE_DOWN_UNNEEDED_TIME], "30m0s");
    assert!(!annotations.contains_key(labels::CA_SCALE_DOWN_UNREADY_TIME));
    // The wanted deployment lists all five, unset ones empty (to be removed).
    let wanted = &desired.wanted[0];
    assert_eq!(wanted.cluster_autoscaler_annotations.len(), 5);
    assert_eq!(
        wanted.cluster_autoscaler_annotations[labels::CA_MAX_NODE_PROVISION_TIME],
        ""
    );
    assert_eq!(wanted.priority, Some(5));
    assert_eq!((wanted.minimum, wanted.maximum), (1, 2));
    assert_eq!(
        (desired.wanted[1].minimum, desired.wanted[1].maximum),
        (0, 1)
    );
}

#[test]
fn planner_machine_class_and_secret_shape() {
    let mut p = pool("cpu", &["z-a"], 1, 1);
    p.machine_image.version = "1.0.0".into();
    p.node_template = Some(worker::WorkerNodeTemplate {
        capacity: BTreeMap::from([(
            "cpu".to_string(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()),
        )]),
        virtual_capacity: None,
    });
    let w = worker_with(vec![p]);
    let (shoot, images) = (shoot(), images());
    let desired = plan(&input(&w, &shoot, &images)).unwrap();
    let class = &desired.machine_classes[0];
    let class_name = class.metadata.name.clone().unwrap();
    assert_eq!(class.provider, "local");
    assert_eq!(
        class
            .credentials_secret_ref
            .as_ref()
            .unwrap()
            .name
            .as_deref(),
        Some("cloudprovider")
    );
    assert_eq!(
        class.secret_ref.as_ref().unwrap().name.as_deref(),
        Some(class_name.as_str())
    );
    let class_labels = class.metadata.labels.as_ref().unwrap();
    assert_eq!(class_labels[labels::OPERATING_SYSTEM_NAME], "local");
    assert_eq!(class_labels[labels::OPERATING_SYSTEM_VERSION], "1.0.0");
    let template = class.node_template.as_ref().unwrap();
    assert_eq!(template.capacity["cpu"].0, "2");
    assert_eq!(template.instance_type, "local");
    assert_eq!(template.region, "local");
    assert_eq!(template.zone, "z-a");
    assert_eq!(template.architecture.as_deref(), Some("amd64"));
    // Only fields the local provider spec knows: zone and tags.
    let spec = class.provider_spec.as_object().unwrap();
    let mut keys: Vec<&String> = spec.keys().collect();
    keys.sort();
    assert_eq!(keys, ["tags", "zone"]);
    assert_eq!(class.provider_spec["zone"], "z-a");
    assert_eq!(
        class.provider_spec["tags"]["kubernetes.io/cluster/shoot--dev--local"],
        "1"
    );
    assert_eq!(class.provider_spec["tags"]["image"], "local-image:1.0.0");

    let secret = desired.class_secrets[0].to_secret();
    assert_eq!(secret.metadata.name.as_deref(), Some(class_name.as_str()));
    assert_eq!(
        secret.metadata.labels.as_ref().unwrap()[labels::PURPOSE],
        "machineclass"
    );
    let data = secret.data.unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["userData"],
        "credentials stay in cloudprovider"
    );
    assert_eq!(data["userData"], ByteString(b"#cloud-config\n".to_vec()));

    assert_eq!(
        desired.provider_status.machine_images,
        [image("1.0.0", "local-image:1.0.0")]
    );
    assert_eq!(
        desired.provider_status.to_value()["apiVersion"],
        "local.provider.extensions.gardener.cloud/v1alpha1"
    );
}

fn class_names(desired: &worker::DesiredState, pool: &str) -> Vec<String> {
    desired
        .wanted
        .iter()
        .filter(|w| w.pool == pool)
        .map(|w| w.class_name.clone())
        .collect()
}

#[test]
fn planner_changing_pool_labels_keeps_class_names() {
    let (shoot, images) = (shoot(), images());
    let before_worker = worker_with(vec![pool("cpu", &["a", "b"], 2, 2)]);
    let mut changed = pool("cpu", &["a", "b"], 2, 2);
    changed.labels.insert("team".into(), "b".into());
    let after_worker = worker_with(vec![changed]);
    let before = plan(&input(&before_worker, &shoot, &images)).unwrap();
    let after = plan(&input(&after_worker, &shoot, &images)).unwrap();
    assert_eq!(class_names(&before, "cpu"), class_names(&after, "cpu"));
    let labels_after = after.machine_deployments[0]
        .spec
        .template
        .spec
        .node_template
        .metadata
        .labels
        .clone()
        .unwrap();
    assert_eq!(
        labels_after["team"], "b",
        "the new label still reaches the node template"
    );
}

#[test]
fn planner_changing_image_version_changes_only_that_pools_class_names() {
    let (shoot, images) = (shoot(), images());
    let before_worker = worker_with(vec![
        pool("cpu", &["a", "b"], 2, 2),
        pool("gpu", &["a"], 1, 1),
    ]);
    let mut updated = pool("cpu", &["a", "b"], 2, 2);
    updated.machine_image.version = "1.1.0".into();
    let after_worker = worker_with(vec![updated, pool("gpu", &["a"], 1, 1)]);
    let before = plan(&input(&before_worker, &shoot, &images)).unwrap();
    let after = plan(&input(&after_worker, &shoot, &images)).unwrap();
    let (b, a) = (class_names(&before, "cpu"), class_names(&after, "cpu"));
    assert_eq!(b.len(), 2);
    assert!(b.iter().zip(&a).all(|(x, y)| x != y), "{b:?} vs {a:?}");
    assert_eq!(class_names(&before, "gpu"), class_names(&after, "gpu"));
    assert_eq!(
        after.provider_status.machine_images.len(),
        2,
        "1.1.0 and 1.0.0 in use"
    );
}

#[test]
fn planner_keeps_autoscaled_replicas_and_template_annotations() {
    let (shoot, images) = (shoot(), images());
    let w = worker_with(vec![pool("cpu", &["a", "b"], 2, 10)]);
    let existing = [
        ExistingDeployment {
            name: "shoot--dev--local-cpu-z1".into(),
            replicas: 4,
            template_annotations: BTreeMap::from([("kept".to_string(), "yes".to_string())]),
        },
        ExistingDeployment {
            name: "shoot--dev--local-cpu-z2".into(),
            replicas: 9,
            template_annotations: BTreeMap::new(),
        },
    ];
    let desired = plan(&PlanInput {
        existing: &existing,
        ..input(&w, &shoot, &images)
    })
    .unwrap();
    let replicas: Vec<i32> = desired
        .machine_deployments
        .iter()
        .map(|m| m.spec.replicas)
        .collect();
    assert_eq!(replicas, [4, 5], "z1 kept, z2 clamped to its maximum 5");
    assert_eq!(
        desired.machine_deployments[0]
            .spec
            .template
            .metadata
            .annotations
            .as_ref()
            .unwrap()["kept"],
        "yes"
    );
}

#[test]
fn planner_hibernated_and_waking_up() {
    let images = images();
    let w = worker_with(vec![pool("cpu", &["a"], 2, 10)]);
    let existing = [ExistingDeployment {
        name: "shoot--dev--local-cpu-z1".into(),
        replicas: 6,
        ..ExistingDeployment::default()
    }];
    let mut hibernated = shoot();
    hibernated.hibernated = true;
    let desired = plan(&PlanInput {
        existing: &existing,
        ..input(&w, &hibernated, &images)
    })
    .unwrap();
    assert_eq!(desired.machine_deployments[0].spec.replicas, 0);

    let awake = shoot();
    let asleep = [ExistingDeployment {
        name: "shoot--dev--local-cpu-z1".into(),
        replicas: 0,
        ..ExistingDeployment::default()
    }];
    let desired = plan(&PlanInput {
        existing: &asleep,
        ..input(&w, &awake, &images)
    })
    .unwrap();
    assert_eq!(desired.machine_deployments[0].spec.replicas, 2);
}

#[test]
fn planner_restored_state_and_pass_through_bounds() {
    let (shoot, images) = (shoot(), images());
    let mut p = pool("cpu", &["a", "b"], 2, 10);
    p.max_surge = worker_intstr("50%");
    let w = worker_with(vec![p]);
    let restored = BTreeMap::from([("shoot--dev--local-cpu-z2".to_string(), 4)]);
    let desired = plan(&PlanInput {
        restored_replicas: &restored,
        bounds: UpdateBoundsDistribution::PassThrough,
        ..input(&w, &shoot, &images)
    })
    .unwrap();
    let replicas: Vec<i32> = desired
        .machine_deployments
        .iter()
        .map(|m| m.spec.replicas)
        .collect();
    assert_eq!(replicas, [1, 4]);
    assert!(
        desired
            .wanted
            .iter()
            .all(|d| d.max_surge == worker_intstr("50%"))
    );
}

fn worker_intstr(s: &str) -> k8s_openapi::apimachinery::pkg::util::intstr::IntOrString {
    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s.to_string())
}

#[test]
fn planner_in_place_pool() {
    let (shoot, images) = (shoot(), images());
    let mut p = pool("cpu", &["a"], 1, 1);
    p.update_strategy = Some(MachineUpdateStrategy::ManualInPlaceUpdate);
    let w = worker_with(vec![p]);
    let desired = plan(&input(&w, &shoot, &images)).unwrap();
    let md = &desired.machine_deployments[0];
    assert_eq!(
        md.spec.strategy.type_,
        Some(MachineDeploymentStrategyType::InPlaceUpdate)
    );
    let in_place = md.spec.strategy.in_place_update.as_ref().unwrap();
    assert_eq!(in_place.orchestration_type, Some(OrchestrationType::Manual));
    assert_eq!(
        md.spec.template.metadata.labels.as_ref().unwrap()[labels::WORKER_NAME],
        "worker"
    );
    assert_eq!(desired.in_place_hashes["cpu"].len(), 16);
}

#[test]
fn planner_user_data_from_secret_wins_over_inline() {
    let (shoot, images) = (shoot(), images());
    let mut p = pool("cpu", &["a"], 1, 1);
    p.user_data = None;
    let w = worker_with(vec![p]);
    assert_eq!(
        plan(&input(&w, &shoot, &images)).unwrap_err(),
        Error::MissingUserData { pool: "cpu".into() }
    );
    let fetched = BTreeMap::from([("cpu".to_string(), b"fetched".to_vec())]);
    let desired = plan(&PlanInput {
        user_data: &fetched,
        ..input(&w, &shoot, &images)
    })
    .unwrap();
    assert_eq!(desired.class_secrets[0].data["userData"], b"fetched");
}

#[test]
fn planner_rejects_pools_without_zones() {
    let (shoot, images) = (shoot(), images());
    let w = worker_with(vec![pool("cpu", &[], 1, 1)]);
    assert_eq!(
        plan(&input(&w, &shoot, &images)).unwrap_err(),
        Error::NoZones { pool: "cpu".into() }
    );
}

#[test]
fn planner_image_falls_back_to_the_worker_status() {
    let shoot = shoot();
    let empty_profile = |_: &ImageRequest<'_>| -> Result<Option<ImageEntry>, String> { Ok(None) };
    let mut p = pool("cpu", &["a"], 1, 1);
    p.machine_image.version = "0.9.0".into();
    let mut w = worker_with(vec![p]);
    let err = plan(&PlanInput::new(&w, NAMESPACE, &shoot, &empty_profile)).unwrap_err();
    assert!(matches!(err, Error::ImageNotFound { .. }), "{err}");

    w.status = Some(WorkerStatus {
        provider_status: Some(LocalWorkerStatus::with_images([image("0.9.0", "old")]).to_value()),
        ..WorkerStatus::default()
    });
    let desired = plan(&PlanInput::new(&w, NAMESPACE, &shoot, &empty_profile)).unwrap();
    assert_eq!(
        desired.machine_classes[0].provider_spec["tags"]["image"],
        "old"
    );

    let failing = |r: &ImageRequest<'_>| -> Result<Option<ImageEntry>, String> {
        Err(format!("no compatible flavor found for {}", r.machine_type))
    };
    let err = plan(&PlanInput::new(&w, NAMESPACE, &shoot, &failing)).unwrap_err();
    assert!(matches!(err, Error::ImageResolutionFailed { .. }), "{err}");
}

#[test]
fn planner_image_architecture_is_respected() {
    let shoot = shoot();
    let images = images();
    let mut p = pool("cpu", &["a"], 1, 1);
    p.architecture = Some("arm64".into());
    let w = worker_with(vec![p]);
    assert!(matches!(
        plan(&input(&w, &shoot, &images)).unwrap_err(),
        Error::ImageNotFound { .. }
    ));
}

#[test]
fn provider_status_deduplicates_images() {
    let status = LocalWorkerStatus::with_images([
        image("1.0.0", "a"),
        image("1.0.0", "a"),
        image("1.1.0", "b"),
    ]);
    assert_eq!(status.machine_images.len(), 2);
    let decoded = LocalWorkerStatus::from_provider_status(Some(&status.to_value())).unwrap();
    assert_eq!(decoded, status);
    assert!(
        LocalWorkerStatus::from_provider_status(Some(&serde_json::json!({"machineImages": 3})))
            .is_err()
    );
}

#[test]
fn planner_accepts_the_contract_example() {
    let mut w: worker::Worker =
        serde_yaml::from_str(include_str!("fixtures/contract_worker.yaml")).unwrap();
    let shoot = worker::ShootFacts {
        kubernetes_version: Some("1.31.0".into()),
        ..worker::ShootFacts::default()
    };
    let images = worker::ImageTable(vec![ImageEntry {
        name: "coreos".into(),
        version: "1967.5.0".into(),
        image: "coreos:1967.5.0".into(),
        ..ImageEntry::default()
    }]);
    w.metadata.namespace = Some("shoot--foo--bar".into());
    let desired = plan(&PlanInput::new(&w, "shoot--foo--bar", &shoot, &images)).unwrap();
    let names: Vec<&str> = desired.wanted.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "shoot--foo--bar-cpu-worker-z1",
            "shoot--foo--bar-cpu-worker-z2"
        ]
    );
    let bounds: Vec<(i32, i32)> = desired
        .wanted
        .iter()
        .map(|d| (d.minimum, d.maximum))
        .collect();
    assert_eq!(
        bounds,
        [(2, 3), (1, 2)],
        "the status numbers of the contract document"
    );
    assert_eq!(
        desired.class_secrets[0].data["userData"],
        b"some data to bootstrap the VM\n"
    );
}
