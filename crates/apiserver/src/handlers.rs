//! The REST verbs on resources: get, list, watch, create, update, patch,
//! delete and deletecollection, plus the status, scale and eviction
//! subresources. Each verb reads the current object from the store, decides
//! the new state with the metadata rules of kube-apiserver, and writes it with
//! a compare-and-swap on the object's revision.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::selector::{FieldSelector, LabelSelector};
use apimachinery::{ApiError, Cause};
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, Method, StatusCode};
use serde_json::{Map, Value, json};
use store::{KeyValue, RangeRequest, Revision, StoreError};

use crate::admission::{Attributes, Operation};
use crate::object::{self, meta_mut};
use crate::registry::Resource;
use crate::request::{Query, ResourcePath};
use crate::server::{Reply, Server};
use crate::watch::{Filter, Summary};

/// How many times an unconditional write is retried on a concurrent change.
const WRITE_RETRIES: usize = 16;
/// Largest object accepted into the store.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;
/// Most operations in one JSON patch (kube-apiserver's limit).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Refuses an object too large to store before any further work is spent
/// on it (admission, validation, managed fields). Only objects that could
/// be that large are measured: `hint` is a byte count the object's encoding
/// is unlikely to be much smaller than (the body, or the body plus the
/// stored object for a patch).
pub(crate) fn check_size_early(obj: &Value, hint: usize) -> Result<(), ApiError> {
    if hint <= MAX_OBJECT_BYTES / 2 {
        return Ok(());
    }
    let size = serde_json::to_vec(obj).map(|v| v.len()).unwrap_or(0);
    if size > MAX_OBJECT_BYTES {
        return Err(too_large(size));
    }
    Ok(())
}

pub fn store_err(e: StoreError) -> ApiError {
    match e {
        StoreError::Compacted { requested, .. } => {
            ApiError::gone(format!("too old resource version: {requested}"))
        }
        StoreError::FutureRevision { requested, current } => ApiError::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        ),
        other => ApiError::internal(other.to_string()),
    }
}

/// Everything a verb needs about the request.
pub struct Ctx<'a> {
    pub server: &'a Arc<Server>,
    pub res: Arc<Resource>,
    pub path: &'a ResourcePath,
    pub query: &'a Query,
    pub headers: &'a HeaderMap,
    pub body: Bytes,
}

impl Ctx<'_> {
    fn ns(&self) -> Option<&str> {
        if self.res.namespaced {
            self.path.namespace.as_deref()
        } else {
            None
        }
    }

    fn key(&self, name: &str) -> String {
        self.res.key(self.ns(), name)
    }

    fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.res.group, &self.res.plural, name)
    }

    fn content_type(&self) -> &str {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
    }
}

/// Entry point for resource paths.
pub async fn handle(ctx: Ctx<'_>, method: &Method) -> Result<Reply, ApiError> {
    let res = ctx.res.clone();
    if res.namespaced && ctx.path.namespace.is_none() && ctx.path.name.is_some() {
        return Err(ApiError::not_found(
            &res.group,
            &res.plural,
            ctx.path.name.as_deref().unwrap_or(""),
        ));
    }
    if !res.namespaced && ctx.path.namespace.is_some() {
        return Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    let sub = ctx.path.subresource.clone();
    if sub.is_none()
        && let Some(verb) = verb_of(method, ctx.path.name.is_some(), ctx.query.flag("watch"))
        && !res.allows(verb)
    {
        return Err(method_not_allowed(method));
    }
    match (&ctx.path.name, sub.as_deref()) {
        (None, _) => match *method {
            Method::GET if ctx.query.flag("watch") => crate::list::watch(&ctx).await,
            Method::GET => crate::list::list(&ctx).await,
            Method::POST => {
                if res.namespaced && ctx.path.namespace.is_none() {
                    return Err(ApiError::method_not_allowed(
                        "a namespace is required to create a namespaced resource",
                    ));
                }
                create(&ctx).await
            }
            // The all-namespaces path of a namespaced resource serves only
            // list and watch.
            Method::DELETE if res.namespaced && ctx.path.namespace.is_none() => {
                Err(method_not_allowed(method))
            }
            Method::DELETE => delete_collection(&ctx).await,
            _ => Err(method_not_allowed(method)),
        },
        (Some(name), None) => {
            let name = name.clone();
            match *method {
                Method::GET if ctx.query.flag("watch") => crate::list::watch(&ctx).await,
                Method::GET => get(&ctx, &name).await,
                Method::PUT => update(&ctx, &name, None).await,
                Method::PATCH => patch(&ctx, &name, None).await,
                Method::DELETE => delete(&ctx, &name).await,
                _ => Err(method_not_allowed(method)),
            }
        }
        (Some(name), Some("status")) if res.status_subresource => {
            let name = name.clone();
            match *method {
                Method::GET => get(&ctx, &name).await,
                Method::PUT => update(&ctx, &name, Some("status")).await,
                Method::PATCH => patch(&ctx, &name, Some("status")).await,
                _ => Err(method_not_allowed(method)),
            }
        }
        (Some(name), Some("scale")) if res.scale.is_some() => {
            let name = name.clone();
            crate::subresources::scale(&ctx, &name, method).await
        }
        (Some(name), Some("eviction")) if res.eviction && *method == Method::POST => {
            let name = name.clone();
            crate::subresources::evict(&ctx, &name).await
        }
        (Some(name), Some("finalize")) if res.kind == "Namespace" && *method == Method::PUT => {
            let name = name.clone();
            update(&ctx, &name, Some("finalize")).await
        }
        _ => Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )),
    }
}

