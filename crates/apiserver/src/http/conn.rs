//! Connection management for the API server's listeners: how many
//! connections are held, for how long, and what a client over its share is
//! told.
//!
//! Without this, a connection that completes the TLS handshake and then
//! sends nothing (or half a request header, or goes quiet after a request)
//! stays open forever, and enough of them exhaust the process's file
//! descriptors: every other client is locked out and the store cannot open
//! its next log segment. So:
//! - a TLS handshake must finish within `handshake_timeout`;
//! - the first request must start within `header_read_timeout`, and every
//!   later HTTP/1.1 request header must arrive within it (kube-apiserver's
//!   `ReadHeaderTimeout`, 32 s);
//! - a connection with no request in flight for `idle_timeout` is closed
//!   (HTTP/1.1) or sent a GOAWAY (HTTP/2), as Go's `IdleTimeout` does for
//!   kube-apiserver (90 s). A watch is a request in flight until its
//!   response body ends, however quiet it is, so watches are never cut;
//!   HTTP/2 pings find peers that vanished under an open stream;
//! - at most `max_connections` are held in total and `max_per_client` per
//!   client address. The total is kept below the soft open-file limit, which
//!   [`raise_fd_limit`] lifts to the hard limit at start. A connection over
//!   a cap gets a `429 TooManyRequests` Status naming the cap (client-go
//!   waits `Retry-After` and retries) instead of silent starvation; only
//!   while too many refusals are already in progress is it dropped at once.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tower::ServiceExt;

use crate::http::tls::PeerCertificates;

/// Limits and timeouts of the HTTP listeners.
#[derive(Clone, Debug)]
pub struct ConnLimits {
    /// Connections held at once, all clients together (further bounded by
    /// the open-file limit, minus a reserve for the store and the rest).
    pub max_connections: usize,
    /// Connections held at once from one client address.
    pub max_per_client: usize,
    /// A TLS handshake must finish within this.
    pub handshake_timeout: Duration,
    /// A request header must arrive within this (the first one counted from
    /// the end of the handshake).
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max_connections: 20_000,
            max_per_client: 2_000,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
        }
    }
}

/// File descriptors kept free for everything that is not a client
/// connection: the store's log segments and snapshots, outgoing webhook and
/// controller connections, the audit log.
const FD_RESERVE: u64 = 256;
/// Refusals (handshake plus one 429) in progress at once; past this a
/// connection over a cap is closed without a word, so refusing cannot
/// itself exhaust descriptors.
const MAX_REFUSING: usize = 64;
/// How long a refused connection may take to read its answer.
const REFUSAL_GRACE: Duration = Duration::from_secs(5);
/// How long a connection that was asked to shut down (idle, or server
/// shutdown) with no request in flight may take to go.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Lifts the soft open-file limit to the hard limit and returns the soft
/// limit in force afterwards (unchanged where it cannot be raised).
pub fn raise_fd_limit() -> u64 {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
                return 1024;
            }
            if lim.rlim_cur < lim.rlim_max {
                let raised = libc::rlimit {
                    rlim_cur: lim.rlim_max,
                    rlim_max: lim.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    lim.rlim_cur = lim.rlim_max;
                }
            }
        }
        // rlim_t is u64 on Linux but not on every unix.
        #[allow(clippy::unnecessary_cast)]
        let soft = lim.rlim_cur as u64;
        soft
    }
    #[cfg(not(unix))]
    {
        u64::MAX
    }
}

/// The most connections to hold given the configured cap and the
/// open-file limit.
pub fn effective_max(configured: usize, fd_limit: u64) -> usize {
    let by_fds = fd_limit.saturating_sub(FD_RESERVE).max(16);
    configured.min(usize::try_from(by_fds).unwrap_or(usize::MAX))
}

/// Open connections and refusals, for `/metrics` and for the caps.
#[derive(Default)]
pub struct ConnStats {
    open: AtomicUsize,
    per_client: Mutex<HashMap<IpAddr, usize>>,
    refusing: AtomicUsize,
    /// Connections refused over a cap, since start.
    pub refused_total: AtomicU64,
    /// Connections closed for a slow handshake, a slow header or idleness.
    pub timed_out_total: AtomicU64,
    /// Connections accepted, since start.
    pub accepted_total: AtomicU64,
}

