//! Scale benchmark of the node simulator: registers N simulated VMs against
//! an embedded API server (in-memory store) and measures the time until all
//! N Nodes are Ready, the process RSS, and the API writes per second that
//! keeping them Ready costs (lease renewals) over a hold period.
//!
//! ```text
//! cargo run --release -p nodesim --example scale -- --nodes 5000
//! # simulator alone, server in another process:
//! cargo run --release -p nodesim --example scale -- --serve 127.0.0.1:8090
//! cargo run --release -p nodesim --example scale -- --nodes 5000 --server http://127.0.0.1:8090
//! ```
//!
//! With `--server` the measured RSS is the simulator's alone; without it,
//! the process also holds the API server and its store, and the baseline
//! (measured before the simulator starts) is printed so the difference can
//! be read off.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use nodesim::{NodeSimulator, NodeSpec, SimConfig};

#[derive(Parser)]
struct Args {
    /// Simulated VMs to start.
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// Seconds to keep them Ready after all turned Ready, counting writes.
    #[arg(long, default_value_t = 60)]
    hold_secs: u64,
    /// Seconds to wait after all are Ready before counting, so that
    /// renewals queued behind the registrations do not inflate the rate;
    /// default: one lease interval.
    #[arg(long)]
    warmup_secs: Option<u64>,
    /// API requests in flight at most.
    #[arg(long, default_value_t = 64)]
    in_flight: usize,
    /// Lease renewal interval in seconds.
    #[arg(long, default_value_t = 10)]
    lease_interval: u64,
    /// Use the API server at this plain-HTTP URL instead of an in-process one.
    #[arg(long)]
    server: Option<String>,
    /// Only serve the embedded API server (memory store) on this address.
    #[arg(long)]
    serve: Option<String>,
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// CPU time (user + system) this process has used so far.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): utime and
    // stime are the 12th and 13th, in clock ticks of 1/100 s on Linux.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: u64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// Whatever went wrong, printed by `main` (an example needs no error enum).
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An embedded API server on `addr`, serving until the process ends.
async fn embedded(addr: &str) -> Result<String, BoxError> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let cluster = apiserver::cluster::Cluster::builder()
        .listener(listener)
        .start()
        .await?;
    Ok(cluster.url().to_string())
}

fn spec(i: usize) -> NodeSpec {
    let name = format!("sim-{i:05}");
    let mut s = NodeSpec::new(&name, &format!("local:///bench/{name}"));
    s.labels.insert(
        "node.kubernetes.io/instance-type".into(),
        "local.small".into(),
    );
    s.capacity = BTreeMap::from([
        ("cpu".to_string(), Quantity("2".into())),
        ("memory".to_string(), Quantity("4Gi".into())),
    ]);
    s.addresses.push(NodeAddress {
        type_: "InternalIP".into(),
        address: format!("10.{}.{}.{}", 250 + i / 65536, (i / 256) % 256, i % 256),
    });
    s
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    if let Some(addr) = &args.serve {
        let url = embedded(addr).await?;
        println!("serving {url} (memory store); Ctrl-C to stop");
        tokio::signal::ctrl_c().await?;
        return Ok(());
    }
    let before_server = rss_mib();
    let (url, in_process) = match &args.server {
        Some(u) => (u.clone(), false),
        None => (embedded("127.0.0.1:0").await?, true),
    };
    let mut config = kube::Config::new(url.parse().map_err(|e| format!("server URL: {e}"))?);
    config.default_retry = false;
    let client = kube::Client::try_from(config)?;
    let baseline = rss_mib();

    let cfg = SimConfig {
        lease_renew_interval: Duration::from_secs(args.lease_interval),
        max_in_flight: args.in_flight,
        ..SimConfig::default()
    };
    let sim = NodeSimulator::new(client.clone(), cfg);
    let start = Instant::now();
    for i in 0..args.nodes {
        sim.register(spec(i));
    }
    let mut last_print = Instant::now();
    loop {
        let s = sim.stats();
        if s.ready == args.nodes {
            break;
        }
        if last_print.elapsed() > Duration::from_secs(5) {
            eprintln!(
                "{:>6.1}s: {} registered, {} ready, {} errors",
                start.elapsed().as_secs_f64(),
                s.registrations,
                s.ready,
                s.api_errors
            );
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let to_ready = start.elapsed();
    // RSS before anything else allocates: the verification LISTs below
    // decode thousands of objects, and the allocator keeps that memory.
    let rss_ready = rss_mib();

    let warmup = args.warmup_secs.unwrap_or(args.lease_interval);
    tokio::time::sleep(Duration::from_secs(warmup)).await;
    let s0 = sim.stats();
    let cpu0 = cpu_time();
    let hold_start = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.hold_secs)).await;
    let held = hold_start.elapsed().as_secs_f64();
    let s1 = sim.stats();
    let cpu = (cpu_time() - cpu0).as_secs_f64() / held;
    let rss_end = rss_mib();

    // Confirm through the API, as a controller would see it.
    let nodes: Api<Node> = Api::all(client.clone());
    let listed = nodes.list(&ListParams::default()).await?;
    let ready_in_api = listed
        .items
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let now = Timestamp::now();
    let lease_list = leases.list(&ListParams::default()).await?;
    let oldest = lease_list
        .items
        .iter()
        .filter_map(|l| l.spec.as_ref()?.renew_time.as_ref())
        .map(|t| nodesim::status::elapsed(now, t.0))
        .max()
        .unwrap_or_default();
    let renewals = s1.lease_renewals - s0.lease_renewals;
    let writes =
        renewals + (s1.status_posts - s0.status_posts) + (s1.lease_creates - s0.lease_creates);

    println!("| what | value |");
    println!("|---|---|");
    println!("| simulated nodes | {} |", args.nodes);
    println!(
        "| API server | {} |",
        if in_process {
            "in-process, memory store"
        } else {
            "separate process"
        }
    );
    println!(
        "| time from first register to all {} Ready | {:.1} s |",
        args.nodes,
        to_ready.as_secs_f64()
    );
    println!(
        "| Ready nodes in a LIST after the hold | {ready_in_api} of {} |",
        listed.items.len()
    );
    println!(
        "| lease renewals sustained over {held:.0} s (after {warmup} s warm-up) | {:.0} /s |",
        renewals as f64 / held
    );
    println!(
        "| all simulator writes over the hold | {:.0} /s ({} errors) |",
        writes as f64 / held,
        s1.api_errors - s0.api_errors
    );
    println!(
        "| oldest lease renewTime at the end | {:.1} s ago (lease duration 40 s) |",
        oldest.as_secs_f64()
    );
    println!(
        "| process CPU over the hold | {:.0} % of one core |",
        cpu * 100.0
    );
    println!("| process RSS before API server | {before_server:.0} MiB |");
    println!("| process RSS baseline (server up, no nodes) | {baseline:.0} MiB |");
    println!("| process RSS when all Ready | {rss_ready:.0} MiB |");
    println!("| process RSS after the hold | {rss_end:.0} MiB |");
    Ok(())
}
