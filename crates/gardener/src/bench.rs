//! Synthetic large profiles and timings of the two hot paths, so a CLI
//! subcommand can print how long they take: filtering the compatible image
//! versions of every machine type, and re-rendering every NCP after a
//! parent change.
//!
//! The default size is 1,000 machine types × 200 image versions × 8
//! flavors and 1,000 NCPs; it runs in a few seconds in a release build.

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::render::render;
use crate::types::{
    Capabilities, CapabilityDefinition, CloudProfileReference, CloudProfileSpec, ExpirableVersion,
    KubernetesSettings, Limits, MachineImage, MachineImageVersion, MachineType,
    NamespacedCloudProfileSpec, Region, Time, UpdateStrategy, VolumeType,
};

/// Size of the synthetic setup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchConfig {
    /// Machine types in the profile.
    pub machine_types: usize,
    /// Image versions in the profile, spread over four images.
    pub image_versions: usize,
    /// Flavors per image version (at most 16 distinct ones exist).
    pub flavors: usize,
    /// NCPs re-rendered after the parent change.
    pub ncps: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            machine_types: 1_000,
            image_versions: 200,
            flavors: 8,
            ncps: 1_000,
        }
    }
}

/// What the bench measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchReport {
    /// The configuration used.
    pub config: BenchConfig,
    /// Building the synthetic profile and NCPs.
    pub build: Duration,
    /// Filtering compatible image versions for every machine type.
    pub filter: Duration,
    /// Compatible (type, version) pairs found, so the work cannot be
    /// optimized away and the result can be sanity-checked.
    pub compatible_pairs: usize,
    /// Re-rendering every NCP on the changed parent.
    pub render: Duration,
    /// Machine types in the last rendered profile (parent + NCP additions).
    pub rendered_machine_types: usize,
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.config;
        writeln!(
            f,
            "profile: {} machine types x {} image versions x {} flavors, {} NCPs (built in {:?})",
            c.machine_types, c.image_versions, c.flavors, c.ncps, self.build
        )?;
        writeln!(
            f,
            "filter compatible image versions for every machine type: {:?} ({} compatible pairs)",
            self.filter, self.compatible_pairs
        )?;
        write!(
            f,
            "re-render {} NCPs after a parent change: {:?} ({:?} per NCP)",
            c.ncps,
            self.render,
            self.render / u32::try_from(c.ncps.max(1)).unwrap_or(u32::MAX)
        )
    }
}

/// A fixed reference time, so runs are comparable.
pub fn bench_now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default()
}

const ARCHS: [&str; 2] = ["amd64", "arm64"];
const STORAGE: [&str; 2] = ["NVMe", "SCSI"];
const GENERATION: [&str; 2] = ["gen2", "gen1"];
const NETWORK: [&str; 2] = ["accelerated", "standard"];

fn caps(pairs: &[(&str, &str)]) -> Capabilities {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
        .collect()
}

/// The synthetic parent profile.
pub fn synthetic_profile(config: BenchConfig) -> CloudProfileSpec {
    let defs = vec![
        CapabilityDefinition {
            name: "architecture".into(),
            values: ARCHS.iter().map(|s| s.to_string()).collect(),
        },
        CapabilityDefinition {
            name: "storageAccess".into(),
            values: STORAGE.iter().map(|s| s.to_string()).collect(),
        },
        CapabilityDefinition {
            name: "generation".into(),
            values: GENERATION.iter().map(|s| s.to_string()).collect(),
        },
        CapabilityDefinition {
            name: "network".into(),
            values: NETWORK.iter().map(|s| s.to_string()).collect(),
        },
    ];
    let all_flavors: Vec<Capabilities> = ARCHS
        .iter()
        .flat_map(|a| {
            STORAGE.iter().flat_map(move |s| {
                GENERATION.iter().flat_map(move |g| {
                    NETWORK.iter().map(move |n| {
                        caps(&[
                            ("architecture", a),
                            ("storageAccess", s),
                            ("generation", g),
                            ("network", n),
                        ])
                    })
                })
            })
        })
        .collect();
    let images_count = 4;
    let per_image = config.image_versions.div_ceil(images_count).max(1);
    let mut images = Vec::new();
    let mut made = 0;
    for i in 0..images_count {
        let mut versions = Vec::new();
        for j in 0..per_image {
            if made == config.image_versions {
                break;
            }
            made += 1;
            // Each version offers a rotating window of the 16 combinations,
            // so some type/version pairs are incompatible.
            let flavors: Vec<Capabilities> = (0..config.flavors.min(all_flavors.len()))
                .map(|k| all_flavors[(3 * j + k) % all_flavors.len()].clone())
                .collect();
            let archs = {
                let mut a: Vec<String> = Vec::new();
                for f in &flavors {
                    for x in f.get("architecture").into_iter().flatten() {
                        if !a.contains(x) {
                            a.push(x.clone());
                        }
                    }
                }
                a
            };
            versions.push(MachineImageVersion {
                expirable: ExpirableVersion {
                    version: format!("{}.{}.0", 1000 + j / 10, j % 10),
                    ..Default::default()
                },
                architectures: archs,
                capability_flavors: flavors,
                ..Default::default()
            });
        }
        images.push(MachineImage {
            name: format!("image-{i}"),
            versions,
            update_strategy: Some(UpdateStrategy::Minor),
        });
    }
    let machine_types = (0..config.machine_types)
        .map(|i| {
            let arch = ARCHS[i % 2];
            let mut c = caps(&[("architecture", arch)]);
            if i % 3 == 0 {
                c.insert("storageAccess".into(), vec!["NVMe".into()]);
            }
            if i % 5 == 0 {
                c.insert("generation".into(), vec!["gen1".into()]);
            }
            if i % 7 == 0 {
                c.insert("network".into(), vec!["accelerated".into()]);
            }
            MachineType {
                name: format!("type-{i}"),
                cpu: Quantity(format!("{}", 2 + i % 64)),
                gpu: Quantity("0".into()),
                memory: Quantity(format!("{}Gi", 4 + i % 256)),
                usable: Some(true),
                architecture: Some(arch.into()),
                capabilities: c,
                ..Default::default()
            }
        })
        .collect();
    CloudProfileSpec {
        type_: "local".into(),
        kubernetes: KubernetesSettings {
            versions: ["1.33.2", "1.32.5", "1.31.9"]
                .iter()
                .map(|v| ExpirableVersion {
                    version: v.to_string(),
                    ..Default::default()
                })
                .collect(),
        },
        machine_images: images,
        machine_types,
        volume_types: vec![VolumeType {
            name: "standard".into(),
            class: "standard".into(),
            usable: Some(true),
            ..Default::default()
        }],
        regions: vec![Region {
            name: "local".into(),
            ..Default::default()
        }],
        machine_capabilities: defs,
        ..Default::default()
    }
}

