//! Unit tests of label and field selectors: parsing, matching, rendering
//! and the causes of invalid selectors.

use super::field::{escape_value, unescape_value};
use super::*;
use serde_json::{Map, Value, json};

fn labels(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[test]
fn label_parse_renders_canonically() {
    let cases = [
        ("", ""),
        ("   ", ""),
        ("a=b", "a=b"),
        ("a==b", "a=b"),
        ("a!=b", "a!=b"),
        ("a=", "a="),
        ("a==", "a="),
        ("a!=", "a!="),
        ("a=,b", "a=,b"),
        (" a = b ", "a=b"),
        ("a", "a"),
        ("!a", "!a"),
        ("! a", "!a"),
        ("a in (y,x)", "a in (x,y)"),
        ("a in(x)", "a in (x)"),
        ("a in ( x , y , x )", "a in (x,y)"),
        ("a notin (x,y)", "a notin (x,y)"),
        ("a in (x,)", "a in (,x)"),
        ("a in (,x)", "a in (,x)"),
        ("a in (,)", "a in (,)"),
        ("a in (,,)", "a in (,)"),
        ("a notin (,)", "a notin (,)"),
        ("z=1,a=2,m", "a=2,m,z=1"),
        ("b=1,a!=2,a=3", "a!=2,a=3,b=1"),
        ("example.com/name=v", "example.com/name=v"),
        (
            "app.kubernetes.io/part-of in (x)",
            "app.kubernetes.io/part-of in (x)",
        ),
        ("k=in", "k=in"),
        ("in=notin", "in=notin"),
        ("k in (in,notin)", "k in (in,notin)"),
        ("A_b.c-D=V_1.x-Y", "A_b.c-D=V_1.x-Y"),
        ("n>5", "n>5"),
        ("n<-3", "n<-3"),
        ("x=y,!z,w in (a)", "w in (a),x=y,!z"),
    ];
    for (input, want) in cases {
        let sel =
            LabelSelector::parse(input).unwrap_or_else(|e| panic!("parse {input:?} failed: {e}"));
        assert_eq!(sel.to_string(), want, "input {input:?}");
        // The canonical form parses back to the same selector.
        let again = LabelSelector::parse(want).expect("canonical form parses");
        assert_eq!(again, sel, "round trip of {input:?}");
    }
}

#[test]
fn label_parse_rejects_bad_syntax_and_names() {
    let long = "a".repeat(64);
    let long_prefix = format!("{}/x", "a".repeat(254));
    let cases: Vec<(String, &str)> = vec![
        (",".into(), "found ','"),
        (",a=b".into(), "found ','"),
        ("a=b,".into(), "identifier after ','"),
        ("a=b,,c=d".into(), "found ','"),
        ("a=b c=d".into(), "expected: ',' or end of string"),
        ("a b".into(), "expected: '=', '==', '!=', 'in', 'notin'"),
        ("a in x".into(), "expected: '('"),
        ("a in (x".into(), "expected: ')'"),
        ("a in (x y)".into(), "expected: ',' or ')'"),
        ("a in ()".into(), "values set can't be empty"),
        ("a in ( )".into(), "values set can't be empty"),
        ("a notin ()".into(), "values set can't be empty"),
        ("!".into(), "identifier after '!'"),
        ("!a=b".into(), "expected: ',' or end of string"),
        ("!=b".into(), "found '!='"),
        ("=b".into(), "found '='"),
        ("a=(b)".into(), "found '('"),
        ("a=b=c".into(), "found '='"),
        ("a===b".into(), "found '='"),
        ("a=b)".into(), "found ')'"),
        ("a=b c".into(), "found 'c'"),
        ("a in (b),(".into(), "found '('"),
        ("-a=b".into(), "invalid label key \"-a\""),
        ("a-=b".into(), "name part must consist"),
        ("a/b/c=d".into(), "invalid label key \"a/b/c\""),
        ("/a=b".into(), "prefix part must be non-empty"),
        ("a/=b".into(), "name part must be non-empty"),
        ("Example.com/a=b".into(), "prefix part a lowercase RFC 1123"),
        ("ex_ample.com/a=b".into(), "prefix part"),
        ("example..com/a=b".into(), "prefix part"),
        (format!("{long}=b"), "no more than 63 characters"),
        (format!("{long_prefix}=b"), "no more than 253 characters"),
        (format!("a={long}"), "invalid label value"),
        ("a=-b".into(), "invalid label value \"-b\""),
        ("a in (b,c_)".into(), "invalid label value \"c_\""),
        ("a=b/c".into(), "invalid label value"),
        ("a=é".into(), "invalid label value"),
        ("n>x".into(), "must be an integer"),
        ("n>".into(), "must be an integer"),
        ("n<1.5".into(), "must be an integer"),
    ];
    for (input, want) in cases {
        let err = match LabelSelector::parse(&input) {
            Ok(sel) => panic!("{input:?} parsed as {sel}"),
            Err(e) => e,
        };
        assert_eq!(err.code, 400, "{input:?}");
        assert_eq!(err.reason, "BadRequest", "{input:?}");
        assert!(
            err.message.contains(want),
            "{input:?}: message {:?} lacks {want:?}",
            err.message
        );
        assert!(err.message.contains("unable to parse label selector"));
    }
}

#[test]
fn label_matching() {
    let cases = [
        ("", json!({}), true),
        ("", json!({"a": "b"}), true),
        ("a=b", json!({"a": "b"}), true),
        ("a=b", json!({"a": "c"}), false),
        ("a=b", json!({}), false),
        ("a==b", json!({"a": "b", "x": "y"}), true),
        ("a=", json!({"a": ""}), true),
        ("a=", json!({}), false),
        ("a!=b", json!({"a": "c"}), true),
        ("a!=b", json!({"a": "b"}), false),
        ("a!=b", json!({}), true),
        ("a!=", json!({}), true),
        ("a!=", json!({"a": ""}), false),
        ("a in (x,y)", json!({"a": "y"}), true),
        ("a in (x,y)", json!({"a": "z"}), false),
        ("a in (x,y)", json!({}), false),
        ("a in (x,)", json!({"a": ""}), true),
        ("a notin (x,y)", json!({"a": "z"}), true),
        ("a notin (x,y)", json!({"a": "x"}), false),
        ("a notin (x,y)", json!({}), true),
        ("a", json!({"a": ""}), true),
        ("a", json!({"b": "a"}), false),
        ("!a", json!({"b": "a"}), true),
        ("!a", json!({"a": ""}), false),
        ("a=b,c=d", json!({"a": "b", "c": "d"}), true),
        ("a=b,c=d", json!({"a": "b", "c": "e"}), false),
        ("a=b,c!=d", json!({"a": "b"}), true),
        ("a,!b", json!({"a": "1"}), true),
        ("a,!b", json!({"a": "1", "b": "2"}), false),
        ("example.com/x=1", json!({"example.com/x": "1"}), true),
        ("example.com/x=1", json!({"x": "1"}), false),
        ("n>5", json!({"n": "6"}), true),
        ("n>5", json!({"n": "5"}), false),
        ("n>5", json!({"n": "x"}), false),
        ("n>5", json!({}), false),
        ("n<5", json!({"n": "-1"}), true),
        ("n<5", json!({"n": "5"}), false),
        // Non-string label values never equal anything.
        ("a=1", json!({"a": 1}), false),
        ("a!=1", json!({"a": 1}), true),
        ("a", json!({"a": 1}), true),
    ];
    for (sel, set, want) in cases {
        let parsed = LabelSelector::parse(sel).expect("valid selector");
        assert_eq!(
            parsed.matches(&labels(set.clone())),
            want,
            "{sel:?} on {set}"
        );
    }
}

#[test]
fn label_matches_object_reads_metadata_labels() {
    let sel = LabelSelector::parse("app=web").expect("valid");
    let cases = [
        (json!({"metadata": {"labels": {"app": "web"}}}), true),
        (json!({"metadata": {"labels": {"app": "db"}}}), false),
        (json!({"metadata": {}}), false),
        (json!({}), false),
        (json!("not an object"), false),
        (json!({"metadata": {"labels": null}}), false),
    ];
    for (obj, want) in cases {
        assert_eq!(sel.matches_object(&obj), want, "{obj}");
    }
    let absent = LabelSelector::parse("!app").expect("valid");
    assert!(absent.matches_object(&json!({})));
    assert!(LabelSelector::everything().matches_object(&json!({})));
}

#[test]
fn everything_and_nothing() {
    let all = LabelSelector::parse("").expect("empty parses");
    assert!(all.is_empty());
    assert!(!all.matches_nothing());
    assert_eq!(all, LabelSelector::everything());
    assert!(all.matches(&Map::new()));

    let none = LabelSelector::nothing();
    assert!(!none.is_empty());
    assert!(none.matches_nothing());
    assert!(!none.matches(&Map::new()));
    assert!(!none.matches_object(&json!({"metadata": {"labels": {"a": "b"}}})));
    assert_eq!(none.to_string(), "");

    assert!(!LabelSelector::parse("a").expect("valid").is_empty());
}

#[test]
fn label_from_json() {
    let cases = [
        (json!(null), None),
        (json!({}), Some("")),
        (json!({"matchLabels": {}}), Some("")),
        (
            json!({"matchLabels": null, "matchExpressions": null}),
            Some(""),
        ),
        (
            json!({"matchLabels": {"b": "2", "a": "1"}}),
            Some("a=1,b=2"),
        ),
        (json!({"matchLabels": {"a": ""}}), Some("a=")),
        (
            json!({"matchExpressions": [
                {"key": "t", "operator": "In", "values": ["y", "x"]},
                {"key": "s", "operator": "NotIn", "values": ["q"]},
                {"key": "e", "operator": "Exists"},
                {"key": "d", "operator": "DoesNotExist", "values": []},
            ]}),
            Some("!d,e,s notin (q),t in (x,y)"),
        ),
        (
            json!({"matchLabels": {"app": "web"},
                   "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}),
            Some("app=web,app in (web)"),
        ),
    ];
    for (input, want) in cases {
        let sel = LabelSelector::from_json(&input).expect("valid selector");
        match want {
            None => assert!(sel.matches_nothing(), "{input}"),
            Some(want) => {
                assert!(!sel.matches_nothing(), "{input}");
                assert_eq!(sel.to_string(), want, "{input}");
                assert_eq!(sel.is_empty(), want.is_empty(), "{input}");
            }
        }
    }

    let sel = LabelSelector::from_json(&json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
    }))
    .expect("valid");
    assert!(sel.matches(&labels(json!({"app": "web"}))));
    assert!(sel.matches(&labels(json!({"app": "web", "tier": "fe"}))));
    assert!(!sel.matches(&labels(json!({"app": "web", "tier": "db"}))));
    assert!(!sel.matches(&labels(json!({"tier": "fe"}))));
}

#[test]
fn label_from_json_errors_are_bad_requests_with_causes() {
    let err = LabelSelector::from_json(&json!({
        "matchExpressions": [{"key": "a", "operator": "In", "values": []}]
    }))
    .expect_err("empty In values");
    assert_eq!(err.code, 400);
    assert_eq!(err.causes.len(), 1);
    assert_eq!(err.causes[0].field, "matchExpressions[0].values");
    assert!(err.message.contains("matchExpressions[0].values"));

    let err = LabelSelector::from_json(&json!("a=b")).expect_err("not an object");
    assert_eq!(err.code, 400);
}

#[test]
fn validate_label_selector_json_causes() {
    let p = "spec.selector";
    let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
        (json!(null), vec![]),
        (json!({}), vec![]),
        (
            json!({"matchLabels": {"a": "b"},
                   "matchExpressions": [{"key": "k", "operator": "Exists"}]}),
            vec![],
        ),
        (
            json!({"matchExpressions": [{"key": "k", "operator": "In"}]}),
            vec![(
                "FieldValueRequired",
                "spec.selector.matchExpressions[0].values",
            )],
        ),
        (
            json!({"matchExpressions": [
                {"key": "k", "operator": "In", "values": ["a"]},
                {"key": "k", "operator": "NotIn", "values": []},
            ]}),
            vec![(
                "FieldValueRequired",
                "spec.selector.matchExpressions[1].values",
            )],
        ),
        (
            json!({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["a"]}]}),
            vec![(
                "FieldValueForbidden",
                "spec.selector.matchExpressions[0].values",
            )],
        ),
        (
            json!({"matchExpressions": [
                {"key": "k", "operator": "DoesNotExist", "values": ["a"]}
            ]}),
            vec![(
                "FieldValueForbidden",
                "spec.selector.matchExpressions[0].values",
            )],
        ),
        (
            json!({"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]}),
            vec![(
                "FieldValueNotSupported",
                "spec.selector.matchExpressions[0].operator",
            )],
        ),
        (
            json!({"matchExpressions": [{"operator": "Exists"}]}),
            vec![(
                "FieldValueRequired",
                "spec.selector.matchExpressions[0].key",
            )],
        ),
        (
            json!({"matchExpressions": [{"key": "k"}]}),
            vec![(
                "FieldValueRequired",
                "spec.selector.matchExpressions[0].operator",
            )],
        ),
        (
            json!({"matchExpressions": [{"key": "-k", "operator": "Exists"}]}),
            vec![("FieldValueInvalid", "spec.selector.matchExpressions[0].key")],
        ),
        (
            json!({"matchExpressions": [{"key": "k", "operator": "In", "values": ["ok", "-x"]}]}),
            vec![(
                "FieldValueInvalid",
                "spec.selector.matchExpressions[0].values[1]",
            )],
        ),
        (
            json!({"matchExpressions": [{"key": "k", "operator": "In", "values": [1]}]}),
            vec![(
                "FieldValueTypeInvalid",
                "spec.selector.matchExpressions[0].values[0]",
            )],
        ),
        (
            json!({"matchExpressions": [{"key": "k", "operator": "In", "values": "a"}]}),
            vec![
                (
                    "FieldValueTypeInvalid",
                    "spec.selector.matchExpressions[0].values",
                ),
                (
                    "FieldValueRequired",
                    "spec.selector.matchExpressions[0].values",
                ),
            ],
        ),
        (
            json!({"matchExpressions": ["k"]}),
            vec![("FieldValueTypeInvalid", "spec.selector.matchExpressions[0]")],
        ),
        (
            json!({"matchExpressions": {}}),
            vec![("FieldValueTypeInvalid", "spec.selector.matchExpressions")],
        ),
        (
            json!({"matchLabels": {"-a": "b", "c": "-d"}}),
            vec![
                ("FieldValueInvalid", "spec.selector.matchLabels"),
                ("FieldValueInvalid", "spec.selector.matchLabels"),
            ],
        ),
        (
            json!({"matchLabels": {"a": 1}}),
            vec![("FieldValueTypeInvalid", "spec.selector.matchLabels[a]")],
        ),
        (
            json!({"matchLabels": []}),
            vec![("FieldValueTypeInvalid", "spec.selector.matchLabels")],
        ),
        (json!([]), vec![("FieldValueTypeInvalid", "spec.selector")]),
    ];
    for (input, want) in cases {
        let got: Vec<(String, String)> = validate_label_selector_json(&input, p)
            .into_iter()
            .map(|c| (c.reason, c.field))
            .collect();
        let want: Vec<(String, String)> = want
            .into_iter()
            .map(|(r, f)| (r.to_string(), f.to_string()))
            .collect();
        assert_eq!(got, want, "{input}");
    }

    // Messages follow kube's field-error wording.
    let causes = validate_label_selector_json(
        &json!({"matchExpressions": [{"key": "k", "operator": "In", "values": []}]}),
        p,
    );
    assert_eq!(
        causes[0].message,
        "Required value: must be specified when `operator` is 'In' or 'NotIn'"
    );
    // Without a path, fields are relative to the selector.
    let causes = validate_label_selector_json(&json!({"matchLabels": "x"}), "");
    assert_eq!(causes[0].field, "matchLabels");
}

