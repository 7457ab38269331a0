//! The seed runs real workloads (issue 12), end to end with the real
//! kubectl against `trellis up`: the workload controllers and the process
//! kubelet together.
//!
//! - a Deployment of 3 HTTP servers becomes 3 Ready pods with distinct pod
//!   IPs, an EndpointSlice listing them and a Service answering on its
//!   cluster IP; `kubectl rollout restart` replaces them one at a time
//!   (sampled: never fewer than 3 available, never more than 4 pods);
//!   scaling to 0 stops every process;
//! - a StatefulSet of 3 keeps its pods' names and PVC contents across a
//!   pod deletion (written and read with `kubectl exec`);
//! - a container that exits 1 goes to CrashLoopBackOff with a growing
//!   back-off, `kubectl logs --previous` shows its last output, and
//!   deleting the pod starts its replacement at once;
//! - a Job that fails twice and then succeeds completes with backoffLimit 3.
//!
//! The time from apply to a Ready 3-member StatefulSet is printed for
//! BENCHMARKS.md.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::pods::{Shims, apply, get};
use common::{have, kubectl, start_command, stdout, wait_until};
use serde_json::Value;

fn items(v: &Value) -> Vec<Value> {
    v["items"].as_array().cloned().unwrap_or_default()
}

fn ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn name(o: &Value) -> String {
    o.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Processes whose command line names `needle` (the pods' own programs).
fn processes_naming(needle: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|s| s.parse::<u32>().is_ok())
        })
        .filter(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmd).contains(needle)
        })
        .count()
}

const WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: web
        image: trellis.dev/exec
        command: [python3, -m, http.server, --bind, $(POD_IP), "8080", --directory, /etc]
        env:
        - name: POD_IP
          valueFrom: {fieldRef: {fieldPath: status.podIP}}
        ports: [{name: http, containerPort: 8080}]
        readinessProbe: {httpGet: {path: /hostname, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: http}]
"#;

const DB: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 9, name: none}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 3
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: db
        image: trellis.dev/exec
        command: [sh, -c, "hostname > /data/id; exec sleep 100000"]
        volumeMounts: [{name: data, mountPath: /data}]
        readinessProbe: {exec: {command: [cat, /data/id]}, periodSeconds: 1}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"#;

const CRASHER: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: crasher}
spec:
  replicas: 1
  selector: {matchLabels: {app: crasher}}
  template:
    metadata: {labels: {app: crasher}}
    spec:
      containers:
      - name: crash
        image: trellis.dev/exec
        command: [sh, -c, "echo last words of attempt $(date +%s%N); exit 1"]
"#;

const JOB: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: attempts}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: third-time-lucky}
spec:
  backoffLimit: 3
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: try
        image: trellis.dev/exec
        command: [sh, -c, "n=$(cat /attempts/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /attempts/n; echo attempt $n; [ $n -ge 3 ]"]
        volumeMounts: [{name: attempts, mountPath: /attempts}]
      volumes:
      - name: attempts
        persistentVolumeClaim: {claimName: attempts}
"#;

