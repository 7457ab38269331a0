//! Reading the protobuf bodies kubectl sends to the identity endpoints.
//!
//! kubectl's typed clients (`auth can-i`, `auth whoami`, `create token`)
//! POST `application/vnd.kubernetes.protobuf` even when the server answers
//! JSON, so these few request kinds must be readable in protobuf. Replies
//! stay JSON, which client-go accepts since it asks for both. The schemas
//! below list only the fields these kinds have, by their proto field
//! numbers; unknown fields are skipped, malformed input is a 400.

use apimachinery::ApiError;
use serde_json::{Map, Value, json};

use super::review::VirtualKind;

/// kube's protobuf envelope starts with these four bytes.
const MAGIC: &[u8] = b"k8s\x00";
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// How one field decodes.
enum F {
    Str(&'static str),
    RepeatedStr(&'static str),
    Int(&'static str),
    Msg(&'static str, &'static [(u64, F)]),
    /// `map<string, ExtraValue>` (ExtraValue is `repeated string items = 1`).
    Extra(&'static str),
}

const RESOURCE_ATTRIBUTES: &[(u64, F)] = &[
    (1, F::Str("namespace")),
    (2, F::Str("verb")),
    (3, F::Str("group")),
    (4, F::Str("version")),
    (5, F::Str("resource")),
    (6, F::Str("subresource")),
    (7, F::Str("name")),
];
const NON_RESOURCE_ATTRIBUTES: &[(u64, F)] = &[(1, F::Str("path")), (2, F::Str("verb"))];
const SELF_SAR_SPEC: &[(u64, F)] = &[
    (1, F::Msg("resourceAttributes", RESOURCE_ATTRIBUTES)),
    (2, F::Msg("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES)),
];
const SAR_SPEC: &[(u64, F)] = &[
    (1, F::Msg("resourceAttributes", RESOURCE_ATTRIBUTES)),
    (2, F::Msg("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES)),
    (3, F::Str("user")),
    (4, F::RepeatedStr("groups")),
    (5, F::Extra("extra")),
    (6, F::Str("uid")),
];
const RULES_REVIEW_SPEC: &[(u64, F)] = &[(1, F::Str("namespace"))];
const BOUND_OBJECT_REF: &[(u64, F)] = &[
    (1, F::Str("kind")),
    (2, F::Str("apiVersion")),
    (3, F::Str("name")),
    (4, F::Str("uid")),
];
const TOKEN_REQUEST_SPEC: &[(u64, F)] = &[
    (1, F::RepeatedStr("audiences")),
    (3, F::Msg("boundObjectRef", BOUND_OBJECT_REF)),
    (4, F::Int("expirationSeconds")),
];
const TOKEN_REVIEW_SPEC: &[(u64, F)] = &[(1, F::Str("token")), (2, F::RepeatedStr("audiences"))];
const OBJECT_META: &[(u64, F)] = &[(1, F::Str("name")), (3, F::Str("namespace"))];

/// The top-level schema of a kind: metadata = 1, spec = 2.
fn top(kind: &VirtualKind) -> &'static [(u64, F)] {
    const SSAR: &[(u64, F)] = &[
        (1, F::Msg("metadata", OBJECT_META)),
        (2, F::Msg("spec", SELF_SAR_SPEC)),
    ];
    const SAR: &[(u64, F)] = &[
        (1, F::Msg("metadata", OBJECT_META)),
        (2, F::Msg("spec", SAR_SPEC)),
    ];
    const SSRR: &[(u64, F)] = &[
        (1, F::Msg("metadata", OBJECT_META)),
        (2, F::Msg("spec", RULES_REVIEW_SPEC)),
    ];
    const TR: &[(u64, F)] = &[
        (1, F::Msg("metadata", OBJECT_META)),
        (2, F::Msg("spec", TOKEN_REQUEST_SPEC)),
    ];
    const TREVIEW: &[(u64, F)] = &[
        (1, F::Msg("metadata", OBJECT_META)),
        (2, F::Msg("spec", TOKEN_REVIEW_SPEC)),
    ];
    const SSR: &[(u64, F)] = &[(1, F::Msg("metadata", OBJECT_META))];
    match kind {
        VirtualKind::SelfSubjectAccessReview => SSAR,
        VirtualKind::SubjectAccessReview | VirtualKind::LocalSubjectAccessReview { .. } => SAR,
        VirtualKind::SelfSubjectRulesReview => SSRR,
        VirtualKind::TokenRequest { .. } => TR,
        VirtualKind::TokenReview => TREVIEW,
        VirtualKind::SelfSubjectReview => SSR,
    }
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&b, rest) = self.buf.split_first()?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        if n > self.buf.len() {
            return None;
        }
        let (b, rest) = self.buf.split_at(n);
        self.buf = rest;
        Some(b)
    }

    /// Skips a field of wire type `wt`.
    fn skip(&mut self, wt: u64) -> Option<()> {
        match wt {
            0 => self.varint().map(drop),
            1 => self.advance(8),
            2 => self.bytes().map(drop),
            5 => self.advance(4),
            _ => None,
        }
    }

    fn advance(&mut self, n: usize) -> Option<()> {
        self.buf = self.buf.get(n..)?;
        Some(())
    }
}

fn string(b: &[u8]) -> Option<Value> {
    std::str::from_utf8(b).ok().map(|s| json!(s))
}

fn message(buf: &[u8], schema: &[(u64, F)], depth: usize) -> Option<Value> {
    if depth > 8 {
        return None;
    }
    let mut out = Map::new();
    let mut r = Reader { buf };
    while !r.buf.is_empty() {
        let key = r.varint()?;
        let (field, wt) = (key >> 3, key & 7);
        let Some((_, f)) = schema.iter().find(|(n, _)| *n == field) else {
            r.skip(wt)?;
            continue;
        };
        match (f, wt) {
            (F::Str(name), 2) => {
                out.insert(name.to_string(), string(r.bytes()?)?);
            }
            (F::RepeatedStr(name), 2) => {
                let v = string(r.bytes()?)?;
                let list = out.entry(name.to_string()).or_insert_with(|| json!([]));
                list.as_array_mut()?.push(v);
            }
            (F::Int(name), 0) => {
                // int64 on the wire is two's complement in a varint.
                out.insert(name.to_string(), json!(r.varint()? as i64));
            }
            (F::Msg(name, sub), 2) => {
                out.insert(name.to_string(), message(r.bytes()?, sub, depth + 1)?);
            }
            (F::Extra(name), 2) => {
                let entry = message(
                    r.bytes()?,
                    &[
                        (1, F::Str("key")),
                        (2, F::Msg("value", &[(1, F::RepeatedStr("items"))])),
                    ],
                    depth + 1,
                )?;
                let key = entry.get("key")?.as_str()?.to_string();
                let items = entry.pointer("/value/items").cloned().unwrap_or(json!([]));
                let map = out.entry(name.to_string()).or_insert_with(|| json!({}));
                map.as_object_mut()?.insert(key, items);
            }
            (_, wt) => r.skip(wt)?,
        }
    }
    Some(Value::Object(out))
}

/// Decodes a protobuf request body of `kind` into its JSON form.
pub fn decode(kind: &VirtualKind, body: &[u8]) -> Result<Value, ApiError> {
    let bad = || ApiError::bad_request("the body is not a valid protobuf object of this kind");
    let envelope = body.strip_prefix(MAGIC).ok_or_else(bad)?;
    // runtime.Unknown: typeMeta = 1, raw = 2, contentEncoding = 3, contentType = 4.
    let mut r = Reader { buf: envelope };
    let mut raw = None;
    while !r.buf.is_empty() {
        let key = r.varint().ok_or_else(bad)?;
        if key == (2 << 3 | 2) {
            raw = Some(r.bytes().ok_or_else(bad)?);
        } else {
            r.skip(key & 7).ok_or_else(bad)?;
        }
    }
    message(raw.unwrap_or_default(), top(kind), 0).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![((n << 3) | 2) as u8, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn self_subject_access_review() {
        let attrs = [field(1, b"ns"), field(2, b"list"), field(5, b"pods")].concat();
        let spec = field(1, &attrs);
        let obj = [field(1, &[]), field(2, &spec)].concat();
        let type_meta = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &obj)].concat();
        let v = decode(&VirtualKind::SelfSubjectAccessReview, &body).unwrap();
        assert_eq!(
            v["spec"]["resourceAttributes"],
            json!({"namespace": "ns", "verb": "list", "resource": "pods"})
        );
    }

    #[test]
    fn token_request_expiration() {
        let spec = [field(1, b"api"), vec![4 << 3, 0x90, 0x1c]].concat();
        let body = [MAGIC.to_vec(), field(2, &field(2, &spec))].concat();
        let v = decode(
            &VirtualKind::TokenRequest {
                namespace: "a".into(),
                name: "b".into(),
            },
            &body,
        )
        .unwrap();
        assert_eq!(
            v["spec"],
            json!({"audiences": ["api"], "expirationSeconds": 3600})
        );
    }

    #[test]
    fn garbage_is_a_400() {
        for b in [
            &b""[..],
            b"k8s\x00\x12\x05ab",
            b"{}",
            b"k8s\x00\x12\x02\x0a\x09",
        ] {
            let e = decode(&VirtualKind::SelfSubjectReview, b).unwrap_err();
            assert_eq!(e.code, 400);
        }
    }
}
