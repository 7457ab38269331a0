//! The cells of a row: for each built-in kind the values kube-apiserver
//! prints (pod status reasons, node roles, service ports, …).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::*;
use crate::storage::registry::Resource;

/// The cells of one object's row, in the order of [`definitions`].
pub(crate) fn cells(res: &Resource, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(str_at(obj, "/metadata/name"));
    if !res.builtin {
        let mut out = vec![name];
        for col in custom_columns(res) {
            out.push(custom_cell(&col, obj, now));
        }
        return out;
    }
    let age = json!(age(str_at(obj, "/metadata/creationTimestamp"), now));
    match (res.group.as_str(), res.kind.as_str()) {
        _ if builtin_columns(&res.group, &res.kind).is_none() => {
            vec![name, json!(str_at(obj, "/metadata/creationTimestamp"))]
        }
        ("", "Pod") => pod_cells(obj, name, age, now),
        ("", "Node") => node_cells(obj, name, age),
        ("", "Namespace") => vec![name, json!(str_at(obj, "/status/phase")), age],
        ("", "Service") => service_cells(obj, name, age),
        ("", "ConfigMap") => vec![
            name,
            json!(len_at(obj, "/data") + len_at(obj, "/binaryData")),
            age,
        ],
        ("", "Secret") => vec![
            name,
            json!(str_at(obj, "/type")),
            json!(len_at(obj, "/data")),
            age,
        ],
        ("", "ServiceAccount") => vec![name, json!(len_at(obj, "/secrets")), age],
        ("", "Endpoints") => vec![name, json!(endpoints(obj)), age],
        ("", "Event") => event_cells(obj, now),
        ("events.k8s.io", "Event") => {
            event_cells(&crate::strategy::event::to_storage(res, obj.clone()), now)
        }
        ("", "PersistentVolume") => {
            let claim = match obj.pointer("/spec/claimRef") {
                Some(r) => format!("{}/{}", str_at(r, "/namespace"), str_at(r, "/name")),
                None => String::new(),
            };
            vec![
                name,
                json!(str_at(obj, "/spec/capacity/storage")),
                json!(access_modes(obj.pointer("/spec/accessModes"))),
                json!(str_at(obj, "/spec/persistentVolumeReclaimPolicy")),
                json!(str_at(obj, "/status/phase")),
                json!(claim),
                json!(str_at(obj, "/spec/storageClassName")),
                json!(or(
                    str_at(obj, "/spec/volumeAttributesClassName"),
                    "<unset>"
                )),
                json!(str_at(obj, "/status/reason")),
                age,
                json!(or(str_at(obj, "/spec/volumeMode"), "Filesystem")),
            ]
        }
        ("", "PersistentVolumeClaim") => vec![
            name,
            json!(str_at(obj, "/status/phase")),
            json!(str_at(obj, "/spec/volumeName")),
            json!(str_at(obj, "/status/capacity/storage")),
            json!(access_modes(obj.pointer("/status/accessModes"))),
            json!(str_at(obj, "/spec/storageClassName")),
            json!(or(
                str_at(obj, "/spec/volumeAttributesClassName"),
                "<unset>"
            )),
            age,
            json!(or(str_at(obj, "/spec/volumeMode"), "Filesystem")),
        ],
        ("discovery.k8s.io", "EndpointSlice") => endpoint_slice_cells(obj, name, age),
        ("coordination.k8s.io", "Lease") => {
            vec![name, json!(str_at(obj, "/spec/holderIdentity")), age]
        }
        ("apps", "Deployment") => {
            let (containers, images) = template_containers(obj);
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    int_at(obj, "/status/readyReplicas"),
                    obj.pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(1)
                )),
                json!(int_at(obj, "/status/updatedReplicas")),
                json!(int_at(obj, "/status/availableReplicas")),
                age,
                json!(containers),
                json!(images),
                json!(selector_string(obj.pointer("/spec/selector"))),
            ]
        }
        ("apps", "ReplicaSet") => {
            let (containers, images) = template_containers(obj);
            vec![
                name,
                json!(
                    obj.pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(1)
                ),
                json!(int_at(obj, "/status/replicas")),
                json!(int_at(obj, "/status/readyReplicas")),
                age,
                json!(containers),
                json!(images),
                json!(selector_string(obj.pointer("/spec/selector"))),
            ]
        }
        ("apps", "ControllerRevision") => vec![
            name,
            json!(controller_name(obj)),
            json!(int_at(obj, "/revision")),
            age,
        ],
        ("batch", "Job") => job_cells(obj, name, age, now),
        ("batch", "CronJob") => {
            let (containers, images) = containers_at(obj, "/spec/jobTemplate/spec/template");
            let last = match obj
                .pointer("/status/lastScheduleTime")
                .and_then(Value::as_str)
            {
                Some(t) => super::age(t, now),
                None => "<none>".into(),
            };
            let suspend = match obj.pointer("/spec/suspend").and_then(Value::as_bool) {
                Some(true) => "True",
                Some(false) => "False",
                None => "<unset>",
            };
            vec![
                name,
                json!(str_at(obj, "/spec/schedule")),
                json!(or(str_at(obj, "/spec/timeZone"), "<none>")),
                json!(suspend),
                json!(len_at(obj, "/status/active")),
                json!(last),
                age,
                json!(containers),
                json!(images),
                json!(selector_string(
                    obj.pointer("/spec/jobTemplate/spec/selector")
                )),
            ]
        }
        ("apps", "StatefulSet") => {
            let (containers, images) = template_containers(obj);
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    int_at(obj, "/status/readyReplicas"),
                    obj.pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(1)
                )),
                age,
                json!(containers),
                json!(images),
            ]
        }
        ("policy", "PodDisruptionBudget") => vec![
            name,
            json!(int_or_string(obj.pointer("/spec/minAvailable"))),
            json!(int_or_string(obj.pointer("/spec/maxUnavailable"))),
            json!(int_at(obj, "/status/disruptionsAllowed")),
            age,
        ],
        ("storage.k8s.io", "VolumeAttachment") => vec![
            name,
            json!(str_at(obj, "/spec/attacher")),
            json!(str_at(obj, "/spec/source/persistentVolumeName")),
            json!(str_at(obj, "/spec/nodeName")),
            json!(
                obj.pointer("/status/attached")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            ),
            age,
        ],
        ("apiextensions.k8s.io", _) | ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => {
            vec![name, json!(str_at(obj, "/metadata/creationTimestamp"))]
        }
        ("rbac.authorization.k8s.io", _) => {
            let subjects = |kind: &str| -> String {
                obj.get("subjects")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter(|s| str_at(s, "/kind") == kind)
                            .map(|s| {
                                if kind == "ServiceAccount" {
                                    format!("{}/{}", str_at(s, "/namespace"), str_at(s, "/name"))
                                } else {
                                    str_at(s, "/name").to_string()
                                }
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default()
            };
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    str_at(obj, "/roleRef/kind"),
                    str_at(obj, "/roleRef/name")
                )),
                age,
                json!(subjects("User")),
                json!(subjects("Group")),
                json!(subjects("ServiceAccount")),
            ]
        }
        _ => vec![name, json!(str_at(obj, "/metadata/creationTimestamp"))],
    }
}

