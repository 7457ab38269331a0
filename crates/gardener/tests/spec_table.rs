//! One test per row 1–40 of the spec's test table (§5), named after the
//! row, each asserting the row's expected outcome.

mod common;

use common::*;
use gardener::capabilities::*;
use gardener::maintenance::{
    self, auto_update_target, filter_image_versions, forced_update_target,
};
use gardener::ncp_admission;
use gardener::render::render;
use gardener::shoot_admission::validate_shoot;
use gardener::*;

const C1: &str = "c1";
const C2: &str = "c2";

fn c_defs() -> Vec<CapabilityDefinition> {
    defs(&[(C1, &["v1", "v2"]), (C2, &["v3", "v4"])])
}

#[test]
fn row_01_compat_second_flavor_supports_with_defaulted_c2() {
    let t = caps(&[(C1, &["v1"]), (C2, &["v3"])]);
    let flavors = vec![
        caps(&[(C1, &["v2"]), (C2, &["v3", "v4"])]),
        caps(&[(C1, &["v1"])]),
    ];
    assert!(supported_by_flavors(&t, &flavors, &c_defs()));
    assert!(
        !are_compatible(&t, &flavors[0], &c_defs()),
        "first flavor lacks c1=v1"
    );
    assert!(are_compatible(&t, &flavors[1], &c_defs()));
}

#[test]
fn row_02_compat_no_single_flavor_supports() {
    let t = caps(&[(C1, &["v1"]), (C2, &["v5"])]);
    let flavors = vec![
        caps(&[(C2, &["v3", "v4"])]),
        caps(&[(C1, &["v1", "v2"]), (C2, &["v3", "v6"])]),
    ];
    assert!(!supported_by_flavors(&t, &flavors, &c_defs()));
    let why = explain_unsupported(&t, &flavors, &c_defs());
    assert!(why.contains("c2 (machine type has [v5]"), "{why}");
}

#[test]
fn row_03_compat_without_flavors_or_type_capabilities() {
    assert!(supported_by_flavors(
        &caps(&[(C1, &["v1"])]),
        &[],
        &c_defs()
    ));
    assert!(supported_by_flavors(
        &Capabilities::new(),
        &[caps(&[(C1, &["v1"]), (C2, &["v3"])])],
        &c_defs()
    ));
}

#[test]
fn row_04_intersection_keeps_first_operands_keys() {
    let a = caps(&[(C1, &["v1", "v2"]), (C2, &["v3"])]);
    let b = caps(&[
        (C1, &["v2", "v3", "v4"]),
        (C2, &["v3", "v4"]),
        ("c3", &["v4"]),
    ]);
    let c = caps(&[(C1, &["v2", "v4"]), (C2, &["v3", "v4"]), ("c3", &["v5"])]);
    assert_eq!(
        intersect(&intersect(&a, &b), &c),
        caps(&[(C1, &["v2"]), (C2, &["v3"])])
    );
}

#[test]
fn row_05_empty_intersection_is_incompatible() {
    let a = caps(&[(C1, &["v1"])]);
    let b = caps(&[(C1, &["v2"])]);
    assert_eq!(intersect(&a, &b), caps(&[(C1, &[])]));
    assert!(!are_compatible(&a, &b, &c_defs()));
    assert_eq!(
        conflicting_capabilities(&a, &b, &c_defs()),
        vec!["c1".to_string()]
    );
}

#[test]
fn row_06_version_without_flavors_gets_one_default_flavor() {
    let d = defs(&[(C1, &["v1", "v2"]), ("architecture", &["amd64"])]);
    assert_eq!(
        defaulted_flavors(&[], &d),
        vec![caps(&[(C1, &["v1", "v2"]), ("architecture", &["amd64"])])]
    );
}

