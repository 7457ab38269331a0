//! How long a controller waits before it retries an object whose reconcile
//! failed: client-go's default controller rate limiter, as a plain value
//! with the clock passed in.
//!
//! Two limits are combined by taking the longer wait:
//!
//! - **Per object**: the first failure waits [`BASE_DELAY`], and every
//!   further failure of the same object doubles that, up to [`MAX_DELAY`].
//!   [`RateLimiter::forget`] (after a successful reconcile) starts the
//!   object over.
//! - **Overall**: a token bucket refilled at [`QPS`] per second holding at
//!   most [`BURST`] tokens. Every failure takes a token; when none is left
//!   the failure is scheduled for when its token will have been refilled,
//!   so a burst of failures across many objects (an API server outage
//!   during a large scale-up) is spread out instead of hammering the server.
//!
//! Retry periods a reconcile returns on purpose ("look again in 30 s") are
//! not failures and never pass through here.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Wait after an object's first failure.
pub const BASE_DELAY: Duration = Duration::from_millis(5);
/// Longest wait after repeated failures of one object.
pub const MAX_DELAY: Duration = Duration::from_secs(1000);
/// Overall retries per second once the burst is spent.
pub const QPS: f64 = 10.0;
/// Retries allowed at once before the overall rate applies.
pub const BURST: u32 = 100;

/// Per-object exponential backoff: `base · 2^(failures so far)`, capped.
#[derive(Clone, Debug)]
pub struct ItemBackoff<K> {
    base: Duration,
    max: Duration,
    /// Per object: failures since it last succeeded, and when the last
    /// one happened (for pruning objects that stopped failing silently,
    /// e.g. because they were deleted).
    failures: HashMap<K, (u32, Instant)>,
}

impl<K: Eq + Hash + Clone> ItemBackoff<K> {
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemBackoff {
            base,
            max,
            failures: HashMap::new(),
        }
    }

    /// Records a failure of `key` at `now` and returns how long it waits.
    pub fn when(&mut self, key: &K, now: Instant) -> Duration {
        let entry = self.failures.entry(key.clone()).or_insert((0, now));
        let exp = entry.0;
        entry.0 = entry.0.saturating_add(1);
        entry.1 = now;
        // 2^exp overflows long before it matters: anything past 2^63 is
        // far beyond any cap.
        let factor = 1u64.checked_shl(exp).unwrap_or(u64::MAX);
        let nanos = (self.base.as_nanos() as u64).saturating_mul(factor);
        Duration::from_nanos(nanos).min(self.max)
    }

    /// Failures of `key` since it last succeeded.
    pub fn failures(&self, key: &K) -> u32 {
        self.failures.get(key).map_or(0, |e| e.0)
    }

    /// Starts `key` over.
    pub fn forget(&mut self, key: &K) {
        self.failures.remove(key);
    }

    /// Drops objects whose last failure is more than twice the cap ago. An
    /// object that still fails is retried within the cap and refreshes its
    /// entry; one that is gone (deleted while failing) never will, and
    /// would otherwise stay forever.
    fn prune(&mut self, now: Instant) {
        let horizon = self.max * 2;
        self.failures
            .retain(|_, (_, last)| now.saturating_duration_since(*last) <= horizon);
    }

    /// Objects currently backing off.
    pub fn len(&self) -> usize {
        self.failures.len()
    }

    pub fn is_empty(&self) -> bool {
        self.failures.is_empty()
    }
}

/// A token bucket that hands out reservations: every call takes one token,
/// and when the bucket is empty the caller learns how long until its token
/// exists. Tokens may go negative, so reservations queue up one refill
/// interval apart.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    /// When `tokens` was last brought up to date; `None` before the first
    /// reservation (the bucket starts full).
    at: Option<Instant>,
}

impl TokenBucket {
    pub fn new(qps: f64, burst: u32) -> Self {
        TokenBucket {
            qps,
            burst: f64::from(burst),
            tokens: f64::from(burst),
            at: None,
        }
    }

