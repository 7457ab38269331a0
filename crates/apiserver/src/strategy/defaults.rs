//! kube-apiserver's built-in defaulting (the `SetDefaults_*` functions of
//! `k8s.io/kubernetes/pkg/apis/*/v1`) for the kinds this server hosts.
//!
//! kube applies these while decoding every create and update body, so the
//! defaults are part of what validation sees, what is stored, what
//! managedFields record for Update managers, and what `kubectl get -o yaml`,
//! `describe` and `diff` show. Leaving them out makes objects visibly
//! different from kube's (no Secret `TYPE`, no Deployment strategy, no
//! container port protocol), so every function here mirrors one kube
//! defaulter.
//!
//! Each kind's strategy names its defaulter and runs it through [`on`].
//! Everything is a pure function over `serde_json::Value`. A default is only
//! filled where the field is absent (or `null`, or the Go zero value kube
//! treats as unset); a field of the wrong JSON type is left alone so the
//! typed decode in validation reports it. Applying the defaults twice gives
//! the same object.

use serde_json::{Map, Value, json};

/// Runs the defaulter `f` of a kind on an object's top-level map (each
/// kind's strategy names its defaulter).
pub fn on(obj: &mut Value, f: fn(&mut Map<String, Value>)) {
    if let Some(o) = obj.as_object_mut() {
        f(o);
    }
}

/// Secrets: `type` is `Opaque` unless set.
pub fn secret(o: &mut Map<String, Value>) {
    set_str(o, "type", "Opaque");
}

/// Whether `m[key]` counts as unset for a Go pointer or slice: absent or null.
fn unset(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).is_none_or(Value::is_null)
}

/// Sets `m[key]` when absent or null (kube's `if obj.X == nil`).
fn set(m: &mut Map<String, Value>, key: &str, v: Value) {
    if unset(m, key) {
        m.insert(key.to_string(), v);
    }
}

/// Sets a string field when absent, null or empty (kube's `if obj.X == ""`).
fn set_str(m: &mut Map<String, Value>, key: &str, v: &str) {
    if unset(m, key) || m.get(key).is_some_and(|x| x == "") {
        m.insert(key.to_string(), json!(v));
    }
}

/// Sets an integer field when absent, null or 0 (a Go non-pointer int).
fn set_nonzero(m: &mut Map<String, Value>, key: &str, v: i64) {
    if unset(m, key) || m.get(key).is_some_and(|x| x.as_i64() == Some(0)) {
        m.insert(key.to_string(), json!(v));
    }
}

/// The object at `m[key]`, created when absent or null: for fields that are
/// Go structs by value (always present after decoding) or pointers that the
/// defaulter allocates. A non-object value is left for validation.
fn child<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    let v = m
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if v.is_null() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut()
}

/// The object at `m[key]` if there is one (a Go pointer left nil when unset).
fn existing<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    m.get_mut(key).and_then(Value::as_object_mut)
}

/// The objects of the list at `m[key]` (non-objects skipped).
fn items<'a>(
    m: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    m.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

pub fn pod(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    // SetDefaults_Pod: requests default to limits, for pods only (not
    // templates), before the PodSpec defaults.
    for key in ["containers", "initContainers"] {
        for c in items(spec, key) {
            requests_from_limits(c);
        }
    }
    set(spec, "enableServiceLinks", json!(true));
    if spec.get("hostNetwork") == Some(&json!(true)) {
        for key in ["containers", "initContainers"] {
            for c in items(spec, key) {
                for p in items(c, "ports") {
                    if unset(p, "hostPort") || p.get("hostPort").and_then(Value::as_i64) == Some(0)
                    {
                        let port = p.get("containerPort").cloned().unwrap_or(Value::Null);
                        p.insert("hostPort".into(), port);
                    }
                }
            }
        }
    }
    pod_spec(spec);
}

