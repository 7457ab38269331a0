//! The garbage collector: owner references between objects of any kind.
//!
//! It keeps an index of every object's UID and owner references, built from
//! one store watch over all resources, and acts on three situations:
//! - an object whose owners are all gone is deleted (background deletion of
//!   the owner); owners that are gone while others remain are dropped from
//!   its references;
//! - an owner being deleted with the `orphan` finalizer has its references
//!   removed from every dependent, then loses the finalizer;
//! - an owner being deleted with the `foregroundDeletion` finalizer has its
//!   dependents deleted, and loses the finalizer once no dependent with
//!   `blockOwnerDeletion` remains.
//!
//! "Gone" is checked against the live store by name and UID before deleting,
//! because an owner created after its dependent may not be indexed yet.

use crate::error::Error;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use store::{EventKind, RangeRequest, WatchItem};

use super::Context;
use crate::object;
use crate::storage::{DeleteOptions, FOREGROUND, ORPHAN, keys};

#[derive(Deserialize, Default)]
pub(super) struct Partial {
    #[serde(default, rename = "apiVersion")]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: PartialMeta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PartialMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    owner_references: Vec<OwnerRef>,
    #[serde(default)]
    finalizers: Vec<String>,
    #[serde(default)]
    deletion_timestamp: Option<String>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
struct OwnerRef {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    block_owner_deletion: Option<bool>,
}

struct Node {
    key: String,
    api_version: String,
    kind: String,
    name: String,
    namespace: String,
    owners: Vec<OwnerRef>,
    finalizers: Vec<String>,
    deleting: bool,
}

#[derive(Default)]
pub(super) struct Graph {
    nodes: HashMap<String, Node>,
    /// Owner UID → dependent UIDs.
    dependents: HashMap<String, HashSet<String>>,
}

impl Graph {
    pub(super) fn upsert(&mut self, p: Partial, key: &str) -> String {
        let uid = p.metadata.uid.clone();
        self.remove(&uid);
        for o in &p.metadata.owner_references {
            self.dependents
                .entry(o.uid.clone())
                .or_default()
                .insert(uid.clone());
        }
        self.nodes.insert(
            uid.clone(),
            Node {
                key: key.to_string(),
                api_version: p.api_version,
                kind: p.kind,
                name: p.metadata.name,
                namespace: p.metadata.namespace,
                owners: p.metadata.owner_references,
                finalizers: p.metadata.finalizers,
                deleting: p.metadata.deletion_timestamp.is_some(),
            },
        );
        uid
    }

    fn remove(&mut self, uid: &str) -> Option<Node> {
        let n = self.nodes.remove(uid)?;
        for o in &n.owners {
            if let Some(d) = self.dependents.get_mut(&o.uid) {
                d.remove(uid);
                if d.is_empty() {
                    self.dependents.remove(&o.uid);
                }
            }
        }
        Some(n)
    }
}

pub(super) fn parse(value: &[u8]) -> Option<Partial> {
    let p: Partial = serde_json::from_slice(value).ok()?;
    (!p.metadata.uid.is_empty()).then_some(p)
}

/// Whether the owner `o` of an object in namespace `ns` exists, asked of the
/// live store. `None` when its kind is not served (then nothing is done).
async fn owner_exists(ctx: &Context, o: &OwnerRef, ns: &str) -> Option<bool> {
    let res = ctx.registry.by_kind(&o.api_version, &o.kind)?;
    let key = res.key(Some(ns).filter(|_| res.namespaced), &o.name);
    let (kv, _) = ctx.storage.store().get(&key, None).await.ok()?;
    Some(match kv {
        None => false,
        Some(kv) => serde_json::from_slice::<Partial>(&kv.value)
            .map(|p| p.metadata.uid == o.uid)
            .unwrap_or(false),
    })
}

async fn delete_node(ctx: &Context, n: &Node, policy: &str) {
    let Some(res) = ctx.registry.by_kind(&n.api_version, &n.kind) else {
        return;
    };
    let opts = DeleteOptions {
        propagation: Some(policy.to_string()),
        ..Default::default()
    };
    let ns = Some(n.namespace.as_str()).filter(|s| !s.is_empty());
    if let Err(e) = ctx.delete(&res, ns, &n.name, &opts).await
        && e.code != 404
    {
        tracing::debug!(name = n.name, error = %e, "garbage collection delete failed");
    }
}

/// Acts on one object; returns true when it should be looked at again later.
pub(super) async fn attend(ctx: &Context, g: &Graph, uid: &str) -> bool {
    let Some(n) = g.nodes.get(uid) else {
        return false;
    };
    let deps: Vec<(&String, &Node)> = g
        .dependents
        .get(uid)
        .map(|d| {
            d.iter()
                .filter_map(|u| g.nodes.get(u).map(|n| (u, n)))
                .collect()
        })
        .unwrap_or_default();
    let mut again = false;
    if n.deleting && n.finalizers.iter().any(|f| f == ORPHAN) {
        for (_, d) in &deps {
            let owner = uid.to_string();
            let _ = ctx
                .storage
                .mutate(&d.key, move |o| {
                    let Some(refs) = object::meta_mut(o)
                        .and_then(|m| m.get_mut("ownerReferences"))
                        .and_then(Value::as_array_mut)
                    else {
                        return false;
                    };
                    let before = refs.len();
                    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner.as_str()));
                    refs.len() != before
                })
                .await;
        }
        let _ = ctx
            .storage
            .mutate(&n.key, |o| {
                let fins: Vec<String> = object::finalizers(o)
                    .into_iter()
                    .filter(|f| f != ORPHAN)
                    .collect();
                object::set_finalizers(o, &fins);
                true
            })
            .await;
    }
    if n.deleting && n.finalizers.iter().any(|f| f == FOREGROUND) {
        let mut blocking = 0;
        for (dep_uid, d) in &deps {
            let blocks = d
                .owners
                .iter()
                .any(|o| o.uid == uid && o.block_owner_deletion == Some(true));
            if blocks {
                blocking += 1;
            }
            if !d.deleting {
                let has_deps = g.dependents.get(*dep_uid).is_some_and(|s| !s.is_empty());
                delete_node(ctx, d, if has_deps { "Foreground" } else { "Background" }).await;
            }
        }
        if blocking == 0 {
            let _ = ctx
                .storage
                .mutate(&n.key, |o| {
                    let fins: Vec<String> = object::finalizers(o)
                        .into_iter()
                        .filter(|f| f != FOREGROUND)
                        .collect();
                    object::set_finalizers(o, &fins);
                    true
                })
                .await;
        } else {
            again = true;
        }
    }
    if !n.owners.is_empty() {
        let mut gone = BTreeSet::new();
        let mut present = 0;
        for o in &n.owners {
            let indexed = g.nodes.get(&o.uid);
            if let Some(owner) = indexed {
                // An owner in foreground deletion deletes its dependents itself.
                let _ = owner;
                present += 1;
                continue;
            }
            match owner_exists(ctx, o, &n.namespace).await {
                Some(true) => present += 1,
                Some(false) => {
                    gone.insert(o.uid.clone());
                }
                // Unknown kind: leave the reference alone.
                None => present += 1,
            }
        }
        if !gone.is_empty() {
            if present == 0 {
                if !n.deleting {
                    delete_node(ctx, n, "Background").await;
                }
            } else {
                let _ = ctx
                    .storage
                    .mutate(&n.key, move |o| {
                        let Some(refs) = object::meta_mut(o)
                            .and_then(|m| m.get_mut("ownerReferences"))
                            .and_then(Value::as_array_mut)
                        else {
                            return false;
                        };
                        let before = refs.len();
                        refs.retain(|r| {
                            !r.get("uid")
                                .and_then(Value::as_str)
                                .is_some_and(|u| gone.contains(u))
                        });
                        refs.len() != before
                    })
                    .await;
            }
        }
    }
    again
}

