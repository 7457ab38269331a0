//! Upstream's well-known labels, annotations, finalizers, taints and
//! condition vocabulary (`api/v1beta1/common_types.go`,
//! `machine_types.go`, `condition_consts.go`), spelled exactly as upstream
//! so that existing manifests, tooling and `kubectl -l` queries work.

/// The owning Cluster, on every object of a cluster.
pub const CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
/// The MachineDeployment a MachineSet or Machine belongs to.
pub const DEPLOYMENT_NAME: &str = "cluster.x-k8s.io/deployment-name";
/// The MachineSet a Machine belongs to.
pub const SET_NAME: &str = "cluster.x-k8s.io/set-name";
/// A MachinePool's Machines (never created by trellis; read to recognise
/// Machines that are not stand-alone).
pub const POOL_NAME: &str = "cluster.x-k8s.io/pool-name";
/// A control-plane Machine.
pub const CONTROL_PLANE: &str = "cluster.x-k8s.io/control-plane";
/// The control-plane object owning a control-plane Machine.
pub const CONTROL_PLANE_NAME: &str = "cluster.x-k8s.io/control-plane-name";
/// The rollout hash of a MachineSet's template, on the set and its Machines.
pub const MACHINE_TEMPLATE_HASH: &str = "machine-template-hash";
/// The template a clone was made from.
pub const CLONED_FROM_NAME: &str = "cluster.x-k8s.io/cloned-from-name";
/// `Kind.group` of the template a clone was made from.
pub const CLONED_FROM_GROUP_KIND: &str = "cluster.x-k8s.io/cloned-from-groupkind";
/// Pauses reconciliation of the object it is on (any value).
pub const PAUSED: &str = "cluster.x-k8s.io/paused";
/// Deletes this Machine first on scale-down (any value).
pub const DELETE_MACHINE: &str = "cluster.x-k8s.io/delete-machine";
/// MachineHealthChecks ignore this Machine.
pub const SKIP_REMEDIATION: &str = "cluster.x-k8s.io/skip-remediation";
/// MachineHealthChecks mark this Machine unhealthy at once.
pub const REMEDIATE_MACHINE: &str = "cluster.x-k8s.io/remediate-machine";
/// The Machine's Node is not drained.
pub const EXCLUDE_NODE_DRAINING: &str = "machine.cluster.x-k8s.io/exclude-node-draining";
/// The Machine's deletion does not wait for volumes to detach.
pub const EXCLUDE_WAIT_FOR_VOLUME_DETACH: &str =
    "machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach";
/// Prefix of annotations that hold a deleting Machine before the drain.
pub const PRE_DRAIN_HOOK_PREFIX: &str = "pre-drain.delete.hook.machine.cluster.x-k8s.io";
/// Prefix of annotations that hold a deleting Machine before its
/// infrastructure and bootstrap objects are deleted.
pub const PRE_TERMINATE_HOOK_PREFIX: &str = "pre-terminate.delete.hook.machine.cluster.x-k8s.io";
/// A MachineSet that must never scale up (old sets under `OnDelete`).
pub const DISABLE_MACHINE_CREATE: &str = "cluster.x-k8s.io/disable-machine-create";
/// Rollout bookkeeping on MachineDeployments and MachineSets (note
/// `clusters.` in the group, as upstream spells it).
pub const REVISION: &str = "machinedeployment.clusters.x-k8s.io/revision";
pub const REVISION_HISTORY: &str = "machinedeployment.clusters.x-k8s.io/revision-history";
pub const DESIRED_REPLICAS: &str = "machinedeployment.clusters.x-k8s.io/desired-replicas";
pub const MAX_REPLICAS: &str = "machinedeployment.clusters.x-k8s.io/max-replicas";
/// Autoscaler bounds that drive replica defaulting.
pub const AUTOSCALER_MIN_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
pub const AUTOSCALER_MAX_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";

