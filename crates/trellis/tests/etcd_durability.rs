//! Durability of `trellis server --etcd-servers` (the file store's crash
//! test, `server_crash.rs`, run on etcd): two server processes on one
//! 3-member etcd take a concurrent write load (creates and optimistic
//! updates of ConfigMaps, half of the clients on each server); in every
//! round one server and one etcd member are SIGKILLed while the load goes
//! on through the other server, then both are restarted. After every round
//! the test checks through both servers that every acknowledged write
//! survived (or was superseded only by a write whose answer never came),
//! that nothing unknown appeared and that resource versions are consistent.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// How many times the server is killed during the load.
const KILLS: usize = 6;
/// Concurrent client tasks writing during each round.
const WORKERS: usize = 8;
/// Load runs for a random time in this range (ms) before the kill.
const LOAD_MS: std::ops::Range<u64> = 100..600;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const READY_TIMEOUT: Duration = Duration::from_secs(20);
const NS: &str = "default";
const PREFIX: &str = "crash-";

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A running server process and a client for it.
struct Server {
    child: tokio::process::Child,
    base: String,
    client: HttpClient,
    log: PathBuf,
}

fn log_tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding an ephemeral port");
    l.local_addr().expect("local address").port()
}

async fn send(
    client: &HttpClient,
    base: &str,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
) -> Result<(u16, Bytes), String> {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| e.to_string())?;
    let fut = async {
        let resp = client.request(req).await.map_err(|e| format!("{e:?}"))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{e:?}"))?;
        Ok((status, body.to_bytes()))
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "{method} {path}: no answer within {REQUEST_TIMEOUT:?}"
        )),
    }
}

/// Load goes on through the surviving server this long after the kills.
const LOAD_AFTER_KILL: Duration = Duration::from_millis(700);

