//! The columns of `kubectl get`: for each built-in kind the ones
//! kube-apiserver prints (wide-only columns have priority 1), for custom
//! resources their CRD's additionalPrinterColumns evaluated with a JSONPath
//! subset, and kube's human-readable ages (`5m`, `3h12m`, `2d`).
//!
//! The server always returns every column; kubectl hides priority > 0
//! columns unless asked for `-o wide`.

mod cells;
mod defs;
#[cfg(test)]
mod tests;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::storage::registry::{PrinterColumn, Resource};
pub(crate) use cells::*;
use defs::*;

fn col_json(c: &Col) -> Value {
    json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
}

fn printer_col_json(p: &PrinterColumn) -> Value {
    json!({"name": p.name, "type": p.type_, "format": p.format.clone().unwrap_or_default(),
           "description": p.description, "priority": p.priority})
}

/// The default column of a custom resource without printer columns.
fn default_age_column() -> PrinterColumn {
    PrinterColumn {
        name: "Age".into(),
        type_: "date".into(),
        format: None,
        description: AGE_DESC.into(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }
}

fn custom_columns(res: &Resource) -> Vec<PrinterColumn> {
    if res.printer_columns.is_empty() {
        vec![default_age_column()]
    } else {
        res.printer_columns.clone()
    }
}

/// `columnDefinitions` of a resource's Table.
pub(crate) fn definitions(res: &Resource) -> Vec<Value> {
    if res.builtin {
        match builtin_columns(&res.group, &res.kind) {
            Some(cols) => cols.iter().map(col_json).collect(),
            None => vec![col_json(&NAME), col_json(&CREATED_AT)],
        }
    } else {
        std::iter::once(col_json(&NAME))
            .chain(custom_columns(res).iter().map(printer_col_json))
            .collect()
    }
}

// ---------------------------------------------------------------------------
// Ages

/// The age of an RFC 3339 timestamp: `<unknown>` when absent or malformed.
pub(crate) fn age(ts: &str, now: DateTime<Utc>) -> String {
    match DateTime::parse_from_rfc3339(ts) {
        Ok(t) => human_duration(now.signed_duration_since(t)),
        Err(_) => "<unknown>".into(),
    }
}

/// A duration the way kubectl prints ages: two units while they matter
/// (`3m20s`, `3h12m`, `2d5h`, `3y40d`), one after.
pub(crate) fn human_duration(d: chrono::Duration) -> String {
    let secs = d.num_seconds();
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 60 * 2 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{h}h")
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        let dy = days % 365;
        return if dy == 0 {
            format!("{years}y")
        } else {
            format!("{years}y{dy}d")
        };
    }
    format!("{years}y")
}

// ---------------------------------------------------------------------------
// additionalPrinterColumns

fn custom_cell(col: &PrinterColumn, obj: &Value, now: DateTime<Utc>) -> Value {
    let Some(found) = crate::http::jsonpath::select(obj, &col.json_path) else {
        return Value::Null;
    };
    let found: Vec<&Value> = found.into_iter().filter(|v| !v.is_null()).collect();
    let Some(first) = found.first() else {
        return Value::Null;
    };
    match col.type_.as_str() {
        // Several matches (`.items[*].name`) print comma-joined.
        "string" => json!(
            found
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
        "integer" => match first {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map_or(Value::Null, |i| json!(i)),
            _ => Value::Null,
        },
        "number" => first.as_f64().map_or(Value::Null, |f| json!(f)),
        "boolean" => first.as_bool().map_or(Value::Null, |b| json!(b)),
        "date" => match first.as_str() {
            Some(s) => match DateTime::parse_from_rfc3339(s) {
                Ok(t) => json!(human_duration(now.signed_duration_since(t))),
                Err(_) => json!("<invalid>"),
            },
            None => Value::Null,
        },
        _ => Value::Null,
    }
}
