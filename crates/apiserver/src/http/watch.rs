//! WATCH: a stream of events from the resource's watch hub, with
//! synthetic initial events (resourceVersion unset or 0, or
//! `sendInitialEvents`), bookmarks, timeouts, selector transitions as
//! ADDED/DELETED, and an in-stream 410 for a resourceVersion older than the
//! hub's history.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::ApiError;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use store::RangeRequest;
use tokio::sync::broadcast::error::RecvError;

use crate::http::list::{filter_from_query, parse_rv, select};
use crate::http::reply::Reply;
use crate::http::resource::Ctx;
use crate::storage::codec::{needs_conversion, to_served};
use crate::storage::hub::{HubEvent, HubItem};
use crate::storage::select::classify;
use crate::storage::store_err;

/// Appends `{"type":T,"object":O}\n` to `out`.
pub fn watch_line(out: &mut BytesMut, ty: &str, object: &[u8]) {
    out.put_slice(b"{\"type\":\"");
    out.put_slice(ty.as_bytes());
    out.put_slice(b"\",\"object\":");
    out.put_slice(object);
    out.put_slice(b"}\n");
}

/// Random duration for watches without a timeout: 30–60 minutes.
pub fn default_watch_timeout() -> Duration {
    use rand::Rng;
    Duration::from_secs(rand::rng().random_range(1800..3600))
}

fn expired_event(message: &str) -> Bytes {
    let status = ApiError::gone(message).to_status();
    let mut out = BytesMut::new();
    watch_line(
        &mut out,
        "ERROR",
        &serde_json::to_vec(&status).unwrap_or_default(),
    );
    out.freeze()
}