/// Why a connection is not admitted.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Total { limit: usize },
    PerClient { addr: IpAddr, limit: usize },
}

impl Refusal {
    fn message(&self) -> String {
        match self {
            Refusal::Total { limit } => format!(
                "the server holds its maximum of {limit} connections (--max-connections); \
                 retry later"
            ),
            Refusal::PerClient { addr, limit } => format!(
                "too many open connections from {addr}: the limit is {limit} per client address \
                 (--max-connections-per-client); close idle connections or retry later"
            ),
        }
    }
}

/// A held connection; releases its place when dropped.
pub struct Admitted {
    stats: Arc<ConnStats>,
    addr: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
        let mut per = self.stats.per_client.lock();
        if let Some(n) = per.get_mut(&self.addr) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.addr);
            }
        }
    }
}

impl ConnStats {
    /// Takes a place for a connection from `addr`, or says which cap it is
    /// over.
    pub fn admit(
        self: &Arc<Self>,
        addr: IpAddr,
        max_total: usize,
        max_per_client: usize,
    ) -> Result<Admitted, Refusal> {
        let mut per = self.per_client.lock();
        if self.open.load(Ordering::Relaxed) >= max_total {
            return Err(Refusal::Total { limit: max_total });
        }
        let n = per.entry(addr).or_insert(0);
        if *n >= max_per_client {
            let n = *n;
            if n == 0 {
                per.remove(&addr);
            }
            return Err(Refusal::PerClient {
                addr,
                limit: max_per_client,
            });
        }
        *n += 1;
        self.open.fetch_add(1, Ordering::Relaxed);
        Ok(Admitted {
            stats: self.clone(),
            addr,
        })
    }

    /// Connections held now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// The Prometheus text lines of the connection figures.
    pub fn render(&self) -> String {
        format!(
            "# HELP apiserver_connections_open Client connections held now.\n\
             # TYPE apiserver_connections_open gauge\n\
             apiserver_connections_open {}\n\
             # HELP apiserver_connections_accepted_total Client connections accepted.\n\
             # TYPE apiserver_connections_accepted_total counter\n\
             apiserver_connections_accepted_total {}\n\
             # HELP apiserver_connections_refused_total Connections refused over a connection cap.\n\
             # TYPE apiserver_connections_refused_total counter\n\
             apiserver_connections_refused_total {}\n\
             # HELP apiserver_connections_timed_out_total Connections closed for a slow handshake, a slow request header or idleness.\n\
             # TYPE apiserver_connections_timed_out_total counter\n\
             apiserver_connections_timed_out_total {}\n",
            self.open(),
            self.accepted_total.load(Ordering::Relaxed),
            self.refused_total.load(Ordering::Relaxed),
            self.timed_out_total.load(Ordering::Relaxed),
        )
    }
}

/// Requests in flight on one connection and when it last became idle.
struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    requests: AtomicU64,
    /// Milliseconds after `started` at which `in_flight` last dropped to 0.
    idle_since_ms: AtomicU64,
}

impl Activity {
    fn new() -> Arc<Activity> {
        Arc::new(Activity {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            idle_since_ms: AtomicU64::new(0),
        })
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.requests.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// How long the connection has had nothing in flight, or `None` while a
    /// request is.
    fn idle_for(&self, now: Instant) -> Option<Duration> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let since = Duration::from_millis(self.idle_since_ms.load(Ordering::SeqCst));
        Some(now.duration_since(self.started).saturating_sub(since))
    }
}

/// One request in flight; ends when its response body is dropped (sent in
/// full, or the connection went away).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        let ms = a.started.elapsed().as_millis() as u64;
        a.idle_since_ms.store(ms, Ordering::SeqCst);
        a.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request counted as in flight until it is
