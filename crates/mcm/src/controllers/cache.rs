//! The controllers' shared caches: a kube-rs reflector store with
//! secondary indexes (by controller owner, node, class, deployment, and
//! for Nodes by the machine they name), kept from the same watch events
//! that fill the store.
//!
//! Without them every reconcile scanned a whole cache to find its own
//! objects (a set's machines, a node's machines, a deployment's
//! siblings), so a fleet of n machines cost O(n²); with them a reconcile
//! costs what its own objects cost.
//!
//! The store and its indexes change together under the index's lock, and
//! the index holds the very `Arc`s the store holds, replaced on every
//! update, so a lookup never sees an index that is behind or ahead of the
//! store: a machine the store shows is always found by its owner's key,
//! as the store shows it.
//! Each lookup filters what the index returns with the caller's own
//! predicate, so an index only ever has to be a superset of the answer.
//! A relist (`Init` … `InitDone`) collects the keys beside the store's own
//! buffer and indexes the store's new objects at `InitDone`, when the
//! store swaps its buffer in.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use api::{Machine, MachineSet, labels};
use k8s_openapi::api::core::v1::Node;
use kube::Resource;
use kube::ResourceExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use parking_lot::RwLock;

/// What an object is indexed under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IndexKey {
    /// The UID of an owner reference marked `controller`.
    Controller(String),
    /// A machine's `node` label.
    Node(String),
    /// A machine's namespace and `spec.class.name`.
    Class(String, String),
    /// A machine's namespace and deployment key: its `name` label, or
    /// its own name without one (the meltdown limit's group).
    Group(String, String),
    /// A machine's own name.
    Name(String),
    /// A Node's machine-name label.
    MachineName(String),
}

/// The keys an object is indexed under.
pub type KeysFn<K> = fn(&K) -> Vec<IndexKey>;

/// The keys of a machine.
pub fn machine_keys(m: &Machine) -> Vec<IndexKey> {
    let mut keys = controller_keys(&m.metadata);
    let name = m.name_any();
    if let Some(node) = m.labels().get(labels::NODE) {
        keys.push(IndexKey::Node(node.clone()));
    }
    if let Some(ns) = &m.metadata.namespace {
        keys.push(IndexKey::Class(ns.clone(), m.spec.class.name.clone()));
        let group = m.labels().get(labels::NAME).unwrap_or(&name);
        keys.push(IndexKey::Group(ns.clone(), group.clone()));
    }
    keys.push(IndexKey::Name(name));
    keys
}

/// The keys of a machine set: its controller.
pub fn set_keys(s: &MachineSet) -> Vec<IndexKey> {
    controller_keys(&s.metadata)
}

/// The keys of a Node: the machine its machine-name label names.
pub fn node_keys(n: &Node) -> Vec<IndexKey> {
    n.labels()
        .get(labels::NODE_MACHINE_NAME)
        .map(|m| vec![IndexKey::MachineName(m.clone())])
        .unwrap_or_default()
}

/// No keys: a plain store.
pub fn no_keys<K>(_: &K) -> Vec<IndexKey> {
    Vec::new()
}

fn controller_keys(meta: &kube::api::ObjectMeta) -> Vec<IndexKey> {
    meta.owner_references
        .iter()
        .flatten()
        .filter(|o| o.controller == Some(true))
        .map(|o| IndexKey::Controller(o.uid.clone()))
        .collect()
}

/// The live index: objects by key, holding the store's own `Arc`s (so a
/// lookup clones pointers and touches the store not at all), and each
/// object's keys (to take it out again when it changes or goes).
struct Index<K: Resource<DynamicType = ()>> {
    by_key: HashMap<IndexKey, HashMap<ObjectRef<K>, Arc<K>>>,
    keys_of: HashMap<ObjectRef<K>, Vec<IndexKey>>,
}

impl<K: Resource<DynamicType = ()>> Default for Index<K> {
    fn default() -> Self {
        Index {
            by_key: HashMap::new(),
            keys_of: HashMap::new(),
        }
    }
}

