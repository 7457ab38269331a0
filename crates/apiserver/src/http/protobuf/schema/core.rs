//! Protobuf field tables of core/v1 (`k8s.io/api/core/v1`): Namespace,
//! ConfigMap, Secret, ServiceAccount, Service, Pod (with the whole PodSpec and
//! PodStatus), Node, Endpoints, PersistentVolumeClaim and Event.
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{
    Bool, Bytes, I32, I64, Inline, IntOrString, Map, MicroTime, Msg, Quantity, Str, Time,
};
use super::{Table, f};

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
pub(crate) const VOLUME: Table = &[f(1, "name", Str).keep(), f(2, "", Inline(VOLUME_SOURCE))];
pub(crate) const VOLUME_SOURCE: Table = &[
    f(1, "hostPath", Msg(HOST_PATH_VOLUME_SOURCE)),
    f(2, "emptyDir", Msg(EMPTY_DIR_VOLUME_SOURCE)),
    f(
        3,
        "gcePersistentDisk",
        Msg(GCE_PERSISTENT_DISK_VOLUME_SOURCE),
    ),
    f(
        4,
        "awsElasticBlockStore",
        Msg(AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE),
    ),
    f(5, "gitRepo", Msg(GIT_REPO_VOLUME_SOURCE)),
    f(6, "secret", Msg(SECRET_VOLUME_SOURCE)),
    f(7, "nfs", Msg(NFS_VOLUME_SOURCE)),
    f(8, "iscsi", Msg(ISCSI_VOLUME_SOURCE)),
    f(9, "glusterfs", Msg(GLUSTERFS_VOLUME_SOURCE)),
    f(
        10,
        "persistentVolumeClaim",
        Msg(PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE),
    ),
    f(11, "rbd", Msg(RBD_VOLUME_SOURCE)),
    f(12, "flexVolume", Msg(FLEX_VOLUME_SOURCE)),
    f(13, "cinder", Msg(CINDER_VOLUME_SOURCE)),
    f(14, "cephfs", Msg(CEPH_FS_VOLUME_SOURCE)),
    f(15, "flocker", Msg(FLOCKER_VOLUME_SOURCE)),
    f(16, "downwardAPI", Msg(DOWNWARD_API_VOLUME_SOURCE)),
    f(17, "fc", Msg(FC_VOLUME_SOURCE)),
    f(18, "azureFile", Msg(AZURE_FILE_VOLUME_SOURCE)),
    f(19, "configMap", Msg(CONFIG_MAP_VOLUME_SOURCE)),
    f(20, "vsphereVolume", Msg(VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE)),
    f(21, "quobyte", Msg(QUOBYTE_VOLUME_SOURCE)),
    f(22, "azureDisk", Msg(AZURE_DISK_VOLUME_SOURCE)),
    f(
        23,
        "photonPersistentDisk",
        Msg(PHOTON_PERSISTENT_DISK_VOLUME_SOURCE),
    ),
    f(26, "projected", Msg(PROJECTED_VOLUME_SOURCE)),
    f(24, "portworxVolume", Msg(PORTWORX_VOLUME_SOURCE)),
    f(25, "scaleIO", Msg(SCALE_IO_VOLUME_SOURCE)),
    f(27, "storageos", Msg(STORAGE_OS_VOLUME_SOURCE)),
    f(28, "csi", Msg(CSI_VOLUME_SOURCE)),
    f(29, "ephemeral", Msg(EPHEMERAL_VOLUME_SOURCE)),
    f(30, "image", Msg(IMAGE_VOLUME_SOURCE)),
];
pub(crate) const HOST_PATH_VOLUME_SOURCE: Table =
    &[f(1, "path", Str).keep(), f(2, "type", Str).keep()];
pub(crate) const EMPTY_DIR_VOLUME_SOURCE: Table =
    &[f(1, "medium", Str), f(2, "sizeLimit", Quantity).keep()];