/// dropped.
struct TrackedBody {
    inner: axum::body::Body,
    _in_flight: InFlight,
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What the accept loop needs to serve connections.
pub(crate) struct Listener {
    pub router: axum::Router,
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    pub limits: ConnLimits,
    pub stats: Arc<ConnStats>,
}

/// Accepts and serves connections on `listener` until `shutdown`, then
/// asks every connection to finish and waits up to `grace` for them.
pub(crate) async fn serve(
    l: Listener,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let fd_limit = raise_fd_limit();
    let max_total = effective_max(l.limits.max_connections, fd_limit);
    if max_total < l.limits.max_connections {
        tracing::info!(
            max_connections = max_total,
            fd_limit,
            "connection cap lowered to fit the open-file limit"
        );
    }
    let l = Arc::new(l);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(l.limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(250)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off
                    // instead of spinning, and keep serving.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        match l.stats.admit(peer.ip(), max_total, l.limits.max_per_client) {
            Ok(admitted) => {
                l.stats.accepted_total.fetch_add(1, Ordering::Relaxed);
                let (l, builder, stop) = (l.clone(), builder.clone(), stop_rx.clone());
                tokio::spawn(async move {
                    serve_one(&l, &builder, tcp, peer, stop).await;
                    drop(admitted);
                });
            }
            Err(refusal) => {
                l.stats.refused_total.fetch_add(1, Ordering::Relaxed);
                if l.stats.refusing.fetch_add(1, Ordering::SeqCst) >= MAX_REFUSING {
                    l.stats.refusing.fetch_sub(1, Ordering::SeqCst);
                    drop(tcp);
                    continue;
                }
                tracing::warn!(%peer, reason = %refusal.message(), "refusing a connection");
                let (l, builder) = (l.clone(), builder.clone());
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(
                        l.limits.handshake_timeout + REFUSAL_GRACE,
                        refuse(&l, &builder, tcp, refusal),
                    )
                    .await;
                    l.stats.refusing.fetch_sub(1, Ordering::SeqCst);
                });
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection holds a receiver; wait until they have all gone or
    // the grace period is over (watches never end by themselves).
    let deadline = tokio::time::Instant::now() + grace;
    while l.stats.open() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// The TLS handshake (when serving TLS) within the handshake timeout.
async fn handshake(l: &Listener, tcp: TcpStream) -> Option<(Box<dyn Io>, PeerCertificates)> {
    match &l.tls {
        None => Some((Box::new(tcp), PeerCertificates::default())),
        Some(acceptor) => {
            match tokio::time::timeout(l.limits.handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let conn = stream.get_ref().1;
                    let certs = conn
                        .peer_certificates()
                        .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
                        .unwrap_or_default();
                    Some((Box::new(stream), PeerCertificates(Arc::new(certs))))
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "TLS handshake failed");
                    None
                }
                Err(_) => {
                    l.stats.timed_out_total.fetch_add(1, Ordering::Relaxed);
                    None
                }
            }
        }
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Serves one admitted connection until it ends, idles out or the server
/// stops.
async fn serve_one(
    l: &Listener,
    builder: &hyper_util::server::conn::auto::Builder<TokioExecutor>,
    tcp: TcpStream,
    peer: SocketAddr,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let Some((io, certs)) = handshake(l, tcp).await else {
        return;
    };
    let activity = Activity::new();
    let router = l.router.clone();
    let tracked = activity.clone();
    let service =
        hyper::service::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
            let in_flight = tracked.begin();
            req.extensions_mut().insert(certs.clone());
            req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
            let call = router.clone().oneshot(req);
            async move {
                let resp = call.await.unwrap_or_else(|e: Infallible| match e {});
                Ok::<_, Infallible>(resp.map(|inner| TrackedBody {
                    inner,
                    _in_flight: in_flight,
                }))
            }
        });
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(conn);
    let tick = (l.limits.idle_timeout / 4)
        .min(l.limits.header_read_timeout / 4)
        .clamp(Duration::from_millis(50), Duration::from_secs(5));
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // When the connection was asked to shut down; it is dropped if it has
    // nothing in flight CLOSE_GRACE after that.
    let mut closing: Option<Instant> = None;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            changed = stop.changed(), if closing.is_none() => {
                if changed.is_ok() && *stop.borrow() {
                    conn.as_mut().graceful_shutdown();
                    closing = Some(Instant::now());
                }
            }
            _ = ticker.tick() => {
                let now = Instant::now();
                let idle = activity.idle_for(now);
                match closing {
                    Some(at) => {
                        if idle.is_some() && now.duration_since(at) >= CLOSE_GRACE {
                            return;
                        }
                    }
                    None => {
                        let silent = activity.requests.load(Ordering::Relaxed) == 0;
                        let limit = if silent {
                            l.limits.header_read_timeout
                        } else {
                            l.limits.idle_timeout
                        };
                        if idle.is_some_and(|d| d >= limit) {
                            l.stats.timed_out_total.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(%peer, silent, "closing an idle connection");
                            if silent {
                                // Nothing was ever asked: nothing to finish.
                                return;
                            }
                            conn.as_mut().graceful_shutdown();
                            closing = Some(now);
                        }
                    }
                }
            }
        }
    }
}

