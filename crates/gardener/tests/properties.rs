//! Property tests: rendering is idempotent, and flavor selection only ever
//! returns a compatible flavor (and errs exactly when none is).

use gardener::capabilities::{are_compatible, select_flavor};
use gardener::render::render;
use gardener::*;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use proptest::prelude::*;

const CAP_NAMES: [&str; 3] = ["architecture", "storage", "gen"];
const CAP_VALUES: [[&str; 3]; 3] = [
    ["amd64", "arm64", "amd64"],
    ["NVMe", "SCSI", "IDE"],
    ["g1", "g2", "g3"],
];

/// Definitions: `architecture` first, then a random subset of the others,
/// each with 1–3 values.
fn arb_defs() -> impl Strategy<Value = Vec<CapabilityDefinition>> {
    (1usize..=2, 1usize..=3, 1usize..=3, 0usize..=2).prop_map(|(archs, s, g, extra)| {
        let mut defs = vec![CapabilityDefinition {
            name: CAP_NAMES[0].into(),
            values: CAP_VALUES[0][..archs]
                .iter()
                .map(|v| v.to_string())
                .collect(),
        }];
        for (i, n) in [(1, s), (2, g)].into_iter().take(extra) {
            defs.push(CapabilityDefinition {
                name: CAP_NAMES[i].into(),
                values: CAP_VALUES[i][..n].iter().map(|v| v.to_string()).collect(),
            });
        }
        defs
    })
}

