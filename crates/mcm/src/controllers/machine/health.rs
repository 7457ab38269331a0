//! The health check of a live machine with a node (spec §2.2): a deleted
//! Node deletes its machine, the verdict's status, the first join, and a
//! failure for health under the deployment's meltdown limit.

use std::time::Duration;

use api::{MachinePhase, format_duration, labels};
use driver::SHORT_RETRY;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::{CACHE_CONFIRM, MELTDOWN_WAIT, Scope, is_status};
use crate::controllers::cache::IndexKey;
use crate::controllers::context::Error;
use crate::health::{self, HEALTH_RECHECK, Verdict};
use crate::machine as decide;

impl Scope<'_> {
    /// A Node that is being deleted, or that is gone after the machine had
    /// joined, makes the machine go too (spec §2: deleting a Node replaces
    /// its machine). A missing node is confirmed with a read, so a cache
    /// that lags never deletes a machine.
    pub(super) async fn node_deleted(
        &mut self,
        node: Option<&Node>,
        node_name: &str,
    ) -> Result<bool, Error> {
        let deleted = match node {
            Some(n) => n.metadata.deletion_timestamp.is_some(),
            None => {
                matches!(
                    self.machine.phase(),
                    Some(MachinePhase::Running) | Some(MachinePhase::Unknown)
                ) && self.live_node(node_name).await?.is_none()
            }
        };
        if !deleted {
            return Ok(false);
        }
        match self
            .api
            .delete(&self.name, &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(Error::api(format!("deleting machine {}", self.name), e)),
        }
        tracing::info!(machine = %self.name, node = node_name, "node deleted, deleting its machine");
        self.event(
            false,
            "NodeDeleted",
            format!("Node {node_name} was deleted; deleting the machine"),
        );
        Ok(true)
    }

    /// The health check (spec §2.2); returns when to look again.
    pub(super) async fn health(&mut self, node: Option<&Node>) -> Result<Duration, Error> {
        let obs = decide::observe_health(&self.machine, node, &self.settings, self.now);
        let verdict = health::decide(&obs, self.now);
        if verdict == Verdict::FailedHealthTimeout {
            return self.fail_for_health(node).await;
        }
        if verdict == (Verdict::Running { first_join: true }) {
            self.first_join().await?;
        }
        let Some(st) =
            decide::health_status(&self.machine, &verdict, node, &self.settings, self.now)
        else {
            return Ok(match verdict {
                Verdict::Wait(d) => d,
                _ => HEALTH_RECHECK,
            });
        };
        let description = st.last_operation.description.clone();
        self.set_status(st);
        match verdict {
            Verdict::Running { first_join: false } => self.event(false, "Rejoined", description),
            Verdict::Unknown { .. } => self.event(true, "Unhealthy", description),
            Verdict::FailedCreationTimeout => self.event(true, "CreationTimeout", description),
            _ => {}
        }
        Ok(match verdict {
            Verdict::Wait(d) => d,
            _ => SHORT_RETRY,
        })
    }

    /// First join: the bootstrap token is no longer needed, and the join
    /// duration is recorded. Both are idempotent, and happen before the
    /// phase turns Running so a crash in between repeats them.
    async fn first_join(&mut self) -> Result<(), Error> {
        let id = decide::bootstrap_token_id(&self.name);
        let secrets: Api<Secret> =
            Api::namespaced(self.target()?, decide::BOOTSTRAP_TOKEN_NAMESPACE);
        match secrets
            .delete(
                &decide::bootstrap_token_secret_name(&id),
                &DeleteParams::default(),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(Error::api("deleting the bootstrap token", e)),
        }
        let took = format_duration(Duration::from_secs(
            decide::age(&self.machine, self.now).as_secs(),
        ));
        if !self
            .machine
            .annotations()
            .contains_key(labels::MACHINE_JOIN_DURATION)
        {
            let p = json!({"metadata": {"annotations": {labels::MACHINE_JOIN_DURATION: took}}});
            self.patch(&p).await?;
        }
        self.event(
            false,
            "Joined",
            format!("Machine {} joined the cluster in {took}", self.name),
        );
        Ok(())
    }

    /// `Unknown` past the health timeout: fail the machine if the meltdown
    /// limit of its deployment allows it. The check and the decision happen
    /// under the deployment's lock, which the pass keeps until its status
    /// write shows in the cache ([`Self::finish`]), so the next machine's
    /// check counts this one.
    async fn fail_for_health(&mut self, node: Option<&Node>) -> Result<Duration, Error> {
        let key = self
            .machine
            .labels()
            .get(labels::NAME)
            .cloned()
            .unwrap_or_else(|| self.name.clone());
        let lock = self.deps.health_lock(&format!("{}/{key}", self.ns));
        let held = lock.lock_owned().await;
        let me = self.machine.uid();
        let siblings: Vec<health::Sibling> = self
            .ctx
            .machines
            .by(&IndexKey::Group(self.ns.clone(), key.clone()))
            .iter()
            .filter(|m| {
                m.metadata.namespace.as_deref() == Some(self.ns.as_str())
                    && m.uid() != me
                    && m.labels().get(labels::NAME).unwrap_or(&m.name_any()) == &key
            })
            .map(|m| decide::sibling(m))
            .collect();
        if !health::may_fail_for_health(&siblings, self.ctx.config.max_health_replacements) {
            tracing::debug!(machine = %self.name, deployment = %key, "health failure held back by the meltdown limit");
            return Ok(MELTDOWN_WAIT);
        }
        let Some(st) = decide::health_status(
            &self.machine,
            &Verdict::FailedHealthTimeout,
            node,
            &self.settings,
            self.now,
        ) else {
            return Ok(SHORT_RETRY);
        };
        let description = st.last_operation.description.clone();
        self.set_status(st);
        self.event(true, "HealthTimeout", description);
        self.meltdown = Some(held);
        Ok(SHORT_RETRY)
    }

    /// Waits (at most [`CACHE_CONFIRM`]) for the machine cache to show the
    /// machine `Failed`, after the write of a health failure.
    pub(super) async fn confirm_failed(&self) {
        let key = ObjectRef::from_obj(&self.machine);
        let deadline = tokio::time::Instant::now() + CACHE_CONFIRM;
        while tokio::time::Instant::now() < deadline {
            if self
                .ctx
                .machines
                .get(&key)
                .is_some_and(|m| m.phase() == Some(MachinePhase::Failed))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
