//! Rendering a `NamespacedCloudProfile` into the profile its shoots
//! consume (`status.cloudProfileSpec`), as upstream's NCP controller does
//! (`MergeCloudProfiles`), and — beyond upstream — through a chain of NCPs.
//!
//! The merge keeps the parent's order: entries the NCP overrides stay where
//! the parent has them, entries only the NCP has are appended. GEP-25's text
//! (seed 001) shows NCP entries first; upstream appends, and so do we.

use std::collections::BTreeSet;

use crate::capabilities::{defaulted, image_version_architectures};
use crate::types::{
    AMD64, ARCHITECTURE, Capabilities, CapabilityDefinition, CloudProfileReference,
    CloudProfileSpec, KIND_CLOUD_PROFILE, KIND_NAMESPACED_CLOUD_PROFILE, Limits, MachineImage,
    MachineImageVersion, NamespacedCloudProfileSpec,
};
use crate::{Error, Extensions};

/// Renders `ncp` on top of `parent`.
///
/// * Kubernetes versions: nothing is added; a parent version the NCP lists
///   takes the NCP's `expirationDate` as written.
/// * Machine images, after [`to_parent_format`]: matched by name, a
///   non-empty NCP `updateStrategy` wins; versions matched by version. A
///   parent version is replaced wholesale when the NCP entry sets
///   architectures, capability flavors, CRI, kubelet constraint or
///   classification (the NCP then defines the version itself); otherwise
///   only the expiration date is taken. New versions and images are
///   appended.
/// * Machine and volume types: matched by name, the NCP entry replaces the
///   parent's; new ones are appended.
/// * `caBundle`: the parent's followed by the NCP's. Unlike upstream, the
///   NCP's bundle is not appended again when the parent's already ends with
///   it, which keeps rendering idempotent (rendering a rendered profile
///   with the same NCP changes nothing).
/// * `limits.maxNodesTotal`: the NCP's if positive, else the parent's.
/// * Everything else (provider config, regions, capability definitions,
///   type, seed selector, bastion) comes from the parent; an NCP's own
///   `providerConfig` is merged by the provider's webhook, not here.
///
/// Finally empty legacy architecture fields are filled: a type from its
/// single capability architecture or amd64, a version from its defaulted
/// flavors or amd64.
pub fn render(parent: &CloudProfileSpec, ncp: &NamespacedCloudProfileSpec) -> CloudProfileSpec {
    let defs = &parent.machine_capabilities;
    let ncp = to_parent_format(ncp, defs);
    let mut out = parent.clone();

    if let Some(k8s) = &ncp.kubernetes {
        for v in &mut out.kubernetes.versions {
            if let Some(o) = k8s.versions.iter().find(|o| o.version == v.version) {
                v.expiration_date = o.expiration_date;
            }
        }
    }

    for image in &ncp.machine_images {
        match out.machine_images.iter_mut().find(|p| p.name == image.name) {
            Some(existing) => merge_image(existing, image),
            None => out.machine_images.push(image.clone()),
        }
    }

    for t in &ncp.machine_types {
        match out.machine_types.iter_mut().find(|p| p.name == t.name) {
            Some(existing) => *existing = t.clone(),
            None => out.machine_types.push(t.clone()),
        }
    }
    for t in &ncp.volume_types {
        match out.volume_types.iter_mut().find(|p| p.name == t.name) {
            Some(existing) => *existing = t.clone(),
            None => out.volume_types.push(t.clone()),
        }
    }

    if let Some(extra) = ncp.ca_bundle.as_deref().filter(|b| !b.is_empty()) {
        let base = parent.ca_bundle.clone().unwrap_or_default();
        out.ca_bundle = Some(if base.ends_with(extra) {
            base
        } else {
            base + extra
        });
    }

    if let Some(max) = ncp
        .limits
        .as_ref()
        .and_then(|l| l.max_nodes_total)
        .filter(|m| *m > 0)
    {
        let mut limits = out.limits.take().unwrap_or_default();
        limits.max_nodes_total = Some(max);
        out.limits = Some(limits);
    }

    fill_missing_architectures(&mut out);
    out
}

