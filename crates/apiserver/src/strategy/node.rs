//! Nodes: a new node keeps the status its kubelet sends with it (other kinds
//! with a status subresource drop it on create).

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::core::v1 as core;
use serde_json::Value;

use crate::storage::registry::{Resource, Strategy};

#[derive(Debug)]
pub struct Node;

impl Strategy for Node {
    fn initial_status(&self, given: Option<Value>) -> Option<Value> {
        given
    }

    fn apply_defaults(&self, _res: &Resource, obj: &mut Value) {
        super::defaults::on(obj, super::defaults::node);
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        super::typed::<core::Node>(obj)?;
        Ok(Vec::new())
    }
}
