//! Label and field selectors, as kube-apiserver understands them.
//!
//! Label selectors arrive in two shapes: the `labelSelector` query-string
//! syntax (`app=web,tier in (a,b),!canary`) and the `metav1.LabelSelector`
//! object (`{matchLabels, matchExpressions}`) embedded in PodDisruptionBudgets,
//! Deployments, MachineSets and friends. Both parse into [`LabelSelector`].
//!
//! Field selectors (`metadata.name=x,status.phase!=Running`) parse into
//! [`FieldSelector`]; which fields are selectable depends on the resource, so
//! the caller validates them and supplies the field values when matching.

// `ApiError` (about 150 bytes) is this crate's error type and what the API
// server renders; boxing it only here would make these functions odd ones
// out, and errors are the cold path.
#![allow(clippy::result_large_err)]

mod field;
mod label;
mod label_object;
mod label_query;
#[cfg(test)]
mod tests;

pub use field::{FieldOp, FieldSelector};
pub use label::{LabelSelector, Operator, Requirement};
pub use label_object::validate_label_selector_json;

/// Longest name part of a label key, and longest label value.
const MAX_NAME_LEN: usize = 63;
/// Longest DNS-subdomain prefix of a label key.
const MAX_PREFIX_LEN: usize = 253;

const NAME_FORMAT: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must \
     start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc')";
const VALUE_FORMAT: &str = "a valid label must be an empty string or consist of alphanumeric \
     characters, '-', '_' or '.', and must start and end with an alphanumeric character \
     (e.g. 'MyValue', or 'my_value', or '12345')";
const PREFIX_FORMAT: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric \
     character (e.g. 'example.com')";

// Label keys and values are checked the same way wherever they appear:
// in query strings, in `metav1.LabelSelector` objects and in labels.

/// Checks a label key: an optional DNS-subdomain prefix and `/`, then a name
/// of at most 63 characters. The error text is the human-readable reason.
pub fn validate_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("prefix part must be non-empty".to_string());
        }
        if prefix.len() > MAX_PREFIX_LEN {
            return Err(format!(
                "prefix part must be no more than {MAX_PREFIX_LEN} characters"
            ));
        }
        if !is_dns1123_subdomain(prefix) {
            return Err(format!("prefix part {PREFIX_FORMAT}"));
        }
    }
    if name.is_empty() {
        return Err("name part must be non-empty".to_string());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "name part must be no more than {MAX_NAME_LEN} characters"
        ));
    }
    // A second `/` lands in the name part, where the charset check rejects it.
    if !is_label_name(name) {
        return Err(format!("name part {NAME_FORMAT}"));
    }
    Ok(())
}

/// Checks a label value: empty, or at most 63 characters of the name charset.
pub fn validate_label_value(value: &str) -> Result<(), String> {
    if value.len() > MAX_NAME_LEN {
        return Err(format!("must be no more than {MAX_NAME_LEN} characters"));
    }
    if !value.is_empty() && !is_label_name(value) {
        return Err(VALUE_FORMAT.to_string());
    }
    Ok(())
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`
fn is_label_name(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Dot-separated RFC 1123 labels: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let bytes = label.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
            }
            _ => false,
        }
    })
}
