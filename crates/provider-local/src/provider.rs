//! [`LocalProvider`]: the driver contract over simulated nodes.
//!
//! Each driver call checks the armed failpoints first, then the class
//! (provider name and `providerSpec`), then acts on the inventory: the
//! ConfigMap write comes first and the in-memory index and the simulator
//! follow, so a crash in between leaves a record that the next start
//! restores rather than a VM nobody knows about.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use api::{Machine, MachineClass};
use async_trait::async_trait;
use driver::{
    Call, Code, CreateMachineRequest, CreateMachineResponse, DeleteMachineRequest,
    DeleteMachineResponse, Driver, DriverError, Failpoints,
    GenerateMachineClassForMigrationRequest, GenerateMachineClassForMigrationResponse,
    GetMachineStatusRequest, GetMachineStatusResponse, GetVolumeIDsRequest, GetVolumeIDsResponse,
    InitializeMachineRequest, InitializeMachineResponse, ListMachinesRequest, ListMachinesResponse,
    UpdateMachineRequest, UpdateMachineResponse,
};
use k8s_openapi::api::core::v1::{ConfigMap, NodeAddress, PersistentVolumeSpec};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use nodesim::{NodeSimulator, SimConfig};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::broadcast;
use tracing::{info, warn};

use crate::error::{Error, code_for_status};
use crate::inventory::{
    Inventory, LABEL_OWNER, LABEL_VM, VmRecord, label_value, provider_id, tags_json,
};
use crate::node::node_spec;
use crate::spec::ProviderSpec;

/// The `provider` name of classes this driver serves.
pub const PROVIDER_NAME: &str = "local";

/// The local provider: VMs are simulated nodes in the target cluster, and
/// the VM inventory is kept as ConfigMaps in the control cluster. Cheap to
/// clone; clones share everything.
#[derive(Clone)]
pub struct LocalProvider {
    inner: Arc<Inner>,
}

struct Inner {
    control: Client,
    sim: NodeSimulator,
    /// This instance's name and the default cluster tag.
    owner: String,
    inventory: Mutex<Inventory>,
    failpoints: Arc<Failpoints>,
    /// Failures served so far by the `failCreate` fault, per (class
    /// namespace/name, machine name).
    create_failures: Mutex<HashMap<(String, String), u32>>,
}

/// The namespace of a VM's record: the class's, else the machine's.
fn record_namespace(class: &MachineClass, machine: &Machine) -> String {
    class
        .metadata
        .namespace
        .clone()
        .or_else(|| machine.metadata.namespace.clone())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

fn machine_name(machine: &Machine) -> Result<String, DriverError> {
    machine
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| DriverError::new(Code::InvalidArgument, "the machine has no name"))
}

fn addresses(vm: &VmRecord) -> Vec<NodeAddress> {
    vec![
        NodeAddress {
            type_: "InternalIP".to_string(),
            address: vm.internal_ip.clone(),
        },
        NodeAddress {
            type_: "Hostname".to_string(),
            address: vm.node_name.clone(),
        },
    ]
}

/// A driver error for a failed API call, with the code that makes the
/// controller retry sensibly (see [`code_for_status`]).
fn api_error(what: &str, e: &kube::Error) -> DriverError {
    let code = match e {
        kube::Error::Api(s) => code_for_status(s.code),
        // Transport errors: the API could not be reached.
        _ => Code::Unavailable,
    };
    DriverError::new(code, format!("{what}: {e}"))
}

/// The IDs `GetVolumeIDs` reports: CSI volume handles (of any driver, since
/// a local cluster may use any CSI driver) and host paths. Other sources
/// belong to no VM and are left out.
pub fn volume_ids(specs: &[PersistentVolumeSpec]) -> Vec<String> {
    specs
        .iter()
        .filter_map(|s| {
            s.csi
                .as_ref()
                .map(|c| c.volume_handle.clone())
                .or_else(|| s.host_path.as_ref().map(|h| h.path.clone()))
        })
        .collect()
}

impl LocalProvider {
    /// Starts a provider instance named `cluster_name` (also the cluster tag
    /// of VMs whose class names none) with the simulator's default settings.
    /// See [`LocalProvider::with_config`].
    pub async fn new(
        control: Client,
        target: Client,
        cluster_name: &str,
    ) -> Result<LocalProvider, Error> {
        Self::with_config(control, target, cluster_name, SimConfig::default()).await
    }

