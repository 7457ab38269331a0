//! LIST: namespace, label and field selectors, pagination with continue
//! tokens, and the resourceVersion / resourceVersionMatch rules.

use std::time::Duration;

use apimachinery::ApiError;
use apimachinery::selector::{FieldSelector, LabelSelector};
use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use http::StatusCode;
use serde_json::{Value, json};
use store::{KeyValue, RangeRequest, Revision};

use crate::http::reply::Reply;
use crate::http::request::Query;
use crate::http::resource::Ctx;
use crate::storage::codec::{self, needs_conversion, to_served};
use crate::storage::registry::Resource;
use crate::storage::select::{Filter, Summary};
use crate::storage::store_err;

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

pub(crate) fn parse_rv(s: &str) -> Result<Revision, ApiError> {
    s.parse::<Revision>()
        .ok()
        .filter(|r| *r >= 0)
        .ok_or_else(|| ApiError::bad_request(format!("invalid resource version: {s:?}")))
}

/// What a list needs of each stored value: whether it matches and its bytes.
pub(crate) fn select(
    ctx: &Ctx<'_>,
    filter: &Filter,
    kv: &KeyValue,
) -> Result<Option<Bytes>, ApiError> {
    if filter.is_trivial() && !needs_conversion(&ctx.res) {
        return Ok(Some(codec::with_rv(&kv.value, kv.mod_revision)));
    }
    let v = to_served(&ctx.res, codec::decode(&kv.value, kv.mod_revision)?);
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
    let current = ctx.api.storage.store().current_revision();
    let (mut read_rv, mut start_after) = (None, None);
    if let Some(tok) = q.get("continue") {
        if rv_param.is_some_and(|r| r != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (rv, start) = parse_continue(tok)?;
        if rv < ctx.api.storage.store().compacted_revision() {
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
                    if n > ctx.api.storage.store().current_revision() {
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
            .api
            .storage
            .store()
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
    let repr = crate::http::table::requested(ctx)?;
    if !repr.is_object() {
        let cont = last_key
            .as_deref()
            .filter(|_| more)
            .map(|k| continue_token(read_at, k));
        return crate::http::table::list_reply(res, repr, &items, &read_at.to_string(), cont);
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

/// The namespace, label and field selection of a list or watch request.
pub fn filter_from_query(res: &Resource, ns: Option<&str>, q: &Query) -> Result<Filter, ApiError> {
    let labels = match q.get("labelSelector") {
        Some(s) => Some(LabelSelector::parse(s)?),
        None => None,
    };
    let fields = match q.get("fieldSelector") {
        Some(s) => {
            let f = FieldSelector::parse(s)?;
            f.validate_fields(&res.selectable_fields())?;
            Some(f)
        }
        None => None,
    };
    Ok(Filter {
        namespace: ns.map(str::to_string),
        labels,
        fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_carry_the_revision_and_the_last_key() {
        let tok = continue_token(42, "/registry/core/pods/ns/p9");
        assert_eq!(
            parse_continue(&tok).unwrap(),
            (42, "/registry/core/pods/ns/p9".to_string())
        );
        assert_eq!(parse_continue("not base64!").unwrap_err().code, 400);
        let not_json = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("x");
        assert_eq!(parse_continue(&not_json).unwrap_err().code, 400);
    }

    #[test]
    fn resource_versions_are_non_negative_numbers() {
        assert_eq!(parse_rv("0").unwrap(), 0);
        assert_eq!(parse_rv("17").unwrap(), 17);
        assert_eq!(parse_rv("-1").unwrap_err().code, 400);
        assert_eq!(parse_rv("abc").unwrap_err().code, 400);
    }

    #[test]
    fn selectors_come_from_the_query_and_unknown_fields_are_refused() {
        let pods = crate::strategy::resources()
            .into_iter()
            .find(|r| r.kind == "Pod")
            .unwrap();
        let q = Query::parse(Some(
            "labelSelector=app%3Da&fieldSelector=spec.nodeName%3Dn1",
        ));
        let f = filter_from_query(&pods, Some("ns"), &q).unwrap();
        assert_eq!(f.namespace.as_deref(), Some("ns"));
        assert!(f.labels.is_some() && f.fields.is_some());
        let q = Query::parse(Some("fieldSelector=spec.bogus%3Dx"));
        assert_eq!(filter_from_query(&pods, None, &q).unwrap_err().code, 400);
    }
}
