//! One authenticated user sending huge requests must not stall everyone
//! else: against the real `trellis server` binary over TLS, small GETs keep
//! a bounded latency while two clients send 2.7 MB strategic-merge patches
//! and 1.1 MB updates back to back, the patches are refused before the
//! expensive work, and the memory they peaked at is given back.
//!
//! The figures it prints are recorded in BENCHMARKS.md.

mod common;

use std::time::{Duration, Instant};

use common::raw::{connector, exchange, tls_from};
use common::start;
use serde_json::json;

fn rss_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// A strategic-merge patch of about 2.7 MB for a ConfigMap: 55,000 keys.
fn big_patch() -> Vec<u8> {
    let data: serde_json::Map<String, serde_json::Value> = (0..55_000)
        .map(|i| (format!("key-{i:06}"), json!("v".repeat(36))))
        .collect();
    serde_json::to_vec(&json!({"data": data})).unwrap()
}

/// A ConfigMap of about 1.1 MB (1.3 MB stored, with its managed fields).
fn big_configmap(name: &str, round: usize) -> Vec<u8> {
    let data: serde_json::Map<String, serde_json::Value> = (0..16_000)
        .map(|i| {
            (
                format!("k{i:05}"),
                json!(format!("{round}-{}", "x".repeat(50))),
            )
        })
        .collect();
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    }))
    .unwrap()
}

const CM: &str = "/api/v1/namespaces/default/configmaps";

#[test]
fn small_requests_stay_fast_while_two_clients_send_huge_patches_and_updates() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let server = start(data, &[]);
    let pid = server.child.id();
    let port = server.port;
    let tls = connector(data);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let local = std::net::IpAddr::from([127, 0, 0, 1]);

    let patch = big_patch();
    assert!(patch.len() > 2_600_000, "patch is {} bytes", patch.len());

    rt.block_on(async {
        let mut c = tls_from(&tls, local, port).await.unwrap();
        let small = serde_json::to_vec(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "small"}, "data": {"a": "b"},
        }))
        .unwrap();
        let (code, _) = exchange(&mut c, "POST", CM, "application/json", &small)
            .await
            .unwrap();
        assert_eq!(code, 201);
        let (code, body) = exchange(
            &mut c,
            "POST",
            CM,
            "application/json",
            &big_configmap("big", 0),
        )
        .await
        .unwrap();
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    });

    // Small GETs on their own connection for `window`; their latencies.
    let small_gets = |window: Duration| {
        let tls = tls.clone();
        async move {
            let mut c = tls_from(&tls, local, port).await.unwrap();
            let mut lat = Vec::new();
            let end = Instant::now() + window;
            while Instant::now() < end {
                let t = Instant::now();
                let (code, _) = exchange(
                    &mut c,
                    "GET",
                    &format!("{CM}/small"),
                    "application/json",
                    b"",
                )
                .await
                .unwrap();
                assert_eq!(code, 200);
                lat.push(t.elapsed());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            lat.sort();
            lat
        }
    };

    let rss_before = rss_kb(pid, "VmRSS:");
    let quiet = rt.block_on(small_gets(Duration::from_secs(2)));

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (during, heavy_done) = rt.block_on(async {
        let patcher = {
            let (tls, patch, stop) = (tls.clone(), patch.clone(), stop.clone());
            tokio::spawn(async move {
                let mut c = tls_from(&tls, local, port).await.unwrap();
                let mut codes = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let (code, _) = exchange(
                        &mut c,
                        "PATCH",
                        &format!("{CM}/small"),
                        "application/strategic-merge-patch+json",
                        &patch,
                    )
                    .await
                    .unwrap();
                    codes.push(code);
                }
                codes
            })
        };
        let updater = {
            let (tls, stop) = (tls.clone(), stop.clone());
            tokio::spawn(async move {
                let mut c = tls_from(&tls, local, port).await.unwrap();
                let mut codes = Vec::new();
                let mut round = 1;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let (code, _) = exchange(
                        &mut c,
                        "PUT",
                        &format!("{CM}/big"),
                        "application/json",
                        &big_configmap("big", round),
                    )
                    .await
                    .unwrap();
                    codes.push(code);
                    round += 1;
                }
                codes
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let during = small_gets(Duration::from_secs(6)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (during, (patcher.await.unwrap(), updater.await.unwrap()))
    });
    let (patch_codes, update_codes) = heavy_done;
    let rss_peak = rss_kb(pid, "VmHWM:");
    std::thread::sleep(Duration::from_secs(1));
    let rss_after = rss_kb(pid, "VmRSS:");

    eprintln!(
        "FAIRNESS: small GET quiet p50 {:?} p99 {:?} max {:?} (n={}); during heavy p50 {:?} p99 {:?} \
         max {:?} (n={}); 2.7 MB SMP patches sent {} (codes {:?}), 1.1 MB updates {} (codes {:?}); \
         server RSS before {} MB, peak {} MB, after {} MB",
        percentile(&quiet, 0.5),
        percentile(&quiet, 0.99),
        quiet[quiet.len() - 1],
        quiet.len(),
        percentile(&during, 0.5),
        percentile(&during, 0.99),
        during[during.len() - 1],
        during.len(),
        patch_codes.len(),
        {
            let mut c = patch_codes.clone();
            c.dedup();
            c
        },
        update_codes.len(),
        {
            let mut c = update_codes.clone();
            c.dedup();
            c
        },
        rss_before / 1024,
        rss_peak / 1024,
        rss_after / 1024,
    );
    // The patch leaves an object over the 1.5 MiB limit: refused, and
    // refused before admission and managed fields are spent on it.
    assert!(
        !patch_codes.is_empty() && patch_codes.iter().all(|&c| c == 413),
        "{patch_codes:?}"
    );
    assert!(
        !update_codes.is_empty() && update_codes.iter().all(|&c| c == 200),
        "{update_codes:?}"
    );
    assert!(
        percentile(&during, 0.99) < Duration::from_millis(500),
        "small GETs reached p99 {:?} behind the heavy requests",
        percentile(&during, 0.99)
    );
    assert!(
        rss_after < rss_before + 150 * 1024,
        "the server kept {} MB after the heavy requests (was {} MB)",
        rss_after / 1024,
        rss_before / 1024
    );
}

#[test]
fn a_burst_of_huge_requests_is_answered_429_or_413_never_a_5xx() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let server = start(data, &[]);
    let port = server.port;
    let tls = connector(data);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let local = std::net::IpAddr::from([127, 0, 0, 1]);
    let patch = big_patch();
    let codes: Vec<u16> = rt.block_on(async {
        let mut c = tls_from(&tls, local, port).await.unwrap();
        let small = serde_json::to_vec(&json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "small"},
        }))
        .unwrap();
        exchange(&mut c, "POST", CM, "application/json", &small)
            .await
            .unwrap();
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (tls, patch) = (tls.clone(), patch.clone());
                tokio::spawn(async move {
                    let mut c = tls_from(&tls, local, port).await.unwrap();
                    exchange(
                        &mut c,
                        "PATCH",
                        &format!("{CM}/small"),
                        "application/strategic-merge-patch+json",
                        &patch,
                    )
                    .await
                    .unwrap()
                    .0
                })
            })
            .collect();
        let mut codes = Vec::new();
        for t in tasks {
            codes.push(t.await.unwrap());
        }
        codes
    });
    eprintln!("BURST: 16 concurrent 2.7 MB patches answered {codes:?}");
    assert!(codes.iter().all(|&c| c == 413 || c == 429), "{codes:?}");
}

