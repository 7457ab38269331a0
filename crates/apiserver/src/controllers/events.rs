//! Event expiry: core/v1 events last seen longer ago than the configured
//! TTL (one hour by default, as kube-apiserver) are deleted. When an event
//! was last seen is the event strategy's rule
//! ([`crate::strategy::event::expired`]).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde_json::Value;
use store::RangeRequest;

use super::Context;
use crate::storage::keys;
use crate::strategy::event::expired;

pub fn spawn(ctx: Arc<Context>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        // The first tick of an interval is immediate; expiry waits a period.
        tick.tick().await;
        loop {
            tick.tick().await;
            let ttl =
                chrono::Duration::from_std(ctx.event_ttl).unwrap_or(chrono::Duration::hours(1));
            let Ok(r) = ctx
                .storage
                .store()
                .range(RangeRequest {
                    prefix: keys::prefix(keys::EVENTS),
                    ..Default::default()
                })
                .await
            else {
                continue;
            };
            let now = Utc::now();
            for kv in r.kvs {
                let Ok(v) = serde_json::from_slice::<Value>(&kv.value) else {
                    continue;
                };
                if expired(&v, ttl, now) {
                    let _ = ctx
                        .storage
                        .store()
                        .delete(&kv.key, Some(kv.mod_revision))
                        .await;
                }
            }
        }
    });
}
