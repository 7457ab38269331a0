//! Well-known label, annotation, taint, finalizer and node condition names.
//!
//! These strings are contract: cluster-autoscaler, gardener-node-agent,
//! Gardener itself and operators read and write them, so they are spelled
//! exactly as upstream MCM spells them. Grouped by the object they sit on.

// --- Machines ---------------------------------------------------------------

/// Label on a machine naming its node; the key that maps machines to nodes.
pub const NODE: &str = "node";

/// Label carried from the deployment's template, usually the deployment
/// name. Upstream keys its health-failure rate limit and metrics on it.
pub const NAME: &str = "name";

/// Label on machine sets' templates and machines holding the template hash,
/// so that machine sets of one deployment never select each other's machines.
pub const MACHINE_TEMPLATE_HASH: &str = "machine-template-hash";

/// Label that, when it parses as true, skips the graceful drain on deletion.
pub const FORCE_DELETION: &str = "force-deletion";

/// Label (`True`) that forces the drain before an in-place update.
pub const FORCE_DRAIN: &str = "force-drain";

/// Annotation ordering machines for scale-down: lower values go first.
/// Unset or unparsable counts as [`DEFAULT_MACHINE_PRIORITY`]; `1` marks the
/// machine the cluster autoscaler picked.
pub const MACHINE_PRIORITY: &str = "machinepriority.machine.sapcloud.io";

/// Priority given to new machines.
pub const DEFAULT_MACHINE_PRIORITY: &str = "3";

/// Annotation (RFC 3339) recording when a machine was marked priority 1 for
/// deletion; compared with the scaler's last replica change.
pub const MARKED_FOR_DELETION_TIME: &str = "machine.sapcloud.io/marked-for-deletion-time";

/// Annotation recording how long the node took to join, as a Go duration.
pub const MACHINE_JOIN_DURATION: &str = "node.machine.sapcloud.io/machine-join-duration";

/// Annotation with the creation timeout in effect (Go duration), passed from
/// deployment to machine set to machine.
pub const EFFECTIVE_CREATION_TIMEOUT: &str = "node.machine.sapcloud.io/effective-creation-timeout";

// --- Machine deployments and machine sets ------------------------------------

/// Annotation on a deployment where the cluster autoscaler lists the machines
/// to remove, as `m1~T1,m2~T2` (`~time` optional). On a node, `true` asks for
/// that node's machine to be replaced.
pub const TRIGGER_DELETION_BY_MCM: &str = "node.machine.sapcloud.io/trigger-deletion-by-mcm";

/// Annotation with the time the cluster autoscaler last changed the
/// deployment's replicas; copied to its machine sets.
pub const LAST_REPLICA_CHANGE_BY_SCALER_TIME: &str =
    "machine.sapcloud.io/last-deployment-replica-change-by-scaler-time";

/// Label (`True`) set by the overshooting safety check; a frozen machine set
/// does not scale up.
pub const FREEZE: &str = "freeze";

/// The value of [`FREEZE`] and the other boolean labels upstream writes.
pub const TRUE: &str = "True";

/// Annotation asking the safety controller to unfreeze a set or deployment.
pub const UNFREEZE: &str = "safety.machine.sapcloud.io/unfreeze";

/// Label on old machine sets during an in-place update that stops them from
/// scaling up.
pub const SCALE_UP_DISABLED: &str = "node.machine.sapcloud.io/scale-up-disabled";

/// Annotation with a machine set's revision, copied to the deployment.
pub const REVISION: &str = "deployment.kubernetes.io/revision";

/// Annotation listing earlier revisions of a reused machine set.
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";

/// Annotation with the deployment's replicas when the set was last scaled.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";

/// Annotation with replicas plus max surge when the set was last scaled.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// Annotation on an old machine set remembering that its nodes were tainted
/// [`PREFER_NO_SCHEDULE`]; also the key of that taint.
pub const PREFER_NO_SCHEDULE: &str = "deployment.machine.sapcloud.io/prefer-no-schedule";

/// kubectl's client-side apply record; never copied from a deployment to its
/// machine sets.
pub const KUBECTL_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

// --- Nodes ------------------------------------------------------------------

/// Label on a node naming its machine.
pub const NODE_MACHINE_NAME: &str = "node.gardener.cloud/machine-name";

/// Annotation on a node with the node template labels, annotations and
/// taints last applied, so keys dropped from the template can be removed
/// without touching foreign ones.
pub const LAST_APPLIED_ANNO_LABELS_TAINTS: &str =
    "node.machine.sapcloud.io/last-applied-anno-labels-taints";

/// Annotation on a node with the class's virtual capacity last applied.
pub const LAST_APPLIED_VIRTUAL_CAPACITY: &str =
    "node.machine.sapcloud.io/last-applied-virtual-capacity";

/// Annotation (`1`) on a node that has no machine: the controller leaves it
/// alone.
pub const NOT_MANAGED_BY_MCM: &str = "node.machine.sapcloud.io/not-managed-by-mcm";

/// Cluster-autoscaler annotation (`true`) that protects a node from
/// scale-down; set on a deployment's nodes during rollouts and on preserved
/// nodes.
pub const CA_SCALE_DOWN_DISABLED: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";

