//! Requests and responses of the driver calls.
//!
//! Requests borrow the objects they carry: the controller already holds the
//! machine, class and secret (usually behind an `Arc` from a cache), and a
//! driver only reads them, so nothing is cloned per call. Responses are owned.
//!
//! Every request that carries a [`Secret`] implements `Debug` by hand and
//! prints only the secret's name and keys. The secret holds cloud credentials
//! and the bootstrap token inside `userData`, and a request is exactly the
//! kind of value that ends up in a `tracing` field.

use std::collections::BTreeMap;
use std::fmt;

use api::{ClassSpec, Machine, MachineClass};
use k8s_openapi::api::core::v1::{NodeAddress, PersistentVolumeSpec, Secret};
use serde_json::Value;

/// Debug view of a secret: where it is and which keys it has, never the
/// values.
struct Redacted<'a>(&'a Secret);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<&str> = self
            .0
            .data
            .iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .chain(self.0.string_data.iter().flatten().map(|(k, _)| k.as_str()))
            .collect();
        f.debug_struct("Secret")
            .field("namespace", &self.0.metadata.namespace)
            .field("name", &self.0.metadata.name)
            .field("keys", &keys)
            .finish_non_exhaustive()
    }
}

/// Declares a request naming one machine, its class and the class's secret:
/// the shape shared by create, initialize, delete and status.
macro_rules! machine_request {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy)]
        pub struct $name<'a> {
            /// The machine the VM backs.
            pub machine: &'a Machine,
            /// The class the machine refers to; its `providerSpec` describes
            /// the VM.
            pub machine_class: &'a MachineClass,
            /// The class's secret: provider credentials and, for creation,
            /// `userData` with the bootstrap token already substituted.
            pub secret: &'a Secret,
        }

        impl fmt::Debug for $name<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("machine", &self.machine.metadata.name)
                    .field("provider_id", &self.machine.spec.provider_id)
                    .field("machine_class", &self.machine_class.metadata.name)
                    .field("secret", &Redacted(self.secret))
                    .finish()
            }
        }
    };
}

machine_request! {
    /// Asks for a VM backing `machine`. Must be idempotent: when a VM for
    /// the machine already exists and matches, the driver answers with it
    /// instead of creating a second one. `machine.status.lastKnownState`
    /// carries what the previous attempt returned, so an interrupted creation
    /// can be resumed.
    CreateMachineRequest
}

machine_request! {
    /// Asks the driver to finish setting up a freshly created VM (network
    /// settings and the like). Called after `CreateMachine`, and again
    /// whenever `GetMachineStatus` answers `Uninitialized`.
    InitializeMachineRequest
}

machine_request! {
    /// Asks for the machine's VM to be removed. Only the machine's name and
    /// `spec.providerID` are guaranteed to be set: the orphan-VM collector
    /// builds a bare machine from a `ListMachines` entry.
    DeleteMachineRequest
}

machine_request! {
    /// Asks whether a VM backs the machine. `spec.providerID` may be empty
    /// (the creation flow asks before creating), so the driver must be able
    /// to find the VM by machine name alone.
    GetMachineStatusRequest
}

/// What `CreateMachine` reports about the VM.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CreateMachineResponse {
    /// The provider's ID of the VM; becomes the machine's `spec.providerID`
    /// and must equal the node's `spec.providerID`.
    pub provider_id: String,
    /// Name the VM's node will register under.
    pub node_name: String,
    /// Opaque state stored in `machine.status.lastKnownState` and handed back
    /// on the next call.
    pub last_known_state: String,
    /// VM addresses; only used when no target cluster is configured, since
    /// otherwise the node reports them.
    pub addresses: Vec<NodeAddress>,
}

/// What `InitializeMachine` reports about the VM.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InitializeMachineResponse {
    /// The provider's ID of the VM.
    pub provider_id: String,
    /// Name the VM's node will register under.
    pub node_name: String,
    /// VM addresses, as in [`CreateMachineResponse::addresses`].
    pub addresses: Vec<NodeAddress>,
}

/// What `DeleteMachine` reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteMachineResponse {
    /// Opaque state stored in `machine.status.lastKnownState`, so that an
    /// interrupted deletion can be resumed.
    pub last_known_state: String,
}

/// What `GetMachineStatus` reports about an existing VM.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GetMachineStatusResponse {
    /// The provider's ID of the VM.
    pub provider_id: String,
    /// Name the VM's node registers under.
    pub node_name: String,
    /// VM addresses, as in [`CreateMachineResponse::addresses`].
    pub addresses: Vec<NodeAddress>,
}

/// Asks for every VM that the class could have created. The orphan-VM
/// collector compares the answer with the machines it knows.
#[derive(Clone, Copy)]
pub struct ListMachinesRequest<'a> {
    /// The class whose VMs are wanted; its provider spec identifies the
    /// cluster (and role) the VMs belong to.
    pub machine_class: &'a MachineClass,
    /// The class's secret.
    pub secret: &'a Secret,
}

