//! The VM inventory: one [`VmRecord`] per VM, persisted as a ConfigMap in
//! the control cluster and indexed in memory.
//!
//! The ConfigMaps are the local "cloud"'s database. Keeping them in the
//! control cluster API (rather than a file) means the inventory survives a
//! controller restart and works the same on a real cluster. The provider
//! loads them once at start and afterwards writes through: it is the only
//! writer of its VMs' records, as a cloud API is the only writer of its own
//! database, so the in-memory index never needs to re-read them.
//!
//! A record's ConfigMap is named `localvm-<vm-id>` and labelled so that a
//! selector finds every VM of a provider, cluster, class or machine:
//!
//! | label | value |
//! |---|---|
//! | [`LABEL_VM`] | `"true"` |
//! | [`LABEL_OWNER`] | the provider instance (its default cluster name): whose simulator runs the node |
//! | [`LABEL_CLUSTER`] | the VM's cluster tag: what `ListMachines` filters on |
//! | [`LABEL_CLASS`] | the machine class name |
//! | [`LABEL_MACHINE`] | the machine name |
//!
//! Values that are not valid label values are replaced by a hash
//! ([`label_value`]); the data keys always hold the full values.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use nodesim::NodeSpec;

use crate::spec::is_label_value;

/// Label marking a ConfigMap as a local VM record.
pub const LABEL_VM: &str = "provider.trellis.dev/local-vm";
/// Label naming the provider instance that runs the VM's node.
pub const LABEL_OWNER: &str = "provider.trellis.dev/owner";
/// Label naming the VM's cluster.
pub const LABEL_CLUSTER: &str = "provider.trellis.dev/cluster";
/// Label naming the VM's machine class.
pub const LABEL_CLASS: &str = "provider.trellis.dev/class";
/// Label naming the VM's machine.
pub const LABEL_MACHINE: &str = "provider.trellis.dev/machine";
/// Prefix of a record's ConfigMap name.
pub const NAME_PREFIX: &str = "localvm-";
/// Scheme of the local provider's providerIDs.
pub const PROVIDER_ID_PREFIX: &str = "local:///";

/// `s` if it is a valid label value, else a stable hash of it.
pub fn label_value(s: &str) -> String {
    if is_label_value(s) {
        s.to_string()
    } else {
        let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("h-{h:016x}")
    }
}

/// `local:///<zone>/<vm-id>`.
pub fn provider_id(zone: &str, vm_id: &str) -> String {
    format!("{PROVIDER_ID_PREFIX}{zone}/{vm_id}")
}

/// The VM ID of a local providerID, if it is one.
pub fn vm_id_of(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix(PROVIDER_ID_PREFIX)?;
    let (zone, id) = rest.split_once('/')?;
    (!zone.is_empty() && !id.is_empty() && !id.contains('/')).then_some(id)
}

/// The `n`th address of the VM network 10.250.0.0/15 and up, `n >= 1`.
pub fn ip_for_index(n: u32) -> String {
    let n = n + (250 << 16);
    format!("10.{}.{}.{}", n >> 16, (n >> 8) & 0xff, n & 0xff)
}

/// The index of an address made by [`ip_for_index`].
pub fn index_of_ip(ip: &str) -> Option<u32> {
    let o: Vec<u32> = ip
        .split('.')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    match o.as_slice() {
        [10, a, b, c] if *a >= 250 && *b < 256 && *c < 256 => {
            Some(((a - 250) << 16) | (b << 8) | c)
        }
        _ => None,
    }
}

/// One VM.
#[derive(Clone, Debug, PartialEq)]
pub struct VmRecord {
    /// Random ID; the last segment of the providerID.
    pub vm_id: String,
    /// Namespace of the record's ConfigMap (the class's).
    pub namespace: String,
    /// The machine it was created for.
    pub machine_name: String,
    /// `local:///<zone>/<vm-id>`.
    pub provider_id: String,
    /// The node its kubelet registers.
    pub node_name: String,
    /// Zone.
    pub zone: String,
    /// Cluster tag.
    pub cluster: String,
    /// Machine class name.
    pub class: String,
    /// When the VM was created.
    pub created_at: Timestamp,
    /// The VM's address.
    pub internal_ip: String,
    /// The class's boot delay at creation.
    pub boot_delay: Duration,
    /// VM tags.
    pub tags: BTreeMap<String, String>,
    /// What its kubelet registers.
    pub node: NodeSpec,
}

