//! Shoot maintenance as a plan: which machine image and Kubernetes versions
//! a shoot moves to, forced or automatic, with a human reason per change,
//! and whether `now` lies in the maintenance time window.
//!
//! The controller observes the Shoot and its profile, calls [`plan`], and
//! writes the returned changes, `status.lastMaintenance` and events; no
//! decision is taken outside this module.

use std::cmp::Ordering;

use chrono::{DateTime, Timelike, Utc};
use semver::Version;

use crate::Error;
use crate::capabilities::{self, explain_unsupported, version_supports_architecture};
use crate::lifecycle;
use crate::types::{
    AMD64, CapabilityDefinition, Classification, CloudProfileSpec, ExpirableVersion, MachineImage,
    MachineImageVersion, MachineType, MaintenanceTimeWindow, ShootSpec, UpdateStrategy, Worker,
};
use crate::version::{self, Constraint};

/// Why a version was left out by [`filter_image_versions`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// The version.
    pub version: String,
    /// Why it cannot run this pool.
    pub reason: String,
}

/// The versions of an image a pool can run, and why the others cannot.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageVersionFilter<'a> {
    /// Versions that fit the pool, in profile order.
    pub kept: Vec<&'a MachineImageVersion>,
    /// Versions that do not, with the first reason found.
    pub rejected: Vec<Rejected>,
}

impl ImageVersionFilter<'_> {
    /// Whether `version` survived the filter.
    pub fn contains(&self, version: &str) -> bool {
        self.kept.iter().any(|v| v.version() == version)
    }

    /// Why `version` was rejected, if it was.
    pub fn reason(&self, version: &str) -> Option<&str> {
        self.rejected
            .iter()
            .find(|r| r.version == version)
            .map(|r| r.reason.as_str())
    }
}

/// Filters an image's versions down to those a pool can run, in
/// upstream's order: architecture, capabilities (when the profile defines
/// them), CRI (the pool's or containerd, with all its runtimes), kubelet
/// version constraint, and for in-place pools in-place support from the
/// current version. Lifecycle is not considered here; the update-target
/// selection handles preview, deprecated and expired versions.
pub fn filter_image_versions<'a>(
    image: &'a MachineImage,
    worker: &Worker,
    machine_type: &MachineType,
    defs: &[CapabilityDefinition],
    kubelet_version: &str,
    current_version: &str,
) -> ImageVersionFilter<'a> {
    let arch = worker
        .machine
        .architecture
        .clone()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| AMD64.to_string());
    let kubelet = version::parse(kubelet_version);
    let mut out = ImageVersionFilter {
        kept: Vec::new(),
        rejected: Vec::new(),
    };
    for v in &image.versions {
        match why_unfit(
            v,
            worker,
            machine_type,
            defs,
            &arch,
            kubelet.as_ref(),
            current_version,
        ) {
            None => out.kept.push(v),
            Some(reason) => out.rejected.push(Rejected {
                version: v.version().to_string(),
                reason,
            }),
        }
    }
    out
}

fn why_unfit(
    v: &MachineImageVersion,
    worker: &Worker,
    machine_type: &MachineType,
    defs: &[CapabilityDefinition],
    arch: &str,
    kubelet: Option<&Version>,
    current_version: &str,
) -> Option<String> {
    if !version_supports_architecture(v, arch, defs) {
        return Some(format!(
            "it does not support architecture {arch} (it supports [{}])",
            capabilities::image_version_architectures(v, defs).join(", ")
        ));
    }
    if !defs.is_empty()
        && !capabilities::supported_by_flavors(
            &machine_type.capabilities,
            &v.capability_flavors,
            defs,
        )
    {
        return Some(format!(
            "machine type {} is not supported: {}",
            machine_type.name,
            explain_unsupported(&machine_type.capabilities, &v.capability_flavors, defs)
        ));
    }
    if let Some(reason) = cri_mismatch(v, worker) {
        return Some(reason);
    }
    if let Some(c) = &v.kubelet_version_constraint {
        let ok = match (Constraint::parse(c), kubelet) {
            (Ok(c), Some(k)) => c.matches(k),
            _ => false,
        };
        if !ok {
            return Some(format!(
                "its kubelet version constraint {c:?} is not met by the pool's kubelet version {}",
                kubelet
                    .map(|k| k.to_string())
                    .unwrap_or_else(|| "(unknown)".into())
            ));
        }
    }
    if worker.is_in_place() {
        let Some(ipu) = v.in_place_updates.as_ref().filter(|u| u.supported) else {
            return Some("it does not support in-place updates, which this pool uses".into());
        };
        if v.version() != current_version {
            let min_ok = ipu
                .min_version_for_update
                .as_deref()
                .is_some_and(|min| version::compare(min, current_version) != Ordering::Greater);
            if !min_ok {
                return Some(format!(
                    "it cannot be reached in place from {current_version} (minVersionForUpdate {})",
                    ipu.min_version_for_update.as_deref().unwrap_or("unset")
                ));
            }
        }
    }
    None
}