#[test]
fn an_unknown_content_type_is_415_and_huge_annotations_are_422() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let server = start(data, &[]);
    let port = server.port;
    let tls = connector(data);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let local = std::net::IpAddr::from([127, 0, 0, 1]);
    rt.block_on(async {
        let mut c = tls_from(&tls, local, port).await.unwrap();
        let cm = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#;
        let (code, body) = exchange(&mut c, "POST", CM, "text/plain", cm)
            .await
            .unwrap();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (code, status["reason"].as_str()),
            (415, Some("UnsupportedMediaType"))
        );
        let (code, _) = exchange(&mut c, "POST", CM, "application/json; charset=utf-8", cm)
            .await
            .unwrap();
        assert_eq!(code, 201);

        let annotations: serde_json::Map<String, serde_json::Value> = (0..3)
            .map(|i| (format!("example.com/a{i}"), json!("z".repeat(100 * 1024))))
            .collect();
        let fat = serde_json::to_vec(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "fat", "annotations": annotations},
        }))
        .unwrap();
        let (code, body) = exchange(&mut c, "POST", CM, "application/json", &fat)
            .await
            .unwrap();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(code, 422, "{status}");
        assert_eq!(
            status["details"]["causes"][0]["field"],
            "metadata.annotations"
        );
        assert!(
            status["message"].as_str().unwrap_or("").contains("262144"),
            "{status}"
        );

        // JSON patches are bounded by their number of operations.
        let ops: Vec<serde_json::Value> = (0..10_001)
            .map(|i| json!({"op": "add", "path": format!("/data/k{i}"), "value": "v"}))
            .collect();
        let (code, body) = exchange(
            &mut c,
            "PATCH",
            &format!("{CM}/x"),
            "application/json-patch+json",
            &serde_json::to_vec(&ops).unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(code, 413, "{}", String::from_utf8_lossy(&body));
    });
}
