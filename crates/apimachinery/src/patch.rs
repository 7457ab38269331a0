//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902), the two
//! schema-free patch types kube-apiserver accepts
//! (`application/merge-patch+json`, `application/json-patch+json`).
//!
//! Error mapping follows kube-apiserver: a JSON patch document that cannot be
//! decoded is 400 BadRequest, more than [`MAX_JSON_PATCH_OPERATIONS`]
//! operations is 413, and an operation that does not apply to the object
//! (failed `test`, missing path, index out of range) is 422 Invalid.

// `ApiError` (about 150 bytes) is this crate's error type and what the API
// server renders; boxing it only here would make these functions odd ones
// out, and errors are the cold path.
#![allow(clippy::result_large_err)]

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::status::ApiError;

/// kube-apiserver refuses JSON patches with more operations than this.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Upper bound on the serialized size of all values duplicated by `copy`
/// operations in one patch. Without it a few dozen `copy` operations, each
/// doubling the document, would exhaust memory.
pub const MAX_COPIED_BYTES: usize = 32 * 1024 * 1024;

// ---------------------------------------------------------------------------
// RFC 7386 merge patch
// ---------------------------------------------------------------------------

/// Applies an RFC 7386 merge patch in place: an object patch merges member by
/// member (a `null` member deletes, anything else merges recursively into
/// the member, which becomes `{}` first if it is not an object); any other
/// patch, arrays included, replaces the target wholesale.
///
/// Kept members stay where they were and new members go last, since
/// `serde_json::Map` preserves insertion order here and users notice
/// reordered manifests.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        return;
    };
    // Deletions are collected and done in one pass at the end: removing
    // members one by one while keeping the order of the rest (shift_remove)
    // costs a pass each, which a patch deleting thousands of members of a
    // large map turns into seconds of CPU.
    let mut gone: HashSet<&str> = HashSet::new();
    for (key, value) in patch {
        if value.is_null() {
            if target.contains_key(key) {
                gone.insert(key);
            }
        } else {
            // `entry` keeps an existing member's position.
            let slot = target.entry(key.clone()).or_insert(Value::Null);
            merge_patch(slot, value);
        }
    }
    if !gone.is_empty() {
        target.retain(|k, _| !gone.contains(k.as_str()));
    }
}

/// The RFC 7386 merge patch that turns `from` into `to` (the inverse of
/// [`merge_patch`]); `None` when they are equal. Members `to` lacks become
/// `null`; arrays and scalars that differ are sent whole.
pub fn merge_patch_diff(from: &Value, to: &Value) -> Option<Value> {
    match (from, to) {
        (Value::Object(f), Value::Object(t)) => {
            let mut out = Map::new();
            for (k, fv) in f {
                match t.get(k) {
                    None => {
                        out.insert(k.clone(), Value::Null);
                    }
                    Some(tv) => {
                        if let Some(d) = merge_patch_diff(fv, tv) {
                            out.insert(k.clone(), d);
                        }
                    }
                }
            }
            for (k, tv) in t {
                if !f.contains_key(k) {
                    out.insert(k.clone(), tv.clone());
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        (f, t) if f == t => None,
        (_, t) => Some(t.clone()),
    }
}

// ---------------------------------------------------------------------------
// RFC 6902 JSON patch
// ---------------------------------------------------------------------------

/// Applies an RFC 6902 JSON patch (`ops` is the decoded patch document).
///
/// All or nothing: operations run on a copy, and `target` changes only when
/// every one succeeds.
///
/// One deliberate deviation from the RFC, for compatibility: a `test` whose
/// value is `null` passes when the path does not exist. kube-rs's finalizer
/// helper sends `test /metadata/finalizers null` before adding the first
/// finalizer to an object that has none, and kube-apiserver's patch library
/// accepts that.
pub fn json_patch(target: &mut Value, ops: &Value) -> Result<(), ApiError> {
    let ops = decode(ops)?;
    let mut doc = target.clone();
    let mut copied = 0usize;
    for op in &ops {
        apply(&mut doc, op, &mut copied).map_err(|why| {
            let location = match &op.from {
                Some(from) => format!("{} (from {})", show(&op.path.raw), show(&from.raw)),
                None => show(&op.path.raw),
            };
            ApiError::new(
                422,
                "Invalid",
                format!(
                    "json patch {} operation failed at {location}: {why}",
                    op.kind.name()
                ),
            )
        })?;
    }
    *target = doc;
    Ok(())
}

/// Pointers are shown as written; the root pointer is empty, so quote it.
fn show(pointer: &str) -> String {
    if pointer.is_empty() {
        "\"\"".to_string()
    } else {
        pointer.to_string()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Add,
    Remove,
    Replace,
    Move,
    Copy,
    Test,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Add => "add",
            Kind::Remove => "remove",
            Kind::Replace => "replace",
            Kind::Move => "move",
            Kind::Copy => "copy",
            Kind::Test => "test",
        }
    }
}

/// A decoded JSON pointer: the text as sent (for messages) and its
/// unescaped reference tokens.
#[derive(Debug)]
struct Pointer {
    raw: String,
    tokens: Vec<String>,
}

#[derive(Debug)]
struct Operation<'a> {
    kind: Kind,
    path: Pointer,
    from: Option<Pointer>,
    value: Option<&'a Value>,
}

/// Checks the shape of the whole document before touching the target, so a
/// malformed document is always a 400 and never a half-applied 422.
fn decode(ops: &Value) -> Result<Vec<Operation<'_>>, ApiError> {
    let Value::Array(list) = ops else {
        return Err(ApiError::bad_request(
            "json patch must be an array of operations",
        ));
    };
    if list.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::request_entity_too_large(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            list.len()
        )));
    }
    list.iter()
        .enumerate()
        .map(|(i, op)| {
            decode_one(op)
                .map_err(|why| ApiError::bad_request(format!("json patch operation {i}: {why}")))
        })
        .collect()
}

