//! core/v1 volumes: every volume source a PodSpec can name, and the
//! PersistentVolumeClaim template of ephemeral volumes.

use super::*;

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
    f(3, "labelSelector", Msg(super::super::meta::LABEL_SELECTOR)),
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
    f(1, "metadata", Msg(super::super::meta::OBJECT_META)),
    f(2, "spec", Msg(PERSISTENT_VOLUME_CLAIM_SPEC)),
];
pub(crate) const PERSISTENT_VOLUME_CLAIM_SPEC: Table = &[
    f(1, "accessModes", Str).list(),
    f(4, "selector", Msg(super::super::meta::LABEL_SELECTOR)),
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
