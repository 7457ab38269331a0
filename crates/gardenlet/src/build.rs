//! What gardenlet deploys into the seed for a Shoot, built as pure
//! functions: the control namespace name (technical ID), the `Cluster`
//! that mirrors Shoot, Seed and CloudProfile, the `Worker` of spec §4.1,
//! the per-pool bootstrap user-data Secrets, the cloud-provider Secret and
//! the shoot's admin kubeconfig. Nothing here does I/O; the executor in
//! `controller` writes what these functions return.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use gardener::{CloudProfile, CloudProfileSpec, NamespacedCloudProfile, ShootSpec};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret, SecretKeySelector, SecretReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};
use worker::labels::{NodeLabelInputs, pool_node_labels};
use worker::{
    Cluster, ClusterAutoscalerOptions, ClusterSpec, DataVolume, MachineControllerManagerSettings,
    MachineImage, MachineUpdateStrategy, ShootFacts, Volume, Worker, WorkerNodeTemplate,
    WorkerPool, WorkerSpec,
};

/// The finalizer gardenlet keeps on every Shoot it manages.
pub const FINALIZER: &str = "gardener";
/// Name of the Secret with the shoot's admin kubeconfig, in the control
/// namespace.
pub const KUBECONFIG_SECRET: &str = "kubeconfig";
/// Key of the kubeconfig in [`KUBECONFIG_SECRET`].
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// Name of the Secret dependency-watchdog's prober reads the shoot's
/// kubeconfig from (upstream gardener's name; key [`KUBECONFIG_KEY`]).
pub const DWD_PROBE_SECRET: &str = "shoot-access-dependency-watchdog-probe";
/// Name of the provider credentials Secret the Worker refers to.
pub const CLOUDPROVIDER_SECRET: &str = "cloudprovider";
/// Key of the bootstrap document in a pool's user-data Secret.
pub const USER_DATA_KEY: &str = "userData";
/// Prefix of a pool's user-data Secret name.
pub const USER_DATA_SECRET_PREFIX: &str = "user-data-";
/// Purpose label value of the user-data Secrets (cleanup selects on it).
pub const PURPOSE_USER_DATA: &str = "user-data";
/// Purpose label value of the cloud-provider Secret.
pub const PURPOSE_CLOUDPROVIDER: &str = "cloudprovider";
/// Label on the control namespace: `shoot`.
pub const ROLE_LABEL: &str = "gardener.cloud/role";
/// Labels naming the Shoot a control namespace belongs to.
pub const SHOOT_NAME_LABEL: &str = "shoot.gardener.cloud/name";
pub const SHOOT_NAMESPACE_LABEL: &str = "shoot.gardener.cloud/namespace";
/// Annotation asking an extension controller to reconcile its resource;
/// the controller removes it once done.
pub const OPERATION_ANNOTATION: &str = "gardener.cloud/operation";
/// [`OPERATION_ANNOTATION`]'s value.
pub const OPERATION_RECONCILE: &str = "reconcile";
/// When gardenlet last asked for a reconcile (RFC 3339).
pub const TIMESTAMP_ANNOTATION: &str = "gardener.cloud/timestamp";

/// Why a Worker could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The Shoot cannot be defaulted against its profile.
    #[error("the shoot cannot be defaulted against its cloud profile: {0}")]
    Defaulting(String),
    /// A pool's machine image is not set.
    #[error("worker pool {0:?} has no machine image")]
    NoImage(String),
    /// The node-agent secret name (and with it the pool hash) cannot be
    /// derived, e.g. for an unparsable Kubernetes version.
    #[error("worker pool {pool:?}: {reason}")]
    Pool { pool: String, reason: String },
    /// The NamespacedCloudProfile has no rendered spec yet.
    #[error("namespaced cloud profile {0:?} is not rendered yet")]
    NotRendered(String),
}

/// The control namespace and technical ID of a Shoot:
/// `shoot--<project>--<name>`, where the project is the Shoot's namespace
/// without its `garden-` prefix (the `garden` namespace is project
/// `garden`).
pub fn technical_id(namespace: &str, name: &str) -> String {
    let project = namespace.strip_prefix("garden-").unwrap_or(namespace);
    format!("shoot--{project}--{name}")
}

