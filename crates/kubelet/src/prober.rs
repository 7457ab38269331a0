//! Runs one probe check (the thin half of [`crate::probe`]): an HTTP GET
//! (2xx and 3xx pass; HTTPS without verifying the certificate, as the
//! kubelet does), a TCP connect, or a command beside the container (exit
//! code 0 passes), each within the probe's timeout.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::probe::Check;
use crate::state::{LaunchSpec, ProcessId};

/// Whether the check passed, and why not.
pub async fn run(
    check: &Check,
    timeout: Duration,
    init: Option<ProcessId>,
    spec: &LaunchSpec,
) -> Result<(), String> {
    match tokio::time::timeout(timeout, run_inner(check, init, spec)).await {
        Ok(r) => r,
        Err(_) => Err(format!("probe timed out after {}s", timeout.as_secs())),
    }
}

async fn run_inner(
    check: &Check,
    init: Option<ProcessId>,
    spec: &LaunchSpec,
) -> Result<(), String> {
    match check {
        Check::Invalid(msg) => Err(msg.clone()),
        Check::Tcp { host, port } => tokio::net::TcpStream::connect((host.as_str(), *port))
            .await
            .map(|_| ())
            .map_err(|e| format!("dial tcp {host}:{port}: {e}")),
        Check::Http {
            https,
            host,
            port,
            path,
            headers,
        } => {
            let stream = tokio::net::TcpStream::connect((host.as_str(), *port))
                .await
                .map_err(|e| format!("Get \"http://{host}:{port}{path}\": {e}"))?;
            let mut req = format!(
                "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.32\r\nAccept: */*\r\nConnection: close\r\n"
            );
            for (k, v) in headers {
                req.push_str(&format!("{k}: {v}\r\n"));
            }
            req.push_str("\r\n");
            let head = if *https {
                let tls = crate::tls::insecure_client_config();
                let connector = tokio_rustls::TlsConnector::from(tls);
                let name = rustls_pki_types::ServerName::try_from(host.clone())
                    .map_err(|e| format!("bad host {host}: {e}"))?;
                let mut s = connector
                    .connect(name, stream)
                    .await
                    .map_err(|e| format!("TLS: {e}"))?;
                exchange(&mut s, &req).await?
            } else {
                let mut s = stream;
                exchange(&mut s, &req).await?
            };
            let code: u16 = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| format!("malformed HTTP response: {head:?}"))?;
            if (200..400).contains(&code) {
                Ok(())
            } else {
                Err(format!("HTTP probe failed with statuscode: {code}"))
            }
        }
        Check::Exec { command } => {
            let init = init.ok_or("container is not running")?;
            let mut cmd = crate::exec::command(init, spec, command).map_err(|e| e.to_string())?;
            cmd.command_mut()
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let out = cmd
                .spawn()
                .map_err(|e| format!("exec {command:?}: {e}"))?
                .wait_with_output()
                .await
                .map_err(|e| e.to_string())?;
            if out.status.success() {
                Ok(())
            } else {
                let mut msg = String::from_utf8_lossy(&out.stdout).into_owned();
                msg.push_str(&String::from_utf8_lossy(&out.stderr));
                Err(format!(
                    "command {command:?} exited with {}: {}",
                    out.status.code().unwrap_or(-1),
                    msg.trim()
                ))
            }
        }
    }
}

/// Sends the request and returns the status line.
async fn exchange<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    s: &mut S,
    req: &str,
) -> Result<String, String> {
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 1024];
    let mut got = 0;
    while got < buf.len() {
        let n = s.read(&mut buf[got..]).await.map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        got += n;
        if buf[..got].contains(&b'\n') {
            break;
        }
    }
    let text = String::from_utf8_lossy(&buf[..got]).into_owned();
    Ok(text.lines().next().unwrap_or("").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn serve_once(status: &'static str) -> u16 {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes())
                    .await;
            }
        });
        port
    }

    fn http(port: u16) -> Check {
        Check::Http {
            https: false,
            host: "127.0.0.1".into(),
            port,
            path: "/healthz".into(),
            headers: vec![("X-Probe".into(), "1".into())],
        }
    }

    #[tokio::test]
    async fn http_and_tcp_verdicts() {
        let spec = LaunchSpec::default();
        let t = Duration::from_secs(2);
        assert_eq!(
            run(&http(serve_once("200 OK").await), t, None, &spec).await,
            Ok(())
        );
        assert_eq!(
            run(&http(serve_once("302 Found").await), t, None, &spec).await,
            Ok(())
        );
        let e = run(
            &http(serve_once("503 Service Unavailable").await),
            t,
            None,
            &spec,
        )
        .await
        .unwrap_err();
        assert!(e.contains("503"), "{e}");
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert!(
            run(
                &Check::Tcp {
                    host: "127.0.0.1".into(),
                    port: closed
                },
                t,
                None,
                &spec
            )
            .await
            .is_err()
        );
        let open = serve_once("200 OK").await;
        assert_eq!(
            run(
                &Check::Tcp {
                    host: "127.0.0.1".into(),
                    port: open
                },
                t,
                None,
                &spec
            )
            .await,
            Ok(())
        );
        assert!(
            run(
                &Check::Exec {
                    command: vec!["true".into()]
                },
                t,
                None,
                &spec
            )
            .await
            .is_err(),
            "no container, no exec"
        );
        assert_eq!(
            run(&Check::Invalid("nope".into()), t, None, &spec).await,
            Err("nope".into())
        );
    }
}
