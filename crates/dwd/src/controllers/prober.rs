//! One shoot's prober (spec §1.4–§1.6): after the initial delay, probe,
//! pause, probe again, until cancelled. A probe reads the kubeconfig
//! Secret, asks the shoot's API server for `/version`, lists Nodes and
//! Leases there and Machines in the seed, and hands the lease verdict's
//! decision to the [`Scaler`].
//!
//! Upstream builds two fresh clients per probe with keep-alive off. This
//! prober re-reads the Secret every probe too (rotated credentials are
//! picked up at once), but keeps one client, and its connection, for as
//! long as the kubeconfig is unchanged: a probe is then four requests on
//! open connections instead of two TLS handshakes more. Every call is
//! bounded by `probeTimeout`, so a dead server is noticed as before.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::config::ProberConfig;
use crate::controllers::scaler::{FlowReport, Scaler};
use crate::lease::{self, Decision, LeaseView, MachineView, NodeView, Observation};
use crate::lifecycle::NodeConditions;
use crate::metrics::{Cluster, Metrics};
use crate::probe::{self, RunResult};
use crate::scale::Operation;

/// The key of the kubeconfig in the prober's Secret.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// What every prober of a process shares.
#[derive(Clone)]
pub struct Shared {
    pub seed: kube::Client,
    pub metrics: Arc<Metrics>,
    pub recorder: Arc<kube::runtime::events::Recorder>,
}

/// What one probe run did, for tests and logs.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub result: RunResult,
    pub throttled: bool,
    pub verdict: Option<lease::Verdict>,
    pub flow: Option<Result<FlowReport, String>>,
}

/// One shoot's prober.
pub struct Prober {
    namespace: String,
    config: ProberConfig,
    pools: NodeConditions,
    shared: Shared,
    scaler: Scaler,
    /// The kubeconfig last read and the client built from it.
    shoot: Option<(Vec<u8>, kube::Client)>,
}

fn machine_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machine.sapcloud.io", "v1alpha1", "Machine"),
        "machines",
    )
}

impl Prober {
    pub fn new(
        namespace: &str,
        config: ProberConfig,
        pools: NodeConditions,
        shared: Shared,
    ) -> Prober {
        let scaler = Scaler::new(
            shared.seed.clone(),
            namespace,
            config.dependent_resource_infos.clone(),
            shared.recorder.clone(),
            shared.metrics.clone(),
        );
        Prober {
            namespace: namespace.to_string(),
            config,
            pools,
            shared,
            scaler,
            shoot: None,
        }
    }