/// The verb a request on a resource itself is authorized and served as.
fn verb_of(method: &Method, named: bool, watch: bool) -> Option<&'static str> {
    Some(match (method.as_str(), named) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    })
}

/// kube's 405 carries no Status; client-go then reports exactly this.
fn method_not_allowed(_m: &Method) -> ApiError {
    ApiError::method_not_allowed("the server does not allow this method on the requested resource")
}

/// Parses a request body (JSON, YAML when so labelled, or a Kubernetes
/// protobuf envelope, recognised by its magic bytes) into an object.
pub fn parse_body(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let yaml = match media.as_str() {
        // No Content-Type is JSON, as kube-apiserver takes it.
        "" | "application/json" | "application/vnd.kubernetes.protobuf" => false,
        "application/yaml" | "application/x-yaml" | "text/yaml" => true,
        _ => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf; got {content_type:?}"
            )));
        }
    };
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    let v: Value = if crate::protobuf::is_envelope(body) {
        crate::protobuf::decode_object(body)?
    } else if yaml {
        serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid YAML: {e}")))?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the body must be a JSON object".to_string(),
        ));
    }
    Ok(v)
}

/// Checks `apiVersion`/`kind` against the served resource (either may be
/// absent) and sets them.
pub fn check_type_meta(res: &Resource, obj: &mut Value) -> Result<(), ApiError> {
    let av = res.api_version();
    let m = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the body must be a JSON object"))?;
    if let Some(v) = m.get("apiVersion").and_then(Value::as_str)
        && !v.is_empty()
        && v != av
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({av})"
        )));
    }
    if let Some(k) = m.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != res.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            res.kind
        )));
    }
    m.insert("apiVersion".into(), json!(av));
    m.insert("kind".into(), json!(res.kind));
    if m.get("metadata")
        .is_some_and(|v| !v.is_object() && !v.is_null())
    {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

/// Renders a stored value as the served resource sees it.
pub fn render(res: &Resource, stored: &[u8], rv: Revision) -> Result<Bytes, ApiError> {
    if needs_conversion(res) {
        let v = to_served(res, object::decode(stored, rv)?);
        Ok(Bytes::from(
            serde_json::to_vec(&v).map_err(|e| ApiError::internal(e.to_string()))?,
        ))
    } else {
        Ok(object::with_rv(stored, rv))
    }
}

pub fn needs_conversion(res: &Resource) -> bool {
    crate::builtin::is_converted(res) || (!res.builtin && res.version != res.storage_version)
}

/// Stored form → served form.
pub fn to_served(res: &Resource, v: Value) -> Value {
    if crate::builtin::is_converted(res) {
        return crate::builtin::from_storage(res, v);
    }
    let mut v = v;
    if !res.builtin
        && let Some(m) = v.as_object_mut()
    {
        m.insert("apiVersion".into(), json!(res.api_version()));
    }
    v
}

/// Served form → stored form.
fn to_stored(res: &Resource, v: Value) -> Value {
    if crate::builtin::is_converted(res) {
        return crate::builtin::to_storage(res, v);
    }
    let mut v = v;
    if !res.builtin
        && res.version != res.storage_version
        && let Some(m) = v.as_object_mut()
    {
        m.insert(
            "apiVersion".into(),
            json!(format!("{}/{}", res.group, res.storage_version)),
        );
    }
    v
}

/// Reads the current stored object.
pub async fn read(
    server: &Server,
    res: &Resource,
    key: &str,
) -> Result<Option<(KeyValue, Value)>, ApiError> {
    let (kv, _) = server.store.get(key, None).await.map_err(store_err)?;
    match kv {
        None => Ok(None),
        Some(kv) => {
            let v = to_served(res, object::decode(&kv.value, kv.mod_revision)?);
            Ok(Some((kv, v)))
        }
    }
}

async fn get(ctx: &Ctx<'_>, name: &str) -> Result<Reply, ApiError> {
    let (kv, _) = ctx
        .server
        .store
        .get(&ctx.key(name), None)
        .await
        .map_err(store_err)?;
    let kv = kv.ok_or_else(|| ctx.not_found(name))?;
    crate::table::get_reply(ctx, render(&ctx.res, &kv.value, kv.mod_revision)?)
}

/// Whether a PUT on a missing object creates it (kube-apiserver allows this
/// for a few kinds, leases among them).
fn create_on_update(res: &Resource) -> bool {
    res.builtin
        && matches!(
            res.kind.as_str(),
            "Lease" | "Endpoints" | "Event" | "EndpointSlice"
        )
}

/// Admission, schema processing and validation shared by create and update.
/// Returns warnings (unknown fields under `fieldValidation=Warn`).
pub(crate) async fn admit_and_validate(
    ctx: &Ctx<'_>,
    op: Operation,
    sub: Option<&str>,
    name: &str,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let res = &ctx.res;
    let dry_run = ctx.query.dry_run()?;
    let mut causes = Vec::new();
    let mut warnings = Vec::new();
    let mode = crate::fieldvalidation::mode(ctx.query)?;
    let mut unknown = Vec::new();
    if let Some(schema) = &res.schema {
        let processed = schema.process(obj, "");
        unknown = processed.pruned;
        causes.extend(processed.causes);
    } else if res.builtin {
        unknown = crate::openapi::prune_unknown(res, obj);
    }
    // Duplicate keys are only visible in a JSON body that is the object
    // itself (create, update), not in patches.
    let media = ctx.content_type().split(';').next().unwrap_or("").trim();
    let duplicates = if mode != crate::fieldvalidation::Mode::Ignore
        && (media == "application/json" || media == "*/*")
    {
        crate::fieldvalidation::duplicate_fields(&ctx.body)
    } else {
        Vec::new()
    };
    warnings.extend(crate::fieldvalidation::outcome(
        mode,
        &unknown,
        &duplicates,
    )?);
    crate::builtin::normalize(res, obj);
    causes.extend(
        object::validate_meta(obj, res.builtin && res.kind == "Namespace")
            .into_iter()
            // RBAC names follow their own rule (checked in builtin::validate).
            .filter(|c| !(crate::builtin::path_segment_names(res) && c.field == "metadata.name")),
    );
    if res.builtin {
        causes.extend(crate::builtin::validate(res, obj)?);
        if let Some(old) = old
            && sub.is_none()
        {
            causes.extend(crate::builtin::validate_update(res, obj, old));
        }
    }
    let attrs = Attributes {
        operation: op,
        resource: res,
        subresource: sub,
        namespace: ctx.ns(),
        name,
        old,
        dry_run,
        user: crate::auth::current_user(),
    };
    let plugins = ctx.server.admission_plugins();
    for p in &plugins {
        p.mutate(&attrs, obj).await?;
    }
    if res.builtin && !plugins.is_empty() {
        // kube decodes (and so defaults) what mutating webhooks return.
        crate::defaults::apply(&res.group, &res.kind, obj);
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&res.group, &res.kind, name, causes));
    }
    for p in &plugins {
        p.validate(&attrs, obj).await?;
    }
    Ok(warnings)
}

