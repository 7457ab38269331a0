//! The CloudProfile controller: keeps the finalizer on every CloudProfile,
//! writes the current classification of each version into its status (and
//! looks again at the next lifecycle transition), and releases a deleting
//! profile once no Shoot and no NamespacedCloudProfile uses it.

use std::sync::Arc;
use std::time::Duration;

use gardener::{CloudProfile, NamespacedCloudProfile, Shoot};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;

use super::{Context, Error, patch_finalizer};
use crate::maintain::PlannedEvent;
use crate::{cloudprofile, ncp};

/// The controller's name in logs and backoff keys.
pub const NAME: &str = "cloudprofile";

/// How often a deletion held by users is checked again, besides the prompt
/// check a user's deletion triggers.
pub const DELETION_RECHECK: Duration = Duration::from_secs(30);

/// Event reason of a deletion held by users (upstream's).
pub const REASON_REFERENCED: &str = "ResourceReferenced";

pub async fn reconcile(obj: Arc<CloudProfile>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let api: Api<CloudProfile> = Api::all(ctx.client.clone());
    let what = || format!("CloudProfile {name}");

    if obj.metadata.deletion_timestamp.is_some() {
        if !ncp::has_finalizer(&obj.metadata) {
            return Ok(Action::await_change());
        }
        let shoots: Vec<Shoot> = Api::<Shoot>::all(ctx.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::api("Shoots", e))?
            .items;
        let ncps: Vec<NamespacedCloudProfile> =
            Api::<NamespacedCloudProfile>::all(ctx.client.clone())
                .list(&ListParams::default())
                .await
                .map_err(|e| Error::api("NamespacedCloudProfiles", e))?
                .items;
        let users = cloudprofile::users(
            &name,
            &shoots.iter().collect::<Vec<_>>(),
            &ncps.iter().collect::<Vec<_>>(),
        );
        if !users.is_empty() {
            let message = users.message();
            tracing::info!(cloudprofile = %name, %message, "deletion waits");
            ctx.publish(
                obj.as_ref(),
                &PlannedEvent {
                    warning: true,
                    reason: REASON_REFERENCED,
                    note: message,
                },
            );
            return Ok(Action::requeue(DELETION_RECHECK));
        }
        patch_finalizer(&api, &obj, false)
            .await
            .map_err(|e| Error::api(what(), e))?;
        tracing::info!(cloudprofile = %name, "nothing uses it any more; finalizer removed");
        return Ok(Action::await_change());
    }

    if !ncp::has_finalizer(&obj.metadata) {
        patch_finalizer(&api, &obj, true)
            .await
            .map_err(|e| Error::api(what(), e))?;
    }

    let now = ctx.config.clock.now();
    let desired = cloudprofile::desired_status(&obj.spec, now);
    if obj.status.as_ref() != Some(&desired) {
        let patch: json_patch::Patch = serde_json::from_value(cloudprofile::status_patch(&desired))
            .map_err(|_| Error::Encode(what()))?;
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(_) => tracing::debug!(cloudprofile = %name, "classifications written"),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Action::await_change()),
            Err(e) => return Err(Error::api(format!("status of {}", what()), e)),
        }
    }
    Ok(match cloudprofile::requeue_after(&obj.spec, now) {
        Some(wait) => Action::requeue(wait),
        None => Action::await_change(),
    })
}
