//! Machine capabilities (GEP-33 as upstream built it): defaulting, the
//! compatibility of machine types with image flavors, the choice of the
//! best flavor, the legacy architecture fields, and their validation.
//!
//! Upstream differs from the GEP text (seed 000) in ways this module
//! follows: definitions are an ordered list `machineCapabilities` (list
//! order = priority, value order = preference) instead of a map
//! `capabilities`; image versions carry `capabilityFlavors` instead of
//! `capabilitySets`; and compatibility needs a non-empty *intersection* per
//! capability within one single flavor, not a non-empty union.

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::status::Cause;

use crate::Error;
use crate::types::{
    AMD64, ARCHITECTURE, Capabilities, CapabilityDefinition, CloudProfileSpec, MachineImageVersion,
    MachineType, SUPPORTED_ARCHITECTURES,
};

/// `caps` with defaults applied: exactly the defined capability names, in
/// which a name the input lacks (or lists no value for) gets all defined
/// values. Unknown names are dropped; values are kept as given, validation
/// rejects undefined ones.
///
/// Without definitions the input is returned unchanged, because legacy
/// profiles have nothing to default against.
pub fn defaulted(caps: &Capabilities, defs: &[CapabilityDefinition]) -> Capabilities {
    if defs.is_empty() {
        return caps.clone();
    }
    defs.iter()
        .map(|def| {
            let values = match caps.get(&def.name) {
                Some(given) if !given.is_empty() => given.clone(),
                _ => def.values.clone(),
            };
            (def.name.clone(), values)
        })
        .collect()
}

/// The flavors of an image version with defaults applied; a version
/// without flavors counts as one flavor with every defined value.
pub fn defaulted_flavors(
    flavors: &[Capabilities],
    defs: &[CapabilityDefinition],
) -> Vec<Capabilities> {
    if flavors.is_empty() {
        return vec![defaulted(&Capabilities::new(), defs)];
    }
    flavors.iter().map(|f| defaulted(f, defs)).collect()
}

/// Per-capability intersection; the result has the keys of `a` (a key `b`
/// lacks intersects to empty).
pub fn intersect(a: &Capabilities, b: &Capabilities) -> Capabilities {
    a.iter()
        .map(|(name, values)| {
            let other = b.get(name);
            let common = values
                .iter()
                .filter(|v| other.is_some_and(|o| o.contains(v)))
                .cloned()
                .collect();
            (name.clone(), common)
        })
        .collect()
}

/// The values `caps` has for `def` after defaulting, without building the
/// defaulted map: matching runs for every type × version × flavor, so it
/// must not allocate.
pub(crate) fn effective<'a>(caps: &'a Capabilities, def: &'a CapabilityDefinition) -> &'a [String] {
    match caps.get(&def.name) {
        Some(v) if !v.is_empty() => v,
        _ => &def.values,
    }
}

fn shares_value(a: &Capabilities, b: &Capabilities, def: &CapabilityDefinition) -> bool {
    let y = effective(b, def);
    effective(a, def).iter().any(|v| y.contains(v))
}

/// The defined capabilities whose values `a` and `b` do not share, after
/// defaulting both. Empty means compatible.
pub fn conflicting_capabilities(
    a: &Capabilities,
    b: &Capabilities,
    defs: &[CapabilityDefinition],
) -> Vec<String> {
    defs.iter()
        .filter(|d| !shares_value(a, b, d))
        .map(|d| d.name.clone())
        .collect()
}

/// Whether two capability sets share a value for every defined
/// capability. Without definitions everything is compatible.
pub fn are_compatible(a: &Capabilities, b: &Capabilities, defs: &[CapabilityDefinition]) -> bool {
    defs.iter().all(|d| shares_value(a, b, d))
}

