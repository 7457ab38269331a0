//! The service proxy, in user space: for every Service whose ClusterIP is
//! a loopback address, a listener on each TCP port at that address that
//! forwards each connection to a ready endpoint of the service's
//! EndpointSlices (round robin). Services whose ClusterIP is not on
//! loopback are skipped: nothing here can listen there.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use parking_lot::Mutex;
use tracing::{debug, warn};

/// A service port: where it listens and which endpoint port it targets.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Listen {
    pub addr: SocketAddr,
    pub service: String,
    /// The port's name, matched against the EndpointSlices' port names.
    pub port_name: String,
}

/// The listeners a Service needs.
pub fn listens(svc: &Service) -> Vec<Listen> {
    let Some(spec) = &svc.spec else {
        return Vec::new();
    };
    let Some(ip) = spec
        .cluster_ip
        .as_deref()
        .and_then(|ip| ip.parse::<IpAddr>().ok())
    else {
        return Vec::new();
    };
    if !ip.is_loopback() {
        return Vec::new();
    }
    let key = format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or(""),
        svc.metadata.name.as_deref().unwrap_or("")
    );
    spec.ports
        .iter()
        .flatten()
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .filter_map(|p| {
            Some(Listen {
                addr: SocketAddr::new(ip, u16::try_from(p.port).ok()?),
                service: key.clone(),
                port_name: p.name.clone().unwrap_or_default(),
            })
        })
        .collect()
}

/// The ready endpoints of a service's port, from its slices.
pub fn endpoints(slices: &[EndpointSlice], port_name: &str) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for s in slices {
        let Some(port) = s
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref().unwrap_or("") == port_name)
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for e in &s.endpoints {
            let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            if !ready {
                continue;
            }
            for a in &e.addresses {
                if let Ok(ip) = a.parse::<IpAddr>() {
                    out.push(SocketAddr::new(ip, port));
                }
            }
        }
    }
    out.sort();
    out
}

#[derive(Default)]
struct Table {
    /// service key → slices by slice name.
    slices: HashMap<String, BTreeMap<String, EndpointSlice>>,
}

pub(crate) async fn run(client: Client) {
    let table = Arc::new(Mutex::new(Table::default()));
    let mut listeners: HashMap<Listen, tokio::task::JoinHandle<()>> = HashMap::new();
    let services: Api<Service> = Api::all(client.clone());
    let slices: Api<EndpointSlice> = Api::all(client);
    let mut svc_events = watcher::watcher(services, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut slice_events = watcher::watcher(slices, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut wanted: HashMap<String, Vec<Listen>> = HashMap::new();
    loop {
        tokio::select! {
            Some(ev) = svc_events.next() => {
                match ev {
                    Ok(Event::Apply(s) | Event::InitApply(s)) => {
                        let key = format!("{}/{}", s.metadata.namespace.as_deref().unwrap_or(""), s.metadata.name.as_deref().unwrap_or(""));
                        wanted.insert(key, listens(&s));
                    }
                    Ok(Event::Delete(s)) => {
                        let key = format!("{}/{}", s.metadata.namespace.as_deref().unwrap_or(""), s.metadata.name.as_deref().unwrap_or(""));
                        wanted.remove(&key);
                    }
                    _ => continue,
                }
                let all: Vec<Listen> = wanted.values().flatten().cloned().collect();
                listeners.retain(|l, h| {
                    let keep = all.contains(l);
                    if !keep {
                        h.abort();
                    }
                    keep
                });
                for l in all {
                    listeners
                        .entry(l.clone())
                        .or_insert_with(|| tokio::spawn(serve(l, table.clone())));
                }
            }
            Some(ev) = slice_events.next() => {
                let mut t = table.lock();
                match ev {
                    Ok(Event::Apply(s) | Event::InitApply(s)) => {
                        let Some(svc) = s.metadata.labels.as_ref().and_then(|l| l.get("kubernetes.io/service-name")).cloned() else { continue };
                        let key = format!("{}/{svc}", s.metadata.namespace.as_deref().unwrap_or(""));
                        t.slices.entry(key).or_default().insert(s.metadata.name.clone().unwrap_or_default(), s);
                    }
                    Ok(Event::Delete(s)) => {
                        for m in t.slices.values_mut() {
                            m.remove(s.metadata.name.as_deref().unwrap_or(""));
                        }
                    }
                    _ => {}
                }
            }
            else => return,
        }
    }
}

async fn serve(l: Listen, table: Arc<Mutex<Table>>) {
    let listener = match tokio::net::TcpListener::bind(l.addr).await {
        Ok(x) => x,
        Err(e) => {
            warn!(addr = %l.addr, service = %l.service, error = %e, "service proxy cannot listen");
            return;
        }
    };
    let next = AtomicUsize::new(0);
    while let Ok((mut inbound, _)) = listener.accept().await {
        let eps = {
            let t = table.lock();
            let slices: Vec<EndpointSlice> = t
                .slices
                .get(&l.service)
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default();
            endpoints(&slices, &l.port_name)
        };
        if eps.is_empty() {
            debug!(service = %l.service, "no ready endpoint");
            continue;
        }
        let target = eps[next.fetch_add(1, Ordering::Relaxed) % eps.len()];
        tokio::spawn(async move {
            if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn loopback_services_listen_and_ready_endpoints_serve() {
        let svc: Service = serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns"},
            "spec": {"clusterIP": "127.2.0.5", "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]}})).unwrap();
        let ls = listens(&svc);
        assert_eq!(ls.len(), 1);
        assert_eq!(ls[0].addr, "127.2.0.5:80".parse().unwrap());
        let remote: Service = serde_json::from_value(
            json!({"spec": {"clusterIP": "10.96.0.1", "ports": [{"port": 443}]}}),
        )
        .unwrap();
        assert!(listens(&remote).is_empty());
        let headless: Service = serde_json::from_value(
            json!({"spec": {"clusterIP": "None", "ports": [{"port": 443}]}}),
        )
        .unwrap();
        assert!(listens(&headless).is_empty());
        let slice: EndpointSlice = serde_json::from_value(json!({"addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": ["127.1.0.2"], "conditions": {"ready": true}},
                          {"addresses": ["127.1.0.3"], "conditions": {"ready": false}},
                          {"addresses": ["127.1.0.1"]}]}))
        .unwrap();
        assert_eq!(
            endpoints(std::slice::from_ref(&slice), "http"),
            [
                "127.1.0.1:8080".parse().unwrap(),
                "127.1.0.2:8080".parse().unwrap()
            ]
        );
        assert!(endpoints(&[slice], "other").is_empty());
    }
}
