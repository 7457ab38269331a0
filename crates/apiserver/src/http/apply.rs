//! Server-side apply (`PATCH` with `application/apply-patch+yaml`): the
//! request names a field manager and carries the manager's whole intent for
//! the object, as YAML or JSON. [`crate::http::fieldmanager::apply`] merges it
//! into the live object and settles ownership; this module is the HTTP
//! flow around it: checks on the applied configuration, create when the
//! object is missing, then the same update path (immutable metadata,
//! admission, validation, compare-and-swap) as every other write.

use apimachinery::ApiError;
use serde_json::{Map, Value, json};

use crate::admission::Operation;
use crate::http::admit::admit_and_validate;
use crate::http::create::create_object;
use crate::http::reply::Reply;
use crate::http::resource::Ctx;
use crate::object;
use crate::storage::{Current, UpdateStep, Updated, check_size_early};
use crate::strategy;
use http::StatusCode;

pub async fn server_side_apply(
    ctx: &Ctx<'_>,
    name: &str,
    sub: Option<&str>,
) -> Result<Reply, ApiError> {
    let res = ctx.res.clone();
    let Some(manager) = ctx.query.get("fieldManager") else {
        return Err(ApiError::bad_request(
            "PATCH, application/apply-patch+yaml requests must supply a fieldManager",
        ));
    };
    crate::http::fieldmanager::validate_manager(manager)?;
    let force = ctx.query.flag("force");
    let dry_run = ctx.query.dry_run()?;
    let applied = parse_applied(&ctx.body)?;
    check_size_early(&applied, ctx.body.len())?;
    check_applied(ctx, &applied, name)?;
    let ns = ctx.path.namespace.as_deref().filter(|_| res.namespaced);
    let key = res.key(ns, name);
    // What a missing object is built from.
    let mut skeleton = json!({
        "apiVersion": res.api_version(),
        "kind": res.kind,
        "metadata": {"name": name},
    });
    if let Some(ns) = ns {
        skeleton["metadata"]["namespace"] = json!(ns);
    }
    let (res_ref, skeleton_ref, applied_ref) = (&res, &skeleton, &applied);
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
                let (res, skeleton, applied) = (res_ref, skeleton_ref, applied_ref);
                Box::pin(async move {
                    if let Some(rv) = object::meta_str(applied, "resourceVersion")
                        && !rv.is_empty()
                        && rv != cur.revision.to_string()
                    {
                        return Err(ApiError::modified(&res.group, &res.plural, name));
                    }
                    let mut merged = crate::http::fieldmanager::apply(
                        res,
                        sub,
                        Some(&old),
                        skeleton,
                        applied,
                        manager,
                        force,
                    )?
                    .object;
                    let fields =
                        object::meta_mut(&mut merged).and_then(|m| m.remove("managedFields"));
                    let mut new = strategy::prepare_for_update(res, sub, &old, merged)?;
                    let warnings =
                        admit_and_validate(ctx, Operation::Update, sub, name, &mut new, Some(&old))
                            .await?;
                    if let Some(m) = object::meta_mut(&mut new) {
                        match fields {
                            Some(f) => m.insert("managedFields".into(), f),
                            None => m.remove("managedFields"),
                        };
                    }
                    Ok((new, warnings))
                })
            },
        )
        .await?;
    match updated {
        Updated::Written(out, warnings) => {
            Ok(Reply::output(StatusCode::OK, out).warnings(warnings))
        }
        Updated::Missing if sub.is_some() => {
            Err(ApiError::not_found(&res.group, &res.plural, name))
        }
        Updated::Missing => {
            let mut created = crate::http::fieldmanager::apply(
                &res, None, None, &skeleton, &applied, manager, force,
            )?
            .object;
            let fields = object::meta_mut(&mut created)
                .and_then(|m| m.remove("managedFields"))
                .unwrap_or_else(|| json!([]));
            create_object(ctx, created, Some(fields)).await
        }
    }
}

/// The applied configuration: one YAML (or JSON, which YAML includes)
/// object.
fn parse_applied(body: &[u8]) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    let v: Value = serde_yaml::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    match v {
        Value::Object(_) => Ok(v),
        _ => Err(ApiError::bad_request(
            "the applied configuration must be an object",
        )),
    }
}

/// kube-apiserver's checks on an applied configuration: it names the
/// served apiVersion and kind, this object, and leaves managedFields alone.
fn check_applied(ctx: &Ctx<'_>, applied: &Value, name: &str) -> Result<(), ApiError> {
    let res = &ctx.res;
    let str_of = |k: &str| applied.get(k).and_then(Value::as_str).unwrap_or("");
    let expected = res.api_version();
    if str_of("apiVersion") != expected {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {}, expected: {expected}",
            str_of("apiVersion")
        )));
    }
    if str_of("kind") != res.kind {
        return Err(ApiError::bad_request(format!(
            "Incorrect kind specified in apply patch. Specified patch kind: {:?}, expected: {}",
            str_of("kind"),
            res.kind
        )));
    }
    let meta = match applied.get("metadata") {
        None | Some(Value::Null) => &Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(ApiError::bad_request("metadata must be an object")),
    };
    let meta_str = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or("");
    if !meta_str("name").is_empty() && meta_str("name") != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            meta_str("name")
        )));
    }
    if res.namespaced
        && !meta_str("namespace").is_empty()
        && Some(meta_str("namespace")) != ctx.path.namespace.as_deref()
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if meta.get("managedFields").is_some_and(|v| !v.is_null()) {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    Ok(())
}
