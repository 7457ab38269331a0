//! Expectations: the writes a controller made that its cache has not shown
//! yet (upstream's `ControllerExpectations`).
//!
//! A controller records what it is about to create, delete or change
//! before it writes, and plans again for that owner only once its cache
//! shows every recorded write (or the record expired). So a cache that
//! lags never makes it create a pod twice or count a finished pod twice.
//! Upstream counts creations; because our controllers choose object names
//! before creating them (see [`crate::meta::generate_name`]) we record
//! names, which also covers the write that is observed before the create
//! call returns. An object created and deleted again before the cache saw
//! it is reported by the watch's deletion ([`Expectations::observe_gone`]).
//!
//! Expectations live in memory only: after a restart the caches are listed
//! afresh, so there is nothing stale to wait for.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;

/// Upstream's `ExpectationsTimeout`: unfulfilled records are dropped after
/// this long, so a lost watch event delays a controller, never stops it.
pub const TTL: Duration = Duration::from_secs(300);

/// What the cache must show of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// It exists (it was created).
    Present,
    /// It is gone or being deleted (it was deleted).
    Gone,
    /// It is gone or no longer carries this finalizer (it was removed).
    WithoutFinalizer(String),
}

impl Expect {
    fn met(&self, cached: Option<&ObjectMeta>) -> bool {
        match (self, cached) {
            (Expect::Present, seen) => seen.is_some(),
            (Expect::Gone, None) => true,
            (Expect::Gone, Some(m)) => m.deletion_timestamp.is_some(),
            (Expect::WithoutFinalizer(_), None) => true,
            (Expect::WithoutFinalizer(f), Some(m)) => {
                !m.finalizers.as_ref().is_some_and(|fs| fs.contains(f))
            }
        }
    }
}

struct Pending {
    items: Vec<(String, Expect)>,
    since: Instant,
}

/// The expectations of one controller, keyed by owner (its UID).
#[derive(Default)]
pub struct Expectations {
    pending: Mutex<HashMap<String, Pending>>,
}

impl Expectations {
    /// Records that `owner` is about to write `items` (object name, what
    /// the cache will show). Call before writing.
    pub fn expect(&self, owner: &str, items: impl IntoIterator<Item = (String, Expect)>) {
        let mut map = self.pending.lock();
        let entry = map.entry(owner.to_string()).or_insert_with(|| Pending {
            items: Vec::new(),
            since: Instant::now(),
        });
        let before = entry.items.len();
        entry.items.extend(items);
        if entry.items.len() != before {
            entry.since = Instant::now();
        }
    }

    /// A write that failed will not be observed: stop expecting it.
    pub fn lower(&self, owner: &str, name: &str) {
        let mut map = self.pending.lock();
        if let Some(p) = map.get_mut(owner) {
            p.items.retain(|(n, _)| n != name);
            if p.items.is_empty() {
                map.remove(owner);
            }
        }
    }

    /// Whether the cache (looked up by object name) shows every write
    /// recorded for `owner`; met and expired records are dropped.
    pub fn satisfied(
        &self,
        owner: &str,
        now: Instant,
        cached: impl Fn(&str) -> Option<ObjectMeta>,
    ) -> bool {
        let mut map = self.pending.lock();
        let Some(p) = map.get_mut(owner) else {
            return true;
        };
        if now.saturating_duration_since(p.since) > TTL {
            map.remove(owner);
            return true;
        }
        p.items.retain(|(name, e)| !e.met(cached(name).as_ref()));
        if p.items.is_empty() {
            map.remove(owner);
            return true;
        }
        false
    }

    /// The watch saw `name` deleted: an expected creation of it will never
    /// show, so it is met.
    pub fn observe_gone(&self, name: &str) {
        let mut map = self.pending.lock();
        map.retain(|_, p| {
            p.items
                .retain(|(n, e)| !(n == name && *e == Expect::Present));
            !p.items.is_empty()
        });
    }

    /// The owner is gone: drop what it expected.
    pub fn forget(&self, owner: &str) {
        self.pending.lock().remove(owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn meta(deleting: bool, finalizers: &[&str]) -> ObjectMeta {
        ObjectMeta {
            deletion_timestamp: deleting.then(|| crate::meta::to_time(Utc::now())),
            finalizers: (!finalizers.is_empty())
                .then(|| finalizers.iter().map(|s| s.to_string()).collect()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn waits_until_the_cache_shows_every_write() {
        let e = Expectations::default();
        let now = Instant::now();
        e.expect(
            "rs",
            [
                ("a".to_string(), Expect::Present),
                ("b".to_string(), Expect::Gone),
                ("c".to_string(), Expect::WithoutFinalizer("f".into())),
            ],
        );
        let live = meta(false, &[]);
        let held = meta(false, &["f"]);
        // Nothing seen yet: a is missing, b is live, c still has f.
        assert!(!e.satisfied("rs", now, |n| match n {
            "b" => Some(live.clone()),
            "c" => Some(held.clone()),
            _ => None,
        }));
        // a shows up; b and c are still as before.
        assert!(!e.satisfied("rs", now, |n| match n {
            "a" | "b" => Some(live.clone()),
            "c" => Some(held.clone()),
            _ => None,
        }));
        // b is deleting, c lost its finalizer: all met (a was met before).
        let deleting = meta(true, &[]);
        assert!(e.satisfied("rs", now, |n| match n {
            "b" => Some(deleting.clone()),
            "c" => Some(live.clone()),
            _ => None,
        }));
        assert!(e.satisfied("other", now, |_| None));
    }

    #[test]
    fn failed_writes_deletions_and_expiry_release_the_owner() {
        let e = Expectations::default();
        e.expect("rs", [("a".to_string(), Expect::Present)]);
        e.lower("rs", "a");
        assert!(e.satisfied("rs", Instant::now(), |_| None));

        e.expect("rs", [("b".to_string(), Expect::Present)]);
        e.observe_gone("b");
        assert!(e.satisfied("rs", Instant::now(), |_| None));

        e.expect("rs", [("c".to_string(), Expect::Present)]);
        assert!(!e.satisfied("rs", Instant::now(), |_| None));
        assert!(
            e.satisfied("rs", Instant::now() + TTL + Duration::from_secs(1), |_| {
                None
            })
        );
    }
}
