//! The Shoot reconciler's executor: observe the seed and the shoot's API,
//! call the pure builders and verdicts (`build`, `plan`), write what they
//! return. Every write is create-or-replace against what was just read, so
//! a pass can be cut short anywhere and the next one finishes the job.

use std::collections::HashMap;
use std::sync::Arc;

use api::{Machine, MachineDeployment, MachineSet};
use chrono::Utc;
use gardener::{CloudProfile, NamespacedCloudProfile, Shoot, ShootStatus};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use parking_lot::Mutex;
use serde_json::{Value, json};
use worker::{Cluster, ShootFacts, Worker};

use crate::build::{self, ProfileSource};
use crate::etcd_main::{self, Readiness};
use crate::kube_apiserver;
use crate::mcm_deployment;
use crate::plan::{self, DeletionAction, DeletionObservation, NodeCounts, WorkerObservation};
use crate::shoot_cluster::{ShootCluster, ShootClusters, ShootStore};
use crate::{Config, Error};

/// How long to wait after an error before trying again.
pub const ERROR_REQUEUE: std::time::Duration = std::time::Duration::from_secs(5);
/// How long listing the shoot API's nodes may take.
const SHOOT_API_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// What every reconcile shares.
pub struct Context {
    pub seed: kube::Client,
    pub config: Config,
    pub clusters: ShootClusters,
    /// Control namespace → Shoot, so Worker events find their Shoot.
    pub shoots: Mutex<HashMap<String, ObjectRef<Shoot>>>,
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Api { what, source }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// The Shoot a Worker event concerns.
pub fn shoot_for_worker(ctx: &Context, w: &Worker) -> Option<ObjectRef<Shoot>> {
    let ns = w.namespace()?;
    ctx.shoots.lock().get(&ns).cloned()
}

pub async fn reconcile(shoot: Arc<Shoot>, ctx: Arc<Context>) -> Result<Action, Error> {
    let (Some(namespace), name) = (shoot.namespace(), shoot.name_any()) else {
        return Ok(Action::await_change());
    };
    let id = build::technical_id(&namespace, &name);
    ctx.shoots
        .lock()
        .insert(id.clone(), ObjectRef::from_obj(shoot.as_ref()));
    if shoot.meta().deletion_timestamp.is_some() {
        return delete(&shoot, &namespace, &id, &ctx).await;
    }
    let shoots: Api<Shoot> = Api::namespaced(ctx.seed.clone(), &namespace);
    if !shoot.finalizers().iter().any(|f| f == build::FINALIZER) {
        let mut finalizers = shoot.finalizers().to_vec();
        finalizers.push(build::FINALIZER.to_string());
        shoots
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
            )
            .await
            .map_err(api_err(format!(
                "the finalizer of shoot {namespace}/{name}"
            )))?;
    }
    let outcome = deploy(&shoot, &namespace, &id, &ctx).await;
    let (observed, error) = match outcome {
        Ok(o) => (o, None),
        Err(e) => (Observed::default(), Some(e)),
    };
    let error_text = error.as_ref().map(ToString::to_string);
    let verdict = plan::shoot_status(&plan::StatusInput {
        previous: shoot.status.as_ref(),
        technical_id: &id,
        generation: shoot.meta().generation.unwrap_or_default(),
        hibernation_wanted: hibernation_wanted(&shoot),
        worker: observed.worker.as_ref(),
        machines: observed.machines,
        nodes: observed.nodes,
        minimum_nodes: observed.minimum_nodes,
        waiting: observed.waiting.as_deref(),
        error: error_text.as_deref(),
        now: Utc::now(),
    });
    write_status(&shoots, &name, shoot.status.as_ref(), &verdict.status).await?;
    if let Some(e) = error {
        return Err(e);
    }
    Ok(Action::requeue(if verdict.done {
        plan::SETTLED_REQUEUE
    } else {
        plan::PROGRESS_REQUEUE
    }))
}

pub fn error_policy(_shoot: Arc<Shoot>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(%error, "shoot reconcile failed");
    Action::requeue(ERROR_REQUEUE)
}

fn hibernation_wanted(shoot: &Shoot) -> bool {
    shoot
        .spec
        .hibernation
        .as_ref()
        .and_then(|h| h.enabled)
        .unwrap_or(false)
}

