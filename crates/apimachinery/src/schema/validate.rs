//! Defaulting and validation of a value under a compiled node: types,
//! formats, bounds, list and map semantics, embedded resources and the
//! junctors (`allOf`, `anyOf`, `oneOf`, `not`).

use super::compile::required;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

use crate::status::Cause;

use super::*;

impl Node {
    pub(super) fn apply_defaults(&self, v: &mut Value, resource_root: bool) {
        match v {
            Value::Object(map) => {
                for (k, p) in &self.properties {
                    if resource_root && k == "metadata" {
                        continue;
                    }
                    match map.get(k.as_str()) {
                        None => {
                            if let Some(d) = &p.default {
                                map.insert(k.clone(), d.clone());
                            }
                        }
                        Some(Value::Null) if !p.nullable => match &p.default {
                            Some(d) => {
                                if let Some(slot) = map.get_mut(k.as_str()) {
                                    *slot = d.clone();
                                }
                            }
                            None => {
                                map.shift_remove(k.as_str());
                            }
                        },
                        Some(_) => {}
                    }
                }
                if let Additional::Schema(a) = &self.additional
                    && !a.nullable
                {
                    match &a.default {
                        Some(d) => {
                            for (k, x) in map.iter_mut() {
                                if x.is_null() && self.property(k).is_none() {
                                    *x = d.clone();
                                }
                            }
                        }
                        None => map.retain(|k, x| !x.is_null() || self.property(k).is_some()),
                    }
                }
                for (k, x) in map.iter_mut() {
                    if resource_root && k == "metadata" {
                        continue;
                    }
                    if let Some(p) = self.property(k) {
                        p.apply_defaults(x, false);
                    } else if let Additional::Schema(a) = &self.additional {
                        a.apply_defaults(x, false);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(it) = &self.items {
                    for x in items.iter_mut() {
                        if x.is_null()
                            && !it.nullable
                            && let Some(d) = &it.default
                        {
                            *x = d.clone();
                        }
                        it.apply_defaults(x, false);
                    }
                }
            }
            _ => {}
        }
    }

    fn admits_type(&self, v: &Value) -> bool {
        if self.int_or_string {
            is_integer(v) || v.is_string()
        } else {
            self.ty.is_none_or(|t| t.admits(v))
        }
    }

    pub(super) fn validate(&self, v: &Value, path: &Path, out: &mut Vec<Cause>) {
        if v.is_null() && self.nullable {
            return;
        }
        if !self.admits_type(v) {
            out.push(Cause::new(
                TYPE_INVALID,
                path.render(),
                format!(
                    "Invalid value: {}: must be of type {}, got {}",
                    quote(type_name(v)),
                    expected_type(self),
                    describe(v)
                ),
            ));
            return;
        }
        if let Some(allowed) = &self.enum_values
            && !allowed.iter().any(|a| json_eq(a, v))
        {
            let list = allowed.iter().map(compact).collect::<Vec<_>>().join(", ");
            out.push(Cause::new(
                NOT_SUPPORTED,
                path.render(),
                format!(
                    "Unsupported value: {}: supported values: {list}",
                    compact(v)
                ),
            ));
        }
        match v {
            Value::String(s) => self.validate_string(s, path, out),
            Value::Number(n) => self.validate_number(n, path, out),
            Value::Array(items) => self.validate_array(items, path, out),
            Value::Object(map) => self.validate_object(map, path, out),
            _ => {}
        }
        if !self.all_of.is_empty()
            || !self.any_of.is_empty()
            || !self.one_of.is_empty()
            || self.not.is_some()
        {
            self.validate_junctors(v, path, out);
        }
    }

    fn validate_string(&self, s: &str, path: &Path, out: &mut Vec<Cause>) {
        if self.min_length.is_some() || self.max_length.is_some() {
            // Kubernetes counts characters (runes), not bytes.
            let len = s.chars().count() as u64;
            if let Some(max) = self.max_length.filter(|&m| len > m) {
                out.push(Cause::new(
                    TOO_LONG,
                    path.render(),
                    format!("Too long: may not be longer than {max} characters"),
                ));
            }
            if let Some(min) = self.min_length.filter(|&m| len < m) {
                out.push(Cause::invalid(
                    path.render(),
                    format!(
                        "Invalid value: {}: must be at least {min} characters long",
                        quote(s)
                    ),
                ));
            }
        }
        if let Some(p) = &self.pattern
            && !p.regex.is_match(s)
        {
            out.push(Cause::invalid(
                path.render(),
                format!(
                    "Invalid value: {}: must match the regular expression {}",
                    quote(s),
                    quote(&p.source)
                ),
            ));
        }
        if let Some(f) = self.format
            && !f.admits_str(s)
        {
            out.push(Cause::invalid(
                path.render(),
                format!("Invalid value: {}: must be {}", quote(s), f.describe()),
            ));
        }
    }

    fn validate_number(&self, n: &Number, path: &Path, out: &mut Vec<Cause>) {
        if let Some(b) = &self.minimum {
            let too_small = match num_cmp(n, &b.limit) {
                Some(Ordering::Less) => true,
                Some(Ordering::Equal) => b.exclusive,
                _ => false,
            };
            if too_small {
                let rel = if b.exclusive {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                out.push(Cause::invalid(
                    path.render(),
                    format!("Invalid value: {n}: must be {rel} {}", b.limit),
                ));
            }
        }
        if let Some(b) = &self.maximum {
            let too_big = match num_cmp(n, &b.limit) {
                Some(Ordering::Greater) => true,
                Some(Ordering::Equal) => b.exclusive,
                _ => false,
            };
            if too_big {
                let rel = if b.exclusive {
                    "less than"
                } else {
                    "less than or equal to"
                };
                out.push(Cause::invalid(
                    path.render(),
                    format!("Invalid value: {n}: must be {rel} {}", b.limit),
                ));
            }
        }
        if let Some(m) = &self.multiple_of
            && !is_multiple(n, m)
        {
            out.push(Cause::invalid(
                path.render(),
                format!("Invalid value: {n}: must be a multiple of {m}"),
            ));
        }
        let fits = match self.format {
            Some(Format::Int32) => int_of(n).is_none_or(|i| i32::try_from(i).is_ok()),
            Some(Format::Int64) => int_of(n).is_none_or(|i| i64::try_from(i).is_ok()),
            _ => true,
        };
        if !fits && let Some(f) = self.format {
            out.push(Cause::invalid(
                path.render(),
                format!("Invalid value: {n}: must be {}", f.describe()),
            ));
        }
    }

    fn validate_array(&self, items: &[Value], path: &Path, out: &mut Vec<Cause>) {
        let len = items.len() as u64;
        if let Some(max) = self.max_items.filter(|&m| len > m) {
            out.push(Cause::new(
                TOO_MANY,
                path.render(),
                format!("Too many: {len}: must have at most {max} items"),
            ));
        }
        if let Some(min) = self.min_items.filter(|&m| len < m) {
            out.push(Cause::invalid(
                path.render(),
                format!("Invalid value: {len}: must have at least {min} items"),
            ));
        }
        if let Some(it) = &self.items {
            for (i, x) in items.iter().enumerate() {
                it.validate(x, &path.index(i), out);
            }
        }
        match self.list_type {
            Some(ListType::Map) => duplicate_keys(items, &self.list_map_keys, path, out),
            Some(ListType::Set) => duplicate_items(items, path, out),
            _ if self.unique_items => duplicate_items(items, path, out),
            _ => {}
        }
    }

    fn validate_object(&self, map: &Map<String, Value>, path: &Path, out: &mut Vec<Cause>) {
        let len = map.len() as u64;
        if let Some(max) = self.max_properties.filter(|&m| len > m) {
            out.push(Cause::new(
                TOO_MANY,
                path.render(),
                format!("Too many: {len}: must have at most {max} properties"),
            ));
        }
        if let Some(min) = self.min_properties.filter(|&m| len < m) {
            out.push(Cause::invalid(
                path.render(),
                format!("Invalid value: {len}: must have at least {min} properties"),
            ));
        }
        for r in &self.required {
            if !map.contains_key(r.as_str()) {
                out.push(Cause::required(path.field(r).render()));
            }
        }
        if self.embedded {
            validate_embedded(map, path, out);
        }
        let by_key = match &self.additional {
            Additional::Schema(a) => Some(a.as_ref()),
            _ => None,
        };
        if self.properties.is_empty() && by_key.is_none() {
            return;
        }
        for (k, x) in map {
            if let Some(p) = self.property(k) {
                p.validate(x, &path.field(k), out);
            } else if let Some(a) = by_key {
                a.validate(x, &path.key(k), out);
            }
        }
    }

    fn validate_junctors(&self, v: &Value, path: &Path, out: &mut Vec<Cause>) {
        for s in &self.all_of {
            s.validate(v, path, out);
        }
        if !self.any_of.is_empty() {
            let mut failures = Vec::new();
            for s in &self.any_of {
                let mut tmp = Vec::new();
                s.validate(v, path, &mut tmp);
                if tmp.is_empty() {
                    failures.clear();
                    break;
                }
                failures.push(tmp);
            }
            if !failures.is_empty() {
                out.push(Cause::invalid(
                    path.render(),
                    format!(
                        "Invalid value: {}: must match at least one of the anyOf schemas ({})",
                        preview(v),
                        summarize(&failures)
                    ),
                ));
            }
        }
        if !self.one_of.is_empty() {
            let mut failures = Vec::new();
            let mut matches = 0;
            for s in &self.one_of {
                let mut tmp = Vec::new();
                s.validate(v, path, &mut tmp);
                if tmp.is_empty() {
                    matches += 1;
                } else {
                    failures.push(tmp);
                }
            }
            if matches == 0 {
                out.push(Cause::invalid(
                    path.render(),
                    format!(
                        "Invalid value: {}: must match exactly one of the oneOf schemas, but matches none ({})",
                        preview(v),
                        summarize(&failures)
                    ),
                ));
            } else if matches > 1 {
                out.push(Cause::invalid(
                    path.render(),
                    format!(
                        "Invalid value: {}: must match exactly one of the oneOf schemas, but matches {matches}",
                        preview(v)
                    ),
                ));
            }
        }
        if let Some(s) = &self.not {
            let mut tmp = Vec::new();
            s.validate(v, path, &mut tmp);
            if tmp.is_empty() {
                out.push(Cause::invalid(
                    path.render(),
                    format!(
                        "Invalid value: {}: must not match the schema in not",
                        preview(v)
                    ),
                ));
            }
        }
    }
}

/// The first reason each alternative of a junctor failed, so a user sees
/// what each would need.
fn summarize(failures: &[Vec<Cause>]) -> String {
    let mut s = String::new();
    for (i, causes) in failures.iter().enumerate() {
        let Some(c) = causes.first() else { continue };
        if !s.is_empty() {
            s.push_str("; ");
        }
        let _ = write!(s, "alternative {}: ", i + 1);
        if !c.field.is_empty() {
            let _ = write!(s, "{}: ", c.field);
        }
        s.push_str(&c.message);
    }
    s
}

/// An embedded resource must say what it is; its metadata must be shaped
/// like ObjectMeta.
fn validate_embedded(map: &Map<String, Value>, path: &Path, out: &mut Vec<Cause>) {
    for key in ["apiVersion", "kind"] {
        let fp = path.field(key);
        match map.get(key) {
            None => out.push(required(&fp.render(), "must not be empty")),
            Some(Value::String(s)) if s.is_empty() => out.push(Cause::invalid(
                fp.render(),
                "Invalid value: \"\": must not be empty",
            )),
            Some(Value::String(s)) if key == "apiVersion" && s.matches('/').count() > 1 => out
                .push(Cause::invalid(
                    fp.render(),
                    format!(
                        "Invalid value: {}: must be of the form group/version or version",
                        quote(s)
                    ),
                )),
            Some(Value::String(_)) => {}
            Some(other) => out.push(type_cause(&fp, other, "string")),
        }
    }
    let Some(meta) = map.get("metadata") else {
        return;
    };
    let mp = path.field("metadata");
    let Some(meta) = meta.as_object() else {
        if !meta.is_null() {
            out.push(type_cause(&mp, meta, "object"));
        }
        return;
    };
    for key in ["name", "generateName", "namespace"] {
        if let Some(v) = meta.get(key).filter(|v| !v.is_string() && !v.is_null()) {
            out.push(type_cause(&mp.field(key), v, "string"));
        }
    }
    for key in ["labels", "annotations"] {
        let fp = mp.field(key);
        match meta.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    if !v.is_string() {
                        out.push(type_cause(&fp.key(k), v, "string"));
                    }
                }
            }
            Some(other) => out.push(type_cause(&fp, other, "object")),
        }
    }
}

