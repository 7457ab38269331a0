//! The kubelet's HTTPS endpoint, as the real kubelet's port 10250 serves
//! it to the API server: `GET /containerLogs/{ns}/{pod}/{container}`
//! (`follow`, `previous`, `tailLines`, `timestamps`, `sinceSeconds`,
//! `sinceTime`, `limitBytes`) and `/exec/{ns}/{pod}/{container}` over
//! WebSocket (`v5.channel.k8s.io`, `v4.channel.k8s.io`; SPDY is refused
//! with a 400, so clients fall back to WebSocket), and `/healthz`.
//!
//! Only clients with a certificate from the cluster CA that name the API
//! server's kubelet client or `system:masters` get in. HTTP/1.1 is parsed
//! by hand: the endpoint serves one request per connection, and an exec
//! session turns that connection into a WebSocket.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tracing::{debug, warn};

use crate::crilog;
use crate::error::Error;
use crate::kubelet::Shared;
use crate::state::{self, LaunchSpec};
use crate::ws;

/// Starts the endpoint; returns the port it listens on.
pub(crate) async fn start(shared: Arc<Shared>, ca_pem: &str) -> Result<u16, Error> {
    let (cert, key) = crate::tls::serving_pair(&shared.rt.layout.pki(), &shared.cfg.node_name)
        .map_err(Error::ServerFailed)?;
    let tls = crate::tls::server_config(&cert, &key, ca_pem).map_err(Error::ServerFailed)?;
    let listener = TcpListener::bind(shared.cfg.listen)
        .await
        .map_err(|e| Error::ServerFailed(format!("listening on {}: {e}", shared.cfg.listen)))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::ServerFailed(e.to_string()))?
        .port();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let shared = shared.clone();
            tokio::spawn(async move {
                let Ok(Ok(stream)) =
                    tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
                else {
                    return;
                };
                let who = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(crate::tls::identity);
                if let Err(e) = serve(shared, stream, who).await {
                    debug!(error = %e, "kubelet endpoint connection");
                }
            });
        }
    });
    Ok(port)
}

/// A parsed request head.
#[derive(Debug, Default)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: BTreeMap<String, String>,
}

impl Request {
    fn param(&self, k: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, names: &[&str]) -> bool {
        names
            .iter()
            .any(|n| matches!(self.param(n), Some("1" | "true" | "True" | "")))
    }

    fn header(&self, k: &str) -> &str {
        self.headers
            .get(&k.to_ascii_lowercase())
            .map_or("", String::as_str)
    }
}

fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(
                    std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"),
                    16,
                ) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a request line and headers.
pub fn parse_head(text: &str) -> Option<Request> {
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let target = first.next()?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (unescape(k), unescape(v))
        })
        .collect();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(Request {
        method,
        path: unescape(path),
        query,
        headers,
    })
}

async fn respond<W: AsyncWrite + Unpin>(
    w: &mut W,
    code: u16,
    reason: &str,
    body: &str,
) -> std::io::Result<()> {
    let msg = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    w.write_all(msg.as_bytes()).await?;
    w.flush().await
}

async fn serve<S>(
    shared: Arc<Shared>,
    stream: S,
    who: Option<(String, Vec<String>)>,
) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = tokio::time::timeout(Duration::from_secs(30), reader.read_line(&mut line))
            .await
            .map_err(|_| std::io::Error::other("header timeout"))??;
        if n == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        head.push_str(&line);
        if head.len() > 64 * 1024 {
            return respond(reader.get_mut(), 431, "Request Header Fields Too Large", "").await;
        }
    }
    let Some(req) = parse_head(head.trim_end()) else {
        return respond(reader.get_mut(), 400, "Bad Request", "malformed request").await;
    };
    match &who {
        Some((user, groups)) if crate::tls::allowed(user, groups) => {}
        Some((user, _)) => {
            return respond(
                reader.get_mut(),
                403,
                "Forbidden",
                &format!("user {user:?} may not use the kubelet API"),
            )
            .await;
        }
        None => {
            return respond(
                reader.get_mut(),
                401,
                "Unauthorized",
                "a client certificate is required",
            )
            .await;
        }
    }
    let parts: Vec<&str> = req.path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["healthz"] => respond(reader.get_mut(), 200, "OK", "ok").await,
        ["containerLogs", ns, pod, container] => {
            logs(&shared, reader.into_inner(), &req, ns, pod, container).await
        }
        ["exec", ns, pod, container] => exec(&shared, reader, &req, ns, pod, container).await,
        _ => respond(reader.get_mut(), 404, "Not Found", "404 page not found").await,
    }
}

