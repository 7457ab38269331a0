//! Admission of NamespacedCloudProfiles (§2.3) as pure functions: static
//! validation, the custom verbs a change needs, validation against the
//! parent, and protection of what NCPs and Shoots rely on when a parent or
//! an NCP changes.
//!
//! The caller looks up the parent (rendered through the chain when
//! multi-level inheritance is on), asks the authorizer for the custom verbs
//! and passes the ones granted.

use std::collections::BTreeSet;

use apimachinery::status::Cause;
use chrono::{DateTime, Utc};

use crate::Extensions;
use crate::capabilities;
use crate::lifecycle;
use crate::render::{self, defines_version};
use crate::types::{
    ARCHITECTURE, CloudProfileSpec, ExpirableVersion, KIND_CLOUD_PROFILE,
    KIND_NAMESPACED_CLOUD_PROFILE, KubernetesSettings, MachineImage, MachineImageVersion,
    NamespacedCloudProfileSpec, ShootSpec, Time,
};
use crate::validation;
use crate::version;

/// Needed to change `spec.kubernetes`.
pub const VERB_MODIFY_KUBERNETES: &str = "modify-spec-kubernetes";
/// Needed to change `spec.machineImages`.
pub const VERB_MODIFY_MACHINE_IMAGES: &str = "modify-spec-machineimages";
/// Needed to change `spec.providerConfig`.
pub const VERB_MODIFY_PROVIDER_CONFIG: &str = "modify-spec-providerconfig";

fn forbidden(field: impl Into<String>, message: impl Into<String>) -> Cause {
    Cause::new("FieldValueForbidden", field, message)
}

fn kubernetes_versions(spec: &NamespacedCloudProfileSpec) -> &[ExpirableVersion] {
    spec.kubernetes
        .as_ref()
        .map(|k| k.versions.as_slice())
        .unwrap_or(&[])
}

/// The custom verbs a change needs, with the field each guards: a field
/// that differs from the old object (from empty on create) needs its verb.
pub fn required_verbs(
    new: &NamespacedCloudProfileSpec,
    old: Option<&NamespacedCloudProfileSpec>,
) -> Vec<(&'static str, &'static str)> {
    let empty = NamespacedCloudProfileSpec::default();
    let old = old.unwrap_or(&empty);
    let mut verbs = Vec::new();
    if kubernetes_versions(new) != kubernetes_versions(old) {
        verbs.push((VERB_MODIFY_KUBERNETES, "spec.kubernetes"));
    }
    if new.machine_images != old.machine_images {
        verbs.push((VERB_MODIFY_MACHINE_IMAGES, "spec.machineImages"));
    }
    if new.provider_config != old.provider_config {
        verbs.push((VERB_MODIFY_PROVIDER_CONFIG, "spec.providerConfig"));
    }
    verbs
}

/// Causes for every needed verb that is not in `granted`.
pub fn check_verbs(
    new: &NamespacedCloudProfileSpec,
    old: Option<&NamespacedCloudProfileSpec>,
    granted: &[&str],
) -> Vec<Cause> {
    required_verbs(new, old)
        .into_iter()
        .filter(|(verb, _)| !granted.contains(verb))
        .map(|(verb, field)| {
            forbidden(
                field,
                format!(
                    "changing {field} needs the verb {verb:?} on namespacedcloudprofiles, which you are not granted"
                ),
            )
        })
        .collect()
}

