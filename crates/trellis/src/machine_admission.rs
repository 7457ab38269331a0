//! Admission for machine.sapcloud.io objects in the embedded API server:
//! MachineDeployments are defaulted, and every kind is validated with the
//! `api` crate's pure rules, so an invalid object is rejected with a 422 and
//! field causes instead of being skipped by the controllers (as upstream
//! MCM does). Creating one in a namespace no machine controller serves is
//! admitted with a warning ([`ServedNamespaces`]), since nothing else
//! could tell the user (logged for now: the admission chain does not pass
//! plugins' warnings on to clients yet).

// Admission answers are full metav1.Status errors, as in the apiserver crate.
#![allow(clippy::result_large_err)]

use std::sync::{Arc, Weak};

use apimachinery::ApiError;
use apiserver::{AdmissionPlugin, Attributes, Operation, Server};
use k8s_openapi::api::coordination::v1::Lease;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

pub struct MachineAdmission;

/// Decodes into the typed kind; a field of the wrong type is a 422 naming
/// that field, as kube-apiserver answers.
fn decode<T: DeserializeOwned>(obj: &Value, kind: &str) -> Result<T, ApiError> {
    decode_in(api::API_GROUP, obj, kind)
}

/// [`decode`] for a kind of any API group.
pub(crate) fn decode_in<T: DeserializeOwned>(
    group: &str,
    obj: &Value,
    kind: &str,
) -> Result<T, ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    serde_path_to_error::deserialize(obj.clone()).map_err(|e| {
        let field = e.path().to_string();
        ApiError::invalid(
            group,
            kind,
            name,
            vec![apimachinery::Cause::new(
                "FieldValueTypeInvalid",
                if field == "." { String::new() } else { field },
                format!("Invalid value: {}", e.inner()),
            )],
        )
    })
}

fn encode<T: Serialize>(v: &T) -> Result<Value, ApiError> {
    serde_json::to_value(v).map_err(|e| ApiError::internal(e.to_string()))
}

/// Only the object itself and its scale are checked: status writes come from
/// controllers and must not fail on the spec's account.
fn applies(attrs: &Attributes<'_>) -> bool {
    attrs.resource.group == api::API_GROUP
        && attrs.operation != Operation::Delete
        && matches!(attrs.subresource, None | Some("scale"))
}

#[async_trait::async_trait]
impl AdmissionPlugin for MachineAdmission {
    fn name(&self) -> &str {
        "MachineValidation"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), ApiError> {
        if !applies(attrs) || attrs.resource.kind != "MachineDeployment" {
            return Ok(());
        }
        // An object that does not decode is left to schema validation, which
        // reports it with field causes.
        let Ok(mut md) = decode::<api::MachineDeployment>(obj, "MachineDeployment") else {
            return Ok(());
        };
        api::default_machine_deployment(&mut md);
        // Only the spec is taken back: metadata and status stay as sent.
        let defaulted = encode(&md)?;
        if let Some(spec) = defaulted.get("spec") {
            obj["spec"] = spec.clone();
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), ApiError> {
        if !applies(attrs) {
            return Ok(());
        }
        let kind = attrs.resource.kind.as_str();
        let causes = match kind {
            "Machine" => api::validate_machine(&decode(obj, kind)?),
            "MachineSet" => api::validate_machine_set(&decode(obj, kind)?),
            "MachineDeployment" => api::validate_machine_deployment(&decode(obj, kind)?),
            "MachineClass" => api::validate_machine_class(&decode(obj, kind)?),
            _ => Vec::new(),
        };
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(api::API_GROUP, kind, attrs.name, causes))
        }
    }
}

// --- Namespaces no machine controller serves --------------------------------

/// The kinds whose creation in an unserved namespace is warned about.
const MACHINE_KINDS: [&str; 4] = ["Machine", "MachineSet", "MachineDeployment", "MachineClass"];

/// Where admission reads a namespace's serving Leases
/// ([`mcm::serving::SERVING_LEASES`]) from.
#[async_trait::async_trait]
pub trait LeaseSource: Send + Sync {
    /// Those of the serving Leases of `ns` that exist; `None` when they
    /// cannot be read, in which case admission says nothing.
    async fn serving_leases(&self, ns: &str) -> Option<Vec<Lease>>;
}

/// The embedded server's own store.
struct EmbeddedLeases(Weak<Server>);

