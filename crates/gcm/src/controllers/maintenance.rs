//! The Shoot maintenance controller: once per maintenance window (or at
//! once when asked by `gardener.cloud/operation: maintain`), moves a shoot's
//! versions as [`gardener::maintenance::plan`] decides, records
//! `status.lastMaintenance`, and requeues the shoot at its next window.
//!
//! A run writes in an order that survives a crash at any point:
//!
//! 1. with changes to make, `lastMaintenance` in state `Processing`
//!    (guarded by the resource version the plan was made from);
//! 2. the JSON patch of the changed fields and the annotation (guarded by
//!    the resource version step 1 produced);
//! 3. the final `lastMaintenance`, then the events.
//!
//! A `Processing` record found later means the run was interrupted, and
//! the shoot is maintained again: planning from the current spec either
//! redoes the changes or, if they landed, finds nothing and only marks the
//! record done.

use std::sync::Arc;

use gardener::{CloudProfile, CloudProfileSpec, LastMaintenance, NamespacedCloudProfile, Shoot};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::Value;

use super::{Context, Error};
use crate::maintain::{self, ProfileRef};
use crate::schedule::{self, Decision, Window};

/// The controller's name in logs and backoff keys.
pub const NAME: &str = "shoot-maintenance";

pub async fn reconcile(shoot: Arc<Shoot>, ctx: Arc<Context>) -> Result<Action, Error> {
    if shoot.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let now = ctx.config.clock.now();
    // A cheap look at the cached object first; only a shoot that seems due
    // is read fresh, and the decision is taken again on what the API shows
    // (the cache may not show this controller's own last writes yet).
    if let Decision::Wait { until } = decide(&shoot, now) {
        return Ok(Action::requeue(schedule::delay_until(now, until)));
    }
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
    if fresh.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let trigger = match decide(&fresh, now) {
        Decision::Wait { until } => return Ok(Action::requeue(schedule::delay_until(now, until))),
        Decision::Maintain(trigger) => trigger,
    };

    let profile = effective_profile(&ctx, &ns, &fresh).await?;
    let plan = gardener::maintenance::plan(&fresh.spec, &profile, now);
    let outcome = maintain::outcome(&fresh, &plan, trigger, now);
    tracing::info!(
        shoot = %key,
        ?trigger,
        changes = plan.changes.len(),
        errors = plan.errors.len(),
        "maintaining"
    );

    let mut rv = fresh.metadata.resource_version.clone().unwrap_or_default();
    let mut last = outcome.last_maintenance.clone();
    let mut events = outcome.events.clone();
    if outcome.changes_spec {
        rv = write_status(&api, &name, &outcome.processing(), Some(&rv)).await?;
    }
    if let Some(patch) = outcome.spec_patch(&rv) {
        match json_patch(&api, &name, patch).await {
            Ok(new_rv) => rv = new_rv,
            // The server refused the maintained spec (validation or
            // admission): record the failure, drop the annotation so a
            // fixed shoot can be maintained on request again, and wait
            // for the next window, as upstream does.
            Err(kube::Error::Api(e)) if e.code == 422 || e.code == 400 || e.code == 403 => {
                let (failed, event) = maintain::rejected(&outcome.last_maintenance, &e.message);
                last = failed;
                events = vec![event];
                if let Some(patch) = maintain::annotation_patch(&fresh, &rv) {
                    rv = json_patch(&api, &name, patch)
                        .await
                        .map_err(|e| Error::api(format!("annotations of Shoot {key}"), e))?;
                }
            }
            Err(e) => return Err(Error::api(format!("Shoot {key}"), e)),
        }
    }
    write_status(&api, &name, &last, Some(&rv)).await?;
    for ev in &events {
        ctx.publish(&fresh, ev);
    }
    tracing::info!(shoot = %key, state = %last.state, description = %last.description, "maintained");

    let next = Window::effective(&fresh.spec).next_start(now);
    Ok(Action::requeue(schedule::delay_until(now, next)))
}

fn decide(shoot: &Shoot, now: chrono::DateTime<chrono::Utc>) -> Decision {
    schedule::decide(
        schedule::wants_maintenance(shoot.metadata.annotations.as_ref()),
        last_maintenance(shoot),
        Window::effective(&shoot.spec),
        now,
    )
}

fn last_maintenance(shoot: &Shoot) -> Option<&LastMaintenance> {
    shoot.status.as_ref()?.last_maintenance.as_ref()
}

/// The profile spec the shoot's versions are checked against: the
/// CloudProfile's spec, or an NCP's rendered `status.cloudProfileSpec`.
async fn effective_profile(
    ctx: &Context,
    ns: &str,
    shoot: &Shoot,
) -> Result<CloudProfileSpec, Error> {
    let key = format!(
        "{ns}/{}",
        shoot.metadata.name.as_deref().unwrap_or_default()
    );
    match maintain::profile_ref(ns, &shoot.spec, ctx.config.extensions) {
        None => Err(Error::NoProfile(key)),
        Some(ProfileRef::Cluster(name)) => {
            let api: Api<CloudProfile> = Api::all(ctx.client.clone());
            let what = format!("CloudProfile {name}");
            match api.get_opt(&name).await {
                Ok(Some(cp)) => Ok(cp.spec),
                Ok(None) => Err(Error::ProfileNotFound(what)),
                Err(e) => Err(Error::api(what, e)),
            }
        }
        Some(ProfileRef::Namespaced { namespace, name }) => {
            let api: Api<NamespacedCloudProfile> = Api::namespaced(ctx.client.clone(), &namespace);
            let what = format!("NamespacedCloudProfile {namespace}/{name}");
            match api.get_opt(&name).await {
                Ok(Some(ncp)) => ncp
                    .status
                    .map(|s| s.cloud_profile_spec)
                    .ok_or(Error::ProfileNotRendered(what)),
                Ok(None) => Err(Error::ProfileNotFound(what)),
                Err(e) => Err(Error::api(what, e)),
            }
        }
    }
}

/// Writes `status.lastMaintenance`; returns the new resource version.
async fn write_status(
    api: &Api<Shoot>,
    name: &str,
    last: &LastMaintenance,
    rv: Option<&str>,
) -> Result<String, Error> {
    let patch = maintain::status_patch(last, rv);
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|s| s.metadata.resource_version.unwrap_or_default())
        .map_err(|e| Error::api(format!("status of Shoot {name}"), e))
}

/// Sends a JSON patch; returns the new resource version.
async fn json_patch(api: &Api<Shoot>, name: &str, patch: Value) -> Result<String, kube::Error> {
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
    api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .map(|s| s.metadata.resource_version.unwrap_or_default())
}
