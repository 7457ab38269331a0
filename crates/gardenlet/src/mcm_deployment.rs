//! The shoot's machine-controller-manager as the Deployment upstream
//! deploys into the control namespace, and the switch it is for the
//! shoot's machine controllers.
//!
//! # The design
//!
//! Upstream Gardener runs each shoot's machine-controller-manager as the
//! Deployment `machine-controller-manager` in the shoot's control
//! namespace, and dependency-watchdog's prober protects a shoot from a
//! meltdown by scaling that Deployment to 0 (and back). trellis runs the
//! shoot's machine controllers in gardenlet's process (`shoot_cluster`):
//! the local provider's simulated VMs live there too, and they must keep
//! running (and renewing their node leases, once the fault is gone) while
//! the controllers are stopped, so the controllers cannot simply move into
//! a pod of their own.
//!
//! So gardenlet writes the Deployment, and the in-process controllers of
//! that shoot **follow its `spec.replicas`**: at 0 they are stopped (no
//! machine is created, deleted or replaced; the heartbeat Lease is
//! released), at 1 or more they run. A missing Deployment counts as 1:
//! gardenlet recreates it on its next pass, and a shoot must never lose
//! its controllers (its deletion flow needs them) because an object is
//! briefly absent. gardenlet creates it with 1 replica and afterwards never
//! touches `spec.replicas` or the annotations, so the prober's scale and
//! its `dependency-watchdog.gardener.cloud/*` annotations stay as the
//! prober left them (upstream's meltdown-protection contract). The one
//! exception is the deletion flow: a deleting shoot needs its controllers
//! to drain and delete its machines, so gardenlet marks the Cluster as
//! deleting (the prober is removed) and scales a held Deployment back to 1.
//!
//! Where the seed runs pods (`trellis up`, [`Mode::Pod`]), the controllers
//! run in that pod, as upstream: `trellis controller-manager` for the
//! control namespace, with the seed through the pod's service account
//! (`--control-kubeconfig=inClusterConfig`, a Role on what it touches), the
//! shoot through the mounted `kubeconfig` Secret, and the local provider
//! attached from gardenlet's process over gRPC (the pod serves
//! `--driver-listen` behind the Service's port 5000; the provider
//! registers there). Scaling the Deployment to 0 then stops the
//! controllers because their pod goes. Without a runtime for pods (the
//! gardenlet tests, [`Mode::InProcess`]) the pod is a stand-in that only
//! sleeps and the in-process controllers follow the replicas as above.
//!
//! Hibernation is the one other time gardenlet sets the replicas: once a
//! hibernating shoot's machines are gone it scales the Deployment to 0 and
//! marks it ([`HIBERNATION_ANNOTATION`]); waking up scales a marked one
//! back to 1, never a 0 someone else set.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

/// The Deployment's name, as upstream's and as the prober config names it.
pub const NAME: &str = "machine-controller-manager";
/// dependency-watchdog's marker that it holds the Deployment down.
pub const MELTDOWN_ANNOTATION: &str =
    "dependency-watchdog.gardener.cloud/meltdown-protection-active";
/// The stand-in pod's image: a program of this machine, run as given.
pub const IMAGE: &str = "trellis.dev/exec";

