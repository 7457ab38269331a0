//! Structural schemas of CustomResourceDefinitions (the
//! `apiextensions.k8s.io/v1` `openAPIV3Schema`): checking that a schema is
//! structural enough to serve, compiling it, and applying it to custom
//! resources the way kube-apiserver does on every write — prune unknown
//! fields, apply defaults, then validate.
//!
//! A schema is compiled once into a tree of nodes with its regular
//! expressions built up front, so applying it only walks the object. Field
//! paths are rendered only when something is reported, which keeps the
//! common case (a valid object) free of string building.
//!
//! `allOf`, `anyOf`, `oneOf` and `not` only validate, as in Kubernetes:
//! pruning and defaulting look at the structural part of the schema alone.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Number, Value};

use crate::status::Cause;

const REQUIRED: &str = "FieldValueRequired";
const TYPE_INVALID: &str = "FieldValueTypeInvalid";
const NOT_SUPPORTED: &str = "FieldValueNotSupported";
const TOO_LONG: &str = "FieldValueTooLong";
const TOO_MANY: &str = "FieldValueTooMany";
const DUPLICATE: &str = "FieldValueDuplicate";
const FORBIDDEN: &str = "FieldValueForbidden";

/// Schemas come from users; a bound on nesting keeps a hostile schema from
/// exhausting the stack while compiling or walking it.
const MAX_DEPTH: usize = 128;

/// Lists up to this length are checked for duplicates pairwise, which is
/// cheaper than hashing canonical forms for the short lists most objects
/// have.
const PAIRWISE_LIMIT: usize = 16;

/// How many characters of a value a message quotes.
const PREVIEW_CHARS: usize = 64;

/// The compiled size bound of one `pattern`, so that one schema cannot make
/// the server allocate without limit.
const REGEX_SIZE_LIMIT: usize = 4 << 20;

/// The fields of `ObjectMeta`; the metadata of an embedded resource is pruned
/// to these, as decoding it into `ObjectMeta` would in Kubernetes.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// JSON Schema keywords a structural schema must not use: they either need a
/// resolver (`$ref`, `definitions`) or describe shapes pruning cannot follow.
const UNSUPPORTED_KEYWORDS: &[&str] = &[
    "definitions",
    "dependencies",
    "additionalItems",
    "patternProperties",
    "id",
    "$schema",
];

/// Keywords that shape pruning or defaulting and therefore mean nothing
/// inside the validation-only junctors.
const JUNCTOR_FORBIDDEN: &[&str] = &[
    "default",
    "additionalProperties",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
];

const TYPE_NAMES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// The `type` of a schema node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl Type {
    fn parse(s: &str) -> Option<Type> {
        Some(match s {
            "object" => Type::Object,
            "array" => Type::Array,
            "string" => Type::String,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "boolean" => Type::Boolean,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::Array => "array",
            Type::String => "string",
            Type::Integer => "integer",
            Type::Number => "number",
            Type::Boolean => "boolean",
        }
    }

    fn admits(self, v: &Value) -> bool {
        match self {
            Type::Object => v.is_object(),
            Type::Array => v.is_array(),
            Type::String => v.is_string(),
            Type::Integer => is_integer(v),
            Type::Number => v.is_number(),
            Type::Boolean => v.is_boolean(),
        }
    }
}

/// `x-kubernetes-list-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListType {
    Atomic,
    Set,
    Map,
}

/// `x-kubernetes-map-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapType {
    Granular,
    Atomic,
}

/// The formats that are checked; any other format is accepted unchecked, as
/// Kubernetes does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Int32,
    Int64,
    DateTime,
    Date,
    Byte,
    Uuid,
    Duration,
    Hostname,
    Ipv4,
    Ipv6,
    Cidr,
    Email,
    Mac,
    Other,
}

impl Format {
    fn parse(s: &str) -> Format {
        match s {
            "int32" => Format::Int32,
            "int64" => Format::Int64,
            "date-time" | "datetime" => Format::DateTime,
            "date" => Format::Date,
            "byte" => Format::Byte,
            "uuid" | "uuid3" | "uuid4" | "uuid5" => Format::Uuid,
            "duration" => Format::Duration,
            "hostname" => Format::Hostname,
            "ipv4" => Format::Ipv4,
            "ipv6" => Format::Ipv6,
            "cidr" => Format::Cidr,
            "email" => Format::Email,
            "mac" => Format::Mac,
            _ => Format::Other,
        }
    }

