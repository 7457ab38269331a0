//! The kubelet against the embedded API server (with TLS), with real
//! processes: pods bound to its node run with their own loopback IPs and
//! become Ready through HTTP probes; a crashing container goes to
//! CrashLoopBackOff and its previous log is served by the kubelet's HTTPS
//! endpoint; exec runs beside a container over the WebSocket channel
//! protocol; an unknown image leaves the pod Pending with an event naming
//! it; deleting a pod stops its processes and removes it; pods get their
//! ServiceAccount's token (once the account exists) unless they opt out.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;
use testkit::eventually;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Kubelet {
    _cluster: apiserver::cluster::Cluster,
    dir: tempfile::TempDir,
    client: kube::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pki: apiserver::Pki,
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        kubelet::runtime::kill_all(self.dir.path());
    }
}

async fn start() -> Kubelet {
    start_with(false).await
}

/// With `tokens`, the server authenticates ServiceAccount tokens and the
/// kubelet hands them to pods.
async fn start_with(tokens: bool) -> Kubelet {
    let dir = tempfile::tempdir().unwrap();
    let pki = apiserver::Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
    let mut config = apiserver::Config::default();
    if tokens {
        config.auth = Some(apiserver::AuthConfig::new(
            pki.service_account_key_pem.clone(),
        ));
    }
    let cluster = apiserver::cluster::Cluster::builder()
        .config(config)
        .tls(pki.clone())
        .start()
        .await
        .unwrap();
    let client = cluster.client();
    let mut cfg = kubelet::Config::new(
        dir.path().to_path_buf(),
        "box".into(),
        vec![env!("CARGO_BIN_EXE_trellis-kubelet-shim").into()],
        "/nonexistent/trellis".into(),
    );
    cfg.listen = "127.0.0.1:0".parse().unwrap();
    cfg.client_ca_pem = Some(pki.ca_cert_pem.clone());
    cfg.resync = Duration::from_secs(1);
    if tokens {
        cfg.api_server = Some(kubelet::serviceaccount::ApiServer {
            host: cluster.addr().ip().to_string(),
            port: cluster.addr().port(),
            ca_pem: pki.ca_cert_pem.clone(),
        });
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let c = client.clone();
    tokio::spawn(async move {
        let _ = kubelet::run(c, cfg, async move {
            let _ = rx.await;
        })
        .await;
    });
    Kubelet {
        _cluster: cluster,
        dir,
        client,
        stop: Some(tx),
        pki,
    }
}

fn pod(name: &str, image: &str, script: &str, extra: serde_json::Value) -> Pod {
    let mut c = json!({
        "name": "main", "image": image, "command": ["sh", "-c", script],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
    });
    if let Some(o) = extra.as_object() {
        for (k, v) in o {
            c[k] = v.clone();
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "box", "terminationGracePeriodSeconds": 2, "containers": [c]},
    }))
    .unwrap()
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// One HTTPS request to the kubelet with the admin certificate; the raw
/// response (head and body) up to `limit` bytes or the end.
async fn kubelet_request(
    k: &Kubelet,
    request: &str,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let node = Api::<Node>::all(k.client.clone()).get("box").await.unwrap();
    let port = node
        .status
        .unwrap()
        .daemon_endpoints
        .unwrap()
        .kubelet_endpoint
        .unwrap()
        .port;
    let tls = kubelet::tls::client_config(&k.pki.admin_cert_pem, &k.pki.admin_key_pem).unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port as u16))
        .await
        .unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let mut s = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    s
}

