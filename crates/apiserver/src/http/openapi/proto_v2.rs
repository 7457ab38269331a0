//! `/openapi/v2` in protobuf: the Swagger 2.0 document encoded as gnostic's
//! `openapi.v2.Document` (github.com/google/gnostic, `OpenAPIv2.proto`).
//!
//! client-go asks for the v2 document only in this form (no JSON fallback),
//! and kubectl needs it whenever it validates on the client: `kubectl
//! create -f` of a `kind: List` file validates each item against it. kube
//! produces it by parsing the JSON document with gnostic's compiler and
//! marshalling the result, so this encoder follows the same mapping: each
//! JSON object becomes its message with fields in field-number order, maps
//! become repeated `Named*` pairs in document order, `x-` keys become
//! `vendor_extension` entries, oneofs are chosen as gnostic chooses them
//! (`$ref` → `JsonReference`, `in: body` → `BodyParameter`, …), and free-form
//! values (`default`, `enum`, `example`, extensions) are `Any` messages
//! carrying the value as YAML, which is how kubectl reads them back.
//!
//! Proto3 rules apply: scalars equal to their default are left out,
//! sub-messages are written whenever the JSON has the key, and oneof members
//! always. Keys gnostic does not know are skipped.

use serde_json::{Map, Value};

/// An encoded message under construction.
#[derive(Default)]
struct Msg(Vec<u8>);

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u64, wire: u64) {
        self.varint(field << 3 | wire);
    }

    fn bytes(&mut self, field: u64, b: &[u8]) {
        self.key(field, LEN);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn msg(&mut self, field: u64, m: Msg) {
        self.bytes(field, &m.0);
    }

    /// A proto3 string: left out when empty.
    fn string(&mut self, field: u64, v: Option<&Value>) {
        if let Some(s) = v.and_then(Value::as_str)
            && !s.is_empty()
        {
            self.bytes(field, s.as_bytes());
        }
    }

    /// A repeated string from a JSON list (non-strings skipped).
    fn strings(&mut self, field: u64, v: Option<&Value>) {
        for s in v.and_then(Value::as_array).into_iter().flatten() {
            if let Some(s) = s.as_str() {
                self.bytes(field, s.as_bytes());
            }
        }
    }

    fn bool(&mut self, field: u64, v: Option<&Value>) {
        if v.and_then(Value::as_bool) == Some(true) {
            self.key(field, VARINT);
            self.varint(1);
        }
    }

    fn int64(&mut self, field: u64, v: Option<&Value>) {
        if let Some(n) = v.and_then(Value::as_i64)
            && n != 0
        {
            self.key(field, VARINT);
            // Negative int64s are ten-byte two's complement varints.
            self.varint(n as u64);
        }
    }

    fn double(&mut self, field: u64, v: Option<&Value>) {
        if let Some(f) = v.and_then(Value::as_f64)
            && f != 0.0
        {
            self.key(field, FIXED64);
            self.0.extend_from_slice(&f.to_le_bytes());
        }
    }

    /// A sub-message built from the object at `v`, when there is one.
    fn object(&mut self, field: u64, v: Option<&Value>, f: impl Fn(&Map<String, Value>) -> Msg) {
        if let Some(o) = v.and_then(Value::as_object) {
            self.msg(field, f(o));
        }
    }

    /// Repeated sub-messages, one per object of the list at `v`.
    fn objects(&mut self, field: u64, v: Option<&Value>, f: impl Fn(&Map<String, Value>) -> Msg) {
        for o in v
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
        {
            self.msg(field, f(o));
        }
    }

    /// A map as repeated `Named*` pairs (`name` = 1, `value` = 2), skipping
    /// `x-` keys, which are vendor extensions wherever a map allows them.
    fn named(&mut self, field: u64, v: Option<&Value>, f: impl Fn(&Value) -> Msg) {
        for (k, x) in v.and_then(Value::as_object).into_iter().flatten() {
            if k.starts_with("x-") {
                continue;
            }
            let mut pair = Msg::default();
            pair.bytes(1, k.as_bytes());
            pair.msg(2, f(x));
            self.msg(field, pair);
        }
    }

    /// A map as a sub-message at `field` holding its `Named*` pairs at 1
    /// (gnostic's `Definitions`, `Headers`, …), when `v` is an object.
    fn named_msg(&mut self, field: u64, v: Option<&Value>, f: impl Fn(&Value) -> Msg) {
        if v.is_some_and(Value::is_object) {
            let mut x = Msg::default();
            x.named(1, v, f);
            self.msg(field, x);
        }
    }

    /// `x-` keys of `o` as repeated `NamedAny`.
    fn vendor(&mut self, field: u64, o: &Map<String, Value>) {
        for (k, v) in o {
            if k.starts_with("x-") {
                let mut pair = Msg::default();
                pair.bytes(1, k.as_bytes());
                pair.msg(2, any(v));
                self.msg(field, pair);
            }
        }
    }
}