/// Synthetic NCPs: each extends one expiration date, adds a machine type
/// and overrides one parent type.
pub fn synthetic_ncps(
    config: BenchConfig,
    parent: &CloudProfileSpec,
) -> Vec<NamespacedCloudProfileSpec> {
    (0..config.ncps)
        .map(|i| {
            let image = &parent.machine_images[i % parent.machine_images.len().max(1)];
            let version = image
                .versions
                .get(i % image.versions.len().max(1))
                .map(|v| v.version().to_string())
                .unwrap_or_default();
            NamespacedCloudProfileSpec {
                parent: CloudProfileReference::cloud_profile("bench"),
                machine_images: vec![MachineImage {
                    name: image.name.clone(),
                    versions: vec![MachineImageVersion {
                        expirable: ExpirableVersion {
                            version,
                            expiration_date: Some(Time(bench_now() + chrono::Duration::days(365))),
                            ..Default::default()
                        },
                        ..Default::default()
                    }],
                    update_strategy: None,
                }],
                machine_types: vec![
                    MachineType {
                        name: format!("ncp-{i}-type"),
                        cpu: Quantity("4".into()),
                        gpu: Quantity("0".into()),
                        memory: Quantity("16Gi".into()),
                        ..Default::default()
                    },
                    MachineType {
                        name: format!("type-{}", i % config.machine_types.max(1)),
                        cpu: Quantity("8".into()),
                        gpu: Quantity("0".into()),
                        memory: Quantity("32Gi".into()),
                        architecture: Some("amd64".into()),
                        ..Default::default()
                    },
                ],
                limits: Some(Limits {
                    max_nodes_total: Some(100),
                }),
                ..Default::default()
            }
        })
        .collect()
}

/// Builds the setup and times both hot paths.
pub fn run(config: BenchConfig) -> BenchReport {
    let now = bench_now();
    let started = Instant::now();
    let mut parent = synthetic_profile(config);
    let ncps = synthetic_ncps(config, &parent);
    let build = started.elapsed();

    let started = Instant::now();
    let index = crate::maintenance::CompatibilityIndex::new(&parent, now);
    let compatible_pairs: usize = parent
        .machine_types
        .iter()
        .map(|t| index.for_type(t).len())
        .sum();
    let filter = started.elapsed();

    // The parent change: a new image version appears.
    if let Some(image) = parent.machine_images.first_mut() {
        image.versions.push(MachineImageVersion {
            expirable: ExpirableVersion {
                version: "9999.0.0".into(),
                ..Default::default()
            },
            architectures: vec!["amd64".into()],
            capability_flavors: vec![caps(&[("architecture", "amd64")])],
            ..Default::default()
        });
    }
    let started = Instant::now();
    let mut rendered_machine_types = 0;
    for ncp in &ncps {
        rendered_machine_types = render(&parent, ncp).machine_types.len();
    }
    let render_time = started.elapsed();

    BenchReport {
        config,
        build,
        filter,
        compatible_pairs,
        render: render_time,
        rendered_machine_types,
    }
}