pub(super) fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

pub(super) fn int_at(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

pub(super) fn len_at(v: &Value, ptr: &str) -> usize {
    match v.pointer(ptr) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

pub(super) fn or<'a>(s: &'a str, default: &'a str) -> &'a str {
    if s.is_empty() { default } else { s }
}

pub(super) fn int_or_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".into(),
    }
}

pub(super) fn access_modes(v: Option<&Value>) -> String {
    let mut out: Vec<&str> = Vec::new();
    for m in v.and_then(Value::as_array).into_iter().flatten() {
        let short = match m.as_str().unwrap_or("") {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            _ => continue,
        };
        if !out.contains(&short) {
            out.push(short);
        }
    }
    out.join(",")
}

/// A label selector as `a=b,c in (d)` (matchLabels sorted, then expressions).
pub(super) fn selector_string(sel: Option<&Value>) -> String {
    let Some(sel) = sel else {
        return "<none>".into();
    };
    let mut parts: Vec<String> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            let mut v: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            v.sort();
            v
        })
        .unwrap_or_default();
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = str_at(e, "/key");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        parts.push(match str_at(e, "/operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        });
    }
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    }
}

pub(super) fn template_containers(obj: &Value) -> (String, String) {
    containers_at(obj, "/spec/template")
}

/// The container names and images of the pod template at `template`.
pub(super) fn containers_at(obj: &Value, template: &str) -> (String, String) {
    let cs = obj
        .pointer(&format!("{template}/spec/containers"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = cs.iter().map(|c| str_at(c, "/name")).collect();
    let images: Vec<&str> = cs.iter().map(|c| str_at(c, "/image")).collect();
    (names.join(","), images.join(","))
}

pub(super) fn pod_status_reason(pod: &Value) -> (String, i64, i64) {
    let status = pod.get("status").cloned().unwrap_or(Value::Null);
    let mut reason = or(str_at(&status, "/phase"), "").to_string();
    if !str_at(&status, "/reason").is_empty() {
        reason = str_at(&status, "/reason").to_string();
    }
    let conditions = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if conditions
        .iter()
        .any(|c| str_at(c, "/type") == "PodScheduled" && str_at(c, "/reason") == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let mut restarts = 0;
    let mut ready = 0;
    let init_statuses = status
        .get("initContainerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let init_count = len_at(pod, "/spec/initContainers");
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        restarts += int_at(c, "/restartCount");
        let terminated = c.pointer("/state/terminated");
        let waiting_reason = str_at(c, "/state/waiting/reason");
        if terminated.is_some_and(|t| int_at(t, "/exitCode") == 0) {
            continue;
        }
        initializing = true;
        reason = if let Some(t) = terminated {
            if !str_at(t, "/reason").is_empty() {
                format!("Init:{}", str_at(t, "/reason"))
            } else if int_at(t, "/signal") != 0 {
                format!("Init:Signal:{}", int_at(t, "/signal"))
            } else {
                format!("Init:ExitCode:{}", int_at(t, "/exitCode"))
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{init_count}")
        };
        break;
    }
    if !initializing {
        let mut has_running = false;
        let statuses = status
            .get("containerStatuses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for c in statuses.iter().rev() {
            restarts += int_at(c, "/restartCount");
            let waiting = str_at(c, "/state/waiting/reason");
            let terminated = c.pointer("/state/terminated");
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(t) = terminated {
                reason = if !str_at(t, "/reason").is_empty() {
                    str_at(t, "/reason").to_string()
                } else if int_at(t, "/signal") != 0 {
                    format!("Signal:{}", int_at(t, "/signal"))
                } else {
                    format!("ExitCode:{}", int_at(t, "/exitCode"))
                };
            } else if c.get("ready").and_then(Value::as_bool) == Some(true)
                && c.pointer("/state/running").is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| str_at(c, "/type") == "Ready" && str_at(c, "/status") == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }
    let phase = str_at(&status, "/phase");
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        if str_at(&status, "/reason") == "NodeLost" {
            reason = "Unknown".into();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".into();
        }
    }
    (reason, restarts, ready)
}

pub(super) fn pod_cells(obj: &Value, name: Value, age: Value, now: DateTime<Utc>) -> Vec<Value> {
    let (reason, restarts, ready) = pod_status_reason(obj);
    let total = len_at(obj, "/spec/containers");
    // The most recent container restart, for "3 (5m ago)".
    let last_restart = ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|k| {
            obj.pointer(&format!("/status/{k}"))
                .and_then(Value::as_array)
        })
        .flatten()
        .filter_map(|c| {
            c.pointer("/lastState/terminated/finishedAt")
                .and_then(Value::as_str)
        })
        .filter_map(|t| DateTime::parse_from_rfc3339(t).ok())
        .max();
    let restarts = match last_restart {
        Some(t) if restarts > 0 => format!(
            "{restarts} ({} ago)",
            human_duration(now.signed_duration_since(t))
        ),
        _ => restarts.to_string(),
    };
    let gates: Vec<&str> = obj
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|g| str_at(g, "/conditionType")).collect())
        .unwrap_or_default();
    let gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let met = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .filter(|c| {
                        gates.contains(&str_at(c, "/type")) && str_at(c, "/status") == "True"
                    })
                    .count()
            })
            .unwrap_or(0);
        format!("{met}/{}", gates.len())
    };
    vec![
        name,
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts),
        age,
        json!(or(str_at(obj, "/status/podIP"), "<none>")),
        json!(or(str_at(obj, "/spec/nodeName"), "<none>")),
        json!(or(str_at(obj, "/status/nominatedNodeName"), "<none>")),
        json!(gates),
    ]
}