fn merge_image(existing: &mut MachineImage, ncp: &MachineImage) {
    if ncp.update_strategy.is_some() {
        existing.update_strategy = ncp.update_strategy;
    }
    for v in &ncp.versions {
        match existing
            .versions
            .iter_mut()
            .find(|p| p.version() == v.version())
        {
            Some(p) if defines_version(v) => *p = v.clone(),
            Some(p) => p.expirable.expiration_date = v.expirable.expiration_date,
            None => existing.versions.push(v.clone()),
        }
    }
}

/// Whether an NCP version entry defines the version itself rather than
/// only overriding the parent's expiration date.
pub fn defines_version(v: &MachineImageVersion) -> bool {
    !v.architectures.is_empty()
        || !v.capability_flavors.is_empty()
        || !v.cri.is_empty()
        || v.kubelet_version_constraint.is_some()
        || v.expirable.classification.is_some()
}

/// Brings an NCP spec into the capability format of its parent, so the two
/// merge field by field (upstream's `TransformSpecToParentFormat`).
///
/// With a capability parent, a flavorless version that lists legacy
/// architectures gets one flavor per architecture, and a capability-less
/// type gets `{architecture: [its architecture or amd64]}`. With a legacy
/// parent, flavors fold into `architectures` and type capabilities into
/// `architecture`, and both are dropped.
pub fn to_parent_format(
    ncp: &NamespacedCloudProfileSpec,
    defs: &[CapabilityDefinition],
) -> NamespacedCloudProfileSpec {
    let mut out = ncp.clone();
    if defs.is_empty() {
        for image in &mut out.machine_images {
            for v in &mut image.versions {
                if v.architectures.is_empty() {
                    let mut archs: Vec<String> = Vec::new();
                    for f in &v.capability_flavors {
                        for a in f.get(ARCHITECTURE).into_iter().flatten() {
                            if !archs.contains(a) {
                                archs.push(a.clone());
                            }
                        }
                    }
                    v.architectures = archs;
                }
                v.capability_flavors.clear();
            }
        }
        for t in &mut out.machine_types {
            if t.architecture.as_deref().is_none_or(str::is_empty)
                && let Some([one]) = t.capabilities.get(ARCHITECTURE).map(Vec::as_slice)
            {
                t.architecture = Some(one.clone());
            }
            t.capabilities.clear();
        }
        return out;
    }
    for image in &mut out.machine_images {
        for v in &mut image.versions {
            if v.capability_flavors.is_empty() && !v.architectures.is_empty() {
                v.capability_flavors = v
                    .architectures
                    .iter()
                    .map(|a| Capabilities::from([(ARCHITECTURE.to_string(), vec![a.clone()])]))
                    .collect();
            }
        }
    }
    for t in &mut out.machine_types {
        if t.capabilities.is_empty() {
            let arch = t
                .architecture
                .clone()
                .filter(|a| !a.is_empty())
                .unwrap_or_else(|| AMD64.to_string());
            t.capabilities = Capabilities::from([(ARCHITECTURE.to_string(), vec![arch])]);
        }
    }
    out
}

/// Fills empty legacy architecture fields of a rendered profile.
fn fill_missing_architectures(spec: &mut CloudProfileSpec) {
    let defs = spec.machine_capabilities.clone();
    for t in &mut spec.machine_types {
        if t.architecture.as_deref().is_none_or(str::is_empty) {
            let single = defaulted(&t.capabilities, &defs)
                .get(ARCHITECTURE)
                .filter(|a| a.len() == 1)
                .map(|a| a[0].clone());
            t.architecture = Some(single.unwrap_or_else(|| AMD64.to_string()));
        }
    }
    for image in &mut spec.machine_images {
        for v in &mut image.versions {
            if v.architectures.is_empty() {
                let archs = if defs.is_empty() {
                    Vec::new()
                } else {
                    image_version_architectures(v, &defs)
                };
                v.architectures = if archs.is_empty() {
                    vec![AMD64.to_string()]
                } else {
                    archs
                };
            }
        }
    }
}

/// How many NCPs a chain may stack on its root CloudProfile. A bound keeps
/// a runaway chain from making every render expensive.
pub const MAX_INHERITANCE_DEPTH: usize = 8;