async fn run(ctx: &Context) -> Result<(), Error> {
    let mut g = Graph::default();
    let r = ctx
        .storage
        .store()
        .range(RangeRequest {
            prefix: keys::ROOT.into(),
            ..Default::default()
        })
        .await
        .map_err(|source| Error::StoreReadFailed {
            what: "every object".into(),
            source,
        })?;
    let mut queue: BTreeSet<String> = BTreeSet::new();
    for kv in &r.kvs {
        if let Some(p) = parse(&kv.value) {
            let interesting =
                !p.metadata.owner_references.is_empty() || p.metadata.deletion_timestamp.is_some();
            let uid = g.upsert(p, &kv.key);
            if interesting {
                queue.insert(uid);
            }
        }
    }
    let mut w = ctx
        .storage
        .store()
        .watch(keys::ROOT, r.revision)
        .await
        .map_err(|source| Error::StoreReadFailed {
            what: "a watch of every object".into(),
            source,
        })?;
    let mut retry: BTreeSet<String> = BTreeSet::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        // Drain whatever arrived before acting, so the graph is as fresh as
        // possible.
        loop {
            match w.try_recv() {
                Some(Some(item)) => apply(&mut g, item, &mut queue),
                Some(None) => return Err(Error::WatchEnded),
                None => break,
            }
        }
        if !queue.is_empty() {
            let batch: Vec<String> = std::mem::take(&mut queue).into_iter().collect();
            for uid in batch {
                if attend(ctx, &g, &uid).await {
                    retry.insert(uid);
                }
            }
            continue;
        }
        tokio::select! {
            item = w.recv() => match item {
                Some(item) => apply(&mut g, item, &mut queue),
                None => return Err(Error::WatchEnded),
            },
            _ = tick.tick() => queue.append(&mut retry),
        }
    }
}

fn apply(g: &mut Graph, item: WatchItem, queue: &mut BTreeSet<String>) {
    let WatchItem::Event(ev) = item else { return };
    match ev.kind {
        EventKind::Put => {
            if let Some(p) = parse(&ev.kv.value) {
                let owners: Vec<String> = p
                    .metadata
                    .owner_references
                    .iter()
                    .map(|o| o.uid.clone())
                    .collect();
                let interesting = !owners.is_empty() || p.metadata.deletion_timestamp.is_some();
                let uid = g.upsert(p, &ev.kv.key);
                if interesting {
                    queue.insert(uid.clone());
                }
                // A dependent changing may unblock a foreground owner.
                for o in owners {
                    if g.nodes.get(&o).is_some_and(|n| n.deleting) {
                        queue.insert(o);
                    }
                }
            }
        }
        EventKind::Delete => {
            let Some(prev) = ev.prev.as_ref().and_then(|p| parse(&p.value)) else {
                return;
            };
            let uid = prev.metadata.uid.clone();
            if let Some(n) = g.remove(&uid) {
                for o in n.owners {
                    if g.nodes.contains_key(&o.uid) {
                        queue.insert(o.uid);
                    }
                }
            }
            if let Some(deps) = g.dependents.get(&uid) {
                queue.extend(deps.iter().cloned());
            }
        }
    }
}

pub fn spawn(ctx: Arc<Context>) {
    tokio::spawn(async move {
        loop {
            if let Err(e) = run(&ctx).await {
                tracing::debug!(error = %e, "garbage collector restarting");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}
