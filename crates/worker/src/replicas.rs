//! How many replicas a wanted machine deployment gets (§4.3 step 2).
//!
//! The actuator owns the replica count only where the cluster autoscaler
//! does not: it sets it on creation, when the shoot hibernates or wakes up,
//! when no pool autoscales, and when the count falls outside the
//! deployment's bounds. Otherwise it keeps the existing count, which the
//! autoscaler manages.

use crate::types::WorkerPool;

/// Whether any pool can autoscale (`maximum > minimum`); only then does
/// gardenlet deploy the cluster autoscaler.
pub fn cluster_autoscaler_used(pools: &[WorkerPool]) -> bool {
    pools.iter().any(|p| p.maximum > p.minimum)
}

/// Whether the shoot is waking up: it is not hibernated and every existing
/// machine deployment is at zero replicas.
pub fn shoot_is_waking_up(
    hibernated: bool,
    existing_replicas: impl IntoIterator<Item = i32>,
) -> bool {
    !hibernated && existing_replicas.into_iter().all(|r| r == 0)
}

/// Everything the replica decision depends on, for one deployment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaInputs {
    /// The deployment's minimum (its zone share of the pool's).
    pub minimum: i32,
    /// The deployment's maximum.
    pub maximum: i32,
    /// The shoot is hibernated.
    pub hibernated: bool,
    /// Some pool autoscales ([`cluster_autoscaler_used`]).
    pub cluster_autoscaler_used: bool,
    /// `spec.replicas` of the existing deployment, if it exists.
    pub existing: Option<i32>,
    /// Replicas from restored shoot state (control-plane migration).
    pub restored: Option<i32>,
    /// [`shoot_is_waking_up`] over all existing deployments.
    pub waking_up: bool,
}

/// The replica count, by the first rule that applies:
///
/// 1. hibernated → 0;
/// 2. no pool autoscales → minimum (equal to maximum then);
/// 3. the deployment is new → the restored count if any, else minimum;
/// 4. the shoot wakes up → minimum;
/// 5. below minimum → minimum; above maximum → maximum;
/// 6. otherwise the existing count, left to the autoscaler.
pub fn desired_replicas(inputs: &ReplicaInputs) -> i32 {
    if inputs.hibernated {
        return 0;
    }
    if !inputs.cluster_autoscaler_used {
        return inputs.minimum;
    }
    let Some(existing) = inputs.existing else {
        return inputs.restored.unwrap_or(inputs.minimum);
    };
    if inputs.waking_up || existing < inputs.minimum {
        inputs.minimum
    } else if existing > inputs.maximum {
        inputs.maximum
    } else {
        existing
    }
}
