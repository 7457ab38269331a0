//! Server-side apply (`application/apply-patch+yaml`), in its first form: the
//! applied configuration creates the object when it is missing and is merged
//! onto it otherwise. Field ownership (managedFields, conflicts between
//! managers, force) comes with the kubectl compatibility work.

use apimachinery::ApiError;
use bytes::Bytes;
use serde_json::Value;

use crate::admission::Operation;
use crate::handlers::{
    Ctx, admit_and_validate, check_type_meta, create, merge_for_update, parse_body, read,
    write_over,
};
use crate::object;
use crate::server::Reply;

pub async fn server_side_apply(
    ctx: &Ctx<'_>,
    name: &str,
    sub: Option<&str>,
) -> Result<Reply, ApiError> {
    let res = ctx.res.clone();
    if ctx.query.get("fieldManager").is_none() {
        return Err(ApiError::bad_request(
            "PATCH, application/apply-patch+yaml requests must supply a fieldManager",
        ));
    }
    let dry_run = ctx.query.dry_run()?;
    let mut applied = parse_body(&ctx.body, "application/yaml")?;
    check_type_meta(&res, &mut applied)?;
    if object::name(&applied) != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            object::name(&applied)
        )));
    }
    let key = res.key(
        ctx.path.namespace.as_deref().filter(|_| res.namespaced),
        name,
    );
    for _ in 0..16 {
        let Some((cur, old)) = read(ctx.server, &res, &key).await? else {
            if sub.is_some() {
                return Err(ApiError::not_found(&res.group, &res.plural, name));
            }
            let create_ctx = Ctx {
                server: ctx.server,
                res: res.clone(),
                path: ctx.path,
                query: ctx.query,
                headers: ctx.headers,
                body: Bytes::from(serde_json::to_vec(&applied).unwrap_or_default()),
            };
            return create(&create_ctx).await;
        };
        if let Some(rv) = object::meta_str(&applied, "resourceVersion")
            && !rv.is_empty()
            && rv != cur.mod_revision.to_string()
        {
            return Err(ApiError::modified(&res.group, &res.plural, name));
        }
        let mut merged = old.clone();
        let mut patch = applied.clone();
        if let Some(m) = object::meta_mut(&mut patch) {
            m.remove("resourceVersion");
        }
        apimachinery::patch::merge_patch(&mut merged, &strip_nulls(patch));
        let mut new = merge_for_update(&res, sub, &old, merged)?;
        let warnings =
            admit_and_validate(ctx, Operation::Update, sub, name, &mut new, Some(&old)).await?;
        match write_over(ctx, &key, &cur, new, dry_run).await? {
            Ok(reply) => return Ok(reply.warnings(warnings)),
            Err(_) => continue,
        }
    }
    Err(ApiError::modified(&res.group, &res.plural, name))
}

/// An applied configuration never deletes by `null`.
fn strip_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        other => other,
    }
}
