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

use std::collections::HashMap;

use regex::Regex;
use serde_json::{Number, Value};

use crate::status::Cause;

mod compile;
mod format;
mod path;
mod prune;
#[cfg(test)]
mod tests;
mod validate;
mod values;

use compile::{Compiler, Ctx};
use format::Format;
use path::Path;
use prune::prune_value;
use values::*;

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

impl Node {
    /// The schema of property `k`, if the node names it.
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