    /// Probes until `cancel`: the initial delay, then a probe after each
    /// pause. Cancellation drops a run mid-way, scaling included, so a
    /// removed prober scales nothing afterwards.
    pub async fn run(mut self, cancel: CancellationToken) {
        tokio::select! {
            _ = tokio::time::sleep(self.config.initial_delay) => {}
            _ = cancel.cancelled() => return,
        }
        loop {
            let started = Instant::now();
            let report = tokio::select! {
                r = self.probe(&cancel) => r,
                _ = cancel.cancelled() => return,
            };
            let ns = self.namespace.as_str();
            self.shared
                .metrics
                .probe(ns, report.result.label(), started.elapsed().as_secs_f64());
            if report.throttled {
                self.shared.metrics.throttled(ns);
            }
            let pause = probe::pause_after_run(
                self.config.probe_interval,
                self.config.backoff_jitter_factor,
                rand::random::<f64>(),
                report.throttled,
            );
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = cancel.cancelled() => return,
            }
        }
    }

    /// One probe run (spec §1.4).
    pub async fn probe(&mut self, cancel: &CancellationToken) -> RunReport {
        let mut report = RunReport {
            result: RunResult::NoKubeconfig,
            throttled: false,
            verdict: None,
            flow: None,
        };
        let shoot = match self.shoot_client().await {
            Ok(c) => c,
            Err(e) => {
                report.throttled = e.is_throttled();
                tracing::info!(namespace = %self.namespace, error = %e, "no shoot client: not probing");
                return report;
            }
        };
        self.shared.metrics.request(Cluster::Shoot);
        if let Err(e) = self
            .bounded("GET /version", shoot.apiserver_version())
            .await
        {
            report.result = RunResult::ApiServerUnreachable;
            report.throttled = e.is_throttled();
            tracing::info!(namespace = %self.namespace, error = %e, "the shoot's API server is unreachable: no lease probe");
            return report;
        }
        let seen = match self.observe(&shoot).await {
            Ok(seen) => seen,
            Err(e) => {
                report.result = RunResult::LeaseProbeFailed;
                report.throttled = e.is_throttled();
                tracing::info!(namespace = %self.namespace, error = %e, "the lease probe failed: no scaling");
                return report;
            }
        };
        let v = lease::verdict(
            &seen,
            &self.pools,
            self.config.kcm_node_monitor_grace_duration,
            self.config.node_lease_failure_fraction,
            Utc::now(),
        );
        self.shared
            .metrics
            .leases(&self.namespace, v.expired, v.candidates);
        if !v.without_lease.is_empty() {
            tracing::debug!(namespace = %self.namespace, nodes = ?v.without_lease, "candidate nodes without a lease are not counted");
        }
        report.result = RunResult::of(v.decision);
        let op = match v.decision {
            Decision::Skip => {
                tracing::debug!(namespace = %self.namespace, "one candidate lease cannot tell node failure from lost connectivity: no scaling");
                report.verdict = Some(v);
                return report;
            }
            Decision::ScaleUp => Operation::ScaleUp,
            Decision::ScaleDown => Operation::ScaleDown,
        };
        let why = format!(
            "{} of {} node leases expired ({:.0}%, threshold {:.0}%)",
            v.expired,
            v.candidates,
            v.fraction() * 100.0,
            self.config.node_lease_failure_fraction * 100.0
        );
        if op == Operation::ScaleDown {
            tracing::warn!(namespace = %self.namespace, %why, "node leases expired: scaling the dependants down");
        }
        report.verdict = Some(v);
        report.flow = Some(match self.scaler.run(op, &why, cancel).await {
            Ok(flow) => Ok(flow),
            Err((_, e)) => {
                tracing::warn!(namespace = %self.namespace, error = %e, "the scale flow failed; retrying next probe");
                Err(e.to_string())
            }
        });
        report
    }

    async fn bounded<T>(
        &self,
        what: &str,
        f: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, Error> {
        let after = self.config.probe_timeout;
        match tokio::time::timeout(after, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(source)) => Err(Error::Read {
                what: format!("{what} of {}", self.namespace),
                source,
            }),
            Err(_) => Err(Error::Timeout {
                what: format!("{what} of {}", self.namespace),
                after,
            }),
        }
    }

    /// Reads the kubeconfig Secret (spec §1.4: up to three attempts, 100 ms
    /// apart, NotFound not retried) and returns a client of the shoot.
    async fn shoot_client(&mut self) -> Result<kube::Client, Error> {
        let name = self.config.kube_config_secret_name.clone();
        let secrets: Api<Secret> = Api::namespaced(self.shared.seed.clone(), &self.namespace);
        let mut attempt = 0;
        let secret = loop {
            attempt += 1;
            self.shared.metrics.request(Cluster::Seed);
            match self
                .bounded(&format!("secret {name}"), secrets.get(&name))
                .await
            {
                Ok(s) => break s,
                Err(e) => {
                    if !probe::retry_secret_read(attempt, e.is_not_found()) {
                        return Err(e);
                    }
                    tokio::time::sleep(probe::SECRET_READ_PAUSE).await;
                }
            }
        };
        let bytes = secret
            .data
            .and_then(|mut d| d.remove(KUBECONFIG_KEY))
            .map(|b| b.0)
            .ok_or_else(|| Error::KubeconfigMissing {
                name: name.clone(),
                key: KUBECONFIG_KEY,
            })?;
        if let Some((cached, client)) = &self.shoot
            && *cached == bytes
        {
            return Ok(client.clone());
        }
        let client = client_from_kubeconfig(&bytes, self.config.probe_timeout)
            .await
            .map_err(|reason| Error::KubeconfigInvalid { name, reason })?;
        self.shoot = Some((bytes, client.clone()));
        Ok(client)
    }

    /// Lists what the lease probe needs; any failure ends the run.
    async fn observe(&self, shoot: &kube::Client) -> Result<Observation, Error> {
        let lp = ListParams::default();
        self.shared.metrics.request(Cluster::Shoot);
        let nodes = self
            .bounded("listing nodes", Api::<Node>::all(shoot.clone()).list(&lp))
            .await?;
        self.shared.metrics.request(Cluster::Seed);
        let machines = self
            .bounded(
                "listing machines",
                Api::<DynamicObject>::namespaced_with(
                    self.shared.seed.clone(),
                    &self.namespace,
                    &machine_resource(),
                )
                .list(&lp),
            )
            .await?;
        self.shared.metrics.request(Cluster::Shoot);
        let leases = self
            .bounded(
                "listing node leases",
                Api::<Lease>::namespaced(shoot.clone(), lease::NODE_LEASE_NAMESPACE).list(&lp),
            )
            .await?;
        Ok(Observation {
            nodes: nodes.items.iter().map(node_view).collect(),
            machines: machines.items.iter().map(machine_view).collect(),
            leases: leases.items.iter().map(lease_view).collect(),
        })
    }
}

/// A client of the cluster a kubeconfig describes, whose connections and
/// reads give up after `timeout`.
pub async fn client_from_kubeconfig(
    bytes: &[u8],
    timeout: Duration,
) -> Result<kube::Client, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    let kc = kube::config::Kubeconfig::from_yaml(text).map_err(|e| e.to_string())?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(timeout);
    config.write_timeout = Some(timeout);
    // kube-rs retries 429s by default; the prober must see them to back
    // off (spec §1.6), and a probe must not outlast its timeout retrying.
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

fn node_view(n: &Node) -> NodeView {
    NodeView {
        name: n.metadata.name.clone().unwrap_or_default(),
        not_managed: n
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(lease::NOT_MANAGED_BY_MCM)),
        pool: n
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(lease::POOL_LABEL))
            .cloned(),
        conditions: n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        (
                            c.type_.clone(),
                            c.status.clone(),
                            c.reason.clone().unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn machine_view(m: &DynamicObject) -> MachineView {
    MachineView {
        node: m
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(lease::MACHINE_NODE_LABEL))
            .cloned(),
        phase: m
            .data
            .pointer("/status/currentStatus/phase")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

fn lease_view(l: &Lease) -> LeaseView {
    LeaseView {
        name: l.metadata.name.clone().unwrap_or_default(),
        renew_time: l
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .and_then(|t| {
                chrono::DateTime::from_timestamp(
                    t.0.as_second(),
                    t.0.subsec_nanosecond().max(0) as u32,
                )
            }),
    }
}
