//! Raw TLS connections to a running `trellis server` and a minimal
//! HTTP/1.1 exchange over them, for tests that need control kubectl and
//! curl do not give: the source address, half-sent requests, connections
//! held open, many requests on one connection.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A TLS client trusting the server's generated CA and presenting the
/// admin client certificate, speaking HTTP/1.1.
pub fn connector(data: &Path) -> TlsConnector {
    let ca = std::fs::read(data.join("pki/ca.crt")).expect("reading the CA");
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&ca) {
        roots.add(c.expect("CA PEM")).expect("adding the CA");
    }
    let certs = CertificateDer::pem_file_iter(data.join("pki/admin.crt"))
        .expect("admin.crt")
        .collect::<Result<Vec<_>, _>>()
        .expect("admin.crt PEM");
    let key = PrivateKeyDer::from_pem_file(data.join("pki/admin.key")).expect("admin.key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .expect("client certificate");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TlsConnector::from(Arc::new(config))
}

/// A TCP connection to the server on 127.0.0.1:`port` from `source`.
pub async fn tcp_from(source: IpAddr, port: u16) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source, 0))?;
    socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
}

/// A TLS connection to the server from `source`.
pub async fn tls_from(
    tls: &TlsConnector,
    source: IpAddr,
    port: u16,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = tcp_from(source, port).await?;
    tls.connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
}

/// Sends one request and reads its whole response (which must carry a
/// Content-Length); returns the status code and the body.
pub async fn exchange(
    s: &mut TlsStream<TcpStream>,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await?;
    s.write_all(body).await?;
    s.flush().await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let header_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::other("connection closed before a response"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status line"))?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other("no content-length"))?;
    while buf.len() < header_end + len {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::other("connection closed mid-body"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok((status, buf[header_end..header_end + len].to_vec()))
}
