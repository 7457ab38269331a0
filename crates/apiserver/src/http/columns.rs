//! The columns of `kubectl get`: for each built-in kind the ones
//! kube-apiserver prints (wide-only columns have priority 1), for custom
//! resources their CRD's additionalPrinterColumns evaluated with a JSONPath
//! subset, and kube's human-readable ages (`5m`, `3h12m`, `2d`).
//!
//! The server always returns every column; kubectl hides priority > 0
//! columns unless asked for `-o wide`.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::storage::registry::{PrinterColumn, Resource};

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// A column definition as `metav1.TableColumnDefinition` renders it.
struct Col {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    priority: i64,
    description: &'static str,
}

const fn c(name: &'static str, ty: &'static str, priority: i64, description: &'static str) -> Col {
    Col {
        name,
        ty,
        format: "",
        priority,
        description,
    }
}

const NAME: Col = Col {
    name: "Name",
    ty: "string",
    format: "name",
    priority: 0,
    description: NAME_DESC,
};
const AGE: Col = c("Age", "string", 0, AGE_DESC);
const CREATED_AT: Col = c("Created At", "date", 0, AGE_DESC);

/// A `&'static [Col]` from column expressions (const fn calls are not
/// promoted to statics by `&[...]` alone).
macro_rules! cols {
    ($($c:expr),* $(,)?) => {{
        const COLS: &[Col] = &[$($c),*];
        COLS
    }};
}