/// What a successful deploy pass saw afterwards, for the status.
#[derive(Default)]
struct Observed {
    worker: Option<WorkerObservation>,
    machines: usize,
    nodes: Option<NodeCounts>,
    minimum_nodes: i32,
    /// What the pass stopped to wait for (etcd-main).
    waiting: Option<String>,
}

/// Where the shoot's API server keeps its objects: its own store, or its
/// etcd-main once that serves (`Err` with what to wait for until then).
async fn shoot_store(
    ctx: &Context,
    id: &str,
    shoot: &Shoot,
    raw: &Value,
) -> Result<Result<ShootStore, String>, Error> {
    let Some(config) = &ctx.config.etcd_main else {
        return Ok(Ok(ShootStore::Own));
    };
    let uid = shoot.meta().uid.clone().unwrap_or_default();
    let desired = etcd_main::desired(id, &uid, etcd_main::high_availability(raw), config);
    Ok(
        match etcd_main::ensure(&ctx.seed, &desired)
            .await
            .map_err(api_err(format!("{}/{}", id, etcd_main::NAME)))?
        {
            Readiness::Ready { endpoint } => Ok(ShootStore::Etcd { endpoint }),
            Readiness::Waiting(why) => Err(why),
        },
    )
}

/// Writes the status when it differs; `lastErrors` is cleared explicitly
/// (a merge patch would keep the old list).
async fn write_status(
    shoots: &Api<Shoot>,
    name: &str,
    previous: Option<&ShootStatus>,
    status: &ShootStatus,
) -> Result<(), Error> {
    if previous == Some(status) {
        return Ok(());
    }
    let mut value = serde_json::to_value(status).map_err(|_| Error::Encode("status"))?;
    if let Some(obj) = value.as_object_mut() {
        obj.entry("lastErrors").or_insert(Value::Null);
        // Written by gardener-controller-manager's maintenance and
        // hibernation controllers: left out, so a stale copy from the
        // cache never overwrites a newer value.
        obj.remove("lastMaintenance");
        obj.remove("lastHibernationTriggerTime");
    }
    shoots
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": value })),
        )
        .await
        .map_err(api_err(format!("the status of shoot {name}")))?;
    Ok(())
}

/// Loads the Shoot's profile: the CloudProfile, or the NCP in the Shoot's
/// namespace (or the one named).
async fn load_profile(
    ctx: &Context,
    shoot: &Shoot,
    namespace: &str,
) -> Result<(Value, gardener::CloudProfileSpec), Error> {
    let reference = gardener::shoot_admission::profile_reference(&shoot.spec)
        .ok_or_else(|| Error::ProfileUnavailable("the shoot names no cloud profile".into()))?;
    if reference.is_namespaced() {
        let ns = reference.namespace.as_deref().unwrap_or(namespace);
        let ncp = Api::<NamespacedCloudProfile>::namespaced(ctx.seed.clone(), ns)
            .get(&reference.name)
            .await
            .map_err(|e| Error::ProfileUnavailable(format!("{}: {e}", reference.name)))?;
        build::effective_profile(ProfileSource::Namespaced(&ncp))
            .map_err(|e| Error::ProfileUnavailable(e.to_string()))
    } else {
        let cp = Api::<CloudProfile>::all(ctx.seed.clone())
            .get(&reference.name)
            .await
            .map_err(|e| Error::ProfileUnavailable(format!("{}: {e}", reference.name)))?;
        build::effective_profile(ProfileSource::Cluster(&cp))
            .map_err(|e| Error::ProfileUnavailable(e.to_string()))
    }
}

/// The Shoot as stored, with fields the typed Shoot drops.
async fn raw_shoot(ctx: &Context, namespace: &str, name: &str) -> Result<Value, Error> {
    let ar = ApiResource::erase::<Shoot>(&());
    let obj: DynamicObject = Api::namespaced_with(ctx.seed.clone(), namespace, &ar)
        .get(name)
        .await
        .map_err(api_err(format!("shoot {namespace}/{name}")))?;
    serde_json::to_value(&obj).map_err(|_| Error::Encode("shoot"))
}