/// Node annotations the Machine controller writes.
pub const NODE_CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
pub const NODE_CLUSTER_NAMESPACE: &str = "cluster.x-k8s.io/cluster-namespace";
pub const NODE_MACHINE: &str = "cluster.x-k8s.io/machine";
pub const NODE_OWNER_KIND: &str = "cluster.x-k8s.io/owner-kind";
pub const NODE_OWNER_NAME: &str = "cluster.x-k8s.io/owner-name";
pub const NODE_LABELS_FROM_MACHINE: &str = "cluster.x-k8s.io/labels-from-machine";
/// Pods with this label and value `skip` are not drained.
pub const DRAIN_LABEL: &str = "cluster.x-k8s.io/drain";

/// The taint bootstrap providers register nodes with and the Machine
/// controller removes once the node's labels are in place.
pub const UNINITIALIZED_TAINT: &str = "node.cluster.x-k8s.io/uninitialized";

/// Finalizers.
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";
pub const MACHINE_SET_FINALIZER: &str = "cluster.x-k8s.io/machineset";
pub const MACHINE_DEPLOYMENT_FINALIZER: &str = "cluster.x-k8s.io/machinedeployment";
pub const CLUSTER_FINALIZER: &str = "cluster.cluster.x-k8s.io";

/// The contract label prefix on provider CRDs: `cluster.x-k8s.io/v1beta1:
/// v1alpha4_v1beta1` lists the provider's versions for that contract.
pub const CONTRACT_LABEL_PREFIX: &str = "cluster.x-k8s.io/";
/// The contract this implementation speaks.
pub const CONTRACT: &str = "v1beta1";
/// Which provider a CRD belongs to (set by clusterctl upstream).
pub const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider";

/// Secret type of bootstrap data and kubeconfig Secrets.
pub const SECRET_TYPE: &str = "cluster.x-k8s.io/secret";

/// Whether a label or annotation key is in `domain` or one of its
/// subdomains (`node-role.kubernetes.io/x` is in `node-role.kubernetes.io`).
pub fn in_domain(key: &str, domain: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    prefix == domain || prefix.ends_with(&format!(".{domain}"))
}

/// Whether any annotation has `prefix` as its key or key prefix
/// (`prefix` or `prefix/<name>`), as the deletion hooks do.
pub fn has_hook<'a>(mut keys: impl Iterator<Item = &'a String>, prefix: &str) -> bool {
    keys.any(|k| k == prefix || k.starts_with(&format!("{prefix}/")))
}

/// Condition types of v1beta1.
pub mod conditions {
    pub const READY: &str = "Ready";
    pub const BOOTSTRAP_READY: &str = "BootstrapReady";
    pub const INFRASTRUCTURE_READY: &str = "InfrastructureReady";
    pub const NODE_HEALTHY: &str = "NodeHealthy";
    pub const DRAINING_SUCCEEDED: &str = "DrainingSucceeded";
    pub const PRE_DRAIN_HOOK_SUCCEEDED: &str = "PreDrainDeleteHookSucceeded";
    pub const PRE_TERMINATE_HOOK_SUCCEEDED: &str = "PreTerminateDeleteHookSucceeded";
    pub const VOLUME_DETACH_SUCCEEDED: &str = "VolumeDetachSucceeded";
    pub const HEALTH_CHECK_SUCCEEDED: &str = "HealthCheckSucceeded";
    pub const OWNER_REMEDIATED: &str = "OwnerRemediated";
    pub const REMEDIATION_ALLOWED: &str = "RemediationAllowed";
    pub const MACHINES_CREATED: &str = "MachinesCreated";
    pub const MACHINES_READY: &str = "MachinesReady";
    pub const RESIZED: &str = "Resized";
    pub const AVAILABLE: &str = "Available";
    pub const MACHINE_SET_READY: &str = "MachineSetReady";
    pub const CONTROL_PLANE_INITIALIZED: &str = "ControlPlaneInitialized";
    pub const CONTROL_PLANE_READY: &str = "ControlPlaneReady";
    pub const PAUSED: &str = "Paused";
}