#[test]
fn row_07_flavors_get_missing_capabilities_defaulted() {
    let d = defs(&[(C1, &["v1", "v2"]), ("architecture", &["amd64", "arm64"])]);
    let flavors = vec![
        caps(&[(C1, &["v1"])]),
        caps(&[("architecture", &["arm64"])]),
    ];
    assert_eq!(
        defaulted_flavors(&flavors, &d),
        vec![
            caps(&[(C1, &["v1"]), ("architecture", &["amd64", "arm64"])]),
            caps(&[(C1, &["v1", "v2"]), ("architecture", &["arm64"])]),
        ]
    );
}

#[test]
fn row_08_architectures_from_flavors_or_legacy() {
    let mut v = iv_flavors(
        "1.0.0",
        vec![
            caps(&[("architecture", &["amd64"])]),
            caps(&[("architecture", &["arm64"])]),
        ],
    );
    v.architectures = vec!["ia-64".into()];
    assert_eq!(image_version_architectures(&v, &[]), vec!["amd64", "arm64"]);
    assert!(!version_supports_architecture(&v, "ia-64", &[]));
    let legacy = iv_archs("1.0.0", &["amd64", "arm64"]);
    assert_eq!(
        image_version_architectures(&legacy, &[]),
        vec!["amd64", "arm64"]
    );
}

/// Rows 9 and 10: the capability profile and shoot of the admission cases.
fn admission_case(flavors: Vec<Capabilities>) -> Vec<apimachinery::status::Cause> {
    let mut p = profile(
        vec![image("img", vec![iv_flavors("1.0.0", flavors)])],
        vec![mtype_caps(
            "t",
            caps(&[("architecture", &["amd64"]), ("someCap", &["value2"])]),
        )],
    );
    p.machine_capabilities = defs(&[
        ("architecture", &["amd64", "arm64"]),
        ("someCap", &["value1", "value2"]),
    ]);
    validate_shoot(
        &shoot(vec![worker("w", "t", "img", "1.0.0")]),
        None,
        &p,
        now(),
    )
}

fn row_9_flavors() -> Vec<Capabilities> {
    vec![
        caps(&[("architecture", &["amd64"]), ("someCap", &["value1"])]),
        caps(&[("architecture", &["arm64"]), ("someCap", &["value2"])]),
        caps(&[("architecture", &["amd64"]), ("someCap", &["value2"])]),
    ]
}

#[test]
fn row_09_admission_admits_a_compatible_flavor() {
    assert_eq!(admission_case(row_9_flavors()), vec![]);
}

#[test]
fn row_10_admission_forbids_when_no_flavor_fits() {
    let mut flavors = row_9_flavors();
    flavors.pop();
    let causes = admission_case(flavors);
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(causes[0].reason, "FieldValueForbidden");
    assert_eq!(
        causes[0].field,
        "spec.provider.workers[0].machine.image.version"
    );
    // The message says which capability failed for which flavor.
    assert!(
        causes[0]
            .message
            .contains("someCap (machine type has [value2], flavor has [value1])"),
        "{}",
        causes[0].message
    );
    assert!(
        causes[0]
            .message
            .contains("architecture (machine type has [amd64], flavor has [arm64])"),
        "{}",
        causes[0].message
    );
}

#[test]
fn row_11_maintenance_filter_drops_capability_incompatible_versions() {
    let d = defs(&[
        ("architecture", &["amd64"]),
        ("someCapability", &["supported", "unsupported"]),
    ]);
    let img = image(
        "img",
        vec![iv_flavors(
            "1.0.0",
            vec![caps(&[("someCapability", &["supported"])])],
        )],
    );
    let t = mtype_caps("t", caps(&[("someCapability", &["unsupported"])]));
    let w = worker("w", "t", "img", "1.0.0");
    let f = filter_image_versions(&img, &w, &t, &d, "1.31.2", "1.0.0");
    assert!(f.kept.is_empty());
    assert!(
        f.reason("1.0.0")
            .is_some_and(|r| r.contains("someCapability"))
    );
}

