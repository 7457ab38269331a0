//! The LocalMachine and LocalCluster controllers: pure decisions
//! ([`machine_step`], [`cluster_step`]) and thin executors over kube-rs and
//! the `driver::Driver` of `provider-local`.
//!
//! A LocalMachine's VM is created with the driver's idempotent
//! `CreateMachine` (found again by providerID, else by name), so a crash
//! between creating the VM and writing `spec.providerID` finds the same VM
//! on the next pass. Deleting a LocalMachine deletes its VM before the
//! finalizer goes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use capi::conditions::{self as cond, severity};
use capi::controllers::informer::{Sink, Triggers, informer};
use capi::types::common::{ApiEndpoint, MachineAddress};
use capi::types::labels;
use capi::{Cluster, Machine};
use chrono::Utc;
use driver::{
    Call, Code, CreateMachineRequest, DeleteMachineRequest, Driver, GetMachineStatusRequest,
};
use futures::StreamExt;
use futures::future::{BoxFuture, Shared};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, controller, watcher};
use serde_json::{Value, json};

use crate::boot::{self, Boot};
use crate::types::{LocalCluster, LocalMachine, LocalMachineStatus};

/// Finalizers (CAPD's spelling for its kinds).
pub const LOCAL_MACHINE_FINALIZER: &str = "localmachine.infrastructure.cluster.x-k8s.io";
pub const LOCAL_CLUSTER_FINALIZER: &str = "localcluster.infrastructure.cluster.x-k8s.io";

/// Conditions of a LocalMachine besides `Ready` (CAPD's names, with "VM"
/// for "Container").
pub const VM_PROVISIONED: &str = "VMProvisioned";
pub const BOOTSTRAP_EXEC_SUCCEEDED: &str = "BootstrapExecSucceeded";
pub const WAITING_FOR_CLUSTER_INFRASTRUCTURE: &str = "WaitingForClusterInfrastructure";
pub const WAITING_FOR_BOOTSTRAP_DATA: &str = "WaitingForBootstrapData";
pub const BOOTSTRAP_FAILED: &str = "BootstrapFailed";
pub const VM_PROVISIONING_FAILED: &str = "VMProvisioningFailed";

/// How soon a failed boot or VM creation is tried again.
pub const RETRY: Duration = Duration::from_secs(5);
/// How often a ready VM is checked for still existing.
pub const RESYNC: Duration = Duration::from_secs(5 * 60);

/// Settings of the infrastructure provider.
#[derive(Clone, Debug)]
pub struct Config {
    /// The workload cluster's API endpoint, written into LocalClusters
    /// that name none.
    pub endpoint: Option<ApiEndpoint>,
    /// LocalMachines and LocalClusters reconciled at once.
    pub concurrency: u16,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            endpoint: None,
            concurrency: 50,
        }
    }
}

/// What one reconcile of a LocalMachine does.
#[derive(Clone, Debug, PartialEq)]
pub enum MachineStep {
    /// No Machine owns it yet, or its Cluster is paused: nothing.
    Idle,
    /// Wait, with the condition saying why (reason, message).
    Wait(&'static str, String),
    /// The VM runs; check now and then that it still does.
    Running,
    /// Boot the VM with the data in this Secret.
    Boot { data_secret: String },
}

/// Decides one reconcile of a live LocalMachine.
pub fn machine_step(
    lm: &LocalMachine,
    machine: Option<&Machine>,
    cluster: Option<&Cluster>,
) -> MachineStep {
    let Some(machine) = machine else {
        return MachineStep::Idle;
    };
    let Some(cluster) = cluster else {
        return MachineStep::Wait(
            WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            format!("Cluster {:?} does not exist", machine.spec.cluster_name),
        );
    };
    if cluster.spec.paused || capi::meta::annotation(&lm.metadata, labels::PAUSED).is_some() {
        return MachineStep::Idle;
    }
    let ready = lm.status.as_ref().is_some_and(|s| s.ready);
    if ready && lm.spec.provider_id.is_some() {
        return MachineStep::Running;
    }
    if !cluster
        .status
        .as_ref()
        .is_some_and(|s| s.infrastructure_ready)
    {
        return MachineStep::Wait(
            WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            format!(
                "Waiting for Cluster {:?} infrastructure to be ready",
                cluster.name()
            ),
        );
    }
    match machine
        .spec
        .bootstrap
        .data_secret_name
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        None => MachineStep::Wait(
            WAITING_FOR_BOOTSTRAP_DATA,
            format!(
                "Waiting for Machine {:?} to have spec.bootstrap.dataSecretName",
                machine.name()
            ),
        ),
        Some(s) => MachineStep::Boot {
            data_secret: s.to_string(),
        },
    }
}