/// The pod's UID and the attempt of `container` to read or join.
fn locate(
    shared: &Shared,
    ns: &str,
    pod: &str,
    container: &str,
    previous: bool,
) -> Result<(String, u32), (u16, String)> {
    let p = shared
        .pod(ns, pod)
        .ok_or((404, format!("pod {ns}/{pod} not found on this node")))?;
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let known = p
        .spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .any(|c| c.name == container);
    if !known {
        return Err((
            400,
            format!("container {container} is not valid for pod {pod}"),
        ));
    }
    let rtc = shared.rt.container(&uid, container);
    let attempt = if previous { rtc.previous } else { rtc.current };
    match attempt {
        Some(a) => Ok((uid, a.index)),
        None if previous => Err((
            400,
            format!("previous terminated container {container:?} in pod {pod:?} not found"),
        )),
        None => Err((
            400,
            format!("container {container:?} in pod {pod:?} is waiting to start"),
        )),
    }
}

fn log_options(req: &Request) -> crilog::Options {
    let since = req
        .param("sinceTime")
        .and_then(|t| t.parse::<Timestamp>().ok())
        .or_else(|| {
            let secs: i64 = req.param("sinceSeconds")?.parse().ok()?;
            Timestamp::now()
                .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(secs))
                .ok()
        });
    crilog::Options {
        timestamps: req.flag(&["timestamps"]),
        tail_lines: req.param("tailLines").and_then(|n| n.parse().ok()),
        since,
        limit_bytes: req.param("limitBytes").and_then(|n| n.parse().ok()),
    }
}