/// kube's `NewForbidden`: `<resource> "<name>" is forbidden: <why>` (the
/// name left out when empty), with the resource and name as details.
pub(crate) fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> ApiError {
    let resource = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    let message = if name.is_empty() {
        format!("{resource} is forbidden: {why}")
    } else {
        format!("{resource} \"{name}\" is forbidden: {why}")
    };
    ApiError::forbidden(message).with_details(group, plural, name)
}

/// Fails unless `ns` exists and is not terminating: the NamespaceLifecycle
/// admission check on creating `name` (empty for generateName) of `res`.
async fn ensure_namespace_open(
    server: &Server,
    res: &Resource,
    ns: &str,
    name: &str,
) -> Result<(), ApiError> {
    let key = format!("/registry/core/namespaces/{ns}");
    let (kv, _) = server.store.get(&key, None).await.map_err(store_err)?;
    let kv = kv.ok_or_else(|| ApiError::not_found("", "namespaces", ns))?;
    let v: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
    if object::is_deleting(&v) {
        let mut e = forbidden(
            &res.group,
            &res.plural,
            name,
            &format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        );
        e.causes.push(Cause::new(
            "NamespaceTerminating",
            "metadata.namespace",
            format!("namespace {ns} is being terminated"),
        ));
        return Err(e);
    }
    Ok(())
}

/// Status a kind starts with on create, where it has a status subresource.
fn initial_status(res: &Resource, given: Option<Value>) -> Option<Value> {
    if !res.builtin {
        return None;
    }
    match res.kind.as_str() {
        "Node" => given,
        "Namespace" => Some(json!({"phase": "Active"})),
        "Pod" => {
            let mut s = given.filter(Value::is_object).unwrap_or_else(|| json!({}));
            if s.get("phase").is_none() {
                s["phase"] = json!("Pending");
            }
            Some(s)
        }
        "PersistentVolume" | "PersistentVolumeClaim" => Some(json!({"phase": "Pending"})),
        _ => None,
    }
}

pub(crate) async fn create(ctx: &Ctx<'_>) -> Result<Reply, ApiError> {
    let obj = parse_body(&ctx.body, ctx.content_type())?;
    check_size_early(&obj, ctx.body.len())?;
    create_object(ctx, obj, None).await
}

