//! Unit tests of merge patches (RFC 7386), their inverse, and JSON patches
//! (RFC 6902): every operation, pointer escaping and the error messages.

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
        let got = patched(doc.clone(), ops.clone()).unwrap_or_else(|e| panic!("{ops} failed: {e}"));
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
