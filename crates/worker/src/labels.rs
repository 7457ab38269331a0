//! Well-known label and annotation keys of the Worker contract, and the two
//! pure label computations around nodes: the labels gardenlet gives a pool's
//! nodes (§4.1) and the subset a kubelet may set on itself.
//!
//! The strings are contract with gardenlet, cluster-autoscaler and
//! gardener-node-agent and are spelled exactly as upstream spells them.

use std::collections::BTreeMap;

/// Label with the pool name, on machine deployments and nodes.
pub const WORKER_POOL: &str = "worker.gardener.cloud/pool";
/// The legacy pool label, still set on nodes.
pub const WORKER_POOL_LEGACY: &str = "worker.garden.sapcloud.io/group";
/// Label with the Worker's name on the machines of in-place pools.
pub const WORKER_NAME: &str = "worker.gardener.cloud/name";
/// Selector and template label of a machine deployment: its own name.
pub const MACHINE_DEPLOYMENT_NAME: &str = "name";
/// Zone label on nodes.
pub const TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// Zone label on machine classes (the old failure-domain key).
pub const FAILURE_DOMAIN_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// Machine-class label with the image name.
pub const OPERATING_SYSTEM_NAME: &str = "operatingSystemName";
/// Machine-class label with the image version, `+` replaced by `_`.
pub const OPERATING_SYSTEM_VERSION: &str = "operatingSystemVersion";
/// Purpose label of generated secrets.
pub const PURPOSE: &str = "gardener.cloud/purpose";
/// [`PURPOSE`] value of machine-class secrets; cleanup selects on it.
pub const PURPOSE_MACHINE_CLASS: &str = "machineclass";
/// Key of the user data in a machine-class secret.
pub const USER_DATA_KEY: &str = "userData";
/// Node role label, value `node`.
pub const NODE_ROLE: &str = "node.kubernetes.io/role";
/// Architecture label.
pub const ARCH: &str = "kubernetes.io/arch";
/// Whether node-local DNS runs on the node.
pub const NODE_LOCAL_DNS: &str = "networking.gardener.cloud/node-local-dns-enabled";
/// Whether system components may be scheduled on the pool.
pub const SYSTEM_COMPONENTS: &str = "worker.gardener.cloud/system-components";
/// Name of the gardener-node-agent secret of the pool.
pub const NODE_AGENT_SECRET_NAME: &str = "worker.gardener.cloud/gardener-node-agent-secret-name";
/// Container runtime interface name (`containerd`).
pub const CRI_NAME: &str = "worker.gardener.cloud/cri-name";
/// Prefix of the `<type>=true` labels of additional container runtimes.
pub const CONTAINER_RUNTIME_PREFIX: &str = "containerruntime.worker.gardener.cloud/";

/// Cluster-autoscaler annotation: `scaleDownUtilizationThreshold`.
pub const CA_SCALE_DOWN_UTILIZATION_THRESHOLD: &str =
    "autoscaler.gardener.cloud/scale-down-utilization-threshold";
/// Cluster-autoscaler annotation: `scaleDownGpuUtilizationThreshold`.
pub const CA_SCALE_DOWN_GPU_UTILIZATION_THRESHOLD: &str =
    "autoscaler.gardener.cloud/scale-down-gpu-utilization-threshold";
/// Cluster-autoscaler annotation: `scaleDownUnneededTime`.
pub const CA_SCALE_DOWN_UNNEEDED_TIME: &str = "autoscaler.gardener.cloud/scale-down-unneeded-time";
/// Cluster-autoscaler annotation: `scaleDownUnreadyTime`.
pub const CA_SCALE_DOWN_UNREADY_TIME: &str = "autoscaler.gardener.cloud/scale-down-unready-time";
/// Cluster-autoscaler annotation: `maxNodeProvisionTime`.
pub const CA_MAX_NODE_PROVISION_TIME: &str = "autoscaler.gardener.cloud/max-node-provision-time";

/// Every cluster-autoscaler annotation, in upstream's order.
pub const CLUSTER_AUTOSCALER_ANNOTATIONS: [&str; 5] = [
    CA_SCALE_DOWN_UTILIZATION_THRESHOLD,
    CA_SCALE_DOWN_GPU_UTILIZATION_THRESHOLD,
    CA_SCALE_DOWN_UNNEEDED_TIME,
    CA_SCALE_DOWN_UNREADY_TIME,
    CA_MAX_NODE_PROVISION_TIME,
];

/// What gardenlet knows about a pool when it labels its nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeLabelInputs {
    /// The user's labels of the Shoot's pool.
    pub user_labels: BTreeMap<String, String>,
    /// Pool name.
    pub pool: String,
    /// CPU architecture.
    pub architecture: String,
    /// Whether node-local DNS is enabled for the shoot.
    pub node_local_dns: bool,
    /// Whether system components may run on the pool (`systemComponents.allow`).
    pub system_components_allowed: bool,
    /// The gardener-node-agent secret name, if known.
    pub node_agent_secret_name: Option<String>,
    /// The CRI name, `containerd` by default.
    pub cri_name: Option<String>,
    /// Additional container runtime types.
    pub container_runtimes: Vec<String>,
}

/// The labels of a pool's nodes as gardenlet writes them into the Worker
/// (§4.1): the user's labels plus the gardener-managed ones, which win.
pub fn pool_node_labels(inputs: &NodeLabelInputs) -> BTreeMap<String, String> {
    let mut labels = inputs.user_labels.clone();
    let mut set = |k: &str, v: &str| {
        labels.insert(k.to_string(), v.to_string());
    };
    set(NODE_ROLE, "node");
    set(ARCH, &inputs.architecture);
    set(
        NODE_LOCAL_DNS,
        if inputs.node_local_dns {
            "true"
        } else {
            "false"
        },
    );
    if inputs.system_components_allowed {
        set(SYSTEM_COMPONENTS, "true");
    }
    set(WORKER_POOL, &inputs.pool);
    set(WORKER_POOL_LEGACY, &inputs.pool);
    if let Some(name) = &inputs.node_agent_secret_name {
        set(NODE_AGENT_SECRET_NAME, name);
    }
    set(CRI_NAME, inputs.cri_name.as_deref().unwrap_or("containerd"));
    for runtime in &inputs.container_runtimes {
        set(&format!("{CONTAINER_RUNTIME_PREFIX}{runtime}"), "true");
    }
    labels
}

/// Labels in the `kubernetes.io`/`k8s.io` namespaces that the NodeRestriction
/// admission plugin lets a kubelet set on its own Node.
const KUBELET_ALLOWED_LABELS: [&str; 12] = [
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "node.kubernetes.io/exclude-from-external-load-balancers",
];

/// Label namespaces whose labels a kubelet may always set.
const KUBELET_ALLOWED_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Whether a kubelet may set `key` on its Node under NodeRestriction. Only
/// these labels go into `--node-labels`; the others must be applied by the
/// machine controller once the node exists (seed 002).
pub fn kubelet_may_set_label(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return true;
    };
    let in_namespace = |ns: &str| prefix == ns || prefix.ends_with(&format!(".{ns}"));
    if in_namespace("node-restriction.kubernetes.io") {
        return false;
    }
    if !in_namespace("kubernetes.io") && !in_namespace("k8s.io") {
        return true;
    }
    KUBELET_ALLOWED_LABELS.contains(&key)
        || KUBELET_ALLOWED_NAMESPACES.iter().any(|ns| in_namespace(ns))
}

/// The subset of `labels` a kubelet may register itself with.
pub fn kubelet_node_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| kubelet_may_set_label(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