#[test]
fn label_from_labels_map() {
    let sel = LabelSelector::from_labels(&labels(json!({"b": "2", "a": "1"}))).expect("valid");
    assert_eq!(sel.to_string(), "a=1,b=2");
    assert!(
        LabelSelector::from_labels(&Map::new())
            .expect("valid")
            .is_empty()
    );
    assert_eq!(
        LabelSelector::from_labels(&labels(json!({"a": 1})))
            .expect_err("non-string")
            .code,
        400
    );
    assert!(LabelSelector::from_labels(&labels(json!({"a": "-"}))).is_err());
}

#[test]
fn label_key_and_value_validation() {
    let keys = [
        ("a", true),
        ("A9", true),
        ("a.b_c-d", true),
        ("example.com/a", true),
        ("a-b.example.com/a", true),
        ("1.2.3/x", true),
        ("", false),
        ("_a", false),
        ("a.", false),
        ("a b", false),
        ("/a", false),
        ("a/", false),
        ("a/b/c", false),
        ("EXAMPLE.com/a", false),
        ("-example.com/a", false),
        ("example-.com/a", false),
        (".example.com/a", false),
    ];
    for (key, ok) in keys {
        assert_eq!(validate_label_key(key).is_ok(), ok, "{key:?}");
    }
    assert!(validate_label_key(&"a".repeat(63)).is_ok());
    assert!(validate_label_key(&"a".repeat(64)).is_err());
    assert!(validate_label_key(&format!("{}/a", "a".repeat(253))).is_ok());
    assert!(validate_label_key(&format!("{}/a", "a".repeat(254))).is_err());

    let values = [
        ("", true),
        ("a", true),
        ("a.b_c-D9", true),
        ("-a", false),
        ("a-", false),
        ("a/b", false),
        ("a b", false),
    ];
    for (value, ok) in values {
        assert_eq!(validate_label_value(value).is_ok(), ok, "{value:?}");
    }
    assert!(validate_label_value(&"a".repeat(63)).is_ok());
    assert!(validate_label_value(&"a".repeat(64)).is_err());
}