pub(crate) const GCE_PERSISTENT_DISK_VOLUME_SOURCE: Table = &[
    f(1, "pdName", Str).keep(),
    f(2, "fsType", Str),
    f(3, "partition", I32),
    f(4, "readOnly", Bool),
];
pub(crate) const AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE: Table = &[
    f(1, "volumeID", Str).keep(),
    f(2, "fsType", Str),
    f(3, "partition", I32),
    f(4, "readOnly", Bool),
];
pub(crate) const GIT_REPO_VOLUME_SOURCE: Table = &[
    f(1, "repository", Str).keep(),
    f(2, "revision", Str),
    f(3, "directory", Str),
];
pub(crate) const SECRET_VOLUME_SOURCE: Table = &[
    f(1, "secretName", Str),
    f(2, "items", Msg(KEY_TO_PATH)).list(),
    f(3, "defaultMode", I32).keep(),
    f(4, "optional", Bool).keep(),
];
pub(crate) const KEY_TO_PATH: Table = &[
    f(1, "key", Str).keep(),
    f(2, "path", Str).keep(),
    f(3, "mode", I32).keep(),
];
pub(crate) const NFS_VOLUME_SOURCE: Table = &[
    f(1, "server", Str).keep(),
    f(2, "path", Str).keep(),
    f(3, "readOnly", Bool),
];
pub(crate) const ISCSI_VOLUME_SOURCE: Table = &[
    f(1, "targetPortal", Str).keep(),
    f(2, "iqn", Str).keep(),
    f(3, "lun", I32).keep(),
    f(4, "iscsiInterface", Str),
    f(5, "fsType", Str),
    f(6, "readOnly", Bool),
    f(7, "portals", Str).list(),
    f(8, "chapAuthDiscovery", Bool),
    f(11, "chapAuthSession", Bool),
    f(10, "secretRef", Msg(LOCAL_OBJECT_REFERENCE)),
    f(12, "initiatorName", Str).keep(),
];
pub(crate) const GLUSTERFS_VOLUME_SOURCE: Table = &[
    f(1, "endpoints", Str).keep(),
    f(2, "path", Str).keep(),
    f(3, "readOnly", Bool),
];
pub(crate) const PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE: Table =
    &[f(1, "claimName", Str).keep(), f(2, "readOnly", Bool)];
pub(crate) const RBD_VOLUME_SOURCE: Table = &[
    f(1, "monitors", Str).list(),
    f(2, "image", Str).keep(),
    f(3, "fsType", Str),
    f(4, "pool", Str),
    f(5, "user", Str),
    f(6, "keyring", Str),
    f(7, "secretRef", Msg(LOCAL_OBJECT_REFERENCE)),
    f(8, "readOnly", Bool),
];
pub(crate) const FLEX_VOLUME_SOURCE: Table = &[
    f(1, "driver", Str).keep(),
    f(2, "fsType", Str),
    f(3, "secretRef", Msg(LOCAL_OBJECT_REFERENCE)),
    f(4, "readOnly", Bool),
    f(5, "options", Map(&Str)),
];
pub(crate) const CINDER_VOLUME_SOURCE: Table = &[
    f(1, "volumeID", Str).keep(),
    f(2, "fsType", Str),
    f(3, "readOnly", Bool),
    f(4, "secretRef", Msg(LOCAL_OBJECT_REFERENCE)),
];
pub(crate) const CEPH_FS_VOLUME_SOURCE: Table = &[
    f(1, "monitors", Str).list(),
    f(2, "path", Str),
    f(3, "user", Str),
    f(4, "secretFile", Str),
    f(5, "secretRef", Msg(LOCAL_OBJECT_REFERENCE)),
    f(6, "readOnly", Bool),
];
pub(crate) const FLOCKER_VOLUME_SOURCE: Table =
    &[f(1, "datasetName", Str), f(2, "datasetUUID", Str)];
pub(crate) const DOWNWARD_API_VOLUME_SOURCE: Table = &[
    f(1, "items", Msg(DOWNWARD_API_VOLUME_FILE)).list(),
    f(2, "defaultMode", I32).keep(),
];
pub(crate) const DOWNWARD_API_VOLUME_FILE: Table = &[
    f(1, "path", Str).keep(),
    f(2, "fieldRef", Msg(OBJECT_FIELD_SELECTOR)),
    f(3, "resourceFieldRef", Msg(RESOURCE_FIELD_SELECTOR)),
    f(4, "mode", I32).keep(),
];
pub(crate) const OBJECT_FIELD_SELECTOR: Table =
    &[f(1, "apiVersion", Str), f(2, "fieldPath", Str).keep()];
