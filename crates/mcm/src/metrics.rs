//! Prometheus metrics of the controllers, and the readiness the health
//! endpoints report.
//!
//! One [`Metrics`] value per controller process, created by whoever serves
//! `/metrics` and handed to the controllers in
//! [`crate::controllers::Config::metrics`]. Recording is lock-free on the
//! hot paths (atomic counters and histograms behind the families' read
//! locks); the machine gauges are not recorded at all but computed at scrape
//! time from the machine cache, so they can never drift from what the
//! controllers see.
//!
//! Names follow upstream's (spec §7) where a metric has an upstream
//! counterpart: `mcm_machine_items_total`,
//! `mcm_machine_current_status_phase`,
//! `mcm_cloud_api_driver_request_duration_seconds`,
//! `mcm_cloud_api_driver_requests_failed_total`,
//! `mcm_machine_drain_duration_seconds`, `mcm_workqueue_retries_total`
//! (labelled by queue `name`, as upstream's workqueue metrics are). The
//! rest are ours:
//! `mcm_machines_by_phase`, `mcm_controller_reconcile_duration_seconds` and
//! `mcm_controller_reconcile_errors_total`.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use api::{Machine, MachinePhase};
use async_trait::async_trait;
use driver::{
    Call, CreateMachineRequest, CreateMachineResponse, DeleteMachineRequest, DeleteMachineResponse,
    Driver, DriverError, GenerateMachineClassForMigrationRequest,
    GenerateMachineClassForMigrationResponse, GetMachineStatusRequest, GetMachineStatusResponse,
    GetVolumeIDsRequest, GetVolumeIDsResponse, InitializeMachineRequest, InitializeMachineResponse,
    ListMachinesRequest, ListMachinesResponse, UpdateMachineRequest, UpdateMachineResponse,
};
use kube::runtime::reflector::Store;
use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: &'static str,
}

/// Upstream's workqueue metrics name the queue `name`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    provider: String,
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailedCallLabels {
    provider: String,
    operation: &'static str,
    error_code: &'static str,
}

/// Reconciles take from a millisecond (a cache-only pass) to tens of
/// seconds (a drain round against a slow API): 1 ms … ~33 s.
fn reconcile_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// Driver calls: 1 ms … ~65 s (cloud APIs are slow, the local provider
/// fast).
fn driver_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// A reconcile wrapped by [`Metrics::timed`].
pub type TimedFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

/// Every metric of a controller process and its readiness.
pub struct Metrics {
    registry: Registry,
    reconcile_duration: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    retries: Family<QueueLabels, Counter>,
    driver_duration: Family<CallLabels, Histogram, fn() -> Histogram>,
    driver_failed: Family<FailedCallLabels, Counter>,
    drain_duration: Histogram,
    machines: Arc<MachineCollector>,
    ready: AtomicBool,
}

