//! Wiring: one watch per kind fills a shared cache and triggers the
//! controllers that care, each only after its cache shows the change.

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Endpoints, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, controller, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use crate::controllers::{self, Config, Context};
use crate::meta::{self, Selector};

/// A trigger stream of one kind.
type Triggers<K> = Vec<std::pin::Pin<Box<dyn Stream<Item = Result<K, watcher::Error>> + Send>>>;

/// One watch of a kind that fills a cache and hands every changed or
/// deleted object to `triggers` streams, each only after the cache shows
/// it (kube-runtime's `reflect_shared` can stall and never passes on
/// deletions; this is machine-controller-manager's way around both).
/// `gone` hears of every deletion, for the expectations. The watch stops
/// once every trigger stream is dropped (the controllers stopped) or, for a
/// cache without triggers, on `shutdown`.
async fn shared_watch<K>(
    api: Api<K>,
    triggers: usize,
    gone: impl Fn(&K) + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(Store<K>, Triggers<K>), controllers::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (store, writer) = reflector::store::<K>();
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..triggers)
        .map(|_| mpsc::unbounded_channel::<K>())
        .unzip();
    let all_closed = {
        let senders = senders.clone();
        async move {
            if senders.is_empty() {
                shutdown.await;
            }
            for tx in &senders {
                tx.closed().await;
            }
        }
    };
    let pump = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .for_each(move |event| {
            let touched = match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => Some(o),
                Ok(watcher::Event::Delete(o)) => {
                    gone(&o);
                    Some(o)
                }
                // Watch errors are retried by the backoff.
                _ => None,
            };
            if let Some(o) = touched {
                for tx in &senders {
                    let _ = tx.send(o.clone());
                }
            }
            futures::future::ready(())
        });
    tokio::spawn(async move {
        tokio::select! {
            _ = pump => {}
            _ = all_closed => {}
        }
    });
    store
        .wait_until_ready()
        .await
        .map_err(|source| controllers::Error::WatchFailed {
            kind: K::kind(&K::DynamicType::default()).into_owned(),
            source,
        })?;
    let streams: Triggers<K> = receivers
        .into_iter()
        .map(|rx| {
            futures::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|obj| (Ok(obj), rx))
            })
            .boxed()
        })
        .collect();
    Ok((store, streams))
}

/// The objects of kind `K` a `child` maps to: its controller when that is
/// a `kind`, else (an orphan) every `K` in its namespace whose selector
/// matches it, which may adopt it.
fn owners_of<K, C>(
    child: &C,
    kind: &str,
    candidates: &Store<K>,
    selector: impl Fn(&K) -> Option<Selector>,
) -> Vec<ObjectRef<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
    C: kube::Resource,
{
    let m = child.meta();
    let ns = m.namespace.clone().unwrap_or_default();
    match meta::controller_of(m) {
        Some(r) if r.kind == kind => vec![ObjectRef::new(&r.name).within(&ns)],
        Some(_) => Vec::new(),
        None => candidates
            .state()
            .iter()
            .filter(|k| k.meta().namespace.as_deref() == Some(ns.as_str()))
            .filter(|k| selector(k).is_some_and(|s| !s.is_empty() && s.matches(m.labels.as_ref())))
            .map(|k| ObjectRef::from_obj(k.as_ref()))
            .collect(),
    }
}

