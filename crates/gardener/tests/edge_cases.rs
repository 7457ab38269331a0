//! Our own cases beyond the spec table: shoot defaulting and validation
//! details, profile references, maintenance windows and Kubernetes
//! updates, NCP verbs and protections, multi-level inheritance,
//! cross-project use, capability validation and the bench.

mod common;

use std::collections::BTreeMap;

use common::*;
use gardener::capabilities::{sync_architecture_fields, validate_profile_capabilities};
use gardener::maintenance::{self, in_time_window};
use gardener::ncp_admission::{self, NcpRef};
use gardener::render::{parent_chain, render_chain};
use gardener::shoot_admission::*;
use gardener::*;

fn base_profile() -> CloudProfileSpec {
    let mut deprecated = iv_archs("1.2.0", &["amd64"]);
    deprecated.expirable.classification = Some(Classification::Deprecated);
    let mut preview = iv_archs("1.3.0", &["amd64"]);
    preview.expirable.classification = Some(Classification::Preview);
    let mut p = profile(
        vec![
            image("arm-only", vec![iv_archs("9.0.0", &["arm64"])]),
            image(
                "img",
                vec![
                    iv_archs("1.0.0", &["amd64"]),
                    iv_archs("1.1.0", &["amd64"]),
                    deprecated,
                    preview,
                ],
            ),
        ],
        vec![mtype_arch("t", "amd64"), mtype_arch("t-arm", "arm64")],
    );
    p.kubernetes.versions[0].classification = Some(Classification::Supported);
    p.kubernetes.versions[2].classification = Some(Classification::Supported);
    p
}

#[test]
fn kubernetes_version_prefixes_default_to_latest_supported() {
    let p = base_profile();
    assert_eq!(
        default_kubernetes_version("1.31", &p, now()).as_deref(),
        Ok("1.31.2")
    );
    assert_eq!(
        default_kubernetes_version("", &p, now()).as_deref(),
        Ok("1.31.2")
    );
    assert_eq!(
        default_kubernetes_version("1.30", &p, now()).as_deref(),
        Ok("1.30.5")
    );
    assert_eq!(
        default_kubernetes_version("1.29.0", &p, now()).as_deref(),
        Ok("1.29.0")
    );
    assert!(default_kubernetes_version("1.99", &p, now()).is_err());
    assert!(default_kubernetes_version("x.y", &p, now()).is_err());
}

#[test]
fn image_defaulting_picks_latest_non_deprecated_non_preview() {
    let p = base_profile();
    let mut w = worker("w", "t", "", "");
    w.machine.image = None;
    w.machine.architecture = None;
    let mut s = shoot(vec![w]);
    s.kubernetes.version = "1.31".into();
    let causes = default_shoot(&mut s, None, &p, now());
    assert_eq!(causes, vec![]);
    let w = &s.provider.workers[0];
    assert_eq!(w.machine.architecture.as_deref(), Some("amd64"));
    // arm-only comes first but does not support amd64; 1.3.0 is preview
    // and 1.2.0 deprecated, so 1.1.0 wins.
    let image = w.machine.image.as_ref().expect("defaulted");
    assert_eq!(
        (image.name.as_str(), image.version.as_deref()),
        ("img", Some("1.1.0"))
    );
    assert_eq!(s.kubernetes.version, "1.31.2");
}

#[test]
fn image_defaulting_keeps_the_old_image_of_an_existing_pool() {
    let p = base_profile();
    let old = shoot(vec![worker("w", "t", "img", "1.0.0")]);
    let mut new = old.clone();
    new.provider.workers[0].machine.image = None;
    assert_eq!(default_shoot(&mut new, Some(&old), &p, now()), vec![]);
    assert_eq!(
        new.provider.workers[0].machine.image,
        old.provider.workers[0].machine.image
    );

    let mut unknown = old.clone();
    unknown.provider.workers[0].machine.image = Some(ShootMachineImage {
        name: "nope".into(),
        ..Default::default()
    });
    let causes = default_shoot(&mut unknown, None, &p, now());
    assert_eq!(
        fields(&causes),
        vec!["spec.provider.workers[0].machine.image"]
    );
    assert!(
        causes[0].message.contains("offered: [arm-only, img]"),
        "{}",
        causes[0].message
    );
}

