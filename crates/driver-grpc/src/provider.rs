//! The provider SDK: implement [`driver::Driver`], call [`serve`].
//!
//! ```ignore
//! let registration = Registration::new(["aws"]);
//! let options = Options::new("mcm.example:5000");
//! driver_grpc::provider::serve(Arc::new(MyDriver::new()), registration, options, shutdown).await?;
//! ```
//!
//! `serve` connects to the machine-controller-manager, registers, and runs
//! every operation it receives against the driver, each in its own task (the
//! MCM bounds how many are in flight), answering as the driver answered. It
//! fetches an operation's class and secret from the MCM unless they are in
//! its cache (keyed by resourceVersion, so never stale). When the
//! connection drops it reconnects with exponential back-off and registers
//! again; the MCM retries whatever was in flight, which the driver
//! contract's idempotency makes safe. A call still running when the
//! connection drops runs to its end (cutting a driver short mid-create could
//! leave its own bookkeeping half done); its answer is dropped.
//!
//! A driver that panics answers `Internal` for that call; the session goes
//! on.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use api::{Machine, MachineClass};
use driver::{
    Code, CreateMachineRequest, DeleteMachineRequest, Driver, DriverError,
    GenerateMachineClassForMigrationRequest, GetMachineStatusRequest, GetVolumeIDsRequest,
    InitializeMachineRequest, ListMachinesRequest, UpdateMachineRequest,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeSpec, Secret};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::transport::{Channel, Endpoint};

use crate::cache::Cache;
use crate::pb::machine_driver_client::MachineDriverClient;
use crate::pb::operation::Call as Body;
use crate::pb::operation_result::Outcome;
use crate::service::{KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT, SESSION_HEADER};
use crate::tls::ClientTls;
use crate::{Error, pb, wire};

/// What a provider registers as.
#[derive(Clone, Debug)]
pub struct Registration {
    /// The MachineClass `provider` values it serves.
    pub providers: Vec<String>,
    /// Class kinds it translates (`GenerateMachineClassForMigration`).
    pub class_kinds: Vec<String>,
    /// Its name in the MCM's logs and messages.
    pub instance: String,
}

impl Registration {
    /// Serving `providers`, named after this host and process.
    pub fn new<S: Into<String>>(providers: impl IntoIterator<Item = S>) -> Registration {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "provider".to_string());
        Registration {
            providers: providers.into_iter().map(Into::into).collect(),
            class_kinds: Vec::new(),
            instance: format!("{host}/{}", std::process::id()),
        }
    }

    /// Also translates these class kinds.
    pub fn with_class_kinds<S: Into<String>>(mut self, kinds: impl IntoIterator<Item = S>) -> Self {
        self.class_kinds = kinds.into_iter().map(Into::into).collect();
        self
    }

    /// Named `instance` instead.
    pub fn with_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = instance.into();
        self
    }
}

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct Options {
    /// `HOST:PORT` (plain, or TLS with [`Options::tls`]) or a URI.
    pub endpoint: String,
    /// TLS settings; plain gRPC without.
    pub tls: Option<ClientTls>,
    /// First wait before reconnecting; doubles up to `max_backoff`.
    pub min_backoff: Duration,
    /// Longest wait before reconnecting.
    pub max_backoff: Duration,
}

impl Options {
    /// Plain gRPC to `endpoint`, reconnecting after 100 ms to 5 s.
    pub fn new(endpoint: impl Into<String>) -> Options {
        Options {
            endpoint: endpoint.into(),
            tls: None,
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
        }
    }

    /// With TLS.
    pub fn with_tls(mut self, tls: ClientTls) -> Options {
        self.tls = Some(tls);
        self
    }
}

/// The transport endpoint for the options: a bare `HOST:PORT` gets the
/// scheme TLS asks for.
fn endpoint(options: &Options) -> Result<Endpoint, Error> {
    let invalid = |reason: String| Error::Endpoint {
        endpoint: options.endpoint.clone(),
        reason,
    };
    let uri = if options.endpoint.contains("://") {
        options.endpoint.clone()
    } else {
        let scheme = if options.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", options.endpoint)
    };
    let mut ep = Endpoint::from_shared(uri)
        .map_err(|e| invalid(e.to_string()))?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    if let Some(tls) = &options.tls {
        ep = ep.tls_config(tls.config()).map_err(Error::Tls)?;
    }
    Ok(ep)
}

