//! What the tests of the gRPC transport share: a machine-controller-manager
//! side (a router served on `127.0.0.1:0`), providers connected to it with
//! the SDK, class fixtures, and a small in-memory driver whose calls can be
//! held back, counted and made to panic.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use api::{Machine, MachineClass};
use async_trait::async_trait;
use driver::conformance::ClassFixture;
use driver::*;
use driver_grpc::provider::{Options, Registration};
use driver_grpc::tls::ServerTls;
use driver_grpc::{Router, RouterConfig};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// A task aborted when dropped, so a test's background work ends with it.
pub struct Task(pub tokio::task::JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The MCM's side: a router and where it listens.
pub struct Mcm {
    pub router: Router,
    pub addr: SocketAddr,
    _serving: Task,
}

/// Serves a router with `config` on a free loopback port.
pub async fn mcm(config: RouterConfig) -> Mcm {
    mcm_with(config, None).await
}

/// [`mcm`] with TLS.
pub async fn mcm_with(config: RouterConfig, tls: Option<ServerTls>) -> Mcm {
    let router = Router::new(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    let r = router.clone();
    let serving = tokio::spawn(async move {
        driver_grpc::serve(r, listener, tls, std::future::pending())
            .await
            .expect("serving the driver endpoint");
    });
    Mcm {
        router,
        addr,
        _serving: Task(serving),
    }
}

impl Mcm {
    /// Options to connect to this MCM, reconnecting quickly.
    pub fn options(&self) -> Options {
        let mut o = Options::new(self.addr.to_string());
        o.min_backoff = Duration::from_millis(20);
        o.max_backoff = Duration::from_millis(200);
        o
    }

    /// Connects `driver` as `providers` and waits until the router routes
    /// to it.
    pub async fn connect(&self, driver: Arc<dyn Driver>, providers: &[&str]) -> Task {
        let task = connect(
            driver,
            Registration::new(providers.iter().copied()),
            self.options(),
        );
        for p in providers {
            assert!(
                self.router.wait_for(p, Duration::from_secs(10)).await,
                "provider {p} did not register"
            );
        }
        task
    }
}

/// Runs the SDK for `driver` in the background.
pub fn connect(driver: Arc<dyn Driver>, registration: Registration, options: Options) -> Task {
    Task(tokio::spawn(async move {
        driver_grpc::provider::serve(driver, registration, options, std::future::pending())
            .await
            .expect("the provider SDK's settings are valid");
    }))
}

/// A class of `provider` in namespace `default`, with a resourceVersion
/// as read from the API, and its secret (userData and one credential).
pub fn class(name: &str, provider: &str, spec: Value) -> ClassFixture {
    let mut machine_class = MachineClass::new(name, provider, spec);
    machine_class.metadata.namespace = Some("default".into());
    ClassFixture {
        machine_class,
        secret: Secret {
            metadata: ObjectMeta {
                name: Some(format!("{name}-secret")),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            string_data: Some(BTreeMap::from([
                ("userData".to_string(), "#cloud-config".to_string()),
                ("token".to_string(), format!("credential-of-{name}")),
            ])),
            ..Secret::default()
        },
    }
}

/// A machine of the class.
pub fn machine(name: &str, class: &ClassFixture) -> Machine {
    Machine::test(name).class(
        class
            .machine_class
            .metadata
            .name
            .as_deref()
            .unwrap_or_default(),
    )
}

/// What a [`Memory`] driver saw of one create.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    pub machine: String,
    pub class: String,
    pub user_data: Option<String>,
    pub token: Option<String>,
}

/// An in-memory driver: VMs by cluster (`providerSpec.cluster`) and
/// machine name; creates can be held at a gate, and a machine named
/// `panic` makes it panic.
pub struct Memory {
    pub name: String,
    vms: Mutex<HashMap<(String, String), String>>,
    serial: Mutex<u64>,
    /// When set, each create waits for a permit before it creates.
    pub gate: Option<Arc<Semaphore>>,
    /// Creates that reached the driver, in order.
    pub seen: Mutex<Vec<Seen>>,
    /// How many creates are waiting at the gate.
    pub waiting: Mutex<usize>,
}

impl Memory {
    pub fn new(name: &str) -> Memory {
        Memory {
            name: name.to_string(),
            vms: Mutex::default(),
            serial: Mutex::new(0),
            gate: None,
            seen: Mutex::default(),
            waiting: Mutex::new(0),
        }
    }

    pub fn gated(name: &str, gate: Arc<Semaphore>) -> Memory {
        Memory {
            gate: Some(gate),
            ..Memory::new(name)
        }
    }

    /// Every VM: (cluster, machine) → providerID.
    pub fn vms(&self) -> HashMap<(String, String), String> {
        self.vms.lock().clone()
    }
}

fn cluster(class: &MachineClass) -> String {
    class.provider_spec["cluster"]
        .as_str()
        .unwrap_or("default")
        .to_string()
}

fn key(req_class: &MachineClass, machine: &Machine) -> (String, String) {
    (
        cluster(req_class),
        machine.metadata.name.clone().unwrap_or_default(),
    )
}

fn text(secret: &Secret, key: &str) -> Option<String> {
    secret
        .data
        .as_ref()?
        .get(key)
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
}

#[async_trait]
impl Driver for Memory {
    async fn create_machine(
        &self,
        req: CreateMachineRequest<'_>,
    ) -> Result<CreateMachineResponse, DriverError> {
        let k = key(req.machine_class, req.machine);
        if k.1 == "panic" {
            panic!("asked to panic");
        }
        self.seen.lock().push(Seen {
            machine: k.1.clone(),
            class: req.machine_class.metadata.name.clone().unwrap_or_default(),
            user_data: text(req.secret, "userData"),
            token: text(req.secret, "token"),
        });
        if let Some(gate) = &self.gate {
            *self.waiting.lock() += 1;
            gate.acquire().await.expect("the gate stays open").forget();
            *self.waiting.lock() -= 1;
        }
        let mut vms = self.vms.lock();
        let pid = match vms.get(&k) {
            Some(pid) => pid.clone(),
            None => {
                let mut serial = self.serial.lock();
                *serial += 1;
                let pid = format!("{}:///{}/{}-{serial}", self.name, k.0, k.1);
                vms.insert(k.clone(), pid.clone());
                pid
            }
        };
        Ok(CreateMachineResponse {
            provider_id: pid,
            node_name: k.1,
            ..CreateMachineResponse::default()
        })
    }

    async fn delete_machine(
        &self,
        req: DeleteMachineRequest<'_>,
    ) -> Result<DeleteMachineResponse, DriverError> {
        self.vms.lock().remove(&key(req.machine_class, req.machine));
        Ok(DeleteMachineResponse::default())
    }

    async fn get_machine_status(
        &self,
        req: GetMachineStatusRequest<'_>,
    ) -> Result<GetMachineStatusResponse, DriverError> {
        let k = key(req.machine_class, req.machine);
        let pid = self
            .vms
            .lock()
            .get(&k)
            .cloned()
            .ok_or_else(|| DriverError::new(Code::NotFound, format!("no VM for {}", k.1)))?;
        Ok(GetMachineStatusResponse {
            provider_id: pid,
            node_name: k.1,
            ..GetMachineStatusResponse::default()
        })
    }

    async fn list_machines(
        &self,
        req: ListMachinesRequest<'_>,
    ) -> Result<ListMachinesResponse, DriverError> {
        let c = cluster(req.machine_class);
        Ok(ListMachinesResponse {
            machine_list: self
                .vms
                .lock()
                .iter()
                .filter(|((cl, _), _)| *cl == c)
                .map(|((_, m), pid)| (pid.clone(), m.clone()))
                .collect(),
        })
    }

    async fn get_volume_ids(
        &self,
        req: GetVolumeIDsRequest<'_>,
    ) -> Result<GetVolumeIDsResponse, DriverError> {
        // Claims CSI volumes whose driver is named after this provider.
        Ok(GetVolumeIDsResponse {
            volume_ids: req
                .pv_specs
                .iter()
                .filter_map(|s| s.csi.as_ref())
                .filter(|c| c.driver == self.name)
                .map(|c| c.volume_handle.clone())
                .collect(),
        })
    }
}

/// A spec naming a cluster, for [`Memory`].
pub fn in_cluster(name: &str) -> Value {
    json!({ "cluster": name })
}
