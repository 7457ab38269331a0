//! The scale flows' executor (spec §1.7): levels in order, the resources
//! of a level concurrently, each resource's step tried [`scale::ATTEMPTS`]
//! times; what to do at each point comes from [`crate::scale`].
//!
//! Every resource is reached through the `/scale` subresource of its
//! reference, as a dynamic object, so any scalable kind works. Each scale
//! and each failure is an Event on the resource.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::events::{Event, EventType, Recorder};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::config::DependentResourceInfo;
use crate::metrics::Metrics;
use crate::scale::{self, AfterAnnotations, AfterScale, Operation, ScaleError};

/// How one resource's step ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Optional and absent.
    Absent,
    /// `ignore-scaling` is set.
    Ignored,
    /// Already on the operation's side of zero.
    Unchanged,
    Scaled {
        from: i32,
        to: i32,
    },
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Absent => "absent",
            Outcome::Ignored => "ignored",
            Outcome::Unchanged => "unchanged",
            Outcome::Scaled { .. } => "scaled",
        }
    }
}

/// One resource's step in a flow, for logs and tests.
#[derive(Clone, Debug)]
pub struct TaskReport {
    pub resource: String,
    pub level: i32,
    pub started: Instant,
    pub ended: Instant,
    /// When `/scale` was updated, if it was.
    pub scaled_at: Option<Instant>,
    pub outcome: Result<Outcome, String>,
}

/// What a flow did.
#[derive(Clone, Debug, Default)]
pub struct FlowReport {
    pub tasks: Vec<TaskReport>,
}

impl FlowReport {
    /// The task of `resource`, if it ran.
    pub fn task(&self, resource: &str) -> Option<&TaskReport> {
        self.tasks.iter().find(|t| t.resource == resource)
    }
}

/// Scales one shoot namespace's dependants.
pub struct Scaler {
    seed: kube::Client,
    namespace: String,
    infos: Vec<DependentResourceInfo>,
    recorder: Arc<Recorder>,
    metrics: Arc<Metrics>,
}

/// Why a flow was cut short.
#[derive(Debug)]
enum StepError {
    Cancelled,
    Failed(Error),
}

impl From<Error> for StepError {
    fn from(e: Error) -> StepError {
        StepError::Failed(e)
    }
}

impl From<ScaleError> for StepError {
    fn from(e: ScaleError) -> StepError {
        StepError::Failed(Error::Scale(e))
    }
}

async fn sleep_or_cancel(d: Duration, cancel: &CancellationToken) -> Result<(), StepError> {
    if d.is_zero() {
        return if cancel.is_cancelled() {
            Err(StepError::Cancelled)
        } else {
            Ok(())
        };
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => Ok(()),
        _ = cancel.cancelled() => Err(StepError::Cancelled),
    }
}

async fn bounded<T>(
    what: impl FnOnce() -> String,
    after: Duration,
    f: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(after, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(source)) => Err(Error::Read {
            what: what(),
            source,
        }),
        Err(_) => Err(Error::Timeout {
            what: what(),
            after,
        }),
    }
}

impl Scaler {
    pub fn new(
        seed: kube::Client,
        namespace: &str,
        infos: Vec<DependentResourceInfo>,
        recorder: Arc<Recorder>,
        metrics: Arc<Metrics>,
    ) -> Scaler {
        Scaler {
            seed,
            namespace: namespace.to_string(),
            infos,
            recorder,
            metrics,
        }
    }

    /// Runs the flow of `op`; `why` goes into the Events. Returns the
    /// report, or the first failed level's error (higher levels do not
    /// start). A cancelled flow stops at the next step and reports what
    /// ran.
    pub async fn run(
        &self,
        op: Operation,
        why: &str,
        cancel: &CancellationToken,
    ) -> Result<FlowReport, (FlowReport, ScaleError)> {
        let mut report = FlowReport::default();
        for (level, infos) in scale::levels(&self.infos, op) {
            if cancel.is_cancelled() {
                break;
            }
            let tasks = join_all(infos.iter().map(|d| self.task(op, d, level, why, cancel))).await;
            let failed: Vec<String> = tasks
                .iter()
                .filter_map(|t| {
                    t.outcome
                        .as_ref()
                        .err()
                        .map(|e| format!("{}: {e}", t.resource))
                })
                .collect();
            report.tasks.extend(tasks);
            if !failed.is_empty() {
                return Err((
                    report,
                    ScaleError::LevelFailed {
                        operation: op.label(),
                        level,
                        failed: failed.join("; "),
                    },
                ));
            }
        }
        Ok(report)
    }

