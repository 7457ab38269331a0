//! Wiring: both controllers over one client, run until shutdown.

use std::future::Future;

use futures::StreamExt;
use gardener::{CloudProfile, NamespacedCloudProfile, Shoot};
use kube::Api;
use kube::runtime::{Controller, watcher};

use crate::controllers::{
    self, Context, cloudprofile, hibernation, maintenance, namespacedcloudprofile,
};
use crate::{Config, ncp};

fn scoped<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Runs the CloudProfile, NamespacedCloudProfile and Shoot maintenance
/// controllers against `client` until `shutdown` resolves; each finishes
/// its running reconciles first.
///
/// The CloudProfile controller is triggered by CloudProfiles, by its own
/// requeues at the next lifecycle transition, and — while a profile is
/// being deleted — by the Shoots and NCPs that hold it.
/// The NCP controller is triggered by its NCPs, by every CloudProfile
/// (mapped to the NCPs rendered from it), by Shoots (mapped to the NCP
/// they use, so a Shoot's deletion releases a deleting NCP promptly) and,
/// with multi-level inheritance, by NCPs (mapped to their descendants and
/// their parent, whose deletion may wait for them).
/// The maintenance controller is triggered by Shoots and by its own
/// requeues at each shoot's next window; the hibernation schedule
/// controller by Shoots and by its requeues at each next scheduled time.
///
/// Running cannot fail: a failed reconcile is retried by its controller
/// (see [`controllers::error_policy`]), so there is nothing to return.
pub async fn run(
    client: kube::Client,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let ext = config.extensions;
    let namespace = config.namespace.clone();
    let ctx = Context::new(client.clone(), config);

    let ncps: Api<NamespacedCloudProfile> = scoped(&client, namespace.as_deref());
    let mut ncp_ctrl = Controller::new(ncps.clone(), watcher::Config::default());
    let store = ncp_ctrl.store();
    let cp_store = store.clone();
    ncp_ctrl = ncp_ctrl.watches(
        Api::<CloudProfile>::all(client.clone()),
        watcher::Config::default(),
        move |cp: CloudProfile| {
            let all = cp_store.state();
            let refs: Vec<&NamespacedCloudProfile> = all.iter().map(|n| n.as_ref()).collect();
            ncp::for_cloud_profile(cp.metadata.name.as_deref().unwrap_or_default(), &refs, ext)
        },
    );
    if ext.multi_level_inheritance {
        let parent_store = store.clone();
        ncp_ctrl = ncp_ctrl.watches(
            ncps,
            watcher::Config::default(),
            move |changed: NamespacedCloudProfile| {
                let all = parent_store.state();
                let refs: Vec<&NamespacedCloudProfile> = all.iter().map(|n| n.as_ref()).collect();
                ncp::related(&changed, &refs, ext)
            },
        );
    }
    // With cross-project use, a Shoot of any namespace may hold an NCP.
    let shoot_scope = if ext.cross_project_use {
        None
    } else {
        namespace.as_deref()
    };
    ncp_ctrl = ncp_ctrl.watches(
        scoped::<Shoot>(&client, shoot_scope),
        watcher::Config::default(),
        move |shoot: Shoot| ncp::for_shoot(&shoot, ext),
    );
    let ncp_run = ncp_ctrl
        .graceful_shutdown_on(shutdown.clone())
        .run(
            controllers::forgetting(
                namespacedcloudprofile::NAME,
                namespacedcloudprofile::reconcile,
            ),
            controllers::error_policy(namespacedcloudprofile::NAME),
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));

    let mut cp_ctrl = Controller::new(
        Api::<CloudProfile>::all(client.clone()),
        watcher::Config::default(),
    );
    let cps = cp_ctrl.store();
    // Users matter only to a deleting profile; other profiles are not
    // woken by every Shoot change.
    let deleting = move |r: Option<kube::runtime::reflector::ObjectRef<CloudProfile>>| {
        r.filter(|r| {
            cps.get(r)
                .is_some_and(|cp| cp.metadata.deletion_timestamp.is_some())
        })
    };
    let deleting_too = deleting.clone();
    cp_ctrl = cp_ctrl
        .watches(
            Api::<Shoot>::all(client.clone()),
            watcher::Config::default(),
            move |shoot: Shoot| deleting(crate::cloudprofile::for_shoot(&shoot)),
        )
        .watches(
            Api::<NamespacedCloudProfile>::all(client.clone()),
            watcher::Config::default(),
            move |n: NamespacedCloudProfile| deleting_too(crate::cloudprofile::for_ncp(&n)),
        );
    let cp_run = cp_ctrl
        .graceful_shutdown_on(shutdown.clone())
        .run(
            controllers::forgetting(cloudprofile::NAME, cloudprofile::reconcile),
            controllers::error_policy(cloudprofile::NAME),
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));

    let shoots: Api<Shoot> = scoped(&client, namespace.as_deref());
    let hibernation_run = Controller::new(shoots.clone(), watcher::Config::default())
        .graceful_shutdown_on(shutdown.clone())
        .run(
            controllers::forgetting(hibernation::NAME, hibernation::reconcile),
            controllers::error_policy(hibernation::NAME),
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));

    let maintenance_run = Controller::new(shoots, watcher::Config::default())
        .graceful_shutdown_on(shutdown)
        .run(
            controllers::forgetting(maintenance::NAME, maintenance::reconcile),
            controllers::error_policy(maintenance::NAME),
            ctx,
        )
        .for_each(|_| futures::future::ready(()));

    tracing::info!(namespace = ?namespace, extensions = ?ext, "gardener-controller-manager running");
    futures::join!(cp_run, ncp_run, hibernation_run, maintenance_run);
}
