//! Event expiry: core/v1 events older than the configured TTL (one hour by
//! default, as kube-apiserver) are deleted.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use store::RangeRequest;

use crate::server::Server;

const EVENTS_PREFIX: &str = "/registry/core/events/";

fn last_seen(v: &Value) -> Option<DateTime<Utc>> {
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

pub fn spawn(server: Arc<Server>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        // The first tick of an interval is immediate; expiry waits a period.
        tick.tick().await;
        loop {
            tick.tick().await;
            let ttl = chrono::Duration::from_std(server.config.event_ttl)
                .unwrap_or(chrono::Duration::hours(1));
            let Ok(r) = server
                .store
                .range(RangeRequest {
                    prefix: EVENTS_PREFIX.into(),
                    ..Default::default()
                })
                .await
            else {
                continue;
            };
            let cutoff = Utc::now() - ttl;
            for kv in r.kvs {
                let Ok(v) = serde_json::from_slice::<Value>(&kv.value) else {
                    continue;
                };
                if last_seen(&v).is_some_and(|t| t < cutoff) {
                    let _ = server.store.delete(&kv.key, Some(kv.mod_revision)).await;
                }
            }
        }
    });
}
