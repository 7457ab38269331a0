//! The machine's class, as the machine controller reads it: the class and
//! its merged secrets, the class a deletion calls the driver with, and what
//! a live machine says and does while its class keeps a VM from being
//! created or is gone.

use std::time::Duration;

use api::{MachineClass, MachineOperationType, MachineState};
use driver::MEDIUM_RETRY;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;

use super::Scope;
use crate::controllers::context::{Error, class_secret};
use crate::machine::{self as decide, DeletionClass, StepFact};

impl Scope<'_> {
    /// The machine's class for a live pass: from the class cache (as
    /// upstream's lister), else read from the API (`None`: not found), so
    /// a class created just before its machines is not reported missing.
    /// The cache is current enough: the class cannot go while machines use
    /// it (its finalizer), and a change of it triggers their next pass
    /// only once the cache shows the change.
    pub(super) async fn live_class(&self) -> Result<Option<MachineClass>, Error> {
        let key = ObjectRef::new(&self.machine.spec.class.name).within(&self.ns);
        match self.deps.classes.get(&key) {
            Some(class) => Ok(Some((*class).clone())),
            None => self.class().await,
        }
    }

    /// The machine's class, read from the API (`None`: not found): what a
    /// deletion calls the driver with must not be a stale copy.
    pub(super) async fn class(&self) -> Result<Option<MachineClass>, Error> {
        let class_name = &self.machine.spec.class.name;
        let classes: Api<MachineClass> = Api::namespaced(self.ctx.control.clone(), &self.ns);
        classes
            .get_opt(class_name)
            .await
            .map_err(|e| Error::api(format!("machine class {class_name}"), e))
    }

    /// The class's secrets merged (the credentials win), from the secret
    /// cache where it holds them; a missing secret counts as empty (spec
    /// §1).
    pub(super) async fn secret_of(&self, class: &MachineClass) -> Result<Secret, Error> {
        class_secret(&self.ctx.control, &self.ns, class, Some(&self.deps.secrets)).await
    }

    /// The class and secret a deletion calls the driver with, or the fact
    /// that stops it from calling: no VM ever, or no class to call with.
    pub(super) async fn deletion_class(
        &self,
    ) -> Result<Result<(MachineClass, Secret), StepFact>, Error> {
        let (class, last_known) = match decide::deletion_class(&self.machine, self.class().await?) {
            DeletionClass::Use { class, last_known } => (*class, last_known),
            DeletionClass::NoVm => return Ok(Err(StepFact::NoVm)),
            DeletionClass::Missing(message) => {
                return Ok(Err(StepFact::ClassMissing { message }));
            }
        };
        if last_known {
            tracing::info!(machine = %self.name, class = %self.machine.spec.class.name,
                "the machine class is gone; calling the driver with the class the machine recorded");
        }
        let secret = self.secret_of(&class).await?;
        Ok(Ok((class, secret)))
    }

    /// No VM can be created from the class: say so in the last operation
    /// (once; the phase stays) and look again after the medium period, or
    /// as soon as the class changes.
    pub(super) fn blocked(&mut self, problem: String) -> Duration {
        let mut st = self.status();
        if st.last_operation.description != problem
            || st.last_operation.state != Some(MachineState::Failed)
        {
            st.last_operation = decide::last_op(
                MachineOperationType::Create,
                MachineState::Failed,
                problem.clone(),
                None,
                self.now,
            );
            self.set_status(st);
            self.event(true, "InvalidClass", problem);
        }
        MEDIUM_RETRY
    }

    /// The class of a machine that has its VM is gone. Nothing fails now
    /// (health goes on, the status is left alone), but a hot update cannot
    /// run and deleting the VM will rely on the machine's record of the
    /// class: one Warning event per machine says so.
    pub(super) fn class_gone(&mut self) {
        let uid = self.machine.uid().unwrap_or_default();
        if !self.deps.class_warned.lock().insert(uid) {
            return;
        }
        let class_name = self.machine.spec.class.name.clone();
        let deletion = match decide::KnownClass::recorded(&self.machine) {
            Some(Some(_)) => {
                "deleting it relies on the class the machine recorded; \
                              re-create the class to be safe"
            }
            _ => {
                "the machine has no record of the class, so the VM cannot be deleted \
                  until the class is back: re-create it"
            }
        };
        let note = format!(
            "MachineClass {}/{class_name} not found: the VM keeps running, but cannot be \
             updated in place, and {deletion}",
            self.ns
        );
        self.event(true, "ClassMissing", note);
    }

    /// The class is there (again): losing it later warns again.
    pub(super) fn class_found(&self) {
        if let Some(uid) = self.machine.uid() {
            self.deps.class_warned.lock().remove(&uid);
        }
    }
}
