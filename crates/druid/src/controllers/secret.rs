//! The Secret controller (spec §9): druid's finalizer on every Secret an
//! Etcd references, removed once no Etcd of the namespace references it.
//! Woken by Secrets and by Etcds: an Etcd change concerns the Secrets it
//! references and those that still carry the finalizer (a reference may
//! just have gone).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};

use super::{Context, Error};
use crate::secrets::{self, FinalizerAction};
use crate::types::Etcd;

/// Runs the Secret controller until `shutdown`.
pub async fn run(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let ctrl = Controller::new(ctx.watch_api::<Secret>(), watcher::Config::default());
    let store = ctrl.store();
    ctrl.watches(
        ctx.watch_api::<Etcd>(),
        watcher::Config::default(),
        move |etcd: Etcd| concerned(&store, &etcd),
    )
    .graceful_shutdown_on(shutdown)
    .run(reconcile, error_policy, ctx)
    .for_each(|_| futures::future::ready(()))
    .await;
}

/// The Secrets an Etcd change concerns.
fn concerned(store: &Store<Secret>, etcd: &Etcd) -> Vec<ObjectRef<Secret>> {
    let Some(ns) = etcd.namespace() else {
        return Vec::new();
    };
    let mut names = secrets::referenced(etcd);
    for s in store.state() {
        if s.namespace().as_deref() == Some(ns.as_str()) && super::has_finalizer(s.as_ref()) {
            names.insert(s.name_any());
        }
    }
    names
        .into_iter()
        .map(|n| ObjectRef::new(&n).within(&ns))
        .collect()
}

pub fn error_policy(secret: Arc<Secret>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(secret = %secret.name_any(), error = %err, "secret reconcile failed");
    Action::requeue(super::ERROR_REQUEUE)
}

pub async fn reconcile(secret: Arc<Secret>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = secret.namespace().unwrap_or_default();
    let name = secret.name_any();
    let etcds = Api::<Etcd>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::ReadFailed {
            what: format!("etcds in {ns}"),
            source,
        })?;
    let referenced = etcds
        .items
        .iter()
        .any(|e| secrets::referenced(e).contains(&name));
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    match secrets::finalizer_action(super::has_finalizer(&*secret), referenced) {
        // A Secret on its way out takes no new finalizer.
        FinalizerAction::Add if secret.metadata.deletion_timestamp.is_none() => {
            super::set_finalizer(&api, &*secret, true).await?
        }
        FinalizerAction::Remove => super::set_finalizer(&api, &*secret, false).await?,
        _ => {}
    }
    Ok(Action::await_change())
}
