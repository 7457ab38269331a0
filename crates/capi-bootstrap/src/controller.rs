//! The TrellisConfig controller: a pure decision per config ([`decide`])
//! and a thin executor that writes the bootstrap token (workload cluster),
//! the data Secret and the config's status (management cluster).
//!
//! Crash safety: the token's ID is derived from the config's UID, so a
//! rerun finds the token it made and reuses its secret; the data Secret is
//! named like the config and created once; the status is written last, so
//! `ready` never points at a Secret that is not there.

use std::sync::Arc;
use std::time::Duration;

use capi::conditions::{self as cond, severity};
use capi::controllers::informer::{Sink, Triggers, informer};
use capi::types::labels;
use capi::{Cluster, Machine};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use futures::future::{BoxFuture, Shared};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, controller, watcher};
use serde_json::{Value, json};

use crate::data::{DEFAULT_VERSION, NodeData, render};
use crate::types::TrellisConfig;

/// Settings of the bootstrap provider.
#[derive(Clone, Debug)]
pub struct Config {
    /// How long a bootstrap token is valid; refreshed while its node has
    /// not joined (kubeadm's and CABPK's default is 15 minutes).
    pub token_ttl: Duration,
    /// Configs reconciled at once.
    pub concurrency: u16,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            token_ttl: Duration::from_secs(15 * 60),
            concurrency: 20,
        }
    }
}

/// The condition the provider reports besides `Ready`.
pub const DATA_SECRET_AVAILABLE: &str = "DataSecretAvailable";
pub const WAITING_FOR_CLUSTER_INFRASTRUCTURE: &str = "WaitingForClusterInfrastructure";
pub const WAITING_FOR_CONTROL_PLANE_ENDPOINT: &str = "WaitingForControlPlaneAvailable";
pub const DATA_SECRET_GENERATION_FAILED: &str = "DataSecretGenerationFailed";

/// What one reconcile does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No Machine owns the config yet: nothing to do (the contract).
    NoOwner,
    /// The Cluster is paused.
    Paused,
    /// Wait, saying why (reason, message).
    Wait(&'static str, String),
    /// The data is there; keep the token alive until the node joined.
    Ready { refresh_token: bool },
    /// Make the token, the data and the Secret.
    Generate,
}

/// Decides one reconcile of a config.
pub fn decide(
    config: &TrellisConfig,
    machine: Option<&Machine>,
    cluster: Option<&Cluster>,
    secret_exists: bool,
) -> Step {
    let Some(machine) = machine else {
        return Step::NoOwner;
    };
    let Some(cluster) = cluster else {
        return Step::Wait(
            WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            format!("Cluster {:?} does not exist", machine.spec.cluster_name),
        );
    };
    if cluster.spec.paused {
        return Step::Paused;
    }
    let status = config.status.clone().unwrap_or_default();
    if status.ready && status.data_secret_name.is_some() && secret_exists {
        let joined = machine
            .status
            .as_ref()
            .is_some_and(|s| s.node_ref.is_some());
        return Step::Ready {
            refresh_token: !joined,
        };
    }
    if !cluster
        .status
        .as_ref()
        .is_some_and(|s| s.infrastructure_ready)
    {
        return Step::Wait(
            WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            format!(
                "Waiting for Cluster {:?} infrastructure to be ready",
                cluster.name()
            ),
        );
    }
    if !cluster.spec.control_plane_endpoint.is_valid() {
        return Step::Wait(
            WAITING_FOR_CONTROL_PLANE_ENDPOINT,
            format!(
                "Waiting for Cluster {:?} to have a controlPlaneEndpoint",
                cluster.name()
            ),
        );
    }
    Step::Generate
}

/// The token ID of a config: six characters of `[0-9a-f]` derived from its
/// UID, so a rerun finds the same token.
pub fn token_id(config_uid: &str) -> String {
    format!("{:08x}", mcm::hash::fnv32a(config_uid.as_bytes()))[..6].to_string()
}