/// Whether some single flavor of an image version is compatible with the
/// machine type's capabilities. A version without flavors supports
/// everything, because its one default flavor has every defined value.
pub fn supported_by_flavors(
    type_caps: &Capabilities,
    flavors: &[Capabilities],
    defs: &[CapabilityDefinition],
) -> bool {
    flavors.is_empty() || flavors.iter().any(|f| are_compatible(type_caps, f, defs))
}

/// Why no flavor supports the machine type, one clause per flavor naming
/// the capabilities without a common value; empty when some flavor does.
///
/// Upstream only says "not supported"; this says which capability failed
/// for which flavor, so a user can see whether to change the machine type
/// or the image.
pub fn explain_unsupported(
    type_caps: &Capabilities,
    flavors: &[Capabilities],
    defs: &[CapabilityDefinition],
) -> String {
    if supported_by_flavors(type_caps, flavors, defs) {
        return String::new();
    }
    let wanted = defaulted(type_caps, defs);
    let clauses: Vec<String> = flavors
        .iter()
        .map(|f| {
            let flavor = defaulted(f, defs);
            let conflicts: Vec<String> = conflicting_capabilities(type_caps, f, defs)
                .into_iter()
                .map(|name| {
                    format!(
                        "{name} (machine type has {}, flavor has {})",
                        list(wanted.get(&name)),
                        list(flavor.get(&name))
                    )
                })
                .collect();
            format!("flavor {} lacks {}", show(&flavor), conflicts.join(" and "))
        })
        .collect();
    format!(
        "none of the {} flavor(s) shares a value with the machine type for every capability: {}",
        flavors.len(),
        clauses.join("; ")
    )
}

fn list(values: Option<&Vec<String>>) -> String {
    match values {
        Some(v) if !v.is_empty() => format!("[{}]", v.join(", ")),
        _ => "[]".to_string(),
    }
}

