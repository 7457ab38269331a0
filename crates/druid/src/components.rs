//! The objects an Etcd owns (spec §2, `internal/component/*`), built as
//! JSON from the Etcd alone: ServiceAccount, Role, RoleBinding, member and
//! snapshot Leases, PodDisruptionBudget, client and peer Services, the
//! ConfigMap with `etcd.conf.yaml`, and the StatefulSet of etcd-wrapper and
//! backup-restore containers. Names, labels, ports and flags are
//! upstream's, so what druid writes here is what it writes on a real
//! cluster. Pure: the controller only applies these objects.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::duration;
use crate::types::Etcd;

pub const FINALIZER: &str = "druid.gardener.cloud/etcd-druid";
pub const OPERATION_ANNOTATION: &str = "druid.gardener.cloud/operation";
pub const SUSPEND_ANNOTATION: &str = "druid.gardener.cloud/suspend-etcd-spec-reconcile";
pub const DISABLE_RUNTIME_ANNOTATION: &str =
    "druid.gardener.cloud/disable-etcd-runtime-component-creation";
pub const CONFIGMAP_CHECKSUM_ANNOTATION: &str = "checksum/etcd-configmap";
pub const TLS_ENABLED_ANNOTATION: &str = "member.etcd.gardener.cloud/tls-enabled";

pub const DEFAULT_ETCD_IMAGE: &str =
    "europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper:v0.6.1";
pub const DEFAULT_BACKUP_IMAGE: &str =
    "europe-docker.pkg.dev/gardener-project/public/gardener/etcdbrctl:v0.37.0";
/// Where upstream's Local store provider keeps its buckets on the host.
pub const DEFAULT_LOCAL_BACKUP_ROOT: &str = "/etc/gardener/local-backupbuckets";

/// Settings of druid itself (not of one Etcd).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Host directory holding the Local store's buckets (one directory per
    /// `store.container`).
    pub local_backup_root: String,
    /// The cluster's DNS domain, for the compaction controller's URL.
    pub cluster_domain: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            local_backup_root: DEFAULT_LOCAL_BACKUP_ROOT.to_string(),
            cluster_domain: "cluster.local".to_string(),
        }
    }
}

/// The values of one Etcd the components share, with druid's defaults.
#[derive(Clone, Debug)]
pub struct Names {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

impl Names {
    pub fn of(etcd: &Etcd) -> Names {
        Names {
            name: etcd.metadata.name.clone().unwrap_or_default(),
            namespace: etcd.metadata.namespace.clone().unwrap_or_default(),
            uid: etcd.metadata.uid.clone().unwrap_or_default(),
        }
    }
    pub fn client_service(&self) -> String {
        format!("{}-client", self.name)
    }
    pub fn peer_service(&self) -> String {
        format!("{}-peer", self.name)
    }
    pub fn config_map(&self) -> String {
        format!("{}-config", self.name)
    }
    pub fn role(&self) -> String {
        format!("druid.gardener.cloud:etcd:{}", self.name)
    }
    pub fn member_lease(&self, i: i32) -> String {
        format!("{}-{i}", self.name)
    }
    pub fn full_snapshot_lease(&self) -> String {
        format!("{}-full-snap", self.name)
    }
    pub fn delta_snapshot_lease(&self) -> String {
        format!("{}-delta-snap", self.name)
    }
    pub fn compactor_job(&self) -> String {
        format!("{}-compactor", self.name)
    }
    pub fn local_host(&self) -> String {
        format!("{}-local", self.name)
    }
}

/// `app.kubernetes.io/managed-by` and `part-of`: every component has them,
/// and they select the pods.
pub fn default_labels(name: &str) -> BTreeMap<String, String> {
    [
        ("app.kubernetes.io/managed-by", "etcd-druid"),
        ("app.kubernetes.io/part-of", name),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn labels(n: &Names, component: &str, object: &str) -> Value {
    let mut l = default_labels(&n.name);
    l.insert("app.kubernetes.io/component".into(), component.into());
    l.insert("app.kubernetes.io/name".into(), object.into());
    json!(l)
}

fn owner(n: &Names) -> Value {
    json!([{
        "apiVersion": "druid.gardener.cloud/v1alpha1",
        "kind": "Etcd",
        "name": n.name,
        "uid": n.uid,
        "controller": true,
        "blockOwnerDeletion": true,
    }])
}

fn meta(n: &Names, name: &str, component: &str) -> Value {
    // A label value takes no ':' (the Role's name has two): upstream
    // writes them as '-'.
    json!({
        "name": name,
        "namespace": n.namespace,
        "labels": labels(n, component, &name.replace(':', "-")),
        "ownerReferences": owner(n),
    })
}

/// Ports with druid's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    pub client: i32,
    pub server: i32,
    pub wrapper: i32,
    pub backup: i32,
}

pub fn ports(etcd: &Etcd) -> Ports {
    Ports {
        client: etcd.spec.etcd.client_port.unwrap_or(2379),
        server: etcd.spec.etcd.server_port.unwrap_or(2380),
        wrapper: etcd.spec.etcd.wrapper_port.unwrap_or(9095),
        backup: etcd.spec.backup.port.unwrap_or(8080),
    }
}

pub fn service_account(etcd: &Etcd) -> Value {
    let n = Names::of(etcd);
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta(&n, &n.name, "etcd-service-account"),
        "automountServiceAccountToken": true,
    })
}

