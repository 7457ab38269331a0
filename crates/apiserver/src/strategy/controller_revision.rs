//! ControllerRevisions (apps/v1): the immutable snapshots StatefulSets
//! (and DaemonSets) keep of their templates. `data` never changes once
//! written; `revision` may (a rollback moves an old snapshot to the
//! front), but never below zero.

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::apps::v1 as apps;
use serde_json::Value;

use crate::storage::registry::{Resource, Strategy};

#[derive(Debug)]
pub struct ControllerRevision;

impl Strategy for ControllerRevision {
    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        let cr = super::typed::<apps::ControllerRevision>(obj)?;
        let mut causes = Vec::new();
        if cr.revision < 0 {
            causes.push(Cause::invalid(
                "revision",
                format!(
                    "Invalid value: {}: must be greater than or equal to 0",
                    cr.revision
                ),
            ));
        }
        Ok(causes)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        if new.get("data") != old.get("data") {
            vec![Cause::invalid("data", "field is immutable")]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn res() -> Resource {
        crate::strategy::resources()
            .into_iter()
            .find(|r| r.kind == "ControllerRevision")
            .unwrap()
    }

    #[test]
    fn data_is_immutable_and_revisions_not_negative() {
        let old = json!({"metadata": {"name": "web-1"}, "revision": 1, "data": {"spec": {}}});
        assert!(
            ControllerRevision
                .validate(&res(), &old)
                .unwrap()
                .is_empty()
        );
        let mut rolled_back = old.clone();
        rolled_back["revision"] = json!(3);
        assert!(
            ControllerRevision
                .validate_update(&rolled_back, &old)
                .is_empty()
        );
        let mut changed = old.clone();
        changed["data"] = json!({"spec": {"x": 1}});
        assert_eq!(
            ControllerRevision.validate_update(&changed, &old)[0].field,
            "data"
        );
        let mut negative = old.clone();
        negative["revision"] = json!(-1);
        assert_eq!(
            ControllerRevision.validate(&res(), &negative).unwrap()[0].field,
            "revision"
        );
    }
}
