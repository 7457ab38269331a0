//! The real `trellis dependency-watchdog prober|weeder` processes against a
//! `trellis server`: each serves /healthz, /readyz and /metrics on upstream's
//! flags, takes its leader Lease, and does its job.
//!
//! The prober's "shoot" is the seed server itself (the kubeconfig Secret
//! names it): nodes and their leases live next to the machines, which is
//! all a probe needs. Most leases expiring scales the dependant
//! `machine-controller-manager` Deployment to 0 with the meltdown
//! annotations; renewed leases bring it back to its replicas. The weeder
//! deletes a crash-looping dependant pod once its service's EndpointSlice
//! is ready.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Secret};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "shoot--p--a";
const SECRET: &str = "shoot-access-dependency-watchdog-probe";
const MCM: &str = "machine-controller-manager";
const TIMEOUT: Duration = Duration::from_secs(30);

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding an ephemeral port");
    l.local_addr().expect("local address").port()
}

fn log_tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = s.lines().collect();
    all[all.len().saturating_sub(40)..].join("\n")
}

/// Status code and body of `GET path` on a plain-HTTP listener.
async fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
            .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(2), io)
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((code, body))
}

async fn wait_for<F, Fut>(what: &str, log: &Path, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + TIMEOUT;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; log:\n{}",
            log_tail(log)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Env {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    client: kube::Client,
    _server: tokio::process::Child,
}

async fn start_server() -> Env {
    let dir = tempfile::tempdir().expect("a temp dir");
    let port = free_port();
    let log = dir.path().join("server.log");
    let server = tokio::process::Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(["server", "--insecure-http", "--in-memory", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(dir.path())
        .env("TRELLIS_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .kill_on_drop(true)
        .spawn()
        .expect("spawning trellis server");
    let kubeconfig = dir.path().join("admin.kubeconfig");
    wait_for("the server", &log, async || {
        kubeconfig.exists() && get(port, "/readyz").await.is_some_and(|(c, _)| c == 200)
    })
    .await;
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    Env {
        client: kube::Client::try_from(config).unwrap(),
        dir,
        kubeconfig,
        _server: server,
    }
}

/// One dependency-watchdog process.
struct Watchdog {
    _child: tokio::process::Child,
    metrics: u16,
    health: u16,
    log: PathBuf,
}

impl Env {
    async fn watchdog(&self, half: &str, config: &str) -> Watchdog {
        let file = self.dir.path().join(format!("{half}-config.yaml"));
        std::fs::write(&file, config).unwrap();
        let (metrics, health) = (free_port(), free_port());
        let log = self.dir.path().join(format!("{half}.log"));
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_trellis"))
            .args(["dependency-watchdog", half, "--config-file"])
            .arg(&file)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg(format!("--metrics-bind-addr=127.0.0.1:{metrics}"))
            .arg(format!("--health-bind-addr=127.0.0.1:{health}"))
            .args(["--enable-leader-election=true", "--kube-api-qps=50"])
            .args(["--kube-api-burst=100", "--concurrent-reconciles=1"])
            .args(["--leader-elect-lease-duration=2s"])
            .args(["--leader-elect-renew-deadline=1500ms"])
            .args(["--leader-elect-retry-period=250ms"])
            .env("TRELLIS_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .kill_on_drop(true)
            .spawn()
            .expect("spawning trellis dependency-watchdog");
        let w = Watchdog {
            _child: child,
            metrics,
            health,
            log,
        };
        wait_for("/healthz", &w.log, async || {
            get(w.health, "/healthz")
                .await
                .is_some_and(|(c, _)| c == 200)
        })
        .await;
        wait_for("/readyz (the watch synced)", &w.log, async || {
            get(w.health, "/readyz")
                .await
                .is_some_and(|(c, _)| c == 200)
        })
        .await;
        w
    }
}

impl Watchdog {
    async fn metrics(&self) -> String {
        match get(self.metrics, "/metrics").await {
            Some((200, body)) => body,
            other => panic!("/metrics answered {other:?}"),
        }
    }
}

async fn create<K>(api: &Api<K>, obj: Value) -> K
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

fn in_ns<K>(client: &kube::Client) -> Api<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    Api::namespaced(client.clone(), NS)
}

async fn namespace(client: &kube::Client, name: &str) {
    create(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": name}}),
    )
    .await;
}

/// Renews (or creates) node `name`'s lease `ago` seconds in the past.
async fn renew(client: &kube::Client, name: &str, ago: i64) {
    let api: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let at = (Utc::now() - chrono::Duration::seconds(ago))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let spec = json!({"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": at});
    api.patch(
        name,
        &PatchParams::apply("test").force(),
        &Patch::Apply(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"}, "spec": spec,
        })),
    )
    .await
    .unwrap();
}

async fn mcm(client: &kube::Client) -> (i32, std::collections::BTreeMap<String, String>) {
    let d = Api::<Deployment>::namespaced(client.clone(), NS)
        .get(MCM)
        .await
        .unwrap();
    (
        d.spec.and_then(|s| s.replicas).unwrap_or(0),
        d.metadata.annotations.unwrap_or_default(),
    )
}

const PROBER_CONFIG: &str = "kubeConfigSecretName: shoot-access-dependency-watchdog-probe
probeInterval: 300ms
initialDelay: 0s
probeTimeout: 5s
dependentResourceInfos:
- ref: {apiVersion: apps/v1, kind: Deployment, name: kube-controller-manager}
  optional: true
  scaleUp: {level: 0}
  scaleDown: {level: 1}
- ref: {apiVersion: apps/v1, kind: Deployment, name: machine-controller-manager}
  optional: false
  scaleUp: {level: 1}
  scaleDown: {level: 0}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prober_process_scales_a_shoots_mcm_down_and_up_with_its_node_leases() {
    let env = start_server().await;
    let c = env.client.clone();
    for ns in ["garden", NS] {
        namespace(&c, ns).await;
    }
    // The shoot's kubeconfig: here the seed server itself.
    let kubeconfig = std::fs::read_to_string(&env.kubeconfig).unwrap();
    create(
        &in_ns::<Secret>(&c),
        json!({"metadata": {"name": SECRET}, "stringData": {"kubeconfig": kubeconfig}}),
    )
    .await;
    create(
        &in_ns::<Deployment>(&c),
        json!({"metadata": {"name": MCM}, "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": MCM}},
            "template": {"metadata": {"labels": {"app": MCM}},
                         "spec": {"containers": [{"name": "mcm", "image": "trellis"}]}}}}),
    )
    .await;
    // Four nodes backed by Running machines, all leases fresh.
    let machines = ApiResource::erase::<api::Machine>(&());
    let machine_api: Api<DynamicObject> = Api::namespaced_with(c.clone(), NS, &machines);
    for i in 0..4 {
        let node = format!("node-{i}");
        create(
            &Api::<Node>::all(c.clone()),
            json!({"metadata": {"name": node, "labels": {"worker.gardener.cloud/pool": "pool-a"}}}),
        )
        .await;
        let m: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "machine.sapcloud.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": format!("m-{i}"), "labels": {"node": node}},
            "spec": {"class": {"kind": "MachineClass", "name": "local"}},
        }))
        .unwrap();
        machine_api
            .create(&PostParams::default(), &m)
            .await
            .unwrap();
        machine_api
            .patch_status(
                &format!("m-{i}"),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"currentStatus": {"phase": "Running"}}})),
            )
            .await
            .unwrap();
        renew(&c, &node, 0).await;
    }

    let prober = env.watchdog("prober", PROBER_CONFIG).await;
    // The leader Lease is upstream's, in --leader-election-namespace.
    let lease = Api::<Lease>::namespaced(c.clone(), "garden")
        .get("dwd-prober-leader-election")
        .await
        .expect("the prober holds its leader lease");
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some());
    assert!(
        prober.metrics().await.contains("dwd_prober_probers 0"),
        "no Cluster, no prober"
    );

    // A Cluster whose shoot has a worker and was created: a prober starts
    // and finds the leases fresh.
    let cluster = ApiResource::erase::<worker::Cluster>(&());
    let clusters: Api<DynamicObject> = Api::all_with(c.clone(), &cluster);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "extensions.gardener.cloud/v1alpha1", "kind": "Cluster",
        "metadata": {"name": NS},
        "spec": {"cloudProfile": {}, "seed": {}, "shoot": {
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
            "metadata": {"name": "a", "namespace": "garden-p"},
            "spec": {"provider": {"type": "local", "workers": [{"name": "pool-a"}]}},
            "status": {"technicalID": NS,
                       "lastOperation": {"type": "Create", "state": "Succeeded", "progress": 100}},
        }},
    }))
    .unwrap();
    clusters.create(&PostParams::default(), &obj).await.unwrap();
    let healthy = format!("dwd_prober_probes_total{{namespace=\"{NS}\",result=\"healthy\"}}");
    wait_for("a healthy probe", &prober.log, async || {
        prober.metrics().await.contains(&healthy)
    })
    .await;
    assert_eq!(mcm(&c).await.0, 2, "fresh leases leave MCM alone");

    // Three of four leases stop being renewed: MCM goes to 0 with the
    // meltdown annotations and its replicas remembered.
    for i in 0..3 {
        renew(&c, &format!("node-{i}"), 60).await;
    }
    wait_for("MCM scaled down", &prober.log, async || {
        mcm(&c).await.0 == 0
    })
    .await;
    let (_, annotations) = mcm(&c).await;
    assert_eq!(
        annotations
            .get("dependency-watchdog.gardener.cloud/replicas")
            .map(String::as_str),
        Some("2")
    );
    assert!(
        annotations.contains_key("dependency-watchdog.gardener.cloud/meltdown-protection-active")
    );
    let text = prober.metrics().await;
    assert!(
        text.contains(&format!(
            "dwd_prober_node_leases{{namespace=\"{NS}\",state=\"expired\"}} 3"
        )),
        "{text}"
    );

    // The leases come back: MCM returns to 2, the meltdown marker goes.
    for i in 0..3 {
        renew(&c, &format!("node-{i}"), 0).await;
    }
    // The marker goes right after the scale update.
    wait_for(
        "MCM scaled up, the meltdown marker gone",
        &prober.log,
        async || {
            let (replicas, annotations) = mcm(&c).await;
            replicas == 2
                && !annotations
                    .contains_key("dependency-watchdog.gardener.cloud/meltdown-protection-active")
        },
    )
    .await;
    // Nothing here makes the Deployment ready, so the scale-up task ends
    // after its short readiness wait (spec §1.7), and is counted then.
    let scaled = |op: &str| {
        format!(
            "dwd_prober_scale_operations_total{{namespace=\"{NS}\",resource=\"{MCM}\",operation=\"{op}\",result=\"scaled\"}} 1"
        )
    };
    wait_for("the scale-up counted", &prober.log, async || {
        prober.metrics().await.contains(&scaled("scale_up"))
    })
    .await;
    assert!(prober.metrics().await.contains(&scaled("scale_down")));
}