    /// Starts a provider instance: loads every VM record it owns from the
    /// control cluster and registers their nodes with a new simulator on
    /// the target cluster, so VMs survive a controller restart. Records that
    /// cannot be read are logged and skipped (a person has edited them);
    /// failing to list at all is an error.
    pub async fn with_config(
        control: Client,
        target: Client,
        cluster_name: &str,
        sim_config: SimConfig,
    ) -> Result<LocalProvider, Error> {
        let sim = NodeSimulator::new(target, sim_config);
        let records: Api<ConfigMap> = Api::all(control.clone());
        let selector = format!(
            "{LABEL_VM}=true,{LABEL_OWNER}={}",
            label_value(cluster_name)
        );
        let list = records
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(Error::LoadInventory)?;
        let now = Timestamp::now();
        let mut inventory = Inventory::default();
        for cm in &list.items {
            match VmRecord::from_config_map(cm) {
                Ok(vm) => {
                    sim.register(vm.node_spec_at(now));
                    inventory.insert(vm);
                }
                Err(problem) => warn!(%problem, "skipping unreadable local VM record"),
            }
        }
        info!(
            provider = cluster_name,
            vms = inventory.all().count(),
            "local provider started"
        );
        let vanished = sim.subscribe_vanished();
        let inner = Arc::new(Inner {
            control,
            sim,
            owner: cluster_name.to_string(),
            inventory: Mutex::new(inventory),
            failpoints: Arc::new(Failpoints::new()),
            create_failures: Mutex::new(HashMap::new()),
        });
        tokio::spawn(follow_vanished(Arc::downgrade(&inner), vanished));
        Ok(LocalProvider { inner })
    }

    /// The failpoints every driver call consults first; arm them with
    /// [`driver::FaultInjector::fail_next`].
    pub fn failpoints(&self) -> Arc<Failpoints> {
        self.inner.failpoints.clone()
    }

    /// The node simulator running this provider's VMs.
    pub fn simulator(&self) -> &NodeSimulator {
        &self.inner.sim
    }

    /// Fault: the VMs behind a node vanish, as if deleted behind the
    /// provider's back. Their records are deleted and their kubelets stop;
    /// the Node object stays and goes `Unknown`, and `GetMachineStatus`
    /// answers `NotFound`. The same happens when the Node gets the
    /// [`nodesim::faults::VANISH`] annotation. Returns how many VMs vanished.
    pub async fn vanish(&self, node_name: &str) -> Result<usize, Error> {
        self.inner.vanish(node_name).await
    }

    /// providerID → machine name of every VM of this instance, all clusters.
    pub fn vms(&self) -> std::collections::BTreeMap<String, String> {
        let inv = self.inner.inventory.lock();
        inv.all()
            .map(|vm| (vm.provider_id.clone(), vm.machine_name.clone()))
            .collect()
    }
}