/// What one reconcile of a LocalCluster does: the endpoint to write, if
/// any; `None` when it is waiting for its Cluster.
pub fn cluster_step(
    lc: &LocalCluster,
    owned: bool,
    endpoint: Option<&ApiEndpoint>,
) -> Option<Option<ApiEndpoint>> {
    if !owned {
        return None;
    }
    if lc.spec.control_plane_endpoint.is_valid() {
        return Some(None);
    }
    Some(endpoint.cloned())
}

/// The VM name of a LocalMachine: its owner Machine's (the node registers
/// under it), else its own.
fn vm_name(lm: &LocalMachine) -> String {
    capi::meta::controller_of(&lm.metadata)
        .filter(|o| o.kind == "Machine")
        .map(|o| o.name.clone())
        .or_else(|| lm.metadata.name.clone())
        .unwrap_or_default()
}

/// The cluster tag of a Cluster's VMs, so the local provider lists them
/// apart from MCM's and other clusters'.
pub fn cluster_tag(namespace: &str, cluster: &str) -> String {
    format!("kubernetes.io/cluster/capi--{namespace}--{cluster}")
}

/// The local provider's view of a LocalMachine: a machine with the boot's
/// labels and taints as node template, and a class with the spec.
fn driver_objects(
    lm: &LocalMachine,
    cluster: &str,
    zone: Option<&str>,
    boot: Option<&Boot>,
) -> (api::Machine, api::MachineClass) {
    let ns = lm.metadata.namespace.clone().unwrap_or_default();
    let name = boot
        .and_then(|b| b.hostname.clone())
        .unwrap_or_else(|| vm_name(lm));
    let machine: api::Machine = serde_json::from_value(json!({
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "providerID": lm.spec.provider_id.clone().unwrap_or_default(),
            "nodeTemplate": {
                "metadata": {"labels": boot.map(|b| b.labels.clone()).unwrap_or_default()},
                "spec": {"taints": boot.map(|b| b.taints.clone()).unwrap_or_default()},
            },
        },
    }))
    .unwrap_or_default();
    let mut spec = json!({"tags": {cluster_tag(&ns, cluster): "1"}});
    if let Some(d) = &lm.spec.boot_delay {
        spec["bootDelay"] = json!(d);
    }
    if let Some(z) = zone {
        spec["zone"] = json!(z);
    }
    let mut class = api::MachineClass::new(
        lm.metadata.name.as_deref().unwrap_or_default(),
        provider_local::PROVIDER_NAME,
        spec,
    );
    class.metadata.namespace = Some(ns);
    if !lm.spec.capacity.is_empty() || lm.spec.instance_type.is_some() {
        class.node_template = Some(api::NodeTemplate {
            capacity: lm.spec.capacity.clone(),
            instance_type: lm.spec.instance_type.clone().unwrap_or_default(),
            ..api::NodeTemplate::default()
        });
    }
    (machine, class)
}

struct Ctx {
    client: kube::Client,
    target: kube::Client,
    driver: Arc<dyn Driver>,
    machines: Store<Machine>,
    clusters: Store<Cluster>,
    config: Config,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what} failed: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting the VM failed: {0}")]
    DriverDeleteFailed(String),
    /// A cache the controllers need never filled (from [`run`]).
    #[error(transparent)]
    WatchFailed(#[from] capi::controllers::informer::WatchFailed),
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Api { what, source }
}