    /// Takes a token at `now`; returns how long until it is available.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if let Some(at) = self.at {
            // A clock that steps backwards (callers racing to the lock
            // with slightly older readings) refills nothing.
            let elapsed = now.saturating_duration_since(at).as_secs_f64();
            self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        }
        self.at = Some(self.at.map_or(now, |at| at.max(now)));
        self.tokens -= 1.0;
        if self.tokens >= 0.0 || self.qps <= 0.0 {
            return Duration::ZERO;
        }
        // Whole nanoseconds, rounded, so that tenths of a second come out
        // exact.
        Duration::from_nanos((-self.tokens / self.qps * 1e9).round() as u64)
    }
}

/// The combination: the longer of the object's backoff and the bucket's
/// wait.
#[derive(Clone, Debug)]
pub struct RateLimiter<K> {
    items: ItemBackoff<K>,
    bucket: TokenBucket,
    /// Prune once more objects than this are tracked; after a prune, twice
    /// what is left (at least [`PRUNE_ABOVE`]), so that thousands of
    /// objects failing at once cost amortised O(1) per failure, not a
    /// scan of all of them each.
    prune_above: usize,
}

/// Objects tracked before stale entries are looked for.
const PRUNE_ABOVE: usize = 1024;

impl<K: Eq + Hash + Clone> Default for RateLimiter<K> {
    /// client-go's defaults: 5 ms doubling to 1000 s, 10 qps, burst 100.
    fn default() -> Self {
        RateLimiter::new(
            ItemBackoff::new(BASE_DELAY, MAX_DELAY),
            TokenBucket::new(QPS, BURST),
        )
    }
}

impl<K: Eq + Hash + Clone> RateLimiter<K> {
    pub fn new(items: ItemBackoff<K>, bucket: TokenBucket) -> Self {
        RateLimiter {
            items,
            bucket,
            prune_above: PRUNE_ABOVE,
        }
    }

    /// Records a failure of `key` at `now`; returns how long to wait
    /// before retrying it.
    pub fn when(&mut self, key: &K, now: Instant) -> Duration {
        if self.items.len() > self.prune_above {
            self.items.prune(now);
            self.prune_above = PRUNE_ABOVE.max(2 * self.items.len());
        }
        let item = self.items.when(key, now);
        let bucket = self.bucket.reserve(now);
        item.max(bucket)
    }

    /// `key` reconciled successfully: its next failure starts over at the
    /// base delay. The bucket is shared and keeps its state.
    pub fn forget(&mut self, key: &K) {
        self.items.forget(key);
    }