#[test]
fn arm_pool_defaults_to_an_arm_image() {
    let p = base_profile();
    let mut w = worker("w", "t-arm", "", "");
    w.machine.image = None;
    w.machine.architecture = None;
    let mut s = shoot(vec![w]);
    assert_eq!(default_shoot(&mut s, None, &p, now()), vec![]);
    let w = &s.provider.workers[0];
    assert_eq!(w.machine.architecture.as_deref(), Some("arm64"));
    assert_eq!(
        w.machine.image.as_ref().map(|i| i.name.as_str()),
        Some("arm-only")
    );
}

#[test]
fn unchanged_pools_are_not_revalidated() {
    let mut p = base_profile();
    let s = shoot(vec![worker("w", "t", "img", "1.0.0")]);
    assert_eq!(validate_shoot(&s, None, &p, now()), vec![]);
    // The operator later marks the type unusable: the existing pool stays
    // writable, a new pool with the type is refused.
    p.machine_types[0].usable = Some(false);
    assert_eq!(validate_shoot(&s, Some(&s), &p, now()), vec![]);
    let mut grown = s.clone();
    grown
        .provider
        .workers
        .push(worker("w2", "t", "img", "1.0.0"));
    let causes = validate_shoot(&grown, Some(&s), &p, now());
    assert_eq!(
        fields(&causes),
        vec!["spec.provider.workers[1].machine.type"]
    );
    assert!(causes[0].message.contains("unusable"));
}

#[test]
fn worker_validation_explains_each_problem() {
    let mut p = base_profile();
    p.regions[0].zones[1].unavailable_machine_types = vec!["t".into()];
    p.volume_types[0].min_size = Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
        "20Gi".into(),
    ));
    p.limits = Some(Limits {
        max_nodes_total: Some(2),
    });
    p.machine_images[1].versions[0].kubelet_version_constraint = Some("< 1.30".into());
    let mut w = worker("w", "t", "img", "1.0.0");
    w.zones = vec!["z2".into(), "z9".into(), "z2".into()];
    w.minimum = 3;
    w.volume = Some(Volume {
        type_: Some("standard".into()),
        volume_size: "10Gi".into(),
        ..Default::default()
    });
    let causes = validate_shoot(&shoot(vec![w]), None, &p, now());
    let f = fields(&causes);
    for want in [
        "spec.provider.workers[0].machine.type",
        "spec.provider.workers[0].volume.size",
        "spec.provider.workers[0].zones[1]",
        "spec.provider.workers[0].zones[2]",
        "spec.provider.workers",
    ] {
        assert!(
            f.contains(&want.to_string()),
            "missing {want} in {causes:#?}"
        );
    }
    // The CRI and kubelet checks wait until type and image are fine.
    assert!(!causes.iter().any(|c| c.message.contains("kubelet")));
    let causes = validate_shoot(
        &shoot(vec![worker("w", "t", "img", "1.0.0")]),
        None,
        &p,
        now(),
    );
    assert_eq!(
        fields(&causes),
        vec!["spec.provider.workers[0].machine.image.version"]
    );
    let kubelet = causes
        .iter()
        .find(|c| c.message.contains("kubelet"))
        .expect("kubelet cause");
    assert!(
        kubelet.message.contains("< 1.30") && kubelet.message.contains("1.31.2"),
        "{}",
        kubelet.message
    );
}

#[test]
fn expired_image_is_kept_on_update_but_refused_for_new_pools() {
    let mut p = base_profile();
    p.machine_images[1].versions[0].expirable.expiration_date = Some(days(-1));
    let s = shoot(vec![worker("w", "t", "img", "1.0.0")]);
    let causes = validate_shoot(&s, None, &p, now());
    assert_eq!(
        fields(&causes),
        vec!["spec.provider.workers[0].machine.image.version"]
    );
    let mut old = s.clone();
    old.provider.workers[0]
        .machine
        .image
        .as_mut()
        .expect("image")
        .version = Some("0.9.0".into());
    assert_eq!(validate_shoot(&s, Some(&old), &p, now()), vec![]);
}