/// gnostic's `Any`: the value as YAML in field 2.
fn any(v: &Value) -> Msg {
    let mut m = Msg::default();
    let yaml = serde_yaml::to_string(v).unwrap_or_default();
    m.string(2, Some(&Value::String(yaml)));
    m
}

fn anys(m: &mut Msg, field: u64, v: Option<&Value>) {
    for x in v.and_then(Value::as_array).into_iter().flatten() {
        m.msg(field, any(x));
    }
}

/// Encodes a Swagger 2.0 document as `openapi.v2.Document`.
pub fn encode(doc: &Value) -> Vec<u8> {
    let Some(d) = doc.as_object() else {
        return Vec::new();
    };
    let mut m = Msg::default();
    m.string(1, d.get("swagger"));
    m.object(2, d.get("info"), info);
    m.string(3, d.get("host"));
    m.string(4, d.get("basePath"));
    m.strings(5, d.get("schemes"));
    m.strings(6, d.get("consumes"));
    m.strings(7, d.get("produces"));
    m.object(8, d.get("paths"), paths);
    m.named_msg(9, d.get("definitions"), schema_value);
    m.named_msg(10, d.get("parameters"), |p| {
        p.as_object().map(parameter).unwrap_or_default()
    });
    m.named_msg(11, d.get("responses"), |r| {
        r.as_object().map(response).unwrap_or_default()
    });
    m.objects(12, d.get("security"), security_requirement);
    m.named_msg(13, d.get("securityDefinitions"), |s| {
        s.as_object().map(security_definition).unwrap_or_default()
    });
    m.objects(14, d.get("tags"), tag);
    m.object(15, d.get("externalDocs"), external_docs);
    m.vendor(16, d);
    m.0
}

fn info(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    m.string(1, o.get("title"));
    m.string(2, o.get("version"));
    m.string(3, o.get("description"));
    m.string(4, o.get("termsOfService"));
    m.object(5, o.get("contact"), |c| {
        let mut x = Msg::default();
        x.string(1, c.get("name"));
        x.string(2, c.get("url"));
        x.string(3, c.get("email"));
        x.vendor(4, c);
        x
    });
    m.object(6, o.get("license"), |l| {
        let mut x = Msg::default();
        x.string(1, l.get("name"));
        x.string(2, l.get("url"));
        x.vendor(3, l);
        x
    });
    m.vendor(7, o);
    m
}

fn external_docs(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    m.string(1, o.get("description"));
    m.string(2, o.get("url"));
    m.vendor(3, o);
    m
}

fn tag(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    m.string(1, o.get("name"));
    m.string(2, o.get("description"));
    m.object(3, o.get("externalDocs"), external_docs);
    m.vendor(4, o);
    m
}

fn paths(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    m.vendor(1, o);
    for (k, v) in o {
        if let (true, Some(item)) = (k.starts_with('/'), v.as_object()) {
            let mut pair = Msg::default();
            pair.bytes(1, k.as_bytes());
            pair.msg(2, path_item(item));
            m.msg(2, pair);
        }
    }
    m
}

