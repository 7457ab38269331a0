//! Endpoints: written by controllers with a PUT that creates them when
//! missing, as kube allows for this kind.

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::core::v1 as core;
use serde_json::Value;

use crate::storage::registry::{Resource, Strategy};

#[derive(Debug)]
pub struct Endpoints;

impl Strategy for Endpoints {
    fn apply_defaults(&self, _res: &Resource, obj: &mut Value) {
        super::defaults::on(obj, super::defaults::endpoints);
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        super::typed::<core::Endpoints>(obj)?;
        Ok(Vec::new())
    }

    fn create_on_update(&self) -> bool {
        true
    }
}
