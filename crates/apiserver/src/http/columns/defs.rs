//! The column definitions of each built-in kind, as kube-apiserver prints
//! them (wide-only columns have priority 1).

pub(super) const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub(super) const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// A column definition as `metav1.TableColumnDefinition` renders it.
pub(super) struct Col {
    pub(super) name: &'static str,
    pub(super) ty: &'static str,
    pub(super) format: &'static str,
    pub(super) priority: i64,
    pub(super) description: &'static str,
}

pub(super) const fn c(
    name: &'static str,
    ty: &'static str,
    priority: i64,
    description: &'static str,
) -> Col {
    Col {
        name,
        ty,
        format: "",
        priority,
        description,
    }
}

pub(super) const NAME: Col = Col {
    name: "Name",
    ty: "string",
    format: "name",
    priority: 0,
    description: NAME_DESC,
};
pub(super) const AGE: Col = c("Age", "string", 0, AGE_DESC);
pub(super) const CREATED_AT: Col = c("Created At", "date", 0, AGE_DESC);

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
pub(super) fn builtin_columns(group: &str, kind: &str) -> Option<&'static [Col]> {
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
        ("apps", "ReplicaSet") => cols![
            NAME,
            c(
                "Desired",
                "integer",
                0,
                "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/#replicaset"
            ),
            c(
                "Current",
                "integer",
                0,
                "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset"
            ),
            c(
                "Ready",
                "integer",
                0,
                "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition."
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
                "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
            ),
        ],
        ("apps", "ControllerRevision") => cols![
            NAME,
            c("Controller", "string", 0, "Controller of the object"),
            c(
                "Revision",
                "string",
                0,
                "Revision indicates the revision of the state represented by Data."
            ),
            AGE,
        ],
        ("batch", "Job") => cols![
            NAME,
            c("Status", "string", 0, "Status of the job."),
            c(
                "Completions",
                "string",
                0,
                "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs."
            ),
            c(
                "Duration",
                "string",
                0,
                "Time required to complete the job."
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
                "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
            ),
        ],
        ("batch", "CronJob") => cols![
            NAME,
            c(
                "Schedule",
                "string",
                0,
                "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."
            ),
            c(
                "Timezone",
                "string",
                0,
                "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones"
            ),
            c(
                "Suspend",
                "boolean",
                0,
                "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false."
            ),
            c(
                "Active",
                "integer",
                0,
                "A list of pointers to currently running jobs."
            ),
            c(
                "Last Schedule",
                "string",
                0,
                "Information when was the last time the job was successfully scheduled."
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
                "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
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
