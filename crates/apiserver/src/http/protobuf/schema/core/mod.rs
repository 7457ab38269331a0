//! Protobuf field tables of core/v1 (`k8s.io/api/core/v1`): Namespace,
//! ConfigMap, Secret, ServiceAccount, Service, Pod (with the whole PodSpec and
//! PodStatus), Node, Endpoints, PersistentVolumeClaim and Event. Volumes and
//! containers, the largest parts of a PodSpec, have their own files.
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

mod container;
mod volume;

use super::Ty::{
    Bool, Bytes, I32, I64, Inline, IntOrString, Map, MicroTime, Msg, Quantity, Str, Time,
};
use super::{Table, f};
pub(crate) use container::*;
pub(crate) use volume::*;

pub(crate) const NAMESPACE: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(NAMESPACE_SPEC)),
    f(3, "status", Msg(NAMESPACE_STATUS)),
];
pub(crate) const NAMESPACE_SPEC: Table = &[f(1, "finalizers", Str).list()];
pub(crate) const NAMESPACE_STATUS: Table = &[
    f(1, "phase", Str),
    f(2, "conditions", Msg(NAMESPACE_CONDITION)).list(),
];
pub(crate) const NAMESPACE_CONDITION: Table = &[
    f(1, "type", Str).keep(),
    f(2, "status", Str).keep(),
    f(4, "lastTransitionTime", Time),
    f(5, "reason", Str),
    f(6, "message", Str),
];
pub(crate) const CONFIG_MAP: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(4, "immutable", Bool).keep(),
    f(2, "data", Map(&Str)),
    f(3, "binaryData", Map(&Bytes)),
];
pub(crate) const SECRET: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(5, "immutable", Bool).keep(),
    f(2, "data", Map(&Bytes)),
    f(4, "stringData", Map(&Str)),
    f(3, "type", Str),
];
pub(crate) const SERVICE_ACCOUNT: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "secrets", Msg(OBJECT_REFERENCE)).list(),
    f(3, "imagePullSecrets", Msg(LOCAL_OBJECT_REFERENCE)).list(),
    f(4, "automountServiceAccountToken", Bool).keep(),
];
pub(crate) const OBJECT_REFERENCE: Table = &[
    f(1, "kind", Str),
    f(2, "namespace", Str),
    f(3, "name", Str),
    f(4, "uid", Str),
    f(5, "apiVersion", Str),
    f(6, "resourceVersion", Str),
    f(7, "fieldPath", Str),
];
pub(crate) const LOCAL_OBJECT_REFERENCE: Table = &[f(1, "name", Str)];
pub(crate) const SERVICE: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(SERVICE_SPEC)),
    f(3, "status", Msg(SERVICE_STATUS)),
];
pub(crate) const SERVICE_SPEC: Table = &[
    f(1, "ports", Msg(SERVICE_PORT)).list(),
    f(2, "selector", Map(&Str)),
    f(3, "clusterIP", Str),
    f(18, "clusterIPs", Str).list(),
    f(4, "type", Str),
    f(5, "externalIPs", Str).list(),
    f(7, "sessionAffinity", Str),
    f(8, "loadBalancerIP", Str),
    f(9, "loadBalancerSourceRanges", Str).list(),
    f(10, "externalName", Str),
    f(11, "externalTrafficPolicy", Str),
    f(12, "healthCheckNodePort", I32),
    f(13, "publishNotReadyAddresses", Bool),
    f(14, "sessionAffinityConfig", Msg(SESSION_AFFINITY_CONFIG)),
    f(19, "ipFamilies", Str).list(),
    f(17, "ipFamilyPolicy", Str).keep(),
    f(20, "allocateLoadBalancerNodePorts", Bool).keep(),
    f(21, "loadBalancerClass", Str).keep(),
    f(22, "internalTrafficPolicy", Str).keep(),
    f(23, "trafficDistribution", Str).keep(),
];
pub(crate) const SERVICE_PORT: Table = &[
    f(1, "name", Str),
    f(2, "protocol", Str),
    f(6, "appProtocol", Str).keep(),
    f(3, "port", I32).keep(),
    f(4, "targetPort", IntOrString),
    f(5, "nodePort", I32),
];
pub(crate) const SESSION_AFFINITY_CONFIG: Table = &[f(1, "clientIP", Msg(CLIENT_IP_CONFIG))];
pub(crate) const CLIENT_IP_CONFIG: Table = &[f(1, "timeoutSeconds", I32).keep()];
pub(crate) const SERVICE_STATUS: Table = &[
    f(1, "loadBalancer", Msg(LOAD_BALANCER_STATUS)),
    f(2, "conditions", Msg(super::meta::CONDITION)).list(),
];
pub(crate) const LOAD_BALANCER_STATUS: Table =
    &[f(1, "ingress", Msg(LOAD_BALANCER_INGRESS)).list()];