    /// Whether a string conforms. The integer formats constrain numbers, not
    /// strings, so any string passes them.
    fn admits_str(self, s: &str) -> bool {
        match self {
            Format::DateTime => is_date_time(s),
            Format::Date => is_date(s.as_bytes()),
            Format::Byte => is_base64(s),
            Format::Uuid => is_uuid(s),
            Format::Duration => is_duration(s),
            Format::Hostname => is_hostname(s),
            Format::Ipv4 => s.parse::<Ipv4Addr>().is_ok(),
            Format::Ipv6 => s.parse::<Ipv6Addr>().is_ok(),
            Format::Cidr => is_cidr(s),
            Format::Email => is_email(s),
            Format::Mac => is_mac(s),
            Format::Int32 | Format::Int64 | Format::Other => true,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Format::DateTime => "a date-time in RFC 3339 form, such as 2006-01-02T15:04:05Z",
            Format::Date => "a date in the form 2006-01-02",
            Format::Byte => "base64-encoded data",
            Format::Uuid => "a UUID",
            Format::Duration => "a duration such as 30s, 1h30m or 500ms",
            Format::Hostname => "an RFC 1123 hostname",
            Format::Ipv4 => "an IPv4 address",
            Format::Ipv6 => "an IPv6 address",
            Format::Cidr => "a CIDR such as 10.0.0.0/8",
            Format::Email => "an email address",
            Format::Mac => "a MAC address",
            Format::Int32 => "a 32-bit signed integer (format int32)",
            Format::Int64 => "a 64-bit signed integer (format int64)",
            Format::Other => "valid",
        }
    }
}

/// `additionalProperties`.
#[derive(Clone, Debug, Default)]
enum Additional {
    /// Not given (or `false`): fields not in `properties` are unknown.
    #[default]
    Unspecified,
    /// `true`: any further field is kept as it is.
    Any,
    /// A schema for the values of a map.
    Schema(Box<Node>),
}

#[derive(Clone, Debug)]
struct Bound {
    limit: Number,
    exclusive: bool,
}

#[derive(Clone, Debug)]
struct Pattern {
    /// As written in the schema, for messages.
    source: String,
    regex: Regex,
}

/// One compiled schema node.
#[derive(Clone, Debug, Default)]
struct Node {
    ty: Option<Type>,
    nullable: bool,
    int_or_string: bool,
    preserve_unknown: bool,
    embedded: bool,
    description: Option<String>,
    properties: Vec<(String, Node)>,
    /// Built only for nodes with many properties: a linear scan beats
    /// hashing for the handful most objects have.
    property_index: Option<HashMap<String, usize>>,
    additional: Additional,
    items: Option<Box<Node>>,
    required: Vec<String>,
    enum_values: Option<Vec<Value>>,
    pattern: Option<Pattern>,
    format: Option<Format>,
    minimum: Option<Bound>,
    maximum: Option<Bound>,
    multiple_of: Option<Number>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    unique_items: bool,
    list_type: Option<ListType>,
    list_map_keys: Vec<String>,
    map_type: Option<MapType>,
    default: Option<Value>,
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Box<Node>>,
}

/// A compiled `openAPIV3Schema` for one version of a CRD.
#[derive(Clone, Debug)]
pub struct Schema {
    root: Node,
    source: Value,
}

/// What [`Schema::process`] did to an object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Processed {
    /// Paths of the unknown fields that were dropped, such as `spec.foo` or
    /// `spec.items[0].bar`, for `fieldValidation=Strict|Warn`.
    pub pruned: Vec<String>,
    /// Why the object is invalid; empty when it is valid.
    pub causes: Vec<Cause>,
}

impl Schema {
    /// Compiles a schema. Only errors that make the schema unusable are
    /// reported (`$ref`, a bad `pattern`, a keyword of the wrong JSON type);
    /// [`validate_structural`] holds a new CRD to the stricter rules. Field
    /// paths of the errors are relative to the schema's root.
    pub fn from_json(schema: &Value) -> Result<Schema, Vec<Cause>> {
        let mut c = Compiler {
            causes: Vec::new(),
            strict: false,
        };
        let root = c.compile(schema, "", Ctx::Root, 0);
        if c.causes.is_empty() {
            Ok(Schema {
                root,
                source: schema.clone(),
            })
        } else {
            Err(c.causes)
        }
    }