/// Creates `obj` or replaces the stored one when `differs` says so.
async fn create_or_replace<K>(
    api: &Api<K>,
    name: &str,
    mut obj: K,
    differs: impl Fn(&K, &K) -> bool,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await? {
        None => {
            api.create(&PostParams::default(), &obj).await?;
        }
        Some(existing) if differs(&existing, &obj) => {
            obj.meta_mut().resource_version = existing.meta().resource_version.clone();
            obj.meta_mut().uid = existing.meta().uid.clone();
            api.replace(name, &PostParams::default(), &obj).await?;
        }
        Some(_) => {}
    }
    Ok(())
}

fn secret_differs(a: &Secret, b: &Secret) -> bool {
    a.data != b.data || a.metadata.labels != b.metadata.labels
}

/// The reconcile flow: namespace, shoot API, secrets, Cluster, user data,
/// Worker; then what the status needs.
async fn deploy(
    shoot: &Shoot,
    namespace: &str,
    id: &str,
    ctx: &Context,
) -> Result<Observed, Error> {
    let name = shoot.name_any();
    let now = Utc::now();
    let (profile_object, profile) = load_profile(ctx, shoot, namespace).await?;
    let spec = build::defaulted_spec(&shoot.spec, &profile, now)
        .map_err(|e| Error::BuildFailed(e.to_string()))?;
    let raw = raw_shoot(ctx, namespace, &name).await?;
    let embedded = build::embedded_shoot(&raw, id);
    let facts = ShootFacts::from_shoot(&embedded);

    let namespaces: Api<Namespace> = Api::all(ctx.seed.clone());
    if namespaces
        .get_opt(id)
        .await
        .map_err(api_err(format!("namespace {id}")))?
        .is_none()
    {
        namespaces
            .create(
                &PostParams::default(),
                &build::namespace(id, namespace, &name),
            )
            .await
            .map_err(api_err(format!("namespace {id}")))?;
    }

    // Before the shoot's controllers start, so they find it and follow
    // its scale from the start.
    // Waking up brings back the controllers hibernation stopped; a shoot
    // that is hibernated stays without them.
    let asleep = hibernation_wanted(shoot) && shoot.status.as_ref().is_some_and(|s| s.hibernated);
    ensure_mcm_deployment(ctx, id, asleep).await?;

    // A hibernated shoot on etcd-main has neither API server nor etcd
    // members; they come back when it wakes up.
    if ctx.config.etcd_main.is_some()
        && hibernation_wanted(shoot)
        && etcd_main::hibernated(&ctx.seed, id)
            .await
            .map_err(api_err(format!("{id}/{}", etcd_main::NAME)))?
    {
        ctx.clusters.stop(id).await;
        kube_apiserver::apply(&ctx.seed, id, 0)
            .await
            .map_err(api_err(format!("{id}/{}", kube_apiserver::NAME)))?;
        ensure_mcm_deployment(ctx, id, true).await?;
        let worker = Api::<Worker>::namespaced(ctx.seed.clone(), id)
            .get_opt(id)
            .await
            .map_err(api_err(format!("worker {id}")))?;
        return Ok(Observed {
            worker: worker.as_ref().map(observe_worker),
            machines: count_machines(ctx, id).await?,
            ..Observed::default()
        });
    }
    // The shoot's API server starts once its store serves; a running one
    // rides out an etcd-main that is restoring.
    let store = match shoot_store(ctx, id, shoot, &raw).await? {
        Ok(store) => {
            if ctx.config.etcd_main.is_some() {
                kube_apiserver::apply(&ctx.seed, id, 1)
                    .await
                    .map_err(api_err(format!("{id}/{}", kube_apiserver::NAME)))?;
            }
            store
        }
        Err(_) if ctx.clusters.get(id).await.is_some() => ShootStore::Own,
        Err(why) => {
            return Ok(Observed {
                waiting: Some(why),
                ..Observed::default()
            });
        }
    };
    let cluster = ctx
        .clusters
        .ensure(id, &store)
        .await
        .map_err(|e| Error::ShootClusterFailed(e.to_string()))?;
    let secrets: Api<Secret> = Api::namespaced(ctx.seed.clone(), id);
    create_or_replace(
        &secrets,
        build::KUBECONFIG_SECRET,
        build::kubeconfig_secret(id, cluster.kubeconfig()),
        secret_differs,
    )
    .await
    .map_err(api_err("the kubeconfig secret"))?;
    create_or_replace(
        &secrets,
        build::DWD_PROBE_SECRET,
        build::dwd_probe_secret(id, cluster.kubeconfig()),
        secret_differs,
    )
    .await
    .map_err(api_err("the dependency-watchdog probe secret"))?;
    create_or_replace(
        &secrets,
        build::CLOUDPROVIDER_SECRET,
        build::cloudprovider_secret(id),
        secret_differs,
    )
    .await
    .map_err(api_err("the cloudprovider secret"))?;

    let clusters: Api<Cluster> = Api::all(ctx.seed.clone());
    let existing_cluster = clusters
        .get_opt(id)
        .await
        .map_err(api_err(format!("cluster {id}")))?;
    let trigger = build::cluster_trigger(existing_cluster.as_ref(), &facts);
    let seed = build::seed_stub(&ctx.config.seed_name, &shoot.spec.region);
    let desired_cluster = build::cluster(id, embedded.clone(), seed, profile_object);
    create_or_replace(&clusters, id, desired_cluster, |a, b| a.spec != b.spec)
        .await
        .map_err(api_err(format!("cluster {id}")))?;

    let workers: Api<Worker> = Api::namespaced(ctx.seed.clone(), id);
    let existing_worker = workers
        .get_opt(id)
        .await
        .map_err(api_err(format!("worker {id}")))?;
    let worker_spec = build::worker_spec(&build::WorkerInput {
        spec: &spec,
        raw_shoot: &embedded,
        profile: &profile,
        technical_id: id,
        facts: &facts,
        existing: existing_worker.as_ref().map(|w| &w.spec),
    })
    .map_err(|e| Error::BuildFailed(e.to_string()))?;

    for secret in build::user_data_secrets(id, &worker_spec, cluster.access()) {
        let secret_name = secret.name_any();
        create_or_replace(&secrets, &secret_name, secret, secret_differs)
            .await
            .map_err(api_err(format!("user-data secret {secret_name}")))?;
    }
    let purpose = format!("{}={}", worker::labels::PURPOSE, build::PURPOSE_USER_DATA);
    let existing_user_data: Vec<String> = secrets
        .list_metadata(&ListParams::default().labels(&purpose))
        .await
        .map_err(api_err("the user-data secrets"))?
        .items
        .iter()
        .map(|s| s.name_any())
        .collect();
    for stale in build::stale_user_data_secrets(&existing_user_data, &worker_spec) {
        delete_ignoring_absent(&secrets, &stale)
            .await
            .map_err(api_err(format!("user-data secret {stale}")))?;
    }

    let minimum_nodes = build::minimum_nodes(&worker_spec);
    let written =
        match build::worker_update(existing_worker.as_ref(), id, worker_spec, trigger, now) {
            Some(w) if existing_worker.is_some() => workers
                .replace(id, &PostParams::default(), &w)
                .await
                .map_err(api_err(format!("worker {id}")))?,
            Some(w) => workers
                .create(&PostParams::default(), &w)
                .await
                .map_err(api_err(format!("worker {id}")))?,
            None => existing_worker.unwrap_or_default(),
        };

    let machines = count_machines(ctx, id).await?;
    let worker = observe_worker(&written);
    let nodes = count_nodes(&cluster).await;
    let hibernated = hibernation_wanted(shoot) && machines == 0 && worker.reconciled();
    if hibernated {
        // Every machine is gone: no machine controllers while hibernated.
        ensure_mcm_deployment(ctx, id, true).await?;
    }
    if ctx.config.etcd_main.is_some() && hibernated {
        // Every machine is gone: the API server stops, then etcd-main
        // goes to 0 after druid's last full snapshot (Gardener's order).
        ctx.clusters.stop(id).await;
        kube_apiserver::apply(&ctx.seed, id, 0)
            .await
            .map_err(api_err(format!("{id}/{}", kube_apiserver::NAME)))?;
        etcd_main::hibernate(&ctx.seed, id)
            .await
            .map_err(api_err(format!("{id}/{}", etcd_main::NAME)))?;
    }
    Ok(Observed {
        worker: Some(worker),
        machines,
        nodes,
        minimum_nodes,
        waiting: None,
    })
}