#[test]
fn requirement_new_checks_value_counts() {
    let cases: Vec<(Operator, Vec<&str>, bool)> = vec![
        (Operator::Equals, vec!["a"], true),
        (Operator::Equals, vec![], false),
        (Operator::Equals, vec!["a", "b"], false),
        (Operator::Equals, vec!["a", "a"], true),
        (Operator::NotEquals, vec![""], true),
        (Operator::In, vec![], false),
        (Operator::In, vec!["a", "b"], true),
        (Operator::NotIn, vec![], false),
        (Operator::Exists, vec![], true),
        (Operator::Exists, vec!["a"], false),
        (Operator::DoesNotExist, vec!["a"], false),
        (Operator::GreaterThan, vec!["3"], true),
        (Operator::GreaterThan, vec!["3", "4"], false),
        (Operator::LessThan, vec!["x"], false),
    ];
    for (op, values, ok) in cases {
        let values: Vec<String> = values.into_iter().map(str::to_string).collect();
        let got = Requirement::new("k", op, values.clone());
        assert_eq!(got.is_ok(), ok, "{op:?} {values:?}");
    }
    let r = Requirement::new("k", Operator::In, vec!["b".into(), "a".into(), "b".into()])
        .expect("valid");
    assert_eq!(r.key(), "k");
    assert_eq!(r.operator(), Operator::In);
    assert_eq!(r.values(), ["a".to_string(), "b".to_string()]);
}