/// A capability map drawing names and values from the pools, so some are
/// undefined and many overlap.
fn arb_caps() -> impl Strategy<Value = Capabilities> {
    proptest::collection::btree_map(
        (0usize..3).prop_map(|i| CAP_NAMES[i].to_string()),
        proptest::collection::vec((0usize..3, 0usize..3), 0..3),
        0..3,
    )
    .prop_map(|m| {
        m.into_iter()
            .map(|(k, vs)| {
                let i = CAP_NAMES.iter().position(|n| *n == k).unwrap_or(0);
                let mut values: Vec<String> = vs
                    .into_iter()
                    .map(|(_, j)| CAP_VALUES[i][j].to_string())
                    .collect();
                values.dedup();
                (k, values)
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn selected_flavor_is_compatible(
        defs in arb_defs(),
        type_caps in arb_caps(),
        flavors in proptest::collection::vec(arb_caps(), 0..6),
    ) {
        let any_compatible = flavors.iter().any(|f| are_compatible(&type_caps, f, &defs));
        match select_flavor(&type_caps, &flavors, &defs) {
            Ok(Some(i)) => prop_assert!(are_compatible(&type_caps, &flavors[i], &defs)),
            Ok(None) => prop_assert!(flavors.is_empty()),
            Err(Error::NoCompatibleFlavor(_)) => prop_assert!(!any_compatible),
            Err(Error::AmbiguousFlavor(_)) => prop_assert!(any_compatible),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}

fn mt(name: String, arch: Option<&str>, caps: Capabilities) -> MachineType {
    MachineType {
        name,
        cpu: Quantity("2".into()),
        gpu: Quantity("0".into()),
        memory: Quantity("4Gi".into()),
        architecture: arch.map(str::to_string),
        capabilities: caps,
        ..Default::default()
    }
}

fn arb_version() -> impl Strategy<Value = String> {
    (0u8..4, 0u8..4).prop_map(|(a, b)| format!("1.{a}.{b}"))
}

fn arb_image_version(with_caps: bool) -> impl Strategy<Value = MachineImageVersion> {
    (
        arb_version(),
        proptest::option::of(0i64..3),
        proptest::collection::vec(0usize..2, 0..2),
        proptest::bool::ANY,
        proptest::option::of(prop_oneof![
            Just(Classification::Supported),
            Just(Classification::Deprecated)
        ]),
    )
        .prop_map(
            move |(version, exp, archs, flavors, class)| MachineImageVersion {
                expirable: ExpirableVersion {
                    version,
                    expiration_date: exp.map(|d| {
                        Time(
                            chrono::DateTime::from_timestamp(1_800_000_000 + d * 86_400, 0)
                                .unwrap_or_default(),
                        )
                    }),
                    classification: class,
                    ..Default::default()
                },
                architectures: archs
                    .iter()
                    .map(|i| ["amd64", "arm64"][*i].to_string())
                    .collect(),
                capability_flavors: if with_caps && flavors {
                    vec![Capabilities::from([(
                        "architecture".to_string(),
                        vec!["amd64".to_string()],
                    )])]
                } else {
                    vec![]
                },
                ..Default::default()
            },
        )
}

fn arb_images(with_caps: bool) -> impl Strategy<Value = Vec<MachineImage>> {
    proptest::collection::btree_map(
        0u8..3,
        (
            proptest::collection::vec(arb_image_version(with_caps), 0..4),
            proptest::option::of(prop_oneof![
                Just(UpdateStrategy::Patch),
                Just(UpdateStrategy::Minor)
            ]),
        ),
        0..3,
    )
    .prop_map(|m| {
        m.into_iter()
            .map(|(i, (mut versions, update_strategy))| {
                let mut seen = std::collections::BTreeSet::new();
                versions.retain(|v| seen.insert(v.expirable.version.clone()));
                MachineImage {
                    name: format!("image-{i}"),
                    versions,
                    update_strategy,
                }
            })
            .collect()
    })
}

fn arb_types() -> impl Strategy<Value = Vec<MachineType>> {
    proptest::collection::btree_map(
        0u8..4,
        (proptest::option::of(0usize..2), proptest::bool::ANY),
        0..4,
    )
    .prop_map(|m| {
        m.into_iter()
            .map(|(i, (arch, with_caps))| {
                let arch = arch.map(|a| ["amd64", "arm64"][a]);
                let caps = match (with_caps, arch) {
                    (true, Some(a)) => {
                        Capabilities::from([("architecture".to_string(), vec![a.to_string()])])
                    }
                    _ => Capabilities::new(),
                };
                mt(format!("type-{i}"), arch, caps)
            })
            .collect()
    })
}

fn arb_parent() -> impl Strategy<Value = CloudProfileSpec> {
    proptest::bool::ANY.prop_flat_map(|with_caps| {
        (
            arb_images(with_caps),
            arb_types(),
            proptest::collection::btree_set(arb_version(), 1..4),
            proptest::option::of(1i32..50),
            proptest::option::of(Just("PARENT-PEM\n".to_string())),
        )
            .prop_map(move |(images, types, k8s, limit, ca)| CloudProfileSpec {
                type_: "local".into(),
                kubernetes: KubernetesSettings {
                    versions: k8s
                        .into_iter()
                        .map(|version| ExpirableVersion {
                            version,
                            ..Default::default()
                        })
                        .collect(),
                },
                machine_images: images,
                machine_types: types,
                machine_capabilities: if with_caps {
                    vec![CapabilityDefinition {
                        name: "architecture".into(),
                        values: vec!["amd64".into(), "arm64".into()],
                    }]
                } else {
                    vec![]
                },
                limits: limit.map(|m| Limits {
                    max_nodes_total: Some(m),
                }),
                ca_bundle: ca,
                ..Default::default()
            })
    })
}

fn arb_ncp() -> impl Strategy<Value = NamespacedCloudProfileSpec> {
    (
        arb_images(true),
        arb_types(),
        proptest::collection::vec((arb_version(), proptest::option::of(0i64..3)), 0..3),
        proptest::option::of(-5i32..50),
        proptest::option::of(Just("NCP-PEM\n".to_string())),
    )
        .prop_map(
            |(images, types, k8s, limit, ca)| NamespacedCloudProfileSpec {
                parent: CloudProfileReference::cloud_profile("parent"),
                kubernetes: Some(KubernetesSettings {
                    versions: k8s
                        .into_iter()
                        .map(|(version, d)| ExpirableVersion {
                            version,
                            expiration_date: d.map(|d| {
                                Time(
                                    chrono::DateTime::from_timestamp(1_900_000_000 + d, 0)
                                        .unwrap_or_default(),
                                )
                            }),
                            ..Default::default()
                        })
                        .collect(),
                }),
                machine_images: images,
                machine_types: types,
                limits: limit.map(|m| Limits {
                    max_nodes_total: Some(m),
                }),
                ca_bundle: ca,
                ..Default::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rendering_is_idempotent(parent in arb_parent(), ncp in arb_ncp()) {
        let once = render(&parent, &ncp);
        let twice = render(&once, &ncp);
        prop_assert_eq!(once, twice);
    }

    #[test]
    fn rendering_keeps_every_parent_entry_in_order(parent in arb_parent(), ncp in arb_ncp()) {
        let rendered = render(&parent, &ncp);
        let names: Vec<&str> = rendered.machine_types.iter().map(|t| t.name.as_str()).collect();
        let parent_names: Vec<&str> = parent.machine_types.iter().map(|t| t.name.as_str()).collect();
        prop_assert_eq!(&names[..parent_names.len()], &parent_names[..]);
        let k8s: Vec<&str> = rendered.kubernetes.versions.iter().map(|v| v.version.as_str()).collect();
        let parent_k8s: Vec<&str> = parent.kubernetes.versions.iter().map(|v| v.version.as_str()).collect();
        prop_assert_eq!(k8s, parent_k8s);
    }
}

proptest! {
    /// The allocation-free architecture check answers like the list of
    /// architectures it replaces.
    #[test]
    fn architecture_check_matches_architecture_list(
        defs in prop_oneof![arb_defs(), Just(vec![])],
        flavors in proptest::collection::vec(arb_caps(), 0..4),
        legacy in proptest::collection::vec(prop_oneof![Just("amd64".to_string()), Just("arm64".to_string())], 0..2),
        arch in prop_oneof![Just("amd64"), Just("arm64"), Just("s390x")],
    ) {
        let v = MachineImageVersion {
            expirable: ExpirableVersion { version: "1.0.0".into(), ..Default::default() },
            architectures: legacy,
            capability_flavors: flavors,
            ..Default::default()
        };
        let listed = gardener::capabilities::image_version_architectures(&v, &defs);
        let want = if listed.is_empty() { arch == "amd64" } else { listed.iter().any(|a| a == arch) };
        prop_assert_eq!(gardener::capabilities::version_supports_architecture(&v, arch, &defs), want);
    }
}
