//! etcd-druid's controllers over kube-rs: the etcd controller (spec flow,
//! status flow, deletion), compaction, EtcdCopyBackupsTask and the Secret
//! finalizer. Each reconcile observes through the API, asks a pure planner
//! of this crate what to do and carries it out; every step is idempotent,
//! so a pass cut short anywhere converges on the next.
//!
//! [`run`] starts all four; `trellis up` and tests call it.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::events::{Recorder, Reporter};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::components::{FINALIZER, Settings};
use crate::member::Thresholds;
use crate::types::{Etcd, EtcdCopyBackupsTask, EtcdStatus};

pub mod compaction;
pub mod copy_task;
pub mod etcd;
pub mod secret;
pub mod snapshot;

pub use snapshot::{FullSnapshotTrigger, HttpTrigger, ServiceIpTrigger};

/// The field manager of every apply.
pub const FIELD_MANAGER: &str = "etcd-druid";
/// Retry period after a failed reconcile.
pub const ERROR_REQUEUE: Duration = Duration::from_secs(5);
/// Attempts of a status write that keeps meeting conflicts.
const STATUS_ATTEMPTS: usize = 5;

/// The failures of a reconcile, named after the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("druid.gardener.cloud CRDs are not served: {0}")]
    CrdsMissing(#[source] kube::Error),
    #[error("the pre-sync full snapshot before scaling to 0 failed: {0}")]
    PreSyncSnapshotFailed(String),
    #[error("reading {what}: {source}")]
    ReadFailed {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("applying {kind} {name}: {source}")]
    ApplyFailed {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting {kind} {name}: {source}")]
    DeleteFailed {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("updating the finalizers of {what}: {source}")]
    FinalizerFailed {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing the status of {what}: {source}")]
    StatusWriteFailed {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("removing the operation annotation of {what}: {source}")]
    AnnotationRemovalFailed {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("building {what}: {source}")]
    InvalidObject {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("invalid snapshot lease: {0}")]
    SnapshotLeaseInvalid(String),
}

/// druid's settings (upstream's flags of `etcd-druid`, those that apply).
#[derive(Clone)]
pub struct Options {
    /// Host paths, cluster domain.
    pub settings: Settings,
    /// Watch only this namespace (`None`: all).
    pub namespace: Option<String>,
    /// `enableEtcdSpecAutoReconcile` [false]: apply every spec change
    /// without the operation annotation.
    pub auto_reconcile: bool,
    /// `etcdStatusSyncPeriod` [15 s].
    pub status_sync_period: Duration,
    /// `etcdMember.unknownThreshold` / `notReadyThreshold` [1 m / 5 m].
    pub member_thresholds: Thresholds,
    /// `etcdWorkers` [3].
    pub etcd_workers: u16,
    /// `compaction.enabled` [true].
    pub compaction: bool,
    /// `etcdCopyBackupsTask.enabled` [true].
    pub copy_backups_task: bool,
    /// The Secret finalizer controller [true].
    pub secret: bool,
    /// How the compaction controller asks backup-restore for a full
    /// snapshot ([`HttpTrigger`]; tests put a fake here).
    pub snapshot_trigger: Arc<dyn FullSnapshotTrigger>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            settings: Settings::default(),
            namespace: None,
            auto_reconcile: false,
            status_sync_period: crate::gate::STATUS_SYNC_PERIOD,
            member_thresholds: Thresholds::default(),
            etcd_workers: 3,
            compaction: true,
            copy_backups_task: true,
            secret: true,
            snapshot_trigger: Arc::new(HttpTrigger),
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("settings", &self.settings)
            .field("namespace", &self.namespace)
            .field("auto_reconcile", &self.auto_reconcile)
            .field("status_sync_period", &self.status_sync_period)
            .field("etcd_workers", &self.etcd_workers)
            .field("compaction", &self.compaction)
            .field("copy_backups_task", &self.copy_backups_task)
            .field("secret", &self.secret)
            .finish_non_exhaustive()
    }
}

/// What every reconcile shares.
pub struct Context {
    pub client: kube::Client,
    pub opts: Options,
    pub recorder: Recorder,
}

impl Context {
    pub fn new(client: kube::Client, opts: Options) -> Context {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "etcd-druid".into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        Context {
            client,
            opts,
            recorder,
        }
    }

    /// An API of `K` in the configured namespace, or all namespaces.
    pub fn watch_api<K>(&self) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        match &self.opts.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }
}