pub(super) fn node_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    let ready = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| str_at(c, "/type") == "Ready"))
        .map(|c| match str_at(c, "/status") {
            "True" => "Ready",
            "False" => "NotReady",
            _ => "Unknown",
        })
        .unwrap_or("Unknown");
    let mut status = ready.to_string();
    if obj.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                        Some(r.to_string())
                    } else if k == "kubernetes.io/role" {
                        v.as_str().map(str::to_string)
                    } else {
                        None
                    }
                })
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    let address = |ty: &str| -> String {
        obj.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| str_at(x, "/type") == ty))
            .map(|x| str_at(x, "/address").to_string())
            .unwrap_or_else(|| "<none>".into())
    };
    let info = |k: &str| or(str_at(obj, &format!("/status/nodeInfo/{k}")), "<unknown>").to_string();
    vec![
        name,
        json!(status),
        json!(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        age,
        json!(str_at(obj, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

pub(super) fn service_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    let ty = or(str_at(obj, "/spec/type"), "ClusterIP");
    let cluster_ip = or(str_at(obj, "/spec/clusterIP"), "<none>");
    let mut external: Vec<String> = obj
        .pointer("/spec/externalIPs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let external = match ty {
        "ExternalName" => str_at(obj, "/spec/externalName").to_string(),
        "LoadBalancer" => {
            for i in obj
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let v = or(str_at(i, "/ip"), str_at(i, "/hostname"));
                if !v.is_empty() {
                    external.push(v.to_string());
                }
            }
            if external.is_empty() {
                "<pending>".into()
            } else {
                external.join(",")
            }
        }
        _ if external.is_empty() => "<none>".into(),
        _ => external.join(","),
    };
    let ports: Vec<String> = obj
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|p| {
                    let proto = or(str_at(p, "/protocol"), "TCP");
                    match p.get("nodePort").and_then(Value::as_i64) {
                        Some(np) if np != 0 => format!("{}:{np}/{proto}", int_at(p, "/port")),
                        _ => format!("{}/{proto}", int_at(p, "/port")),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let selector = obj
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
        .map(|m| {
            let mut v: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            v.sort();
            v.join(",")
        })
        .unwrap_or_else(|| "<none>".into());
    vec![
        name,
        json!(ty),
        json!(cluster_ip),
        json!(external),
        json!(if ports.is_empty() {
            "<none>".to_string()
        } else {
            ports.join(",")
        }),
        age,
        json!(selector),
    ]
}

/// At most three `ip:port` entries, then "+ N more...", as kubectl shows.
pub(super) fn first_three(list: Vec<String>) -> String {
    if list.is_empty() {
        return "<none>".into();
    }
    let more = list.len().saturating_sub(3);
    let mut s = list.into_iter().take(3).collect::<Vec<_>>().join(",");
    if more > 0 {
        s.push_str(&format!(" + {more} more..."));
    }
    s
}

pub(super) fn endpoints(obj: &Value) -> String {
    let mut out = Vec::new();
    for subset in obj
        .get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let addrs: Vec<&str> = subset
            .get("addresses")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|x| str_at(x, "/ip")).collect())
            .unwrap_or_default();
        let ports: Vec<i64> = subset
            .get("ports")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|p| int_at(p, "/port")).collect())
            .unwrap_or_default();
        if ports.is_empty() {
            out.extend(addrs.iter().map(|a| a.to_string()));
        }
        for p in &ports {
            out.extend(addrs.iter().map(|a| format!("{a}:{p}")));
        }
    }
    first_three(out)
}

