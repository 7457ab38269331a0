//! Defaulting and static validation of a cloud profile spec (§1.1–1.3):
//! what the API server runs on create and update, and what NCP admission
//! runs on the simulated merge.
//!
//! Every function returns all problems as field causes rather than
//! stopping at the first, so a user fixes a profile in one round.

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::status::Cause;
use chrono::{DateTime, Utc};

use crate::capabilities;
use crate::lifecycle;
use crate::quantity;
use crate::types::{
    AMD64, CONTAINERD, Classification, CloudProfileSpec, Cri, ExpirableVersion, MachineImage,
    MachineType, UpdateStrategy, VolumeType,
};
use crate::version;

/// Applies upstream's defaults in place: `usable` true on machine and
/// volume types, `updateStrategy` major, CRI containerd on image versions,
/// and — only when the profile defines no capabilities — the legacy
/// architecture amd64 on types and versions that lack one.
pub fn default_cloud_profile_spec(spec: &mut CloudProfileSpec) {
    let legacy = spec.machine_capabilities.is_empty();
    for image in &mut spec.machine_images {
        if image.update_strategy.is_none() {
            image.update_strategy = Some(UpdateStrategy::Major);
        }
        for v in &mut image.versions {
            if v.cri.is_empty() {
                v.cri = vec![Cri {
                    name: CONTAINERD.to_string(),
                    container_runtimes: Vec::new(),
                }];
            }
            if legacy && v.architectures.is_empty() {
                v.architectures = vec![AMD64.to_string()];
            }
        }
    }
    for t in &mut spec.machine_types {
        if t.usable.is_none() {
            t.usable = Some(true);
        }
        if legacy && t.architecture.as_deref().is_none_or(str::is_empty) {
            t.architecture = Some(AMD64.to_string());
        }
    }
    for v in &mut spec.volume_types {
        if v.usable.is_none() {
            v.usable = Some(true);
        }
    }
}

/// Validates a whole profile spec.
pub fn validate_cloud_profile_spec(spec: &CloudProfileSpec) -> Vec<Cause> {
    let mut causes = Vec::new();
    if spec.type_.is_empty() {
        causes.push(Cause::required("spec.type"));
    }
    causes.extend(validate_kubernetes_versions(
        &spec.kubernetes.versions,
        "spec.kubernetes.versions",
    ));
    if spec.kubernetes.versions.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.kubernetes.versions",
            "at least one Kubernetes version must be offered",
        ));
    }
    if spec.machine_images.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.machineImages",
            "at least one machine image must be offered",
        ));
    }
    causes.extend(validate_machine_images(
        &spec.machine_images,
        "spec.machineImages",
    ));
    if spec.machine_types.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.machineTypes",
            "at least one machine type must be offered",
        ));
    }
    causes.extend(validate_machine_types(
        &spec.machine_types,
        "spec.machineTypes",
    ));
    causes.extend(validate_volume_types(
        &spec.volume_types,
        "spec.volumeTypes",
    ));
    causes.extend(capabilities::validate_profile_capabilities(spec));
    if spec.regions.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.regions",
            "at least one region must be offered",
        ));
    }
    let mut regions = BTreeSet::new();
    for (i, region) in spec.regions.iter().enumerate() {
        let field = format!("spec.regions[{i}]");
        if region.name.is_empty() {
            causes.push(Cause::required(format!("{field}.name")));
        }
        if !regions.insert(region.name.as_str()) {
            causes.push(duplicate(format!("{field}.name"), &region.name));
        }
        let mut zones = BTreeSet::new();
        for (j, zone) in region.zones.iter().enumerate() {
            if zone.name.is_empty() {
                causes.push(Cause::required(format!("{field}.zones[{j}].name")));
            }
            if !zones.insert(zone.name.as_str()) {
                causes.push(duplicate(format!("{field}.zones[{j}].name"), &zone.name));
            }
        }
    }
    if let Some(pem) = &spec.ca_bundle {
        causes.extend(validate_ca_bundle(pem, "spec.caBundle"));
    }
    if let Some(max) = spec.limits.as_ref().and_then(|l| l.max_nodes_total)
        && max <= 0
    {
        causes.push(Cause::invalid(
            "spec.limits.maxNodesTotal",
            format!("must be greater than 0, got {max}"),
        ));
    }
    causes
}

fn duplicate(field: String, value: &str) -> Cause {
    Cause::new(
        "FieldValueDuplicate",
        field,
        format!("Duplicate value: {value:?}"),
    )
}