#[test]
fn reference_sync_and_validation() {
    // Create with both fields is refused.
    let mut both = shoot(vec![]);
    both.cloud_profile_name = Some("local".into());
    assert_eq!(
        fields(&sync_profile_reference(&mut both, None)),
        vec!["spec.cloudProfileName"]
    );

    // Legacy name only: the reference is filled and the name mirrored.
    let mut legacy = shoot(vec![]);
    legacy.cloud_profile = None;
    legacy.cloud_profile_name = Some("local".into());
    assert_eq!(sync_profile_reference(&mut legacy, None), vec![]);
    assert_eq!(
        legacy.cloud_profile,
        Some(CloudProfileReference::cloud_profile("local"))
    );
    assert_eq!(legacy.cloud_profile_name.as_deref(), Some("local"));

    // An NCP reference clears the legacy name.
    let mut ncp = legacy.clone();
    ncp.cloud_profile = Some(CloudProfileReference::namespaced("mine"));
    assert_eq!(sync_profile_reference(&mut ncp, Some(&legacy)), vec![]);
    assert_eq!(ncp.cloud_profile_name, None);

    // From 1.34 an unchanged copy is dropped, a new one forbidden.
    let mut new34 = legacy.clone();
    new34.kubernetes.version = "1.34.0".into();
    sync_profile_reference(&mut new34, Some(&legacy));
    assert_eq!(new34.cloud_profile_name, None);
    let mut fresh = shoot(vec![]);
    fresh.kubernetes.version = "1.34.0".into();
    fresh.cloud_profile = None;
    fresh.cloud_profile_name = Some("local".into());
    sync_profile_reference(&mut fresh, None);
    let resolver = |r: &CloudProfileReference, _: &str| {
        Some(if r.is_namespaced() {
            "local".to_string()
        } else {
            r.name.clone()
        })
    };
    let causes = validate_profile_reference(
        &fresh,
        None,
        "garden-p",
        &resolver,
        Extensions::default(),
        &|_, _| false,
    );
    assert_eq!(fields(&causes), vec!["spec.cloudProfileName"]);
}

#[test]
fn profile_switches_stay_within_one_root() {
    let roots: BTreeMap<&str, &str> = BTreeMap::from([
        ("local", "local"),
        ("mine", "local"),
        ("sibling", "local"),
        ("other", "aws"),
    ]);
    let resolver =
        |r: &CloudProfileReference, _: &str| roots.get(r.name.as_str()).map(|s| s.to_string());
    let cp = shoot(vec![]);
    let mut to_ncp = cp.clone();
    to_ncp.cloud_profile = Some(CloudProfileReference::namespaced("mine"));
    assert_eq!(
        validate_profile_reference(
            &to_ncp,
            Some(&cp),
            "p",
            &resolver,
            Extensions::default(),
            &|_, _| false
        ),
        vec![]
    );
    let mut to_sibling = to_ncp.clone();
    to_sibling.cloud_profile = Some(CloudProfileReference::namespaced("sibling"));
    assert_eq!(
        validate_profile_reference(
            &to_sibling,
            Some(&to_ncp),
            "p",
            &resolver,
            Extensions::default(),
            &|_, _| false
        ),
        vec![]
    );
    let mut to_other = to_ncp.clone();
    to_other.cloud_profile = Some(CloudProfileReference::cloud_profile("other"));
    let causes = validate_profile_reference(
        &to_other,
        Some(&to_ncp),
        "p",
        &resolver,
        Extensions::default(),
        &|_, _| false,
    );
    assert_eq!(fields(&causes), vec!["spec.cloudProfile"]);
    assert!(
        causes[0].message.contains("\"local\"") && causes[0].message.contains("\"aws\""),
        "{}",
        causes[0].message
    );

    // The target must still offer what the pools use.
    let s = shoot(vec![worker("w", "t", "img", "1.0.0")]);
    let target = profile(vec![image("img", vec![iv("1.1.0")])], vec![mtype("t")]);
    let causes = validate_switch_target(&s, &target, "mine");
    assert_eq!(
        fields(&causes),
        vec!["spec.provider.workers[0].machine.image"]
    );
}