    /// One resource's step, with its attempts.
    async fn task(
        &self,
        op: Operation,
        d: &DependentResourceInfo,
        level: i32,
        why: &str,
        cancel: &CancellationToken,
    ) -> TaskReport {
        let started = Instant::now();
        let mut scaled_at = None;
        let mut outcome = Err(String::new());
        for attempt in 1..=scale::ATTEMPTS {
            match self.attempt(op, d, why, cancel, &mut scaled_at).await {
                Ok(o) => {
                    outcome = Ok(o);
                    break;
                }
                Err(StepError::Cancelled) => {
                    outcome = Err("cancelled".to_string());
                    break;
                }
                Err(StepError::Failed(e)) => {
                    tracing::debug!(namespace = %self.namespace, resource = %d.reference, attempt, error = %e, "scale step failed");
                    outcome = Err(e.to_string());
                    if attempt < scale::ATTEMPTS
                        && sleep_or_cancel(scale::ATTEMPT_PAUSE, cancel).await.is_err()
                    {
                        break;
                    }
                }
            }
        }
        let name = d.reference.name.as_str();
        match &outcome {
            // An attempt that wrote the scale and then timed out waiting
            // for readiness leaves the retry nothing to do: the task still
            // scaled.
            Ok(o) => {
                let label = match o {
                    Outcome::Unchanged if scaled_at.is_some() => "scaled",
                    o => o.label(),
                };
                self.metrics
                    .scale_operation(&self.namespace, name, op.label(), label);
            }
            Err(e) => {
                self.metrics
                    .scale_operation(&self.namespace, name, op.label(), "failed");
                if e != "cancelled" {
                    tracing::warn!(namespace = %self.namespace, resource = %d.reference, operation = op.label(), error = %e, "scaling failed");
                    self.event(
                        d,
                        None,
                        EventType::Warning,
                        "ScaleFailed",
                        format!("dependency-watchdog could not {}: {e}", op_verb(op)),
                    )
                    .await;
                }
            }
        }
        TaskReport {
            resource: name.to_string(),
            level,
            started,
            ended: Instant::now(),
            scaled_at,
            outcome,
        }
    }

    fn api(&self, d: &DependentResourceInfo) -> Api<DynamicObject> {
        let (group, version) = d.reference.group_version();
        let gvk = GroupVersionKind::gvk(group, version, &d.reference.kind);
        Api::namespaced_with(
            self.seed.clone(),
            &self.namespace,
            &ApiResource::from_gvk(&gvk),
        )
    }

