//! The upstream names the controllers read and write: labels, annotations,
//! finalizers and event reasons, spelled as kube-controller-manager spells
//! them so that kubectl and other tools read our objects as theirs.

/// Label of a Deployment's ReplicaSets and pods: the pod template's hash.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// A ReplicaSet's place in its Deployment's rollout history.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// The earlier revisions a ReplicaSet served (after rollbacks to it).
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's replicas when it last scaled the ReplicaSet.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// The Deployment's replicas plus max surge when it last scaled the set.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Written by `kubectl apply`; never copied from a Deployment to its sets.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The annotation `kubectl rollout undo` of old (extensions/v1beta1)
/// Deployments left behind; never copied either.
pub const DEPRECATED_ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// Lower cost pods are deleted first when a ReplicaSet scales down.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// A StatefulSet pod's revision: the name of its ControllerRevision.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";
/// A ControllerRevision's hash label.
pub const REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";
/// A StatefulSet pod's own name, so a Service can select exactly one.
pub const STATEFULSET_POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
/// A StatefulSet pod's ordinal (the PodIndexLabel feature, on since 1.28).
pub const POD_INDEX: &str = "apps.kubernetes.io/pod-index";

/// The finalizer a Job puts on its pods until it has counted them.
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Labels the API server puts on a Job's selector and pod template.
pub const JOB_CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
pub const JOB_NAME: &str = "batch.kubernetes.io/job-name";
/// The same, without prefix, for clients older than 1.27.
pub const LEGACY_JOB_CONTROLLER_UID: &str = "controller-uid";
pub const LEGACY_JOB_NAME: &str = "job-name";
/// The scheduled time a CronJob created a Job for, in the schedule's zone.
pub const CRONJOB_SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// An EndpointSlice's Service.
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";
/// Which controller manages an EndpointSlice.
pub const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY`] on the slices this crate writes.
pub const ENDPOINTSLICE_CONTROLLER: &str = "endpointslice-controller.k8s.io";
/// Marks the slices of a headless Service.
pub const HEADLESS: &str = "service.kubernetes.io/headless";
/// A node's zone, copied onto its endpoints.
pub const TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