#[test]
fn field_parse_and_render() {
    type Case = (
        &'static str,
        Vec<(&'static str, FieldOp, &'static str)>,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        ("", vec![], ""),
        (",", vec![], ""),
        (
            "metadata.name=a",
            vec![("metadata.name", FieldOp::Equals, "a")],
            "metadata.name=a",
        ),
        (
            "metadata.name==a",
            vec![("metadata.name", FieldOp::Equals, "a")],
            "metadata.name=a",
        ),
        (
            "status.phase!=Running",
            vec![("status.phase", FieldOp::NotEquals, "Running")],
            "status.phase!=Running",
        ),
        ("a=", vec![("a", FieldOp::Equals, "")], "a="),
        ("a!=", vec![("a", FieldOp::NotEquals, "")], "a!="),
        (
            "b=1,a!=2",
            vec![("b", FieldOp::Equals, "1"), ("a", FieldOp::NotEquals, "2")],
            "b=1,a!=2",
        ),
        (
            "a=1,,b=2",
            vec![("a", FieldOp::Equals, "1"), ("b", FieldOp::Equals, "2")],
            "a=1,b=2",
        ),
        (r"a=x\,y", vec![("a", FieldOp::Equals, "x,y")], r"a=x\,y"),
        (r"a=x\=y", vec![("a", FieldOp::Equals, "x=y")], r"a=x\=y"),
        (r"a=x\\y", vec![("a", FieldOp::Equals, r"x\y")], r"a=x\\y"),
        (r"a=b\,", vec![("a", FieldOp::Equals, "b,")], r"a=b\,"),
        (
            r"a=\,,b=\\",
            vec![("a", FieldOp::Equals, ","), ("b", FieldOp::Equals, r"\")],
            r"a=\,,b=\\",
        ),
        (
            " spec.nodeName =n1",
            vec![("spec.nodeName", FieldOp::Equals, "n1")],
            "spec.nodeName=n1",
        ),
        ("a= b ", vec![("a", FieldOp::Equals, " b ")], "a= b "),
        ("a=ü", vec![("a", FieldOp::Equals, "ü")], "a=ü"),
        ("a=!b", vec![("a", FieldOp::Equals, "!b")], "a=!b"),
    ];
    for (input, want, rendered) in cases {
        let sel =
            FieldSelector::parse(input).unwrap_or_else(|e| panic!("parse {input:?} failed: {e}"));
        let got: Vec<_> = sel.requirements().collect();
        assert_eq!(got, want, "{input:?}");
        assert_eq!(sel.to_string(), rendered, "{input:?}");
        assert_eq!(sel.is_empty(), want.is_empty());
        assert_eq!(
            FieldSelector::parse(rendered).expect("rendered parses"),
            sel
        );
    }
}

#[test]
fn field_parse_errors() {
    let cases = [
        ("a", "can't understand 'a'"),
        ("a=b,c", "can't understand 'c'"),
        ("=b", "missing field name"),
        (" !=b", "missing field name"),
        ("a=b=c", "unescaped character: ="),
        ("a===b", "unescaped character: ="),
        (r"a=b\x", r"invalid escape sequence: \x"),
        (r"a=b\", r"invalid escape sequence: \"),
        (r"a=b\\\", r"invalid escape sequence: \"),
        (r"a\=b=c", "unescaped character: ="),
    ];
    for (input, want) in cases {
        let err = FieldSelector::parse(input).expect_err(input);
        assert_eq!(err.code, 400, "{input:?}");
        assert_eq!(err.reason, "BadRequest");
        assert!(
            err.message.contains(want),
            "{input:?}: {:?} lacks {want:?}",
            err.message
        );
    }
}

#[test]
fn field_validate_fields() {
    let allowed = ["metadata.name", "metadata.namespace"];
    let cases = [
        ("", None),
        ("metadata.name=a", None),
        ("metadata.name=a,metadata.namespace!=b", None),
        ("spec.foo=x", Some("field label not supported: spec.foo")),
        (
            "metadata.name=a,status.x=y",
            Some("field label not supported: status.x"),
        ),
    ];
    for (input, want) in cases {
        let sel = FieldSelector::parse(input).expect("valid");
        match (sel.validate_fields(&allowed), want) {
            (Ok(()), None) => {}
            (Err(e), Some(msg)) => {
                assert_eq!(e.code, 400);
                assert_eq!(e.reason, "BadRequest");
                assert_eq!(e.message, msg);
            }
            (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn field_matching() {
    let obj = |field: &str| match field {
        "metadata.name" => Some("web".to_string()),
        "status.phase" => Some("Running".to_string()),
        "spec.nodeName" => Some(String::new()),
        _ => None,
    };
    let cases = [
        ("", true),
        ("metadata.name=web", true),
        ("metadata.name==web", true),
        ("metadata.name=db", false),
        ("metadata.name!=db", true),
        ("metadata.name!=web", false),
        ("metadata.name=web,status.phase=Running", true),
        ("metadata.name=web,status.phase!=Running", false),
        ("spec.nodeName=", true),
        ("spec.nodeName!=", false),
        // Absent fields compare as the empty string.
        ("spec.missing=", true),
        ("spec.missing!=", false),
        ("spec.missing=x", false),
        ("spec.missing!=x", true),
    ];
    for (input, want) in cases {
        let sel = FieldSelector::parse(input).expect("valid");
        assert_eq!(sel.matches(obj), want, "{input:?}");
    }
}

#[test]
fn field_single_value() {
    let cases = [
        ("metadata.name=a", "metadata.name", Some("a")),
        ("metadata.name==a", "metadata.name", Some("a")),
        ("metadata.name!=a", "metadata.name", None),
        ("status.phase=x", "metadata.name", None),
        (
            "metadata.name!=b,metadata.name=a",
            "metadata.name",
            Some("a"),
        ),
        ("metadata.name=", "metadata.name", Some("")),
        (r"metadata.name=a\,b", "metadata.name", Some("a,b")),
        ("", "metadata.name", None),
    ];
    for (input, field, want) in cases {
        let sel = FieldSelector::parse(input).expect("valid");
        assert_eq!(sel.single_value(field), want, "{input:?}");
    }
}

#[test]
fn escape_round_trips() {
    for raw in ["", "plain", r"a\b", "a,b", "a=b", r"\,=\\", "ü,="] {
        assert_eq!(unescape_value(&escape_value(raw)).as_deref(), Ok(raw));
    }
}
