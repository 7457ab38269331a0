//! The creation flow (spec §2.1), the executor of
//! [`crate::machine::creation`]'s state machine: the bootstrap token, then
//! step by step the driver call or read the step names (find, create,
//! check the node name, delete a stale VM, record, initialize, verify),
//! each answer turned into the fact the planner's transition takes. The
//! planner decides where the pass goes and what its end writes.

use std::time::Duration;

use api::{MachineClass, MachinePhase, labels};
use driver::{
    CreateMachineRequest, DeleteMachineRequest, GetMachineStatusRequest, InitializeMachineRequest,
    SHORT_RETRY,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

use super::{Scope, is_status};
use crate::controllers::context::Error;
use crate::machine::{
    self as decide, CreationContext, CreationFact, CreationStep, CreationTransition, VmIds,
};

impl Scope<'_> {
    /// Gets or creates the machine's bootstrap token in the target cluster
    /// and returns it as `<id>.<secret>`. An existing token is reused, so
    /// retries hand the driver the same userData.
    async fn bootstrap_token(&self) -> Result<String, Error> {
        let id = decide::bootstrap_token_id(&self.name);
        let secret_name = decide::bootstrap_token_secret_name(&id);
        let secrets: Api<Secret> =
            Api::namespaced(self.target()?, decide::BOOTSTRAP_TOKEN_NAMESPACE);
        let read = |e| Error::api(format!("bootstrap token {secret_name}"), e);
        if let Some(token) = secrets
            .get_opt(&secret_name)
            .await
            .map_err(read)?
            .as_ref()
            .and_then(decide::token_of)
        {
            return Ok(token);
        }
        let token_secret = decide::generate_token_secret(&mut rand::rng());
        let expiry = self.now
            + chrono::Duration::from_std(self.settings.creation_timeout)
                .unwrap_or(chrono::Duration::MAX);
        let secret = decide::bootstrap_token_secret(
            &id,
            &token_secret,
            expiry,
            &self.settings.bootstrap_token_auth_extra_groups,
        );
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => Ok(format!("{id}.{token_secret}")),
            // Created concurrently (another machine with the same ID
            // suffix, or a replaced secret): use whatever is stored.
            Err(e) if is_status(&e, 409) => secrets
                .get_opt(&secret_name)
                .await
                .map_err(read)?
                .as_ref()
                .and_then(decide::token_of)
                .ok_or_else(|| {
                    Error::Encode(format!("bootstrap token {secret_name} without a token"))
                }),
            Err(e) => Err(read(e)),
        }
    }

    /// The creation flow (spec §2.1): runs [`decide::creation_transition`]
    /// from C1 until the pass ends, gathering each step's fact, and leaves
    /// the status the end decided for [`Scope::finish`]; returns when to
    /// look again.
    pub(super) async fn create(
        &mut self,
        class: &MachineClass,
        secret: &Secret,
    ) -> Result<Duration, Error> {
        let user_data = decide::secret_value(secret, labels::USER_DATA_KEY).unwrap_or_default();
        // Without a target cluster there is nothing to join, so no token.
        let token = if self.has_target() {
            self.bootstrap_token().await?
        } else {
            String::new()
        };
        let driver_secret = decide::with_user_data(
            secret,
            &decide::substitute_user_data(&user_data, &token, &self.name),
        );
        let cx = CreationContext::of(&self.machine, self.has_target(), &self.settings);
        let mut vm = VmIds::of(&self.machine);
        let mut step = CreationStep::GetVmStatus;
        loop {
            let fact = self.creation_fact(step, class, &driver_secret, &vm).await?;
            vm.learn(&fact);
            match decide::creation_transition(step, &fact, &cx) {
                CreationTransition::Next(next) => step = next,
                end => return self.end_creation(&end, class, &vm).await,
            }
        }
    }

    /// Carries out creation step `step` and reports what came of it.
    async fn creation_fact(
        &mut self,
        step: CreationStep,
        class: &MachineClass,
        secret: &Secret,
        vm: &VmIds,
    ) -> Result<CreationFact, Error> {
        let driver = self.deps.driver.clone();
        Ok(match step {
            CreationStep::GetVmStatus => {
                let answer = driver
                    .get_machine_status(GetMachineStatusRequest {
                        machine: &self.machine,
                        machine_class: class,
                        secret,
                    })
                    .await;
                match answer {
                    Ok(r) => CreationFact::VmFound(VmIds {
                        provider_id: r.provider_id,
                        node_name: r.node_name,
                        addresses: r.addresses,
                    }),
                    Err(e) => CreationFact::StatusFailed {
                        code: e.code,
                        message: e.message,
                    },
                }
            }
            CreationStep::CreateVm => {
                let answer = driver
                    .create_machine(CreateMachineRequest {
                        machine: &self.machine,
                        machine_class: class,
                        secret,
                    })
                    .await;
                match answer {
                    Ok(r) => {
                        tracing::info!(machine = %self.name, provider_id = %r.provider_id, "VM created");
                        self.event(false, "Created", format!("Created VM {}", r.provider_id));
                        CreationFact::VmCreated(VmIds {
                            provider_id: r.provider_id,
                            node_name: r.node_name,
                            addresses: r.addresses,
                        })
                    }
                    Err(e) => CreationFact::CreateFailed {
                        code: e.code,
                        message: e.message,
                    },
                }
            }
            CreationStep::CheckNodeName => match self.live_node(&vm.node_name).await? {
                Some(_) => CreationFact::NodeNameTaken,
                None => CreationFact::NodeNameFree,
            },
            CreationStep::DeleteStaleVm => {
                let mut stale = self.machine.clone();
                stale.spec.provider_id = vm.provider_id.clone();
                let answer = driver
                    .delete_machine(DeleteMachineRequest {
                        machine: &stale,
                        machine_class: class,
                        secret,
                    })
                    .await;
                match answer {
                    Ok(_) => CreationFact::StaleVmDeleted,
                    Err(e) => {
                        tracing::warn!(machine = %self.name, error = %e, "deleting a VM with a stale node failed");
                        CreationFact::StaleVmDeleteFailed
                    }
                }
            }
            CreationStep::RecordVm { .. } => {
                self.record_vm(vm, class).await?;
                CreationFact::Recorded
            }
            CreationStep::InitializeVm => {
                let answer = driver
                    .initialize_machine(InitializeMachineRequest {
                        machine: &self.machine,
                        machine_class: class,
                        secret,
                    })
                    .await;
                match answer {
                    Ok(r) => CreationFact::Initialized(VmIds {
                        provider_id: r.provider_id,
                        node_name: r.node_name,
                        addresses: r.addresses,
                    }),
                    Err(e) => CreationFact::InitializeFailed {
                        code: e.code,
                        message: e.message,
                    },
                }
            }
            CreationStep::VerifyVm if vm.complete(self.has_target()) => CreationFact::VmNamed,
            CreationStep::VerifyVm => CreationFact::VmUnnamed,
        })
    }

    /// Records the VM on the machine (label `node`, priority, providerID,
    /// provider spec), if the machine does not carry it all yet.
    async fn record_vm(&mut self, vm: &VmIds, class: &MachineClass) -> Result<(), Error> {
        if let Some(p) = decide::creation_patch(
            &self.machine,
            &vm.provider_id,
            &vm.node_name,
            &class.provider_spec,
        ) {
            self.patch(&p).await?;
        }
        Ok(())
    }

    /// The end of a creation pass: a created VM gets what initialization
    /// added recorded; the status, requeue and event are the planner's.
    async fn end_creation(
        &mut self,
        end: &CreationTransition,
        class: &MachineClass,
        vm: &VmIds,
    ) -> Result<Duration, Error> {
        if *end == CreationTransition::Created {
            self.record_vm(vm, class).await?;
        }
        let Some(out) = decide::creation_end(
            &self.machine,
            end,
            vm,
            self.has_target(),
            &self.settings,
            self.now,
        ) else {
            return Ok(SHORT_RETRY);
        };
        if let CreationTransition::CreateFailed { code, .. } = end
            && let Some(st) = &out.status
        {
            let phase = st
                .current_status
                .phase
                .unwrap_or(MachinePhase::CrashLoopBackOff);
            tracing::info!(machine = %self.name, %code, %phase, "creating the VM failed");
        }
        if let Some(st) = out.status {
            self.set_status(st);
        }
        if let Some(ev) = out.event {
            self.events.push(ev);
        }
        Ok(out.after)
    }
}