/// Why an image version cannot serve the pool's CRI, if it cannot.
pub(crate) fn cri_mismatch(v: &MachineImageVersion, worker: &Worker) -> Option<String> {
    let name = worker.cri_name();
    let offered = v.offered_cris();
    let Some(cri) = offered.iter().find(|c| c.name == name) else {
        return Some(format!(
            "it does not offer CRI {name} (it offers [{}])",
            offered
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    let wanted = worker
        .cri
        .as_ref()
        .map(|c| c.container_runtimes.as_slice())
        .unwrap_or(&[]);
    for rt in wanted {
        if !cri.container_runtimes.iter().any(|o| o.type_ == rt.type_) {
            return Some(format!(
                "its CRI {name} does not offer container runtime {}",
                rt.type_
            ));
        }
    }
    None
}

/// The version auto-update moves to: newer than `current`, neither preview
/// nor expired, non-deprecated preferred; by strategy the highest patch of
/// the same minor (patch), else the highest of the same major (minor),
/// else the overall highest (major).
pub fn auto_update_target(
    versions: &[&ExpirableVersion],
    current: &str,
    strategy: UpdateStrategy,
    now: DateTime<Utc>,
) -> Option<String> {
    let cur = version::parse(current)?;
    let candidates: Vec<(Version, &ExpirableVersion)> = versions
        .iter()
        .filter_map(|v| version::parse(&v.version).map(|p| (p, *v)))
        .filter(|(p, v)| {
            p.cmp_precedence(&cur) == Ordering::Greater
                && !matches!(
                    lifecycle::classification(v, now),
                    Classification::Preview | Classification::Expired | Classification::Unavailable
                )
        })
        .collect();
    let same_minor = |p: &Version| p.major == cur.major && p.minor == cur.minor;
    let same_major = |p: &Version| p.major == cur.major;
    let steps: Vec<&dyn Fn(&Version) -> bool> = match strategy {
        UpdateStrategy::Patch => vec![&same_minor],
        UpdateStrategy::Minor => vec![&same_minor, &same_major],
        UpdateStrategy::Major => vec![&same_minor, &|_: &Version| true],
    };
    for step in steps {
        let pool: Vec<&(Version, &ExpirableVersion)> =
            candidates.iter().filter(|(p, _)| step(p)).collect();
        if let Some(best) = highest_preferring_non_deprecated(&pool, now) {
            return Some(best);
        }
    }
    None
}

fn highest_preferring_non_deprecated(
    pool: &[&(Version, &ExpirableVersion)],
    now: DateTime<Utc>,
) -> Option<String> {
    let highest = |deprecated_ok: bool| {
        pool.iter()
            .filter(|(_, v)| {
                deprecated_ok || lifecycle::classification(v, now) != Classification::Deprecated
            })
            .max_by(|a, b| a.0.cmp_precedence(&b.0))
            .map(|(_, v)| v.version.clone())
    };
    highest(false).or_else(|| highest(true))
}

/// The version a forced update moves to when nothing newer is available
/// within the strategy: the next higher minor of the same major (patch) or
/// the next higher major (minor); `major` has nowhere to go.
///
/// The highest non-preview, non-expired version of the lowest higher
/// minor/major that has one wins, unless that skips a lower minor/major
/// that has only expired versions: then the highest non-preview version of
/// the immediately next one is taken even if expired, so shoots move one
/// step at a time. Preview versions are never chosen.
pub fn forced_update_target(
    versions: &[&ExpirableVersion],
    current: &str,
    strategy: UpdateStrategy,
    now: DateTime<Utc>,
) -> Option<String> {
    let cur = version::parse(current)?;
    // The "bucket" a version falls into: its minor for patch strategy, its
    // major for minor strategy; only higher buckets count.
    let bucket = |p: &Version| -> Option<u64> {
        match strategy {
            UpdateStrategy::Patch if p.major == cur.major && p.minor > cur.minor => Some(p.minor),
            UpdateStrategy::Minor if p.major > cur.major => Some(p.major),
            _ => None,
        }
    };
    let mut candidates: Vec<(u64, Version, Classification, String)> = versions
        .iter()
        .filter_map(|v| {
            let p = version::parse(&v.version)?;
            let b = bucket(&p)?;
            let class = lifecycle::classification(v, now);
            if matches!(class, Classification::Preview | Classification::Unavailable) {
                return None;
            }
            Some((b, p, class, v.version.clone()))
        })
        .collect();
    candidates.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp_precedence(&b.1)));
    let lowest_bucket = candidates.first().map(|c| c.0)?;
    let best_in = |bucket: u64, allow_expired: bool| {
        candidates
            .iter()
            .filter(|c| c.0 == bucket && (allow_expired || c.2 != Classification::Expired))
            .max_by(|a, b| a.1.cmp_precedence(&b.1))
            .map(|c| c.3.clone())
    };
    let first_live = candidates
        .iter()
        .find(|c| c.2 != Classification::Expired)
        .map(|c| c.0);
    match first_live {
        Some(b) if b == lowest_bucket => best_in(b, false),
        _ => best_in(lowest_bucket, true),
    }
}

/// What a planned change touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// `spec.kubernetes.version`.
    KubernetesVersion,
    /// `spec.provider.workers[].kubernetes.version`.
    WorkerKubernetesVersion,
    /// `spec.provider.workers[].machine.image.version`.
    MachineImageVersion,
}

