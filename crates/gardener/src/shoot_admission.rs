//! Admission of Shoots against their cloud profile, as pure functions:
//! defaulting of versions, architecture and machine image (upstream's
//! mutator), validation of every worker pool (upstream's validator), and
//! the rules for the Shoot's profile reference (§2.4).
//!
//! Each validation runs only when its inputs changed compared with the old
//! Shoot, so a profile change never makes an untouched Shoot unwritable.
//! Messages name the reason, e.g. which capability had no common value with
//! which flavor, where upstream only says "not supported".

use std::cmp::Ordering;
use std::collections::BTreeSet;

use apimachinery::status::Cause;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::Extensions;
use crate::capabilities::{
    self, explain_unsupported, machine_type_architecture, version_supports_architecture,
};
use crate::lifecycle;
use crate::maintenance::cri_mismatch;
use crate::quantity;
use crate::types::{
    AMD64, CapabilityDefinition, Classification, CloudProfileReference, CloudProfileSpec,
    KIND_CLOUD_PROFILE, KIND_NAMESPACED_CLOUD_PROFILE, MachineImage, MachineImageVersion,
    MachineType, SUPPORTED_ARCHITECTURES, ShootMachineImage, ShootSpec, Worker,
};
use crate::version::{self, Constraint};

/// Path of worker `i`.
fn worker_path(i: usize) -> String {
    format!("spec.provider.workers[{i}]")
}

fn forbidden(field: impl Into<String>, message: impl Into<String>) -> Cause {
    Cause::new("FieldValueForbidden", field, message)
}

fn not_supported(field: impl Into<String>, message: impl Into<String>) -> Cause {
    Cause::new("FieldValueNotSupported", field, message)
}

/// Resolves `""`, `1` or `1.30` to the latest `supported` version of the
/// profile with that prefix; a full `major.minor.patch` is returned as is
/// (validation checks it). `Err` says why nothing matched.
pub fn default_kubernetes_version(
    requested: &str,
    profile: &CloudProfileSpec,
    now: DateTime<Utc>,
) -> Result<String, String> {
    if version::is_kubernetes_version(requested) {
        return Ok(requested.to_string());
    }
    let prefix: Vec<u64> = if requested.is_empty() {
        Vec::new()
    } else {
        requested
            .trim_start_matches('v')
            .split('.')
            .map(|p| p.parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("{requested:?} is not a Kubernetes version or version prefix"))?
    };
    if prefix.len() > 2 {
        return Err(format!("{requested:?} is not a Kubernetes version"));
    }
    profile
        .kubernetes
        .versions
        .iter()
        .filter(|v| lifecycle::classification(v, now) == Classification::Supported)
        .filter_map(|v| version::parse(&v.version).map(|p| (p, v)))
        .filter(|(p, _)| {
            prefix.first().is_none_or(|m| *m == p.major)
                && prefix.get(1).is_none_or(|m| *m == p.minor)
        })
        .max_by(|a, b| a.0.cmp_precedence(&b.0))
        .map(|(_, v)| v.version.clone())
        .ok_or_else(|| {
            format!(
                "the cloud profile offers no supported Kubernetes version matching {:?}",
                if requested.is_empty() { "*" } else { requested }
            )
        })
}

/// Defaults a shoot against its profile (upstream's mutator): the
/// control-plane and pool Kubernetes versions, each pool's architecture
/// and machine image. Returns causes for what cannot be defaulted.
pub fn default_shoot(
    spec: &mut ShootSpec,
    old: Option<&ShootSpec>,
    profile: &CloudProfileSpec,
    now: DateTime<Utc>,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    match default_kubernetes_version(&spec.kubernetes.version, profile, now) {
        Ok(v) => spec.kubernetes.version = v,
        Err(e) => causes.push(Cause::invalid("spec.kubernetes.version", e)),
    }
    let defs = profile.machine_capabilities.clone();
    for (i, w) in spec.provider.workers.iter_mut().enumerate() {
        let path = worker_path(i);
        if let Some(requested) = w.kubernetes.as_mut().and_then(|k| k.version.as_mut())
            && !requested.is_empty()
        {
            match default_kubernetes_version(requested, profile, now) {
                Ok(v) => *requested = v,
                Err(e) => causes.push(Cause::invalid(format!("{path}.kubernetes.version"), e)),
            }
        }
        let machine_type = profile.machine_type(&w.machine.type_);
        if w.machine.architecture.as_deref().is_none_or(str::is_empty) {
            w.machine.architecture = Some(
                machine_type
                    .and_then(|t| machine_type_architecture(t, &defs))
                    .unwrap_or_else(|| AMD64.to_string()),
            );
        }
        let old_image = old
            .and_then(|o| o.provider.workers.iter().find(|ow| ow.name == w.name))
            .and_then(|ow| ow.machine.image.clone());
        match default_image(w, old_image.as_ref(), machine_type, profile, now) {
            Ok(image) => w.machine.image = Some(image),
            Err(e) => causes.push(Cause::invalid(format!("{path}.machine.image"), e)),
        }
    }
    causes
}

