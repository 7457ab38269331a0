//! Alternative representations of reads chosen by the `Accept` header:
//! `meta.k8s.io` Table (what `kubectl get` asks for, including on watches)
//! and PartialObjectMetadata / PartialObjectMetadataList (metadata-only
//! clients such as kube-rs `metadata_watcher`). GET, LIST and WATCH call in
//! here once they hold the plain JSON objects.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use apimachinery::ApiError;
use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use crate::http::Reply;
use crate::http::resource::Ctx;
use crate::storage::registry::Resource;

/// What a row of a Table carries besides its cells (`includeObject`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

/// The representation a read is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repr {
    /// The objects themselves.
    Object,
    /// A `meta.k8s.io` Table of the given version (`v1` or `v1beta1`).
    Table {
        version: &'static str,
        include: Include,
    },
    /// PartialObjectMetadata(List) of the given `meta.k8s.io` version.
    Partial { version: &'static str },
}

impl Repr {
    pub fn is_object(&self) -> bool {
        matches!(self, Repr::Object)
    }

    fn content_type(&self, list: bool) -> &'static str {
        match (self, list) {
            (Repr::Object, _) => "application/json",
            (
                Repr::Table {
                    version: "v1beta1", ..
                },
                _,
            ) => "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            (Repr::Table { .. }, _) => "application/json;as=Table;v=v1;g=meta.k8s.io",
            (Repr::Partial { version: "v1beta1" }, true) => {
                "application/json;as=PartialObjectMetadataList;v=v1beta1;g=meta.k8s.io"
            }
            (Repr::Partial { version: "v1beta1" }, false) => {
                "application/json;as=PartialObjectMetadata;v=v1beta1;g=meta.k8s.io"
            }
            (Repr::Partial { .. }, true) => {
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
            }
            (Repr::Partial { .. }, false) => {
                "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
            }
        }
    }
}

/// Picks the first media range of `accept` this server can produce. Ranges
/// asking for another `as=` (or a non-JSON type) are skipped; when none fits
/// the plain object is served, as before content negotiation existed.
pub fn negotiate(accept: &str, include_object: Option<&str>) -> Result<Repr, ApiError> {
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        if !matches!(media, "application/json" | "application/*" | "*/*") {
            continue;
        }
        let (mut as_, mut g, mut v) = (None, None, None);
        for p in parts {
            if let Some((k, val)) = p.split_once('=') {
                match k.trim() {
                    "as" => as_ = Some(val.trim()),
                    "g" => g = Some(val.trim()),
                    "v" => v = Some(val.trim()),
                    _ => {}
                }
            }
        }
        let Some(as_) = as_ else {
            return Ok(Repr::Object);
        };
        if g != Some("meta.k8s.io") {
            continue;
        }
        let version = match v {
            Some("v1") => "v1",
            Some("v1beta1") => "v1beta1",
            _ => continue,
        };
        match as_ {
            "Table" => {
                let include = match include_object {
                    None | Some("Metadata") => Include::Metadata,
                    Some("None") => Include::None,
                    Some("Object") => Include::Object,
                    Some(other) => {
                        return Err(ApiError::bad_request(format!(
                            "includeObject must be one of None, Metadata, Object; got {other:?}"
                        )));
                    }
                };
                return Ok(Repr::Table { version, include });
            }
            "PartialObjectMetadata" | "PartialObjectMetadataList" => {
                return Ok(Repr::Partial { version });
            }
            _ => continue,
        }
    }
    Ok(Repr::Object)
}

/// The representation a request asks for.
pub fn requested(ctx: &Ctx<'_>) -> Result<Repr, ApiError> {
    let accept = ctx
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    negotiate(accept, ctx.query.get("includeObject"))
}

fn partial(version: &str, obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn row(res: &Resource, include: Include, version: &str, obj: Value) -> Value {
    let cells = crate::http::columns::cells(res, &obj, chrono::Utc::now());
    match include {
        Include::None => json!({"cells": cells}),
        Include::Metadata => json!({"cells": cells, "object": partial(version, &obj)}),
        Include::Object => json!({"cells": cells, "object": obj}),
    }
}

fn table(
    res: &Resource,
    version: &str,
    include: Include,
    columns: bool,
    metadata: Value,
    objs: Vec<Value>,
) -> Value {
    let rows: Vec<Value> = objs
        .into_iter()
        .map(|o| row(res, include, version, o))
        .collect();
    let mut t = json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": metadata,
    });
    if columns {
        t["columnDefinitions"] = Value::Array(crate::http::columns::definitions(res));
    }
    t["rows"] = Value::Array(rows);
    t
}