#[test]
fn row_12_maintenance_filter_drops_wrong_architecture_or_cri() {
    let img = image(
        "img",
        vec![iv_archs("1.0.0", &["amd64"]), iv_archs("1.1.0", &["amd64"])],
    );
    let t = mtype_arch("t", "arm64");
    let mut w = worker("w", "t", "img", "1.0.0");
    w.machine.architecture = Some("arm64".into());
    assert!(
        filter_image_versions(&img, &w, &t, &[], "1.31.2", "1.0.0")
            .kept
            .is_empty()
    );

    let t = mtype_arch("t", "amd64");
    let mut w = worker("w", "t", "img", "1.0.0");
    w.cri = Some(Cri {
        name: "test-cri".into(),
        container_runtimes: vec![],
    });
    let f = filter_image_versions(&img, &w, &t, &[], "1.31.2", "1.0.0");
    assert!(f.kept.is_empty());
    assert!(f.reason("1.1.0").is_some_and(|r| r.contains("test-cri")));
}

#[test]
fn row_13_in_place_pool_keeps_current_and_reachable_versions() {
    let mut a = iv_archs("1.0.0", &["amd64"]);
    a.in_place_updates = Some(InPlaceUpdates {
        supported: true,
        min_version_for_update: None,
    });
    let mut b = iv_archs("1.1.0", &["amd64"]);
    b.in_place_updates = Some(InPlaceUpdates {
        supported: true,
        min_version_for_update: Some("1.0.0".into()),
    });
    let img = image("img", vec![a, b]);
    let mut w = worker("w", "t", "img", "1.0.0");
    w.update_strategy = Some(WorkerUpdateStrategy::AutoInPlaceUpdate);
    let f = filter_image_versions(&img, &w, &mtype_arch("t", "amd64"), &[], "1.31.2", "1.0.0");
    let kept: Vec<&str> = f.kept.iter().map(|v| v.version()).collect();
    assert_eq!(kept, vec!["1.0.0", "1.1.0"]);
}

/// Plans maintenance of one pool on `current` with the given image.
fn plan_image(img: MachineImage, current: &str) -> maintenance::MaintenancePlan {
    let p = profile(vec![img], vec![mtype_arch("t", "amd64")]);
    let s = shoot(vec![worker("w", "t", "img", current)]);
    maintenance::plan(&s, &p, now())
}

fn image_target(plan: &maintenance::MaintenancePlan) -> Option<String> {
    plan.changes
        .iter()
        .find(|c| c.kind == maintenance::ChangeKind::MachineImageVersion)
        .map(|c| c.to.clone())
}

#[test]
fn row_14_strategy_decides_auto_update_target() {
    for (strategy, want) in [
        (UpdateStrategy::Patch, None),
        (UpdateStrategy::Minor, Some("1.1.0")),
        (UpdateStrategy::Major, Some("1.1.0")),
    ] {
        let mut img = image(
            "img",
            vec![iv_archs("1.0.0", &["amd64"]), iv_archs("1.1.0", &["amd64"])],
        );
        img.update_strategy = Some(strategy);
        let plan = plan_image(img, "1.0.0");
        assert!(plan.errors.is_empty(), "{:?}", plan.errors);
        assert_eq!(image_target(&plan).as_deref(), want, "strategy {strategy}");
    }
}

#[test]
fn row_15_expired_only_version_is_end_of_life() {
    let mut v = iv_archs("1.0.0", &["amd64"]);
    v.expirable = expired(v.expirable);
    let plan = plan_image(image("img", vec![v]), "1.0.0");
    assert!(plan.changes.is_empty());
    assert_eq!(plan.errors.len(), 1);
    assert!(
        plan.errors[0].to_string().contains("end of life"),
        "{}",
        plan.errors[0]
    );
}

#[test]
fn row_16_auto_update_prefers_higher_patch_of_same_minor() {
    let vs = [ev("1.17.1"), ev("1.15.3"), ev("1.15.0")];
    let refs: Vec<&ExpirableVersion> = vs.iter().collect();
    assert_eq!(
        auto_update_target(&refs, "1.15.0", UpdateStrategy::Major, now()).as_deref(),
        Some("1.15.3")
    );
}