fn path_item(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    m.string(1, o.get("$ref"));
    for (field, method) in [
        (2, "get"),
        (3, "put"),
        (4, "post"),
        (5, "delete"),
        (6, "options"),
        (7, "head"),
        (8, "patch"),
    ] {
        m.object(field, o.get(method), operation);
    }
    m.objects(9, o.get("parameters"), parameters_item);
    m.vendor(10, o);
    m
}

fn operation(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    m.strings(1, o.get("tags"));
    m.string(2, o.get("summary"));
    m.string(3, o.get("description"));
    m.object(4, o.get("externalDocs"), external_docs);
    m.string(5, o.get("operationId"));
    m.strings(6, o.get("produces"));
    m.strings(7, o.get("consumes"));
    m.objects(8, o.get("parameters"), parameters_item);
    if let Some(r) = o.get("responses").and_then(Value::as_object) {
        let mut x = Msg::default();
        x.named(1, o.get("responses"), |v| {
            v.as_object().map(response_value).unwrap_or_default()
        });
        x.vendor(2, r);
        m.msg(9, x);
    }
    m.strings(10, o.get("schemes"));
    m.bool(11, o.get("deprecated"));
    m.objects(12, o.get("security"), security_requirement);
    m.vendor(13, o);
    m
}

fn json_reference(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    m.string(1, o.get("$ref"));
    m.string(2, o.get("description"));
    m
}

/// `ParametersItem`: a reference, or a parameter.
fn parameters_item(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    if o.contains_key("$ref") {
        m.msg(2, json_reference(o));
    } else {
        m.msg(1, parameter(o));
    }
    m
}

/// `Parameter`: a body parameter, or one of the four non-body kinds, by
/// `in`.
fn parameter(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    let location = o.get("in").and_then(Value::as_str).unwrap_or("");
    if location == "body" {
        let mut b = Msg::default();
        b.string(1, o.get("description"));
        b.string(2, o.get("name"));
        b.string(3, o.get("in"));
        b.bool(4, o.get("required"));
        b.object(5, o.get("schema"), schema);
        b.vendor(6, o);
        m.msg(1, b);
        return m;
    }
    // Header and path sub-schemas have no allowEmptyValue; query and
    // formData do, which shifts every later field by one.
    let (choice, first) = match location {
        "header" => (1, 5),
        "formData" => (2, 6),
        "path" => (4, 5),
        _ => (3, 6),
    };
    let mut p = Msg::default();
    p.bool(1, o.get("required"));
    p.string(2, o.get("in"));
    p.string(3, o.get("description"));
    p.string(4, o.get("name"));
    if first == 6 {
        p.bool(5, o.get("allowEmptyValue"));
    }
    let vendor = primitive_fields(&mut p, first, o);
    p.vendor(vendor, o);
    let mut non_body = Msg::default();
    non_body.msg(choice, p);
    m.msg(2, non_body);
    m
}

/// The run of fields (type … multipleOf) that parameters, headers and
/// primitive items share, numbered from `first`; returns the next number.
fn primitive_fields(m: &mut Msg, first: u64, o: &Map<String, Value>) -> u64 {
    m.string(first, o.get("type"));
    m.string(first + 1, o.get("format"));
    m.object(first + 2, o.get("items"), primitives_items);
    m.string(first + 3, o.get("collectionFormat"));
    if let Some(d) = o.get("default") {
        m.msg(first + 4, any(d));
    }
    m.double(first + 5, o.get("maximum"));
    m.bool(first + 6, o.get("exclusiveMaximum"));
    m.double(first + 7, o.get("minimum"));
    m.bool(first + 8, o.get("exclusiveMinimum"));
    m.int64(first + 9, o.get("maxLength"));
    m.int64(first + 10, o.get("minLength"));
    m.string(first + 11, o.get("pattern"));
    m.int64(first + 12, o.get("maxItems"));
    m.int64(first + 13, o.get("minItems"));
    m.bool(first + 14, o.get("uniqueItems"));
    anys(m, first + 15, o.get("enum"));
    m.double(first + 16, o.get("multipleOf"));
    first + 17
}

