//! Per-call latency of the driver contract in-process and over gRPC, for
//! BENCHMARKS.md. Two drivers, each called directly and through the
//! router → loopback gRPC → provider SDK → the same driver:
//!
//! * `null`: answers at once, so the gRPC column is the transport's cost
//!   alone (encode, HTTP/2 round trip, decode, the class and secret fetched
//!   once and then cached);
//! * `local`: the local provider on an embedded API server, where a create
//!   writes a ConfigMap and starts a simulated kubelet.
//!
//! Also calls per second with 50 calls in flight (the machine controller's
//! default worker count) of GetMachineStatus on the null driver.
//!
//! ```sh
//! cargo run --release -p driver-grpc --example latency -- [ROUNDS]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use api::{Machine, MachineClass};
use async_trait::async_trait;
use driver::*;
use driver_grpc::provider::{Options, Registration};
use driver_grpc::{Router, RouterConfig};
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

/// A driver that answers every call at once.
struct Null;

#[async_trait]
impl Driver for Null {
    async fn create_machine(
        &self,
        req: CreateMachineRequest<'_>,
    ) -> Result<CreateMachineResponse, DriverError> {
        let name = req.machine.metadata.name.clone().unwrap_or_default();
        Ok(CreateMachineResponse {
            provider_id: format!("null:///{name}"),
            node_name: name,
            ..CreateMachineResponse::default()
        })
    }

    async fn delete_machine(
        &self,
        _req: DeleteMachineRequest<'_>,
    ) -> Result<DeleteMachineResponse, DriverError> {
        Ok(DeleteMachineResponse::default())
    }

    async fn get_machine_status(
        &self,
        req: GetMachineStatusRequest<'_>,
    ) -> Result<GetMachineStatusResponse, DriverError> {
        let name = req.machine.metadata.name.clone().unwrap_or_default();
        Ok(GetMachineStatusResponse {
            provider_id: format!("null:///{name}"),
            node_name: name,
            ..GetMachineStatusResponse::default()
        })
    }

    async fn list_machines(
        &self,
        _req: ListMachinesRequest<'_>,
    ) -> Result<ListMachinesResponse, DriverError> {
        Ok(ListMachinesResponse::default())
    }
}

/// The calls timed per round, in order.
const CALLS: [Call; 4] = [
    Call::GetMachineStatus,
    Call::CreateMachine,
    Call::ListMachines,
    Call::DeleteMachine,
];

/// One round: status (before the VM exists, NotFound for the local
/// provider), create, list, delete of a new machine; returns each call's
/// duration.
async fn round(d: &dyn Driver, class: &MachineClass, secret: &Secret, i: usize) -> [Duration; 4] {
    let m = Machine::test(&format!("bench-{i}")).class("bench");
    let mut out = [Duration::ZERO; 4];
    let t = Instant::now();
    let _ = d
        .get_machine_status(GetMachineStatusRequest {
            machine: &m,
            machine_class: class,
            secret,
        })
        .await;
    out[0] = t.elapsed();
    let t = Instant::now();
    let created = d
        .create_machine(CreateMachineRequest {
            machine: &m,
            machine_class: class,
            secret,
        })
        .await
        .expect("create");
    out[1] = t.elapsed();
    let t = Instant::now();
    d.list_machines(ListMachinesRequest {
        machine_class: class,
        secret,
    })
    .await
    .expect("list");
    out[2] = t.elapsed();
    let gone = m.provider_id(&created.provider_id);
    let t = Instant::now();
    d.delete_machine(DeleteMachineRequest {
        machine: &gone,
        machine_class: class,
        secret,
    })
    .await
    .expect("delete");
    out[3] = t.elapsed();
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// Times `rounds` rounds against `d` and prints a Markdown row per call.
async fn measure(
    label: &str,
    d: &dyn Driver,
    class: &MachineClass,
    secret: &Secret,
    rounds: usize,
) {
    // Warm-up: connections, caches, the first fetch of class and secret.
    for i in 0..10 {
        round(d, class, secret, 1_000_000 + i).await;
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); CALLS.len()];
    for i in 0..rounds {
        for (k, t) in round(d, class, secret, i).await.into_iter().enumerate() {
            samples[k].push(t);
        }
    }
    for (k, call) in CALLS.iter().enumerate() {
        let s = &mut samples[k];
        s.sort();
        let mean = s.iter().sum::<Duration>() / s.len() as u32;
        println!(
            "| {label} | {call} | {} | {} | {} |",
            ms(percentile(s, 0.5)),
            ms(percentile(s, 0.99)),
            ms(mean)
        );
    }
}