/// A capability map as `{name: [a, b], ...}` for messages.
pub fn show(caps: &Capabilities) -> String {
    let parts: Vec<String> = caps
        .iter()
        .map(|(k, v)| format!("{k}: [{}]", v.join(", ")))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// Chooses the flavor of an image version a machine of the given type
/// should boot, returning its index in `flavors`.
///
/// Only compatible flavors are candidates. If more than one is left, the
/// candidates are narrowed by preference: for each definition in priority
/// order and each of its values in preference order, keep the candidates
/// offering that value if any do, until one remains. An earlier capability
/// therefore outweighs a later one, and on a tie the next value decides, so
/// a flavor that offers more of the preferred values wins. Two candidates
/// that are still indistinguishable mean the profile is ambiguous.
///
/// A version without flavors has none to choose; callers treat that as
/// "use the version itself" and get `Ok(None)`.
pub fn select_flavor(
    type_caps: &Capabilities,
    flavors: &[Capabilities],
    defs: &[CapabilityDefinition],
) -> Result<Option<usize>, Error> {
    if flavors.is_empty() {
        return Ok(None);
    }
    let mut candidates: Vec<(usize, Capabilities)> = flavors
        .iter()
        .enumerate()
        .filter(|(_, f)| are_compatible(type_caps, f, defs))
        .map(|(i, f)| (i, defaulted(f, defs)))
        .collect();
    match candidates.len() {
        0 => {
            return Err(Error::NoCompatibleFlavor(explain_unsupported(
                type_caps, flavors, defs,
            )));
        }
        1 => return Ok(Some(candidates[0].0)),
        _ => {}
    }
    for def in defs {
        for value in &def.values {
            let having: Vec<(usize, Capabilities)> = candidates
                .iter()
                .filter(|(_, f)| f.get(&def.name).is_some_and(|v| v.contains(value)))
                .cloned()
                .collect();
            if !having.is_empty() {
                candidates = having;
            }
            if candidates.len() == 1 {
                return Ok(Some(candidates[0].0));
            }
        }
    }
    let shown: Vec<String> = candidates
        .iter()
        .map(|(i, f)| format!("#{i} {}", show(f)))
        .collect();
    Err(Error::AmbiguousFlavor(format!(
        "flavors {} offer the same preferred values for machine capabilities {}",
        shown.join(", "),
        show(&defaulted(type_caps, defs))
    )))
}

/// The architecture of a machine type: its single defaulted
/// `architecture` capability if there is exactly one, else the legacy
/// field, else `None`.
pub fn machine_type_architecture(t: &MachineType, defs: &[CapabilityDefinition]) -> Option<String> {
    if !defs.is_empty()
        && let Some(archs) = defaulted(&t.capabilities, defs).get(ARCHITECTURE)
        && archs.len() == 1
    {
        return Some(archs[0].clone());
    }
    t.architecture.clone().filter(|a| !a.is_empty())
}

/// The architectures an image version supports: the union of its flavors'
/// architecture values (defaulted when the profile defines capabilities),
/// every defined architecture when it has no flavors, and the legacy
/// `architectures` when that leaves nothing.
pub fn image_version_architectures(
    v: &MachineImageVersion,
    defs: &[CapabilityDefinition],
) -> Vec<String> {
    let mut archs: Vec<String> = Vec::new();
    let flavors = if defs.is_empty() {
        v.capability_flavors.clone()
    } else {
        defaulted_flavors(&v.capability_flavors, defs)
    };
    for flavor in &flavors {
        for a in flavor.get(ARCHITECTURE).into_iter().flatten() {
            if !archs.contains(a) {
                archs.push(a.clone());
            }
        }
    }
    if archs.is_empty() {
        archs = v.architectures.clone();
    }
    archs
}

/// Whether an image version can run on `arch`: the same answer as looking
/// `arch` up in [`image_version_architectures`], computed without
/// allocating because maintenance and the dashboard ask it for every type ×
/// version. A legacy version that lists no architectures is read as amd64,
/// as upstream's defaulting would have made it.
pub fn version_supports_architecture<'a>(
    v: &'a MachineImageVersion,
    arch: &str,
    defs: &'a [CapabilityDefinition],
) -> bool {
    let defined = defs
        .iter()
        .find(|d| d.name == ARCHITECTURE)
        .map(|d| d.values.as_slice())
        .unwrap_or(&[]);
    let flavor_values = |f: &'a Capabilities| -> &'a [String] {
        match f.get(ARCHITECTURE) {
            Some(values) if !values.is_empty() => values,
            _ => defined,
        }
    };
    let mut any_capability_arch = false;
    if v.capability_flavors.is_empty() {
        if !defs.is_empty() && !defined.is_empty() {
            return defined.iter().any(|a| a == arch);
        }
    } else {
        for f in &v.capability_flavors {
            let values = flavor_values(f);
            any_capability_arch |= !values.is_empty();
            if values.iter().any(|a| a == arch) {
                return true;
            }
        }
    }
    if any_capability_arch {
        return false;
    }
    if v.architectures.is_empty() {
        return arch == AMD64;
    }
    v.architectures.iter().any(|a| a == arch)
}

/// The values defined for a capability.
fn defined_values<'a>(defs: &'a [CapabilityDefinition], name: &str) -> Option<&'a [String]> {
    defs.iter()
        .find(|d| d.name == name)
        .map(|d| d.values.as_slice())
}

