//! OpenAPI documents: `/openapi/v3` (the root index), one OpenAPI 3.0
//! document per group/version, and a Swagger 2.0 `/openapi/v2`.
//!
//! kubectl needs them for `explain`, for deciding that the server validates
//! fields itself (`--validate=strict` looks for a `fieldValidation` parameter
//! on the kind's PATCH operation, see `apiserver-compat.md` §3) and for the
//! merge keys of client-side apply. Built-in schemas come from k8s-openapi's
//! schemars impls, whose definition names already are kube's
//! (`io.k8s.api.core.v1.Pod`); custom resources use their CRD version's
//! `openAPIV3Schema`. Documents are rendered on demand and cached until the
//! registry changes; each GV document is reused while its resources are
//! unchanged, so adding a CRD does not re-render the built-in documents.
//!
//! The same built-in schemas drive unknown-field detection for
//! `fieldValidation` on built-in kinds ([`prune_unknown`]).

mod paths;
mod proto_v2;
mod schemas;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use apimachinery::ApiError;
use bytes::Bytes;
use http::StatusCode;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use crate::http::{Api, Reply};
use crate::storage::registry::Resource;
use paths::{operations, v2_path_item, v3_path_item};
pub(crate) use schemas::builtin_field_owner;
use schemas::{builtins, own_definitions, refs_in, to_v2};
pub use schemas::{definition_name, prune_unknown};

/// The OpenAPI 3.0 document of one group/version.
fn render_v3(resources: &[Arc<Resource>]) -> Value {
    let b = builtins();
    let mut paths = Map::new();
    let mut local: BTreeMap<String, Value> = BTreeMap::new();
    for res in resources {
        local.extend(own_definitions(res));
        for item in operations(res) {
            paths.insert(item.path.clone(), v3_path_item(res, &item));
        }
    }
    // Definitions: everything reachable from the paths and own definitions.
    let paths = Value::Object(paths);
    let mut todo = BTreeSet::new();
    refs_in(&paths, &mut todo);
    for v in local.values() {
        refs_in(v, &mut todo);
    }
    let mut schemas: BTreeMap<String, Value> = local.clone();
    let mut pending: Vec<String> = todo.into_iter().collect();
    while let Some(name) = pending.pop() {
        if schemas.contains_key(&name) {
            continue;
        }
        let Some(s) = b.defs.get(&name) else {
            continue;
        };
        let mut more = BTreeSet::new();
        refs_in(s, &mut more);
        schemas.insert(name, s.clone());
        pending.extend(more.into_iter().filter(|n| !schemas.contains_key(n)));
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::http::version()["gitVersion"].clone()},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"}},
        },
        "security": [{"BearerToken": []}],
    })
}

/// The Swagger 2.0 document of every served kind.
fn render_v2(all: &[Arc<Resource>]) -> Value {
    let b = builtins();
    let mut paths = Map::new();
    let mut local: BTreeMap<String, Value> = BTreeMap::new();
    for res in all {
        local.extend(own_definitions(res));
        for item in operations(res) {
            paths.insert(item.path.clone(), v2_path_item(res, &item));
        }
    }
    // Every built-in definition plus the custom ones, in v2 form.
    let mut defs: BTreeMap<String, Value> = b.defs.clone();
    defs.extend(local);
    for d in defs.values_mut() {
        to_v2(d);
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::http::version()["gitVersion"].clone()},
        "paths": paths,
        "definitions": defs,
        "securityDefinitions": {"BearerToken": {"description": "Bearer Token authentication", "type": "apiKey", "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
    })
}

// ---------------------------------------------------------------------------
// Serving and caching

/// The `/openapi/v3` key of a group/version: `api/v1`, `apis/apps/v1`.
fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// What a GV document depends on; an unchanged fingerprint reuses the
/// rendered bytes.
fn fingerprint(resources: &[Arc<Resource>]) -> String {
    let mut s = String::new();
    for r in resources {
        s.push_str(&format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{};",
            r.plural,
            r.kind,
            r.list_kind,
            r.namespaced,
            r.status_subresource,
            r.scale.is_some(),
            r.eviction,
            r.builtin,
            r.schema
                .as_ref()
                .map(|s| s.source().to_string())
                .unwrap_or_default()
        ));
    }
    s
}

struct GvDoc {
    fingerprint: String,
    bytes: Bytes,
    hash: String,
}

struct Rendered {
    generation: u64,
    root: Bytes,
    docs: BTreeMap<String, Arc<GvDoc>>,
    v2: OnceLock<Bytes>,
    /// The same document as gnostic protobuf.
    v2_pb: OnceLock<Bytes>,
}

