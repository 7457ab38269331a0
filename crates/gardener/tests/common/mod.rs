//! Builders shared by the integration tests: capability maps, versions,
//! profiles and shoots, so each table row reads like the spec's input.
#![allow(dead_code)]

use chrono::{DateTime, TimeZone, Utc};
use gardener::*;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The fixed "now" of every test.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0)
        .single()
        .expect("valid date")
}

/// A time `days` away from [`now`].
pub fn days(days: i64) -> Time {
    Time(now() + chrono::Duration::days(days))
}

pub fn caps(pairs: &[(&str, &[&str])]) -> Capabilities {
    pairs
        .iter()
        .map(|(k, vs)| (k.to_string(), vs.iter().map(|v| v.to_string()).collect()))
        .collect()
}

pub fn defs(pairs: &[(&str, &[&str])]) -> Vec<CapabilityDefinition> {
    pairs
        .iter()
        .map(|(k, vs)| CapabilityDefinition {
            name: k.to_string(),
            values: vs.iter().map(|v| v.to_string()).collect(),
        })
        .collect()
}

pub fn ev(version: &str) -> ExpirableVersion {
    ExpirableVersion {
        version: version.into(),
        ..Default::default()
    }
}

pub fn with_class(mut v: ExpirableVersion, c: Classification) -> ExpirableVersion {
    v.classification = Some(c);
    v
}

pub fn expired(mut v: ExpirableVersion) -> ExpirableVersion {
    v.expiration_date = Some(days(-10));
    v
}

pub fn iv(version: &str) -> MachineImageVersion {
    MachineImageVersion {
        expirable: ev(version),
        ..Default::default()
    }
}

pub fn iv_archs(version: &str, archs: &[&str]) -> MachineImageVersion {
    MachineImageVersion {
        expirable: ev(version),
        architectures: archs.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    }
}

pub fn iv_flavors(version: &str, flavors: Vec<Capabilities>) -> MachineImageVersion {
    MachineImageVersion {
        expirable: ev(version),
        capability_flavors: flavors,
        ..Default::default()
    }
}

pub fn image(name: &str, versions: Vec<MachineImageVersion>) -> MachineImage {
    MachineImage {
        name: name.into(),
        versions,
        update_strategy: None,
    }
}

pub fn mtype(name: &str) -> MachineType {
    MachineType {
        name: name.into(),
        cpu: Quantity("4".into()),
        gpu: Quantity("0".into()),
        memory: Quantity("16Gi".into()),
        ..Default::default()
    }
}

pub fn mtype_arch(name: &str, arch: &str) -> MachineType {
    MachineType {
        architecture: Some(arch.into()),
        ..mtype(name)
    }
}

pub fn mtype_caps(name: &str, c: Capabilities) -> MachineType {
    MachineType {
        capabilities: c,
        ..mtype(name)
    }
}

pub fn volume(name: &str) -> VolumeType {
    VolumeType {
        name: name.into(),
        class: "standard".into(),
        ..Default::default()
    }
}

/// A legacy (capability-less) profile with one region of two zones.
pub fn profile(images: Vec<MachineImage>, types: Vec<MachineType>) -> CloudProfileSpec {
    CloudProfileSpec {
        type_: "local".into(),
        kubernetes: KubernetesSettings {
            versions: vec![ev("1.31.2"), ev("1.31.1"), ev("1.30.5")],
        },
        machine_images: images,
        machine_types: types,
        volume_types: vec![volume("standard")],
        regions: vec![Region {
            name: "local".into(),
            zones: vec![
                AvailabilityZone {
                    name: "z1".into(),
                    ..Default::default()
                },
                AvailabilityZone {
                    name: "z2".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub fn worker(name: &str, machine_type: &str, image: &str, version: &str) -> Worker {
    Worker {
        name: name.into(),
        machine: Machine {
            type_: machine_type.into(),
            image: Some(ShootMachineImage {
                name: image.into(),
                version: Some(version.into()),
                provider_config: None,
            }),
            architecture: Some("amd64".into()),
        },
        minimum: 1,
        maximum: 3,
        zones: vec!["z1".into()],
        ..Default::default()
    }
}

pub fn shoot(workers: Vec<Worker>) -> ShootSpec {
    ShootSpec {
        cloud_profile: Some(CloudProfileReference::cloud_profile("local")),
        kubernetes: ShootKubernetes {
            version: "1.31.2".into(),
        },
        provider: Provider {
            type_: "local".into(),
            workers,
            ..Default::default()
        },
        region: "local".into(),
        ..Default::default()
    }
}

/// The fields of the causes, for assertions.
pub fn fields(causes: &[apimachinery::status::Cause]) -> Vec<String> {
    causes.iter().map(|c| c.field.clone()).collect()
}