async fn count_machines(ctx: &Context, id: &str) -> Result<usize, Error> {
    Ok(Api::<Machine>::namespaced(ctx.seed.clone(), id)
        .list_metadata(&ListParams::default())
        .await
        .map_err(api_err("machines"))?
        .items
        .len())
}

/// Creates the `machine-controller-manager` Deployment, or brings what
/// gardenlet owns of it up to date; its scale is never touched (see
/// [`mcm_deployment`]).
async fn ensure_mcm_deployment(ctx: &Context, id: &str, hibernated: bool) -> Result<(), Error> {
    let api: Api<Deployment> = Api::namespaced(ctx.seed.clone(), id);
    let what = || format!("deployment {id}/{}", mcm_deployment::NAME);
    let desired = mcm_deployment::deployment_for(id, ctx.config.mcm_mode);
    if ctx.config.mcm_mode == mcm_deployment::Mode::Pod {
        let params = PatchParams::apply("gardenlet").force();
        for obj in mcm_deployment::pod_objects(id) {
            let kind = obj["kind"].as_str().unwrap_or_default().to_string();
            // druid's table of these kinds' API resources.
            let api = druid::controllers::dynamic(&ctx.seed, id, &kind);
            api.patch(mcm_deployment::NAME, &params, &Patch::Apply(&obj))
                .await
                .map_err(api_err(format!("{kind} {id}/{}", mcm_deployment::NAME)))?;
        }
    }
    match api
        .get_opt(mcm_deployment::NAME)
        .await
        .map_err(api_err(what()))?
    {
        None => {
            api.create(&PostParams::default(), &desired)
                .await
                .map_err(api_err(what()))?;
        }
        Some(existing) => {
            if let Some(d) = mcm_deployment::update(&existing, desired) {
                api.replace(mcm_deployment::NAME, &PostParams::default(), &d)
                    .await
                    .map_err(api_err(what()))?;
            }
            if let Some(patch) = mcm_deployment::hibernation_patch(&existing, hibernated) {
                api.patch(
                    mcm_deployment::NAME,
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
                .map_err(api_err(what()))?;
            }
        }
    }
    Ok(())
}

fn observe_worker(w: &Worker) -> WorkerObservation {
    let annotations = w.annotations();
    let op = w.status.as_ref().and_then(|s| s.last_operation.as_ref());
    let parse = |s: &str| {
        chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    WorkerObservation {
        generation: w.metadata.generation.unwrap_or_default(),
        observed_generation: w
            .status
            .as_ref()
            .map(|s| s.observed_generation)
            .unwrap_or_default(),
        last_operation_state: op.map(|o| o.state.clone()),
        last_operation_description: op.map(|o| o.description.clone()).unwrap_or_default(),
        last_operation_time: op.and_then(|o| o.last_update_time).map(|t| t.0),
        operation_annotation: annotations.contains_key(build::OPERATION_ANNOTATION),
        requested_at: annotations
            .get(build::TIMESTAMP_ANNOTATION)
            .and_then(|t| parse(t)),
    }
}

async fn count_nodes(cluster: &ShootCluster) -> Option<NodeCounts> {
    let nodes: Api<Node> = Api::all(cluster.client());
    let list = tokio::time::timeout(SHOOT_API_TIMEOUT, nodes.list(&ListParams::default()))
        .await
        .ok()?
        .ok()?;
    let ready = list
        .items
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    Some(NodeCounts {
        total: list.items.len(),
        ready,
    })
}

async fn delete_ignoring_absent<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The deletion flow (see [`plan::deletion_plan`]).
async fn delete(shoot: &Shoot, namespace: &str, id: &str, ctx: &Context) -> Result<Action, Error> {
    let name = shoot.name_any();
    let observation = observe_deletion(shoot, id, ctx).await?;
    let deletion = plan::deletion_plan(&observation);
    let shoots: Api<Shoot> = Api::namespaced(ctx.seed.clone(), namespace);
    if deletion.waiting_for.is_some() || !deletion.actions.is_empty() {
        let previous = shoot.status.clone().unwrap_or_default();
        let mut status = previous.clone();
        status.last_operation = Some(plan::deletion_operation(
            previous.last_operation.as_ref(),
            &deletion,
            Utc::now(),
        ));
        status.technical_id = id.to_string();
        if deletion.waiting_for.is_some() {
            write_status(&shoots, &name, shoot.status.as_ref(), &status).await?;
        }
    }
    if observation.shoot_cluster_running
        || deletion
            .actions
            .contains(&DeletionAction::StartShootCluster)
    {
        release_meltdown_hold(shoot, id, ctx).await?;
    }
    let workers: Api<Worker> = Api::namespaced(ctx.seed.clone(), id);
    for action in &deletion.actions {
        match action {
            DeletionAction::StartShootCluster => {
                let raw = raw_shoot(ctx, namespace, &name).await?;
                let store = shoot_store(ctx, id, shoot, &raw)
                    .await?
                    .map_err(Error::ShootClusterFailed)?;
                ctx.clusters
                    .ensure(id, &store)
                    .await
                    .map_err(|e| Error::ShootClusterFailed(e.to_string()))?;
            }
            DeletionAction::DeleteWorker => delete_ignoring_absent(&workers, id)
                .await
                .map_err(api_err(format!("worker {id}")))?,
            DeletionAction::DeleteMachineObjects => delete_machine_objects(ctx, id).await?,
            DeletionAction::DeleteOrphanVms => delete_orphan_vms(ctx, id).await?,
            DeletionAction::StopShootCluster => ctx.clusters.stop(id).await,
            DeletionAction::DeleteCluster => {
                if let Some(config) = &ctx.config.etcd_main {
                    let uid = shoot.meta().uid.clone().unwrap_or_default();
                    etcd_main::delete(&ctx.seed, id, &uid, config)
                        .await
                        .map_err(api_err(format!("{id}/{}", etcd_main::NAME)))?;
                }
                delete_ignoring_absent(&Api::<Cluster>::all(ctx.seed.clone()), id)
                    .await
                    .map_err(api_err(format!("cluster {id}")))?
            }
            DeletionAction::DeleteNamespace => {
                delete_ignoring_absent(&Api::<Namespace>::all(ctx.seed.clone()), id)
                    .await
                    .map_err(api_err(format!("namespace {id}")))?
            }
            DeletionAction::RemoveDataDir => ctx
                .clusters
                .remove_data(id)
                .map_err(|e| Error::ShootClusterFailed(e.to_string()))?,
            DeletionAction::RemoveFinalizer => {
                let finalizers: Vec<String> = shoot
                    .finalizers()
                    .iter()
                    .filter(|f| *f != build::FINALIZER)
                    .cloned()
                    .collect();
                match shoots
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(api_err(format!("shoot {namespace}/{name}"))(e)),
                }
                ctx.shoots.lock().remove(id);
                tracing::info!(shoot = %format!("{namespace}/{name}"), "shoot deleted");
            }
        }
    }
    Ok(match deletion.waiting_for {
        Some(_) => Action::requeue(plan::PROGRESS_REQUEUE),
        None => Action::await_change(),
    })
}

/// A deleting shoot needs its machine controllers to drain and remove its
/// machines, whatever dependency-watchdog's prober decided: the Cluster
/// gets the Shoot's deletionTimestamp (so the prober is removed, as upstream
/// where the Cluster mirrors the Shoot) and a Deployment the prober held at
/// 0 is scaled back to 1 without the meltdown annotation.
async fn release_meltdown_hold(shoot: &Shoot, id: &str, ctx: &Context) -> Result<(), Error> {
    let clusters: Api<Cluster> = Api::all(ctx.seed.clone());
    if let Some(c) = clusters
        .get_opt(id)
        .await
        .map_err(api_err(format!("cluster {id}")))?
        && c.spec.shoot["metadata"]["deletionTimestamp"].is_null()
    {
        let timestamp = &shoot.meta().deletion_timestamp;
        clusters
            .patch(
                id,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"shoot": {"metadata": {"deletionTimestamp": timestamp}}}}),
                ),
            )
            .await
            .map_err(api_err(format!("cluster {id}")))?;
    }
    let deployments: Api<Deployment> = Api::namespaced(ctx.seed.clone(), id);
    let held = deployments
        .get_opt(mcm_deployment::NAME)
        .await
        .map_err(api_err(format!("deployment {id}/{}", mcm_deployment::NAME)))?
        .is_some_and(|d| !mcm_deployment::controllers_wanted(Some(&d)));
    if held {
        deployments
            .patch(
                mcm_deployment::NAME,
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "metadata": {"annotations": {
                        mcm_deployment::MELTDOWN_ANNOTATION: null,
                        mcm_deployment::HIBERNATION_ANNOTATION: null,
                    }},
                    "spec": {"replicas": 1}
                })),
            )
            .await
            .map_err(api_err(format!("deployment {id}/{}", mcm_deployment::NAME)))?;
        tracing::info!(
            shoot = id,
            "machine-controller-manager scaled back to 1 for the deletion"
        );
    }
    Ok(())
}

