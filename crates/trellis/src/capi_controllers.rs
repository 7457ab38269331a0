//! Cluster API in trellis's controller processes (`up`, `controller-manager`):
//! the core controllers, the TrellisConfig bootstrap provider and the local
//! infrastructure provider, each as its own controller set talking only
//! through the API. The infrastructure provider gets its own instance of
//! the local machine provider (VM records owned by `<name>-capi`), so its
//! VMs are never mistaken for MCM's.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use futures::TryFutureExt as _;
use futures::future::{BoxFuture, Shared};

/// How Cluster API runs in a controller process.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The workload API endpoint written into LocalClusters that name
    /// none.
    pub endpoint: Option<capi::ApiEndpoint>,
}

/// The workload API endpoint LocalClusters get: the server of a kubeconfig
/// (in `up`, trellis's own).
pub fn endpoint_of_kubeconfig(path: &Path) -> Option<capi::ApiEndpoint> {
    let kc = kube::config::Kubeconfig::read_from(path).ok()?;
    let ctx_name = kc.current_context.clone()?;
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == ctx_name)?
        .context
        .clone()?;
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)?
        .cluster
        .clone()?;
    capi_local::controller::endpoint_of(cluster.server.as_deref()?)
}

/// Runs the three Cluster API controller sets until `shutdown`: objects in
/// the control cluster, Nodes, Pods and bootstrap tokens in the target.
pub async fn run(
    control: kube::Client,
    target: kube::Client,
    instance: &str,
    options: Options,
    shutdown: Shared<BoxFuture<'static, ()>>,
) -> anyhow::Result<()> {
    let provider = provider_local::LocalProvider::new(
        control.clone(),
        target.clone(),
        &format!("{instance}-capi"),
    )
    .await
    .context("starting the local provider for Cluster API")?;
    let core = capi::run::run(
        control.clone(),
        Some(target.clone()),
        capi::controllers::Config::default(),
        shutdown.clone(),
    );
    let bootstrap = capi_bootstrap::run(
        control.clone(),
        target.clone(),
        capi_bootstrap::Config::default(),
        shutdown.clone(),
    );
    let infrastructure = capi_local::run(
        control,
        target,
        Arc::new(provider.clone()),
        capi_local::Config {
            endpoint: options.endpoint,
            ..capi_local::Config::default()
        },
        shutdown,
    );
    let result = tokio::try_join!(
        core.err_into::<anyhow::Error>(),
        bootstrap.err_into::<anyhow::Error>(),
        infrastructure.err_into::<anyhow::Error>(),
    )
    .map(|_| ());
    provider.simulator().shutdown();
    result
}