/// One change maintenance wants to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedChange {
    /// What is changed.
    pub kind: ChangeKind,
    /// The worker pool, for pool changes.
    pub worker: Option<String>,
    /// JSON path of the field.
    pub field: String,
    /// Old value.
    pub from: String,
    /// New value.
    pub to: String,
    /// Whether the change is forced (expired or incompatible current
    /// version) rather than an opted-in auto-update.
    pub forced: bool,
    /// A sentence for `status.lastMaintenance.description` and events.
    pub reason: String,
}

/// The result of [`plan`]: the changes to apply and the pools or versions
/// maintenance could not handle. Changes are valid even when errors exist:
/// one broken pool does not block the others.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MaintenancePlan {
    /// Changes in the order they should be applied.
    pub changes: Vec<PlannedChange>,
    /// What failed, one message per problem.
    pub errors: Vec<Error>,
}

impl MaintenancePlan {
    /// One line per change and error, for `status.lastMaintenance`.
    pub fn description(&self) -> String {
        let mut lines: Vec<String> = self.changes.iter().map(|c| c.reason.clone()).collect();
        lines.extend(self.errors.iter().map(|e| e.to_string()));
        lines.join("; ")
    }

    /// Applies the changes to a shoot spec.
    pub fn apply(&self, spec: &mut ShootSpec) {
        for c in &self.changes {
            match c.kind {
                ChangeKind::KubernetesVersion => spec.kubernetes.version = c.to.clone(),
                ChangeKind::WorkerKubernetesVersion | ChangeKind::MachineImageVersion => {
                    let Some(w) = spec
                        .provider
                        .workers
                        .iter_mut()
                        .find(|w| Some(&w.name) == c.worker.as_ref())
                    else {
                        continue;
                    };
                    if c.kind == ChangeKind::MachineImageVersion {
                        if let Some(image) = w.machine.image.as_mut() {
                            image.version = Some(c.to.clone());
                        }
                    } else {
                        w.kubernetes.get_or_insert_with(Default::default).version =
                            Some(c.to.clone());
                    }
                }
            }
        }
    }
}