#[test]
fn cross_project_use_is_off_by_default_and_needs_the_use_verb() {
    let resolver = |_: &CloudProfileReference, _: &str| Some("local".to_string());
    let mut s = shoot(vec![]);
    s.cloud_profile = Some(CloudProfileReference {
        namespace: Some("garden-shared".into()),
        ..CloudProfileReference::namespaced("shared")
    });
    let off = validate_profile_reference(
        &s,
        None,
        "garden-p",
        &resolver,
        Extensions::default(),
        &|_, _| true,
    );
    assert_eq!(fields(&off), vec!["spec.cloudProfile.namespace"]);
    let on = Extensions {
        cross_project_use: true,
        ..Default::default()
    };
    let denied = validate_profile_reference(&s, None, "garden-p", &resolver, on, &|_, _| false);
    assert_eq!(fields(&denied), vec!["spec.cloudProfile"]);
    assert!(denied[0].message.contains("garden-shared/shared"));
    let asked = std::cell::RefCell::new(Vec::new());
    let granted = validate_profile_reference(&s, None, "garden-p", &resolver, on, &|ns, name| {
        asked.borrow_mut().push(format!("{ns}/{name}"));
        true
    });
    assert_eq!(granted, vec![]);
    assert_eq!(asked.into_inner(), vec!["garden-shared/shared"]);
}

#[test]
fn maintenance_time_windows() {
    use chrono::TimeZone;
    let at = |h, m| {
        chrono::Utc
            .with_ymd_and_hms(2026, 1, 1, h, m, 0)
            .single()
            .expect("time")
    };
    let w = |b: &str, e: &str| MaintenanceTimeWindow {
        begin: b.into(),
        end: e.into(),
    };
    assert_eq!(
        in_time_window(&w("220000+0000", "230000+0000"), at(22, 30)),
        Ok(true)
    );
    assert_eq!(
        in_time_window(&w("220000+0000", "230000+0000"), at(23, 30)),
        Ok(false)
    );
    // Wrapping midnight.
    assert_eq!(
        in_time_window(&w("230000+0000", "010000+0000"), at(0, 30)),
        Ok(true)
    );
    assert_eq!(
        in_time_window(&w("230000+0000", "010000+0000"), at(12, 0)),
        Ok(false)
    );
    // Offsets: 22:00 at +0100 is 21:00 UTC.
    assert_eq!(
        in_time_window(&w("220000+0100", "230000+0100"), at(21, 30)),
        Ok(true)
    );
    // An offset can make a same-day window wrap in UTC.
    assert_eq!(
        in_time_window(&w("003000+0100", "013000+0100"), at(23, 45)),
        Ok(true)
    );
    assert!(in_time_window(&w("22:00", "230000+0000"), at(0, 0)).is_err());
    assert!(in_time_window(&w("250000+0000", "230000+0000"), at(0, 0)).is_err());
}

#[test]
fn kubernetes_maintenance_patch_and_consecutive_minor() {
    let mut p = base_profile();
    p.kubernetes.versions = vec![
        ev("1.33.0"),
        ev("1.32.4"),
        ev("1.32.1"),
        expired(ev("1.31.9")),
        ev("1.30.2"),
        expired(ev("1.30.1")),
    ];
    let mut s = shoot(vec![]);
    s.kubernetes.version = "1.32.1".into();
    s.maintenance = Some(Maintenance {
        auto_update: Some(MaintenanceAutoUpdate {
            kubernetes_version: true,
            machine_image_version: None,
        }),
        ..Default::default()
    });
    let plan = maintenance::plan(&s, &p, now());
    assert_eq!(plan.changes.len(), 1);
    assert_eq!(
        (plan.changes[0].to.as_str(), plan.changes[0].forced),
        ("1.32.4", false)
    );

    // 1.31.9 expired without a newer patch: forced to 1.32.x only, never
    // straight to 1.33, even with auto-update off.
    s.kubernetes.version = "1.31.9".into();
    s.maintenance = None;
    let mut w = worker("w", "t", "img", "1.1.0");
    w.kubernetes = Some(WorkerKubernetes {
        version: Some("1.30.1".into()),
        kubelet: None,
    });
    s.provider.workers = vec![w];
    let plan = maintenance::plan(&s, &p, now());
    assert!(plan.errors.is_empty(), "{:?}", plan.errors);
    let k8s: Vec<(&str, &str, bool)> = plan
        .changes
        .iter()
        .filter(|c| c.kind != maintenance::ChangeKind::MachineImageVersion)
        .map(|c| (c.field.as_str(), c.to.as_str(), c.forced))
        .collect();
    assert_eq!(
        k8s,
        vec![
            ("spec.kubernetes.version", "1.32.4", true),
            (
                "spec.provider.workers[0].kubernetes.version",
                "1.30.2",
                true
            ),
        ]
    );
    let mut applied = s.clone();
    plan.apply(&mut applied);
    assert_eq!(applied.kubernetes.version, "1.32.4");
    assert!(plan.description().contains("1.31.9 expired"));
}