pub(super) fn endpoint_slice_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    let ports: Vec<String> = obj
        .get("ports")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|p| int_at(p, "/port").to_string()).collect())
        .unwrap_or_default();
    let addrs: Vec<String> = obj
        .get("endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|e| {
            e.get("addresses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    vec![
        name,
        json!(str_at(obj, "/addressType")),
        json!(if ports.is_empty() {
            "<unset>".to_string()
        } else {
            ports.join(",")
        }),
        json!(first_three(addrs)),
        age,
    ]
}

/// Cells of a core/v1 (stored-form) event.
pub(super) fn event_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let first = match str_at(obj, "/firstTimestamp") {
        "" => age(str_at(obj, "/eventTime"), now),
        t => age(t, now),
    };
    let mut last = match str_at(obj, "/lastTimestamp") {
        "" => first.clone(),
        t => age(t, now),
    };
    let mut count = int_at(obj, "/count");
    if let Some(series) = obj.get("series").filter(|s| s.is_object()) {
        last = age(str_at(series, "/lastObservedTime"), now);
        count = int_at(series, "/count");
    } else if count == 0 {
        count = 1;
    }
    let kind = str_at(obj, "/involvedObject/kind").to_lowercase();
    let target = match str_at(obj, "/involvedObject/name") {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let component = or(
        str_at(obj, "/source/component"),
        str_at(obj, "/reportingComponent"),
    );
    let instance = or(
        str_at(obj, "/source/host"),
        str_at(obj, "/reportingInstance"),
    );
    let source = match (component, instance) {
        ("", _) => "<unknown>".to_string(),
        (c, "") => c.to_string(),
        (c, i) => format!("{c}, {i}"),
    };
    vec![
        json!(last),
        json!(str_at(obj, "/type")),
        json!(str_at(obj, "/reason")),
        json!(target),
        json!(str_at(obj, "/involvedObject/fieldPath")),
        json!(source),
        json!(str_at(obj, "/message").trim()),
        json!(first),
        json!(count),
        json!(str_at(obj, "/metadata/name")),
    ]
}

