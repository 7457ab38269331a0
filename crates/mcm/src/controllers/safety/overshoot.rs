//! The overshooting check (spec §5): freezes machine sets that own too
//! many machines, and their deployments; thaws them when the count is back
//! down. Runs every `--machine-safety-overshooting-period` and on every new
//! machine.

use std::future::Future;
use std::time::Duration;

use api::{
    MachineDeployment, MachineDeploymentCondition, MachineDeploymentConditionType, MachineSet,
    MachineSetCondition, MachineSetConditionType, labels,
};
use chrono::{DateTime, Utc};
use kube::Resource;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::Recorder;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{CONFLICT_ATTEMPTS, is_status, publish};
use crate::controllers::context::{Context, Error};
use crate::safety::{self, FreezeChange};
use crate::time::to_time;

/// At most one overshooting pass this often: a burst of new machines (a
/// scale-up of hundreds) costs one pass, not hundreds.
const OVERSHOOT_MIN_GAP: Duration = Duration::from_millis(500);

/// Runs an overshooting pass every period and on every trigger, at most
/// one per [`OVERSHOOT_MIN_GAP`], until `shutdown`.
pub(super) async fn overshoot_loop(
    ctx: &Context,
    recorder: &Recorder,
    trigger: &Notify,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let period = ctx.config.machine_safety_overshooting_period;
    let mut next = Instant::now();
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep_until(next) => {}
            _ = trigger.notified() => {}
        }
        let started = Instant::now();
        if let Err(e) = overshoot_pass(ctx, recorder).await {
            tracing::warn!(error = %e, "overshooting check failed");
        }
        next = started + period;
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(OVERSHOOT_MIN_GAP.min(period)) => {}
        }
    }
}

/// One overshooting pass over every set and deployment of the namespace.
/// A failed change is logged and the pass goes on: one broken object must
/// not keep the others from being frozen.
pub async fn overshoot_pass(ctx: &Context, recorder: &Recorder) -> Result<(), Error> {
    let ns = &ctx.config.namespace;
    let mds_api: Api<MachineDeployment> = Api::namespaced(ctx.control.clone(), ns);
    let sets_api: Api<MachineSet> = Api::namespaced(ctx.control.clone(), ns);
    let mds = mds_api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::api("machine deployments", e))?
        .items;
    let sets = ctx.sets.state();
    let machines = ctx.machines.state();
    let plan = safety::plan_overshoot(
        &sets.iter().map(|s| s.as_ref()).collect::<Vec<_>>(),
        &mds.iter().collect::<Vec<_>>(),
        &machines.iter().map(|m| m.as_ref()).collect::<Vec<_>>(),
        ctx.config.safety_up,
        ctx.config.safety_down,
    );
    let now = Utc::now();
    for change in &plan.sets {
        match apply_set(&sets_api, change, now).await {
            Ok(Some(set)) => {
                let (warning, reason) = if change.frozen {
                    (true, "FrozeMachineSet")
                } else {
                    (false, "UnfrozeMachineSet")
                };
                tracing::info!(set = %change.name, frozen = change.frozen, reason = change.reason, "{}", change.message);
                publish(
                    recorder,
                    &set,
                    warning,
                    reason,
                    format!("{}: {}", change.reason, change.message),
                )
                .await;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(set = %change.name, error = %e, "freezing or unfreezing failed")
            }
        }
    }
    for change in &plan.deployments {
        match apply_deployment(&mds_api, change, now).await {
            Ok(Some(md)) => {
                let (warning, reason) = if change.frozen {
                    (true, "FrozeMachineDeployment")
                } else {
                    (false, "UnfrozeMachineDeployment")
                };
                tracing::info!(deployment = %change.name, frozen = change.frozen, reason = change.reason, "{}", change.message);
                publish(
                    recorder,
                    &md,
                    warning,
                    reason,
                    format!("{}: {}", change.reason, change.message),
                )
                .await;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(deployment = %change.name, error = %e, "freezing or unfreezing failed")
            }
        }
    }
    Ok(())
}

/// The merge patch of the freeze label (set or removed) and, if honoured,
/// the removal of the unfreeze annotation.
fn freeze_meta_patch(change: &FreezeChange) -> Value {
    let mut meta = json!({"labels": {
        labels::FREEZE: if change.frozen { Value::from(labels::TRUE) } else { Value::Null }
    }});
    if change.clear_unfreeze {
        meta["annotations"] = json!({ labels::UNFREEZE: Value::Null });
    }
    json!({ "metadata": meta })
}

/// Applies a freeze change to a set: the label first (it is what stops
/// scale-up), then the `Frozen` condition on a fresh copy. `None`: the set
/// is gone.
async fn apply_set(
    api: &Api<MachineSet>,
    change: &FreezeChange,
    now: DateTime<Utc>,
) -> Result<Option<MachineSet>, Error> {
    apply_freeze(api, change, "machine set", |set: &mut MachineSet| {
        set_frozen_condition(
            &mut set.status.get_or_insert_default().conditions,
            change,
            now,
        )
    })
    .await
}

/// Applies a freeze change to a deployment, as [`apply_set`].
async fn apply_deployment(
    api: &Api<MachineDeployment>,
    change: &FreezeChange,
    now: DateTime<Utc>,
) -> Result<Option<MachineDeployment>, Error> {
    apply_freeze(
        api,
        change,
        "machine deployment",
        |md: &mut MachineDeployment| {
            set_md_frozen_condition(
                &mut md.status.get_or_insert_default().conditions,
                change,
                now,
            )
        },
    )
    .await
}