/// Plans the maintenance of a shoot at `now`: machine images first (with
/// the current control-plane version as kubelet version), then the
/// control-plane Kubernetes version, then pool Kubernetes versions capped
/// at the new control-plane version.
pub fn plan(spec: &ShootSpec, profile: &CloudProfileSpec, now: DateTime<Utc>) -> MaintenancePlan {
    let mut out = MaintenancePlan::default();
    let auto = spec
        .maintenance
        .as_ref()
        .and_then(|m| m.auto_update.as_ref());
    let auto_images = auto.and_then(|a| a.machine_image_version).unwrap_or(true);
    let auto_k8s = auto.is_some_and(|a| a.kubernetes_version);
    for (i, w) in spec.provider.workers.iter().enumerate() {
        match plan_worker_image(i, w, spec, profile, auto_images, now) {
            Ok(Some(change)) => out.changes.push(change),
            Ok(None) => {}
            Err(e) => out.errors.push(e),
        }
    }

    let cp_current = spec.kubernetes.version.clone();
    let mut cp_new = cp_current.clone();
    match plan_kubernetes(&cp_current, profile, auto_k8s, None, now) {
        Ok(Some((to, forced, why))) => {
            out.changes.push(PlannedChange {
                kind: ChangeKind::KubernetesVersion,
                worker: None,
                field: "spec.kubernetes.version".into(),
                from: cp_current.clone(),
                to: to.clone(),
                forced,
                reason: format!(
                    "Control plane Kubernetes version updated from {cp_current} to {to}: {why}"
                ),
            });
            cp_new = to;
        }
        Ok(None) => {}
        Err(reason) => out.errors.push(Error::MaintenanceFailed {
            pool: "(control plane)".into(),
            reason,
        }),
    }
    for (i, w) in spec.provider.workers.iter().enumerate() {
        let Some(current) = w.kubernetes_version() else {
            continue;
        };
        match plan_kubernetes(current, profile, auto_k8s, Some(&cp_new), now) {
            Ok(Some((to, forced, why))) => out.changes.push(PlannedChange {
                kind: ChangeKind::WorkerKubernetesVersion,
                worker: Some(w.name.clone()),
                field: format!("spec.provider.workers[{i}].kubernetes.version"),
                from: current.to_string(),
                to: to.clone(),
                forced,
                reason: format!(
                    "Kubernetes version of worker pool {} updated from {current} to {to}: {why}",
                    w.name
                ),
            }),
            Ok(None) => {}
            Err(reason) => out.errors.push(Error::MaintenanceFailed {
                pool: w.name.clone(),
                reason,
            }),
        }
    }
    out
}

fn plan_worker_image(
    index: usize,
    w: &Worker,
    spec: &ShootSpec,
    profile: &CloudProfileSpec,
    auto_enabled: bool,
    now: DateTime<Utc>,
) -> Result<Option<PlannedChange>, Error> {
    let fail = |reason: String| Error::MaintenanceFailed {
        pool: w.name.clone(),
        reason,
    };
    let Some(image_ref) = w.machine.image.as_ref() else {
        return Ok(None);
    };
    let Some(current) = image_ref.version.as_deref().filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let machine_type = profile.machine_type(&w.machine.type_).ok_or_else(|| {
        fail(format!(
            "machine type {:?} is not in the cloud profile",
            w.machine.type_
        ))
    })?;
    let image = profile
        .machine_images
        .iter()
        .find(|i| i.name.eq_ignore_ascii_case(&image_ref.name))
        .ok_or_else(|| {
            fail(format!(
                "machine image {:?} is not in the cloud profile",
                image_ref.name
            ))
        })?;
    let kubelet = w
        .kubernetes_version()
        .unwrap_or(spec.kubernetes.version.as_str());
    let filter = filter_image_versions(
        image,
        w,
        machine_type,
        &profile.machine_capabilities,
        kubelet,
        current,
    );
    let current_entry = image.version(current);
    let (forced, force_reason) = if !filter.contains(current) {
        let why = filter
            .reason(current)
            .map(str::to_string)
            .unwrap_or_else(|| "it is no longer offered by the cloud profile".to_string());
        (
            true,
            format!("the current version {current} cannot be kept because {why}"),
        )
    } else if current_entry.is_some_and(|v| lifecycle::is_expired(&v.expirable, now)) {
        (true, format!("the current version {current} has expired"))
    } else {
        (false, String::new())
    };
    if !forced && !auto_enabled {
        return Ok(None);
    }
    let versions: Vec<&ExpirableVersion> = filter.kept.iter().map(|v| &v.expirable).collect();
    let strategy = image.strategy();
    let target = auto_update_target(&versions, current, strategy, now);
    let (to, reason) = match (target, forced) {
        (Some(to), true) => (to, force_reason),
        (Some(to), false) => (to, format!("automatic update within strategy {strategy}")),
        (None, false) => return Ok(None),
        (None, true) => match forced_update_target(&versions, current, strategy, now) {
            Some(to) => (
                to,
                format!(
                    "{force_reason}, and no newer version is available within strategy {strategy}"
                ),
            ),
            None => {
                return Err(fail(format!(
                    "{force_reason}, and no version of image {} fits the pool (machine type {}, strategy {strategy}): the image version reached its end of life or the cloud profile is misconfigured",
                    image.name, machine_type.name
                )));
            }
        },
    };
    Ok(Some(PlannedChange {
        kind: ChangeKind::MachineImageVersion,
        worker: Some(w.name.clone()),
        field: format!("spec.provider.workers[{index}].machine.image.version"),
        from: current.to_string(),
        to: to.clone(),
        forced,
        reason: format!(
            "Machine image of worker pool {} updated from {}:{current} to {}:{to}: {reason}",
            w.name, image.name, image.name
        ),
    }))
}