async fn observe_deletion(
    shoot: &Shoot,
    id: &str,
    ctx: &Context,
) -> Result<DeletionObservation, Error> {
    let seed = &ctx.seed;
    let worker = Api::<Worker>::namespaced(seed.clone(), id)
        .get_opt(id)
        .await
        .map_err(api_err(format!("worker {id}")))?
        .map(|w| w.metadata.deletion_timestamp.is_some());
    let lp = ListParams::default();
    let mds = Api::<MachineDeployment>::namespaced(seed.clone(), id)
        .list_metadata(&lp)
        .await
        .map_err(api_err("machine deployments"))?
        .items
        .len();
    let sets = Api::<MachineSet>::namespaced(seed.clone(), id)
        .list_metadata(&lp)
        .await
        .map_err(api_err("machine sets"))?
        .items
        .len();
    let machines = Api::<Machine>::namespaced(seed.clone(), id)
        .list_metadata(&lp)
        .await
        .map_err(api_err("machines"))?
        .items
        .len();
    let vms = Api::<ConfigMap>::namespaced(seed.clone(), id)
        .list_metadata(&lp.clone().labels(&vm_selector()))
        .await
        .map_err(api_err("local VM records"))?
        .items
        .len();
    let cluster = Api::<Cluster>::all(seed.clone())
        .get_opt(id)
        .await
        .map_err(api_err(format!("cluster {id}")))?
        .is_some();
    let namespace = Api::<Namespace>::all(seed.clone())
        .get_opt(id)
        .await
        .map_err(api_err(format!("namespace {id}")))?
        .map(|n| n.metadata.deletion_timestamp.is_some());
    Ok(DeletionObservation {
        has_finalizer: shoot.finalizers().iter().any(|f| f == build::FINALIZER),
        worker,
        machine_objects: mds + sets + machines,
        vms,
        shoot_cluster_running: ctx.clusters.get(id).await.is_some(),
        cluster,
        namespace,
        data_dir: ctx.clusters.data_dir(id).is_some_and(|d| d.exists()),
    })
}