/// Runs every workload controller against `client` until `shutdown`
/// resolves; each finishes its running reconciles first. A watch that
/// cannot start (the API is unreachable, a kind is not served) is the
/// only error.
pub async fn run(
    client: kube::Client,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + Sync + Clone + 'static,
) -> Result<(), controllers::Error> {
    let workers = controller::Config::default().concurrency(config.concurrency);
    // Deletions of pods meet expected creations of them (a pod created
    // and deleted before the cache saw it).
    let expect_pods: Arc<std::sync::OnceLock<Arc<Context>>> = Arc::default();
    let hook = expect_pods.clone();
    let (pods, mut pod_events) = shared_watch(
        Api::<Pod>::all(client.clone()),
        5,
        move |p: &Pod| {
            if let Some(ctx) = hook.get() {
                let ns = p.metadata.namespace.as_deref().unwrap_or_default();
                ctx.pod_expectations
                    .observe_gone(&controllers::key(ns, meta::name(&p.metadata)));
            }
        },
        shutdown.clone(),
    )
    .await?;
    let (replica_sets, mut rs_events) = shared_watch(
        Api::<ReplicaSet>::all(client.clone()),
        2,
        |_| {},
        shutdown.clone(),
    )
    .await?;
    let (revisions, mut revision_events) = shared_watch(
        Api::<ControllerRevision>::all(client.clone()),
        1,
        |_| {},
        shutdown.clone(),
    )
    .await?;
    let (claims, _claim_events) = shared_watch(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        0,
        |_| {},
        shutdown.clone(),
    )
    .await?;
    let (jobs, mut job_events) =
        shared_watch(Api::<Job>::all(client.clone()), 2, |_| {}, shutdown.clone()).await?;
    let (endpoints, mut endpoint_events) = shared_watch(
        Api::<Endpoints>::all(client.clone()),
        1,
        |_| {},
        shutdown.clone(),
    )
    .await?;
    let (slices, mut slice_events) = shared_watch(
        Api::<EndpointSlice>::all(client.clone()),
        1,
        |_| {},
        shutdown.clone(),
    )
    .await?;
    let ctx = Arc::new(Context::new(
        client.clone(),
        config,
        pods,
        replica_sets.clone(),
        revisions,
        claims,
        jobs.clone(),
        slices,
        endpoints,
    ));
    let _ = expect_pods.set(ctx.clone());

    let rs_selector = |rs: &ReplicaSet| {
        rs.spec
            .as_ref()
            .and_then(|s| Selector::from_label_selector(&s.selector).ok())
    };
    let rs_store = replica_sets.clone();
    let rs_ctrl = Controller::for_stream(rs_events.remove(0), replica_sets.clone())
        .watches_stream(pod_events.remove(0), move |p: Pod| {
            owners_of(&p, "ReplicaSet", &rs_store, rs_selector)
        })
        .with_config(workers.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(
            controllers::replicaset::reconcile,
            controllers::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));

    let deployments = Api::<Deployment>::all(client.clone());
    let d_ctrl = Controller::new(deployments, watcher::Config::default());
    let d_store = d_ctrl.store();
    let d_ctrl = d_ctrl
        .watches_stream(rs_events.remove(0), move |rs: ReplicaSet| {
            owners_of(&rs, "Deployment", &d_store, |d: &Deployment| {
                d.spec
                    .as_ref()
                    .and_then(|s| Selector::from_label_selector(&s.selector).ok())
            })
        })
        .with_config(workers.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(
            controllers::deployment::reconcile,
            controllers::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));

    let sts_ctrl = Controller::new(
        Api::<StatefulSet>::all(client.clone()),
        watcher::Config::default(),
    );
    let sts_store = sts_ctrl.store();
    let sts_revision_store = sts_store.clone();
    let sts_selector = |s: &StatefulSet| {
        s.spec
            .as_ref()
            .and_then(|s| Selector::from_label_selector(&s.selector).ok())
    };
    let sts_ctrl = sts_ctrl
        .watches_stream(pod_events.remove(0), move |p: Pod| {
            owners_of(&p, "StatefulSet", &sts_store, sts_selector)
                .into_iter()
                .filter(|r| {
                    // Orphans are only adopted by the set their name names.
                    meta::controller_of(&p.metadata).is_some()
                        || crate::statefulset::parent_and_ordinal(meta::name(&p.metadata))
                            .is_some_and(|(parent, _)| parent == r.name)
                })
                .collect::<Vec<_>>()
        })
        .watches_stream(revision_events.remove(0), move |r: ControllerRevision| {
            owners_of(&r, "StatefulSet", &sts_revision_store, sts_selector)
        })
        .with_config(workers.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(
            controllers::statefulset::reconcile,
            controllers::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));

    let job_store = jobs.clone();
    let job_ctrl = Controller::for_stream(job_events.remove(0), jobs.clone())
        .watches_stream(pod_events.remove(0), move |p: Pod| {
            owners_of(&p, "Job", &job_store, |j: &Job| {
                j.spec
                    .as_ref()?
                    .selector
                    .as_ref()
                    .and_then(|s| Selector::from_label_selector(s).ok())
            })
        })
        .with_config(workers.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(
            controllers::job::reconcile,
            controllers::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));
    // Pods whose Job is gone let go of its tracking finalizer.
    let orphans = {
        let ctx = ctx.clone();
        let events = pod_events.remove(0);
        let shutdown = shutdown.clone();
        async move {
            let released = events.for_each_concurrent(8, |p| {
                let ctx = ctx.clone();
                async move {
                    if let Ok(p) = p
                        && let Err(e) = controllers::job::release_orphan(&ctx, &p).await
                    {
                        tracing::warn!(error = %e, "releasing an orphaned job pod failed");
                    }
                }
            });
            tokio::select! {
                _ = released => {}
                _ = shutdown => {}
            }
        }
    };

    let cj_ctrl = Controller::new(
        Api::<CronJob>::all(client.clone()),
        watcher::Config::default(),
    )
    .watches_stream(job_events.remove(0), |j: Job| {
        let ns = j.metadata.namespace.clone().unwrap_or_default();
        meta::controller_of(&j.metadata)
            .filter(|r| r.kind == "CronJob")
            .map(|r| ObjectRef::<CronJob>::new(&r.name).within(&ns))
    })
    .with_config(workers.clone())
    .graceful_shutdown_on(shutdown.clone())
    .run(
        controllers::cronjob::reconcile,
        controllers::error_policy,
        ctx.clone(),
    )
    .for_each(|_| futures::future::ready(()));

    // A pod triggers the Services that select it and those whose slices
    // or Endpoints list it (it may have stopped matching). A deleted
    // Service takes its Endpoints along (they have no owner reference).
    let gone_client = client.clone();
    let (svc_store, mut svc_events) = shared_watch(
        Api::<Service>::all(client.clone()),
        1,
        move |svc: &Service| {
            let api: Api<Endpoints> = Api::namespaced(
                gone_client.clone(),
                svc.metadata.namespace.as_deref().unwrap_or_default(),
            );
            let name = meta::name(&svc.metadata).to_string();
            tokio::spawn(async move {
                match api.delete(&name, &Default::default()).await {
                    Ok(_) => {}
                    Err(e) if controllers::is_code(&e, 404) => {}
                    Err(e) => tracing::warn!(error = %e, endpoints = %name, "deleting the Endpoints of a deleted Service failed"),
                }
            });
        },
        shutdown.clone(),
    )
    .await?;
    let svc_ctrl = Controller::for_stream(svc_events.remove(0), svc_store.clone());
    let endpoints_store = ctx.endpoints.clone();
    let slice_store = ctx.slices.clone();
    let svc_ctrl = svc_ctrl
        .watches_stream(pod_events.remove(0), move |p: Pod| {
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let name = meta::name(&p.metadata).to_string();
            let mut refs: Vec<ObjectRef<Service>> = svc_store
                .state()
                .iter()
                .filter(|s| s.metadata.namespace.as_deref() == Some(ns.as_str()))
                .filter(|s| {
                    controllers::endpointslice::selector(s)
                        .is_some_and(|sel| sel.matches(p.metadata.labels.as_ref()))
                })
                .map(|s| ObjectRef::from_obj(s.as_ref()))
                .collect();
            for e in endpoints_store.state() {
                if e.metadata.namespace.as_deref() == Some(ns.as_str())
                    && crate::endpoints::lists(&e, &name)
                {
                    refs.push(ObjectRef::new(crate::endpoints::service_of(&e)).within(&ns));
                }
            }
            for slice in slice_store.state() {
                let lists = slice.metadata.namespace.as_deref() == Some(ns.as_str())
                    && slice.endpoints.iter().any(|e| {
                        e.target_ref.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
                    });
                if lists && let Some(svc) = meta::label(&slice.metadata, crate::names::SERVICE_NAME)
                {
                    refs.push(ObjectRef::new(svc).within(&ns));
                }
            }
            refs
        })
        .watches_stream(slice_events.remove(0), |s: EndpointSlice| {
            let ns = s.metadata.namespace.clone().unwrap_or_default();
            meta::label(&s.metadata, crate::names::SERVICE_NAME)
                .map(|svc| ObjectRef::<Service>::new(svc).within(&ns))
        })
        .watches_stream(endpoint_events.remove(0), |e: Endpoints| {
            let ns = e.metadata.namespace.clone().unwrap_or_default();
            Some(ObjectRef::<Service>::new(crate::endpoints::service_of(&e)).within(&ns))
        })
        .with_config(workers.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(
            controllers::endpointslice::reconcile,
            controllers::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));

    futures::join!(
        rs_ctrl, d_ctrl, sts_ctrl, job_ctrl, orphans, cj_ctrl, svc_ctrl
    );
    Ok(())
}
