//! `trellis etcd-backup-restore server|compact|copy` and `trellis etcd-wrapper
//! start-etcd`: the two containers of a druid StatefulSet as trellis
//! subcommands (the kubelet's image table maps upstream's images here),
//! with upstream's flag names as druid passes them. CLI glue only; the
//! behaviour is in the `backup-restore` crate.
//!
//! The process runtime has no in-cluster credentials and no hostAliases
//! yet: the Lease client comes from `KUBECONFIG` when there is no
//! in-cluster environment, and a host that does not resolve (druid's
//! `<etcd>-local` alias of 127.0.0.1) means this pod's own IP, since pods
//! share the host's loopback.

use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use backup_restore::gc::Policy;
use backup_restore::lease::{LeaseNames, Leases};
use backup_restore::restore::Programs;
use backup_restore::sidecar::{Settings, Sidecar};
use backup_restore::snapshot::Compression;
use backup_restore::snapstore::{self, StoreConfig};
use clap::{ArgAction, Subcommand};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::controller_manager::parse_duration;

#[derive(Subcommand)]
pub enum Command {
    /// etcd-backup-restore: the sidecar of a druid-managed etcd member
    /// (`server`), and the compaction Job's `compact`.
    #[command(name = "etcd-backup-restore")]
    BackupRestore {
        #[command(subcommand)]
        what: BrCommand,
    },
    /// etcd-wrapper: initialize through backup-restore, then run etcd with
    /// the configuration it serves.
    #[command(name = "etcd-wrapper")]
    Wrapper {
        #[command(subcommand)]
        what: WrapperCommand,
    },
}

#[derive(Subcommand)]
pub enum BrCommand {
    Server(Box<ServerArgs>),
    Compact(Box<ServerArgs>),
    Copy(Box<CopyArgs>),
}

#[derive(Subcommand)]
pub enum WrapperCommand {
    StartEtcd(WrapperArgs),
}