/// Keeps the legacy architecture fields and the `architecture` capability
/// in step, as the API server does on every create and update
/// (upstream's `SyncArchitectureCapabilityFields`).
///
/// * First switch to capabilities with more than one architecture: each
///   flavorless version gets one flavor per legacy architecture (amd64 if
///   none), each capability-less type gets `{architecture: [legacy or
///   amd64]}`, so nothing silently becomes multi-architecture.
/// * With capabilities: empty legacy fields are filled from the defaulted
///   capabilities (a type only if it has exactly one architecture).
/// * Removing capabilities clears flavors and type capabilities.
pub fn sync_architecture_fields(old: Option<&CloudProfileSpec>, new: &mut CloudProfileSpec) {
    let defs = new.machine_capabilities.clone();
    let old_had_caps = old.is_some_and(|o| !o.machine_capabilities.is_empty());
    if defs.is_empty() {
        if old_had_caps {
            for image in &mut new.machine_images {
                for v in &mut image.versions {
                    v.capability_flavors.clear();
                }
            }
            for t in &mut new.machine_types {
                t.capabilities.clear();
            }
        }
        return;
    }
    let multi_arch = defined_values(&defs, ARCHITECTURE).is_some_and(|v| v.len() > 1);
    if !old_had_caps && multi_arch {
        for image in &mut new.machine_images {
            for v in &mut image.versions {
                if v.capability_flavors.is_empty() {
                    let legacy = if v.architectures.is_empty() {
                        vec![AMD64.to_string()]
                    } else {
                        v.architectures.clone()
                    };
                    v.capability_flavors = legacy
                        .into_iter()
                        .map(|a| Capabilities::from([(ARCHITECTURE.to_string(), vec![a])]))
                        .collect();
                }
            }
        }
        for t in &mut new.machine_types {
            if t.capabilities.is_empty() {
                let arch = t
                    .architecture
                    .clone()
                    .filter(|a| !a.is_empty())
                    .unwrap_or_else(|| AMD64.to_string());
                t.capabilities = Capabilities::from([(ARCHITECTURE.to_string(), vec![arch])]);
            }
        }
    }
    fill_legacy_architectures(new);
}

/// Fills empty legacy architecture fields from the defaulted capabilities.
pub fn fill_legacy_architectures(spec: &mut CloudProfileSpec) {
    let defs = spec.machine_capabilities.clone();
    if defs.is_empty() {
        return;
    }
    for image in &mut spec.machine_images {
        for v in &mut image.versions {
            if v.architectures.is_empty() {
                v.architectures = image_version_architectures(v, &defs);
            }
        }
    }
    for t in &mut spec.machine_types {
        if t.architecture.as_deref().is_none_or(str::is_empty)
            && let Some(archs) = defaulted(&t.capabilities, &defs).get(ARCHITECTURE)
            && archs.len() == 1
        {
            t.architecture = Some(archs[0].clone());
        }
    }
}

/// Whether `s` is a Kubernetes qualified name without prefix: at most 63
/// characters, alphanumerics with `-`, `_`, `.` inside.
pub fn is_qualified_name(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Validates the capability definitions (`spec.machineCapabilities`).
pub fn validate_definitions(defs: &[CapabilityDefinition], path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, def) in defs.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if def.name.is_empty() {
            causes.push(Cause::required(format!("{field}.name")));
        } else if !is_qualified_name(&def.name) {
            causes.push(Cause::invalid(
                format!("{field}.name"),
                format!("{:?} must be a qualified name without prefix (alphanumerics, '-', '_', '.', at most 63 characters)", def.name),
            ));
        } else if def.name.starts_with("gardener-") {
            causes.push(Cause::invalid(
                format!("{field}.name"),
                format!(
                    "{:?}: names starting with \"gardener-\" are reserved",
                    def.name
                ),
            ));
        }
        if !seen.insert(def.name.as_str()) {
            causes.push(Cause::new(
                "FieldValueDuplicate",
                format!("{field}.name"),
                format!("capability {:?} is defined more than once", def.name),
            ));
        }
        if def.values.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{field}.values"),
                format!("capability {:?} must define at least one value", def.name),
            ));
        }
        let mut seen_values = BTreeSet::new();
        for (j, value) in def.values.iter().enumerate() {
            if !is_qualified_name(value) {
                causes.push(Cause::invalid(
                    format!("{field}.values[{j}]"),
                    format!("{value:?} must be a non-empty qualified name"),
                ));
            }
            if !seen_values.insert(value.as_str()) {
                causes.push(Cause::new(
                    "FieldValueDuplicate",
                    format!("{field}.values[{j}]"),
                    format!("value {value:?} is listed twice"),
                ));
            }
            if def.name == ARCHITECTURE && !SUPPORTED_ARCHITECTURES.contains(&value.as_str()) {
                causes.push(Cause::new(
                    "FieldValueNotSupported",
                    format!("{field}.values[{j}]"),
                    format!("architecture {value:?} is not supported; supported: amd64, arm64"),
                ));
            }
        }
    }
    if !defs.is_empty() && !defs.iter().any(|d| d.name == ARCHITECTURE) {
        causes.push(Cause::new(
            "FieldValueRequired",
            path.to_string(),
            "the \"architecture\" capability must be defined whenever machine capabilities are used",
        ));
    }
    causes
}