#[test]
fn row_17_auto_update_prefers_non_deprecated_overall() {
    let vs = [
        with_class(ev("3.0.1"), Classification::Deprecated),
        with_class(ev("2.1.1"), Classification::Deprecated),
        with_class(ev("2.0.0"), Classification::Supported),
        ev("0.4.1"),
    ];
    let refs: Vec<&ExpirableVersion> = vs.iter().collect();
    assert_eq!(
        auto_update_target(&refs, "0.4.1", UpdateStrategy::Major, now()).as_deref(),
        Some("2.0.0")
    );
}

#[test]
fn row_18_forced_minor_update_does_not_skip_an_expired_minor() {
    let vs = [
        ev("1.15.1"),
        ev("1.15.0"),
        expired(ev("1.13.9")),
        expired(ev("1.13.4")),
        expired(ev("1.11.3")),
    ];
    let refs: Vec<&ExpirableVersion> = vs.iter().collect();
    assert_eq!(
        forced_update_target(&refs, "1.11.3", UpdateStrategy::Patch, now()).as_deref(),
        Some("1.13.9")
    );
    // Through the whole plan: the current version is expired, so the
    // update is forced even with auto-update off.
    let mut img = image(
        "img",
        vs.iter()
            .map(|e| MachineImageVersion {
                expirable: e.clone(),
                architectures: vec!["amd64".into()],
                ..Default::default()
            })
            .collect(),
    );
    img.update_strategy = Some(UpdateStrategy::Patch);
    let p = profile(vec![img], vec![mtype_arch("t", "amd64")]);
    let mut s = shoot(vec![worker("w", "t", "img", "1.11.3")]);
    s.maintenance = Some(Maintenance {
        auto_update: Some(MaintenanceAutoUpdate {
            kubernetes_version: false,
            machine_image_version: Some(false),
        }),
        ..Default::default()
    });
    let plan = maintenance::plan(&s, &p, now());
    assert_eq!(image_target(&plan).as_deref(), Some("1.13.9"));
    assert!(plan.changes[0].forced);
    assert!(
        plan.changes[0].reason.contains("has expired"),
        "{}",
        plan.changes[0].reason
    );
}

#[test]
fn row_19_forced_minor_update_never_picks_preview() {
    let vs = [
        with_class(ev("1.12.9"), Classification::Preview),
        with_class(ev("1.12.4"), Classification::Preview),
        ev("1.15.1"),
        ev("1.15.0"),
    ];
    let refs: Vec<&ExpirableVersion> = vs.iter().collect();
    assert_eq!(
        forced_update_target(&refs, "1.10.3", UpdateStrategy::Patch, now()).as_deref(),
        Some("1.15.1")
    );
}

fn sel_defs() -> Vec<CapabilityDefinition> {
    defs(&[
        ("architecture", &["amd64", "arm64"]),
        ("foo", &["bar", "baz", "qux", "xxx"]),
    ])
}

fn sel_flavors() -> Vec<Capabilities> {
    vec![
        caps(&[("architecture", &["amd64"]), ("foo", &["bar", "qux"])]),
        caps(&[("architecture", &["amd64"]), ("foo", &["bar", "baz"])]),
        caps(&[
            ("architecture", &["arm64"]),
            ("foo", &["bar", "baz", "qux"]),
        ]),
    ]
}

#[test]
fn row_20_selection_only_compatible_flavor() {
    let want = caps(&[("architecture", &["amd64"]), ("foo", &["qux"])]);
    assert_eq!(
        select_flavor(&want, &sel_flavors(), &sel_defs()),
        Ok(Some(0))
    );
}

#[test]
fn row_21_selection_prefers_first_architecture() {
    let want = caps(&[("foo", &["qux"])]);
    assert_eq!(
        select_flavor(&want, &sel_flavors(), &sel_defs()),
        Ok(Some(0))
    );
}