impl VmRecord {
    /// Name of the record's ConfigMap.
    pub fn config_map_name(&self) -> String {
        format!("{NAME_PREFIX}{}", self.vm_id)
    }

    /// The node spec to register now: the boot delay left is what remains
    /// of the original one since creation, so a restart does not reboot a
    /// VM that has already booted.
    pub fn node_spec_at(&self, now: Timestamp) -> NodeSpec {
        let since = nodesim::status::elapsed(now, self.created_at);
        NodeSpec {
            boot_delay: self.boot_delay.saturating_sub(since),
            ..self.node.clone()
        }
    }

    /// The record as a ConfigMap, owned by provider instance `owner`.
    pub fn to_config_map(&self, owner: &str) -> ConfigMap {
        let labels = BTreeMap::from([
            (LABEL_VM.to_string(), "true".to_string()),
            (LABEL_OWNER.to_string(), label_value(owner)),
            (LABEL_CLUSTER.to_string(), label_value(&self.cluster)),
            (LABEL_CLASS.to_string(), label_value(&self.class)),
            (LABEL_MACHINE.to_string(), label_value(&self.machine_name)),
        ]);
        let data = BTreeMap::from([
            ("machineName".to_string(), self.machine_name.clone()),
            ("providerID".to_string(), self.provider_id.clone()),
            ("nodeName".to_string(), self.node_name.clone()),
            ("zone".to_string(), self.zone.clone()),
            ("cluster".to_string(), self.cluster.clone()),
            ("class".to_string(), self.class.clone()),
            ("createdAt".to_string(), self.created_at.to_string()),
            ("internalIP".to_string(), self.internal_ip.clone()),
            (
                "bootDelay".to_string(),
                api::format_duration(self.boot_delay),
            ),
            ("tags".to_string(), tags_json(&self.tags)),
            (
                "nodeSpec".to_string(),
                serde_json::to_string(&self.node).expect("a node spec serializes"),
            ),
        ]);
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(self.config_map_name()),
                namespace: Some(self.namespace.clone()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..ConfigMap::default()
        }
    }

    /// Reads a record back; the error says what is wrong with it.
    pub fn from_config_map(cm: &ConfigMap) -> Result<VmRecord, String> {
        let name = cm.metadata.name.as_deref().unwrap_or_default();
        let vm_id = name
            .strip_prefix(NAME_PREFIX)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| format!("{name:?} is not named {NAME_PREFIX}<vm-id>"))?;
        let empty = BTreeMap::new();
        let data = cm.data.as_ref().unwrap_or(&empty);
        let get = |k: &str| {
            data.get(k)
                .cloned()
                .ok_or_else(|| format!("{name}: data.{k} is missing"))
        };
        let provider_id = get("providerID")?;
        if vm_id_of(&provider_id) != Some(vm_id) {
            return Err(format!(
                "{name}: providerID {provider_id:?} does not end in the VM ID"
            ));
        }
        let created_at = get("createdAt")?
            .parse::<Timestamp>()
            .map_err(|e| format!("{name}: data.createdAt: {e}"))?;
        let boot_delay = api::parse_duration(&get("bootDelay")?)
            .ok_or_else(|| format!("{name}: data.bootDelay is not a duration"))?;
        let tags =
            serde_json::from_str(&get("tags")?).map_err(|e| format!("{name}: data.tags: {e}"))?;
        let node: NodeSpec = serde_json::from_str(&get("nodeSpec")?)
            .map_err(|e| format!("{name}: data.nodeSpec: {e}"))?;
        Ok(VmRecord {
            vm_id: vm_id.to_string(),
            namespace: cm.metadata.namespace.clone().unwrap_or_default(),
            machine_name: get("machineName")?,
            provider_id,
            node_name: get("nodeName")?,
            zone: get("zone")?,
            cluster: get("cluster")?,
            class: get("class")?,
            created_at,
            internal_ip: get("internalIP")?,
            boot_delay,
            tags,
            node,
        })
    }
}

