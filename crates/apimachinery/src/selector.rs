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

use std::fmt;

use serde_json::{Map, Value};

use crate::status::{ApiError, Cause};

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

// ---------------------------------------------------------------------------
// Key and value validation
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Label selector
// ---------------------------------------------------------------------------

/// How a [`Requirement`] compares a label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `k=v` or `k==v` (and `matchLabels`).
    Equals,
    /// `k!=v`; also true when the key is absent.
    NotEquals,
    /// `k in (a,b)`.
    In,
    /// `k notin (a,b)`; also true when the key is absent.
    NotIn,
    /// `k`.
    Exists,
    /// `!k`.
    DoesNotExist,
    /// `k>5`: the label exists and is an integer greater than the value.
    /// kube-apiserver accepts it in query strings (node affinity uses it), so
    /// we do too.
    GreaterThan,
    /// `k<5`: the label exists and is an integer less than the value.
    LessThan,
}

/// One ANDed term of a label selector. Values are kept sorted and
/// de-duplicated so that equal selectors compare and render equally.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Builds a requirement, checking the key, the values and that their
    /// number suits the operator. The error is the human-readable reason.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Requirement, String> {
        validate_label_key(key).map_err(|e| format!("invalid label key \"{key}\": {e}"))?;
        let mut values = values;
        values.sort();
        values.dedup();
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    return Err(format!(
                        "for 'in', 'notin' operators, values set can't be empty (key \"{key}\")"
                    ));
                }
            }
            Operator::Equals | Operator::NotEquals => {
                if values.len() != 1 {
                    return Err(format!(
                        "exact-match compatibility requires one single value (key \"{key}\")"
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    return Err(format!(
                        "values set must be empty for exists and does not exist (key \"{key}\")"
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    return Err(format!(
                        "for 'Gt', 'Lt' operators, exactly one value is required (key \"{key}\")"
                    ));
                }
                for v in &values {
                    if v.parse::<i64>().is_err() {
                        return Err(format!(
                            "for 'Gt', 'Lt' operators, the value must be an integer, \
                             not \"{v}\" (key \"{key}\")"
                        ));
                    }
                }
                return Ok(Requirement {
                    key: key.to_string(),
                    operator,
                    values,
                });
            }
        }
        for v in &values {
            validate_label_value(v)
                .map_err(|e| format!("invalid label value \"{v}\" for key \"{key}\": {e}"))?;
        }
        Ok(Requirement {
            key: key.to_string(),
            operator,
            values,
        })
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// Sorted, de-duplicated values (empty for `Exists`/`DoesNotExist`).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a label set satisfies this requirement. A label whose value is
    /// not a string (which valid objects never have) counts as present but
    /// equal to nothing.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        let present = labels.get(&self.key);
        let value = present.and_then(Value::as_str);
        let in_values = |v: Option<&str>| v.is_some_and(|v| self.values.iter().any(|x| x == v));
        match self.operator {
            Operator::Equals | Operator::In => in_values(value),
            Operator::NotEquals | Operator::NotIn => !in_values(value),
            Operator::Exists => present.is_some(),
            Operator::DoesNotExist => present.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let have = value.and_then(|v| v.parse::<i64>().ok());
                let want = self.values.first().and_then(|v| v.parse::<i64>().ok());
                match (have, want) {
                    (Some(have), Some(want)) if self.operator == Operator::GreaterThan => {
                        have > want
                    }
                    (Some(have), Some(want)) => have < want,
                    _ => false,
                }
            }
        }
    }
}

impl Requirement {
    /// Values joined for `in (...)`. A lone empty value is written `,`
    /// because `()` would parse as no values at all.
    fn value_list(&self) -> String {
        match self.values.as_slice() {
            [only] if only.is_empty() => ",".to_string(),
            values => values.join(","),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = self.values.first().map(String::as_str).unwrap_or("");
        match self.operator {
            Operator::Equals => write!(f, "{}={}", self.key, first),
            Operator::NotEquals => write!(f, "{}!={}", self.key, first),
            Operator::In => write!(f, "{} in ({})", self.key, self.value_list()),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, self.value_list()),
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::GreaterThan => write!(f, "{}>{}", self.key, first),
            Operator::LessThan => write!(f, "{}<{}", self.key, first),
        }
    }
}

