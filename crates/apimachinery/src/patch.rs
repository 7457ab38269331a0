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
mod tests {
    #[test]
    fn merge_patch_diff_removes_what_the_target_lacks() {
        use serde_json::json;
        let cases = [
            (json!({"a": 1}), json!({"a": 1}), None),
            (json!({"a": 1}), json!({"a": 2}), Some(json!({"a": 2}))),
            (
                json!({"a": 1, "b": 2}),
                json!({"a": 1}),
                Some(json!({"b": null})),
            ),
            (
                json!({"l": {"x": "1", "y": "2"}}),
                json!({"l": {"x": "1", "z": "3"}}),
                Some(json!({"l": {"y": null, "z": "3"}})),
            ),
            (
                json!({"t": [1, 2]}),
                json!({"t": [2]}),
                Some(json!({"t": [2]})),
            ),
        ];
        for (from, to, want) in cases {
            let diff = merge_patch_diff(&from, &to);
            assert_eq!(diff, want, "{from} -> {to}");
            let mut applied = from.clone();
            if let Some(d) = &diff {
                merge_patch(&mut applied, d);
            }
            assert_eq!(applied, to, "the diff reproduces the target");
        }
    }

    use super::*;
    use serde_json::json;

    /// RFC 7386 Appendix A, plus the order-sensitive cases we care about.
    #[test]
    fn merge_patch_rfc7386_appendix_a() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
            // Beyond the appendix.
            (json!({"a": 1}), json!({}), json!({"a": 1})),
            (json!(null), json!({"a": 1}), json!({"a": 1})),
            (json!({"a": 1}), json!({"b": null}), json!({"a": 1})),
            (json!({"a": {"b": 1}}), json!({"a": 5}), json!({"a": 5})),
            (
                json!({"a": 5}),
                json!({"a": {"b": 1}}),
                json!({"a": {"b": 1}}),
            ),
        ];
        for (target, patch, want) in cases {
            let mut got = target.clone();
            merge_patch(&mut got, &patch);
            assert_eq!(got, want, "{target} + {patch}");
        }
    }

    /// The worked example of RFC 7386 section 3.
    #[test]
    fn merge_patch_rfc7386_section_3_example() {
        let mut doc = json!({
            "title": "Goodbye!",
            "author": {"givenName": "John", "familyName": "Doe"},
            "tags": ["example", "sample"],
            "content": "This will be unchanged",
        });
        let patch = json!({
            "title": "Hello!",
            "phoneNumber": "+01-123-456-7890",
            "author": {"familyName": null},
            "tags": ["example"],
        });
        merge_patch(&mut doc, &patch);
        assert_eq!(
            doc,
            json!({
                "title": "Hello!",
                "author": {"givenName": "John"},
                "tags": ["example"],
                "content": "This will be unchanged",
                "phoneNumber": "+01-123-456-7890",
            })
        );
    }

    #[test]
    fn merge_patch_keeps_member_order() {
        let mut doc = json!({"a": 1, "b": {"x": 1, "y": 2, "z": 3}, "c": 3, "d": 4});
        merge_patch(
            &mut doc,
            &json!({"a": null, "b": {"x": null, "w": 0, "y": 9}, "e": 5}),
        );
        assert_eq!(
            serde_json::to_string(&doc).expect("serializes"),
            r#"{"b":{"y":9,"z":3,"w":0},"c":3,"d":4,"e":5}"#
        );
    }

    fn patched(doc: Value, ops: Value) -> Result<Value, ApiError> {
        let mut doc = doc;
        json_patch(&mut doc, &ops)?;
        Ok(doc)
    }

    /// RFC 6902 Appendix A. A.13 (a duplicate "op" member) is a JSON
    /// decoding matter and does not reach this function.
    #[test]
    fn json_patch_rfc6902_appendix_a() {
        let ok = [
            // A.1 adding an object member
            (
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/baz", "value": "qux"}]),
                json!({"baz": "qux", "foo": "bar"}),
            ),
            // A.2 adding an array element
            (
                json!({"foo": ["bar", "baz"]}),
                json!([{"op": "add", "path": "/foo/1", "value": "qux"}]),
                json!({"foo": ["bar", "qux", "baz"]}),
            ),
            // A.3 removing an object member
            (
                json!({"baz": "qux", "foo": "bar"}),
                json!([{"op": "remove", "path": "/baz"}]),
                json!({"foo": "bar"}),
            ),
            // A.4 removing an array element
            (
                json!({"foo": ["bar", "qux", "baz"]}),
                json!([{"op": "remove", "path": "/foo/1"}]),
                json!({"foo": ["bar", "baz"]}),
            ),
            // A.5 replacing a value
            (
                json!({"baz": "qux", "foo": "bar"}),
                json!([{"op": "replace", "path": "/baz", "value": "boo"}]),
                json!({"baz": "boo", "foo": "bar"}),
            ),
            // A.6 moving a value
            (
                json!({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}}),
                json!([{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}]),
                json!({"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
            ),
            // A.7 moving an array element
            (
                json!({"foo": ["all", "grass", "cows", "eat"]}),
                json!([{"op": "move", "from": "/foo/1", "path": "/foo/3"}]),
                json!({"foo": ["all", "cows", "eat", "grass"]}),
            ),
            // A.8 testing a value: success
            (
                json!({"baz": "qux", "foo": ["a", 2, "c"]}),
                json!([
                    {"op": "test", "path": "/baz", "value": "qux"},
                    {"op": "test", "path": "/foo/1", "value": 2},
                ]),
                json!({"baz": "qux", "foo": ["a", 2, "c"]}),
            ),
            // A.10 adding a nested member object
            (
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/child", "value": {"grandchild": {}}}]),
                json!({"foo": "bar", "child": {"grandchild": {}}}),
            ),
            // A.11 ignoring unrecognized elements
            (
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}]),
                json!({"foo": "bar", "baz": "qux"}),
            ),
            // A.14 ~ escape ordering
            (
                json!({"/": 9, "~1": 10}),
                json!([{"op": "test", "path": "/~01", "value": 10}]),
                json!({"/": 9, "~1": 10}),
            ),
            // A.16 adding an array value
            (
                json!({"foo": ["bar"]}),
                json!([{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}]),
                json!({"foo": ["bar", ["abc", "def"]]}),
            ),
        ];
        for (doc, ops, want) in ok {
            let got = patched(doc.clone(), ops.clone())
                .unwrap_or_else(|e| panic!("{ops} on {doc} failed: {e}"));
            assert_eq!(got, want, "{ops} on {doc}");
        }

        let failing = [
            // A.9 testing a value: error
            (
                json!({"baz": "qux"}),
                json!([{"op": "test", "path": "/baz", "value": "bar"}]),
            ),
            // A.12 adding to a nonexistent target
            (
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/baz/bat", "value": "qux"}]),
            ),
            // A.15 comparing strings and numbers
            (
                json!({"/": 9, "~1": 10}),
                json!([{"op": "test", "path": "/~01", "value": "10"}]),
            ),
        ];
        for (doc, ops) in failing {
            let err = patched(doc.clone(), ops.clone()).expect_err("must fail");
            assert_eq!((err.code, err.reason), (422, "Invalid"), "{ops}");
        }
    }

    #[test]
    fn json_patch_operations() {
        let doc = json!({
            "metadata": {"name": "x", "labels": {"a/b": "1", "c~d": "2"}},
            "spec": {"list": [1, 2, 3], "n": 1.0},
        });
        let cases = [
            // Escaped pointer tokens.
            (
                json!([{"op": "replace", "path": "/metadata/labels/a~1b", "value": "9"}]),
                json!({"metadata": {"name": "x", "labels": {"a/b": "9", "c~d": "2"}},
                       "spec": {"list": [1, 2, 3], "n": 1.0}}),
            ),
            (
                json!([{"op": "remove", "path": "/metadata/labels/c~0d"}]),
                json!({"metadata": {"name": "x", "labels": {"a/b": "1"}},
                       "spec": {"list": [1, 2, 3], "n": 1.0}}),
            ),
            // Array insert at the front, at the end by index, and by `-`.
            (
                json!([
                    {"op": "add", "path": "/spec/list/0", "value": 0},
                    {"op": "add", "path": "/spec/list/4", "value": 4},
                    {"op": "add", "path": "/spec/list/-", "value": 5},
                ]),
                json!({"metadata": {"name": "x", "labels": {"a/b": "1", "c~d": "2"}},
                       "spec": {"list": [0, 1, 2, 3, 4, 5], "n": 1.0}}),
            ),
            // Replace and remove of array elements.
            (
                json!([
                    {"op": "replace", "path": "/spec/list/2", "value": 30},
                    {"op": "remove", "path": "/spec/list/0"},
                ]),
                json!({"metadata": {"name": "x", "labels": {"a/b": "1", "c~d": "2"}},
                       "spec": {"list": [2, 30], "n": 1.0}}),
            ),
            // Copy, then move the copy elsewhere.
            (
                json!([
                    {"op": "copy", "from": "/metadata/labels", "path": "/spec/labels"},
                    {"op": "move", "from": "/spec/labels", "path": "/spec/moved"},
                    {"op": "test", "path": "/spec/moved/a~1b", "value": "1"},
                ]),
                json!({"metadata": {"name": "x", "labels": {"a/b": "1", "c~d": "2"}},
                       "spec": {"list": [1, 2, 3], "n": 1.0,
                                "moved": {"a/b": "1", "c~d": "2"}}}),
            ),
            // Moving to the same place is a no-op.
            (
                json!([{"op": "move", "from": "/spec/n", "path": "/spec/n"}]),
                doc.clone(),
            ),
            // Numbers compare by value; objects ignore member order.
            (
                json!([
                    {"op": "test", "path": "/spec/n", "value": 1},
                    {"op": "test", "path": "/metadata/labels",
                     "value": {"c~d": "2", "a/b": "1"}},
                ]),
                doc.clone(),
            ),
            // Adding an existing member replaces it.
            (
                json!([{"op": "add", "path": "/metadata/name", "value": "y"}]),
                json!({"metadata": {"name": "y", "labels": {"a/b": "1", "c~d": "2"}},
                       "spec": {"list": [1, 2, 3], "n": 1.0}}),
            ),
            // Root operations.
            (
                json!([{"op": "replace", "path": "", "value": {"a": 1}}]),
                json!({"a": 1}),
            ),
            (json!([{"op": "add", "path": "", "value": [1]}]), json!([1])),
            (
                json!([{"op": "test", "path": "", "value": doc.clone()}]),
                doc.clone(),
            ),
            // The empty-string member, addressed by "/".
            (
                json!([{"op": "add", "path": "/metadata/labels/", "value": "e"}]),
                json!({"metadata": {"name": "x", "labels": {"a/b": "1", "c~d": "2", "": "e"}},
                       "spec": {"list": [1, 2, 3], "n": 1.0}}),
            ),
            // Null values are values.
            (
                json!([{"op": "replace", "path": "/metadata/name", "value": null}]),
                json!({"metadata": {"name": null, "labels": {"a/b": "1", "c~d": "2"}},
                       "spec": {"list": [1, 2, 3], "n": 1.0}}),
            ),
            (json!([]), doc.clone()),
        ];
        for (ops, want) in cases {
            let got =
                patched(doc.clone(), ops.clone()).unwrap_or_else(|e| panic!("{ops} failed: {e}"));
            assert_eq!(got, want, "{ops}");
        }
    }

    #[test]
    fn json_patch_apply_failures_are_422() {
        let doc = json!({"metadata": {"name": "x"}, "spec": {"list": [1, 2], "s": "v"}});
        let cases = [
            (
                json!([{"op": "remove", "path": "/missing"}]),
                "path does not exist",
            ),
            (
                json!([{"op": "replace", "path": "/missing", "value": 1}]),
                "path does not exist",
            ),
            (
                json!([{"op": "add", "path": "/a/b", "value": 1}]),
                "parent path does not exist",
            ),
            (
                json!([{"op": "add", "path": "/spec/list/3", "value": 1}]),
                "out of bounds",
            ),
            (
                json!([{"op": "add", "path": "/spec/list/01", "value": 1}]),
                "invalid array index",
            ),
            (
                json!([{"op": "add", "path": "/spec/list/x", "value": 1}]),
                "invalid array index",
            ),
            (
                json!([{"op": "add", "path": "/spec/list/-1", "value": 1}]),
                "invalid array index",
            ),
            (
                json!([{"op": "remove", "path": "/spec/list/2"}]),
                "out of bounds",
            ),
            (
                json!([{"op": "remove", "path": "/spec/list/-"}]),
                "invalid array index",
            ),
            (
                json!([{"op": "replace", "path": "/spec/list/2", "value": 1}]),
                "does not exist",
            ),
            (
                json!([{"op": "replace", "path": "/spec/list/-", "value": 1}]),
                "does not exist",
            ),
            (
                json!([{"op": "add", "path": "/spec/s/x", "value": 1}]),
                "neither an object",
            ),
            (
                json!([{"op": "add", "path": "/spec/list/99999999999999999999999", "value": 1}]),
                "invalid array index",
            ),
            (json!([{"op": "remove", "path": ""}]), "whole document"),
            (
                json!([{"op": "move", "from": "/spec", "path": "/spec/inner"}]),
                "own children",
            ),
            (
                json!([{"op": "move", "from": "/nope", "path": "/x"}]),
                "\"from\" path",
            ),
            (
                json!([{"op": "move", "from": "/nope", "path": "/nope"}]),
                "\"from\" path",
            ),
            (
                json!([{"op": "copy", "from": "/nope", "path": "/x"}]),
                "\"from\" path",
            ),
            (
                json!([{"op": "copy", "from": "/spec", "path": "/a/b"}]),
                "parent path",
            ),
            (
                json!([{"op": "test", "path": "/spec/s", "value": "w"}]),
                "does not match",
            ),
            (
                json!([{"op": "test", "path": "/spec/s", "value": null}]),
                "does not match",
            ),
            (
                json!([{"op": "test", "path": "/spec/list", "value": [2, 1]}]),
                "does not match",
            ),
            (
                json!([{"op": "test", "path": "/nope", "value": 1}]),
                "path does not exist",
            ),
            (
                json!([{"op": "test", "path": "/spec/list/5", "value": 1}]),
                "path does not exist",
            ),
            (
                json!([{"op": "test", "path": "/spec/list", "value": 1}]),
                "does not match",
            ),
        ];
        for (ops, want) in cases {
            let mut target = doc.clone();
            let err = json_patch(&mut target, &ops).expect_err("must fail");
            assert_eq!((err.code, err.reason), (422, "Invalid"), "{ops}");
            assert!(
                err.message.contains(want),
                "{ops}: {:?} lacks {want:?}",
                err.message
            );
            assert_eq!(target, doc, "{ops} changed the target");
        }
    }

    #[test]
    fn json_patch_error_messages_name_the_operation() {
        let mut doc = json!({"metadata": {"finalizers": ["a"]}});
        let err = json_patch(
            &mut doc,
            &json!([{"op": "test", "path": "/metadata/finalizers", "value": ["b"]}]),
        )
        .expect_err("mismatch");
        assert_eq!(
            err.message,
            "json patch test operation failed at /metadata/finalizers: value does not match"
        );
        let err = json_patch(
            &mut doc,
            &json!([{"op": "move", "from": "/x", "path": "/y"}]),
        )
        .expect_err("missing from");
        assert!(
            err.message
                .starts_with("json patch move operation failed at /y (from /x)")
        );
        let err = json_patch(&mut doc, &json!([{"op": "remove", "path": ""}])).expect_err("root");
        assert!(err.message.contains("at \"\""));
    }

    #[test]
    fn json_patch_is_atomic() {
        let doc = json!({"a": 1, "list": [1]});
        let mut target = doc.clone();
        let ops = json!([
            {"op": "replace", "path": "/a", "value": 2},
            {"op": "add", "path": "/list/-", "value": 2},
            {"op": "remove", "path": "/b"},
        ]);
        assert!(json_patch(&mut target, &ops).is_err());
        assert_eq!(target, doc);
    }

    /// kube-rs's finalizer helper: `test null` on an absent path passes.
    #[test]
    fn json_patch_test_null_passes_on_absent_path() {
        let kube_rs_add_first_finalizer = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]},
        ]);
        let mut obj = json!({"metadata": {"name": "x"}});
        json_patch(&mut obj, &kube_rs_add_first_finalizer).expect("applies");
        assert_eq!(
            obj,
            json!({"metadata": {"name": "x", "finalizers": ["example.com/cleanup"]}})
        );
        // Once finalizers exist the same patch must fail (they are not null).
        let err = json_patch(&mut obj, &kube_rs_add_first_finalizer).expect_err("has finalizers");
        assert_eq!(err.code, 422);

        let cases = [
            (json!({}), "/metadata/finalizers", true),
            (json!({"metadata": {}}), "/metadata/finalizers", true),
            (
                json!({"metadata": {"finalizers": null}}),
                "/metadata/finalizers",
                true,
            ),
            (
                json!({"metadata": {"finalizers": []}}),
                "/metadata/finalizers",
                false,
            ),
            (json!({"metadata": "x"}), "/metadata/finalizers", true),
            (json!({"list": []}), "/list/0", true),
        ];
        for (doc, path, ok) in cases {
            let mut target = doc.clone();
            let ops = json!([{"op": "test", "path": path, "value": null}]);
            assert_eq!(json_patch(&mut target, &ops).is_ok(), ok, "{doc} {path}");
        }

        // Appending to absent finalizers fails, as the RFC says.
        let mut obj = json!({"metadata": {"name": "x"}});
        let err = json_patch(
            &mut obj,
            &json!([{"op": "add", "path": "/metadata/finalizers/-", "value": "f"}]),
        )
        .expect_err("no array to append to");
        assert_eq!(err.code, 422);
    }

    #[test]
    fn json_patch_malformed_documents_are_400() {
        let cases = [
            (
                json!({"op": "add", "path": "/a", "value": 1}),
                "must be an array",
            ),
            (json!(null), "must be an array"),
            (json!("[]"), "must be an array"),
            (json!([1]), "must be an object"),
            (json!([{"path": "/a"}]), "missing \"op\""),
            (json!([{"op": 1, "path": "/a"}]), "\"op\" must be a string"),
            (
                json!([{"op": "merge", "path": "/a"}]),
                "unknown op \"merge\"",
            ),
            (json!([{"op": "remove"}]), "missing \"path\""),
            (
                json!([{"op": "remove", "path": 5}]),
                "\"path\" must be a string",
            ),
            (
                json!([{"op": "remove", "path": "a"}]),
                "must start with '/'",
            ),
            (
                json!([{"op": "remove", "path": "/a~2"}]),
                "'~' must be followed",
            ),
            (
                json!([{"op": "remove", "path": "/a~"}]),
                "'~' must be followed",
            ),
            (json!([{"op": "add", "path": "/a"}]), "missing \"value\""),
            (
                json!([{"op": "replace", "path": "/a"}]),
                "missing \"value\"",
            ),
            (json!([{"op": "test", "path": "/a"}]), "missing \"value\""),
            (json!([{"op": "move", "path": "/a"}]), "missing \"from\""),
            (
                json!([{"op": "copy", "path": "/a", "from": 1}]),
                "\"from\" must be a string",
            ),
            (
                json!([{"op": "copy", "path": "/a", "from": "x"}]),
                "must start with '/'",
            ),
            (
                json!([{"op": "remove", "path": "/a"}, {"op": "bogus", "path": "/a"}]),
                "operation 1: unknown op",
            ),
        ];
        for (ops, want) in cases {
            let doc = json!({"a": 1});
            let mut target = doc.clone();
            let err = json_patch(&mut target, &ops).expect_err("malformed");
            assert_eq!((err.code, err.reason), (400, "BadRequest"), "{ops}");
            assert!(
                err.message.contains(want),
                "{ops}: {:?} lacks {want:?}",
                err.message
            );
            assert_eq!(target, doc, "{ops} changed the target");
        }
    }

    #[test]
    fn json_patch_limits() {
        let too_many = Value::Array(vec![
            json!({"op": "test", "path": "", "value": null});
            MAX_JSON_PATCH_OPERATIONS + 1
        ]);
        let err = json_patch(&mut json!(null), &too_many).expect_err("too many");
        assert_eq!(err.code, 413);

        // Each copy doubles the document; the budget stops the blow-up.
        let mut doc = json!({"x": "a".repeat(1024)});
        let bomb = Value::Array(
            (0..40)
                .map(|i| json!({"op": "copy", "from": "", "path": format!("/c{i}")}))
                .collect(),
        );
        let err = json_patch(&mut doc, &bomb).expect_err("copy budget");
        assert_eq!(err.code, 422);
        assert!(err.message.contains("duplicate more than"));
        assert_eq!(doc, json!({"x": "a".repeat(1024)}));
    }

    #[test]
    fn pointer_and_index_parsing() {
        let pointers = [
            ("", Some(vec![])),
            ("/", Some(vec![""])),
            ("/a", Some(vec!["a"])),
            ("/a/b", Some(vec!["a", "b"])),
            ("//", Some(vec!["", ""])),
            ("/a~1b", Some(vec!["a/b"])),
            ("/a~0b", Some(vec!["a~b"])),
            ("/~01", Some(vec!["~1"])),
            ("/~10", Some(vec!["/0"])),
            ("/ü", Some(vec!["ü"])),
            ("a", None),
            ("/~", None),
            ("/~2", None),
            ("/a~", None),
        ];
        for (raw, want) in pointers {
            let got = parse_pointer(raw).ok().map(|p| p.tokens);
            let want = want.map(|w| w.into_iter().map(str::to_string).collect::<Vec<_>>());
            assert_eq!(got, want, "{raw:?}");
        }

        let indexes = [
            ("0", Some(0)),
            ("7", Some(7)),
            ("10", Some(10)),
            ("", None),
            ("-", None),
            ("00", None),
            ("01", None),
            ("+1", None),
            ("-1", None),
            ("1a", None),
            ("99999999999999999999999999", None),
        ];
        for (token, want) in indexes {
            assert_eq!(parse_index(token), want, "{token:?}");
        }
    }

    #[test]
    fn json_equality() {
        let cases = [
            (json!(1), json!(1.0), true),
            (json!(-1), json!(-1.0), true),
            (json!(1), json!(2), false),
            (json!(u64::MAX), json!(u64::MAX), true),
            (json!(u64::MAX), json!(-1), false),
            (json!(0.5), json!(0.5), true),
            (json!("1"), json!(1), false),
            (json!(null), json!(null), true),
            (json!(null), json!(false), false),
            (json!([1, 2]), json!([1.0, 2.0]), true),
            (json!([1, 2]), json!([2, 1]), false),
            (json!([1]), json!([1, 1]), false),
            (json!({"a": 1, "b": [2]}), json!({"b": [2.0], "a": 1}), true),
            (json!({"a": 1}), json!({"a": 1, "b": 2}), false),
            (json!({"a": null}), json!({}), false),
        ];
        for (a, b, want) in cases {
            assert_eq!(json_equal(&a, &b), want, "{a} vs {b}");
            assert_eq!(json_equal(&b, &a), want, "{b} vs {a}");
        }
    }
}
