//! The CloudProfile controller's decisions, as pure functions: the status
//! a profile should show (the classification every Kubernetes and machine
//! image version has right now), when that status next changes, which
//! profiles a change of a Shoot or an NCP concerns, and who holds a
//! deleting profile.

use chrono::{DateTime, Utc};
use gardener::lifecycle;
use gardener::{
    CloudProfile, CloudProfileSpec, CloudProfileStatus, ExpirableVersion, ExpirableVersionStatus,
    Extensions, KIND_CLOUD_PROFILE, KubernetesStatus, MachineImageStatus, NamespacedCloudProfile,
    Shoot,
};
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use crate::maintain::{ProfileRef, profile_ref};

fn version_status(v: &ExpirableVersion, now: DateTime<Utc>) -> ExpirableVersionStatus {
    ExpirableVersionStatus {
        version: v.version.clone(),
        classification: lifecycle::classification(v, now),
    }
}

/// The status `spec` should have at `now`: every Kubernetes version and
/// every version of every machine image with its current classification,
/// in the order of the spec.
pub fn desired_status(spec: &CloudProfileSpec, now: DateTime<Utc>) -> CloudProfileStatus {
    let versions: Vec<ExpirableVersionStatus> = spec
        .kubernetes
        .versions
        .iter()
        .map(|v| version_status(v, now))
        .collect();
    CloudProfileStatus {
        kubernetes: (!versions.is_empty()).then_some(KubernetesStatus { versions }),
        machine_images: spec
            .machine_images
            .iter()
            .map(|image| MachineImageStatus {
                name: image.name.clone(),
                versions: image
                    .versions
                    .iter()
                    .map(|v| version_status(&v.expirable, now))
                    .collect(),
            })
            .collect(),
    }
}

/// The first moment after `now` at which some version's classification
/// changes, so the status is recomputed exactly then.
pub fn next_transition(spec: &CloudProfileSpec, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    spec.kubernetes
        .versions
        .iter()
        .chain(
            spec.machine_images
                .iter()
                .flat_map(|i| i.versions.iter().map(|v| &v.expirable)),
        )
        .filter_map(|v| lifecycle::next_transition(v, now))
        .map(|t| t.0)
        // A stage starts strictly after its start time, so at the start
        // time itself nothing has changed yet.
        .filter(|t| *t > now)
        .min()
}

/// The longest a controller waits before looking at a profile again, so a
/// transition years away is not one timer (the work queue's timers reach
/// about two years) and a clock step is noticed.
pub const MAX_REQUEUE: std::time::Duration = std::time::Duration::from_secs(12 * 3600);

/// How long to wait before recomputing the status: until just after the
/// next transition (at most [`MAX_REQUEUE`]), or `None` when no version
/// changes any more.
pub fn requeue_after(spec: &CloudProfileSpec, now: DateTime<Utc>) -> Option<std::time::Duration> {
    let next = next_transition(spec, now)?;
    let wait = (next - now).to_std().unwrap_or_default();
    Some((wait + std::time::Duration::from_secs(1)).min(MAX_REQUEUE))
}

/// The JSON patch that replaces the whole status with `desired`.
pub fn status_patch(desired: &CloudProfileStatus) -> Value {
    json!([{"op": "add", "path": "/status", "value": desired}])
}

/// The CloudProfile a Shoot uses directly, if any (a Shoot on an NCP is
/// held through that NCP).
pub fn for_shoot(shoot: &Shoot) -> Option<ObjectRef<CloudProfile>> {
    let ns = shoot.metadata.namespace.as_deref().unwrap_or_default();
    match profile_ref(ns, &shoot.spec, Extensions::default())? {
        ProfileRef::Cluster(name) => Some(ObjectRef::new(&name)),
        ProfileRef::Namespaced { .. } => None,
    }
}