fn requests_from_limits(c: &mut Map<String, Value>) {
    let Some(res) = existing(c, "resources") else {
        return;
    };
    let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    if let Some(requests) = child(res, "requests") {
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
}

/// SetDefaults_PodSpec and everything it reaches: containers, volumes.
fn pod_spec(spec: &mut Map<String, Value>) {
    set_str(spec, "dnsPolicy", "ClusterFirst");
    set_str(spec, "restartPolicy", "Always");
    set(spec, "securityContext", json!({}));
    set(spec, "terminationGracePeriodSeconds", json!(30));
    set_str(spec, "schedulerName", "default-scheduler");
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        for c in items(spec, key) {
            container(c);
        }
    }
    for v in items(spec, "volumes") {
        volume(v);
    }
}

/// The pod template of a workload spec.
fn pod_template(spec: &mut Map<String, Value>) {
    if let Some(t) = child(spec, "template")
        && let Some(ps) = child(t, "spec")
    {
        pod_spec(ps);
    }
}

/// kube's image pull policy default: `Always` for `:latest` or an image with
/// neither tag nor digest, `IfNotPresent` otherwise (also for an image that
/// does not parse, such as the empty one).
pub fn pull_policy(image: &str) -> &'static str {
    if image.is_empty() {
        return "IfNotPresent";
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    // A `:` before the last `/` is a registry port, not a tag.
    let last = name.rsplit('/').next().unwrap_or(name);
    match (last.split_once(':').map(|(_, t)| t), digest) {
        (Some("latest"), _) | (None, None) => "Always",
        _ => "IfNotPresent",
    }
}

fn container(c: &mut Map<String, Value>) {
    if unset(c, "imagePullPolicy") || c.get("imagePullPolicy").is_some_and(|x| x == "") {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = pull_policy(image);
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    set_str(c, "terminationMessagePath", "/dev/termination-log");
    set_str(c, "terminationMessagePolicy", "File");
    for p in items(c, "ports") {
        set_str(p, "protocol", "TCP");
    }
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = existing(c, key) {
            set_nonzero(p, "timeoutSeconds", 1);
            set_nonzero(p, "periodSeconds", 10);
            set_nonzero(p, "successThreshold", 1);
            set_nonzero(p, "failureThreshold", 3);
            http_get(p);
        }
    }
    if let Some(lc) = existing(c, "lifecycle") {
        for key in ["postStart", "preStop"] {
            if let Some(h) = existing(lc, key) {
                http_get(h);
            }
        }
    }
    for e in items(c, "env") {
        if let Some(vf) = existing(e, "valueFrom") {
            field_ref(vf);
        }
    }
}

fn http_get(handler: &mut Map<String, Value>) {
    if let Some(h) = existing(handler, "httpGet") {
        set_str(h, "path", "/");
        set_str(h, "scheme", "HTTP");
    }
}

/// SetDefaults_ObjectFieldSelector on `m.fieldRef`.
fn field_ref(m: &mut Map<String, Value>) {
    if let Some(f) = existing(m, "fieldRef") {
        set_str(f, "apiVersion", "v1");
    }
}

/// File mode 0644, kube's default for projected files.
const DEFAULT_MODE: i64 = 0o644;

/// Every volume source kube knows; a volume naming none becomes `emptyDir`.
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

fn volume(v: &mut Map<String, Value>) {
    if VOLUME_SOURCES.iter().all(|s| unset(v, s)) {
        v.insert("emptyDir".into(), json!({}));
    }
    if let Some(h) = existing(v, "hostPath") {
        set(h, "type", json!(""));
    }
    for key in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = existing(v, key) {
            set(s, "defaultMode", json!(DEFAULT_MODE));
        }
    }
    if let Some(d) = existing(v, "downwardAPI") {
        for item in items(d, "items") {
            field_ref(item);
        }
    }
    if let Some(p) = existing(v, "projected") {
        for src in items(p, "sources") {
            if let Some(d) = existing(src, "downwardAPI") {
                for item in items(d, "items") {
                    field_ref(item);
                }
            }
            if let Some(t) = existing(src, "serviceAccountToken") {
                set(t, "expirationSeconds", json!(3600));
            }
        }
    }
}