/// Upstream's selector labels (`app: kubernetes`, `role:
/// machine-controller-manager`).
fn selector_labels() -> BTreeMap<String, String> {
    [
        ("app", "kubernetes"),
        ("role", "machine-controller-manager"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Where the shoot's machine controllers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In gardenlet's process, following the Deployment's replicas; its
    /// pod is a stand-in.
    InProcess,
    /// In the Deployment's pod: `trellis controller-manager` for the
    /// control namespace, its control cluster the seed through the pod's
    /// service account (`inClusterConfig`), its target the shoot through
    /// the mounted kubeconfig Secret, the local provider attached over
    /// gRPC (`--driver-listen`, the Service's port 5000) from gardenlet's
    /// process, where the simulated VMs live.
    Pod,
}

/// The gRPC port providers register on (the seed's default).
pub const DRIVER_PORT: i32 = 5000;
/// The controllers' /metrics, /healthz and /readyz (upstream's port).
pub const METRICS_PORT: i32 = 10258;
/// Where the shoot's kubeconfig is mounted (upstream's path).
pub const TARGET_KUBECONFIG_DIR: &str = "/var/run/secrets/gardener.cloud/shoot/generic-kubeconfig";

/// The Deployment gardenlet writes into the control namespace `id`, with
/// upstream's labels (the in-process mode's stand-in pod).
pub fn deployment(id: &str) -> Deployment {
    deployment_for(id, Mode::InProcess)
}

/// The pod that runs the controllers ([`Mode::Pod`]).
fn controllers_pod(id: &str) -> PodSpec {
    let arg = |s: &str| s.to_string();
    PodSpec {
        service_account_name: Some(NAME.to_string()),
        containers: vec![Container {
            name: NAME.to_string(),
            image: Some(crate::kube_apiserver::IMAGE.to_string()),
            args: Some(vec![
                arg("controller-manager"),
                format!("--namespace={id}"),
                arg("--control-kubeconfig=inClusterConfig"),
                format!("--target-kubeconfig={TARGET_KUBECONFIG_DIR}/kubeconfig"),
                arg("--profile-controllers=false"),
                arg("--local-provider=false"),
                format!("--driver-listen=$(POD_IP):{DRIVER_PORT}"),
                format!("--metrics-listen=$(POD_IP):{METRICS_PORT}"),
            ]),
            env: Some(vec![k8s_openapi::api::core::v1::EnvVar {
                name: "POD_IP".into(),
                value_from: Some(k8s_openapi::api::core::v1::EnvVarSource {
                    field_ref: Some(k8s_openapi::api::core::v1::ObjectFieldSelector {
                        field_path: "status.podIP".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ports: Some(vec![
                k8s_openapi::api::core::v1::ContainerPort {
                    name: Some("providers".into()),
                    container_port: DRIVER_PORT,
                    ..Default::default()
                },
                k8s_openapi::api::core::v1::ContainerPort {
                    name: Some("metrics".into()),
                    container_port: METRICS_PORT,
                    ..Default::default()
                },
            ]),
            volume_mounts: Some(vec![k8s_openapi::api::core::v1::VolumeMount {
                name: "target-kubeconfig".into(),
                mount_path: TARGET_KUBECONFIG_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            }]),
            ..Container::default()
        }],
        volumes: Some(vec![k8s_openapi::api::core::v1::Volume {
            name: "target-kubeconfig".into(),
            secret: Some(k8s_openapi::api::core::v1::SecretVolumeSource {
                secret_name: Some(crate::build::KUBECONFIG_SECRET.into()),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        termination_grace_period_seconds: Some(5),
        ..PodSpec::default()
    }
}

/// The service account, Role and RoleBinding of the controllers' pod (what
/// they touch in the control namespace), and the Service providers
/// register through, as server-side-apply objects.
pub fn pod_objects(id: &str) -> Vec<serde_json::Value> {
    use serde_json::json;
    let meta = |kind: &str, api: &str| {
        json!({"apiVersion": api, "kind": kind,
               "metadata": {"name": NAME, "namespace": id, "labels": selector_labels()}})
    };
    let mut role = meta("Role", "rbac.authorization.k8s.io/v1");
    role["rules"] = json!([
        {"apiGroups": ["machine.sapcloud.io"], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["secrets", "configmaps", "events"], "verbs": ["*"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["*"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
    ]);
    let mut binding = meta("RoleBinding", "rbac.authorization.k8s.io/v1");
    binding["roleRef"] =
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME});
    binding["subjects"] = json!([{"kind": "ServiceAccount", "name": NAME, "namespace": id}]);
    let mut service = meta("Service", "v1");
    service["spec"] = json!({
        "selector": selector_labels(),
        "ports": [
            {"name": "providers", "port": DRIVER_PORT, "targetPort": DRIVER_PORT, "protocol": "TCP"},
            {"name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT, "protocol": "TCP"},
        ],
    });
    vec![meta("ServiceAccount", "v1"), role, binding, service]
}

/// The Deployment for `mode`.
pub fn deployment_for(id: &str, mode: Mode) -> Deployment {
    let mut labels = selector_labels();
    labels.insert("gardener.cloud/role".into(), "controlplane".into());
    labels.insert(
        "high-availability-config.resources.gardener.cloud/type".into(),
        "controller".into(),
    );
    let mut pod_labels = selector_labels();
    pod_labels.insert("gardener.cloud/role".into(), "controlplane".into());
    pod_labels.insert("maintenance.gardener.cloud/restart".into(), "true".into());
    pod_labels.insert(
        "networking.resources.gardener.cloud/to-kube-apiserver-tcp-443".into(),
        "allowed".into(),
    );
    Deployment {
        metadata: ObjectMeta {
            name: Some(NAME.to_string()),
            namespace: Some(id.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            revision_history_limit: Some(2),
            selector: LabelSelector {
                match_labels: Some(selector_labels()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(match mode {
                    Mode::InProcess => PodSpec {
                        containers: vec![Container {
                            name: NAME.to_string(),
                            image: Some(IMAGE.to_string()),
                            command: Some(vec!["sleep".into(), "infinity".into()]),
                            ..Container::default()
                        }],
                        termination_grace_period_seconds: Some(5),
                        ..PodSpec::default()
                    },
                    Mode::Pod => controllers_pod(id),
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// gardenlet's mark on a Deployment it scaled to 0 for hibernation, so
/// that waking up scales back only what hibernation scaled down (never an
/// operator's or dependency-watchdog's 0).
pub const HIBERNATION_ANNOTATION: &str = "gardenlet.trellis.dev/scaled-down-for-hibernation";

/// The merge patch hibernation needs on `existing`, if any: a hibernated
/// shoot (every machine gone) has no machine controllers (replicas 0,
/// marked), as Gardener scales them down; an awake one gets back the
/// replica that hibernation took.
pub fn hibernation_patch(existing: &Deployment, hibernated: bool) -> Option<serde_json::Value> {
    let marked = existing
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(HIBERNATION_ANNOTATION));
    let replicas = existing.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    match (hibernated, marked) {
        (true, false) if replicas > 0 => Some(serde_json::json!({
            "metadata": {"annotations": {HIBERNATION_ANNOTATION: "true"}},
            "spec": {"replicas": 0},
        })),
        (false, true) => Some(serde_json::json!({
            "metadata": {"annotations": {HIBERNATION_ANNOTATION: null}},
            "spec": {"replicas": 1},
        })),
        _ => None,
    }
}

/// What to write over `existing` so it matches `desired`: `None` when what
/// gardenlet owns of it (see `fingerprint`) already does. The replacement keeps
/// the stored `spec.replicas` and annotations, which belong to whoever
/// scaled it (dependency-watchdog's prober, an operator).
pub fn update(existing: &Deployment, desired: Deployment) -> Option<Deployment> {
    let stored = existing.spec.as_ref();
    if fingerprint(existing) == fingerprint(&desired) {
        return None;
    }
    let mut out = desired;
    out.metadata.annotations = existing.metadata.annotations.clone();
    out.metadata.resource_version = existing.metadata.resource_version.clone();
    out.metadata.uid = existing.metadata.uid.clone();
    if let Some(spec) = out.spec.as_mut() {
        spec.replicas = stored.and_then(|s| s.replicas);
    }
    Some(out)
}

/// What gardenlet sets and owns in the Deployment: its labels, the
/// selector, and the pod template's labels and containers' name, image,
/// command and arguments. Fields the API server defaults are left out, so a stored
/// object compares equal to the one that was written.
type Fingerprint = (
    Option<BTreeMap<String, String>>,
    Option<BTreeMap<String, String>>,
    Option<BTreeMap<String, String>>,
    Vec<(
        String,
        Option<String>,
        Option<Vec<String>>,
        Option<Vec<String>>,
    )>,
);

fn fingerprint(d: &Deployment) -> Fingerprint {
    let spec = d.spec.as_ref();
    let template = spec.map(|s| &s.template);
    (
        d.metadata.labels.clone(),
        spec.and_then(|s| s.selector.match_labels.clone()),
        template
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.clone()),
        template
            .and_then(|t| t.spec.as_ref())
            .map(|p| {
                p.containers
                    .iter()
                    .map(|c| {
                        (
                            c.name.clone(),
                            c.image.clone(),
                            c.command.clone(),
                            c.args.clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// Whether the shoot's machine controllers should run, given the
/// Deployment (see the module docs): absent or `spec.replicas` ≥ 1 (an
/// unset field defaults to 1) → run; 0 → stopped.
pub fn controllers_wanted(deployment: Option<&Deployment>) -> bool {
    deployment
        .and_then(|d| d.spec.as_ref())
        .and_then(|s| s.replicas)
        .is_none_or(|r| r > 0)
}

/// Watches the Deployment in `namespace` on the seed and publishes
/// [`controllers_wanted`] into `wanted` (`None` until the first list
/// completes). Runs until the receiving side is gone; watch errors are
/// retried with kube-rs's default back-off.
pub(crate) async fn follow(
    seed: kube::Client,
    namespace: String,
    wanted: watch::Sender<Option<bool>>,
) {
    let api: Api<Deployment> = Api::namespaced(seed, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={NAME}"));
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut current: Option<Deployment>;
    // Some while a (re)list is in progress: what it has found so far.
    let mut listing: Option<Option<Deployment>> = None;
    loop {
        let event = tokio::select! {
            e = events.next() => e,
            _ = wanted.closed() => return,
        };
        match event {
            None => return,
            Some(Ok(watcher::Event::Init)) => {
                listing = Some(None);
                continue;
            }
            Some(Ok(watcher::Event::InitApply(d))) => {
                listing = Some(Some(d));
                continue;
            }
            Some(Ok(watcher::Event::InitDone)) => current = listing.take().flatten(),
            Some(Ok(watcher::Event::Apply(d))) => current = Some(d),
            Some(Ok(watcher::Event::Delete(_))) => current = None,
            Some(Err(e)) => {
                tracing::warn!(shoot = %namespace, error = %e, "watching the machine-controller-manager deployment");
                continue;
            }
        }
        let now = controllers_wanted(current.as_ref());
        wanted.send_if_modified(|w| {
            let changed = *w != Some(now);
            *w = Some(now);
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_replicas(r: Option<i32>) -> Deployment {
        let mut d = deployment("shoot--p--a");
        d.spec.as_mut().unwrap().replicas = r;
        d
    }

    #[test]
    fn the_controllers_follow_the_replicas() {
        assert!(controllers_wanted(None), "absent: gardenlet recreates it");
        assert!(controllers_wanted(Some(&with_replicas(Some(1)))));
        assert!(controllers_wanted(Some(&with_replicas(Some(2)))));
        assert!(
            controllers_wanted(Some(&with_replicas(None))),
            "defaults to 1"
        );
        assert!(!controllers_wanted(Some(&with_replicas(Some(0)))));
    }

    #[test]
    fn upstream_names_and_labels() {
        let d = deployment("shoot--p--a");
        assert_eq!(d.metadata.name.as_deref(), Some(NAME));
        assert_eq!(d.metadata.namespace.as_deref(), Some("shoot--p--a"));
        let labels = d.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["role"], "machine-controller-manager");
        assert_eq!(labels["app"], "kubernetes");
        assert_eq!(labels["gardener.cloud/role"], "controlplane");
        let spec = d.spec.as_ref().unwrap();
        assert_eq!(spec.replicas, Some(1));
        let pod_labels = spec.template.metadata.as_ref().unwrap().labels.as_ref();
        let selector = spec.selector.match_labels.as_ref().unwrap();
        for (k, v) in selector {
            assert_eq!(
                pod_labels.unwrap().get(k),
                Some(v),
                "the selector matches the pods"
            );
        }
    }

    #[test]
    fn hibernation_scales_down_and_waking_scales_back_only_its_own_zero() {
        let marked = |r: Option<i32>| {
            let mut d = with_replicas(r);
            d.metadata.annotations = Some(
                [(HIBERNATION_ANNOTATION.to_string(), "true".to_string())]
                    .into_iter()
                    .collect(),
            );
            d
        };
        let replicas = |p: Option<serde_json::Value>| p.map(|p| p["spec"]["replicas"].clone());
        // (name, existing, hibernated, wanted replicas in the patch)
        let table = [
            (
                "hibernating: down to 0",
                with_replicas(Some(1)),
                true,
                Some(0),
            ),
            (
                "hibernating, unset replicas: down",
                with_replicas(None),
                true,
                Some(0),
            ),
            (
                "hibernated and marked: nothing",
                marked(Some(0)),
                true,
                None,
            ),
            (
                "hibernating, already 0 by someone else: untouched",
                with_replicas(Some(0)),
                true,
                None,
            ),
            ("waking: back to 1", marked(Some(0)), false, Some(1)),
            (
                "awake, the prober's or an operator's 0: untouched",
                with_replicas(Some(0)),
                false,
                None,
            ),
            (
                "awake and running: nothing",
                with_replicas(Some(1)),
                false,
                None,
            ),
        ];
        for (name, d, hibernated, want) in table {
            assert_eq!(
                replicas(hibernation_patch(&d, hibernated)),
                want.map(serde_json::Value::from),
                "{name}"
            );
        }
        let wake = hibernation_patch(&marked(Some(0)), false).unwrap();
        assert!(wake["metadata"]["annotations"][HIBERNATION_ANNOTATION].is_null());
    }

    #[test]
    fn an_update_keeps_the_scale_and_the_watchdogs_annotations() {
        let mut existing = with_replicas(Some(0));
        existing.metadata.annotations = Some(
            [
                ("dependency-watchdog.gardener.cloud/replicas", "1"),
                (
                    "dependency-watchdog.gardener.cloud/meltdown-protection-active",
                    "",
                ),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        assert_eq!(
            update(&existing, deployment("shoot--p--a")),
            None,
            "only the scale differs: nothing to write"
        );
        existing.metadata.labels.as_mut().unwrap().remove("role");
        existing.metadata.resource_version = Some("7".into());
        let out = update(&existing, deployment("shoot--p--a")).expect("labels differ");
        assert_eq!(out.spec.as_ref().unwrap().replicas, Some(0));
        assert_eq!(out.metadata.annotations, existing.metadata.annotations);
        assert_eq!(out.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(
            out.metadata.labels.as_ref().unwrap()["role"],
            "machine-controller-manager"
        );
    }
}
