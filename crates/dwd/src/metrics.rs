//! Prometheus metrics of the prober and the weeder. Upstream has none
//! (its monitoring page is "Work In Progress"); these say what an operator
//! asks during an outage: which shoots' probes fail and why, what was
//! scaled, and what was weeded.
//!
//! * `dwd_prober_probes_total{namespace, result}`: probe runs by how they
//!   ended (`probe::RunResult::label`).
//! * `dwd_prober_probe_duration_seconds`: one run, scaling included.
//! * `dwd_prober_throttled_total{namespace}`: runs the API throttled (429).
//! * `dwd_prober_node_leases{namespace, state}`: candidate leases of the
//!   last lease probe, `expired` or `renewed`.
//! * `dwd_prober_api_requests_total{cluster}`: requests the probes made,
//!   to the `seed` or a `shoot` (what a probe costs).
//! * `dwd_prober_scale_operations_total{namespace, resource, operation,
//!   result}`: each resource's scale step (`scaled`, `unchanged`,
//!   `ignored`, `absent`, `failed`).
//! * `dwd_prober_probers`: probers running.
//! * `dwd_weeder_weeders_started_total{namespace, service}` and
//!   `dwd_weeder_pods_deleted_total{namespace, service}`; `dwd_weeder_weeders`:
//!   weeders watching now.