pub(crate) const LOAD_BALANCER_INGRESS: Table = &[
    f(1, "ip", Str),
    f(2, "hostname", Str),
    f(3, "ipMode", Str).keep(),
    f(4, "ports", Msg(PORT_STATUS)).list(),
];
pub(crate) const PORT_STATUS: Table = &[
    f(1, "port", I32).keep(),
    f(2, "protocol", Str).keep(),
    f(3, "error", Str).keep(),
];
pub(crate) const POD: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(POD_SPEC)),
    f(3, "status", Msg(POD_STATUS)),
];
pub(crate) const POD_SPEC: Table = &[
    f(1, "volumes", Msg(VOLUME)).list(),
    f(20, "initContainers", Msg(CONTAINER)).list(),
    f(2, "containers", Msg(CONTAINER)).list(),
    f(34, "ephemeralContainers", Msg(EPHEMERAL_CONTAINER)).list(),
    f(3, "restartPolicy", Str),
    f(4, "terminationGracePeriodSeconds", I64).keep(),
    f(5, "activeDeadlineSeconds", I64).keep(),
    f(6, "dnsPolicy", Str),
    f(7, "nodeSelector", Map(&Str)),
    f(8, "serviceAccountName", Str),
    f(9, "serviceAccount", Str),
    f(21, "automountServiceAccountToken", Bool).keep(),
    f(10, "nodeName", Str),
    f(11, "hostNetwork", Bool),
    f(12, "hostPID", Bool),
    f(13, "hostIPC", Bool),
    f(27, "shareProcessNamespace", Bool).keep(),
    f(14, "securityContext", Msg(POD_SECURITY_CONTEXT)),
    f(15, "imagePullSecrets", Msg(LOCAL_OBJECT_REFERENCE)).list(),
    f(16, "hostname", Str),
    f(17, "subdomain", Str),
    f(18, "affinity", Msg(AFFINITY)),
    f(19, "schedulerName", Str),
    f(22, "tolerations", Msg(TOLERATION)).list(),
    f(23, "hostAliases", Msg(HOST_ALIAS)).list(),
    f(24, "priorityClassName", Str),
    f(25, "priority", I32).keep(),
    f(26, "dnsConfig", Msg(POD_DNS_CONFIG)),
    f(28, "readinessGates", Msg(POD_READINESS_GATE)).list(),
    f(29, "runtimeClassName", Str).keep(),
    f(30, "enableServiceLinks", Bool).keep(),
    f(31, "preemptionPolicy", Str).keep(),
    f(32, "overhead", Map(&Quantity)),
    f(
        33,
        "topologySpreadConstraints",
        Msg(TOPOLOGY_SPREAD_CONSTRAINT),
    )
    .list(),
    f(35, "setHostnameAsFQDN", Bool).keep(),
    f(36, "os", Msg(POD_OS)),
    f(37, "hostUsers", Bool).keep(),
    f(38, "schedulingGates", Msg(POD_SCHEDULING_GATE)).list(),
    f(39, "resourceClaims", Msg(POD_RESOURCE_CLAIM)).list(),
    f(40, "resources", Msg(RESOURCE_REQUIREMENTS)),
];
pub(crate) const POD_SECURITY_CONTEXT: Table = &[
    f(1, "seLinuxOptions", Msg(SE_LINUX_OPTIONS)),
    f(8, "windowsOptions", Msg(WINDOWS_SECURITY_CONTEXT_OPTIONS)),
    f(2, "runAsUser", I64).keep(),
    f(6, "runAsGroup", I64).keep(),
    f(3, "runAsNonRoot", Bool).keep(),
    f(4, "supplementalGroups", I64).list(),
    f(12, "supplementalGroupsPolicy", Str).keep(),
    f(5, "fsGroup", I64).keep(),
    f(7, "sysctls", Msg(SYSCTL)).list(),
    f(9, "fsGroupChangePolicy", Str).keep(),
    f(10, "seccompProfile", Msg(SECCOMP_PROFILE)),
    f(11, "appArmorProfile", Msg(APP_ARMOR_PROFILE)),
    f(13, "seLinuxChangePolicy", Str).keep(),
];
pub(crate) const SYSCTL: Table = &[f(1, "name", Str).keep(), f(2, "value", Str).keep()];
pub(crate) const AFFINITY: Table = &[
    f(1, "nodeAffinity", Msg(NODE_AFFINITY)),
    f(2, "podAffinity", Msg(POD_AFFINITY)),
    f(3, "podAntiAffinity", Msg(POD_ANTI_AFFINITY)),
];
pub(crate) const NODE_AFFINITY: Table = &[
    f(
        1,
        "requiredDuringSchedulingIgnoredDuringExecution",
        Msg(NODE_SELECTOR),
    ),
    f(
        2,
        "preferredDuringSchedulingIgnoredDuringExecution",
        Msg(PREFERRED_SCHEDULING_TERM),
    )
    .list(),
];
pub(crate) const NODE_SELECTOR: Table =
    &[f(1, "nodeSelectorTerms", Msg(NODE_SELECTOR_TERM)).list()];
