//! Events: core/v1 and events.k8s.io/v1 are two views of one stored kind
//! (core/v1), mapped into each other here (`regarding`↔`involvedObject`,
//! `note`↔`message`, `deprecatedCount`↔`count`, …); an Event needs the
//! object it is about; a PUT creates a missing Event; events expire after a
//! TTL counted from when they were last seen.

use apimachinery::{ApiError, Cause};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1 as core;
use serde_json::{Map, Value, json};

use crate::storage::registry::{Resource, Strategy};

/// Field selectors core/v1 events accept beyond metadata.
pub const CORE_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];
/// Field selectors events.k8s.io/v1 events accept beyond metadata.
pub const EVENTS_V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "reason",
    "reportingController",
    "type",
];

/// Both Event views.
#[derive(Debug)]
pub struct Event;

impl Strategy for Event {
    fn served_to_storage(&self, res: &Resource, obj: Value) -> Value {
        to_storage(res, obj)
    }

    fn storage_to_served(&self, res: &Resource, obj: Value) -> Value {
        from_storage(res, obj)
    }

    fn validate(&self, res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        let core_view = res.group.is_empty();
        let stored = if core_view {
            obj.clone()
        } else {
            to_storage(res, obj.clone())
        };
        super::typed::<core::Event>(&stored)?;
        let mut causes = Vec::new();
        if stored.get("involvedObject").is_none() {
            causes.push(Cause::required(if core_view {
                "involvedObject"
            } else {
                "regarding"
            }));
        }
        Ok(causes)
    }

    fn create_on_update(&self) -> bool {
        true
    }
}

/// When a stored (core/v1) Event was last seen: the time its TTL counts
/// from.
pub fn last_seen(v: &Value) -> Option<DateTime<Utc>> {
    for ptr in [
        "/series/lastObservedTime",
        "/lastTimestamp",
        "/eventTime",
        "/metadata/creationTimestamp",
    ] {
        if let Some(t) = v.pointer(ptr).and_then(Value::as_str)
            && let Ok(t) = DateTime::parse_from_rfc3339(t)
        {
            return Some(t.with_timezone(&Utc));
        }
    }
    None
}

/// Whether a stored Event has outlived `ttl` at `now`.
pub fn expired(v: &Value, ttl: chrono::Duration, now: DateTime<Utc>) -> bool {
    last_seen(v).is_some_and(|t| t < now - ttl)
}

fn take(m: &mut Map<String, Value>, from: &str) -> Option<Value> {
    m.remove(from)
}

fn rename(m: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = take(m, from) {
        m.insert(to.to_string(), v);
    }
}

/// Converts an object of a converted view into its stored form.
pub fn to_storage(res: &Resource, mut obj: Value) -> Value {
    if res.group == "events.k8s.io"
        && let Some(m) = obj.as_object_mut()
    {
        rename(m, "regarding", "involvedObject");
        rename(m, "note", "message");
        rename(m, "reportingController", "reportingComponent");
        rename(m, "deprecatedSource", "source");
        rename(m, "deprecatedFirstTimestamp", "firstTimestamp");
        rename(m, "deprecatedLastTimestamp", "lastTimestamp");
        rename(m, "deprecatedCount", "count");
        derive_core_event_times(m);
        m.insert("apiVersion".into(), json!("v1"));
    }
    obj
}

/// Converts a stored object into the served form of `res`.
pub fn from_storage(res: &Resource, mut obj: Value) -> Value {
    if res.group == "events.k8s.io"
        && let Some(m) = obj.as_object_mut()
    {
        hide_derived_core_event_times(m);
        rename(m, "involvedObject", "regarding");
        rename(m, "message", "note");
        rename(m, "reportingComponent", "reportingController");
        rename(m, "source", "deprecatedSource");
        rename(m, "firstTimestamp", "deprecatedFirstTimestamp");
        rename(m, "lastTimestamp", "deprecatedLastTimestamp");
        rename(m, "count", "deprecatedCount");
        m.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    }
    obj
}

/// `eventTime` and `series.lastObservedTime` (MicroTimes) as the Time the
/// core/v1 fields hold: whole seconds, as Go's `metav1.Time` marshals.
fn whole_seconds(v: Option<&Value>) -> Option<Value> {
    let t = chrono::DateTime::parse_from_rfc3339(v?.as_str()?).ok()?;
    Some(json!(
        t.with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    ))
}

fn absent(m: &Map<String, Value>, field: &str) -> bool {
    m.get(field).is_none_or(Value::is_null)
}

/// What the core/v1 `firstTimestamp`, `lastTimestamp` and `count` of a
/// stored Event would be if derived from its `eventTime` and `series`.
struct DerivedTimes {
    first: Option<Value>,
    last: Option<Value>,
    count: Option<Value>,
}