fn owner<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    kind: &str,
) -> Option<&'a str> {
    capi::meta::controller_of(meta)
        .filter(|o| o.kind == kind && capi::meta::group_of(&o.api_version) == capi::GROUP)
        .map(|o| o.name.as_str())
}

fn has_finalizer(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    f: &str,
) -> bool {
    meta.finalizers.iter().flatten().any(|x| x == f)
}

async fn set_finalizers<K>(
    api: &Api<K>,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    f: Vec<String>,
) -> Result<(), Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = meta.name.clone().unwrap_or_default();
    match api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": f, "resourceVersion": meta.resource_version}}),
            ),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(api_err("updating finalizers")(e)),
    }
}

fn empty_secret() -> Secret {
    Secret::default()
}

async fn reconcile_machine(lm: Arc<LocalMachine>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = lm.metadata.namespace.clone().unwrap_or_default();
    let name = lm.metadata.name.clone().unwrap_or_default();
    let api: Api<LocalMachine> = Api::namespaced(ctx.client.clone(), &ns);
    let machine = owner(&lm.metadata, "Machine")
        .and_then(|m| ctx.machines.get(&ObjectRef::new(m).within(&ns)));
    let cluster_name = machine
        .as_ref()
        .map(|m| m.spec.cluster_name.clone())
        .or_else(|| capi::meta::label(&lm.metadata, labels::CLUSTER_NAME).map(str::to_string))
        .unwrap_or_default();
    if lm.metadata.deletion_timestamp.is_some() {
        if has_finalizer(&lm.metadata, LOCAL_MACHINE_FINALIZER) {
            let (vm, class) = driver_objects(&lm, &cluster_name, None, None);
            let secret = empty_secret();
            // Idempotent: a VM that never existed (or is gone) is success.
            match ctx
                .driver
                .delete_machine(DeleteMachineRequest {
                    machine: &vm,
                    machine_class: &class,
                    secret: &secret,
                })
                .await
            {
                Ok(_) => {}
                Err(e) if e.code == Code::NotFound => {}
                Err(e) => return Err(Error::DriverDeleteFailed(e.to_string())),
            }
            let f = lm
                .metadata
                .finalizers
                .iter()
                .flatten()
                .filter(|f| *f != LOCAL_MACHINE_FINALIZER)
                .cloned()
                .collect();
            set_finalizers(&api, &lm.metadata, f).await?;
        }
        return Ok(Action::await_change());
    }
    if !has_finalizer(&lm.metadata, LOCAL_MACHINE_FINALIZER) {
        let mut f = lm.metadata.finalizers.clone().unwrap_or_default();
        f.push(LOCAL_MACHINE_FINALIZER.into());
        set_finalizers(&api, &lm.metadata, f).await?;
        return Ok(Action::await_change());
    }
    let cluster = machine.as_ref().and_then(|m| {
        ctx.clusters
            .get(&ObjectRef::new(&m.spec.cluster_name).within(&ns))
    });
    let now = Utc::now();
    let mut status = lm.status.clone().unwrap_or_default();
    let mut spec_patch: Option<Value> = None;
    let zone = machine.as_ref().and_then(|m| m.spec.failure_domain.clone());
    let requeue = match machine_step(&lm, machine.as_deref(), cluster.as_deref()) {
        MachineStep::Idle => return Ok(Action::await_change()),
        MachineStep::Wait(reason, message) => {
            waiting(
                &mut status,
                VM_PROVISIONED,
                reason,
                severity::INFO,
                message,
                now,
            );
            None
        }
        MachineStep::Running => {
            let (vm, class) = driver_objects(&lm, &cluster_name, zone.as_deref(), None);
            let secret = empty_secret();
            match ctx
                .driver
                .get_machine_status(GetMachineStatusRequest {
                    machine: &vm,
                    machine_class: &class,
                    secret: &secret,
                })
                .await
            {
                Err(e) if e.code == Code::NotFound => {
                    // A server that vanished needs a person (or a health
                    // check's remediation): terminal, as upstream's
                    // providers report it.
                    status.failure_reason = Some("UpdateError".into());
                    status.failure_message = Some(format!(
                        "the VM {} no longer exists",
                        lm.spec.provider_id.as_deref().unwrap_or_default()
                    ));
                    waiting(
                        &mut status,
                        VM_PROVISIONED,
                        "VMDeleted",
                        severity::ERROR,
                        "The VM no longer exists".into(),
                        now,
                    );
                }
                _ => {}
            }
            Some(RESYNC)
        }
        MachineStep::Boot { data_secret } => {
            boot_vm(
                &ctx,
                &lm,
                &ns,
                &cluster_name,
                zone.as_deref(),
                &data_secret,
                &mut status,
                &mut spec_patch,
            )
            .await?
        }
    };
    if let Some(patch) = &spec_patch {
        api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(api_err("writing spec.providerID"))?;
    }
    let ready_c = if status.ready {
        cond::true_(labels::conditions::READY)
    } else {
        cond::summary(
            &status.conditions,
            &[VM_PROVISIONED, BOOTSTRAP_EXEC_SUCCEEDED],
        )
    };
    cond::set(&mut status.conditions, ready_c, now);
    let old = serde_json::to_value(lm.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
    let new = serde_json::to_value(&status).unwrap_or(Value::Null);
    if let Some(diff) = apimachinery::patch::merge_patch_diff(&old, &new) {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": diff})),
        )
        .await
        .map_err(api_err("writing the LocalMachine status"))?;
    }
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

fn waiting(
    status: &mut LocalMachineStatus,
    type_: &str,
    reason: &str,
    sev: &str,
    message: String,
    now: chrono::DateTime<Utc>,
) {
    cond::set(
        &mut status.conditions,
        cond::false_(type_, reason, sev, message),
        now,
    );
}

/// Reads the data, lets the kubelet authenticate, and creates the VM.
#[allow(clippy::too_many_arguments)]
async fn boot_vm(
    ctx: &Ctx,
    lm: &LocalMachine,
    ns: &str,
    cluster: &str,
    zone: Option<&str>,
    data_secret: &str,
    status: &mut LocalMachineStatus,
    spec_patch: &mut Option<Value>,
) -> Result<Option<Duration>, Error> {
    let now = Utc::now();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let Some(secret) = secrets
        .get_opt(data_secret)
        .await
        .map_err(api_err("reading the bootstrap data"))?
    else {
        waiting(
            status,
            VM_PROVISIONED,
            WAITING_FOR_BOOTSTRAP_DATA,
            severity::INFO,
            format!("Waiting for Secret {data_secret:?}"),
            now,
        );
        return Ok(Some(RETRY));
    };
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get("value"))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .unwrap_or_default();
    let boot = match boot::parse(&data) {
        Ok(b) => b,
        Err(why) => {
            waiting(
                status,
                BOOTSTRAP_EXEC_SUCCEEDED,
                BOOTSTRAP_FAILED,
                severity::WARNING,
                why,
                now,
            );
            return Ok(Some(RETRY));
        }
    };
    // The kubelet joins with the data's token: it must be valid in the
    // workload cluster, or the node never registers.
    let token = boot.token.clone().unwrap_or_default();
    let token_secret = match boot::token_secret_name(&token) {
        Some(n) => {
            Api::<Secret>::namespaced(ctx.target.clone(), mcm::machine::BOOTSTRAP_TOKEN_NAMESPACE)
                .get_opt(&n)
                .await
                .map_err(api_err("reading the bootstrap token"))?
        }
        None => None,
    };
    if let Err(why) = boot::token_valid(token_secret.as_ref(), &token, now) {
        waiting(
            status,
            BOOTSTRAP_EXEC_SUCCEEDED,
            BOOTSTRAP_FAILED,
            severity::WARNING,
            format!("The kubelet cannot join: {why}"),
            now,
        );
        return Ok(Some(RETRY));
    }
    cond::set(
        &mut status.conditions,
        cond::true_(BOOTSTRAP_EXEC_SUCCEEDED),
        now,
    );
    let (vm, class) = driver_objects(lm, cluster, zone, Some(&boot));
    let user_data = Secret {
        data: Some(BTreeMap::from([(
            "userData".to_string(),
            ByteString(data.into_bytes()),
        )])),
        ..Secret::default()
    };
    match ctx
        .driver
        .create_machine(CreateMachineRequest {
            machine: &vm,
            machine_class: &class,
            secret: &user_data,
        })
        .await
    {
        Ok(vm) => {
            if lm.spec.provider_id.as_deref() != Some(vm.provider_id.as_str()) {
                *spec_patch = Some(json!({"spec": {"providerID": vm.provider_id}}));
            }
            status.addresses = vm
                .addresses
                .iter()
                .map(|a| MachineAddress {
                    type_: a.type_.clone(),
                    address: a.address.clone(),
                })
                .collect();
            status.ready = true;
            cond::set(&mut status.conditions, cond::true_(VM_PROVISIONED), now);
            Ok(Some(RESYNC))
        }
        Err(e) => {
            if e.code.auto_retry(Call::CreateMachine) == Some(false) {
                status.failure_reason = Some(labels::failure::CREATE_ERROR.into());
                status.failure_message = Some(format!("creating the VM failed: {e}"));
            }
            waiting(
                status,
                VM_PROVISIONED,
                VM_PROVISIONING_FAILED,
                severity::WARNING,
                e.to_string(),
                now,
            );
            Ok(Some(RETRY))
        }
    }
}

