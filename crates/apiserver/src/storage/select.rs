//! Selection: which objects a list or watch wants (namespace, label and
//! field selectors) and the summary of an object that selection needs, so a
//! watch hub matches events without parsing them again per watcher.

use apimachinery::selector::{FieldSelector, LabelSelector};
use serde_json::{Map, Value};

use crate::object;
use crate::storage::hub::HubEvent;
use store::EventKind;

/// What selectors need to know of an object.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub namespace: String,
    pub name: String,
    pub labels: Map<String, Value>,
    /// Values of the resource's selectable fields, by path.
    pub fields: Vec<(&'static str, String)>,
}

impl Summary {
    pub fn of(obj: &Value, fields: &[&'static str]) -> Summary {
        let meta = object::meta(obj);
        let s = |f: &str| {
            meta.and_then(|m| m.get(f))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Summary {
            namespace: s("namespace"),
            name: s("name"),
            labels: meta
                .and_then(|m| m.get("labels"))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            fields: fields
                .iter()
                .filter(|f| !f.starts_with("metadata."))
                .map(|f| (*f, field_value(obj, f)))
                .collect(),
        }
    }

    fn field(&self, path: &str) -> Option<String> {
        match path {
            "metadata.name" => Some(self.name.clone()),
            "metadata.namespace" => Some(self.namespace.clone()),
            _ => self
                .fields
                .iter()
                .find(|(f, _)| *f == path)
                .map(|(_, v)| v.clone()),
        }
    }
}

/// Which objects a list or watch wants.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: Option<LabelSelector>,
    pub fields: Option<FieldSelector>,
}

impl Filter {
    pub fn matches(&self, s: &Summary) -> bool {
        if let Some(ns) = &self.namespace
            && &s.namespace != ns
        {
            return false;
        }
        if let Some(l) = &self.labels
            && !l.matches(&s.labels)
        {
            return false;
        }
        if let Some(f) = &self.fields
            && !f.matches(|p| s.field(p))
        {
            return false;
        }
        true
    }

    pub fn is_trivial(&self) -> bool {
        self.labels.as_ref().is_none_or(|l| l.is_empty()) && self.fields.is_none()
    }
}

/// The watch event type a watcher sees for a hub event, given its filter:
/// objects entering the selection are ADDED, leaving it DELETED.
pub fn classify(ev: &HubEvent, filter: &Filter) -> Option<&'static str> {
    match ev.kind {
        EventKind::Delete => filter.matches(&ev.summary).then_some("DELETED"),
        EventKind::Put => {
            let now = filter.matches(&ev.summary);
            let before = ev.prev.as_ref().is_some_and(|p| filter.matches(p));
            match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            }
        }
    }
}

/// A value at a dotted path, rendered as a field-selector value (strings as
/// they are, other scalars as JSON, absent as the empty string).
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        // `source` on events is an object; kube matches its component.
        Value::Object(o) => o
            .get("component")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        Value::Array(_) => String::new(),
    }
}
