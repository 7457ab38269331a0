//! The shared watch cache: one store watch per stored resource, fanned out to
//! any number of HTTP watchers.
//!
//! A [`Hub`] follows its resource's key prefix in the store and keeps a ring
//! of recent events (already rendered with their resource version, plus a
//! small summary for selector matching). A watcher subscribes from a
//! revision: it gets the ring's events after that revision, then live ones,
//! in order, with progress marks that let it send correct bookmarks. A
//! revision older than the ring gets an in-stream 410.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;
use store::{EventKind, Revision, Store, StoreError, WatchItem};
use tokio::sync::broadcast;

use crate::storage::codec;
use crate::storage::select::Summary;

/// One change as watchers see it.
#[derive(Debug)]
pub struct HubEvent {
    pub revision: Revision,
    pub kind: EventKind,
    /// The object with its resource version: the new state, or for a delete
    /// the last state carrying the deleting revision.
    pub object: Bytes,
    pub summary: Summary,
    /// The state before the change, for selector transitions.
    pub prev: Option<Summary>,
}

#[derive(Clone, Debug)]
pub enum HubItem {
    Event(Arc<HubEvent>),
    /// Every event up to this revision has been broadcast.
    Progress(Revision),
}

struct Ring {
    events: VecDeque<(Instant, Arc<HubEvent>)>,
    /// Every event after this revision is in `events` or still to come.
    oldest: Revision,
    progress: Revision,
}

/// How long and how many events a hub keeps for watchers resuming from a
/// revision. kube-apiserver keeps at least 75 s; we keep minutes.
const RING_MAX_AGE: Duration = Duration::from_secs(10 * 60);
const RING_MAX_EVENTS: usize = 20_000;
const BROADCAST_CAPACITY: usize = 8192;
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

pub struct Hub {
    ring: Mutex<Ring>,
    /// Replaced by [`Hub::expire`], which ends every current subscription.
    tx: Mutex<broadcast::Sender<HubItem>>,
}

/// Why a subscription could not start.
#[derive(Debug)]
pub struct TooOld {
    pub oldest: Revision,
}

impl Hub {
    /// Starts following `prefix` in `store`; `fields` are the selectable
    /// fields to summarise.
    pub fn start(store: Arc<dyn Store>, prefix: String, fields: Vec<&'static str>) -> Arc<Hub> {
        let start = store.compacted_revision();
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        let hub = Arc::new(Hub {
            ring: Mutex::new(Ring {
                events: VecDeque::new(),
                oldest: start,
                progress: start,
            }),
            tx: Mutex::new(tx),
        });
        let weak = Arc::downgrade(&hub);
        tokio::spawn(async move {
            let mut from = start;
            loop {
                let mut stream = match store.watch(&prefix, from).await {
                    Ok(s) => s,
                    Err(StoreError::Compacted { .. }) => {
                        // We fell behind the store's history: restart from
                        // now; watchers resuming from before get a 410.
                        from = store.current_revision();
                        let Some(hub) = weak.upgrade() else { return };
                        let mut ring = hub.ring.lock();
                        ring.events.clear();
                        ring.oldest = from;
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, prefix, "store watch failed; retrying");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                };
                let mut tick = tokio::time::interval(PROGRESS_EVERY);
                loop {
                    tokio::select! {
                        item = stream.recv() => {
                            let Some(item) = item else { break };
                            let Some(hub) = weak.upgrade() else { return };
                            match item {
                                WatchItem::Event(ev) => {
                                    from = ev.revision();
                                    hub.publish(ev, &fields);
                                }
                                WatchItem::Progress(rev) => {
                                    from = from.max(rev);
                                    let mut ring = hub.ring.lock();
                                    ring.progress = ring.progress.max(rev);
                                    let _ = hub.tx.lock().send(HubItem::Progress(rev));
                                }
                            }
                        }
                        _ = tick.tick() => {
                            if weak.strong_count() == 0 { return }
                            stream.request_progress();
                        }
                    }
                }
            }
        });
        hub
    }

    fn publish(&self, ev: store::Event, fields: &[&'static str]) {
        let rev = ev.revision();
        let summarize = |kv: &store::KeyValue| -> (Bytes, Summary) {
            let v: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
            (
                codec::with_rv(&kv.value, kv.mod_revision),
                Summary::of(&v, fields),
            )
        };
        let (object, summary, prev) = match ev.kind {
            EventKind::Put => {
                let (obj, sum) = summarize(&ev.kv);
                (obj, sum, ev.prev.as_ref().map(|p| summarize(p).1))
            }
            EventKind::Delete => {
                let Some(p) = &ev.prev else { return };
                let v: Value = serde_json::from_slice(&p.value).unwrap_or(Value::Null);
                (codec::with_rv(&p.value, rev), Summary::of(&v, fields), None)
            }
        };
        let he = Arc::new(HubEvent {
            revision: rev,
            kind: ev.kind,
            object,
            summary,
            prev,
        });
        let now = Instant::now();
        let mut ring = self.ring.lock();
        ring.events.push_back((now, he.clone()));
        ring.progress = ring.progress.max(rev);
        while ring.events.len() > RING_MAX_EVENTS
            || ring
                .events
                .front()
                .is_some_and(|(at, _)| now.duration_since(*at) > RING_MAX_AGE)
        {
            if let Some((_, e)) = ring.events.pop_front() {
                ring.oldest = e.revision;
            }
        }
        let _ = self.tx.lock().send(HubItem::Event(he));
    }

    /// Forgets all history and ends every current watch: resuming from any
    /// revision seen so far gets a 410, so clients relist (a list at the
    /// current revision can be watched from once the next write lands). Used
    /// when the history can no longer be trusted, and by tests of the 410
    /// path.
    pub fn expire(&self) {
        let mut ring = self.ring.lock();
        ring.events.clear();
        ring.oldest = ring.progress + 1;
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        *self.tx.lock() = tx;
    }

    /// Subscribes to events after `after`: the retained ones now, live ones
    /// through the receiver.
    pub fn subscribe(
        &self,
        after: Revision,
    ) -> Result<(Vec<Arc<HubEvent>>, broadcast::Receiver<HubItem>), TooOld> {
        let ring = self.ring.lock();
        if after < ring.oldest {
            return Err(TooOld {
                oldest: ring.oldest,
            });
        }
        let rx = self.tx.lock().subscribe();
        let replay = ring
            .events
            .iter()
            .filter(|(_, e)| e.revision > after)
            .map(|(_, e)| e.clone())
            .collect();
        Ok((replay, rx))
    }

    /// The revision up to which every event has been published.
    pub fn progress(&self) -> Revision {
        self.ring.lock().progress
    }
}