async fn reconcile_cluster(lc: Arc<LocalCluster>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = lc.metadata.namespace.clone().unwrap_or_default();
    let name = lc.metadata.name.clone().unwrap_or_default();
    let api: Api<LocalCluster> = Api::namespaced(ctx.client.clone(), &ns);
    if lc.metadata.deletion_timestamp.is_some() {
        if has_finalizer(&lc.metadata, LOCAL_CLUSTER_FINALIZER) {
            let f = lc
                .metadata
                .finalizers
                .iter()
                .flatten()
                .filter(|f| *f != LOCAL_CLUSTER_FINALIZER)
                .cloned()
                .collect();
            set_finalizers(&api, &lc.metadata, f).await?;
        }
        return Ok(Action::await_change());
    }
    if !has_finalizer(&lc.metadata, LOCAL_CLUSTER_FINALIZER) {
        let mut f = lc.metadata.finalizers.clone().unwrap_or_default();
        f.push(LOCAL_CLUSTER_FINALIZER.into());
        set_finalizers(&api, &lc.metadata, f).await?;
        return Ok(Action::await_change());
    }
    let owned = owner(&lc.metadata, "Cluster")
        .and_then(|c| ctx.clusters.get(&ObjectRef::new(c).within(&ns)))
        .filter(|c| !c.spec.paused);
    let now = Utc::now();
    let mut status = lc.status.clone().unwrap_or_default();
    match cluster_step(&lc, owned.is_some(), ctx.config.endpoint.as_ref()) {
        None => return Ok(Action::await_change()),
        Some(Some(ep)) => {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"controlPlaneEndpoint": ep}})),
            )
            .await
            .map_err(api_err("writing spec.controlPlaneEndpoint"))?;
        }
        Some(None) if !lc.spec.control_plane_endpoint.is_valid() => {
            cond::set(
                &mut status.conditions,
                cond::false_(
                    labels::conditions::READY,
                    "WaitingForControlPlaneEndpoint",
                    severity::WARNING,
                    "spec.controlPlaneEndpoint is empty and the provider knows no workload API endpoint",
                ),
                now,
            );
        }
        Some(None) => {}
    }
    let has_endpoint = lc.spec.control_plane_endpoint.is_valid() || ctx.config.endpoint.is_some();
    if has_endpoint {
        status.ready = true;
        status.failure_domains = lc.spec.failure_domains.clone();
        cond::set(
            &mut status.conditions,
            cond::true_(labels::conditions::READY),
            now,
        );
    }
    let old = serde_json::to_value(lc.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
    let new = serde_json::to_value(&status).unwrap_or(Value::Null);
    if let Some(diff) = apimachinery::patch::merge_patch_diff(&old, &new) {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": diff})),
        )
        .await
        .map_err(api_err("writing the LocalCluster status"))?;
    }
    Ok(Action::await_change())
}

