//! `--etcd-servers`: the API server's store in an etcd cluster instead of
//! the embedded file (`store-etcd`), with kube-apiserver's client TLS flags.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

/// The etcd flags of `trellis server` and `trellis up`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct EtcdArgs {
    /// Keep every object in etcd instead of the embedded file store:
    /// client URLs of its members, comma-separated
    /// (`http://127.0.0.1:2379,…`; `https://` with the TLS flags).
    #[arg(long, value_name = "URL[,URL…]")]
    pub etcd_servers: Option<String>,
    /// CA bundle that signed the etcd members' serving certificates.
    #[arg(long, value_name = "FILE", requires = "etcd_servers")]
    pub etcd_cafile: Option<PathBuf>,
    /// Client certificate for etcd (PEM).
    #[arg(long, value_name = "FILE", requires = "etcd_keyfile")]
    pub etcd_certfile: Option<PathBuf>,
    /// Key of the client certificate for etcd (PEM).
    #[arg(long, value_name = "FILE", requires = "etcd_certfile")]
    pub etcd_keyfile: Option<PathBuf>,
    /// Prefix of every key this server writes in etcd, so several servers
    /// can keep separate data in one etcd (servers with the same prefix
    /// serve the same objects).
    #[arg(long, value_name = "PREFIX", default_value = "")]
    pub etcd_prefix: String,
}

/// The etcd store the flags name, or `None` without `--etcd-servers`.
pub async fn open(args: &EtcdArgs) -> anyhow::Result<Option<Arc<dyn store::Store>>> {
    let Some(list) = &args.etcd_servers else {
        return Ok(None);
    };
    let mut client = etcdv3::Config::from_list(list);
    anyhow::ensure!(!client.endpoints.is_empty(), "--etcd-servers names no URL");
    if args.etcd_cafile.is_some() || args.etcd_certfile.is_some() {
        client.tls = Some(etcdv3::TlsFiles {
            ca: args.etcd_cafile.clone(),
            cert: args.etcd_certfile.clone(),
            key: args.etcd_keyfile.clone(),
        });
    }
    let store = store_etcd::EtcdStore::connect(store_etcd::EtcdOptions {
        client,
        prefix: args.etcd_prefix.clone(),
    })
    .await
    .with_context(|| format!("connecting to etcd at {list}"))?;
    tracing::info!(servers = %list, prefix = %args.etcd_prefix, "objects are kept in etcd");
    Ok(Some(Arc::new(store)))
}