/// Rendered documents of one registry, rebuilt when its generation moves.
#[derive(Default)]
pub struct Cache {
    state: Mutex<Option<Arc<Rendered>>>,
}

fn hash(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA512, bytes);
    d.as_ref().iter().map(|b| format!("{b:02X}")).collect()
}

fn to_bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

fn rendered(api: &Api) -> Arc<Rendered> {
    let registry = &api.registry;
    let cache = &api.openapi;
    let mut state = cache.state.lock();
    // Read the generation before the resources: a change in between leaves
    // this rendering tagged as stale, and the next request renders again.
    let generation = registry.generation();
    if let Some(r) = state.as_ref()
        && r.generation == generation
    {
        return r.clone();
    }
    let mut by_gv: BTreeMap<String, Vec<Arc<Resource>>> = BTreeMap::new();
    for r in registry.all() {
        by_gv
            .entry(gv_key(&r.group, &r.version))
            .or_default()
            .push(r);
    }
    let previous = state.as_ref().map(|r| &r.docs);
    let mut docs = BTreeMap::new();
    for (key, resources) in &by_gv {
        let fp = fingerprint(resources);
        let doc = match previous.and_then(|p| p.get(key)) {
            Some(d) if d.fingerprint == fp => d.clone(),
            _ => {
                let bytes = to_bytes(&render_v3(resources));
                Arc::new(GvDoc {
                    fingerprint: fp,
                    hash: hash(&bytes),
                    bytes,
                })
            }
        };
        docs.insert(key.clone(), doc);
    }
    let paths: Map<String, Value> = docs
        .iter()
        .map(|(k, d)| {
            (
                k.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{k}?hash={}", d.hash)}),
            )
        })
        .collect();
    let r = Arc::new(Rendered {
        generation,
        root: to_bytes(&json!({ "paths": paths })),
        docs,
        v2: OnceLock::new(),
        v2_pb: OnceLock::new(),
    });
    *state = Some(r.clone());
    r
}

/// Whether `accept` allows a JSON answer.
fn accepts_json(accept: &str) -> bool {
    accept.trim().is_empty()
        || accept.split(',').any(|part| {
            let mt = part.split(';').next().unwrap_or("").trim();
            matches!(mt, "application/json" | "application/*" | "*/*" | "")
        })
}

/// The protobuf media types of `/openapi/v2`: client-go asks for the
/// first, kube-openapi also takes the second.
const V2_PROTOBUF: &[&str] = &[
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

/// The content type of a protobuf `/openapi/v2` answer, whichever spelling
/// was asked for: `@` is not a token character, and client-go's
/// `mime.ParseMediaType` of the response would fail on it.
const V2_PROTOBUF_RESPONSE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Whether `accept` asks for protobuf before any JSON type.
fn wants_v2_protobuf(accept: &str) -> bool {
    for part in accept.split(',') {
        let mt = part.split(';').next().unwrap_or("").trim();
        if V2_PROTOBUF.contains(&mt) {
            return true;
        }
        if accepts_json(mt) {
            return false;
        }
    }
    false
}

/// Serves `/openapi/v2`, `/openapi/v3` and `/openapi/v3/<gv>`.
pub fn serve(api: &Api, path: &str, accept: &str) -> Result<Reply, ApiError> {
    let not_found = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    let path = path.trim_end_matches('/');
    if path == "/openapi/v2" && wants_v2_protobuf(accept) {
        let r = rendered(api);
        let bytes = r
            .v2_pb
            .get_or_init(|| {
                let json =
                    r.v2.get_or_init(|| to_bytes(&render_v2(&api.registry.all())));
                let doc: Value = serde_json::from_slice(json).unwrap_or(Value::Null);
                Bytes::from(proto_v2::encode(&doc))
            })
            .clone();
        return Ok(Reply::json(StatusCode::OK, bytes).content_type(V2_PROTOBUF_RESPONSE));
    }
    if !accepts_json(accept) {
        // Only JSON is served (and protobuf for v2, above).
        return Err(ApiError::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json",
        ));
    }
    let r = rendered(api);
    if path == "/openapi/v2" {
        let bytes =
            r.v2.get_or_init(|| to_bytes(&render_v2(&api.registry.all())))
                .clone();
        return Ok(Reply::json(StatusCode::OK, bytes));
    }
    if path == "/openapi/v3" {
        return Ok(Reply::json(StatusCode::OK, r.root.clone()));
    }
    let key = path.strip_prefix("/openapi/v3/").ok_or_else(not_found)?;
    let doc = r.docs.get(key).ok_or_else(not_found)?;
    Ok(Reply::json(StatusCode::OK, doc.bytes.clone()))
}