fn machine_error_policy(lm: Arc<LocalMachine>, e: &Error, _ctx: Arc<Ctx>) -> Action {
    tracing::debug!(machine = ?lm.metadata.name, error = %e, "reconcile failed");
    Action::requeue(RETRY)
}

fn cluster_error_policy(lc: Arc<LocalCluster>, e: &Error, _ctx: Arc<Ctx>) -> Action {
    tracing::debug!(cluster = ?lc.metadata.name, error = %e, "reconcile failed");
    Action::requeue(RETRY)
}

/// Runs the infrastructure provider: its objects and the VM inventory in
/// the management cluster (`client`), the simulated nodes in the workload
/// cluster (the `driver`'s), until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    target: kube::Client,
    driver: Arc<dyn Driver>,
    config: Config,
    shutdown: Shared<BoxFuture<'static, ()>>,
) -> Result<(), Error> {
    let (mt, machine_rx) = Triggers::<LocalMachine>::new();
    let (ct, cluster_rx) = Triggers::<LocalCluster>::new();
    let local_machines = informer(
        Api::<LocalMachine>::all(client.clone()),
        (),
        vec![mt.self_sink()],
        shutdown.clone(),
    )
    .await?;
    let local_clusters = informer(
        Api::<LocalCluster>::all(client.clone()),
        (),
        vec![ct.self_sink()],
        shutdown.clone(),
    )
    .await?;
    let t = mt.clone();
    let machine_sink: Sink<Machine> = Box::new(move |m: &Machine| {
        let r = &m.spec.infrastructure_ref;
        if r.kind.as_deref() == Some("LocalMachine") {
            t.trigger(m.namespace(), r.name.as_deref().unwrap_or_default());
        }
    });
    let machines = informer(
        Api::<Machine>::all(client.clone()),
        (),
        vec![machine_sink],
        shutdown.clone(),
    )
    .await?;
    let (t, c, lms) = (mt.clone(), ct.clone(), local_machines.clone());
    let cluster_sink: Sink<Cluster> = Box::new(move |cl: &Cluster| {
        if let Some(r) = cl
            .spec
            .infrastructure_ref
            .as_ref()
            .filter(|r| r.kind.as_deref() == Some("LocalCluster"))
        {
            c.trigger(cl.namespace(), r.name.as_deref().unwrap_or_default());
        }
        for lm in lms.state_filter(|lm| {
            lm.metadata.namespace.as_deref() == Some(cl.namespace())
                && capi::meta::label(&lm.metadata, labels::CLUSTER_NAME) == Some(cl.name())
        }) {
            t.trigger_self(lm.as_ref());
        }
    });
    let clusters = informer(
        Api::<Cluster>::all(client.clone()),
        (),
        vec![cluster_sink],
        shutdown.clone(),
    )
    .await?;
    let ctx = Arc::new(Ctx {
        client,
        target,
        driver,
        machines,
        clusters,
        config: config.clone(),
    });
    let workers = controller::Config::default().concurrency(config.concurrency);
    let machine_ctrl = Controller::for_stream(
        futures::stream::pending::<Result<_, watcher::Error>>(),
        local_machines,
    )
    .reconcile_on(machine_rx)
    .with_config(workers.clone())
    .graceful_shutdown_on(shutdown.clone())
    .run(reconcile_machine, machine_error_policy, ctx.clone())
    .for_each(|_| futures::future::ready(()));
    let cluster_ctrl = Controller::for_stream(
        futures::stream::pending::<Result<_, watcher::Error>>(),
        local_clusters,
    )
    .reconcile_on(cluster_rx)
    .with_config(workers)
    .graceful_shutdown_on(shutdown)
    .run(reconcile_cluster, cluster_error_policy, ctx)
    .for_each(|_| futures::future::ready(()));
    futures::join!(machine_ctrl, cluster_ctrl);
    Ok(())
}