/// Kubernetes maintenance of one version: the highest active non-preview
/// patch of the same minor when auto-update is on or the version expired;
/// an expired version without a newer patch moves to the consecutive minor
/// only. `cap` limits pool versions to the control plane's.
fn plan_kubernetes(
    current: &str,
    profile: &CloudProfileSpec,
    auto_enabled: bool,
    cap: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Option<(String, bool, String)>, String> {
    let Some(cur) = version::parse(current) else {
        return Ok(None);
    };
    let expired = profile
        .kubernetes_version(current)
        .is_none_or(|v| lifecycle::is_expired(v, now));
    if !expired && !auto_enabled {
        return Ok(None);
    }
    let capped = |p: &Version| {
        cap.and_then(version::parse)
            .is_none_or(|c| p.cmp_precedence(&c) != Ordering::Greater)
    };
    let parsed: Vec<(Version, &ExpirableVersion)> = profile
        .kubernetes
        .versions
        .iter()
        .filter_map(|v| version::parse(&v.version).map(|p| (p, v)))
        .filter(|(p, _)| capped(p))
        .collect();
    let best = |filter: &dyn Fn(&Version, Classification) -> bool| {
        parsed
            .iter()
            .filter(|(p, v)| filter(p, lifecycle::classification(v, now)))
            .max_by(|a, b| a.0.cmp_precedence(&b.0))
            .map(|(_, v)| v.version.clone())
    };
    let live = |c: Classification| {
        !matches!(
            c,
            Classification::Preview | Classification::Expired | Classification::Unavailable
        )
    };
    if let Some(to) = best(&|p, c| {
        p.major == cur.major
            && p.minor == cur.minor
            && p.cmp_precedence(&cur) == Ordering::Greater
            && live(c)
    }) {
        let why = if expired {
            format!("{current} expired; moved to the latest patch version")
        } else {
            "automatic patch update".to_string()
        };
        return Ok(Some((to, expired, why)));
    }
    if !expired {
        return Ok(None);
    }
    let next_minor =
        |p: &Version| p.major == cur.major && Some(p.minor) == cur.minor.checked_add(1);
    let to = best(&|p, c| next_minor(p) && live(c)).or_else(|| {
        best(&|p, c| {
            next_minor(p) && !matches!(c, Classification::Preview | Classification::Unavailable)
        })
    });
    match to {
        Some(to) => Ok(Some((
            to,
            true,
            format!(
                "{current} expired and has no newer patch; moved to the consecutive minor version"
            ),
        ))),
        None => Err(format!(
            "Kubernetes version {current} expired and neither a newer patch nor a version of minor {}.{} is available{}",
            cur.major,
            cur.minor.saturating_add(1),
            if cap.is_some() {
                " up to the control plane's version"
            } else {
                ""
            }
        )),
    }
}

/// Parses one end of a maintenance window (`HHMMSS+ZZZZ`) into seconds
/// after midnight UTC.
fn window_second(s: &str) -> Result<u32, Error> {
    let bad = || Error::InvalidTimeWindow(format!("{s:?} is not in the format HHMMSS+ZZZZ"));
    let b = s.as_bytes();
    if b.len() != 11 || !matches!(b[6], b'+' | b'-') {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<u32, Error> {
        let part = s.get(r).ok_or_else(bad)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse().map_err(|_| bad())
    };
    let (h, m, sec, oh, om) = (num(0..2)?, num(2..4)?, num(4..6)?, num(7..9)?, num(9..11)?);
    if h > 23 || m > 59 || sec > 59 || oh > 14 || om > 59 {
        return Err(bad());
    }
    let local = (h * 3600 + m * 60 + sec) as i64;
    let offset = (oh * 3600 + om * 60) as i64 * if b[6] == b'-' { -1 } else { 1 };
    Ok((local - offset).rem_euclid(86_400) as u32)
}

/// Whether `now` lies inside the daily maintenance window, both ends
/// included. A window whose end (in UTC) is before its begin wraps
/// midnight, e.g. `220000+0000`–`010000+0000`.
pub fn in_time_window(window: &MaintenanceTimeWindow, now: DateTime<Utc>) -> Result<bool, Error> {
    let begin = window_second(&window.begin)?;
    let end = window_second(&window.end)?;
    let t = now.num_seconds_from_midnight();
    Ok(if begin <= end {
        begin <= t && t <= end
    } else {
        t >= begin || t <= end
    })
}

/// The versions of every image a machine type can boot and that are
/// active at `now`, as `(image, version)`: what a dashboard offers for the
/// type, and what the bench measures.
pub fn compatible_image_versions<'a>(
    profile: &'a CloudProfileSpec,
    machine_type: &MachineType,
    now: DateTime<Utc>,
) -> Vec<(&'a str, &'a str)> {
    CompatibilityIndex::new(profile, now).for_type(machine_type)
}

/// A profile's active image versions, prepared once so that many machine
/// types can be filtered against them (a dashboard listing every type):
/// the lifecycle is judged once per version instead of once per pair.
pub struct CompatibilityIndex<'a> {
    profile: &'a CloudProfileSpec,
    active: Vec<(&'a str, &'a MachineImageVersion)>,
}

