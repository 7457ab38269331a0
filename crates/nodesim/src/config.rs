//! [`SimConfig`]: the kubelet settings and pacing shared by every simulated
//! node of one simulator.

use std::time::Duration;

/// Settings of a [`crate::NodeSimulator`]. The defaults are the kubelet's and
/// the node-lifecycle controller's defaults, so that controllers see the
/// timing they would see on a real cluster.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// How often each node renews its Lease (kubelet: `renewInterval`, a
    /// quarter of the lease duration).
    pub lease_renew_interval: Duration,
    /// `spec.leaseDurationSeconds` of the node leases (kubelet:
    /// `nodeLeaseDurationSeconds`).
    pub lease_duration_seconds: i32,
    /// How long a node may stay silent before its conditions turn `Unknown`
    /// (node-lifecycle controller: `--node-monitor-grace-period`).
    pub node_monitor_grace_period: Duration,
    /// How often an unchanged node status is posted anyway, refreshing the
    /// conditions' `lastHeartbeatTime` (kubelet: `nodeStatusReportFrequency`).
    /// Changes are posted at once.
    pub status_report_interval: Duration,
    /// How often the simulator looks for due work when nothing wakes it.
    /// Bounds the lateness of lease renewals and boot completions.
    pub tick: Duration,
    /// Most API requests in flight at once, across all nodes and pods.
    pub max_in_flight: usize,
    /// `status.nodeInfo.kubeletVersion` (and kube-proxy version) reported.
    pub kubelet_version: String,
    /// First retry delay after a failed API call; doubles up to
    /// [`SimConfig::max_backoff`].
    pub min_backoff: Duration,
    /// Longest retry delay after repeated failures.
    pub max_backoff: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            lease_renew_interval: Duration::from_secs(10),
            lease_duration_seconds: 40,
            node_monitor_grace_period: Duration::from_secs(40),
            status_report_interval: Duration::from_secs(5 * 60),
            tick: Duration::from_secs(1),
            max_in_flight: 64,
            kubelet_version: "v1.32.0".to_string(),
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}