pub fn role(etcd: &Etcd) -> Value {
    let n = Names::of(etcd);
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta(&n, &n.role(), "etcd-druid-role"),
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "verbs": ["get", "list", "patch", "update", "watch"]},
            {"apiGroups": ["apps"], "resources": ["statefulsets"],
             "verbs": ["get", "list", "patch", "update", "watch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        ],
    })
}

pub fn role_binding(etcd: &Etcd) -> Value {
    let n = Names::of(etcd);
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta(&n, &n.role(), "druid-role-binding"),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": n.role()},
        "subjects": [{"kind": "ServiceAccount", "name": n.name, "namespace": n.namespace}],
    })
}

/// A lease as created by druid: empty; backup-restore renews it.
fn lease(n: &Names, name: &str, component: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta(n, name, component),
        "spec": {},
    })
}

pub fn member_leases(etcd: &Etcd) -> Vec<Value> {
    let n = Names::of(etcd);
    (0..etcd.spec.replicas.max(0))
        .map(|i| lease(&n, &n.member_lease(i), "etcd-member-lease"))
        .collect()
}

/// The snapshot leases, or none without a backup store.
pub fn snapshot_leases(etcd: &Etcd) -> Vec<Value> {
    if etcd.spec.backup.store.is_none() {
        return Vec::new();
    }
    let n = Names::of(etcd);
    vec![
        lease(&n, &n.full_snapshot_lease(), "etcd-snapshot-lease"),
        lease(&n, &n.delta_snapshot_lease(), "etcd-snapshot-lease"),
    ]
}

/// ⌊n/2⌋+1 for clusters, 0 for one member (it may always be evicted).
pub fn pdb_min_available(replicas: i32) -> i32 {
    if replicas > 1 { replicas / 2 + 1 } else { 0 }
}

pub fn pdb(etcd: &Etcd) -> Value {
    let n = Names::of(etcd);
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(&n, &n.name, "etcd-pdb"),
        "spec": {
            "minAvailable": pdb_min_available(etcd.spec.replicas),
            "selector": {"matchLabels": default_labels(&n.name)},
        },
    })
}

fn pod_selector(n: &Names) -> Value {
    let mut s = default_labels(&n.name);
    s.insert(
        "app.kubernetes.io/component".into(),
        "etcd-statefulset".into(),
    );
    json!(s)
}

pub fn client_service(etcd: &Etcd) -> Value {
    let n = Names::of(etcd);
    let p = ports(etcd);
    let mut m = meta(&n, &n.client_service(), "etcd-client-service");
    let cs = etcd.spec.etcd.client_service.clone().unwrap_or_default();
    if let Some(l) = m["labels"].as_object_mut() {
        for (k, v) in &cs.labels {
            l.insert(k.clone(), json!(v));
        }
    }
    if !cs.annotations.is_empty() {
        m["annotations"] = json!(cs.annotations);
    }
    let mut spec = json!({
        "type": "ClusterIP",
        "sessionAffinity": "None",
        "selector": pod_selector(&n),
        "ports": [
            {"name": "client", "protocol": "TCP", "port": p.client, "targetPort": p.client},
            {"name": "server", "protocol": "TCP", "port": p.server, "targetPort": p.server},
            {"name": "backuprestore", "protocol": "TCP", "port": p.backup, "targetPort": p.backup},
        ],
    });
    if let Some(t) = cs.traffic_distribution {
        spec["trafficDistribution"] = json!(t);
    }
    json!({"apiVersion": "v1", "kind": "Service", "metadata": m, "spec": spec})
}