struct Ctx {
    client: kube::Client,
    target: kube::Client,
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
    /// A cache the controllers need never filled (from [`run`]).
    #[error(transparent)]
    WatchFailed(#[from] capi::controllers::informer::WatchFailed),
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Api { what, source }
}

fn owner_machine(ctx: &Ctx, c: &TrellisConfig) -> Option<Arc<Machine>> {
    let ns = c.metadata.namespace.as_deref()?;
    let owner = capi::meta::controller_of(&c.metadata)
        .filter(|o| o.kind == "Machine" && capi::meta::group_of(&o.api_version) == capi::GROUP)?;
    ctx.machines.get(&ObjectRef::new(&owner.name).within(ns))
}

async fn reconcile(c: Arc<TrellisConfig>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = c.metadata.namespace.clone().unwrap_or_default();
    let name = c.metadata.name.clone().unwrap_or_default();
    let now = Utc::now();
    let machine = owner_machine(&ctx, &c);
    let cluster = machine.as_ref().and_then(|m| {
        ctx.clusters
            .get(&ObjectRef::new(&m.spec.cluster_name).within(&ns))
    });
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let secret_exists = match c
        .status
        .as_ref()
        .and_then(|s| s.data_secret_name.as_deref())
    {
        Some(s) => secrets
            .get_opt(s)
            .await
            .map_err(api_err("reading the data Secret"))?
            .is_some(),
        None => false,
    };
    let step = decide(&c, machine.as_deref(), cluster.as_deref(), secret_exists);
    let configs: Api<TrellisConfig> = Api::namespaced(ctx.client.clone(), &ns);
    let mut status = c.status.clone().unwrap_or_default();
    let requeue = match step {
        Step::NoOwner | Step::Paused => return Ok(Action::await_change()),
        Step::Wait(reason, message) => {
            let c_ = cond::false_(DATA_SECRET_AVAILABLE, reason, severity::INFO, message);
            cond::set(&mut status.conditions, c_.clone(), now);
            cond::set(
                &mut status.conditions,
                capi::types::Condition {
                    type_: labels::conditions::READY.into(),
                    ..c_
                },
                now,
            );
            None
        }
        Step::Ready { refresh_token } => {
            if refresh_token {
                refresh(&ctx, &c, now).await?;
                Some(ctx.config.token_ttl / 3)
            } else {
                None
            }
        }
        Step::Generate => {
            // `decide` only generates with both present.
            let (Some(machine), Some(cluster)) = (machine, cluster) else {
                return Ok(Action::await_change());
            };
            let token = ensure_token(&ctx, &c, now).await?;
            let ep = &cluster.spec.control_plane_endpoint;
            let data = render(&NodeData {
                spec: &c.spec,
                machine: machine.name(),
                cluster: cluster.name(),
                api_server_url: &format!("https://{}:{}", ep.host, ep.port),
                version: machine.spec.version.as_deref().unwrap_or(DEFAULT_VERSION),
                token: &token,
            });
            let secret = data_secret(&c, &name, &ns, cluster.name(), data);
            match secrets.create(&PostParams::default(), &secret).await {
                Ok(_) => {}
                // Left by an interrupted pass: it holds this config's data.
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(api_err("creating the data Secret")(e)),
            }
            status.ready = true;
            status.data_secret_name = Some(name.clone());
            cond::set(
                &mut status.conditions,
                cond::true_(DATA_SECRET_AVAILABLE),
                now,
            );
            cond::set(
                &mut status.conditions,
                cond::true_(labels::conditions::READY),
                now,
            );
            Some(ctx.config.token_ttl / 3)
        }
    };
    status.observed_generation = c.metadata.generation;
    let old = serde_json::to_value(c.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
    let new = serde_json::to_value(&status).unwrap_or(Value::Null);
    if let Some(diff) = apimachinery::patch::merge_patch_diff(&old, &new) {
        configs
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": diff})),
            )
            .await
            .map_err(api_err("writing the TrellisConfig status"))?;
    }
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

/// The data Secret: named like the config, owned by it, labelled with the
/// Cluster, key `value` and `format`, Cluster API's Secret type.
fn data_secret(c: &TrellisConfig, name: &str, ns: &str, cluster: &str, data: String) -> Secret {
    let owner = capi::meta::owner_ref(
        "bootstrap.cluster.x-k8s.io/v1beta1",
        "TrellisConfig",
        name,
        c.metadata.uid.as_deref().unwrap_or_default(),
        true,
    );
    Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(ns.to_string()),
            labels: Some([(labels::CLUSTER_NAME.to_string(), cluster.to_string())].into()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        type_: Some(labels::SECRET_TYPE.into()),
        data: Some(
            [
                ("value".to_string(), ByteString(data.into_bytes())),
                ("format".to_string(), ByteString(b"cloud-config".to_vec())),
            ]
            .into(),
        ),
        ..Secret::default()
    }
}

/// The config's bootstrap token in the workload cluster, made if missing;
/// returns `<id>.<secret>`.
async fn ensure_token(ctx: &Ctx, c: &TrellisConfig, now: DateTime<Utc>) -> Result<String, Error> {
    let id = token_id(c.metadata.uid.as_deref().unwrap_or_default());
    let tokens: Api<Secret> =
        Api::namespaced(ctx.target.clone(), mcm::machine::BOOTSTRAP_TOKEN_NAMESPACE);
    let name = mcm::machine::bootstrap_token_secret_name(&id);
    if let Some(existing) = tokens
        .get_opt(&name)
        .await
        .map_err(api_err("reading the bootstrap token"))?
        && let Some(token) = mcm::machine::token_of(&existing)
    {
        return Ok(token);
    }
    let secret_part = mcm::machine::generate_token_secret(&mut rand::rng());
    let expiration = now + chrono::Duration::from_std(ctx.config.token_ttl).unwrap_or_default();
    let mut secret = mcm::machine::bootstrap_token_secret(
        &id,
        &secret_part,
        expiration,
        "system:bootstrappers:kubeadm:default-node-token",
    );
    secret.metadata.labels = Some(
        [(
            labels::CLUSTER_NAME.to_string(),
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::CLUSTER_NAME))
                .cloned()
                .unwrap_or_default(),
        )]
        .into(),
    );
    match tokens.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(format!("{id}.{secret_part}")),
        // Another pass made it meanwhile: use that one.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = tokens
                .get(&name)
                .await
                .map_err(api_err("reading the bootstrap token"))?;
            Ok(mcm::machine::token_of(&existing).unwrap_or_default())
        }
        Err(e) => Err(api_err("creating the bootstrap token")(e)),
    }
}