impl<K: Resource<DynamicType = ()>> Index<K> {
    fn insert(&mut self, r: ObjectRef<K>, keys: Vec<IndexKey>, obj: Arc<K>) {
        // Most updates (status writes) change no key: only the object
        // under each key is replaced.
        if self.keys_of.get(&r) == Some(&keys) {
            for k in &keys {
                if let Some(slot) = self.by_key.get_mut(k).and_then(|m| m.get_mut(&r)) {
                    *slot = obj.clone();
                }
            }
            return;
        }
        self.remove(&r);
        for k in &keys {
            self.by_key
                .entry(k.clone())
                .or_default()
                .insert(r.clone(), obj.clone());
        }
        self.keys_of.insert(r, keys);
    }

    fn remove(&mut self, r: &ObjectRef<K>) {
        for k in self.keys_of.remove(r).into_iter().flatten() {
            if let Entry::Occupied(mut e) = self.by_key.entry(k) {
                e.get_mut().remove(r);
                if e.get().is_empty() {
                    e.remove();
                }
            }
        }
    }
}

struct Indexes<K: Resource<DynamicType = ()>> {
    live: Index<K>,
    /// The objects of a relist in progress and their keys; they become
    /// `live` at `InitDone`, when the store shows them.
    buffer: Vec<(ObjectRef<K>, Vec<IndexKey>)>,
}

/// A reflector store with secondary indexes. Cheap to clone (shared).
pub struct Cache<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    indexes: Arc<RwLock<Indexes<K>>>,
}

impl<K: Resource<DynamicType = ()> + 'static> Clone for Cache<K> {
    fn clone(&self) -> Self {
        Cache {
            store: self.store.clone(),
            indexes: self.indexes.clone(),
        }
    }
}

/// Fills a [`Cache`] from watch events.
pub struct CacheWriter<K: Resource<DynamicType = ()> + Clone + 'static> {
    writer: Writer<K>,
    indexes: Arc<RwLock<Indexes<K>>>,
    keys: KeysFn<K>,
}

/// A new, empty cache indexed by `keys`, and its writer.
pub fn cache<K>(keys: KeysFn<K>) -> (Cache<K>, CacheWriter<K>)
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let indexes = Arc::new(RwLock::new(Indexes {
        live: Index::default(),
        buffer: Vec::new(),
    }));
    (
        Cache {
            store,
            indexes: indexes.clone(),
        },
        CacheWriter {
            writer,
            indexes,
            keys,
        },
    )
}

impl<K> CacheWriter<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// Applies one watch event to the store and the indexes, together.
    pub fn apply(&mut self, event: &watcher::Event<K>) {
        let mut ix = self.indexes.write();
        self.writer.apply_watcher_event(event);
        let store = self.writer.as_reader();
        match event {
            watcher::Event::Apply(o) => {
                let r = ObjectRef::from_obj(o);
                if let Some(obj) = store.get(&r) {
                    ix.live.insert(r, (self.keys)(o), obj);
                }
            }
            watcher::Event::Delete(o) => ix.live.remove(&ObjectRef::from_obj(o)),
            watcher::Event::Init => ix.buffer.clear(),
            watcher::Event::InitApply(o) => {
                let keys = (self.keys)(o);
                ix.buffer.push((ObjectRef::from_obj(o), keys))
            }
            watcher::Event::InitDone => {
                // The store has swapped the relist in: index its objects.
                let mut live = Index::default();
                for (r, keys) in std::mem::take(&mut ix.buffer) {
                    if let Some(obj) = store.get(&r) {
                        live.insert(r, keys, obj);
                    }
                }
                ix.live = live;
            }
        }
    }
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// The object `key` names, if cached.
    pub fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        self.store.get(key)
    }

    /// Every cached object. O(n): for periodic passes, not per reconcile.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// The underlying store (for a controller's own lookups).
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Waits until the first list has filled the cache.
    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.store.wait_until_ready().await
    }

    /// The cached objects indexed under `key`, as consistent with the
    /// store as one read of it.
    pub fn by(&self, key: &IndexKey) -> Vec<Arc<K>> {
        let ix = self.indexes.read();
        ix.live
            .by_key
            .get(key)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// How many cached objects are indexed under `key`.
    pub fn count(&self, key: &IndexKey) -> usize {
        self.indexes
            .read()
            .live
            .by_key
            .get(key)
            .map_or(0, |s| s.len())
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
