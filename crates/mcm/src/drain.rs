//! Drain plans: which pods of a node a drain handles and how. Mirror and
//! DaemonSet pods stay; pods without persistent volumes are evicted in
//! parallel; pods with volumes one at a time, highest priority first, each
//! waiting for its volumes to detach. A drain is forced (pods deleted with
//! grace 0, no eviction) when asked by label, when the drain timeout since
//! the deletion passed, or when the node has been NotReady or read-only for
//! over five minutes.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// The part of a pod a drain plan needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    /// A static pod's mirror (annotation `kubernetes.io/config.mirror`).
    pub mirror: bool,
    /// Controlled by a DaemonSet.
    pub daemonset: bool,
    /// Uses a PersistentVolumeClaim.
    pub has_volumes: bool,
    pub priority: i32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainPlan {
    /// Evicted (or, forced, deleted) all at once.
    pub parallel: Vec<PodInfo>,
    /// Evicted one by one in this order, waiting for volume detachment.
    pub serial: Vec<PodInfo>,
    pub force: bool,
}

/// Builds the plan for the pods on a node.
pub fn plan(pods: &[PodInfo], force: bool) -> DrainPlan {
    let mut out = DrainPlan {
        force,
        ..Default::default()
    };
    for p in pods.iter().filter(|p| !p.mirror && !p.daemonset) {
        if force || !p.has_volumes {
            out.parallel.push(p.clone());
        } else {
            out.serial.push(p.clone());
        }
    }
    out.serial
        .sort_by(|a, b| b.priority.cmp(&a.priority).then(a.name.cmp(&b.name)));
    out
}

/// How often eviction is retried after a 429.
pub const EVICTION_RETRY_INTERVAL: Duration = Duration::from_secs(20);
/// How long a node must have been NotReady (or read-only) before a drain is
/// forced.
pub const UNHEALTHY_FORCE_AFTER: Duration = Duration::from_secs(5 * 60);
/// The drain timeout and retries a forced drain uses.
pub const FORCED_DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Eviction attempts per pod: the configured number, but no more than fit in
/// the drain timeout at one try per retry interval (at least one).
pub fn max_evict_retries(configured: u32, drain_timeout: Duration) -> u32 {
    let fit = (drain_timeout.as_secs() / EVICTION_RETRY_INTERVAL.as_secs()).max(1) as u32;
    configured.min(fit).max(1)
}

/// Why a drain is forced, if it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForceReason {
    /// The machine carries `force-deletion: "True"`.
    Label,
    /// The drain timeout since the deletion started has passed.
    DrainTimeout,
    /// Ready has not been True for over five minutes.
    NotReady,
    /// ReadonlyFilesystem has not been False for over five minutes.
    ReadonlyFilesystem,
}

/// The facts behind the force decision.
#[derive(Clone, Debug)]
pub struct ForceInput {
    pub force_label: bool,
    pub deletion_started: DateTime<Utc>,
    pub drain_timeout: Duration,
    /// When Ready last became something other than True, if it is not True.
    pub not_ready_since: Option<DateTime<Utc>>,
    /// When ReadonlyFilesystem last became something other than False.
    pub readonly_since: Option<DateTime<Utc>>,
}

pub fn force_reason(f: &ForceInput, now: DateTime<Utc>) -> Option<ForceReason> {
    let past = |since: DateTime<Utc>, d: Duration| (now - since).to_std().is_ok_and(|e| e > d);
    if f.force_label {
        Some(ForceReason::Label)
    } else if past(f.deletion_started, f.drain_timeout) {
        Some(ForceReason::DrainTimeout)
    } else if f
        .not_ready_since
        .is_some_and(|s| past(s, UNHEALTHY_FORCE_AFTER))
    {
        Some(ForceReason::NotReady)
    } else if f
        .readonly_since
        .is_some_and(|s| past(s, UNHEALTHY_FORCE_AFTER))
    {
        Some(ForceReason::ReadonlyFilesystem)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn pod(name: &str, volumes: bool, priority: i32) -> PodInfo {
        PodInfo {
            namespace: "default".into(),
            name: name.into(),
            mirror: false,
            daemonset: false,
            has_volumes: volumes,
            priority,
        }
    }

    #[test]
    fn plans() {
        let mut mirror = pod("mirror", false, 0);
        mirror.mirror = true;
        let mut ds = pod("ds", false, 0);
        ds.daemonset = true;
        let pods = vec![
            pod("web", false, 0),
            pod("db-low", true, 1),
            pod("db-high", true, 100),
            mirror,
            ds,
        ];
        let p = plan(&pods, false);
        assert_eq!(
            p.parallel
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>(),
            ["web"]
        );
        assert_eq!(
            p.serial.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["db-high", "db-low"]
        );
        let f = plan(&pods, true);
        assert_eq!(f.parallel.len(), 3);
        assert!(f.serial.is_empty());
    }

    #[test]
    fn retries_fit_the_timeout() {
        assert_eq!(max_evict_retries(360, Duration::from_secs(2 * 3600)), 360);
        assert_eq!(max_evict_retries(360, Duration::from_secs(600)), 30);
        assert_eq!(max_evict_retries(360, Duration::from_secs(5)), 1);
        assert_eq!(max_evict_retries(3, Duration::from_secs(600)), 3);
    }

    #[test]
    fn force_reasons() {
        let t = |s: i64| Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap();
        let base = ForceInput {
            force_label: false,
            deletion_started: t(0),
            drain_timeout: Duration::from_secs(600),
            not_ready_since: None,
            readonly_since: None,
        };
        assert_eq!(force_reason(&base, t(100)), None);
        assert_eq!(force_reason(&base, t(601)), Some(ForceReason::DrainTimeout));
        let label = ForceInput {
            force_label: true,
            ..base.clone()
        };
        assert_eq!(force_reason(&label, t(0)), Some(ForceReason::Label));
        let nr = ForceInput {
            not_ready_since: Some(t(0)),
            ..base.clone()
        };
        assert_eq!(force_reason(&nr, t(299)), None);
        assert_eq!(force_reason(&nr, t(301)), Some(ForceReason::NotReady));
        let ro = ForceInput {
            readonly_since: Some(t(0)),
            ..base
        };
        assert_eq!(
            force_reason(&ro, t(301)),
            Some(ForceReason::ReadonlyFilesystem)
        );
    }
}
