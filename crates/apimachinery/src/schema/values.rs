//! JSON values as the schema rules compare them (integers, numbers, deep
//! equality) and as messages show them (type names, previews, quoting).

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Number, Value};

use super::*;

pub(super) fn is_integer(v: &Value) -> bool {
    // `1.0` is a float to the JSON decoder, and Kubernetes rejects it where an
    // integer is required; so do we.
    matches!(v, Value::Number(n) if n.is_i64() || n.is_u64())
}

pub(super) fn int_of(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Compares exactly when both are integers, as floats otherwise.
pub(super) fn num_cmp(a: &Number, b: &Number) -> Option<Ordering> {
    match (int_of(a), int_of(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

pub(super) fn is_multiple(n: &Number, m: &Number) -> bool {
    if let (Some(x), Some(d)) = (int_of(n), int_of(m)) {
        return d <= 0 || x % d == 0;
    }
    match (n.as_f64(), m.as_f64()) {
        (Some(x), Some(d)) if d > 0.0 => {
            let q = x / d;
            (q - q.round()).abs() <= 1e-9 * q.abs().max(1.0)
        }
        _ => true,
    }
}

/// Equality where numbers compare by value, so an enum of `1` admits `1.0`.
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_cmp(x, y) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k.as_str()).is_some_and(|q| json_eq(p, q)))
        }
        _ => a == b,
    }
}

/// A form equal for exactly the values [`json_eq`] calls equal: keys sorted,
/// numbers normalised, strings length-prefixed so no two values collide.
pub(super) fn canonical(v: &Value, out: &mut String, depth: usize) {
    if depth > MAX_DEPTH {
        // Deeper than any parsed document goes; compare the rest verbatim.
        out.push_str(&v.to_string());
        return;
    }
    match v {
        Value::Null => out.push('n'),
        Value::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Value::Number(n) => {
            out.push('#');
            match (int_of(n), n.as_f64()) {
                (Some(i), _) => {
                    let _ = write!(out, "{i}");
                }
                (None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e18 => {
                    let _ = write!(out, "{}", f as i64);
                }
                (None, Some(f)) => {
                    let _ = write!(out, "{f:?}");
                }
                (None, None) => out.push_str(&n.to_string()),
            }
        }
        Value::String(s) => {
            let _ = write!(out, "\"{}:", s.len());
            out.push_str(s);
        }
        Value::Array(a) => {
            out.push('[');
            for x in a {
                canonical(x, out, depth + 1);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                let _ = write!(out, "{}:", k.len());
                out.push_str(k);
                if let Some(x) = m.get(k.as_str()) {
                    canonical(x, out, depth + 1);
                }
                out.push(',');
            }
            out.push('}');
        }
    }
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if is_integer(v) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub(super) fn expected_type(n: &Node) -> &'static str {
    if n.int_or_string {
        "integer or string"
    } else {
        n.ty.map_or("any", Type::as_str)
    }
}

pub(super) fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {}", quote(s)),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// A value as messages show it after `Invalid value:`.
pub(super) fn preview(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Array(_) => "\"array\"".to_owned(),
        Value::Object(_) => "\"object\"".to_owned(),
        other => other.to_string(),
    }
}

/// A string in JSON quotes, cut short if long.
pub(super) fn quote(s: &str) -> String {
    match s.char_indices().nth(PREVIEW_CHARS) {
        Some((cut, _)) => {
            let mut q = Value::String(s.get(..cut).unwrap_or_default().to_owned()).to_string();
            q.insert_str(q.len().saturating_sub(1), "...");
            q
        }
        None => Value::String(s.to_owned()).to_string(),
    }
}

/// Compact JSON, cut short if long.
pub(super) fn compact(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(PREVIEW_CHARS * 2) {
        Some((cut, _)) => format!("{}...", s.get(..cut).unwrap_or_default()),
        None => s,
    }
}