/// The Shoot's spec defaulted against its profile as admission would (Kubernetes
/// versions, architectures, images), plus the update-bound defaults of spec
/// §3, so a Shoot that bypassed admission still yields a complete Worker.
pub fn defaulted_spec(
    spec: &ShootSpec,
    profile: &CloudProfileSpec,
    now: DateTime<Utc>,
) -> Result<ShootSpec, BuildError> {
    let mut spec = spec.clone();
    let causes = gardener::shoot_admission::default_shoot(&mut spec, None, profile, now);
    if let Some(c) = causes.first() {
        return Err(BuildError::Defaulting(format!(
            "{}: {}",
            c.field, c.message
        )));
    }
    for w in &mut spec.provider.workers {
        let in_place = w.is_in_place();
        if w.max_surge.is_none() {
            w.max_surge = Some(IntOrString::Int(if in_place { 0 } else { 1 }));
        }
        if w.max_unavailable.is_none() {
            w.max_unavailable = Some(IntOrString::Int(if in_place { 1 } else { 0 }));
        }
    }
    Ok(spec)
}

/// The profile a Cluster embeds: a CloudProfile as it is, or a
/// NamespacedCloudProfile's rendered `status.cloudProfileSpec` wrapped as a
/// CloudProfile of the same name. Returns the object and its spec.
pub fn effective_profile(
    profile: ProfileSource<'_>,
) -> Result<(Value, CloudProfileSpec), BuildError> {
    match profile {
        ProfileSource::Cluster(cp) => {
            let mut object = CloudProfile::new(
                cp.metadata.name.as_deref().unwrap_or_default(),
                cp.spec.clone(),
            );
            object.metadata.uid = cp.metadata.uid.clone();
            object.metadata.resource_version = cp.metadata.resource_version.clone();
            Ok((to_value(&object), cp.spec.clone()))
        }
        ProfileSource::Namespaced(ncp) => {
            let name = ncp.metadata.name.clone().unwrap_or_default();
            let rendered = ncp
                .status
                .as_ref()
                .map(|s| &s.cloud_profile_spec)
                .filter(|s| !s.type_.is_empty())
                .ok_or_else(|| BuildError::NotRendered(name.clone()))?;
            let object = CloudProfile::new(&name, rendered.clone());
            Ok((to_value(&object), rendered.clone()))
        }
    }
}

