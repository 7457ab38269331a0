//! `trellis up` runs dependency-watchdog's prober and weeder in-process with
//! the default configs of `examples/dwd/`: once the examples' Shoot is
//! created, its control namespace gets a prober that reaches the shoot's
//! own API server through the Secret gardenlet writes
//! (`shoot-access-dependency-watchdog-probe`) and probes its node leases,
//! as `/dependency-watchdog/metrics` on `--metrics-listen` shows.

mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{free_port, have, kubectl, start_command};

const NS: &str = "shoot--local--demo";
/// The default config's initialDelay is 30 s, after the shoot is created.
const TIMEOUT: Duration = Duration::from_secs(150);

fn get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let ok = text.split_whitespace().nth(1) == Some("200");
    ok.then(|| text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()))?
}

fn wait(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn apply(kc: &Path, file: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/shoot")
        .join(file);
    let out = kubectl(kc, &["apply", "-f", path.to_str().unwrap()]);
    assert!(out.status.success(), "applying {file}");
}

#[test]
fn up_probes_every_shoot_with_the_default_configs() {
    if !have("kubectl") {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let port = free_port();
    let metrics_listen = format!("127.0.0.1:{port}");
    let _up = start_command("up", data, &["--metrics-listen", &metrics_listen]);
    let kc = data.join("admin.kubeconfig");
    let metrics = || get(port, "/dependency-watchdog/metrics").unwrap_or_default();
    wait("the watchdog's metrics", || {
        metrics().contains("dwd_prober_probers 0")
    });
    assert!(
        get(port, "/metrics").is_some(),
        "the controllers' metrics stay at /metrics"
    );

    apply(&kc, "cloudprofile.yaml");
    apply(&kc, "shoot.yaml");
    // The probe Secret gardenlet writes for the prober.
    wait("the probe secret", || {
        kubectl(
            &kc,
            &[
                "get",
                "secret",
                "shoot-access-dependency-watchdog-probe",
                "-n",
                NS,
            ],
        )
        .status
        .success()
    });
    // The Cluster shows the shoot created: a prober starts.
    wait("a prober for the shoot", || {
        metrics().contains("dwd_prober_probers 1")
    });
    // After its initial delay it reaches the shoot's API and counts the
    // node leases: the API-server probe passed and the lease probe ran.
    let probed = format!("dwd_prober_node_leases{{namespace=\"{NS}\",state=\"renewed\"}}");
    wait("a lease probe of the shoot", || metrics().contains(&probed));
    let text = metrics();
    assert!(
        !text.contains(&format!(
            "dwd_prober_probes_total{{namespace=\"{NS}\",result=\"api_server_unreachable\"}}"
        )),
        "{text}"
    );
}
