//! Runs the conformance kit against a minimal in-memory driver, to show that
//! a correct driver passes it, and against deliberately flawed variants, to
//! show that the kit notices the flaws it is meant to catch.
//!
//! The driver here exists only for this test. It keeps VMs in a map, takes
//! the cluster a class belongs to from `providerSpec.cluster`, and models
//! initialization so that the kit's `Uninitialized` path is exercised.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use api::{Machine, MachineClass};
use async_trait::async_trait;
use driver::conformance::{ClassFixture, Subject};
use driver::*;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

/// CSI driver name whose volumes this driver claims in `GetVolumeIDs`.
const CSI_DRIVER: &str = "memory.csi.trellis.dev";

/// A mistake a driver can make, switched on to check that the kit fails.
#[derive(Clone, Copy, PartialEq)]
enum Flaw {
    /// Every create makes a new VM.
    CreateNotIdempotent,
    /// `ListMachines` returns every cluster's VMs.
    ListIgnoresCluster,
    /// Errors are rewrapped as `Internal`, losing their code.
    ErrorsRewrapped,
    /// Deleting a missing VM answers `NotFound` instead of `Ok`.
    DeleteMissingNotFound,
}

#[derive(Clone)]
struct Vm {
    cluster: String,
    machine: String,
    initialized: bool,
}

struct MemoryDriver {
    /// providerID → VM.
    vms: Mutex<HashMap<String, Vm>>,
    faults: Arc<Failpoints>,
    flaw: Option<Flaw>,
    /// Counter behind the providerIDs, so that a VM recreated under the same
    /// name gets a new ID, as on a real cloud.
    serial: Mutex<u64>,
}

fn cluster_of(class: &MachineClass) -> Result<String, DriverError> {
    class.provider_spec["cluster"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| DriverError::new(Code::InvalidArgument, "providerSpec.cluster is missing"))
}

fn name_of(machine: &Machine) -> Result<String, DriverError> {
    machine
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| DriverError::new(Code::InvalidArgument, "machine has no name"))
}

impl MemoryDriver {
    /// Applies a failpoint, passing its code on unless the driver is flawed.
    fn check(&self, call: Call) -> Result<(), DriverError> {
        self.faults.check(call).map_err(|e| {
            if self.flaw == Some(Flaw::ErrorsRewrapped) {
                DriverError::new(Code::Internal, e.to_string())
            } else {
                e
            }
        })
    }

    /// The providerID of the machine's VM in `cluster`: by the recorded
    /// providerID if there is one, else by machine name.
    fn find(
        vms: &HashMap<String, Vm>,
        cluster: &str,
        machine: &Machine,
    ) -> Result<Option<String>, DriverError> {
        let pid = &machine.spec.provider_id;
        if !pid.is_empty() {
            return Ok(vms
                .get(pid)
                .filter(|vm| vm.cluster == cluster)
                .map(|_| pid.clone()));
        }
        let name = name_of(machine)?;
        Ok(vms
            .iter()
            .find(|(_, vm)| vm.cluster == cluster && vm.machine == name)
            .map(|(pid, _)| pid.clone()))
    }
}

#[async_trait]
impl Driver for MemoryDriver {
    async fn create_machine(
        &self,
        req: CreateMachineRequest<'_>,
    ) -> Result<CreateMachineResponse, DriverError> {
        self.check(Call::CreateMachine)?;
        let cluster = cluster_of(req.machine_class)?;
        let name = name_of(req.machine)?;
        let mut vms = self.vms.lock().unwrap();
        let existing = match self.flaw {
            Some(Flaw::CreateNotIdempotent) => None,
            _ => Self::find(&vms, &cluster, req.machine)?,
        };
        let pid = existing.unwrap_or_else(|| {
            let mut serial = self.serial.lock().unwrap();
            *serial += 1;
            let pid = format!("memory:///{cluster}/{name}-{serial}");
            vms.insert(
                pid.clone(),
                Vm {
                    cluster,
                    machine: name.clone(),
                    initialized: false,
                },
            );
            pid
        });
        Ok(CreateMachineResponse {
            provider_id: pid,
            node_name: name,
            ..CreateMachineResponse::default()
        })
    }

    async fn initialize_machine(
        &self,
        req: InitializeMachineRequest<'_>,
    ) -> Result<InitializeMachineResponse, DriverError> {
        self.check(Call::InitializeMachine)?;
        let cluster = cluster_of(req.machine_class)?;
        let mut vms = self.vms.lock().unwrap();
        let pid = Self::find(&vms, &cluster, req.machine)?
            .ok_or_else(|| DriverError::new(Code::NotFound, "no VM to initialize"))?;
        let vm = vms.get_mut(&pid).expect("found above");
        vm.initialized = true;
        Ok(InitializeMachineResponse {
            provider_id: pid,
            node_name: vm.machine.clone(),
            ..InitializeMachineResponse::default()
        })
    }

    async fn delete_machine(
        &self,
        req: DeleteMachineRequest<'_>,
    ) -> Result<DeleteMachineResponse, DriverError> {
        self.check(Call::DeleteMachine)?;
        let cluster = cluster_of(req.machine_class)?;
        let mut vms = self.vms.lock().unwrap();
        match Self::find(&vms, &cluster, req.machine)? {
            Some(pid) => {
                vms.remove(&pid);
            }
            None if self.flaw == Some(Flaw::DeleteMissingNotFound) => {
                return Err(DriverError::new(Code::NotFound, "no such VM"));
            }
            None => {}
        }
        Ok(DeleteMachineResponse::default())
    }

