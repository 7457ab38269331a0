//! PUT of an object (and of its `/status` and, for kinds that serve it,
//! `/finalize`): a resourceVersion in the body is a precondition (custom
//! resources require one), a missing object is created where the kind
//! allows it, and the write is the storage layer's compare-and-swap loop,
//! retried while no precondition was given.

use apimachinery::{ApiError, Cause};
use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use crate::admission::Operation;
use crate::http::admit::admit_and_validate;
use crate::http::body::parse_body;
use crate::http::create;
use crate::http::reply::Reply;
use crate::http::resource::Ctx;
use crate::object::{self, meta_mut};
use crate::storage::{Current, UpdateStep, Updated, check_size_early};
use crate::strategy;

/// The resourceVersion an object carries, as a precondition.
pub(crate) fn rv_of(obj: &Value) -> Option<String> {
    object::meta_str(obj, "resourceVersion")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

pub async fn update(ctx: &Ctx<'_>, name: &str, sub: Option<&str>) -> Result<Reply, ApiError> {
    let res = ctx.res.clone();
    let dry_run = ctx.query.dry_run()?;
    let mut incoming = parse_body(&ctx.body, ctx.content_type())?;
    check_size_early(&incoming, ctx.body.len())?;
    strategy::check_type_meta(&res, &mut incoming)?;
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
    let manager = crate::http::fieldmanager::manager_for(ctx.query, ctx.headers)?;
    let (res_ref, incoming_ref, manager_ref, client_rv_ref) =
        (&res, &incoming, &manager, &client_rv);
    let updated = ctx
        .api
        .storage
        .update(
            &res,
            &key,
            name,
            dry_run,
            client_rv.is_none(),
            |cur: Current, old| -> UpdateStep<'_, Vec<String>> {
                let (res, incoming, manager, client_rv) =
                    (res_ref, incoming_ref, manager_ref, client_rv_ref);
                Box::pin(async move {
                    match client_rv {
                        Some(rv) if *rv != cur.revision.to_string() => {
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
                    let mut new = strategy::prepare_for_update(res, sub, &old, incoming.clone())?;
                    let warnings =
                        admit_and_validate(ctx, Operation::Update, sub, name, &mut new, Some(&old))
                            .await?;
                    crate::http::fieldmanager::record_update(
                        res,
                        sub,
                        Some(&old),
                        &mut new,
                        manager,
                    );
                    Ok((new, warnings))
                })
            },
        )
        .await?;
    match updated {
        Updated::Written(out, warnings) => {
            Ok(Reply::output(StatusCode::OK, out).warnings(warnings))
        }
        Updated::Missing if sub.is_none() && res.strategy.create_on_update() => {
            let mut body = incoming.clone();
            meta_mut(&mut body)
                .expect("metadata")
                .insert("name".into(), json!(name));
            let create_ctx = Ctx {
                api: ctx.api,
                res: res.clone(),
                path: ctx.path,
                query: ctx.query,
                headers: ctx.headers,
                body: Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
                raw_query: ctx.raw_query,
            };
            create::create(&create_ctx).await
        }
        Updated::Missing => Err(ctx.not_found(name)),
    }
}