/// A set of ANDed label requirements.
///
/// The default (and an empty query string, and `{}` as a
/// `metav1.LabelSelector`) matches everything. [`LabelSelector::nothing`]
/// matches no object at all: it is what a null or absent `metav1.LabelSelector`
/// means (a PodDisruptionBudget without a selector covers no pods), and what
/// [`LabelSelector::from_json`] returns for `null`. Callers holding an
/// optional selector field should pass `Value::Null` (or use `nothing()`) for
/// the absent case rather than treating it as empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// Sorted by key (stable), so `Display` gives a canonical form.
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl LabelSelector {
    /// The selector matching every object.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// The selector matching no object (a null `metav1.LabelSelector`).
    pub fn nothing() -> LabelSelector {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Builds a selector from requirements, sorting them by key.
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> LabelSelector {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements,
            nothing: false,
        }
    }

    /// Parses the `labelSelector` query-string syntax. Errors are 400
    /// BadRequest naming what is wrong.
    pub fn parse(input: &str) -> Result<LabelSelector, ApiError> {
        let fail = |why: String| {
            ApiError::bad_request(format!("unable to parse label selector \"{input}\": {why}"))
        };
        let tokens = lex(input);
        let mut parser = Parser {
            tokens: &tokens,
            pos: 0,
        };
        let requirements = parser.parse_selector().map_err(fail)?;
        Ok(LabelSelector::from_requirements(requirements))
    }

    /// A selector requiring every label of the map (a Service's or
    /// ReplicationController's `spec.selector`). Values must be strings.
    pub fn from_labels(labels: &Map<String, Value>) -> Result<LabelSelector, ApiError> {
        let mut requirements = Vec::with_capacity(labels.len());
        for (key, value) in labels {
            let Some(value) = value.as_str() else {
                return Err(ApiError::bad_request(format!(
                    "invalid label selector: the value of label \"{key}\" must be a string"
                )));
            };
            let req = Requirement::new(key, Operator::Equals, vec![value.to_string()])
                .map_err(|e| ApiError::bad_request(format!("invalid label selector: {e}")))?;
            requirements.push(req);
        }
        Ok(LabelSelector::from_requirements(requirements))
    }

    /// Converts a `metav1.LabelSelector` object. `null` gives
    /// [`LabelSelector::nothing`], `{}` gives [`LabelSelector::everything`].
    /// Invalid selectors give 400 BadRequest carrying the causes of
    /// [`validate_label_selector_json`] (with paths relative to the selector).
    pub fn from_json(selector: &Value) -> Result<LabelSelector, ApiError> {
        if selector.is_null() {
            return Ok(LabelSelector::nothing());
        }
        let causes = validate_label_selector_json(selector, "");
        if !causes.is_empty() {
            let summary = causes
                .iter()
                .map(|c| {
                    if c.field.is_empty() {
                        c.message.clone()
                    } else {
                        format!("{}: {}", c.field, c.message)
                    }
                })
                .collect::<Vec<_>>()
                .join(", ");
            let mut err = ApiError::bad_request(format!("invalid label selector: {summary}"));
            err.causes = causes;
            return Err(err);
        }
        // Validation has vouched for every shape below; the `else` arms are
        // unreachable but kept panic-free.
        let mut requirements = Vec::new();
        if let Some(Value::Object(labels)) = selector.get("matchLabels") {
            for (key, value) in labels {
                let value = value.as_str().unwrap_or_default().to_string();
                requirements.push(
                    Requirement::new(key, Operator::Equals, vec![value])
                        .map_err(ApiError::bad_request)?,
                );
            }
        }
        if let Some(Value::Array(exprs)) = selector.get("matchExpressions") {
            for expr in exprs {
                let key = expr.get("key").and_then(Value::as_str).unwrap_or_default();
                let operator = match expr.get("operator").and_then(Value::as_str) {
                    Some("In") => Operator::In,
                    Some("NotIn") => Operator::NotIn,
                    Some("Exists") => Operator::Exists,
                    Some("DoesNotExist") => Operator::DoesNotExist,
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "invalid label selector: unknown operator {other:?}"
                        )));
                    }
                };
                let values = match expr.get("values") {
                    Some(Value::Array(values)) => values
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect(),
                    _ => Vec::new(),
                };
                requirements
                    .push(Requirement::new(key, operator, values).map_err(ApiError::bad_request)?);
            }
        }
        Ok(LabelSelector::from_requirements(requirements))
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// True when the selector matches everything (no requirements). The
    /// nothing-selector is not empty.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// True for [`LabelSelector::nothing`].
    pub fn matches_nothing(&self) -> bool {
        self.nothing
    }

    /// Whether a label set (an object's `metadata.labels`) satisfies every
    /// requirement.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// [`LabelSelector::matches`] on an object's `metadata.labels`; an object
    /// without labels has an empty label set.
    pub fn matches_object(&self, obj: &Value) -> bool {
        match obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
        {
            Some(labels) => self.matches(labels),
            None => self.matches(&Map::new()),
        }
    }
}

/// The canonical query-string form: requirements sorted by key, values
/// sorted, `==` written as `=`. Like kube's `labels.Nothing()`, the
/// nothing-selector renders as the empty string, so only render it where the
/// distinction is carried separately.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

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

// --- query-string lexer and parser ----------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Ident(String),
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Greater,
    Less,
    Open,
    Close,
    Comma,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Token::Ident(s) => s.as_str(),
            Token::Not => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::Greater => ">",
            Token::Less => "<",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
        };
        write!(f, "'{s}'")
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '!' | '=' | ',' | '(' | ')' | '<' | '>')
}