/// Connects, registers and serves `driver` until `shutdown` resolves,
/// reconnecting whenever the connection drops. Fails only on settings that
/// can never work (an invalid endpoint or TLS configuration, no provider
/// name).
pub async fn serve(
    driver: Arc<dyn Driver>,
    registration: Registration,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    if registration.providers.is_empty() {
        return Err(Error::NothingToServe);
    }
    let endpoint = endpoint(&options)?;
    let caches = Arc::new(Caches::default());
    tokio::pin!(shutdown);
    let mut backoff = options.min_backoff;
    loop {
        let ran = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            ran = session(&driver, &registration, &endpoint, &caches) => ran,
        };
        match ran {
            // A session that got as far as registering starts the back-off
            // over: the MCM was there, so it is probably restarting.
            Ok(()) => {
                tracing::info!(endpoint = %options.endpoint, "disconnected from the machine-controller-manager; reconnecting");
                backoff = options.min_backoff;
            }
            Err(SessionError::Registered(status)) => {
                tracing::warn!(endpoint = %options.endpoint, %status, "the session with the machine-controller-manager failed; reconnecting");
                backoff = options.min_backoff;
            }
            // A connection through a proxy whose backend is not up yet ends
            // in a transport error: not a refusal.
            Err(SessionError::Refused(status))
                if matches!(
                    status.code(),
                    tonic::Code::Unknown | tonic::Code::Unavailable | tonic::Code::Cancelled
                ) =>
            {
                tracing::warn!(
                    endpoint = %options.endpoint,
                    %status,
                    "cannot reach the machine-controller-manager; trying again in {backoff:?}"
                )
            }
            Err(SessionError::Refused(status)) => tracing::error!(
                endpoint = %options.endpoint,
                %status,
                "the machine-controller-manager refused the registration; trying again in {backoff:?}"
            ),
            Err(SessionError::Connect(e)) => tracing::warn!(
                endpoint = %options.endpoint,
                error = %e,
                "cannot reach the machine-controller-manager; trying again in {backoff:?}"
            ),
        }
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(options.max_backoff);
    }
}

/// How a session ended, when it did not end cleanly.
enum SessionError {
    /// No connection.
    Connect(tonic::transport::Error),
    /// The registration was refused or never answered.
    Refused(tonic::Status),
    /// The stream failed after the registration was accepted.
    Registered(tonic::Status),
}

/// Fetched classes and secrets; they outlive sessions, since a version
/// names its content for good.
#[derive(Default)]
struct Caches {
    classes: Cache<MachineClass>,
    secrets: Cache<pb::Secret>,
}

/// One connection: register, then serve operations until the stream ends.
async fn session(
    driver: &Arc<dyn Driver>,
    registration: &Registration,
    endpoint: &Endpoint,
    caches: &Arc<Caches>,
) -> Result<(), SessionError> {
    let channel = endpoint.connect().await.map_err(SessionError::Connect)?;
    let mut client = MachineDriverClient::new(channel);
    let (tx, rx) = mpsc::channel::<pb::DriverSide>(1024);
    let hello = pb::DriverSide {
        message: Some(pb::driver_side::Message::Registration(pb::Registration {
            providers: registration.providers.clone(),
            class_kinds: registration.class_kinds.clone(),
            instance: registration.instance.clone(),
        })),
    };
    // The receiver is alive: it was made just above.
    let _ = tx.send(hello).await;
    // The outbound stream ends with this function (returned or dropped),
    // not when the last call in flight lets go of its sender: the MCM
    // must see the session end when it ends, so that it fails the calls
    // over at once.
    let (_ended, end) = oneshot::channel::<()>();
    let mut inbound = client
        .register(ReceiverStream::new(rx).take_until(end))
        .await
        .map_err(SessionError::Refused)?
        .into_inner();
    let id = match inbound.message().await.map_err(SessionError::Refused)? {
        Some(pb::McmSide {
            message: Some(pb::mcm_side::Message::Registered(r)),
        }) => r.session,
        _ => {
            return Err(SessionError::Refused(tonic::Status::internal(
                "the machine-controller-manager did not answer the registration with Registered",
            )));
        }
    };
    let session: AsciiMetadataValue = MetadataValue::try_from(id.as_str()).map_err(|_| {
        SessionError::Refused(tonic::Status::internal(
            "the session ID is not valid metadata",
        ))
    })?;
    tracing::info!(
        providers = %registration.providers.join(", "),
        instance = %registration.instance,
        "registered with the machine-controller-manager"
    );
    let fetcher = Arc::new(Fetcher {
        client,
        session,
        caches: caches.clone(),
    });
    loop {
        match inbound.message().await {
            Ok(Some(pb::McmSide {
                message: Some(pb::mcm_side::Message::Operation(op)),
            })) => {
                let (driver, fetcher, tx) = (driver.clone(), fetcher.clone(), tx.clone());
                tokio::spawn(async move {
                    let result = handle(driver, fetcher, op).await;
                    let answer = pb::DriverSide {
                        message: Some(pb::driver_side::Message::Result(result)),
                    };
                    // A closed stream means the session ended; the MCM
                    // has already failed the call over.
                    let _ = tx.send(answer).await;
                });
            }
            Ok(Some(_)) => {
                tracing::warn!("ignoring an unexpected message from the machine-controller-manager")
            }
            Ok(None) => return Ok(()),
            Err(status) => return Err(SessionError::Registered(status)),
        }
    }
}

