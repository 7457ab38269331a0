//! `trellis bench apiserver`, as clients see the server: `trellis server`
//! runs as its own process with TLS (its generated CA), and the load comes
//! from this process over connections of its own, authenticated as the
//! admin (a bearer token from `--token-auth-file`, or the admin kubeconfig's
//! client certificate) — what client-go and kubectl do.
//!
//! Each cell of the table is one protocol (HTTP/1.1 with one connection per
//! client, HTTP/2 with one stream per client on a single connection), one
//! number of concurrent clients and one verb. Beside throughput and latency
//! it reports the server process's CPU time per request (utime + stime from
//! `/proc/PID/stat`), which stays meaningful on a busy machine where
//! throughput does not. The device's fdatasync latency, measured in the
//! same data directory, is the floor of a durable create's latency.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use apiserver::cluster::tokio_rustls::TlsConnector;
use apiserver::cluster::tokio_rustls::rustls::ClientConfig;
use apiserver::cluster::tokio_rustls::rustls::pki_types::ServerName;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;

use super::{ms, percentile};

/// How the bench client authenticates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Auth {
    /// A bearer token from the server's `--token-auth-file` (client-go with
    /// a token, kubectl with a ServiceAccount's kubeconfig).
    Token,
    /// The admin kubeconfig's client certificate.
    Cert,
}

/// The protocols of the client table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Proto {
    Http1,
    Http2,
}

impl Proto {
    fn label(self) -> &'static str {
        match self {
            Proto::Http1 => "HTTP/1.1",
            Proto::Http2 => "HTTP/2",
        }
    }
}

/// The verbs of the client table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Verb {
    Create,
    Update,
    Apply,
    Get,
}

impl Verb {
    fn label(self) -> &'static str {
        match self {
            Verb::Create => "create (POST ConfigMap)",
            Verb::Update => "update (merge patch)",
            Verb::Apply => "server-side apply",
            Verb::Get => "GET",
        }
    }
}

const NS: &str = "bench";
/// Bytes of payload that make a ConfigMap of about 600 bytes on the wire.
const PAYLOAD: usize = 480;
const TOKEN: &str = "trellis-bench-token";

/// The server under test: a child process and how to reach it.
struct Server {
    child: tokio::process::Child,
    pid: u32,
    port: u16,
    tls: TlsSetup,
    auth_header: Option<String>,
    data_dir: PathBuf,
}

struct TlsSetup {
    http1: Arc<ClientConfig>,
    http2: Arc<ClientConfig>,
}

/// One client's way to send requests: its own HTTP/1.1 connection, or a
/// stream on the shared HTTP/2 connection.
enum Sender {
    Http1(http1::SendRequest<Full<Bytes>>),
    Http2(http2::SendRequest<Full<Bytes>>),
}

