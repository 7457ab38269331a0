//! EndpointSlices: they carry `generation`, and kube's strategy bumps it on
//! a change of the labels too (other kinds only on changes outside
//! metadata); a PUT creates a missing slice.

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::discovery::v1 as disc;
use serde_json::Value;

use crate::object;
use crate::storage::registry::{Resource, Strategy};

#[derive(Debug)]
pub struct EndpointSlice;

impl Strategy for EndpointSlice {
    fn has_generation(&self) -> bool {
        true
    }

    fn apply_defaults(&self, _res: &Resource, obj: &mut Value) {
        super::defaults::on(obj, super::defaults::endpoint_slice);
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        super::typed::<disc::EndpointSlice>(obj)?;
        Ok(Vec::new())
    }

    fn create_on_update(&self) -> bool {
        true
    }

    fn generation_changed(&self, old: &Value, new: &Value, status_subresource: bool) -> bool {
        let labels = |o: &Value| object::meta(o).and_then(|m| m.get("labels")).cloned();
        labels(old) != labels(new)
            || object::generation_relevant_differs(old, new, status_subresource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_label_change_moves_generation() {
        let old = json!({"metadata": {"name": "s", "labels": {"a": "1"}}, "endpoints": []});
        let mut new = old.clone();
        assert!(!EndpointSlice.generation_changed(&old, &new, false));
        new["metadata"]["labels"]["a"] = json!("2");
        assert!(EndpointSlice.generation_changed(&old, &new, false));
        new = old.clone();
        new["metadata"]["annotations"] = json!({"x": "y"});
        assert!(!EndpointSlice.generation_changed(&old, &new, false));
    }
}
