//! The Endpoints decision (upstream's endpoints controller): the core/v1
//! Endpoints object of a Service with a selector, named after the Service,
//! whose subsets list the selected pods' IPs — Ready pods (or every pod,
//! under `publishNotReadyAddresses`) in `addresses`, the others in
//! `notReadyAddresses` — grouped by how the Service's ports resolve on
//! them. Older clients (dependency-watchdog's weeder among them) watch
//! Endpoints rather than EndpointSlices.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::meta;
use crate::names;
use crate::pods;

/// What to write, if anything.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    Create(Box<Endpoints>),
    /// The whole object, guarded by the resource version it came with.
    Update(Box<Endpoints>),
}

fn target_port(pod: &Pod, port: &k8s_openapi::api::core::v1::ServicePort) -> Option<i32> {
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    match port.target_port.as_ref() {
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
        _ => Some(port.port),
    }
}

/// A port list as `(name, port, protocol)`, sorted, to group pods by.
type PortsKey = Vec<(String, i32, String)>;

/// One subset in the making: its ports, ready and not-ready addresses.
type Group = (
    Vec<EndpointPort>,
    Vec<EndpointAddress>,
    Vec<EndpointAddress>,
);

/// The subsets for `service` over `pods` (selected, same namespace),
/// packed and sorted as `RepackSubsets` and `SortSubsets` leave them.
pub fn subsets(service: &Service, pods: &[&Pod]) -> Vec<EndpointSubset> {
    let spec = service.spec.clone().unwrap_or_default();
    let publish = spec.publish_not_ready_addresses.unwrap_or(false);
    let svc_name = service.metadata.name.as_deref();
    // Ports (sorted) → (ports, ready addresses, not-ready addresses).
    let mut groups: BTreeMap<PortsKey, Group> = BTreeMap::new();
    for pod in pods {
        if pods::is_terminal(pod) || (pods::is_terminating(pod) && !publish) {
            continue;
        }
        let Some(ip) = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .filter(|ip| !ip.is_empty())
        else {
            continue;
        };
        let pspec = pod.spec.as_ref();
        let address = EndpointAddress {
            ip,
            hostname: pspec
                .and_then(|s| s.hostname.clone())
                .filter(|h| !h.is_empty())
                .filter(|_| {
                    pspec.and_then(|s| s.subdomain.as_deref()) == svc_name
                        && pod.metadata.namespace == service.metadata.namespace
                }),
            node_name: pspec
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                ..ObjectReference::default()
            }),
        };
        let ports: Vec<EndpointPort> = spec
            .ports
            .iter()
            .flatten()
            .filter_map(|sp| {
                Some(EndpointPort {
                    name: sp.name.clone().filter(|n| !n.is_empty()),
                    port: target_port(pod, sp)?,
                    protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                    app_protocol: sp.app_protocol.clone(),
                })
            })
            .collect();
        // A Service with ports none of which resolve on the pod skips it.
        if ports.is_empty() && spec.ports.as_ref().is_some_and(|p| !p.is_empty()) {
            continue;
        }
        let mut key: PortsKey = ports
            .iter()
            .map(|p| {
                (
                    p.name.clone().unwrap_or_default(),
                    p.port,
                    p.protocol.clone().unwrap_or_default(),
                )
            })
            .collect();
        key.sort();
        let entry = groups
            .entry(key)
            .or_insert_with(|| (ports, Vec::new(), Vec::new()));
        if publish || pods::is_ready(pod) {
            entry.1.push(address);
        } else {
            entry.2.push(address);
        }
    }
    let sort = |a: &mut Vec<EndpointAddress>| {
        a.sort_by(|x, y| {
            x.ip.cmp(&y.ip).then_with(|| {
                let uid = |e: &EndpointAddress| e.target_ref.as_ref().and_then(|r| r.uid.clone());
                uid(x).cmp(&uid(y))
            })
        })
    };
    groups
        .into_values()
        .map(|(mut ports, mut ready, mut not_ready)| {
            sort(&mut ready);
            sort(&mut not_ready);
            ports.sort_by(|a, b| a.name.cmp(&b.name).then(a.port.cmp(&b.port)));
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: (!ports.is_empty()).then_some(ports),
            }
        })
        .collect()
}

