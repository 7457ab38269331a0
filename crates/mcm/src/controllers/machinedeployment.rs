//! The machine deployment controller: the executor of
//! [`crate::machinedeployment::plan_pass`]. It observes the deployment's
//! sets, whether the cache shows its own last writes, and the phases of
//! the machines the autoscaler names; the planner decides everything else
//! (the steps, the status, when to look again), and each step has one
//! executor here that carries it out through the API.

use std::sync::Arc;

use api::{Machine, MachineDeployment, MachinePhase, MachineSet, MachineTemplateSpec, labels};
use chrono::Utc;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Map, Value, json};

use super::context::{Context, Error};
use super::machineset::{publish_event, set_finalizer};
use crate::machinedeployment::{self, Observed, PassStep, Requeue, Step, TriggeredDeletion};

pub async fn reconcile(md: Arc<MachineDeployment>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = md.metadata.namespace.clone().unwrap_or_default();
    let uid = md.metadata.uid.clone().unwrap_or_default();
    let owned = ctx.sets_of(&uid);
    let sets: Vec<&MachineSet> = owned.iter().map(|s| s.as_ref()).collect();
    let pass = {
        // Act only on a cache that shows our own last writes.
        let cached = |n: &str| {
            owned
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(n))
                .map(|s| s.metadata.deletion_timestamp.is_none())
        };
        let machine_phase = |n: &str| {
            ctx.machines.get(&ObjectRef::new(n).within(&ns)).map(|m| {
                match m.metadata.deletion_timestamp {
                    Some(_) => Some(MachinePhase::Terminating),
                    None => m.phase(),
                }
            })
        };
        let seen = Observed {
            sets: &sets,
            cache_current: ctx.expectations.satisfied(&uid, cached),
            machine_phase: &machine_phase,
        };
        machinedeployment::plan_pass(&md, &seen, Utc::now())
    };
    tracing::debug!(deployment = %md.metadata.name.as_deref().unwrap_or_default(),
        sets = sets.len(), steps = ?pass.steps, "machine deployment plan");
    let mut exec = Executor {
        ctx: &ctx,
        md: &md,
        sets: &sets,
        name: md.metadata.name.clone().unwrap_or_default(),
        mds: Api::namespaced(ctx.control.clone(), &ns),
        set_api: Api::namespaced(ctx.control.clone(), &ns),
        machines: Api::namespaced(ctx.control.clone(), &ns),
        status: pass.status.clone(),
        created: Vec::new(),
    };
    for step in &pass.steps {
        exec.run(step).await?;
    }
    exec.finish().await?;
    Ok(match pass.requeue {
        Requeue::AwaitChange => Action::await_change(),
        Requeue::After(d) => Action::requeue(d),
    })
}

/// Carries out one deployment's pass.
struct Executor<'a> {
    ctx: &'a Context,
    md: &'a MachineDeployment,
    /// The sets the pass was planned from.
    sets: &'a [&'a MachineSet],
    name: String,
    mds: Api<MachineDeployment>,
    set_api: Api<MachineSet>,
    machines: Api<Machine>,
    /// The status the plan wants written, with what the steps found out
    /// (a name collision); `None` when the pass writes none.
    status: Option<api::MachineDeploymentStatus>,
    /// Sets this pass created, for the expectations.
    created: Vec<String>,
}

