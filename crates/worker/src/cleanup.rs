//! What to delete after the wanted objects are applied (§4.3 step 6) or
//! when the Worker is deleted.
//!
//! Upstream's rules: every machine deployment in the namespace that is not
//! wanted; every machine class no wanted deployment uses; every secret
//! labelled `gardener.cloud/purpose=machineclass` no wanted deployment uses.
//! Other secrets (the cloudprovider credentials, user data) are never
//! touched. On Worker deletion nothing is wanted, so everything goes.

use std::collections::BTreeMap;

use crate::labels;
use crate::plan::WantedDeployment;

/// A secret in the Worker's namespace, as far as cleanup cares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExistingSecret {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

impl ExistingSecret {
    /// Whether the secret is a machine-class secret.
    pub fn is_machine_class_secret(&self) -> bool {
        self.labels.get(labels::PURPOSE).map(String::as_str) == Some(labels::PURPOSE_MACHINE_CLASS)
    }
}

/// Names of the objects to delete, each list sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanupPlan {
    /// Machine deployments no longer wanted.
    pub machine_deployments: Vec<String>,
    /// Machine classes no wanted deployment uses.
    pub machine_classes: Vec<String>,
    /// Machine-class secrets no wanted deployment uses.
    pub secrets: Vec<String>,
}

impl CleanupPlan {
    /// Whether there is nothing to delete.
    pub fn is_empty(&self) -> bool {
        self.machine_deployments.is_empty()
            && self.machine_classes.is_empty()
            && self.secrets.is_empty()
    }
}

/// The objects that exist but are not wanted.
pub fn cleanup_plan(
    wanted: &[WantedDeployment],
    existing_deployments: &[String],
    existing_classes: &[String],
    existing_secrets: &[ExistingSecret],
) -> CleanupPlan {
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v.dedup();
        v
    };
    CleanupPlan {
        machine_deployments: sorted(
            existing_deployments
                .iter()
                .filter(|d| !wanted.iter().any(|w| &w.name == *d))
                .cloned()
                .collect(),
        ),
        machine_classes: sorted(
            existing_classes
                .iter()
                .filter(|c| !wanted.iter().any(|w| &w.class_name == *c))
                .cloned()
                .collect(),
        ),
        secrets: sorted(
            existing_secrets
                .iter()
                .filter(|s| s.is_machine_class_secret())
                .filter(|s| !wanted.iter().any(|w| w.secret_name == s.name))
                .map(|s| s.name.clone())
                .collect(),
        ),
    }
}

/// The deletion plan of a Worker: every deployment, class and class secret.
pub fn deletion_plan(
    existing_deployments: &[String],
    existing_classes: &[String],
    existing_secrets: &[ExistingSecret],
) -> CleanupPlan {
    cleanup_plan(
        &[],
        existing_deployments,
        existing_classes,
        existing_secrets,
    )
}
