//! core/v1 containers: ports, environment, resources, mounts, probes,
//! lifecycle hooks and security contexts (ephemeral containers included).

use super::*;

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