/// Drops the records of VMs that vanished through the node annotation.
async fn follow_vanished(inner: Weak<Inner>, mut events: broadcast::Receiver<String>) {
    loop {
        match events.recv().await {
            Ok(node) => {
                let Some(inner) = inner.upgrade() else {
                    return;
                };
                if let Err(e) = inner.vanish(&node).await {
                    warn!(error = %e, node, "dropping the record of a vanished VM");
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                warn!(missed = n, "vanished-VM events were dropped");
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

impl Inner {
    fn records(&self, namespace: &str) -> Api<ConfigMap> {
        Api::namespaced(self.control.clone(), namespace)
    }

    /// Checks the class and parses its spec; returns it with the cluster
    /// its VMs belong to, after the class's simulated call delay.
    async fn class_context(
        &self,
        class: &MachineClass,
    ) -> Result<(ProviderSpec, String), DriverError> {
        if !class.provider.is_empty() && class.provider != PROVIDER_NAME {
            return Err(DriverError::new(
                Code::InvalidArgument,
                format!(
                    "machine class {:?} is for provider {:?}, not {PROVIDER_NAME:?}",
                    class.metadata.name.as_deref().unwrap_or_default(),
                    class.provider
                ),
            ));
        }
        let spec = ProviderSpec::parse(&class.provider_spec)
            .map_err(|e| DriverError::new(Code::InvalidArgument, e))?;
        if !spec.call_delay.is_zero() {
            tokio::time::sleep(spec.call_delay).await;
        }
        let cluster = spec.cluster().unwrap_or(&self.owner).to_string();
        Ok((spec, cluster))
    }

    fn find(&self, cluster: &str, machine: &Machine) -> Option<VmRecord> {
        let name = machine.metadata.name.as_deref().unwrap_or_default();
        self.inventory
            .lock()
            .find(cluster, name, &machine.spec.provider_id)
            .cloned()
    }

    fn find_or_not_found(&self, cluster: &str, machine: &Machine) -> Result<VmRecord, DriverError> {
        self.find(cluster, machine).ok_or_else(|| {
            DriverError::new(
                Code::NotFound,
                format!(
                    "no VM backs machine {:?} (providerID {:?}) in cluster {cluster:?}",
                    machine.metadata.name.as_deref().unwrap_or_default(),
                    machine.spec.provider_id
                ),
            )
        })
    }

    /// Serves one failure of an armed `failCreate` fault, if any are left
    /// for this machine.
    fn take_create_failure(
        &self,
        spec: &ProviderSpec,
        class: &MachineClass,
        machine: &str,
    ) -> Result<(), DriverError> {
        let Some(f) = spec.fail_create else {
            return Ok(());
        };
        let class_key = format!(
            "{}/{}",
            class.metadata.namespace.as_deref().unwrap_or_default(),
            class.metadata.name.as_deref().unwrap_or_default()
        );
        let mut served = self.create_failures.lock();
        let n = served.entry((class_key, machine.to_string())).or_default();
        if *n >= f.times {
            return Ok(());
        }
        *n += 1;
        Err(DriverError::new(
            f.code,
            format!(
                "failCreate fault: creating {machine} fails with {} ({} of {})",
                f.code, n, f.times
            ),
        ))
    }

    async fn delete_record(&self, vm: &VmRecord) -> Result<(), kube::Error> {
        match self
            .records(&vm.namespace)
            .delete(&vm.config_map_name(), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 404) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn vanish(&self, node_name: &str) -> Result<usize, Error> {
        let vms: Vec<VmRecord> = self
            .inventory
            .lock()
            .by_node(node_name)
            .into_iter()
            .cloned()
            .collect();
        for vm in &vms {
            self.delete_record(vm)
                .await
                .map_err(|source| Error::DeleteRecord {
                    vm: vm.vm_id.clone(),
                    source,
                })?;
            self.inventory.lock().remove(&vm.vm_id);
        }
        self.sim.deregister(node_name);
        Ok(vms.len())
    }
}

#[async_trait]
impl Driver for LocalProvider {
    /// Finds the machine's VM (by providerID, else by name) or creates one:
    /// record first, then the simulated node. A machine whose creation is
    /// already in flight answers `Aborted`, so that two concurrent calls
    /// cannot make two VMs.
    async fn create_machine(
        &self,
        req: CreateMachineRequest<'_>,
    ) -> Result<CreateMachineResponse, DriverError> {
        let inner = &self.inner;
        inner.failpoints.check(Call::CreateMachine)?;
        let (spec, cluster) = inner.class_context(req.machine_class).await?;
        let name = machine_name(req.machine)?;
        inner.take_create_failure(&spec, req.machine_class, &name)?;

        let key = (cluster.clone(), name.clone());
        let ip = {
            let mut inv = inner.inventory.lock();
            if let Some(vm) = inv.find(&cluster, &name, &req.machine.spec.provider_id) {
                return Ok(CreateMachineResponse {
                    provider_id: vm.provider_id.clone(),
                    node_name: vm.node_name.clone(),
                    last_known_state: String::new(),
                    addresses: addresses(vm),
                });
            }
            if !inv.creating.insert(key.clone()) {
                return Err(DriverError::new(
                    Code::Aborted,
                    format!("a VM for machine {name} is being created"),
                ));
            }
            inv.allocate_ip()
        };

        let now = Timestamp::now();
        let vm_id = format!("{:016x}", rand::random::<u64>());
        let pid = provider_id(spec.zone_or_default(), &vm_id);
        let mut node = node_spec(
            req.machine,
            req.machine_class,
            &name,
            &pid,
            spec.zone.as_deref(),
            &ip,
        );
        node.kubelet_version = crate::node::kubelet_version(req.secret);
        let vm = VmRecord {
            vm_id,
            namespace: record_namespace(req.machine_class, req.machine),
            machine_name: name.clone(),
            provider_id: pid,
            node_name: name.clone(),
            zone: spec.zone_or_default().to_string(),
            cluster,
            class: req.machine_class.metadata.name.clone().unwrap_or_default(),
            created_at: now,
            internal_ip: ip.clone(),
            boot_delay: spec.boot_delay,
            tags: spec.tags.clone(),
            node,
        };
        let written = inner
            .records(&vm.namespace)
            .create(&PostParams::default(), &vm.to_config_map(&inner.owner))
            .await;
        {
            let mut inv = inner.inventory.lock();
            inv.creating.remove(&key);
            match &written {
                Ok(_) => inv.insert(vm.clone()),
                Err(_) => inv.release_ip(&ip),
            }
        }
        written.map_err(|e| api_error(&format!("recording VM for machine {name}"), &e))?;
        inner.sim.register(vm.node_spec_at(now));
        Ok(CreateMachineResponse {
            addresses: addresses(&vm),
            provider_id: vm.provider_id,
            node_name: vm.node_name,
            last_known_state: String::new(),
        })
    }

    /// The VM needs no setup after creation, so this only confirms the VM
    /// exists; `GetMachineStatus` never answers `Uninitialized`.
    async fn initialize_machine(
        &self,
        req: InitializeMachineRequest<'_>,
    ) -> Result<InitializeMachineResponse, DriverError> {
        let inner = &self.inner;
        inner.failpoints.check(Call::InitializeMachine)?;
        let (_, cluster) = inner.class_context(req.machine_class).await?;
        let vm = inner.find_or_not_found(&cluster, req.machine)?;
        Ok(InitializeMachineResponse {
            addresses: addresses(&vm),
            provider_id: vm.provider_id,
            node_name: vm.node_name,
        })
    }

    /// Deletes the record and stops the node; a missing VM is `Ok`. The
    /// Node object is left to the machine controller.
    async fn delete_machine(
        &self,
        req: DeleteMachineRequest<'_>,
    ) -> Result<DeleteMachineResponse, DriverError> {
        let inner = &self.inner;
        inner.failpoints.check(Call::DeleteMachine)?;
        let (_, cluster) = inner.class_context(req.machine_class).await?;
        let Some(vm) = inner.find(&cluster, req.machine) else {
            return Ok(DeleteMachineResponse::default());
        };
        inner
            .delete_record(&vm)
            .await
            .map_err(|e| api_error(&format!("deleting VM {}", vm.vm_id), &e))?;
        inner.inventory.lock().remove(&vm.vm_id);
        inner.sim.deregister(&vm.node_name);
        Ok(DeleteMachineResponse::default())
    }

    /// `Ok` with the VM's IDs and addresses, or `NotFound`.
    async fn get_machine_status(
        &self,
        req: GetMachineStatusRequest<'_>,
    ) -> Result<GetMachineStatusResponse, DriverError> {
        let inner = &self.inner;
        inner.failpoints.check(Call::GetMachineStatus)?;
        let (_, cluster) = inner.class_context(req.machine_class).await?;
        let vm = inner.find_or_not_found(&cluster, req.machine)?;
        Ok(GetMachineStatusResponse {
            addresses: addresses(&vm),
            provider_id: vm.provider_id,
            node_name: vm.node_name,
        })
    }

    /// The VMs of the class's cluster (all classes of that cluster, as a
    /// cloud lists by cluster tag).
    async fn list_machines(
        &self,
        req: ListMachinesRequest<'_>,
    ) -> Result<ListMachinesResponse, DriverError> {
        let inner = &self.inner;
        inner.failpoints.check(Call::ListMachines)?;
        let (_, cluster) = inner.class_context(req.machine_class).await?;
        Ok(ListMachinesResponse {
            machine_list: inner.inventory.lock().list(&cluster),
        })
    }

    /// See [`volume_ids`].
    async fn get_volume_ids(
        &self,
        req: GetVolumeIDsRequest<'_>,
    ) -> Result<GetVolumeIDsResponse, DriverError> {
        self.inner.failpoints.check(Call::GetVolumeIds)?;
        Ok(GetVolumeIDsResponse {
            volume_ids: volume_ids(req.pv_specs),
        })
    }

    /// Not offered: the local provider never had provider-specific classes.
    async fn generate_machine_class_for_migration(
        &self,
        _req: GenerateMachineClassForMigrationRequest<'_>,
    ) -> Result<GenerateMachineClassForMigrationResponse, DriverError> {
        self.inner
            .failpoints
            .check(Call::GenerateMachineClassForMigration)?;
        Err(DriverError::unimplemented(
            Call::GenerateMachineClassForMigration,
        ))
    }

    /// Hot update. Only `tags` are hot-updatable (the cluster tag excepted:
    /// a changed cluster tag finds no VM, `NotFound`); a different `zone`
    /// needs a new VM and answers `InvalidArgument`. `bootDelay`,
    /// `failCreate` and `callDelay` only matter for new VMs and calls and
    /// are accepted without change.
    async fn update_machine(
        &self,
        req: UpdateMachineRequest<'_>,
    ) -> Result<UpdateMachineResponse, DriverError> {
        let inner = &self.inner;
        inner.failpoints.check(Call::UpdateMachine)?;
        let (spec, cluster) = inner.class_context(req.machine_class).await?;
        let vm = inner.find_or_not_found(&cluster, req.machine)?;
        if spec.zone_or_default() != vm.zone {
            return Err(DriverError::new(
                Code::InvalidArgument,
                format!(
                    "zone {:?} → {:?} is not hot-updatable; the machine must be replaced",
                    vm.zone,
                    spec.zone_or_default()
                ),
            ));
        }
        if spec.tags != vm.tags {
            let patch = json!({ "data": { "tags": tags_json(&spec.tags) } });
            inner
                .records(&vm.namespace)
                .patch(
                    &vm.config_map_name(),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
                .map_err(|e| api_error(&format!("updating tags of VM {}", vm.vm_id), &e))?;
            inner.inventory.lock().set_tags(&vm.vm_id, spec.tags);
        }
        Ok(UpdateMachineResponse::default())
    }
}
