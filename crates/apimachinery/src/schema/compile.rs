//! Compiling a schema: reading `openAPIV3Schema` JSON into a tree of
//! [`Node`]s with its regular expressions built, and, for a new CRD, holding
//! it to the structural rules of Kubernetes and checking its defaults.

use std::collections::HashSet;

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Number, Value};

use crate::status::Cause;

use super::*;

/// Where a node sits, for the rules that depend on it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Ctx {
    Root,
    /// Under `properties`, `items` or `additionalProperties`.
    Field,
    /// Inside `allOf`, `anyOf`, `oneOf` or `not`, at any depth.
    Junctor,
}

pub(super) struct Compiler {
    pub(super) causes: Vec<Cause>,
    /// Also apply the structural rules, for admitting a new CRD.
    pub(super) strict: bool,
}

impl Compiler {
    pub(super) fn push(&mut self, c: Cause) {
        self.causes.push(c);
    }

    pub(super) fn compile(&mut self, v: &Value, path: &str, ctx: Ctx, depth: usize) -> Node {
        let mut n = Node::default();
        if depth > MAX_DEPTH {
            self.push(Cause::invalid(
                path,
                format!("Invalid value: the schema is nested deeper than {MAX_DEPTH} levels"),
            ));
            return n;
        }
        let Some(m) = v.as_object() else {
            self.push(Cause::new(
                TYPE_INVALID,
                path,
                format!("Invalid value: {}: must be a schema object", preview(v)),
            ));
            return n;
        };
        if m.contains_key("$ref") {
            self.push(forbidden(
                &child(path, "$ref"),
                "$ref is not supported in CustomResourceDefinition schemas; inline the referenced schema",
            ));
        }
        if self.strict {
            for kw in UNSUPPORTED_KEYWORDS {
                if m.contains_key(*kw) {
                    self.push(forbidden(
                        &child(path, kw),
                        "must not be set in a structural schema",
                    ));
                }
            }
        }
        let sub_ctx = if ctx == Ctx::Junctor {
            Ctx::Junctor
        } else {
            Ctx::Field
        };

        match m.get("type") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => match Type::parse(s) {
                Some(t) => n.ty = Some(t),
                None => self.push(not_supported_str(&child(path, "type"), s, TYPE_NAMES)),
            },
            Some(other) => self.push(wrong_keyword_type(&child(path, "type"), other, "a string")),
        }
        n.nullable = self.flag(m, "nullable", path);
        n.preserve_unknown = self.flag(m, "x-kubernetes-preserve-unknown-fields", path);
        n.int_or_string = self.flag(m, "x-kubernetes-int-or-string", path);
        n.embedded = self.flag(m, "x-kubernetes-embedded-resource", path);
        n.description = self.text(m, "description", path).map(str::to_owned);
        n.format = self.text(m, "format", path).map(Format::parse);
        if let Some(p) = self.text(m, "pattern", path) {
            match compile_pattern(p) {
                Ok(regex) => {
                    n.pattern = Some(Pattern {
                        source: p.to_owned(),
                        regex,
                    })
                }
                Err(why) => self.push(Cause::invalid(
                    child(path, "pattern"),
                    format!(
                        "Invalid value: {}: must be a valid regular expression: {why}",
                        quote(p)
                    ),
                )),
            }
        }

        n.minimum = self.number(m, "minimum", path).map(|limit| Bound {
            limit,
            exclusive: false,
        });
        n.maximum = self.number(m, "maximum", path).map(|limit| Bound {
            limit,
            exclusive: false,
        });
        self.exclusive(m, "exclusiveMinimum", path, &mut n.minimum);
        self.exclusive(m, "exclusiveMaximum", path, &mut n.maximum);
        n.multiple_of = self.number(m, "multipleOf", path);
        n.min_length = self.count(m, "minLength", path);
        n.max_length = self.count(m, "maxLength", path);
        n.min_items = self.count(m, "minItems", path);
        n.max_items = self.count(m, "maxItems", path);
        n.min_properties = self.count(m, "minProperties", path);
        n.max_properties = self.count(m, "maxProperties", path);
        n.unique_items = self.flag(m, "uniqueItems", path);
        n.required = self.strings(m, "required", path);
        match m.get("enum") {
            None | Some(Value::Null) => {}
            Some(Value::Array(values)) => n.enum_values = Some(values.clone()),
            Some(other) => self.push(wrong_keyword_type(&child(path, "enum"), other, "an array")),
        }
        n.default = m.get("default").cloned();

