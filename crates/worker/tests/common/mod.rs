//! Fixtures shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use worker::{
    ImageEntry, ImageTable, MachineImage, PlanInput, ShootFacts, Volume, Worker, WorkerPool,
    WorkerSpec,
};

pub const NAMESPACE: &str = "shoot--dev--local";

/// A pool with image `local@1.0.0`, Kubernetes 1.31.1, a root volume and
/// inline user data.
pub fn pool(name: &str, zones: &[&str], minimum: i32, maximum: i32) -> WorkerPool {
    WorkerPool {
        name: name.to_string(),
        machine_type: "local".to_string(),
        machine_image: MachineImage {
            name: "local".to_string(),
            version: "1.0.0".to_string(),
        },
        minimum,
        maximum,
        max_surge: IntOrString::Int(1),
        max_unavailable: IntOrString::Int(0),
        zones: zones.iter().map(|z| z.to_string()).collect(),
        volume: Some(Volume {
            size: "20Gi".to_string(),
            type_: Some("default".to_string()),
            ..Volume::default()
        }),
        kubernetes_version: Some("1.31.1".to_string()),
        user_data: Some(ByteString(b"#cloud-config\n".to_vec())),
        ..WorkerPool::default()
    }
}

pub fn worker_with(pools: Vec<WorkerPool>) -> Worker {
    let mut w = Worker::new(
        "worker",
        WorkerSpec {
            type_: "local".to_string(),
            region: "local".to_string(),
            secret_ref: SecretReference {
                name: Some("cloudprovider".to_string()),
                namespace: Some(NAMESPACE.to_string()),
            },
            pools,
            ..WorkerSpec::default()
        },
    );
    w.metadata.namespace = Some(NAMESPACE.to_string());
    w
}

pub fn shoot() -> ShootFacts {
    ShootFacts {
        technical_id: Some(NAMESPACE.to_string()),
        kubernetes_version: Some("1.31.1".to_string()),
        ..ShootFacts::default()
    }
}

pub fn image(version: &str, image: &str) -> ImageEntry {
    ImageEntry {
        name: "local".to_string(),
        version: version.to_string(),
        image: image.to_string(),
        architecture: Some("amd64".to_string()),
        capabilities: BTreeMap::new(),
    }
}

pub fn images() -> ImageTable {
    ImageTable(vec![
        image("1.0.0", "local-image:1.0.0"),
        image("1.1.0", "local-image:1.1.0"),
    ])
}

pub fn input<'a>(w: &'a Worker, shoot: &'a ShootFacts, images: &'a ImageTable) -> PlanInput<'a> {
    PlanInput::new(w, NAMESPACE, shoot, images)
}