pub(crate) const NODE_SELECTOR_TERM: Table = &[
    f(1, "matchExpressions", Msg(NODE_SELECTOR_REQUIREMENT)).list(),
    f(2, "matchFields", Msg(NODE_SELECTOR_REQUIREMENT)).list(),
];
pub(crate) const NODE_SELECTOR_REQUIREMENT: Table = &[
    f(1, "key", Str).keep(),
    f(2, "operator", Str).keep(),
    f(3, "values", Str).list(),
];
pub(crate) const PREFERRED_SCHEDULING_TERM: Table = &[
    f(1, "weight", I32).keep(),
    f(2, "preference", Msg(NODE_SELECTOR_TERM)),
];
pub(crate) const POD_AFFINITY: Table = &[
    f(
        1,
        "requiredDuringSchedulingIgnoredDuringExecution",
        Msg(POD_AFFINITY_TERM),
    )
    .list(),
    f(
        2,
        "preferredDuringSchedulingIgnoredDuringExecution",
        Msg(WEIGHTED_POD_AFFINITY_TERM),
    )
    .list(),
];
pub(crate) const POD_AFFINITY_TERM: Table = &[
    f(1, "labelSelector", Msg(super::meta::LABEL_SELECTOR)),
    f(2, "namespaces", Str).list(),
    f(3, "topologyKey", Str).keep(),
    f(4, "namespaceSelector", Msg(super::meta::LABEL_SELECTOR)),
    f(5, "matchLabelKeys", Str).list(),
    f(6, "mismatchLabelKeys", Str).list(),
];
pub(crate) const WEIGHTED_POD_AFFINITY_TERM: Table = &[
    f(1, "weight", I32).keep(),
    f(2, "podAffinityTerm", Msg(POD_AFFINITY_TERM)),
];
pub(crate) const POD_ANTI_AFFINITY: Table = &[
    f(
        1,
        "requiredDuringSchedulingIgnoredDuringExecution",
        Msg(POD_AFFINITY_TERM),
    )
    .list(),
    f(
        2,
        "preferredDuringSchedulingIgnoredDuringExecution",
        Msg(WEIGHTED_POD_AFFINITY_TERM),
    )
    .list(),
];
pub(crate) const TOLERATION: Table = &[
    f(1, "key", Str),
    f(2, "operator", Str),
    f(3, "value", Str),
    f(4, "effect", Str),
    f(5, "tolerationSeconds", I64).keep(),
];
pub(crate) const HOST_ALIAS: Table = &[f(1, "ip", Str).keep(), f(2, "hostnames", Str).list()];
pub(crate) const POD_DNS_CONFIG: Table = &[
    f(1, "nameservers", Str).list(),
    f(2, "searches", Str).list(),
    f(3, "options", Msg(POD_DNS_CONFIG_OPTION)).list(),
];
pub(crate) const POD_DNS_CONFIG_OPTION: Table = &[f(1, "name", Str), f(2, "value", Str).keep()];
pub(crate) const POD_READINESS_GATE: Table = &[f(1, "conditionType", Str).keep()];
pub(crate) const TOPOLOGY_SPREAD_CONSTRAINT: Table = &[
    f(1, "maxSkew", I32).keep(),
    f(2, "topologyKey", Str).keep(),
    f(3, "whenUnsatisfiable", Str).keep(),
    f(4, "labelSelector", Msg(super::meta::LABEL_SELECTOR)),
    f(5, "minDomains", I32).keep(),
    f(6, "nodeAffinityPolicy", Str).keep(),
    f(7, "nodeTaintsPolicy", Str).keep(),
    f(8, "matchLabelKeys", Str).list(),
];
pub(crate) const POD_OS: Table = &[f(1, "name", Str).keep()];
pub(crate) const POD_SCHEDULING_GATE: Table = &[f(1, "name", Str).keep()];
pub(crate) const POD_RESOURCE_CLAIM: Table = &[
    f(1, "name", Str).keep(),
    f(3, "resourceClaimName", Str).keep(),
    f(4, "resourceClaimTemplateName", Str).keep(),
];
pub(crate) const POD_STATUS: Table = &[
    f(1, "phase", Str),
    f(2, "conditions", Msg(POD_CONDITION)).list(),
    f(3, "message", Str),
    f(4, "reason", Str),
    f(11, "nominatedNodeName", Str),
    f(5, "hostIP", Str),
    f(16, "hostIPs", Msg(HOST_IP)).list(),
    f(6, "podIP", Str),
    f(12, "podIPs", Msg(POD_IP)).list(),
    f(7, "startTime", Time),
    f(10, "initContainerStatuses", Msg(CONTAINER_STATUS)).list(),
    f(8, "containerStatuses", Msg(CONTAINER_STATUS)).list(),
    f(9, "qosClass", Str),
    f(13, "ephemeralContainerStatuses", Msg(CONTAINER_STATUS)).list(),
    f(14, "resize", Str),
    f(15, "resourceClaimStatuses", Msg(POD_RESOURCE_CLAIM_STATUS)).list(),
];
pub(crate) const POD_CONDITION: Table = &[
    f(1, "type", Str).keep(),
    f(2, "status", Str).keep(),
    f(3, "lastProbeTime", Time),
    f(4, "lastTransitionTime", Time),
    f(5, "reason", Str),
    f(6, "message", Str),
];
pub(crate) const HOST_IP: Table = &[f(1, "ip", Str).keep()];
pub(crate) const POD_IP: Table = &[f(1, "ip", Str).keep()];
pub(crate) const CONTAINER_STATUS: Table = &[
    f(1, "name", Str).keep(),
    f(2, "state", Msg(CONTAINER_STATE)),
    f(3, "lastState", Msg(CONTAINER_STATE)),
    f(4, "ready", Bool).keep(),
    f(5, "restartCount", I32).keep(),
    f(6, "image", Str).keep(),
    f(7, "imageID", Str).keep(),
    f(8, "containerID", Str),
    f(9, "started", Bool).keep(),
    f(10, "allocatedResources", Map(&Quantity)),
    f(11, "resources", Msg(RESOURCE_REQUIREMENTS)),
    f(12, "volumeMounts", Msg(VOLUME_MOUNT_STATUS)).list(),
    f(13, "user", Msg(CONTAINER_USER)),
    f(14, "allocatedResourcesStatus", Msg(RESOURCE_STATUS)).list(),
];
pub(crate) const CONTAINER_STATE: Table = &[
    f(1, "waiting", Msg(CONTAINER_STATE_WAITING)),
    f(2, "running", Msg(CONTAINER_STATE_RUNNING)),
    f(3, "terminated", Msg(CONTAINER_STATE_TERMINATED)),
];
pub(crate) const CONTAINER_STATE_WAITING: Table = &[f(1, "reason", Str), f(2, "message", Str)];
pub(crate) const CONTAINER_STATE_RUNNING: Table = &[f(1, "startedAt", Time)];
pub(crate) const CONTAINER_STATE_TERMINATED: Table = &[
    f(1, "exitCode", I32).keep(),
    f(2, "signal", I32),
    f(3, "reason", Str),
    f(4, "message", Str),
    f(5, "startedAt", Time),
    f(6, "finishedAt", Time),
    f(7, "containerID", Str),
];
pub(crate) const VOLUME_MOUNT_STATUS: Table = &[
    f(1, "name", Str).keep(),
    f(2, "mountPath", Str).keep(),
    f(3, "readOnly", Bool),
    f(4, "recursiveReadOnly", Str).keep(),
];
pub(crate) const CONTAINER_USER: Table = &[f(1, "linux", Msg(LINUX_CONTAINER_USER))];
pub(crate) const LINUX_CONTAINER_USER: Table = &[
    f(1, "uid", I64).keep(),
    f(2, "gid", I64).keep(),
    f(3, "supplementalGroups", I64).list(),
];
pub(crate) const RESOURCE_STATUS: Table = &[
    f(1, "name", Str).keep(),
    f(2, "resources", Msg(RESOURCE_HEALTH)).list(),
];
pub(crate) const RESOURCE_HEALTH: Table = &[f(1, "resourceID", Str).keep(), f(2, "health", Str)];
pub(crate) const POD_RESOURCE_CLAIM_STATUS: Table = &[
    f(1, "name", Str).keep(),
    f(2, "resourceClaimName", Str).keep(),
];
pub(crate) const NODE: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(NODE_SPEC)),
    f(3, "status", Msg(NODE_STATUS)),
];
pub(crate) const NODE_SPEC: Table = &[
    f(1, "podCIDR", Str),
    f(7, "podCIDRs", Str).list(),
    f(3, "providerID", Str),
    f(4, "unschedulable", Bool),
    f(5, "taints", Msg(TAINT)).list(),
    f(6, "configSource", Msg(NODE_CONFIG_SOURCE)),
    f(2, "externalID", Str),
];
pub(crate) const TAINT: Table = &[
    f(1, "key", Str).keep(),
    f(2, "value", Str),
    f(3, "effect", Str).keep(),
    f(4, "timeAdded", Time),
];
pub(crate) const NODE_CONFIG_SOURCE: Table =
    &[f(2, "configMap", Msg(CONFIG_MAP_NODE_CONFIG_SOURCE))];
