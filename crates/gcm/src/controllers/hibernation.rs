//! The hibernation schedule controller: when a Shoot's schedule starts or
//! ends, sets `spec.hibernation.enabled` (gardenlet then hibernates or
//! wakes the shoot), records `status.lastHibernationTriggerTime`, and looks
//! again at the next scheduled time.
//!
//! The spec is written first, guarded by the resource version the decision
//! was made from, then the trigger time. A crash between the two finds the
//! same trigger again, with the spec already set: only the time is
//! recorded.

use std::sync::Arc;

use gardener::{Shoot, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::{Context, Error};
use crate::hibernation::{self, Plan};
use crate::maintain::PlannedEvent;

/// The controller's name in logs and backoff keys.
pub const NAME: &str = "shoot-hibernation";

/// Event reason when a schedule hibernates a shoot.
pub const REASON_HIBERNATE: &str = "HibernationScheduled";
/// Event reason when a schedule wakes a shoot up.
pub const REASON_WAKE_UP: &str = "WakeUpScheduled";
/// Event reason of a schedule that cannot be evaluated.
pub const REASON_INVALID: &str = "InvalidHibernationSchedule";

fn after(plan: &Plan) -> Action {
    match plan.requeue {
        Some(wait) => Action::requeue(wait),
        None => Action::await_change(),
    }
}

pub async fn reconcile(shoot: Arc<Shoot>, ctx: Arc<Context>) -> Result<Action, Error> {
    let now = ctx.config.clock.now();
    let cached = hibernation::plan(&shoot, now);
    if !cached.invalid.is_empty() {
        ctx.publish(
            shoot.as_ref(),
            &PlannedEvent {
                warning: true,
                reason: REASON_INVALID,
                note: format!(
                    "Hibernation schedules ignored: {}",
                    cached.invalid.join("; ")
                ),
            },
        );
    }
    if cached.trigger.is_none() {
        return Ok(after(&cached));
    }
    // Decide again on what the API shows: the cache may not hold this
    // controller's last write yet.
    let ns = shoot.metadata.namespace.clone().unwrap_or_default();
    let name = shoot.metadata.name.clone().unwrap_or_default();
    let key = format!("{ns}/{name}");
    let api: Api<Shoot> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(fresh) = api
        .get_opt(&name)
        .await
        .map_err(|e| Error::api(format!("Shoot {key}"), e))?
    else {
        return Ok(Action::await_change());
    };
    let plan = hibernation::plan(&fresh, now);
    let Some((at, hibernate)) = plan.trigger else {
        return Ok(after(&plan));
    };
    if let Some(enabled) = plan.set_enabled {
        let patch = json!({
            "metadata": {"resourceVersion": fresh.metadata.resource_version},
            "spec": {"hibernation": {"enabled": enabled}},
        });
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::api(format!("Shoot {key}"), e))?;
        tracing::info!(shoot = %key, hibernate, schedule = %at, "hibernation schedule applied");
        ctx.publish(
            &fresh,
            &PlannedEvent {
                warning: false,
                reason: if hibernate {
                    REASON_HIBERNATE
                } else {
                    REASON_WAKE_UP
                },
                note: format!(
                    "{} by the hibernation schedule due at {}",
                    if hibernate {
                        "Hibernating the cluster"
                    } else {
                        "Waking up the cluster"
                    },
                    Time(at)
                ),
            },
        );
    }
    let status = json!({"status": {"lastHibernationTriggerTime": Time(now)}});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(|e| Error::api(format!("status of Shoot {key}"), e))?;
    Ok(after(&plan))
}