/// Extends the token's expiration while its node has not joined, as CABPK
/// does, so a slow server still finds a valid token.
async fn refresh(ctx: &Ctx, c: &TrellisConfig, now: DateTime<Utc>) -> Result<(), Error> {
    let id = token_id(c.metadata.uid.as_deref().unwrap_or_default());
    let tokens: Api<Secret> =
        Api::namespaced(ctx.target.clone(), mcm::machine::BOOTSTRAP_TOKEN_NAMESPACE);
    let name = mcm::machine::bootstrap_token_secret_name(&id);
    let Some(existing) = tokens
        .get_opt(&name)
        .await
        .map_err(api_err("reading the bootstrap token"))?
    else {
        return Ok(());
    };
    let expires = mcm::machine::secret_value(&existing, "expiration")
        .and_then(|e| DateTime::parse_from_rfc3339(&e).ok())
        .map(|e| e.with_timezone(&Utc));
    let ttl = chrono::Duration::from_std(ctx.config.token_ttl).unwrap_or_default();
    if expires.is_some_and(|e| e > now + ttl / 2) {
        return Ok(());
    }
    let new = (now + ttl).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    tokens
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"expiration": new}})),
        )
        .await
        .map_err(api_err("refreshing the bootstrap token"))?;
    Ok(())
}

