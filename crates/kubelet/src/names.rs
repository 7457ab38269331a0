//! The names pods resolve: a watch of every Pod with a hostname and
//! subdomain and every Service with a ClusterIP, published as [`Names`];
//! each change wakes the pod workers, which rewrite their pods' hosts
//! files ([`crate::hosts`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::sync::watch;

use crate::hosts::{PodName, ServiceName};
use crate::kubelet::Shared;

/// The names every pod's hosts file lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    pub pods: Vec<PodName>,
    pub services: Vec<ServiceName>,
}

pub(crate) async fn watch(client: Client, tx: watch::Sender<Names>) {
    let pods: Api<Pod> = Api::all(client.clone());
    let services: Api<Service> = Api::all(client);
    let mut pod_events = watcher::watcher(pods, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut svc_events = watcher::watcher(services, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut named: BTreeMap<String, PodName> = BTreeMap::new();
    let mut svcs: BTreeMap<String, ServiceName> = BTreeMap::new();
    let key = |ns: Option<&String>, n: Option<&String>| {
        format!("{}/{}", ns.map_or("", |s| s), n.map_or("", |s| s))
    };
    loop {
        tokio::select! {
            Some(ev) = pod_events.next() => match ev {
                Ok(Event::Apply(p) | Event::InitApply(p)) => {
                    let k = key(p.metadata.namespace.as_ref(), p.metadata.name.as_ref());
                    let spec = p.spec.as_ref();
                    let sub = spec.and_then(|s| s.subdomain.clone()).filter(|s| !s.is_empty());
                    let ip = p.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap_or_default();
                    if sub.is_some() && !ip.is_empty() && p.metadata.deletion_timestamp.is_none() {
                        named.insert(k, PodName {
                            namespace: p.metadata.namespace.clone().unwrap_or_default(),
                            hostname: crate::launch::hostname(&p),
                            subdomain: sub,
                            ip,
                        });
                    } else {
                        named.remove(&k);
                    }
                }
                Ok(Event::Delete(p)) => {
                    named.remove(&key(p.metadata.namespace.as_ref(), p.metadata.name.as_ref()));
                }
                _ => {}
            },
            Some(ev) = svc_events.next() => match ev {
                Ok(Event::Apply(s) | Event::InitApply(s)) => {
                    let k = key(s.metadata.namespace.as_ref(), s.metadata.name.as_ref());
                    let ip = s.spec.as_ref().and_then(|sp| sp.cluster_ip.clone()).unwrap_or_default();
                    if ip.is_empty() || ip == "None" {
                        svcs.remove(&k);
                    } else {
                        svcs.insert(k, ServiceName {
                            namespace: s.metadata.namespace.clone().unwrap_or_default(),
                            name: s.metadata.name.clone().unwrap_or_default(),
                            cluster_ip: ip,
                        });
                    }
                }
                Ok(Event::Delete(s)) => {
                    svcs.remove(&key(s.metadata.namespace.as_ref(), s.metadata.name.as_ref()));
                }
                _ => {}
            },
            else => return,
        }
        let names = Names {
            pods: named.values().cloned().collect(),
            services: svcs.values().cloned().collect(),
        };
        tx.send_if_modified(|cur| {
            if *cur == names {
                false
            } else {
                *cur = names;
                true
            }
        });
    }
}

/// New names wake every worker, which rewrites its hosts file.
pub(crate) async fn wake_workers(shared: Arc<Shared>) {
    let mut rx = shared.names.clone();
    while rx.changed().await.is_ok() {
        // Coalesce bursts (a StatefulSet coming up).
        tokio::time::sleep(Duration::from_millis(200)).await;
        rx.mark_unchanged();
        shared.wake_all();
    }
}