fn derived_times(m: &Map<String, Value>) -> DerivedTimes {
    let event_time = whole_seconds(m.get("eventTime"));
    let series = m.get("series").filter(|s| s.is_object());
    let series_last = whole_seconds(series.and_then(|s| s.get("lastObservedTime")));
    let series_count = series
        .and_then(|s| s.get("count"))
        .filter(|c| c.is_number())
        .cloned();
    DerivedTimes {
        first: event_time.clone(),
        last: series_last.or(event_time),
        count: series_count,
    }
}

/// Completes the core/v1 view of an Event written through events.k8s.io/v1.
///
/// The recorders of client-go and kube-rs write only `eventTime` and, on a
/// repeat, `series {count, lastObservedTime}`; upstream's conversion maps
/// just the `deprecated*` fields, so such an Event read as core/v1 has no
/// `lastTimestamp` or `count`, and `kubectl get events
/// --sort-by=.lastTimestamp` (the usual way to read events) finds nothing
/// to sort by. trellis derives them when the Event is stored: the series
/// wins over `deprecatedLastTimestamp`/`deprecatedCount` (it is what a
/// recorder updates on each repeat, the deprecated fields are frozen at the
/// first write), then those, then `eventTime` and a count of one. Stored
/// rather than computed on every read, so core/v1 LISTs, watches, field
/// selectors and sorting see them without converting each object.
fn derive_core_event_times(m: &mut Map<String, Value>) {
    let derived = derived_times(m);
    if let Some(last) = &derived.last
        && (m.get("series").is_some_and(Value::is_object) || absent(m, "lastTimestamp"))
    {
        m.insert("lastTimestamp".into(), last.clone());
    }
    if absent(m, "firstTimestamp")
        && let Some(first) = derived.first
    {
        m.insert("firstTimestamp".into(), first);
    }
    match derived.count {
        Some(count) => {
            m.insert("count".into(), count);
        }
        None if absent(m, "count") => {
            m.insert("count".into(), json!(1));
        }
        None => {}
    }
}

