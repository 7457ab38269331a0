//! The executor: observes a Worker's namespace through kube-rs, asks
//! `worker::plan` and [`crate::decide`] what to do, and does it. Every
//! write is idempotent (server-side apply, deletes that accept 404, status
//! written only when it changed), so a crash at any line is repaired by the
//! next pass.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use api::{Machine, MachineClass, MachineDeployment, MachineSet};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use worker::status::status_machine_deployments;
use worker::{
    Cluster, ExistingDeployment, ExistingSecret, HealthInput, HealthVerdict, ObservedMachineSet,
    PlanInput, ShootFacts, Worker, cleanup_plan, health,
};

use crate::Config;
use crate::decide::{self, DeletionObservation, Progress, StatusUpdate};
use crate::error::Error;
use crate::profile::{ProfileImages, profile_spec};

/// What every reconcile shares.
pub struct Context {
    /// The API client.
    pub client: kube::Client,
    /// Settings.
    pub config: Config,
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

fn name_of<K: Resource>(obj: &K) -> String {
    obj.meta().name.clone().unwrap_or_default()
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn class_secret_selector() -> ListParams {
    ListParams::default().labels(&format!(
        "{}={}",
        worker::labels::PURPOSE,
        worker::labels::PURPOSE_MACHINE_CLASS
    ))
}

async fn list<K>(api: &Api<K>, params: &ListParams, what: &str) -> Result<Vec<K>, Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    api.list(params)
        .await
        .map(|l| l.items)
        .map_err(|source| Error::ReadFailed {
            what: what.to_string(),
            source: Box::new(source),
        })
}

/// How soon a pass that lost a race against another writer runs again.
const CONFLICT_RETRY: Duration = Duration::from_millis(100);

fn is_conflict(e: &Error) -> bool {
    matches!(e, Error::ApplyFailed { source, .. } if matches!(source.as_ref(), kube::Error::Api(s) if s.code == 409))
}

/// Server-side applies `obj` as this controller's whole intent for it,
/// taking over fields others changed. With `resource_version`, the apply
/// only succeeds if the object is still as observed: a deployment's
/// replicas are planned from the observed count, and the autoscaler may
/// have changed it since.
async fn apply<K>(
    api: &Api<K>,
    obj: &K,
    manager: &str,
    resource_version: Option<&str>,
) -> Result<K, Error>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let name = name_of(obj);
    let what = format!("{} {name}", K::kind(&()));
    let mut body = serde_json::to_value(obj).map_err(|e| Error::ApplyFailed {
        what: what.clone(),
        source: Box::new(kube::Error::SerdeError(e)),
    })?;
    if let Some(o) = body.as_object_mut() {
        o.insert("apiVersion".into(), json!(K::api_version(&())));
        o.insert("kind".into(), json!(K::kind(&())));
        o.remove("status");
    }
    if let Some(rv) = resource_version {
        body["metadata"]["resourceVersion"] = json!(rv);
    }
    api.patch(
        &name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(|source| Error::ApplyFailed {
        what,
        source: Box::new(source),
    })
}

async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(source) => Err(Error::DeleteFailed {
            what: format!("{} {name}", K::kind(&())),
            source: Box::new(source),
        }),
    }
}

async fn label_force_deletion(api: &Api<Machine>, names: &[String]) -> Result<(), Error> {
    let patch = json!({"metadata": {"labels": {decide::FORCE_DELETION_LABEL: api::labels::TRUE}}});
    for name in names {
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(source) => {
                return Err(Error::ApplyFailed {
                    what: format!("force-deletion label of machine {name}"),
                    source: Box::new(source),
                });
            }
        }
    }
    Ok(())
}

/// Adds or removes the finalizer, guarded by the resource version read so a
/// concurrent change is not overwritten.
async fn set_finalizer(api: &Api<Worker>, worker: &Worker, present: bool) -> Result<(), Error> {
    let mut finalizers: Vec<String> = worker.finalizers().to_vec();
    finalizers.retain(|f| f != decide::FINALIZER);
    if present {
        finalizers.push(decide::FINALIZER.to_string());
    }
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": worker.metadata.resource_version,
    }});
    match api
        .patch(
            &name_of(worker),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if !present && is_not_found(&e) => Ok(()),
        Err(source) => Err(Error::FinalizerFailed {
            worker: name_of(worker),
            source: Box::new(source),
        }),
    }
}