pub(crate) const RESOURCE_FIELD_SELECTOR: Table = &[
    f(1, "containerName", Str),
    f(2, "resource", Str).keep(),
    f(3, "divisor", Quantity),
];
pub(crate) const FC_VOLUME_SOURCE: Table = &[
    f(1, "targetWWNs", Str).list(),
    f(2, "lun", I32).keep(),
    f(3, "fsType", Str),
    f(4, "readOnly", Bool),
    f(5, "wwids", Str).list(),
];
pub(crate) const AZURE_FILE_VOLUME_SOURCE: Table = &[
    f(1, "secretName", Str).keep(),
    f(2, "shareName", Str).keep(),
    f(3, "readOnly", Bool),
];
pub(crate) const CONFIG_MAP_VOLUME_SOURCE: Table = &[
    f(1, "", Inline(LOCAL_OBJECT_REFERENCE)),
    f(2, "items", Msg(KEY_TO_PATH)).list(),
    f(3, "defaultMode", I32).keep(),
    f(4, "optional", Bool).keep(),
];
pub(crate) const VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE: Table = &[
    f(1, "volumePath", Str).keep(),
    f(2, "fsType", Str),
    f(3, "storagePolicyName", Str),
    f(4, "storagePolicyID", Str),
];
pub(crate) const QUOBYTE_VOLUME_SOURCE: Table = &[
    f(1, "registry", Str).keep(),
    f(2, "volume", Str).keep(),
    f(3, "readOnly", Bool),
    f(4, "user", Str),
    f(5, "group", Str),
    f(6, "tenant", Str),
];
pub(crate) const AZURE_DISK_VOLUME_SOURCE: Table = &[
    f(1, "diskName", Str).keep(),
    f(2, "diskURI", Str).keep(),
    f(3, "cachingMode", Str).keep(),
    f(4, "fsType", Str).keep(),
    f(5, "readOnly", Bool).keep(),
    f(6, "kind", Str).keep(),
];
pub(crate) const PHOTON_PERSISTENT_DISK_VOLUME_SOURCE: Table =
    &[f(1, "pdID", Str).keep(), f(2, "fsType", Str)];
pub(crate) const PROJECTED_VOLUME_SOURCE: Table = &[
    f(1, "sources", Msg(VOLUME_PROJECTION)).list(),
    f(2, "defaultMode", I32).keep(),
];
pub(crate) const VOLUME_PROJECTION: Table = &[
    f(1, "secret", Msg(SECRET_PROJECTION)),
    f(2, "downwardAPI", Msg(DOWNWARD_API_PROJECTION)),
    f(3, "configMap", Msg(CONFIG_MAP_PROJECTION)),
    f(
        4,
        "serviceAccountToken",
        Msg(SERVICE_ACCOUNT_TOKEN_PROJECTION),
    ),
    f(
        5,
        "clusterTrustBundle",
        Msg(CLUSTER_TRUST_BUNDLE_PROJECTION),
    ),
];
pub(crate) const SECRET_PROJECTION: Table = &[
    f(1, "", Inline(LOCAL_OBJECT_REFERENCE)),
    f(2, "items", Msg(KEY_TO_PATH)).list(),
    f(4, "optional", Bool).keep(),
];
pub(crate) const DOWNWARD_API_PROJECTION: Table =
    &[f(1, "items", Msg(DOWNWARD_API_VOLUME_FILE)).list()];
