//! LIST and WATCH: selectors, pagination with continue tokens, the
//! resourceVersion / resourceVersionMatch rules, and watch streams with
//! synthetic initial events, bookmarks, timeouts and in-stream 410s.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::ApiError;
use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use http::StatusCode;
use serde_json::{Value, json};
use store::{KeyValue, RangeRequest, Revision};
use tokio::sync::broadcast::error::RecvError;

use crate::handlers::{Ctx, filter_from_query, needs_conversion, store_err, to_served, watch_line};
use crate::object;
use crate::server::Reply;
use crate::watch::{Filter, HubItem, Summary, classify};

/// How many keys a filtered list reads from the store per round.
const SCAN_CHUNK: usize = 500;

fn continue_token(rv: Revision, last_key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"rv": rv, "start": last_key}).to_string())
}

fn parse_continue(tok: &str) -> Result<(Revision, String), ApiError> {
    let bad = || ApiError::bad_request("the continue parameter is not valid");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_i64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    Ok((rv, start.to_string()))
}

fn parse_rv(s: &str) -> Result<Revision, ApiError> {
    s.parse::<Revision>()
        .ok()
        .filter(|r| *r >= 0)
        .ok_or_else(|| ApiError::bad_request(format!("invalid resource version: {s:?}")))
}

/// What a list needs of each stored value: whether it matches and its bytes.
fn select(ctx: &Ctx<'_>, filter: &Filter, kv: &KeyValue) -> Result<Option<Bytes>, ApiError> {
    if filter.is_trivial() && !needs_conversion(&ctx.res) {
        return Ok(Some(object::with_rv(&kv.value, kv.mod_revision)));
    }
    let v = to_served(&ctx.res, object::decode(&kv.value, kv.mod_revision)?);
    if !filter.matches(&Summary::of(&v, &ctx.res.selectable_fields())) {
        return Ok(None);
    }
    Ok(Some(Bytes::from(
        serde_json::to_vec(&v).map_err(|e| ApiError::internal(e.to_string()))?,
    )))
}

pub async fn list(ctx: &Ctx<'_>) -> Result<Reply, ApiError> {
    let q = ctx.query;
    let res = &ctx.res;
    let mut filter = filter_from_query(
        res,
        ctx.path.namespace.as_deref().filter(|_| res.namespaced),
        q,
    )?;
    if let Some(name) = &ctx.path.name {
        // GET on an item with watch handled elsewhere; list never has a name.
        let _ = name;
    }
    let limit = q.int("limit")?.unwrap_or(0).max(0) as usize;
    let rv_param = q.get("resourceVersion");
    let rv_match = q.get("resourceVersionMatch");
    if rv_match.is_some() && rv_param.is_none() {
        return Err(ApiError::bad_request(
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    let current = ctx.server.store.current_revision();
    let (mut read_rv, mut start_after) = (None, None);
    if let Some(tok) = q.get("continue") {
        if rv_param.is_some_and(|r| r != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (rv, start) = parse_continue(tok)?;
        if rv < ctx.server.store.compacted_revision() {
            return Err(ApiError::gone(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
            ));
        }
        read_rv = Some(rv);
        start_after = Some(start);
    } else if let Some(rv) = rv_param {
        let n = parse_rv(rv)?;
        match rv_match {
            Some("Exact") => read_rv = Some(n),
            Some("NotOlderThan") | None => {
                if n > current {
                    // Give in-flight writes a moment, as kube-apiserver waits
                    // for its cache.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if n > ctx.server.store.current_revision() {
                        return Err(ApiError::new(
                            504,
                            "Timeout",
                            format!("Too large resource version: {n}, current: {current}"),
                        ));
                    }
                }
            }
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "unsupported resourceVersionMatch {other:?}: supported values are Exact and NotOlderThan"
                )));
            }
        }
    }
    let prefix = match filter.namespace.as_deref() {
        Some(ns) => res.namespace_prefix(ns),
        None => res.prefix(),
    };
    // `metadata.name=x` within a namespace is a point read in kube-apiserver;
    // here the prefix scan is cheap enough, the filter handles it.
    if !res.namespaced {
        filter.namespace = None;
    }
    let mut items: Vec<Bytes> = Vec::new();
    let mut more = false;
    let mut last_key: Option<String> = None;
    loop {
        let want = if limit == 0 { 0 } else { limit - items.len() };
        let chunk = if filter.is_trivial() && !needs_conversion(res) {
            want
        } else if want == 0 {
            0
        } else {
            want.max(SCAN_CHUNK)
        };
        let r = ctx
            .server
            .store
            .range(RangeRequest {
                prefix: prefix.clone(),
                start_after: start_after.clone(),
                limit: chunk,
                revision: read_rv,
            })
            .await
            .map_err(store_err)?;
        read_rv = Some(r.revision);
        let n = r.kvs.len();
        let mut stopped_early = false;
        for (i, kv) in r.kvs.iter().enumerate() {
            if limit != 0 && items.len() == limit {
                // Filled up mid-chunk: more remain from this key on.
                more = true;
                stopped_early = true;
                let _ = i;
                break;
            }
            if let Some(b) = select(ctx, &filter, kv)? {
                items.push(b);
            }
            last_key = Some(kv.key.to_string());
        }
        if stopped_early {
            break;
        }
        if !r.more || n == 0 {
            break;
        }
        start_after = last_key.clone();
        if limit != 0 && items.len() == limit {
            more = true;
            break;
        }
    }
    let read_at = read_rv.unwrap_or(current);
    let repr = crate::table::requested(ctx)?;
    if !repr.is_object() {
        let cont = last_key
            .as_deref()
            .filter(|_| more)
            .map(|k| continue_token(read_at, k));
        return crate::table::list_reply(res, repr, &items, &read_at.to_string(), cont);
    }
    let mut out = BytesMut::with_capacity(items.iter().map(|b| b.len() + 1).sum::<usize>() + 256);
    out.put_slice(b"{\"kind\":");
    out.put_slice(
        serde_json::to_string(&res.list_kind)
            .unwrap_or_default()
            .as_bytes(),
    );
    out.put_slice(b",\"apiVersion\":");
    out.put_slice(
        serde_json::to_string(&res.api_version())
            .unwrap_or_default()
            .as_bytes(),
    );
    out.put_slice(b",\"metadata\":{\"resourceVersion\":\"");
    out.put_slice(read_at.to_string().as_bytes());
    out.put_u8(b'"');
    if more && let Some(k) = &last_key {
        out.put_slice(b",\"continue\":\"");
        out.put_slice(continue_token(read_at, k).as_bytes());
        out.put_u8(b'"');
    }
    out.put_slice(b"},\"items\":[");
    for (i, b) in items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        out.put_slice(b);
    }
    out.put_slice(b"]}");
    Ok(Reply::json(StatusCode::OK, out.freeze()))
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
        _ => crate::handlers::default_watch_timeout(),
    };
    let bookmarks = q.flag("allowWatchBookmarks");
    let send_initial = q.flag("sendInitialEvents");
    let rv_param = q.get("resourceVersion");
    let hub = ctx.server.hub(&res);
    let prefix = match filter.namespace.as_deref() {
        Some(ns) => res.namespace_prefix(ns),
        None => res.prefix(),
    };
    let bookmark_every = ctx.server.config.bookmark_interval;
    // Table / PartialObjectMetadata events when the Accept header asks.
    let shaper = crate::table::WatchShaper::new(res.clone(), crate::table::requested(ctx)?);
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
            .server
            .store
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
        let emit = |ev: &crate::watch::HubEvent| -> Option<Bytes> {
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