        match m.get("properties") {
            None | Some(Value::Null) => {}
            Some(Value::Object(props)) => {
                for (k, pv) in props {
                    let pp = child(path, &format!("properties[{k}]"));
                    let node = self.compile(pv, &pp, sub_ctx, depth + 1);
                    n.properties.push((k.clone(), node));
                }
                if n.properties.len() > 8 {
                    n.property_index = Some(
                        n.properties
                            .iter()
                            .enumerate()
                            .map(|(i, (k, _))| (k.clone(), i))
                            .collect(),
                    );
                }
            }
            Some(other) => self.push(wrong_keyword_type(
                &child(path, "properties"),
                other,
                "an object",
            )),
        }
        match m.get("additionalProperties") {
            None | Some(Value::Null) | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => n.additional = Additional::Any,
            Some(ap @ Value::Object(_)) => {
                let node =
                    self.compile(ap, &child(path, "additionalProperties"), sub_ctx, depth + 1);
                n.additional = Additional::Schema(Box::new(node));
            }
            Some(other) => self.push(wrong_keyword_type(
                &child(path, "additionalProperties"),
                other,
                "a boolean or a schema object",
            )),
        }
        match m.get("items") {
            None | Some(Value::Null) => {}
            Some(Value::Array(_)) => self.push(forbidden(
                &child(path, "items"),
                "items must be a single schema object, not an array of schemas",
            )),
            Some(iv) => {
                let node = self.compile(iv, &child(path, "items"), sub_ctx, depth + 1);
                n.items = Some(Box::new(node));
            }
        }
        n.all_of = self.junctors(m, "allOf", path, depth);
        n.any_of = self.junctors(m, "anyOf", path, depth);
        n.one_of = self.junctors(m, "oneOf", path, depth);
        if let Some(nv) = m.get("not").filter(|v| !v.is_null()) {
            let node = self.compile(nv, &child(path, "not"), Ctx::Junctor, depth + 1);
            n.not = Some(Box::new(node));
        }

        match self.text(m, "x-kubernetes-list-type", path) {
            None => {}
            Some("atomic") => n.list_type = Some(ListType::Atomic),
            Some("set") => n.list_type = Some(ListType::Set),
            Some("map") => n.list_type = Some(ListType::Map),
            Some(other) => self.push(not_supported_str(
                &child(path, "x-kubernetes-list-type"),
                other,
                &["atomic", "set", "map"],
            )),
        }
        n.list_map_keys = self.strings(m, "x-kubernetes-list-map-keys", path);
        match self.text(m, "x-kubernetes-map-type", path) {
            None => {}
            Some("granular") => n.map_type = Some(MapType::Granular),
            Some("atomic") => n.map_type = Some(MapType::Atomic),
            Some(other) => self.push(not_supported_str(
                &child(path, "x-kubernetes-map-type"),
                other,
                &["granular", "atomic"],
            )),
        }