/// The CloudProfile an NCP is rendered from directly, if its parent is one.
pub fn for_ncp(ncp: &NamespacedCloudProfile) -> Option<ObjectRef<CloudProfile>> {
    (ncp.spec.parent.effective_kind() == KIND_CLOUD_PROFILE && !ncp.spec.parent.name.is_empty())
        .then(|| ObjectRef::new(&ncp.spec.parent.name))
}

/// What holds a deleting CloudProfile: the Shoots that reference it and
/// the NCPs rendered from it, each as `namespace/name`, sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Users {
    /// Shoots whose profile reference names it.
    pub shoots: Vec<String>,
    /// NamespacedCloudProfiles whose parent it is.
    pub ncps: Vec<String>,
}

impl Users {
    /// Whether nothing holds the profile.
    pub fn is_empty(&self) -> bool {
        self.shoots.is_empty() && self.ncps.is_empty()
    }

    /// The sentence of the Warning event while deletion waits.
    pub fn message(&self) -> String {
        let mut parts = Vec::new();
        if !self.shoots.is_empty() {
            parts.push(format!("Shoots {}", self.shoots.join(", ")));
        }
        if !self.ncps.is_empty() {
            parts.push(format!("NamespacedCloudProfiles {}", self.ncps.join(", ")));
        }
        format!(
            "Cannot delete CloudProfile, because it is still referenced by {}",
            parts.join(" and ")
        )
    }
}

