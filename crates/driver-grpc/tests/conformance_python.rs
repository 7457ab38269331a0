//! The driver conformance kit against the Python provider of
//! `examples/grpc-provider-python` over gRPC: a second language speaking
//! the same protocol. Per check, a router on loopback and a fresh
//! `provider.py` process (its stubs generated from the repository's .proto
//! by grpcio-tools as it starts) with its own JSON file of VMs. Faults are
//! armed through the provider's faults file.
//!
//! Needs python3 with grpcio and grpcio-tools (`test.sh` installs them);
//! without them each check says so and passes, unless
//! `TRELLIS_REQUIRE_PYTHON=1`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use driver::conformance::Subject;
use driver::{Call, Code, FaultInjector};
use driver_grpc::RouterConfig;
use serde_json::{Value, json};

const PROVIDER: &str = "jsonfile";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/grpc-provider-python/provider.py")
}

/// Whether python3 can run the provider; decided once per test binary.
fn python_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let ok = std::process::Command::new("python3")
            .args(["-c", "import grpc, grpc_tools"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok && std::env::var("TRELLIS_REQUIRE_PYTHON").as_deref() == Ok("1") {
            panic!("python3 with grpcio and grpcio-tools is required (TRELLIS_REQUIRE_PYTHON=1)");
        }
        ok
    })
}

/// The provider's faults file, written the way the provider reads it.
struct FaultsFile(PathBuf);

impl FaultInjector for FaultsFile {
    fn fail_next(&self, call: Call, code: Code, times: u32) {
        let mut armed: Value = std::fs::read(&self.0)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_else(|| json!({}));
        let map = armed
            .as_object_mut()
            .expect("the faults file holds an object");
        if times == 0 || code == Code::Ok {
            map.remove(call.name());
        } else {
            map.insert(
                call.name().to_string(),
                json!({"code": code.value(), "times": times}),
            );
        }
        // Replaced whole, so the provider never reads half a file.
        let tmp = self.0.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec(&armed).expect("JSON")).expect("writing faults");
        std::fs::rename(&tmp, &self.0).expect("replacing the faults file");
    }
}

async fn subject() -> Option<Subject> {
    if !python_ready() {
        eprintln!("skipped: python3 with grpcio and grpcio-tools is not available");
        return None;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let mcm = common::mcm(RouterConfig::default()).await;
    let log = std::fs::File::create(dir.path().join("provider.log")).expect("the log");
    let child = tokio::process::Command::new("python3")
        .arg(script())
        .arg("--mcm-endpoint")
        .arg(mcm.addr.to_string())
        .arg("--state")
        .arg(dir.path().join("vms.json"))
        .arg("--faults")
        .arg(dir.path().join("faults.json"))
        .arg("--stubs-dir")
        .arg(dir.path().join("stubs"))
        .args(["--provider", PROVIDER])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("starting provider.py");
    if !mcm.router.wait_for(PROVIDER, Duration::from_secs(60)).await {
        let log = std::fs::read_to_string(dir.path().join("provider.log")).unwrap_or_default();
        panic!("provider.py did not register:\n{log}");
    }
    let faults = Arc::new(FaultsFile(dir.path().join("faults.json")));
    let driver = Arc::new(mcm.router.clone());
    // The process, the server and the directory live as long as the
    // test's runtime; the process is killed with it.
    tokio::spawn(async move {
        let _keep = (mcm, child, dir);
        std::future::pending::<()>().await
    });
    Some(Subject {
        driver,
        faults,
        classes: [
            common::class("class-a", PROVIDER, json!({"cluster": "cluster-a"})),
            common::class("class-b", PROVIDER, json!({"cluster": "cluster-b"})),
        ],
    })
}

driver::driver_conformance_tests!(skippable || async { subject().await });

/// Beyond the kit: the Python provider exercises `Uninitialized` (17),
/// the one code gRPC does not have, across the wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninitialized_crosses_the_wire() {
    let Some(s) = subject().await else {
        return;
    };
    let c = &s.classes[0];
    let m = api::Machine::test("fresh").class("class-a");
    s.driver
        .create_machine(driver::CreateMachineRequest {
            machine: &m,
            machine_class: &c.machine_class,
            secret: &c.secret,
        })
        .await
        .expect("create");
    let e = s
        .driver
        .get_machine_status(driver::GetMachineStatusRequest {
            machine: &m,
            machine_class: &c.machine_class,
            secret: &c.secret,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::Uninitialized, "{e}");
    assert_eq!(
        e.code.outcome(driver::Step::CreationStatus),
        driver::Outcome::InitializeVm
    );
}
