//! Validation of `metav1.LabelSelector` objects (`{matchLabels,
//! matchExpressions}`) with kube-style causes naming each bad field.

use serde_json::Value;

use crate::status::Cause;

use super::*;

/// Validates a `metav1.LabelSelector` object found at `path` (for example
/// `spec.selector`), returning kube-style causes. `null` is valid here; a
/// caller that requires the selector checks for that itself.
pub fn validate_label_selector_json(selector: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let child = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    let obj = match selector {
        Value::Null => return causes,
        Value::Object(obj) => obj,
        other => {
            causes.push(type_invalid(path, other, "must be an object"));
            return causes;
        }
    };

    let labels_path = child("matchLabels");
    match obj.get("matchLabels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(labels)) => {
            for (key, value) in labels {
                if let Err(e) = validate_label_key(key) {
                    causes.push(Cause::invalid(
                        labels_path.as_str(),
                        format!("Invalid value: {}: {e}", quote(key)),
                    ));
                }
                match value.as_str() {
                    Some(v) => {
                        if let Err(e) = validate_label_value(v) {
                            causes.push(Cause::invalid(
                                labels_path.as_str(),
                                format!("Invalid value: {}: {e}", quote(v)),
                            ));
                        }
                    }
                    None => causes.push(type_invalid(
                        &format!("{labels_path}[{key}]"),
                        value,
                        "must be a string",
                    )),
                }
            }
        }
        Some(other) => causes.push(type_invalid(&labels_path, other, "must be an object")),
    }

    let exprs_path = child("matchExpressions");
    match obj.get("matchExpressions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(exprs)) => {
            for (i, expr) in exprs.iter().enumerate() {
                validate_expression(expr, &format!("{exprs_path}[{i}]"), &mut causes);
            }
        }
        Some(other) => causes.push(type_invalid(&exprs_path, other, "must be an array")),
    }
    causes
}

/// One `matchExpressions` entry: key, operator, and values fitting the
/// operator.
fn validate_expression(expr: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(expr) = expr.as_object() else {
        causes.push(type_invalid(path, expr, "must be an object"));
        return;
    };

    let key_path = format!("{path}.key");
    match expr.get("key") {
        None | Some(Value::Null) => causes.push(Cause::required(key_path)),
        Some(Value::String(key)) => {
            if let Err(e) = validate_label_key(key) {
                causes.push(Cause::invalid(
                    key_path,
                    format!("Invalid value: {}: {e}", quote(key)),
                ));
            }
        }
        Some(other) => causes.push(type_invalid(&key_path, other, "must be a string")),
    }

    let values_path = format!("{path}.values");
    let mut values_len = 0;
    match expr.get("values") {
        None | Some(Value::Null) => {}
        Some(Value::Array(values)) => {
            values_len = values.len();
            for (j, value) in values.iter().enumerate() {
                let value_path = format!("{values_path}[{j}]");
                match value.as_str() {
                    Some(v) => {
                        if let Err(e) = validate_label_value(v) {
                            causes.push(Cause::invalid(
                                value_path,
                                format!("Invalid value: {}: {e}", quote(v)),
                            ));
                        }
                    }
                    None => causes.push(type_invalid(&value_path, value, "must be a string")),
                }
            }
        }
        Some(other) => causes.push(type_invalid(&values_path, other, "must be an array")),
    }

    let op_path = format!("{path}.operator");
    match expr.get("operator") {
        None | Some(Value::Null) => causes.push(Cause::required(op_path)),
        Some(Value::String(op)) => match op.as_str() {
            "In" | "NotIn" => {
                if values_len == 0 {
                    causes.push(Cause::new(
                        "FieldValueRequired",
                        values_path,
                        "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if values_len > 0 {
                    causes.push(Cause::new(
                        "FieldValueForbidden",
                        values_path,
                        "Forbidden: may not be specified when `operator` is 'Exists' or \
                         'DoesNotExist'",
                    ));
                }
            }
            _ => causes.push(Cause::new(
                "FieldValueNotSupported",
                op_path,
                format!(
                    "Unsupported value: {}: supported values: \"DoesNotExist\", \"Exists\", \
                     \"In\", \"NotIn\"",
                    quote(op)
                ),
            )),
        },
        Some(other) => causes.push(type_invalid(&op_path, other, "must be a string")),
    }
}

fn type_invalid(path: &str, value: &Value, why: &str) -> Cause {
    Cause::new(
        "FieldValueTypeInvalid",
        path,
        format!("Invalid value: {}: {why}", json_kind(value)),
    )
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A JSON-quoted string for messages (escapes quotes and control characters).
fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}