/// Creates `obj`. Its managedFields are `applied_fields` when server-side
/// apply created it, else an Update entry for the request's field manager.
pub(crate) async fn create_object(
    ctx: &Ctx<'_>,
    mut obj: Value,
    applied_fields: Option<Value>,
) -> Result<Reply, ApiError> {
    let res = ctx.res.clone();
    let dry_run = ctx.query.dry_run()?;
    let manager = crate::fieldmanager::manager_for(ctx.query, ctx.headers)?;
    check_type_meta(&res, &mut obj)?;
    let ns = ctx.ns().map(str::to_string);
    {
        let m = meta_mut(&mut obj).ok_or_else(|| ApiError::bad_request("bad metadata"))?;
        if let Some(ns_body) = m.get("namespace").and_then(Value::as_str)
            && !ns_body.is_empty()
            && Some(ns_body) != ns.as_deref()
            && res.namespaced
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        match &ns {
            Some(ns) => {
                m.insert("namespace".into(), json!(ns));
            }
            None => {
                m.remove("namespace");
            }
        }
        for f in [
            "resourceVersion",
            "uid",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "managedFields",
        ] {
            m.remove(f);
        }
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(object::now_rfc3339()));
        if crate::builtin::has_generation(&res) {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
    }
    if let Some(ns) = &ns {
        ensure_namespace_open(ctx.server, &res, ns, object::name(&obj)).await?;
    }
    if res.status_subresource {
        let given = obj.as_object_mut().and_then(|m| m.remove("status"));
        if let Some(s) = initial_status(&res, given) {
            obj["status"] = s;
        }
    }
    if res.builtin && res.kind == "Namespace" {
        let name = object::name(&obj).to_string();
        if !name.is_empty() {
            let m = meta_mut(&mut obj).expect("metadata exists");
            let labels = m.entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
        if obj.pointer("/spec/finalizers").is_none() {
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
        }
    }
    object::tidy(&mut obj);
    let generate = object::name(&obj).is_empty();
    let prefix = object::meta_str(&obj, "generateName")
        .unwrap_or_default()
        .to_string();
    if generate && prefix.is_empty() {
        return Err(ApiError::invalid(
            &res.group,
            &res.kind,
            "",
            vec![Cause::required("metadata.name").with_message("name or generateName is required")],
        ));
    }
    for attempt in 0.. {
        if generate {
            meta_mut(&mut obj)
                .expect("metadata exists")
                .insert("name".into(), json!(object::generate_name(&prefix)));
        }
        let name = object::name(&obj).to_string();
        let mut candidate = obj.clone();
        let warnings =
            admit_and_validate(ctx, Operation::Create, None, &name, &mut candidate, None).await?;
        match &applied_fields {
            Some(fields) => {
                meta_mut(&mut candidate)
                    .expect("metadata exists")
                    .insert("managedFields".into(), fields.clone());
            }
            None => crate::fieldmanager::record_update(&res, None, None, &mut candidate, &manager),
        }
        let stored = object::encode(&to_stored(&res, candidate.clone()));
        if stored.len() > MAX_OBJECT_BYTES {
            return Err(too_large(stored.len()));
        }
        if dry_run {
            // kube's dry run goes through the storage create (without
            // writing), so a taken name is a 409 as in a real create.
            let (taken, _) = ctx
                .server
                .store
                .get(&ctx.key(&name), None)
                .await
                .map_err(store_err)?;
            match taken {
                Some(_) if generate && attempt < 8 => continue,
                Some(_) => return Err(ApiError::already_exists(&res.group, &res.plural, &name)),
                None => {
                    return Ok(Reply::value(StatusCode::CREATED, &candidate).warnings(warnings));
                }
            }
        }
        match ctx.server.store.create(&ctx.key(&name), stored).await {
            Ok(kv) => {
                return Ok(Reply::json(
                    StatusCode::CREATED,
                    render(&res, &kv.value, kv.mod_revision)?,
                )
                .warnings(warnings));
            }
            Err(StoreError::AlreadyExists(_)) if generate && attempt < 8 => continue,
            Err(StoreError::AlreadyExists(_)) => {
                return Err(ApiError::already_exists(&res.group, &res.plural, &name));
            }
            Err(e) => return Err(store_err(e)),
        }
    }
    unreachable!("the create loop returns")
}

fn too_large(size: usize) -> ApiError {
    ApiError::request_entity_too_large(format!(
        "the object is {size} bytes, over the limit of {MAX_OBJECT_BYTES} bytes"
    ))
}

trait CauseExt {
    fn with_message(self, m: &str) -> Cause;
}
impl CauseExt for Cause {
    fn with_message(mut self, m: &str) -> Cause {
        self.message = m.to_string();
        self
    }
}

/// Builds the object an update stores from the current one and what the
/// client sent, following kube-apiserver: immutable metadata is kept, the
/// main resource cannot change status (and `/status` can change nothing
/// else) where a status subresource exists, and `generation` moves only on
/// changes to the spec-like part.
pub fn merge_for_update(
    res: &Resource,
    sub: Option<&str>,
    old: &Value,
    incoming: Value,
) -> Result<Value, ApiError> {
    let mut new = match sub {
        Some("status") => {
            let mut n = old.clone();
            match incoming.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            // Only a resource version precondition comes from the request.
            if let Some(rv) = object::meta_str(&incoming, "resourceVersion") {
                meta_mut(&mut n)
                    .expect("metadata")
                    .insert("resourceVersion".into(), json!(rv));
            }
            n
        }
        Some("finalize") => {
            let mut n = old.clone();
            n["spec"] = incoming.get("spec").cloned().unwrap_or_else(|| json!({}));
            n
        }
        _ => {
            let mut n = incoming;
            if res.status_subresource {
                match old.get("status") {
                    Some(s) => n["status"] = s.clone(),
                    None => {
                        if let Some(m) = n.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            n
        }
    };
    let old_meta = object::meta(old).cloned().unwrap_or_default();
    let m = meta_mut(&mut new).ok_or_else(|| ApiError::bad_request("bad metadata"))?;
    for f in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "name",
        "namespace",
        "generateName",
    ] {
        match old_meta.get(f) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    m.remove("selfLink");
    let has_generation = crate::builtin::has_generation(res);
    if !has_generation {
        // Also drops one stored by an older version of this server.
        m.remove("generation");
    }
    if has_generation && (sub.is_none() || sub == Some("finalize")) {
        // Metadata-only changes never bump generation (but an EndpointSlice's
        // labels count, as in kube's strategy).
        let labels_changed = res.builtin
            && res.kind == "EndpointSlice"
            && object::meta(old).and_then(|m| m.get("labels"))
                != object::meta(&new).and_then(|m| m.get("labels"));
        let changed = labels_changed
            || object::generation_relevant(old, res.status_subresource)
                != object::generation_relevant(&new, res.status_subresource);
        if changed {
            let g = old_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(&mut new)
                .expect("metadata")
                .insert("generation".into(), json!(g + 1));
        }
    }
    if object::is_deleting(old) {
        let before = object::finalizers(old);
        let added: Vec<String> = object::finalizers(&new)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(
                &res.group,
                &res.kind,
                object::name(old),
                vec![Cause::new(
                    "FieldValueForbidden",
                    "metadata.finalizers",
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                    ),
                )],
            ));
        }
    }
    object::tidy(&mut new);
    Ok(new)
}

/// Writes `new` over the object at `key` whose stored state is `cur`.
/// An object being deleted whose last finalizer went away is removed.
pub(crate) async fn write_over(
    ctx: &Ctx<'_>,
    key: &str,
    cur: &KeyValue,
    new: Value,
    dry_run: bool,
) -> Result<Result<Reply, StoreError>, ApiError> {
    let res = &ctx.res;
    if object::is_deleting(&new) && object::finalizers(&new).is_empty() {
        if dry_run {
            return Ok(Ok(Reply::value(StatusCode::OK, &new)));
        }
        return match ctx.server.store.delete(key, Some(cur.mod_revision)).await {
            Ok((_, rev)) => {
                let mut out = new;
                object::set_rv(&mut out, rev);
                Ok(Ok(Reply::value(StatusCode::OK, &out)))
            }
            Err(e @ (StoreError::Conflict(_) | StoreError::NotFound)) => Ok(Err(e)),
            Err(e) => Err(store_err(e)),
        };
    }
    let stored = object::encode(&to_stored(res, new.clone()));
    if stored.len() > MAX_OBJECT_BYTES {
        return Err(too_large(stored.len()));
    }
    if stored == cur.value {
        // No-op: no new revision, no event.
        return Ok(Ok(Reply::json(
            StatusCode::OK,
            render(res, &cur.value, cur.mod_revision)?,
        )));
    }
    if dry_run {
        return Ok(Ok(Reply::value(StatusCode::OK, &new)));
    }
    match ctx.server.store.update(key, stored, cur.mod_revision).await {
        Ok(kv) => Ok(Ok(Reply::json(
            StatusCode::OK,
            render(res, &kv.value, kv.mod_revision)?,
        ))),
        Err(e @ (StoreError::Conflict(_) | StoreError::NotFound)) => Ok(Err(e)),
        Err(e) => Err(store_err(e)),
    }
}

fn rv_of(obj: &Value) -> Option<String> {
    object::meta_str(obj, "resourceVersion")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

async fn update(ctx: &Ctx<'_>, name: &str, sub: Option<&str>) -> Result<Reply, ApiError> {
    let res = ctx.res.clone();
    let dry_run = ctx.query.dry_run()?;
    let mut incoming = parse_body(&ctx.body, ctx.content_type())?;
    check_size_early(&incoming, ctx.body.len())?;
    check_type_meta(&res, &mut incoming)?;
    let body_name = object::name(&incoming);
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if res.namespaced
        && let Some(ns) = object::meta_str(&incoming, "namespace")
        && !ns.is_empty()
        && Some(ns) != ctx.ns()
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let client_rv = rv_of(&incoming);
    let key = ctx.key(name);
    let manager = crate::fieldmanager::manager_for(ctx.query, ctx.headers)?;
    for _ in 0..WRITE_RETRIES {
        let Some((cur, old)) = read(ctx.server, &res, &key).await? else {
            if sub.is_none() && create_on_update(&res) {
                let mut body = incoming.clone();
                meta_mut(&mut body)
                    .expect("metadata")
                    .insert("name".into(), json!(name));
                let create_ctx = Ctx {
                    server: ctx.server,
                    res: res.clone(),
                    path: ctx.path,
                    query: ctx.query,
                    headers: ctx.headers,
                    body: Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
                };
                return create(&create_ctx).await;
            }
            return Err(ctx.not_found(name));
        };
        match &client_rv {
            Some(rv) if *rv != cur.mod_revision.to_string() => {
                return Err(ApiError::modified(&res.group, &res.plural, name));
            }
            None if !res.builtin => {
                return Err(ApiError::invalid(
                    &res.group,
                    &res.kind,
                    name,
                    vec![Cause::invalid(
                        "metadata.resourceVersion",
                        "Invalid value: 0x0: must be specified for an update",
                    )],
                ));
            }
            _ => {}
        }
        let mut new = merge_for_update(&res, sub, &old, incoming.clone())?;
        let warnings =
            admit_and_validate(ctx, Operation::Update, sub, name, &mut new, Some(&old)).await?;
        crate::fieldmanager::record_update(&res, sub, Some(&old), &mut new, &manager);
        match write_over(ctx, &key, &cur, new, dry_run).await? {
            Ok(reply) => return Ok(reply.warnings(warnings)),
            Err(_) if client_rv.is_none() => continue,
            Err(_) => return Err(ApiError::modified(&res.group, &res.plural, name)),
        }
    }
    Err(ApiError::modified(&res.group, &res.plural, name))
}

/// Applies a patch document of the request's content type to `target`.
pub fn apply_patch(
    res: &Resource,
    content_type: &str,
    target: &mut Value,
    patch_body: &[u8],
) -> Result<(), ApiError> {
    let ct = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match ct.as_str() {
        "application/merge-patch+json" => {
            let p: Value = serde_json::from_slice(patch_body)
                .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))?;
            apimachinery::patch::merge_patch(target, &p);
            Ok(())
        }
        "application/json-patch+json" => {
            let p: Value = serde_json::from_slice(patch_body)
                .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))?;
            // Each operation may walk and copy the object: bound their
            // number before doing any, as kube-apiserver does.
            if let Some(ops) = p.as_array()
                && ops.len() > MAX_JSON_PATCH_OPERATIONS
            {
                return Err(ApiError::request_entity_too_large(format!(
                    "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                    ops.len()
                )));
            }
            apimachinery::patch::json_patch(target, &p)
        }
        "application/strategic-merge-patch+json" => {
            if !res.builtin {
                return Err(ApiError::unsupported_media_type(format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; strategic merge patch is not supported for custom resource {}",
                    res.qualified()
                )));
            }
            let p: Value = serde_json::from_slice(patch_body)
                .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))?;
            crate::smp::strategic_merge(res, target, &p)
        }
        _ => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json; got {content_type:?}"
        ))),
    }
}

