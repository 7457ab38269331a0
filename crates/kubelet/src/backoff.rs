//! The kubelet's crash-loop back-off, as upstream's `flowcontrol.Backoff`
//! keyed by pod and container: the first restart of a failed container is
//! immediate, each further one waits twice as long as the one before (10 s,
//! 20 s, … capped at 5 min), and a container that went longer than twice
//! the cap without a restart starts over at 10 s.
//!
//! The record is kept on disk next to the container's attempts, so a
//! restarted trellis continues the back-off instead of resetting it, and a
//! new pod (a new UID, a new directory) starts fresh.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The first back-off (upstream `initialDuration`).
pub const INITIAL: Duration = Duration::from_secs(10);
/// The cap (upstream `MaxContainerBackOff`).
pub const MAX: Duration = Duration::from_secs(300);

/// One container's back-off: the current delay and when it last grew.
/// Times are Unix milliseconds, so the record survives a restart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backoff {
    /// The current delay; zero before the first restart.
    pub delay_ms: u64,
    /// When the delay was last set (the finish time of the attempt that
    /// caused it).
    pub last_update_ms: u64,
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

impl Backoff {
    /// Whether the entry has gone stale: nothing happened for twice the
    /// cap, so the next failure starts again at [`INITIAL`].
    fn expired(&self, event_ms: u64) -> bool {
        self.delay_ms == 0 || event_ms.saturating_sub(self.last_update_ms) > 2 * ms(MAX)
    }

    /// How long a restart of a container that finished at `finished_ms`
    /// must still wait at `now_ms`; `None` when it may start now
    /// (upstream `IsInBackOffSince`).
    pub fn remaining(&self, finished_ms: u64, now_ms: u64) -> Option<Duration> {
        if self.expired(finished_ms) {
            return None;
        }
        let since = now_ms.saturating_sub(finished_ms);
        (since < self.delay_ms).then(|| Duration::from_millis(self.delay_ms - since))
    }

    /// The record after a restart of a container that finished at
    /// `finished_ms` (upstream `Next`).
    pub fn next(&self, finished_ms: u64) -> Backoff {
        let delay_ms = if self.expired(finished_ms) {
            ms(INITIAL)
        } else {
            (self.delay_ms * 2).min(ms(MAX))
        };
        Backoff {
            delay_ms,
            last_update_ms: finished_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays a crash loop in which each attempt runs `run_ms` and is
    /// restarted as soon as the back-off allows; returns the waits.
    fn waits(failures: usize, run_ms: u64) -> Vec<u64> {
        let mut b = Backoff::default();
        let mut now = 0u64;
        let mut out = Vec::new();
        for _ in 0..failures {
            now += run_ms;
            let finished = now;
            let wait = b.remaining(finished, now).map_or(0, ms);
            out.push(wait / 1000);
            now += wait;
            assert_eq!(b.remaining(finished, now), None, "may start after waiting");
            b = b.next(finished);
        }
        out
    }

    #[test]
    fn first_restart_is_immediate_then_doubles_to_the_cap() {
        assert_eq!(
            waits(9, 1_000),
            [0, 10, 20, 40, 80, 160, 300, 300, 300],
            "upstream: immediate, 10s, 20s, … 5 min"
        );
    }

    #[test]
    fn a_long_run_resets_the_back_off() {
        let b = Backoff::default().next(0).next(1_000).next(2_000);
        assert_eq!(b.delay_ms, 40_000);
        // Finished 11 minutes after the last restart: more than twice the cap.
        let late = 2_000 + 11 * 60_000;
        assert_eq!(b.remaining(late, late), None);
        assert_eq!(b.next(late).delay_ms, 10_000);
        // Finished 9 minutes after: still in the loop.
        let soon = 2_000 + 9 * 60_000;
        assert_eq!(b.remaining(soon, soon), Some(Duration::from_secs(40)));
        assert_eq!(b.next(soon).delay_ms, 80_000);
    }

    #[test]
    fn remaining_counts_down_from_the_finish() {
        let b = Backoff::default().next(0);
        assert_eq!(b.remaining(1_000, 4_000), Some(Duration::from_secs(7)));
        assert_eq!(b.remaining(1_000, 11_000), None);
        // A clock behind the finish time waits the whole delay, no panic.
        assert_eq!(b.remaining(5_000, 1_000), Some(Duration::from_secs(10)));
    }
}