/// Static validation of an NCP spec, without the parent.
pub fn validate_static(spec: &NamespacedCloudProfileSpec, ext: Extensions) -> Vec<Cause> {
    let mut causes = Vec::new();
    if spec.parent.name.is_empty() {
        causes.push(Cause::required("spec.parent.name"));
    }
    match spec.parent.kind.as_str() {
        KIND_CLOUD_PROFILE => {}
        KIND_NAMESPACED_CLOUD_PROFILE if ext.multi_level_inheritance => {}
        KIND_NAMESPACED_CLOUD_PROFILE => causes.push(Cause::new(
            "FieldValueNotSupported",
            "spec.parent.kind",
            "a NamespacedCloudProfile parent needs multi-level inheritance, which is not enabled; use kind CloudProfile",
        )),
        other => causes.push(Cause::new(
            "FieldValueNotSupported",
            "spec.parent.kind",
            format!("kind {other:?} is not supported; supported: CloudProfile"),
        )),
    }
    if spec.parent.namespace.is_some() {
        causes.push(forbidden(
            "spec.parent.namespace",
            "a parent is always a CloudProfile or an NCP of the same namespace",
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, v) in kubernetes_versions(spec).iter().enumerate() {
        let field = format!("spec.kubernetes.versions[{i}]");
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
            causes.push(Cause::new(
                "FieldValueDuplicate",
                format!("{field}.version"),
                format!("Duplicate value: {:?}", v.version),
            ));
        }
        if v.classification.is_some() || !v.lifecycle.is_empty() {
            causes.push(forbidden(
                format!("{field}.classification"),
                "a NamespacedCloudProfile may only override the expiration date of Kubernetes versions",
            ));
        }
    }
    // Images may consist of overrides only, so "at least one version" and
    // architecture rules are checked on the rendered result instead.
    for (i, image) in spec.machine_images.iter().enumerate() {
        let field = format!("spec.machineImages[{i}]");
        if image.name.is_empty() {
            causes.push(Cause::required(format!("{field}.name")));
        }
        for (j, v) in image.versions.iter().enumerate() {
            if version::parse(v.version()).is_none() {
                causes.push(Cause::invalid(
                    format!("{field}.versions[{j}].version"),
                    format!("{:?} is not a semantic version", v.version()),
                ));
            }
        }
    }
    let names: Vec<&str> = spec
        .machine_images
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            causes.push(Cause::new(
                "FieldValueDuplicate",
                format!("spec.machineImages[{i}].name"),
                format!("Duplicate value: {name:?}"),
            ));
        }
    }
    causes.extend(validation::validate_machine_types(
        &spec.machine_types,
        "spec.machineTypes",
    ));
    causes.extend(validation::validate_volume_types(
        &spec.volume_types,
        "spec.volumeTypes",
    ));
    if let Some(pem) = &spec.ca_bundle {
        causes.extend(validation::validate_ca_bundle(pem, "spec.caBundle"));
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

/// Everything NCP admission checks: static rules, verbs, and the rules
/// against the parent.
///
/// * `parent`: the parent's spec (for an NCP parent its rendered spec);
///   `None` when it does not exist.
/// * `old` / `old_rendered`: the NCP's previous spec and
///   `status.cloudProfileSpec` on update.
/// * `granted`: the custom verbs the user holds on this NCP.
pub fn validate(
    new: &NamespacedCloudProfileSpec,
    old: Option<&NamespacedCloudProfileSpec>,
    old_rendered: Option<&CloudProfileSpec>,
    parent: Option<&CloudProfileSpec>,
    granted: &[&str],
    ext: Extensions,
    now: DateTime<Utc>,
) -> Vec<Cause> {
    let mut causes = validate_static(new, ext);
    if let Some(old) = old
        && old.parent != new.parent
    {
        causes.push(forbidden("spec.parent", "the parent is immutable"));
    }
    causes.extend(check_verbs(new, old, granted));
    let Some(parent) = parent else {
        causes.push(Cause::new(
            "FieldValueNotFound",
            "spec.parent.name",
            format!(
                "parent {} {:?} does not exist",
                new.parent.kind, new.parent.name
            ),
        ));
        return causes;
    };
    causes.extend(validate_against_parent(new, old, old_rendered, parent, now));
    causes
}

/// A past expiration date is accepted only if the rendered profile already
/// has exactly that date (an unchanged, lapsed override); otherwise users
/// could revive expired versions.
fn past_date_rejected(
    date: Option<Time>,
    rendered: Option<Time>,
    is_update: bool,
    now: DateTime<Utc>,
) -> bool {
    match date {
        Some(d) if d.0 < now => !(is_update && rendered == Some(d)),
        _ => false,
    }
}

fn validate_against_parent(
    new: &NamespacedCloudProfileSpec,
    old: Option<&NamespacedCloudProfileSpec>,
    old_rendered: Option<&CloudProfileSpec>,
    parent: &CloudProfileSpec,
    now: DateTime<Utc>,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let is_update = old.is_some();
    for (i, v) in kubernetes_versions(new).iter().enumerate() {
        let field = format!("spec.kubernetes.versions[{i}]");
        if parent.kubernetes_version(&v.version).is_none() {
            causes.push(Cause::invalid(
                format!("{field}.version"),
                format!(
                    "Kubernetes version {} is not offered by the parent; a NamespacedCloudProfile can only extend parent versions",
                    v.version
                ),
            ));
            continue;
        }
        if v.expiration_date.is_none() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{field}.expirationDate"),
                format!(
                    "the override of Kubernetes version {} must set an expiration date",
                    v.version
                ),
            ));
        }
        let rendered = old_rendered
            .and_then(|r| r.kubernetes_version(&v.version))
            .and_then(|r| r.expiration_date);
        if past_date_rejected(v.expiration_date, rendered, is_update, now) {
            causes.push(Cause::invalid(
                format!("{field}.expirationDate"),
                format!(
                    "expiration date {} of Kubernetes version {} lies in the past",
                    v.expiration_date.map(|d| d.to_string()).unwrap_or_default(),
                    v.version
                ),
            ));
        }
    }

    let defs = &parent.machine_capabilities;
    let normalized = render::to_parent_format(new, defs);
    for (i, image) in new.machine_images.iter().enumerate() {
        let field = format!("spec.machineImages[{i}]");
        let parent_image = parent.machine_image(&image.name);
        let old_image = old.and_then(|o| o.machine_images.iter().find(|m| m.name == image.name));
        if let (Some(_), Some(old_image)) = (parent_image, old_image) {
            let ncp_defined = old_image.versions.iter().any(defines_version);
            if ncp_defined && old_image.update_strategy != image.update_strategy {
                causes.push(forbidden(
                    format!("{field}.updateStrategy"),
                    format!(
                        "image {} is now also defined by the parent, so its update strategy is frozen",
                        image.name
                    ),
                ));
            }
        }
        for (j, v) in image.versions.iter().enumerate() {
            let vfield = format!("{field}.versions[{j}]");
            let rendered = old_rendered
                .and_then(|r| r.machine_image(&image.name))
                .and_then(|m| m.version(v.version()))
                .and_then(|m| m.expirable.expiration_date);
            if past_date_rejected(v.expirable.expiration_date, rendered, is_update, now) {
                causes.push(Cause::invalid(
                    format!("{vfield}.expirationDate"),
                    format!(
                        "expiration date {} of {}:{} lies in the past",
                        v.expirable
                            .expiration_date
                            .map(|d| d.to_string())
                            .unwrap_or_default(),
                        image.name,
                        v.version()
                    ),
                ));
            }
            let in_parent = parent_image.and_then(|p| p.version(v.version())).is_some();
            if !in_parent {
                // A version the NCP defines: validated like a profile entry.
                let transformed = normalized.machine_images[i].versions.get(j).unwrap_or(v);
                causes.extend(capabilities::validate_image_version(
                    transformed,
                    defs,
                    &vfield,
                ));
                causes.extend(lifecycle::validate_version_lifecycle(&v.expirable, &vfield));
                continue;
            }
            // The parent has the version. If the NCP defined it before the
            // parent added it, it may keep its definition and only move
            // its expiration date.
            let old_entry =
                old_image.and_then(|m| m.versions.iter().find(|o| o.version() == v.version()));
            if let Some(old_entry) = old_entry.filter(|o| defines_version(o)) {
                let without_date = |x: &MachineImageVersion| {
                    let mut x = x.clone();
                    x.expirable.expiration_date = None;
                    x
                };
                if without_date(old_entry) != without_date(v) {
                    causes.push(forbidden(
                        vfield.clone(),
                        format!(
                            "{}:{} is now also offered by the parent; only its expiration date may change",
                            image.name,
                            v.version()
                        ),
                    ));
                }
                continue;
            }
            causes.extend(override_rules(&image.name, v, &vfield));
        }
    }
    for (i, t) in normalized.machine_types.iter().enumerate() {
        causes.extend(capabilities::validate_against_definitions(
            &t.capabilities,
            defs,
            &format!("spec.machineTypes[{i}].capabilities"),
        ));
    }

    // The simulated merge must itself be a valid profile. Problems the
    // parent already has are not the NCP's to fix, so only new ones count.
    let rendered = render::render(parent, new);
    let before: BTreeSet<(String, String)> = validation::validate_cloud_profile_spec(parent)
        .into_iter()
        .map(|c| (c.field, c.message))
        .collect();
    for c in validation::validate_cloud_profile_spec(&rendered) {
        if !before.contains(&(c.field.clone(), c.message.clone())) {
            let field = c.field.replacen("spec.", "status.cloudProfileSpec.", 1);
            causes.push(Cause::new(
                &c.reason,
                field,
                format!("the rendered profile would be invalid: {}", c.message),
            ));
        }
    }
    causes
}