/// Built-in columns per (group, kind); `None` for kinds printed as
/// Name / Created At, kube's default table.
fn builtin_columns(group: &str, kind: &str) -> Option<&'static [Col]> {
    Some(match (group, kind) {
        ("", "Pod") => cols![
            NAME,
            c(
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic."
            ),
            c(
                "Status",
                "string",
                0,
                "The aggregate status of the containers in this pod."
            ),
            c(
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."
            ),
            AGE,
            c(
                "IP",
                "string",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."
            ),
            c(
                "Node",
                "string",
                1,
                "NodeName is a request to schedule this pod onto a specific node."
            ),
            c(
                "Nominated Node",
                "string",
                1,
                "nominatedNodeName is set only when this pod preempts other pods on the node."
            ),
            c(
                "Readiness Gates",
                "string",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness."
            ),
        ],
        ("", "Node") => cols![
            NAME,
            c("Status", "string", 0, "The status of the node"),
            c("Roles", "string", 0, "The roles of the node"),
            AGE,
            c(
                "Version",
                "string",
                0,
                "Kubelet Version reported by the node."
            ),
            c(
                "Internal-IP",
                "string",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available."
            ),
            c(
                "External-IP",
                "string",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available."
            ),
            c(
                "OS-Image",
                "string",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."
            ),
            c(
                "Kernel-Version",
                "string",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."
            ),
            c(
                "Container-Runtime",
                "string",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2)."
            ),
        ],
        ("", "Namespace") => cols![
            NAME,
            c("Status", "string", 0, "The status of the namespace"),
            AGE,
        ],
        ("", "Service") => cols![
            NAME,
            c(
                "Type",
                "string",
                0,
                "type determines how the Service is exposed."
            ),
            c(
                "Cluster-IP",
                "string",
                0,
                "clusterIP is the IP address of the service and is usually assigned randomly."
            ),
            c(
                "External-IP",
                "string",
                0,
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service."
            ),
            c(
                "Port(s)",
                "string",
                0,
                "The list of ports that are exposed by this service."
            ),
            AGE,
            c(
                "Selector",
                "string",
                1,
                "Route service traffic to pods with label keys and values matching this selector."
            ),
        ],
        ("", "ConfigMap") => cols![
            NAME,
            c(
                "Data",
                "integer",
                0,
                "Data contains the configuration data."
            ),
            AGE,
        ],
        ("", "Secret") => cols![
            NAME,
            c(
                "Type",
                "string",
                0,
                "Used to facilitate programmatic handling of secret data."
            ),
            c("Data", "integer", 0, "Data contains the secret data."),
            AGE,
        ],
        ("", "ServiceAccount") => cols![
            NAME,
            c(
                "Secrets",
                "integer",
                0,
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use."
            ),
            AGE,
        ],
        ("", "Endpoints") => cols![
            NAME,
            c(
                "Endpoints",
                "string",
                0,
                "Endpoints is the list of endpoints in this set."
            ),
            AGE,
        ],
        ("", "Event") | ("events.k8s.io", "Event") => cols![
            c(
                "Last Seen",
                "string",
                0,
                "The time at which the most recent occurrence of this event was recorded."
            ),
            c(
                "Type",
                "string",
                0,
                "Type of this event (Normal, Warning), new types could be added in the future."
            ),
            c(
                "Reason",
                "string",
                0,
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."
            ),
            c(
                "Object",
                "string",
                0,
                "The object that this event is about."
            ),
            c(
                "Subobject",
                "string",
                1,
                "The field of the object that this event is about."
            ),
            c("Source", "string", 1, "The component reporting this event."),
            c(
                "Message",
                "string",
                0,
                "A human-readable description of the status of this operation."
            ),
            c(
                "First Seen",
                "string",
                1,
                "The time at which the event was first recorded."
            ),
            c(
                "Count",
                "integer",
                1,
                "The number of times this event has occurred."
            ),
            Col {
                priority: 1,
                ..NAME
            },
        ],
        ("", "PersistentVolume") => cols![
            NAME,
            c(
                "Capacity",
                "string",
                0,
                "capacity is the description of the persistent volume's resources and capacity."
            ),
            c(
                "Access Modes",
                "string",
                0,
                "accessModes contains all ways the volume can be mounted."
            ),
            c(
                "Reclaim Policy",
                "string",
                0,
                "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim."
            ),
            c(
                "Status",
                "string",
                0,
                "phase indicates if a volume is available, bound to a claim, or released by a claim."
            ),
            c(
                "Claim",
                "string",
                0,
                "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim."
            ),
            c(
                "StorageClass",
                "string",
                0,
                "storageClassName is the name of StorageClass to which this persistent volume belongs."
            ),
            c(
                "VolumeAttributesClass",
                "string",
                0,
                "Name of VolumeAttributesClass to which this persistent volume belongs."
            ),
            c(
                "Reason",
                "string",
                0,
                "reason is a brief CamelCase string that describes any failure."
            ),
            AGE,
            c(
                "VolumeMode",
                "string",
                1,
                "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state."
            ),
        ],
        ("", "PersistentVolumeClaim") => cols![
            NAME,
            c(
                "Status",
                "string",
                0,
                "phase represents the current phase of PersistentVolumeClaim."
            ),
            c(
                "Volume",
                "string",
                0,
                "volumeName is the binding reference to the PersistentVolume backing this claim."
            ),
            c(
                "Capacity",
                "string",
                0,
                "capacity represents the actual resources of the underlying volume."
            ),
            c(
                "Access Modes",
                "string",
                0,
                "accessModes contains the desired access modes the volume should have."
            ),
            c(
                "StorageClass",
                "string",
                0,
                "storageClassName is the name of the StorageClass required by the claim."
            ),
            c(
                "VolumeAttributesClass",
                "string",
                0,
                "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim."
            ),
            AGE,
            c(
                "VolumeMode",
                "string",
                1,
                "volumeMode defines what type of volume is required by the claim."
            ),
        ],
        ("discovery.k8s.io", "EndpointSlice") => cols![
            NAME,
            c(
                "AddressType",
                "string",
                0,
                "The IP protocol for this slice."
            ),
            c(
                "Ports",
                "string",
                0,
                "The ports exposed by each endpoint in this slice."
            ),
            c(
                "Endpoints",
                "string",
                0,
                "The list of endpoints in this slice."
            ),
            AGE,
        ],
        ("coordination.k8s.io", "Lease") => cols![
            NAME,
            c(
                "Holder",
                "string",
                0,
                "holderIdentity contains the identity of the holder of a current lease."
            ),
            AGE,
        ],
        ("apps", "Deployment") => cols![
            NAME,
            c("Ready", "string", 0, "Number of the pod with ready state"),
            c(
                "Up-to-date",
                "integer",
                0,
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec."
            ),
            c(
                "Available",
                "integer",
                0,
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."
            ),
            AGE,
            c(
                "Containers",
                "string",
                1,
                "Names of each container in the template."
            ),
            c(
                "Images",
                "string",
                1,
                "Images referenced by each container in the template."
            ),
            c(
                "Selector",
                "string",
                1,
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."
            ),
        ],
        ("apps", "StatefulSet") => cols![
            NAME,
            c("Ready", "string", 0, "Number of the pod with ready state"),
            AGE,
            c(
                "Containers",
                "string",
                1,
                "Names of each container in the template."
            ),
            c(
                "Images",
                "string",
                1,
                "Images referenced by each container in the template."
            ),
        ],
        ("policy", "PodDisruptionBudget") => cols![
            NAME,
            c(
                "Min Available",
                "string",
                0,
                "The minimum number of pods that must be available simultaneously. This can be either an integer or a string specifying a percentage, e.g. \"28%\"."
            ),
            c(
                "Max Unavailable",
                "string",
                0,
                "The maximum number of pods that may be unavailable simultaneously. This can be either an integer or a string specifying a percentage, e.g. \"28%\"."
            ),
            c(
                "Allowed Disruptions",
                "integer",
                0,
                "Calculated number of pods that may be disrupted at this time."
            ),
            AGE,
        ],
        ("storage.k8s.io", "VolumeAttachment") => cols![
            NAME,
            c(
                "Attacher",
                "string",
                0,
                "Attacher indicates the name of the volume driver that MUST handle this request."
            ),
            c(
                "PV",
                "string",
                0,
                "Name of the persistent volume to attach."
            ),
            c(
                "Node",
                "string",
                0,
                "The node that the volume should be attached to."
            ),
            c(
                "Attached",
                "boolean",
                0,
                "Indicates the volume is successfully attached."
            ),
            AGE,
        ],
        ("apiextensions.k8s.io", "CustomResourceDefinition") => cols![NAME, CREATED_AT],
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => cols![NAME, CREATED_AT],
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => cols![
            NAME,
            c(
                "Role",
                "string",
                0,
                "Role references the role this binding grants."
            ),
            AGE,
            c("Users", "string", 1, "Users in the binding"),
            c("Groups", "string", 1, "Groups in the binding"),
            c(
                "ServiceAccounts",
                "string",
                1,
                "ServiceAccounts in the binding"
            ),
        ],
        _ => return None,
    })
}