fn dur(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

#[derive(clap::Args)]
pub struct ServerArgs {
    #[arg(long, default_value = "/var/etcd/data/new.etcd")]
    data_dir: PathBuf,
    #[arg(long, default_value = "/var/etcd/data/restoration.temp")]
    restoration_temp_snapshots_dir: PathBuf,
    #[arg(long, default_value = "/var/etcd/data/temp")]
    snapstore_temp_directory: PathBuf,
    #[arg(long, default_value = "/var/etcd/config/etcd.conf.yaml")]
    config_file: PathBuf,
    #[arg(long, default_value = "http://127.0.0.1:2379")]
    endpoints: String,
    #[arg(long)]
    service_endpoints: Option<String>,
    #[arg(long, default_value_t = 8080)]
    server_port: u16,
    #[arg(long)]
    storage_provider: Option<String>,
    #[arg(long, default_value = "")]
    store_prefix: String,
    #[arg(long, env = "STORAGE_CONTAINER", default_value = "")]
    store_container: String,
    #[arg(long, default_value = "0 */1 * * *")]
    schedule: String,
    #[arg(long, default_value = "20s", value_parser = dur)]
    delta_snapshot_period: Duration,
    #[arg(long, default_value_t = 100 << 20)]
    delta_snapshot_memory_limit: usize,
    #[arg(long, default_value = "LimitBased")]
    garbage_collection_policy: String,
    #[arg(long, default_value_t = 7)]
    max_backups: usize,
    #[arg(long, default_value = "1m", value_parser = dur)]
    garbage_collection_period: Duration,
    #[arg(long, default_value = "0s", value_parser = dur)]
    delta_snapshot_retention_period: Duration,
    #[arg(long, action = ArgAction::Set, default_value_t = false)]
    compress_snapshots: bool,
    #[arg(long, default_value = "gzip")]
    compression_policy: String,
    #[arg(long, default_value = "15m", value_parser = dur)]
    etcd_snapshot_timeout: Duration,
    #[arg(long, default_value = "15m", value_parser = dur)]
    etcd_defrag_timeout: Duration,
    #[arg(long, default_value = "5s", value_parser = dur)]
    etcd_connection_timeout: Duration,
    #[arg(long, default_value = "10s", value_parser = dur)]
    k8s_heartbeat_duration: Duration,
    #[arg(long, default_value = "5s", value_parser = dur)]
    reelection_period: Duration,
    #[arg(long, action = ArgAction::Set, default_value_t = false)]
    enable_snapshot_lease_renewal: bool,
    #[arg(long, action = ArgAction::Set, default_value_t = false)]
    enable_member_lease_renewal: bool,
    #[arg(long)]
    full_snapshot_lease_name: Option<String>,
    #[arg(long)]
    delta_snapshot_lease_name: Option<String>,
    #[arg(long, env = "POD_NAME", default_value = "")]
    pod_name: String,
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pod_namespace: String,
    // Accepted for upstream's command lines; nothing here depends on them.
    #[arg(long, action = ArgAction::Set)]
    insecure_transport: Option<bool>,
    #[arg(long, action = ArgAction::Set)]
    insecure_skip_tls_verify: Option<bool>,
    #[arg(long, action = ArgAction::Set)]
    use_etcd_wrapper: Option<bool>,
    #[arg(long)]
    etcd_process_name: Option<String>,
    #[arg(long)]
    defragmentation_schedule: Option<String>,
    #[arg(long)]
    auto_compaction_mode: Option<String>,
    #[arg(long)]
    auto_compaction_retention: Option<String>,
    #[arg(long)]
    embedded_etcd_quota_bytes: Option<u64>,
}

/// `copy` (druid's EtcdCopyBackupsTask worker).
#[derive(clap::Args)]
pub struct CopyArgs {
    #[arg(long, default_value = "/home/nonroot/data/temp")]
    snapstore_temp_directory: PathBuf,
    #[arg(long, default_value = "Local")]
    storage_provider: String,
    #[arg(long, default_value = "")]
    store_prefix: String,
    #[arg(long, env = "STORAGE_CONTAINER", default_value = "")]
    store_container: String,
    #[arg(long, default_value = "Local")]
    source_store_provider: String,
    #[arg(long, default_value = "")]
    source_store_prefix: String,
    #[arg(long, env = "SOURCE_STORAGE_CONTAINER", default_value = "")]
    source_store_container: String,
    /// Days.
    #[arg(long)]
    max_backup_age: Option<i64>,
    #[arg(long)]
    max_backups_to_copy: Option<usize>,
    #[arg(long, action = ArgAction::Set, default_value_t = false)]
    wait_for_final_snapshot: bool,
    /// 0 waits forever.
    #[arg(long, default_value = "0s", value_parser = dur)]
    wait_for_final_snapshot_timeout: Duration,
}

#[derive(clap::Args)]
pub struct WrapperArgs {
    #[arg(long, default_value = "127.0.0.1:8080")]
    backup_restore_host_port: String,
    #[arg(long)]
    etcd_server_name: Option<String>,
    #[arg(long, action = ArgAction::Set, default_value_t = false)]
    backup_restore_tls_enabled: bool,
    /// Where `/readyz` is served (druid's wrapperPort).
    #[arg(long, default_value_t = 9095)]
    wrapper_port: u16,
    /// Where the exit code of etcd's last run is kept.
    #[arg(long, default_value = "/var/etcd/data/exit_code")]
    exit_code_file: PathBuf,
}

pub async fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::BackupRestore {
            what: BrCommand::Server(a),
        } => server(*a).await,
        Command::BackupRestore {
            what: BrCommand::Compact(a),
        } => compact(*a).await,
        Command::BackupRestore {
            what: BrCommand::Copy(a),
        } => copy(*a).await,
        Command::Wrapper {
            what: WrapperCommand::StartEtcd(a),
        } => wrapper(a).await,
    }
}

async fn copy(a: CopyArgs) -> anyhow::Result<()> {
    let open = |provider: &str, container: &str, prefix: &str| {
        snapstore::open(&StoreConfig {
            provider: provider.to_string(),
            container: container.to_string(),
            prefix: prefix.to_string(),
        })
    };
    let source = open(
        &a.source_store_provider,
        &a.source_store_container,
        &a.source_store_prefix,
    )?;
    let target = open(&a.storage_provider, &a.store_container, &a.store_prefix)?;
    let filter = backup_restore::copy::Filter {
        max_backup_age_days: a.max_backup_age,
        max_backups: a.max_backups_to_copy,
    };
    let wait = a
        .wait_for_final_snapshot
        .then_some(a.wait_for_final_snapshot_timeout);
    let n = backup_restore::copy::copy(
        source.as_ref(),
        target.as_ref(),
        &filter,
        wait,
        &a.snapstore_temp_directory,
    )
    .await?;
    println!(
        "copied {n} snapshots from {} to {}",
        source.describe(),
        target.describe()
    );
    Ok(())
}

