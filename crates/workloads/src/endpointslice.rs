//! The EndpointSlice decision (upstream's EndpointSlice reconciler): the
//! slices of a Service with a selector hold one endpoint per pod that
//! matches it and has an IP, with `ready` from the pod's readiness (always
//! true under `publishNotReadyAddresses`), `serving` and `terminating`,
//! and the Service's ports resolved against the pod's container ports
//! (named target ports by name). Pods whose ports resolve differently go
//! to different slices; a slice holds at most 100 endpoints; a Service
//! without endpoints keeps one empty placeholder slice.
//!
//! Existing slices are reused where they fit, so a pass changes as few
//! slices as it can and a repeated pass changes none.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service, ServicePort};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::meta::{self, Owner};
use crate::names;
use crate::pods;

/// Upstream's default `--max-endpoints-per-slice`.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// What one pass of a Service's slices does.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Plan {
    /// New slices (named by the executor from their `generateName`).
    pub create: Vec<EndpointSlice>,
    /// Changed slices, whole, guarded by their resource version.
    pub update: Vec<EndpointSlice>,
    pub delete: Vec<String>,
}

/// What a pass sees.
pub struct Observed<'a> {
    pub service: &'a Service,
    /// Pods of the Service's namespace that its selector matches.
    pub pods: Vec<&'a Pod>,
    /// The slices this controller manages for the Service.
    pub slices: Vec<&'a EndpointSlice>,
}

/// Whether `slice` is one this controller manages for `service`.
pub fn managed(slice: &EndpointSlice, service: &str) -> bool {
    meta::label(&slice.metadata, names::SERVICE_NAME) == Some(service)
        && meta::label(&slice.metadata, names::MANAGED_BY) == Some(names::ENDPOINTSLICE_CONTROLLER)
}

/// The address families the Service asks for (IPv4 unless it says).
fn families(svc: &Service) -> Vec<String> {
    let fams = svc
        .spec
        .as_ref()
        .and_then(|s| s.ip_families.clone())
        .unwrap_or_default();
    if fams.is_empty() {
        vec!["IPv4".into()]
    } else {
        fams
    }
}

/// The pod's IP of `family`, if it has one.
fn pod_ip(pod: &Pod, family: &str) -> Option<String> {
    let status = pod.status.as_ref()?;
    let mut ips: Vec<String> = status
        .pod_ips
        .iter()
        .flatten()
        .map(|p| p.ip.clone())
        .collect();
    if let Some(ip) = &status.pod_ip {
        ips.insert(0, ip.clone());
    }
    let v6 = family == "IPv6";
    ips.into_iter().filter(|ip| !ip.is_empty()).find(|ip| {
        ip.parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_ipv6() == v6)
    })
}

/// `FindPort`: a named target port is looked up among the pod's container
/// ports (by name and protocol), a number is taken as it is.
fn find_port(pod: &Pod, sp: &ServicePort) -> Option<i32> {
    let protocol = sp.protocol.as_deref().unwrap_or("TCP");
    match sp.target_port.as_ref() {
        Some(IntOrString::String(name)) => pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| {
                p.name.as_deref() == Some(name.as_str())
                    && p.protocol.as_deref().unwrap_or("TCP") == protocol
            })
            .map(|p| p.container_port),
        Some(IntOrString::Int(n)) if *n != 0 => Some(*n),
        _ => Some(sp.port),
    }
}

/// `getEndpointPorts`: the Service's ports as this pod serves them.
fn ports_for(svc: &Service, pod: &Pod) -> Vec<EndpointPort> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|sp| {
            Some(EndpointPort {
                port: Some(find_port(pod, sp)?),
                name: Some(sp.name.clone().unwrap_or_default()),
                protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// A port list as `(name, port, protocol)`, sorted, to compare by.
type PortsKey = Vec<(String, i32, String)>;

/// A comparable form of a port list.
fn ports_key(ports: Option<&Vec<EndpointPort>>) -> PortsKey {
    let mut k: Vec<(String, i32, String)> = ports
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p.name.clone().unwrap_or_default(),
                p.port.unwrap_or(0),
                p.protocol.clone().unwrap_or_default(),
            )
        })
        .collect();
    k.sort();
    k
}

/// `podToEndpoint`.
fn endpoint(svc: &Service, pod: &Pod, ip: String) -> Endpoint {
    let serving = pods::is_ready(pod);
    let terminating = pods::is_terminating(pod);
    let publish = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let spec = pod.spec.as_ref();
    let hostname = spec
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
        .filter(|_| {
            spec.and_then(|s| s.subdomain.as_deref()) == svc.metadata.name.as_deref()
                && pod.metadata.namespace == svc.metadata.namespace
        });
    Endpoint {
        addresses: vec![ip],
        conditions: Some(EndpointConditions {
            ready: Some(publish || (serving && !terminating)),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        hostname,
        node_name: spec
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectReference::default()
        }),
        ..Endpoint::default()
    }
}

fn target(e: &Endpoint) -> String {
    e.target_ref
        .as_ref()
        .and_then(|r| r.name.clone())
        .unwrap_or_else(|| e.addresses.join(","))
}

/// `setEndpointSliceLabels`: the Service's labels (without the reserved
/// ones), the Service's name, the manager, and the headless mark.
fn labels(svc: &Service) -> BTreeMap<String, String> {
    let reserved = [names::SERVICE_NAME, names::MANAGED_BY, names::HEADLESS];
    let mut l: BTreeMap<String, String> = svc
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !reserved.contains(&k.as_str()))
        .collect();
    // Only an explicit `None` makes a Service headless here: this API
    // server does not allocate cluster IPs, so an empty one is common.
    let headless = svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None");
    if headless {
        l.insert(names::HEADLESS.into(), String::new());
    }
    l.insert(
        names::SERVICE_NAME.into(),
        meta::name(&svc.metadata).to_string(),
    );
    l.insert(
        names::MANAGED_BY.into(),
        names::ENDPOINTSLICE_CONTROLLER.into(),
    );
    l
}

