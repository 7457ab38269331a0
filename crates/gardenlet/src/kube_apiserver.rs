//! The shoot's `kube-apiserver` Deployment and Service in its control
//! namespace, when the shoot lives on etcd-main ([`crate::etcd_main`]):
//! `trellis server --builtin-kinds-only` on etcd-main's client Service, run
//! by the seed's runtime, with upstream's names and labels — so what
//! dependency-watchdog's weeder acts on is real: without etcd-main the
//! server cannot start and its pod crash-loops; when etcd-main's endpoints
//! are ready again, the weeder deletes the crash-looping pods and the
//! Deployment starts them at once instead of after the back-off.
//!
//! It serves the same objects as the shoot's API server in gardenlet's
//! process (both keep them in etcd-main, as replicas of one API server
//! do); the shoot's kubeconfig and machine controllers use the in-process
//! one, whose certificates gardenlet holds. The pod's server makes its own
//! serving certificate in an emptyDir.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

/// Upstream's names.
pub const NAME: &str = "kube-apiserver";
/// The port the server listens on in its pod (unprivileged: the pods run
/// as the machine's user); the Service exposes it as 443.
pub const PORT: i32 = 8443;
/// trellis's own image: the kubelet's table runs the trellis binary.
pub const IMAGE: &str = "trellis.dev/trellis";
const MANAGER: &str = "gardenlet";

fn labels() -> BTreeMap<&'static str, &'static str> {
    [
        ("app", "kubernetes"),
        ("role", "apiserver"),
        ("gardener.cloud/role", "controlplane"),
    ]
    .into_iter()
    .collect()
}

/// The Deployment in control namespace `id` with `replicas` (0 while the
/// shoot hibernates).
pub fn deployment(id: &str, replicas: i32) -> Value {
    let selector = json!({"app": "kubernetes", "role": "apiserver"});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": id, "labels": labels()},
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 2,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": NAME,
                        "image": IMAGE,
                        "args": [
                            "server",
                            "--builtin-kinds-only",
                            format!("--etcd-servers=http://{}.{id}.svc.cluster.local:{}",
                                crate::etcd_main::CLIENT_SERVICE, crate::etcd_main::CLIENT_PORT),
                            "--listen=$(POD_IP):8443",
                            "--tls-san=$(POD_IP)",
                            format!("--tls-san={NAME}.{id}.svc.cluster.local"),
                            "--data-dir=/var/lib/kube-apiserver",
                        ],
                        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                        "ports": [{"name": "https", "containerPort": PORT, "protocol": "TCP"}],
                        "readinessProbe": {
                            "httpGet": {"path": "/readyz", "port": PORT, "scheme": "HTTPS"},
                            "periodSeconds": 2,
                            "failureThreshold": 3,
                        },
                        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/kube-apiserver"}],
                    }],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                },
            },
        },
    })
}

/// The Service in front of it, port 443 as upstream's.
pub fn service(id: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": id, "labels": labels()},
        "spec": {
            "selector": {"app": "kubernetes", "role": "apiserver"},
            "ports": [{"name": "kube-apiserver", "port": 443, "targetPort": PORT, "protocol": "TCP"}],
        },
    })
}

/// Applies both (server-side apply as gardenlet).
pub async fn apply(seed: &kube::Client, id: &str, replicas: i32) -> Result<(), kube::Error> {
    let params = PatchParams::apply(MANAGER).force();
    Api::<Service>::namespaced(seed.clone(), id)
        .patch(NAME, &params, &Patch::Apply(service(id)))
        .await?;
    Api::<Deployment>::namespaced(seed.clone(), id)
        .patch(NAME, &params, &Patch::Apply(deployment(id, replicas)))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deployment_runs_a_plain_api_server_on_etcd_main() {
        let d: Deployment = serde_json::from_value(deployment("shoot--p--s", 1)).unwrap();
        let spec = d.spec.unwrap();
        assert_eq!(spec.replicas, Some(1));
        let pod = spec.template.spec.unwrap();
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some(IMAGE));
        let args = c.args.clone().unwrap();
        assert_eq!(args[0], "server");
        assert!(args.contains(&"--builtin-kinds-only".to_string()));
        assert!(
            args.contains(
                &"--etcd-servers=http://etcd-main-client.shoot--p--s.svc.cluster.local:2379"
                    .to_string()
            )
        );
        // The weeder's selector for etcd-main-client's dependants.
        let labels = spec.template.metadata.unwrap().labels.unwrap();
        assert_eq!(labels["role"], "apiserver");
        assert_eq!(labels["gardener.cloud/role"], "controlplane");
        let hibernated: Deployment = serde_json::from_value(deployment("ns", 0)).unwrap();
        assert_eq!(hibernated.spec.unwrap().replicas, Some(0));
        let s: Service = serde_json::from_value(service("ns")).unwrap();
        let port = &s.spec.unwrap().ports.unwrap()[0];
        assert_eq!(port.port, 443);
    }
}