#[test]
fn capability_incompatible_current_image_is_forced_to_a_compatible_one() {
    let mut p = profile(
        vec![image(
            "img",
            vec![
                iv_flavors(
                    "1.0.0",
                    vec![caps(&[("architecture", &["amd64"]), ("gen", &["gen1"])])],
                ),
                iv_flavors(
                    "1.1.0",
                    vec![caps(&[("architecture", &["amd64"]), ("gen", &["gen2"])])],
                ),
                iv_flavors(
                    "1.2.0",
                    vec![caps(&[("architecture", &["amd64"]), ("gen", &["gen1"])])],
                ),
            ],
        )],
        vec![mtype_caps(
            "t",
            caps(&[("architecture", &["amd64"]), ("gen", &["gen2"])]),
        )],
    );
    p.machine_capabilities = defs(&[("architecture", &["amd64"]), ("gen", &["gen2", "gen1"])]);
    let mut s = shoot(vec![worker("w", "t", "img", "1.0.0")]);
    s.maintenance = Some(Maintenance {
        auto_update: Some(MaintenanceAutoUpdate {
            kubernetes_version: false,
            machine_image_version: Some(false),
        }),
        ..Default::default()
    });
    let plan = maintenance::plan(&s, &p, now());
    assert_eq!(plan.changes.len(), 1, "{plan:?}");
    let c = &plan.changes[0];
    // 1.2.0 is newer but has no gen2 flavor, so it is never chosen.
    assert_eq!((c.to.as_str(), c.forced), ("1.1.0", true));
    assert!(
        c.reason
            .contains("gen (machine type has [gen2], flavor has [gen1])"),
        "{}",
        c.reason
    );
}

fn parent_with_images() -> CloudProfileSpec {
    let mut p = profile(
        vec![image("img", vec![iv_archs("1.0.0", &["amd64"])])],
        vec![mtype_arch("t", "amd64")],
    );
    gardener::validation::default_cloud_profile_spec(&mut p);
    p
}

fn parse_ncp(yaml: &str) -> NamespacedCloudProfileSpec {
    serde_yaml::from_str(yaml).expect("valid NCP")
}

#[test]
fn machine_image_verb_guards_images_but_not_machine_types() {
    let p = parent_with_images();
    let new_version = parse_ncp(
        "parent: {kind: CloudProfile, name: p}\nmachineImages: [{name: img, versions: [{version: 1.5.0, architectures: [amd64]}]}]",
    );
    let causes = ncp_admission::validate(
        &new_version,
        None,
        None,
        Some(&p),
        &[],
        Extensions::default(),
        now(),
    );
    assert_eq!(fields(&causes), vec!["spec.machineImages"]);
    assert!(causes[0].message.contains("modify-spec-machineimages"));
    let new_type = parse_ncp(
        "parent: {kind: CloudProfile, name: p}\nmachineTypes: [{name: big, cpu: '64', gpu: '0', memory: 256Gi}]",
    );
    assert_eq!(
        ncp_admission::validate(
            &new_type,
            None,
            None,
            Some(&p),
            &[],
            Extensions::default(),
            now()
        ),
        vec![]
    );
    let pc = NamespacedCloudProfileSpec {
        provider_config: Some(serde_json::json!({"a": 1})),
        ..new_type.clone()
    };
    assert_eq!(
        ncp_admission::required_verbs(&pc, Some(&new_type)),
        vec![(
            ncp_admission::VERB_MODIFY_PROVIDER_CONFIG,
            "spec.providerConfig"
        )]
    );
}