    /// The schema as given, for publishing in OpenAPI.
    pub fn source(&self) -> &Value {
        &self.source
    }

    /// A read-only view of the compiled root, for callers that need the
    /// list and map semantics of fields (server-side apply, `explain`).
    pub fn root(&self) -> SchemaNode<'_> {
        SchemaNode(&self.root)
    }

    /// Drops the fields the schema does not know, and returns their paths.
    /// The object is taken to be a custom resource: `apiVersion`, `kind` and
    /// `metadata` at its root are always kept, and `metadata` is left alone.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        prune_value(Some(&self.root), obj, &Path::start(""), true, &mut pruned);
        pruned
    }

    /// Fills in defaults for missing fields, at every depth. A `null` in a
    /// field that is not nullable is dropped first, and so replaced by the
    /// field's default when it has one.
    pub fn apply_defaults(&self, obj: &mut Value) {
        self.root.apply_defaults(obj, true);
    }

    /// Checks an object against the schema. `path_prefix` is prepended to
    /// the field paths of the causes; it is empty for a whole resource.
    pub fn validate(&self, obj: &Value, path_prefix: &str) -> Vec<Cause> {
        let mut causes = Vec::new();
        self.root
            .validate(obj, &Path::start(path_prefix), &mut causes);
        causes
    }

    /// Prune, default, validate: what the API server does to a custom
    /// resource on create and update, in that order. The pruned paths are
    /// relative to the object, whatever the prefix.
    pub fn process(&self, obj: &mut Value, path_prefix: &str) -> Processed {
        let pruned = self.prune(obj);
        self.apply_defaults(obj);
        let causes = self.validate(obj, path_prefix);
        Processed { pruned, causes }
    }
}

/// Checks that a schema may be accepted for a CRD: everything
/// [`Schema::from_json`] checks, plus the structural rules of Kubernetes —
/// every node outside the junctors has a type unless it is int-or-string or
/// preserves unknown fields, arrays have `items`, the junctors only
/// validate fields that are also specified structurally, the `x-kubernetes-`
/// extensions are consistent, and every `default` is valid under its own
/// schema and has no unknown fields.
///
/// `path_prefix` names the schema in the CRD, such as
/// `spec.versions[0].schema.openAPIV3Schema`.
pub fn validate_structural(schema: &Value, path_prefix: &str) -> Vec<Cause> {
    let mut c = Compiler {
        causes: Vec::new(),
        strict: true,
    };
    let root = c.compile(schema, path_prefix, Ctx::Root, 0);
    c.check_defaults(&root, path_prefix, 0);
    c.causes
}

/// A read-only view of one compiled node.
#[derive(Clone, Copy, Debug)]
pub struct SchemaNode<'a>(&'a Node);

impl<'a> SchemaNode<'a> {
    pub fn ty(&self) -> Option<Type> {
        self.0.ty
    }
    pub fn nullable(&self) -> bool {
        self.0.nullable
    }
    pub fn preserves_unknown_fields(&self) -> bool {
        self.0.preserve_unknown
    }
    pub fn is_int_or_string(&self) -> bool {
        self.0.int_or_string
    }
    pub fn is_embedded_resource(&self) -> bool {
        self.0.embedded
    }
    pub fn description(&self) -> Option<&'a str> {
        self.0.description.as_deref()
    }
    pub fn default_value(&self) -> Option<&'a Value> {
        self.0.default.as_ref()
    }
    pub fn property(&self, name: &str) -> Option<SchemaNode<'a>> {
        self.0.property(name).map(SchemaNode)
    }
    /// The property names, in schema order.
    pub fn property_names(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.0.properties.iter().map(|(k, _)| k.as_str())
    }
    pub fn items(&self) -> Option<SchemaNode<'a>> {
        self.0.items.as_deref().map(SchemaNode)
    }
    /// The schema of map values, when `additionalProperties` is a schema.
    pub fn additional_properties(&self) -> Option<SchemaNode<'a>> {
        match &self.0.additional {
            Additional::Schema(s) => Some(SchemaNode(s)),
            _ => None,
        }
    }
    pub fn list_type(&self) -> Option<ListType> {
        self.0.list_type
    }
    pub fn list_map_keys(&self) -> &'a [String] {
        &self.0.list_map_keys
    }
    pub fn map_type(&self) -> Option<MapType> {
        self.0.map_type
    }
}