/// `kind.group/name` of an object's controller (`<none>` without one), as
/// kubectl prints a ControllerRevision's owner.
pub(super) fn controller_name(obj: &Value) -> String {
    let controller = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| {
            refs.iter()
                .find(|r| r.get("controller") == Some(&json!(true)))
        });
    let Some(r) = controller else {
        return "<none>".into();
    };
    let group = str_at(r, "/apiVersion")
        .rsplit_once('/')
        .map(|(g, _)| g)
        .unwrap_or("");
    let kind = str_at(r, "/kind").to_lowercase();
    let kind = if group.is_empty() {
        kind
    } else {
        format!("{kind}.{group}")
    };
    format!("{kind}/{}", str_at(r, "/name"))
}

/// A Job's row: its state from the conditions that are True, completions
/// out of the wanted ones, and how long it ran.
pub(super) fn job_cells(obj: &Value, name: Value, age: Value, now: DateTime<Utc>) -> Vec<Value> {
    let succeeded = int_at(obj, "/status/succeeded");
    let completions = match obj.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => {
            let parallelism = int_at(obj, "/spec/parallelism");
            if parallelism > 1 {
                format!("{succeeded}/1 of {parallelism}")
            } else {
                format!("{succeeded}/1")
            }
        }
    };
    let time = |ptr: &str| {
        obj.pointer(ptr)
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    let duration = match (time("/status/startTime"), time("/status/completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => super::human_duration(now - start),
        (Some(start), Some(end)) => super::human_duration(end - start),
    };
    let has = |t: &str| {
        obj.pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| str_at(c, "/type") == t && str_at(c, "/status") == "True")
            })
    };
    let status = if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if obj.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let (containers, images) = template_containers(obj);
    vec![
        name,
        json!(status),
        json!(completions),
        json!(duration),
        age,
        json!(containers),
        json!(images),
        json!(selector_string(obj.pointer("/spec/selector"))),
    ]
}
