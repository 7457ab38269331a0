//! The [`Driver`] trait every provider implements, and [`Call`], the name of
//! each of its methods.
//!
//! As upstream's machine controller does, trellis links the driver into the
//! controller process and calls it directly; there is no RPC layer (spec §1).

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::codes::{DriverError, ParseError};
use crate::messages::*;

/// One method of the driver contract. Used to arm failpoints, label metrics
/// and look up the documented retry behaviour ([`crate::Code::auto_retry`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Call {
    /// [`Driver::create_machine`].
    CreateMachine,
    /// [`Driver::initialize_machine`].
    InitializeMachine,
    /// [`Driver::delete_machine`].
    DeleteMachine,
    /// [`Driver::get_machine_status`].
    GetMachineStatus,
    /// [`Driver::list_machines`].
    ListMachines,
    /// [`Driver::get_volume_ids`].
    GetVolumeIds,
    /// [`Driver::generate_machine_class_for_migration`].
    GenerateMachineClassForMigration,
    /// [`Driver::update_machine`].
    UpdateMachine,
}

impl Call {
    /// Every call, in the trait's order.
    pub const ALL: [Call; 8] = [
        Call::CreateMachine,
        Call::InitializeMachine,
        Call::DeleteMachine,
        Call::GetMachineStatus,
        Call::ListMachines,
        Call::GetVolumeIds,
        Call::GenerateMachineClassForMigration,
        Call::UpdateMachine,
    ];

    /// Upstream's method name, e.g. `GetVolumeIDs`; the form used in
    /// messages and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            Call::CreateMachine => "CreateMachine",
            Call::InitializeMachine => "InitializeMachine",
            Call::DeleteMachine => "DeleteMachine",
            Call::GetMachineStatus => "GetMachineStatus",
            Call::ListMachines => "ListMachines",
            Call::GetVolumeIds => "GetVolumeIDs",
            Call::GenerateMachineClassForMigration => "GenerateMachineClassForMigration",
            Call::UpdateMachine => "UpdateMachine",
        }
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Call {
    type Err = ParseError;

    /// Parses upstream's method name.
    fn from_str(s: &str) -> Result<Call, ParseError> {
        Call::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| ParseError::new("driver call", s))
    }
}

// As a name, so that a simulator's failpoint configuration reads naturally.
impl Serialize for Call {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Call {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Call, D::Error> {
        let s = String::deserialize(de)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The contract between the machine controller and a provider: create,
/// initialize, inspect, list and delete the VMs behind machines.
///
/// Every method answers with a [`DriverError`] whose [`crate::Code`] decides
/// what the controller does next (see [`crate::Outcome`]). `create_machine`
/// and `delete_machine` are required; the rest are optional and answer
/// `Unimplemented` by default, which the controller treats as "skip this
/// step" or "fall back" rather than as a failure.
///
/// Implementations must be safe to call concurrently for different machines;
/// the controller never runs two calls for the same machine at once.
#[async_trait]
pub trait Driver: Send + Sync {
    /// Creates the VM for a machine, or returns the existing one.
    ///
    /// Idempotent: when a VM for `machine` already exists and matches the
    /// class, answer `Ok` with it. `AlreadyExists` is for a VM of that name
    /// that does not match.
    async fn create_machine(
        &self,
        req: CreateMachineRequest<'_>,
    ) -> Result<CreateMachineResponse, DriverError>;

    /// Finishes setting up a new VM. `Uninitialized` asks the controller to
    /// call again; `Unimplemented` (the default) makes it skip the step.
    async fn initialize_machine(
        &self,
        _req: InitializeMachineRequest<'_>,
    ) -> Result<InitializeMachineResponse, DriverError> {
        Err(DriverError::unimplemented(Call::InitializeMachine))
    }

    /// Deletes the machine's VM and everything that belongs to it (disks,
    /// NICs). A VM that does not exist is success (`Ok`, or `NotFound`,
    /// which the controller accepts as well). Acts only on VMs of the class's
    /// cluster.
    async fn delete_machine(
        &self,
        req: DeleteMachineRequest<'_>,
    ) -> Result<DeleteMachineResponse, DriverError>;

    /// Reports the VM behind a machine: `NotFound` when there is none,
    /// `Uninitialized` when it exists but `initialize_machine` has not
    /// completed, `OutOfRange` when several VMs claim the machine.
    async fn get_machine_status(
        &self,
        _req: GetMachineStatusRequest<'_>,
    ) -> Result<GetMachineStatusResponse, DriverError> {
        Err(DriverError::unimplemented(Call::GetMachineStatus))
    }