impl fmt::Debug for Metrics {
    // The registry's contents are what `/metrics` is for; the derived form
    // would print every series.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("ready", &self.is_ready())
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let reconcile_duration: Family<ControllerLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(reconcile_buckets);
        let reconcile_errors = Family::<ControllerLabels, Counter>::default();
        let retries = Family::<QueueLabels, Counter>::default();
        let driver_duration: Family<CallLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(driver_buckets);
        let driver_failed = Family::<FailedCallLabels, Counter>::default();
        // Drains last from seconds to the drain timeout (2 h by default):
        // 0.5 s … ~4.5 h.
        let drain_duration = Histogram::new(exponential_buckets(0.5, 2.0, 16));
        let machines = Arc::new(MachineCollector::default());
        registry.register(
            "mcm_controller_reconcile_duration_seconds",
            "Time one reconcile took, per controller",
            reconcile_duration.clone(),
        );
        // The registry appends `_total` to counters.
        registry.register(
            "mcm_controller_reconcile_errors",
            "Reconciles that returned an error, per controller",
            reconcile_errors.clone(),
        );
        registry.register(
            "mcm_workqueue_retries",
            "Rate-limited requeues after failed reconciles, per controller queue",
            retries.clone(),
        );
        registry.register(
            "mcm_cloud_api_driver_request_duration_seconds",
            "Time of driver calls, per provider and operation",
            driver_duration.clone(),
        );
        registry.register(
            "mcm_cloud_api_driver_requests_failed",
            "Failed driver calls, per provider, operation and error code",
            driver_failed.clone(),
        );
        registry.register(
            "mcm_machine_drain_duration_seconds",
            "Time from a machine's deletion to the end of its node's drain",
            drain_duration.clone(),
        );
        registry.register_collector(Box::new(machines.clone()));
        Metrics {
            registry,
            reconcile_duration,
            reconcile_errors,
            retries,
            driver_duration,
            driver_failed,
            drain_duration,
            machines,
            ready: AtomicBool::new(false),
        }
    }

    /// The text exposition format (`/metrics`).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Records one reconcile of `controller`.
    pub fn reconciled(&self, controller: &'static str, took: Duration, failed: bool) {
        let labels = ControllerLabels { controller };
        self.reconcile_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if failed {
            self.reconcile_errors.get_or_create(&labels).inc();
        }
    }

    /// Records a rate-limited requeue of a failed reconcile in
    /// `controller`'s queue.
    pub fn retried(&self, controller: &'static str) {
        self.retries
            .get_or_create(&QueueLabels { name: controller })
            .inc();
    }

    /// Records a finished drain that took `took` since the deletion.
    pub fn drained(&self, took: Duration) {
        self.drain_duration.observe(took.as_secs_f64());
    }

    fn driver_call(&self, provider: &str, call: Call, took: Duration, error: Option<&DriverError>) {
        let provider = provider.to_string();
        let operation = call.name();
        self.driver_duration
            .get_or_create(&CallLabels {
                provider: provider.clone(),
                operation,
            })
            .observe(took.as_secs_f64());
        if let Some(e) = error {
            self.driver_failed
                .get_or_create(&FailedCallLabels {
                    provider,
                    operation,
                    error_code: e.code.name(),
                })
                .inc();
        }
    }

    /// Wraps a reconciler so that every run is timed, and its errors
    /// counted, under `controller`.
    pub fn timed<K, C, T, E, F, Fut>(
        self: &Arc<Self>,
        controller: &'static str,
        mut reconcile: F,
    ) -> impl FnMut(Arc<K>, Arc<C>) -> TimedFuture<T, E>
    where
        F: FnMut(Arc<K>, Arc<C>) -> Fut,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        let metrics = self.clone();
        move |obj, ctx| {
            let metrics = metrics.clone();
            let fut = reconcile(obj, ctx);
            Box::pin(async move {
                let start = Instant::now();
                let result = fut.await;
                metrics.reconciled(controller, start.elapsed(), result.is_err());
                result
            })
        }
    }

    /// The machine cache the phase gauges are computed from at scrape time.
    pub fn observe_machines(&self, machines: Store<Machine>) {
        *self.machines.store.lock() = Some(machines);
    }

    /// Marks the controllers running (their caches are synced) or not.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Whether the controllers run on synced caches (`/readyz`).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

/// Upstream's numeric encoding of a phase in
/// `mcm_machine_current_status_phase`; phases upstream does not encode
/// (Available, the in-place update phases) count as Running, the state
/// whose machine has a VM serving.
fn phase_value(phase: Option<MachinePhase>) -> i64 {
    match phase {
        Some(MachinePhase::Terminating) => -4,
        Some(MachinePhase::Failed) => -3,
        Some(MachinePhase::CrashLoopBackOff) => -2,
        Some(MachinePhase::Unknown) => -1,
        None | Some(MachinePhase::Pending) => 0,
        Some(_) => 1,
    }
}