    /// Failures of `key` since it last succeeded.
    pub fn failures(&self, key: &K) -> u32 {
        self.items.failures(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn item_delays_double_from_the_base_to_the_cap() {
        let t0 = Instant::now();
        let mut b = ItemBackoff::new(BASE_DELAY, MAX_DELAY);
        // (failure number, expected wait)
        let cases = [
            (1, ms(5)),
            (2, ms(10)),
            (3, ms(20)),
            (4, ms(40)),
            (5, ms(80)),
            (10, ms(5 << 9)),
            (18, ms(5 << 17)), // 655.36 s, still below the cap
            (19, MAX_DELAY),   // 1310.72 s capped
            (20, MAX_DELAY),
            (200, MAX_DELAY), // no overflow, however many failures
        ];
        let mut n = 0;
        for (failure, want) in cases {
            let mut got = Duration::ZERO;
            while n < failure {
                got = b.when(&"a", t0);
                n += 1;
            }
            assert_eq!(got, want, "failure {failure}");
            assert_eq!(b.failures(&"a"), failure);
        }
    }

    #[test]
    fn forget_starts_an_object_over() {
        let t0 = Instant::now();
        let mut r = RateLimiter::<&str>::default();
        let before: Vec<Duration> = (0..4).map(|_| r.when(&"a", t0)).collect();
        assert_eq!(before, [ms(5), ms(10), ms(20), ms(40)]);
        r.forget(&"a");
        assert_eq!(r.failures(&"a"), 0);
        assert_eq!(r.when(&"a", t0), ms(5));
        assert_eq!(r.when(&"a", t0), ms(10));
    }

    #[test]
    fn objects_back_off_independently() {
        let t0 = Instant::now();
        let mut r = RateLimiter::<&str>::default();
        // (object, expected wait) in the order the failures happen.
        let cases = [
            ("a", ms(5)),
            ("a", ms(10)),
            ("b", ms(5)),
            ("a", ms(20)),
            ("b", ms(10)),
            ("c", ms(5)),
        ];
        for (i, (key, want)) in cases.into_iter().enumerate() {
            assert_eq!(r.when(&key, t0), want, "case {i}: {key}");
        }
        r.forget(&"a");
        assert_eq!(r.when(&"b", t0), ms(20), "forgetting a leaves b alone");
        assert_eq!(r.when(&"a", t0), ms(5));
    }

    #[test]
    fn bucket_spreads_a_burst_at_the_overall_rate() {
        let t0 = Instant::now();
        let mut r = RateLimiter::<u32>::default();
        // 100 objects fail at once: the burst covers them, and each waits
        // only its own first backoff.
        for k in 0..BURST {
            assert_eq!(r.when(&k, t0), BASE_DELAY, "object {k}");
        }
        // The bucket is empty: further failures queue 100 ms apart (10 qps),
        // each later than its own backoff would demand.
        for (i, k) in (BURST..BURST + 5).enumerate() {
            let want = ms(100 * (i as u64 + 1));
            assert_eq!(r.when(&k, t0), want, "object {k}");
        }
        // Half a second later five tokens have been refilled, and all of
        // them are already promised to the queued failures: the next one
        // waits for the sixth.
        assert_eq!(r.when(&999, t0 + ms(500)), ms(100));
        // After a long quiet period the bucket is full again, but holds no
        // more than the burst.
        let later = t0 + Duration::from_secs(3600);
        for k in 0..BURST {
            assert_eq!(r.when(&(2000 + k), later), BASE_DELAY);
        }
        assert_eq!(r.when(&5000, later), ms(100));
    }

    #[test]
    fn the_longer_of_the_two_limits_wins() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(
            ItemBackoff::new(BASE_DELAY, MAX_DELAY),
            TokenBucket::new(QPS, 1),
        );
        // The bucket allows one at once; the second waits 100 ms for the
        // bucket although its own backoff is 10 ms.
        assert_eq!(r.when(&"a", t0), ms(5));
        assert_eq!(r.when(&"a", t0), ms(100));
        // Much later, the bucket is full and the object's own backoff
        // (third failure: 20 ms) is what counts.
        assert_eq!(r.when(&"a", t0 + Duration::from_secs(10)), ms(20));
    }

    #[test]
    fn a_clock_reading_from_the_past_refills_nothing() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1.0, 1);
        assert_eq!(b.reserve(t0 + Duration::from_secs(1)), Duration::ZERO);
        // An older reading: no refill, so this one waits a whole second.
        assert_eq!(b.reserve(t0), Duration::from_secs(1));
    }

    #[test]
    fn entries_of_objects_that_stopped_failing_are_pruned() {
        let t0 = Instant::now();
        let mut r = RateLimiter::<usize>::default();
        for k in 0..=PRUNE_ABOVE {
            r.when(&k, t0);
        }
        assert_eq!(r.items.len(), PRUNE_ABOVE + 1);
        // Long after: every old entry is gone, and the new failure is
        // counted from scratch.
        let later = t0 + MAX_DELAY * 3;
        assert_eq!(r.when(&0, later), BASE_DELAY);
        assert_eq!(r.items.len(), 1);
        assert_eq!(r.prune_above, PRUNE_ABOVE);
    }

    #[test]
    fn many_objects_failing_at_once_are_not_scanned_on_every_failure() {
        let t0 = Instant::now();
        let mut r = RateLimiter::<usize>::default();
        for k in 0..=PRUNE_ABOVE {
            r.when(&k, t0);
        }
        // The prune at PRUNE_ABOVE + 1 found nothing stale: the next one
        // waits until twice as many are tracked.
        r.when(&(PRUNE_ABOVE + 1), t0);
        assert_eq!(r.prune_above, 2 * (PRUNE_ABOVE + 1));
        for k in 0..3 * PRUNE_ABOVE {
            r.when(&k, t0);
        }
        // Past that, one more prune, and the threshold doubles again.
        assert_eq!(r.items.len(), 3 * PRUNE_ABOVE);
        assert_eq!(r.prune_above, 2 * (2 * (PRUNE_ABOVE + 1) + 1));
    }
}