        if self.strict {
            self.structural(&n, m, path, ctx);
        }
        n
    }

    pub(super) fn junctors(
        &mut self,
        m: &Map<String, Value>,
        key: &str,
        path: &str,
        depth: usize,
    ) -> Vec<Node> {
        match m.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let p = child(path, &format!("{key}[{i}]"));
                    self.compile(s, &p, Ctx::Junctor, depth + 1)
                })
                .collect(),
            Some(other) => {
                self.push(wrong_keyword_type(&child(path, key), other, "an array"));
                Vec::new()
            }
        }
    }

    fn flag(&mut self, m: &Map<String, Value>, key: &str, path: &str) -> bool {
        match m.get(key) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.push(wrong_keyword_type(&child(path, key), other, "a boolean"));
                false
            }
        }
    }

    fn text<'v>(&mut self, m: &'v Map<String, Value>, key: &str, path: &str) -> Option<&'v str> {
        match m.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(other) => {
                self.push(wrong_keyword_type(&child(path, key), other, "a string"));
                None
            }
        }
    }

    pub(super) fn number(
        &mut self,
        m: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Option<Number> {
        match m.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => Some(n.clone()),
            Some(other) => {
                self.push(wrong_keyword_type(&child(path, key), other, "a number"));
                None
            }
        }
    }

    /// `exclusiveMinimum`/`exclusiveMaximum`: a boolean in OpenAPI 3.0 (the
    /// CRD form); the number form of later JSON Schema drafts is accepted
    /// too, as generators sometimes emit it.
    pub(super) fn exclusive(
        &mut self,
        m: &Map<String, Value>,
        key: &str,
        path: &str,
        bound: &mut Option<Bound>,
    ) {
        match m.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => {
                if let Some(bound) = bound {
                    bound.exclusive = *b;
                }
            }
            Some(Value::Number(n)) => {
                *bound = Some(Bound {
                    limit: n.clone(),
                    exclusive: true,
                })
            }
            Some(other) => self.push(wrong_keyword_type(&child(path, key), other, "a boolean")),
        }
    }

    pub(super) fn count(&mut self, m: &Map<String, Value>, key: &str, path: &str) -> Option<u64> {
        let v = m.get(key)?;
        if v.is_null() {
            return None;
        }
        let n = v.as_u64();
        if n.is_none() {
            self.push(wrong_keyword_type(
                &child(path, key),
                v,
                "a non-negative integer",
            ));
        }
        n
    }

    pub(super) fn strings(&mut self, m: &Map<String, Value>, key: &str, path: &str) -> Vec<String> {
        match m.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => {
                let mut out = Vec::with_capacity(list.len());
                for (i, s) in list.iter().enumerate() {
                    match s.as_str() {
                        Some(s) => out.push(s.to_owned()),
                        None => self.push(wrong_keyword_type(
                            &child(path, &format!("{key}[{i}]")),
                            s,
                            "a string",
                        )),
                    }
                }
                out
            }
            Some(other) => {
                self.push(wrong_keyword_type(
                    &child(path, key),
                    other,
                    "an array of strings",
                ));
                Vec::new()
            }
        }
    }

    /// The structural rules, for admitting a new CRD.
    pub(super) fn structural(&mut self, n: &Node, m: &Map<String, Value>, path: &str, ctx: Ctx) {
        let typed = n.ty.is_some();
        if ctx == Ctx::Junctor {
            for kw in JUNCTOR_FORBIDDEN {
                if m.contains_key(*kw) {
                    self.push(forbidden(
                        &child(path, kw),
                        "must not be set inside allOf, anyOf, oneOf or not, which only validate",
                    ));
                }
            }
        } else if !typed && !n.int_or_string && !n.preserve_unknown {
            self.push(required(
                &child(path, "type"),
                "must not be empty for specified fields",
            ));
        }
        if ctx == Ctx::Root {
            if let Some(t) = n.ty.filter(|t| *t != Type::Object) {
                self.push(Cause::invalid(
                    child(path, "type"),
                    format!(
                        "Invalid value: {}: must be object at the root",
                        quote(t.as_str())
                    ),
                ));
            }
            for (kw, set) in [
                ("nullable", n.nullable),
                ("x-kubernetes-int-or-string", n.int_or_string),
                ("x-kubernetes-embedded-resource", n.embedded),
            ] {
                if set {
                    self.push(forbidden(&child(path, kw), "must be false at the root"));
                }
            }
            self.root_metadata(m, path);
        }
        if m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
            self.push(Cause::invalid(
                child(path, "x-kubernetes-preserve-unknown-fields"),
                "Invalid value: false: must be true or undefined",
            ));
        }
        if n.int_or_string && typed {
            self.push(Cause::invalid(
                child(path, "type"),
                "Invalid value: must be empty if x-kubernetes-int-or-string is true",
            ));
        }
        if n.embedded && typed && n.ty != Some(Type::Object) {
            self.push(Cause::invalid(
                child(path, "x-kubernetes-embedded-resource"),
                "Invalid value: true: must only be used with type object",
            ));
        }
        match m.get("additionalProperties") {
            Some(Value::Bool(false)) if ctx != Ctx::Junctor => self.push(forbidden(
                &child(path, "additionalProperties"),
                "must not be false; fields not in properties are pruned anyway",
            )),
            Some(Value::Object(_)) if !n.properties.is_empty() => self.push(forbidden(
                &child(path, "additionalProperties"),
                "additionalProperties and properties are mutually exclusive",
            )),
            _ => {}
        }
        if n.ty == Some(Type::Array)
            && n.items.is_none()
            && ctx != Ctx::Junctor
            && !n.preserve_unknown
        {
            self.push(required(
                &child(path, "items"),
                "must be specified for type array",
            ));
        }
        if let Some(d) = &n.multiple_of
            && d.as_f64().is_none_or(|d| d <= 0.0)
        {
            self.push(Cause::invalid(
                child(path, "multipleOf"),
                format!("Invalid value: {d}: must be greater than 0"),
            ));
        }
        self.list_rules(n, path, typed);
        if n.map_type.is_some() && typed && n.ty != Some(Type::Object) {
            self.push(Cause::invalid(
                child(path, "x-kubernetes-map-type"),
                "Invalid value: must only be used if type is object",
            ));
        }
        if let Some(values) = &n.enum_values {
            for (i, e) in values.iter().enumerate() {
                let ok = if e.is_null() {
                    n.nullable
                } else if n.int_or_string {
                    is_integer(e) || e.is_string()
                } else {
                    n.ty.is_none_or(|t| t.admits(e))
                };
                if !ok {
                    let expected = if e.is_null() {
                        "non-null, as the field is not nullable".to_owned()
                    } else {
                        format!("of type {}", expected_type(n))
                    };
                    self.push(Cause::invalid(
                        child(path, &format!("enum[{i}]")),
                        format!("Invalid value: {}: must be {expected}", preview(e)),
                    ));
                }
            }
        }
        if ctx != Ctx::Junctor {
            for kw in ["allOf", "anyOf", "oneOf"] {
                if let Some(Value::Array(list)) = m.get(kw) {
                    for (i, j) in list.iter().enumerate() {
                        self.corresponds(j, m, &child(path, &format!("{kw}[{i}]")), 0);
                    }
                }
            }
            if let Some(j) = m.get("not") {
                self.corresponds(j, m, &child(path, "not"), 0);
            }
        }
    }

    fn list_rules(&mut self, n: &Node, path: &str, typed: bool) {
        let Some(lt) = n.list_type else {
            if !n.list_map_keys.is_empty() {
                self.push(forbidden(
                    &child(path, "x-kubernetes-list-map-keys"),
                    "must only be used if x-kubernetes-list-type is map",
                ));
            }
            return;
        };
        if typed && n.ty != Some(Type::Array) {
            self.push(Cause::invalid(
                child(path, "x-kubernetes-list-type"),
                "Invalid value: must only be used if type is array",
            ));
            return;
        }
        if lt != ListType::Map && !n.list_map_keys.is_empty() {
            self.push(forbidden(
                &child(path, "x-kubernetes-list-map-keys"),
                "must only be used if x-kubernetes-list-type is map",
            ));
        }
        let Some(items) = n.items.as_deref() else {
            return;
        };
        match lt {
            ListType::Atomic => {}
            ListType::Set => {
                // Set membership of compound items is only well defined when
                // they are compared whole.
                if items.ty == Some(Type::Object) && items.map_type != Some(MapType::Atomic) {
                    self.push(Cause::invalid(
                        child(path, "items.x-kubernetes-map-type"),
                        "Invalid value: must be atomic for the items of a list with x-kubernetes-list-type=set",
                    ));
                }
                if items.ty == Some(Type::Array) && items.list_type != Some(ListType::Atomic) {
                    self.push(Cause::invalid(
                        child(path, "items.x-kubernetes-list-type"),
                        "Invalid value: must be atomic for the items of a list with x-kubernetes-list-type=set",
                    ));
                }
            }
            ListType::Map => {
                if items.ty.is_some_and(|t| t != Type::Object) {
                    self.push(Cause::invalid(
                        child(path, "items.type"),
                        "Invalid value: must be object for the items of a list with x-kubernetes-list-type=map",
                    ));
                }
                if n.list_map_keys.is_empty() {
                    self.push(required(
                        &child(path, "x-kubernetes-list-map-keys"),
                        "must not be empty if x-kubernetes-list-type is map",
                    ));
                }
                let mut seen = HashSet::new();
                for (i, k) in n.list_map_keys.iter().enumerate() {
                    let kp = child(path, &format!("x-kubernetes-list-map-keys[{i}]"));
                    if !seen.insert(k) {
                        self.push(Cause::new(
                            DUPLICATE,
                            kp,
                            format!("Duplicate value: {}", quote(k)),
                        ));
                        continue;
                    }
                    match items.property(k) {
                        None if items.preserve_unknown => {}
                        None => self.push(Cause::invalid(
                            kp,
                            format!(
                                "Invalid value: {}: must be a property of the items schema",
                                quote(k)
                            ),
                        )),
                        Some(p) => {
                            if matches!(p.ty, Some(Type::Object | Type::Array)) {
                                self.push(Cause::invalid(
                                    kp.clone(),
                                    format!("Invalid value: {}: map keys must be scalar-typed properties", quote(k)),
                                ));
                            }
                            if !items.required.iter().any(|r| r == k) && p.default.is_none() {
                                self.push(required(
                                    &kp,
                                    "a map key must be required in the items schema or have a default",
                                ));
                            }
                        }
                    }
                }
            }
        }
    }

    /// At the root, `metadata` is ObjectMeta: a schema may only restrict
    /// `name` and `generateName` there.
    fn root_metadata(&mut self, m: &Map<String, Value>, path: &str) {
        let Some(meta) = m
            .get("properties")
            .and_then(|p| p.get("metadata"))
            .and_then(Value::as_object)
        else {
            return;
        };
        let mp = child(path, "properties[metadata]");
        if let Some(t) = meta.get("type").filter(|t| t.as_str() != Some("object")) {
            self.push(Cause::invalid(
                child(&mp, "type"),
                format!("Invalid value: {}: must be object", preview(t)),
            ));
        }
        for kw in [
            "default",
            "additionalProperties",
            "x-kubernetes-preserve-unknown-fields",
            "x-kubernetes-embedded-resource",
            "nullable",
        ] {
            if meta.contains_key(kw) {
                self.push(forbidden(
                    &child(&mp, kw),
                    "must not be set: metadata at the root is ObjectMeta",
                ));
            }
        }
        if let Some(Value::Object(props)) = meta.get("properties") {
            for (k, pv) in props {
                let pp = child(&mp, &format!("properties[{k}]"));
                if k != "name" && k != "generateName" {
                    self.push(forbidden(
                        &pp,
                        "only name and generateName may be restricted in metadata at the root",
                    ));
                } else if let Some(t) = pv.get("type").filter(|t| t.as_str() != Some("string")) {
                    self.push(Cause::invalid(
                        child(&pp, "type"),
                        format!("Invalid value: {}: must be string", preview(t)),
                    ));
                }
            }
        }
    }

    /// The junctors only validate, so every field they speak of must also be
    /// specified in the structural part — otherwise it would be pruned before
    /// it could be checked.
    fn corresponds(&mut self, j: &Value, outer: &Map<String, Value>, path: &str, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let Some(jm) = j.as_object() else {
            return;
        };
        // Where unknown fields are kept, a junctor may check fields the
        // structural part does not list.
        let preserves = outer.get("x-kubernetes-preserve-unknown-fields")
            == Some(&Value::Bool(true))
            || outer.get("additionalProperties") == Some(&Value::Bool(true));
        if let Some(Value::Object(props)) = jm.get("properties") {
            for (k, jp) in props {
                let pp = child(path, &format!("properties[{k}]"));
                let outer_prop = outer
                    .get("properties")
                    .and_then(|p| p.get(k))
                    .and_then(Value::as_object)
                    .or_else(|| outer.get("additionalProperties").and_then(Value::as_object));
                match outer_prop {
                    Some(op) => self.corresponds(jp, op, &pp, depth + 1),
                    None if preserves => {}
                    None => self.push(forbidden(
                        &pp,
                        "must also be specified outside allOf, anyOf, oneOf and not; those only validate",
                    )),
                }
            }
        }
        if let Some(ji) = jm.get("items") {
            let ip = child(path, "items");
            match outer.get("items").and_then(Value::as_object) {
                Some(oi) => self.corresponds(ji, oi, &ip, depth + 1),
                None if preserves => {}
                None => self.push(forbidden(
                    &ip,
                    "must also be specified outside allOf, anyOf, oneOf and not; those only validate",
                )),
            }
        }
        for kw in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(list)) = jm.get(kw) {
                for (i, sub) in list.iter().enumerate() {
                    self.corresponds(sub, outer, &child(path, &format!("{kw}[{i}]")), depth + 1);
                }
            }
        }
        if let Some(sub) = jm.get("not") {
            self.corresponds(sub, outer, &child(path, "not"), depth + 1);
        }
    }

    /// Every default must survive pruning unchanged and validate under its
    /// own schema, after its own nested defaults are applied — it is what
    /// objects will be given.
    pub(super) fn check_defaults(&mut self, n: &Node, path: &str, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if let Some(d) = &n.default {
            let dp = child(path, "default");
            if d.is_null() {
                if !n.nullable {
                    self.push(Cause::invalid(
                        dp,
                        "Invalid value: null: must not be null, as the field is not nullable",
                    ));
                }
            } else {
                let mut d = d.clone();
                n.apply_defaults(&mut d, false);
                let mut pruned = Vec::new();
                prune_value(Some(n), &mut d, &Path::start(""), false, &mut pruned);
                if !pruned.is_empty() {
                    self.push(Cause::invalid(
                        dp.clone(),
                        format!(
                            "Invalid value: must not have fields unknown to the schema: {}",
                            pruned.join(", ")
                        ),
                    ));
                }
                n.validate(&d, &Path::start(&dp), &mut self.causes);
            }
        }
        for (k, p) in &n.properties {
            self.check_defaults(p, &child(path, &format!("properties[{k}]")), depth + 1);
        }
        if let Additional::Schema(a) = &n.additional {
            self.check_defaults(a, &child(path, "additionalProperties"), depth + 1);
        }
        if let Some(items) = &n.items {
            self.check_defaults(items, &child(path, "items"), depth + 1);
        }
    }
}