/// Condition reasons of v1beta1 (and the few trellis adds, marked).
pub mod reasons {
    pub const WAITING_FOR_DATA_SECRET: &str = "WaitingForDataSecret";
    pub const WAITING_FOR_INFRASTRUCTURE: &str = "WaitingForInfrastructure";
    pub const DELETING: &str = "Deleting";
    pub const DELETED: &str = "Deleted";
    pub const DELETION_FAILED: &str = "DeletionFailed";
    pub const WAITING_FOR_NODE_REF: &str = "WaitingForNodeRef";
    pub const NODE_PROVISIONING: &str = "NodeProvisioning";
    pub const NODE_NOT_FOUND: &str = "NodeNotFound";
    pub const NODE_CONDITIONS_FAILED: &str = "NodeConditionsFailed";
    pub const NODE_INSPECTION_FAILED: &str = "NodeInspectionFailed";
    pub const DRAINING: &str = "Draining";
    pub const DRAINING_FAILED: &str = "DrainingFailed";
    pub const WAITING_EXTERNAL_HOOK: &str = "WaitingExternalHook";
    pub const WAITING_FOR_VOLUME_DETACH: &str = "WaitingForVolumeDetach";
    pub const WAITING_FOR_REMEDIATION: &str = "WaitingForRemediation";
    pub const REMEDIATION_DEFERRED: &str = "RemediationDeferred";
    pub const TOO_MANY_UNHEALTHY: &str = "TooManyUnhealthy";
    pub const UNHEALTHY_NODE: &str = "UnhealthyNode";
    pub const NODE_STARTUP_TIMEOUT: &str = "NodeStartupTimeout";
    pub const MACHINE_HAS_FAILURE: &str = "MachineHasFailure";
    pub const HAS_REMEDIATE_ANNOTATION: &str = "HasRemediateMachineAnnotation";
    pub const SCALING_UP: &str = "ScalingUp";
    pub const SCALING_DOWN: &str = "ScalingDown";
    pub const WAITING_FOR_AVAILABLE_MACHINES: &str = "WaitingForAvailableMachines";
    pub const WAITING_FOR_CONTROL_PLANE: &str = "WaitingForControlPlane";
    pub const BOOTSTRAP_TEMPLATE_CLONING_FAILED: &str = "BootstrapTemplateCloningFailed";
    pub const INFRASTRUCTURE_TEMPLATE_CLONING_FAILED: &str = "InfrastructureTemplateCloningFailed";
    pub const MACHINE_CREATION_FAILED: &str = "MachineCreationFailed";
    /// trellis: a reference names a kind no CRD serves, or whose CRD lacks
    /// the contract label; upstream only logs the error and retries.
    pub const INVALID_REFERENCE: &str = "InvalidReference";
    /// trellis: the referenced object does not exist (yet).
    pub const REFERENCE_NOT_FOUND: &str = "ReferenceNotFound";
    /// trellis: a reconcile step failed; the message says which.
    pub const RECONCILE_ERROR: &str = "ReconcileError";
}

/// Upstream's `MachineStatusError` values for `failureReason`.
pub mod failure {
    pub const INVALID_CONFIGURATION: &str = "InvalidConfiguration";
    pub const CREATE_ERROR: &str = "CreateError";
    pub const DELETE_ERROR: &str = "DeleteError";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_and_hooks() {
        assert!(in_domain(
            "node-role.kubernetes.io/worker",
            "node-role.kubernetes.io"
        ));
        assert!(in_domain(
            "a.node.cluster.x-k8s.io/x",
            "node.cluster.x-k8s.io"
        ));
        assert!(!in_domain(
            "xnode.cluster.x-k8s.io/x",
            "node.cluster.x-k8s.io"
        ));
        assert!(!in_domain("foo", "foo"));
        let keys = [
            "pre-drain.delete.hook.machine.cluster.x-k8s.io/mine".to_string(),
            "other".to_string(),
        ];
        assert!(has_hook(keys.iter(), PRE_DRAIN_HOOK_PREFIX));
        assert!(!has_hook(keys.iter(), PRE_TERMINATE_HOOK_PREFIX));
        let bare = [PRE_TERMINATE_HOOK_PREFIX.to_string()];
        assert!(has_hook(bare.iter(), PRE_TERMINATE_HOOK_PREFIX));
    }
}