/// Kubernetes versions: strict `major.minor.patch`, unique, valid
/// lifecycles, no `classification` of `expired`, at most one supported
/// version per minor at any time, and the newest version never expires (so
/// a shoot always has somewhere to go).
pub fn validate_kubernetes_versions(versions: &[ExpirableVersion], path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, v) in versions.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if !version::is_kubernetes_version(&v.version) {
            causes.push(Cause::invalid(
                format!("{field}.version"),
                format!(
                    "{:?} must be a version of the form major.minor.patch",
                    v.version
                ),
            ));
        }
        if !seen.insert(v.version.as_str()) {
            causes.push(duplicate(format!("{field}.version"), &v.version));
        }
        causes.extend(lifecycle::validate_version_lifecycle(v, &field));
    }
    if let Some((i, newest)) = versions
        .iter()
        .enumerate()
        .filter(|(_, v)| version::parse(&v.version).is_some())
        .max_by(|(_, a), (_, b)| version::compare(&a.version, &b.version))
        && lifecycle::expiration(newest).is_some()
    {
        causes.push(Cause::new(
                "FieldValueForbidden",
                format!("{path}[{i}]"),
                format!(
                    "{} is the newest Kubernetes version and must not expire, otherwise shoots would have no version left to update to",
                    newest.version
                ),
            ));
    }
    causes.extend(overlapping_supported(versions, path));
    causes
}

/// A half-open time interval; `None` on either end means unbounded.
type Interval = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// The time a version is `supported`, as a half-open interval; `None` on
/// either end means unbounded. Only explicit `supported` classifications
/// count: versions without any classification are not a statement.
fn supported_interval(v: &ExpirableVersion) -> Option<Interval> {
    if v.lifecycle.is_empty() && v.classification != Some(Classification::Supported) {
        return None;
    }
    let stages = lifecycle::stages(v);
    let i = stages
        .iter()
        .position(|s| s.classification == Classification::Supported)?;
    let start = stages[i].start_time.map(|t| t.0);
    let end = stages.get(i + 1).and_then(|s| s.start_time).map(|t| t.0);
    Some((start, end))
}

fn overlapping_supported(versions: &[ExpirableVersion], path: &str) -> Vec<Cause> {
    let mut by_minor: BTreeMap<(u64, u64), Vec<(usize, Interval)>> = BTreeMap::new();
    for (i, v) in versions.iter().enumerate() {
        if let (Some(parsed), Some(interval)) = (version::parse(&v.version), supported_interval(v))
        {
            by_minor
                .entry(version::major_minor(&parsed))
                .or_default()
                .push((i, interval));
        }
    }
    let mut causes = Vec::new();
    for ((major, minor), intervals) in by_minor {
        for (a, (xi, (xs, xe))) in intervals.iter().enumerate() {
            for (yi, (ys, ye)) in &intervals[a + 1..] {
                // [s1, e1) and [s2, e2) overlap iff s1 < e2 and s2 < e1.
                let before = |s: Option<DateTime<Utc>>, e: Option<DateTime<Utc>>| match (s, e) {
                    (_, None) | (None, _) => true,
                    (Some(s), Some(e)) => s < e,
                };
                if before(*xs, *ye) && before(*ys, *xe) {
                    causes.push(Cause::invalid(
                        format!("{path}[{yi}]"),
                        format!(
                            "{} is supported at the same time as {}; only one version of {major}.{minor} may be supported at a time",
                            versions[*yi].version, versions[*xi].version
                        ),
                    ));
                }
            }
        }
    }
    causes
}

/// Machine images: unique non-empty names, at least one version each,
/// unique parsable versions, valid lifecycles, supported CRIs, parsable
/// kubelet constraints and in-place minimum versions.
pub fn validate_machine_images(images: &[MachineImage], path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut names = BTreeSet::new();
    for (i, image) in images.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if image.name.is_empty() {
            causes.push(Cause::required(format!("{field}.name")));
        }
        if !names.insert(image.name.as_str()) {
            causes.push(duplicate(format!("{field}.name"), &image.name));
        }
        if image.versions.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{field}.versions"),
                format!("image {:?} must offer at least one version", image.name),
            ));
        }
        let mut versions = BTreeSet::new();
        for (j, v) in image.versions.iter().enumerate() {
            let vfield = format!("{field}.versions[{j}]");
            if version::parse(v.version()).is_none() {
                causes.push(Cause::invalid(
                    format!("{vfield}.version"),
                    format!("{:?} is not a semantic version", v.version()),
                ));
            }
            if !versions.insert(v.version()) {
                causes.push(duplicate(format!("{vfield}.version"), v.version()));
            }
            causes.extend(lifecycle::validate_version_lifecycle(&v.expirable, &vfield));
            causes.extend(validate_cris(&v.cri, &format!("{vfield}.cri")));
            if let Some(c) = &v.kubelet_version_constraint
                && let Err(e) = version::Constraint::parse(c)
            {
                causes.push(Cause::invalid(
                    format!("{vfield}.kubeletVersionConstraint"),
                    format!("{c:?} is not a version constraint: {e}"),
                ));
            }
            if let Some(min) = v
                .in_place_updates
                .as_ref()
                .and_then(|u| u.min_version_for_update.as_deref())
                && version::parse(min).is_none()
            {
                causes.push(Cause::invalid(
                    format!("{vfield}.inPlaceUpdates.minVersionForUpdate"),
                    format!("{min:?} is not a semantic version"),
                ));
            }
        }
    }
    causes
}