    async fn get_machine_status(
        &self,
        req: GetMachineStatusRequest<'_>,
    ) -> Result<GetMachineStatusResponse, DriverError> {
        self.check(Call::GetMachineStatus)?;
        let cluster = cluster_of(req.machine_class)?;
        let vms = self.vms.lock().unwrap();
        let pid = Self::find(&vms, &cluster, req.machine)?
            .ok_or_else(|| DriverError::new(Code::NotFound, "no VM backs the machine"))?;
        let vm = &vms[&pid];
        if !vm.initialized {
            return Err(DriverError::new(
                Code::Uninitialized,
                "VM exists but is not initialized",
            ));
        }
        Ok(GetMachineStatusResponse {
            provider_id: pid,
            node_name: vm.machine.clone(),
            ..GetMachineStatusResponse::default()
        })
    }

    async fn list_machines(
        &self,
        req: ListMachinesRequest<'_>,
    ) -> Result<ListMachinesResponse, DriverError> {
        self.check(Call::ListMachines)?;
        let cluster = cluster_of(req.machine_class)?;
        let vms = self.vms.lock().unwrap();
        let machine_list: BTreeMap<String, String> = vms
            .iter()
            .filter(|(_, vm)| vm.cluster == cluster || self.flaw == Some(Flaw::ListIgnoresCluster))
            .map(|(pid, vm)| (pid.clone(), vm.machine.clone()))
            .collect();
        Ok(ListMachinesResponse { machine_list })
    }

    async fn get_volume_ids(
        &self,
        req: GetVolumeIDsRequest<'_>,
    ) -> Result<GetVolumeIDsResponse, DriverError> {
        self.check(Call::GetVolumeIds)?;
        let volume_ids = req
            .pv_specs
            .iter()
            .filter_map(|spec| spec.csi.as_ref())
            .filter(|csi| csi.driver == CSI_DRIVER)
            .map(|csi| csi.volume_handle.clone())
            .collect();
        Ok(GetVolumeIDsResponse { volume_ids })
    }

    async fn generate_machine_class_for_migration(
        &self,
        _req: GenerateMachineClassForMigrationRequest<'_>,
    ) -> Result<GenerateMachineClassForMigrationResponse, DriverError> {
        // Consulted even though the call is not offered: the kit requires
        // every call to pass armed faults through.
        self.check(Call::GenerateMachineClassForMigration)?;
        Err(DriverError::unimplemented(
            Call::GenerateMachineClassForMigration,
        ))
    }

    async fn update_machine(
        &self,
        req: UpdateMachineRequest<'_>,
    ) -> Result<UpdateMachineResponse, DriverError> {
        self.check(Call::UpdateMachine)?;
        let cluster = cluster_of(req.machine_class)?;
        let vms = self.vms.lock().unwrap();
        Self::find(&vms, &cluster, req.machine)?
            .ok_or_else(|| DriverError::new(Code::NotFound, "no VM to update"))?;
        Ok(UpdateMachineResponse::default())
    }
}

fn class(name: &str, cluster: &str) -> ClassFixture {
    ClassFixture {
        machine_class: MachineClass::new(name, "memory", json!({ "cluster": cluster })),
        secret: Secret {
            metadata: ObjectMeta {
                name: Some(format!("{name}-secret")),
                ..ObjectMeta::default()
            },
            string_data: Some(BTreeMap::from([(
                "userData".to_string(),
                "#cloud-config".to_string(),
            )])),
            ..Secret::default()
        },
    }
}

fn subject(flaw: Option<Flaw>) -> Subject {
    let faults = Arc::new(Failpoints::new());
    let driver = MemoryDriver {
        vms: Mutex::default(),
        faults: faults.clone(),
        flaw,
        serial: Mutex::new(0),
    };
    Subject {
        driver: Arc::new(driver),
        faults,
        classes: [class("class-a", "cluster-a"), class("class-b", "cluster-b")],
    }
}

driver::driver_conformance_tests!(|| async { subject(None) });

/// Beyond the kit: the driver reports the volumes of its own CSI driver.
#[tokio::test]
async fn own_csi_volumes_are_reported() {
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec};
    let spec = |driver: &str, handle: &str| PersistentVolumeSpec {
        csi: Some(CSIPersistentVolumeSource {
            driver: driver.to_string(),
            volume_handle: handle.to_string(),
            ..CSIPersistentVolumeSource::default()
        }),
        ..PersistentVolumeSpec::default()
    };
    let s = subject(None);
    let specs = [spec(CSI_DRIVER, "vol-1"), spec("other.csi", "vol-2")];
    let got = s
        .driver
        .get_volume_ids(GetVolumeIDsRequest { pv_specs: &specs })
        .await
        .unwrap();
    assert_eq!(got.volume_ids, ["vol-1"]);
}

/// The kit has teeth: each flaw makes the check aimed at it fail.
mod flawed {
    use super::*;
    use driver::conformance;

    #[tokio::test]
    #[should_panic(expected = "second create answered with another VM")]
    async fn non_idempotent_create_is_caught() {
        conformance::create_is_idempotent(subject(Some(Flaw::CreateNotIdempotent))).await;
    }

    #[tokio::test]
    #[should_panic(expected = "must list exactly cluster A's VMs")]
    async fn list_across_clusters_is_caught() {
        conformance::list_machines_is_per_cluster(subject(Some(Flaw::ListIgnoresCluster))).await;
    }

    #[tokio::test]
    #[should_panic(expected = "armed with Canceled answered")]
    async fn rewrapped_errors_are_caught() {
        conformance::injected_faults_surface_unchanged(subject(Some(Flaw::ErrorsRewrapped))).await;
    }

    #[tokio::test]
    #[should_panic(expected = "delete of a machine without VM must answer Ok")]
    async fn not_found_on_delete_is_caught() {
        conformance::delete_of_missing_vm_is_ok(subject(Some(Flaw::DeleteMissingNotFound))).await;
    }
}