fn decode_one(op: &Value) -> Result<Operation<'_>, String> {
    let Value::Object(op) = op else {
        return Err("must be an object".to_string());
    };
    let kind = match op.get("op") {
        Some(Value::String(name)) => match name.as_str() {
            "add" => Kind::Add,
            "remove" => Kind::Remove,
            "replace" => Kind::Replace,
            "move" => Kind::Move,
            "copy" => Kind::Copy,
            "test" => Kind::Test,
            other => return Err(format!("unknown op \"{other}\"")),
        },
        Some(_) => return Err("\"op\" must be a string".to_string()),
        None => return Err("missing \"op\"".to_string()),
    };
    let path = pointer_member(op, "path")?;
    let from = match kind {
        Kind::Move | Kind::Copy => Some(pointer_member(op, "from")?),
        _ => None,
    };
    // `"value": null` is a value; only a missing member is an error.
    let value = match kind {
        Kind::Add | Kind::Replace | Kind::Test => match op.get("value") {
            Some(v) => Some(v),
            None => return Err(format!("{} operation missing \"value\"", kind.name())),
        },
        _ => None,
    };
    Ok(Operation {
        kind,
        path,
        from,
        value,
    })
}

fn pointer_member(op: &Map<String, Value>, member: &str) -> Result<Pointer, String> {
    match op.get(member) {
        Some(Value::String(raw)) => parse_pointer(raw),
        Some(_) => Err(format!("\"{member}\" must be a string")),
        None => Err(format!("missing \"{member}\"")),
    }
}

/// RFC 6901: empty is the whole document, otherwise `/`-separated tokens in
/// which `~1` stands for `/` and `~0` for `~` (decoded in that order, so
/// `~01` is the literal `~1`).
fn parse_pointer(raw: &str) -> Result<Pointer, String> {
    if raw.is_empty() {
        return Ok(Pointer {
            raw: String::new(),
            tokens: Vec::new(),
        });
    }
    let Some(rest) = raw.strip_prefix('/') else {
        return Err(format!(
            "invalid JSON pointer \"{raw}\": must start with '/'"
        ));
    };
    let mut tokens = Vec::new();
    for part in rest.split('/') {
        let mut token = String::with_capacity(part.len());
        let mut chars = part.chars();
        while let Some(c) = chars.next() {
            if c == '~' {
                match chars.next() {
                    Some('0') => token.push('~'),
                    Some('1') => token.push('/'),
                    _ => {
                        return Err(format!(
                            "invalid JSON pointer \"{raw}\": '~' must be followed by '0' or '1'"
                        ));
                    }
                }
            } else {
                token.push(c);
            }
        }
        tokens.push(token);
    }
    Ok(Pointer {
        raw: raw.to_string(),
        tokens,
    })
}

/// An array index token: decimal digits without a sign or leading zeros.
/// `-` (past the end) is handled by the callers that allow it.
fn parse_index(token: &str) -> Option<usize> {
    let digits_only = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

fn resolve<'v>(doc: &'v Value, tokens: &[String]) -> Option<&'v Value> {
    tokens.iter().try_fold(doc, |node, token| match node {
        Value::Object(map) => map.get(token),
        Value::Array(items) => parse_index(token).and_then(|i| items.get(i)),
        _ => None,
    })
}