fn col_json(c: &Col) -> Value {
    json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
}

fn printer_col_json(p: &PrinterColumn) -> Value {
    json!({"name": p.name, "type": p.type_, "format": p.format.clone().unwrap_or_default(),
           "description": p.description, "priority": p.priority})
}

/// The default column of a custom resource without printer columns.
fn default_age_column() -> PrinterColumn {
    PrinterColumn {
        name: "Age".into(),
        type_: "date".into(),
        format: None,
        description: AGE_DESC.into(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }
}

fn custom_columns(res: &Resource) -> Vec<PrinterColumn> {
    if res.printer_columns.is_empty() {
        vec![default_age_column()]
    } else {
        res.printer_columns.clone()
    }
}

/// `columnDefinitions` of a resource's Table.
pub(crate) fn definitions(res: &Resource) -> Vec<Value> {
    if res.builtin {
        match builtin_columns(&res.group, &res.kind) {
            Some(cols) => cols.iter().map(col_json).collect(),
            None => vec![col_json(&NAME), col_json(&CREATED_AT)],
        }
    } else {
        std::iter::once(col_json(&NAME))
            .chain(custom_columns(res).iter().map(printer_col_json))
            .collect()
    }
}

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

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn int_at(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn len_at(v: &Value, ptr: &str) -> usize {
    match v.pointer(ptr) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

fn or<'a>(s: &'a str, default: &'a str) -> &'a str {
    if s.is_empty() { default } else { s }
}

fn int_or_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".into(),
    }
}

fn access_modes(v: Option<&Value>) -> String {
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
fn selector_string(sel: Option<&Value>) -> String {
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

fn template_containers(obj: &Value) -> (String, String) {
    let cs = obj
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = cs.iter().map(|c| str_at(c, "/name")).collect();
    let images: Vec<&str> = cs.iter().map(|c| str_at(c, "/image")).collect();
    (names.join(","), images.join(","))
}

fn pod_status_reason(pod: &Value) -> (String, i64, i64) {
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

fn pod_cells(obj: &Value, name: Value, age: Value, now: DateTime<Utc>) -> Vec<Value> {
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

fn node_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
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

fn service_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
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
fn first_three(list: Vec<String>) -> String {
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

fn endpoints(obj: &Value) -> String {
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

fn endpoint_slice_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
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
fn event_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
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

// ---------------------------------------------------------------------------
// Ages

/// The age of an RFC 3339 timestamp: `<unknown>` when absent or malformed.
pub(crate) fn age(ts: &str, now: DateTime<Utc>) -> String {
    match DateTime::parse_from_rfc3339(ts) {
        Ok(t) => human_duration(now.signed_duration_since(t)),
        Err(_) => "<unknown>".into(),
    }
}

/// A duration the way kubectl prints ages: two units while they matter
/// (`3m20s`, `3h12m`, `2d5h`, `3y40d`), one after.
pub(crate) fn human_duration(d: chrono::Duration) -> String {
    let secs = d.num_seconds();
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 60 * 2 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{h}h")
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        let dy = days % 365;
        return if dy == 0 {
            format!("{years}y")
        } else {
            format!("{years}y{dy}d")
        };
    }
    format!("{years}y")
}

// ---------------------------------------------------------------------------
// additionalPrinterColumns

fn custom_cell(col: &PrinterColumn, obj: &Value, now: DateTime<Utc>) -> Value {
    let Some(found) = crate::http::jsonpath::select(obj, &col.json_path) else {
        return Value::Null;
    };
    let found: Vec<&Value> = found.into_iter().filter(|v| !v.is_null()).collect();
    let Some(first) = found.first() else {
        return Value::Null;
    };
    match col.type_.as_str() {
        // Several matches (`.items[*].name`) print comma-joined.
        "string" => json!(
            found
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
        "integer" => match first {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map_or(Value::Null, |i| json!(i)),
            _ => Value::Null,
        },
        "number" => first.as_f64().map_or(Value::Null, |f| json!(f)),
        "boolean" => first.as_bool().map_or(Value::Null, |b| json!(b)),
        "date" => match first.as_str() {
            Some(s) => match DateTime::parse_from_rfc3339(s) {
                Ok(t) => json!(human_duration(now.signed_duration_since(t))),
                Err(_) => json!("<invalid>"),
            },
            None => Value::Null,
        },
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_like_kubectl() {
        let d = chrono::Duration::seconds;
        assert_eq!(human_duration(d(5)), "5s");
        assert_eq!(human_duration(d(119)), "119s");
        assert_eq!(human_duration(d(200)), "3m20s");
        assert_eq!(human_duration(d(300)), "5m");
        assert_eq!(human_duration(d(3 * 3600 + 12 * 60)), "3h12m");
        assert_eq!(human_duration(d(20 * 3600)), "20h");
        assert_eq!(human_duration(d(2 * 86400)), "2d");
        assert_eq!(human_duration(d(2 * 86400 + 5 * 3600)), "2d5h");
        assert_eq!(human_duration(d(40 * 86400)), "40d");
        assert_eq!(human_duration(d(-10)), "<invalid>");
    }

    #[test]
    fn pod_row() {
        let now = Utc::now();
        let created = (now - chrono::Duration::minutes(5)).to_rfc3339();
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": created},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let res = crate::strategy::resources()
            .into_iter()
            .find(|r| r.kind == "Pod")
            .unwrap();
        assert_eq!(
            cells(&res, &pod, now),
            [
                json!("p"),
                json!("1/2"),
                json!("CrashLoopBackOff"),
                json!("2"),
                json!("5m"),
                json!("10.0.0.1"),
                json!("n1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        assert_eq!(definitions(&res).len(), 9);
    }
}
