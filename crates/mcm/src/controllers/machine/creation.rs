//! The creation flow (spec §2.1): the bootstrap token, the driver calls
//! that find, create and initialize the VM, and the record of it on the
//! machine.

use std::time::Duration;

use api::{MachineClass, MachineOperationType, MachinePhase, MachineState, labels};
use driver::{
    Code, CreateMachineRequest, DeleteMachineRequest, DriverError, GetMachineStatusRequest,
    InitializeMachineRequest, LONG_RETRY, Outcome, SHORT_RETRY, Step,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

use super::{Scope, is_status};
use crate::controllers::context::Error;
use crate::machine as decide;

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

    /// The creation flow (spec §2.1); returns when to look again.
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
        let driver = self.deps.driver.clone();
        let mut provider_id = self.machine.spec.provider_id.clone();
        let mut node_name = decide::node_name(&self.machine)
            .unwrap_or_default()
            .to_string();
        let mut initialize = false;
        // The provider's addresses of the VM; recorded only without a
        // target cluster, where no Node carries them.
        let mut addresses = Vec::new();
        let status = driver
            .get_machine_status(GetMachineStatusRequest {
                machine: &self.machine,
                machine_class: class,
                secret: &driver_secret,
            })
            .await;
        match status {
            Ok(r) => {
                // The VM exists: adopt it.
                addresses = r.addresses;
                if !r.provider_id.is_empty() {
                    provider_id = r.provider_id;
                }
                if !r.node_name.is_empty() {
                    node_name = r.node_name;
                }
            }
            Err(e) => match e.code.outcome(Step::CreationStatus) {
                Outcome::CreateVm if provider_id.is_empty() => {
                    let created = driver
                        .create_machine(CreateMachineRequest {
                            machine: &self.machine,
                            machine_class: class,
                            secret: &driver_secret,
                        })
                        .await;
                    let r = match created {
                        Ok(r) => r,
                        Err(e) => return self.create_failed(e, Step::Create).await,
                    };
                    tracing::info!(machine = %self.name, provider_id = %r.provider_id, "VM created");
                    self.event(false, "Created", format!("Created VM {}", r.provider_id))
                        .await;
                    if self.has_target()
                        && r.node_name != self.name
                        && !r.node_name.is_empty()
                        && self.live_node(&r.node_name).await?.is_some()
                    {
                        return self.stale_node(class, &driver_secret, &r.provider_id).await;
                    }
                    provider_id = r.provider_id;
                    node_name = r.node_name;
                    addresses = r.addresses;
                    initialize = true;
                }
                // The machine already names its VM; keep it.
                Outcome::CreateVm => {}
                Outcome::InitializeVm => initialize = true,
                _ => return self.create_failed(e, Step::CreationStatus).await,
            },
        }
        // Record the VM before initializing it, so it is never lost.
        if let Some(p) = decide::creation_patch(
            &self.machine,
            &provider_id,
            &node_name,
            &class.provider_spec,
        ) {
            self.patch(&p).await?;
        }
        if initialize {
            let init = driver
                .initialize_machine(InitializeMachineRequest {
                    machine: &self.machine,
                    machine_class: class,
                    secret: &driver_secret,
                })
                .await;
            match init {
                Ok(r) => {
                    if provider_id.is_empty() {
                        provider_id = r.provider_id;
                    }
                    if !r.addresses.is_empty() {
                        addresses = r.addresses;
                    }
                    if node_name.is_empty() {
                        node_name = r.node_name;
                    }
                }
                Err(e) => match e.code.outcome(Step::Initialize) {
                    Outcome::Skip => {}
                    outcome => {
                        let after = match outcome {
                            Outcome::Retry(r) => r.period(self.settings.resource_exhausted_retry),
                            _ => SHORT_RETRY,
                        };
                        let mut st = self.status();
                        st.last_operation = decide::last_op(
                            MachineOperationType::Create,
                            MachineState::Failed,
                            format!("Provider error: {}. Initialize VM Instance", e.message),
                            Some(e.code),
                            self.now,
                        );
                        self.write_status(st).await?;
                        self.event(true, "InitializeFailed", e.to_string()).await;
                        return Ok(after);
                    }
                },
            }
        }
        if !decide::vm_ids_complete(&provider_id, &node_name, self.has_target()) {
            let e = DriverError::new(
                Code::Internal,
                "the provider reported no providerID or node name for the VM",
            );
            return self.create_failed(e, Step::Create).await;
        }
        if let Some(p) = decide::creation_patch(
            &self.machine,
            &provider_id,
            &node_name,
            &class.provider_spec,
        ) {
            self.patch(&p).await?;
        }
        if let Some(st) =
            decide::created_status(&self.machine, self.has_target(), &addresses, self.now)
        {
            self.write_status(st).await?;
        }
        Ok(decide::recheck_after_creation(
            &self.machine,
            self.has_target(),
            &self.settings,
            self.now,
        ))
    }

    /// The create-error handler (spec §2.1).
    async fn create_failed(&mut self, e: DriverError, step: Step) -> Result<Duration, Error> {
        let f = decide::create_failure(
            e.code,
            &e.message,
            step,
            decide::age(&self.machine, self.now),
            &self.settings,
            self.now,
        );
        let mut st = decide::with_phase(&self.status(), f.phase, false, self.now);
        st.last_operation = f.last_operation;
        self.write_status(st).await?;
        tracing::info!(machine = %self.name, code = %e.code, phase = %f.phase, "creating the VM failed");
        self.event(true, "CreateFailed", e.to_string()).await;
        Ok(f.retry)
    }

    /// The new VM registered as a node that already exists under another
    /// name: delete the VM and fail the machine (spec §2.1.2).
    async fn stale_node(
        &mut self,
        class: &MachineClass,
        secret: &Secret,
        provider_id: &str,
    ) -> Result<Duration, Error> {
        let mut vm = self.machine.clone();
        vm.spec.provider_id = provider_id.to_string();
        if let Err(e) = self
            .deps
            .driver
            .delete_machine(DeleteMachineRequest {
                machine: &vm,
                machine_class: class,
                secret,
            })
            .await
        {
            tracing::warn!(machine = %self.name, error = %e, "deleting a VM with a stale node failed");
            return Ok(SHORT_RETRY);
        }
        let mut st = decide::with_phase(&self.status(), MachinePhase::Failed, false, self.now);
        st.last_operation = decide::last_op(
            MachineOperationType::Create,
            MachineState::Failed,
            decide::STALE_NODE_DESCRIPTION,
            None,
            self.now,
        );
        self.write_status(st).await?;
        self.event(true, "StaleNode", decide::STALE_NODE_DESCRIPTION.into())
            .await;
        Ok(LONG_RETRY)
    }
}