/// Where a Shoot's profile came from.
#[derive(Clone, Copy, Debug)]
pub enum ProfileSource<'a> {
    Cluster(&'a CloudProfile),
    Namespaced(&'a NamespacedCloudProfile),
}

fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

/// The Shoot as the Cluster embeds it: the raw object (unmodelled fields
/// kept) without managed fields, with `status.technicalID` filled in.
pub fn embedded_shoot(raw: &Value, technical_id: &str) -> Value {
    let mut shoot = raw.clone();
    if let Some(meta) = shoot.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    if let Some(obj) = shoot.as_object_mut() {
        obj.insert(
            "apiVersion".into(),
            Value::String(gardener::GROUP_VERSION.into()),
        );
        obj.insert("kind".into(), Value::String("Shoot".into()));
        let status = obj.entry("status").or_insert_with(|| json!({}));
        if !status.is_object() {
            *status = json!({});
        }
        if let Some(s) = status.as_object_mut() {
            s.insert("technicalID".into(), Value::String(technical_id.into()));
        }
    }
    shoot
}

/// The Seed stub a Cluster embeds: this gardenlet's seed, of provider
/// `local`, in the shoot's region.
pub fn seed_stub(seed_name: &str, region: &str) -> Value {
    json!({
        "apiVersion": gardener::GROUP_VERSION,
        "kind": "Seed",
        "metadata": {"name": seed_name},
        "spec": {"provider": {"type": worker::WORKER_TYPE_LOCAL, "region": region}},
    })
}

/// The `Cluster` named like the control namespace.
pub fn cluster(technical_id: &str, shoot: Value, seed: Value, profile: Value) -> Cluster {
    Cluster::new(
        technical_id,
        ClusterSpec {
            cloud_profile: profile,
            seed,
            shoot,
        },
    )
}

/// The control namespace, labelled with the Shoot it belongs to.
pub fn namespace(technical_id: &str, shoot_namespace: &str, shoot_name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(technical_id.to_string()),
            labels: Some(BTreeMap::from([
                (ROLE_LABEL.to_string(), "shoot".to_string()),
                (SHOOT_NAME_LABEL.to_string(), shoot_name.to_string()),
                (
                    SHOOT_NAMESPACE_LABEL.to_string(),
                    shoot_namespace.to_string(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

fn secret(
    name: &str,
    namespace: &str,
    labels: BTreeMap<String, String>,
    data: BTreeMap<String, Vec<u8>>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_string()),
        data: Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        ..Secret::default()
    }
}

fn purpose(value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(worker::labels::PURPOSE.to_string(), value.to_string())])
}

/// The cloud-provider Secret. The local provider needs no credentials; the
/// Secret exists because the Worker contract refers to it.
pub fn cloudprovider_secret(technical_id: &str) -> Secret {
    secret(
        CLOUDPROVIDER_SECRET,
        technical_id,
        purpose(PURPOSE_CLOUDPROVIDER),
        BTreeMap::from([("provider".to_string(), b"local".to_vec())]),
    )
}

/// The Secret holding the shoot's admin kubeconfig.
pub fn kubeconfig_secret(technical_id: &str, kubeconfig: &str) -> Secret {
    secret(
        KUBECONFIG_SECRET,
        technical_id,
        BTreeMap::new(),
        BTreeMap::from([(KUBECONFIG_KEY.to_string(), kubeconfig.as_bytes().to_vec())]),
    )
}

/// The Secret dependency-watchdog's prober reaches the shoot's API with.
/// Upstream's holds the token of a service account limited to what a
/// probe reads; trellis's shoot API has no token requestor, so this holds
/// the shoot's admin kubeconfig, under the name and key the prober looks
/// for.
pub fn dwd_probe_secret(technical_id: &str, kubeconfig: &str) -> Secret {
    secret(
        DWD_PROBE_SECRET,
        technical_id,
        BTreeMap::new(),
        BTreeMap::from([(KUBECONFIG_KEY.to_string(), kubeconfig.as_bytes().to_vec())]),
    )
}

/// Where a shoot's API server is and how to trust and authenticate to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShootAccess {
    /// `https://127.0.0.1:<port>` (or `http://` without TLS).
    pub url: String,
    /// The CA that signed the serving certificate (TLS only).
    pub ca_pem: Option<String>,
    /// The admin client certificate and key (TLS only).
    pub client_cert_pem: Option<String>,
    pub client_key_pem: Option<String>,
}

/// An admin kubeconfig for the shoot: the CA and client certificate are
/// embedded, so it needs no other file.
pub fn kubeconfig(technical_id: &str, access: &ShootAccess) -> String {
    let mut cluster = format!("    server: {}\n", access.url);
    if let Some(ca) = &access.ca_pem {
        cluster.push_str(&format!(
            "    certificate-authority-data: {}\n",
            STANDARD.encode(ca)
        ));
    }
    let user = match (&access.client_cert_pem, &access.client_key_pem) {
        (Some(cert), Some(key)) => format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            STANDARD.encode(cert),
            STANDARD.encode(key)
        ),
        // A plain-HTTP server does not authenticate; kube-rs still wants a
        // user entry.
        _ => "    token: admin\n".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {technical_id}\n  cluster:\n{cluster}contexts:\n- name: {technical_id}\n  context:\n    cluster: {technical_id}\n    user: {technical_id}-admin\n    namespace: default\ncurrent-context: {technical_id}\nusers:\n- name: {technical_id}-admin\n  user:\n{user}"
    )
}

/// The name of a pool's user-data Secret.
pub fn user_data_secret_name(pool: &str) -> String {
    format!("{USER_DATA_SECRET_PREFIX}{pool}")
}

/// The bootstrap user-data Secret of every pool of `worker`: the pool's
/// cloud-init document (kubelet node labels and taints, the
/// `<<BOOTSTRAP_TOKEN>>`/`<<MACHINE_NAME>>` placeholders MCM fills in),
/// pointing the kubelet at the shoot's API server.
pub fn user_data_secrets(
    technical_id: &str,
    worker: &WorkerSpec,
    access: &ShootAccess,
) -> Vec<Secret> {
    let ca = access.ca_pem.as_ref().map(|ca| STANDARD.encode(ca));
    worker
        .pools
        .iter()
        .map(|pool| {
            let document =
                worker::bootstrap::bootstrap_user_data(&worker::bootstrap::BootstrapConfig {
                    pool: &pool.name,
                    kubernetes_version: pool.kubernetes_version.as_deref().unwrap_or_default(),
                    api_server_url: &access.url,
                    ca_data: ca.as_deref(),
                    node_labels: &pool.labels,
                    taints: &pool.taints,
                });
            let mut labels = purpose(PURPOSE_USER_DATA);
            labels.insert(worker::labels::WORKER_POOL.to_string(), pool.name.clone());
            secret(
                &user_data_secret_name(&pool.name),
                technical_id,
                labels,
                BTreeMap::from([(USER_DATA_KEY.to_string(), document.into_bytes())]),
            )
        })
        .collect()
}

/// The user-data Secrets (by name) that no pool of `worker` uses any more.
pub fn stale_user_data_secrets(existing: &[String], worker: &WorkerSpec) -> Vec<String> {
    existing
        .iter()
        .filter(|name| {
            !worker
                .pools
                .iter()
                .any(|p| &user_data_secret_name(&p.name) == *name)
        })
        .cloned()
        .collect()
}

/// What [`worker_spec`] reads.
#[derive(Clone, Copy, Debug)]
pub struct WorkerInput<'a> {
    /// The Shoot's spec, defaulted ([`defaulted_spec`]).
    pub spec: &'a ShootSpec,
    /// The raw Shoot, for pool fields the typed Shoot does not model
    /// (`clusterAutoscaler`).
    pub raw_shoot: &'a Value,
    /// The effective profile.
    pub profile: &'a CloudProfileSpec,
    /// The technical ID (control namespace).
    pub technical_id: &'a str,
    /// Facts of the shoot as the Cluster shows them.
    pub facts: &'a ShootFacts,
    /// The Worker as it exists, whose node templates are kept for machine
    /// types the profile no longer lists.
    pub existing: Option<&'a WorkerSpec>,
}

