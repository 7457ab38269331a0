//! The simulated kubelets' timing at test scale.

use std::time::Duration;

use nodesim::SimConfig;

/// Simulator timing compressed so that a test sees boots, Lease renewals,
/// grace periods and retries within a few seconds; everything else as in
/// production.
pub fn fast() -> SimConfig {
    SimConfig {
        lease_renew_interval: Duration::from_millis(300),
        node_monitor_grace_period: Duration::from_secs(1),
        tick: Duration::from_millis(50),
        min_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        ..SimConfig::default()
    }
}
