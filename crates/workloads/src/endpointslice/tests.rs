//! The EndpointSlice planner: endpoints from pods, readiness, named ports,
//! placeholders, and reuse of existing slices.

use super::*;
use crate::pods::test_pods::{PodExt, pod};
use serde_json::json;

fn service(extra: serde_json::Value) -> Service {
    let mut spec = json!({
        "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid", "labels": {"team": "a"}},
        "spec": spec
    }))
    .unwrap()
}

/// A web pod with `ip`, serving on container port `port` named `http`.
fn web_pod(name: &str, ip: Option<&str>, port: i32) -> Pod {
    let mut p = pod(name).labels(&[("app", "web")]);
    p.spec = Some(
        serde_json::from_value(json!({"containers": [{"name": "c", "image": "nginx",
            "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}]}]}))
        .unwrap(),
    );
    if let Some(ip) = ip {
        let s = p.status.get_or_insert_with(Default::default);
        s.pod_ip = Some(ip.into());
    }
    p
}

fn ready(p: Pod) -> Pod {
    let ip = p.status.as_ref().and_then(|s| s.pod_ip.clone());
    let mut p = p.ready_at(100);
    p.status.as_mut().unwrap().pod_ip = ip;
    p
}

fn run(svc: &Service, pods: &[Pod], slices: &[EndpointSlice]) -> Plan {
    plan(&Observed {
        service: svc,
        pods: pods.iter().collect(),
        slices: slices.iter().collect(),
    })
}

/// The plan applied: created slices get names.
fn apply(slices: &mut Vec<EndpointSlice>, p: &Plan) {
    slices.retain(|s| !p.delete.contains(s.metadata.name.as_ref().unwrap()));
    for u in &p.update {
        let s = slices
            .iter_mut()
            .find(|s| s.metadata.name == u.metadata.name)
            .unwrap();
        *s = u.clone();
    }
    for (i, c) in p.create.iter().enumerate() {
        let mut c = c.clone();
        c.metadata.name = Some(format!("web-{}{i}", slices.len()));
        slices.push(c);
    }
}

fn conditions(s: &EndpointSlice) -> Vec<(String, bool, bool, bool)> {
    s.endpoints
        .iter()
        .map(|e| {
            let c = e.conditions.clone().unwrap();
            (
                e.target_ref.as_ref().unwrap().name.clone().unwrap(),
                c.ready.unwrap(),
                c.serving.unwrap(),
                c.terminating.unwrap(),
            )
        })
        .collect()
}

#[test]
fn endpoints_follow_pod_readiness_with_named_ports_resolved() {
    let svc = service(json!({}));
    let pods = [
        ready(web_pod("a", Some("10.0.0.1"), 8080)),
        web_pod("b", Some("10.0.0.2"), 8080),
        web_pod("no-ip", None, 8080),
        web_pod("done", Some("10.0.0.3"), 8080).phase("Succeeded"),
    ];
    let p = run(&svc, &pods, &[]);
    assert_eq!(p.create.len(), 1);
    let s = &p.create[0];
    assert_eq!(s.address_type, "IPv4");
    assert_eq!(s.metadata.generate_name.as_deref(), Some("web-"));
    let labels = s.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[names::SERVICE_NAME], "web");
    assert_eq!(labels[names::MANAGED_BY], names::ENDPOINTSLICE_CONTROLLER);
    assert_eq!(labels["team"], "a");
    let owner = &s.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Service", Some(true))
    );
    let port = &s.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port),
        (Some("http"), Some(8080))
    );
    assert_eq!(
        conditions(s),
        [
            ("a".to_string(), true, true, false),
            ("b".to_string(), false, false, false)
        ]
    );
    assert_eq!(s.endpoints[0].addresses, ["10.0.0.1"]);

    // Applied, the same pods change nothing.
    let mut slices = Vec::new();
    apply(&mut slices, &p);
    assert_eq!(run(&svc, &pods, &slices), Plan::default());

    // b becomes ready: the same slice is updated.
    let mut pods = pods.to_vec();
    pods[1] = ready(pods[1].clone());
    let p = run(&svc, &pods, &slices);
    assert!(p.create.is_empty() && p.delete.is_empty());
    assert_eq!(p.update.len(), 1);
    assert_eq!(
        conditions(&p.update[0])[1],
        ("b".to_string(), true, true, false)
    );
}

#[test]
fn publish_not_ready_addresses_and_terminating_pods() {
    let svc = service(json!({"publishNotReadyAddresses": true}));
    let pods = [
        web_pod("b", Some("10.0.0.2"), 8080),
        ready(web_pod("c", Some("10.0.0.3"), 8080)).deleting(),
    ];
    let p = run(&svc, &pods, &[]);
    assert_eq!(
        conditions(&p.create[0]),
        [
            ("b".to_string(), true, false, false),
            ("c".to_string(), true, true, true)
        ]
    );
    // Without it a terminating pod is not ready, though still serving.
    let p = run(&service(json!({})), &pods, &[]);
    assert_eq!(
        conditions(&p.create[0])[1],
        ("c".to_string(), false, true, true)
    );
}

#[test]
fn pods_resolving_ports_differently_get_their_own_slices() {
    let svc = service(json!({}));
    let pods = [
        web_pod("a", Some("10.0.0.1"), 8080),
        web_pod("b", Some("10.0.0.2"), 9090),
    ];
    let p = run(&svc, &pods, &[]);
    assert_eq!(p.create.len(), 2);
    let mut ports: Vec<i32> = p
        .create
        .iter()
        .map(|s| s.ports.as_ref().unwrap()[0].port.unwrap())
        .collect();
    ports.sort();
    assert_eq!(ports, [8080, 9090]);
    // A numeric target port is used as it is.
    let svc = service(json!({"ports": [{"port": 80, "targetPort": 8000}]}));
    let p = run(&svc, &pods[..1], &[]);
    assert_eq!(p.create[0].ports.as_ref().unwrap()[0].port, Some(8000));
}

#[test]
fn no_endpoints_means_one_placeholder() {
    let svc = service(json!({}));
    let p = run(&svc, &[], &[]);
    assert_eq!(p.create.len(), 1);
    assert!(p.create[0].endpoints.is_empty() && p.create[0].ports.is_none());
    let mut slices = Vec::new();
    apply(&mut slices, &p);
    assert_eq!(run(&svc, &[], &slices), Plan::default());
    // Endpoints appear: a real slice, the placeholder goes.
    let pods = [web_pod("a", Some("10.0.0.1"), 8080)];
    let p = run(&svc, &pods, &slices);
    assert_eq!((p.create.len(), p.delete.len()), (1, 1));
    apply(&mut slices, &p);
    // And back to none: the slice is emptied into a placeholder.
    let p = run(&svc, &[], &slices);
    assert_eq!((p.create.len(), p.delete.len()), (1, 1));
}

#[test]
fn slices_hold_at_most_a_hundred_endpoints() {
    let svc = service(json!({}));
    let pods: Vec<Pod> = (0..150)
        .map(|i| {
            web_pod(
                &format!("p{i:03}"),
                Some(&format!("10.0.{}.{}", i / 200, i % 200 + 1)),
                8080,
            )
        })
        .collect();
    let p = run(&svc, &pods, &[]);
    let sizes: Vec<usize> = p.create.iter().map(|s| s.endpoints.len()).collect();
    assert_eq!(sizes, [100, 50]);
    let mut slices = Vec::new();
    apply(&mut slices, &p);
    assert_eq!(run(&svc, &pods, &slices), Plan::default());
    // Removing pods only updates the slices that held them.
    let p = run(&svc, &pods[..120], &slices);
    assert!(p.create.is_empty() && p.delete.is_empty());
    assert_eq!(p.update.len(), 1);
}

#[test]
fn hostnames_for_a_headless_service_of_stateful_pods() {
    let svc = service(json!({"clusterIP": "None"}));
    let mut p0 = web_pod("web-0", Some("10.0.0.1"), 8080);
    let spec = p0.spec.as_mut().unwrap();
    spec.hostname = Some("web-0".into());
    spec.subdomain = Some("web".into());
    let p = run(&svc, &[p0], &[]);
    let s = &p.create[0];
    assert_eq!(s.endpoints[0].hostname.as_deref(), Some("web-0"));
    assert_eq!(s.metadata.labels.as_ref().unwrap()[names::HEADLESS], "");
}
