//! The deletion flow (spec §2.4): S1–S6, each step recorded in an
//! annotation before it acts; the drain at S2 is `super::drain`'s.

use std::time::Duration;

use api::{MachinePhase, labels};
use driver::{Code, DeleteMachineRequest, GetMachineStatusRequest};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::{Scope, finalizer_patch, has_finalizer, is_status, requeue};
use crate::controllers::cache::IndexKey;
use crate::controllers::context::Error;
use crate::machine::{self as decide, DeletionStep, StepFact, Transition};

impl Scope<'_> {
    async fn set_step(&mut self, step: DeletionStep) -> Result<(), Error> {
        let p = json!({"metadata": {"annotations": {decide::DELETION_STEP: step.as_str()}}});
        self.patch(&p).await
    }

    /// The deletion flow (spec §2.4): advances as far as it can in this
    /// pass, recording each step before acting on it.
    pub(super) async fn delete(&mut self) -> Result<Action, Error> {
        if !has_finalizer(&self.machine) {
            // Someone else's finalizer holds the machine; nothing is ours.
            return Ok(Action::await_change());
        }
        let Some(mut step) = DeletionStep::of(&self.machine) else {
            // S0 is a pass of its own: the phase turns Terminating for
            // everyone to see before any step acts, even when the rest of
            // the flow would finish in one pass. Its status write brings
            // the next pass.
            self.start_deletion().await?;
            return Ok(requeue(Duration::ZERO));
        };
        loop {
            let transition = match decide::skip_without_target(step, self.has_target()) {
                Some(skip) => skip,
                None => {
                    let fact = self.step_fact(step).await?;
                    decide::deletion_transition(step, &fact, self.settings.resource_exhausted_retry)
                }
            };
            match transition {
                Transition::Next { step: next, note } => {
                    if step == DeletionStep::DrainNode && self.has_target() {
                        self.drained();
                    }
                    self.set_step(next).await?;
                    let mut st = self.status();
                    st.last_operation = decide::deletion_last_op(next, note, None, self.now);
                    self.set_status(st);
                    step = next;
                }
                Transition::Stay { after, failure } => {
                    if let Some((message, code)) = failure {
                        self.step_failed(step, &message, code);
                    }
                    // A blocked drain is looked at again when it turns
                    // forced, not up to a retry period later.
                    let after = match step {
                        DeletionStep::DrainNode => after.min(self.until_forced()),
                        _ => after,
                    };
                    return Ok(requeue(after));
                }
                Transition::Finished => return Ok(Action::await_change()),
            }
        }
    }

    fn step_failed(&mut self, step: DeletionStep, message: &str, code: Option<Code>) {
        let op = decide::deletion_last_op(step, None, Some((message, code)), self.now);
        let mut st = self.status();
        // Only the description and state matter; a new timestamp alone is
        // not worth a write every few seconds.
        if st.last_operation.description != op.description || st.last_operation.state != op.state {
            st.last_operation = op;
            self.set_status(st);
            self.event(true, "DeletionStepFailed", format!("{message} ({step:?})"));
        }
    }

    /// S0: record S1, mark the node Terminating while the machine's phase
    /// (Failed or not) still tells the reason, then freeze the phase at
    /// Terminating.
    async fn start_deletion(&mut self) -> Result<(), Error> {
        self.set_step(DeletionStep::GetVmStatus).await?;
        if let Some(node_name) = decide::node_name(&self.machine)
            && let Some(node) = self.cached_node(node_name)
        {
            let failed = self.machine.phase() == Some(MachinePhase::Failed);
            if let Err(e) = self.mark_terminating(&node, failed).await {
                tracing::debug!(machine = %self.name, error = %e, "marking the node Terminating");
            }
        }
        let st = decide::terminating_status(&self.machine, self.now);
        self.set_status(st);
        self.event(false, "Deleting", "Deletion started".into());
        Ok(())
    }

    pub(super) async fn mark_terminating(&self, node: &Node, failed: bool) -> Result<(), Error> {
        let Some(c) = decide::terminating_condition(node, failed, self.now) else {
            return Ok(());
        };
        let p = json!({"status": {"conditions": [c]}});
        self.nodes()?
            .patch_status(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&p),
            )
            .await
            .map_err(|e| Error::api(format!("conditions of node {}", node.name_any()), e))?;
        Ok(())
    }

    /// Gathers the fact the current step turns on, acting where the step
    /// acts.
    async fn step_fact(&mut self, step: DeletionStep) -> Result<StepFact, Error> {
        Ok(match step {
            DeletionStep::GetVmStatus => self.s1_find_node().await?,
            DeletionStep::DrainNode => self.s2_drain().await?,
            DeletionStep::DeleteVolumeAttachments => self.s3_volume_attachments().await?,
            DeletionStep::DeleteVm => self.s4_delete_vm().await?,
            DeletionStep::DeleteNode => self.s5_delete_node().await?,
            DeletionStep::RemoveFinalizer => {
                let p = finalizer_patch(&self.machine.metadata, labels::MCM_FINALIZER, false);
                match self
                    .api
                    .patch(&self.name, &PatchParams::default(), &Patch::Merge(&p))
                    .await
                {
                    // Without finalizers the machine is gone, and its
                    // status with it; under someone else's it stays, and
                    // this pass's status is still written.
                    Ok(m) if m.finalizers().is_empty() => self.gone = true,
                    Ok(m) => self.adopt(m),
                    Err(e) if is_status(&e, 404) => self.gone = true,
                    Err(e) => {
                        return Err(Error::api(
                            format!("finalizers of machine {}", self.name),
                            e,
                        ));
                    }
                }
                let uid = self.machine.uid().unwrap_or_default();
                self.deps.drains.lock().remove(&uid);
                self.deps.class_warned.lock().remove(&uid);
                tracing::info!(machine = %self.name, "machine deleted");
                self.event(false, "Deleted", "The machine and its VM are gone".into());
                StepFact::FinalizerRemoved
            }
        })
    }

    /// S1: find the node to drain: the `node` label, a node labelled with
    /// the machine's name, or what the VM's status reports.
    async fn s1_find_node(&mut self) -> Result<StepFact, Error> {
        if decide::node_name(&self.machine).is_some() {
            return Ok(StepFact::NodeKnown);
        }
        let by_label = self
            .deps
            .nodes
            .iter()
            .flat_map(|nodes| nodes.by(&IndexKey::MachineName(self.name.clone())))
            .find(|n| n.labels().get(labels::NODE_MACHINE_NAME) == Some(&self.name));
        if let Some(node) = by_label {
            let p = json!({"metadata": {"labels": {labels::NODE: node.name_any()}}});
            self.patch(&p).await?;
            return Ok(StepFact::NodeKnown);
        }
        let (class, secret) = match self.deletion_class().await? {
            Ok(found) => found,
            Err(fact) => return Ok(fact),
        };
        let answer = self
            .deps
            .driver
            .get_machine_status(GetMachineStatusRequest {
                machine: &self.machine,
                machine_class: &class,
                secret: &secret,
            })
            .await;
        Ok(match answer {
            Ok(r) => {
                if !r.node_name.is_empty() {
                    let p = json!({"metadata": {"labels": {labels::NODE: r.node_name}}});
                    self.patch(&p).await?;
                }
                StepFact::NodeKnown
            }
            Err(e) => StepFact::StatusFailed {
                code: e.code,
                message: e.message,
            },
        })
    }

    /// S3: delete the node's VolumeAttachments until none is left.
    async fn s3_volume_attachments(&self) -> Result<StepFact, Error> {
        let Some(node_name) = decide::node_name(&self.machine).map(str::to_string) else {
            return Ok(StepFact::NodeGone);
        };
        let Some(node) = self.live_node(&node_name).await? else {
            return Ok(StepFact::NodeGone);
        };
        let attached = node
            .status
            .as_ref()
            .and_then(|s| s.volumes_attached.as_ref())
            .is_some_and(|v| !v.is_empty());
        if !attached {
            return Ok(StepFact::VolumesDetached);
        }
        let vas: Api<VolumeAttachment> = Api::all(self.target()?);
        let mine: Vec<VolumeAttachment> = vas
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::api("volume attachments", e))?
            .items
            .into_iter()
            .filter(|va| va.spec.node_name == node_name)
            .collect();
        if mine.is_empty() {
            return Ok(StepFact::VolumesDetached);
        }
        for va in mine
            .iter()
            .filter(|va| va.metadata.deletion_timestamp.is_none())
        {
            match vas.delete(&va.name_any(), &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 404) => {}
                Err(e) => {
                    return Err(Error::api(
                        format!("volume attachment {}", va.name_any()),
                        e,
                    ));
                }
            }
        }
        Ok(StepFact::VolumeAttachmentsLeft(mine.len()))
    }

    /// S4: delete the VM.
    async fn s4_delete_vm(&mut self) -> Result<StepFact, Error> {
        let (class, secret) = match self.deletion_class().await? {
            Ok(found) => found,
            Err(fact) => return Ok(fact),
        };
        let answer = self
            .deps
            .driver
            .delete_machine(DeleteMachineRequest {
                machine: &self.machine,
                machine_class: &class,
                secret: &secret,
            })
            .await;
        Ok(match answer {
            Ok(r) => {
                if !r.last_known_state.is_empty() {
                    let mut st = self.status();
                    st.last_known_state = r.last_known_state;
                    self.set_status(st);
                }
                tracing::info!(machine = %self.name, "VM deleted");
                StepFact::VmDeleteAnswered {
                    code: Code::Ok,
                    message: String::new(),
                }
            }
            Err(e) => StepFact::VmDeleteAnswered {
                code: e.code,
                message: e.message,
            },
        })
    }

    /// S5: release and delete the Node object.
    async fn s5_delete_node(&self) -> Result<StepFact, Error> {
        let Some(node_name) = decide::node_name(&self.machine).map(str::to_string) else {
            return Ok(StepFact::NodeDeleted);
        };
        let Some(node) = self.live_node(&node_name).await? else {
            return Ok(StepFact::NodeDeleted);
        };
        if node
            .finalizers()
            .iter()
            .any(|f| f == labels::NODE_FINALIZER)
        {
            let p = finalizer_patch(&node.metadata, labels::NODE_FINALIZER, false);
            match self
                .nodes()?
                .patch(&node_name, &PatchParams::default(), &Patch::Merge(&p))
                .await
            {
                Ok(_) => {}
                Err(e) if is_status(&e, 404) => return Ok(StepFact::NodeDeleted),
                Err(e) => return Err(Error::api(format!("finalizers of node {node_name}"), e)),
            }
        }
        match self
            .nodes()?
            .delete(&node_name, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(Error::api(format!("deleting node {node_name}"), e)),
        }
        Ok(StepFact::NodeDeleted)
    }
}