/// Runs every enabled controller until `shutdown` resolves (reconciles
/// under way finish first). Fails only if the druid CRDs are not served.
pub async fn run(
    client: kube::Client,
    opts: Options,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    Api::<Etcd>::all(client.clone())
        .list(&ListParams::default().limit(1))
        .await
        .map_err(Error::CrdsMissing)?;
    Api::<EtcdCopyBackupsTask>::all(client.clone())
        .list(&ListParams::default().limit(1))
        .await
        .map_err(Error::CrdsMissing)?;
    let shutdown = shutdown.boxed().shared();
    let ctx = Arc::new(Context::new(client, opts.clone()));
    let mut all = vec![etcd::run(ctx.clone(), shutdown.clone()).boxed()];
    if opts.compaction {
        all.push(compaction::run(ctx.clone(), shutdown.clone()).boxed());
    }
    if opts.copy_backups_task {
        all.push(copy_task::run(ctx.clone(), shutdown.clone()).boxed());
    }
    if opts.secret {
        all.push(secret::run(ctx.clone(), shutdown.clone()).boxed());
    }
    futures::future::join_all(all).await;
    Ok(())
}

/// The API resource of a component kind.
pub fn resource_of(kind: &str) -> ApiResource {
    let (group, version, plural) = match kind {
        "ServiceAccount" => ("", "v1", "serviceaccounts"),
        "Role" => ("rbac.authorization.k8s.io", "v1", "roles"),
        "RoleBinding" => ("rbac.authorization.k8s.io", "v1", "rolebindings"),
        "Lease" => ("coordination.k8s.io", "v1", "leases"),
        "PodDisruptionBudget" => ("policy", "v1", "poddisruptionbudgets"),
        "Service" => ("", "v1", "services"),
        "ConfigMap" => ("", "v1", "configmaps"),
        "StatefulSet" => ("apps", "v1", "statefulsets"),
        "Job" => ("batch", "v1", "jobs"),
        other => ("", "v1", other),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// A dynamic API of `kind` in `ns`.
pub fn dynamic(client: &kube::Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource_of(kind))
}

/// Server-side apply of `obj` (field manager `etcd-druid`, forced: druid
/// owns what it writes), skipped when the object already holds all of it
/// ([`crate::sync::contains`]).
pub async fn apply(client: &kube::Client, ns: &str, obj: &Value) -> Result<(), Error> {
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let api = dynamic(client, ns, &kind);
    let existing = api
        .get_opt(&name)
        .await
        .map_err(|source| Error::ReadFailed {
            what: format!("{kind} {name}"),
            source,
        })?;
    let mut desired = obj.clone();
    if let Some(o) = desired.as_object_mut() {
        // Type metadata is not kept in a dynamic object's fields.
        o.remove("apiVersion");
        o.remove("kind");
    }
    if let Some(existing) = existing
        && crate::sync::contains(
            &serde_json::to_value(&existing).unwrap_or_default(),
            &desired,
        )
    {
        return Ok(());
    }
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .map(|_| ())
    .map_err(|source| Error::ApplyFailed { kind, name, source })
}

/// Deletes `kind/name`; one already gone is fine.
pub async fn delete(
    client: &kube::Client,
    ns: &str,
    kind: &str,
    name: &str,
    dp: &DeleteParams,
) -> Result<(), Error> {
    match dynamic(client, ns, kind).delete(name, dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => Err(Error::DeleteFailed {
            kind: kind.to_string(),
            name: name.to_string(),
            source,
        }),
    }
}

/// Whether `obj` carries druid's finalizer.
pub fn has_finalizer<K: Resource>(obj: &K) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// Adds or removes druid's finalizer. The object is read afresh and the
/// patch carries that resourceVersion, so other writers' finalizers are
/// never lost (a conflict fails the reconcile, which retries).
pub async fn set_finalizer<K>(api: &Api<K>, obj: &K, present: bool) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug,
{
    let name = obj.name_any();
    let failed = |source| Error::FinalizerFailed {
        what: name.clone(),
        source,
    };
    let Some(fresh) = api.get_opt(&name).await.map_err(failed)? else {
        return Ok(());
    };
    if has_finalizer(&fresh) == present {
        return Ok(());
    }
    let mut finalizers: Vec<String> = fresh.meta().finalizers.clone().unwrap_or_default();
    if present {
        finalizers.push(FINALIZER.to_string());
    } else {
        finalizers.retain(|f| f != FINALIZER);
    }
    let patch = json!({"metadata": {
        "resourceVersion": fresh.meta().resource_version,
        "finalizers": finalizers,
    }});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        // Removing from an object already gone is done.
        Err(kube::Error::Api(e)) if e.code == 404 && !present => Ok(()),
        Err(source) => Err(failed(source)),
    }
}