/// This pod's IP: what its hostname resolves to in the pod's hosts file.
fn own_ip() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .and_then(|h| (h.as_str(), 0).to_socket_addrs().ok()?.next())
        .map_or("127.0.0.1".to_string(), |a| a.ip().to_string())
}

/// `host:port`, with a host that does not resolve taken as this pod.
fn local_addr(host_port: &str) -> String {
    if host_port
        .to_socket_addrs()
        .is_ok_and(|mut a| a.next().is_some())
    {
        return host_port.to_string();
    }
    let port = host_port.rsplit(':').next().unwrap_or("80");
    format!("{}:{port}", own_ip())
}

/// A URL's host made reachable from here (see [`local_addr`]).
fn local_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let (hp, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = if path.is_empty() {
        String::new()
    } else {
        format!("/{path}")
    };
    format!("{scheme}://{}{path}", local_addr(hp))
}

/// A client for the Leases: `KUBECONFIG` or the in-cluster environment.
/// The process runtime hands pods no service account tokens (and hides
/// its data dir from them), so under `trellis up` the sidecar gets
/// `KUBECONFIG` from the image table's `env` (`--image-map`).
async fn kube_client() -> anyhow::Result<kube::Client> {
    kube::Client::try_default()
        .await
        .context("no API credentials: KUBECONFIG unset and not in a cluster")
}

fn settings(a: &ServerArgs, leases: Option<Leases>) -> anyhow::Result<Settings> {
    let store = match &a.storage_provider {
        Some(p) => Some(snapstore::open(&StoreConfig {
            provider: p.clone(),
            container: a.store_container.clone(),
            prefix: a.store_prefix.clone(),
        })?),
        None => None,
    };
    let compression = if a.compress_snapshots {
        Compression::from_policy(&a.compression_policy).context("unknown compression policy")?
    } else {
        Compression::None
    };
    let gc_policy = Policy::from_flags(&a.garbage_collection_policy, a.max_backups)
        .context("unknown garbage collection policy")?;
    let schedule =
        gardener::cron::Cron::parse(&a.schedule).map_err(|e| anyhow::anyhow!("--schedule: {e}"))?;
    let endpoint = a.endpoints.split(',').next().unwrap_or_default();
    Ok(Settings {
        data_dir: a.data_dir.clone(),
        temp_dir: a.snapstore_temp_directory.clone(),
        config_path: a.config_file.clone(),
        pod_name: a.pod_name.clone(),
        namespace: a.pod_namespace.clone(),
        endpoint: local_url(endpoint),
        store,
        schedule: Some(schedule),
        defrag_schedule: match &a.defragmentation_schedule {
            Some(s) => Some(
                gardener::cron::Cron::parse(s)
                    .map_err(|e| anyhow::anyhow!("--defragmentation-schedule: {e}"))?,
            ),
            None => None,
        },
        defrag_timeout: a.etcd_defrag_timeout,
        delta_period: a.delta_snapshot_period,
        delta_memory_limit: a.delta_snapshot_memory_limit,
        gc_policy,
        gc_period: a.garbage_collection_period,
        delta_retention: a.delta_snapshot_retention_period,
        compression,
        snapshot_timeout: a.etcd_snapshot_timeout,
        heartbeat: a.k8s_heartbeat_duration,
        reelection_period: a.reelection_period,
        leases,
        programs: Programs::default(),
    })
}

async fn server(a: ServerArgs) -> anyhow::Result<()> {
    let leases = if a.enable_member_lease_renewal || a.enable_snapshot_lease_renewal {
        match kube_client().await {
            Ok(client) => Some(Leases::new(
                client,
                &a.pod_namespace,
                LeaseNames {
                    member: a.pod_name.clone(),
                    full_snapshot: a
                        .full_snapshot_lease_name
                        .clone()
                        .filter(|_| a.enable_snapshot_lease_renewal),
                    delta_snapshot: a
                        .delta_snapshot_lease_name
                        .clone()
                        .filter(|_| a.enable_snapshot_lease_renewal),
                },
            )),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "leases are not renewed");
                None
            }
        }
    } else {
        None
    };
    let sidecar = Sidecar::new(settings(&a, leases)?)?;
    let ip = own_ip();
    let listener = tokio::net::TcpListener::bind((ip.as_str(), a.server_port))
        .await
        .with_context(|| format!("listening on {ip}:{}", a.server_port))?;
    tracing::info!(addr = %listener.local_addr()?, "etcd-backup-restore serving");
    tokio::spawn(sidecar.clone().run());
    axum::serve(listener, backup_restore::sidecar::router(sidecar)).await?;
    Ok(())
}

