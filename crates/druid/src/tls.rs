//! The TLS Secrets an Etcd's members mount, under upstream's volume names
//! and mount paths, and how the StatefulSet flow tells which of them a
//! set already has (spec §3: TLS changes go in steps).

use serde_json::Value;

use crate::types::Etcd;

/// The TLS Secrets the members mount (upstream's volume names and mount
/// paths): `(volume, secret, path)` for the client URL's CA, server and
/// client certificates and the peer URL's CA and server certificate.
pub fn tls_volumes(etcd: &Etcd) -> Vec<(&'static str, String, &'static str)> {
    let e = &etcd.spec.etcd;
    let mut out = Vec::new();
    if let Some(t) = &e.client_url_tls {
        out.push((
            "client-url-ca-etcd",
            t.tls_ca_secret_ref.name.clone(),
            "/var/etcd/ssl/ca",
        ));
        out.push((
            "client-url-etcd-server-tls",
            t.server_tls_secret_ref.name.clone(),
            "/var/etcd/ssl/server",
        ));
        if let Some(c) = &t.client_tls_secret_ref {
            out.push((
                "client-url-etcd-client-tls",
                c.name.clone(),
                "/var/etcd/ssl/client",
            ));
        }
    }
    if let Some(t) = &e.peer_url_tls {
        out.push((
            "peer-url-ca-etcd",
            t.tls_ca_secret_ref.name.clone(),
            "/var/etcd/ssl/peer/ca",
        ));
        out.push((
            "peer-url-etcd-server-tls",
            t.server_tls_secret_ref.name.clone(),
            "/var/etcd/ssl/peer/server",
        ));
    }
    out
}

/// The names of the TLS volumes of a StatefulSet object (as applied or as
/// read back), sorted.
pub fn tls_volume_names(sts: &Value) -> Vec<String> {
    let mut names: Vec<String> = sts
        .pointer("/spec/template/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .filter(|n| n.starts_with("client-url-") || n.starts_with("peer-url-"))
        .map(str::to_string)
        .collect();
    names.sort();
    names
}