// ---------------------------------------------------------------------------
// Compiling

/// Where a node sits, for the rules that depend on it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Root,
    /// Under `properties`, `items` or `additionalProperties`.
    Field,
    /// Inside `allOf`, `anyOf`, `oneOf` or `not`, at any depth.
    Junctor,
}

struct Compiler {
    causes: Vec<Cause>,
    /// Also apply the structural rules, for admitting a new CRD.
    strict: bool,
}

impl Compiler {
    fn push(&mut self, c: Cause) {
        self.causes.push(c);
    }

    fn compile(&mut self, v: &Value, path: &str, ctx: Ctx, depth: usize) -> Node {
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

    fn junctors(
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

    fn number(&mut self, m: &Map<String, Value>, key: &str, path: &str) -> Option<Number> {
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
    fn exclusive(
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

    fn count(&mut self, m: &Map<String, Value>, key: &str, path: &str) -> Option<u64> {
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

    fn strings(&mut self, m: &Map<String, Value>, key: &str, path: &str) -> Vec<String> {
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
    fn structural(&mut self, n: &Node, m: &Map<String, Value>, path: &str, ctx: Ctx) {
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
    fn check_defaults(&mut self, n: &Node, path: &str, depth: usize) {
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

fn child(path: &str, seg: &str) -> String {
    if path.is_empty() {
        seg.to_owned()
    } else {
        format!("{path}.{seg}")
    }
}

fn forbidden(field: &str, why: &str) -> Cause {
    Cause::new(FORBIDDEN, field, format!("Forbidden: {why}"))
}

fn required(field: &str, why: &str) -> Cause {
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
fn compile_pattern(p: &str) -> Result<Regex, String> {
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

// ---------------------------------------------------------------------------
// Paths

#[derive(Clone, Copy)]
enum Seg<'a> {
    Start(&'a str),
    Field(&'a str),
    /// A key of a map (`additionalProperties`).
    Key(&'a str),
    Index(usize),
}

/// A field path kept as a chain of borrowed segments on the stack, rendered
/// only when a cause or a pruned field needs it.
#[derive(Clone, Copy)]
struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    seg: Seg<'a>,
}

impl<'a> Path<'a> {
    fn start(prefix: &'a str) -> Path<'a> {
        Path {
            parent: None,
            seg: Seg::Start(prefix),
        }
    }
    fn field<'b>(&'b self, name: &'b str) -> Path<'b> {
        Path {
            parent: Some(self),
            seg: Seg::Field(name),
        }
    }
    fn key<'b>(&'b self, name: &'b str) -> Path<'b> {
        Path {
            parent: Some(self),
            seg: Seg::Key(name),
        }
    }
    fn index(&self, i: usize) -> Path<'_> {
        Path {
            parent: Some(self),
            seg: Seg::Index(i),
        }
    }

    /// Validation style: `spec.labels[app]`, `spec.containers[0].name`.
    fn render(&self) -> String {
        let mut s = String::new();
        self.write(&mut s, false);
        s
    }

    /// Pruning style, as kube-apiserver reports unknown fields: map keys are
    /// joined with dots like any other field.
    fn render_dotted(&self) -> String {
        let mut s = String::new();
        self.write(&mut s, true);
        s
    }

    fn write(&self, out: &mut String, dotted: bool) {
        if let Some(p) = self.parent {
            p.write(out, dotted);
        }
        match self.seg {
            Seg::Start(p) => out.push_str(p),
            Seg::Field(f) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(f);
            }
            Seg::Key(k) if dotted => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Key(k) => {
                out.push('[');
                out.push_str(k);
                out.push(']');
            }
            Seg::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Pruning

/// Prunes `v` under `node`; `None` means no schema at all, under which every
/// field of an object is unknown.
fn prune_value(
    node: Option<&Node>,
    v: &mut Value,
    path: &Path,
    resource_root: bool,
    out: &mut Vec<String>,
) {
    let Some(node) = node else {
        prune_everything(v, path, out);
        return;
    };
    match v {
        Value::Object(map) => map.retain(|k, child| {
            let cp = path.field(k);
            if resource_root || node.embedded {
                match k.as_str() {
                    "apiVersion" | "kind" => return true,
                    // The API server owns the metadata of the resource itself.
                    "metadata" if resource_root => return true,
                    "metadata" => {
                        prune_object_meta(child, &cp, out);
                        return true;
                    }
                    _ => {}
                }
            }
            if let Some(p) = node.property(k) {
                prune_value(Some(p), child, &cp, false, out);
                return true;
            }
            match &node.additional {
                Additional::Schema(a) => {
                    prune_value(Some(a), child, &path.key(k), false, out);
                    true
                }
                Additional::Any => true,
                Additional::Unspecified if node.preserve_unknown => true,
                Additional::Unspecified => {
                    out.push(cp.render_dotted());
                    false
                }
            }
        }),
        Value::Array(items) => {
            if node.items.is_none() && node.preserve_unknown {
                return;
            }
            for (i, item) in items.iter_mut().enumerate() {
                prune_value(node.items.as_deref(), item, &path.index(i), false, out);
            }
        }
        _ => {}
    }
}

fn prune_everything(v: &mut Value, path: &Path, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for k in map.keys() {
                out.push(path.field(k).render_dotted());
            }
            map.clear();
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                prune_everything(item, &path.index(i), out);
            }
        }
        _ => {}
    }
}

fn prune_object_meta(v: &mut Value, path: &Path, out: &mut Vec<String>) {
    if let Value::Object(map) = v {
        map.retain(|k, _| {
            let keep = OBJECT_META_FIELDS.contains(&k.as_str());
            if !keep {
                out.push(path.field(k).render_dotted());
            }
            keep
        });
    }
}

// ---------------------------------------------------------------------------
// Defaulting and validation

impl Node {
    fn property(&self, k: &str) -> Option<&Node> {
        match &self.property_index {
            Some(ix) => ix
                .get(k)
                .and_then(|&i| self.properties.get(i))
                .map(|(_, n)| n),
            None => self
                .properties
                .iter()
                .find(|(name, _)| name == k)
                .map(|(_, n)| n),
        }
    }

    fn apply_defaults(&self, v: &mut Value, resource_root: bool) {
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

    fn validate(&self, v: &Value, path: &Path, out: &mut Vec<Cause>) {
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

// ---------------------------------------------------------------------------
// Values

fn is_integer(v: &Value) -> bool {
    // `1.0` is a float to the JSON decoder, and Kubernetes rejects it where an
    // integer is required; so do we.
    matches!(v, Value::Number(n) if n.is_i64() || n.is_u64())
}

fn int_of(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Compares exactly when both are integers, as floats otherwise.
fn num_cmp(a: &Number, b: &Number) -> Option<Ordering> {
    match (int_of(a), int_of(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

fn is_multiple(n: &Number, m: &Number) -> bool {
    if let (Some(x), Some(d)) = (int_of(n), int_of(m)) {
        return d <= 0 || x % d == 0;
    }
    match (n.as_f64(), m.as_f64()) {
        (Some(x), Some(d)) if d > 0.0 => {
            let q = x / d;
            (q - q.round()).abs() <= 1e-9 * q.abs().max(1.0)
        }
        _ => true,
    }
}

/// Equality where numbers compare by value, so an enum of `1` admits `1.0`.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_cmp(x, y) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k.as_str()).is_some_and(|q| json_eq(p, q)))
        }
        _ => a == b,
    }
}

/// A form equal for exactly the values [`json_eq`] calls equal: keys sorted,
/// numbers normalised, strings length-prefixed so no two values collide.
fn canonical(v: &Value, out: &mut String, depth: usize) {
    if depth > MAX_DEPTH {
        // Deeper than any parsed document goes; compare the rest verbatim.
        out.push_str(&v.to_string());
        return;
    }
    match v {
        Value::Null => out.push('n'),
        Value::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Value::Number(n) => {
            out.push('#');
            match (int_of(n), n.as_f64()) {
                (Some(i), _) => {
                    let _ = write!(out, "{i}");
                }
                (None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e18 => {
                    let _ = write!(out, "{}", f as i64);
                }
                (None, Some(f)) => {
                    let _ = write!(out, "{f:?}");
                }
                (None, None) => out.push_str(&n.to_string()),
            }
        }
        Value::String(s) => {
            let _ = write!(out, "\"{}:", s.len());
            out.push_str(s);
        }
        Value::Array(a) => {
            out.push('[');
            for x in a {
                canonical(x, out, depth + 1);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                let _ = write!(out, "{}:", k.len());
                out.push_str(k);
                if let Some(x) = m.get(k.as_str()) {
                    canonical(x, out, depth + 1);
                }
                out.push(',');
            }
            out.push('}');
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if is_integer(v) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn expected_type(n: &Node) -> &'static str {
    if n.int_or_string {
        "integer or string"
    } else {
        n.ty.map_or("any", Type::as_str)
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {}", quote(s)),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// A value as messages show it after `Invalid value:`.
fn preview(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Array(_) => "\"array\"".to_owned(),
        Value::Object(_) => "\"object\"".to_owned(),
        other => other.to_string(),
    }
}

/// A string in JSON quotes, cut short if long.
fn quote(s: &str) -> String {
    match s.char_indices().nth(PREVIEW_CHARS) {
        Some((cut, _)) => {
            let mut q = Value::String(s.get(..cut).unwrap_or_default().to_owned()).to_string();
            q.insert_str(q.len().saturating_sub(1), "...");
            q
        }
        None => Value::String(s.to_owned()).to_string(),
    }
}

/// Compact JSON, cut short if long.
fn compact(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(PREVIEW_CHARS * 2) {
        Some((cut, _)) => format!("{}...", s.get(..cut).unwrap_or_default()),
        None => s,
    }
}

// ---------------------------------------------------------------------------
// Formats

fn number_of(b: &[u8]) -> Option<u32> {
    if b.is_empty() || b.len() > 9 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        _ => 0,
    }
}

/// `YYYY-MM-DD`, a real calendar day.
fn is_date(b: &[u8]) -> bool {
    if b.len() != 10 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (
        b.get(0..4).and_then(number_of),
        b.get(5..7).and_then(number_of),
        b.get(8..10).and_then(number_of),
    ) else {
        return false;
    };
    (1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m)
}

/// `HH:MM:SS` with a leap second allowed.
fn is_time(b: &[u8]) -> bool {
    if b.len() != 8 || b.get(2) != Some(&b':') || b.get(5) != Some(&b':') {
        return false;
    }
    matches!(
        (
            b.get(0..2).and_then(number_of),
            b.get(3..5).and_then(number_of),
            b.get(6..8).and_then(number_of),
        ),
        (Some(h), Some(m), Some(s)) if h < 24 && m < 60 && s <= 60
    )
}

/// RFC 3339 date-time. Like Kubernetes (go-openapi strfmt) the zone may be
/// left out, meaning local time.
fn is_date_time(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 19
        || !b.get(0..10).is_some_and(is_date)
        || !matches!(b.get(10), Some(b'T' | b't'))
        || !b.get(11..19).is_some_and(is_time)
    {
        return false;
    }
    let mut rest = b.get(19..).unwrap_or_default();
    if let Some(frac) = rest.strip_prefix(b".") {
        let digits = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        rest = frac.get(digits..).unwrap_or_default();
    }
    match rest {
        [] | [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => matches!(
            (number_of(&[*h1, *h2]), number_of(&[*m1, *m2])),
            (Some(h), Some(m)) if h < 24 && m < 60
        ),
        _ => false,
    }
}

/// Standard base64 with padding, as Go's `base64.StdEncoding` decodes it
/// (which skips line breaks).
fn is_base64(s: &str) -> bool {
    let body: Vec<u8> = s.bytes().filter(|b| *b != b'\n' && *b != b'\r').collect();
    if !body.len().is_multiple_of(4) {
        return false;
    }
    let pad = body.iter().rev().take_while(|b| **b == b'=').count();
    if pad > 2 {
        return false;
    }
    body.iter()
        .take(body.len() - pad)
        .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
}

/// Hyphenated or plain hexadecimal UUIDs, either case.
fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    match b.len() {
        32 => b.iter().all(u8::is_ascii_hexdigit),
        36 => b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        }),
        _ => false,
    }
}

/// Go's `time.ParseDuration` syntax (`300ms`, `-1.5h`, `2h45m`), plus days
/// and weeks, which Kubernetes' duration format also takes.
fn is_duration(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut rest = s;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest = rest.get(int_len..).unwrap_or_default();
        let mut frac_len = 0;
        if let Some(after) = rest.strip_prefix('.') {
            frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
            rest = after.get(frac_len..).unwrap_or_default();
        }
        if int_len + frac_len == 0 {
            return false;
        }
        let unit_len: usize = rest
            .chars()
            .take_while(|c| !c.is_ascii_digit() && *c != '.')
            .map(char::len_utf8)
            .sum();
        let unit = rest.get(..unit_len).unwrap_or_default();
        if !matches!(
            unit,
            "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h" | "d" | "w"
        ) {
            return false;
        }
        rest = rest.get(unit_len..).unwrap_or_default();
    }
    true
}

/// RFC 1123 hostnames; letters beyond ASCII are allowed, as Kubernetes'
/// (internationalised) hostname format allows them.
fn is_hostname(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    if s.is_empty() || s.len() > 253 {
        return false;
    }
    s.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_alphanumeric() || c == '-')
    })
}

fn is_cidr(s: &str) -> bool {
    let Some((addr, bits)) = s.split_once('/') else {
        return false;
    };
    let max = match addr.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => 32,
        Ok(IpAddr::V6(_)) => 128,
        Err(_) => return false,
    };
    bits.len() <= 3 && number_of(bits.as_bytes()).is_some_and(|b| b <= max)
}

/// `local@domain`, optionally as `Name <local@domain>`.
fn is_email(s: &str) -> bool {
    let addr = match (s.rfind('<'), s.strip_suffix('>')) {
        (Some(open), Some(inner)) => inner.get(open + 1..).unwrap_or_default(),
        _ => s,
    };
    let Some((local, domain)) = addr.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && local.len() <= 64
        && !local.contains(|c: char| c.is_whitespace() || c == '<' || c == '>')
        && is_hostname(domain)
}

/// IEEE 802 MAC-48, EUI-64 or 20-octet InfiniBand addresses, with `:` or `-`.
fn is_mac(s: &str) -> bool {
    let sep = if s.contains('-') { '-' } else { ':' };
    let groups: Vec<&str> = s.split(sep).collect();
    matches!(groups.len(), 6 | 8 | 20)
        && groups
            .iter()
            .all(|g| g.len() == 2 && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_accept_and_reject() {
        let cases: &[(Format, &str, bool)] = &[
            (Format::DateTime, "2024-02-29T12:00:00Z", true),
            (Format::DateTime, "2024-02-29T12:00:00.123456+02:00", true),
            (Format::DateTime, "2024-02-29t12:00:00z", true),
            (Format::DateTime, "2024-02-29T12:00:00", true),
            (Format::DateTime, "2023-02-29T12:00:00Z", false),
            (Format::DateTime, "2024-01-01 12:00:00Z", false),
            (Format::DateTime, "2024-01-01T24:00:00Z", false),
            (Format::DateTime, "2024-01-01T12:00:00.Z", false),
            (Format::DateTime, "2024-01-01T12:00:00+0200", false),
            (Format::DateTime, "yesterday", false),
            (Format::Date, "2000-02-29", true),
            (Format::Date, "1900-02-29", false),
            (Format::Date, "2024-13-01", false),
            (Format::Date, "2024-1-01", false),
            (Format::Byte, "", true),
            (Format::Byte, "aGVsbG8=", true),
            (Format::Byte, "aGVs\nbG8=", true),
            (Format::Byte, "aGVsbG8", false),
            (Format::Byte, "aGV=bG8=", false),
            (Format::Byte, "a===", false),
            (Format::Uuid, "123e4567-e89b-12d3-a456-426614174000", true),
            (Format::Uuid, "123E4567E89B12D3A456426614174000", true),
            (Format::Uuid, "123e4567-e89b-12d3-a456-42661417400", false),
            (Format::Uuid, "123e4567-e89b-12d3-a456_426614174000", false),
            (Format::Duration, "10s", true),
            (Format::Duration, "1h30m", true),
            (Format::Duration, "-1.5h", true),
            (Format::Duration, "300ms", true),
            (Format::Duration, "2µs", true),
            (Format::Duration, "0", true),
            (Format::Duration, "3d", true),
            (Format::Duration, "", false),
            (Format::Duration, "10", false),
            (Format::Duration, "s", false),
            (Format::Duration, "10 s", false),
            (Format::Duration, "1x", false),
            (Format::Duration, ".s", false),
            (Format::Hostname, "example.com", true),
            (Format::Hostname, "a-b.c", true),
            (Format::Hostname, "-ab.c", false),
            (Format::Hostname, "a..b", false),
            (Format::Hostname, "a_b.com", false),
            (Format::Ipv4, "10.0.0.1", true),
            (Format::Ipv4, "10.0.0.256", false),
            (Format::Ipv4, "::1", false),
            (Format::Ipv6, "::1", true),
            (Format::Ipv6, "fe80::1:2", true),
            (Format::Ipv6, "10.0.0.1", false),
            (Format::Cidr, "10.0.0.0/8", true),
            (Format::Cidr, "fd00::/64", true),
            (Format::Cidr, "10.0.0.0/33", false),
            (Format::Cidr, "10.0.0.0", false),
            (Format::Cidr, "10.0.0.0/", false),
            (Format::Email, "a@example.com", true),
            (Format::Email, "Alice <alice@example.com>", true),
            (Format::Email, "a@", false),
            (Format::Email, "@example.com", false),
            (Format::Email, "a b@example.com", false),
            (Format::Mac, "00:1a:2B:3c:4d:5e", true),
            (Format::Mac, "00-1a-2b-3c-4d-5e", true),
            (Format::Mac, "00:1a:2b:3c:4d", false),
            (Format::Other, "anything", true),
        ];
        for (f, s, ok) in cases {
            assert_eq!(f.admits_str(s), *ok, "{f:?} {s:?}");
        }
    }

    #[test]
    fn go_regex_classes_are_ascii_and_literal() {
        let re = compile_pattern(r"^\d+$").unwrap();
        assert!(re.is_match("123"));
        assert!(!re.is_match("١٢٣"), "Arabic-Indic digits are not \\d in Go");
        let re = compile_pattern(r"^[\w.-]+$").unwrap();
        assert!(re.is_match("a_b.c-d"));
        assert!(!re.is_match("é"));
        let re = compile_pattern(r"^[a[]+$").unwrap();
        assert!(re.is_match("a[a"));
        let re = compile_pattern(r"^[a&&b]+$").unwrap();
        assert!(re.is_match("a&b"));
        let re = compile_pattern(r"^[[:digit:]x]+$").unwrap();
        assert!(re.is_match("1x2"));
        let re = compile_pattern(r"^[]a]+$").unwrap();
        assert!(re.is_match("]a"));
        let re = compile_pattern(r"\bfoo\b").unwrap();
        assert!(re.is_match("a foo b"));
        let re = compile_pattern(r"^\s\S$").unwrap();
        assert!(re.is_match(" x"));
        assert!(compile_pattern("(").is_err());
        assert!(compile_pattern("\\").is_err());
        assert!(compile_pattern("[[:").is_err());
    }

    #[test]
    fn canonical_forms_agree_with_equality() {
        let vals = [
            serde_json::json!(1),
            serde_json::json!(1.0),
            serde_json::json!(-1),
            serde_json::json!(u64::MAX),
            serde_json::json!(0.5),
            serde_json::json!("1"),
            serde_json::json!({"a": 1, "b": [1, "x"]}),
            serde_json::json!({"b": [1.0, "x"], "a": 1}),
            serde_json::json!(["a:", "b"]),
            serde_json::json!(["a", ":b"]),
            serde_json::json!(null),
            serde_json::json!(false),
        ];
        for a in &vals {
            for b in &vals {
                let (mut ka, mut kb) = (String::new(), String::new());
                canonical(a, &mut ka, 0);
                canonical(b, &mut kb, 0);
                assert_eq!(json_eq(a, b), ka == kb, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn quotes_are_cut_on_character_boundaries() {
        let long = "é".repeat(100);
        let q = quote(&long);
        assert!(q.ends_with("...\""));
        assert_eq!(q.chars().filter(|c| *c == 'é').count(), PREVIEW_CHARS);
    }
}