/// The reverse of [`derive_core_event_times`] for the events.k8s.io/v1
/// view: an Event that has an `eventTime` (written the events.k8s.io way)
/// does not show the derived values as `deprecated*` fields, so a client
/// reads back what it wrote (as from kube-apiserver) and a read-modify-write
/// carries no stale copies. Values that differ from the derived ones were
/// written by someone and are kept; Events written through core/v1 without
/// `eventTime` keep all three, as upstream's conversion gives them.
fn hide_derived_core_event_times(m: &mut Map<String, Value>) {
    if absent(m, "eventTime") {
        return;
    }
    let derived = derived_times(m);
    if derived.first.is_some() && m.get("firstTimestamp") == derived.first.as_ref() {
        m.remove("firstTimestamp");
    }
    if derived.last.is_some() && m.get("lastTimestamp") == derived.last.as_ref() {
        m.remove("lastTimestamp");
    }
    if m.get("count") == Some(derived.count.as_ref().unwrap_or(&json!(1))) {
        m.remove("count");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::resources;

    fn events_v1() -> Resource {
        resources()
            .into_iter()
            .find(|r| r.group == "events.k8s.io")
            .expect("events.k8s.io/v1 is served")
    }

    /// An Event as kube-rs's `Recorder` first creates it: `eventTime` and
    /// no `deprecated*` field.
    fn recorded() -> Value {
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "m1.17f", "namespace": "default"},
            "action": "Create", "reason": "Created", "type": "Normal",
            "eventTime": "2026-01-02T03:04:05.678901Z",
            "note": "created the VM",
            "regarding": {"kind": "Machine", "name": "m1", "namespace": "default"},
            "reportingController": "trellis/machine", "reportingInstance": "trellis",
        })
    }

    #[test]
    fn a_recorded_event_reads_as_core_v1_with_first_and_last_timestamp_and_count() {
        let stored = to_storage(&events_v1(), recorded());
        let want = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "m1.17f", "namespace": "default"},
            "action": "Create", "reason": "Created", "type": "Normal",
            "eventTime": "2026-01-02T03:04:05.678901Z",
            "message": "created the VM",
            "involvedObject": {"kind": "Machine", "name": "m1", "namespace": "default"},
            "reportingComponent": "trellis/machine", "reportingInstance": "trellis",
            "lastTimestamp": "2026-01-02T03:04:05Z",
            "firstTimestamp": "2026-01-02T03:04:05Z",
            "count": 1,
        });
        assert_eq!(stored, want);
        assert_eq!(
            from_storage(&events_v1(), stored),
            recorded(),
            "the events.k8s.io client reads back what it wrote"
        );
    }

    #[test]
    fn a_series_sets_last_timestamp_and_count() {
        let mut ev = recorded();
        ev["series"] = json!({"count": 3, "lastObservedTime": "2026-01-02T03:09:10.500000Z"});
        let stored = to_storage(&events_v1(), ev.clone());
        assert_eq!(stored["firstTimestamp"], "2026-01-02T03:04:05Z");
        assert_eq!(stored["lastTimestamp"], "2026-01-02T03:09:10Z");
        assert_eq!(stored["count"], 3);
        assert_eq!(from_storage(&events_v1(), stored), ev);
    }

    #[test]
    fn a_series_patched_onto_a_stored_event_moves_last_timestamp() {
        // kube-rs's Recorder repeats an event with a merge patch that adds
        // `series` to the object it created: the server reads the stored
        // Event in the events.k8s.io form, patches it and stores it again.
        let v1 = events_v1();
        let mut served = from_storage(&v1, to_storage(&v1, recorded()));
        served["series"] = json!({"count": 2, "lastObservedTime": "2026-01-02T03:05:00.000001Z"});
        let stored = to_storage(&v1, served);
        assert_eq!(stored["firstTimestamp"], "2026-01-02T03:04:05Z");
        assert_eq!(stored["lastTimestamp"], "2026-01-02T03:05:00Z");
        assert_eq!(stored["count"], 2);
    }

    #[test]
    fn the_series_wins_over_deprecated_fields_and_other_values_are_kept() {
        let mut ev = recorded();
        ev["deprecatedFirstTimestamp"] = json!("2026-01-01T00:00:00Z");
        ev["deprecatedLastTimestamp"] = json!("2026-01-01T00:00:01Z");
        ev["deprecatedCount"] = json!(7);
        let stored = to_storage(&events_v1(), ev.clone());
        assert_eq!(stored["firstTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(stored["lastTimestamp"], "2026-01-01T00:00:01Z");
        assert_eq!(stored["count"], 7);
        assert_eq!(from_storage(&events_v1(), stored), ev, "written, so shown");
        ev["series"] = json!({"count": 9, "lastObservedTime": "2026-01-02T04:00:00Z"});
        let stored = to_storage(&events_v1(), ev);
        assert_eq!(stored["lastTimestamp"], "2026-01-02T04:00:00Z");
        assert_eq!(stored["count"], 9);
    }

    #[test]
    fn a_core_v1_event_reads_as_events_k8s_io_with_its_deprecated_fields() {
        let legacy = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "n1.1", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": "n1"},
            "reason": "NodeReady", "message": "ready", "type": "Normal",
            "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2026-01-02T03:00:00Z",
            "lastTimestamp": "2026-01-02T03:10:00Z",
            "count": 1,
        });
        let served = from_storage(&events_v1(), legacy.clone());
        let want = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "n1.1", "namespace": "default"},
            "regarding": {"kind": "Node", "name": "n1"},
            "reason": "NodeReady", "note": "ready", "type": "Normal",
            "deprecatedSource": {"component": "kubelet", "host": "n1"},
            "deprecatedFirstTimestamp": "2026-01-02T03:00:00Z",
            "deprecatedLastTimestamp": "2026-01-02T03:10:00Z",
            "deprecatedCount": 1,
        });
        assert_eq!(served, want);
        assert_eq!(to_storage(&events_v1(), served), legacy, "and back");
    }

    #[test]
    fn events_expire_a_ttl_after_they_were_last_seen() {
        let now = Utc::now();
        let at = |t: DateTime<Utc>| {
            json!({"metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"},
                   "lastTimestamp": t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)})
        };
        let hour = chrono::Duration::hours(1);
        assert!(!expired(
            &at(now - chrono::Duration::minutes(59)),
            hour,
            now
        ));
        assert!(expired(&at(now - chrono::Duration::minutes(61)), hour, now));
        let series = json!({"lastTimestamp": "2020-01-01T00:00:00Z",
                            "series": {"lastObservedTime": now.to_rfc3339()}});
        assert!(
            !expired(&series, hour, now),
            "the series is the last sighting"
        );
        assert!(
            !expired(&json!({"metadata": {}}), hour, now),
            "no time, no expiry"
        );
    }

    #[test]
    fn an_event_needs_the_object_it_is_about() {
        let v1 = events_v1();
        let causes = Event.validate(&v1, &recorded()).unwrap();
        assert!(causes.is_empty(), "{causes:?}");
        let mut ev = recorded();
        ev.as_object_mut().unwrap().remove("regarding");
        let causes = Event.validate(&v1, &ev).unwrap();
        assert_eq!(causes[0].field, "regarding");
    }
}