impl Server {
    async fn start(
        auth: Auth,
        etcd_servers: Option<&str>,
    ) -> anyhow::Result<(Server, tempfile::TempDir)> {
        let dir = tempfile::tempdir()?;
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(
            &tokens,
            format!("{TOKEN},bench,bench-uid,\"system:masters\"\n"),
        )?;
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            l.local_addr()?.port()
        };
        let data_dir = dir.path().join("data");
        let mut command = tokio::process::Command::new(std::env::current_exe()?);
        command.args(["server", "--listen", &format!("127.0.0.1:{port}")]);
        if let Some(servers) = etcd_servers {
            command.arg("--etcd-servers").arg(servers);
        }
        let child = command
            .arg("--data-dir")
            .arg(&data_dir)
            .arg("--token-auth-file")
            .arg(&tokens)
            .env("TRELLIS_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting trellis server")?;
        let pid = child.id().unwrap_or(0);
        let kubeconfig = data_dir.join("admin.kubeconfig");
        let deadline = Instant::now() + Duration::from_secs(60);
        let (ca, cert, key) = loop {
            if let Ok(parts) = read_kubeconfig(&kubeconfig) {
                break parts;
            }
            anyhow::ensure!(Instant::now() < deadline, "no admin kubeconfig");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let identity = (auth == Auth::Cert).then_some((cert.as_str(), key.as_str()));
        let config = |alpn: &[&[u8]]| {
            apiserver::cluster::client_tls(&ca, identity, alpn).map_err(anyhow::Error::msg)
        };
        let server = Server {
            child,
            pid,
            port,
            tls: TlsSetup {
                http1: config(&[b"http/1.1"])?,
                http2: config(&[b"h2"])?,
            },
            auth_header: (auth == Auth::Token).then(|| format!("Bearer {TOKEN}")),
            data_dir,
        };
        loop {
            if let Ok(mut s) = server.connect(Proto::Http1).await
                && let Ok((200, _)) = server.send(&mut s, "GET", "/readyz", "", None).await
            {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "server did not become ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok((server, dir))
    }

    async fn connect(&self, proto: Proto) -> anyhow::Result<Sender> {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
        tcp.set_nodelay(true)?;
        let config = match proto {
            Proto::Http1 => self.tls.http1.clone(),
            Proto::Http2 => self.tls.http2.clone(),
        };
        let name = ServerName::try_from("127.0.0.1")?;
        let tls = TlsConnector::from(config).connect(name, tcp).await?;
        let io = TokioIo::new(tls);
        Ok(match proto {
            Proto::Http1 => {
                let (send, conn) = http1::handshake(io).await?;
                tokio::spawn(conn);
                Sender::Http1(send)
            }
            Proto::Http2 => {
                let (send, conn) = http2::handshake(TokioExecutor::new(), io).await?;
                tokio::spawn(conn);
                Sender::Http2(send)
            }
        })
    }

    async fn send(
        &self,
        sender: &mut Sender,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<(u16, Bytes)> {
        let mut req = http::Request::builder().method(method);
        req = match sender {
            // Origin form with Host for HTTP/1.1, the full URI for HTTP/2.
            Sender::Http1(_) => req
                .uri(path)
                .header("host", format!("127.0.0.1:{}", self.port)),
            Sender::Http2(_) => req.uri(format!("https://127.0.0.1:{}{path}", self.port)),
        };
        req = req.header("accept", "application/json");
        if !content_type.is_empty() {
            req = req.header("content-type", content_type);
        }
        if let Some(a) = &self.auth_header {
            req = req.header("authorization", a);
        }
        let req = req.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let resp = match sender {
            Sender::Http1(s) => {
                s.ready().await?;
                s.send_request(req).await?
            }
            Sender::Http2(s) => {
                s.ready().await?;
                s.send_request(req).await?
            }
        };
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }

    /// The server process's CPU time so far (user + system).
    fn cpu(&self) -> anyhow::Result<Duration> {
        process_cpu(self.pid)
    }
}

/// utime + stime of process `pid`, from `/proc/PID/stat`.
pub fn process_cpu(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces; the fields follow its ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("parsing /proc/PID/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields
        .get(11)
        .and_then(|u| u.parse::<u64>().ok())
        .zip(fields.get(12).and_then(|s| s.parse::<u64>().ok()))
        .map(|(u, s)| u + s)
        .context("utime/stime in /proc/PID/stat")?;
    Ok(Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64))
}

fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

/// The CA, client certificate and key PEMs of the admin kubeconfig.
fn read_kubeconfig(path: &Path) -> anyhow::Result<(String, String, String)> {
    let doc: serde_json::Value = serde_yaml::from_slice(&std::fs::read(path)?)?;
    let pem = |v: &serde_json::Value| -> anyhow::Result<String> {
        let b64 = v.as_str().context("a PEM field of the kubeconfig")?;
        Ok(String::from_utf8(
            base64::engine::general_purpose::STANDARD.decode(b64)?,
        )?)
    };
    Ok((
        pem(&doc["clusters"][0]["cluster"]["certificate-authority-data"])?,
        pem(&doc["users"][0]["user"]["client-certificate-data"])?,
        pem(&doc["users"][0]["user"]["client-key-data"])?,
    ))
}

fn configmap(name: &str, counter: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "bench", "tier": "load"}},
        "data": {"counter": counter.to_string(), "payload": "x".repeat(PAYLOAD)},
    }))
    .expect("serialising a ConfigMap")
}

