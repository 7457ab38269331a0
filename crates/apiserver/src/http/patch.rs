//! PATCH of an object (and of its `/status`): JSON merge patch, JSON patch
//! and strategic merge patch (built-in kinds only) applied to the current
//! state, then the same update path as PUT; `application/apply-patch+yaml`
//! is server-side apply ([`crate::http::apply`]).

use apimachinery::ApiError;
use http::StatusCode;

use crate::admission::Operation;
use crate::http::admit::admit_and_validate;
use crate::http::reply::Reply;
use crate::http::resource::Ctx;
use crate::http::update::rv_of;
use crate::object;
use crate::storage::registry::Resource;
use crate::storage::{Current, UpdateStep, Updated, check_size_early};
use crate::strategy;
use serde_json::Value;

/// Most operations in one JSON patch (kube-apiserver's limit).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

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
            crate::http::smp::strategic_merge(res, target, &p)
        }
        _ => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json; got {content_type:?}"
        ))),
    }
}

pub async fn patch(ctx: &Ctx<'_>, name: &str, sub: Option<&str>) -> Result<Reply, ApiError> {
    let res = ctx.res.clone();
    let dry_run = ctx.query.dry_run()?;
    let key = ctx.key(name);
    if ctx.body.len() > crate::http::MAX_BODY_BYTES {
        return Err(ApiError::request_entity_too_large("the patch is too large"));
    }
    let ct = ctx.content_type().to_string();
    if ct.starts_with("application/apply-patch") {
        return crate::http::apply::server_side_apply(ctx, name, sub).await;
    }
    if ctx.query.flag("force") {
        return Err(ApiError::bad_request(
            "force: Invalid value: true: may not be specified for non-apply patch",
        ));
    }
    let manager = crate::http::fieldmanager::manager_for(ctx.query, ctx.headers)?;
    let (res_ref, ct_ref, manager_ref) = (&res, &ct, &manager);
    let updated = ctx
        .api
        .storage
        .update(
            &res,
            &key,
            name,
            dry_run,
            true,
            |cur: Current, old| -> UpdateStep<'_, Vec<String>> {
                let (res, ct, manager) = (res_ref, ct_ref, manager_ref);
                Box::pin(async move {
                    let mut patched = old.clone();
                    apply_patch(res, ct, &mut patched, &ctx.body)?;
                    if !patched.is_object() {
                        return Err(ApiError::bad_request("the patch must leave an object"));
                    }
                    check_size_early(&patched, ctx.body.len() + cur.stored_bytes)?;
                    strategy::check_type_meta(res, &mut patched)?;
                    // A resourceVersion left in the patched object is a
                    // precondition; one the patch removed (kubectl's 3-way
                    // patches null it) is none.
                    let precondition = rv_of(&patched);
                    if precondition.is_some_and(|rv| rv != cur.revision.to_string()) {
                        return Err(ApiError::modified(&res.group, &res.plural, name));
                    }
                    if object::name(&patched) != name {
                        return Err(ApiError::bad_request(format!(
                            "the name of the object ({}) does not match the name on the URL ({name})",
                            object::name(&patched)
                        )));
                    }
                    let mut new = strategy::prepare_for_update(res, sub, &old, patched)?;
                    let warnings =
                        admit_and_validate(ctx, Operation::Update, sub, name, &mut new, Some(&old))
                            .await?;
                    crate::http::fieldmanager::record_update(res, sub, Some(&old), &mut new, manager);
                    Ok((new, warnings))
                })
            },
        )
        .await?;
    match updated {
        Updated::Written(out, warnings) => {
            Ok(Reply::output(StatusCode::OK, out).warnings(warnings))
        }
        Updated::Missing => Err(ctx.not_found(name)),
    }
}