pub(crate) const CONFIG_MAP_PROJECTION: Table = &[
    f(1, "", Inline(LOCAL_OBJECT_REFERENCE)),
    f(2, "items", Msg(KEY_TO_PATH)).list(),
    f(4, "optional", Bool).keep(),
];
pub(crate) const SERVICE_ACCOUNT_TOKEN_PROJECTION: Table = &[
    f(1, "audience", Str),
    f(2, "expirationSeconds", I64).keep(),
    f(3, "path", Str).keep(),
];
pub(crate) const CLUSTER_TRUST_BUNDLE_PROJECTION: Table = &[
    f(1, "name", Str).keep(),
    f(2, "signerName", Str).keep(),
    f(3, "labelSelector", Msg(super::meta::LABEL_SELECTOR)),
    f(5, "optional", Bool).keep(),
    f(4, "path", Str).keep(),
];
pub(crate) const PORTWORX_VOLUME_SOURCE: Table = &[
    f(1, "volumeID", Str).keep(),
    f(2, "fsType", Str),
    f(3, "readOnly", Bool),
];
pub(crate) const SCALE_IO_VOLUME_SOURCE: Table = &[
    f(1, "gateway", Str).keep(),
    f(2, "system", Str).keep(),
    f(3, "secretRef", Msg(LOCAL_OBJECT_REFERENCE)),
    f(4, "sslEnabled", Bool),
    f(5, "protectionDomain", Str),
    f(6, "storagePool", Str),
    f(7, "storageMode", Str),
    f(8, "volumeName", Str),
    f(9, "fsType", Str),
    f(10, "readOnly", Bool),
];
pub(crate) const STORAGE_OS_VOLUME_SOURCE: Table = &[
    f(1, "volumeName", Str),
    f(2, "volumeNamespace", Str),
    f(3, "fsType", Str),
    f(4, "readOnly", Bool),
    f(5, "secretRef", Msg(LOCAL_OBJECT_REFERENCE)),
];
pub(crate) const CSI_VOLUME_SOURCE: Table = &[
    f(1, "driver", Str).keep(),
    f(2, "readOnly", Bool).keep(),
    f(3, "fsType", Str).keep(),
    f(4, "volumeAttributes", Map(&Str)),
    f(5, "nodePublishSecretRef", Msg(LOCAL_OBJECT_REFERENCE)),
];
pub(crate) const EPHEMERAL_VOLUME_SOURCE: Table = &[f(
    1,
    "volumeClaimTemplate",
    Msg(PERSISTENT_VOLUME_CLAIM_TEMPLATE),
)];
pub(crate) const PERSISTENT_VOLUME_CLAIM_TEMPLATE: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(PERSISTENT_VOLUME_CLAIM_SPEC)),
];
pub(crate) const PERSISTENT_VOLUME_CLAIM_SPEC: Table = &[
    f(1, "accessModes", Str).list(),
    f(4, "selector", Msg(super::meta::LABEL_SELECTOR)),
    f(2, "resources", Msg(VOLUME_RESOURCE_REQUIREMENTS)),
    f(3, "volumeName", Str),
    f(5, "storageClassName", Str).keep(),
    f(6, "volumeMode", Str).keep(),
    f(7, "dataSource", Msg(TYPED_LOCAL_OBJECT_REFERENCE)),
    f(8, "dataSourceRef", Msg(TYPED_OBJECT_REFERENCE)),
    f(9, "volumeAttributesClassName", Str).keep(),
];
pub(crate) const VOLUME_RESOURCE_REQUIREMENTS: Table = &[
    f(1, "limits", Map(&Quantity)),
    f(2, "requests", Map(&Quantity)),
];
pub(crate) const TYPED_LOCAL_OBJECT_REFERENCE: Table = &[
    f(1, "apiGroup", Str).keep(),
    f(2, "kind", Str).keep(),
    f(3, "name", Str).keep(),
];
pub(crate) const TYPED_OBJECT_REFERENCE: Table = &[
    f(1, "apiGroup", Str).keep(),
    f(2, "kind", Str).keep(),
    f(3, "name", Str).keep(),
    f(4, "namespace", Str).keep(),
];
pub(crate) const IMAGE_VOLUME_SOURCE: Table = &[f(1, "reference", Str), f(2, "pullPolicy", Str)];
pub(crate) const CONTAINER: Table = &[
    f(1, "name", Str).keep(),
    f(2, "image", Str),
    f(3, "command", Str).list(),
    f(4, "args", Str).list(),
    f(5, "workingDir", Str),
    f(6, "ports", Msg(CONTAINER_PORT)).list(),
    f(19, "envFrom", Msg(ENV_FROM_SOURCE)).list(),
    f(7, "env", Msg(ENV_VAR)).list(),
    f(8, "resources", Msg(RESOURCE_REQUIREMENTS)),
    f(23, "resizePolicy", Msg(CONTAINER_RESIZE_POLICY)).list(),
    f(24, "restartPolicy", Str).keep(),
    f(9, "volumeMounts", Msg(VOLUME_MOUNT)).list(),
    f(21, "volumeDevices", Msg(VOLUME_DEVICE)).list(),
    f(10, "livenessProbe", Msg(PROBE)),
    f(11, "readinessProbe", Msg(PROBE)),
    f(22, "startupProbe", Msg(PROBE)),
    f(12, "lifecycle", Msg(LIFECYCLE)),
    f(13, "terminationMessagePath", Str),
    f(20, "terminationMessagePolicy", Str),
    f(14, "imagePullPolicy", Str),
    f(15, "securityContext", Msg(SECURITY_CONTEXT)),
    f(16, "stdin", Bool),
    f(17, "stdinOnce", Bool),
    f(18, "tty", Bool),
];
pub(crate) const CONTAINER_PORT: Table = &[
    f(1, "name", Str),
    f(2, "hostPort", I32),
    f(3, "containerPort", I32).keep(),
    f(4, "protocol", Str),
    f(5, "hostIP", Str),
];
pub(crate) const ENV_FROM_SOURCE: Table = &[
    f(1, "prefix", Str),
    f(2, "configMapRef", Msg(CONFIG_MAP_ENV_SOURCE)),
    f(3, "secretRef", Msg(SECRET_ENV_SOURCE)),
];
pub(crate) const CONFIG_MAP_ENV_SOURCE: Table = &[
    f(1, "", Inline(LOCAL_OBJECT_REFERENCE)),
    f(2, "optional", Bool).keep(),
];
pub(crate) const SECRET_ENV_SOURCE: Table = &[
    f(1, "", Inline(LOCAL_OBJECT_REFERENCE)),
    f(2, "optional", Bool).keep(),
];
pub(crate) const ENV_VAR: Table = &[
    f(1, "name", Str).keep(),
    f(2, "value", Str),
    f(3, "valueFrom", Msg(ENV_VAR_SOURCE)),
];
pub(crate) const ENV_VAR_SOURCE: Table = &[
    f(1, "fieldRef", Msg(OBJECT_FIELD_SELECTOR)),
    f(2, "resourceFieldRef", Msg(RESOURCE_FIELD_SELECTOR)),
    f(3, "configMapKeyRef", Msg(CONFIG_MAP_KEY_SELECTOR)),
    f(4, "secretKeyRef", Msg(SECRET_KEY_SELECTOR)),
];
pub(crate) const CONFIG_MAP_KEY_SELECTOR: Table = &[
    f(1, "", Inline(LOCAL_OBJECT_REFERENCE)),
    f(2, "key", Str).keep(),
    f(3, "optional", Bool).keep(),
];
pub(crate) const SECRET_KEY_SELECTOR: Table = &[
    f(1, "", Inline(LOCAL_OBJECT_REFERENCE)),
    f(2, "key", Str).keep(),
    f(3, "optional", Bool).keep(),
];
pub(crate) const RESOURCE_REQUIREMENTS: Table = &[
    f(1, "limits", Map(&Quantity)),
    f(2, "requests", Map(&Quantity)),
    f(3, "claims", Msg(RESOURCE_CLAIM)).list(),
];
pub(crate) const RESOURCE_CLAIM: Table = &[f(1, "name", Str).keep(), f(2, "request", Str)];
pub(crate) const CONTAINER_RESIZE_POLICY: Table = &[
    f(1, "resourceName", Str).keep(),
    f(2, "restartPolicy", Str).keep(),
];
pub(crate) const VOLUME_MOUNT: Table = &[
    f(1, "name", Str).keep(),
    f(2, "readOnly", Bool),
    f(7, "recursiveReadOnly", Str).keep(),
    f(3, "mountPath", Str).keep(),
    f(4, "subPath", Str),
    f(5, "mountPropagation", Str).keep(),
    f(6, "subPathExpr", Str),
];
pub(crate) const VOLUME_DEVICE: Table = &[f(1, "name", Str).keep(), f(2, "devicePath", Str).keep()];
pub(crate) const PROBE: Table = &[
    f(1, "", Inline(PROBE_HANDLER)),
    f(2, "initialDelaySeconds", I32),
    f(3, "timeoutSeconds", I32),
    f(4, "periodSeconds", I32),
    f(5, "successThreshold", I32),
    f(6, "failureThreshold", I32),
    f(7, "terminationGracePeriodSeconds", I64).keep(),
];
pub(crate) const PROBE_HANDLER: Table = &[
    f(1, "exec", Msg(EXEC_ACTION)),
    f(2, "httpGet", Msg(HTTP_GET_ACTION)),
    f(3, "tcpSocket", Msg(TCP_SOCKET_ACTION)),
    f(4, "grpc", Msg(GRPC_ACTION)),
];
pub(crate) const EXEC_ACTION: Table = &[f(1, "command", Str).list()];
pub(crate) const HTTP_GET_ACTION: Table = &[
    f(1, "path", Str),
    f(2, "port", IntOrString).keep(),
    f(3, "host", Str),
    f(4, "scheme", Str),
    f(5, "httpHeaders", Msg(HTTP_HEADER)).list(),
];
pub(crate) const HTTP_HEADER: Table = &[f(1, "name", Str).keep(), f(2, "value", Str).keep()];
pub(crate) const TCP_SOCKET_ACTION: Table = &[f(1, "port", IntOrString).keep(), f(2, "host", Str)];
pub(crate) const GRPC_ACTION: Table = &[f(1, "port", I32).keep(), f(2, "service", Str).keep()];
pub(crate) const LIFECYCLE: Table = &[
    f(1, "postStart", Msg(LIFECYCLE_HANDLER)),
    f(2, "preStop", Msg(LIFECYCLE_HANDLER)),
];
pub(crate) const LIFECYCLE_HANDLER: Table = &[
    f(1, "exec", Msg(EXEC_ACTION)),
    f(2, "httpGet", Msg(HTTP_GET_ACTION)),
    f(3, "tcpSocket", Msg(TCP_SOCKET_ACTION)),
    f(4, "sleep", Msg(SLEEP_ACTION)),
];
pub(crate) const SLEEP_ACTION: Table = &[f(1, "seconds", I64).keep()];
pub(crate) const SECURITY_CONTEXT: Table = &[
    f(1, "capabilities", Msg(CAPABILITIES)),
    f(2, "privileged", Bool).keep(),
    f(3, "seLinuxOptions", Msg(SE_LINUX_OPTIONS)),
    f(10, "windowsOptions", Msg(WINDOWS_SECURITY_CONTEXT_OPTIONS)),
    f(4, "runAsUser", I64).keep(),
    f(8, "runAsGroup", I64).keep(),
    f(5, "runAsNonRoot", Bool).keep(),
    f(6, "readOnlyRootFilesystem", Bool).keep(),
    f(7, "allowPrivilegeEscalation", Bool).keep(),
    f(9, "procMount", Str).keep(),
    f(11, "seccompProfile", Msg(SECCOMP_PROFILE)),
    f(12, "appArmorProfile", Msg(APP_ARMOR_PROFILE)),
];
pub(crate) const CAPABILITIES: Table = &[f(1, "add", Str).list(), f(2, "drop", Str).list()];
pub(crate) const SE_LINUX_OPTIONS: Table = &[
    f(1, "user", Str),
    f(2, "role", Str),
    f(3, "type", Str),
    f(4, "level", Str),
];
pub(crate) const WINDOWS_SECURITY_CONTEXT_OPTIONS: Table = &[
    f(1, "gmsaCredentialSpecName", Str).keep(),
    f(2, "gmsaCredentialSpec", Str).keep(),
    f(3, "runAsUserName", Str).keep(),
    f(4, "hostProcess", Bool).keep(),
];
pub(crate) const SECCOMP_PROFILE: Table = &[
    f(1, "type", Str).keep(),
    f(2, "localhostProfile", Str).keep(),
];
pub(crate) const APP_ARMOR_PROFILE: Table = &[
    f(1, "type", Str).keep(),
    f(2, "localhostProfile", Str).keep(),
];
pub(crate) const EPHEMERAL_CONTAINER: Table = &[
    f(1, "", Inline(EPHEMERAL_CONTAINER_COMMON)),
    f(2, "targetContainerName", Str),
];
pub(crate) const EPHEMERAL_CONTAINER_COMMON: Table = &[
    f(1, "name", Str).keep(),
    f(2, "image", Str),
    f(3, "command", Str).list(),
    f(4, "args", Str).list(),
    f(5, "workingDir", Str),
    f(6, "ports", Msg(CONTAINER_PORT)).list(),
    f(19, "envFrom", Msg(ENV_FROM_SOURCE)).list(),
    f(7, "env", Msg(ENV_VAR)).list(),
    f(8, "resources", Msg(RESOURCE_REQUIREMENTS)),
    f(23, "resizePolicy", Msg(CONTAINER_RESIZE_POLICY)).list(),
    f(24, "restartPolicy", Str).keep(),
    f(9, "volumeMounts", Msg(VOLUME_MOUNT)).list(),
    f(21, "volumeDevices", Msg(VOLUME_DEVICE)).list(),
    f(10, "livenessProbe", Msg(PROBE)),
    f(11, "readinessProbe", Msg(PROBE)),
    f(22, "startupProbe", Msg(PROBE)),
    f(12, "lifecycle", Msg(LIFECYCLE)),
    f(13, "terminationMessagePath", Str),
    f(20, "terminationMessagePolicy", Str),
    f(14, "imagePullPolicy", Str),
    f(15, "securityContext", Msg(SECURITY_CONTEXT)),
    f(16, "stdin", Bool),
    f(17, "stdinOnce", Bool),
    f(18, "tty", Bool),
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