/// Rules for an NCP entry that overrides a parent image version: the
/// expiration date is required and nothing that defines the version may be
/// set, since the parent defines it.
fn override_rules(image: &str, v: &MachineImageVersion, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if v.expirable.expiration_date.is_none() {
        causes.push(Cause::new(
            "FieldValueRequired",
            format!("{field}.expirationDate"),
            format!(
                "the override of parent version {image}:{} must set an expiration date",
                v.version()
            ),
        ));
    }
    let set: [(&str, bool); 7] = [
        ("classification", v.expirable.classification.is_some()),
        ("lifecycle", !v.expirable.lifecycle.is_empty()),
        ("cri", !v.cri.is_empty()),
        ("architectures", !v.architectures.is_empty()),
        ("capabilityFlavors", !v.capability_flavors.is_empty()),
        (
            "kubeletVersionConstraint",
            v.kubelet_version_constraint.is_some(),
        ),
        ("inPlaceUpdates", v.in_place_updates.is_some()),
    ];
    for (name, is_set) in set {
        if is_set {
            causes.push(forbidden(
                format!("{field}.{name}"),
                format!(
                    "{image}:{} is defined by the parent; an override may only set expirationDate, not {name}",
                    v.version()
                ),
            ));
        }
    }
    causes
}

/// An NCP as parent protection sees it.
#[derive(Clone, Copy, Debug)]
pub struct NcpRef<'a> {
    /// Namespace of the NCP.
    pub namespace: &'a str,
    /// Name of the NCP.
    pub name: &'a str,
    /// Its spec.
    pub spec: &'a NamespacedCloudProfileSpec,
}