/// Tags as stored in a record.
pub fn tags_json(tags: &BTreeMap<String, String>) -> String {
    serde_json::to_string(tags).expect("string maps serialize")
}

/// The in-memory index of one provider instance's VMs.
#[derive(Default)]
pub struct Inventory {
    by_id: HashMap<String, VmRecord>,
    /// (cluster, machine name) → VM ID.
    by_machine: HashMap<(String, String), String>,
    used_ips: HashSet<u32>,
    next_ip: u32,
    /// (cluster, machine name) of creations in flight, so that two calls
    /// for one machine cannot both create a VM.
    pub creating: HashSet<(String, String)>,
}

impl Inventory {
    /// Adds or replaces a record.
    pub fn insert(&mut self, vm: VmRecord) {
        if let Some(i) = index_of_ip(&vm.internal_ip) {
            self.used_ips.insert(i);
        }
        self.by_machine.insert(
            (vm.cluster.clone(), vm.machine_name.clone()),
            vm.vm_id.clone(),
        );
        self.by_id.insert(vm.vm_id.clone(), vm);
    }

    /// Removes a record.
    pub fn remove(&mut self, vm_id: &str) -> Option<VmRecord> {
        let vm = self.by_id.remove(vm_id)?;
        let key = (vm.cluster.clone(), vm.machine_name.clone());
        if self.by_machine.get(&key).map(String::as_str) == Some(vm_id) {
            self.by_machine.remove(&key);
        }
        if let Some(i) = index_of_ip(&vm.internal_ip) {
            self.used_ips.remove(&i);
        }
        Some(vm)
    }

    /// The VM of `cluster` behind a machine: by its providerID when it has
    /// one (a stale one finds nothing), else by its name.
    pub fn find(&self, cluster: &str, machine_name: &str, provider_id: &str) -> Option<&VmRecord> {
        if !provider_id.is_empty() {
            return self
                .by_id
                .get(vm_id_of(provider_id)?)
                .filter(|vm| vm.cluster == cluster);
        }
        let id = self
            .by_machine
            .get(&(cluster.to_string(), machine_name.to_string()))?;
        self.by_id.get(id)
    }

    /// VMs whose node has this name.
    pub fn by_node(&self, node_name: &str) -> Vec<&VmRecord> {
        self.by_id
            .values()
            .filter(|vm| vm.node_name == node_name)
            .collect()
    }

    /// providerID → machine name of every VM of `cluster`.
    pub fn list(&self, cluster: &str) -> BTreeMap<String, String> {
        self.by_id
            .values()
            .filter(|vm| vm.cluster == cluster)
            .map(|vm| (vm.provider_id.clone(), vm.machine_name.clone()))
            .collect()
    }

    /// Every VM.
    pub fn all(&self) -> impl Iterator<Item = &VmRecord> {
        self.by_id.values()
    }

    /// Replaces a VM's tags.
    pub fn set_tags(&mut self, vm_id: &str, tags: BTreeMap<String, String>) {
        if let Some(vm) = self.by_id.get_mut(vm_id) {
            vm.tags = tags;
        }
    }

    /// Reserves a free VM address; [`Inventory::release_ip`] undoes it if
    /// the creation fails.
    pub fn allocate_ip(&mut self) -> String {
        loop {
            self.next_ip = self.next_ip % (6 << 16) + 1;
            if self.used_ips.insert(self.next_ip) {
                return ip_for_index(self.next_ip);
            }
        }
    }