#[test]
fn row_22_selection_without_compatible_flavor_is_an_error() {
    let want = caps(&[("architecture", &["arm64"]), ("foo", &["xxx"])]);
    let err = select_flavor(&want, &sel_flavors(), &sel_defs()).unwrap_err();
    assert!(matches!(err, Error::NoCompatibleFlavor(_)));
    assert!(
        err.to_string().starts_with("no compatible flavor found"),
        "{err}"
    );
}

#[test]
fn row_23_selection_tie_moves_to_next_value() {
    let want = caps(&[("architecture", &["amd64"]), ("foo", &["bar"])]);
    assert_eq!(
        select_flavor(&want, &sel_flavors(), &sel_defs()),
        Ok(Some(1))
    );
}

#[test]
fn row_24_selection_follows_definition_order() {
    let d = defs(&[
        ("foo", &["bar", "baz", "qux"]),
        ("architecture", &["amd64", "arm64"]),
    ]);
    let want = caps(&[("foo", &["bar"])]);
    assert_eq!(select_flavor(&want, &sel_flavors(), &d), Ok(Some(2)));
}

#[test]
fn row_25_selection_prefers_flavor_with_more_preferred_values() {
    let flavors = vec![
        caps(&[("architecture", &["amd64"]), ("foo", &["bar", "baz"])]),
        caps(&[
            ("architecture", &["amd64"]),
            ("foo", &["bar", "baz", "qux"]),
        ]),
    ];
    let want = caps(&[("architecture", &["amd64"]), ("foo", &["bar"])]);
    assert_eq!(select_flavor(&want, &flavors, &sel_defs()), Ok(Some(1)));
}

#[test]
fn row_26_selection_prefers_first_storage_value() {
    let d = defs(&[
        ("architecture", &["amd64"]),
        ("storageAccess", &["NVMe", "SCSI"]),
    ]);
    let flavors = vec![
        caps(&[("storageAccess", &["NVMe"])]),
        caps(&[("storageAccess", &["SCSI"])]),
    ];
    let want = caps(&[("storageAccess", &["NVMe", "SCSI"])]);
    assert_eq!(select_flavor(&want, &flavors, &d), Ok(Some(0)));
}

#[test]
fn row_27_identical_flavors_are_ambiguous() {
    let d = defs(&[
        ("architecture", &["amd64"]),
        ("storageAccess", &["NVMe", "SCSI"]),
    ]);
    // The second flavor equals the first once defaulted.
    let flavors = vec![
        caps(&[("storageAccess", &["NVMe"])]),
        caps(&[("architecture", &["amd64"]), ("storageAccess", &["NVMe"])]),
    ];
    let err = select_flavor(&Capabilities::new(), &flavors, &d).unwrap_err();
    assert!(matches!(err, Error::AmbiguousFlavor(_)));
    assert!(
        err.to_string()
            .starts_with("could not determine a unique capability flavor"),
        "{err}"
    );
}

fn ncp(yaml: &str) -> NamespacedCloudProfileSpec {
    serde_yaml::from_str(yaml).expect("valid NCP spec")
}

fn parent_legacy() -> CloudProfileSpec {
    let mut p = profile(
        vec![image("test-image", vec![iv_archs("1.0.0", &["amd64"])])],
        vec![mtype_arch("test-type", "amd64")],
    );
    p.kubernetes.versions = vec![ev("1.0.0")];
    gardener::validation::default_cloud_profile_spec(&mut p);
    p
}

#[test]
fn row_28_ncp_kubernetes_only_overrides_expiration() {
    let p = parent_legacy();
    let added = render(
        &p,
        &ncp("parent: {kind: CloudProfile, name: p}\nkubernetes: {versions: [{version: 1.2.3}]}"),
    );
    assert_eq!(added.kubernetes.versions, vec![ev("1.0.0")]);
    let overridden = render(
        &p,
        &ncp(
            "parent: {kind: CloudProfile, name: p}\nkubernetes: {versions: [{version: 1.0.0, expirationDate: '2030-01-01T00:00:00Z'}]}",
        ),
    );
    assert_eq!(overridden.kubernetes.versions.len(), 1);
    assert_eq!(
        overridden.kubernetes.versions[0].expiration_date,
        Time::parse("2030-01-01T00:00:00Z")
    );
}