#[test]
fn past_expiration_only_when_identical_to_the_rendered_date() {
    let p = parent_with_images();
    let granted = [ncp_admission::VERB_MODIFY_MACHINE_IMAGES];
    let spec = |d: i64| {
        let mut n = parse_ncp(
            "parent: {kind: CloudProfile, name: p}\nmachineImages: [{name: img, versions: [{version: 1.0.0}]}]",
        );
        n.machine_images[0].versions[0].expirable.expiration_date = Some(days(d));
        n
    };
    let past = spec(-3);
    let causes = ncp_admission::validate(
        &past,
        None,
        None,
        Some(&p),
        &granted,
        Extensions::default(),
        now(),
    );
    assert_eq!(
        fields(&causes),
        vec!["spec.machineImages[0].versions[0].expirationDate"]
    );
    let rendered = gardener::render::render(&p, &past);
    assert_eq!(
        ncp_admission::validate(
            &past,
            Some(&past),
            Some(&rendered),
            Some(&p),
            &granted,
            Extensions::default(),
            now()
        ),
        vec![]
    );
    let other_past = spec(-4);
    let causes = ncp_admission::validate(
        &other_past,
        Some(&past),
        Some(&rendered),
        Some(&p),
        &granted,
        Extensions::default(),
        now(),
    );
    assert_eq!(
        fields(&causes),
        vec!["spec.machineImages[0].versions[0].expirationDate"]
    );
}

#[test]
fn parent_protection_names_the_ncp() {
    let old = parent_with_images();
    let ncp = parse_ncp(
        "parent: {kind: CloudProfile, name: p}\nkubernetes: {versions: [{version: 1.30.5, expirationDate: '2030-01-01T00:00:00Z'}]}\nmachineImages: [{name: img, versions: [{version: 1.0.0, expirationDate: '2030-01-01T00:00:00Z'}]}, {name: own, versions: [{version: 2.0.0, architectures: [amd64]}]}]",
    );
    let refs = [NcpRef {
        namespace: "garden-p",
        name: "mine",
        spec: &ncp,
    }];
    let mut new = old.clone();
    new.kubernetes.versions.retain(|v| v.version != "1.30.5");
    new.machine_images[0]
        .versions
        .push(iv_archs("1.1.0", &["amd64"]));
    new.machine_images[0].versions.remove(0);
    new.machine_images
        .push(image("own", vec![iv_archs("2.0.0", &["amd64"])]));
    let causes = ncp_admission::protect_parent(&old, &new, &refs);
    assert_eq!(causes.len(), 3, "{causes:#?}");
    assert!(causes.iter().all(|c| c.message.contains("garden-p/mine")));
    assert_eq!(ncp_admission::protect_parent(&old, &old, &refs), vec![]);
}

#[test]
fn dropping_an_override_a_shoot_needs_is_refused() {
    let mut parent = parent_with_images();
    parent.machine_images[0].versions[0]
        .expirable
        .expiration_date = Some(days(-1));
    let old = parse_ncp(
        "parent: {kind: CloudProfile, name: p}\nmachineImages: [{name: img, versions: [{version: 1.0.0, expirationDate: '2030-01-01T00:00:00Z'}]}]",
    );
    let new = parse_ncp("parent: {kind: CloudProfile, name: p}");
    let s = shoot(vec![worker("w", "t", "img", "1.0.0")]);
    let causes =
        ncp_admission::protect_used_overrides(&old, &new, &parent, &[("my-shoot", &s)], now());
    assert_eq!(causes.len(), 1);
    assert!(causes[0].message.contains("Shoot my-shoot"));
    assert_eq!(
        ncp_admission::protect_used_overrides(&old, &new, &parent, &[], now()),
        vec![]
    );
}

