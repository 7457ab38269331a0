//! [`NodeSpec`]: what a simulated VM's kubelet registers.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{NodeAddress, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

/// One simulated node: the Node it registers and how long its VM boots.
///
/// Serializable so that a provider can persist it with the VM and register
/// the same node again after a restart. `boot_delay` is left out of the
/// serialized form because it only makes sense relative to when the VM was
/// started; whoever restores a spec sets the remaining delay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    /// Node name (the MCM convention for the local provider: the machine
    /// name).
    pub name: String,
    /// `spec.providerID`.
    pub provider_id: String,
    /// Labels the kubelet registers with. The simulator adds
    /// `kubernetes.io/hostname`, `kubernetes.io/os` and `kubernetes.io/arch`
    /// when they are missing.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations the kubelet registers with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Taints the kubelet registers with (`--register-with-taints`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// `status.capacity`. When empty the node gets 2 CPUs, 8 GiB of memory
    /// and 50 GiB of ephemeral storage; `pods: 110` is added when missing.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    /// `status.allocatable`; when empty, the capacity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,
    /// `status.addresses`. A `Hostname` address with the node name is added
    /// when none is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<NodeAddress>,
    /// `status.nodeInfo.kubeletVersion` (and kube-proxy version), e.g.
    /// `v1.31.2`; when unset, the simulator's
    /// [`crate::SimConfig::kubelet_version`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_version: Option<String>,
    /// Time from registration until the node turns `Ready`: the VM's boot.
    /// Until then the node reports `Ready=False` and runs no pods.
    #[serde(skip)]
    pub boot_delay: Duration,
}

impl NodeSpec {
    /// A node with a name and providerID and everything else defaulted.
    pub fn new(name: &str, provider_id: &str) -> NodeSpec {
        NodeSpec {
            name: name.to_string(),
            provider_id: provider_id.to_string(),
            ..NodeSpec::default()
        }
    }

    /// The `InternalIP` address, if any: the host IP of its pods.
    pub fn internal_ip(&self) -> Option<&str> {
        self.addresses
            .iter()
            .find(|a| a.type_ == "InternalIP")
            .map(|a| a.address.as_str())
    }
}