/// The request a client sends for its `i`-th operation of `verb`; `w` is
/// the client's index (each client updates and applies its own object, so
/// clients never conflict), `cell` makes created names unique.
fn request(
    verb: Verb,
    cell: &str,
    w: usize,
    i: usize,
) -> (&'static str, String, &'static str, Option<Vec<u8>>) {
    let items = format!("/api/v1/namespaces/{NS}/configmaps");
    match verb {
        Verb::Create => (
            "POST",
            items,
            "application/json",
            Some(configmap(&format!("{cell}-{w}-{i}"), i)),
        ),
        Verb::Update => (
            "PATCH",
            format!("{items}/obj-{w}"),
            "application/merge-patch+json",
            Some(format!(r#"{{"data":{{"counter":"{i}"}}}}"#).into_bytes()),
        ),
        Verb::Apply => (
            "PATCH",
            format!("{items}/apply-{w}?fieldManager=bench"),
            "application/apply-patch+yaml",
            Some(configmap(&format!("apply-{w}"), i)),
        ),
        Verb::Get => ("GET", format!("{items}/obj-{w}"), "", None),
    }
}

/// One cell's figures.
struct Cell {
    rate: f64,
    p50: Duration,
    p99: Duration,
    cpu_per_request: Duration,
}

async fn run_cell(
    server: &Arc<Server>,
    proto: Proto,
    clients: usize,
    verb: Verb,
    requests: usize,
) -> anyhow::Result<Cell> {
    let mut senders = Vec::new();
    match proto {
        Proto::Http1 => {
            for _ in 0..clients {
                senders.push(server.connect(proto).await?);
            }
        }
        Proto::Http2 => {
            let Sender::Http2(shared) = server.connect(proto).await? else {
                unreachable!("an HTTP/2 connection");
            };
            senders.extend((0..clients).map(|_| Sender::Http2(shared.clone())));
        }
    }
    let cell = format!(
        "{}-{clients}",
        if proto == Proto::Http1 { "h1" } else { "h2" }
    );
    let per_client = requests.div_ceil(clients);
    let expected = if verb == Verb::Create { 201 } else { 200 };
    let cpu_before = server.cpu()?;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (w, mut sender) in senders.into_iter().enumerate() {
        let server = server.clone();
        let cell = cell.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_client);
            for i in 0..per_client {
                let (method, path, ct, body) = request(verb, &cell, w, i);
                let s = Instant::now();
                let (code, b) = server.send(&mut sender, method, &path, ct, body).await?;
                // Apply creates its object on the first request.
                let ok = code == expected || (verb == Verb::Apply && code == 201);
                anyhow::ensure!(
                    ok,
                    "{method} {path}: {code} {}",
                    String::from_utf8_lossy(&b)
                );
                lat.push(s.elapsed());
            }
            anyhow::Ok(lat)
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await??);
    }
    let elapsed = start.elapsed();
    let cpu = server.cpu()?.saturating_sub(cpu_before);
    lat.sort();
    Ok(Cell {
        rate: lat.len() as f64 / elapsed.as_secs_f64(),
        p50: percentile(&lat, 0.5),
        p99: percentile(&lat, 0.99),
        cpu_per_request: cpu / lat.len() as u32,
    })
}

/// fdatasync latency of the device under `dir`: `n` small writes, each
/// made durable, into a file allocated beforehand — as the store's log
/// segments are, so a sync need not also record a new file size.
fn fdatasync_latency(dir: &Path, n: usize) -> anyhow::Result<(Duration, Duration)> {
    use std::io::{Seek, SeekFrom, Write};
    const RECORD: usize = 200;
    std::fs::create_dir_all(dir)?;
    let path = dir.join("fdatasync-probe");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)?;
    f.write_all(&vec![0u8; RECORD * n])?;
    f.sync_all()?;
    f.seek(SeekFrom::Start(0))?;
    let record = [b'x'; RECORD];
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let s = Instant::now();
        f.write_all(&record)?;
        f.sync_data()?;
        lat.push(s.elapsed());
    }
    drop(f);
    std::fs::remove_file(&path)?;
    lat.sort();
    Ok((percentile(&lat, 0.5), percentile(&lat, 0.99)))
}

