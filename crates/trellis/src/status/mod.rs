//! `trellis status` (alias `describe`): the machine objects of a namespace
//! as a tree in the style of `clusterctl describe cluster` —
//! MachineDeployments, their MachineSets, their Machines — with each
//! machine's phase, node, age and last operation, coloured on a terminal.
//!
//! Rendering is a pure function of a [`Snapshot`] and the time, so the tree
//! is tested without an API server; the command only lists the objects
//! (once, or every second with `--watch`).
//!
//! This module lists and runs; `render` draws the tree, `paint` colours
//! cells and formats ages and phases for every table trellis prints, and
//! `connection` finds the cluster for every client command and words the
//! errors when it cannot.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write as _};
use std::time::Duration;

use anyhow::Context as _;
use api::{Machine, MachineDeployment, MachineSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

mod capi;
mod connection;
mod paint;
mod render;
#[cfg(test)]
mod tests;

pub use connection::{Connection, invocation, shell_quote};
pub use paint::{Paint, phase_name, truncate};
use render::{ShootView, Snapshot, render_all};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    connection: Connection,
    /// The namespace of the machine objects.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// Every namespace.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Keep redrawing the tree every second until interrupted.
    #[arg(short, long)]
    watch: bool,
}

async fn snapshot(client: &kube::Client, namespace: Option<&str>) -> anyhow::Result<Snapshot> {
    fn api<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    let lp = ListParams::default();
    let (mds, sets, machines) = (
        api::<MachineDeployment>(client, namespace),
        api::<MachineSet>(client, namespace),
        api::<Machine>(client, namespace),
    );
    let (deployments, sets, machines) =
        futures::try_join!(mds.list(&lp), sets.list(&lp), machines.list(&lp))
            .context("listing machine objects")?;
    let namespaces: std::collections::BTreeSet<String> = deployments
        .items
        .iter()
        .map(|o| &o.metadata)
        .chain(sets.items.iter().map(|o| &o.metadata))
        .chain(machines.items.iter().map(|o| &o.metadata))
        .filter_map(|m| m.namespace.clone())
        .collect();
    Ok(Snapshot {
        deployments: deployments.items,
        sets: sets.items,
        machines: machines.items,
        nodes: BTreeMap::new(),
        unserved: unserved(client, namespaces).await,
    })
}

/// The namespaces among `namespaces` that no machine controller serves,
/// judged from the Leases the controllers renew there. A namespace whose
/// Leases cannot be read is not reported: the tree says nothing it does not
/// know.
async fn unserved(
    client: &kube::Client,
    namespaces: std::collections::BTreeSet<String>,
) -> BTreeMap<String, String> {
    use k8s_openapi::api::coordination::v1::Lease;
    let now = chrono::Utc::now();
    let mut out = BTreeMap::new();
    for ns in namespaces {
        let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
        let Ok(list) = leases.list(&ListParams::default()).await else {
            continue;
        };
        let verdict = mcm::serving::served(&list.items, now);
        if let Some(problem) = mcm::serving::problem(&ns, &verdict, now) {
            out.insert(ns, problem);
        }
    }
    out
}

/// The Nodes of a shoot's own API server (through the kubeconfig Secret in
/// its control namespace), by name with their readiness; `None` when the
/// shoot API cannot be reached.
async fn shoot_nodes(client: &kube::Client, control_ns: &str) -> Option<BTreeMap<String, bool>> {
    use k8s_openapi::api::core::v1::{Node, Secret};
    let secrets: Api<Secret> = Api::namespaced(client.clone(), control_ns);
    let secret = secrets.get_opt("kubeconfig").await.ok()??;
    let raw = secret.data?.get("kubeconfig")?.0.clone();
    let kc = kube::config::Kubeconfig::from_yaml(std::str::from_utf8(&raw).ok()?).ok()?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .ok()?;
    let shoot = kube::Client::try_from(config).ok()?;
    let nodes = Api::<Node>::all(shoot)
        .list(&ListParams::default())
        .await
        .ok()?;
    Some(
        nodes
            .items
            .into_iter()
            .map(|n| {
                let ready = n
                    .status
                    .and_then(|s| s.conditions)
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                (n.metadata.name.unwrap_or_default(), ready)
            })
            .collect(),
    )
}