/// The shared steps of [`apply_set`] and [`apply_deployment`]: the freeze
/// label by merge patch, then `set_condition` on a fresh copy written with
/// the status subresource, retried on conflicts. `set_condition` says
/// whether it changed anything.
async fn apply_freeze<K>(
    api: &Api<K>,
    change: &FreezeChange,
    kind: &str,
    set_condition: impl Fn(&mut K) -> bool,
) -> Result<Option<K>, Error>
where
    K: Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let what = || format!("{kind} {}", change.name);
    match api
        .patch(
            &change.name,
            &PatchParams::default(),
            &Patch::Merge(freeze_meta_patch(change)),
        )
        .await
    {
        Ok(_) => {}
        Err(e) if is_status(&e, 404) => return Ok(None),
        Err(e) => return Err(Error::api(what(), e)),
    }
    for _ in 0..CONFLICT_ATTEMPTS {
        let Some(mut obj) = api
            .get_opt(&change.name)
            .await
            .map_err(|e| Error::api(what(), e))?
        else {
            return Ok(None);
        };
        if !set_condition(&mut obj) {
            return Ok(Some(obj));
        }
        match api
            .replace_status(&change.name, &PostParams::default(), &obj)
            .await
        {
            Ok(obj) => return Ok(Some(obj)),
            Err(e) if is_status(&e, 409) => continue,
            Err(e) if is_status(&e, 404) => return Ok(None),
            Err(e) => return Err(Error::api(what(), e)),
        }
    }
    Err(Error::FreezeConflict(what()))
}

/// Sets (frozen) or removes (thawed) a set's `Frozen` condition, keeping
/// the transition time of one already True; whether anything changed.
fn set_frozen_condition(
    conditions: &mut Vec<MachineSetCondition>,
    change: &FreezeChange,
    now: DateTime<Utc>,
) -> bool {
    let before = conditions.clone();
    let ty = MachineSetConditionType::Frozen;
    if !change.frozen {
        conditions.retain(|c| c.type_ != ty);
        return *conditions != before;
    }
    let since = conditions
        .iter()
        .find(|c| c.type_ == ty && c.status == api::ConditionStatus::True)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| to_time(now));
    conditions.retain(|c| c.type_ != ty);
    conditions.push(MachineSetCondition {
        type_: ty,
        status: api::ConditionStatus::True,
        last_transition_time: Some(since),
        reason: change.reason.to_string(),
        message: change.message.clone(),
    });
    *conditions != before
}

/// [`set_frozen_condition`] for a deployment. As upstream, a thawed
/// deployment has no `Frozen` condition; the reason is in the event.
fn set_md_frozen_condition(
    conditions: &mut Vec<MachineDeploymentCondition>,
    change: &FreezeChange,
    now: DateTime<Utc>,
) -> bool {
    let before = conditions.clone();
    let ty = MachineDeploymentConditionType::Frozen;
    if !change.frozen {
        conditions.retain(|c| c.type_ != ty);
        return *conditions != before;
    }
    let existing = conditions
        .iter()
        .find(|c| c.type_ == ty && c.status == api::ConditionStatus::True)
        .cloned();
    if existing
        .as_ref()
        .is_some_and(|c| c.reason == change.reason && c.message == change.message)
    {
        return false;
    }
    conditions.retain(|c| c.type_ != ty);
    conditions.push(MachineDeploymentCondition {
        type_: ty,
        status: api::ConditionStatus::True,
        last_update_time: Some(to_time(now)),
        last_transition_time: Some(
            existing
                .and_then(|c| c.last_transition_time)
                .unwrap_or_else(|| to_time(now)),
        ),
        reason: change.reason.to_string(),
        message: change.message.clone(),
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    fn change(frozen: bool, reason: &'static str) -> FreezeChange {
        FreezeChange {
            name: "ms".into(),
            frozen,
            reason,
            message: "m".into(),
            clear_unfreeze: false,
        }
    }

    #[test]
    fn frozen_conditions_keep_their_transition_time() {
        let t0 = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let t1 = DateTime::from_timestamp(1_700_000_100, 0).unwrap();
        let mut c = Vec::new();
        assert!(set_frozen_condition(&mut c, &change(true, "A"), t0));
        assert!(!set_frozen_condition(&mut c, &change(true, "A"), t1));
        assert!(set_frozen_condition(&mut c, &change(true, "B"), t1));
        assert_eq!(c[0].last_transition_time, Some(to_time(t0)));
        assert!(set_frozen_condition(&mut c, &change(false, "C"), t1));
        assert!(c.is_empty());
        assert!(!set_frozen_condition(&mut c, &change(false, "C"), t1));

        let mut d = Vec::new();
        assert!(set_md_frozen_condition(&mut d, &change(true, "A"), t0));
        assert!(!set_md_frozen_condition(&mut d, &change(true, "A"), t1));
        assert!(set_md_frozen_condition(&mut d, &change(true, "B"), t1));
        assert_eq!(d[0].last_transition_time, Some(to_time(t0)));
        assert_eq!(d[0].last_update_time, Some(to_time(t1)));
        assert!(set_md_frozen_condition(&mut d, &change(false, "C"), t1));
        assert!(d.is_empty());
    }
}