pub fn deployment(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set(spec, "replicas", json!(1));
    if let Some(strategy) = child(spec, "strategy") {
        set_str(strategy, "type", "RollingUpdate");
        if strategy.get("type") == Some(&json!("RollingUpdate"))
            && let Some(ru) = child(strategy, "rollingUpdate")
        {
            set(ru, "maxUnavailable", json!("25%"));
            set(ru, "maxSurge", json!("25%"));
        }
    }
    set(spec, "revisionHistoryLimit", json!(10));
    set(spec, "progressDeadlineSeconds", json!(600));
    pod_template(spec);
}

pub fn stateful_set(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set_str(spec, "podManagementPolicy", "OrderedReady");
    if let Some(us) = child(spec, "updateStrategy") {
        if unset(us, "type") || us.get("type").is_some_and(|t| t == "") {
            us.insert("type".into(), json!("RollingUpdate"));
            set(us, "rollingUpdate", json!({}));
        }
        if us.get("type") == Some(&json!("RollingUpdate"))
            && let Some(ru) = existing(us, "rollingUpdate")
        {
            set(ru, "partition", json!(0));
        }
    }
    // StatefulSetAutoDeletePVC is GA in 1.32.
    if let Some(p) = child(spec, "persistentVolumeClaimRetentionPolicy") {
        set_str(p, "whenDeleted", "Retain");
        set_str(p, "whenScaled", "Retain");
    }
    set(spec, "replicas", json!(1));
    set(spec, "revisionHistoryLimit", json!(10));
    pod_template(spec);
    for pvc in items(spec, "volumeClaimTemplates") {
        persistent_volume_claim(pvc);
    }
}

/// ReplicaSets: one replica unless set (`SetDefaults_ReplicaSet`).
pub fn replica_set(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set(spec, "replicas", json!(1));
    pod_template(spec);
}

/// Jobs (`SetDefaults_Job`): one completion at a time unless either is
/// set, a back-off limit of 6, non-indexed, not suspended, replacing pods
/// once terminating or failed; the template's labels label the Job.
pub fn job(o: &mut Map<String, Value>) {
    let template_labels = o
        .get("spec")
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned();
    if let Some(labels) = template_labels
        && o.get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .is_none_or(|m| m.is_empty())
        && let Some(meta) = child(o, "metadata")
    {
        meta.insert("labels".into(), labels);
    }
    let Some(spec) = child(o, "spec") else {
        return;
    };
    job_spec(spec);
}