fn error_policy(c: Arc<TrellisConfig>, e: &Error, _ctx: Arc<Ctx>) -> Action {
    tracing::debug!(config = ?c.metadata.name, error = %e, "reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the bootstrap provider: configs and Secrets in the management
/// cluster (`client`), bootstrap tokens in the workload cluster (`target`),
/// until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    target: kube::Client,
    config: Config,
    shutdown: Shared<BoxFuture<'static, ()>>,
) -> Result<(), Error> {
    let (triggers, rx) = Triggers::<TrellisConfig>::new();
    let configs = informer(
        Api::<TrellisConfig>::all(client.clone()),
        (),
        vec![triggers.self_sink()],
        shutdown.clone(),
    )
    .await?;
    let t = triggers.clone();
    let machine_sink: Sink<Machine> = Box::new(move |m: &Machine| {
        if let Some(r) = m
            .spec
            .bootstrap
            .config_ref
            .as_ref()
            .filter(|r| r.kind.as_deref() == Some("TrellisConfig"))
        {
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
    let (t, cfgs) = (triggers.clone(), configs.clone());
    let cluster_sink: Sink<Cluster> = Box::new(move |c: &Cluster| {
        for cfg in cfgs.state_filter(|x| {
            x.metadata.namespace.as_deref() == Some(c.namespace())
                && capi::meta::label(&x.metadata, labels::CLUSTER_NAME) == Some(c.name())
        }) {
            t.trigger_self(cfg.as_ref());
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
        machines,
        clusters,
        config: config.clone(),
    });
    Controller::for_stream(
        futures::stream::pending::<Result<_, watcher::Error>>(),
        configs,
    )
    .reconcile_on(rx)
    .with_config(controller::Config::default().concurrency(config.concurrency))
    .graceful_shutdown_on(shutdown)
    .run(reconcile, error_policy, ctx)
    .for_each(|_| futures::future::ready(()))
    .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use capi::testing::{cluster, machine};

    fn config() -> TrellisConfig {
        TrellisConfig::new("m1", Default::default())
    }

    #[test]
    fn decisions() {
        let m = machine("m1");
        let mut c = cluster();
        assert_eq!(decide(&config(), None, Some(&c), false), Step::NoOwner);
        assert!(matches!(
            decide(&config(), Some(&m), Some(&c), false),
            Step::Wait(WAITING_FOR_CLUSTER_INFRASTRUCTURE, _)
        ));
        c.status = Some(capi::ClusterStatus {
            infrastructure_ready: true,
            ..Default::default()
        });
        assert!(matches!(
            decide(&config(), Some(&m), Some(&c), false),
            Step::Wait(WAITING_FOR_CONTROL_PLANE_ENDPOINT, _)
        ));
        c.spec.control_plane_endpoint = capi::ApiEndpoint {
            host: "127.0.0.1".into(),
            port: 6443,
        };
        assert_eq!(decide(&config(), Some(&m), Some(&c), false), Step::Generate);
        let mut ready = config();
        ready.status = Some(crate::TrellisConfigStatus {
            ready: true,
            data_secret_name: Some("m1".into()),
            ..Default::default()
        });
        assert_eq!(
            decide(&ready, Some(&m), Some(&c), true),
            Step::Ready {
                refresh_token: true
            }
        );
        // The Secret went missing: made again.
        assert_eq!(decide(&ready, Some(&m), Some(&c), false), Step::Generate);
        c.spec.paused = true;
        assert_eq!(decide(&ready, Some(&m), Some(&c), true), Step::Paused);
    }

    #[test]
    fn token_ids_are_stable_and_valid() {
        let a = token_id("0f6c-uid");
        assert_eq!(a, token_id("0f6c-uid"));
        assert_ne!(a, token_id("other"));
        assert_eq!(a.len(), 6);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }
}