fn key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// Who uses the CloudProfile `name`.
pub fn users(name: &str, shoots: &[&Shoot], ncps: &[&NamespacedCloudProfile]) -> Users {
    let target: ObjectRef<CloudProfile> = ObjectRef::new(name);
    let mut out = Users {
        shoots: shoots
            .iter()
            .filter(|s| for_shoot(s).as_ref() == Some(&target))
            .map(|s| key(&s.metadata))
            .collect(),
        ncps: ncps
            .iter()
            .filter(|n| for_ncp(n).as_ref() == Some(&target))
            .map(|n| key(&n.metadata))
            .collect(),
    };
    out.shoots.sort();
    out.ncps.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use gardener::{
        Classification, CloudProfileReference, KIND_NAMESPACED_CLOUD_PROFILE, LifecycleStage,
        MachineImage, MachineImageVersion, NamespacedCloudProfileSpec, ShootSpec, Time,
    };

    fn at(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, h, 0, 0).unwrap()
    }

    fn legacy(v: &str, class: Option<Classification>, expires: Option<u32>) -> ExpirableVersion {
        ExpirableVersion {
            version: v.into(),
            classification: class,
            expiration_date: expires.map(|h| Time(at(h))),
            ..Default::default()
        }
    }

    fn staged(v: &str, stages: &[(Classification, Option<u32>)]) -> ExpirableVersion {
        ExpirableVersion {
            version: v.into(),
            lifecycle: stages
                .iter()
                .map(|(c, h)| LifecycleStage {
                    classification: *c,
                    start_time: h.map(|h| Time(at(h))),
                })
                .collect(),
            ..Default::default()
        }
    }

    fn spec(
        k8s: Vec<ExpirableVersion>,
        images: Vec<(&str, Vec<ExpirableVersion>)>,
    ) -> CloudProfileSpec {
        let mut s = CloudProfileSpec::default();
        s.kubernetes.versions = k8s;
        s.machine_images = images
            .into_iter()
            .map(|(name, versions)| MachineImage {
                name: name.into(),
                versions: versions
                    .into_iter()
                    .map(|expirable| MachineImageVersion {
                        expirable,
                        ..Default::default()
                    })
                    .collect(),
                update_strategy: None,
            })
            .collect();
        s
    }

    fn classes(st: &CloudProfileStatus) -> Vec<(String, Classification)> {
        let mut out: Vec<(String, Classification)> = st
            .kubernetes
            .iter()
            .flat_map(|k| k.versions.iter())
            .map(|v| (format!("k8s {}", v.version), v.classification))
            .collect();
        for i in &st.machine_images {
            for v in &i.versions {
                out.push((format!("{} {}", i.name, v.version), v.classification));
            }
        }
        out
    }

    #[test]
    fn status_classifies_every_version_in_spec_order() {
        use Classification::*;
        let s = spec(
            vec![
                legacy("1.32.1", None, None),
                legacy("1.31.4", Some(Deprecated), Some(10)),
                staged("1.33.0", &[(Preview, Some(5)), (Supported, Some(12))]),
            ],
            vec![(
                "gardenlinux",
                vec![
                    legacy("1877.1.0", Some(Supported), Some(8)),
                    staged("1900.0.0", &[(Preview, None), (Supported, Some(9))]),
                ],
            )],
        );
        type Row = (u32, [Classification; 5]);
        let table: [Row; 5] = [
            // before 1.33.0 is offered at all
            (4, [Supported, Deprecated, Unavailable, Supported, Preview]),
            (6, [Supported, Deprecated, Preview, Supported, Preview]),
            (9, [Supported, Deprecated, Preview, Expired, Supported]),
            (11, [Supported, Expired, Preview, Expired, Supported]),
            (13, [Supported, Expired, Supported, Expired, Supported]),
        ];
        for (hour, want) in table {
            let got = classes(&desired_status(&s, at(hour) + chrono::Duration::minutes(1)));
            let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(
                names,
                [
                    "k8s 1.32.1",
                    "k8s 1.31.4",
                    "k8s 1.33.0",
                    "gardenlinux 1877.1.0",
                    "gardenlinux 1900.0.0"
                ]
            );
            let got: Vec<Classification> = got.into_iter().map(|(_, c)| c).collect();
            assert_eq!(got, want, "at {hour}:01");
        }
    }

    #[test]
    fn empty_profile_has_an_empty_status() {
        let st = desired_status(&CloudProfileSpec::default(), at(0));
        assert_eq!(st, CloudProfileStatus::default());
        assert_eq!(
            serde_json::to_value(&st).unwrap(),
            json!({}),
            "nothing but an empty object is written"
        );
    }

    #[test]
    fn requeue_is_just_after_the_next_transition() {
        use Classification::*;
        let s = spec(
            vec![
                legacy("1.31.4", Some(Deprecated), Some(10)),
                staged("1.33.0", &[(Preview, Some(5)), (Supported, Some(12))]),
            ],
            vec![("img", vec![legacy("1.0.0", None, Some(7))])],
        );
        let rows: [(DateTime<Utc>, Option<DateTime<Utc>>); 6] = [
            (at(1), Some(at(5))),
            (at(5), Some(at(7))), // at 05:00 exactly the stage has not begun
            (at(6), Some(at(7))),
            (at(8), Some(at(10))),
            (at(11), Some(at(12))),
            (at(12) + chrono::Duration::seconds(1), None),
        ];
        // Far transitions are looked at again after at most MAX_REQUEUE.
        let far = spec(vec![legacy("1.31.4", None, Some(10))], vec![]);
        let years_before = at(10) - chrono::Duration::days(3 * 365);
        assert_eq!(requeue_after(&far, years_before), Some(MAX_REQUEUE));
        for (now, want) in rows {
            assert_eq!(next_transition(&s, now), want, "at {now}");
            let wait = requeue_after(&s, now);
            match want {
                None => assert_eq!(wait, None),
                Some(t) => {
                    let wait = wait.unwrap();
                    let woken = now + chrono::Duration::from_std(wait).unwrap();
                    assert!(woken > t, "woken at {woken}, transition {t}");
                    assert!(woken <= t + chrono::Duration::seconds(1), "{woken}");
                    // Once woken, the status shows the new classification.
                    assert_ne!(desired_status(&s, woken), desired_status(&s, now));
                }
            }
        }
    }

    fn shoot(
        ns: &str,
        name: &str,
        r: Option<CloudProfileReference>,
        legacy: Option<&str>,
    ) -> Shoot {
        let mut s = Shoot::new(
            name,
            ShootSpec {
                cloud_profile: r,
                cloud_profile_name: legacy.map(str::to_string),
                ..Default::default()
            },
        );
        s.metadata.namespace = Some(ns.into());
        s
    }

    fn ncp(ns: &str, name: &str, kind: &str, parent: &str) -> NamespacedCloudProfile {
        let mut n = NamespacedCloudProfile::new(
            name,
            NamespacedCloudProfileSpec {
                parent: CloudProfileReference {
                    kind: kind.into(),
                    name: parent.into(),
                    namespace: None,
                },
                ..Default::default()
            },
        );
        n.metadata.namespace = Some(ns.into());
        n
    }

    fn cluster(name: &str) -> Option<CloudProfileReference> {
        Some(CloudProfileReference {
            kind: KIND_CLOUD_PROFILE.into(),
            name: name.into(),
            namespace: None,
        })
    }

    #[test]
    fn users_are_direct_shoots_and_child_ncps() {
        let shoots = [
            shoot("garden-b", "s2", cluster("local"), None),
            shoot("garden-a", "s1", None, Some("local")),
            shoot("garden-a", "other", cluster("aws"), None),
            shoot(
                "garden-a",
                "via-ncp",
                Some(CloudProfileReference {
                    kind: KIND_NAMESPACED_CLOUD_PROFILE.into(),
                    name: "local".into(),
                    namespace: None,
                }),
                None,
            ),
            shoot("garden-a", "none", None, None),
        ];
        let ncps = [
            ncp("garden-a", "dev", KIND_CLOUD_PROFILE, "local"),
            ncp("garden-a", "child", KIND_NAMESPACED_CLOUD_PROFILE, "local"),
            ncp("garden-b", "aws-dev", KIND_CLOUD_PROFILE, "aws"),
        ];
        let u = users(
            "local",
            &shoots.iter().collect::<Vec<_>>(),
            &ncps.iter().collect::<Vec<_>>(),
        );
        assert_eq!(u.shoots, ["garden-a/s1", "garden-b/s2"]);
        assert_eq!(u.ncps, ["garden-a/dev"]);
        assert!(!u.is_empty());
        assert_eq!(
            u.message(),
            "Cannot delete CloudProfile, because it is still referenced by Shoots \
             garden-a/s1, garden-b/s2 and NamespacedCloudProfiles garden-a/dev"
        );
        let none = users("gcp", &shoots.iter().collect::<Vec<_>>(), &[]);
        assert!(none.is_empty());
        assert_eq!(
            users("aws", &[], &ncps.iter().collect::<Vec<_>>()).message(),
            "Cannot delete CloudProfile, because it is still referenced by \
             NamespacedCloudProfiles garden-b/aws-dev"
        );
    }

    #[test]
    fn mappings_name_the_direct_cloud_profile_only() {
        assert_eq!(
            for_shoot(&shoot("a", "s", cluster("local"), None)),
            Some(ObjectRef::new("local"))
        );
        assert_eq!(
            for_shoot(&shoot("a", "s", None, Some("legacy"))),
            Some(ObjectRef::new("legacy"))
        );
        assert_eq!(for_shoot(&shoot("a", "s", None, None)), None);
        assert_eq!(
            for_ncp(&ncp("a", "n", KIND_CLOUD_PROFILE, "local")),
            Some(ObjectRef::new("local"))
        );
        assert_eq!(
            for_ncp(&ncp("a", "n", "", "local")),
            Some(ObjectRef::new("local")),
            "an empty kind means CloudProfile"
        );
        assert_eq!(
            for_ncp(&ncp("a", "n", KIND_NAMESPACED_CLOUD_PROFILE, "dev")),
            None
        );
    }
}