async fn patch(ctx: &Ctx<'_>, name: &str, sub: Option<&str>) -> Result<Reply, ApiError> {
    let res = ctx.res.clone();
    let dry_run = ctx.query.dry_run()?;
    let key = ctx.key(name);
    if ctx.body.len() > crate::server::MAX_BODY_BYTES {
        return Err(ApiError::request_entity_too_large("the patch is too large"));
    }
    let ct = ctx.content_type().to_string();
    if ct.starts_with("application/apply-patch") {
        return crate::apply::server_side_apply(ctx, name, sub).await;
    }
    if ctx.query.flag("force") {
        return Err(ApiError::bad_request(
            "force: Invalid value: true: may not be specified for non-apply patch",
        ));
    }
    let manager = crate::fieldmanager::manager_for(ctx.query, ctx.headers)?;
    for _ in 0..WRITE_RETRIES {
        let Some((cur, old)) = read(ctx.server, &res, &key).await? else {
            return Err(ctx.not_found(name));
        };
        let mut patched = old.clone();
        apply_patch(&res, &ct, &mut patched, &ctx.body)?;
        if !patched.is_object() {
            return Err(ApiError::bad_request("the patch must leave an object"));
        }
        check_size_early(&patched, ctx.body.len() + cur.value.len())?;
        check_type_meta(&res, &mut patched)?;
        // A resourceVersion left in the patched object is a precondition;
        // one the patch removed (kubectl's 3-way patches null it) is none.
        let precondition = rv_of(&patched);
        if precondition.is_some_and(|rv| rv != cur.mod_revision.to_string()) {
            return Err(ApiError::modified(&res.group, &res.plural, name));
        }
        if object::name(&patched) != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                object::name(&patched)
            )));
        }
        let mut new = merge_for_update(&res, sub, &old, patched)?;
        let warnings =
            admit_and_validate(ctx, Operation::Update, sub, name, &mut new, Some(&old)).await?;
        crate::fieldmanager::record_update(&res, sub, Some(&old), &mut new, &manager);
        match write_over(ctx, &key, &cur, new, dry_run).await? {
            Ok(reply) => return Ok(reply.warnings(warnings)),
            Err(_) => continue,
        }
    }
    Err(ApiError::modified(&res.group, &res.plural, name))
}