/// What the client table covers.
pub struct Plan {
    pub requests: usize,
    /// The server's store in this etcd instead of its data dir.
    pub etcd_servers: Option<String>,
    pub auth: Auth,
    pub protocols: Vec<Proto>,
    pub clients: Vec<usize>,
    pub verbs: Vec<Verb>,
}

/// Prints the client-side table: every protocol × clients × verb, then
/// the fdatasync latency and the lone-create comparison.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let Plan {
        requests,
        etcd_servers,
        auth,
        protocols,
        clients: client_counts,
        verbs,
    } = plan;
    let (server, _dir) = Server::start(auth, etcd_servers.as_deref()).await?;
    let server = Arc::new(server);
    let (sync_p50, sync_p99) = fdatasync_latency(&server.data_dir, 500)?;
    {
        let mut s = server.connect(Proto::Http1).await?;
        eprintln!("server pid {}", server.pid);
        let ns = serde_json::to_vec(
            &json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name": NS}}),
        )?;
        let (code, b) = server
            .send(
                &mut s,
                "POST",
                "/api/v1/namespaces",
                "application/json",
                Some(ns),
            )
            .await?;
        anyhow::ensure!(
            code == 201,
            "namespace: {code} {}",
            String::from_utf8_lossy(&b)
        );
        for w in 0..16 {
            let body = configmap(&format!("obj-{w}"), 0);
            let path = format!("/api/v1/namespaces/{NS}/configmaps");
            let (code, b) = server
                .send(&mut s, "POST", &path, "application/json", Some(body))
                .await?;
            anyhow::ensure!(
                code == 201,
                "obj-{w}: {code} {}",
                String::from_utf8_lossy(&b)
            );
        }
    }
    let auth_label = match auth {
        Auth::Token => "bearer token",
        Auth::Cert => "client certificate",
    };
    println!(
        "Client in this process, `trellis server` (pid {}) in its own, TLS with its CA, {auth_label}; {requests} requests per row (GET: ten times as many); ConfigMaps of ~600 B.",
        server.pid
    );
    println!();
    println!("| protocol | clients | verb | req/s | p50 | p99 | server CPU / request |");
    println!("|---|---|---|---|---|---|---|");
    let mut lone_create = None;
    for &proto in &protocols {
        for &clients in &client_counts {
            for &verb in &verbs {
                // GETs are cheap: more of them, so the CPU figure is not
                // a handful of clock ticks.
                let n = if verb == Verb::Get {
                    requests * 10
                } else {
                    requests
                };
                let c = run_cell(&server, proto, clients, verb, n).await?;
                if proto == Proto::Http1 && clients == 1 && verb == Verb::Create {
                    lone_create = Some(c.p50);
                }
                println!(
                    "| {} | {clients} | {} | {:.0} | {} | {} | {:.3} ms |",
                    proto.label(),
                    verb.label(),
                    c.rate,
                    ms(c.p50),
                    ms(c.p99),
                    c.cpu_per_request.as_secs_f64() * 1000.0
                );
            }
        }
    }
    println!();
    println!("| measurement | result |");
    println!("|---|---|");
    println!(
        "| fdatasync of a 200 B write into an allocated file in the data dir, p50 / p99 (500 syncs) | {} / {} |",
        ms(sync_p50),
        ms(sync_p99)
    );
    if let Some(p50) = lone_create {
        println!(
            "| lone client's create p50 (HTTP/1.1) minus fdatasync p50 | {} |",
            ms(p50.saturating_sub(sync_p50))
        );
    }
    let server = Arc::into_inner(server).context("clients still hold the server")?;
    let mut child = server.child;
    child.kill().await?;
    Ok(())
}