/// Checks that every name and value of `caps` is defined.
pub fn validate_against_definitions(
    caps: &Capabilities,
    defs: &[CapabilityDefinition],
    path: &str,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (name, values) in caps {
        let field = format!("{path}.{name}");
        let Some(defined) = defined_values(defs, name) else {
            causes.push(Cause::new(
                "FieldValueNotSupported",
                field,
                format!("capability {name:?} is not defined in spec.machineCapabilities"),
            ));
            continue;
        };
        if values.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                field.clone(),
                format!("capability {name:?} needs at least one value; omit it to allow all"),
            ));
        }
        for (j, v) in values.iter().enumerate() {
            if !defined.contains(v) {
                causes.push(Cause::new(
                    "FieldValueNotSupported",
                    format!("{field}[{j}]"),
                    format!(
                        "value {v:?} is not defined for capability {name:?}; defined: [{}]",
                        defined.join(", ")
                    ),
                ));
            }
        }
    }
    causes
}

/// Validates capabilities and architecture fields of a machine type.
pub fn validate_machine_type(
    t: &MachineType,
    defs: &[CapabilityDefinition],
    path: &str,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    if defs.is_empty() {
        match t.architecture.as_deref() {
            None | Some("") => causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.architecture"),
                "architecture is required when the profile defines no machine capabilities",
            )),
            Some(a) if !SUPPORTED_ARCHITECTURES.contains(&a) => causes.push(Cause::new(
                "FieldValueNotSupported",
                format!("{path}.architecture"),
                format!("architecture {a:?} is not supported; supported: amd64, arm64"),
            )),
            Some(_) => {}
        }
        if !t.capabilities.is_empty() {
            causes.push(Cause::new(
                "FieldValueForbidden",
                format!("{path}.capabilities"),
                "capabilities can only be used when spec.machineCapabilities defines them",
            ));
        }
        return causes;
    }
    causes.extend(validate_against_definitions(
        &t.capabilities,
        defs,
        &format!("{path}.capabilities"),
    ));
    let archs = t.capabilities.get(ARCHITECTURE);
    if let Some(archs) = archs
        && archs.len() > 1
    {
        causes.push(Cause::invalid(
            format!("{path}.capabilities.{ARCHITECTURE}"),
            format!(
                "a machine type has exactly one architecture, got [{}]",
                archs.join(", ")
            ),
        ));
    }
    if let Some(legacy) = t.architecture.as_deref().filter(|a| !a.is_empty()) {
        let capability = machine_type_architecture(
            &MachineType {
                architecture: None,
                ..t.clone()
            },
            defs,
        );
        if let Some(cap) = capability
            && cap != legacy
        {
            causes.push(Cause::invalid(
                format!("{path}.architecture"),
                format!(
                    "legacy architecture {legacy:?} contradicts the architecture capability {cap:?}"
                ),
            ));
        }
    }
    causes
}