#[async_trait::async_trait]
impl LeaseSource for EmbeddedLeases {
    async fn serving_leases(&self, ns: &str) -> Option<Vec<Lease>> {
        let server = self.0.upgrade()?;
        let res = server.registry.get("coordination.k8s.io", "v1", "leases")?;
        let mut out = Vec::new();
        for name in mcm::serving::SERVING_LEASES {
            let (kv, _) = server
                .store
                .get(&res.key(Some(ns), name), None)
                .await
                .ok()?;
            if let Some(kv) = kv {
                out.push(serde_json::from_slice(&kv.value).ok()?);
            }
        }
        Some(out)
    }
}

/// Another API server, through a client (`trellis admission-webhook`).
struct RemoteLeases(kube::Client);

#[async_trait::async_trait]
impl LeaseSource for RemoteLeases {
    async fn serving_leases(&self, ns: &str) -> Option<Vec<Lease>> {
        let api: kube::Api<Lease> = kube::Api::namespaced(self.0.clone(), ns);
        let mut out = Vec::new();
        for name in mcm::serving::SERVING_LEASES {
            if let Some(lease) = api.get_opt(name).await.ok()? {
                out.push(lease);
            }
        }
        Some(out)
    }
}

/// Warns when a Machine, MachineSet, MachineDeployment or MachineClass is
/// created in a namespace no machine controller serves (judged by
/// [`mcm::serving::served`] from the namespace's Leases): nothing would
/// ever act on it, and nobody could write a condition onto it to say so.
/// The object is admitted all the same; the warning is the signal, and
/// `kubectl` prints it.
pub struct ServedNamespaces {
    source: Arc<dyn LeaseSource>,
}

impl ServedNamespaces {
    /// Inside the embedded server: reads its store.
    pub fn embedded(server: &Arc<Server>) -> ServedNamespaces {
        ServedNamespaces::with_source(Arc::new(EmbeddedLeases(Arc::downgrade(server))))
    }

    /// As a webhook of another API server: reads through a client.
    pub fn remote(client: kube::Client) -> ServedNamespaces {
        ServedNamespaces::with_source(Arc::new(RemoteLeases(client)))
    }

    fn with_source(source: Arc<dyn LeaseSource>) -> ServedNamespaces {
        ServedNamespaces { source }
    }

    /// The warnings for admitting `obj` (at most one): only creations of
    /// the four machine kinds, in a namespace that is not served.
    pub async fn unserved_warnings(&self, attrs: &Attributes<'_>, obj: &Value) -> Vec<String> {
        let kind = attrs.resource.kind.as_str();
        if attrs.resource.group != api::API_GROUP
            || attrs.operation != Operation::Create
            || attrs.subresource.is_some()
            || !MACHINE_KINDS.contains(&kind)
        {
            return Vec::new();
        }
        let Some(ns) = attrs.namespace.filter(|n| !n.is_empty()) else {
            return Vec::new();
        };
        let Some(leases) = self.source.serving_leases(ns).await else {
            return Vec::new();
        };
        let now = chrono::Utc::now();
        let verdict = mcm::serving::served(&leases, now);
        let name = if attrs.name.is_empty() {
            obj.pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .unwrap_or_default()
        } else {
            attrs.name
        };
        mcm::serving::warning(kind, name, ns, &verdict, now)
            .into_iter()
            .collect()
    }
}

/// Never rejects or changes anything. The admission chain has no way yet
/// to hand a plugin's warnings to the client, so until it does they go to
/// the server's log; [`ServedNamespaces::unserved_warnings`] is what the chain is
/// to send as `Warning` headers. Logged at info, not warn: `trellis up
/// --demo` creates its objects while the controllers are still starting,
/// and its terminal shows warnings.
#[async_trait::async_trait]
impl AdmissionPlugin for ServedNamespaces {
    fn name(&self) -> &str {
        "MachineNamespaceServed"
    }

    async fn warnings(&self, attrs: &Attributes<'_>, obj: &Value) -> Vec<String> {
        self.unserved_warnings(attrs, obj).await
    }
}

