//! Pure conversions between the driver contract's types and the protocol's
//! messages, both ways, and the versions that name classes and secrets on
//! the wire. No I/O: both sides call these, and the tests check that every
//! value survives the round trip.
//!
//! Kubernetes objects travel as JSON. A secret travels split in two: its
//! `userData`, which the machine controller fills in per machine (bootstrap
//! token, machine name), goes with each operation; the rest (credentials)
//! is fetched by reference and cached, since it is the same for every
//! machine of a class.

use std::collections::BTreeMap;

use api::{ClassSpec, Machine, MachineClass};
use driver::{
    Call, Code, CreateMachineResponse, DeleteMachineResponse, DriverError,
    GenerateMachineClassForMigrationResponse, GetMachineStatusResponse, GetVolumeIDsResponse,
    InitializeMachineResponse, ListMachinesResponse, UpdateMachineResponse,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{NodeAddress, PersistentVolumeSpec, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::pb;

/// The secret key that travels with each operation instead of by
/// reference (the machine controller's `userData`).
pub const USER_DATA_KEY: &str = api::labels::USER_DATA_KEY;

/// Prefix of a version that is a digest, not a resourceVersion.
pub const DIGEST_PREFIX: &str = "sha256:";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The version that names `content`: its resourceVersion when it has one
/// (the API server guarantees one content per resourceVersion), else a
/// digest of `content`, so that equal versions always mean equal content
/// and a provider's cache can never serve a stale object.
fn version(resource_version: Option<&str>, content: &[u8]) -> String {
    match resource_version.filter(|rv| !rv.is_empty()) {
        Some(rv) => rv.to_string(),
        None => format!("{DIGEST_PREFIX}{}", hex(&Sha256::digest(content))),
    }
}

/// A class ready to be referred to: its reference and its wire form.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassParts {
    /// What operations carry.
    pub meta: pb::MachineClassMeta,
    /// What `GetMachineClass` answers.
    pub class: pb::MachineClass,
}

/// Splits a class into its reference and its JSON.
pub fn class_parts(class: &MachineClass) -> Result<ClassParts, DriverError> {
    let object = serde_json::to_vec(class).map_err(|e| {
        DriverError::new(Code::Internal, format!("encoding the machine class: {e}"))
    })?;
    let meta = pb::MachineClassMeta {
        namespace: class.metadata.namespace.clone().unwrap_or_default(),
        name: class.metadata.name.clone().unwrap_or_default(),
        resource_version: version(class.metadata.resource_version.as_deref(), &object),
    };
    Ok(ClassParts {
        meta,
        class: pb::MachineClass { object },
    })
}

/// A secret ready to be referred to: its reference, its wire form without
/// `userData`, and the `userData` that goes with the operation.
#[derive(Clone, Debug, PartialEq)]
pub struct SecretParts {
    /// What operations carry.
    pub meta: pb::SecretMeta,
    /// What `GetSecret` answers.
    pub secret: pb::Secret,
    /// The secret's `userData`, if it has one.
    pub user_data: Option<Vec<u8>>,
}

/// Splits a secret. `stringData` is folded into `data` as the API server
/// would (its keys winning), since a driver reads secrets as stored.
pub fn secret_parts(secret: &Secret) -> SecretParts {
    let mut data: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (k, v) in secret.data.iter().flatten() {
        data.insert(k.clone(), v.0.clone());
    }
    for (k, v) in secret.string_data.iter().flatten() {
        data.insert(k.clone(), v.as_bytes().to_vec());
    }
    let user_data = data.remove(USER_DATA_KEY);
    let namespace = secret.metadata.namespace.clone().unwrap_or_default();
    let name = secret.metadata.name.clone().unwrap_or_default();
    // Length-prefixed fields, so that no two different secrets hash alike.
    let mut content = Vec::new();
    for field in [namespace.as_bytes(), name.as_bytes()]
        .into_iter()
        .chain(data.iter().flat_map(|(k, v)| [k.as_bytes(), v.as_slice()]))
    {
        content.extend_from_slice(&(field.len() as u64).to_be_bytes());
        content.extend_from_slice(field);
    }
    let resource_version = version(secret.metadata.resource_version.as_deref(), &content);
    SecretParts {
        meta: pb::SecretMeta {
            namespace: namespace.clone(),
            name: name.clone(),
            resource_version: resource_version.clone(),
        },
        secret: pb::Secret {
            namespace,
            name,
            resource_version,
            data: data.into_iter().collect(),
        },
        user_data,
    }
}

/// The secret a driver sees: the fetched part with the operation's
/// `userData` put back.
pub fn secret_from_wire(secret: &pb::Secret, user_data: Option<&[u8]>) -> Secret {
    let mut data: BTreeMap<String, ByteString> = secret
        .data
        .iter()
        .map(|(k, v)| (k.clone(), ByteString(v.clone())))
        .collect();
    if let Some(ud) = user_data {
        data.insert(USER_DATA_KEY.to_string(), ByteString(ud.to_vec()));
    }
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
    Secret {
        metadata: ObjectMeta {
            namespace: non_empty(&secret.namespace),
            name: non_empty(&secret.name),
            // A digest is the wire's name for the content, not a version
            // the API server gave out.
            resource_version: (!secret.resource_version.starts_with(DIGEST_PREFIX))
                .then(|| secret.resource_version.clone())
                .filter(|rv| !rv.is_empty()),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..Secret::default()
    }
}

fn to_json<T: serde::Serialize>(what: &str, value: &T) -> Result<Vec<u8>, DriverError> {
    serde_json::to_vec(value)
        .map_err(|e| DriverError::new(Code::Internal, format!("encoding {what}: {e}")))
}

/// Decodes an object a request carries. A request the driver cannot read
/// is the request's fault: `InvalidArgument`.
pub fn from_json<T: serde::de::DeserializeOwned>(
    what: &str,
    bytes: &[u8],
) -> Result<T, DriverError> {
    serde_json::from_slice(bytes)
        .map_err(|e| DriverError::new(Code::InvalidArgument, format!("decoding {what}: {e}")))
}

/// The operation body of create, initialize, delete and status.
pub fn machine_call(
    machine: &Machine,
    class: &ClassParts,
    secret: &SecretParts,
) -> Result<pb::MachineCall, DriverError> {
    Ok(pb::MachineCall {
        machine: to_json("the machine", machine)?,
        machine_class: Some(class.meta.clone()),
        secret: Some(secret.meta.clone()),
        user_data: secret.user_data.clone(),
    })
}

/// The operation body of `GetVolumeIDs`.
pub fn volume_ids_call(specs: &[PersistentVolumeSpec]) -> Result<pb::GetVolumeIDs, DriverError> {
    let pv_specs = specs
        .iter()
        .map(|s| to_json("a persistent volume spec", s))
        .collect::<Result<_, _>>()?;
    Ok(pb::GetVolumeIDs { pv_specs })
}

/// The operation body of `GenerateMachineClassForMigration`.
pub fn migration_call(
    provider_specific: &Value,
    class: &MachineClass,
    class_spec: &ClassSpec,
) -> Result<pb::GenerateMachineClassForMigration, DriverError> {
    Ok(pb::GenerateMachineClassForMigration {
        provider_specific_machine_class: to_json("the provider-specific class", provider_specific)?,
        machine_class: to_json("the machine class", class)?,
        class_spec: Some(pb::ClassSpec {
            api_group: class_spec.api_group.clone(),
            kind: class_spec.kind.clone(),
            name: class_spec.name.clone(),
        }),
    })
}

/// A class spec from the wire (absent: empty).
pub fn class_spec_from_wire(spec: Option<&pb::ClassSpec>) -> ClassSpec {
    spec.map(|s| ClassSpec {
        api_group: s.api_group.clone(),
        kind: s.kind.clone(),
        name: s.name.clone(),
    })
    .unwrap_or_default()
}

/// The error a failed call answers with.
pub fn status_of(e: &DriverError) -> pb::Status {
    pb::Status {
        code: e.code.value() as i32,
        message: e.message.clone(),
    }
}

/// The driver error a provider answered with. A code outside the contract
/// becomes `Unknown` (transient: retried soon), as upstream reads an
/// undecodable error; `OK` as an error and an empty message are protocol
/// faults, reported as `Internal` and filled in respectively, since the
/// contract wants every failure explained.
pub fn error_of(status: &pb::Status, provider: &str, call: Call) -> DriverError {
    let code = u32::try_from(status.code)
        .ok()
        .and_then(|c| Code::try_from(c).ok());
    match code {
        Some(Code::Ok) => DriverError::new(
            Code::Internal,
            format!("provider {provider:?} answered {call} with an error of code OK"),
        ),
        Some(code) if status.message.is_empty() => DriverError::new(
            code,
            format!("provider {provider:?} answered {call} with {code} and no message"),
        ),
        Some(code) => DriverError::new(code, status.message.clone()),
        None => DriverError::new(
            Code::Unknown,
            format!(
                "provider {provider:?} answered {call} with unknown code {}: {}",
                status.code, status.message
            ),
        ),
    }
}

fn addresses_to_wire(addresses: &[NodeAddress]) -> Vec<pb::NodeAddress> {
    addresses
        .iter()
        .map(|a| pb::NodeAddress {
            r#type: a.type_.clone(),
            address: a.address.clone(),
        })
        .collect()
}

fn addresses_from_wire(addresses: &[pb::NodeAddress]) -> Vec<NodeAddress> {
    addresses
        .iter()
        .map(|a| NodeAddress {
            type_: a.r#type.clone(),
            address: a.address.clone(),
        })
        .collect()
}

/// A provider's answer, as the operation result's outcome.
pub fn create_to_wire(r: &CreateMachineResponse) -> pb::CreateMachineResponse {
    pb::CreateMachineResponse {
        provider_id: r.provider_id.clone(),
        node_name: r.node_name.clone(),
        last_known_state: r.last_known_state.clone(),
        addresses: addresses_to_wire(&r.addresses),
    }
}

/// The answer as the driver contract's type.
pub fn create_from_wire(r: &pb::CreateMachineResponse) -> CreateMachineResponse {
    CreateMachineResponse {
        provider_id: r.provider_id.clone(),
        node_name: r.node_name.clone(),
        last_known_state: r.last_known_state.clone(),
        addresses: addresses_from_wire(&r.addresses),
    }
}

pub fn initialize_to_wire(r: &InitializeMachineResponse) -> pb::InitializeMachineResponse {
    pb::InitializeMachineResponse {
        provider_id: r.provider_id.clone(),
        node_name: r.node_name.clone(),
        addresses: addresses_to_wire(&r.addresses),
    }
}

pub fn initialize_from_wire(r: &pb::InitializeMachineResponse) -> InitializeMachineResponse {
    InitializeMachineResponse {
        provider_id: r.provider_id.clone(),
        node_name: r.node_name.clone(),
        addresses: addresses_from_wire(&r.addresses),
    }
}

pub fn delete_to_wire(r: &DeleteMachineResponse) -> pb::DeleteMachineResponse {
    pb::DeleteMachineResponse {
        last_known_state: r.last_known_state.clone(),
    }
}

pub fn delete_from_wire(r: &pb::DeleteMachineResponse) -> DeleteMachineResponse {
    DeleteMachineResponse {
        last_known_state: r.last_known_state.clone(),
    }
}

pub fn status_to_wire(r: &GetMachineStatusResponse) -> pb::GetMachineStatusResponse {
    pb::GetMachineStatusResponse {
        provider_id: r.provider_id.clone(),
        node_name: r.node_name.clone(),
        addresses: addresses_to_wire(&r.addresses),
    }
}

pub fn status_from_wire(r: &pb::GetMachineStatusResponse) -> GetMachineStatusResponse {
    GetMachineStatusResponse {
        provider_id: r.provider_id.clone(),
        node_name: r.node_name.clone(),
        addresses: addresses_from_wire(&r.addresses),
    }
}

pub fn list_to_wire(r: &ListMachinesResponse) -> pb::ListMachinesResponse {
    pb::ListMachinesResponse {
        machine_list: r
            .machine_list
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

pub fn list_from_wire(r: &pb::ListMachinesResponse) -> ListMachinesResponse {
    ListMachinesResponse {
        machine_list: r
            .machine_list
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

pub fn volume_ids_to_wire(r: &GetVolumeIDsResponse) -> pb::GetVolumeIDsResponse {
    pb::GetVolumeIDsResponse {
        volume_ids: r.volume_ids.clone(),
    }
}

pub fn volume_ids_from_wire(r: &pb::GetVolumeIDsResponse) -> GetVolumeIDsResponse {
    GetVolumeIDsResponse {
        volume_ids: r.volume_ids.clone(),
    }
}

pub fn migration_to_wire(
    r: &GenerateMachineClassForMigrationResponse,
) -> Result<pb::GenerateMachineClassForMigrationResponse, DriverError> {
    Ok(pb::GenerateMachineClassForMigrationResponse {
        machine_class: to_json("the generated machine class", &r.machine_class)?,
    })
}

/// A generated class the MCM cannot read is the provider's fault:
/// `Internal`.
pub fn migration_from_wire(
    r: &pb::GenerateMachineClassForMigrationResponse,
    provider: &str,
) -> Result<GenerateMachineClassForMigrationResponse, DriverError> {
    let machine_class = serde_json::from_slice(&r.machine_class).map_err(|e| {
        DriverError::new(
            Code::Internal,
            format!("provider {provider:?} generated a machine class that does not decode: {e}"),
        )
    })?;
    Ok(GenerateMachineClassForMigrationResponse { machine_class })
}

pub fn update_to_wire(_r: &UpdateMachineResponse) -> pb::UpdateMachineResponse {
    pb::UpdateMachineResponse {}
}

/// The name of the call an operation makes, for messages.
pub fn call_of(call: &pb::operation::Call) -> Call {
    use pb::operation::Call as C;
    match call {
        C::CreateMachine(_) => Call::CreateMachine,
        C::InitializeMachine(_) => Call::InitializeMachine,
        C::DeleteMachine(_) => Call::DeleteMachine,
        C::GetMachineStatus(_) => Call::GetMachineStatus,
        C::ListMachines(_) => Call::ListMachines,
        C::GetVolumeIds(_) => Call::GetVolumeIds,
        C::GenerateMachineClassForMigration(_) => Call::GenerateMachineClassForMigration,
        C::UpdateMachine(_) => Call::UpdateMachine,
    }
}

/// The call a successful outcome answers, `None` for an error.
pub fn call_answered(outcome: &pb::operation_result::Outcome) -> Option<Call> {
    use pb::operation_result::Outcome as O;
    Some(match outcome {
        O::Error(_) => return None,
        O::CreateMachine(_) => Call::CreateMachine,
        O::InitializeMachine(_) => Call::InitializeMachine,
        O::DeleteMachine(_) => Call::DeleteMachine,
        O::GetMachineStatus(_) => Call::GetMachineStatus,
        O::ListMachines(_) => Call::ListMachines,
        O::GetVolumeIds(_) => Call::GetVolumeIds,
        O::GenerateMachineClassForMigration(_) => Call::GenerateMachineClassForMigration,
        O::UpdateMachine(_) => Call::UpdateMachine,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::CSIPersistentVolumeSource;
    use serde_json::json;

    fn secret(rv: Option<&str>, pairs: &[(&str, &str)], strings: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("s".into()),
                resource_version: rv.map(str::to_string),
                ..ObjectMeta::default()
            },
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            string_data: (!strings.is_empty()).then(|| {
                strings
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            ..Secret::default()
        }
    }

    #[test]
    fn secrets_split_off_user_data_and_come_back_whole() {
        let s = secret(
            None,
            &[("userData", "token-1"), ("key", "k")],
            &[("pw", "p")],
        );
        let parts = secret_parts(&s);
        assert_eq!(parts.user_data.as_deref(), Some(&b"token-1"[..]));
        assert!(!parts.secret.data.contains_key(USER_DATA_KEY));
        assert!(parts.meta.resource_version.starts_with(DIGEST_PREFIX));
        let back = secret_from_wire(&parts.secret, parts.user_data.as_deref());
        let data = back.data.unwrap();
        let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
        assert_eq!(
            (text("userData"), text("key"), text("pw")),
            ("token-1".into(), "k".into(), "p".into())
        );
        assert_eq!(back.metadata.name.as_deref(), Some("s"));
        // A digest is not handed to the driver as a resourceVersion.
        assert_eq!(back.metadata.resource_version, None);
    }

    #[test]
    fn secret_versions_follow_content_but_not_user_data() {
        let v = |s: &Secret| secret_parts(s).meta.resource_version;
        let base = secret(None, &[("userData", "a"), ("key", "k")], &[]);
        // The per-machine userData does not change what is cached.
        assert_eq!(
            v(&base),
            v(&secret(None, &[("userData", "b"), ("key", "k")], &[]))
        );
        // Credentials do.
        assert_ne!(
            v(&base),
            v(&secret(None, &[("userData", "a"), ("key", "k2")], &[]))
        );
        // Field boundaries count: key "ab" + "c" is not key "a" + "bc".
        assert_ne!(
            v(&secret(None, &[("ab", "c")], &[])),
            v(&secret(None, &[("a", "bc")], &[]))
        );
        // A stored object's resourceVersion is used as it is.
        assert_eq!(v(&secret(Some("42"), &[("key", "k")], &[])), "42");
    }

    #[test]
    fn class_versions_are_resource_versions_or_digests() {
        let mut class = MachineClass::new("c", "local", json!({"zone": "a"}));
        let digest = class_parts(&class).unwrap().meta.resource_version;
        assert!(digest.starts_with(DIGEST_PREFIX), "{digest}");
        class.provider_spec = json!({"zone": "b"});
        assert_ne!(class_parts(&class).unwrap().meta.resource_version, digest);
        class.metadata.resource_version = Some("7".into());
        let parts = class_parts(&class).unwrap();
        assert_eq!(parts.meta.resource_version, "7");
        let back: MachineClass = from_json("class", &parts.class.object).unwrap();
        assert_eq!(back, class);
    }

    #[test]
    fn codes_round_trip_and_protocol_faults_are_named() {
        for code in Code::ALL.into_iter().filter(|c| *c != Code::Ok) {
            let e = DriverError::new(code, "boom");
            assert_eq!(
                error_of(&status_of(&e), "p", Call::CreateMachine),
                e,
                "{code}"
            );
        }
        let bad = |code: i32, message: &str| {
            error_of(
                &pb::Status {
                    code,
                    message: message.into(),
                },
                "p",
                Call::DeleteMachine,
            )
        };
        let e = bad(0, "x");
        assert_eq!(e.code, Code::Internal);
        assert!(e.message.contains("code OK"), "{e}");
        for code in [18, -1, 1000] {
            let e = bad(code, "x");
            assert_eq!(e.code, Code::Unknown);
            assert!(e.message.contains(&code.to_string()), "{e}");
        }
        let e = bad(Code::Unavailable.value() as i32, "");
        assert_eq!(e.code, Code::Unavailable);
        assert!(e.message.contains("DeleteMachine"), "{e}");
    }

    #[test]
    fn responses_round_trip() {
        let addresses = vec![NodeAddress {
            type_: "InternalIP".into(),
            address: "10.0.0.1".into(),
        }];
        let c = CreateMachineResponse {
            provider_id: "p://1".into(),
            node_name: "n".into(),
            last_known_state: "s".into(),
            addresses: addresses.clone(),
        };
        assert_eq!(create_from_wire(&create_to_wire(&c)), c);
        let i = InitializeMachineResponse {
            provider_id: "p://1".into(),
            node_name: "n".into(),
            addresses: addresses.clone(),
        };
        assert_eq!(initialize_from_wire(&initialize_to_wire(&i)), i);
        let s = GetMachineStatusResponse {
            provider_id: "p://1".into(),
            node_name: "n".into(),
            addresses,
        };
        assert_eq!(status_from_wire(&status_to_wire(&s)), s);
        let d = DeleteMachineResponse {
            last_known_state: "gone".into(),
        };
        assert_eq!(delete_from_wire(&delete_to_wire(&d)), d);
        let l = ListMachinesResponse {
            machine_list: BTreeMap::from([("p://1".into(), "m1".into())]),
        };
        assert_eq!(list_from_wire(&list_to_wire(&l)), l);
        let v = GetVolumeIDsResponse {
            volume_ids: vec!["vol-1".into()],
        };
        assert_eq!(volume_ids_from_wire(&volume_ids_to_wire(&v)), v);
        let m = GenerateMachineClassForMigrationResponse {
            machine_class: MachineClass::new("gen", "aws", json!({"ami": "x"})),
        };
        assert_eq!(
            migration_from_wire(&migration_to_wire(&m).unwrap(), "p").unwrap(),
            m
        );
        let garbage = pb::GenerateMachineClassForMigrationResponse {
            machine_class: b"{".to_vec(),
        };
        assert_eq!(
            migration_from_wire(&garbage, "p").unwrap_err().code,
            Code::Internal
        );
    }

    #[test]
    fn requests_carry_what_the_driver_needs() {
        let machine = Machine::test("m1").provider_id("p://1");
        let class = class_parts(&MachineClass::test("c")).unwrap();
        let secret = secret_parts(&secret(Some("9"), &[("userData", "ud")], &[]));
        let call = machine_call(&machine, &class, &secret).unwrap();
        let back: Machine = from_json("machine", &call.machine).unwrap();
        assert_eq!(back, machine);
        assert_eq!(call.machine_class.as_ref(), Some(&class.meta));
        assert_eq!(call.user_data.as_deref(), Some(&b"ud"[..]));
        assert_eq!(call.secret.unwrap().resource_version, "9");

        let spec = PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: "d".into(),
                volume_handle: "h".into(),
                ..CSIPersistentVolumeSource::default()
            }),
            ..PersistentVolumeSpec::default()
        };
        let v = volume_ids_call(std::slice::from_ref(&spec)).unwrap();
        let back: PersistentVolumeSpec = from_json("spec", &v.pv_specs[0]).unwrap();
        assert_eq!(back, spec);

        let err = from_json::<Machine>("the machine", b"not json").unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
        assert!(err.message.contains("the machine"), "{err}");
    }
}
