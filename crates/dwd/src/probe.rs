//! The cadence of one shoot's probes (spec §1.4, §1.6): the jittered
//! interval after each run, the throttling back-off on top of it, and what
//! a run amounted to.

use std::time::Duration;

use crate::lease::Decision;

/// How long the prober backs off after the API throttled it (429).
pub const THROTTLE_BACKOFF: Duration = Duration::from_secs(10);
/// Attempts to read the kubeconfig Secret, and the pause between them.
pub const SECRET_READ_ATTEMPTS: u32 = 3;
pub const SECRET_READ_PAUSE: Duration = Duration::from_millis(100);

/// The pause after a run: `interval × (1 + r × factor)` for `r` in [0, 1)
/// (client-go's `wait.Jitter`; a factor ≤ 0 means no jitter), plus the
/// throttling back-off when the run was throttled. Upstream arms a 10 s
/// timer at the 429 and waits for it before the next run; the spec has the
/// back-off come on top of the interval, which this does.
pub fn pause_after_run(
    interval: Duration,
    jitter_factor: f64,
    r: f64,
    throttled: bool,
) -> Duration {
    let jitter = if jitter_factor > 0.0 && r.is_finite() {
        interval.mul_f64(r.clamp(0.0, 1.0) * jitter_factor)
    } else {
        Duration::ZERO
    };
    interval
        + jitter
        + if throttled {
            THROTTLE_BACKOFF
        } else {
            Duration::ZERO
        }
}

/// How one probe run ended: the metrics' `result` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunResult {
    /// The kubeconfig Secret is missing or unusable: no probe, no scaling.
    NoKubeconfig,
    /// `GET /version` failed: no lease probe, no scaling.
    ApiServerUnreachable,
    /// Listing nodes, machines or leases failed: no scaling.
    LeaseProbeFailed,
    /// One candidate lease: no scaling either way.
    Skipped,
    /// Enough leases are renewed: scale up (a no-op when nothing is down).
    Healthy,
    /// Too many leases expired: scale down.
    LeasesExpired,
}

impl RunResult {
    pub fn label(self) -> &'static str {
        match self {
            RunResult::NoKubeconfig => "no_kubeconfig",
            RunResult::ApiServerUnreachable => "api_server_unreachable",
            RunResult::LeaseProbeFailed => "lease_probe_failed",
            RunResult::Skipped => "skipped",
            RunResult::Healthy => "healthy",
            RunResult::LeasesExpired => "leases_expired",
        }
    }

    /// The result of a run whose lease probe decided.
    pub fn of(decision: Decision) -> RunResult {
        match decision {
            Decision::Skip => RunResult::Skipped,
            Decision::ScaleUp => RunResult::Healthy,
            Decision::ScaleDown => RunResult::LeasesExpired,
        }
    }
}

/// Whether a failed Secret read is tried again: not when it is absent.
pub fn retry_secret_read(attempt: u32, not_found: bool) -> bool {
    !not_found && attempt < SECRET_READ_ATTEMPTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_after_a_run() {
        let s = Duration::from_secs;
        // (case, interval, factor, r, throttled, pause)
        let table = [
            ("no jitter drawn", s(10), 0.2, 0.0, false, s(10)),
            (
                "largest jitter",
                s(10),
                0.2,
                0.999_999,
                false,
                Duration::from_nanos(11_999_998_000),
            ),
            ("half", s(10), 0.2, 0.5, false, s(11)),
            ("factor 0: none", s(10), 0.0, 0.5, false, s(10)),
            ("negative factor: none", s(10), -1.0, 0.5, false, s(10)),
            ("scenario 11: throttled", s(10), 0.0, 0.5, true, s(20)),
            ("throttled with jitter", s(10), 0.2, 0.5, true, s(21)),
        ];
        for (name, interval, factor, r, throttled, want) in table {
            assert_eq!(
                pause_after_run(interval, factor, r, throttled),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn scenario_10_a_missing_secret_is_read_once() {
        assert!(!retry_secret_read(1, true), "NotFound is not retried");
        assert!(retry_secret_read(1, false));
        assert!(retry_secret_read(2, false));
        assert!(!retry_secret_read(3, false), "three attempts at most");
    }

    #[test]
    fn results_of_decisions() {
        assert_eq!(RunResult::of(Decision::Skip), RunResult::Skipped);
        assert_eq!(RunResult::of(Decision::ScaleUp).label(), "healthy");
        assert_eq!(RunResult::of(Decision::ScaleDown).label(), "leases_expired");
    }
}
