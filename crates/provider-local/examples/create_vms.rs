//! Benchmark of the local provider end to end: N `CreateMachine` calls (each
//! writes a VM record to the control cluster and starts a simulated node)
//! against an in-process embedded API server (memory store), the time until
//! all N Nodes are Ready, and the time a restarted provider takes to restore
//! the N VMs from their records.
//!
//! ```text
//! cargo run --release -p provider-local --example create_vms -- --vms 5000
//! ```

use std::time::{Duration, Instant};

use api::{Machine, MachineClass};
use driver::{CreateMachineRequest, Driver};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use provider_local::LocalProvider;
use serde_json::json;

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn wait_ready(p: &LocalProvider, n: usize) {
    while p.simulator().stats().ready < n {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let vms = arg("--vms", 5000);
    let concurrency = arg("--concurrency", 32);

    let client = apiserver::cluster::Cluster::builder()
        .start()
        .await?
        .client();
    let baseline = rss_mib();

    let provider = LocalProvider::new(client.clone(), client.clone(), "bench").await?;
    let mut class = MachineClass::new("bench", "local", json!({"zone": "zone-a"}));
    class.metadata.namespace = Some("default".into());
    let secret = Secret::default();

    let start = Instant::now();
    let results: Vec<_> = futures::stream::iter(0..vms)
        .map(|i| {
            let (p, class, secret) = (&provider, &class, &secret);
            async move {
                let machine = Machine::test(&format!("vm-{i:05}")).class("bench");
                p.create_machine(CreateMachineRequest {
                    machine: &machine,
                    machine_class: class,
                    secret,
                })
                .await
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let created = start.elapsed();
    let failed = results.iter().filter(|r| r.is_err()).count();
    wait_ready(&provider, vms - failed).await;
    let ready = start.elapsed();
    let rss = rss_mib();

    drop(provider);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let restart = Instant::now();
    let provider = LocalProvider::new(client.clone(), client, "bench").await?;
    let restored = restart.elapsed();
    let restored_vms = provider.vms().len();
    wait_ready(&provider, restored_vms).await;
    let restored_ready = restart.elapsed();

    println!("| what | value |");
    println!("|---|---|");
    println!(
        "| {vms} CreateMachine calls, {concurrency} at a time ({failed} failed) | {:.1} s ({:.0} /s) |",
        created.as_secs_f64(),
        vms as f64 / created.as_secs_f64()
    );
    println!(
        "| from the first call to all {} nodes Ready | {:.1} s |",
        vms - failed,
        ready.as_secs_f64()
    );
    println!(
        "| restarted provider: {restored_vms} VMs restored from records | {:.2} s, all Ready again after {:.1} s |",
        restored.as_secs_f64(),
        restored_ready.as_secs_f64()
    );
    println!(
        "| process RSS: baseline / all Ready (server, store, provider, simulator) | {baseline:.0} / {rss:.0} MiB |"
    );
    Ok(())
}