async fn logs<S: tokio::io::AsyncRead + AsyncWrite + Unpin>(
    shared: &Shared,
    mut s: S,
    req: &Request,
    ns: &str,
    pod: &str,
    container: &str,
) -> std::io::Result<()> {
    let previous = req.flag(&["previous"]);
    let (uid, index) = match locate(shared, ns, pod, container, previous) {
        Ok(x) => x,
        Err((code, msg)) => {
            return respond(
                &mut s,
                code,
                if code == 404 {
                    "Not Found"
                } else {
                    "Bad Request"
                },
                &msg,
            )
            .await;
        }
    };
    let opts = log_options(req);
    let path = shared.rt.log_path(&uid, container, index);
    let data = tokio::fs::read(&path).await.unwrap_or_default();
    s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
        .await?;
    let first = crilog::select(&data, &opts);
    let mut sent = first.len();
    s.write_all(&first).await?;
    s.flush().await?;
    if !req.flag(&["follow"]) || previous {
        return Ok(());
    }
    // Follow: stream lines as they are written, until the attempt ends
    // and its log is drained, or the client goes.
    let (_, mut offset) = crilog::lines(&data);
    let attempt_dir = shared.rt.layout.attempt(&uid, container, index);
    loop {
        let ended = attempt_dir.join(state::EXIT).exists()
            || !state::lock_held(&attempt_dir.join(state::LOCK));
        let data = tokio::fs::read(&path).await.unwrap_or_default();
        if data.len() > offset {
            let (lines, used) = crilog::lines(&data[offset..]);
            offset += used;
            let mut out = Vec::new();
            for l in lines.iter().filter(|l| crilog::after(l, opts.since)) {
                out.extend(crilog::render(l, opts.timestamps));
            }
            if let Some(limit) = opts.limit_bytes {
                out.truncate(limit.saturating_sub(sent));
            }
            sent += out.len();
            s.write_all(&out).await?;
            s.flush().await?;
            if opts.limit_bytes.is_some_and(|l| sent >= l) {
                return Ok(());
            }
        } else if ended {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The protocols of the exec stream, best first.
const PROTOCOLS: &[&str] = &["v5.channel.k8s.io", "v4.channel.k8s.io"];

fn status(code: Option<i32>, argv: &[String]) -> serde_json::Value {
    match code {
        Some(0) => json!({"metadata": {}, "status": "Success"}),
        Some(c) => json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("command terminated with non-zero exit code: error executing command {argv:?}, exit code {c}"),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": c.to_string()}]},
        }),
        None => {
            json!({"metadata": {}, "status": "Failure", "message": "the command was killed by a signal", "reason": "InternalError"})
        }
    }
}

async fn exec<S>(
    shared: &Shared,
    mut reader: BufReader<S>,
    req: &Request,
    ns: &str,
    pod: &str,
    container: &str,
) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let argv: Vec<String> = req
        .query
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    let (uid, index) = match locate(shared, ns, pod, container, false) {
        Ok(x) => x,
        Err((code, msg)) => return respond(reader.get_mut(), code, "Bad Request", &msg).await,
    };
    let dir = shared.rt.layout.attempt(&uid, container, index);
    let spec: LaunchSpec = state::read_json(&dir, state::SPEC).unwrap_or_default();
    let Some(init) = shared.rt.init_of(&uid, container, index) else {
        return respond(
            reader.get_mut(),
            400,
            "Bad Request",
            &format!("container {container} is not running"),
        )
        .await;
    };
    // After the pod and container checks: a client that falls back to SPDY
    // when its WebSocket upgrade is refused (kubectl does) then shows why.
    if !req.header("upgrade").eq_ignore_ascii_case("websocket") {
        return respond(reader.get_mut(), 400, "Bad Request", "exec needs a WebSocket upgrade (v4.channel.k8s.io or v5.channel.k8s.io); SPDY is not supported").await;
    }
    let offered: Vec<&str> = req
        .header("sec-websocket-protocol")
        .split(',')
        .map(str::trim)
        .collect();
    let Some(protocol) = PROTOCOLS.iter().find(|p| offered.contains(p)) else {
        return respond(
            reader.get_mut(),
            400,
            "Bad Request",
            "no supported subprotocol: offer v5.channel.k8s.io or v4.channel.k8s.io",
        )
        .await;
    };
    let stdin = req.flag(&["stdin", "input"]);
    let mut cmd = match crate::exec::command(init, &spec, &argv) {
        Ok(c) => c,
        Err(e) => return respond(reader.get_mut(), 400, "Bad Request", &e.to_string()).await,
    };
    cmd.command_mut()
        .stdin(if stdin {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let accept = ws::accept_key(req.header("sec-websocket-key"));
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n"
    );
    reader.get_mut().write_all(head.as_bytes()).await?;
    reader.get_mut().flush().await?;
    let (rd, wr) = tokio::io::split(reader);
    let wr = Arc::new(tokio::sync::Mutex::new(wr));
    let send = |wr: Arc<tokio::sync::Mutex<tokio::io::WriteHalf<BufReader<S>>>>,
                op: u8,
                data: Vec<u8>| async move {
        let mut w = wr.lock().await;
        ws::write_frame(&mut *w, op, &data).await
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let st = json!({"metadata": {}, "status": "Failure", "message": format!("exec {argv:?}: {e}"), "reason": "InternalError"});
            let mut msg = vec![3u8];
            msg.extend(serde_json::to_vec(&st).unwrap_or_default());
            send(wr.clone(), ws::OP_BINARY, msg).await?;
            return send(wr, ws::OP_CLOSE, 1000u16.to_be_bytes().to_vec()).await;
        }
    };
    // Client → process: stdin, close of stdin (v5), pings.
    let mut child_stdin = child.stdin.take();
    let wr_in = wr.clone();
    let input = tokio::spawn(async move {
        let mut rd = rd;
        let mut reader = ws::Reader::default();
        while let Ok(Some(m)) = reader.next(&mut rd).await {
            match m.opcode {
                ws::OP_PING => {
                    let mut w = wr_in.lock().await;
                    let _ = ws::write_frame(&mut *w, ws::OP_PONG, &m.payload).await;
                }
                ws::OP_CLOSE => break,
                ws::OP_BINARY | ws::OP_TEXT => match m.payload.split_first() {
                    Some((0, data)) => {
                        if let Some(s) = child_stdin.as_mut()
                            && s.write_all(data).await.is_err()
                        {
                            child_stdin = None;
                        }
                    }
                    Some((255, rest)) if rest.first() == Some(&0) => child_stdin = None,
                    _ => {}
                },
                _ => {}
            }
        }
    });
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let pump = |pipe: Option<tokio::process::ChildStdout>, chan: u8| {
        let wr = wr.clone();
        async move {
            let Some(mut p) = pipe else { return };
            let mut buf = vec![0u8; 32 * 1024];
            while let Ok(n) = p.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut msg = vec![chan];
                msg.extend_from_slice(&buf[..n]);
                if send(wr.clone(), ws::OP_BINARY, msg).await.is_err() {
                    break;
                }
            }
        }
    };
    let pump_err = {
        let wr = wr.clone();
        async move {
            let Some(mut p) = err.take() else { return };
            let mut buf = vec![0u8; 32 * 1024];
            while let Ok(n) = p.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut msg = vec![2u8];
                msg.extend_from_slice(&buf[..n]);
                if send(wr.clone(), ws::OP_BINARY, msg).await.is_err() {
                    break;
                }
            }
        }
    };
    let (_, _, exit) = tokio::join!(pump(out.take(), 1), pump_err, child.wait());
    input.abort();
    let code = exit.ok().and_then(|s| s.code());
    let mut msg = vec![3u8];
    msg.extend(serde_json::to_vec(&status(code, &argv)).unwrap_or_default());
    if let Err(e) = send(wr.clone(), ws::OP_BINARY, msg).await {
        warn!(error = %e, "exec status");
    }
    let _ = send(wr, ws::OP_CLOSE, 1000u16.to_be_bytes().to_vec()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_parse_with_repeated_and_escaped_parameters() {
        let r = parse_head("GET /exec/ns/p/c?command=sh&command=-c&command=echo%20a%2Bb&stdin=1&tty HTTP/1.1\r\nUpgrade: websocket\r\nSec-WebSocket-Protocol: v5.channel.k8s.io, v4.channel.k8s.io").unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/exec/ns/p/c");
        let cmd: Vec<&str> = r
            .query
            .iter()
            .filter(|(k, _)| k == "command")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(cmd, ["sh", "-c", "echo a+b"]);
        assert!(r.flag(&["stdin", "input"]));
        assert!(r.flag(&["tty"]));
        assert!(!r.flag(&["stderr"]));
        assert_eq!(r.header("Upgrade"), "websocket");
        assert!(parse_head("").is_none());
        assert_eq!(unescape("%zz%4"), "%zz%4");
    }

    #[test]
    fn exec_status_carries_the_exit_code_as_kube_does() {
        let argv = vec!["false".to_string()];
        assert_eq!(status(Some(0), &argv)["status"], "Success");
        let s = status(Some(2), &argv);
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(s["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(s["details"]["causes"][0]["message"], "2");
    }
}
