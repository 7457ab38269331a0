//! Unit tests of the schema module's internals: formats, regex translation,
//! compiled nodes. The public behaviour is tested in `tests/schema.rs`.

use super::compile::compile_pattern;
use super::*;

#[test]
fn formats_accept_and_reject() {
    let cases: &[(Format, &str, bool)] = &[
        (Format::DateTime, "2024-02-29T12:00:00Z", true),
        (Format::DateTime, "2024-02-29T12:00:00.123456+02:00", true),
        (Format::DateTime, "2024-02-29t12:00:00z", true),
        (Format::DateTime, "2024-02-29T12:00:00", true),
        (Format::DateTime, "2023-02-29T12:00:00Z", false),
        (Format::DateTime, "2024-01-01 12:00:00Z", false),
        (Format::DateTime, "2024-01-01T24:00:00Z", false),
        (Format::DateTime, "2024-01-01T12:00:00.Z", false),
        (Format::DateTime, "2024-01-01T12:00:00+0200", false),
        (Format::DateTime, "yesterday", false),
        (Format::Date, "2000-02-29", true),
        (Format::Date, "1900-02-29", false),
        (Format::Date, "2024-13-01", false),
        (Format::Date, "2024-1-01", false),
        (Format::Byte, "", true),
        (Format::Byte, "aGVsbG8=", true),
        (Format::Byte, "aGVs\nbG8=", true),
        (Format::Byte, "aGVsbG8", false),
        (Format::Byte, "aGV=bG8=", false),
        (Format::Byte, "a===", false),
        (Format::Uuid, "123e4567-e89b-12d3-a456-426614174000", true),
        (Format::Uuid, "123E4567E89B12D3A456426614174000", true),
        (Format::Uuid, "123e4567-e89b-12d3-a456-42661417400", false),
        (Format::Uuid, "123e4567-e89b-12d3-a456_426614174000", false),
        (Format::Duration, "10s", true),
        (Format::Duration, "1h30m", true),
        (Format::Duration, "-1.5h", true),
        (Format::Duration, "300ms", true),
        (Format::Duration, "2µs", true),
        (Format::Duration, "0", true),
        (Format::Duration, "3d", true),
        (Format::Duration, "", false),
        (Format::Duration, "10", false),
        (Format::Duration, "s", false),
        (Format::Duration, "10 s", false),
        (Format::Duration, "1x", false),
        (Format::Duration, ".s", false),
        (Format::Hostname, "example.com", true),
        (Format::Hostname, "a-b.c", true),
        (Format::Hostname, "-ab.c", false),
        (Format::Hostname, "a..b", false),
        (Format::Hostname, "a_b.com", false),
        (Format::Ipv4, "10.0.0.1", true),
        (Format::Ipv4, "10.0.0.256", false),
        (Format::Ipv4, "::1", false),
        (Format::Ipv6, "::1", true),
        (Format::Ipv6, "fe80::1:2", true),
        (Format::Ipv6, "10.0.0.1", false),
        (Format::Cidr, "10.0.0.0/8", true),
        (Format::Cidr, "fd00::/64", true),
        (Format::Cidr, "10.0.0.0/33", false),
        (Format::Cidr, "10.0.0.0", false),
        (Format::Cidr, "10.0.0.0/", false),
        (Format::Email, "a@example.com", true),
        (Format::Email, "Alice <alice@example.com>", true),
        (Format::Email, "a@", false),
        (Format::Email, "@example.com", false),
        (Format::Email, "a b@example.com", false),
        (Format::Mac, "00:1a:2B:3c:4d:5e", true),
        (Format::Mac, "00-1a-2b-3c-4d-5e", true),
        (Format::Mac, "00:1a:2b:3c:4d", false),
        (Format::Other, "anything", true),
    ];
    for (f, s, ok) in cases {
        assert_eq!(f.admits_str(s), *ok, "{f:?} {s:?}");
    }
}

#[test]
fn go_regex_classes_are_ascii_and_literal() {
    let re = compile_pattern(r"^\d+$").unwrap();
    assert!(re.is_match("123"));
    assert!(!re.is_match("١٢٣"), "Arabic-Indic digits are not \\d in Go");
    let re = compile_pattern(r"^[\w.-]+$").unwrap();
    assert!(re.is_match("a_b.c-d"));
    assert!(!re.is_match("é"));
    let re = compile_pattern(r"^[a[]+$").unwrap();
    assert!(re.is_match("a[a"));
    let re = compile_pattern(r"^[a&&b]+$").unwrap();
    assert!(re.is_match("a&b"));
    let re = compile_pattern(r"^[[:digit:]x]+$").unwrap();
    assert!(re.is_match("1x2"));
    let re = compile_pattern(r"^[]a]+$").unwrap();
    assert!(re.is_match("]a"));
    let re = compile_pattern(r"\bfoo\b").unwrap();
    assert!(re.is_match("a foo b"));
    let re = compile_pattern(r"^\s\S$").unwrap();
    assert!(re.is_match(" x"));
    assert!(compile_pattern("(").is_err());
    assert!(compile_pattern("\\").is_err());
    assert!(compile_pattern("[[:").is_err());
}

#[test]
fn canonical_forms_agree_with_equality() {
    let vals = [
        serde_json::json!(1),
        serde_json::json!(1.0),
        serde_json::json!(-1),
        serde_json::json!(u64::MAX),
        serde_json::json!(0.5),
        serde_json::json!("1"),
        serde_json::json!({"a": 1, "b": [1, "x"]}),
        serde_json::json!({"b": [1.0, "x"], "a": 1}),
        serde_json::json!(["a:", "b"]),
        serde_json::json!(["a", ":b"]),
        serde_json::json!(null),
        serde_json::json!(false),
    ];
    for a in &vals {
        for b in &vals {
            let (mut ka, mut kb) = (String::new(), String::new());
            canonical(a, &mut ka, 0);
            canonical(b, &mut kb, 0);
            assert_eq!(json_eq(a, b), ka == kb, "{a} vs {b}");
        }
    }
}

#[test]
fn quotes_are_cut_on_character_boundaries() {
    let long = "é".repeat(100);
    let q = quote(&long);
    assert!(q.ends_with("...\""));
    assert_eq!(q.chars().filter(|c| *c == 'é').count(), PREVIEW_CHARS);
}