async fn get(k: &Kubelet, path: &str) -> String {
    let mut s = kubelet_request(k, &format!("GET {path} HTTP/1.1\r\nHost: box\r\n\r\n")).await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn pods_run_with_their_own_ips_and_become_ready() {
    let k = start().await;
    let pods: Api<Pod> = Api::namespaced(k.client.clone(), "default");
    let probe =
        json!({"readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}});
    for name in ["web-a", "web-b"] {
        let p = pod(
            name,
            "trellis.dev/exec",
            "exec python3 -m http.server --bind $POD_IP 8080",
            probe.clone(),
        );
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let mut ips = Vec::new();
    for name in ["web-a", "web-b"] {
        let p = eventually("a Ready pod", 60, async || {
            pods.get(name).await.ok().filter(ready)
        })
        .await;
        let ip = p.status.unwrap().pod_ip.unwrap();
        assert!(ip.starts_with("127.1."), "{ip}");
        let body = reqwest_like(&ip, 8080).await;
        assert!(body.contains("200"), "{body}");
        ips.push(ip);
    }
    assert_ne!(ips[0], ips[1], "distinct pod IPs on the same port");
    pods.delete("web-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the pod to go", 30, async || {
        pods.get_opt("web-a").await.unwrap().is_none().then_some(())
    })
    .await;
    let ip = ips[0].clone();
    eventually("its server to stop", 10, async || {
        tokio::net::TcpStream::connect((ip.as_str(), 8080))
            .await
            .is_err()
            .then_some(())
    })
    .await;
}

async fn reqwest_like(ip: &str, port: u16) -> String {
    let mut s = tokio::net::TcpStream::connect((ip, port)).await.unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").await.unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[tokio::test]
async fn a_crashing_container_backs_off_and_its_previous_log_is_served() {
    let k = start().await;
    let pods: Api<Pod> = Api::namespaced(k.client.clone(), "default");
    let p = pod(
        "crash",
        "trellis.dev/exec:v1",
        "echo attempt at $POD_IP; exit 1",
        json!({}),
    );
    pods.create(&PostParams::default(), &p).await.unwrap();
    let p = eventually("CrashLoopBackOff", 60, async || {
        let p = pods.get("crash").await.ok()?;
        let st = p
            .status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .first()?
            .clone();
        let waiting = st.state.as_ref()?.waiting.as_ref()?.reason.clone()?;
        (waiting == "CrashLoopBackOff" && st.restart_count >= 1).then_some(p)
    })
    .await;
    let st = &p
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0];
    let last = st.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(last.exit_code, 1);
    let resp = get(&k, "/containerLogs/default/crash/main").await;
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("attempt at 127.1."), "{resp}");
    let resp = get(&k, "/containerLogs/default/crash/nope").await;
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp}");
    let events: Api<Event> = Api::namespaced(k.client.clone(), "default");
    eventually("a BackOff event", 20, async || {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("BackOff"))
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn exec_runs_beside_a_container_over_websocket() {
    let k = start().await;
    let pods: Api<Pod> = Api::namespaced(k.client.clone(), "default");
    let p = pod(
        "shell",
        "trellis.dev/exec",
        "echo $POD_IP > /tmp/ip; exec sleep 1000",
        json!({}),
    );
    pods.create(&PostParams::default(), &p).await.unwrap();
    eventually("a running pod", 60, async || {
        pods.get("shell").await.ok().filter(ready)
    })
    .await;
    let key = "dGhlIHNhbXBsZSBub25jZQ==";
    let req = format!(
        "GET /exec/default/shell/main?command=sh&command=-c&command=cat%20/tmp/ip%3B%20echo%20oops%20%3E%262%3B%20exit%203&stdout=1&stderr=1 HTTP/1.1\r\nHost: box\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n"
    );
    let mut s = kubelet_request(&k, &req).await;
    // The head, up to the blank line.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        s.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.contains(&kubelet::ws::accept_key(key)));
    let (mut stdout, mut stderr, mut status) = (Vec::new(), Vec::new(), None);
    let mut reader = kubelet::ws::Reader::default();
    while let Some(m) = reader.next(&mut s).await.unwrap() {
        match (m.opcode, m.payload.split_first()) {
            (kubelet::ws::OP_CLOSE, _) => break,
            (_, Some((1, d))) => stdout.extend_from_slice(d),
            (_, Some((2, d))) => stderr.extend_from_slice(d),
            (_, Some((3, d))) => {
                status = Some(serde_json::from_slice::<serde_json::Value>(d).unwrap())
            }
            _ => {}
        }
    }
    assert!(
        String::from_utf8_lossy(&stdout).starts_with("127.1."),
        "the container's /tmp"
    );
    assert_eq!(String::from_utf8_lossy(&stderr), "oops\n");
    let status = status.expect("a status on channel 3");
    assert_eq!(status["reason"], "NonZeroExitCode");
    assert_eq!(status["details"]["causes"][0]["message"], "3");
}

#[tokio::test]
async fn an_unknown_image_stays_pending_with_an_event_naming_it() {
    let k = start().await;
    let pods: Api<Pod> = Api::namespaced(k.client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &pod("nginx", "nginx:1.27", "true", json!({})),
    )
    .await
    .unwrap();
    eventually("ErrImagePull", 30, async || {
        let p = pods.get("nginx").await.ok()?;
        let st = p.status.as_ref()?;
        let w = st
            .container_statuses
            .as_ref()?
            .first()?
            .state
            .as_ref()?
            .waiting
            .clone()?;
        (st.phase.as_deref() == Some("Pending") && w.reason.as_deref() == Some("ErrImagePull"))
            .then_some(())
    })
    .await;
    let events: Api<Event> = Api::namespaced(k.client.clone(), "default");
    eventually("an event naming the image", 20, async || {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("\"nginx:1.27\""))
            })
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn unbound_pods_that_fit_are_scheduled_here_and_others_left_alone() {
    let k = start().await;
    let pods: Api<Pod> = Api::namespaced(k.client.clone(), "default");
    let unbound = |name: &str, extra: serde_json::Value| {
        let mut p = pod(name, "trellis.dev/exec", "exec sleep 1000", json!({}));
        let spec = p.spec.as_mut().unwrap();
        spec.node_name = None;
        let mut v = serde_json::to_value(&p).unwrap();
        for (key, val) in extra.as_object().unwrap() {
            v["spec"][key] = val.clone();
        }
        serde_json::from_value::<Pod>(v).unwrap()
    };
    pods.create(
        &PostParams::default(),
        &unbound(
            "fits",
            json!({"nodeSelector": {"kubernetes.io/hostname": "box"}}),
        ),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &unbound("elsewhere", json!({"nodeSelector": {"pool": "workers"}})),
    )
    .await
    .unwrap();
    let mut other = pod(
        "simulated",
        "trellis.dev/exec",
        "exec sleep 1000",
        json!({}),
    );
    other.spec.as_mut().unwrap().node_name = Some("sim-1".into());
    pods.create(&PostParams::default(), &other).await.unwrap();
    let p = eventually("the fitting pod to run here", 60, async || {
        pods.get("fits").await.ok().filter(ready)
    })
    .await;
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("box"));
    let events: Api<Event> = Api::namespaced(k.client.clone(), "default");
    eventually("FailedScheduling for the other", 20, async || {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("FailedScheduling")
                    && e.involved_object.name.as_deref() == Some("elsewhere")
            })
            .then_some(())
    })
    .await;
    let p = pods.get("elsewhere").await.unwrap();
    assert_eq!(p.spec.unwrap().node_name, None);
    let p = pods.get("simulated").await.unwrap();
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("sim-1"));
    assert!(
        p.status.and_then(|s| s.pod_ip).is_none(),
        "a simulated node's pod is not run here"
    );
}