/// Fetches an operation's class and secret through the cache.
struct Fetcher {
    client: MachineDriverClient<Channel>,
    session: AsciiMetadataValue,
    caches: Arc<Caches>,
}

/// A class or secret the MCM could not hand over: the transport's fault,
/// so transient.
fn fetch_failed(
    what: &str,
    namespace: &str,
    name: &str,
    version: &str,
    status: &tonic::Status,
) -> DriverError {
    DriverError::new(
        Code::Unavailable,
        format!(
            "fetching {what} {namespace}/{name} (version {version:?}) from the machine-controller-manager: {}",
            status.message()
        ),
    )
}

fn missing(what: &str) -> DriverError {
    DriverError::new(
        Code::InvalidArgument,
        format!("the operation names no {what}"),
    )
}

impl Fetcher {
    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        req.metadata_mut()
            .insert(SESSION_HEADER, self.session.clone());
        req
    }

    async fn class(
        &self,
        meta: Option<&pb::MachineClassMeta>,
    ) -> Result<Arc<MachineClass>, DriverError> {
        let m = meta.ok_or_else(|| missing("machine class"))?;
        let cache = &self.caches.classes;
        if let Some(c) = cache.get(&m.namespace, &m.name, &m.resource_version) {
            return Ok(c);
        }
        let answer = self
            .client
            .clone()
            .get_machine_class(self.request(m.clone()))
            .await
            .map_err(|s| {
                fetch_failed(
                    "machine class",
                    &m.namespace,
                    &m.name,
                    &m.resource_version,
                    &s,
                )
            })?;
        let class: MachineClass =
            wire::from_json("the machine class", &answer.into_inner().object)?;
        let class = Arc::new(class);
        cache.insert(&m.namespace, &m.name, &m.resource_version, class.clone());
        Ok(class)
    }

    async fn secret(&self, meta: Option<&pb::SecretMeta>) -> Result<Arc<pb::Secret>, DriverError> {
        let m = meta.ok_or_else(|| missing("secret"))?;
        let cache = &self.caches.secrets;
        if let Some(s) = cache.get(&m.namespace, &m.name, &m.resource_version) {
            return Ok(s);
        }
        let answer = self
            .client
            .clone()
            .get_secret(self.request(m.clone()))
            .await
            .map_err(|s| fetch_failed("secret", &m.namespace, &m.name, &m.resource_version, &s))?;
        let secret = Arc::new(answer.into_inner());
        cache.insert(&m.namespace, &m.name, &m.resource_version, secret.clone());
        Ok(secret)
    }

    /// The machine, class and secret of a machine call, as a driver takes
    /// them.
    async fn machine_call(
        &self,
        call: &pb::MachineCall,
    ) -> Result<(Machine, Arc<MachineClass>, Secret), DriverError> {
        let machine: Machine = wire::from_json("the machine", &call.machine)?;
        let (class, secret) = futures::try_join!(
            self.class(call.machine_class.as_ref()),
            self.secret(call.secret.as_ref())
        )?;
        let secret = wire::secret_from_wire(&secret, call.user_data.as_deref());
        Ok((machine, class, secret))
    }
}