    /// Lists the VMs the class may have created, for orphan collection.
    /// Without it orphaned VMs are never cleaned up automatically.
    async fn list_machines(
        &self,
        _req: ListMachinesRequest<'_>,
    ) -> Result<ListMachinesResponse, DriverError> {
        Err(DriverError::unimplemented(Call::ListMachines))
    }

    /// Maps persistent volume specs to the provider's volume IDs, so that
    /// drain can wait for each volume to detach.
    async fn get_volume_ids(
        &self,
        _req: GetVolumeIDsRequest<'_>,
    ) -> Result<GetVolumeIDsResponse, DriverError> {
        Err(DriverError::unimplemented(Call::GetVolumeIds))
    }

    /// Translates a provider-specific class into a generic one.
    async fn generate_machine_class_for_migration(
        &self,
        _req: GenerateMachineClassForMigrationRequest<'_>,
    ) -> Result<GenerateMachineClassForMigrationResponse, DriverError> {
        Err(DriverError::unimplemented(
            Call::GenerateMachineClassForMigration,
        ))
    }

    /// Applies hot-updatable provider spec changes to an existing VM. The
    /// controller records the applied spec only after `Ok`, so a partial
    /// update must return an error.
    async fn update_machine(
        &self,
        _req: UpdateMachineRequest<'_>,
    ) -> Result<UpdateMachineResponse, DriverError> {
        Err(DriverError::unimplemented(Call::UpdateMachine))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;

    #[test]
    fn call_names_round_trip() {
        for call in Call::ALL {
            assert_eq!(call.to_string().parse::<Call>(), Ok(call));
            let json = serde_json::to_string(&call).unwrap();
            assert_eq!(serde_json::from_str::<Call>(&json).unwrap(), call);
        }
        assert_eq!(Call::GetVolumeIds.to_string(), "GetVolumeIDs");
        assert!("getVolumeIds".parse::<Call>().is_err());
    }

    /// A driver with only the two required calls.
    struct Minimal;

    #[async_trait]
    impl Driver for Minimal {
        async fn create_machine(
            &self,
            _req: CreateMachineRequest<'_>,
        ) -> Result<CreateMachineResponse, DriverError> {
            Ok(CreateMachineResponse::default())
        }

        async fn delete_machine(
            &self,
            _req: DeleteMachineRequest<'_>,
        ) -> Result<DeleteMachineResponse, DriverError> {
            Ok(DeleteMachineResponse::default())
        }
    }

    #[tokio::test]
    async fn optional_calls_default_to_unimplemented() {
        let d: &dyn Driver = &Minimal;
        let machine = api::Machine::test("m1");
        let class = api::MachineClass::new("c1", "local", serde_json::Value::Null);
        let secret = k8s_openapi::api::core::v1::Secret::default();
        let value = serde_json::Value::Null;
        let class_spec = api::ClassSpec::default();
        let results = [
            (
                Call::InitializeMachine,
                d.initialize_machine(InitializeMachineRequest {
                    machine: &machine,
                    machine_class: &class,
                    secret: &secret,
                })
                .await
                .err(),
            ),
            (
                Call::GetMachineStatus,
                d.get_machine_status(GetMachineStatusRequest {
                    machine: &machine,
                    machine_class: &class,
                    secret: &secret,
                })
                .await
                .err(),
            ),
            (
                Call::ListMachines,
                d.list_machines(ListMachinesRequest {
                    machine_class: &class,
                    secret: &secret,
                })
                .await
                .err(),
            ),
            (
                Call::GetVolumeIds,
                d.get_volume_ids(GetVolumeIDsRequest { pv_specs: &[] })
                    .await
                    .err(),
            ),
            (
                Call::GenerateMachineClassForMigration,
                d.generate_machine_class_for_migration(GenerateMachineClassForMigrationRequest {
                    provider_specific_machine_class: &value,
                    machine_class: &class,
                    class_spec: &class_spec,
                })
                .await
                .err(),
            ),
            (
                Call::UpdateMachine,
                d.update_machine(UpdateMachineRequest {
                    machine: &machine,
                    machine_class: &class,
                    secret: &secret,
                    last_applied_provider_spec: None,
                })
                .await
                .err(),
            ),
        ];
        for (call, err) in results {
            let err = err.unwrap_or_else(|| panic!("{call} should fail"));
            assert_eq!(err.code, Code::Unimplemented, "{call}");
            assert!(err.message.contains(call.name()), "{call}: {err}");
        }
    }
}