/// Every Shoot of the namespace (or all), each with its Worker, the
/// machine objects of its control namespace and its nodes. No Shoot CRD
/// (a plain cluster) means no shoots.
async fn shoots(client: &kube::Client, namespace: Option<&str>) -> anyhow::Result<Vec<ShootView>> {
    let api: Api<gardener::Shoot> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let list = match api.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Vec::new()),
        Err(e) => return Err(e).context("listing shoots"),
    };
    let mut views = Vec::new();
    for shoot in list {
        let tid = shoot
            .status
            .as_ref()
            .map(|s| s.technical_id.clone())
            .unwrap_or_default();
        if tid.is_empty() {
            views.push(ShootView {
                shoot,
                ..ShootView::default()
            });
            continue;
        }
        let workers: Api<worker::Worker> = Api::namespaced(client.clone(), &tid);
        let worker = workers.get_opt(&tid).await.ok().flatten();
        let mut snap = snapshot(client, Some(&tid)).await?;
        snap.nodes = shoot_nodes(client, &tid).await.unwrap_or_default();
        views.push(ShootView {
            shoot,
            worker,
            snap,
        });
    }
    Ok(views)
}

/// The machine objects outside any shoot's control namespace (those are
/// shown under their shoot).
fn outside_shoots(mut snap: Snapshot, views: &[ShootView]) -> Snapshot {
    let owned: std::collections::HashSet<String> = views
        .iter()
        .filter_map(|v| v.shoot.status.as_ref().map(|s| s.technical_id.clone()))
        .collect();
    let keep = |m: &ObjectMeta| !owned.contains(m.namespace.as_deref().unwrap_or(""));
    snap.deployments.retain(|d| keep(&d.metadata));
    snap.sets.retain(|s| keep(&s.metadata));
    snap.machines.retain(|m| keep(&m.metadata));
    snap
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let connected = args.connection.connect().await?;
    let client = &connected.client;
    let namespace = (!args.all_namespaces).then_some(args.namespace.as_str());
    let paint = Paint::for_stdout();
    let tty = std::io::stdout().is_terminal();
    let mut last = String::new();
    loop {
        let observed = async {
            let views = shoots(client, namespace).await?;
            let snap = outside_shoots(snapshot(client, namespace).await?, &views);
            let now = Timestamp::now();
            let tree = render_all(&snap, &views, now, paint, 80);
            // Cluster API objects, where it is served, as clusterctl shows them.
            anyhow::Ok(match capi::observe(client, namespace).await? {
                Some(c) => capi::join(tree, &capi::render(&c, now, paint, 80)),
                None => tree,
            })
        }
        .await;
        // A server that does not answer gets one sentence (the library's
        // error chain only behind --log-level debug); with --watch it is
        // shown in place of the tree until the server is back.
        let tree = match observed {
            Ok(tree) => tree,
            Err(e) if args.watch => match connected.unreachable(&e) {
                Some(sentence) => {
                    tracing::debug!(error = format!("{e:#}"), "request failed");
                    format!("{sentence}\n")
                }
                None => return Err(e),
            },
            Err(e) => return Err(connected.explain(e)),
        };
        if !args.watch {
            return write_stdout(&tree);
        }
        if tty {
            write_stdout(&format!("\x1b[H\x1b[2J{tree}"))?;
        } else if tree != last {
            write_stdout(&format!("{tree}\n"))?;
        }
        last = tree;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = crate::shutdown_signal() => return Ok(()),
        }
    }
}

/// Writes `text` to stdout and flushes it, returning the error instead of
/// panicking as `print!` does: a closed pipe (`trellis status | head`)
/// is then a quiet exit (see `main`).
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")
}