/// Writes the status `update` computes from the latest Etcd, retrying on
/// conflicts with other writers (the compaction controller writes one
/// condition); skips the write when nothing changed.
pub async fn update_etcd_status(
    api: &Api<Etcd>,
    name: &str,
    update: impl Fn(&Etcd) -> EtcdStatus,
) -> Result<(), Error> {
    update_status(
        api,
        name,
        |e: &Etcd| {
            let s = update(e);
            (e.status.as_ref() != Some(&s)).then_some(s)
        },
        |e, s| e.status = Some(s),
    )
    .await
}

/// The read-compute-write loop of any status: `compute` returns `None`
/// when there is nothing to write.
pub async fn update_status<K, S>(
    api: &Api<K>,
    name: &str,
    compute: impl Fn(&K) -> Option<S>,
    set: impl Fn(&mut K, S),
) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + fmt::Debug,
{
    let mut last = None;
    for _ in 0..STATUS_ATTEMPTS {
        let mut obj = match api.get_opt(name).await {
            Ok(Some(o)) => o,
            Ok(None) => return Ok(()),
            Err(source) => {
                return Err(Error::ReadFailed {
                    what: name.to_string(),
                    source,
                });
            }
        };
        let Some(status) = compute(&obj) else {
            return Ok(());
        };
        set(&mut obj, status);
        match api.replace_status(name, &PostParams::default(), &obj).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => last = Some(kube::Error::Api(e)),
            Err(source) => {
                return Err(Error::StatusWriteFailed {
                    what: name.to_string(),
                    source,
                });
            }
        }
    }
    Err(Error::StatusWriteFailed {
        what: name.to_string(),
        source: last.expect("a conflict was recorded"),
    })
}

/// Removes annotations (a merge patch with nulls).
pub async fn remove_annotations<K>(api: &Api<K>, name: &str, keys: &[&str]) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug,
{
    if keys.is_empty() {
        return Ok(());
    }
    let nulls: BTreeMap<&str, Value> = keys.iter().map(|k| (*k, Value::Null)).collect();
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": nulls}})),
    )
    .await
    .map(|_| ())
    .map_err(|source| Error::AnnotationRemovalFailed {
        what: name.to_string(),
        source,
    })
}

/// The Etcd named by an object's controller ownerRef, if any.
pub fn owner_etcd<K: Resource>(obj: &K) -> Option<kube::runtime::reflector::ObjectRef<Etcd>> {
    let ns = obj.meta().namespace.clone()?;
    obj.meta()
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "Etcd")
        .map(|o| kube::runtime::reflector::ObjectRef::new(&o.name).within(&ns))
}