/// DeleteOptions from the body and the query.
#[derive(Debug, Default)]
pub struct DeleteOptions {
    pub propagation: Option<String>,
    pub grace: Option<i64>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

pub fn delete_options(body: &[u8], q: &Query) -> Result<DeleteOptions, ApiError> {
    let mut o = DeleteOptions {
        dry_run: q.dry_run()?,
        ..Default::default()
    };
    if !body.is_empty() {
        // Typed client-go deletes (e.g. `kubectl drain --disable-eviction`)
        // send DeleteOptions in protobuf.
        let v: Value = if crate::protobuf::is_envelope(body) {
            crate::protobuf::decode_kind(body, "DeleteOptions")?
        } else {
            serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("DeleteOptions are not valid JSON: {e}"))
            })?
        };
        o.propagation = v
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string);
        if v.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
            o.propagation.get_or_insert_with(|| "Orphan".into());
        }
        o.grace = v.get("gracePeriodSeconds").and_then(Value::as_i64);
        o.uid = v
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        o.resource_version = v
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        if v.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"))
        {
            o.dry_run = true;
        }
    }
    if let Some(p) = q.get("propagationPolicy") {
        o.propagation = Some(p.to_string());
    }
    if q.flag("orphanDependents") {
        o.propagation.get_or_insert_with(|| "Orphan".into());
    }
    if let Some(g) = q.int("gracePeriodSeconds")? {
        o.grace = Some(g);
    }
    if let Some(p) = &o.propagation
        && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
    {
        return Err(ApiError::bad_request(format!(
            "propagationPolicy must be one of Orphan, Background, Foreground; got {p:?}"
        )));
    }
    Ok(o)
}

