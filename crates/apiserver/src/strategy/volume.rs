//! PersistentVolumes and PersistentVolumeClaims: both start `Pending`.

use std::marker::PhantomData;

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::core::v1 as core;
use serde_json::{Map, Value, json};

use crate::storage::registry::{Resource, Strategy};

/// A volume kind `T` with its defaults.
pub struct Volume<T> {
    defaults: fn(&mut Map<String, Value>),
    kind: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Volume<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Volume<{}>", std::any::type_name::<T>())
    }
}

pub static PERSISTENT_VOLUME: Volume<core::PersistentVolume> = Volume {
    defaults: super::defaults::persistent_volume,
    kind: PhantomData,
};
pub static PERSISTENT_VOLUME_CLAIM: Volume<core::PersistentVolumeClaim> = Volume {
    defaults: super::defaults::persistent_volume_claim,
    kind: PhantomData,
};

impl<T: serde::de::DeserializeOwned> Strategy for Volume<T> {
    fn initial_status(&self, _given: Option<Value>) -> Option<Value> {
        Some(json!({"phase": "Pending"}))
    }

    fn apply_defaults(&self, _res: &Resource, obj: &mut Value) {
        super::defaults::on(obj, self.defaults);
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        super::typed::<T>(obj)?;
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_and_claims_start_pending_whatever_was_sent() {
        let given = Some(json!({"phase": "Bound"}));
        assert_eq!(
            PERSISTENT_VOLUME.initial_status(given.clone()).unwrap()["phase"],
            "Pending"
        );
        assert_eq!(
            PERSISTENT_VOLUME_CLAIM.initial_status(given).unwrap()["phase"],
            "Pending"
        );
    }

    #[test]
    fn a_claim_must_decode_as_one() {
        let res = crate::strategy::resources()
            .into_iter()
            .find(|r| r.kind == "PersistentVolumeClaim")
            .unwrap();
        let ok = json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"]}});
        assert!(
            PERSISTENT_VOLUME_CLAIM
                .validate(&res, &ok)
                .unwrap()
                .is_empty()
        );
        let bad = json!({"metadata": {"name": "c"}, "spec": {"accessModes": "ReadWriteOnce"}});
        assert_eq!(
            PERSISTENT_VOLUME_CLAIM
                .validate(&res, &bad)
                .unwrap_err()
                .code,
            400
        );
    }
}