fn type_cause(path: &Path, v: &Value, expected: &str) -> Cause {
    Cause::new(
        TYPE_INVALID,
        path.render(),
        format!(
            "Invalid value: {}: must be of type {expected}, got {}",
            quote(type_name(v)),
            describe(v)
        ),
    )
}

fn duplicate_items(items: &[Value], path: &Path, out: &mut Vec<Cause>) {
    if items.len() <= PAIRWISE_LIMIT {
        for (i, x) in items.iter().enumerate() {
            if items.iter().take(i).any(|y| json_eq(x, y)) {
                out.push(duplicate(path, i, x));
            }
        }
    } else {
        let mut seen = HashSet::with_capacity(items.len());
        for (i, x) in items.iter().enumerate() {
            let mut key = String::new();
            canonical(x, &mut key, 0);
            if !seen.insert(key) {
                out.push(duplicate(path, i, x));
            }
        }
    }
}

/// Items of a `map` list are identified by their key fields; a missing key
/// is distinct from every present value.
fn duplicate_keys(items: &[Value], keys: &[String], path: &Path, out: &mut Vec<Cause>) {
    if keys.is_empty() {
        return;
    }
    let tuples: Vec<Option<Vec<Option<&Value>>>> = items
        .iter()
        .map(|x| {
            x.as_object()
                .map(|m| keys.iter().map(|k| m.get(k.as_str())).collect())
        })
        .collect();
    let report = |i: usize, t: &[Option<&Value>], out: &mut Vec<Cause>| {
        let mut shown = Map::new();
        for (k, v) in keys.iter().zip(t) {
            if let Some(v) = v {
                shown.insert(k.clone(), (*v).clone());
            }
        }
        out.push(duplicate(path, i, &Value::Object(shown)));
    };
    if items.len() <= PAIRWISE_LIMIT {
        for (i, t) in tuples.iter().enumerate() {
            let Some(t) = t else { continue };
            let dup = tuples.iter().take(i).flatten().any(|u| {
                u.iter().zip(t).all(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => json_eq(a, b),
                    (None, None) => true,
                    _ => false,
                })
            });
            if dup {
                report(i, t, out);
            }
        }
    } else {
        let mut seen = HashSet::with_capacity(items.len());
        for (i, t) in tuples.iter().enumerate() {
            let Some(t) = t else { continue };
            let mut key = String::new();
            for v in t {
                match v {
                    Some(v) => canonical(v, &mut key, 0),
                    None => key.push('-'),
                }
                key.push('|');
            }
            if !seen.insert(key) {
                report(i, t, out);
            }
        }
    }
}

fn duplicate(path: &Path, i: usize, v: &Value) -> Cause {
    Cause::new(
        DUPLICATE,
        path.index(i).render(),
        format!("Duplicate value: {}", compact(v)),
    )
}