    /// Frees an address reserved by [`Inventory::allocate_ip`].
    pub fn release_ip(&mut self, ip: &str) {
        if let Some(i) = index_of_ip(ip) {
            self.used_ips.remove(&i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, cluster: &str, machine: &str) -> VmRecord {
        VmRecord {
            vm_id: id.into(),
            namespace: "default".into(),
            machine_name: machine.into(),
            provider_id: provider_id("zone-a", id),
            node_name: machine.into(),
            zone: "zone-a".into(),
            cluster: cluster.into(),
            class: "c1".into(),
            created_at: Timestamp::from_second(1_700_000_000).unwrap(),
            internal_ip: ip_for_index(1),
            boot_delay: Duration::from_secs(3),
            tags: BTreeMap::from([("team".into(), "a".into())]),
            node: NodeSpec::new(machine, &provider_id("zone-a", id)),
        }
    }

    #[test]
    fn records_round_trip_through_config_maps() {
        let vm = record("abc123", "shoot--a", "m1");
        let cm = vm.to_config_map("owner-1");
        assert_eq!(cm.metadata.name.as_deref(), Some("localvm-abc123"));
        let labels = cm.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[LABEL_VM], "true");
        assert_eq!(labels[LABEL_CLUSTER], "shoot--a");
        assert_eq!(labels[LABEL_OWNER], "owner-1");
        assert_eq!(VmRecord::from_config_map(&cm), Ok(vm));
    }

    #[test]
    fn broken_records_are_reported() {
        let good = record("abc123", "a", "m1").to_config_map("o");
        let mut renamed = good.clone();
        renamed.metadata.name = Some("other".into());
        let mut no_id = good.clone();
        no_id.data.as_mut().unwrap().remove("providerID");
        let mut bad_time = good.clone();
        bad_time
            .data
            .as_mut()
            .unwrap()
            .insert("createdAt".into(), "yesterday".into());
        for (cm, want) in [
            (renamed, "is not named"),
            (no_id, "providerID is missing"),
            (bad_time, "createdAt"),
        ] {
            let err = VmRecord::from_config_map(&cm).unwrap_err();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn provider_ids_and_label_values() {
        assert_eq!(provider_id("default", "x1"), "local:///default/x1");
        assert_eq!(vm_id_of("local:///default/x1"), Some("x1"));
        for bad in [
            "aws:///x/y",
            "local:///x1",
            "local:////x1",
            "local:///z/a/b",
        ] {
            assert_eq!(vm_id_of(bad), None, "{bad}");
        }
        assert_eq!(label_value("m1"), "m1");
        let long = "m".repeat(80);
        assert_eq!(label_value(&long), label_value(&long));
        assert!(label_value(&long).starts_with("h-"));
    }

    #[test]
    fn ips_round_trip_and_are_reused_after_release() {
        for n in [1, 255, 256, 70_000] {
            assert_eq!(index_of_ip(&ip_for_index(n)), Some(n));
        }
        assert_eq!(ip_for_index(1), "10.250.0.1");
        let mut inv = Inventory::default();
        let a = inv.allocate_ip();
        let b = inv.allocate_ip();
        assert_ne!(a, b);
        inv.release_ip(&a);
        inv.insert(record("x", "c", "m"));
        assert!(inv.used_ips.contains(&1));
    }

    #[test]
    fn find_by_name_or_provider_id_within_a_cluster() {
        let mut inv = Inventory::default();
        let vm = record("id1", "a", "m1");
        inv.insert(vm.clone());
        assert_eq!(inv.find("a", "m1", ""), Some(&vm));
        assert_eq!(inv.find("a", "other", &vm.provider_id), Some(&vm));
        assert_eq!(inv.find("b", "m1", ""), None);
        assert_eq!(inv.find("b", "m1", &vm.provider_id), None);
        assert_eq!(inv.find("a", "m1", "local:///zone-a/stale"), None);
        assert_eq!(inv.list("a").len(), 1);
        assert!(inv.list("b").is_empty());
        inv.remove("id1");
        assert_eq!(inv.find("a", "m1", ""), None);
    }

    #[test]
    fn remaining_boot_delay_after_restart() {
        let vm = record("id1", "a", "m1");
        let at = |s: i64| Timestamp::from_second(1_700_000_000 + s).unwrap();
        assert_eq!(vm.node_spec_at(at(1)).boot_delay, Duration::from_secs(2));
        assert_eq!(vm.node_spec_at(at(10)).boot_delay, Duration::ZERO);
    }
}