/// A new slice of `svc` (its name is chosen on creation).
fn new_slice(
    svc: &Service,
    family: &str,
    ports: Option<Vec<EndpointPort>>,
    endpoints: Vec<Endpoint>,
) -> EndpointSlice {
    let name = meta::name(&svc.metadata);
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: svc.metadata.namespace.clone(),
            labels: Some(labels(svc)),
            owner_references: Some(vec![
                Owner::of("v1", "Service", &svc.metadata).controller_ref(),
            ]),
            ..ObjectMeta::default()
        },
        address_type: family.to_string(),
        endpoints,
        ports,
    }
}

/// Plans one pass of a Service's slices.
pub fn plan(o: &Observed) -> Plan {
    let svc = o.service;
    let mut plan = Plan::default();
    let mut kept: BTreeSet<String> = BTreeSet::new();
    for family in families(svc) {
        // Desired endpoints, grouped by how their ports resolve.
        let mut groups: BTreeMap<PortsKey, (Vec<EndpointPort>, Vec<Endpoint>)> = BTreeMap::new();
        for pod in &o.pods {
            if pods::is_terminal(pod) {
                continue;
            }
            let Some(ip) = pod_ip(pod, &family) else {
                continue;
            };
            let ports = ports_for(svc, pod);
            let key = ports_key(Some(&ports));
            let entry = groups.entry(key).or_insert_with(|| (ports, Vec::new()));
            entry.1.push(endpoint(svc, pod, ip));
        }
        let mut existing: Vec<&EndpointSlice> = o
            .slices
            .iter()
            .copied()
            .filter(|s| s.address_type == family)
            .collect();
        existing.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if groups.is_empty() {
            // `placeholderSliceCompare`: one slice without ports or
            // endpoints stands for "no endpoints".
            match existing
                .iter()
                .find(|s| s.endpoints.is_empty() && s.ports.as_ref().is_none_or(|p| p.is_empty()))
            {
                Some(p) => {
                    kept.insert(meta::name(&p.metadata).to_string());
                    if let Some(u) = refresh(svc, p, Vec::new(), None) {
                        plan.update.push(u);
                    }
                }
                None => plan.create.push(new_slice(svc, &family, None, Vec::new())),
            }
            continue;
        }
        for (key, (ports, mut wanted)) in groups {
            wanted.sort_by_key(target);
            let mut by_target: BTreeMap<String, Endpoint> =
                wanted.into_iter().map(|e| (target(&e), e)).collect();
            let fitting: Vec<&EndpointSlice> = existing
                .iter()
                .copied()
                .filter(|s| ports_key(s.ports.as_ref()) == key)
                .collect();
            // Endpoints stay in the slice they are in.
            let mut contents: Vec<(&EndpointSlice, Vec<Endpoint>)> = fitting
                .iter()
                .map(|s| {
                    let mine: Vec<Endpoint> = s
                        .endpoints
                        .iter()
                        .filter_map(|e| by_target.remove(&target(e)))
                        .collect();
                    (*s, mine)
                })
                .collect();
            // The rest fill slices with room, then new ones.
            let mut rest: Vec<Endpoint> = by_target.into_values().collect();
            for (_, eps) in contents.iter_mut() {
                while eps.len() < MAX_ENDPOINTS_PER_SLICE && !rest.is_empty() {
                    eps.push(rest.remove(0));
                }
            }
            for (s, mut eps) in contents {
                if eps.is_empty() {
                    continue;
                }
                eps.sort_by_key(target);
                kept.insert(meta::name(&s.metadata).to_string());
                if let Some(u) = refresh(svc, s, eps, Some(ports.clone())) {
                    plan.update.push(u);
                }
            }
            for chunk in rest.chunks(MAX_ENDPOINTS_PER_SLICE) {
                plan.create
                    .push(new_slice(svc, &family, Some(ports.clone()), chunk.to_vec()));
            }
        }
    }
    plan.delete = o
        .slices
        .iter()
        .map(|s| meta::name(&s.metadata).to_string())
        .filter(|n| !kept.contains(n))
        .collect();
    plan
}

/// The slice with these endpoints and ports and the Service's labels and
/// ownership, if that changes it.
fn refresh(
    svc: &Service,
    slice: &EndpointSlice,
    endpoints: Vec<Endpoint>,
    ports: Option<Vec<EndpointPort>>,
) -> Option<EndpointSlice> {
    let mut s = slice.clone();
    s.endpoints = endpoints;
    s.ports = ports;
    s.metadata.labels = Some(labels(svc));
    let owner = Owner::of("v1", "Service", &svc.metadata).controller_ref();
    if !meta::is_controlled_by(&s.metadata, &owner.uid) {
        s.metadata.owner_references = Some(vec![owner]);
    }
    let normalize = |x: &EndpointSlice| {
        let mut v = serde_json::to_value(x).unwrap_or_default();
        if let Some(m) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            m.retain(|k, _| matches!(k.as_str(), "labels" | "ownerReferences"));
        }
        if let Some(m) = v.as_object_mut() {
            if m.get("ports")
                .is_some_and(|p| p.as_array().is_some_and(|a| a.is_empty()))
            {
                m.remove("ports");
            }
            if m.get("endpoints")
                .is_some_and(|p| p.as_array().is_some_and(|a| a.is_empty()))
            {
                m.remove("endpoints");
            }
        }
        v
    };
    (normalize(&s) != normalize(slice)).then_some(s)
}

#[cfg(test)]
mod tests;