/// Rejects a CloudProfile update that would break an NCP referencing it:
/// removing a Kubernetes or image version an NCP overrides, removing an
/// image an NCP extends, adding an image name an NCP defines itself, or
/// removing capability values (other than architectures) that NCP types or
/// flavors use. Each cause names the NCP.
pub fn protect_parent(
    old: &CloudProfileSpec,
    new: &CloudProfileSpec,
    ncps: &[NcpRef<'_>],
) -> Vec<Cause> {
    let mut causes = Vec::new();
    for ncp in ncps {
        let who = format!("NamespacedCloudProfile {}/{}", ncp.namespace, ncp.name);
        for v in kubernetes_versions(ncp.spec) {
            if old.kubernetes_version(&v.version).is_some()
                && new.kubernetes_version(&v.version).is_none()
            {
                causes.push(forbidden(
                    "spec.kubernetes.versions",
                    format!(
                        "Kubernetes version {} cannot be removed: {who} overrides it",
                        v.version
                    ),
                ));
            }
        }
        for image in &ncp.spec.machine_images {
            match (old.machine_image(&image.name), new.machine_image(&image.name)) {
                (Some(_), None) => causes.push(forbidden(
                    "spec.machineImages",
                    format!("machine image {} cannot be removed: {who} uses it", image.name),
                )),
                (None, Some(_)) => causes.push(forbidden(
                    "spec.machineImages",
                    format!(
                        "machine image {} cannot be added: {who} already defines an image of that name",
                        image.name
                    ),
                )),
                (Some(o), Some(n)) => {
                    for v in &image.versions {
                        if o.version(v.version()).is_some() && n.version(v.version()).is_none() {
                            causes.push(forbidden(
                                "spec.machineImages",
                                format!(
                                    "machine image version {}:{} cannot be removed: {who} overrides it",
                                    image.name,
                                    v.version()
                                ),
                            ));
                        }
                    }
                }
                (None, None) => {}
            }
        }
        let used = capabilities::used_values(
            &ncp.spec.machine_types,
            ncp.spec.machine_images.iter().flat_map(|i| &i.versions),
        );
        for (name, values) in used {
            if name == ARCHITECTURE {
                continue;
            }
            let defined: Vec<&String> = new
                .machine_capabilities
                .iter()
                .filter(|d| d.name == name)
                .flat_map(|d| &d.values)
                .collect();
            for value in values {
                let was = old
                    .machine_capabilities
                    .iter()
                    .any(|d| d.name == name && d.values.contains(&value));
                if was && !defined.contains(&&value) {
                    causes.push(forbidden(
                        "spec.machineCapabilities",
                        format!("capability value {name}={value} cannot be removed: {who} uses it"),
                    ));
                }
            }
        }
    }
    causes
}

/// Rejects an NCP update that drops an override a Shoot still runs on
/// while the parent's own entry is expired or gone (the Shoot would be
/// stranded on a version nobody offers). `shoots` are the Shoots using the
/// NCP, as `(name, spec)`.
pub fn protect_used_overrides(
    old: &NamespacedCloudProfileSpec,
    new: &NamespacedCloudProfileSpec,
    parent: &CloudProfileSpec,
    shoots: &[(&str, &ShootSpec)],
    now: DateTime<Utc>,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let stranded =
        |entry: Option<&ExpirableVersion>| entry.is_none_or(|e| lifecycle::is_expired(e, now));
    for v in kubernetes_versions(old) {
        if kubernetes_versions(new)
            .iter()
            .any(|n| n.version == v.version)
            || !stranded(parent.kubernetes_version(&v.version))
        {
            continue;
        }
        for (name, shoot) in shoots {
            let uses = shoot.kubernetes.version == v.version
                || shoot
                    .provider
                    .workers
                    .iter()
                    .any(|w| w.kubernetes_version() == Some(v.version.as_str()));
            if uses {
                causes.push(forbidden(
                    "spec.kubernetes.versions",
                    format!(
                        "the override of Kubernetes version {} cannot be removed: Shoot {name} uses it and the parent's entry is expired or absent",
                        v.version
                    ),
                ));
            }
        }
    }
    for image in &old.machine_images {
        let new_image: Option<&MachineImage> =
            new.machine_images.iter().find(|m| m.name == image.name);
        for v in &image.versions {
            if new_image.is_some_and(|m| m.version(v.version()).is_some()) {
                continue;
            }
            let parent_entry = parent
                .machine_image(&image.name)
                .and_then(|m| m.version(v.version()))
                .map(|m| &m.expirable);
            if !stranded(parent_entry) {
                continue;
            }
            for (name, shoot) in shoots {
                let uses = shoot.provider.workers.iter().any(|w| {
                    w.machine.image.as_ref().is_some_and(|i| {
                        i.name == image.name && i.version.as_deref() == Some(v.version())
                    })
                });
                if uses {
                    causes.push(forbidden(
                        "spec.machineImages",
                        format!(
                            "machine image version {}:{} cannot be removed: Shoot {name} uses it and the parent's entry is expired or absent",
                            image.name,
                            v.version()
                        ),
                    ));
                }
            }
        }
    }
    causes
}

/// Drops Kubernetes and image versions that are inactive at `now` unless
/// the old spec already had them, and images left without versions and
/// without `updateStrategy` (the NCP registry strategy on create/update).
pub fn drop_inactive_versions(
    new: &mut NamespacedCloudProfileSpec,
    old: Option<&NamespacedCloudProfileSpec>,
    now: DateTime<Utc>,
) {
    let had_k8s =
        |v: &str| old.is_some_and(|o| kubernetes_versions(o).iter().any(|x| x.version == v));
    if let Some(KubernetesSettings { versions }) = new.kubernetes.as_mut() {
        versions.retain(|v| lifecycle::is_active(v, now) || had_k8s(&v.version));
    }
    for image in &mut new.machine_images {
        let old_image = old.and_then(|o| o.machine_images.iter().find(|m| m.name == image.name));
        image.versions.retain(|v| {
            lifecycle::is_active(&v.expirable, now)
                || old_image.is_some_and(|m| m.version(v.version()).is_some())
        });
    }
    new.machine_images
        .retain(|m| !m.versions.is_empty() || m.update_strategy.is_some());
}
