//! Reading `application/vnd.kubernetes.protobuf` request bodies.
//!
//! client-go's typed clients (most kubectl commands: `create configmap`,
//! `create deployment`, `drain --disable-eviction`, …) encode built-in
//! objects in protobuf even when the server answers JSON. Such a body is the
//! magic `k8s\0` followed by a `runtime.Unknown` envelope whose `raw` field
//! holds the object; the envelope's type meta names its kind. This module
//! turns the object into the JSON the handlers already process, so protobuf
//! and JSON bodies go through the same code. Replies stay JSON, which
//! client-go accepts.
//!
//! Decoding is driven by per-message field tables ([`schema`]) over a small
//! wire-format reader ([`wire`]). A kind without a table is answered 415 so
//! the client knows to send JSON; malformed input is a 400, never a panic.

mod decode;
pub(crate) mod schema;
pub(crate) mod wire;

#[cfg(test)]
mod tests;

use apimachinery::ApiError;
use serde_json::{Map, Value, json};

use schema::Table;
use wire::{Reader, Wire};

/// The media type of Kubernetes protobuf.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Every protobuf body starts with these four bytes.
const MAGIC: &[u8] = b"k8s\x00";

/// Whether `body` is a protobuf envelope. JSON and YAML can never start with
/// a NUL byte, so the prefix alone decides, whatever the Content-Type says
/// (a handler may pass a body on under the original request's headers).
pub fn is_envelope(body: &[u8]) -> bool {
    body.starts_with(MAGIC)
}

/// The parts of a `runtime.Unknown` envelope.
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
}

/// Reads the envelope: typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2,
/// contentEncoding = 3, contentType = 4.
fn envelope(body: &[u8]) -> Result<Envelope<'_>, ApiError> {
    let bad = |e: &str| ApiError::bad_request(format!("the protobuf envelope is malformed: {e}"));
    let payload = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the k8s magic bytes"))?;
    let mut env = Envelope {
        api_version: String::new(),
        kind: String::new(),
        raw: &[],
    };
    let mut r = Reader::new(payload);
    while let Some((num, wire)) = r.field().map_err(bad)? {
        match (num, wire) {
            (1, Wire::Len(type_meta)) => {
                let mut t = Reader::new(type_meta);
                while let Some((n, w)) = t.field().map_err(bad)? {
                    match (n, w) {
                        (1, Wire::Len(s)) => env.api_version = String::from_utf8_lossy(s).into(),
                        (2, Wire::Len(s)) => env.kind = String::from_utf8_lossy(s).into(),
                        _ => {}
                    }
                }
            }
            (2, Wire::Len(raw)) => env.raw = raw,
            (3, Wire::Len(encoding)) if !encoding.is_empty() => {
                return Err(ApiError::unsupported_media_type(format!(
                    "protobuf bodies with content encoding {:?} are not supported",
                    String::from_utf8_lossy(encoding)
                )));
            }
            _ => {}
        }
    }
    Ok(env)
}

/// Decodes a protobuf body of a built-in kind into its JSON form, with
/// `apiVersion` and `kind` from the envelope (the handlers then check them
/// against the resource). A kind without a table is a 415.
pub fn decode_object(body: &[u8]) -> Result<Value, ApiError> {
    let env = envelope(body)?;
    if env.kind.is_empty() {
        return Err(ApiError::bad_request(
            "the protobuf envelope does not name the kind of its object",
        ));
    }
    let table = schema::for_kind(&env.api_version, &env.kind).ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the server cannot read {} ({}) as {CONTENT_TYPE}; send it as application/json",
            env.kind, env.api_version
        ))
    })?;
    let mut out = Map::new();
    if !env.api_version.is_empty() {
        out.insert("apiVersion".into(), json!(env.api_version));
    }
    out.insert("kind".into(), json!(env.kind));
    decode::message(env.raw, table, 0, &mut out).map_err(|e| {
        ApiError::bad_request(format!(
            "the body is not a valid protobuf {}: {e}",
            env.kind
        ))
    })?;
    Ok(Value::Object(out))
}

/// Decodes a protobuf body that must hold a `kind` (of any group version),
/// for bodies that are not the resource itself (DeleteOptions).
pub fn decode_kind(body: &[u8], kind: &str) -> Result<Value, ApiError> {
    let v = decode_object(body)?;
    match v.get("kind").and_then(Value::as_str) {
        Some(k) if k == kind => Ok(v),
        k => Err(ApiError::bad_request(format!(
            "expected a protobuf {kind}, got {}",
            k.unwrap_or("nothing")
        ))),
    }
}

/// Decodes a protobuf body as the message `table`, whatever kind its envelope
/// names (for endpoints that serve exactly one kind). No `apiVersion`/`kind`
/// is added.
pub(crate) fn decode_as(body: &[u8], table: Table) -> Result<Value, ApiError> {
    let env = envelope(body)?;
    let mut out = Map::new();
    decode::message(env.raw, table, 0, &mut out).map_err(|e| {
        ApiError::bad_request(format!(
            "the body is not a valid protobuf object of this kind: {e}"
        ))
    })?;
    Ok(Value::Object(out))
}