/// The workload API endpoint of a URL (`https://127.0.0.1:6443`).
pub fn endpoint_of(url: &str) -> Option<ApiEndpoint> {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let hostport = rest.split('/').next()?;
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) => (h.trim_matches(['[', ']']), p.parse().ok()?),
        None => (hostport, if url.starts_with("http://") { 80 } else { 443 }),
    };
    (!host.is_empty()).then(|| ApiEndpoint {
        host: host.to_string(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use capi::testing::{cluster, machine};

    #[test]
    fn machine_steps() {
        let lm = LocalMachine::new("m1", Default::default());
        let mut m = machine("m1");
        let mut c = cluster();
        assert_eq!(machine_step(&lm, None, Some(&c)), MachineStep::Idle);
        assert!(matches!(
            machine_step(&lm, Some(&m), Some(&c)),
            MachineStep::Wait(WAITING_FOR_CLUSTER_INFRASTRUCTURE, _)
        ));
        c.status = Some(capi::ClusterStatus {
            infrastructure_ready: true,
            ..Default::default()
        });
        assert!(matches!(
            machine_step(&lm, Some(&m), Some(&c)),
            MachineStep::Wait(WAITING_FOR_BOOTSTRAP_DATA, _)
        ));
        m.spec.bootstrap.data_secret_name = Some("m1".into());
        assert_eq!(
            machine_step(&lm, Some(&m), Some(&c)),
            MachineStep::Boot {
                data_secret: "m1".into()
            }
        );
        let mut running = lm.clone();
        running.spec.provider_id = Some("local:///default/1".into());
        running.status = Some(LocalMachineStatus {
            ready: true,
            ..Default::default()
        });
        assert_eq!(
            machine_step(&running, Some(&m), Some(&c)),
            MachineStep::Running
        );
        c.spec.paused = true;
        assert_eq!(machine_step(&lm, Some(&m), Some(&c)), MachineStep::Idle);
    }

    #[test]
    fn cluster_steps_and_endpoints() {
        let lc = LocalCluster::new("c1", Default::default());
        let ep = ApiEndpoint {
            host: "127.0.0.1".into(),
            port: 6443,
        };
        assert_eq!(cluster_step(&lc, false, Some(&ep)), None);
        assert_eq!(cluster_step(&lc, true, Some(&ep)), Some(Some(ep.clone())));
        let mut set = lc.clone();
        set.spec.control_plane_endpoint = ep.clone();
        assert_eq!(cluster_step(&set, true, None), Some(None));
        assert_eq!(endpoint_of("https://127.0.0.1:6443"), Some(ep));
        assert_eq!(endpoint_of("https://example.com/path").unwrap().port, 443);
        assert_eq!(endpoint_of("http://[::1]:8080").unwrap().host, "::1");
    }

    #[test]
    fn the_driver_sees_the_boot() {
        let mut lm = LocalMachine::new("md-abcde", Default::default());
        lm.metadata.namespace = Some("default".into());
        lm.spec.boot_delay = Some("2s".into());
        lm.spec.instance_type = Some("local.small".into());
        let boot = Boot {
            hostname: Some("md-abcde".into()),
            labels: BTreeMap::from([("pool".to_string(), "a".to_string())]),
            ..Boot::default()
        };
        let (m, class) = driver_objects(&lm, "c1", Some("zone-a"), Some(&boot));
        assert_eq!(m.metadata.name.as_deref(), Some("md-abcde"));
        assert_eq!(m.spec.node_template.metadata.labels.unwrap()["pool"], "a");
        assert_eq!(class.provider, "local");
        assert_eq!(class.provider_spec["zone"], "zone-a");
        assert_eq!(class.provider_spec["bootDelay"], "2s");
        assert_eq!(
            class.provider_spec["tags"][cluster_tag("default", "c1")],
            "1"
        );
        assert_eq!(class.node_template.unwrap().instance_type, "local.small");
    }
}