use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProbeLabels {
    namespace: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespaceLabels {
    namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    namespace: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabels {
    cluster: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScaleLabels {
    namespace: String,
    resource: String,
    operation: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceLabels {
    namespace: String,
    service: String,
}

/// Which API a probe request went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cluster {
    Seed,
    Shoot,
}

/// The metrics of one dependency-watchdog process (prober, weeder, or
/// both in `trellis up`).
pub struct Metrics {
    registry: Registry,
    probes: Family<ProbeLabels, Counter>,
    probe_duration: Histogram,
    throttled: Family<NamespaceLabels, Counter>,
    leases: Family<LeaseLabels, Gauge>,
    requests: Family<ClusterLabels, Counter>,
    scale_operations: Family<ScaleLabels, Counter>,
    probers: Gauge,
    weeders_started: Family<ServiceLabels, Counter>,
    pods_deleted: Family<ServiceLabels, Counter>,
    weeders: Gauge,
    ready: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let probes = Family::<ProbeLabels, Counter>::default();
        registry.register(
            "dwd_prober_probes",
            "Probe runs by how they ended",
            probes.clone(),
        );
        // A probe is a few requests (ms) unless it scales (seconds).
        let probe_duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "dwd_prober_probe_duration_seconds",
            "Duration of one probe run, scaling included",
            probe_duration.clone(),
        );
        let throttled = Family::<NamespaceLabels, Counter>::default();
        registry.register(
            "dwd_prober_throttled",
            "Probe runs throttled by an API server (429)",
            throttled.clone(),
        );
        let leases = Family::<LeaseLabels, Gauge>::default();
        registry.register(
            "dwd_prober_node_leases",
            "Candidate node leases of the last lease probe",
            leases.clone(),
        );
        let requests = Family::<ClusterLabels, Counter>::default();
        registry.register(
            "dwd_prober_api_requests",
            "API requests made by probes",
            requests.clone(),
        );
        let scale_operations = Family::<ScaleLabels, Counter>::default();
        registry.register(
            "dwd_prober_scale_operations",
            "Scale steps of dependent resources",
            scale_operations.clone(),
        );
        let probers = Gauge::default();
        registry.register("dwd_prober_probers", "Probers running", probers.clone());
        let weeders_started = Family::<ServiceLabels, Counter>::default();
        registry.register(
            "dwd_weeder_weeders_started",
            "Weeders started by an endpoint slice turning ready",
            weeders_started.clone(),
        );
        let pods_deleted = Family::<ServiceLabels, Counter>::default();
        registry.register(
            "dwd_weeder_pods_deleted",
            "Crash-looping dependant pods deleted",
            pods_deleted.clone(),
        );
        let weeders = Gauge::default();
        registry.register(
            "dwd_weeder_weeders",
            "Weeders watching pods",
            weeders.clone(),
        );
        Metrics {
            registry,
            probes,
            probe_duration,
            throttled,
            leases,
            requests,
            scale_operations,
            probers,
            weeders_started,
            pods_deleted,
            weeders,
            ready: AtomicBool::new(false),
        }
    }

    pub fn probe(&self, namespace: &str, result: &'static str, seconds: f64) {
        self.probes
            .get_or_create(&ProbeLabels {
                namespace: namespace.to_string(),
                result,
            })
            .inc();
        self.probe_duration.observe(seconds);
    }

    pub fn throttled(&self, namespace: &str) {
        self.throttled
            .get_or_create(&NamespaceLabels {
                namespace: namespace.to_string(),
            })
            .inc();
    }

    pub fn leases(&self, namespace: &str, expired: usize, candidates: usize) {
        let set = |state, n: usize| {
            self.leases
                .get_or_create(&LeaseLabels {
                    namespace: namespace.to_string(),
                    state,
                })
                .set(n as i64);
        };
        set("expired", expired);
        set("renewed", candidates.saturating_sub(expired));
    }

    pub fn request(&self, cluster: Cluster) {
        let cluster = match cluster {
            Cluster::Seed => "seed",
            Cluster::Shoot => "shoot",
        };
        self.requests
            .get_or_create(&ClusterLabels { cluster })
            .inc();
    }

    /// Requests made so far to the seed and to shoots.
    pub fn requests(&self) -> (u64, u64) {
        let get = |cluster| {
            self.requests
                .get_or_create(&ClusterLabels { cluster })
                .get()
        };
        (get("seed"), get("shoot"))
    }

    /// Probe runs so far that ended with `result`, all namespaces.
    pub fn probes_with(&self, namespace: &str, result: &'static str) -> u64 {
        self.probes
            .get_or_create(&ProbeLabels {
                namespace: namespace.to_string(),
                result,
            })
            .get()
    }

    pub fn scale_operation(
        &self,
        namespace: &str,
        resource: &str,
        operation: &'static str,
        result: &'static str,
    ) {
        self.scale_operations
            .get_or_create(&ScaleLabels {
                namespace: namespace.to_string(),
                resource: resource.to_string(),
                operation,
                result,
            })
            .inc();
    }

    pub fn set_probers(&self, n: usize) {
        self.probers.set(n as i64);
    }

    pub fn weeder_started(&self, namespace: &str, service: &str) {
        self.weeders_started
            .get_or_create(&ServiceLabels {
                namespace: namespace.to_string(),
                service: service.to_string(),
            })
            .inc();
    }

    pub fn pod_deleted(&self, namespace: &str, service: &str) {
        self.pods_deleted
            .get_or_create(&ServiceLabels {
                namespace: namespace.to_string(),
                service: service.to_string(),
            })
            .inc();
    }

    /// Pods the weeders of `service` in `namespace` deleted so far.
    pub fn pods_deleted(&self, namespace: &str, service: &str) -> u64 {
        self.pods_deleted
            .get_or_create(&ServiceLabels {
                namespace: namespace.to_string(),
                service: service.to_string(),
            })
            .get()
    }

    pub fn set_weeders(&self, n: usize) {
        self.weeders.set(n as i64);
    }

    /// The controllers run on synced watches (for `/readyz`).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_metrics_are_exposed() {
        let m = Metrics::new();
        m.probe("shoot--p--a", "leases_expired", 0.01);
        m.leases("shoot--p--a", 7, 10);
        m.scale_operation(
            "shoot--p--a",
            "machine-controller-manager",
            "scale_down",
            "scaled",
        );
        m.pod_deleted("shoot--p--a", "etcd-main-client");
        m.request(Cluster::Shoot);
        let text = m.encode();
        for line in [
            r#"dwd_prober_probes_total{namespace="shoot--p--a",result="leases_expired"} 1"#,
            r#"dwd_prober_node_leases{namespace="shoot--p--a",state="expired"} 7"#,
            r#"dwd_prober_node_leases{namespace="shoot--p--a",state="renewed"} 3"#,
            r#"dwd_prober_scale_operations_total{namespace="shoot--p--a",resource="machine-controller-manager",operation="scale_down",result="scaled"} 1"#,
            r#"dwd_weeder_pods_deleted_total{namespace="shoot--p--a",service="etcd-main-client"} 1"#,
            r#"dwd_prober_api_requests_total{cluster="shoot"} 1"#,
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        assert_eq!(m.requests(), (0, 1));
    }
}
