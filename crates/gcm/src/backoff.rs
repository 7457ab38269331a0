//! How long a failed reconcile waits before its retry: per object,
//! exponential from [`BASE`] to [`MAX`], forgotten on the first success.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;

/// The first retry's delay.
pub const BASE: Duration = Duration::from_millis(500);
/// The longest delay.
pub const MAX: Duration = Duration::from_secs(300);

/// The delay before retry number `failures` (1 for the first failure).
pub fn delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    BASE.saturating_mul(1u32 << doublings).min(MAX)
}

/// Failures since the last success, per `controller/namespace/name`.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Records a failure of `key`; returns how long its retry waits.
    pub fn failed(&self, key: &str) -> Duration {
        let mut map = self.failures.lock();
        let n = map.entry(key.to_string()).or_default();
        *n = n.saturating_add(1);
        delay(*n)
    }

    /// `key` reconciled: its next failure starts over at [`BASE`].
    pub fn succeeded(&self, key: &str) {
        self.failures.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays() {
        let cases = [
            (0, BASE),
            (1, BASE),
            (2, BASE * 2),
            (3, BASE * 4),
            (10, BASE * 512),
            (11, MAX),
            (u32::MAX, MAX),
        ];
        for (n, want) in cases {
            assert_eq!(delay(n), want, "{n}");
        }
    }

    #[test]
    fn success_resets() {
        let b = Backoff::default();
        assert_eq!(b.failed("k"), BASE);
        assert_eq!(b.failed("k"), BASE * 2);
        assert_eq!(b.failed("other"), BASE);
        b.succeeded("k");
        assert_eq!(b.failed("k"), BASE);
    }
}