/// `compact`: the store folded into one new full snapshot (see
/// `backup_restore::compact`), recorded in the full-snapshot lease.
async fn compact(a: ServerArgs) -> anyhow::Result<()> {
    let s = settings(&a, None)?;
    let store = s
        .store
        .clone()
        .context("compact needs --storage-provider")?;
    // The work directory holds the restored data dir and its temp files.
    let work = a
        .data_dir
        .parent()
        .map_or_else(|| a.data_dir.clone(), |p| p.join("compaction.work"));
    let Some(snap) = backup_restore::compact::compact(
        store,
        &work,
        &s.programs,
        s.compression,
        a.etcd_defrag_timeout.max(a.etcd_snapshot_timeout),
    )
    .await?
    else {
        println!("nothing to compact: the store holds no full snapshot");
        return Ok(());
    };
    if a.enable_snapshot_lease_renewal {
        let leases = Leases::new(
            kube_client().await?,
            &a.pod_namespace,
            LeaseNames {
                member: String::new(),
                full_snapshot: a.full_snapshot_lease_name.clone(),
                delta_snapshot: None,
            },
        );
        leases.record_snapshot(&snap).await?;
    }
    println!("compacted into {}", snap.name());
    Ok(())
}

/// One HTTP/1.0 GET; the status code and body.
async fn get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_string()))
}

/// `/readyz`: 200 while etcd answers a status request.
async fn serve_readyz(listener: tokio::net::TcpListener, client: etcdv3::Client) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let client = client.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let _ = sock.read(&mut buf).await;
            let ok = tokio::time::timeout(Duration::from_secs(3), client.status())
                .await
                .is_ok_and(|r| r.is_ok());
            let line = if ok {
                "HTTP/1.0 200 OK"
            } else {
                "HTTP/1.0 503 Service Unavailable"
            };
            let _ = sock.write_all(format!("{line}\r\n\r\n").as_bytes()).await;
        });
    }
}

async fn wrapper(a: WrapperArgs) -> anyhow::Result<()> {
    if a.backup_restore_tls_enabled {
        bail!("TLS to backup-restore is not supported yet");
    }
    let br = local_addr(&a.backup_restore_host_port);
    // A clean last exit only needs a sanity check of the data.
    let mode = match std::fs::read_to_string(&a.exit_code_file) {
        Ok(c) if c.trim() == "0" => "sanity",
        _ => "full",
    };
    loop {
        match get(&br, "/initialization/status").await {
            Ok((200, s)) if s.trim() == "New" => {
                get(&br, &format!("/initialization/start?mode={mode}")).await?;
            }
            Ok((200, s)) if s.trim() == "Successful" => break,
            Ok((200, s)) if s.trim() == "Failed" => bail!("backup-restore failed to initialize"),
            Ok(_) => {}
            Err(e) => tracing::info!(error = %e, %br, "waiting for backup-restore"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (code, config) = get(&br, "/config").await?;
    if code != 200 {
        bail!("backup-restore's /config answered {code}: {config}");
    }
    let ip = own_ip();
    let config = config.replace("0.0.0.0", &ip);
    let path = std::env::temp_dir().join("etcd.conf.yaml");
    std::fs::write(&path, &config)?;
    let client_url = backup_restore::config::field(&config, "listen-client-urls")
        .and_then(|u| u.split(',').next().map(str::to_string))
        .unwrap_or_else(|| format!("http://{ip}:2379"));
    let readyz = tokio::net::TcpListener::bind((ip.as_str(), a.wrapper_port)).await?;
    tokio::spawn(serve_readyz(
        readyz,
        etcdv3::Client::single(&client_url, None)?,
    ));
    let mut child = tokio::process::Command::new("etcd")
        .arg(format!("--config-file={}", path.display()))
        .kill_on_drop(true)
        .spawn()
        .context("starting etcd")?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let status = tokio::select! {
        s = child.wait() => s?,
        _ = term.recv() => {
            if let Some(pid) = child.id() {
                // etcd stops cleanly on SIGTERM.
                let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
            }
            child.wait().await?
        }
    };
    let code = status.code().unwrap_or(1);
    let _ = std::fs::write(&a.exit_code_file, code.to_string());
    if code != 0 {
        bail!("etcd exited with {status}");
    }
    Ok(())
}
