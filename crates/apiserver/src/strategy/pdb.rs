//! PodDisruptionBudgets: `minAvailable` and `maxUnavailable` exclude each
//! other, budgets carry `generation`, and an evicted pod stays discounted
//! for a while (shared by the eviction subresource and the disruption
//! controller).

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::policy::v1 as policy;
use serde_json::Value;

use crate::storage::registry::{Resource, Strategy};

/// How long a pod stays in a budget's `disruptedPods` before the disruption
/// controller stops discounting it.
pub const DISRUPTED_POD_TIMEOUT_SECS: i64 = 120;

#[derive(Debug)]
pub struct PodDisruptionBudget;

impl Strategy for PodDisruptionBudget {
    fn has_generation(&self) -> bool {
        true
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        let p = super::typed::<policy::PodDisruptionBudget>(obj)?;
        let mut causes = Vec::new();
        if let Some(spec) = p.spec
            && spec.min_available.is_some()
            && spec.max_unavailable.is_some()
        {
            causes.push(Cause::invalid(
                "spec",
                "minAvailable and maxUnavailable cannot be both set",
            ));
        }
        Ok(causes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn min_available_and_max_unavailable_exclude_each_other() {
        let res = crate::strategy::resources()
            .into_iter()
            .find(|r| r.kind == "PodDisruptionBudget")
            .unwrap();
        let pdb = |spec: Value| json!({"metadata": {"name": "p"}, "spec": spec});
        let ok = PodDisruptionBudget.validate(&res, &pdb(json!({"minAvailable": 1})));
        assert!(ok.unwrap().is_empty());
        let both = pdb(json!({"minAvailable": 1, "maxUnavailable": 1}));
        assert_eq!(
            PodDisruptionBudget.validate(&res, &both).unwrap()[0].field,
            "spec"
        );
        let typed = pdb(json!({"minAvailable": [1]}));
        assert_eq!(
            PodDisruptionBudget.validate(&res, &typed).unwrap_err().code,
            400
        );
    }
}
