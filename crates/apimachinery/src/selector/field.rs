//! Field selectors (`metadata.name=x,status.phase!=Running`): parsing,
//! escaping and matching against field values the caller supplies.

use std::fmt;

use crate::status::ApiError;

/// How a field selector term compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldOp {
    /// `f=v` or `f==v`.
    Equals,
    /// `f!=v`.
    NotEquals,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FieldRequirement {
    field: String,
    op: FieldOp,
    value: String,
}

/// ANDed `field=value` / `field!=value` terms, e.g.
/// `metadata.name=web,status.phase!=Running`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses the `fieldSelector` query syntax. Terms are split on commas
    /// not escaped by `\`; values may escape `\`, `,` and `=` with `\` and
    /// must escape them. Whitespace around field names is dropped; values are
    /// taken verbatim. Empty terms (`a=b,,c=d`) are skipped, as kube does.
    pub fn parse(input: &str) -> Result<FieldSelector, ApiError> {
        let mut requirements = Vec::new();
        for term in split_terms(input) {
            if term.is_empty() {
                continue;
            }
            let Some((field, op, raw)) = split_term(term) else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if field.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{input}'; missing field name in '{term}'"
                )));
            }
            let value = unescape_value(raw).map_err(ApiError::bad_request)?;
            requirements.push(FieldRequirement {
                field: field.to_string(),
                op,
                value,
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// True when there are no terms (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The terms as `(field, op, unescaped value)`, in input order.
    pub fn requirements(&self) -> impl Iterator<Item = (&str, FieldOp, &str)> + '_ {
        self.requirements
            .iter()
            .map(|r| (r.field.as_str(), r.op, r.value.as_str()))
    }

    /// 400 BadRequest naming the first field not in `allowed`.
    pub fn validate_fields(&self, allowed: &[&str]) -> Result<(), ApiError> {
        match self
            .requirements
            .iter()
            .find(|r| !allowed.contains(&r.field.as_str()))
        {
            Some(r) => Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                r.field
            ))),
            None => Ok(()),
        }
    }

    /// Whether every term holds, given the object's field values from `get`.
    /// An absent field compares as the empty string, as in kube.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|r| {
            let have = get(&r.field).unwrap_or_default();
            match r.op {
                FieldOp::Equals => have == r.value,
                FieldOp::NotEquals => have != r.value,
            }
        })
    }

    /// The value of the first `field=v` term on `field`, so a caller can look
    /// one object up by key (`metadata.name=x`) instead of scanning. Other
    /// terms still apply, so the caller must run [`FieldSelector::matches`]
    /// on what it finds.
    pub fn single_value(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.op == FieldOp::Equals && r.field == field)
            .map(|r| r.value.as_str())
    }
}

/// Renders back to query syntax with values escaped, in input order.
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = match r.op {
                FieldOp::Equals => "=",
                FieldOp::NotEquals => "!=",
            };
            write!(f, "{}{}{}", r.field, op, escape_value(&r.value))?;
        }
        Ok(())
    }
}

/// Splits on commas that are not escaped by a backslash.
fn split_terms(input: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    if input.is_empty() {
        return terms;
    }
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in input.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(input.get(start..i).unwrap_or_default());
            start = i + 1;
        }
    }
    terms.push(input.get(start..).unwrap_or_default());
    terms
}

/// Splits a term at its first operator; at each position `!=` is tried
/// before `==` before `=`, so `a==b` is `a` `==` `b`, not `a` `=` `=b`.
fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    const OPERATORS: [(&str, FieldOp); 3] = [
        ("!=", FieldOp::NotEquals),
        ("==", FieldOp::Equals),
        ("=", FieldOp::Equals),
    ];
    for (i, _) in term.char_indices() {
        let rest = term.get(i..).unwrap_or_default();
        for (symbol, op) in OPERATORS {
            if let Some(value) = rest.strip_prefix(symbol) {
                return Some((term.get(..i).unwrap_or_default(), op, value));
            }
        }
    }
    None
}

pub(super) fn unescape_value(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(e) => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{e}"
                    ));
                }
                None => return Err("invalid field selector: invalid escape sequence: \\".into()),
            },
            ',' | '=' => {
                return Err(format!("invalid field selector: unescaped character: {c}"));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

pub(super) fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
