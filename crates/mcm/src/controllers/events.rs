//! Publishing events on machines without keeping them.
//!
//! Events go out as kube-rs's `Recorder` sends them (an events.k8s.io/v1
//! Event per new occurrence; a repeat of the same event about the same
//! object within [`SERIES_WINDOW`] becomes a series: the first Event's
//! `series.count` and `series.lastObservedTime` are patched), but what is
//! remembered between them differs. `Recorder` keeps every event it sent
//! in the last six minutes and prunes that whole cache on every publish:
//! a fleet of 10,000 machines, each reporting its creation and its join,
//! held 20,000 Event objects (about 30 MB) and spent a tenth of the
//! controller's CPU pruning them. Here a sent event is remembered as a
//! hash of its key, the Event's name, a count and a time (about 100
//! bytes), and the cache is pruned at most once a [`PRUNE_EVERY`].

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use parking_lot::Mutex;
use serde_json::json;

/// How long a repeat counts as the same event (kube-rs's cache TTL).
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// How often events older than the window are forgotten.
pub const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// What to send for an occurrence of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Send {
    /// A new Event object.
    New,
    /// A repeat: patch the series of the Event named so to this count.
    Repeat { name: String, count: i32 },
}

struct Seen {
    name: String,
    count: i32,
    last: Instant,
}

/// The events sent within the window, by key hash. Pure: the clock is
/// passed in.
#[derive(Default)]
pub struct SentEvents {
    seen: HashMap<u64, Seen>,
    pruned: Option<Instant>,
}

impl SentEvents {
    /// What an occurrence of the event with `key` at `now` sends.
    pub fn decide(&mut self, key: u64, now: Instant) -> Send {
        if self
            .pruned
            .is_none_or(|t| now.saturating_duration_since(t) >= PRUNE_EVERY)
        {
            self.seen
                .retain(|_, s| now.saturating_duration_since(s.last) < SERIES_WINDOW);
            self.pruned = Some(now);
        }
        match self.seen.get(&key) {
            Some(s) if now.saturating_duration_since(s.last) < SERIES_WINDOW => Send::Repeat {
                name: s.name.clone(),
                count: s.count + 1,
            },
            _ => Send::New,
        }
    }

    /// Records that the event with `key` was sent at `now` as the Event
    /// `name`, `count` times so far.
    pub fn sent(&mut self, key: u64, name: String, count: i32, now: Instant) {
        self.seen.insert(
            key,
            Seen {
                name,
                count,
                last: now,
            },
        );
    }

    /// Events remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// Publishes events as one reporter. Cheap to share.
pub struct EventRecorder {
    client: kube::Client,
    reporter: Reporter,
    hasher: RandomState,
    sent: Mutex<SentEvents>,
}

impl EventRecorder {
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        EventRecorder {
            client,
            reporter,
            hasher: RandomState::new(),
            sent: Mutex::default(),
        }
    }

    /// The key of an event (kube-rs's: type, action, reason, the object
    /// and the related one), hashed with this recorder's random keys.
    fn key(&self, ev: &Event, regarding: &ObjectReference) -> u64 {
        let mut h = self.hasher.build_hasher();
        matches!(ev.type_, EventType::Warning).hash(&mut h);
        ev.action.hash(&mut h);
        ev.reason.hash(&mut h);
        for r in std::iter::once(regarding).chain(ev.secondary.as_ref()) {
            (&r.api_version, &r.kind, &r.namespace, &r.name, &r.uid).hash(&mut h);
        }
        h.finish()
    }