/// GetMachineStatus calls per second with `in_flight` calls at once.
async fn throughput(
    d: Arc<dyn Driver>,
    class: &MachineClass,
    secret: &Secret,
    in_flight: usize,
) -> f64 {
    let total = 20_000;
    let start = Instant::now();
    let per_task = total / in_flight;
    let tasks: Vec<_> = (0..in_flight)
        .map(|w| {
            let (d, class, secret) = (d.clone(), class.clone(), secret.clone());
            tokio::spawn(async move {
                for i in 0..per_task {
                    let m = Machine::test(&format!("tp-{w}-{i}")).class("bench");
                    d.get_machine_status(GetMachineStatusRequest {
                        machine: &m,
                        machine_class: &class,
                        secret: &secret,
                    })
                    .await
                    .expect("status");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("a worker");
    }
    (per_task * in_flight) as f64 / start.elapsed().as_secs_f64()
}

/// A router on loopback with `driver` connected through the SDK.
async fn over_grpc(driver: Arc<dyn Driver>, provider: &str) -> Router {
    let router = Router::new(RouterConfig::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(driver_grpc::serve(
        router.clone(),
        listener,
        None,
        std::future::pending(),
    ));
    let registration = Registration::new([provider]);
    tokio::spawn(driver_grpc::provider::serve(
        driver,
        registration,
        Options::new(addr.to_string()),
        std::future::pending(),
    ));
    assert!(router.wait_for(provider, Duration::from_secs(10)).await);
    router
}

fn fixtures(provider: &str, spec: serde_json::Value) -> (MachineClass, Secret) {
    let mut class = MachineClass::new("bench", provider, spec);
    class.metadata.namespace = Some("default".into());
    class.metadata.resource_version = Some("1".into());
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "bench", "namespace": "default"},
        "stringData": {"userData": "#cloud-config\n", "token": "t"}
    }))
    .expect("a secret");
    (class, secret)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    println!("| driver | call | p50 ms | p99 ms | mean ms |");
    println!("|---|---|---|---|---|");

    let (class, secret) = fixtures("null", json!({}));
    let null: Arc<dyn Driver> = Arc::new(Null);
    measure("null, in-process", &*null, &class, &secret, rounds).await;
    let router = over_grpc(null.clone(), "null").await;
    measure("null, gRPC", &router, &class, &secret, rounds).await;
    let direct = throughput(null.clone(), &class, &secret, 50).await;
    let remote = throughput(Arc::new(router.clone()), &class, &secret, 50).await;

    let srv = testkit::bare_cluster().await;
    let local = provider_local::LocalProvider::with_config(
        srv.client(),
        srv.client(),
        "bench",
        testkit::sim::fast(),
    )
    .await
    .expect("the local provider starts");
    let (class, secret) = fixtures("local", json!({"bootDelay": "0s"}));
    let local: Arc<dyn Driver> = Arc::new(local);
    let local_rounds = (rounds / 4).max(50);
    measure("local, in-process", &*local, &class, &secret, local_rounds).await;
    let router = over_grpc(local, "local").await;
    measure("local, gRPC", &router, &class, &secret, local_rounds).await;
    println!();
    println!(
        "GetMachineStatus with 50 in flight (null driver): {direct:.0}/s in-process, {remote:.0}/s over gRPC"
    );
    println!("rounds: {rounds} (null), {local_rounds} (local)");
}
