//! The NamespacedCloudProfile controller: keeps the finalizer on every NCP,
//! renders it against its parent into `status.cloudProfileSpec`, and
//! releases a deleting NCP once no Shoot (and, with multi-level
//! inheritance, no child NCP) uses it.

use std::sync::Arc;
use std::time::Duration;

use gardener::render::{parent_chain, render_chain};
use gardener::{CloudProfile, NamespacedCloudProfile, Shoot};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;

use super::{Context, Error, patch_finalizer};
use crate::maintain::PlannedEvent;
use crate::ncp;

/// The controller's name in logs and backoff keys.
pub const NAME: &str = "namespacedcloudprofile";

/// How often a deletion blocked by Shoots is checked again, besides the
/// prompt check a Shoot's deletion triggers.
pub const DELETION_RECHECK: Duration = Duration::from_secs(30);

/// Event reason of a deletion held by Shoots (upstream's).
pub const REASON_REFERENCED: &str = "ResourceReferenced";
/// Event reason of an NCP that cannot be rendered.
pub const REASON_PARENT: &str = "ParentNotAvailable";

pub async fn reconcile(
    obj: Arc<NamespacedCloudProfile>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let ns = obj.metadata.namespace.clone().unwrap_or_default();
    let name = obj.metadata.name.clone().unwrap_or_default();
    let ext = ctx.config.extensions;
    let api: Api<NamespacedCloudProfile> = Api::namespaced(ctx.client.clone(), &ns);
    let what = || format!("NamespacedCloudProfile {ns}/{name}");

    if obj.metadata.deletion_timestamp.is_some() {
        if !ncp::has_finalizer(&obj.metadata) {
            return Ok(Action::await_change());
        }
        let shoots = list_shoots(&ctx, &ns).await?;
        let children = if ext.multi_level_inheritance {
            list_ncps(&api, &ns).await?
        } else {
            Vec::new()
        };
        let blockers = ncp::blockers(
            &ns,
            &name,
            &shoots.iter().collect::<Vec<_>>(),
            &children.iter().collect::<Vec<_>>(),
            ext,
        );
        if !blockers.is_empty() {
            let message = blockers.message();
            tracing::info!(ncp = %format!("{ns}/{name}"), %message, "deletion waits");
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
        tracing::info!(ncp = %format!("{ns}/{name}"), "no shoot uses it any more; finalizer removed");
        return Ok(Action::await_change());
    }

    if !ncp::has_finalizer(&obj.metadata) {
        patch_finalizer(&api, &obj, true)
            .await
            .map_err(|e| Error::api(what(), e))?;
    }

    // The chain of parents; NCP parents are read fresh so a parent's spec
    // change is never rendered from a stale copy.
    let siblings = if obj.spec.parent.is_namespaced() && ext.multi_level_inheritance {
        list_ncps(&api, &ns).await?
    } else {
        Vec::new()
    };
    let lookup = |parent: &str| {
        siblings
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(parent))
            .map(|s| &s.spec)
    };
    let chain = match parent_chain(&name, &obj.spec, lookup, ext) {
        Ok(chain) => chain,
        Err(e) => {
            // Not retried: a change of the NCP or of an ancestor triggers
            // the next attempt.
            not_renderable(&ctx, &obj, e.to_string());
            return Ok(Action::await_change());
        }
    };
    let profiles: Api<CloudProfile> = Api::all(ctx.client.clone());
    let Some(root) = profiles
        .get_opt(&chain.root)
        .await
        .map_err(|e| Error::api(format!("CloudProfile {}", chain.root), e))?
    else {
        not_renderable(
            &ctx,
            &obj,
            format!("parent CloudProfile {:?} does not exist", chain.root),
        );
        return Ok(Action::await_change());
    };

    let desired = ncp::desired_status(&obj, render_chain(&root.spec, &chain));
    if ncp::status_differs(obj.status.as_ref(), &desired) {
        let patch: json_patch::Patch = serde_json::from_value(ncp::status_patch(&desired))
            .map_err(|_| Error::Encode(what()))?;
        api.patch_status(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
            .map_err(|e| Error::api(format!("status of {}", what()), e))?;
        tracing::info!(ncp = %format!("{ns}/{name}"), generation = ?desired.observed_generation, root = %chain.root, "rendered");
    }
    Ok(Action::await_change())
}

/// Reports an NCP that cannot be rendered: a Warning event and a log line.
fn not_renderable(ctx: &Context, obj: &NamespacedCloudProfile, why: String) {
    tracing::warn!(
        ncp = %format!("{}/{}", obj.metadata.namespace.as_deref().unwrap_or_default(), obj.metadata.name.as_deref().unwrap_or_default()),
        reason = %why,
        "cannot render"
    );
    ctx.publish(
        obj,
        &PlannedEvent {
            warning: true,
            reason: REASON_PARENT,
            note: format!("Cannot render the profile: {why}"),
        },
    );
}

/// The Shoots that may use an NCP of `namespace`: those of the namespace,
/// or with cross-project use those of every namespace.
async fn list_shoots(ctx: &Context, namespace: &str) -> Result<Vec<Shoot>, Error> {
    let api: Api<Shoot> = if ctx.config.extensions.cross_project_use {
        Api::all(ctx.client.clone())
    } else {
        Api::namespaced(ctx.client.clone(), namespace)
    };
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| Error::api(format!("Shoots of {namespace}"), e))
}

async fn list_ncps(
    api: &Api<NamespacedCloudProfile>,
    namespace: &str,
) -> Result<Vec<NamespacedCloudProfile>, Error> {
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| Error::api(format!("NamespacedCloudProfiles of {namespace}"), e))
}