impl<'a> CompatibilityIndex<'a> {
    /// Keeps the versions active at `now`.
    pub fn new(profile: &'a CloudProfileSpec, now: DateTime<Utc>) -> CompatibilityIndex<'a> {
        let active = profile
            .machine_images
            .iter()
            .flat_map(|image| image.versions.iter().map(move |v| (image.name.as_str(), v)))
            .filter(|(_, v)| lifecycle::is_active(&v.expirable, now))
            .collect();
        CompatibilityIndex { profile, active }
    }

    /// The `(image, version)` pairs `machine_type` can boot, in profile
    /// order: its architecture is offered, and one flavor shares a value
    /// with the type for every defined capability.
    pub fn for_type(&self, machine_type: &MachineType) -> Vec<(&'a str, &'a str)> {
        let defs = &self.profile.machine_capabilities;
        let arch = capabilities::machine_type_architecture(machine_type, defs)
            .unwrap_or_else(|| AMD64.to_string());
        // The type's defaulted values per definition, computed once.
        let wanted: Vec<&[String]> = defs
            .iter()
            .map(|d| capabilities::effective(&machine_type.capabilities, d))
            .collect();
        let fits = |f: &crate::Capabilities| {
            defs.iter().zip(&wanted).all(|(d, want)| {
                let offered = capabilities::effective(f, d);
                want.iter().any(|w| offered.contains(w))
            })
        };
        self.active
            .iter()
            .filter(|(_, v)| {
                version_supports_architecture(v, &arch, defs)
                    && (v.capability_flavors.is_empty() || v.capability_flavors.iter().any(fits))
            })
            .map(|(image, v)| (*image, v.version()))
            .collect()
    }
}

#[cfg(test)]
mod index_tests {
    use super::*;
    use crate::bench::{BenchConfig, bench_now, synthetic_profile};

    /// The prepared index answers exactly what the per-pair definition
    /// (architecture, one compatible flavor, active) answers.
    #[test]
    fn the_index_agrees_with_the_pairwise_definition() {
        let profile = synthetic_profile(BenchConfig {
            machine_types: 60,
            image_versions: 40,
            flavors: 8,
            ncps: 0,
        });
        let now = bench_now();
        let defs = &profile.machine_capabilities;
        let index = CompatibilityIndex::new(&profile, now);
        let mut total = 0;
        for t in &profile.machine_types {
            let arch = capabilities::machine_type_architecture(t, defs)
                .unwrap_or_else(|| AMD64.to_string());
            let want: Vec<(&str, &str)> = profile
                .machine_images
                .iter()
                .flat_map(|i| i.versions.iter().map(move |v| (i, v)))
                .filter(|(_, v)| {
                    version_supports_architecture(v, &arch, defs)
                        && capabilities::supported_by_flavors(
                            &t.capabilities,
                            &v.capability_flavors,
                            defs,
                        )
                        && lifecycle::is_active(&v.expirable, now)
                })
                .map(|(i, v)| (i.name.as_str(), v.version()))
                .collect();
            total += want.len();
            assert_eq!(index.for_type(t), want, "machine type {}", t.name);
        }
        assert!(total > 0, "the sample has compatible pairs");
    }
}
