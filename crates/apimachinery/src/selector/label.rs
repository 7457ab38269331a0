//! Label selectors: requirements, matching and the canonical rendering,
//! built from the query-string syntax or a `metav1.LabelSelector` object.

use std::fmt;

use serde_json::{Map, Value};

use crate::status::ApiError;

use super::label_query::parse_requirements;
use super::*;

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
        let requirements = parse_requirements(input).map_err(fail)?;
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
