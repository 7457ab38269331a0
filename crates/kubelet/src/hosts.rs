//! Each pod's `/etc/hosts`: how names such as
//! `<pod>.<service>.<namespace>.svc` work without DNS and without touching
//! the machine's resolver. The runtime bind-mounts a per-pod file over
//! `/etc/hosts` inside the pod's mount namespace (as the real kubelet does
//! with its managed hosts file) and keeps it current as pods and services
//! come and go; glibc, Go and Rust programs all read it on every lookup.
//!
//! It lists the pod itself, every pod with a `hostname` and `subdomain`
//! (StatefulSet pods under their governing service), and every service
//! with a ClusterIP. Headless services have no single address and are left
//! out, as are names of pods without an IP yet.

use std::collections::BTreeMap;

/// The cluster domain.
pub const DOMAIN: &str = "cluster.local";

/// A pod as the hosts file needs it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodName {
    pub namespace: String,
    pub hostname: String,
    pub subdomain: Option<String>,
    pub ip: String,
}

/// A service with a ClusterIP.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServiceName {
    pub namespace: String,
    pub name: String,
    pub cluster_ip: String,
}

/// The names of a pod: `h.sub.ns.svc.cluster.local h.sub.ns.svc` with a
/// subdomain, and the short hostname for the pod itself.
fn pod_names(p: &PodName) -> Vec<String> {
    match &p.subdomain {
        Some(sub) => vec![
            format!("{}.{sub}.{}.svc.{DOMAIN}", p.hostname, p.namespace),
            format!("{}.{sub}.{}.svc", p.hostname, p.namespace),
        ],
        None => Vec::new(),
    }
}

/// The hosts file of pod `me`, given every named pod and service.
pub fn render(me: &PodName, pods: &[PodName], services: &[ServiceName]) -> String {
    let mut out = String::from(
        "# Kubernetes-managed hosts file (trellis process runtime).\n\
         127.0.0.1\tlocalhost\n\
         ::1\tlocalhost ip6-localhost ip6-loopback\n",
    );
    let mut own = pod_names(me);
    own.push(me.hostname.clone());
    out.push_str(&format!("{}\t{}\n", me.ip, own.join(" ")));
    // One line per address; the first line for a name wins in glibc, so a
    // name is written once.
    let mut lines: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut seen: std::collections::BTreeSet<String> = own.into_iter().collect();
    let mut add = |ip: &str, names: Vec<String>| {
        for n in names {
            if seen.insert(n.clone()) {
                lines.entry(ip.to_string()).or_default().push(n);
            }
        }
    };
    for p in pods {
        if p.ip.is_empty() {
            continue;
        }
        add(&p.ip, pod_names(p));
    }
    for s in services {
        let mut names = vec![
            format!("{}.{}.svc.{DOMAIN}", s.name, s.namespace),
            format!("{}.{}.svc", s.name, s.namespace),
            format!("{}.{}", s.name, s.namespace),
        ];
        if s.namespace == me.namespace {
            names.push(s.name.clone());
        }
        add(&s.cluster_ip, names);
    }
    for (ip, names) in lines {
        out.push_str(&format!("{ip}\t{}\n", names.join(" ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, host: &str, sub: Option<&str>, ip: &str) -> PodName {
        PodName {
            namespace: ns.into(),
            hostname: host.into(),
            subdomain: sub.map(str::to_string),
            ip: ip.into(),
        }
    }

    #[test]
    fn statefulset_peers_and_services_resolve() {
        let me = pod("shoot", "etcd-0", Some("etcd-peer"), "127.1.0.10");
        let pods = vec![
            me.clone(),
            pod("shoot", "etcd-1", Some("etcd-peer"), "127.1.0.11"),
            pod("shoot", "etcd-2", Some("etcd-peer"), ""),
            pod("other", "web", None, "127.1.0.12"),
        ];
        let services = vec![ServiceName {
            namespace: "shoot".into(),
            name: "etcd-client".into(),
            cluster_ip: "127.2.0.5".into(),
        }];
        let hosts = render(&me, &pods, &services);
        let lines: Vec<&str> = hosts.lines().collect();
        assert!(lines.contains(&"127.1.0.10\tetcd-0.etcd-peer.shoot.svc.cluster.local etcd-0.etcd-peer.shoot.svc etcd-0"));
        assert!(lines.contains(
            &"127.1.0.11\tetcd-1.etcd-peer.shoot.svc.cluster.local etcd-1.etcd-peer.shoot.svc"
        ));
        assert!(lines.contains(&"127.2.0.5\tetcd-client.shoot.svc.cluster.local etcd-client.shoot.svc etcd-client.shoot etcd-client"));
        assert!(!hosts.contains("etcd-2"), "no IP yet, no name");
        assert!(!hosts.contains("127.1.0.12"), "no subdomain, no name");
        assert_eq!(
            hosts.matches("etcd-0.etcd-peer").count(),
            2,
            "own names once"
        );
    }

    #[test]
    fn other_namespaces_get_no_short_service_name() {
        let me = pod("a", "x", None, "127.1.0.1");
        let services = vec![ServiceName {
            namespace: "b".into(),
            name: "api".into(),
            cluster_ip: "127.2.0.1".into(),
        }];
        let hosts = render(&me, &[], &services);
        assert!(hosts.contains("api.b.svc api.b\n"));
        assert!(hosts.contains("127.1.0.1\tx\n"));
    }
}