impl fmt::Debug for ListMachinesRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListMachinesRequest")
            .field("machine_class", &self.machine_class.metadata.name)
            .field("secret", &Redacted(self.secret))
            .finish()
    }
}

/// The VMs of a class.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListMachinesResponse {
    /// Provider ID → name of the machine the VM was created for. Must hold
    /// only VMs of the class's cluster: anything listed here without a
    /// matching machine gets deleted.
    pub machine_list: BTreeMap<String, String>,
}

/// Asks which of the given persistent volumes are this provider's disks, and
/// under which IDs they show up in `node.status.volumesAttached`. Drain uses
/// the IDs to wait for a volume to detach before evicting the next pod.
#[derive(Clone, Copy, Debug)]
pub struct GetVolumeIDsRequest<'a> {
    /// Specs of the volumes used by the pods being evicted.
    pub pv_specs: &'a [PersistentVolumeSpec],
}

/// Volume IDs of the provider's own volumes among those asked about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetVolumeIDsResponse {
    /// One ID per recognised volume; volumes of other provisioners are left
    /// out rather than reported as errors.
    pub volume_ids: Vec<String>,
}

/// Asks the driver to translate a provider-specific class (e.g. an old
/// `AWSMachineClass`) into a generic [`MachineClass`].
///
/// Upstream no longer calls this (spec §6) but keeps the types; it is here
/// so that the contract is complete and a migration tool can use it.
#[derive(Clone, Copy, Debug)]
pub struct GenerateMachineClassForMigrationRequest<'a> {
    /// The provider-specific class as it was read, in JSON form.
    pub provider_specific_machine_class: &'a Value,
    /// The class to start from (name and namespace already set); the driver
    /// returns it filled in.
    pub machine_class: &'a MachineClass,
    /// The reference through which machines name the old class.
    pub class_spec: &'a ClassSpec,
}

/// The generated class.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenerateMachineClassForMigrationResponse {
    /// The request's class with provider spec, secret references and node
    /// template filled in. Upstream fills the request's object in place;
    /// returning a new value avoids a `&mut` in the request.
    pub machine_class: MachineClass,
}

/// Asks the driver to apply changed hot-updatable provider spec fields (tags
/// on VMs, disks and NICs) to an existing VM without replacing it
/// (seed 003 §2.2.3).
#[derive(Clone, Copy)]
pub struct UpdateMachineRequest<'a> {
    /// The machine; `spec.providerID` names the VM.
    pub machine: &'a Machine,
    /// The class with the provider spec to apply.
    pub machine_class: &'a MachineClass,
    /// The class's secret.
    pub secret: &'a Secret,
    /// The provider spec last applied successfully to this VM, or `None` for
    /// a machine that has never been hot-updated. Lets the driver compute
    /// what to remove as well as what to add.
    pub last_applied_provider_spec: Option<&'a Value>,
}

impl fmt::Debug for UpdateMachineRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpdateMachineRequest")
            .field("machine", &self.machine.metadata.name)
            .field("provider_id", &self.machine.spec.provider_id)
            .field("machine_class", &self.machine_class.metadata.name)
            .field("secret", &Redacted(self.secret))
            .field(
                "last_applied_provider_spec",
                &self.last_applied_provider_spec,
            )
            .finish()
    }
}

/// The answer to a successful hot update. Empty today; a struct rather than
/// `()` so that fields can be added without changing the trait.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UpdateMachineResponse {}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn debug_never_prints_secret_values() {
        let machine = Machine::test("m1");
        let class = MachineClass::new("c1", "local", Value::Null);
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("s1".into()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(
                "userData".to_string(),
                ByteString(b"token-abc123".to_vec()),
            )])),
            string_data: Some(BTreeMap::from([(
                "password".to_string(),
                "hunter2".to_string(),
            )])),
            ..Secret::default()
        };
        let create = CreateMachineRequest {
            machine: &machine,
            machine_class: &class,
            secret: &secret,
        };
        let list = ListMachinesRequest {
            machine_class: &class,
            secret: &secret,
        };
        let update = UpdateMachineRequest {
            machine: &machine,
            machine_class: &class,
            secret: &secret,
            last_applied_provider_spec: None,
        };
        for text in [
            format!("{create:?}"),
            format!("{list:?}"),
            format!("{update:?}"),
        ] {
            assert!(
                text.contains("userData") && text.contains("password"),
                "{text}"
            );
            assert!(
                !text.contains("abc123") && !text.contains("hunter2"),
                "{text}"
            );
            // ByteString's Debug would print the bytes as numbers.
            assert!(!text.contains("116, 111"), "{text}");
        }
    }
}