#[test]
fn row_29_ncp_new_image_is_appended() {
    let r = render(
        &parent_legacy(),
        &ncp(
            "parent: {kind: CloudProfile, name: p}\nmachineImages: [{name: test-image-namespaced, versions: [{version: 1.1.2, architectures: [amd64]}]}]",
        ),
    );
    let names: Vec<&str> = r.machine_images.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, vec!["test-image", "test-image-namespaced"]);
}

#[test]
fn row_30_ncp_version_override_and_addition() {
    let p = parent_legacy();
    let r = render(
        &p,
        &ncp(
            "parent: {kind: CloudProfile, name: p}\nmachineImages: [{name: test-image, versions: [{version: 1.0.0, expirationDate: '2030-01-01T00:00:00Z'}, {version: 1.1.2, architectures: [amd64]}]}]",
        ),
    );
    let versions = &r.machine_images[0].versions;
    assert_eq!(versions.len(), 2);
    let mut want = p.machine_images[0].versions[0].clone();
    want.expirable.expiration_date = Time::parse("2030-01-01T00:00:00Z");
    assert_eq!(versions[0], want, "parent fields kept, expiration taken");
    assert_eq!(versions[1].version(), "1.1.2");
}

#[test]
fn row_31_ncp_update_strategy_only() {
    let p = parent_legacy();
    let r = render(
        &p,
        &ncp(
            "parent: {kind: CloudProfile, name: p}\nmachineImages: [{name: test-image, updateStrategy: minor}]",
        ),
    );
    assert_eq!(
        r.machine_images[0].update_strategy,
        Some(UpdateStrategy::Minor)
    );
    assert_eq!(r.machine_images[0].versions, p.machine_images[0].versions);
}

#[test]
fn row_32_ncp_machine_type_without_architecture_gets_amd64() {
    let r = render(
        &parent_legacy(),
        &ncp(
            "parent: {kind: CloudProfile, name: p}\nmachineTypes: [{name: test-type-namespaced, cpu: '2', gpu: '0', memory: 4Gi}]",
        ),
    );
    let names: Vec<&str> = r.machine_types.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["test-type", "test-type-namespaced"]);
    assert_eq!(r.machine_types[1].architecture.as_deref(), Some("amd64"));
}

const ROW_33_PARENT: &str = r#"
type: local
kubernetes:
  versions: [{version: 1.35.0}, {version: 1.34.1}, {version: 1.34.0}]
machineCapabilities:
  - {name: architecture, values: [amd64]}
machineImages:
  - {name: a, versions: [{version: 1.0.0, architectures: [amd64]}]}
  - name: b
    versions:
      - {version: 1.0.0, architectures: [amd64]}
      - {version: 2.0.0, architectures: [amd64]}
      - {version: 3.0.0, architectures: [amd64]}
  - {name: c, versions: [{version: 1.0.0, architectures: [amd64]}]}
machineTypes:
  - {name: a, cpu: "1", gpu: "0", memory: 1Gi, architecture: amd64, capabilities: {architecture: [amd64]}}
  - {name: b, cpu: "1", gpu: "0", memory: 1Gi, architecture: amd64, capabilities: {architecture: [amd64]}}
  - {name: c, cpu: "1", gpu: "0", memory: 1Gi, architecture: amd64, capabilities: {architecture: [amd64]}}
volumeTypes: [{name: a, class: s}, {name: b, class: s}, {name: c, class: s}]
regions: [{name: r}]
"#;