/// The Worker's spec from the Shoot's pools (spec §4.1).
pub fn worker_spec(input: &WorkerInput<'_>) -> Result<WorkerSpec, BuildError> {
    let pools = input
        .spec
        .provider
        .workers
        .iter()
        .map(|w| worker_pool(input, w))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(WorkerSpec {
        type_: input.spec.provider.type_.clone(),
        region: input.spec.region.clone(),
        secret_ref: SecretReference {
            name: Some(CLOUDPROVIDER_SECRET.to_string()),
            namespace: Some(input.technical_id.to_string()),
        },
        pools,
        ..WorkerSpec::default()
    })
}

fn worker_pool(input: &WorkerInput<'_>, w: &gardener::Worker) -> Result<WorkerPool, BuildError> {
    let image = w
        .machine
        .image
        .as_ref()
        .ok_or_else(|| BuildError::NoImage(w.name.clone()))?;
    let machine_type = input.profile.machine_type(&w.machine.type_);
    let architecture = w
        .machine
        .architecture
        .clone()
        .unwrap_or_else(|| gardener::AMD64.to_string());
    let kubernetes_version = w
        .kubernetes_version()
        .map(str::to_string)
        .or_else(|| Some(input.spec.kubernetes.version.clone()))
        .filter(|v| !v.is_empty());
    let node_template = match machine_type {
        Some(t) => Some(WorkerNodeTemplate {
            capacity: BTreeMap::from([
                ("cpu".to_string(), t.cpu.clone()),
                ("gpu".to_string(), t.gpu.clone()),
                ("memory".to_string(), t.memory.clone()),
            ]),
            virtual_capacity: None,
        }),
        // A type the profile dropped keeps the capacity it was created with.
        None => input
            .existing
            .and_then(|e| e.pools.iter().find(|p| p.name == w.name))
            .filter(|p| p.machine_type == w.machine.type_)
            .and_then(|p| p.node_template.clone()),
    };
    let mut mcm = w
        .machine_controller_manager
        .as_ref()
        .map(|m| MachineControllerManagerSettings {
            machine_drain_timeout: m.machine_drain_timeout.clone(),
            machine_health_timeout: m.machine_health_timeout.clone(),
            machine_creation_timeout: m.machine_creation_timeout.clone(),
            max_evict_retries: m.max_evict_retries,
            node_conditions: m.node_conditions.clone(),
            in_place_update_timeout: m.in_place_update_timeout.clone(),
            disable_health_timeout: m.disable_health_timeout,
            machine_preserve_timeout: m.machine_preserve_timeout.clone(),
            auto_preserve_failed_machine_max: m.auto_preserve_failed_machine_max,
        });
    let type_creation_timeout = machine_type
        .and_then(|t| t.machine_controller_manager.as_ref())
        .and_then(|m| m.machine_creation_timeout.clone());
    if let Some(timeout) = type_creation_timeout {
        let m = mcm.get_or_insert_with(Default::default);
        if m.machine_creation_timeout.is_none() {
            m.machine_creation_timeout = Some(timeout);
        }
    }
    if w.is_in_place() {
        let m = mcm.get_or_insert_with(Default::default);
        m.disable_health_timeout.get_or_insert(true);
    }
    let cri = w.cri.as_ref();
    let mut pool = WorkerPool {
        name: w.name.clone(),
        machine_type: w.machine.type_.clone(),
        machine_image: MachineImage {
            name: image.name.clone(),
            version: image.version.clone().unwrap_or_default(),
        },
        minimum: w.minimum,
        maximum: w.maximum,
        max_surge: w.max_surge.clone().unwrap_or(IntOrString::Int(0)),
        max_unavailable: w.max_unavailable.clone().unwrap_or(IntOrString::Int(0)),
        labels: BTreeMap::new(),
        annotations: w.annotations.clone(),
        taints: w.taints.clone(),
        zones: w.zones.clone(),
        volume: w.volume.as_ref().map(|v| Volume {
            name: v.name.clone(),
            type_: v.type_.clone(),
            size: v.volume_size.clone(),
            encrypted: v.encrypted,
        }),
        data_volumes: w
            .data_volumes
            .iter()
            .map(|v| DataVolume {
                name: v.name.clone(),
                type_: v.type_.clone(),
                size: v.volume_size.clone(),
                encrypted: v.encrypted,
            })
            .collect(),
        kubelet_data_volume_name: w.kubelet_data_volume_name.clone(),
        node_template,
        machine_controller_manager: mcm,
        cluster_autoscaler: cluster_autoscaler(input.raw_shoot, &w.name),
        user_data: None,
        user_data_secret_ref: Some(SecretKeySelector {
            name: user_data_secret_name(&w.name),
            key: USER_DATA_KEY.to_string(),
            optional: None,
        }),
        node_agent_secret_name: None,
        kubernetes_version,
        kubelet_config: w.kubernetes.as_ref().and_then(|k| k.kubelet.clone()),
        provider_config: w.provider_config.clone(),
        architecture: Some(architecture.clone()),
        priority: w.priority,
        update_strategy: w.update_strategy.map(|s| match s {
            gardener::WorkerUpdateStrategy::AutoRollingUpdate => {
                MachineUpdateStrategy::AutoRollingUpdate
            }
            gardener::WorkerUpdateStrategy::AutoInPlaceUpdate => {
                MachineUpdateStrategy::AutoInPlaceUpdate
            }
            gardener::WorkerUpdateStrategy::ManualInPlaceUpdate => {
                MachineUpdateStrategy::ManualInPlaceUpdate
            }
        }),
    };
    let secret_name = worker::naming::node_agent_secret_name(&pool, input.facts).map_err(|e| {
        BuildError::Pool {
            pool: w.name.clone(),
            reason: e.to_string(),
        }
    })?;
    pool.labels = pool_node_labels(&NodeLabelInputs {
        user_labels: w.labels.clone(),
        pool: w.name.clone(),
        architecture,
        node_local_dns: input.facts.node_local_dns,
        system_components_allowed: w.system_components.as_ref().is_none_or(|s| s.allow),
        node_agent_secret_name: Some(secret_name.clone()),
        cri_name: Some(w.cri_name().to_string()),
        container_runtimes: cri
            .map(|c| {
                c.container_runtimes
                    .iter()
                    .map(|r| r.type_.clone())
                    .collect()
            })
            .unwrap_or_default(),
    });
    pool.node_agent_secret_name = Some(secret_name);
    Ok(pool)
}