/// Namespaces kube-apiserver's NamespaceLifecycle admission never lets go.
const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

async fn delete(ctx: &Ctx<'_>, name: &str) -> Result<Reply, ApiError> {
    let opts = delete_options(&ctx.body, ctx.query)?;
    // An admission check, so it comes before existence and holds for dry
    // runs too.
    if ctx.res.builtin && ctx.res.kind == "Namespace" && IMMORTAL_NAMESPACES.contains(&name) {
        return Err(forbidden(
            "",
            "namespaces",
            name,
            "this namespace may not be deleted",
        ));
    }
    delete_one(ctx.server, &ctx.res, ctx.ns(), name, &opts).await
}

/// Deletes one object by the rules of kube-apiserver: preconditions, then
/// either removal, or marking with `deletionTimestamp` when finalizers (or
/// the requested propagation, or a pod's grace period) keep it around.
pub async fn delete_one(
    server: &Arc<Server>,
    res: &Arc<Resource>,
    ns: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Reply, ApiError> {
    let key = res.key(ns, name);
    for _ in 0..WRITE_RETRIES {
        let Some((cur, old)) = read(server, res, &key).await? else {
            return Err(ApiError::not_found(&res.group, &res.plural, name));
        };
        if let Some(uid) = &opts.uid
            && uid != object::uid(&old)
        {
            return Err(ApiError::conflict(
                &res.group,
                &res.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    object::uid(&old)
                ),
            ));
        }
        if let Some(rv) = &opts.resource_version
            && *rv != cur.mod_revision.to_string()
        {
            return Err(ApiError::conflict(
                &res.group,
                &res.plural,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    cur.mod_revision
                ),
            ));
        }
        let attrs = Attributes {
            operation: Operation::Delete,
            resource: res,
            subresource: None,
            namespace: ns,
            name,
            old: Some(&old),
            dry_run: opts.dry_run,
            user: crate::auth::current_user(),
        };
        for p in server.admission_plugins() {
            p.validate(&attrs, &old).await?;
        }
        let mut fins = object::finalizers(&old);
        let policy = opts.propagation.as_deref().unwrap_or("Background");
        let mut want = |f: &str, on: bool| {
            let has = fins.iter().any(|x| x == f);
            if on && !has {
                fins.push(f.to_string());
            } else if !on && has && !object::is_deleting(&old) {
                fins.retain(|x| x != f);
            }
        };
        want(crate::gc::ORPHAN, policy == "Orphan");
        want(crate::gc::FOREGROUND, policy == "Foreground");
        if res.builtin && res.kind == "CustomResourceDefinition" {
            want(crate::crd::CLEANUP_FINALIZER, true);
        }
        let namespace_lifecycle = res.builtin && res.kind == "Namespace";
        // A scheduled pod is deleted gracefully: its kubelet finishes it.
        let pod_grace =
            if res.builtin && res.kind == "Pod" && old.pointer("/spec/nodeName").is_some() {
                let default = old
                    .pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(30);
                opts.grace.unwrap_or(default).max(0)
            } else {
                0
            };
        let already = object::is_deleting(&old);
        let immediate = fins.is_empty() && !namespace_lifecycle && pod_grace == 0;
        if immediate {
            if opts.dry_run {
                return Ok(Reply::value(StatusCode::OK, &old));
            }
            match server.store.delete(&key, Some(cur.mod_revision)).await {
                Ok((_, _rev)) => return Ok(Reply::value(StatusCode::OK, &old)),
                Err(StoreError::Conflict(_)) => continue,
                Err(StoreError::NotFound) => {
                    return Err(ApiError::not_found(&res.group, &res.plural, name));
                }
                Err(e) => return Err(store_err(e)),
            }
        }
        let mut new = old.clone();
        object::set_finalizers(&mut new, &fins);
        if !already {
            let m = meta_mut(&mut new).expect("metadata");
            let ts = if pod_grace > 0 {
                (chrono::Utc::now() + chrono::Duration::seconds(pod_grace))
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            } else {
                object::now_rfc3339()
            };
            m.insert("deletionTimestamp".into(), json!(ts));
            m.insert("deletionGracePeriodSeconds".into(), json!(pod_grace));
            // kube bumps generation on graceful deletion only where the
            // kind has one.
            if let Some(g) = m.get("generation").and_then(Value::as_i64)
                && g > 0
            {
                m.insert("generation".into(), json!(g + 1));
            }
            if namespace_lifecycle {
                new["status"] = json!({"phase": "Terminating"});
                if new.pointer("/spec/finalizers").is_none() {
                    new["spec"] = json!({"finalizers": ["kubernetes"]});
                }
            }
        } else if pod_grace == 0 && fins.is_empty() && !namespace_lifecycle {
            // A second delete with grace 0 finishes a graceful pod deletion.
            match server.store.delete(&key, Some(cur.mod_revision)).await {
                Ok(_) => return Ok(Reply::value(StatusCode::OK, &old)),
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => return Err(store_err(e)),
            }
        }
        object::tidy(&mut new);
        if opts.dry_run {
            return Ok(Reply::value(StatusCode::OK, &new));
        }
        let stored = object::encode(&to_stored(res, new.clone()));
        if stored == cur.value {
            return Ok(Reply::json(
                StatusCode::OK,
                render(res, &cur.value, cur.mod_revision)?,
            ));
        }
        match server.store.update(&key, stored, cur.mod_revision).await {
            Ok(kv) => {
                return Ok(Reply::json(
                    StatusCode::OK,
                    render(res, &kv.value, kv.mod_revision)?,
                ));
            }
            Err(StoreError::Conflict(_)) => continue,
            Err(StoreError::NotFound) => {
                return Err(ApiError::not_found(&res.group, &res.plural, name));
            }
            Err(e) => return Err(store_err(e)),
        }
    }
    Err(ApiError::modified(&res.group, &res.plural, name))
}

