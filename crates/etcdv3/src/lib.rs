//! A small client of etcd's v3 gRPC API: KV (range, put, delete, txn,
//! compact), Watch (bidirectional streams with progress requests),
//! Maintenance (status, snapshot, defragment) and Cluster (member list, add,
//! remove, promote).
//!
//! Why not the `etcd-client` crate: it generates its messages with
//! `tonic-build`, which needs `protoc` at build time on every machine that
//! builds the workspace. etcd's messages are few and stable, so they are
//! written out in [`proto`] and the calls go through tonic's generic
//! [`tonic::client::Grpc`].
//!
//! A [`Client`] holds one lazily connected channel per endpoint and uses one
//! at a time. Reads move on to the next endpoint when one is unreachable;
//! writes are sent once, because a write whose answer was lost may or may
//! not have been applied, and only the caller knows whether repeating it is
//! safe (a compare-and-swap is; a blind put may not be).

pub mod proto;
#[cfg(feature = "testing")]
pub mod testing;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic_prost::ProstCodec;

/// How long a unary call may take before it fails with `DeadlineExceeded`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to one endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("invalid etcd endpoint {0:?}: {1}")]
    InvalidEndpoint(String, String),
    #[error("etcd TLS configuration: {0}")]
    Tls(String),
    #[error("etcd {code:?}: {message}")]
    Status { code: tonic::Code, message: String },
    #[error("etcd watch stream ended")]
    WatchEnded,
}

impl Error {
    fn status(s: tonic::Status) -> Error {
        Error::Status {
            code: s.code(),
            message: s.message().to_string(),
        }
    }

    fn message_contains(&self, text: &str) -> bool {
        matches!(self, Error::Status { message, .. } if message.contains(text))
    }

    /// The revision asked for was compacted away
    /// (`mvcc: required revision has been compacted`).
    pub fn is_compacted(&self) -> bool {
        self.message_contains("required revision has been compacted")
    }

    /// The revision asked for is newer than the store's
    /// (`mvcc: required revision is a future revision`).
    pub fn is_future_revision(&self) -> bool {
        self.message_contains("required revision is a future revision")
    }

    /// The endpoint could not be reached or has no leader: another endpoint
    /// (or a later try) may succeed.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Status {
                code: tonic::Code::Unavailable | tonic::Code::DeadlineExceeded,
                ..
            }
        )
    }

    /// The request never left this process (the connection could not be
    /// made), so repeating it elsewhere cannot apply it twice.
    pub fn never_sent(&self) -> bool {
        matches!(self, Error::Status { code: tonic::Code::Unavailable, message }
            if message.contains("tcp connect error")
                || message.contains("Connection refused")
                || message.contains("error trying to connect"))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Files of a client TLS configuration (PEM), as kube-apiserver's
/// `--etcd-cafile`, `--etcd-certfile` and `--etcd-keyfile`.
#[derive(Clone, Debug, Default)]
pub struct TlsFiles {
    pub ca: Option<std::path::PathBuf>,
    pub cert: Option<std::path::PathBuf>,
    pub key: Option<std::path::PathBuf>,
}

/// What to connect to.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// `http://host:port` or `https://host:port`, one per member.
    pub endpoints: Vec<String>,
    pub tls: Option<TlsFiles>,
}

impl Config {
    /// Endpoints from a comma-separated list (`--etcd-servers`).
    pub fn from_list(list: &str) -> Config {
        Config {
            endpoints: list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            tls: None,
        }
    }
}

/// A client of one etcd cluster. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    endpoints: Vec<String>,
    channels: Vec<Channel>,
    /// The endpoint in use; advanced when it fails.
    current: AtomicUsize,
}

/// A watch stream: responses in order, and a handle to send progress
/// requests on the same stream (so their answers are ordered after every
/// event already sent).
pub struct Watch {
    requests: mpsc::Sender<proto::WatchRequest>,
    responses: tonic::Streaming<proto::WatchResponse>,
}