/// Tells a connection over a cap why it is refused: one 429 Status to its
/// first request, then the connection closes.
async fn refuse(
    l: &Listener,
    builder: &hyper_util::server::conn::auto::Builder<TokioExecutor>,
    tcp: TcpStream,
    refusal: Refusal,
) {
    let Some((io, _)) = handshake(l, tcp).await else {
        return;
    };
    let status = apimachinery::ApiError::new(429, "TooManyRequests", refusal.message()).to_status();
    let body = Bytes::from(serde_json::to_vec(&status).unwrap_or_default());
    let answered = Arc::new(tokio::sync::Notify::new());
    let notify = answered.clone();
    let service = hyper::service::service_fn(move |_req: http::Request<hyper::body::Incoming>| {
        notify.notify_one();
        let mut resp = http::Response::new(
            http_body_util::Full::new(body.clone())
                .map_err(|e: Infallible| match e {})
                .boxed(),
        );
        *resp.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        let h = resp.headers_mut();
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
        h.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
        std::future::ready(Ok::<_, Infallible>(resp))
    });
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = answered.notified() => conn.as_mut().graceful_shutdown(),
    }
    let _ = tokio::time::timeout(REFUSAL_GRACE, conn).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn caps_per_client_and_in_total() {
        let stats = Arc::new(ConnStats::default());
        let a1 = stats.admit(addr(1), 3, 2).unwrap();
        let _a2 = stats.admit(addr(1), 3, 2).unwrap();
        assert_eq!(
            stats.admit(addr(1), 3, 2).err(),
            Some(Refusal::PerClient {
                addr: addr(1),
                limit: 2
            })
        );
        let _b1 = stats.admit(addr(2), 3, 2).unwrap();
        assert_eq!(
            stats.admit(addr(3), 3, 2).err(),
            Some(Refusal::Total { limit: 3 })
        );
        assert_eq!(stats.open(), 3);
        // A closed connection frees its place for its own address.
        drop(a1);
        assert_eq!(stats.open(), 2);
        let _a3 = stats.admit(addr(1), 3, 2).unwrap();
        // Addresses with nothing open are forgotten.
        drop(_b1);
        assert!(!stats.per_client.lock().contains_key(&addr(2)));
    }

    #[test]
    fn refusal_messages_name_the_cap_and_the_flag() {
        let m = Refusal::PerClient {
            addr: addr(9),
            limit: 5,
        }
        .message();
        assert!(
            m.contains("127.0.0.9")
                && m.contains("5 per client")
                && m.contains("--max-connections-per-client")
        );
        assert!(
            Refusal::Total { limit: 7 }
                .message()
                .contains("maximum of 7")
        );
    }

    #[test]
    fn the_cap_leaves_descriptors_for_the_store() {
        assert_eq!(effective_max(20_000, 1_024), 768);
        assert_eq!(effective_max(500, 1_048_576), 500);
        assert_eq!(effective_max(500, 10), 16);
    }

    #[test]
    fn activity_counts_idle_time_only_without_requests() {
        let a = Activity::new();
        let later = a.started + Duration::from_secs(5);
        assert_eq!(a.idle_for(later), Some(Duration::from_secs(5)));
        let r = a.begin();
        assert_eq!(a.idle_for(later), None);
        drop(r);
        assert!(a.idle_for(Instant::now()).unwrap() < Duration::from_secs(1));
    }

    #[test]
    fn raising_the_fd_limit_never_lowers_it() {
        let before = raise_fd_limit();
        assert!(raise_fd_limit() >= before);
    }
}
