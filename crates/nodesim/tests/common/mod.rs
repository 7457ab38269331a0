//! What the simulator tests share beyond the test kit: its timing preset
//! with status reports due within a test's run.

#![allow(dead_code)]

use std::time::Duration;

use nodesim::SimConfig;

pub use testkit::{bare_cluster as start, eventually};

/// The kit's fast timing, with full status reports every minute instead of
/// every five, so a long test sees one.
pub fn fast() -> SimConfig {
    SimConfig {
        status_report_interval: Duration::from_secs(60),
        ..testkit::sim::fast()
    }
}
