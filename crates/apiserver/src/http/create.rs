//! POST on a collection: create an object (and the create half of PUT on a
//! missing object of a kind that allows it, and of server-side apply).
//! generateName picks a fresh name on collision; a terminating or missing
//! namespace refuses new content.

use apimachinery::{ApiError, Cause};
use http::StatusCode;
use serde_json::{Value, json};

use crate::admission::Operation;
use crate::http::admit::admit_and_validate;
use crate::http::body::parse_body;
use crate::http::reply::Reply;
use crate::http::resource::Ctx;
use crate::object::{self, meta_mut};
use crate::storage::{Created, Storage, check_size_early, keys};
use crate::strategy;

/// How many generated names are tried before a collision is reported.
const GENERATE_NAME_ATTEMPTS: usize = 8;

pub async fn create(ctx: &Ctx<'_>) -> Result<Reply, ApiError> {
    let obj = parse_body(&ctx.body, ctx.content_type())?;
    check_size_early(&obj, ctx.body.len())?;
    create_object(ctx, obj, None).await
}

/// Fails unless `ns` exists and is not terminating: the NamespaceLifecycle
/// admission check on creating `name` (empty for generateName) of `res`.
async fn ensure_namespace_open(
    storage: &Storage,
    res: &crate::storage::registry::Resource,
    ns: &str,
    name: &str,
) -> Result<(), ApiError> {
    let kv = storage
        .get(&keys::key(keys::NAMESPACES, None, ns))
        .await?
        .ok_or_else(|| ApiError::not_found("", "namespaces", ns))?;
    let v: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
    if strategy::namespace::is_terminating(&v) {
        return Err(strategy::namespace::terminating(res, ns, name));
    }
    Ok(())
}

/// Creates `obj`. Its managedFields are `applied_fields` when server-side
/// apply created it, else an Update entry for the request's field manager.
pub async fn create_object(
    ctx: &Ctx<'_>,
    mut obj: Value,
    applied_fields: Option<Value>,
) -> Result<Reply, ApiError> {
    let res = ctx.res.clone();
    let dry_run = ctx.query.dry_run()?;
    let manager = crate::http::fieldmanager::manager_for(ctx.query, ctx.headers)?;
    strategy::check_type_meta(&res, &mut obj)?;
    let ns = ctx.ns().map(str::to_string);
    strategy::prepare_for_create(&res, ns.as_deref(), &mut obj)?;
    if let Some(ns) = &ns {
        ensure_namespace_open(&ctx.api.storage, &res, ns, object::name(&obj)).await?;
    }
    strategy::prepare_new_content(&res, &mut obj);
    let generate = object::name(&obj).is_empty();
    let prefix = object::meta_str(&obj, "generateName")
        .unwrap_or_default()
        .to_string();
    if generate && prefix.is_empty() {
        let mut cause = Cause::required("metadata.name");
        cause.message = "name or generateName is required".to_string();
        return Err(ApiError::invalid(&res.group, &res.kind, "", vec![cause]));
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
            None => {
                crate::http::fieldmanager::record_update(&res, None, None, &mut candidate, &manager)
            }
        }
        match ctx
            .api
            .storage
            .create(&res, &ctx.key(&name), &candidate, dry_run)
            .await?
        {
            Created::Done(out) => {
                return Ok(Reply::output(StatusCode::CREATED, out).warnings(warnings));
            }
            Created::NameTaken if generate && attempt < GENERATE_NAME_ATTEMPTS => continue,
            Created::NameTaken => {
                return Err(ApiError::already_exists(&res.group, &res.plural, &name));
            }
        }
    }
    unreachable!("the create loop returns")
}
