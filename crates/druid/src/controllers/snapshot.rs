//! How the compaction controller asks backup-restore for a full snapshot
//! (`GET …/snapshot/full` on the client Service): a trait, so tests can
//! stand in for backup-restore, and the plain-HTTP implementation.

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// Triggers a full snapshot at `url`, within `timeout`.
pub trait FullSnapshotTrigger: Send + Sync {
    fn trigger(&self, url: String, timeout: Duration) -> BoxFuture<'static, Result<(), String>>;
}

/// An HTTP GET; backup-restore answers 200 once the snapshot is taken.
/// Backup-restore behind TLS (`backup.tls`) is not reached yet: such a
/// URL fails, and the condition says why.
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpTrigger;

impl FullSnapshotTrigger for HttpTrigger {
    fn trigger(&self, url: String, timeout: Duration) -> BoxFuture<'static, Result<(), String>> {
        async move {
            match tokio::time::timeout(timeout, get(&url)).await {
                Ok(r) => r,
                Err(_) => Err(format!("no answer from {url} within {timeout:?}")),
            }
        }
        .boxed()
    }
}

/// [`HttpTrigger`] for a druid outside the cluster's DNS (as in `trellis
/// up`, where the seed's Services are loopback addresses of the process
/// kubelet's proxy): a host `<service>.<namespace>.svc[.<domain>]` is
/// resolved to the Service's cluster IP through the API, as cluster DNS
/// would; any other host is used as it is.
#[derive(Clone)]
pub struct ServiceIpTrigger {
    client: kube::Client,
}

impl ServiceIpTrigger {
    pub fn new(client: kube::Client) -> ServiceIpTrigger {
        ServiceIpTrigger { client }
    }
}

/// The Service a host name names: `(service, namespace)`.
pub fn service_of_host(host: &str) -> Option<(String, String)> {
    let mut parts = host.split('.');
    let (service, namespace, svc) = (parts.next()?, parts.next()?, parts.next()?);
    (svc == "svc" && !service.is_empty() && !namespace.is_empty())
        .then(|| (service.to_string(), namespace.to_string()))
}

impl FullSnapshotTrigger for ServiceIpTrigger {
    fn trigger(&self, url: String, timeout: Duration) -> BoxFuture<'static, Result<(), String>> {
        let client = self.client.clone();
        async move {
            let uri: hyper::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
            let host = uri.host().unwrap_or_default().to_string();
            let url = match service_of_host(&host) {
                Some((service, namespace)) => {
                    let api: kube::Api<k8s_openapi::api::core::v1::Service> =
                        kube::Api::namespaced(client, &namespace);
                    let svc = api
                        .get(&service)
                        .await
                        .map_err(|e| format!("resolving {host}: {e}"))?;
                    let ip = svc
                        .spec
                        .and_then(|s| s.cluster_ip)
                        .filter(|ip| !ip.is_empty() && ip != "None")
                        .ok_or_else(|| {
                            format!("resolving {host}: the Service has no cluster IP")
                        })?;
                    url.replacen(&host, &ip, 1)
                }
                None => url,
            };
            HttpTrigger.trigger(url, timeout).await
        }
        .boxed()
    }
}

async fn get(url: &str) -> Result<(), String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!("{url}: only http is supported"));
    }
    let host = uri.host().ok_or_else(|| format!("{url}: no host"))?;
    let port = uri.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let req = hyper::Request::get(path)
        .header(hyper::header::HOST, host)
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(format!("{url} answered {}", resp.status()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn server(status: &'static str) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let body = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
            let _ = s.write_all(body.as_bytes()).await;
        });
        format!("http://{addr}/snapshot/full")
    }

    #[test]
    fn service_host_names_resolve_to_their_service() {
        assert_eq!(
            service_of_host("etcd-main-client.shoot--p--s.svc.cluster.local"),
            Some(("etcd-main-client".into(), "shoot--p--s".into()))
        );
        assert_eq!(
            service_of_host("e-client.ns.svc"),
            Some(("e-client".into(), "ns".into()))
        );
        assert_eq!(service_of_host("127.0.0.1"), None);
        assert_eq!(service_of_host("example.com"), None);
        assert_eq!(service_of_host("a.b.c.d"), None);
    }

    #[tokio::test]
    async fn scenario_15_a_200_is_success_anything_else_an_error() {
        let ok = server("200 OK").await;
        assert_eq!(
            HttpTrigger.trigger(ok, Duration::from_secs(5)).await,
            Ok(())
        );
        let bad = server("503 Service Unavailable").await;
        let err = HttpTrigger
            .trigger(bad, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(err.contains("503"), "{err}");
        let tls = HttpTrigger
            .trigger("https://x:1/snapshot/full".into(), Duration::from_secs(5))
            .await;
        assert!(tls.is_err());
    }
}