/// Splits a selector into tokens. Identifiers are maximal runs of characters
/// that are neither whitespace nor operators; `in`/`notin` stay identifiers
/// here and become operators only in operator position, so `k=in` works.
fn lex(input: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = input.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => continue,
            '!' if chars.next_if(|&(_, n)| n == '=').is_some() => Token::NotEquals,
            '!' => Token::Not,
            '=' if chars.next_if(|&(_, n)| n == '=').is_some() => Token::DoubleEquals,
            '=' => Token::Equals,
            '>' => Token::Greater,
            '<' => Token::Less,
            '(' => Token::Open,
            ')' => Token::Close,
            ',' => Token::Comma,
            _ => {
                let mut end = start + c.len_utf8();
                while let Some((i, n)) =
                    chars.next_if(|&(_, n)| !n.is_whitespace() && !is_special(n))
                {
                    end = i + n.len_utf8();
                }
                Token::Ident(input.get(start..end).unwrap_or_default().to_string())
            }
        };
        tokens.push(token);
    }
    tokens
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
}

fn describe(token: Option<&Token>) -> String {
    match token {
        Some(t) => t.to_string(),
        None => "end of string".to_string(),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<&Token> {
        let t = self.tokens.get(self.pos);
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    fn parse_selector(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        if self.peek().is_none() {
            return Ok(requirements);
        }
        loop {
            requirements.push(self.parse_requirement()?);
            match self.next() {
                None => return Ok(requirements),
                Some(Token::Comma) => {
                    if self.peek().is_none() {
                        return Err("found end of string, expected: identifier after ','".into());
                    }
                }
                other => {
                    return Err(format!(
                        "found {}, expected: ',' or end of string",
                        describe(other)
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, operator, values) = match self.next() {
            Some(Token::Not) => match self.next() {
                Some(Token::Ident(key)) => (key.clone(), Operator::DoesNotExist, Vec::new()),
                other => {
                    return Err(format!(
                        "found {}, expected: identifier after '!'",
                        describe(other)
                    ));
                }
            },
            Some(Token::Ident(key)) => {
                let key = key.clone();
                match self.peek() {
                    None | Some(Token::Comma) => (key, Operator::Exists, Vec::new()),
                    _ => {
                        let operator = self.parse_operator()?;
                        let values = match operator {
                            Operator::In | Operator::NotIn => self.parse_value_list()?,
                            _ => vec![self.parse_exact_value()?],
                        };
                        (key, operator, values)
                    }
                }
            }
            other => {
                return Err(format!(
                    "found {}, expected: '!' or identifier",
                    describe(other)
                ));
            }
        };
        Requirement::new(&key, operator, values)
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        match self.next() {
            Some(Token::Equals | Token::DoubleEquals) => Ok(Operator::Equals),
            Some(Token::NotEquals) => Ok(Operator::NotEquals),
            Some(Token::Greater) => Ok(Operator::GreaterThan),
            Some(Token::Less) => Ok(Operator::LessThan),
            Some(Token::Ident(word)) if word == "in" => Ok(Operator::In),
            Some(Token::Ident(word)) if word == "notin" => Ok(Operator::NotIn),
            other => Err(format!(
                "found {}, expected: '=', '==', '!=', 'in', 'notin', '>' or '<'",
                describe(other)
            )),
        }
    }

    /// The value after `=`, `==`, `!=`, `>`, `<`; nothing before `,` or the
    /// end means the empty value (`k=`).
    fn parse_exact_value(&mut self) -> Result<String, String> {
        match self.peek() {
            None | Some(Token::Comma) => Ok(String::new()),
            Some(Token::Ident(v)) => {
                let v = v.clone();
                self.pos += 1;
                Ok(v)
            }
            other => Err(format!(
                "found {}, expected: identifier or ','",
                describe(other)
            )),
        }
    }

    /// `(a, b, ...)`. As in kube, an item left blank between commas is the
    /// empty value (`(a,)` holds `a` and `""`), while `()` holds nothing.
    fn parse_value_list(&mut self) -> Result<Vec<String>, String> {
        match self.next() {
            Some(Token::Open) => {}
            other => return Err(format!("found {}, expected: '('", describe(other))),
        }
        let mut values = Vec::new();
        let mut current: Option<String> = None;
        let mut saw_comma = false;
        loop {
            match self.next() {
                Some(Token::Ident(v)) => {
                    if current.is_some() {
                        return Err(format!("found '{v}', expected: ',' or ')'"));
                    }
                    current = Some(v.clone());
                }
                Some(Token::Comma) => {
                    saw_comma = true;
                    values.push(current.take().unwrap_or_default());
                }
                Some(Token::Close) => {
                    if current.is_some() || saw_comma {
                        values.push(current.take().unwrap_or_default());
                    }
                    return Ok(values);
                }
                None => return Err("found end of string, expected: ')'".into()),
                Some(other) => {
                    return Err(format!("found {other}, expected: identifier, ',' or ')'"));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Field selector
// ---------------------------------------------------------------------------

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

fn unescape_value(raw: &str) -> Result<String, String> {
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

fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
            let sel = LabelSelector::parse(input)
                .unwrap_or_else(|e| panic!("parse {input:?} failed: {e}"));
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
            let sel = FieldSelector::parse(input)
                .unwrap_or_else(|e| panic!("parse {input:?} failed: {e}"));
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
}
