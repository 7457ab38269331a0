//! Table-driven protobuf → JSON decoding.
//!
//! Each field is looked up by number in its message's [`Table`]; unknown
//! fields are skipped, as Go's generated code skips them. The result follows
//! Go's JSON encoding of the same object: zero scalars are left out unless the
//! field keeps them, maps and repeated fields become objects and lists, and
//! the well-known apimachinery messages (Time, Quantity, IntOrString, …)
//! become the strings and numbers their JSON forms are.

use base64::Engine as _;
use serde_json::{Map, Value};

use super::schema::{Field, Table, Ty};
use super::wire::{Reader, Wire};

/// Deeper than any built-in kind nests; guards against tables that would
/// (one day) refer to themselves.
const MAX_DEPTH: usize = 48;

/// A decoding failure and the JSON path where it happened.
#[derive(Debug)]
pub(crate) struct Error {
    /// Field names from the innermost outwards.
    path: Vec<&'static str>,
    message: String,
}

impl Error {
    fn new(message: impl Into<String>) -> Error {
        Error {
            path: Vec::new(),
            message: message.into(),
        }
    }

    fn at(mut self, name: &'static str) -> Error {
        if !name.is_empty() {
            self.path.push(name);
        }
        self
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            return f.write_str(&self.message);
        }
        let path: Vec<&str> = self.path.iter().rev().copied().collect();
        write!(f, "{}: {}", path.join("."), self.message)
    }
}

impl From<&'static str> for Error {
    fn from(m: &'static str) -> Error {
        Error::new(m)
    }
}

/// Decodes the message in `buf` into `out` (which may already hold fields:
/// inline members and repeated occurrences of a message merge into it).
pub(crate) fn message(
    buf: &[u8],
    table: Table,
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::new("messages nested too deeply"));
    }
    let mut r = Reader::new(buf);
    while let Some((num, wire)) = r.field()? {
        if let Some(field) = table.iter().find(|f| f.num == num) {
            decode_field(field, wire, depth, out).map_err(|e| e.at(field.name))?;
        }
    }
    Ok(())
}

fn decode_field(
    f: &Field,
    wire: Wire<'_>,
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), Error> {
    match &f.ty {
        Ty::Inline(table) => message(len(wire)?, table, depth + 1, out),
        Ty::Map(value_ty) => {
            let (k, v) = map_entry(len(wire)?, value_ty, depth + 1)?;
            let slot = out
                .entry(f.name)
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            if let Value::Object(m) = slot {
                m.insert(k, v);
            }
            Ok(())
        }
        ty if f.list => {
            let mut items = Vec::new();
            match wire {
                // Packed encoding of a repeated number: one payload, many
                // varints. Generated Go code accepts both forms.
                Wire::Len(b) if matches!(ty, Ty::I32 | Ty::I64 | Ty::Bool) => {
                    let mut r = Reader::new(b);
                    while !r.is_empty() {
                        items.push(number(ty, Wire::Varint(r.varint()?))?);
                    }
                }
                _ => items.push(value(ty, wire, depth)?.unwrap_or(Value::Null)),
            }
            let slot = out
                .entry(f.name)
                .or_insert_with(|| Value::Array(Vec::new()));
            if !slot.is_array() {
                *slot = Value::Array(Vec::new());
            }
            if let Value::Array(a) = slot {
                a.extend(items);
            }
            Ok(())
        }
        ty => {
            match value(ty, wire, depth)? {
                Some(v) if f.keep || !is_zero(ty, &v) => match (out.get_mut(f.name), v) {
                    // A message sent twice merges, as protobuf specifies.
                    (Some(Value::Object(old)), Value::Object(new)) => merge(old, new),
                    (_, v) => {
                        out.insert(f.name.to_string(), v);
                    }
                },
                // The last occurrence wins: a zero after a value clears it.
                _ => {
                    out.remove(f.name);
                }
            }
            Ok(())
        }
    }
}

/// Whether Go would leave this value out of an `omitempty` field.
fn is_zero(ty: &Ty, v: &Value) -> bool {
    let scalar = matches!(
        ty,
        Ty::Str | Ty::Bytes | Ty::I32 | Ty::I64 | Ty::Bool | Ty::IntOrString | Ty::Quantity
    );
    scalar
        && match v {
            Value::String(s) => s.is_empty(),
            Value::Number(n) => n.as_i64() == Some(0),
            Value::Bool(b) => !b,
            _ => false,
        }
}

fn merge(old: &mut Map<String, Value>, new: Map<String, Value>) {
    for (k, v) in new {
        match (old.get_mut(&k), v) {
            (Some(Value::Object(o)), Value::Object(n)) => merge(o, n),
            (Some(Value::Array(o)), Value::Array(n)) => o.extend(n),
            (_, v) => {
                old.insert(k, v);
            }
        }
    }
}

fn len(wire: Wire<'_>) -> Result<&[u8], Error> {
    match wire {
        Wire::Len(b) => Ok(b),
        w => Err(Error::new(format!(
            "expected a length-delimited field, got a {} one",
            w.name()
        ))),
    }
}

fn number(ty: &Ty, wire: Wire<'_>) -> Result<Value, Error> {
    let Wire::Varint(v) = wire else {
        return Err(Error::new(format!(
            "expected a varint, got a {} field",
            wire.name()
        )));
    };
    // Negative numbers travel as 64-bit two's complement; an int32 is the
    // low half, as Go's generated code reads it.
    Ok(match ty {
        Ty::I32 => Value::from(v as i64 as i32),
        Ty::Bool => Value::Bool(v != 0),
        _ => Value::from(v as i64),
    })
}