pub(crate) const CONFIG_MAP_NODE_CONFIG_SOURCE: Table = &[
    f(1, "namespace", Str).keep(),
    f(2, "name", Str).keep(),
    f(3, "uid", Str),
    f(4, "resourceVersion", Str),
    f(5, "kubeletConfigKey", Str).keep(),
];
pub(crate) const NODE_STATUS: Table = &[
    f(1, "capacity", Map(&Quantity)),
    f(2, "allocatable", Map(&Quantity)),
    f(3, "phase", Str),
    f(4, "conditions", Msg(NODE_CONDITION)).list(),
    f(5, "addresses", Msg(NODE_ADDRESS)).list(),
    f(6, "daemonEndpoints", Msg(NODE_DAEMON_ENDPOINTS)),
    f(7, "nodeInfo", Msg(NODE_SYSTEM_INFO)),
    f(8, "images", Msg(CONTAINER_IMAGE)).list(),
    f(9, "volumesInUse", Str).list(),
    f(10, "volumesAttached", Msg(ATTACHED_VOLUME)).list(),
    f(11, "config", Msg(NODE_CONFIG_STATUS)),
    f(12, "runtimeHandlers", Msg(NODE_RUNTIME_HANDLER)).list(),
    f(13, "features", Msg(NODE_FEATURES)),
];
pub(crate) const NODE_CONDITION: Table = &[
    f(1, "type", Str).keep(),
    f(2, "status", Str).keep(),
    f(3, "lastHeartbeatTime", Time),
    f(4, "lastTransitionTime", Time),
    f(5, "reason", Str),
    f(6, "message", Str),
];
pub(crate) const NODE_ADDRESS: Table = &[f(1, "type", Str).keep(), f(2, "address", Str).keep()];
pub(crate) const NODE_DAEMON_ENDPOINTS: Table = &[f(1, "kubeletEndpoint", Msg(DAEMON_ENDPOINT))];
pub(crate) const DAEMON_ENDPOINT: Table = &[f(1, "Port", I32).keep()];
pub(crate) const NODE_SYSTEM_INFO: Table = &[
    f(1, "machineID", Str).keep(),
    f(2, "systemUUID", Str).keep(),
    f(3, "bootID", Str).keep(),
    f(4, "kernelVersion", Str).keep(),
    f(5, "osImage", Str).keep(),
    f(6, "containerRuntimeVersion", Str).keep(),
    f(7, "kubeletVersion", Str).keep(),
    f(8, "kubeProxyVersion", Str).keep(),
    f(9, "operatingSystem", Str).keep(),
    f(10, "architecture", Str).keep(),
];
pub(crate) const CONTAINER_IMAGE: Table = &[f(1, "names", Str).list(), f(2, "sizeBytes", I64)];
pub(crate) const ATTACHED_VOLUME: Table =
    &[f(1, "name", Str).keep(), f(2, "devicePath", Str).keep()];
