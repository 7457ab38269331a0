//! The drain at deletion step S2 (spec §2.5): cordon, then one round of
//! [`crate::drain::drain_round`] per look, its pod actions carried out
//! concurrently and remembered for the next round.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::Utc;
use driver::GetVolumeIDsRequest;
use futures::future::join_all;
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, Pod,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::{NoTarget, Scope, is_status};
use crate::controllers::context::Error;
use crate::drain;
use crate::machine::{self as decide, DrainPod, DrainRound, EvictRecord, PodAction, StepFact};

impl Scope<'_> {
    /// S2: cordon, mark Terminating and run one drain round.
    pub(super) async fn s2_drain(&mut self) -> Result<StepFact, Error> {
        let Some(node_name) = decide::node_name(&self.machine).map(str::to_string) else {
            return Ok(StepFact::NodeGone);
        };
        let Some(node) = self.live_node(&node_name).await? else {
            return Ok(StepFact::NodeGone);
        };
        let reason = drain::force_reason(
            &decide::force_input(&self.machine, &node, &self.settings),
            self.now,
        );
        let forced = reason.is_some();
        // The condition is informational; only a normal drain insists.
        if let Err(e) = self.mark_terminating(&node, false).await
            && !forced
        {
            return Ok(StepFact::DrainFailed {
                forced,
                message: e.to_string(),
            });
        }
        if node.spec.as_ref().and_then(|s| s.unschedulable) != Some(true) {
            let p = json!({"spec": {"unschedulable": true}});
            if let Err(e) = self
                .nodes()?
                .patch(&node_name, &PatchParams::default(), &Patch::Merge(&p))
                .await
                && !is_status(&e, 404)
            {
                return Ok(StepFact::DrainFailed {
                    forced,
                    message: format!("cordoning node {node_name}: {e}"),
                });
            }
        }
        let pods: Api<Pod> = Api::all(self.target()?);
        let on_node = pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={node_name}")))
            .await
            .map_err(|e| Error::api(format!("pods of node {node_name}"), e))?
            .items;
        let drain_pods: Vec<DrainPod> = on_node.iter().filter_map(decide::drain_pod).collect();
        let uid = self.machine.uid().unwrap_or_default();
        let records = self
            .deps
            .drains
            .lock()
            .get(&uid)
            .cloned()
            .unwrap_or_default();
        let attached: Vec<String> = node
            .status
            .as_ref()
            .and_then(|s| s.volumes_attached.as_ref())
            .map(|vs| vs.iter().map(|v| v.name.clone()).collect())
            .unwrap_or_default();
        let max_retries =
            drain::max_evict_retries(self.settings.max_evict_retries, self.settings.drain_timeout);
        let round = decide::drain_round(
            &drain_pods,
            &records,
            &attached,
            forced,
            max_retries,
            self.settings.pv_detach_timeout,
            self.now,
        );
        if let Some(r) = &reason
            && round != DrainRound::Done
        {
            tracing::info!(machine = %self.name, node = %node_name, reason = ?r, "forced drain");
        }
        Ok(match round {
            DrainRound::Done => StepFact::Drained { forced },
            // Never wait past the moment the drain turns forced.
            DrainRound::Wait(d) => StepFact::Draining(d.min(self.until_forced())),
            DrainRound::Failed(message) => StepFact::DrainFailed { forced, message },
            DrainRound::Act {
                actions,
                recheck,
                done,
            } => {
                let failures = self.act_on_pods(&actions, &on_node, records).await?;
                match failures.into_iter().next() {
                    Some(message) if !forced => StepFact::DrainFailed { forced, message },
                    Some(message) => {
                        tracing::warn!(machine = %self.name, %message, "forced drain left a pod");
                        StepFact::Drained { forced }
                    }
                    None if done => StepFact::Drained { forced },
                    None => StepFact::Draining(recheck.min(self.until_forced())),
                }
            }
        })
    }

    /// Records the drain's duration, counted from the deletion as the
    /// drain timeout is.
    pub(super) fn drained(&self) {
        if let Some(started) = self.machine.metadata.deletion_timestamp.as_ref() {
            let took = (Utc::now() - crate::time::to_chrono(started)).to_std();
            self.ctx.config.metrics.drained(took.unwrap_or_default());
        }
    }

    /// Time left until the drain timeout (since the deletion) forces the
    /// drain.
    pub(super) fn until_forced(&self) -> Duration {
        let started = self
            .machine
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(crate::time::to_chrono)
            .unwrap_or(self.now);
        let elapsed = (self.now - started).to_std().unwrap_or_default();
        self.settings.drain_timeout.saturating_sub(elapsed) + Duration::from_millis(100)
    }

    /// Carries out a drain round's pod actions concurrently, records their
    /// outcome for the next round, and returns what failed the drain.
    async fn act_on_pods(
        &self,
        actions: &[PodAction],
        pods: &[Pod],
        mut records: HashMap<String, EvictRecord>,
    ) -> Result<Vec<String>, Error> {
        let find = |uid: &str| pods.iter().find(|p| p.metadata.uid.as_deref() == Some(uid));
        // Claims used by more than one pod of the node are not waited for:
        // their volume stays attached while any user remains (spec §2.5).
        let mut claim_users: BTreeMap<(String, String), usize> = BTreeMap::new();
        for p in pods {
            for c in decide::pvc_names(p) {
                *claim_users
                    .entry((p.namespace().unwrap_or_default(), c))
                    .or_default() += 1;
            }
        }
        let results = join_all(actions.iter().map(|a| async {
            let (uid, pod) = match a {
                PodAction::Evict(u) | PodAction::Delete(u) | PodAction::ForceDelete(u) => {
                    (u.clone(), find(u))
                }
            };
            let Some(pod) = pod else {
                return (uid, PodOutcome::Gone, Vec::new());
            };
            let volume_ids = match a {
                PodAction::Evict(_) | PodAction::Delete(_) => {
                    self.volume_ids(pod, &claim_users).await
                }
                PodAction::ForceDelete(_) => Vec::new(),
            };
            (uid, self.act_on_pod(a, pod).await, volume_ids)
        }))
        .await;
        let mut failures = Vec::new();
        for (uid, outcome, volume_ids) in results {
            let grace = find(&uid)
                .and_then(decide::drain_pod)
                .map(|p| p.grace)
                .unwrap_or_default();
            let rec = records.entry(uid).or_default();
            match outcome {
                PodOutcome::Gone | PodOutcome::Accepted => {
                    rec.evicted_at = Some(self.now);
                    rec.volume_ids = volume_ids;
                    rec.grace = grace;
                }
                PodOutcome::Refused => {
                    rec.attempts += 1;
                    rec.last_attempt = Some(self.now);
                }
                // Not an attempt that counts towards deleting the pod: a
                // budget that can never allow the eviction fails the drain,
                // which is tried again after the short period until the
                // drain timeout forces it (spec §2.5).
                PodOutcome::Failed(message) => failures.push(message),
            }
        }
        self.deps
            .drains
            .lock()
            .insert(self.machine.uid().unwrap_or_default(), records);
        Ok(failures)
    }

    async fn act_on_pod(&self, action: &PodAction, pod: &Pod) -> PodOutcome {
        let ns = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let target = match self.target() {
            Ok(t) => t,
            Err(NoTarget) => return PodOutcome::Failed(Error::NoTarget.to_string()),
        };
        let pods: Api<Pod> = Api::namespaced(target, &ns);
        let result = match action {
            PodAction::Evict(_) => pods.evict(&name, &EvictParams::default()).await.map(|_| ()),
            PodAction::Delete(_) => pods
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ()),
            PodAction::ForceDelete(_) => pods
                .delete(
                    &name,
                    &DeleteParams {
                        grace_period_seconds: Some(0),
                        ..DeleteParams::default()
                    },
                )
                .await
                .map(|_| ()),
        };
        match result {
            Ok(()) => PodOutcome::Accepted,
            Err(e) if is_status(&e, 404) => PodOutcome::Gone,
            Err(e) if is_status(&e, 429) => match self.misconfigured_pdb(pod).await {
                Some(pdb) => PodOutcome::Failed(format!(
                    "eviction of pod {ns}/{name} is blocked by PodDisruptionBudget {pdb}, \
                     which allows no disruption although all its pods are healthy"
                )),
                None => PodOutcome::Refused,
            },
            Err(e) if matches!(action, PodAction::ForceDelete(_)) => {
                PodOutcome::Failed(format!("deleting pod {ns}/{name}: {e}"))
            }
            Err(e) => {
                tracing::debug!(pod = %name, error = %e, "eviction failed, retrying");
                PodOutcome::Refused
            }
        }
    }

    /// The name of a misconfigured PodDisruptionBudget covering the pod.
    async fn misconfigured_pdb(&self, pod: &Pod) -> Option<String> {
        let ns = pod.namespace().unwrap_or_default();
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(self.target().ok()?, &ns);
        let list = pdbs.list(&ListParams::default()).await.ok()?;
        let labels = pod.labels();
        list.items
            .iter()
            .filter(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.selector.as_ref())
                    .is_some_and(|sel| decide::selector_matches(sel, labels))
            })
            .find(|p| decide::pdb_misconfigured(p))
            .map(|p| p.name_any())
    }

    /// The provider's IDs of the volumes a pod alone uses, to wait for them
    /// to detach after its eviction. Lookup failures give no IDs: the drain
    /// then does not wait, and S3/S4 still release the volumes.
    async fn volume_ids(
        &self,
        pod: &Pod,
        claim_users: &BTreeMap<(String, String), usize>,
    ) -> Vec<String> {
        let ns = pod.namespace().unwrap_or_default();
        let Ok(target) = self.target() else {
            return Vec::new();
        };
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(target.clone(), &ns);
        let pvs: Api<PersistentVolume> = Api::all(target);
        let mut specs: Vec<PersistentVolumeSpec> = Vec::new();
        for claim in decide::pvc_names(pod) {
            if claim_users.get(&(ns.clone(), claim.clone())).copied() != Some(1) {
                continue;
            }
            let Ok(Some(pvc)) = pvcs.get_opt(&claim).await else {
                continue;
            };
            let Some(pv_name) = pvc.spec.and_then(|s| s.volume_name) else {
                continue;
            };
            if let Ok(Some(pv)) = pvs.get_opt(&pv_name).await
                && let Some(spec) = pv.spec
            {
                specs.push(spec);
            }
        }
        if specs.is_empty() {
            return Vec::new();
        }
        match self
            .deps
            .driver
            .get_volume_ids(GetVolumeIDsRequest { pv_specs: &specs })
            .await
        {
            Ok(r) => r.volume_ids,
            Err(e) => {
                tracing::debug!(machine = %self.name, error = %e, "GetVolumeIDs failed");
                Vec::new()
            }
        }
    }
}

/// What happened to one pod a drain round acted on.
enum PodOutcome {
    /// The pod was already gone.
    Gone,
    /// The eviction or deletion was accepted.
    Accepted,
    /// The eviction was refused (429 or a transient error): retry later.
    Refused,
    /// The drain fails because of this pod.
    Failed(String),
}