pub(super) fn child(path: &str, seg: &str) -> String {
    if path.is_empty() {
        seg.to_owned()
    } else {
        format!("{path}.{seg}")
    }
}

fn forbidden(field: &str, why: &str) -> Cause {
    Cause::new(FORBIDDEN, field, format!("Forbidden: {why}"))
}

pub(super) fn required(field: &str, why: &str) -> Cause {
    Cause::new(REQUIRED, field, format!("Required value: {why}"))
}

fn wrong_keyword_type(field: &str, v: &Value, expected: &str) -> Cause {
    Cause::new(
        TYPE_INVALID,
        field,
        format!("Invalid value: {}: must be {expected}", preview(v)),
    )
}

fn not_supported_str(field: &str, v: &str, allowed: &[&str]) -> Cause {
    let list = allowed
        .iter()
        .map(|a| quote(a))
        .collect::<Vec<_>>()
        .join(", ");
    Cause::new(
        NOT_SUPPORTED,
        field,
        format!("Unsupported value: {}: supported values: {list}", quote(v)),
    )
}

/// Compiles a `pattern`. Kubernetes evaluates patterns with Go's RE2, whose
/// Perl classes are ASCII-only and whose character classes take `[`, `&&`
/// and `~~` literally; the pattern is rewritten so the Rust engine gives the
/// same answers.
pub(super) fn compile_pattern(p: &str) -> Result<Regex, String> {
    RegexBuilder::new(&translate_go_regex(p))
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            let text = e.to_string();
            text.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid")
                .trim()
                .trim_start_matches("error: ")
                .to_owned()
        })
}