pub fn peer_service(etcd: &Etcd) -> Value {
    let n = Names::of(etcd);
    let p = ports(etcd);
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(&n, &n.peer_service(), "etcd-peer-service"),
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "None",
            "publishNotReadyAddresses": true,
            "sessionAffinity": "None",
            "selector": pod_selector(&n),
            "ports": [{"name": "peer", "protocol": "TCP", "port": p.server, "targetPort": p.server}],
        },
    })
}

fn quantity_bytes(v: &Value, default: u64) -> u64 {
    match v {
        Value::Number(n) => n.as_u64().unwrap_or(default),
        Value::String(s) => parse_quantity(s).unwrap_or(default),
        _ => default,
    }
}

/// Bytes of a binary or decimal quantity (`8Gi`, `100Mi`, `500M`, `1024`).
pub fn parse_quantity(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s[..split].parse().ok()?;
    let mult: u64 = match &s[split..] {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

fn scheme(tls: bool) -> &'static str {
    if tls { "https" } else { "http" }
}

/// `etcd.conf.yaml` (`configmap/etcdconfig.go`): every member's URLs, the
/// advertise URLs as maps member → URLs (backup-restore picks its own).
pub fn etcd_config(etcd: &Etcd) -> String {
    let n = Names::of(etcd);
    let p = ports(etcd);
    let e = &etcd.spec.etcd;
    let client_tls = e.client_url_tls.is_some();
    let peer_tls = e.peer_url_tls.is_some();
    let host = |i: i32| format!("{}-{i}.{}.{}.svc", n.name, n.peer_service(), n.namespace);
    let members: Vec<i32> = (0..etcd.spec.replicas.max(1)).collect();
    let initial_cluster = members
        .iter()
        .map(|i| {
            format!(
                "{}-{i}={}://{}:{}",
                n.name,
                scheme(peer_tls),
                host(*i),
                p.server
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    let map = |port: i32, tls: bool| -> serde_json::Map<String, Value> {
        members
            .iter()
            .map(|i| {
                (
                    format!("{}-{i}", n.name),
                    json!([format!("{}://{}:{port}", scheme(tls), host(*i))]),
                )
            })
            .collect()
    };
    let shared = etcd.spec.shared_config.clone().unwrap_or_default();
    let mut cfg = json!({
        "name": format!("etcd-{}", &n.uid.get(..6).unwrap_or("")),
        "data-dir": "/var/etcd/data/new.etcd",
        "metrics": e.metrics.clone().unwrap_or_else(|| "basic".into()),
        "snapshot-count": e.snapshot_count.unwrap_or(10_000),
        "enable-v2": false,
        "quota-backend-bytes": e.quota.as_ref().map_or(8 << 30, |q| quantity_bytes(q, 8 << 30)),
        "initial-cluster-token": "etcd-cluster",
        "initial-cluster-state": "new",
        "initial-cluster": initial_cluster,
        "auto-compaction-mode": shared.auto_compaction_mode.unwrap_or_else(|| "periodic".into()),
        "auto-compaction-retention": shared.auto_compaction_retention.unwrap_or_else(|| "30m".into()),
        "listen-client-urls": format!("{}://0.0.0.0:{}", scheme(client_tls), p.client),
        "listen-peer-urls": format!("{}://0.0.0.0:{}", scheme(peer_tls), p.server),
        "advertise-client-urls": map(p.client, client_tls),
        "initial-advertise-peer-urls": map(p.server, peer_tls),
        "backend-bbolt-freelist-type": e.backend_bbolt_freelist_type.clone().unwrap_or_else(|| "array".into()),
    });
    if client_tls {
        cfg["client-transport-security"] = json!({
            "cert-file": "/var/etcd/ssl/server/tls.crt",
            "key-file": "/var/etcd/ssl/server/tls.key",
            "client-cert-auth": true,
            "trusted-ca-file": "/var/etcd/ssl/ca/ca.crt",
            "auto-tls": false,
        });
    }
    if peer_tls {
        cfg["peer-transport-security"] = json!({
            "cert-file": "/var/etcd/ssl/peer/server/tls.crt",
            "key-file": "/var/etcd/ssl/peer/server/tls.key",
            "client-cert-auth": true,
            "trusted-ca-file": "/var/etcd/ssl/peer/ca/ca.crt",
            "auto-tls": false,
        });
    }
    serde_yaml::to_string(&cfg).unwrap_or_default()
}

pub fn config_map(etcd: &Etcd) -> Value {
    let n = Names::of(etcd);
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(&n, &n.config_map(), "etcd-config"),
        "data": {"etcd.conf.yaml": etcd_config(etcd)},
    })
}

/// The SHA-256 of the ConfigMap's data (sorted keys), as upstream puts in
/// the pod template so a config change rolls the pods.
pub fn config_checksum(etcd: &Etcd) -> String {
    let mut h = Sha256::new();
    h.update(b"etcd.conf.yaml");
    h.update(etcd_config(etcd).as_bytes());
    hex::encode(h.finalize())
}

/// The full-snapshot schedule's interval, for BackupReady (24 h unless the
/// schedule fires every `*/N` hours or minutes).
pub fn full_snapshot_interval(schedule: Option<&str>) -> std::time::Duration {
    const DAY: std::time::Duration = std::time::Duration::from_secs(86_400);
    let Some(s) = schedule else { return DAY };
    let f: Vec<&str> = s.split_whitespace().collect();
    match f.as_slice() {
        [m, h, "*", "*", "*"] => {
            if let Some(step) = h.strip_prefix("*/").and_then(|x| x.parse::<u64>().ok()) {
                std::time::Duration::from_secs(step.max(1) * 3600)
            } else if *h == "*" {
                match m.strip_prefix("*/").and_then(|x| x.parse::<u64>().ok()) {
                    Some(step) => std::time::Duration::from_secs(step.max(1) * 60),
                    None => std::time::Duration::from_secs(3600),
                }
            } else {
                DAY
            }
        }
        _ => DAY,
    }
}

/// The backup-restore container's flags (`server`).
fn backup_args(etcd: &Etcd, n: &Names) -> Vec<String> {
    let p = ports(etcd);
    let b = &etcd.spec.backup;
    let e = &etcd.spec.etcd;
    let client_scheme = scheme(e.client_url_tls.is_some());
    let mut a = vec![
        "server".to_string(),
        "--enable-snapshot-lease-renewal=true".into(),
        "--enable-member-lease-renewal=true".into(),
        format!(
            "--k8s-heartbeat-duration={}",
            e.heartbeat_duration.clone().unwrap_or_else(|| "10s".into())
        ),
        "--data-dir=/var/etcd/data/new.etcd".into(),
        "--restoration-temp-snapshots-dir=/var/etcd/data/restoration.temp".into(),
        "--insecure-transport=true".into(),
        "--insecure-skip-tls-verify=true".into(),
        format!(
            "--endpoints={client_scheme}://{}:{}",
            n.local_host(),
            p.client
        ),
        format!(
            "--service-endpoints={client_scheme}://{}:{}",
            n.client_service(),
            p.client
        ),
        format!(
            "--etcd-connection-timeout={}",
            b.leader_election
                .as_ref()
                .and_then(|l| l.etcd_connection_timeout.clone())
                .unwrap_or_else(|| "5m".into())
        ),
        format!("--server-port={}", p.backup),
        format!("--snapstore-temp-directory=/var/etcd/data/temp"),
        format!("--etcd-process-name=etcd"),
        format!(
            "--etcd-snapshot-timeout={}",
            b.etcd_snapshot_timeout
                .clone()
                .unwrap_or_else(|| "15m".into())
        ),
        format!(
            "--etcd-defrag-timeout={}",
            e.etcd_defrag_timeout
                .clone()
                .unwrap_or_else(|| "15m".into())
        ),
        "--use-etcd-wrapper=true".into(),
    ];
    if let Some(s) = &e.defragmentation_schedule {
        a.push(format!("--defragmentation-schedule={s}"));
    }
    if let Some(store) = &b.store {
        a.push(format!(
            "--storage-provider={}",
            store_provider(store.provider.as_deref())
        ));
        a.push(format!("--store-prefix={}", store.prefix));
        if let Some(s) = &b.full_snapshot_schedule {
            a.push(format!("--schedule={s}"));
        }
        if let Some(s) = &b.delta_snapshot_period {
            a.push(format!("--delta-snapshot-period={s}"));
        }
        if let Some(s) = &b.garbage_collection_policy {
            a.push(format!("--garbage-collection-policy={s}"));
        }
        if let Some(m) = b.max_backups_limit_based_gc {
            a.push(format!("--max-backups={m}"));
        }
        if let Some(s) = &b.garbage_collection_period {
            a.push(format!("--garbage-collection-period={s}"));
        }
        if let Some(s) = &b.delta_snapshot_retention_period {
            a.push(format!("--delta-snapshot-retention-period={s}"));
        }
        if let Some(q) = &b.delta_snapshot_memory_limit {
            a.push(format!(
                "--delta-snapshot-memory-limit={}",
                quantity_bytes(q, 100 << 20)
            ));
        }
        let c = b.compression.clone().unwrap_or_default();
        if c.enabled.unwrap_or(false) {
            a.push("--compress-snapshots=true".into());
            a.push(format!(
                "--compression-policy={}",
                c.policy.unwrap_or_else(|| "gzip".into())
            ));
        }
        a.push(format!(
            "--full-snapshot-lease-name={}",
            n.full_snapshot_lease()
        ));
        a.push(format!(
            "--delta-snapshot-lease-name={}",
            n.delta_snapshot_lease()
        ));
    }
    let shared = etcd.spec.shared_config.clone().unwrap_or_default();
    a.push(format!(
        "--auto-compaction-mode={}",
        shared
            .auto_compaction_mode
            .unwrap_or_else(|| "periodic".into())
    ));
    a.push(format!(
        "--auto-compaction-retention={}",
        shared
            .auto_compaction_retention
            .unwrap_or_else(|| "30m".into())
    ));
    if let Some(r) = b
        .leader_election
        .as_ref()
        .and_then(|l| l.reelection_period.clone())
    {
        a.push(format!("--reelection-period={r}"));
    }
    a
}

/// backup-restore's provider name for a store provider (`aws` → `S3`, …).
pub fn store_provider(provider: Option<&str>) -> &'static str {
    match provider.unwrap_or("Local") {
        "aws" | "S3" => "S3",
        "azure" | "ABS" => "ABS",
        "gcp" | "GCS" => "GCS",
        "alicloud" | "OSS" => "OSS",
        "openstack" | "Swift" => "Swift",
        "stackit" => "S3",
        _ => "Local",
    }
}

/// The data volume's claim template name.
pub fn volume_claim_template(etcd: &Etcd) -> String {
    etcd.spec
        .volume_claim_template
        .clone()
        .unwrap_or_else(|| Names::of(etcd).name)
}

/// The StatefulSet with `replicas` (the spec's, unless the spec flow holds
/// an older count back).
pub fn statefulset(etcd: &Etcd, replicas: i32, settings: &Settings) -> Value {
    let n = Names::of(etcd);
    let p = ports(etcd);
    let e = &etcd.spec.etcd;
    let vct = volume_claim_template(etcd);
    let mut pod_labels: BTreeMap<String, String> = etcd.spec.labels.clone();
    for (k, v) in default_labels(&n.name) {
        pod_labels.insert(k, v);
    }
    pod_labels.insert(
        "app.kubernetes.io/component".into(),
        "etcd-statefulset".into(),
    );
    pod_labels.insert("app.kubernetes.io/name".into(), n.name.clone());
    let mut pod_annotations = etcd.spec.annotations.clone();
    pod_annotations.insert(CONFIGMAP_CHECKSUM_ANNOTATION.into(), config_checksum(etcd));
    let run_as_root = etcd.spec.run_as_root.unwrap_or(false);
    let security = if run_as_root {
        json!({})
    } else {
        json!({"runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532, "runAsNonRoot": true})
    };
    let mut volumes = vec![json!({
        "name": "etcd-config-file",
        "configMap": {"name": n.config_map(), "items": [{"key": "etcd.conf.yaml", "path": "etcd.conf.yaml"}], "defaultMode": 0o640},
    })];
    let mut br_mounts = vec![
        json!({"name": vct, "mountPath": "/var/etcd/data"}),
        json!({"name": "etcd-config-file", "mountPath": "/var/etcd/config/"}),
    ];
    let mut br_env = vec![
        json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
        json!({"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}),
    ];
    if let Some(store) = &etcd.spec.backup.store {
        let container = store.container.clone().unwrap_or_default();
        br_env.push(json!({"name": "STORAGE_CONTAINER", "value": container}));
        if store_provider(store.provider.as_deref()) == "Local" {
            volumes.push(json!({
                "name": "host-storage",
                "hostPath": {"path": format!("{}/{}", settings.local_backup_root.trim_end_matches('/'), container), "type": "DirectoryOrCreate"},
            }));
            br_mounts.push(
                json!({"name": "host-storage", "mountPath": format!("/home/nonroot/{container}")}),
            );
        } else if let Some(secret) = &store.secret_ref {
            volumes.push(json!({"name": "etcd-backup-secret", "secret": {"secretName": secret.name, "defaultMode": 0o640}}));
            br_mounts.push(json!({"name": "etcd-backup-secret", "mountPath": "/var/etcd-backup/"}));
        }
    }
    let mut etcd_mounts = vec![json!({"name": vct, "mountPath": "/var/etcd/data/"})];
    for (volume, secret, path) in crate::tls::tls_volumes(etcd) {
        volumes
            .push(json!({"name": volume, "secret": {"secretName": secret, "defaultMode": 0o640}}));
        etcd_mounts.push(json!({"name": volume, "mountPath": path}));
        if volume.starts_with("client-url-") {
            // backup-restore talks to etcd's client URL with the same
            // certificates.
            br_mounts.push(json!({"name": volume, "mountPath": path}));
        }
    }
    let mut etcd_args = vec![
        "start-etcd".to_string(),
        format!("--backup-restore-host-port={}:{}", n.local_host(), p.backup),
        format!("--etcd-server-name={}", n.local_host()),
    ];
    if e.client_url_tls.is_none() {
        etcd_args.push("--backup-restore-tls-enabled=false".into());
    }
    let storage = etcd
        .spec
        .storage_capacity
        .as_ref()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_else(|| "16Gi".into());
    let mut claim_spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage}},
    });
    if let Some(sc) = &etcd.spec.storage_class {
        claim_spec["storageClassName"] = json!(sc);
    }
    let etcd_resources = e
        .resources
        .clone()
        .map(|r| json!(r))
        .unwrap_or_else(|| json!({"requests": {"cpu": "50m", "memory": "128Mi"}}));
    let br_resources = etcd
        .spec
        .backup
        .resources
        .clone()
        .map(|r| json!(r))
        .unwrap_or_else(|| json!({"requests": {"cpu": "10m", "memory": "40Mi"}}));
    let mut pod_spec = json!({
        "hostAliases": [{"ip": "127.0.0.1", "hostnames": [n.local_host()]}],
        "serviceAccountName": n.name,
        "shareProcessNamespace": true,
        "securityContext": security,
        "containers": [
            {
                "name": "etcd",
                "image": e.image.clone().unwrap_or_else(|| DEFAULT_ETCD_IMAGE.into()),
                "imagePullPolicy": "IfNotPresent",
                "args": etcd_args,
                "readinessProbe": {
                    "httpGet": {"path": "/readyz", "port": p.wrapper, "scheme": "HTTP"},
                    "initialDelaySeconds": 15, "periodSeconds": 5, "failureThreshold": 5,
                },
                "ports": [
                    {"name": "server", "protocol": "TCP", "containerPort": p.server},
                    {"name": "client", "protocol": "TCP", "containerPort": p.client},
                ],
                "resources": etcd_resources,
                "volumeMounts": etcd_mounts,
            },
            {
                "name": "backup-restore",
                "image": etcd.spec.backup.image.clone().unwrap_or_else(|| DEFAULT_BACKUP_IMAGE.into()),
                "imagePullPolicy": "IfNotPresent",
                "args": backup_args(etcd, &n),
                "env": br_env,
                "ports": [{"name": "server", "protocol": "TCP", "containerPort": p.backup}],
                "resources": br_resources,
                "volumeMounts": br_mounts,
            },
        ],
        "volumes": volumes,
    });
    if let Some(pc) = &etcd.spec.priority_class_name {
        pod_spec["priorityClassName"] = json!(pc);
    }
    if let Some(sc) = &etcd.spec.scheduling_constraints {
        if let Some(a) = &sc.affinity {
            pod_spec["affinity"] = a.clone();
        }
        if let Some(t) = &sc.topology_spread_constraints {
            pod_spec["topologySpreadConstraints"] = t.clone();
        }
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(&n, &n.name, "etcd-statefulset"),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": default_labels(&n.name)},
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "serviceName": n.peer_service(),
            "template": {
                "metadata": {"labels": pod_labels, "annotations": pod_annotations},
                "spec": pod_spec,
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": vct},
                "spec": claim_spec,
            }],
        },
    })
}

