//! Leases: leader election and node heartbeats replace them with a PUT that
//! creates them when missing, as kube allows for this kind.

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::coordination::v1 as coord;
use serde_json::Value;

use crate::storage::registry::{Resource, Strategy};

#[derive(Debug)]
pub struct Lease;

impl Strategy for Lease {
    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        super::typed::<coord::Lease>(obj)?;
        Ok(Vec::new())
    }

    fn create_on_update(&self) -> bool {
        true
    }
}