fn resolve_mut<'v>(doc: &'v mut Value, tokens: &[String]) -> Option<&'v mut Value> {
    tokens.iter().try_fold(doc, |node, token| match node {
        Value::Object(map) => map.get_mut(token),
        Value::Array(items) => parse_index(token).and_then(|i| items.get_mut(i)),
        _ => None,
    })
}

fn apply(doc: &mut Value, op: &Operation<'_>, copied: &mut usize) -> Result<(), String> {
    let value = || op.value.cloned().unwrap_or(Value::Null);
    match op.kind {
        Kind::Add => add(doc, &op.path.tokens, value()),
        Kind::Remove => remove(doc, &op.path.tokens).map(drop),
        Kind::Replace => match resolve_mut(doc, &op.path.tokens) {
            Some(slot) => {
                *slot = value();
                Ok(())
            }
            None => Err("path does not exist".to_string()),
        },
        Kind::Move => {
            let from = op
                .from
                .as_ref()
                .map(|p| p.tokens.as_slice())
                .unwrap_or_default();
            let to = op.path.tokens.as_slice();
            if from == to {
                // A no-op, but the source must still exist.
                return match resolve(doc, from) {
                    Some(_) => Ok(()),
                    None => Err("\"from\" path does not exist".to_string()),
                };
            }
            if to.starts_with(from) {
                return Err("cannot move a value into one of its own children".to_string());
            }
            let moved = remove(doc, from).map_err(|e| format!("\"from\" {e}"))?;
            add(doc, to, moved)
        }
        Kind::Copy => {
            let from = op
                .from
                .as_ref()
                .map(|p| p.tokens.as_slice())
                .unwrap_or_default();
            let Some(source) = resolve(doc, from) else {
                return Err("\"from\" path does not exist".to_string());
            };
            *copied = copied.saturating_add(serialized_len(source));
            if *copied > MAX_COPIED_BYTES {
                return Err(format!(
                    "copy operations would duplicate more than {MAX_COPIED_BYTES} bytes"
                ));
            }
            let source = source.clone();
            add(doc, &op.path.tokens, source)
        }
        Kind::Test => {
            let expected = op.value.unwrap_or(&Value::Null);
            match resolve(doc, &op.path.tokens) {
                Some(actual) if json_equal(actual, expected) => Ok(()),
                Some(_) => Err("value does not match".to_string()),
                // See json_patch: `null` tests for absence.
                None if expected.is_null() => Ok(()),
                None => Err("path does not exist".to_string()),
            }
        }
    }
}

/// RFC 6902 `add`: replaces the root, sets an object member (keeping its
/// position if it exists), or inserts into an array at an index up to its
/// length, `-` meaning the end. The parent must already exist.
fn add(doc: &mut Value, tokens: &[String], value: Value) -> Result<(), String> {
    let Some((last, parent)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match resolve_mut(doc, parent) {
        Some(Value::Object(map)) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            if last == "-" {
                items.push(value);
                return Ok(());
            }
            match parse_index(last) {
                Some(i) if i <= items.len() => {
                    items.insert(i, value);
                    Ok(())
                }
                Some(i) => Err(format!(
                    "index {i} is out of bounds for an array of length {}",
                    items.len()
                )),
                None => Err(format!("invalid array index \"{last}\"")),
            }
        }
        Some(_) => Err("parent is neither an object nor an array".to_string()),
        None => Err("parent path does not exist".to_string()),
    }
}

/// RFC 6902 `remove`, returning the removed value (for `move`). Removing
/// the whole document is refused: there would be nothing left to store.
fn remove(doc: &mut Value, tokens: &[String]) -> Result<Value, String> {
    let Some((last, parent)) = tokens.split_last() else {
        return Err("cannot remove the whole document".to_string());
    };
    match resolve_mut(doc, parent) {
        Some(Value::Object(map)) => map
            .shift_remove(last)
            .ok_or_else(|| "path does not exist".to_string()),
        Some(Value::Array(items)) => match parse_index(last) {
            Some(i) if i < items.len() => Ok(items.remove(i)),
            Some(i) => Err(format!(
                "index {i} is out of bounds for an array of length {}",
                items.len()
            )),
            None => Err(format!("invalid array index \"{last}\"")),
        },
        _ => Err("path does not exist".to_string()),
    }
}

/// JSON equality as RFC 6902 `test` defines it: numbers compare by value
/// (`1` equals `1.0`), objects ignore member order, arrays do not.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x.is_f64() || y.is_f64() {
                x.as_f64() == y.as_f64()
            } else {
                as_i128(x) == as_i128(y)
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

fn as_i128(n: &serde_json::Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// The length of a value's compact JSON text, without building the text.
fn serialized_len(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a Value into a sink that never fails cannot fail; if it ever
    // did, the partial count is still a lower bound.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

#[cfg(test)]
mod tests;