/// Starts `trellis server` on `etcd` (its data directory holds only its
/// PKI) and waits until `/readyz` answers 200.
async fn start_server(etcd: &str, data_dir: &Path, log_dir: &Path, n: usize) -> Server {
    for attempt in 0..5 {
        let port = free_port();
        let log = log_dir.join(format!("server-{n}-{attempt}.log"));
        let log_file = std::fs::File::create(&log).expect("creating the server log");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_trellis"))
            .arg("server")
            // This test is about durability, not TLS: plain HTTP keeps its
            // client simple.
            .arg("--insecure-http")
            .args(["--etcd-servers", etcd])
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env("TRELLIS_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true)
            .spawn()
            .expect("spawning trellis server");
        let base = format!("http://127.0.0.1:{port}");
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client: HttpClient = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(2 * WORKERS)
            .build(connector);
        let mut srv = Server {
            child,
            base,
            client,
            log,
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = srv.child.try_wait().expect("polling the server process") {
                let tail = log_tail(&srv.log);
                if tail.contains("listening on") {
                    // Somebody took the port between our probe and the bind.
                    break;
                }
                panic!("server {n} exited before becoming ready ({status}); log:\n{tail}");
            }
            if let Ok((200, _)) = send(&srv.client, &srv.base, "GET", "/readyz", None).await {
                return srv;
            }
            assert!(
                Instant::now() < deadline,
                "server {n} not ready within {READY_TIMEOUT:?}; log:\n{}",
                log_tail(&srv.log)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    panic!("could not start server {n}: the port was taken five times");
}

/// The padding length of a value: varies the record sizes in the log.
fn pad_len(tag: &str) -> usize {
    let mut h = DefaultHasher::new();
    tag.hash(&mut h);
    (h.finish() % 1500) as usize
}

fn configmap(name: &str, rv: Option<u64>, tag: &str) -> Vec<u8> {
    let mut meta = json!({ "name": name });
    if let Some(rv) = rv {
        meta["resourceVersion"] = json!(rv.to_string());
    }
    serde_json::to_vec(&json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": { "v": tag, "pad": "p".repeat(pad_len(tag)) },
    }))
    .expect("serialising a ConfigMap")
}

fn rv_of(v: &Value) -> Option<u64> {
    v["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

/// Reads an object's (tag, resourceVersion), checking the padding.
fn observed(obj: &Value) -> Result<(String, u64), String> {
    let name = obj["metadata"]["name"].as_str().unwrap_or("?");
    let tag = obj["data"]["v"]
        .as_str()
        .ok_or_else(|| format!("{name}: no data.v in {obj}"))?;
    let pad = obj["data"]["pad"].as_str().map(str::len);
    if pad != Some(pad_len(tag)) {
        return Err(format!(
            "{name}: data.pad has length {pad:?}, want {} for tag {tag}",
            pad_len(tag)
        ));
    }
    let rv = rv_of(obj).ok_or_else(|| format!("{name}: no integer resourceVersion in {obj}"))?;
    Ok((tag.to_string(), rv))
}

/// What the test knows about one ConfigMap.
#[derive(Default)]
struct Obj {
    /// The last acknowledged (or, after a restart, observed) tag and version;
    /// `None`: never acknowledged, so it may exist only with an in-flight tag.
    acked: Option<(String, u64)>,
    /// Tags sent since then whose answer never came (the kill hit them).
    in_flight: Vec<String>,
}

/// One client task's state; every name belongs to exactly one worker, so
/// its updates conflict with nobody.
struct Worker {
    id: usize,
    objs: BTreeMap<String, Obj>,
    /// Names that exist (acknowledged or observed): candidates for updates.
    live: Vec<String>,
    next_name: u64,
    next_tag: u64,
    rng: StdRng,
    /// The version of this worker's last acknowledged write: its writes are
    /// sequential, so every acknowledgement must be above the previous one.
    last_ack_rv: u64,
}

#[derive(Default, Clone, Copy)]
struct Stats {
    creates: usize,
    updates: usize,
}

struct Load {
    /// Per server: its client and URL; worker `i` writes through `i % 2`.
    servers: Vec<(HttpClient, String)>,
    /// Set at the kills: from then on a write may fail without an answer
    /// (its server died, or etcd lost the member it talked to).
    killed: AtomicBool,
    stop: AtomicBool,
    round: usize,
    /// The list revision verified before this round: every write acknowledged
    /// in this round must get a greater version.
    floor: u64,
}

async fn run_worker(mut w: Worker, load: Arc<Load>) -> (Worker, Result<Stats, String>) {
    let mut stats = Stats::default();
    let res = loop {
        if load.stop.load(Ordering::SeqCst) {
            break Ok(stats);
        }
        let create = w.live.is_empty() || w.rng.random_bool(0.5);
        let tag = format!("r{}-w{}-t{}", load.round, w.id, w.next_tag);
        w.next_tag += 1;
        let (name, method, path, body) = if create {
            let name = format!("{PREFIX}w{}-{:06}", w.id, w.next_name);
            w.next_name += 1;
            let body = configmap(&name, None, &tag);
            (
                name,
                "POST",
                format!("/api/v1/namespaces/{NS}/configmaps"),
                body,
            )
        } else {
            let name = w.live[w.rng.random_range(0..w.live.len())].clone();
            let rv = w.objs[&name].acked.as_ref().expect("a live object").1;
            let body = configmap(&name, Some(rv), &tag);
            let path = format!("/api/v1/namespaces/{NS}/configmaps/{name}");
            (name, "PUT", path, body)
        };
        w.objs
            .entry(name.clone())
            .or_default()
            .in_flight
            .push(tag.clone());
        let (client, base) = &load.servers[w.id % load.servers.len()];
        let answer = send(client, base, method, &path, Some(body)).await;
        // After the kills an error or a server error leaves the write in
        // flight (its outcome unknown); this worker then rests for the round.
        let unknown = match &answer {
            Err(_) => true,
            Ok((code, _)) => *code >= 500,
        };
        if unknown && load.killed.load(Ordering::SeqCst) {
            w.live.retain(|n| *n != name);
            break Ok(stats);
        }
        match answer {
            Err(e) => {
                break Err(format!(
                    "{method} {name}: transport error before the kill: {e}"
                ));
            }
            Ok((code, b)) => {
                let want = if create { 201 } else { 200 };
                if code != want {
                    break Err(format!(
                        "{method} {name}: status {code} (want {want}): {}",
                        String::from_utf8_lossy(&b)
                    ));
                }
                let v: Value = match serde_json::from_slice(&b) {
                    Ok(v) => v,
                    Err(e) => break Err(format!("{method} {name}: bad JSON answer: {e}")),
                };
                let (got, rv) = match observed(&v) {
                    Ok(x) => x,
                    Err(e) => break Err(format!("{method} answer: {e}")),
                };
                if got != tag || v["metadata"]["name"] != json!(name) {
                    break Err(format!(
                        "{method} {name}: answer has tag {got}, want {tag}: {v}"
                    ));
                }
                if rv <= load.floor || rv <= w.last_ack_rv {
                    break Err(format!(
                        "{method} {name}: acknowledged with resourceVersion {rv}, not above the \
                         restart's list revision {} and this worker's previous ack {}",
                        load.floor, w.last_ack_rv
                    ));
                }
                w.last_ack_rv = rv;
                let o = w.objs.get_mut(&name).expect("recorded above");
                o.in_flight.retain(|t| *t != tag);
                if create {
                    w.live.push(name);
                    stats.creates += 1;
                } else {
                    stats.updates += 1;
                }
                o.acked = Some((tag, rv));
            }
        }
    };
    (w, res)
}

struct Verified {
    list_rv: u64,
    objects: usize,
    /// In-flight writes found applied / not applied after the restart.
    applied: usize,
    dropped: usize,
}

/// Checks the restarted server against what was acknowledged, then adopts
/// the observed state as the new baseline.
async fn verify(
    srv: &Server,
    workers: &mut [Worker],
    max_acked_rv: u64,
    floor: u64,
    rng: &mut StdRng,
) -> Result<Verified, String> {
    let (code, b) = send(
        &srv.client,
        &srv.base,
        "GET",
        &format!("/api/v1/namespaces/{NS}/configmaps"),
        None,
    )
    .await?;
    if code != 200 {
        return Err(format!(
            "list: status {code}: {}",
            String::from_utf8_lossy(&b)
        ));
    }
    let list: Value = serde_json::from_slice(&b).map_err(|e| format!("list: bad JSON: {e}"))?;
    let list_rv =
        rv_of(&list).ok_or_else(|| format!("list: no resourceVersion in {}", list["metadata"]))?;
    let items = list["items"].as_array().ok_or("list: no items")?;
    let mut seen: HashMap<String, (String, u64)> = HashMap::new();
    let mut rvs = HashSet::new();
    for it in items {
        let name = it["metadata"]["name"]
            .as_str()
            .ok_or("list item without a name")?;
        let (tag, rv) = observed(it)?;
        if rv > list_rv {
            return Err(format!(
                "{name}: resourceVersion {rv} above the list's {list_rv}"
            ));
        }
        if !rvs.insert(rv) {
            return Err(format!(
                "{name}: resourceVersion {rv} also held by another object"
            ));
        }
        if name.starts_with(PREFIX) {
            seen.insert(name.to_string(), (tag, rv));
        }
    }
    let mut applied = 0;
    let mut dropped = 0;
    let mut known = 0;
    let mut errors: Vec<String> = Vec::new();
    for w in workers.iter() {
        for (name, o) in &w.objs {
            let got = seen.get(name);
            match (&o.acked, got) {
                (Some((tag, rv)), None) => {
                    errors.push(format!(
                        "{name}: acknowledged with tag {tag} at resourceVersion {rv}, but missing"
                    ));
                }
                (Some((tag, rv)), Some((gtag, grv))) if gtag == tag => {
                    if grv != rv {
                        errors.push(format!(
                            "{name}: tag {tag} acknowledged at resourceVersion {rv}, read at {grv}"
                        ));
                    }
                }
                (acked, Some((gtag, grv))) => {
                    let low = acked.as_ref().map_or(floor, |a| a.1.max(floor));
                    if !o.in_flight.contains(gtag) {
                        errors.push(format!(
                            "{name}: holds tag {gtag} (resourceVersion {grv}), which is neither the last \
                             acknowledged {acked:?} nor in flight {:?}",
                            o.in_flight
                        ));
                    } else if *grv <= low {
                        errors.push(format!(
                            "{name}: in-flight tag {gtag} at resourceVersion {grv}, not above {low} \
                             (acknowledged {acked:?}, previous list revision {floor})"
                        ));
                    } else {
                        applied += 1;
                    }
                }
                (None, None) => {}
            }
            if got.is_some() {
                known += 1;
            }
            dropped += o
                .in_flight
                .iter()
                .filter(|t| got.is_none_or(|g| g.0 != **t))
                .count();
        }
    }
    if known != seen.len() {
        let unknown: Vec<&String> = seen
            .keys()
            .filter(|n| !workers.iter().any(|w| w.objs.contains_key(*n)))
            .take(5)
            .collect();
        errors.push(format!("objects nobody wrote: {unknown:?}"));
    }
    if list_rv < max_acked_rv || list_rv < floor {
        errors.push(format!(
            "list resourceVersion {list_rv} is below the greatest acknowledged {max_acked_rv} or the \
             previous restart's list revision {floor}"
        ));
    }
    if !errors.is_empty() {
        let n = errors.len();
        errors.truncate(20);
        return Err(format!(
            "{n} inconsistencies, the first ones:\n{}",
            errors.join("\n")
        ));
    }
    // Single GETs agree with the list.
    let names: Vec<&String> = seen.keys().collect();
    for _ in 0..names.len().min(16) {
        let name = names[rng.random_range(0..names.len())];
        let (code, b) = send(
            &srv.client,
            &srv.base,
            "GET",
            &format!("/api/v1/namespaces/{NS}/configmaps/{name}"),
            None,
        )
        .await?;
        if code != 200 {
            return Err(format!("GET {name}: status {code}"));
        }
        let v: Value = serde_json::from_slice(&b).map_err(|e| format!("GET {name}: {e}"))?;
        if observed(&v)? != seen[name] {
            return Err(format!(
                "GET {name} gives {:?}, the list {:?}",
                observed(&v)?,
                seen[name]
            ));
        }
    }
    // Adopt the observed state.
    for w in workers.iter_mut() {
        for (name, o) in w.objs.iter_mut() {
            o.acked = seen.get(name).cloned();
            o.in_flight.clear();
        }
        w.live = w
            .objs
            .iter()
            .filter(|(_, o)| o.acked.is_some())
            .map(|(n, _)| n.clone())
            .collect();
        // Sequential writes of this worker continue above the list revision.
        w.last_ack_rv = list_rv;
    }
    Ok(Verified {
        list_rv,
        objects: seen.len(),
        applied,
        dropped,
    })
}

async fn kill(srv: &mut Server) {
    srv.child.start_kill().expect("sending SIGKILL");
    srv.child.wait().await.expect("reaping the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_server_and_member_kills() {
    let started = Instant::now();
    let seed: u64 = rand::rng().random();
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let data = tempfile::tempdir().expect("a data dir");
    let logs = tempfile::tempdir().expect("a log dir");
    let mut workers: Vec<Worker> = (0..WORKERS)
        .map(|id| Worker {
            id,
            objs: BTreeMap::new(),
            live: Vec::new(),
            next_name: 0,
            next_tag: 0,
            rng: StdRng::seed_from_u64(seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            last_ack_rv: 0,
        })
        .collect();

    let Some(mut etcd) = etcdv3::testing::cluster_or_skip(3).await else {
        return;
    };
    let endpoints = etcd.endpoints();
    let dirs = [data.path().join("a"), data.path().join("b")];
    let mut srvs = [
        start_server(&endpoints, &dirs[0], logs.path(), 0).await,
        start_server(&endpoints, &dirs[1], logs.path(), 1).await,
    ];
    let first = verify(&srvs[0], &mut workers, 0, 0, &mut rng)
        .await
        .expect("verifying the fresh servers");
    let mut floor = first.list_rv;
    let mut max_acked_rv = 0u64;
    let (mut total_acks, mut total_applied, mut total_dropped) = (0usize, 0usize, 0usize);

    for round in 1..=KILLS {
        let load = Arc::new(Load {
            servers: srvs
                .iter()
                .map(|s| (s.client.clone(), s.base.clone()))
                .collect(),
            killed: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            round,
            floor,
        });
        let tasks: Vec<_> = workers
            .drain(..)
            .map(|w| tokio::spawn(run_worker(w, load.clone())))
            .collect();
        let load_ms = rng.random_range(LOAD_MS);
        tokio::time::sleep(Duration::from_millis(load_ms)).await;
        // Flag first, so a worker's transport error before it is a failure.
        load.killed.store(true, Ordering::SeqCst);
        let victim = round % 2;
        let member = round % 3;
        kill(&mut srvs[victim]).await;
        etcd.kill(member);
        tokio::time::sleep(LOAD_AFTER_KILL).await;
        load.stop.store(true, Ordering::SeqCst);
        let (mut creates, mut updates) = (0, 0);
        let mut failures = Vec::new();
        for t in tasks {
            let (w, res) = t.await.expect("a worker task");
            match res {
                Ok(s) => {
                    creates += s.creates;
                    updates += s.updates;
                }
                Err(e) => failures.push(format!("worker {}: {e}", w.id)),
            }
            max_acked_rv = max_acked_rv.max(w.last_ack_rv);
            workers.push(w);
        }
        assert!(
            failures.is_empty(),
            "round {round}: the load failed:\n{}\nserver logs:\n{}\n{}",
            failures.join("\n"),
            log_tail(&srvs[0].log),
            log_tail(&srvs[1].log)
        );
        total_acks += creates + updates;

        etcd.restart(member).expect("restarting the etcd member");
        etcd.wait_ready(Duration::from_secs(30))
            .await
            .expect("etcd ready again");
        srvs[victim] =
            start_server(&endpoints, &dirs[victim], logs.path(), round * 2 + victim).await;
        // Both servers must agree with what was acknowledged; the second
        // check starts from the state the first adopted.
        let mut verified = None;
        for (i, srv) in srvs.iter().enumerate() {
            match verify(srv, &mut workers, max_acked_rv, floor, &mut rng).await {
                Ok(v) => {
                    if verified.is_none() {
                        verified = Some(v);
                    }
                }
                Err(e) => panic!(
                    "round {round} (kills after {load_ms} ms of load, seed {seed}): server {i} after \
                     the restart: {e}\nits log:\n{}",
                    log_tail(&srv.log)
                ),
            }
        }
        let v = verified.expect("verified by both servers");
        total_applied += v.applied;
        total_dropped += v.dropped;
        println!(
            "round {round:2}: killed after {load_ms:3} ms; acked {creates} creates + {updates} updates \
             (greatest rv {max_acked_rv}); after restart list rv {}, {} objects, in-flight applied {} / lost {}",
            v.list_rv, v.objects, v.applied, v.dropped
        );
        floor = v.list_rv;
    }

    // A fresh create lands above every version seen before.
    let srv = &mut srvs[0];
    let (code, b) = send(
        &srv.client,
        &srv.base,
        "POST",
        &format!("/api/v1/namespaces/{NS}/configmaps"),
        Some(configmap("final-create", None, "final")),
    )
    .await
    .expect("the final create");
    assert_eq!(code, 201, "final create: {}", String::from_utf8_lossy(&b));
    let v: Value = serde_json::from_slice(&b).expect("final create JSON");
    let rv = rv_of(&v).expect("final create resourceVersion");
    assert!(
        rv > floor && rv > max_acked_rv,
        "final create got resourceVersion {rv}, not above the list revision {floor} and every acknowledged {max_acked_rv}"
    );
    kill(srv).await;
    println!(
        "{KILLS} rounds of a server and an etcd member killed, {total_acks} acknowledged writes, in-flight writes applied {total_applied} / lost {total_dropped}, \
         {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
