//! The router's table of the classes and secrets it has referred to in
//! operations, which `GetMachineClass` and `GetSecret` answer from.
//!
//! The router never reads the API itself: it answers with exactly the
//! objects the controllers handed the driver call (for the secret, the
//! class's secrets merged, which exist nowhere else). An entry lives while
//! an operation that refers to it is in flight, and afterwards while it is
//! the newest version of its object and not older than [`RETAIN`], so a
//! provider that asks a little late still finds it, and the table stays as
//! small as the set of classes in use.
//!
//! Each entry remembers the providers it was sent to: a provider may fetch
//! only what was sent to it, so one provider never reads another's
//! credentials.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::pb;

/// How long an unreferenced newest version is kept.
pub const RETAIN: Duration = Duration::from_secs(10 * 60);

/// What an entry holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    /// A machine class.
    Class(Arc<pb::MachineClass>),
    /// A class's merged secret, without `userData`.
    Secret(Arc<pb::Secret>),
}

/// Which table an object is in; classes and secrets may share names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Class,
    Secret,
}

/// One version of one object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub version: String,
}

impl Key {
    fn object(&self) -> (Kind, &str, &str) {
        (self.kind, &self.namespace, &self.name)
    }
}

#[derive(Debug)]
struct Entry {
    object: Object,
    /// Operations in flight that refer to it.
    refs: usize,
    /// Providers it was sent to.
    providers: BTreeSet<String>,
    /// When the last reference went.
    released: Option<Instant>,
}

/// The table. Not synchronised: the router keeps it behind its lock.
#[derive(Debug, Default)]
pub struct Table {
    entries: HashMap<Key, Entry>,
    /// The newest version of each object: the last one held.
    newest: HashMap<(Kind, String, String), String>,
}

impl Table {
    /// Holds `object` under `key` for an operation sent to `provider`;
    /// [`Table::release`] ends the hold. Also drops what has expired.
    pub fn hold(&mut self, key: Key, object: Object, provider: &str, now: Instant) {
        self.expire(now);
        self.newest.insert(
            (key.kind, key.namespace.clone(), key.name.clone()),
            key.version.clone(),
        );
        let entry = self.entries.entry(key).or_insert_with(|| Entry {
            object,
            refs: 0,
            providers: BTreeSet::new(),
            released: None,
        });
        entry.refs += 1;
        entry.released = None;
        entry.providers.insert(provider.to_string());
    }

    /// Ends one hold of `key`. An older version nobody holds goes at once.
    pub fn release(&mut self, key: &Key, now: Instant) {
        let Some(entry) = self.entries.get_mut(key) else {
            return;
        };
        entry.refs = entry.refs.saturating_sub(1);
        if entry.refs > 0 {
            return;
        }
        entry.released = Some(now);
        if !self.is_newest(key) {
            self.entries.remove(key);
        }
    }

    fn is_newest(&self, key: &Key) -> bool {
        let (kind, ns, name) = key.object();
        self.newest
            .get(&(kind, ns.to_string(), name.to_string()))
            .is_some_and(|v| *v == key.version)
    }

    /// Drops unheld entries past [`RETAIN`].
    fn expire(&mut self, now: Instant) {
        self.entries.retain(|_, e| {
            e.refs > 0 || e.released.is_none_or(|at| now.duration_since(at) < RETAIN)
        });
        let entries = &self.entries;
        self.newest.retain(|(kind, ns, name), version| {
            entries.contains_key(&Key {
                kind: *kind,
                namespace: ns.clone(),
                name: name.clone(),
                version: version.clone(),
            })
        });
    }

    /// The object under `key`, if it was sent to one of `providers`. An
    /// empty version asks for the newest.
    pub fn get(&self, key: &Key, providers: &[String]) -> Option<Object> {
        let version = if key.version.is_empty() {
            let (kind, ns, name) = key.object();
            self.newest
                .get(&(kind, ns.to_string(), name.to_string()))?
                .clone()
        } else {
            key.version.clone()
        };
        let key = Key {
            version,
            ..key.clone()
        };
        let entry = self.entries.get(&key)?;
        providers
            .iter()
            .any(|p| entry.providers.contains(p))
            .then(|| entry.object.clone())
    }

    /// How many versions are held or retained.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, version: &str) -> Key {
        Key {
            kind: Kind::Class,
            namespace: "ns".into(),
            name: name.into(),
            version: version.into(),
        }
    }

    fn class(marker: &str) -> Object {
        Object::Class(Arc::new(pb::MachineClass {
            object: marker.as_bytes().to_vec(),
        }))
    }

    fn providers(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_providers_it_was_sent_to_may_fetch() {
        let now = Instant::now();
        let mut t = Table::default();
        t.hold(key("c", "1"), class("one"), "aws", now);
        assert_eq!(
            t.get(&key("c", "1"), &providers(&["aws"])),
            Some(class("one"))
        );
        assert_eq!(t.get(&key("c", "1"), &providers(&["gcp"])), None);
        assert_eq!(t.get(&key("c", "2"), &providers(&["aws"])), None);
        // Classes and secrets of the same name are apart.
        let secret_key = Key {
            kind: Kind::Secret,
            ..key("c", "1")
        };
        assert_eq!(t.get(&secret_key, &providers(&["aws"])), None);
    }

    #[test]
    fn newest_version_stays_older_ones_go_when_released() {
        let now = Instant::now();
        let p = providers(&["local"]);
        let mut t = Table::default();
        t.hold(key("c", "1"), class("one"), "local", now);
        t.hold(key("c", "2"), class("two"), "local", now);
        // Version 1 is still held: still served, by exact version.
        assert_eq!(t.get(&key("c", "1"), &p), Some(class("one")));
        // An empty version is the newest.
        assert_eq!(t.get(&key("c", ""), &p), Some(class("two")));
        t.release(&key("c", "1"), now);
        assert_eq!(t.get(&key("c", "1"), &p), None);
        t.release(&key("c", "2"), now);
        assert_eq!(t.get(&key("c", "2"), &p), Some(class("two")), "newest kept");
        assert_eq!(t.len(), 1);
        // Until it has been unheld for RETAIN.
        t.hold(key("d", "1"), class("d"), "local", now + RETAIN);
        assert_eq!(t.get(&key("c", "2"), &p), None);
        assert_eq!(t.get(&key("c", ""), &p), None);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn holds_are_counted() {
        let now = Instant::now();
        let p = providers(&["local"]);
        let mut t = Table::default();
        t.hold(key("c", "1"), class("one"), "local", now);
        t.hold(key("c", "1"), class("one"), "local", now);
        t.hold(key("c", "2"), class("two"), "local", now);
        t.release(&key("c", "1"), now);
        assert_eq!(
            t.get(&key("c", "1"), &p),
            Some(class("one")),
            "one hold left"
        );
        t.release(&key("c", "1"), now);
        assert_eq!(t.get(&key("c", "1"), &p), None);
        // Releasing what is not held changes nothing.
        t.release(&key("c", "1"), now);
        t.release(&key("x", "1"), now);
        assert_eq!(t.len(), 1);
    }
}