/// A pool's `clusterAutoscaler` settings from the raw Shoot (the typed Shoot
/// does not model them).
fn cluster_autoscaler(raw_shoot: &Value, pool: &str) -> Option<ClusterAutoscalerOptions> {
    raw_shoot
        .pointer("/spec/provider/workers")
        .and_then(Value::as_array)?
        .iter()
        .find(|w| w.get("name").and_then(Value::as_str) == Some(pool))?
        .get("clusterAutoscaler")
        .and_then(|ca| serde_json::from_value(ca.clone()).ok())
}

/// What to write for the Worker: `None` when it is as wanted. A new Worker,
/// a changed spec or `trigger` (something the actuator reads from the
/// Cluster changed, such as hibernation) asks the extension to reconcile
/// through [`OPERATION_ANNOTATION`] and [`TIMESTAMP_ANNOTATION`].
pub fn worker_update(
    existing: Option<&Worker>,
    technical_id: &str,
    spec: WorkerSpec,
    trigger: bool,
    now: DateTime<Utc>,
) -> Option<Worker> {
    let mut worker = match existing {
        Some(w) if w.spec == spec && !trigger => return None,
        Some(w) => {
            let mut w = w.clone();
            w.spec = spec;
            w.metadata.managed_fields = None;
            w
        }
        None => {
            let mut w = Worker::new(technical_id, spec);
            w.metadata.namespace = Some(technical_id.to_string());
            w
        }
    };
    let annotations = worker
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    annotations.insert(
        OPERATION_ANNOTATION.to_string(),
        OPERATION_RECONCILE.to_string(),
    );
    annotations.insert(
        TIMESTAMP_ANNOTATION.to_string(),
        gardener::Time(now).to_string(),
    );
    Some(worker)
}

