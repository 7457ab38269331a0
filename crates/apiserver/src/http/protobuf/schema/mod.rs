//! Field tables of the built-in kinds: for every message, its field numbers,
//! the JSON names the same fields have, and how each decodes.
//!
//! The tables in the submodules mirror the `generated.proto` files of
//! `k8s.io/api` and `k8s.io/apimachinery` at Kubernetes 1.32 (the version
//! kubectl 1.32 encodes with), one submodule per API group. They cover the
//! whole message tree of every kind listed in [`for_kind`], so no field a
//! 1.32 client can send is silently lost; fields a newer client adds are
//! skipped, as kube-apiserver 1.32 would skip them.
//!
//! Go's JSON encoding decides which zero values appear in an object, so each
//! scalar field also records whether kube-apiserver would print its zero
//! value: pointer fields (`*int32`, `*bool`, …) and fields without
//! `omitempty` keep it, every other zero is left out. That is what makes a
//! protobuf body decode to the same JSON as the object a JSON client sends.

pub(crate) mod apps;
pub(crate) mod authentication;
pub(crate) mod authorization;
pub(crate) mod autoscaling;
pub(crate) mod batch;
pub(crate) mod coordination;
pub(crate) mod core;
pub(crate) mod discovery;
pub(crate) mod events;
pub(crate) mod meta;
pub(crate) mod policy;
pub(crate) mod rbac;

/// A message: its fields, in no particular order.
pub(crate) type Table = &'static [Field];

/// How a field's payload becomes JSON.
#[derive(Debug)]
pub(crate) enum Ty {
    /// `string` → JSON string.
    Str,
    /// `bytes` → base64 string, as Go's JSON encoding prints `[]byte`.
    Bytes,
    /// `int32` → number.
    I32,
    /// `int64` → number.
    I64,
    /// `bool`.
    Bool,
    /// A nested message → object.
    Msg(Table),
    /// An embedded Go struct (`json:",inline"`): its fields land in the
    /// enclosing object (`Volume.volumeSource`, `Probe.handler`, …).
    Inline(Table),
    /// `map<string, V>`, which protobuf sends as repeated entries with the key
    /// in field 1 and the value in field 2.
    Map(&'static Ty),
    /// `intstr.IntOrString {type = 1, intVal = 2, strVal = 3}` → number or
    /// string.
    IntOrString,
    /// `resource.Quantity {string = 1}` → string.
    Quantity,
    /// `metav1.Time {seconds = 1, nanos = 2}` → RFC 3339 with whole seconds.
    Time,
    /// `metav1.MicroTime` → RFC 3339 with six fractional digits.
    MicroTime,
    /// `runtime.RawExtension` / `metav1.FieldsV1 {raw = 1}`: JSON bytes,
    /// embedded as they are.
    Raw,
    /// A list type wrapped in a message (`ExtraValue {repeated string items =
    /// 1}`) → the bare JSON list.
    Items,
}

/// One field of a message.
#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) num: u64,
    /// The JSON name; empty for [`Ty::Inline`].
    pub(crate) name: &'static str,
    pub(crate) ty: Ty,
    /// A repeated field → JSON list.
    pub(crate) list: bool,
    /// The zero value is printed (a pointer field, or one without
    /// `omitempty`); otherwise a zero scalar is left out.
    pub(crate) keep: bool,
}

/// A singular field whose zero value is left out of the JSON.
pub(crate) const fn f(num: u64, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        ty,
        list: false,
        keep: false,
    }
}

impl Field {
    /// Repeated.
    pub(crate) const fn list(mut self) -> Field {
        self.list = true;
        self
    }

    /// Keeps its zero value.
    pub(crate) const fn keep(mut self) -> Field {
        self.keep = true;
        self
    }
}

/// The table of a top-level kind, by the `apiVersion` and `kind` in the
/// protobuf envelope. `None` for kinds without a table.
pub(crate) fn for_kind(api_version: &str, kind: &str) -> Option<Table> {
    Some(match (api_version, kind) {
        // client-go stamps DeleteOptions with the group version of whichever
        // typed client sends them.
        (_, "DeleteOptions") => meta::DELETE_OPTIONS,
        ("v1", "Namespace") => core::NAMESPACE,
        ("v1", "ConfigMap") => core::CONFIG_MAP,
        ("v1", "Secret") => core::SECRET,
        ("v1", "ServiceAccount") => core::SERVICE_ACCOUNT,
        ("v1", "Service") => core::SERVICE,
        ("v1", "Pod") => core::POD,
        ("v1", "Node") => core::NODE,
        ("v1", "Endpoints") => core::ENDPOINTS,
        ("v1", "PersistentVolumeClaim") => core::PERSISTENT_VOLUME_CLAIM,
        ("v1", "Event") => core::EVENT,
        ("apps/v1", "Deployment") => apps::DEPLOYMENT,
        ("apps/v1", "StatefulSet") => apps::STATEFUL_SET,
        ("autoscaling/v1", "Scale") => autoscaling::SCALE,
        ("batch/v1", "Job") => batch::JOB,
        ("batch/v1", "CronJob") => batch::CRON_JOB,
        // policy/v1beta1 Eviction has the same fields; old clients send it.
        ("policy/v1" | "policy/v1beta1", "Eviction") => policy::EVICTION,
        ("policy/v1", "PodDisruptionBudget") => policy::POD_DISRUPTION_BUDGET,
        ("rbac.authorization.k8s.io/v1", "Role") => rbac::ROLE,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => rbac::CLUSTER_ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => rbac::ROLE_BINDING,
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => rbac::CLUSTER_ROLE_BINDING,
        ("coordination.k8s.io/v1", "Lease") => coordination::LEASE,
        ("discovery.k8s.io/v1", "EndpointSlice") => discovery::ENDPOINT_SLICE,
        ("events.k8s.io/v1", "Event") => events::EVENT,
        _ => return None,
    })
}