fn primitives_items(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    let vendor = primitive_fields(&mut m, 1, o);
    m.vendor(vendor, o);
    m
}

fn header(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    let next = primitive_fields(&mut m, 1, o);
    m.string(next, o.get("description"));
    m.vendor(next + 1, o);
    m
}

/// `ResponseValue`: a reference, or a response.
fn response_value(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    if o.contains_key("$ref") {
        m.msg(2, json_reference(o));
    } else {
        m.msg(1, response(o));
    }
    m
}

fn response(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    m.string(1, o.get("description"));
    m.object(2, o.get("schema"), |s| {
        // `SchemaItem`: a file schema for `type: file`, else a schema.
        let mut item = Msg::default();
        if s.get("type").and_then(Value::as_str) == Some("file") {
            item.msg(2, file_schema(s));
        } else {
            item.msg(1, schema(s));
        }
        item
    });
    m.named_msg(3, o.get("headers"), |v| {
        v.as_object().map(header).unwrap_or_default()
    });
    m.named_msg(4, o.get("examples"), any);
    m.vendor(5, o);
    m
}

fn file_schema(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    m.string(1, o.get("format"));
    m.string(2, o.get("title"));
    m.string(3, o.get("description"));
    if let Some(d) = o.get("default") {
        m.msg(4, any(d));
    }
    m.strings(5, o.get("required"));
    m.string(6, o.get("type"));
    m.bool(7, o.get("readOnly"));
    m.object(8, o.get("externalDocs"), external_docs);
    if let Some(e) = o.get("example") {
        m.msg(9, any(e));
    }
    m.vendor(10, o);
    m
}

fn schema_value(v: &Value) -> Msg {
    v.as_object().map(schema).unwrap_or_default()
}

fn schema(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    m.string(1, o.get("$ref"));
    m.string(2, o.get("format"));
    m.string(3, o.get("title"));
    m.string(4, o.get("description"));
    if let Some(d) = o.get("default") {
        m.msg(5, any(d));
    }
    m.double(6, o.get("multipleOf"));
    m.double(7, o.get("maximum"));
    m.bool(8, o.get("exclusiveMaximum"));
    m.double(9, o.get("minimum"));
    m.bool(10, o.get("exclusiveMinimum"));
    m.int64(11, o.get("maxLength"));
    m.int64(12, o.get("minLength"));
    m.string(13, o.get("pattern"));
    m.int64(14, o.get("maxItems"));
    m.int64(15, o.get("minItems"));
    m.bool(16, o.get("uniqueItems"));
    m.int64(17, o.get("maxProperties"));
    m.int64(18, o.get("minProperties"));
    m.strings(19, o.get("required"));
    anys(&mut m, 20, o.get("enum"));
    match o.get("additionalProperties") {
        // `AdditionalPropertiesItem`: a oneof, so even `false` is written.
        Some(Value::Bool(b)) => {
            let mut x = Msg::default();
            x.key(2, VARINT);
            x.varint(u64::from(*b));
            m.msg(21, x);
        }
        Some(Value::Object(s)) => {
            let mut x = Msg::default();
            x.msg(1, schema(s));
            m.msg(21, x);
        }
        _ => {}
    }
    match o.get("type") {
        Some(t @ Value::String(_)) => {
            let mut x = Msg::default();
            x.string(1, Some(t));
            m.msg(22, x);
        }
        Some(t @ Value::Array(_)) => {
            let mut x = Msg::default();
            x.strings(1, Some(t));
            m.msg(22, x);
        }
        _ => {}
    }
    match o.get("items") {
        Some(Value::Object(s)) => {
            let mut x = Msg::default();
            x.msg(1, schema(s));
            m.msg(23, x);
        }
        Some(items @ Value::Array(_)) => {
            let mut x = Msg::default();
            x.objects(1, Some(items), schema);
            m.msg(23, x);
        }
        _ => {}
    }
    m.objects(24, o.get("allOf"), schema);
    m.object(25, o.get("properties"), |p| {
        let mut x = Msg::default();
        // Property names may start with `x-` too: every key is a property.
        for (k, v) in p {
            let mut pair = Msg::default();
            pair.bytes(1, k.as_bytes());
            pair.msg(2, schema_value(v));
            x.msg(1, pair);
        }
        x
    });
    m.string(26, o.get("discriminator"));
    m.bool(27, o.get("readOnly"));
    m.object(28, o.get("xml"), |x| {
        let mut e = Msg::default();
        e.string(1, x.get("name"));
        e.string(2, x.get("namespace"));
        e.string(3, x.get("prefix"));
        e.bool(4, x.get("attribute"));
        e.bool(5, x.get("wrapped"));
        e.vendor(6, x);
        e
    });
    m.object(29, o.get("externalDocs"), external_docs);
    if let Some(e) = o.get("example") {
        m.msg(30, any(e));
    }
    m.vendor(31, o);
    m
}