async fn delete_collection(ctx: &Ctx<'_>) -> Result<Reply, ApiError> {
    let opts = delete_options(&ctx.body, ctx.query)?;
    let filter = filter_from_query(&ctx.res, ctx.ns(), ctx.query)?;
    let prefix = match ctx.ns() {
        Some(ns) => ctx.res.namespace_prefix(ns),
        None => ctx.res.prefix(),
    };
    let r = ctx
        .server
        .store
        .range(RangeRequest {
            prefix,
            ..Default::default()
        })
        .await
        .map_err(store_err)?;
    let mut items = Vec::new();
    for kv in r.kvs {
        let v = to_served(&ctx.res, object::decode(&kv.value, kv.mod_revision)?);
        if !filter.matches(&Summary::of(&v, &ctx.res.selectable_fields())) {
            continue;
        }
        let ns = object::meta_str(&v, "namespace").map(str::to_string);
        match delete_one(ctx.server, &ctx.res, ns.as_deref(), object::name(&v), &opts).await {
            Ok(_) => items.push(v),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({
        "kind": ctx.res.list_kind,
        "apiVersion": ctx.res.api_version(),
        "metadata": {"resourceVersion": ctx.server.store.current_revision().to_string()},
        "items": items,
    });
    Ok(Reply::value(StatusCode::OK, &list))
}

/// The namespace, label and field selection of a list or watch request.
pub fn filter_from_query(res: &Resource, ns: Option<&str>, q: &Query) -> Result<Filter, ApiError> {
    let labels = match q.get("labelSelector") {
        Some(s) => Some(LabelSelector::parse(s)?),
        None => None,
    };
    let fields = match q.get("fieldSelector") {
        Some(s) => {
            let f = FieldSelector::parse(s)?;
            f.validate_fields(&res.selectable_fields())?;
            Some(f)
        }
        None => None,
    };
    Ok(Filter {
        namespace: ns.map(str::to_string),
        labels,
        fields,
    })
}

/// Appends `{"type":T,"object":O}\n` to `out`.
pub fn watch_line(out: &mut BytesMut, ty: &str, object: &[u8]) {
    out.put_slice(b"{\"type\":\"");
    out.put_slice(ty.as_bytes());
    out.put_slice(b"\",\"object\":");
    out.put_slice(object);
    out.put_slice(b"}\n");
}

/// Object map helper for callers that build objects.
pub fn obj_map(v: &Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// Random duration for watches without a timeout: 30–60 minutes.
pub fn default_watch_timeout() -> Duration {
    use rand::Rng;
    Duration::from_secs(rand::rng().random_range(1800..3600))
}

/// Changes a stored object in place with `f` (metadata bookkeeping done by
/// the server's own controllers: finalizers, owner references, status),
/// retrying on concurrent changes. `f` returns whether it changed anything.
/// An object being deleted whose finalizers become empty is removed.
pub async fn mutate_stored(
    server: &Server,
    key: &str,
    f: impl Fn(&mut Value) -> bool,
) -> Result<(), ApiError> {
    for _ in 0..WRITE_RETRIES {
        let (kv, _) = server.store.get(key, None).await.map_err(store_err)?;
        let Some(kv) = kv else { return Ok(()) };
        let mut v: Value = serde_json::from_slice(&kv.value)
            .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))?;
        if !f(&mut v) {
            return Ok(());
        }
        object::tidy(&mut v);
        let result = if object::is_deleting(&v) && object::finalizers(&v).is_empty() {
            server
                .store
                .delete(key, Some(kv.mod_revision))
                .await
                .map(|_| ())
        } else {
            let bytes = object::encode(&v);
            if bytes == kv.value {
                return Ok(());
            }
            server
                .store
                .update(key, bytes, kv.mod_revision)
                .await
                .map(|_| ())
        };
        match result {
            Ok(()) => return Ok(()),
            Err(StoreError::Conflict(_)) => continue,
            Err(StoreError::NotFound) => return Ok(()),
            Err(e) => return Err(store_err(e)),
        }
    }
    Err(ApiError::internal(format!(
        "too many concurrent changes to {key}"
    )))
}
