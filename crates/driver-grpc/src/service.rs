//! The `MachineDriver` gRPC service over a [`Router`], and [`serve`], which
//! puts it on a listener (plain or TLS, optionally requiring client
//! certificates).
//!
//! Handlers are thin: `Register` checks the registration, opens a session
//! and pumps answers into it until the stream ends; `GetMachineClass` and
//! `GetSecret` look the object up for the caller's session.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

use crate::Error;
use crate::objects::{Key, Kind, Object};
use crate::pb;
use crate::pb::machine_driver_server::{MachineDriver, MachineDriverServer};
use crate::router::{Outbound, Router};
use crate::tls::ServerTls;

/// Metadata that names the caller's session in `GetMachineClass` and
/// `GetSecret`.
pub const SESSION_HEADER: &str = "trellis-session";

/// How long a new stream may take to send its registration.
const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(10);

/// Operations queued for one provider before senders wait. The machine
/// controller bounds calls in flight by its worker count (50 by default),
/// so this is never reached in practice; it only bounds memory.
const OUTBOUND_QUEUE: usize = 1024;

/// HTTP/2 pings on idle connections, so that a provider that vanished
/// without closing its connection (a partition, a host gone) is noticed
/// and its calls fail over instead of waiting for the call timeout.
pub(crate) const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
pub(crate) const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

struct Service {
    router: Router,
}

type OutboundStream = Pin<Box<dyn Stream<Item = Outbound> + Send + 'static>>;

/// The first message of a stream, which must be a registration.
async fn registration(inbound: &mut Streaming<pb::DriverSide>) -> Result<pb::Registration, Status> {
    let first = tokio::time::timeout(REGISTRATION_TIMEOUT, inbound.message())
        .await
        .map_err(|_| {
            Status::deadline_exceeded(format!(
                "no Registration within {REGISTRATION_TIMEOUT:?} of opening the stream"
            ))
        })??;
    match first.and_then(|m| m.message) {
        Some(pb::driver_side::Message::Registration(r)) => Ok(r),
        _ => Err(Status::invalid_argument(
            "the first message of a Register stream must be a Registration",
        )),
    }
}

impl Service {
    /// The caller's live session.
    fn caller<T>(
        &self,
        req: &Request<T>,
    ) -> Result<std::sync::Arc<crate::router::Session>, Status> {
        let id = req
            .metadata()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                Status::unauthenticated(format!(
                    "{SESSION_HEADER} metadata is missing: register first and send the session it names"
                ))
            })?;
        self.router
            .session(id)
            .ok_or_else(|| Status::unauthenticated("no live session has this ID; register again"))
    }
}

fn not_found(what: &str, namespace: &str, name: &str, version: &str) -> Status {
    Status::not_found(format!(
        "{what} {namespace}/{name} at version {version:?} was not sent to this provider in an operation"
    ))
}

#[tonic::async_trait]
impl MachineDriver for Service {
    type RegisterStream = OutboundStream;

    async fn register(
        &self,
        req: Request<Streaming<pb::DriverSide>>,
    ) -> Result<Response<Self::RegisterStream>, Status> {
        let mut inbound = req.into_inner();
        let reg = registration(&mut inbound).await?;
        self.router
            .check_registration(&reg)
            .map_err(Status::invalid_argument)?;
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        let session = self.router.new_session(reg, tx.clone());
        // `Registered` goes first, before the session can take calls.
        let registered = pb::McmSide {
            message: Some(pb::mcm_side::Message::Registered(pb::Registered {
                session: session.id.clone(),
            })),
        };
        tx.send(Ok(registered))
            .await
            .map_err(|_| Status::unavailable("the stream closed during registration"))?;
        drop(tx);
        self.router.publish(session.clone());
        let router = self.router.clone();
        tokio::spawn(async move {
            loop {
                match inbound.message().await {
                    Ok(Some(pb::DriverSide {
                        message: Some(pb::driver_side::Message::Result(result)),
                    })) => session.complete(result),
                    Ok(Some(_)) => tracing::warn!(
                        instance = %session.instance,
                        "ignoring a message other than a result after registration"
                    ),
                    Ok(None) => break,
                    Err(status) => {
                        tracing::debug!(instance = %session.instance, %status, "provider stream failed");
                        break;
                    }
                }
            }
            router.close(&session);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn get_machine_class(
        &self,
        req: Request<pb::MachineClassMeta>,
    ) -> Result<Response<pb::MachineClass>, Status> {
        let session = self.caller(&req)?;
        let m = req.into_inner();
        let key = Key {
            kind: Kind::Class,
            namespace: m.namespace,
            name: m.name,
            version: m.resource_version,
        };
        match self.router.fetch(&session, &key) {
            Some(Object::Class(c)) => Ok(Response::new((*c).clone())),
            _ => Err(not_found(
                "machine class",
                &key.namespace,
                &key.name,
                &key.version,
            )),
        }
    }

    async fn get_secret(
        &self,
        req: Request<pb::SecretMeta>,
    ) -> Result<Response<pb::Secret>, Status> {
        let session = self.caller(&req)?;
        let m = req.into_inner();
        let key = Key {
            kind: Kind::Secret,
            namespace: m.namespace,
            name: m.name,
            version: m.resource_version,
        };
        match self.router.fetch(&session, &key) {
            Some(Object::Secret(s)) => Ok(Response::new((*s).clone())),
            _ => Err(not_found("secret", &key.namespace, &key.name, &key.version)),
        }
    }
}

/// Serves `router`'s `MachineDriver` service on `listener` until
/// `shutdown` resolves: plain gRPC without `tls`, else TLS (with client
/// certificates required when the TLS settings name a client CA).
pub async fn serve(
    router: Router,
    listener: TcpListener,
    tls: Option<ServerTls>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    let mut builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT));
    if let Some(tls) = tls {
        builder = builder.tls_config(tls.config()).map_err(Error::Tls)?;
    }
    let service = MachineDriverServer::new(Service { router });
    builder
        .add_service(service)
        // Small messages both ways: without TCP_NODELAY, Nagle's algorithm
        // and delayed ACKs add tens of milliseconds to a call.
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await
        .map_err(Error::Serve)
}