#[test]
fn deployments_statefulsets_crash_loops_and_jobs_run_as_processes() {
    if !have("kubectl") || !have("python3") || !have("curl") {
        eprintln!("SKIPPED: kubectl, python3 or curl is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let _shims = Shims(data);
    let kc = data.join("admin.kubeconfig");
    let _up = start_command("up", data, &[]);

    // A Deployment of 3 HTTP servers behind a Service.
    apply(&kc, data, "web.yaml", WEB);
    let web_pods = || items(&get(&kc, &["pods", "-l", "app=web"]));
    wait_until("3 Ready web pods", 120, || {
        web_pods().iter().filter(|p| ready(p)).count() == 3
    });
    let ips: BTreeSet<String> = web_pods()
        .iter()
        .filter_map(|p| p.pointer("/status/podIP")?.as_str().map(str::to_string))
        .collect();
    assert_eq!(ips.len(), 3, "distinct pod IPs: {ips:?}");
    assert!(ips.iter().all(|ip| ip.starts_with("127.")), "{ips:?}");
    wait_until("an EndpointSlice listing the 3 pods", 60, || {
        let slices = items(&get(
            &kc,
            &["endpointslices", "-l", "kubernetes.io/service-name=web"],
        ));
        let listed: BTreeSet<String> = slices
            .iter()
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .filter(|e| e.pointer("/conditions/ready") == Some(&Value::Bool(true)))
            .filter_map(|e| e.pointer("/addresses/0")?.as_str().map(str::to_string))
            .collect();
        listed == ips
    });
    let svc = get(&kc, &["service", "web"]);
    let cluster_ip = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    assert!(cluster_ip.starts_with("127."), "cluster IP {cluster_ip:?}");
    wait_until("the Service to answer on its cluster IP", 30, || {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "2"])
            .arg(format!("http://{cluster_ip}:80/hostname"))
            .output()
            .unwrap();
        out.status.success() && !out.stdout.is_empty()
    });

    // rollout restart: replaced one at a time.
    let before: BTreeSet<String> = web_pods().iter().map(name).collect();
    let out = kubectl(&kc, &["rollout", "restart", "deployment/web"]);
    assert!(out.status.success(), "{out:?}");
    let mut most_pods = 0;
    let mut fewest_ready = usize::MAX;
    wait_until("the restart to replace every web pod", 180, || {
        let pods = web_pods();
        let live: Vec<&Value> = pods
            .iter()
            .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
            .collect();
        most_pods = most_pods.max(live.len());
        fewest_ready = fewest_ready.min(live.iter().filter(|p| ready(p)).count());
        let names: BTreeSet<String> = pods.iter().map(name).collect();
        names.is_disjoint(&before) && pods.iter().filter(|p| ready(p)).count() == 3
    });
    assert!(
        most_pods <= 4,
        "maxSurge 1 exceeded: {most_pods} pods at once"
    );
    assert!(
        fewest_ready >= 3,
        "maxUnavailable 0 broken: only {fewest_ready} ready"
    );
    let out = kubectl(
        &kc,
        &["rollout", "status", "deployment/web", "--timeout=60s"],
    );
    assert!(stdout(&out).contains("successfully rolled out"), "{out:?}");

    // Scale to 0 stops every process.
    assert!(processes_naming("http.server") >= 3);
    let out = kubectl(&kc, &["scale", "deployment/web", "--replicas=0"]);
    assert!(out.status.success());
    wait_until("no web pods and no http.server processes", 60, || {
        web_pods().is_empty() && processes_naming("http.server") == 0
    });

    // A StatefulSet of 3 keeps names and volume contents.
    let applied = Instant::now();
    apply(&kc, data, "db.yaml", DB);
    let db_pods = || items(&get(&kc, &["pods", "-l", "app=db"]));
    wait_until("3 Ready db pods", 120, || {
        db_pods().iter().filter(|p| ready(p)).count() == 3
    });
    eprintln!(
        "STATEFULSET: kubectl apply of a 3-member StatefulSet to all pods Ready in {:?}",
        applied.elapsed()
    );
    let names: BTreeSet<String> = db_pods().iter().map(name).collect();
    assert_eq!(
        names,
        ["db-0", "db-1", "db-2"].map(String::from).into(),
        "stable ordinal names"
    );
    let out = kubectl(
        &kc,
        &[
            "exec",
            "db-1",
            "--",
            "sh",
            "-c",
            "echo keep-me > /data/marker",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let uid = get(&kc, &["pod", "db-1"])["metadata"]["uid"].clone();
    let out = kubectl(&kc, &["delete", "pod", "db-1"]);
    assert!(out.status.success());
    wait_until("db-1 back, Ready, as a new pod", 90, || {
        let p = get(&kc, &["pod", "db-1"]);
        p["metadata"]["uid"] != uid && !p["metadata"]["uid"].is_null() && ready(&p)
    });
    let out = kubectl(
        &kc,
        &["exec", "db-1", "--", "cat", "/data/marker", "/data/id"],
    );
    assert_eq!(stdout(&out), "keep-me\ndb-1\n", "{out:?}");
    let claims: BTreeSet<String> = items(&get(&kc, &["pvc", "-l", "app=db"]))
        .iter()
        .map(name)
        .collect();
    let all_claims: BTreeSet<String> = items(&get(&kc, &["pvc"])).iter().map(name).collect();
    assert!(
        ["data-db-0", "data-db-1", "data-db-2"]
            .iter()
            .all(|c| all_claims.contains(*c) || claims.contains(*c)),
        "claims per ordinal: {all_claims:?}"
    );

    // A crash loop with a growing back-off and the previous log.
    apply(&kc, data, "crasher.yaml", CRASHER);
    let crasher = || {
        items(&get(&kc, &["pods", "-l", "app=crasher"]))
            .into_iter()
            .find(|p| p.pointer("/metadata/deletionTimestamp").is_none())
            .unwrap_or(Value::Null)
    };
    let mut restarts_seen: Vec<(i64, Instant)> = Vec::new();
    wait_until("CrashLoopBackOff after 3 restarts", 150, || {
        let p = crasher();
        let status = &p["status"]["containerStatuses"][0];
        let count = status["restartCount"].as_i64().unwrap_or(0);
        if restarts_seen.last().is_none_or(|(c, _)| *c != count) {
            restarts_seen.push((count, Instant::now()));
        }
        count >= 3
            && status.pointer("/state/waiting/reason") == Some(&Value::from("CrashLoopBackOff"))
    });
    // The back-off doubles: the gap before the third restart is longer
    // than the one before the second.
    let at = |n: i64| restarts_seen.iter().find(|(c, _)| *c == n).map(|(_, t)| *t);
    if let (Some(r1), Some(r2), Some(r3)) = (at(1), at(2), at(3)) {
        assert!(
            r3 - r2 > r2 - r1,
            "back-off did not grow: {:?} then {:?}",
            r2 - r1,
            r3 - r2
        );
    }
    let pod = name(&crasher());
    let out = kubectl(&kc, &["logs", &pod, "--previous"]);
    assert!(
        stdout(&out).contains("last words of attempt"),
        "logs --previous: {out:?}"
    );
    let out = kubectl(&kc, &["delete", "pod", &pod, "--wait=false"]);
    assert!(out.status.success());
    let deleted = Instant::now();
    wait_until("the replacement pod to have run at once", 30, || {
        let p = crasher();
        name(&p) != pod
            && p.pointer("/status/containerStatuses/0/lastState/terminated")
                .is_some()
    });
    assert!(
        deleted.elapsed() < Duration::from_secs(20),
        "the replacement waited for an old back-off"
    );

    // A Job that fails twice, then succeeds, with backoffLimit 3.
    apply(&kc, data, "job.yaml", JOB);
    wait_until("the Job to complete", 180, || {
        let job = get(&kc, &["job", "third-time-lucky"]);
        job.pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Complete" && c["status"] == "True")
            })
    });
    let job = get(&kc, &["job", "third-time-lucky"]);
    assert_eq!(job["status"]["succeeded"], 1, "{job:#}");
    assert_eq!(job["status"]["failed"], 2, "{job:#}");
}