fn parse(b: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(b)
        .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))
}

fn to_bytes(v: &Value) -> Result<Bytes, ApiError> {
    serde_json::to_vec(v)
        .map(Bytes::from)
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// The reply to a GET of one object (`body` is the plain JSON object).
pub fn get_reply(ctx: &Ctx<'_>, body: Bytes) -> Result<Reply, ApiError> {
    let repr = requested(ctx)?;
    let v = match repr {
        Repr::Object => return Ok(Reply::json(StatusCode::OK, body)),
        Repr::Partial { version } => partial(version, &parse(&body)?),
        Repr::Table { version, include } => {
            let obj = parse(&body)?;
            let rv = obj
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(Value::Null);
            table(
                &ctx.res,
                version,
                include,
                true,
                json!({"resourceVersion": rv}),
                vec![obj],
            )
        }
    };
    Ok(Reply::json(StatusCode::OK, to_bytes(&v)?).content_type(repr.content_type(false)))
}

/// The reply to a LIST in a non-object representation: `items` are the
/// plain JSON objects, `rv` and `continue_token` the list's metadata.
pub fn list_reply(
    res: &Resource,
    repr: Repr,
    items: &[Bytes],
    rv: &str,
    continue_token: Option<String>,
) -> Result<Reply, ApiError> {
    let objs = items
        .iter()
        .map(|b| parse(b))
        .collect::<Result<Vec<_>, _>>()?;
    let mut metadata = json!({"resourceVersion": rv});
    if let Some(c) = continue_token {
        metadata["continue"] = json!(c);
    }
    let v = match repr {
        Repr::Object => {
            return Err(ApiError::internal(
                "list_reply called for the object representation",
            ));
        }
        Repr::Partial { version } => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": format!("meta.k8s.io/{version}"),
            "metadata": metadata,
            "items": objs.iter().map(|o| partial(version, o)).collect::<Vec<_>>(),
        }),
        Repr::Table { version, include } => table(res, version, include, true, metadata, objs),
    };
    Ok(Reply::json(StatusCode::OK, to_bytes(&v)?).content_type(repr.content_type(true)))
}

/// Reshapes the objects of one watch stream. Like kube-apiserver, a Table
/// stream sends its column definitions with the first event only.
pub struct WatchShaper {
    res: Arc<Resource>,
    repr: Repr,
    columns_sent: AtomicBool,
}

impl WatchShaper {
    pub fn new(res: Arc<Resource>, repr: Repr) -> WatchShaper {
        WatchShaper {
            res,
            repr,
            columns_sent: AtomicBool::new(false),
        }
    }

    /// The Content-Type of the stream.
    pub fn content_type(&self) -> &'static str {
        self.repr.content_type(false)
    }

    /// The event object for `obj` (plain JSON bytes); `None` if it cannot be
    /// read, in which case the event is skipped rather than breaking the
    /// stream.
    pub fn shape(&self, obj: Bytes) -> Option<Bytes> {
        let (version, include) = match self.repr {
            Repr::Object => return Some(obj),
            Repr::Partial { version } => {
                let v = serde_json::from_slice::<Value>(&obj).ok()?;
                return serde_json::to_vec(&partial(version, &v))
                    .ok()
                    .map(Bytes::from);
            }
            Repr::Table { version, include } => (version, include),
        };
        let v = serde_json::from_slice::<Value>(&obj).ok()?;
        let columns = !self.columns_sent.swap(true, Ordering::Relaxed);
        let rv = v
            .pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or(Value::Null);
        let t = table(
            &self.res,
            version,
            include,
            columns,
            json!({"resourceVersion": rv}),
            vec![v],
        );
        serde_json::to_vec(&t).ok().map(Bytes::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(kubectl, None).unwrap(),
            Repr::Table {
                version: "v1",
                include: Include::Metadata
            }
        );
        assert_eq!(
            negotiate(kubectl, Some("Object")).unwrap(),
            Repr::Table {
                version: "v1",
                include: Include::Object
            }
        );
        assert_eq!(
            negotiate(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                None
            )
            .unwrap(),
            Repr::Partial { version: "v1" }
        );
        assert_eq!(negotiate("application/json", None).unwrap(), Repr::Object);
        assert_eq!(negotiate("", None).unwrap(), Repr::Object);
        assert_eq!(
            negotiate(
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json",
                None
            )
            .unwrap(),
            Repr::Object
        );
        assert!(negotiate(kubectl, Some("Everything")).is_err());
    }
}