const WEEDER_CONFIG: &str = "watchDuration: 1m
servicesAndDependantSelectors:
  etcd-main-client:
    podSelectors:
    - matchLabels: {role: apiserver}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_weeder_process_deletes_crash_looping_dependants_once_their_service_is_ready() {
    let env = start_server().await;
    let c = env.client.clone();
    for ns in ["garden", NS] {
        namespace(&c, ns).await;
    }
    let pods: Api<Pod> = Api::namespaced(c.clone(), NS);
    for name in ["apiserver-crashing", "apiserver-running"] {
        create(
            &in_ns::<Pod>(&c),
            json!({"metadata": {"name": name, "labels": {"role": "apiserver"}},
                   "spec": {"containers": [{"name": "c", "image": "trellis"}]}}),
        )
        .await;
    }
    let waiting = json!({"waiting": {"reason": "CrashLoopBackOff"}});
    let running = json!({"running": {"startedAt": Utc::now()}});
    for (name, state) in [
        ("apiserver-crashing", waiting),
        ("apiserver-running", running),
    ] {
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"containerStatuses": [{
                "name": "c", "image": "trellis", "imageID": "", "ready": false,
                "restartCount": 3, "state": state}]}})),
        )
        .await
        .unwrap();
    }
    let weeder = env.watchdog("weeder", WEEDER_CONFIG).await;
    assert!(
        Api::<Lease>::namespaced(c.clone(), "garden")
            .get_opt("dwd-weeder-leader-election")
            .await
            .unwrap()
            .is_some()
    );
    // etcd-main's client Service turns ready.
    create(
        &in_ns::<EndpointSlice>(&c),
        json!({"metadata": {"name": "etcd-main-client-x1",
                            "labels": {"kubernetes.io/service-name": "etcd-main-client"}},
               "addressType": "IPv4",
               "endpoints": [{"addresses": ["127.1.0.1"], "conditions": {"ready": true}}]}),
    )
    .await;
    wait_for("the crash-looping pod deleted", &weeder.log, async || {
        pods.get_opt("apiserver-crashing")
            .await
            .unwrap()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    let running = pods.get("apiserver-running").await.unwrap();
    assert!(
        running.metadata.deletion_timestamp.is_none(),
        "a running pod is left alone"
    );
    let text = weeder.metrics().await;
    assert!(
        text.contains(&format!(
            "dwd_weeder_pods_deleted_total{{namespace=\"{NS}\",service=\"etcd-main-client\"}} 1"
        )),
        "{text}"
    );
}