    /// One attempt of the step (spec §1.7 steps 1–10).
    async fn attempt(
        &self,
        op: Operation,
        d: &DependentResourceInfo,
        why: &str,
        cancel: &CancellationToken,
        scaled_at: &mut Option<Instant>,
    ) -> Result<Outcome, StepError> {
        let info = op.info(d);
        let name = d.reference.name.as_str();
        let what = || format!("{} in {}", d.reference, self.namespace);
        sleep_or_cancel(info.initial_delay, cancel).await?;
        let api = self.api(d);
        let meta = api
            .get_metadata_opt(name)
            .await
            .map_err(|source| Error::Read {
                what: what(),
                source,
            })?;
        let uid = meta.as_ref().and_then(|m| m.metadata.uid.clone());
        let annotations: Option<BTreeMap<String, String>> =
            meta.map(|m| m.metadata.annotations.unwrap_or_default());
        match scale::on_annotations(annotations.as_ref(), d.optional, name)? {
            AfterAnnotations::Absent => return Ok(Outcome::Absent),
            AfterAnnotations::Ignored { remove_meltdown } => {
                if remove_meltdown {
                    self.remove_meltdown(&api, d, uid.as_deref()).await?;
                }
                return Ok(Outcome::Ignored);
            }
            AfterAnnotations::ReadScale => {}
        }
        let annotations = annotations.unwrap_or_default();
        let current = bounded(what, info.timeout, api.get_scale(name)).await?;
        let replicas = current.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let (from, target, annotate, remove_meltdown) =
            match scale::on_scale(op, &annotations, replicas, name)? {
                AfterScale::Unchanged { remove_meltdown } => {
                    if remove_meltdown {
                        self.remove_meltdown(&api, d, uid.as_deref()).await?;
                    }
                    return Ok(Outcome::Unchanged);
                }
                AfterScale::Scale {
                    from,
                    target,
                    annotate,
                    remove_meltdown,
                } => (from, target, annotate, remove_meltdown),
            };
        if cancel.is_cancelled() {
            return Err(StepError::Cancelled);
        }
        if let Some(patch) = annotate {
            api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(|source| Error::Write {
                    what: format!("the annotations of {}", what()),
                    source,
                })?;
        }
        let mut fresh = bounded(what, info.timeout, api.get_scale(name)).await?;
        fresh.spec.get_or_insert_with(Default::default).replicas = Some(target);
        match tokio::time::timeout(
            info.timeout,
            api.replace_scale(name, &PostParams::default(), &fresh),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(source)) => {
                return Err(Error::Write {
                    what: format!("the scale of {}", what()),
                    source,
                }
                .into());
            }
            Err(_) => {
                return Err(Error::Timeout {
                    what: format!("scaling {}", what()),
                    after: info.timeout,
                }
                .into());
            }
        }
        *scaled_at = Some(Instant::now());
        tracing::info!(namespace = %self.namespace, resource = %d.reference, from, to = target, why, "scaled");
        let (kind, reason) = match op {
            Operation::ScaleDown => (EventType::Warning, "ScaledDown"),
            Operation::ScaleUp => (EventType::Normal, "ScaledUp"),
        };
        self.event(
            d,
            uid.as_deref(),
            kind,
            reason,
            format!("dependency-watchdog scaled from {from} to {target} replicas: {why}"),
        )
        .await;
        if remove_meltdown {
            self.remove_meltdown(&api, d, uid.as_deref()).await?;
        }
        self.wait_ready(&api, op, name, target).await?;
        Ok(Outcome::Scaled { from, to: target })
    }

    async fn remove_meltdown(
        &self,
        api: &Api<DynamicObject>,
        d: &DependentResourceInfo,
        uid: Option<&str>,
    ) -> Result<(), Error> {
        api.patch(
            &d.reference.name,
            &PatchParams::default(),
            &Patch::Merge(scale::remove_meltdown_patch()),
        )
        .await
        .map_err(|source| Error::Write {
            what: format!("the annotations of {} in {}", d.reference, self.namespace),
            source,
        })?;
        self.event(
            d,
            uid,
            EventType::Normal,
            "MeltdownProtectionRemoved",
            format!("dependency-watchdog removed {}", scale::MELTDOWN_ANNOTATION),
        )
        .await;
        Ok(())
    }

    /// Polls `status.readyReplicas` until the operation's target is
    /// reached, for [`scale::READY_WAIT`] at most.
    async fn wait_ready(
        &self,
        api: &Api<DynamicObject>,
        op: Operation,
        name: &str,
        target: i32,
    ) -> Result<(), StepError> {
        let deadline = Instant::now() + scale::READY_WAIT;
        loop {
            let ready = api.get(name).await.ok().and_then(|o| {
                o.data
                    .pointer("/status/readyReplicas")
                    .and_then(|v| v.as_i64())
            });
            if scale::target_reached(op, ready) {
                return Ok(());
            }
            if Instant::now() + scale::READY_POLL > deadline {
                return Err(ScaleError::NotReady {
                    resource: name.to_string(),
                    target,
                }
                .into());
            }
            tokio::time::sleep(scale::READY_POLL).await;
        }
    }

    async fn event(
        &self,
        d: &DependentResourceInfo,
        uid: Option<&str>,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let reference = ObjectReference {
            api_version: Some(d.reference.api_version.clone()),
            kind: Some(d.reference.kind.clone()),
            name: Some(d.reference.name.clone()),
            namespace: Some(self.namespace.clone()),
            uid: uid.map(str::to_string),
            ..ObjectReference::default()
        };
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: "Scale".to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "publishing an event failed");
        }
    }
}

fn op_verb(op: Operation) -> &'static str {
    match op {
        Operation::ScaleUp => "scale up",
        Operation::ScaleDown => "scale down",
    }
}
