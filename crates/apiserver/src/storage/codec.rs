//! The stored encoding and version conversion.
//!
//! Objects are stored as JSON with `metadata` as the first member and no
//! `resourceVersion`: the resource version *is* the store's mod revision, so
//! it is spliced into the bytes on the way out (right after `{"metadata":{`)
//! instead of parsing and re-serialising every object of a LIST.
//!
//! A view served in another form than it is stored (events.k8s.io/v1 Events
//! over core/v1 storage, a custom resource version other than the storage
//! version) is converted here, through the resource's strategy.

use apimachinery::ApiError;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value, json};
use store::Revision;

use crate::object::set_rv;
use crate::storage::registry::Resource;

const STORED_PREFIX: &[u8] = b"{\"metadata\":{";

/// Serialises `obj` in the stored form: `metadata` first, without
/// `resourceVersion`.
pub fn encode(obj: &Value) -> Bytes {
    let mut out = BytesMut::with_capacity(512);
    out.put_slice(b"{\"metadata\":");
    let empty = Map::new();
    let map = obj.as_object().unwrap_or(&empty);
    // Written member by member instead of through a copy of metadata
    // without resourceVersion: one allocation less per write.
    out.put_u8(b'{');
    let meta = map
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut first = true;
    for (k, v) in meta {
        if k == "resourceVersion" {
            continue;
        }
        if !first {
            out.put_u8(b',');
        }
        first = false;
        serde_json::to_writer((&mut out).writer(), k).expect("serialising a JSON string");
        out.put_u8(b':');
        serde_json::to_writer((&mut out).writer(), v).expect("serialising a JSON value");
    }
    // The name is always set on stored objects, so metadata is never `{}`
    // and the splice point always precedes another member.
    out.put_u8(b'}');
    for (k, v) in map {
        if k == "metadata" {
            continue;
        }
        out.put_u8(b',');
        serde_json::to_writer((&mut out).writer(), k).expect("serialising a JSON string");
        out.put_u8(b':');
        serde_json::to_writer((&mut out).writer(), v).expect("serialising a JSON value");
    }
    out.put_u8(b'}');
    out.freeze()
}

/// The stored bytes of `obj` of `res` (served form): converted first only
/// where the kind needs it, so the common case copies nothing.
pub fn encode_stored(res: &Resource, obj: &Value) -> Bytes {
    if needs_conversion(res) {
        encode(&to_stored(res, obj.clone()))
    } else {
        encode(obj)
    }
}

/// The stored bytes with `metadata.resourceVersion` set to `rv`.
pub fn with_rv(stored: &[u8], rv: Revision) -> Bytes {
    let mut out = BytesMut::with_capacity(stored.len() + 32);
    if stored.starts_with(STORED_PREFIX) && stored.get(STORED_PREFIX.len()) != Some(&b'}') {
        out.put_slice(STORED_PREFIX);
        out.put_slice(format!("\"resourceVersion\":\"{rv}\",").as_bytes());
        out.put_slice(&stored[STORED_PREFIX.len()..]);
        out.freeze()
    } else {
        // Not in the stored form (written by another tool): parse instead.
        match serde_json::from_slice::<Value>(stored) {
            Ok(mut v) => {
                set_rv(&mut v, rv);
                Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
            }
            Err(_) => Bytes::copy_from_slice(stored),
        }
    }
}

/// Parses stored bytes into an object carrying `rv`.
pub fn decode(stored: &[u8], rv: Revision) -> Result<Value, ApiError> {
    let mut v: Value = serde_json::from_slice(stored)
        .map_err(|e| ApiError::internal(format!("stored object is not valid JSON: {e}")))?;
    set_rv(&mut v, rv);
    Ok(v)
}

/// Renders a stored value as the served resource sees it.
pub fn render(res: &Resource, stored: &[u8], rv: Revision) -> Result<Bytes, ApiError> {
    if needs_conversion(res) {
        let v = to_served(res, decode(stored, rv)?);
        Ok(Bytes::from(
            serde_json::to_vec(&v).map_err(|e| ApiError::internal(e.to_string()))?,
        ))
    } else {
        Ok(with_rv(stored, rv))
    }
}

/// Whether objects of `res` must be converted between stored and served
/// form.
pub fn needs_conversion(res: &Resource) -> bool {
    res.converted()
}

/// Stored form → served form. A custom resource always reads as the
/// served version (objects stored before the storage version moved too).
pub fn to_served(res: &Resource, v: Value) -> Value {
    if res.builtin {
        return if res.converted() {
            res.strategy.storage_to_served(res, v)
        } else {
            v
        };
    }
    let mut v = v;
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!(res.api_version()));
    }
    v
}

/// Served form → stored form.
pub fn to_stored(res: &Resource, v: Value) -> Value {
    if !res.converted() {
        return v;
    }
    if res.builtin {
        return res.strategy.served_to_storage(res, v);
    }
    let mut v = v;
    if let Some(m) = v.as_object_mut() {
        m.insert(
            "apiVersion".into(),
            json!(format!("{}/{}", res.group, res.storage_version)),
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_splice_sets_resource_version() {
        let obj = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"9"},"data":{"k":"v"}});
        let stored = encode(&obj);
        assert!(stored.starts_with(STORED_PREFIX));
        assert!(!String::from_utf8_lossy(&stored).contains("resourceVersion"));
        let out: Value = serde_json::from_slice(&with_rv(&stored, 42)).unwrap();
        assert_eq!(out["metadata"]["resourceVersion"], "42");
        assert_eq!(out["metadata"]["name"], "a");
        assert_eq!(out["data"]["k"], "v");
        assert_eq!(out["kind"], "ConfigMap");
    }

    #[test]
    fn splice_falls_back_for_foreign_bytes() {
        let out: Value =
            serde_json::from_slice(&with_rv(br#"{"kind":"X","metadata":{"name":"n"}}"#, 5))
                .unwrap();
        assert_eq!(out["metadata"]["resourceVersion"], "5");
    }
}