fn default_image(
    w: &Worker,
    old: Option<&ShootMachineImage>,
    machine_type: Option<&MachineType>,
    profile: &CloudProfileSpec,
    now: DateTime<Utc>,
) -> Result<ShootMachineImage, String> {
    let defs = &profile.machine_capabilities;
    let arch = w
        .machine
        .architecture
        .clone()
        .unwrap_or_else(|| AMD64.to_string());
    let given = w.machine.image.as_ref();
    if let Some(old) = old {
        match given {
            None => return Ok(old.clone()),
            Some(g)
                if g.name == old.name
                    && g.version
                        .as_deref()
                        .is_none_or(|v| v.is_empty() || Some(v) == old.version.as_deref()) =>
            {
                return Ok(ShootMachineImage {
                    provider_config: g.provider_config.clone(),
                    ..old.clone()
                });
            }
            Some(_) => {}
        }
    }
    let fits = |v: &MachineImageVersion| {
        version_supports_architecture(v, &arch, defs)
            || machine_type.is_some_and(|t| {
                !defs.is_empty()
                    && capabilities::supported_by_flavors(
                        &t.capabilities,
                        &v.capability_flavors,
                        defs,
                    )
            })
    };
    let image: &MachineImage = match given.filter(|g| !g.name.is_empty()) {
        Some(g) => {
            let image = profile.machine_image(&g.name).ok_or_else(|| {
                format!(
                    "machine image {:?} is not offered by the cloud profile (offered: [{}])",
                    g.name,
                    profile
                        .machine_images
                        .iter()
                        .map(|i| i.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            if let Some(v) = g.version.as_deref().filter(|v| image.version(v).is_some()) {
                return Ok(ShootMachineImage {
                    name: g.name.clone(),
                    version: Some(v.to_string()),
                    provider_config: g.provider_config.clone(),
                });
            }
            image
        }
        // Upstream's quirk, kept: the first image with a version that
        // supports the architecture *or* is capability-compatible.
        None => profile
            .machine_images
            .iter()
            .find(|i| i.versions.iter().any(fits))
            .ok_or_else(|| {
                format!("no machine image of the cloud profile supports architecture {arch}")
            })?,
    };
    let requested = given.and_then(|g| g.version.as_deref()).unwrap_or("");
    let prefix: Vec<u64> = requested
        .trim_start_matches('v')
        .split('.')
        .filter(|p| !p.is_empty())
        .map_while(|p| p.parse().ok())
        .collect();
    let candidates: Vec<(semver::Version, &MachineImageVersion, Classification)> = image
        .versions
        .iter()
        .filter(|v| version_supports_architecture(v, &arch, defs))
        .filter(|v| {
            machine_type.is_none_or(|t| {
                capabilities::supported_by_flavors(&t.capabilities, &v.capability_flavors, defs)
            })
        })
        .filter(|v| !w.is_in_place() || v.in_place_updates.as_ref().is_some_and(|u| u.supported))
        .filter(|v| lifecycle::is_active(&v.expirable, now))
        .filter_map(|v| {
            let p = version::parse(v.version())?;
            let matches = prefix.first().is_none_or(|m| *m == p.major)
                && prefix.get(1).is_none_or(|m| *m == p.minor);
            matches.then(|| (p, v, lifecycle::classification(&v.expirable, now)))
        })
        .filter(|(_, _, c)| *c != Classification::Preview)
        .collect();
    let latest = |allow_deprecated: bool| {
        candidates
            .iter()
            .filter(|(_, _, c)| allow_deprecated || *c != Classification::Deprecated)
            .max_by(|a, b| a.0.cmp_precedence(&b.0))
            .map(|(_, v, _)| v.version().to_string())
    };
    let version = latest(false).or_else(|| latest(true)).ok_or_else(|| {
        format!(
            "image {} has no active, non-preview version{} for architecture {arch}{}{}",
            image.name,
            if requested.is_empty() {
                String::new()
            } else {
                format!(" matching {requested:?}")
            },
            machine_type
                .map(|t| format!(" compatible with machine type {}", t.name))
                .unwrap_or_default(),
            if w.is_in_place() {
                " that supports in-place updates"
            } else {
                ""
            }
        )
    })?;
    Ok(ShootMachineImage {
        name: image.name.clone(),
        version: Some(version),
        provider_config: given.and_then(|g| g.provider_config.clone()),
    })
}

/// Validates a shoot against its (rendered) profile (upstream's
/// validator). Pass the old spec on update; checks whose inputs did not
/// change are skipped.
pub fn validate_shoot(
    spec: &ShootSpec,
    old: Option<&ShootSpec>,
    profile: &CloudProfileSpec,
    now: DateTime<Utc>,
) -> Vec<Cause> {
    let mut causes = crate::shoot_validation::validate_workers(spec, old);
    causes.extend(crate::shoot_validation::validate_hibernation(spec));
    let region_changed = old.is_none_or(|o| o.region != spec.region);
    if old.is_none_or(|o| o.provider.type_ != spec.provider.type_)
        && spec.provider.type_ != profile.type_
    {
        causes.push(Cause::invalid(
            "spec.provider.type",
            format!(
                "provider type {:?} does not match the cloud profile's type {:?}",
                spec.provider.type_, profile.type_
            ),
        ));
    }
    if region_changed && profile.region(&spec.region).is_none() {
        causes.push(not_supported(
            "spec.region",
            format!(
                "region {:?} is not offered by the cloud profile (offered: [{}])",
                spec.region,
                profile
                    .regions
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let cp_version_changed = old.is_none_or(|o| o.kubernetes.version != spec.kubernetes.version);
    if cp_version_changed {
        causes.extend(validate_kubernetes_version(
            &spec.kubernetes.version,
            old.map(|o| o.kubernetes.version.as_str()),
            profile,
            "spec.kubernetes.version",
            now,
        ));
    }
    for (i, w) in spec.provider.workers.iter().enumerate() {
        let old_w = old.and_then(|o| o.provider.workers.iter().find(|ow| ow.name == w.name));
        let changed = ShootChanges {
            region: region_changed,
            control_plane_version: cp_version_changed,
        };
        causes.extend(validate_worker(i, w, old_w, spec, changed, profile, now));
    }
    if let Some(max) = profile.limits.as_ref().and_then(|l| l.max_nodes_total) {
        let total: i64 = spec
            .provider
            .workers
            .iter()
            .map(|w| i64::from(w.minimum))
            .sum();
        let old_total: Option<i64> = old.map(|o| {
            o.provider
                .workers
                .iter()
                .map(|w| i64::from(w.minimum))
                .sum()
        });
        if total > i64::from(max) && old_total != Some(total) {
            causes.push(forbidden(
                "spec.provider.workers",
                format!(
                    "the worker pools' minimums add up to {total} nodes, more than the cloud profile's limit of {max}"
                ),
            ));
        }
    }
    causes
}

fn validate_kubernetes_version(
    requested: &str,
    old: Option<&str>,
    profile: &CloudProfileSpec,
    field: &str,
    now: DateTime<Utc>,
) -> Vec<Cause> {
    let Some(entry) = profile.kubernetes_version(requested) else {
        return vec![not_supported(
            field,
            format!("Kubernetes version {requested:?} is not offered by the cloud profile"),
        )];
    };
    if lifecycle::is_active(entry, now) {
        return Vec::new();
    }
    // An inactive version may stay where it already was; moving onto one
    // is refused.
    if old.is_some_and(|o| version::compare(requested, o) != Ordering::Greater) {
        return Vec::new();
    }
    vec![forbidden(
        field,
        format!(
            "Kubernetes version {requested} is {} and cannot be chosen",
            lifecycle::classification(entry, now)
        ),
    )]
}

/// Shoot-level inputs of worker checks that changed since the old Shoot.
#[derive(Clone, Copy)]
struct ShootChanges {
    region: bool,
    control_plane_version: bool,
}

fn validate_worker(
    i: usize,
    w: &Worker,
    old: Option<&Worker>,
    spec: &ShootSpec,
    changed: ShootChanges,
    profile: &CloudProfileSpec,
    now: DateTime<Utc>,
) -> Vec<Cause> {
    let region_changed = changed.region;
    let path = worker_path(i);
    let defs: &[CapabilityDefinition] = &profile.machine_capabilities;
    let mut causes = Vec::new();
    let arch = w
        .machine
        .architecture
        .clone()
        .unwrap_or_else(|| AMD64.to_string());
    let machine_changed = old.is_none_or(|o| o.machine != w.machine) || region_changed;
    let zones_changed = old.is_none_or(|o| o.zones != w.zones) || region_changed;
    if machine_changed && !SUPPORTED_ARCHITECTURES.contains(&arch.as_str()) {
        causes.push(not_supported(
            format!("{path}.machine.architecture"),
            format!("architecture {arch:?} is not supported; supported: amd64, arm64"),
        ));
    }
    let region = profile.region(&spec.region);

    // 2. Machine type.
    let machine_type = profile.machine_type(&w.machine.type_);
    let mut type_ok = machine_type.is_some();
    if machine_changed || zones_changed {
        match machine_type {
            None => causes.push(not_supported(
                format!("{path}.machine.type"),
                format!(
                    "machine type {:?} is not offered by the cloud profile",
                    w.machine.type_
                ),
            )),
            Some(t) => {
                let before = causes.len();
                if !t.is_usable() && old.is_none_or(|o| o.machine.type_ != w.machine.type_) {
                    causes.push(forbidden(
                        format!("{path}.machine.type"),
                        format!(
                            "machine type {} is marked unusable in the cloud profile",
                            t.name
                        ),
                    ));
                }
                if let Some(region) = region {
                    for zone in region.zones.iter().filter(|z| w.zones.contains(&z.name)) {
                        if zone.unavailable_machine_types.contains(&t.name) {
                            causes.push(forbidden(
                                format!("{path}.machine.type"),
                                format!(
                                    "machine type {} is unavailable in zone {}",
                                    t.name, zone.name
                                ),
                            ));
                        }
                    }
                }
                if let Some(type_arch) = machine_type_architecture(t, defs)
                    && type_arch != arch
                {
                    causes.push(forbidden(
                            format!("{path}.machine.architecture"),
                            format!("machine type {} has architecture {type_arch}, but the pool asks for {arch}", t.name),
                        ));
                }
                type_ok = causes.len() == before;
            }
        }
    }

    // 3. and 4. Machine image.
    let mut image_ok = true;
    let image_ref = w.machine.image.as_ref();
    let image_version = image_ref.and_then(|i| i.version.as_deref()).unwrap_or("");
    let version_entry = image_ref
        .and_then(|i| profile.machine_image(&i.name))
        .and_then(|img| img.version(image_version));
    if machine_changed {
        let before = causes.len();
        causes.extend(validate_worker_image(
            &path,
            w,
            old,
            version_entry,
            machine_type,
            &arch,
            defs,
            now,
        ));
        image_ok = causes.len() == before;
    }

    // 5. CRI and kubelet constraint, only when machine type and image fit.
    let kubelet = w
        .kubernetes_version()
        .unwrap_or(spec.kubernetes.version.as_str());
    let runtime_changed = machine_changed
        || old.is_none_or(|o| o.cri != w.cri || o.kubernetes_version() != w.kubernetes_version())
        || changed.control_plane_version;
    if runtime_changed
        && type_ok
        && image_ok
        && let Some(v) = version_entry
    {
        if let Some(why) = cri_mismatch(v, w) {
            causes.push(not_supported(
                format!("{path}.cri.name"),
                format!(
                    "machine image {}:{} cannot be used: {why}",
                    image_ref.map(|i| i.name.as_str()).unwrap_or(""),
                    v.version()
                ),
            ));
        }
        if let Some(c) = &v.kubelet_version_constraint {
            let ok = Constraint::parse(c).is_ok_and(|c| c.matches_str(kubelet));
            if !ok {
                causes.push(forbidden(
                        format!("{path}.machine.image.version"),
                        format!(
                            "machine image version {} requires a kubelet version {c}, but the pool runs {kubelet}",
                            v.version()
                        ),
                    ));
            }
        }
    }

    // 6. Volumes, reservations, pool version, zones.
    let volume_changed = old
        .is_none_or(|o| o.volume != w.volume || o.machine.type_ != w.machine.type_)
        || zones_changed;
    if volume_changed {
        causes.extend(validate_volume(&path, w, machine_type, region, profile));
    }
    if old.is_none_or(|o| o.kubernetes != w.kubernetes || o.machine.type_ != w.machine.type_)
        && let (Some(t), Some(kubelet_cfg)) = (
            machine_type,
            w.kubernetes.as_ref().and_then(|k| k.kubelet.as_ref()),
        )
    {
        causes.extend(validate_kube_reserved(&path, t, kubelet_cfg));
    }
    if let Some(pool_version) = w.kubernetes_version()
        && old.is_none_or(|o| o.kubernetes_version() != Some(pool_version))
    {
        causes.extend(validate_kubernetes_version(
            pool_version,
            old.and_then(|o| o.kubernetes_version()),
            profile,
            &format!("{path}.kubernetes.version"),
            now,
        ));
    }
    if zones_changed {
        let mut seen = BTreeSet::new();
        for (j, zone) in w.zones.iter().enumerate() {
            if !seen.insert(zone.as_str()) {
                causes.push(Cause::new(
                    "FieldValueDuplicate",
                    format!("{path}.zones[{j}]"),
                    format!("Duplicate value: {zone:?}"),
                ));
            }
            if let Some(region) = region
                && !region.zones.iter().any(|z| &z.name == zone)
            {
                causes.push(not_supported(
                    format!("{path}.zones[{j}]"),
                    format!(
                        "zone {zone:?} is not in region {} (zones: [{}])",
                        region.name,
                        region
                            .zones
                            .iter()
                            .map(|z| z.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
    }
    causes
}

#[allow(clippy::too_many_arguments)]
fn validate_worker_image(
    path: &str,
    w: &Worker,
    old: Option<&Worker>,
    version_entry: Option<&MachineImageVersion>,
    machine_type: Option<&MachineType>,
    arch: &str,
    defs: &[CapabilityDefinition],
    now: DateTime<Utc>,
) -> Vec<Cause> {
    let field = format!("{path}.machine.image");
    let Some(image) = w.machine.image.as_ref() else {
        return vec![Cause::required(field)];
    };
    let requested = image.version.as_deref().unwrap_or("");
    let Some(v) = version_entry else {
        return vec![not_supported(
            format!("{field}.version"),
            format!(
                "machine image {}:{requested} is not offered by the cloud profile",
                image.name
            ),
        )];
    };
    let mut causes = Vec::new();
    let old_version = old
        .and_then(|o| o.machine.image.as_ref())
        .filter(|oi| oi.name == image.name)
        .and_then(|oi| oi.version.as_deref());
    if !lifecycle::is_active(&v.expirable, now) {
        let keeps_or_raises =
            old_version.is_some_and(|o| version::compare(requested, o) != Ordering::Less);
        if !keeps_or_raises {
            causes.push(forbidden(
                format!("{field}.version"),
                format!(
                    "machine image {}:{requested} is {} and cannot be chosen for {}",
                    image.name,
                    lifecycle::classification(&v.expirable, now),
                    if old.is_some() {
                        "a lower version than the pool's current one"
                    } else {
                        "a new pool"
                    }
                ),
            ));
        }
    }
    if !version_supports_architecture(v, arch, defs) {
        causes.push(forbidden(
            format!("{field}.version"),
            format!(
                "machine image {}:{requested} does not support architecture {arch} (it supports [{}])",
                image.name,
                capabilities::image_version_architectures(v, defs).join(", ")
            ),
        ));
    }
    if w.is_in_place() {
        let ipu = v.in_place_updates.as_ref();
        match old_version {
            None if !ipu.is_some_and(|u| u.supported) => causes.push(forbidden(
                format!("{field}.version"),
                format!("machine image {}:{requested} does not support in-place updates, which this pool uses", image.name),
            )),
            Some(o) if o != requested => {
                let reachable = ipu.is_some_and(|u| u.supported)
                    && ipu
                        .and_then(|u| u.min_version_for_update.as_deref())
                        .is_some_and(|min| version::compare(min, o) != Ordering::Greater);
                if !reachable {
                    causes.push(forbidden(
                        format!("{field}.version"),
                        format!(
                            "machine image {}:{requested} cannot be reached in place from {o} (minVersionForUpdate {})",
                            image.name,
                            ipu.and_then(|u| u.min_version_for_update.as_deref()).unwrap_or("unset")
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    if let Some(t) = machine_type
        && !defs.is_empty()
        && !capabilities::supported_by_flavors(&t.capabilities, &v.capability_flavors, defs)
    {
        causes.push(forbidden(
                format!("{field}.version"),
                format!(
                    "machine capabilities of type {} are not supported by machine image {}:{requested}: {}",
                    t.name,
                    image.name,
                    explain_unsupported(&t.capabilities, &v.capability_flavors, defs)
                ),
            ));
    }
    causes
}

fn validate_volume(
    path: &str,
    w: &Worker,
    machine_type: Option<&MachineType>,
    region: Option<&crate::types::Region>,
    profile: &CloudProfileSpec,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(volume) = &w.volume else {
        return causes;
    };
    let size = quantity::parse(&volume.volume_size);
    if size.is_none() {
        causes.push(Cause::invalid(
            format!("{path}.volume.size"),
            format!("{:?} is not a quantity such as 50Gi", volume.volume_size),
        ));
    }
    if let Some(type_name) = &volume.type_ {
        match profile.volume_type(type_name) {
            None => causes.push(not_supported(
                format!("{path}.volume.type"),
                format!("volume type {type_name:?} is not offered by the cloud profile"),
            )),
            Some(vt) => {
                if !vt.is_usable() {
                    causes.push(forbidden(
                        format!("{path}.volume.type"),
                        format!("volume type {type_name} is marked unusable in the cloud profile"),
                    ));
                }
                if let Some(region) = region {
                    for zone in region.zones.iter().filter(|z| w.zones.contains(&z.name)) {
                        if zone.unavailable_volume_types.contains(type_name) {
                            causes.push(forbidden(
                                format!("{path}.volume.type"),
                                format!(
                                    "volume type {type_name} is unavailable in zone {}",
                                    zone.name
                                ),
                            ));
                        }
                    }
                }
                if let (Some(size), Some(min)) =
                    (size, vt.min_size.as_ref().and_then(quantity::value))
                    && size < min
                {
                    causes.push(forbidden(
                        format!("{path}.volume.size"),
                        format!(
                            "size {} is smaller than the minimum {} of volume type {type_name}",
                            volume.volume_size,
                            vt.min_size.as_ref().map(|q| q.0.as_str()).unwrap_or("")
                        ),
                    ));
                }
            }
        }
    }
    if let Some(storage) = machine_type.and_then(|t| t.storage.as_ref()) {
        let same_type = volume.type_.as_deref().is_none_or(|t| t == storage.type_);
        if let (true, Some(size), Some(min)) = (
            same_type,
            size,
            storage.min_size.as_ref().and_then(quantity::value),
        ) && size < min
        {
            causes.push(forbidden(
                format!("{path}.volume.size"),
                format!(
                    "size {} is smaller than the minimum {} of machine type {}'s storage",
                    volume.volume_size,
                    storage
                        .min_size
                        .as_ref()
                        .map(|q| q.0.as_str())
                        .unwrap_or(""),
                    machine_type.map(|t| t.name.as_str()).unwrap_or("")
                ),
            ));
        }
    }
    causes
}

fn validate_kube_reserved(path: &str, t: &MachineType, kubelet: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (resource, capacity) in [("cpu", &t.cpu), ("memory", &t.memory)] {
        let reserved = kubelet
            .get("kubeReserved")
            .and_then(|r| r.get(resource))
            .and_then(Value::as_str);
        if let (Some(r), Some(cap)) = (reserved, quantity::value(capacity))
            && quantity::parse(r).is_some_and(|r| r >= cap)
        {
            causes.push(Cause::invalid(
                format!("{path}.kubernetes.kubelet.kubeReserved.{resource}"),
                format!(
                    "reserving {r} {resource} leaves nothing of machine type {}'s capacity {}",
                    t.name, capacity.0
                ),
            ));
        }
    }
    causes
}

/// The profile a shoot references, from `cloudProfile` or the legacy
/// `cloudProfileName`.
pub fn profile_reference(spec: &ShootSpec) -> Option<CloudProfileReference> {
    match (&spec.cloud_profile, &spec.cloud_profile_name) {
        (Some(r), _) => {
            let mut r = r.clone();
            if r.kind.is_empty() {
                r.kind = KIND_CLOUD_PROFILE.to_string();
            }
            Some(r)
        }
        (None, Some(name)) if !name.is_empty() => Some(CloudProfileReference::cloud_profile(name)),
        _ => None,
    }
}

fn at_least_1_34(spec: &ShootSpec) -> bool {
    version::parse(&spec.kubernetes.version).is_some_and(|v| (v.major, v.minor) >= (1, 34))
}

/// Brings `cloudProfile` and `cloudProfileName` in line (upstream's
/// `SyncCloudProfileFields`). On create, setting both is an error. From
/// Kubernetes 1.34 on, an unchanged `cloudProfileName` is dropped (a new
/// one stays so validation can forbid it); below, the name mirrors a
/// CloudProfile reference and is cleared for an NCP.
pub fn sync_profile_reference(spec: &mut ShootSpec, old: Option<&ShootSpec>) -> Vec<Cause> {
    if old.is_none() && spec.cloud_profile.is_some() && spec.cloud_profile_name.is_some() {
        return vec![forbidden(
            "spec.cloudProfileName",
            "set only spec.cloudProfile; spec.cloudProfileName is the legacy form of the same reference",
        )];
    }
    if let Some(r) = profile_reference(spec) {
        spec.cloud_profile = Some(r);
    }
    let Some(r) = spec.cloud_profile.clone() else {
        return Vec::new();
    };
    if at_least_1_34(spec) {
        let unchanged = old.is_some_and(|o| o.cloud_profile_name == spec.cloud_profile_name);
        if unchanged {
            spec.cloud_profile_name = None;
        }
    } else if r.is_namespaced() {
        spec.cloud_profile_name = None;
    } else {
        spec.cloud_profile_name = Some(r.name.clone());
    }
    Vec::new()
}

/// Where a referenced profile sits: the root CloudProfile it renders from.
/// The caller resolves references (it has the store); `None` means the
/// referenced profile does not exist.
pub trait ProfileResolver {
    /// Root CloudProfile name of the profile `reference` names, looked up
    /// in `namespace` for NCPs.
    fn root_of(&self, reference: &CloudProfileReference, namespace: &str) -> Option<String>;
}

impl<F: Fn(&CloudProfileReference, &str) -> Option<String>> ProfileResolver for F {
    fn root_of(&self, reference: &CloudProfileReference, namespace: &str) -> Option<String> {
        self(reference, namespace)
    }
}

/// Validates a (synced) profile reference: present, of a known kind, no
/// `cloudProfileName` from Kubernetes 1.34 on, and cross-namespace use only
/// when enabled and granted; on update, switching only within one root
/// CloudProfile.
///
/// `use_granted(namespace, name)` answers whether the requesting user may
/// `use` the NCP in another namespace (the caller asks the authorizer).
pub fn validate_profile_reference(
    spec: &ShootSpec,
    old: Option<&ShootSpec>,
    shoot_namespace: &str,
    resolver: &dyn ProfileResolver,
    ext: Extensions,
    use_granted: &dyn Fn(&str, &str) -> bool,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(r) = profile_reference(spec) else {
        return vec![Cause::new(
            "FieldValueRequired",
            "spec.cloudProfile",
            "a shoot must reference a CloudProfile or NamespacedCloudProfile",
        )];
    };
    if r.name.is_empty() {
        causes.push(Cause::required("spec.cloudProfile.name"));
    }
    if r.kind != KIND_CLOUD_PROFILE && r.kind != KIND_NAMESPACED_CLOUD_PROFILE {
        causes.push(not_supported(
            "spec.cloudProfile.kind",
            format!(
                "kind {:?} is not supported; supported: CloudProfile, NamespacedCloudProfile",
                r.kind
            ),
        ));
    }
    if at_least_1_34(spec) && spec.cloud_profile_name.is_some() {
        causes.push(forbidden(
            "spec.cloudProfileName",
            "from Kubernetes 1.34 on the profile must be referenced through spec.cloudProfile",
        ));
    }
    let target_ns = r
        .namespace
        .clone()
        .unwrap_or_else(|| shoot_namespace.to_string());
    if let Some(ns) = r.namespace.as_deref().filter(|ns| *ns != shoot_namespace) {
        if !ext.cross_project_use {
            causes.push(forbidden(
                "spec.cloudProfile.namespace",
                "referencing a profile of another namespace needs cross-project use, which is not enabled",
            ));
        } else if !r.is_namespaced() {
            causes.push(forbidden(
                "spec.cloudProfile.namespace",
                "only a NamespacedCloudProfile lives in a namespace; remove the namespace for a CloudProfile",
            ));
        } else if !use_granted(ns, &r.name) {
            causes.push(forbidden(
                "spec.cloudProfile",
                format!(
                    "you may not use NamespacedCloudProfile {ns}/{}: the verb \"use\" on it is not granted",
                    r.name
                ),
            ));
        }
    }
    let Some(old_ref) = old.and_then(profile_reference) else {
        return causes;
    };
    if old_ref == r {
        return causes;
    }
    let old_ns = old_ref
        .namespace
        .clone()
        .unwrap_or_else(|| shoot_namespace.to_string());
    let old_root = resolver.root_of(&old_ref, &old_ns);
    let new_root = resolver.root_of(&r, &target_ns);
    match (old_root, new_root) {
        (_, None) => causes.push(not_supported(
            "spec.cloudProfile",
            format!("{} {:?} does not exist", r.kind, r.name),
        )),
        (Some(a), Some(b)) if a != b => causes.push(forbidden(
            "spec.cloudProfile",
            format!(
                "the profile can only be switched among profiles of the same root CloudProfile: {} {:?} derives from {a:?}, {} {:?} from {b:?}",
                old_ref.kind, old_ref.name, r.kind, r.name
            ),
        )),
        _ => {}
    }
    causes
}

/// After a profile switch, the new (rendered) profile must still offer
/// every pool's machine type, root volume type and image version.
pub fn validate_switch_target(
    spec: &ShootSpec,
    target: &CloudProfileSpec,
    target_name: &str,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, w) in spec.provider.workers.iter().enumerate() {
        let path = worker_path(i);
        if target.machine_type(&w.machine.type_).is_none() {
            causes.push(forbidden(
                format!("{path}.machine.type"),
                format!(
                    "profile {target_name} does not offer machine type {}, which this pool uses",
                    w.machine.type_
                ),
            ));
        }
        if let Some(t) = w.volume.as_ref().and_then(|v| v.type_.as_ref())
            && target.volume_type(t).is_none()
        {
            causes.push(forbidden(
                format!("{path}.volume.type"),
                format!(
                    "profile {target_name} does not offer volume type {t}, which this pool uses"
                ),
            ));
        }
        if let Some(image) = &w.machine.image {
            let version = image.version.as_deref().unwrap_or("");
            if target
                .machine_image(&image.name)
                .and_then(|i| i.version(version))
                .is_none()
            {
                causes.push(forbidden(
                    format!("{path}.machine.image"),
                    format!(
                        "profile {target_name} does not offer machine image {}:{version}, which this pool uses",
                        image.name
                    ),
                ));
            }
        }
    }
    causes
}
