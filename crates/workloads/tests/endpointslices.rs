//! EndpointSlices and Endpoints against the embedded API server: a
//! Service's slice follows its pods' readiness, resolves named ports, and
//! publishes not-ready addresses when the Service asks for it; its
//! Endpoints say the same and go with it.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use serde_json::json;

const NS: &str = "default";

fn pod(name: &str) -> serde_json::Value {
    json!({"metadata": {"name": name, "labels": {"app": "web"}},
           "spec": {"containers": [{"name": "c", "image": "nginx",
               "ports": [{"name": "http", "containerPort": 8080}]}]}})
}

fn service(name: &str, publish_not_ready: bool) -> serde_json::Value {
    json!({"metadata": {"name": name},
           "spec": {"selector": {"app": "web"}, "publishNotReadyAddresses": publish_not_ready,
                    "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})
}

/// `(pod, address, ready)` of the Service's slices.
async fn endpoints(client: &kube::Client, svc: &str) -> Vec<(String, String, bool)> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={svc}"));
    let mut out: Vec<(String, String, bool)> = api
        .list(&lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .flat_map(|s| s.endpoints)
        .map(|e| {
            (
                e.target_ref.and_then(|r| r.name).unwrap_or_default(),
                e.addresses.join(","),
                e.conditions.and_then(|c| c.ready).unwrap_or(false),
            )
        })
        .collect();
    out.sort();
    out
}

fn ep(pod: &str, ip: &str, ready: bool) -> (String, String, bool) {
    (pod.to_string(), ip.to_string(), ready)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_services_slice_follows_pod_readiness() {
    let env = start().await;
    let client = env.client.clone();
    create::<Service>(&client, NS, service("web", false)).await;
    create::<Service>(&client, NS, service("all", true)).await;
    // No pods yet: one placeholder slice without endpoints.
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    eventually("the placeholder", 30, async || {
        let lp = ListParams::default().labels("kubernetes.io/service-name=web");
        let items = slices.list(&lp).await.unwrap().items;
        items.len() == 1 && items[0].endpoints.is_empty()
    })
    .await;

    create::<Pod>(&client, NS, pod("a")).await;
    create::<Pod>(&client, NS, pod("b")).await;
    mark_ready(&client, NS, "a", "127.0.2.1").await;
    mark_unready(&client, NS, "b").await;
    // b has no IP yet: it is not an endpoint at all.
    eventually("a ready endpoint", 30, async || {
        endpoints(&client, "web").await == [ep("a", "127.0.2.1", true)]
    })
    .await;
    // b gets an IP but is not ready.
    mark_ready(&client, NS, "b", "127.0.2.2").await;
    mark_unready(&client, NS, "b").await;
    eventually("b listed not ready", 30, async || {
        endpoints(&client, "web").await == [ep("a", "127.0.2.1", true), ep("b", "127.0.2.2", false)]
    })
    .await;
    // publishNotReadyAddresses lists it as ready.
    eventually("b ready for the publishing service", 30, async || {
        endpoints(&client, "all").await == [ep("a", "127.0.2.1", true), ep("b", "127.0.2.2", true)]
    })
    .await;
    mark_ready(&client, NS, "b", "127.0.2.2").await;
    mark_unready(&client, NS, "a").await;
    eventually("readiness flipped", 30, async || {
        endpoints(&client, "web").await == [ep("a", "127.0.2.1", false), ep("b", "127.0.2.2", true)]
    })
    .await;

    // The core/v1 Endpoints say the same.
    let eps: Api<Endpoints> = Api::namespaced(client.clone(), NS);
    eventually("the Endpoints", 30, async || {
        let Ok(e) = eps.get("web").await else {
            return false;
        };
        let subsets = e.subsets.unwrap_or_default();
        let ips = |f: fn(
            &k8s_openapi::api::core::v1::EndpointSubset,
        ) -> Option<&Vec<k8s_openapi::api::core::v1::EndpointAddress>>| {
            subsets
                .iter()
                .flat_map(|s| f(s).into_iter().flatten().map(|a| a.ip.clone()))
                .collect::<Vec<_>>()
        };
        ips(|s| s.addresses.as_ref()) == ["127.0.2.2"]
            && ips(|s| s.not_ready_addresses.as_ref()) == ["127.0.2.1"]
            && subsets[0].ports.as_ref().is_some_and(|p| p[0].port == 8080)
    })
    .await;

    // The slice as kube's: labels, owner, the named port resolved.
    let lp = ListParams::default().labels("kubernetes.io/service-name=web");
    let items = slices.list(&lp).await.unwrap().items;
    assert_eq!(items.len(), 1, "one slice, reused");
    let s = &items[0];
    assert!(s.metadata.name.as_deref().unwrap().starts_with("web-"));
    assert_eq!(
        s.metadata.labels.as_ref().unwrap()["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(
        s.metadata.owner_references.as_ref().unwrap()[0].kind,
        "Service"
    );
    assert_eq!(s.address_type, "IPv4");
    let port = &s.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port),
        (Some("http"), Some(8080))
    );

    // A pod relabelled away leaves the slice.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.patch(
        "a",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await
    .unwrap();
    eventually("a gone from the slice", 30, async || {
        endpoints(&client, "web").await == [ep("b", "127.0.2.2", true)]
    })
    .await;

    // A deleted Service takes its Endpoints along.
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    services.delete("web", &Default::default()).await.unwrap();
    eventually("the Endpoints gone", 30, async || {
        eps.get_opt("web").await.unwrap().is_none()
    })
    .await;
}