/// The Service's labels, marked headless when its cluster IP is `None`.
fn labels(service: &Service) -> Option<BTreeMap<String, String>> {
    let mut l = service.metadata.labels.clone().unwrap_or_default();
    if service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None") {
        l.insert(names::HEADLESS.into(), String::new());
    } else {
        l.remove(names::HEADLESS);
    }
    (!l.is_empty()).then_some(l)
}

/// Plans the Endpoints of `service` given the existing one, if any.
pub fn plan(service: &Service, pods: &[&Pod], existing: Option<&Endpoints>) -> Option<Plan> {
    let subsets = subsets(service, pods);
    let subsets = (!subsets.is_empty()).then_some(subsets);
    let labels = labels(service);
    match existing {
        None => Some(Plan::Create(Box::new(Endpoints {
            metadata: ObjectMeta {
                name: service.metadata.name.clone(),
                namespace: service.metadata.namespace.clone(),
                labels,
                ..ObjectMeta::default()
            },
            subsets,
        }))),
        Some(e) if e.subsets == subsets && e.metadata.labels == labels => None,
        Some(e) => {
            let mut updated = e.clone();
            updated.subsets = subsets;
            updated.metadata.labels = labels;
            Some(Plan::Update(Box::new(updated)))
        }
    }
}

/// Whether a pod of `ns` named `name` is listed in `e`.
pub fn lists(e: &Endpoints, name: &str) -> bool {
    e.subsets.iter().flatten().any(|s| {
        s.addresses
            .iter()
            .flatten()
            .chain(s.not_ready_addresses.iter().flatten())
            .any(|a| a.target_ref.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
    })
}

/// The name of the Service an Endpoints object belongs to.
pub fn service_of(e: &Endpoints) -> &str {
    meta::name(&e.metadata)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::test_pods::{PodExt, pod};
    use serde_json::json;

    fn service(publish: bool) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "etcd-main-client", "namespace": "ns", "labels": {"app": "etcd"}},
            "spec": {"selector": {"app": "etcd"}, "publishNotReadyAddresses": publish,
                     "ports": [{"name": "client", "port": 2379, "targetPort": "client", "protocol": "TCP"}]}
        }))
        .unwrap()
    }

    fn etcd(name: &str, ip: &str, ready: bool) -> Pod {
        let mut p = pod(name).labels(&[("app", "etcd")]);
        if ready {
            p = p.ready_at(100);
        }
        p.spec = Some(
            serde_json::from_value(json!({"containers": [{"name": "etcd", "image": "etcd",
                "ports": [{"name": "client", "containerPort": 2379, "protocol": "TCP"}]}]}))
            .unwrap(),
        );
        p.status.get_or_insert_with(Default::default).pod_ip = Some(ip.into());
        p
    }

    #[test]
    fn ready_and_not_ready_addresses() {
        let pods = [etcd("b", "10.0.0.2", false), etcd("a", "10.0.0.1", true)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let Some(Plan::Create(e)) = plan(&service(false), &refs, None) else {
            panic!("a new Endpoints");
        };
        assert_eq!(e.metadata.name.as_deref(), Some("etcd-main-client"));
        assert_eq!(e.metadata.labels.as_ref().unwrap()["app"], "etcd");
        let s = &e.subsets.as_ref().unwrap()[0];
        assert_eq!(s.addresses.as_ref().unwrap()[0].ip, "10.0.0.1");
        assert_eq!(s.not_ready_addresses.as_ref().unwrap()[0].ip, "10.0.0.2");
        let port = &s.ports.as_ref().unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("client"), 2379));
        // Unchanged: nothing to write.
        assert_eq!(plan(&service(false), &refs, Some(&e)), None);
        // Published: both ready.
        let Some(Plan::Update(p)) = plan(&service(true), &refs, Some(&e)) else {
            panic!("an update");
        };
        let s = &p.subsets.as_ref().unwrap()[0];
        assert_eq!(s.addresses.as_ref().unwrap().len(), 2);
        assert!(s.not_ready_addresses.is_none());
        assert!(lists(&p, "b") && !lists(&p, "c"));
    }

    #[test]
    fn no_pods_no_subsets_and_terminating_pods_leave() {
        let Some(Plan::Create(e)) = plan(&service(false), &[], None) else {
            panic!("a new Endpoints");
        };
        assert!(e.subsets.is_none());
        let going = etcd("a", "10.0.0.1", true).deleting();
        let refs = [&going];
        assert!(subsets(&service(false), &refs).is_empty());
        assert_eq!(subsets(&service(true), &refs).len(), 1);
    }
}