impl Executor<'_> {
    async fn run(&mut self, step: &PassStep) -> Result<(), Error> {
        match step {
            PassStep::AddFinalizer => set_finalizer(&self.mds, &self.md.metadata, true).await,
            PassStep::RemoveFinalizer => set_finalizer(&self.mds, &self.md.metadata, false).await,
            PassStep::ForgetExpectations => {
                self.ctx.expectations.forget(&self.uid());
                Ok(())
            }
            PassStep::MarkForDeletion(mark) => self.mark_for_deletion(mark).await,
            PassStep::ConsumeTriggers { left } => self.consume_triggers(left.as_deref()).await,
            PassStep::Rollout(Step::CreateSet { set }) => self.create_set(set).await,
            PassStep::Rollout(Step::UpdateSet {
                name,
                replicas,
                annotations,
                template,
            }) => {
                self.update_set(name, *replicas, annotations, template.as_deref())
                    .await
            }
            PassStep::Rollout(Step::DeleteSet { name }) => self.delete_set(name).await,
            PassStep::Rollout(Step::UpdateDeployment {
                template,
                revision,
                clear_rollback,
            }) => {
                self.update_deployment(template.as_deref(), revision.as_deref(), *clear_rollback)
                    .await
            }
            PassStep::Rollout(Step::Event {
                reason,
                message,
                warning,
            }) => {
                self.event(reason, message, *warning);
                Ok(())
            }
        }
    }

    fn uid(&self) -> String {
        self.md.metadata.uid.clone().unwrap_or_default()
    }

    /// Marks a machine the autoscaler picked (priority 1 and the marked
    /// time); one that is gone needs nothing.
    async fn mark_for_deletion(&self, mark: &TriggeredDeletion) -> Result<(), Error> {
        let patch = json!({"metadata": {"annotations": {
            labels::MACHINE_PRIORITY: "1",
            labels::MARKED_FOR_DELETION_TIME: mark.marked_at,
        }}});
        match self
            .machines
            .patch(
                &mark.machine,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(Error::api(format!("machine {}", mark.machine), e)),
        }
    }

    /// Leaves the trigger-deletion annotation with what is `left` of it.
    async fn consume_triggers(&self, left: Option<&str>) -> Result<(), Error> {
        let patch = json!({"metadata": {"annotations": {labels::TRIGGER_DELETION_BY_MCM: left}}});
        self.mds
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::api(format!("machine deployment {}", self.name), e))?;
        Ok(())
    }

    /// Creates the new set. A set of that name that exists is not ours for
    /// this template (a hash collision): it is counted in the status, and
    /// the next pass hashes with the new count.
    async fn create_set(&mut self, set: &MachineSet) -> Result<(), Error> {
        let set_name = set.metadata.name.clone().unwrap_or_default();
        match self.set_api.create(&PostParams::default(), set).await {
            Ok(_) => {
                let note = format!("Scaled up machine set {set_name} to {}", set.spec.replicas);
                publish_event(self.ctx, self.md, false, "ScalingMachineSet", note);
                self.created.push(set_name);
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                if let Some(status) = self.status.as_mut() {
                    status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                }
                tracing::info!(deployment = %self.name, set = %set_name, "machine set name collision");
                Ok(())
            }
            Err(e) => Err(Error::api(format!("creating machine set {set_name}"), e)),
        }
    }

    /// Scales a set, sets or removes its annotations, and takes on the
    /// in-place parts of its template.
    async fn update_set(
        &self,
        set_name: &str,
        replicas: i32,
        annotations: &std::collections::BTreeMap<String, Option<String>>,
        template: Option<&MachineTemplateSpec>,
    ) -> Result<(), Error> {
        let ann: Map<String, Value> = annotations
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.clone().map(Value::String).unwrap_or(Value::Null),
                )
            })
            .collect();
        let mut patch = json!({"metadata": {"annotations": ann}, "spec": {"replicas": replicas}});
        if let Some(t) = template {
            patch["spec"]["template"] =
                serde_json::to_value(t).map_err(|_| Error::Encode(set_name.to_string()))?;
        }
        self.set_api
            .patch(set_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::api(format!("machine set {set_name}"), e))?;
        let before = self
            .sets
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(set_name))
            .map(|s| s.spec.replicas);
        if let Some(before) = before.filter(|b| *b != replicas) {
            let dir = if replicas > before { "up" } else { "down" };
            let note = format!("Scaled {dir} machine set {set_name} to {replicas} from {before}");
            publish_event(self.ctx, self.md, false, "ScalingMachineSet", note);
        }
        Ok(())
    }

    async fn delete_set(&self, set_name: &str) -> Result<(), Error> {
        match self
            .set_api
            .delete(set_name, &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(Error::api(format!("deleting machine set {set_name}"), e)),
        }
    }

    /// Restores a template (rollback), sets the revision annotation, clears
    /// `rollbackTo`.
    async fn update_deployment(
        &self,
        template: Option<&MachineTemplateSpec>,
        revision: Option<&str>,
        clear_rollback: bool,
    ) -> Result<(), Error> {
        let mut patch = json!({});
        if let Some(t) = template {
            patch["spec"]["template"] =
                serde_json::to_value(t).map_err(|_| Error::Encode(self.name.clone()))?;
        }
        if clear_rollback {
            patch["spec"]["rollbackTo"] = Value::Null;
        }
        if let Some(r) = revision {
            patch["metadata"] = json!({"annotations": {labels::REVISION: r}});
        }
        self.mds
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::api(format!("machine deployment {}", self.name), e))?;
        Ok(())
    }

    fn event(&self, reason: &str, message: &str, warning: bool) {
        if warning {
            tracing::warn!(deployment = %self.name, reason, message, "machine deployment event");
        } else {
            tracing::info!(deployment = %self.name, reason, message, "machine deployment event");
        }
        publish_event(self.ctx, self.md, warning, reason, message.to_string());
    }

    /// After the steps: the sets created are expected in the cache, and the
    /// status is written if it changed. A conflict means newer facts are
    /// on the way; the next pass writes the status from them.
    async fn finish(self) -> Result<(), Error> {
        let uid = self.uid();
        let Some(status) = self.status else {
            return Ok(());
        };
        self.ctx.expectations.expect(&uid, self.created, Vec::new());
        if self.md.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let mut updated = self.md.clone();
        updated.status = Some(status);
        match self
            .mds
            .replace_status(&self.name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(Error::api(
                format!("status of machine deployment {}", self.name),
                e,
            )),
        }
    }
}

/// The controller's name in metrics and its backoff.
pub const NAME: &str = "machinedeployment";

/// Failures are retried after the deployment's backoff (see
/// [`crate::backoff`]).
pub fn error_policy(md: Arc<MachineDeployment>, err: &Error, ctx: Arc<Context>) -> Action {
    let after = ctx.error_requeue(NAME, md.as_ref());
    tracing::warn!(error = %err, retry_in = ?after, "machine deployment reconcile failed");
    Action::requeue(after)
}