/// Writes the status the update leads to, unless it is what is stored.
async fn write_status(
    api: &Api<Worker>,
    worker: &Worker,
    update: &StatusUpdate,
) -> Result<(), Error> {
    let next = decide::next_status(worker.status.as_ref(), update, &now());
    if worker.status.as_ref() == Some(&next) {
        return Ok(());
    }
    api.patch_status(
        &name_of(worker),
        &PatchParams::default(),
        &Patch::Merge(&decide::status_patch(&next)),
    )
    .await
    .map(|_| ())
    .map_err(|source| Error::StatusWriteFailed {
        worker: name_of(worker),
        source: Box::new(source),
    })
}

/// The controller's entry point for one Worker.
pub async fn reconcile(worker: Arc<Worker>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !decide::responsible(&worker) {
        return Ok(Action::await_change());
    }
    let ns = worker.namespace().unwrap_or_default();
    let workers: Api<Worker> = Api::namespaced(ctx.client.clone(), &ns);
    let result = if worker.metadata.deletion_timestamp.is_some() {
        delete_worker(&worker, &ctx, &ns).await
    } else {
        reconcile_worker(&worker, &ctx, &ns).await
    };
    // Gardenlet asks for a reconcile with `gardener.cloud/operation:
    // reconcile` and treats the annotation's removal as "seen"; the status
    // (Processing until the rollout is healthy) says the rest.
    if result.is_ok()
        && worker.metadata.deletion_timestamp.is_none()
        && decide::operation_requested(&worker)
    {
        let patch =
            serde_json::json!({"metadata": {"annotations": {decide::OPERATION_ANNOTATION: null}}});
        workers
            .patch(
                &name_of(worker.as_ref()),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .map_err(|source| Error::ApplyFailed {
                what: "the removal of the operation annotation".to_string(),
                source: Box::new(source),
            })?;
    }
    if let Err(e) = &result
        && e.is_configuration()
    {
        // Report what only a change to the objects can fix on the Worker
        // itself; the error still goes to the error policy for the retry.
        let update = StatusUpdate::progress(
            decide::operation_type(&worker),
            worker.metadata.generation.unwrap_or(0),
            Progress::Failed(e.to_string()),
        );
        if let Err(write) = write_status(&workers, &worker, &update).await {
            tracing::debug!(error = %write, "could not record the error on the worker");
        }
    }
    result
}

/// Retries failed reconciles after the configured delay.
pub fn error_policy(worker: Arc<Worker>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(
        worker = %name_of(worker.as_ref()),
        namespace = %worker.namespace().unwrap_or_default(),
        %error,
        "worker reconcile failed"
    );
    Action::requeue(ctx.config.error_retry)
}

/// Everything a plan needs that is read from the API.
struct Observed {
    cluster: Cluster,
    user_data: BTreeMap<String, Vec<u8>>,
    deployments: Vec<MachineDeployment>,
    classes: Vec<MachineClass>,
    secrets: Vec<Secret>,
}

async fn observe(worker: &Worker, ctx: &Context, ns: &str) -> Result<Observed, Error> {
    let clusters: Api<Cluster> = Api::all(ctx.client.clone());
    let cluster = clusters
        .get_opt(ns)
        .await
        .map_err(|source| Error::ReadFailed {
            what: format!("cluster {ns}"),
            source: Box::new(source),
        })?
        .ok_or_else(|| Error::ClusterMissing(ns.to_string()))?;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let mut user_data = BTreeMap::new();
    for reference in decide::user_data_refs(worker) {
        let secret =
            secrets
                .get_opt(&reference.secret)
                .await
                .map_err(|source| Error::ReadFailed {
                    what: format!("secret {}", reference.secret),
                    source: Box::new(source),
                })?;
        user_data.insert(
            reference.pool.clone(),
            decide::user_data(&reference, secret.as_ref())?,
        );
    }
    let deployments = list(
        &Api::<MachineDeployment>::namespaced(ctx.client.clone(), ns),
        &ListParams::default(),
        "machine deployments",
    )
    .await?;
    let classes = list(
        &Api::<MachineClass>::namespaced(ctx.client.clone(), ns),
        &ListParams::default(),
        "machine classes",
    )
    .await?;
    let class_secrets = list(&secrets, &class_secret_selector(), "machine class secrets").await?;
    Ok(Observed {
        cluster,
        user_data,
        deployments,
        classes,
        secrets: class_secrets,
    })
}

fn plan(
    worker: &Worker,
    ctx: &Context,
    ns: &str,
    observed: &Observed,
) -> Result<(worker::DesiredState, ShootFacts), Error> {
    let shoot = ShootFacts::from_cluster(&observed.cluster);
    let resolver = ProfileImages::from_spec(&profile_spec(&observed.cluster)?)?;
    let technical_id = shoot.technical_id.clone().unwrap_or_else(|| ns.to_string());
    let existing: Vec<ExistingDeployment> = observed
        .deployments
        .iter()
        .map(ExistingDeployment::from)
        .collect();
    let mut input = PlanInput::new(worker, &technical_id, &shoot, &resolver);
    input.namespace = ns;
    input.existing = &existing;
    input.user_data = &observed.user_data;
    input.bounds = ctx.config.update_bounds;
    let desired = worker::plan(&input)?;
    Ok((desired, shoot))
}

async fn reconcile_worker(worker: &Worker, ctx: &Context, ns: &str) -> Result<Action, Error> {
    let client = &ctx.client;
    let manager = ctx.config.field_manager.as_str();
    let workers: Api<Worker> = Api::namespaced(client.clone(), ns);
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), ns);
    let classes: Api<MachineClass> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let machines: Api<Machine> = Api::namespaced(client.clone(), ns);
    let sets: Api<MachineSet> = Api::namespaced(client.clone(), ns);

    // Nothing is created before the finalizer that guarantees its cleanup.
    if !decide::has_finalizer(worker) {
        set_finalizer(&workers, worker, true).await?;
    }
    let observed = observe(worker, ctx, ns).await?;
    let (desired, shoot) = plan(worker, ctx, ns, &observed)?;
    let pre_existing_deployments: BTreeSet<String> =
        observed.deployments.iter().map(name_of).collect();
    let pre_existing_classes: BTreeSet<String> = observed.classes.iter().map(name_of).collect();

    // Step 1: class secrets first (classes point at them), then classes.
    for secret in &desired.class_secrets {
        apply(&secrets, &secret.to_secret(), manager, None).await?;
    }
    for class in &desired.machine_classes {
        apply(&classes, class, manager, None).await?;
    }
    if shoot.hibernated {
        let all = list(&machines, &ListParams::default(), "machines").await?;
        label_force_deletion(&machines, &decide::force_deletion_targets(&all)).await?;
    }

    // Step 2: the deployments, replicas as the planner chose them.
    let mut applied = Vec::with_capacity(desired.machine_deployments.len());
    for md in &desired.machine_deployments {
        let observed_version = observed
            .deployments
            .iter()
            .find(|o| o.metadata.name == md.metadata.name)
            .and_then(|o| o.metadata.resource_version.as_deref());
        match apply(&mds, md, manager, observed_version).await {
            Ok(md) => applied.push(md),
            Err(e) if is_conflict(&e) => return Ok(Action::requeue(CONFLICT_RETRY)),
            Err(e) => return Err(e),
        }
    }

    // Step 4: judge the rollout.
    let machine_sets: Vec<ObservedMachineSet> = list(&sets, &ListParams::default(), "machine sets")
        .await?
        .iter()
        .filter_map(ObservedMachineSet::from_machine_set)
        .collect();
    let verdict = health(&HealthInput {
        hibernated: shoot.hibernated,
        wanted: &desired.wanted,
        observed: &applied,
        machine_sets: &machine_sets,
        pre_existing_deployments: &pre_existing_deployments,
        pre_existing_classes: &pre_existing_classes,
    });

    // Step 6: once the wanted deployments are healthy, remove what is no
    // longer wanted, and report success only when it is gone.
    let mut progress = match &verdict {
        HealthVerdict::Done => Progress::Succeeded,
        HealthVerdict::Waiting(msg) => Progress::Processing(msg.clone()),
        HealthVerdict::Failed(msg) => Progress::Failed(msg.clone()),
    };
    if verdict == HealthVerdict::Done {
        let cleanup = cleanup_plan(
            &desired.wanted,
            &observed.deployments.iter().map(name_of).collect::<Vec<_>>(),
            &observed.classes.iter().map(name_of).collect::<Vec<_>>(),
            &observed
                .secrets
                .iter()
                .map(|s| ExistingSecret {
                    name: name_of(s),
                    labels: s.labels().clone(),
                })
                .collect::<Vec<_>>(),
        );
        for name in &cleanup.machine_deployments {
            delete(&mds, name).await?;
        }
        for name in &cleanup.machine_classes {
            delete(&classes, name).await?;
        }
        for name in &cleanup.secrets {
            delete(&secrets, name).await?;
        }
        if !cleanup.machine_deployments.is_empty() {
            progress = Progress::Processing(format!(
                "Waiting until unwanted machine deployments are deleted ({})...",
                cleanup.machine_deployments.join(", ")
            ));
        }
    }

    let update = StatusUpdate {
        operation: decide::operation_type(worker),
        generation: worker.metadata.generation.unwrap_or(0),
        progress: progress.clone(),
        machine_deployments: Some(status_machine_deployments(&desired.wanted)),
        provider_status: Some(desired.provider_status.to_value()),
        rolling_update: Some(decide::rolling_update(&desired.wanted, &machine_sets)),
        in_place_hashes: Some(decide::in_place_hashes(
            worker,
            &desired.in_place_hashes,
            progress == Progress::Succeeded,
        )),
    };
    write_status(&workers, worker, &update).await?;
    Ok(match progress {
        Progress::Succeeded => Action::requeue(ctx.config.resync),
        Progress::Processing(_) => Action::requeue(ctx.config.wait_interval),
        Progress::Failed(_) => Action::requeue(ctx.config.error_retry),
    })
}