fn vm_selector() -> String {
    format!("{}=true", provider_local::inventory::LABEL_VM)
}

/// Deletes the machine deployments, sets and machines left in the control
/// namespace; the shoot's machine controllers drain and remove them.
async fn delete_machine_objects(ctx: &Context, id: &str) -> Result<(), Error> {
    let dp = DeleteParams::default();
    let lp = ListParams::default();
    Api::<MachineDeployment>::namespaced(ctx.seed.clone(), id)
        .delete_collection(&dp, &lp)
        .await
        .map_err(api_err("machine deployments"))?;
    Api::<MachineSet>::namespaced(ctx.seed.clone(), id)
        .delete_collection(&dp, &lp)
        .await
        .map_err(api_err("machine sets"))?;
    Api::<Machine>::namespaced(ctx.seed.clone(), id)
        .delete_collection(&dp, &lp)
        .await
        .map_err(api_err("machines"))?;
    Ok(())
}

/// VMs no machine owns: their simulated kubelets stop and their records
/// go. The shoot's API server is about to stop, so their Nodes are left.
async fn delete_orphan_vms(ctx: &Context, id: &str) -> Result<(), Error> {
    let records = Api::<ConfigMap>::namespaced(ctx.seed.clone(), id)
        .list(&ListParams::default().labels(&vm_selector()))
        .await
        .map_err(api_err("local VM records"))?;
    for cm in &records.items {
        delete_ignoring_absent(
            &Api::<ConfigMap>::namespaced(ctx.seed.clone(), id),
            &cm.name_any(),
        )
        .await
        .map_err(api_err("a local VM record"))?;
    }
    Ok(())
}