    /// Publishes `ev` about `regarding`.
    pub async fn publish(
        &self,
        ev: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let key = self.key(ev, regarding);
        let decision = self.sent.lock().decide(key, Instant::now());
        let ns = regarding.namespace.as_deref().unwrap_or("default");
        let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), ns);
        let now = Utc::now();
        let at = MicroTime(crate::time::to_time(now).0);
        let (name, count) = match decision {
            Send::Repeat { name, count } => {
                let patch = json!({"series": {"count": count, "lastObservedTime": at}});
                events
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                (name, count)
            }
            Send::New => {
                let event = self.event(ev, regarding, now, at);
                let name = event.metadata.name.clone().unwrap_or_default();
                events.create(&PostParams::default(), &event).await?;
                (name, 1)
            }
        };
        self.sent.lock().sent(key, name, count, Instant::now());
        Ok(())
    }

    fn event(
        &self,
        ev: &Event,
        regarding: &ObjectReference,
        now: chrono::DateTime<Utc>,
        at: MicroTime,
    ) -> K8sEvent {
        let controller = &self.reporter.controller;
        let object = regarding.name.as_ref().unwrap_or(controller);
        K8sEvent {
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(format!(
                    "{object}.{:x}",
                    now.timestamp_nanos_opt().unwrap_or_default()
                )),
                ..ObjectMeta::default()
            },
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            note: ev.note.clone(),
            event_time: Some(at),
            regarding: Some(regarding.clone()),
            related: ev.secondary.clone(),
            reporting_controller: Some(controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| controller.clone()),
            ),
            type_: Some(
                match ev.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            ..K8sEvent::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn repeats_within_the_window_are_a_series_and_old_events_are_forgotten() {
        let t0 = Instant::now();
        let mut sent = SentEvents::default();
        // (key, at second, what is sent)
        let table: [(u64, u64, Send); 7] = [
            (1, 0, Send::New),
            (
                1,
                10,
                Send::Repeat {
                    name: "e1".into(),
                    count: 2,
                },
            ),
            (2, 10, Send::New),
            (
                1,
                20,
                Send::Repeat {
                    name: "e1".into(),
                    count: 3,
                },
            ),
            (
                2,
                369,
                Send::Repeat {
                    name: "e2".into(),
                    count: 2,
                },
            ),
            // Six minutes after key 1 was last sent: a new Event.
            (1, 20 + 360, Send::New),
            (
                2,
                369 + 359,
                Send::Repeat {
                    name: "e2".into(),
                    count: 3,
                },
            ),
        ];
        for (i, (key, at, want)) in table.into_iter().enumerate() {
            let now = t0 + s(at);
            let got = sent.decide(key, now);
            assert_eq!(got, want, "case {i}");
            let (name, count) = match got {
                Send::New => (format!("e{key}"), 1),
                Send::Repeat { name, count } => (name, count),
            };
            sent.sent(key, name, count, now);
        }
        // Pruned at most once a minute (the last prune was at 728 s): key
        // 1, last sent at 380 s, goes at 788 s; key 2 a window after 728 s.
        assert_eq!(sent.len(), 2);
        sent.decide(3, t0 + s(787));
        assert_eq!(sent.len(), 2);
        sent.decide(3, t0 + s(788));
        assert_eq!(sent.len(), 1);
        sent.decide(3, t0 + s(728 + 360));
        assert!(sent.is_empty());
    }

    #[tokio::test]
    async fn keys_tell_objects_reasons_and_types_apart() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let r = EventRecorder::new(
            client,
            Reporter {
                controller: "test".into(),
                instance: None,
            },
        );
        let obj = |uid: &str| ObjectReference {
            uid: Some(uid.into()),
            name: Some("m".into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        };
        let ev = |warning: bool, reason: &str| Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.into(),
            note: Some("n".into()),
            action: reason.into(),
            secondary: None,
        };
        let base = r.key(&ev(false, "Created"), &obj("a"));
        assert_eq!(base, r.key(&ev(false, "Created"), &obj("a")));
        // The note is not part of the key (as kube-rs's).
        let mut other_note = ev(false, "Created");
        other_note.note = Some("other".into());
        assert_eq!(base, r.key(&other_note, &obj("a")));
        assert_ne!(base, r.key(&ev(true, "Created"), &obj("a")));
        assert_ne!(base, r.key(&ev(false, "Joined"), &obj("a")));
        assert_ne!(base, r.key(&ev(false, "Created"), &obj("b")));
    }
}