async fn delete_worker(worker: &Worker, ctx: &Context, ns: &str) -> Result<Action, Error> {
    if !decide::has_finalizer(worker) {
        return Ok(Action::await_change());
    }
    let client = &ctx.client;
    let workers: Api<Worker> = Api::namespaced(client.clone(), ns);
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), ns);
    let classes: Api<MachineClass> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let machines: Api<Machine> = Api::namespaced(client.clone(), ns);

    let deployments = list(&mds, &ListParams::default(), "machine deployments").await?;
    let all_machines = list(&machines, &ListParams::default(), "machines").await?;
    let all_classes = list(&classes, &ListParams::default(), "machine classes").await?;
    let class_secrets = list(&secrets, &class_secret_selector(), "machine class secrets").await?;
    let deleting = |m: &ObjectMeta| m.deletion_timestamp.is_some();
    let labelled = decide::force_deletion_targets(&all_machines);
    let obs = DeletionObservation {
        deployments: deployments
            .iter()
            .map(|d| (name_of(d), deleting(&d.metadata)))
            .collect(),
        machines: all_machines
            .iter()
            .map(|m| {
                let name = name_of(m);
                let is_labelled = !labelled.contains(&name);
                (name, deleting(&m.metadata), is_labelled)
            })
            .collect(),
        classes: all_classes
            .iter()
            .map(|c| (name_of(c), deleting(&c.metadata)))
            .collect(),
        secrets: class_secrets
            .iter()
            .map(|s| (name_of(s), deleting(&s.metadata)))
            .collect(),
    };
    let step = decide::deletion_plan(&obs);

    label_force_deletion(&machines, &step.label_machines).await?;
    let zero = json!({"spec": {"replicas": 0}});
    for name in &step.delete_deployments {
        // Scaling to zero first lets machines go even if the deployment is
        // kept by a finalizer for a while.
        match mds
            .patch(name, &PatchParams::default(), &Patch::Merge(&zero))
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(source) => {
                return Err(Error::ApplyFailed {
                    what: format!("replicas of machine deployment {name}"),
                    source: Box::new(source),
                });
            }
        }
        delete(&mds, name).await?;
    }
    for name in &step.delete_classes {
        delete(&classes, name).await?;
    }
    for name in &step.delete_secrets {
        delete(&secrets, name).await?;
    }
    if step.remove_finalizer {
        set_finalizer(&workers, worker, false).await?;
        return Ok(Action::await_change());
    }
    let waiting = step.waiting.unwrap_or_default();
    let update = StatusUpdate::progress(
        "Delete",
        worker.metadata.generation.unwrap_or(0),
        Progress::Processing(waiting),
    );
    write_status(&workers, worker, &update).await?;
    Ok(Action::requeue(ctx.config.wait_interval))
}