/// Whether the extension must be told to reconcile although the Worker's
/// spec is unchanged: the Cluster is new, or the shoot's hibernation
/// changed (the actuator reads it from the Cluster).
pub fn cluster_trigger(existing_cluster: Option<&Cluster>, facts: &ShootFacts) -> bool {
    match existing_cluster {
        None => true,
        Some(c) => ShootFacts::from_cluster(c).hibernated != facts.hibernated,
    }
}

/// The sum of the pools' minimums: how many nodes an awake shoot should have.
pub fn minimum_nodes(spec: &WorkerSpec) -> i32 {
    spec.pools.iter().map(|p| p.minimum.max(0)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> CloudProfileSpec {
        serde_json::from_value(json!({
            "type": "local",
            "kubernetes": {"versions": [{"version": "1.31.2", "classification": "supported"}]},
            "machineImages": [{"name": "local", "versions": [
                {"version": "1.0.0", "classification": "supported", "architectures": ["amd64"]}]}],
            "machineTypes": [{"name": "small", "cpu": "2", "gpu": "0", "memory": "4Gi", "architecture": "amd64"}],
            "regions": [{"name": "local", "zones": [{"name": "z1"}]}]
        }))
        .unwrap()
    }

    fn shoot(workers: Value) -> (ShootSpec, Value) {
        let raw = json!({
            "metadata": {"name": "s", "namespace": "garden-p"},
            "spec": {
                "cloudProfile": {"kind": "CloudProfile", "name": "local"},
                "region": "local",
                "kubernetes": {"version": "1.31.2"},
                "provider": {"type": "local", "workers": workers}
            }
        });
        let spec: ShootSpec = serde_json::from_value(raw["spec"].clone()).unwrap();
        (spec, embedded_shoot(&raw, "shoot--p--s"))
    }

    fn build(workers: Value, existing: Option<&WorkerSpec>) -> Result<WorkerSpec, BuildError> {
        let profile = profile();
        let (spec, raw) = shoot(workers);
        let spec = defaulted_spec(&spec, &profile, Utc::now())?;
        let facts = ShootFacts::from_shoot(&raw);
        worker_spec(&WorkerInput {
            spec: &spec,
            raw_shoot: &raw,
            profile: &profile,
            technical_id: "shoot--p--s",
            facts: &facts,
            existing,
        })
    }

    #[test]
    fn technical_ids() {
        for (ns, name, want) in [
            ("garden-dev", "a", "shoot--dev--a"),
            ("garden", "a", "shoot--garden--a"),
            ("other", "b", "shoot--other--b"),
            ("garden-garden-x", "c", "shoot--garden-x--c"),
        ] {
            assert_eq!(technical_id(ns, name), want);
        }
    }

    #[test]
    fn pools_become_worker_pools() {
        let w = build(
            json!([
                {"name": "a", "machine": {"type": "small"}, "minimum": 1, "maximum": 3,
                 "zones": ["z1", "z2"], "labels": {"x": "y"}, "taints": [{"key": "k", "effect": "NoSchedule"}],
                 "volume": {"size": "20Gi"}, "clusterAutoscaler": {"maxNodeProvisionTime": "9m"}},
                {"name": "b", "machine": {"type": "small", "image": {"name": "local", "version": "1.0.0"}},
                 "minimum": 0, "maximum": 1, "kubernetes": {"version": "1.31.2"},
                 "updateStrategy": "AutoInPlaceUpdate", "systemComponents": {"allow": false}}
            ]),
            None,
        )
        .unwrap();
        assert_eq!(w.type_, "local");
        assert_eq!(w.region, "local");
        assert_eq!(w.secret_ref.namespace.as_deref(), Some("shoot--p--s"));
        let (a, b) = (&w.pools[0], &w.pools[1]);
        // (field, got, want)
        let table: Vec<(&str, Value, Value)> = vec![
            (
                "a image",
                json!(a.machine_image),
                json!({"name": "local", "version": "1.0.0"}),
            ),
            ("a zones", json!(a.zones), json!(["z1", "z2"])),
            ("a surge", json!(a.max_surge), json!(1)),
            ("a unavailable", json!(a.max_unavailable), json!(0)),
            ("a k8s", json!(a.kubernetes_version), json!("1.31.2")),
            ("a arch", json!(a.architecture), json!("amd64")),
            (
                "a capacity",
                json!(a.node_template.as_ref().unwrap().capacity),
                json!({"cpu": "2", "gpu": "0", "memory": "4Gi"}),
            ),
            ("a volume", json!(a.volume), json!({"size": "20Gi"})),
            ("a taints", json!(a.taints.len()), json!(1)),
            (
                "a ca",
                json!(
                    a.cluster_autoscaler
                        .as_ref()
                        .unwrap()
                        .max_node_provision_time
                ),
                json!("9m"),
            ),
            (
                "a user data",
                json!(a.user_data_secret_ref),
                json!({"name": "user-data-a", "key": "userData"}),
            ),
            ("a label x", json!(a.labels.get("x")), json!("y")),
            (
                "a pool label",
                json!(a.labels.get("worker.gardener.cloud/pool")),
                json!("a"),
            ),
            (
                "a legacy pool label",
                json!(a.labels.get("worker.garden.sapcloud.io/group")),
                json!("a"),
            ),
            (
                "a cri",
                json!(a.labels.get("worker.gardener.cloud/cri-name")),
                json!("containerd"),
            ),
            (
                "a system components",
                json!(a.labels.get("worker.gardener.cloud/system-components")),
                json!("true"),
            ),
            (
                "b system components",
                json!(b.labels.get("worker.gardener.cloud/system-components")),
                Value::Null,
            ),
            ("b in place surge", json!(b.max_surge), json!(0)),
            ("b in place unavailable", json!(b.max_unavailable), json!(1)),
            (
                "b strategy",
                json!(b.update_strategy),
                json!("AutoInPlaceUpdate"),
            ),
            (
                "b health timeout off",
                json!(
                    b.machine_controller_manager
                        .as_ref()
                        .unwrap()
                        .disable_health_timeout
                ),
                json!(true),
            ),
        ];
        for (field, got, want) in table {
            assert_eq!(got, want, "{field}");
        }
        let secret = a.node_agent_secret_name.clone().unwrap();
        assert!(secret.starts_with("gardener-node-agent-a-"), "{secret}");
        assert_eq!(
            a.labels["worker.gardener.cloud/gardener-node-agent-secret-name"],
            secret
        );
    }

    #[test]
    fn an_unknown_machine_type_keeps_the_existing_capacity() {
        let pool = json!([{"name": "a", "machine": {"type": "gone", "image": {"name": "local", "version": "1.0.0"}},
                           "minimum": 1, "maximum": 1, "zones": ["z1"]}]);
        let without = build(pool.clone(), None).unwrap();
        assert!(without.pools[0].node_template.is_none());
        let mut existing = without.clone();
        existing.pools[0].node_template = Some(WorkerNodeTemplate {
            capacity: BTreeMap::from([(
                "cpu".to_string(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("8".into()),
            )]),
            virtual_capacity: None,
        });
        let kept = build(pool, Some(&existing)).unwrap();
        assert_eq!(kept.pools[0].node_template, existing.pools[0].node_template);
    }

    #[test]
    fn a_bad_kubernetes_version_is_an_error() {
        let err = build(
            json!([{"name": "a", "machine": {"type": "small"}, "minimum": 1, "maximum": 1,
                    "kubernetes": {"version": "latest"}}]),
            None,
        );
        assert!(err.is_err());
    }

    #[test]
    fn worker_updates() {
        let spec = build(
            json!([{"name": "a", "machine": {"type": "small"}, "minimum": 1, "maximum": 1, "zones": ["z1"]}]),
            None,
        )
        .unwrap();
        let now = Utc::now();
        let created = worker_update(None, "shoot--p--s", spec.clone(), false, now).unwrap();
        assert_eq!(created.metadata.namespace.as_deref(), Some("shoot--p--s"));
        assert_eq!(
            created.metadata.annotations.as_ref().unwrap()[OPERATION_ANNOTATION],
            OPERATION_RECONCILE
        );
        let mut settled = created.clone();
        settled.metadata.annotations = None;
        assert!(worker_update(Some(&settled), "shoot--p--s", spec.clone(), false, now).is_none());
        assert!(worker_update(Some(&settled), "shoot--p--s", spec.clone(), true, now).is_some());
        let mut changed = spec.clone();
        changed.pools[0].maximum = 4;
        let updated = worker_update(Some(&settled), "shoot--p--s", changed, false, now).unwrap();
        assert_eq!(updated.spec.pools[0].maximum, 4);
        assert!(
            updated
                .metadata
                .annotations
                .unwrap()
                .contains_key(TIMESTAMP_ANNOTATION)
        );
    }

    #[test]
    fn hibernation_changes_trigger_the_worker() {
        let (_, raw) = shoot(json!([]));
        let awake = cluster("shoot--p--s", raw.clone(), Value::Null, Value::Null);
        let mut asleep_raw = raw.clone();
        asleep_raw["spec"]["hibernation"] = json!({"enabled": true});
        let asleep = ShootFacts::from_shoot(&asleep_raw);
        assert!(cluster_trigger(None, &asleep));
        assert!(cluster_trigger(Some(&awake), &asleep));
        assert!(!cluster_trigger(
            Some(&awake),
            &ShootFacts::from_shoot(&raw)
        ));
    }

    #[test]
    fn profiles_embedded() {
        let cp = CloudProfile::new("local", profile());
        let (object, spec) = effective_profile(ProfileSource::Cluster(&cp)).unwrap();
        assert_eq!(object["kind"], "CloudProfile");
        assert_eq!(spec.type_, "local");
        let mut ncp = NamespacedCloudProfile::new("custom", Default::default());
        assert_eq!(
            effective_profile(ProfileSource::Namespaced(&ncp)).unwrap_err(),
            BuildError::NotRendered("custom".into())
        );
        ncp.status = Some(gardener::NamespacedCloudProfileStatus {
            cloud_profile_spec: profile(),
            observed_generation: Some(1),
        });
        let (object, _) = effective_profile(ProfileSource::Namespaced(&ncp)).unwrap();
        assert_eq!(object["kind"], "CloudProfile");
        assert_eq!(object["metadata"]["name"], "custom");
        assert_eq!(object["spec"]["type"], "local");
    }

    #[test]
    fn user_data_and_kubeconfig() {
        let spec = build(
            json!([{"name": "a", "machine": {"type": "small"}, "minimum": 1, "maximum": 1, "zones": ["z1"],
                    "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}]),
            None,
        )
        .unwrap();
        let access = ShootAccess {
            url: "https://127.0.0.1:1234".into(),
            ca_pem: Some("CA".into()),
            client_cert_pem: Some("C".into()),
            client_key_pem: Some("K".into()),
        };
        let secrets = user_data_secrets("shoot--p--s", &spec, &access);
        assert_eq!(secrets.len(), 1);
        let doc =
            String::from_utf8(secrets[0].data.as_ref().unwrap()[USER_DATA_KEY].0.clone()).unwrap();
        for needle in [
            "<<BOOTSTRAP_TOKEN>>",
            "<<MACHINE_NAME>>",
            "https://127.0.0.1:1234",
            "worker.gardener.cloud/pool=a",
            "--register-with-taints=k=v:NoSchedule",
        ] {
            assert!(doc.contains(needle), "{needle} in {doc}");
        }
        assert_eq!(
            stale_user_data_secrets(&["user-data-a".into(), "user-data-old".into()], &spec),
            vec!["user-data-old".to_string()]
        );
        let kc = kubeconfig("shoot--p--s", &access);
        assert!(kc.contains("server: https://127.0.0.1:1234"));
        assert!(kc.contains(&format!(
            "certificate-authority-data: {}",
            STANDARD.encode("CA")
        )));
        assert!(kc.contains(&format!("client-key-data: {}", STANDARD.encode("K"))));
    }
}