/// Runs one operation against the driver, in a task of its own so that a
/// panicking driver costs only this call.
async fn handle(
    driver: Arc<dyn Driver>,
    fetcher: Arc<Fetcher>,
    op: pb::Operation,
) -> pb::OperationResult {
    let outcome = match op.call {
        None => Err(DriverError::new(
            Code::InvalidArgument,
            "the operation names no call",
        )),
        Some(body) => {
            let call = wire::call_of(&body);
            match tokio::spawn(async move { run(&*driver, &fetcher, body).await }).await {
                Ok(outcome) => outcome,
                Err(e) => Err(DriverError::new(
                    Code::Internal,
                    format!("the driver failed during {call}: {e}"),
                )),
            }
        }
    };
    pb::OperationResult {
        id: op.id,
        outcome: Some(outcome.unwrap_or_else(|e| Outcome::Error(wire::status_of(&e)))),
    }
}

/// One driver call: decode, fetch, call, encode.
async fn run(driver: &dyn Driver, fetcher: &Fetcher, body: Body) -> Result<Outcome, DriverError> {
    Ok(match body {
        Body::CreateMachine(c) => {
            let (machine, class, secret) = fetcher.machine_call(&c).await?;
            let req = CreateMachineRequest {
                machine: &machine,
                machine_class: &class,
                secret: &secret,
            };
            Outcome::CreateMachine(wire::create_to_wire(&driver.create_machine(req).await?))
        }
        Body::InitializeMachine(c) => {
            let (machine, class, secret) = fetcher.machine_call(&c).await?;
            let req = InitializeMachineRequest {
                machine: &machine,
                machine_class: &class,
                secret: &secret,
            };
            Outcome::InitializeMachine(wire::initialize_to_wire(
                &driver.initialize_machine(req).await?,
            ))
        }
        Body::DeleteMachine(c) => {
            let (machine, class, secret) = fetcher.machine_call(&c).await?;
            let req = DeleteMachineRequest {
                machine: &machine,
                machine_class: &class,
                secret: &secret,
            };
            Outcome::DeleteMachine(wire::delete_to_wire(&driver.delete_machine(req).await?))
        }
        Body::GetMachineStatus(c) => {
            let (machine, class, secret) = fetcher.machine_call(&c).await?;
            let req = GetMachineStatusRequest {
                machine: &machine,
                machine_class: &class,
                secret: &secret,
            };
            Outcome::GetMachineStatus(wire::status_to_wire(&driver.get_machine_status(req).await?))
        }
        Body::ListMachines(l) => {
            let (class, secret) = futures::try_join!(
                fetcher.class(l.machine_class.as_ref()),
                fetcher.secret(l.secret.as_ref())
            )?;
            let secret = wire::secret_from_wire(&secret, None);
            let req = ListMachinesRequest {
                machine_class: &class,
                secret: &secret,
            };
            Outcome::ListMachines(wire::list_to_wire(&driver.list_machines(req).await?))
        }
        Body::GetVolumeIds(v) => {
            let specs: Vec<PersistentVolumeSpec> = v
                .pv_specs
                .iter()
                .map(|s| wire::from_json("a persistent volume spec", s))
                .collect::<Result<_, _>>()?;
            let req = GetVolumeIDsRequest { pv_specs: &specs };
            Outcome::GetVolumeIds(wire::volume_ids_to_wire(&driver.get_volume_ids(req).await?))
        }
        Body::GenerateMachineClassForMigration(m) => {
            let old: Value = wire::from_json(
                "the provider-specific class",
                &m.provider_specific_machine_class,
            )?;
            let class: MachineClass = wire::from_json("the machine class", &m.machine_class)?;
            let class_spec = wire::class_spec_from_wire(m.class_spec.as_ref());
            let req = GenerateMachineClassForMigrationRequest {
                provider_specific_machine_class: &old,
                machine_class: &class,
                class_spec: &class_spec,
            };
            let r = driver.generate_machine_class_for_migration(req).await?;
            Outcome::GenerateMachineClassForMigration(wire::migration_to_wire(&r)?)
        }
        Body::UpdateMachine(u) => {
            let c = u.machine.as_ref().ok_or_else(|| missing("machine"))?;
            let (machine, class, secret) = fetcher.machine_call(c).await?;
            let last: Option<Value> = u
                .last_applied_provider_spec
                .as_deref()
                .map(|b| wire::from_json("the last applied provider spec", b))
                .transpose()?;
            let req = UpdateMachineRequest {
                machine: &machine,
                machine_class: &class,
                secret: &secret,
                last_applied_provider_spec: last.as_ref(),
            };
            Outcome::UpdateMachine(wire::update_to_wire(&driver.update_machine(req).await?))
        }
    })
}