/// Sends progress requests on a watch stream.
#[derive(Clone)]
pub struct ProgressHandle(mpsc::Sender<proto::WatchRequest>);

impl ProgressHandle {
    /// Asks etcd for a progress notification (a response without events
    /// carrying the current revision); never blocks.
    pub fn request(&self) {
        let _ = self.0.try_send(proto::WatchRequest {
            request_union: Some(proto::WatchRequestUnion::Progress(
                proto::WatchProgressRequest {},
            )),
        });
    }
}

impl Watch {
    /// The next response; `Err(WatchEnded)` once the stream is closed.
    pub async fn message(&mut self) -> Result<proto::WatchResponse> {
        match self.responses.message().await {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err(Error::WatchEnded),
            Err(s) => Err(Error::status(s)),
        }
    }

    pub fn progress_handle(&self) -> ProgressHandle {
        ProgressHandle(self.requests.clone())
    }
}

fn read_pem(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Tls(format!("{}: {e}", path.display())))
}

fn endpoint(url: &str, tls: Option<&TlsFiles>) -> Result<Endpoint> {
    let invalid =
        |e: &dyn std::fmt::Display| Error::InvalidEndpoint(url.to_string(), e.to_string());
    let mut ep = Endpoint::from_shared(url.to_string())
        .map_err(|e| invalid(&e))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(5))
        .keep_alive_while_idle(true);
    if url.starts_with("https://") {
        let mut cfg = ClientTlsConfig::new();
        if let Some(files) = tls {
            if let Some(ca) = &files.ca {
                cfg = cfg.ca_certificate(Certificate::from_pem(read_pem(ca)?));
            }
            match (&files.cert, &files.key) {
                (Some(c), Some(k)) => {
                    cfg = cfg.identity(Identity::from_pem(read_pem(c)?, read_pem(k)?))
                }
                (None, None) => {}
                _ => return Err(Error::Tls("a client certificate needs its key".into())),
            }
        }
        ep = ep.tls_config(cfg).map_err(|e| invalid(&e))?;
    }
    Ok(ep)
}

/// Calls one unary method on a channel.
async fn unary<Req, Resp>(channel: Channel, path: &'static str, req: Req) -> Result<Resp>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.map_err(|e| Error::Status {
        code: tonic::Code::Unavailable,
        message: format!("error trying to connect: {e}"),
    })?;
    let mut request = tonic::Request::new(req);
    request.set_timeout(REQUEST_TIMEOUT);
    let codec = ProstCodec::<Req, Resp>::default();
    let path = http::uri::PathAndQuery::from_static(path);
    grpc.unary(request, path, codec)
        .await
        .map(tonic::Response::into_inner)
        .map_err(Error::status)
}

impl Client {
    /// A client of the endpoints in `config`. Connections are made on first
    /// use, so this succeeds while the cluster is still starting.
    pub fn new(config: &Config) -> Result<Client> {
        if config.endpoints.is_empty() {
            return Err(Error::InvalidEndpoint(String::new(), "no endpoints".into()));
        }
        let mut channels = Vec::new();
        for url in &config.endpoints {
            channels.push(endpoint(url, config.tls.as_ref())?.connect_lazy());
        }
        Ok(Client {
            inner: Arc::new(Inner {
                endpoints: config.endpoints.clone(),
                channels,
                current: AtomicUsize::new(0),
            }),
        })
    }

    /// A client of `url` alone (maintenance calls address one member).
    pub fn single(url: &str, tls: Option<&TlsFiles>) -> Result<Client> {
        Client::new(&Config {
            endpoints: vec![url.to_string()],
            tls: tls.cloned(),
        })
    }

    pub fn endpoints(&self) -> &[String] {
        &self.inner.endpoints
    }

    fn pick(&self) -> (usize, Channel) {
        let i = self.inner.current.load(Ordering::Relaxed) % self.inner.channels.len();
        (i, self.inner.channels[i].clone())
    }