/// Annotation (`true`) recording that MCM, not a user, set
/// [`CA_SCALE_DOWN_DISABLED`], so MCM only removes its own.
pub const CA_SCALE_DOWN_DISABLED_BY_MCM: &str =
    "cluster-autoscaler.kubernetes.io/scale-down-disabled-by-mcm";

/// Label (`true`) marking a node as waiting for an in-place update.
pub const CANDIDATE_FOR_UPDATE: &str = "node.machine.sapcloud.io/candidate-for-update";

/// Label (`true`) marking a node chosen to be updated in place now.
pub const SELECTED_FOR_UPDATE: &str = "node.machine.sapcloud.io/selected-for-update";

/// Label set by the node agent with the outcome of an in-place update:
/// [`UPDATE_SUCCESSFUL`] or [`UPDATE_FAILED`].
pub const UPDATE_RESULT: &str = "node.machine.sapcloud.io/update-result";

/// Value of [`UPDATE_RESULT`] after a successful update.
pub const UPDATE_SUCCESSFUL: &str = "successful";

/// Value of [`UPDATE_RESULT`] after a failed update.
pub const UPDATE_FAILED: &str = "failed";

/// Annotation with the node agent's reason for a failed in-place update.
pub const UPDATE_FAILED_REASON: &str = "node.machine.sapcloud.io/update-failed-reason";

/// Annotation on a node or machine asking to keep the machine:
/// [`PRESERVE_NOW`], [`PRESERVE_WHEN_FAILED`], [`PRESERVE_AUTO`] or
/// [`PRESERVE_FALSE`]. The node's value wins.
pub const PRESERVE: &str = "node.machine.sapcloud.io/preserve";

/// Preserve the machine in any phase.
pub const PRESERVE_NOW: &str = "now";

/// Preserve the machine only once it has failed.
pub const PRESERVE_WHEN_FAILED: &str = "when-failed";

/// Set by the machine set controller on failed machines it preserves within
/// `autoPreserveFailedMachineMax`.
pub const PRESERVE_AUTO: &str = "auto-preserved";

/// Stop preserving.
pub const PRESERVE_FALSE: &str = "false";

/// Annotation on a machine with the node's preserve value last applied, so a
/// removal on the node is noticed.
pub const LAST_APPLIED_NODE_PRESERVE_VALUE: &str =
    "node.machine.sapcloud.io/last-applied-node-preserve-value";

// --- Taints -----------------------------------------------------------------

/// Taint (`NoSchedule`) put on new nodes by Gardener until its critical
/// components run; a machine stays `Pending` while its node carries it.
pub const CRITICAL_COMPONENTS_NOT_READY_TAINT: &str =
    "node.gardener.cloud/critical-components-not-ready";

/// Taint (`NoSchedule`) on the node of a preserved failed machine.
pub const PRESERVED_TAINT: &str = "node.machine.sapcloud.io/preserved";

// --- Finalizers and secret keys -----------------------------------------------

/// Finalizer on machines, machine sets, deployments and referenced classes.
pub const MCM_FINALIZER: &str = "machine.sapcloud.io/machine-controller-manager";

/// Finalizer on secrets referenced by a class.
pub const MC_FINALIZER: &str = "machine.sapcloud.io/machine-controller";

/// Finalizer on a node mapped to exactly one non-deleting machine.
pub const NODE_FINALIZER: &str = "node.machine.sapcloud.io/machine-controller";

/// Key of the class secret holding the cloud-init user data; required.
pub const USER_DATA_KEY: &str = "userData";

// --- Node conditions written by the machine controller ------------------------

/// Node condition set when deletion starts.
pub const NODE_TERMINATING: &str = "Terminating";

/// Reason of [`NODE_TERMINATING`] when the machine failed.
pub const TERMINATING_UNHEALTHY: &str = "Unhealthy";

/// Reason of [`NODE_TERMINATING`] for a scale-down.
pub const TERMINATING_SCALE_DOWN: &str = "ScaleDown";

/// Node condition tracking an in-place update; its reasons follow.
pub const NODE_IN_PLACE_UPDATE: &str = "InPlaceUpdate";

/// In-place reason: the node is labelled [`CANDIDATE_FOR_UPDATE`].
pub const CANDIDATE_FOR_UPDATE_REASON: &str = "CandidateForUpdate";

/// In-place reason: the node is labelled [`SELECTED_FOR_UPDATE`].
pub const SELECTED_FOR_UPDATE_REASON: &str = "SelectedForUpdate";

/// In-place reason: the drain finished.
pub const DRAIN_SUCCESSFUL_REASON: &str = "DrainSuccessful";

/// In-place reason: the node agent may start updating.
pub const READY_FOR_UPDATE_REASON: &str = "ReadyForUpdate";

/// In-place reason: the update succeeded.
pub const UPDATE_SUCCESSFUL_REASON: &str = "UpdateSuccessful";

/// In-place reason: the update failed.
pub const UPDATE_FAILED_REASON_CONDITION: &str = "UpdateFailed";

/// Node condition recording preservation. The spec names it `Preserved`;
/// some upstream revisions spell it `NodePreserved`.
pub const NODE_PRESERVED: &str = "Preserved";