/// Installs trellis's CRDs and admission into an embedded server.
pub async fn prepare(server: &Arc<apiserver::Server>) -> anyhow::Result<()> {
    for crd in api::crds() {
        let manifest = serde_json::to_value(&crd)?;
        apiserver::crd::install(server, &manifest).await?;
    }
    server.add_admission(Arc::new(MachineAdmission));
    server.add_admission(Arc::new(ServedNamespaces::embedded(server)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    use kube::api::{Api, PostParams};
    use serde_json::json;

    /// An embedded server with trellis's machine admission, served on a
    /// local port, and a client of it.
    async fn server() -> (Arc<Server>, kube::Client) {
        let store: Arc<dyn store::Store> = Arc::new(store::MemoryStore::new());
        let server = Server::start(store, apiserver::Config::default())
            .await
            .unwrap();
        prepare(&server).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let s = server.clone();
        tokio::spawn(async move { s.serve(listener, std::future::pending()).await });
        let mut config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        config.default_retry = false;
        (server, kube::Client::try_from(config).unwrap())
    }

    async fn lease(client: &kube::Client, ns: &str, name: &str, renewed_secs_ago: i64) {
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        let namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        let _ = namespaces.create(&PostParams::default(), &namespace).await;
        let renewed = Timestamp::now() - SignedDuration::from_secs(renewed_secs_ago);
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some("controller-1".into()),
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: Some(60),
                ..LeaseSpec::default()
            }),
        };
        Api::<Lease>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &lease)
            .await
            .unwrap();
    }

    /// (resource plural, operation, subresource, namespace, name, the
    /// warning's start or none).
    type Case<'a> = (
        &'a str,
        Operation,
        Option<&'a str>,
        &'a str,
        &'a str,
        Option<&'a str>,
    );

    #[tokio::test]
    async fn creating_machine_objects_where_no_controller_serves_is_warned_about() {
        let (server, client) = server().await;
        lease(&client, "served", mcm::serving::HEARTBEAT_LEASE, 5).await;
        lease(&client, "stopped", mcm::serving::HEARTBEAT_LEASE, 3600).await;
        lease(&client, "upstream", "machine-controller", 5).await;
        let resource = |plural: &str| {
            server
                .registry
                .get(api::API_GROUP, api::API_VERSION, plural)
                .or_else(|| server.registry.get("", "v1", plural))
                .unwrap()
        };
        let obj = json!({"metadata": {"generateName": "web-"}});
        for plugin in [
            ServedNamespaces::embedded(&server),
            ServedNamespaces::remote(client.clone()),
        ] {
            let table: Vec<Case> = vec![
                (
                    "machinedeployments",
                    Operation::Create,
                    None,
                    "team-a",
                    "web",
                    Some("no machine controller serves namespace \"team-a\""),
                ),
                (
                    "machineclasses",
                    Operation::Create,
                    None,
                    "default",
                    "c",
                    Some("no machine controller serves namespace \"default\""),
                ),
                (
                    "machines",
                    Operation::Create,
                    None,
                    "stopped",
                    "m",
                    Some("the machine controllers of namespace \"stopped\" are not running"),
                ),
                (
                    "machinedeployments",
                    Operation::Create,
                    None,
                    "served",
                    "web",
                    None,
                ),
                ("machines", Operation::Create, None, "upstream", "m", None),
                // Only creations of the machine kinds.
                (
                    "machinedeployments",
                    Operation::Update,
                    None,
                    "team-a",
                    "web",
                    None,
                ),
                (
                    "machinedeployments",
                    Operation::Delete,
                    None,
                    "team-a",
                    "web",
                    None,
                ),
                (
                    "machinedeployments",
                    Operation::Update,
                    Some("status"),
                    "team-a",
                    "web",
                    None,
                ),
                ("configmaps", Operation::Create, None, "team-a", "web", None),
            ];
            for (i, (plural, op, sub, ns, name, want)) in table.into_iter().enumerate() {
                let res = resource(plural);
                let attrs = Attributes {
                    operation: op,
                    resource: &res,
                    subresource: sub,
                    namespace: Some(ns),
                    name,
                    old: None,
                    dry_run: false,
                    user: None,
                };
                let got = plugin.unserved_warnings(&attrs, &obj).await;
                match want {
                    None => assert!(got.is_empty(), "case {i}: {got:?}"),
                    Some(prefix) => {
                        assert_eq!(got.len(), 1, "case {i}: {got:?}");
                        assert!(got[0].starts_with(prefix), "case {i}: {got:?}");
                        assert!(
                            got[0].contains(&format!("{} {name}", res.kind)),
                            "case {i}: {got:?}"
                        );
                        assert!(
                            got[0].contains(&format!("--namespace {ns}")),
                            "case {i}: {got:?}"
                        );
                    }
                }
            }
            // A name the server generates is named by its prefix.
            let machines = resource("machines");
            let attrs = Attributes {
                operation: Operation::Create,
                resource: &machines,
                subresource: None,
                namespace: Some("team-a"),
                name: "",
                old: None,
                dry_run: false,
                user: None,
            };
            let got = plugin.unserved_warnings(&attrs, &obj).await;
            assert!(
                got[0].contains("Machine web- will not be reconciled"),
                "{got:?}"
            );
        }
    }
}