    /// Moves off endpoint `i` (if it is still the current one).
    fn fail_over(&self, i: usize) {
        let next = (i + 1) % self.inner.channels.len();
        let _ = self
            .inner
            .current
            .compare_exchange(i, next, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// A read: tried on every endpoint in turn (twice round) while they are
    /// unavailable.
    async fn read<Req, Resp>(&self, path: &'static str, req: Req) -> Result<Resp>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let tries = self.inner.channels.len() * 2;
        let mut last = None;
        for attempt in 0..tries {
            let (i, ch) = self.pick();
            match unary(ch, path, req.clone()).await {
                Err(e) if e.is_unavailable() => {
                    self.fail_over(i);
                    last = Some(e);
                    if attempt + 1 >= self.inner.channels.len() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                other => return other,
            }
        }
        Err(last.unwrap_or(Error::WatchEnded))
    }

    /// A write: repeated on another endpoint only when it was never sent.
    async fn write<Req, Resp>(&self, path: &'static str, req: Req) -> Result<Resp>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let tries = self.inner.channels.len() * 2;
        let mut last = None;
        for _ in 0..tries {
            let (i, ch) = self.pick();
            match unary(ch, path, req.clone()).await {
                Err(e) if e.never_sent() => {
                    self.fail_over(i);
                    last = Some(e);
                }
                Err(e) => {
                    if e.is_unavailable() {
                        self.fail_over(i);
                    }
                    return Err(e);
                }
                ok => return ok,
            }
        }
        Err(last.unwrap_or(Error::WatchEnded))
    }

    pub async fn range(&self, req: proto::RangeRequest) -> Result<proto::RangeResponse> {
        self.read("/etcdserverpb.KV/Range", req).await
    }

    pub async fn put(&self, req: proto::PutRequest) -> Result<proto::PutResponse> {
        self.write("/etcdserverpb.KV/Put", req).await
    }

    pub async fn delete_range(
        &self,
        req: proto::DeleteRangeRequest,
    ) -> Result<proto::DeleteRangeResponse> {
        self.write("/etcdserverpb.KV/DeleteRange", req).await
    }

    pub async fn txn(&self, req: proto::TxnRequest) -> Result<proto::TxnResponse> {
        self.write("/etcdserverpb.KV/Txn", req).await
    }

    /// Compacts history before `revision` (etcd keeps `revision` itself).
    pub async fn compact(&self, revision: i64) -> Result<proto::CompactionResponse> {
        self.write(
            "/etcdserverpb.KV/Compact",
            proto::CompactionRequest {
                revision,
                physical: false,
            },
        )
        .await
    }

    /// Opens a watch stream with one watcher and waits for etcd to confirm
    /// it (`created`).
    pub async fn watch(&self, create: proto::WatchCreateRequest) -> Result<Watch> {
        let (i, ch) = self.pick();
        let (tx, rx) = mpsc::channel(16);
        let first = proto::WatchRequest {
            request_union: Some(proto::WatchRequestUnion::Create(create)),
        };
        tx.send(first).await.map_err(|_| Error::WatchEnded)?;
        let mut grpc = tonic::client::Grpc::new(ch);
        if let Err(e) = grpc.ready().await {
            self.fail_over(i);
            return Err(Error::Status {
                code: tonic::Code::Unavailable,
                message: format!("error trying to connect: {e}"),
            });
        }
        let codec = ProstCodec::<proto::WatchRequest, proto::WatchResponse>::default();
        let path = http::uri::PathAndQuery::from_static("/etcdserverpb.Watch/Watch");
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        let responses = match grpc
            .streaming(tonic::Request::new(stream), path, codec)
            .await
        {
            Ok(r) => r.into_inner(),
            Err(s) => {
                let e = Error::status(s);
                if e.is_unavailable() {
                    self.fail_over(i);
                }
                return Err(e);
            }
        };
        let mut watch = Watch {
            requests: tx,
            responses,
        };
        loop {
            let m = watch.message().await?;
            if m.created {
                return Ok(watch);
            }
        }
    }

    pub async fn status(&self) -> Result<proto::StatusResponse> {
        self.read("/etcdserverpb.Maintenance/Status", proto::StatusRequest {})
            .await
    }

    /// Defragments the member this client talks to (use [`Client::single`]).
    pub async fn defragment(&self, timeout: Duration) -> Result<proto::DefragmentResponse> {
        let (_, ch) = self.pick();
        let mut grpc = tonic::client::Grpc::new(ch);
        grpc.ready().await.map_err(|e| Error::Status {
            code: tonic::Code::Unavailable,
            message: format!("error trying to connect: {e}"),
        })?;
        let mut request = tonic::Request::new(proto::DefragmentRequest {});
        request.set_timeout(timeout);
        let path = http::uri::PathAndQuery::from_static("/etcdserverpb.Maintenance/Defragment");
        grpc.unary(request, path, ProstCodec::default())
            .await
            .map(tonic::Response::into_inner)
            .map_err(Error::status)
    }

    /// Streams a snapshot of the backend database into `out` (etcd appends
    /// a SHA-256 of the content, which `etcdctl snapshot restore` checks)
    /// and returns how many bytes it wrote.
    pub async fn snapshot<W: tokio::io::AsyncWrite + Unpin>(
        &self,
        out: &mut W,
        timeout: Duration,
    ) -> Result<u64> {
        use tokio::io::AsyncWriteExt;
        let (_, ch) = self.pick();
        let mut grpc = tonic::client::Grpc::new(ch);
        grpc.ready().await.map_err(|e| Error::Status {
            code: tonic::Code::Unavailable,
            message: format!("error trying to connect: {e}"),
        })?;
        let mut request = tonic::Request::new(proto::SnapshotRequest {});
        request.set_timeout(timeout);
        let path = http::uri::PathAndQuery::from_static("/etcdserverpb.Maintenance/Snapshot");
        let codec = ProstCodec::<proto::SnapshotRequest, proto::SnapshotResponse>::default();
        let mut stream = grpc
            .server_streaming(request, path, codec)
            .await
            .map_err(Error::status)?
            .into_inner();
        let mut bytes = 0u64;
        while let Some(chunk) = stream.message().await.map_err(Error::status)? {
            bytes += chunk.blob.len() as u64;
            out.write_all(&chunk.blob)
                .await
                .map_err(|e| Error::Status {
                    code: tonic::Code::Internal,
                    message: format!("writing the snapshot: {e}"),
                })?;
        }
        out.flush().await.map_err(|e| Error::Status {
            code: tonic::Code::Internal,
            message: format!("writing the snapshot: {e}"),
        })?;
        Ok(bytes)
    }

    pub async fn member_list(&self) -> Result<proto::MemberListResponse> {
        self.read(
            "/etcdserverpb.Cluster/MemberList",
            proto::MemberListRequest {},
        )
        .await
    }

    pub async fn member_add(
        &self,
        peer_urls: Vec<String>,
        is_learner: bool,
    ) -> Result<proto::MemberAddResponse> {
        self.write(
            "/etcdserverpb.Cluster/MemberAdd",
            proto::MemberAddRequest {
                peer_urls,
                is_learner,
            },
        )
        .await
    }

    pub async fn member_remove(&self, id: u64) -> Result<proto::MemberRemoveResponse> {
        self.write(
            "/etcdserverpb.Cluster/MemberRemove",
            proto::MemberRemoveRequest { id },
        )
        .await
    }

    pub async fn member_promote(&self, id: u64) -> Result<proto::MemberPromoteResponse> {
        self.write(
            "/etcdserverpb.Cluster/MemberPromote",
            proto::MemberPromoteRequest { id },
        )
        .await
    }
}