#[test]
fn multi_level_inheritance_renders_through_the_chain_and_rejects_cycles() {
    let root = parent_with_images();
    let base = parse_ncp(
        "parent: {kind: CloudProfile, name: root}\nmachineTypes: [{name: base-type, cpu: '2', gpu: '0', memory: 4Gi}]\nlimits: {maxNodesTotal: 10}",
    );
    let team = parse_ncp(
        "parent: {kind: NamespacedCloudProfile, name: base}\nmachineTypes: [{name: team-type, cpu: '2', gpu: '0', memory: 4Gi}]",
    );
    let all: BTreeMap<&str, &NamespacedCloudProfileSpec> =
        BTreeMap::from([("base", &base), ("team", &team)]);
    let lookup = |n: &str| all.get(n).copied();

    let off = parent_chain("team", &team, lookup, Extensions::default()).unwrap_err();
    assert!(off.to_string().contains("not enabled"), "{off}");
    assert!(
        !fields(&ncp_admission::validate_static(
            &team,
            Extensions::default()
        ))
        .is_empty()
    );

    let ext = Extensions {
        multi_level_inheritance: true,
        ..Default::default()
    };
    assert_eq!(ncp_admission::validate_static(&team, ext), vec![]);
    let chain = parent_chain("team", &team, lookup, ext).expect("chain");
    assert_eq!(chain.root, "root");
    let rendered = render_chain(&root, &chain);
    let types: Vec<&str> = rendered
        .machine_types
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(types, vec!["t", "base-type", "team-type"]);
    assert_eq!(rendered.limits.and_then(|l| l.max_nodes_total), Some(10));

    let a = parse_ncp("parent: {kind: NamespacedCloudProfile, name: b}");
    let b = parse_ncp("parent: {kind: NamespacedCloudProfile, name: a}");
    let cyc: BTreeMap<&str, &NamespacedCloudProfileSpec> = BTreeMap::from([("a", &a), ("b", &b)]);
    let err = parent_chain("a", &a, |n| cyc.get(n).copied(), ext).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid namespaced cloud profile parent chain: parents form a cycle: a -> b -> a"
    );
    let missing = parse_ncp("parent: {kind: NamespacedCloudProfile, name: ghost}");
    assert!(
        parent_chain("m", &missing, |_| None, ext)
            .unwrap_err()
            .to_string()
            .contains("ghost")
    );
}

#[test]
fn capability_validation_rules() {
    let spec: CloudProfileSpec = serde_yaml::from_str(
        r#"
type: local
machineCapabilities:
  - {name: architecture, values: [amd64, arm64, s390x]}
  - {name: gardener-internal, values: [x]}
  - {name: storage, values: []}
  - {name: storage, values: [NVMe]}
machineImages:
  - name: img
    versions:
      - {version: 1.0.0}
      - {version: 1.1.0, architectures: [arm64], capabilityFlavors: [{architecture: [amd64, arm64]}, {storage: [SCSI]}, {color: [red]}]}
machineTypes:
  - {name: t, cpu: "1", gpu: "0", memory: 1Gi, architecture: arm64, capabilities: {architecture: [amd64]}}
  - {name: u, cpu: "1", gpu: "0", memory: 1Gi, capabilities: {architecture: [amd64, arm64]}}
"#,
    )
    .expect("yaml");
    let f = fields(&validate_profile_capabilities(&spec));
    for want in [
        "spec.machineCapabilities[0].values[2]",
        "spec.machineCapabilities[1].name",
        "spec.machineCapabilities[2].values",
        "spec.machineCapabilities[3].name",
        "spec.machineImages[0].versions[0].capabilityFlavors",
        "spec.machineImages[0].versions[1].capabilityFlavors[0].architecture",
        "spec.machineImages[0].versions[1].capabilityFlavors[1].storage[0]",
        "spec.machineImages[0].versions[1].capabilityFlavors[1].architecture",
        "spec.machineImages[0].versions[1].capabilityFlavors[2].color",
        "spec.machineTypes[0].architecture",
        "spec.machineTypes[1].capabilities.architecture",
    ] {
        assert!(f.contains(&want.to_string()), "missing {want} in {f:#?}");
    }

    let legacy: CloudProfileSpec = serde_yaml::from_str(
        "type: local\nmachineImages: [{name: i, versions: [{version: 1.0.0, capabilityFlavors: [{architecture: [amd64]}]}]}]\nmachineTypes: [{name: t, cpu: '1', gpu: '0', memory: 1Gi, capabilities: {architecture: [amd64]}}]",
    )
    .expect("yaml");
    let f = fields(&validate_profile_capabilities(&legacy));
    assert_eq!(
        f,
        vec![
            "spec.machineTypes[0].architecture",
            "spec.machineTypes[0].capabilities",
            "spec.machineImages[0].versions[0].architectures",
            "spec.machineImages[0].versions[0].capabilityFlavors",
        ]
    );
}