fn security_requirement(o: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    for (k, v) in o {
        let mut arr = Msg::default();
        arr.strings(1, Some(v));
        let mut pair = Msg::default();
        pair.bytes(1, k.as_bytes());
        pair.msg(2, arr);
        m.msg(1, pair);
    }
    m
}

/// `SecurityDefinitionsItem`: chosen by `type` and, for OAuth2, `flow`.
fn security_definition(o: &Map<String, Value>) -> Msg {
    let scopes = |m: &mut Msg| {
        m.object(3, o.get("scopes"), |s| {
            let mut x = Msg::default();
            for (k, v) in s {
                let mut pair = Msg::default();
                pair.bytes(1, k.as_bytes());
                pair.string(2, Some(v));
                x.msg(1, pair);
            }
            x
        });
    };
    let mut inner = Msg::default();
    let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
    let flow = o.get("flow").and_then(Value::as_str).unwrap_or("");
    let choice = match (ty, flow) {
        ("basic", _) => {
            inner.string(1, o.get("type"));
            inner.string(2, o.get("description"));
            inner.vendor(3, o);
            1
        }
        ("oauth2", "implicit") => {
            inner.string(1, o.get("type"));
            inner.string(2, o.get("flow"));
            scopes(&mut inner);
            inner.string(4, o.get("authorizationUrl"));
            inner.string(5, o.get("description"));
            inner.vendor(6, o);
            3
        }
        ("oauth2", "password" | "application") => {
            inner.string(1, o.get("type"));
            inner.string(2, o.get("flow"));
            scopes(&mut inner);
            inner.string(4, o.get("tokenUrl"));
            inner.string(5, o.get("description"));
            inner.vendor(6, o);
            if flow == "password" { 4 } else { 5 }
        }
        ("oauth2", _) => {
            inner.string(1, o.get("type"));
            inner.string(2, o.get("flow"));
            scopes(&mut inner);
            inner.string(4, o.get("authorizationUrl"));
            inner.string(5, o.get("tokenUrl"));
            inner.string(6, o.get("description"));
            inner.vendor(7, o);
            6
        }
        _ => {
            inner.string(1, o.get("type"));
            inner.string(2, o.get("name"));
            inner.string(3, o.get("in"));
            inner.string(4, o.get("description"));
            inner.vendor(5, o);
            2
        }
    };
    let mut m = Msg::default();
    m.msg(choice, inner);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A length-delimited field: its key bytes, then the payload's length
    /// (under 128 here) and the payload.
    fn ld(key: &[u8], payload: &[u8]) -> Vec<u8> {
        [key, &[payload.len() as u8], payload].concat()
    }

    #[test]
    fn small_document_bytes() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "K", "version": "v"},
            "definitions": {"D": {"type": "object", "properties": {"a": {"type": "string"}},
                                  "x-e": true}},
        });
        // Keys: (field << 3) | 2, as varints (22 → b2 01, 25 → ca 01,
        // 31 → fa 01).
        let type_item = |t: &[u8]| ld(&[0xb2, 0x01], &ld(&[0x0a], t));
        let named = |name: &[u8], value: &[u8]| [ld(&[0x0a], name), ld(&[0x12], value)].concat();
        let property = ld(&[0x0a], &named(b"a", &type_item(b"string")));
        let vendor = ld(&[0xfa, 0x01], &named(b"x-e", &ld(&[0x12], b"true\n")));
        let schema = [type_item(b"object"), ld(&[0xca, 0x01], &property), vendor].concat();
        let want = [
            ld(&[0x0a], b"2.0"),
            ld(&[0x12], &[ld(&[0x0a], b"K"), ld(&[0x12], b"v")].concat()),
            ld(&[0x4a], &ld(&[0x0a], &named(b"D", &schema))),
        ]
        .concat();
        assert_eq!(encode(&doc), want);
    }

    /// Reads a message's fields with the crate's own wire reader.
    fn fields(b: &[u8]) -> Vec<(u64, Vec<u8>)> {
        use crate::http::protobuf::wire::{Reader, Wire};
        let mut r = Reader::new(b);
        let mut out = Vec::new();
        while let Some((n, w)) = r.field().unwrap() {
            let payload = match w {
                Wire::Len(p) => p.to_vec(),
                Wire::Varint(v) => v.to_le_bytes().to_vec(),
                _ => Vec::new(),
            };
            out.push((n, payload));
        }
        out
    }

    fn field(b: &[u8], n: u64) -> Vec<u8> {
        fields(b)
            .into_iter()
            .find(|(k, _)| *k == n)
            .map(|(_, p)| p)
            .unwrap_or_else(|| panic!("field {n} missing"))
    }

    #[test]
    fn vendor_extensions_are_yaml_any() {
        let doc = json!({"definitions": {"D": {
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}]}}});
        let bytes = encode(&doc);
        let named = field(&field(&bytes, 9), 1);
        let schema = field(&named, 2);
        let ext = field(&schema, 31);
        assert_eq!(field(&ext, 1), b"x-kubernetes-group-version-kind");
        let yaml = String::from_utf8(field(&field(&ext, 2), 2)).unwrap();
        let back: Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, json!([{"group": "", "kind": "Pod", "version": "v1"}]));
    }

    #[test]
    fn parameters_pick_their_oneof() {
        let doc = json!({"paths": {"/p": {
            "parameters": [{"$ref": "#/parameters/x"}, {"in": "query", "name": "q", "type": "boolean", "uniqueItems": true}],
            "post": {"parameters": [{"in": "body", "name": "b", "required": true, "schema": {"$ref": "#/definitions/D"}}],
                     "responses": {"200": {"description": "OK"}}},
        }}});
        let bytes = encode(&doc);
        let item = field(&field(&field(&bytes, 8), 2), 2);
        let params: Vec<Vec<u8>> = fields(&item)
            .into_iter()
            .filter(|(n, _)| *n == 9)
            .map(|(_, p)| p)
            .collect();
        assert_eq!(field(&field(&params[0], 2), 1), b"#/parameters/x");
        let query = field(&field(&field(&params[1], 1), 2), 3);
        assert_eq!(field(&query, 4), b"q");
        assert_eq!(field(&query, 6), b"boolean");
        // uniqueItems: the query sub-schema's field 20.
        assert_eq!(field(&query, 20)[0], 1);
        let post = field(&item, 4);
        let body = field(&field(&field(&post, 8), 1), 1);
        assert_eq!(field(&body, 3), b"body");
        assert_eq!(field(&field(&body, 5), 1), b"#/definitions/D");
        let code = field(&field(&post, 9), 1);
        assert_eq!(field(&code, 1), b"200");
        assert_eq!(field(&field(&field(&code, 2), 1), 1), b"OK");
    }

    #[test]
    fn additional_properties_false_is_written() {
        let bytes = encode(&json!({"definitions": {"D": {"additionalProperties": false}}}));
        let schema = field(&field(&field(&bytes, 9), 1), 2);
        assert_eq!(field(&schema, 21), vec![0x10, 0]);
    }

    #[test]
    fn non_objects_encode_to_nothing() {
        assert!(encode(&json!([1])).is_empty());
        assert!(encode(&json!({"definitions": 3, "paths": []})).is_empty());
    }
}