/// Validates capabilities and architecture fields of an image version.
pub fn validate_image_version(
    v: &MachineImageVersion,
    defs: &[CapabilityDefinition],
    path: &str,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    if defs.is_empty() {
        if v.architectures.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.architectures"),
                "architectures are required when the profile defines no machine capabilities",
            ));
        }
        for (j, a) in v.architectures.iter().enumerate() {
            if !SUPPORTED_ARCHITECTURES.contains(&a.as_str()) {
                causes.push(Cause::new(
                    "FieldValueNotSupported",
                    format!("{path}.architectures[{j}]"),
                    format!("architecture {a:?} is not supported; supported: amd64, arm64"),
                ));
            }
        }
        if !v.capability_flavors.is_empty() {
            causes.push(Cause::new(
                "FieldValueForbidden",
                format!("{path}.capabilityFlavors"),
                "capabilityFlavors can only be used when spec.machineCapabilities defines capabilities",
            ));
        }
        return causes;
    }
    for (i, flavor) in v.capability_flavors.iter().enumerate() {
        let field = format!("{path}.capabilityFlavors[{i}]");
        causes.extend(validate_against_definitions(flavor, defs, &field));
        if let Some(archs) = flavor.get(ARCHITECTURE)
            && archs.len() > 1
        {
            causes.push(Cause::invalid(
                format!("{field}.{ARCHITECTURE}"),
                format!(
                    "a flavor is one image and has exactly one architecture, got [{}]",
                    archs.join(", ")
                ),
            ));
        }
    }
    let defined_archs = defined_values(defs, ARCHITECTURE).unwrap_or(&[]);
    if defined_archs.len() > 1 {
        if v.capability_flavors.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.capabilityFlavors"),
                format!(
                    "the profile defines several architectures ([{}]), so each version must list its flavors, one architecture each",
                    defined_archs.join(", ")
                ),
            ));
        }
        for (i, flavor) in v.capability_flavors.iter().enumerate() {
            if flavor.get(ARCHITECTURE).is_none_or(|a| a.is_empty()) {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    format!("{path}.capabilityFlavors[{i}].{ARCHITECTURE}"),
                    "with several architectures defined, every flavor must name its architecture",
                ));
            }
        }
    }
    let offered = image_version_architectures(
        &MachineImageVersion {
            architectures: Vec::new(),
            ..v.clone()
        },
        defs,
    );
    for (j, a) in v.architectures.iter().enumerate() {
        if !offered.contains(a) {
            causes.push(Cause::invalid(
                format!("{path}.architectures[{j}]"),
                format!(
                    "legacy architecture {a:?} is not offered by any capability flavor (flavors offer [{}])",
                    offered.join(", ")
                ),
            ));
        }
    }
    causes
}

/// Validates every capability rule of a profile spec (§1.3): the
/// definitions, every machine type and every image version.
pub fn validate_profile_capabilities(spec: &CloudProfileSpec) -> Vec<Cause> {
    let defs = &spec.machine_capabilities;
    let mut causes = validate_definitions(defs, "spec.machineCapabilities");
    for (i, t) in spec.machine_types.iter().enumerate() {
        causes.extend(validate_machine_type(
            t,
            defs,
            &format!("spec.machineTypes[{i}]"),
        ));
    }
    for (i, image) in spec.machine_images.iter().enumerate() {
        for (j, v) in image.versions.iter().enumerate() {
            causes.extend(validate_image_version(
                v,
                defs,
                &format!("spec.machineImages[{i}].versions[{j}]"),
            ));
        }
    }
    causes
}

/// Every capability value that machine types and flavors of `spec` use,
/// by capability name; used to protect parents from losing values that
/// NCPs rely on.
pub fn used_values<'a>(
    types: impl IntoIterator<Item = &'a MachineType>,
    versions: impl IntoIterator<Item = &'a MachineImageVersion>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut used: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut add = |caps: &Capabilities| {
        for (k, vs) in caps {
            used.entry(k.clone())
                .or_default()
                .extend(vs.iter().cloned());
        }
    };
    for t in types {
        add(&t.capabilities);
    }
    for v in versions {
        for f in &v.capability_flavors {
            add(f);
        }
    }
    used
}