/// The components in upstream's sync order, each with its kind; the
/// StatefulSet last, with `sts_replicas`.
pub fn all(etcd: &Etcd, sts_replicas: i32, settings: &Settings) -> Vec<Value> {
    let mut out = vec![service_account(etcd), role(etcd), role_binding(etcd)];
    out.extend(member_leases(etcd));
    out.extend(snapshot_leases(etcd));
    out.push(pdb(etcd));
    out.push(client_service(etcd));
    out.push(peer_service(etcd));
    out.push(config_map(etcd));
    out.push(statefulset(etcd, sts_replicas, settings));
    out
}

/// The compaction controller's URL of backup-restore's full snapshot.
pub fn full_snapshot_url(etcd: &Etcd, settings: &Settings) -> String {
    let n = Names::of(etcd);
    let tls = etcd.spec.backup.tls.is_some();
    format!(
        "{}://{}.{}.svc.{}:{}/snapshot/full",
        scheme(tls),
        n.client_service(),
        n.namespace,
        settings.cluster_domain,
        ports(etcd).backup
    )
}

/// Seconds of `etcdSnapshotTimeout` (15 min by default).
pub fn snapshot_timeout(etcd: &Etcd) -> std::time::Duration {
    etcd.spec
        .backup
        .etcd_snapshot_timeout
        .as_deref()
        .and_then(duration::parse)
        .unwrap_or(std::time::Duration::from_secs(900))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{BackupSpec, EtcdSpec, StoreSpec};

    pub fn example(replicas: i32) -> Etcd {
        let mut e = Etcd::new(
            "e",
            EtcdSpec {
                replicas,
                labels: [("app".to_string(), "etcd-statefulset".to_string())].into(),
                backup: BackupSpec {
                    store: Some(StoreSpec {
                        prefix: "e".into(),
                        provider: Some("Local".into()),
                        container: Some("default.bkp".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        e.metadata.namespace = Some("ns".into());
        e.metadata.uid = Some("0123456789".into());
        e
    }

    fn names(v: &[Value]) -> Vec<String> {
        v.iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn scenario_01_every_component_in_upstream_order_owned_by_the_etcd() {
        let e = example(3);
        let all = all(&e, 3, &Settings::default());
        assert_eq!(
            names(&all),
            [
                "ServiceAccount/e",
                "Role/druid.gardener.cloud:etcd:e",
                "RoleBinding/druid.gardener.cloud:etcd:e",
                "Lease/e-0",
                "Lease/e-1",
                "Lease/e-2",
                "Lease/e-full-snap",
                "Lease/e-delta-snap",
                "PodDisruptionBudget/e",
                "Service/e-client",
                "Service/e-peer",
                "ConfigMap/e-config",
                "StatefulSet/e",
            ]
        );
        for o in &all {
            assert_eq!(o["metadata"]["ownerReferences"][0]["name"], "e");
            assert_eq!(o["metadata"]["ownerReferences"][0]["controller"], true);
            assert_eq!(
                o["metadata"]["labels"]["app.kubernetes.io/managed-by"],
                "etcd-druid"
            );
            assert_eq!(o["metadata"]["labels"]["app.kubernetes.io/part-of"], "e");
            let name_label = o["metadata"]["labels"]["app.kubernetes.io/name"]
                .as_str()
                .unwrap();
            assert!(!name_label.contains(':'), "{name_label}");
        }
        assert_eq!(all[8]["spec"]["minAvailable"], 2);
        assert_eq!(all[12]["spec"]["replicas"], 3);
    }

    #[test]
    fn scenario_09_no_store_no_snapshot_leases() {
        let mut e = example(1);
        e.spec.backup.store = None;
        assert!(snapshot_leases(&e).is_empty());
        let sts = statefulset(&e, 1, &Settings::default());
        let args = sts["spec"]["template"]["spec"]["containers"][1]["args"].to_string();
        assert!(!args.contains("--storage-provider"), "{args}");
    }

    #[test]
    fn scenario_10_three_members_in_the_config_and_pdb_of_two() {
        let one = example(1);
        let three = example(3);
        assert_eq!(pdb_min_available(1), 0);
        assert_eq!(pdb(&three)["spec"]["minAvailable"], 2);
        let cfg: Value = serde_yaml::from_str(&etcd_config(&three)).unwrap();
        assert_eq!(
            cfg["initial-cluster"],
            "e-0=http://e-0.e-peer.ns.svc:2380,e-1=http://e-1.e-peer.ns.svc:2380,e-2=http://e-2.e-peer.ns.svc:2380"
        );
        assert_eq!(
            cfg["advertise-client-urls"]["e-2"][0],
            "http://e-2.e-peer.ns.svc:2379"
        );
        assert_eq!(cfg["data-dir"], "/var/etcd/data/new.etcd");
        assert_eq!(cfg["quota-backend-bytes"], 8u64 << 30);
        // A new config rolls the pods: the checksum changes.
        assert_ne!(config_checksum(&one), config_checksum(&three));
        let sts = statefulset(&three, 3, &Settings::default());
        assert_eq!(
            sts["spec"]["template"]["metadata"]["annotations"][CONFIGMAP_CHECKSUM_ANNOTATION],
            config_checksum(&three)
        );
    }

    #[test]
    fn statefulset_shape_follows_upstream() {
        let e = example(3);
        let s = Settings {
            local_backup_root: "/data/buckets".into(),
            ..Settings::default()
        };
        let sts = statefulset(&e, 3, &s);
        let spec = &sts["spec"];
        assert_eq!(spec["podManagementPolicy"], "Parallel");
        assert_eq!(spec["serviceName"], "e-peer");
        assert_eq!(spec["volumeClaimTemplates"][0]["metadata"]["name"], "e");
        assert_eq!(
            spec["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
            "16Gi"
        );
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["hostAliases"][0]["hostnames"][0], "e-local");
        assert_eq!(pod["shareProcessNamespace"], true);
        assert_eq!(pod["securityContext"]["runAsUser"], 65532);
        let etcd = &pod["containers"][0];
        assert_eq!(etcd["readinessProbe"]["httpGet"]["port"], 9095);
        assert_eq!(etcd["args"][0], "start-etcd");
        let br = &pod["containers"][1];
        let args: Vec<&str> = br["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(args.contains(&"--storage-provider=Local"));
        assert!(args.contains(&"--full-snapshot-lease-name=e-full-snap"));
        assert!(args.contains(&"--delta-snapshot-lease-name=e-delta-snap"));
        assert_eq!(
            pod["volumes"][1]["hostPath"]["path"],
            "/data/buckets/default.bkp"
        );
        assert_eq!(
            spec["template"]["metadata"]["labels"]["app"],
            "etcd-statefulset"
        );
        assert_eq!(
            client_service(&e)["spec"]["selector"]["app.kubernetes.io/component"],
            "etcd-statefulset"
        );
        assert_eq!(peer_service(&e)["spec"]["clusterIP"], "None");
        assert_eq!(
            full_snapshot_url(&e, &Settings::default()),
            "http://e-client.ns.svc.cluster.local:8080/snapshot/full"
        );
    }

    #[test]
    fn quantities_and_schedules() {
        assert_eq!(parse_quantity("8Gi"), Some(8 << 30));
        assert_eq!(parse_quantity("100M"), Some(100_000_000));
        assert_eq!(parse_quantity("x"), None);
        assert_eq!(parse_quantity("99999999999999Ti"), None);
        assert_eq!(full_snapshot_interval(Some("0 */1 * * *")).as_secs(), 3600);
        assert_eq!(full_snapshot_interval(Some("*/5 * * * *")).as_secs(), 300);
        assert_eq!(full_snapshot_interval(Some("0 0 * * *")).as_secs(), 86_400);
        assert_eq!(full_snapshot_interval(None).as_secs(), 86_400);
    }
}
