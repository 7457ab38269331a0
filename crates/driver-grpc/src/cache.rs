//! The provider's cache of the classes and secrets it fetched, keyed by
//! resourceVersion (or the digest the MCM sends for objects that have
//! none). One version always names one content, so an entry is never
//! stale; it only ages out. A few versions are kept per object, because
//! during a rollout operations of the old and the new version of a class
//! arrive interleaved, and keeping only the newest would fetch each anew.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Versions kept per object; the least recently used goes first.
pub const VERSIONS_PER_OBJECT: usize = 4;

struct Slot<T> {
    version: String,
    value: Arc<T>,
    used: u64,
}

/// Fetched objects by namespace, name and version. Thread-safe.
pub struct Cache<T> {
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    tick: u64,
    objects: HashMap<(String, String), Vec<Slot<T>>>,
}

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Cache {
            inner: Mutex::new(Inner {
                tick: 0,
                objects: HashMap::new(),
            }),
        }
    }
}

impl<T> Cache<T> {
    /// The cached version, if any.
    pub fn get(&self, namespace: &str, name: &str, version: &str) -> Option<Arc<T>> {
        let mut inner = self.inner.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let slots = inner
            .objects
            .get_mut(&(namespace.to_string(), name.to_string()))?;
        let slot = slots.iter_mut().find(|s| s.version == version)?;
        slot.used = tick;
        Some(slot.value.clone())
    }

    /// Caches a fetched version, dropping the least recently used one of
    /// the object beyond [`VERSIONS_PER_OBJECT`].
    pub fn insert(&self, namespace: &str, name: &str, version: &str, value: Arc<T>) {
        let mut inner = self.inner.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let slots = inner
            .objects
            .entry((namespace.to_string(), name.to_string()))
            .or_default();
        if let Some(slot) = slots.iter_mut().find(|s| s.version == version) {
            slot.value = value;
            slot.used = tick;
            return;
        }
        if slots.len() >= VERSIONS_PER_OBJECT
            && let Some(oldest) = slots
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.used)
                .map(|(i, _)| i)
        {
            slots.swap_remove(oldest);
        }
        slots.push(Slot {
            version: version.to_string(),
            value,
            used: tick,
        });
    }

    /// How many versions are cached, all objects together.
    pub fn len(&self) -> usize {
        self.inner.lock().objects.values().map(Vec::len).sum()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_kept_apart_and_the_least_used_goes() {
        let c: Cache<String> = Cache::default();
        assert_eq!(c.get("ns", "a", "1"), None);
        for v in 1..=VERSIONS_PER_OBJECT {
            c.insert("ns", "a", &v.to_string(), Arc::new(format!("a{v}")));
        }
        c.insert("ns", "b", "1", Arc::new("b1".into()));
        assert_eq!(c.len(), VERSIONS_PER_OBJECT + 1);
        // Version 1 is used, so version 2 is the least recently used.
        assert_eq!(
            c.get("ns", "a", "1").as_deref().map(String::as_str),
            Some("a1")
        );
        c.insert("ns", "a", "9", Arc::new("a9".into()));
        assert_eq!(c.get("ns", "a", "2"), None);
        assert!(c.get("ns", "a", "1").is_some());
        assert!(c.get("ns", "a", "9").is_some());
        // Other objects and namespaces are untouched.
        assert_eq!(
            c.get("ns", "b", "1").as_deref().map(String::as_str),
            Some("b1")
        );
        assert_eq!(c.get("other", "b", "1"), None);
        assert_eq!(c.len(), VERSIONS_PER_OBJECT + 1);
    }
}