#[test]
fn switching_to_capabilities_creates_flavors_and_fills_legacy_fields() {
    let old = profile(
        vec![image(
            "i",
            vec![iv_archs("1.0.0", &["amd64", "arm64"]), iv("1.1.0")],
        )],
        vec![mtype_arch("t", "arm64"), mtype("u")],
    );
    let mut new = old.clone();
    new.machine_capabilities = defs(&[("architecture", &["amd64", "arm64"])]);
    sync_architecture_fields(Some(&old), &mut new);
    let v = &new.machine_images[0].versions;
    assert_eq!(
        v[0].capability_flavors,
        vec![
            caps(&[("architecture", &["amd64"])]),
            caps(&[("architecture", &["arm64"])])
        ]
    );
    assert_eq!(
        v[1].capability_flavors,
        vec![caps(&[("architecture", &["amd64"])])]
    );
    assert_eq!(v[1].architectures, vec!["amd64"]);
    assert_eq!(
        new.machine_types[0].capabilities,
        caps(&[("architecture", &["arm64"])])
    );
    assert_eq!(new.machine_types[1].architecture.as_deref(), Some("amd64"));
    assert_eq!(validate_profile_capabilities(&new), vec![]);

    // Removing capabilities again clears the capability fields.
    let mut back = new.clone();
    back.machine_capabilities.clear();
    sync_architecture_fields(Some(&new), &mut back);
    assert!(
        back.machine_images[0]
            .versions
            .iter()
            .all(|v| v.capability_flavors.is_empty())
    );
    assert!(back.machine_types.iter().all(|t| t.capabilities.is_empty()));
}

#[test]
fn ncp_create_drops_inactive_versions_and_empty_images() {
    let mut spec = parse_ncp(
        "parent: {kind: CloudProfile, name: p}\nmachineImages: [{name: gone, versions: [{version: 1.0.0}]}, {name: kept, updateStrategy: patch, versions: [{version: 1.0.0}]}]",
    );
    spec.machine_images[0].versions[0].expirable.expiration_date = Some(days(-1));
    spec.machine_images[1].versions[0].expirable.expiration_date = Some(days(-1));
    ncp_admission::drop_inactive_versions(&mut spec, None, now());
    assert_eq!(spec.machine_images.len(), 1);
    assert_eq!(spec.machine_images[0].name, "kept");
    assert!(spec.machine_images[0].versions.is_empty());
}

#[test]
fn bench_runs_on_a_small_profile() {
    let config = gardener::bench::BenchConfig {
        machine_types: 20,
        image_versions: 12,
        flavors: 8,
        ncps: 5,
    };
    let report = gardener::bench::run(config);
    assert!(report.compatible_pairs > 0);
    // Every type is compatible with some but, because flavors rotate and
    // types pin capabilities, not with every version of every image.
    assert!(report.compatible_pairs < 20 * 12);
    assert_eq!(report.rendered_machine_types, 21);
    assert!(report.to_string().contains("re-render 5 NCPs"));
}

/// The full-size bench; run with `--ignored --nocapture` to see figures.
#[test]
#[ignore = "takes seconds; run on demand"]
fn bench_default_size() {
    let report = gardener::bench::run(gardener::bench::BenchConfig::default());
    println!("{report}");
    assert_eq!(report.rendered_machine_types, 1_001);
}

#[test]
fn overlapping_supported_kubernetes_versions_are_rejected() {
    let mut p = base_profile();
    p.kubernetes.versions[1].classification = Some(Classification::Supported);
    let causes = gardener::validation::validate_kubernetes_versions(
        &p.kubernetes.versions,
        "spec.kubernetes.versions",
    );
    assert_eq!(fields(&causes), vec!["spec.kubernetes.versions[1]"]);
    assert!(
        causes[0].message.contains("only one version of 1.31"),
        "{}",
        causes[0].message
    );
    // Once the older one has expired, the two no longer overlap.
    p.kubernetes.versions[1].expiration_date = None;
    p.kubernetes.versions[1].classification = None;
    p.kubernetes.versions[1].lifecycle = vec![
        LifecycleStage {
            classification: Classification::Supported,
            start_time: None,
        },
        LifecycleStage {
            classification: Classification::Expired,
            start_time: Some(days(-5)),
        },
    ];
    p.kubernetes.versions[0].classification = None;
    p.kubernetes.versions[0].lifecycle = vec![LifecycleStage {
        classification: Classification::Supported,
        start_time: Some(days(-5)),
    }];
    assert_eq!(
        gardener::validation::validate_kubernetes_versions(
            &p.kubernetes.versions,
            "spec.kubernetes.versions"
        ),
        vec![]
    );
}