fn validate_cris(cris: &[Cri], path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut names = BTreeSet::new();
    for (i, cri) in cris.iter().enumerate() {
        if cri.name != CONTAINERD {
            causes.push(Cause::new(
                "FieldValueNotSupported",
                format!("{path}[{i}].name"),
                format!("CRI {:?} is not supported; supported: containerd", cri.name),
            ));
        }
        if !names.insert(cri.name.as_str()) {
            causes.push(duplicate(format!("{path}[{i}].name"), &cri.name));
        }
        let mut runtimes = BTreeSet::new();
        for (j, rt) in cri.container_runtimes.iter().enumerate() {
            if rt.type_.is_empty() {
                causes.push(Cause::required(format!(
                    "{path}[{i}].containerRuntimes[{j}].type"
                )));
            }
            if !runtimes.insert(rt.type_.as_str()) {
                causes.push(duplicate(
                    format!("{path}[{i}].containerRuntimes[{j}].type"),
                    &rt.type_,
                ));
            }
        }
    }
    causes
}

/// Machine types: unique non-empty names, non-negative parsable resources,
/// and storage with exactly one of `size` and `minSize`.
pub fn validate_machine_types(types: &[MachineType], path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut names = BTreeSet::new();
    for (i, t) in types.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if t.name.is_empty() {
            causes.push(Cause::required(format!("{field}.name")));
        }
        if !names.insert(t.name.as_str()) {
            causes.push(duplicate(format!("{field}.name"), &t.name));
        }
        for (name, q) in [("cpu", &t.cpu), ("gpu", &t.gpu), ("memory", &t.memory)] {
            match quantity::value(q) {
                Some(v) if v >= 0.0 => {}
                _ => causes.push(Cause::invalid(
                    format!("{field}.{name}"),
                    format!("{:?} must be a non-negative quantity", q.0),
                )),
            }
        }
        if let Some(storage) = &t.storage {
            if storage.size.is_some() == storage.min_size.is_some() {
                causes.push(Cause::invalid(
                    format!("{field}.storage"),
                    "exactly one of size and minSize must be set",
                ));
            }
            for (name, q) in [("size", &storage.size), ("minSize", &storage.min_size)] {
                if let Some(q) = q
                    && quantity::value(q).is_none_or(|v| v < 0.0)
                {
                    causes.push(Cause::invalid(
                        format!("{field}.storage.{name}"),
                        format!("{:?} must be a non-negative quantity", q.0),
                    ));
                }
            }
        }
    }
    causes
}

/// Volume types: unique non-empty names and a non-negative `minSize`.
pub fn validate_volume_types(types: &[VolumeType], path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut names = BTreeSet::new();
    for (i, t) in types.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if t.name.is_empty() {
            causes.push(Cause::required(format!("{field}.name")));
        }
        if !names.insert(t.name.as_str()) {
            causes.push(duplicate(format!("{field}.name"), &t.name));
        }
        if let Some(q) = &t.min_size
            && quantity::value(q).is_none_or(|v| v < 0.0)
        {
            causes.push(Cause::invalid(
                format!("{field}.minSize"),
                format!("{:?} must be a non-negative quantity", q.0),
            ));
        }
    }
    causes
}

/// A CA bundle must consist of PEM certificate blocks. The base64 content
/// is not decoded: parsing X.509 belongs to the layer that uses the bundle.
pub fn validate_ca_bundle(pem: &str, path: &str) -> Vec<Cause> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut rest = pem.trim();
    let mut blocks = 0;
    while !rest.is_empty() {
        let Some(after_begin) = rest.strip_prefix(BEGIN) else {
            break;
        };
        let Some(end) = after_begin.find(END) else {
            break;
        };
        let body = &after_begin[..end];
        if body.trim().is_empty()
            || !body.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n' | b'\r' | b' ')
            })
        {
            break;
        }
        blocks += 1;
        rest = after_begin[end + END.len()..].trim_start();
    }
    if blocks == 0 || !rest.is_empty() {
        return vec![Cause::invalid(
            path.to_string(),
            "must be one or more PEM-encoded certificates (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)",
        )];
    }
    Vec::new()
}