fn translate_go_regex(p: &str) -> String {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 8);
    let mut i = 0;
    let mut in_class = false;
    while let Some(&c) = chars.get(i) {
        i += 1;
        match c {
            '\\' => {
                let Some(&e) = chars.get(i) else {
                    out.push('\\');
                    break;
                };
                i += 1;
                match e {
                    'd' => out.push_str("[0-9]"),
                    'D' => out.push_str("[^0-9]"),
                    'w' => out.push_str("[0-9A-Za-z_]"),
                    'W' => out.push_str("[^0-9A-Za-z_]"),
                    's' => out.push_str(r"[\t\n\f\r ]"),
                    'S' => out.push_str(r"[^\t\n\f\r ]"),
                    'b' if !in_class => out.push_str(r"(?-u:\b)"),
                    'B' if !in_class => out.push_str(r"(?-u:\B)"),
                    _ => {
                        out.push('\\');
                        out.push(e);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                // A `]` first in a class is a literal in both dialects.
                if chars.get(i) == Some(&']') {
                    out.push_str(r"\]");
                    i += 1;
                }
            }
            '[' => {
                // Inside a class only `[:name:]` opens something in Go.
                let close = if chars.get(i) == Some(&':') {
                    (i + 1..chars.len().saturating_sub(1))
                        .find(|&j| chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&']'))
                } else {
                    None
                };
                match close {
                    Some(j) => {
                        out.push('[');
                        out.extend(chars.get(i..j + 2).unwrap_or_default());
                        i = j + 2;
                    }
                    None => out.push_str(r"\["),
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}