pub(crate) const NODE_CONFIG_STATUS: Table = &[
    f(1, "assigned", Msg(NODE_CONFIG_SOURCE)),
    f(2, "active", Msg(NODE_CONFIG_SOURCE)),
    f(3, "lastKnownGood", Msg(NODE_CONFIG_SOURCE)),
    f(4, "error", Str),
];
pub(crate) const NODE_RUNTIME_HANDLER: Table = &[
    f(1, "name", Str).keep(),
    f(2, "features", Msg(NODE_RUNTIME_HANDLER_FEATURES)),
];
pub(crate) const NODE_RUNTIME_HANDLER_FEATURES: Table = &[
    f(1, "recursiveReadOnlyMounts", Bool).keep(),
    f(2, "userNamespaces", Bool).keep(),
];
pub(crate) const NODE_FEATURES: Table = &[f(1, "supplementalGroupsPolicy", Bool).keep()];
pub(crate) const ENDPOINTS: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "subsets", Msg(ENDPOINT_SUBSET)).list(),
];
pub(crate) const ENDPOINT_SUBSET: Table = &[
    f(1, "addresses", Msg(ENDPOINT_ADDRESS)).list(),
    f(2, "notReadyAddresses", Msg(ENDPOINT_ADDRESS)).list(),
    f(3, "ports", Msg(ENDPOINT_PORT)).list(),
];
pub(crate) const ENDPOINT_ADDRESS: Table = &[
    f(1, "ip", Str).keep(),
    f(3, "hostname", Str),
    f(4, "nodeName", Str).keep(),
    f(2, "targetRef", Msg(OBJECT_REFERENCE)),
];
pub(crate) const ENDPOINT_PORT: Table = &[
    f(1, "name", Str),
    f(2, "port", I32).keep(),
    f(3, "protocol", Str),
    f(4, "appProtocol", Str).keep(),
];
pub(crate) const PERSISTENT_VOLUME_CLAIM: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(PERSISTENT_VOLUME_CLAIM_SPEC)),
    f(3, "status", Msg(PERSISTENT_VOLUME_CLAIM_STATUS)),
];
pub(crate) const PERSISTENT_VOLUME_CLAIM_STATUS: Table = &[
    f(1, "phase", Str),
    f(2, "accessModes", Str).list(),
    f(3, "capacity", Map(&Quantity)),
    f(4, "conditions", Msg(PERSISTENT_VOLUME_CLAIM_CONDITION)).list(),
    f(5, "allocatedResources", Map(&Quantity)),
    f(7, "allocatedResourceStatuses", Map(&Str)),
    f(8, "currentVolumeAttributesClassName", Str).keep(),
    f(9, "modifyVolumeStatus", Msg(MODIFY_VOLUME_STATUS)),
];
pub(crate) const PERSISTENT_VOLUME_CLAIM_CONDITION: Table = &[
    f(1, "type", Str).keep(),
    f(2, "status", Str).keep(),
    f(3, "lastProbeTime", Time),
    f(4, "lastTransitionTime", Time),
    f(5, "reason", Str),
    f(6, "message", Str),
];
pub(crate) const MODIFY_VOLUME_STATUS: Table = &[
    f(1, "targetVolumeAttributesClassName", Str),
    f(2, "status", Str).keep(),
];
pub(crate) const EVENT: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "involvedObject", Msg(OBJECT_REFERENCE)),
    f(3, "reason", Str),
    f(4, "message", Str),
    f(5, "source", Msg(EVENT_SOURCE)),
    f(6, "firstTimestamp", Time),
    f(7, "lastTimestamp", Time),
    f(8, "count", I32),
    f(9, "type", Str),
    f(10, "eventTime", MicroTime),
    f(11, "series", Msg(EVENT_SERIES)),
    f(12, "action", Str),
    f(13, "related", Msg(OBJECT_REFERENCE)),
    f(14, "reportingComponent", Str).keep(),
    f(15, "reportingInstance", Str).keep(),
];
pub(crate) const EVENT_SOURCE: Table = &[f(1, "component", Str), f(2, "host", Str)];
pub(crate) const EVENT_SERIES: Table = &[f(1, "count", I32), f(2, "lastObservedTime", MicroTime)];
pub(crate) const POD_TEMPLATE_SPEC: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(POD_SPEC)),
];