/// Computes the machine gauges from the cache on every scrape.
#[derive(Default)]
struct MachineCollector {
    store: Mutex<Option<Store<Machine>>>,
}

impl fmt::Debug for MachineCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MachineCollector")
    }
}

impl Collector for MachineCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Some(store) = self.store.lock().clone() else {
            return Ok(());
        };
        let machines = store.state();
        let mut by_phase: BTreeMap<&'static str, i64> =
            MachinePhase::ALL.iter().map(|p| (p.as_str(), 0)).collect();
        by_phase.insert("None", 0);
        for m in &machines {
            let phase = m.phase().map(|p| p.as_str()).unwrap_or("None");
            *by_phase.entry(phase).or_default() += 1;
        }
        let total = ConstGauge::new(machines.len() as i64);
        total.encode(encoder.encode_descriptor(
            "mcm_machine_items_total",
            "Machines in the controllers' cache",
            None,
            MetricType::Gauge,
        )?)?;
        let mut enc = encoder.encode_descriptor(
            "mcm_machines_by_phase",
            "Machines per status phase (None: not processed yet)",
            None,
            MetricType::Gauge,
        )?;
        for (phase, n) in &by_phase {
            let labels = [("phase", *phase)];
            ConstGauge::new(*n).encode(enc.encode_family(&labels)?)?;
        }
        let mut enc = encoder.encode_descriptor(
            "mcm_machine_current_status_phase",
            "Phase of each machine: Terminating -4, Failed -3, CrashLoopBackOff -2, \
             Unknown -1, Pending 0, Running 1",
            None,
            MetricType::Gauge,
        )?;
        for m in &machines {
            let labels = [
                ("name", m.metadata.name.clone().unwrap_or_default()),
                (
                    "namespace",
                    m.metadata.namespace.clone().unwrap_or_default(),
                ),
            ];
            ConstGauge::new(phase_value(m.phase())).encode(enc.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// A driver that records the latency and failures of every call of the
/// driver it wraps.
pub struct MeteredDriver {
    inner: Arc<dyn Driver>,
    metrics: Arc<Metrics>,
}

impl MeteredDriver {
    pub fn wrap(inner: Arc<dyn Driver>, metrics: Arc<Metrics>) -> Arc<dyn Driver> {
        Arc::new(MeteredDriver { inner, metrics })
    }

    /// Runs one call and records it under the class's provider.
    async fn timed<T>(
        &self,
        provider: &str,
        call: Call,
        fut: impl Future<Output = Result<T, DriverError>>,
    ) -> Result<T, DriverError> {
        let start = Instant::now();
        let result = fut.await;
        let error = result.as_ref().err();
        self.metrics
            .driver_call(provider, call, start.elapsed(), error);
        result
    }
}

#[async_trait]
impl Driver for MeteredDriver {
    async fn create_machine(
        &self,
        req: CreateMachineRequest<'_>,
    ) -> Result<CreateMachineResponse, DriverError> {
        let p = &req.machine_class.provider;
        self.timed(p, Call::CreateMachine, self.inner.create_machine(req))
            .await
    }

    async fn initialize_machine(
        &self,
        req: InitializeMachineRequest<'_>,
    ) -> Result<InitializeMachineResponse, DriverError> {
        let p = &req.machine_class.provider;
        self.timed(
            p,
            Call::InitializeMachine,
            self.inner.initialize_machine(req),
        )
        .await
    }

    async fn delete_machine(
        &self,
        req: DeleteMachineRequest<'_>,
    ) -> Result<DeleteMachineResponse, DriverError> {
        let p = &req.machine_class.provider;
        self.timed(p, Call::DeleteMachine, self.inner.delete_machine(req))
            .await
    }

    async fn get_machine_status(
        &self,
        req: GetMachineStatusRequest<'_>,
    ) -> Result<GetMachineStatusResponse, DriverError> {
        let p = &req.machine_class.provider;
        self.timed(
            p,
            Call::GetMachineStatus,
            self.inner.get_machine_status(req),
        )
        .await
    }

    async fn list_machines(
        &self,
        req: ListMachinesRequest<'_>,
    ) -> Result<ListMachinesResponse, DriverError> {
        let p = &req.machine_class.provider;
        self.timed(p, Call::ListMachines, self.inner.list_machines(req))
            .await
    }

    async fn get_volume_ids(
        &self,
        req: GetVolumeIDsRequest<'_>,
    ) -> Result<GetVolumeIDsResponse, DriverError> {
        // The request names no class; one driver serves one provider in
        // practice, so an empty label loses nothing.
        self.timed("", Call::GetVolumeIds, self.inner.get_volume_ids(req))
            .await
    }

    async fn generate_machine_class_for_migration(
        &self,
        req: GenerateMachineClassForMigrationRequest<'_>,
    ) -> Result<GenerateMachineClassForMigrationResponse, DriverError> {
        let p = &req.machine_class.provider;
        self.timed(
            p,
            Call::GenerateMachineClassForMigration,
            self.inner.generate_machine_class_for_migration(req),
        )
        .await
    }

    async fn update_machine(
        &self,
        req: UpdateMachineRequest<'_>,
    ) -> Result<UpdateMachineResponse, DriverError> {
        let p = &req.machine_class.provider;
        self.timed(p, Call::UpdateMachine, self.inner.update_machine(req))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use driver::Code;

    #[test]
    fn phase_values_follow_upstream() {
        let cases = [
            (Some(MachinePhase::Terminating), -4),
            (Some(MachinePhase::Failed), -3),
            (Some(MachinePhase::CrashLoopBackOff), -2),
            (Some(MachinePhase::Unknown), -1),
            (Some(MachinePhase::Pending), 0),
            (None, 0),
            (Some(MachinePhase::Running), 1),
            (Some(MachinePhase::Available), 1),
        ];
        for (phase, want) in cases {
            assert_eq!(phase_value(phase), want, "{phase:?}");
        }
    }

    #[test]
    fn records_reconciles_and_driver_calls() {
        let m = Metrics::new();
        m.reconciled("machine", Duration::from_millis(3), false);
        m.reconciled("machine", Duration::from_millis(3), true);
        m.retried("machine");
        m.driver_call(
            "local",
            Call::CreateMachine,
            Duration::from_millis(2),
            Some(&DriverError::new(Code::ResourceExhausted, "quota")),
        );
        m.drained(Duration::from_secs(3));
        let text = m.encode();
        for want in [
            "mcm_controller_reconcile_duration_seconds_count{controller=\"machine\"} 2",
            "mcm_controller_reconcile_errors_total{controller=\"machine\"} 1",
            "mcm_workqueue_retries_total{name=\"machine\"} 1",
            "mcm_cloud_api_driver_request_duration_seconds_count{provider=\"local\",operation=\"CreateMachine\"} 1",
            "mcm_cloud_api_driver_requests_failed_total{provider=\"local\",operation=\"CreateMachine\",error_code=\"ResourceExhausted\"} 1",
            "mcm_machine_drain_duration_seconds_count 1",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
    }

    #[test]
    fn machine_gauges_come_from_the_cache() {
        let m = Metrics::new();
        let (store, mut writer) = kube::runtime::reflector::store::<Machine>();
        let running = Machine::test("a").with_phase(MachinePhase::Running);
        let failed = Machine::test("b").with_phase(MachinePhase::Failed);
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(running));
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(failed));
        m.observe_machines(store);
        let text = m.encode();
        for want in [
            "mcm_machine_items_total 2",
            "mcm_machines_by_phase{phase=\"Running\"} 1",
            "mcm_machines_by_phase{phase=\"Failed\"} 1",
            "mcm_machines_by_phase{phase=\"Pending\"} 0",
            "mcm_machine_current_status_phase{name=\"b\",namespace=\"default\"} -3",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
    }
}