/// The log of a pod's `main` container once it contains `want`.
async fn log_with(k: &Kubelet, pod: &str, want: &str) -> String {
    eventually(
        &format!("{pod}'s log to contain {want:?}"),
        60,
        async || {
            let resp = get(k, &format!("/containerLogs/default/{pod}/main")).await;
            resp.contains(want).then_some(resp)
        },
    )
    .await
}

#[tokio::test]
async fn pods_get_service_account_tokens_once_the_account_exists() {
    let k = start_with(true).await;
    let pods: Api<Pod> = Api::namespaced(k.client.clone(), "default");
    let sa = "/var/run/secrets/kubernetes.io/serviceaccount";
    let script = format!(
        "cat {sa}/namespace; echo; test -s {sa}/token && echo token-ok; \\
         curl -sS --cacert {sa}/ca.crt -H \"Authorization: Bearer $(cat {sa}/token)\" \\
           -H 'Content-Type: application/json' -X POST \\
           -d '{{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"SelfSubjectReview\"}}' \\
           https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/apis/authentication.k8s.io/v1/selfsubjectreviews; \\
         echo; echo done; sleep 600"
    );
    // An account that does not exist yet (the API server makes each
    // namespace's `default` itself): the mount fails, the pod waits.
    let mut p = pod("sa", "trellis.dev/exec", &script, json!({}));
    p.spec.as_mut().unwrap().service_account_name = Some("builder".into());
    pods.create(&PostParams::default(), &p).await.unwrap();
    let events: Api<Event> = Api::namespaced(k.client.clone(), "default");
    eventually("a FailedMount event naming the account", 30, async || {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("FailedMount")
                    && e.message
                        .as_deref()
                        .is_some_and(|m| m.contains("serviceaccounts \"builder\" not found"))
            })
            .then_some(())
    })
    .await;
    eventually("the pod Pending in ContainerCreating", 20, async || {
        let st = pods.get("sa").await.ok()?.status?;
        let cs = st.container_statuses?.first()?.state.clone()?.waiting?;
        (st.phase.as_deref() == Some("Pending")
            && cs.reason.as_deref() == Some("ContainerCreating"))
        .then_some(())
    })
    .await;
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(k.client.clone(), "default");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "builder"}})).unwrap(),
    )
    .await
    .unwrap();
    let log = log_with(&k, "sa", "done").await;
    assert!(log.contains("default\ntoken-ok"), "{log}");
    assert!(
        log.contains("\"username\":\"system:serviceaccount:default:builder\""),
        "the token authenticates as the pod's ServiceAccount: {log}"
    );
}

#[tokio::test]
async fn automount_false_gives_no_token_but_the_service_environment() {
    let k = start_with(true).await;
    let pods: Api<Pod> = Api::namespaced(k.client.clone(), "default");
    // Neither the pod's false nor the ServiceAccount's needs the account.
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(k.client.clone(), "default");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "quiet"}, "automountServiceAccountToken": false}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let script = "test -e /var/run/secrets/kubernetes.io/serviceaccount && echo mounted || echo no-mount; \\
                  echo api=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; sleep 600";
    let mut off = pod("off", "trellis.dev/exec", script, json!({}));
    off.spec.as_mut().unwrap().automount_service_account_token = Some(false);
    off.spec.as_mut().unwrap().service_account_name = Some("missing".into());
    let mut quiet = pod("quiet", "trellis.dev/exec", script, json!({}));
    quiet.spec.as_mut().unwrap().service_account_name = Some("quiet".into());
    for p in [off, quiet] {
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let api = format!(
        "api={}:{}",
        k._cluster.addr().ip(),
        k._cluster.addr().port()
    );
    for name in ["off", "quiet"] {
        let log = log_with(&k, name, "api=").await;
        assert!(log.contains("no-mount"), "{name}: {log}");
        assert!(log.contains(&api), "{name}: {log}");
    }
}