fn job_spec(spec: &mut Map<String, Value>) {
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    set(spec, "parallelism", json!(1));
    if unset(spec, "backoffLimit") {
        let limit = if unset(spec, "backoffLimitPerIndex") {
            6
        } else {
            i64::from(i32::MAX)
        };
        spec.insert("backoffLimit".into(), json!(limit));
    }
    set_str(spec, "completionMode", "NonIndexed");
    set(spec, "suspend", json!(false));
    let replacement = if unset(spec, "podFailurePolicy") {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    set_str(spec, "podReplacementPolicy", replacement);
    pod_template(spec);
}

/// CronJobs (`SetDefaults_CronJob`): concurrent runs allowed, not
/// suspended, three successful and one failed Job kept. The Job template's
/// own spec gets only its pod template's defaults, as upstream.
pub fn cron_job(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set_str(spec, "concurrencyPolicy", "Allow");
    set(spec, "suspend", json!(false));
    set(spec, "successfulJobsHistoryLimit", json!(3));
    set(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(t) = child(spec, "jobTemplate")
        && let Some(js) = child(t, "spec")
    {
        pod_template(js);
    }
}

pub fn service(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else {
        return;
    };
    set_str(spec, "sessionAffinity", "None");
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        Some("None") => {
            spec.remove("sessionAffinityConfig");
        }
        Some("ClientIP") => {
            if let Some(c) = child(spec, "sessionAffinityConfig")
                && let Some(ip) = child(c, "clientIP")
            {
                set(ip, "timeoutSeconds", json!(10800));
            }
        }
        _ => {}
    }
    set_str(spec, "type", "ClusterIP");
    for p in items(spec, "ports") {
        set_str(p, "protocol", "TCP");
        let target_unset = unset(p, "targetPort")
            || p.get("targetPort")
                .is_some_and(|t| t == "" || t.as_i64() == Some(0));
        if target_unset && let Some(port) = p.get("port").filter(|v| v.is_number()).cloned() {
            p.insert("targetPort".into(), port);
        }
    }
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let has_external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let externally_accessible =
        ty == "LoadBalancer" || ty == "NodePort" || (ty == "ClusterIP" && has_external_ips);
    if externally_accessible {
        set_str(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(ty.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        set(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        set(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

pub fn persistent_volume_claim(o: &mut Map<String, Value>) {
    if let Some(spec) = child(o, "spec") {
        set(spec, "volumeMode", json!("Filesystem"));
    }
    if let Some(status) = child(o, "status") {
        set_str(status, "phase", "Pending");
    }
}

pub fn persistent_volume(o: &mut Map<String, Value>) {
    if let Some(spec) = child(o, "spec") {
        set_str(spec, "persistentVolumeReclaimPolicy", "Retain");
        set(spec, "volumeMode", json!("Filesystem"));
        if let Some(h) = existing(spec, "hostPath") {
            set(h, "type", json!(""));
        }
    }
    if let Some(status) = child(o, "status") {
        set_str(status, "phase", "Pending");
    }
}

pub fn node(o: &mut Map<String, Value>) {
    // SetDefaults_NodeStatus: allocatable defaults to capacity.
    if let Some(status) = existing(o, "status")
        && unset(status, "allocatable")
        && let Some(cap) = status.get("capacity").filter(|c| c.is_object()).cloned()
    {
        status.insert("allocatable".into(), cap);
    }
}

pub fn endpoints(o: &mut Map<String, Value>) {
    for subset in items(o, "subsets") {
        for p in items(subset, "ports") {
            set_str(p, "protocol", "TCP");
        }
    }
}

pub fn endpoint_slice(o: &mut Map<String, Value>) {
    for p in items(o, "ports") {
        set(p, "name", json!(""));
        set(p, "protocol", json!("TCP"));
    }
}

pub fn role_binding(o: &mut Map<String, Value>) {
    if let Some(r) = existing(o, "roleRef") {
        set_str(r, "apiGroup", "rbac.authorization.k8s.io");
    }
    // A ServiceAccount subject's group is "", which Go leaves out of the
    // JSON (`omitempty`), so only users and groups visibly get one.
    for s in items(o, "subjects") {
        if matches!(
            s.get("kind").and_then(Value::as_str),
            Some("User" | "Group")
        ) {
            set_str(s, "apiGroup", "rbac.authorization.k8s.io");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube's defaults for `group`/`kind`, through the kind's strategy as
    /// the server applies them.
    fn apply(group: &str, kind: &str, obj: &mut Value) {
        let res = crate::strategy::resources()
            .into_iter()
            .find(|r| r.group == group && r.kind == kind)
            .expect("a built-in kind");
        res.strategy.apply_defaults(&res, obj);
    }

    /// One defaulting case: the object sent, and the values wanted at JSON
    /// pointers afterwards (`None`: must stay absent).
    struct Case {
        name: &'static str,
        group: &'static str,
        kind: &'static str,
        input: Value,
        want: Vec<(&'static str, Option<Value>)>,
    }

    fn pod_with(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "secret type",
                group: "",
                kind: "Secret",
                input: json!({"metadata": {"name": "s"}}),
                want: vec![("/type", Some(json!("Opaque")))],
            },
            Case {
                name: "secret type kept",
                group: "",
                kind: "Secret",
                input: json!({"type": "kubernetes.io/tls"}),
                want: vec![("/type", Some(json!("kubernetes.io/tls")))],
            },
            Case {
                name: "pod spec and containers",
                group: "",
                kind: "Pod",
                input: pod_with(json!({"containers": [
                    {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}]},
                    {"name": "b", "image": "nginx:1.27"},
                    {"name": "c", "image": "reg:5000/app"},
                    {"name": "d", "image": "app@sha256:abc"},
                    {"name": "e", "image": "app:latest", "imagePullPolicy": "Never"},
                ]})),
                want: vec![
                    ("/spec/restartPolicy", Some(json!("Always"))),
                    ("/spec/dnsPolicy", Some(json!("ClusterFirst"))),
                    ("/spec/terminationGracePeriodSeconds", Some(json!(30))),
                    ("/spec/schedulerName", Some(json!("default-scheduler"))),
                    ("/spec/securityContext", Some(json!({}))),
                    ("/spec/enableServiceLinks", Some(json!(true))),
                    (
                        "/spec/containers/0/terminationMessagePath",
                        Some(json!("/dev/termination-log")),
                    ),
                    (
                        "/spec/containers/0/terminationMessagePolicy",
                        Some(json!("File")),
                    ),
                    ("/spec/containers/0/imagePullPolicy", Some(json!("Always"))),
                    ("/spec/containers/0/ports/0/protocol", Some(json!("TCP"))),
                    ("/spec/containers/0/ports/0/hostPort", None),
                    (
                        "/spec/containers/1/imagePullPolicy",
                        Some(json!("IfNotPresent")),
                    ),
                    ("/spec/containers/2/imagePullPolicy", Some(json!("Always"))),
                    (
                        "/spec/containers/3/imagePullPolicy",
                        Some(json!("IfNotPresent")),
                    ),
                    ("/spec/containers/4/imagePullPolicy", Some(json!("Never"))),
                ],
            },
            Case {
                name: "pod given values kept",
                group: "",
                kind: "Pod",
                input: pod_with(
                    json!({"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "a", "image": "x:1", "ports": [{"containerPort": 53, "protocol": "UDP"}]}]}),
                ),
                want: vec![
                    ("/spec/restartPolicy", Some(json!("Never"))),
                    ("/spec/terminationGracePeriodSeconds", Some(json!(0))),
                    ("/spec/containers/0/ports/0/protocol", Some(json!("UDP"))),
                ],
            },
            Case {
                name: "pod host network, requests, probes, volumes",
                group: "",
                kind: "Pod",
                input: pod_with(json!({"hostNetwork": true, "containers": [{
                    "name": "a", "image": "x:1", "ports": [{"containerPort": 8080}],
                    "resources": {"limits": {"cpu": "1"}},
                    "readinessProbe": {"httpGet": {"port": 80}},
                    "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                }], "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "x"}}]})),
                want: vec![
                    ("/spec/containers/0/ports/0/hostPort", Some(json!(8080))),
                    (
                        "/spec/containers/0/resources/requests/cpu",
                        Some(json!("1")),
                    ),
                    (
                        "/spec/containers/0/readinessProbe/periodSeconds",
                        Some(json!(10)),
                    ),
                    (
                        "/spec/containers/0/readinessProbe/failureThreshold",
                        Some(json!(3)),
                    ),
                    (
                        "/spec/containers/0/readinessProbe/httpGet/path",
                        Some(json!("/")),
                    ),
                    (
                        "/spec/containers/0/readinessProbe/httpGet/scheme",
                        Some(json!("HTTP")),
                    ),
                    (
                        "/spec/containers/0/env/0/valueFrom/fieldRef/apiVersion",
                        Some(json!("v1")),
                    ),
                    ("/spec/volumes/0/emptyDir", Some(json!({}))),
                    ("/spec/volumes/1/secret/defaultMode", Some(json!(420))),
                    ("/spec/volumes/1/emptyDir", None),
                ],
            },
            Case {
                name: "deployment",
                group: "apps",
                kind: "Deployment",
                input: json!({"spec": {"selector": {"matchLabels": {"a": "b"}},
                    "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
                want: vec![
                    ("/spec/replicas", Some(json!(1))),
                    ("/spec/strategy/type", Some(json!("RollingUpdate"))),
                    (
                        "/spec/strategy/rollingUpdate/maxUnavailable",
                        Some(json!("25%")),
                    ),
                    ("/spec/strategy/rollingUpdate/maxSurge", Some(json!("25%"))),
                    ("/spec/revisionHistoryLimit", Some(json!(10))),
                    ("/spec/progressDeadlineSeconds", Some(json!(600))),
                    ("/spec/template/spec/restartPolicy", Some(json!("Always"))),
                    (
                        "/spec/template/spec/containers/0/imagePullPolicy",
                        Some(json!("Always")),
                    ),
                    // Pod-only defaults stay out of templates.
                    ("/spec/template/spec/enableServiceLinks", None),
                ],
            },
            Case {
                name: "deployment recreate, replicas 0 kept",
                group: "apps",
                kind: "Deployment",
                input: json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}}}),
                want: vec![
                    ("/spec/replicas", Some(json!(0))),
                    ("/spec/strategy/rollingUpdate", None),
                ],
            },
            Case {
                name: "statefulset",
                group: "apps",
                kind: "StatefulSet",
                input: json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": {}}]}}),
                want: vec![
                    ("/spec/podManagementPolicy", Some(json!("OrderedReady"))),
                    ("/spec/updateStrategy/type", Some(json!("RollingUpdate"))),
                    (
                        "/spec/updateStrategy/rollingUpdate/partition",
                        Some(json!(0)),
                    ),
                    ("/spec/replicas", Some(json!(1))),
                    ("/spec/revisionHistoryLimit", Some(json!(10))),
                    (
                        "/spec/persistentVolumeClaimRetentionPolicy/whenDeleted",
                        Some(json!("Retain")),
                    ),
                    (
                        "/spec/volumeClaimTemplates/0/spec/volumeMode",
                        Some(json!("Filesystem")),
                    ),
                    (
                        "/spec/template/spec/schedulerName",
                        Some(json!("default-scheduler")),
                    ),
                ],
            },
            Case {
                name: "statefulset OnDelete gets no rollingUpdate",
                group: "apps",
                kind: "StatefulSet",
                input: json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}),
                want: vec![("/spec/updateStrategy/rollingUpdate", None)],
            },
            Case {
                name: "service",
                group: "",
                kind: "Service",
                input: json!({"spec": {"ports": [{"port": 80}, {"port": 443, "targetPort": "https"}]}}),
                want: vec![
                    ("/spec/sessionAffinity", Some(json!("None"))),
                    ("/spec/type", Some(json!("ClusterIP"))),
                    ("/spec/internalTrafficPolicy", Some(json!("Cluster"))),
                    ("/spec/externalTrafficPolicy", None),
                    ("/spec/ports/0/protocol", Some(json!("TCP"))),
                    ("/spec/ports/0/targetPort", Some(json!(80))),
                    ("/spec/ports/1/targetPort", Some(json!("https"))),
                ],
            },
            Case {
                name: "service load balancer",
                group: "",
                kind: "Service",
                input: json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP"}}),
                want: vec![
                    ("/spec/externalTrafficPolicy", Some(json!("Cluster"))),
                    ("/spec/allocateLoadBalancerNodePorts", Some(json!(true))),
                    (
                        "/spec/sessionAffinityConfig/clientIP/timeoutSeconds",
                        Some(json!(10800)),
                    ),
                ],
            },
            Case {
                name: "replicaset",
                group: "apps",
                kind: "ReplicaSet",
                input: json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i:1"}]}}}}),
                want: vec![
                    ("/spec/replicas", Some(json!(1))),
                    ("/spec/template/spec/restartPolicy", Some(json!("Always"))),
                ],
            },
            Case {
                name: "job",
                group: "batch",
                kind: "Job",
                input: json!({"spec": {"template": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i:1"}]}}}}),
                want: vec![
                    ("/metadata/labels/a", Some(json!("b"))),
                    ("/spec/completions", Some(json!(1))),
                    ("/spec/parallelism", Some(json!(1))),
                    ("/spec/backoffLimit", Some(json!(6))),
                    ("/spec/completionMode", Some(json!("NonIndexed"))),
                    ("/spec/suspend", Some(json!(false))),
                    (
                        "/spec/podReplacementPolicy",
                        Some(json!("TerminatingOrFailed")),
                    ),
                    ("/spec/template/spec/restartPolicy", Some(json!("Never"))),
                ],
            },
            Case {
                name: "job with parallelism only",
                group: "batch",
                kind: "Job",
                input: json!({"spec": {"parallelism": 3}}),
                want: vec![
                    ("/spec/completions", None),
                    ("/spec/parallelism", Some(json!(3))),
                ],
            },
            Case {
                name: "cronjob",
                group: "batch",
                kind: "CronJob",
                input: json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {
                    "template": {"spec": {"containers": [{"name": "c", "image": "i:1"}]}}}}}}),
                want: vec![
                    ("/spec/concurrencyPolicy", Some(json!("Allow"))),
                    ("/spec/suspend", Some(json!(false))),
                    ("/spec/successfulJobsHistoryLimit", Some(json!(3))),
                    ("/spec/failedJobsHistoryLimit", Some(json!(1))),
                    // The Job template's spec keeps only pod defaults.
                    ("/spec/jobTemplate/spec/backoffLimit", None),
                    (
                        "/spec/jobTemplate/spec/template/spec/restartPolicy",
                        Some(json!("Always")),
                    ),
                ],
            },
            Case {
                name: "pvc",
                group: "",
                kind: "PersistentVolumeClaim",
                input: json!({"spec": {}}),
                want: vec![("/spec/volumeMode", Some(json!("Filesystem")))],
            },
            Case {
                name: "pv",
                group: "",
                kind: "PersistentVolume",
                input: json!({"spec": {}}),
                want: vec![
                    ("/spec/persistentVolumeReclaimPolicy", Some(json!("Retain"))),
                    ("/spec/volumeMode", Some(json!("Filesystem"))),
                ],
            },
            Case {
                name: "endpoint slice ports",
                group: "discovery.k8s.io",
                kind: "EndpointSlice",
                input: json!({"ports": [{"port": 80}]}),
                want: vec![
                    ("/ports/0/protocol", Some(json!("TCP"))),
                    ("/ports/0/name", Some(json!(""))),
                ],
            },
            Case {
                name: "role binding subjects",
                group: "rbac.authorization.k8s.io",
                kind: "RoleBinding",
                input: json!({"roleRef": {"kind": "Role", "name": "r"},
                    "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}]}),
                want: vec![
                    (
                        "/roleRef/apiGroup",
                        Some(json!("rbac.authorization.k8s.io")),
                    ),
                    (
                        "/subjects/0/apiGroup",
                        Some(json!("rbac.authorization.k8s.io")),
                    ),
                    ("/subjects/1/apiGroup", None),
                ],
            },
            Case {
                name: "configmap untouched",
                group: "",
                kind: "ConfigMap",
                input: json!({"data": {"a": "b"}}),
                want: vec![("/type", None), ("/spec", None)],
            },
            Case {
                name: "wrong types are left for validation",
                group: "",
                kind: "Pod",
                input: json!({"spec": {"containers": "nope", "securityContext": 3}}),
                want: vec![
                    ("/spec/containers", Some(json!("nope"))),
                    ("/spec/securityContext", Some(json!(3))),
                ],
            },
        ]
    }

    #[test]
    fn table() {
        for case in cases() {
            let mut obj = case.input.clone();
            apply(case.group, case.kind, &mut obj);
            for (ptr, want) in &case.want {
                assert_eq!(
                    obj.pointer(ptr),
                    want.as_ref(),
                    "{}: {ptr} in {obj:#}",
                    case.name
                );
            }
            // Defaulting is idempotent.
            let mut again = obj.clone();
            apply(case.group, case.kind, &mut again);
            assert_eq!(
                again, obj,
                "{}: defaulting twice changed the object",
                case.name
            );
        }
    }

    #[test]
    fn pull_policies() {
        for (image, want) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("localhost:5000/nginx", "Always"),
            ("localhost:5000/nginx:2", "IfNotPresent"),
            ("nginx@sha256:0123", "IfNotPresent"),
            ("nginx:latest@sha256:0123", "Always"),
            ("", "IfNotPresent"),
        ] {
            assert_eq!(pull_policy(image), want, "{image}");
        }
    }

    #[test]
    fn non_objects_are_ignored() {
        let mut v = json!([1, 2]);
        apply("", "Pod", &mut v);
        assert_eq!(v, json!([1, 2]));
    }
}