/// A single value; `None` for a zero Time, which Go prints as `null` and this
/// server leaves out.
fn value(ty: &Ty, wire: Wire<'_>, depth: usize) -> Result<Option<Value>, Error> {
    Ok(Some(match ty {
        Ty::Str => Value::String(String::from_utf8_lossy(len(wire)?).into_owned()),
        Ty::Bytes => Value::String(base64::engine::general_purpose::STANDARD.encode(len(wire)?)),
        Ty::I32 | Ty::I64 | Ty::Bool => number(ty, wire)?,
        Ty::Msg(table) => {
            let mut m = Map::new();
            message(len(wire)?, table, depth + 1, &mut m)?;
            Value::Object(m)
        }
        Ty::IntOrString => int_or_string(len(wire)?)?,
        Ty::Quantity => Value::String(string_field(len(wire)?)?),
        Ty::Time => return time(len(wire)?, false),
        Ty::MicroTime => return time(len(wire)?, true),
        Ty::Raw => return raw(len(wire)?),
        Ty::Items => {
            let mut items = Vec::new();
            let mut r = Reader::new(len(wire)?);
            while let Some((num, w)) = r.field()? {
                if num == 1 {
                    items.push(Value::String(String::from_utf8_lossy(len(w)?).into_owned()));
                }
            }
            Value::Array(items)
        }
        Ty::Inline(_) | Ty::Map(_) => {
            return Err(Error::new("an inline or map field cannot be a value"));
        }
    }))
}

/// A map entry: key = 1 (a string), value = 2. A missing part is its zero
/// value, as in Go.
fn map_entry(buf: &[u8], value_ty: &Ty, depth: usize) -> Result<(String, Value), Error> {
    let mut key = String::new();
    let mut val = None;
    let mut r = Reader::new(buf);
    while let Some((num, w)) = r.field()? {
        match num {
            1 => key = String::from_utf8_lossy(len(w)?).into_owned(),
            2 => val = value(value_ty, w, depth).map_err(|e| e.at("value"))?,
            _ => {}
        }
    }
    let val = val.unwrap_or_else(|| match value_ty {
        Ty::Msg(_) => Value::Object(Map::new()),
        Ty::Items => Value::Array(Vec::new()),
        Ty::I32 | Ty::I64 => Value::from(0),
        Ty::Bool => Value::Bool(false),
        Ty::Time | Ty::MicroTime | Ty::Raw => Value::Null,
        _ => Value::String(String::new()),
    });
    Ok((key, val))
}

/// Field 1 of a message, as a string (Quantity).
fn string_field(buf: &[u8]) -> Result<String, Error> {
    let mut s = String::new();
    let mut r = Reader::new(buf);
    while let Some((num, w)) = r.field()? {
        if num == 1 {
            s = String::from_utf8_lossy(len(w)?).into_owned();
        }
    }
    Ok(s)
}

/// `IntOrString {type = 1 (0 int, 1 string), intVal = 2, strVal = 3}`.
fn int_or_string(buf: &[u8]) -> Result<Value, Error> {
    let (mut ty, mut int, mut s) = (0u64, 0u64, String::new());
    let mut r = Reader::new(buf);
    while let Some((num, w)) = r.field()? {
        match (num, w) {
            (1, Wire::Varint(v)) => ty = v,
            (2, Wire::Varint(v)) => int = v,
            (3, w) => s = String::from_utf8_lossy(len(w)?).into_owned(),
            _ => {}
        }
    }
    Ok(if ty == 1 {
        Value::String(s)
    } else {
        Value::from(int as i64 as i32)
    })
}

/// `Time`/`MicroTime {seconds = 1, nanos = 2}` in UTC, as Go prints them:
/// whole seconds for Time, microseconds for MicroTime.
fn time(buf: &[u8], micro: bool) -> Result<Option<Value>, Error> {
    let (mut secs, mut nanos) = (0i64, 0i64);
    let mut r = Reader::new(buf);
    while let Some((num, w)) = r.field()? {
        match (num, w) {
            (1, Wire::Varint(v)) => secs = v as i64,
            (2, Wire::Varint(v)) => nanos = i64::from(v as i64 as i32),
            _ => {}
        }
    }
    if secs == 0 && nanos == 0 {
        return Ok(None);
    }
    let t = u32::try_from(nanos)
        .ok()
        .and_then(|n| chrono::DateTime::from_timestamp(secs, n))
        .ok_or_else(|| Error::new(format!("time out of range: {secs}s {nanos}ns")))?;
    let format = if micro {
        chrono::SecondsFormat::Micros
    } else {
        chrono::SecondsFormat::Secs
    };
    Ok(Some(Value::String(t.to_rfc3339_opts(format, true))))
}

/// `RawExtension`/`FieldsV1 {raw = 1}`: bytes that must themselves be JSON.
fn raw(buf: &[u8]) -> Result<Option<Value>, Error> {
    let mut raw: &[u8] = &[];
    let mut r = Reader::new(buf);
    while let Some((num, w)) = r.field()? {
        if num == 1 {
            raw = len(w)?;
        }
    }
    if raw.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(raw)
        .map(Some)
        .map_err(|e| Error::new(format!("embedded raw object is not JSON: {e}")))
}