#[test]
fn row_33_ncp_on_capability_parent_keeps_order_and_appends() {
    let p: CloudProfileSpec = serde_yaml::from_str(ROW_33_PARENT).expect("parent");
    let n = ncp(r#"
parent: {kind: CloudProfile, name: p}
kubernetes: {versions: [{version: 1.34.1, expirationDate: "2030-01-01T00:00:00Z"}]}
machineImages:
  - name: b
    versions:
      - {version: 2.0.0, expirationDate: "2030-01-01T00:00:00Z"}
      - {version: 4.0.0, architectures: [amd64]}
machineTypes: [{name: d, cpu: "2", gpu: "0", memory: 2Gi}]
volumeTypes: [{name: d, class: s}]
"#);
    let r = render(&p, &n);
    let k8s: Vec<(&str, bool)> = r
        .kubernetes
        .versions
        .iter()
        .map(|v| (v.version.as_str(), v.expiration_date.is_some()))
        .collect();
    assert_eq!(
        k8s,
        vec![("1.35.0", false), ("1.34.1", true), ("1.34.0", false)]
    );
    let images: Vec<&str> = r.machine_images.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(images, vec!["a", "b", "c"]);
    let b: Vec<(&str, bool)> = r.machine_images[1]
        .versions
        .iter()
        .map(|v| (v.version(), v.expirable.expiration_date.is_some()))
        .collect();
    assert_eq!(
        b,
        vec![
            ("1.0.0", false),
            ("2.0.0", true),
            ("3.0.0", false),
            ("4.0.0", false)
        ]
    );
    let types: Vec<&str> = r.machine_types.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(types, vec!["a", "b", "c", "d"]);
    assert_eq!(
        r.machine_types[3].capabilities,
        caps(&[("architecture", &["amd64"])])
    );
    let volumes: Vec<&str> = r.volume_types.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(volumes, vec!["a", "b", "c", "d"]);
}

#[test]
fn row_34_ncp_without_overrides_renders_the_parent() {
    let p = parent_legacy();
    assert_eq!(render(&p, &ncp("parent: {kind: CloudProfile, name: p}")), p);
    let cap: CloudProfileSpec = serde_yaml::from_str(ROW_33_PARENT).expect("parent");
    assert_eq!(
        render(&cap, &ncp("parent: {kind: CloudProfile, name: p}")),
        cap
    );
}

#[test]
fn row_35_ncp_limits() {
    let cases = [
        (None, None, None),
        (Some(10), None, Some(10)),
        (None, Some(10), Some(10)),
        (Some(10), Some(99), Some(99)),
        (Some(124), Some(20), Some(20)),
    ];
    for (cp, n, want) in cases {
        let mut p = parent_legacy();
        p.limits = cp.map(|m| Limits {
            max_nodes_total: Some(m),
        });
        let mut spec = ncp("parent: {kind: CloudProfile, name: p}");
        spec.limits = n.map(|m| Limits {
            max_nodes_total: Some(m),
        });
        let got = render(&p, &spec).limits.and_then(|l| l.max_nodes_total);
        assert_eq!(got, want, "parent {cp:?}, ncp {n:?}");
    }
}

#[test]
fn row_36_provider_config_comes_from_the_parent() {
    let mut p = parent_legacy();
    p.provider_config =
        Some(serde_json::json!({"apiVersion": "p/v1", "machineImages": ["parent"]}));
    let mut spec = ncp("parent: {kind: CloudProfile, name: p}");
    spec.provider_config = Some(serde_json::json!({"machineImages": ["ncp"]}));
    assert_eq!(render(&p, &spec).provider_config, p.provider_config);
}

#[test]
fn row_37_legacy_architectures_become_flavors_on_capability_parent() {
    let mut p: CloudProfileSpec = serde_yaml::from_str(ROW_33_PARENT).expect("parent");
    p.machine_capabilities = defs(&[("architecture", &["amd64", "arm64"])]);
    let r = render(
        &p,
        &ncp(
            "parent: {kind: CloudProfile, name: p}\nmachineImages: [{name: a, versions: [{version: 5.0.0, architectures: [arm64]}]}]",
        ),
    );
    let v = r.machine_images[0].version("5.0.0").expect("appended");
    assert_eq!(v.architectures, vec!["arm64"]);
    assert_eq!(
        v.capability_flavors,
        vec![caps(&[("architecture", &["arm64"])])]
    );
}

#[test]
fn row_38_ncp_definition_wins_when_parent_adds_same_image_later() {
    let spec = ncp(
        "parent: {kind: CloudProfile, name: p}\nmachineImages: [{name: late, updateStrategy: major, versions: [{version: 1.0.0, architectures: [amd64, arm64]}]}]",
    );
    let mut p = parent_legacy();
    let mut late = image("late", vec![iv("1.0.0")]);
    late.update_strategy = Some(UpdateStrategy::Minor);
    p.machine_images.push(late);
    let r = render(&p, &spec);
    assert_eq!(r.machine_images[1], spec.machine_images[0]);
}

fn admit(new: &NamespacedCloudProfileSpec) -> Vec<apimachinery::status::Cause> {
    let mut p = parent_legacy();
    p.kubernetes.versions = vec![ev("1.31.0"), ev("1.30.0")];
    ncp_admission::validate(
        new,
        None,
        None,
        Some(&p),
        &[
            ncp_admission::VERB_MODIFY_KUBERNETES,
            ncp_admission::VERB_MODIFY_MACHINE_IMAGES,
        ],
        Extensions::default(),
        now(),
    )
}

#[test]
fn row_39_ncp_kubernetes_override_needs_parent_version_and_date() {
    let unknown = admit(&ncp(
        "parent: {kind: CloudProfile, name: p}\nkubernetes: {versions: [{version: 1.25.0, expirationDate: '2030-01-01T00:00:00Z'}]}",
    ));
    assert_eq!(
        fields(&unknown),
        vec!["spec.kubernetes.versions[0].version"]
    );
    let no_date = admit(&ncp(
        "parent: {kind: CloudProfile, name: p}\nkubernetes: {versions: [{version: 1.31.0}]}",
    ));
    assert_eq!(
        fields(&no_date),
        vec!["spec.kubernetes.versions[0].expirationDate"]
    );
    let ok = admit(&ncp(
        "parent: {kind: CloudProfile, name: p}\nkubernetes: {versions: [{version: 1.30.0, expirationDate: '2030-01-01T00:00:00Z'}]}",
    ));
    assert_eq!(ok, vec![]);
    // Expiring the newest version would leave the rendered profile without
    // a version to update to; the simulated merge catches it.
    let newest = admit(&ncp(
        "parent: {kind: CloudProfile, name: p}\nkubernetes: {versions: [{version: 1.31.0, expirationDate: '2030-01-01T00:00:00Z'}]}",
    ));
    assert_eq!(
        fields(&newest),
        vec!["status.cloudProfileSpec.kubernetes.versions[0]"]
    );
}

#[test]
fn row_40_ncp_image_override_may_only_set_expiration() {
    let base = "parent: {kind: CloudProfile, name: p}\nmachineImages: [{name: test-image, versions: [{version: 1.0.0";
    let no_date = admit(&ncp(&format!("{base}}}]}}]")));
    assert_eq!(
        fields(&no_date),
        vec!["spec.machineImages[0].versions[0].expirationDate"]
    );
    for (extra, field) in [
        ("cri: [{name: containerd}]", "cri"),
        ("classification: supported", "classification"),
        ("architectures: [amd64]", "architectures"),
        (
            "capabilityFlavors: [{architecture: [amd64]}]",
            "capabilityFlavors",
        ),
        (
            "kubeletVersionConstraint: '>= 1.26'",
            "kubeletVersionConstraint",
        ),
        ("inPlaceUpdates: {supported: true}", "inPlaceUpdates"),
    ] {
        let causes = admit(&ncp(&format!(
            "{base}, expirationDate: '2030-01-01T00:00:00Z', {extra}}}]}}]"
        )));
        let want = format!("spec.machineImages[0].versions[0].{field}");
        assert!(fields(&causes).contains(&want), "{field}: {causes:?}");
    }
    let ok = admit(&ncp(&format!(
        "{base}, expirationDate: '2030-01-01T00:00:00Z'}}]}}]"
    )));
    assert_eq!(ok, vec![]);
}