/// An NCP's ancestry: the root CloudProfile and the NCPs from the one
/// directly on the root down to the NCP itself.
#[derive(Clone, Debug, PartialEq)]
pub struct ParentChain<'a> {
    /// Name of the root `CloudProfile`.
    pub root: String,
    /// `(name, spec)` from the top of the chain to the NCP asked about.
    pub ncps: Vec<(String, &'a NamespacedCloudProfileSpec)>,
}

/// Walks from an NCP up to its root CloudProfile.
///
/// `lookup` returns an NCP of the same namespace by name. Upstream allows
/// only a CloudProfile parent; an NCP parent (multi-level inheritance) is
/// accepted only with [`Extensions::multi_level_inheritance`]. A parent
/// namespace other than the NCP's own is rejected: chains never cross
/// projects, so one project can never change another's profile. Cycles and
/// chains deeper than [`MAX_INHERITANCE_DEPTH`] are errors naming the path.
pub fn parent_chain<'a>(
    name: &str,
    spec: &'a NamespacedCloudProfileSpec,
    lookup: impl Fn(&str) -> Option<&'a NamespacedCloudProfileSpec>,
    ext: Extensions,
) -> Result<ParentChain<'a>, Error> {
    let mut ncps = vec![(name.to_string(), spec)];
    let mut seen = BTreeSet::from([name.to_string()]);
    let mut current = spec;
    loop {
        let parent: &CloudProfileReference = &current.parent;
        match parent.kind.as_str() {
            KIND_CLOUD_PROFILE => {
                ncps.reverse();
                return Ok(ParentChain {
                    root: parent.name.clone(),
                    ncps,
                });
            }
            KIND_NAMESPACED_CLOUD_PROFILE if ext.multi_level_inheritance => {
                if parent.namespace.is_some() {
                    return Err(Error::ParentChainInvalid(format!(
                        "parent {:?} names a namespace; a parent NamespacedCloudProfile must live in the same namespace",
                        parent.name
                    )));
                }
                let path = || {
                    let mut names: Vec<&str> = ncps.iter().map(|(n, _)| n.as_str()).collect();
                    names.push(&parent.name);
                    names.join(" -> ")
                };
                if !seen.insert(parent.name.clone()) {
                    return Err(Error::ParentChainInvalid(format!(
                        "parents form a cycle: {}",
                        path()
                    )));
                }
                if ncps.len() >= MAX_INHERITANCE_DEPTH {
                    return Err(Error::ParentChainInvalid(format!(
                        "more than {MAX_INHERITANCE_DEPTH} levels of inheritance: {}",
                        path()
                    )));
                }
                let next = lookup(&parent.name).ok_or_else(|| {
                    Error::ParentChainInvalid(format!(
                        "parent NamespacedCloudProfile {:?} does not exist ({})",
                        parent.name,
                        path()
                    ))
                })?;
                ncps.push((parent.name.clone(), next));
                current = next;
            }
            KIND_NAMESPACED_CLOUD_PROFILE => {
                return Err(Error::ParentChainInvalid(format!(
                    "parent {:?} is a NamespacedCloudProfile, but multi-level inheritance is not enabled",
                    parent.name
                )));
            }
            other => {
                return Err(Error::ParentChainInvalid(format!(
                    "parent kind {other:?} is not supported; use CloudProfile"
                )));
            }
        }
    }
}

/// Renders a whole chain on top of its root CloudProfile's spec. The
/// capability format always follows the root, because NCPs cannot define
/// capabilities.
pub fn render_chain(root: &CloudProfileSpec, chain: &ParentChain<'_>) -> CloudProfileSpec {
    chain
        .ncps
        .iter()
        .fold(root.clone(), |spec, (_, ncp)| render(&spec, ncp))
}

/// `limits` as the rendering sees them, for callers that only need the
/// effective node limit.
pub fn effective_max_nodes_total(parent: Option<&Limits>, ncp: Option<&Limits>) -> Option<i32> {
    ncp.and_then(|l| l.max_nodes_total)
        .filter(|m| *m > 0)
        .or_else(|| parent.and_then(|l| l.max_nodes_total))
}
