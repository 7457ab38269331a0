//! The seed's workloads with the real kubectl against the real `trellis
//! up`: Deployments, StatefulSets, Jobs, CronJobs and Services read as on
//! a real cluster (`kubectl get` columns, `rollout status`, `rollout
//! restart`, `rollout history`, `rollout undo`, `scale`). The images are
//! ones nothing runs, so no pod becomes Ready whether a kubelet runs or
//! not; what is checked is what kube-controller-manager's part shows.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{have, kubectl, start_command, stdout, wait_until};

const MANIFESTS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.invalid/web:1
        ports:
        - {name: http, containerPort: 8080}
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: http}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 2
  serviceName: db
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - {name: db, image: registry.invalid/db:1}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: pi
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: pi, image: registry.invalid/perl:1}
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: hello
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - {name: hello, image: registry.invalid/busybox:1}
"#;

fn apply(kc: &Path, manifest: &str) -> Output {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .env_remove("KUBECONFIG")
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running kubectl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    eprintln!(
        "$ kubectl apply\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `kubectl get … -o jsonpath=…`.
fn jsonpath(kc: &Path, what: &[&str], path: &str) -> String {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    let expr = format!("jsonpath={path}");
    args.extend(["-o", &expr]);
    stdout(&kubectl(kc, &args))
}

/// The rows of a `kubectl get` table whose first cell starts with `prefix`.
fn rows<'a>(table: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    table
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(|l| l.split_whitespace().collect())
        .collect()
}

#[test]
fn workloads_read_as_on_a_real_cluster() {
    if !have("kubectl") {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let _up = start_command("up", data, &[]);
    let kc = data.join("admin.kubeconfig");
    assert!(apply(&kc, MANIFESTS).status.success());

    wait_until("three updated web replicas", 60, || {
        jsonpath(&kc, &["deploy", "web"], "{.status.updatedReplicas}") == "3"
            && jsonpath(&kc, &["deploy", "web"], "{.status.replicas}") == "3"
    });
    // `rollout status` waits: none of the pods is available.
    let out = kubectl(
        &kc,
        &["rollout", "status", "deployment/web", "--timeout=3s"],
    );
    assert!(!out.status.success(), "the rollout cannot finish");
    let said = stdout(&out);
    assert!(
        said.contains(
            "Waiting for deployment \"web\" rollout to finish: 0 of 3 updated replicas are available..."
        ),
        "{said}"
    );
    wait_until("db-0 and the job's pod", 60, || {
        let pods = jsonpath(&kc, &["pods"], "{.items[*].metadata.name}");
        pods.contains("db-0") && pods.split(' ').any(|p| p.starts_with("pi-"))
    });
    let out = kubectl(
        &kc,
        &["rollout", "status", "statefulset/db", "--timeout=2s"],
    );
    assert!(
        stdout(&out).contains("Waiting for 2 pods to be ready..."),
        "{}",
        stdout(&out)
    );

    let out = kubectl(
        &kc,
        &["get", "deploy,rs,sts,pods,jobs,cronjobs,endpointslices"],
    );
    assert!(out.status.success());
    let table = stdout(&out);
    for header in [
        "NAME                  READY   UP-TO-DATE   AVAILABLE   AGE",
        "DESIRED   CURRENT   READY   AGE",
        "NAME                  READY   AGE",
        "NAME                  STATUS    COMPLETIONS   DURATION   AGE",
        "SCHEDULE      TIMEZONE   SUSPEND   ACTIVE   LAST SCHEDULE   AGE",
        "ADDRESSTYPE   PORTS",
    ] {
        let squeezed = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            table
                .lines()
                .any(|l| squeezed(l).contains(&squeezed(header))),
            "no header {header:?} in\n{table}"
        );
    }
    let deploy = rows(&table, "deployment.apps/web");
    assert_eq!(deploy.len(), 1, "{table}");
    assert_eq!(&deploy[0][1..4], ["0/3", "3", "0"]);
    let rs = rows(&table, "replicaset.apps/web-");
    assert_eq!(rs.len(), 1, "{table}");
    assert_eq!(&rs[0][1..4], ["3", "3", "0"]);
    let sts = rows(&table, "statefulset.apps/db");
    assert_eq!(sts[0][1], "0/2");
    let web_pods = rows(&table, "pod/web-");
    assert_eq!(web_pods.len(), 3, "{table}");
    assert!(rows(&table, "pod/db-0").len() == 1 && rows(&table, "pod/db-1").is_empty());
    let job = rows(&table, "job.batch/pi");
    assert_eq!(&job[0][1..3], ["Running", "0/1"]);
    let cj = rows(&table, "cronjob.batch/hello");
    assert_eq!(
        &cj[0][1..],
        [
            "*/5", "*", "*", "*", "*", "<none>", "False", "0", "<none>", cj[0][10]
        ]
    );
    let slices = rows(&table, "endpointslice.discovery.k8s.io/web-");
    assert_eq!(slices.len(), 1, "{table}");
    assert_eq!(slices[0][1], "IPv4");

    // kubectl's typed create commands (protobuf bodies): a Job of its own
    // and one from the CronJob's template, both run by the Job controller.
    let out = kubectl(
        &kc,
        &[
            "create",
            "job",
            "once",
            "--image=registry.invalid/x:1",
            "--",
            "true",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kubectl(&kc, &["create", "job", "now", "--from=cronjob/hello"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until("pods of both jobs", 60, || {
        let pods = jsonpath(&kc, &["pods"], "{.items[*].metadata.name}");
        pods.split(' ').any(|p| p.starts_with("once-"))
            && pods.split(' ').any(|p| p.starts_with("now-"))
    });

    // The claims of the StatefulSet, named for their pods.
    let claims = jsonpath(&kc, &["pvc"], "{.items[*].metadata.name}");
    assert_eq!(claims, "data-db-0");

    // A StatefulSet's history is its ControllerRevisions: a new template
    // is revision 2, `rollout undo` brings revision 1 back as revision 3.
    let out = kubectl(
        &kc,
        &["set", "image", "statefulset/db", "db=registry.invalid/db:2"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until("two revisions", 60, || {
        jsonpath(&kc, &["controllerrevisions"], "{.items[*].revision}")
            .split(' ')
            .count()
            == 2
    });
    let history = stdout(&kubectl(&kc, &["rollout", "history", "statefulset/db"]));
    assert!(history.contains("REVISION"), "{history}");
    assert!(
        kubectl(&kc, &["rollout", "undo", "statefulset/db"])
            .status
            .success()
    );
    wait_until("revision 3", 60, || {
        let mut revs: Vec<String> = jsonpath(&kc, &["controllerrevisions"], "{.items[*].revision}")
            .split(' ')
            .map(str::to_string)
            .collect();
        revs.sort();
        revs == ["2", "3"]
    });
    let table = stdout(&kubectl(&kc, &["get", "controllerrevisions"]));
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|h| h.split_whitespace().collect::<Vec<_>>()
                == ["NAME", "CONTROLLER", "REVISION", "AGE"]),
        "{table}"
    );
    assert_eq!(rows(&table, "db-").len(), 2, "{table}");
    assert!(
        rows(&table, "db-")
            .iter()
            .all(|r| r[1] == "statefulset.apps/db"),
        "{table}"
    );

    // `rollout restart`: a second ReplicaSet, revision 2.
    assert!(
        kubectl(&kc, &["rollout", "restart", "deployment/web"])
            .status
            .success()
    );
    wait_until("a second replica set", 60, || {
        jsonpath(&kc, &["rs"], "{.items[*].metadata.name}")
            .split(' ')
            .count()
            == 2
    });
    wait_until("revision 2", 60, || {
        jsonpath(
            &kc,
            &["deploy", "web"],
            "{.metadata.annotations.deployment\\.kubernetes\\.io/revision}",
        ) == "2"
    });
    let history = stdout(&kubectl(&kc, &["rollout", "history", "deployment/web"]));
    assert!(
        history.contains("REVISION") && history.contains("CHANGE-CAUSE"),
        "{history}"
    );
    assert_eq!(
        history
            .lines()
            .filter(|l| l.starts_with('1') || l.starts_with('2'))
            .count(),
        2,
        "{history}"
    );

    // `rollout undo`: back to revision 1's template, as revision 3, with
    // the first ReplicaSet.
    assert!(
        kubectl(&kc, &["rollout", "undo", "deployment/web"])
            .status
            .success()
    );
    wait_until("revision 3", 60, || {
        jsonpath(
            &kc,
            &["deploy", "web"],
            "{.metadata.annotations.deployment\\.kubernetes\\.io/revision}",
        ) == "3"
    });
    assert_eq!(
        jsonpath(&kc, &["rs"], "{.items[*].metadata.name}")
            .split(' ')
            .count(),
        2,
        "no third set"
    );
    let restarted = jsonpath(
        &kc,
        &["deploy", "web"],
        "{.spec.template.metadata.annotations}",
    );
    assert!(!restarted.contains("restartedAt"), "{restarted}");

    // `scale` through the scale subresource, down to zero.
    assert!(
        kubectl(&kc, &["scale", "deployment/web", "--replicas=0"])
            .status
            .success()
    );
    wait_until("no web pods", 60, || {
        !jsonpath(&kc, &["pods"], "{.items[*].metadata.name}")
            .split(' ')
            .any(|p| p.starts_with("web-"))
    });
    wait_until("a status of zero", 60, || {
        jsonpath(&kc, &["deploy", "web"], "{.status.replicas}") == "0"
    });
}