pub async fn watch(ctx: &Ctx<'_>) -> Result<Reply, ApiError> {
    let q = ctx.query;
    let res = ctx.res.clone();
    let mut filter = filter_from_query(
        &res,
        ctx.path.namespace.as_deref().filter(|_| res.namespaced),
        q,
    )?;
    if let Some(name) = &ctx.path.name {
        // A watch on an item path is a watch on the collection by name.
        let sel = format!("metadata.name={name}");
        let byname = apimachinery::selector::FieldSelector::parse(&sel)?;
        filter.fields = Some(match filter.fields.take() {
            None => byname,
            Some(f) => apimachinery::selector::FieldSelector::parse(&format!("{f},{sel}"))?,
        });
    }
    let timeout = match q.int("timeoutSeconds")? {
        Some(s) if s > 0 => Duration::from_secs(s as u64),
        _ => default_watch_timeout(),
    };
    let bookmarks = q.flag("allowWatchBookmarks");
    let send_initial = q.flag("sendInitialEvents");
    let rv_param = q.get("resourceVersion");
    let hub = ctx.api.storage.hub(&res);
    let prefix = match filter.namespace.as_deref() {
        Some(ns) => res.namespace_prefix(ns),
        None => res.prefix(),
    };
    let bookmark_every = ctx.api.bookmark_interval;
    // Table / PartialObjectMetadata events when the Accept header asks.
    let shaper =
        crate::http::table::WatchShaper::new(res.clone(), crate::http::table::requested(ctx)?);
    let content_type = shaper.content_type();

    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(64);
    // Initial state: synthetic ADDED events for RV unset/0 (or when asked).
    let (start_rv, initial) = match rv_param {
        None | Some("0") => (None, true),
        Some(rv) => (Some(parse_rv(rv)?), send_initial),
    };
    let mut initial_lines = BytesMut::new();
    let from = if initial {
        let r = ctx
            .api
            .storage
            .store()
            .range(RangeRequest {
                prefix: prefix.clone(),
                ..Default::default()
            })
            .await
            .map_err(store_err)?;
        for kv in &r.kvs {
            if let Some(b) = select(ctx, &filter, kv)?.and_then(|b| shaper.shape(b)) {
                watch_line(&mut initial_lines, "ADDED", &b);
            }
        }
        if send_initial && bookmarks {
            let bm = json!({
                "kind": res.kind, "apiVersion": res.api_version(),
                "metadata": {"resourceVersion": r.revision.to_string(),
                             "annotations": {"k8s.io/initial-events-end": "true"}}
            });
            watch_line(
                &mut initial_lines,
                "BOOKMARK",
                &serde_json::to_vec(&bm).unwrap_or_default(),
            );
        }
        r.revision
    } else {
        start_rv.unwrap_or(0)
    };
    let sub = hub.subscribe(from);
    let convert = needs_conversion(&res);
    let res2 = res.clone();
    tokio::spawn(async move {
        let (replay, mut live) = match sub {
            Ok(s) => s,
            Err(too_old) => {
                let _ = tx
                    .send(Ok(expired_event(&format!(
                        "too old resource version: {from} ({})",
                        too_old.oldest
                    ))))
                    .await;
                return;
            }
        };
        if !initial_lines.is_empty() && tx.send(Ok(initial_lines.freeze())).await.is_err() {
            return;
        }
        let emit = |ev: &HubEvent| -> Option<Bytes> {
            if ev.revision <= from {
                return None;
            }
            let ty = classify(ev, &filter)?;
            let obj = if convert {
                let v: Value = serde_json::from_slice(&ev.object).ok()?;
                Bytes::from(serde_json::to_vec(&to_served(&res2, v)).ok()?)
            } else {
                ev.object.clone()
            };
            let obj = shaper.shape(obj)?;
            let mut out = BytesMut::with_capacity(obj.len() + 32);
            watch_line(&mut out, ty, &obj);
            Some(out.freeze())
        };
        let mut last_sent = from;
        let mut progress = from;
        for ev in &replay {
            last_sent = last_sent.max(ev.revision);
            if let Some(line) = emit(ev)
                && tx.send(Ok(line)).await.is_err()
            {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut bm_tick = tokio::time::interval(bookmark_every);
        bm_tick.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = tx.closed() => return,
                _ = bm_tick.tick(), if bookmarks => {
                    let rv = progress.max(last_sent);
                    let bm = json!({"kind": res2.kind, "apiVersion": res2.api_version(),
                                    "metadata": {"resourceVersion": rv.to_string()}});
                    let mut out = BytesMut::new();
                    watch_line(&mut out, "BOOKMARK", &serde_json::to_vec(&bm).unwrap_or_default());
                    if tx.send(Ok(out.freeze())).await.is_err() { return }
                }
                item = live.recv() => match item {
                    Ok(HubItem::Event(ev)) => {
                        if ev.revision <= last_sent { continue }
                        last_sent = ev.revision;
                        if let Some(line) = emit(&ev)
                            && tx.send(Ok(line)).await.is_err() { return }
                    }
                    Ok(HubItem::Progress(rev)) => progress = progress.max(rev),
                    // Too slow for the broadcast: end the stream; the client
                    // re-watches from its last resource version.
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return,
                }
            }
        }
    });
    let _ = Arc::clone(&ctx.res);
    Ok(Reply::stream(rx).content_type(content_type))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_one_compact_json_line_each() {
        let mut out = BytesMut::new();
        watch_line(&mut out, "ADDED", br#"{"kind":"Pod"}"#);
        watch_line(&mut out, "DELETED", br#"{"kind":"Pod"}"#);
        let text = String::from_utf8(out.to_vec()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let first: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(first["type"], "ADDED");
        assert_eq!(first["object"]["kind"], "Pod");
    }

    #[test]
    fn a_too_old_resource_version_is_an_in_stream_410() {
        let line = expired_event("too old resource version: 1 (5)");
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["type"], "ERROR");
        assert_eq!(v["object"]["kind"], "Status");
        assert_eq!(v["object"]["code"], 410);
        assert_eq!(v["object"]["reason"], "Expired");
    }

    #[test]
    fn watches_without_a_timeout_last_30_to_60_minutes() {
        for _ in 0..20 {
            let t = default_watch_timeout();
            assert!(t >= Duration::from_secs(1800) && t < Duration::from_secs(3600));
        }
    }
}
