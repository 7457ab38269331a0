//! Hot update: the class's changed provider spec applied to the VM in
//! place through the driver.

use std::time::Duration;

use api::MachineClass;
use driver::{Outcome, Step, UpdateMachineRequest};
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

use super::Scope;
use crate::controllers::context::Error;
use crate::machine as decide;

impl Scope<'_> {
    /// Hot update (seed 003 §2.2.3, option 2): when the class's provider
    /// spec differs from the one last applied to the VM, the driver applies
    /// what it can in place. What counts as hot-updatable is the driver's
    /// decision (the local provider: tags); it refuses other changes, which
    /// then only take effect for new machines, since MCM never rolls
    /// machines out for class changes. `Unimplemented` skips quietly.
    pub(super) async fn hot_update(
        &mut self,
        class: &MachineClass,
        secret: &Secret,
    ) -> Result<Option<Duration>, Error> {
        let Some(last) = decide::hot_update_needed(&self.machine, &class.provider_spec) else {
            return Ok(None);
        };
        let answer = self
            .deps
            .driver
            .update_machine(UpdateMachineRequest {
                machine: &self.machine,
                machine_class: class,
                secret,
                last_applied_provider_spec: last.as_ref(),
            })
            .await;
        match answer {
            Ok(_) => {
                let p = json!({"metadata": {"annotations": {
                    decide::LAST_APPLIED_PROVIDER_SPEC: class.provider_spec.to_string()
                }}});
                self.patch(&p).await?;
                self.event(
                    false,
                    "HotUpdated",
                    "Applied the class's provider spec to the VM in place".into(),
                );
                Ok(None)
            }
            Err(e) => match e.code.outcome(Step::HotUpdate) {
                Outcome::Retry(r) => {
                    self.event(true, "HotUpdateFailed", e.to_string());
                    Ok(Some(r.period(self.settings.resource_exhausted_retry)))
                }
                _ => Ok(None),
            },
        }
    }
}
