//! The scale subresource: an `autoscaling/v1 Scale` mapped onto the
//! object's replica paths (GET, PUT and PATCH, through the storage layer's
//! compare-and-swap loop).

use apimachinery::selector::LabelSelector;
use apimachinery::{ApiError, Cause};
use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::admission::Operation;
use crate::http::admit::admit_and_validate;
use crate::http::body::parse_body;
use crate::http::patch::apply_patch;
use crate::http::reply::Reply;
use crate::http::resource::Ctx;
use crate::object;
use crate::storage::registry::{Resource, ScalePaths};
use crate::storage::{Current, UpdateStep, Updated};
use crate::strategy;

/// `.spec.replicas` → `/spec/replicas`.
fn pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |mut acc, seg| {
            acc.push('/');
            acc.push_str(seg);
            acc
        })
}

fn set_at(obj: &mut Value, path: &str, v: Value) {
    let mut cur = obj;
    let segs: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    for (i, seg) in segs.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let m = cur.as_object_mut().expect("made an object");
        if i == segs.len() - 1 {
            m.insert(seg.to_string(), v);
            return;
        }
        cur = m.entry(seg.to_string()).or_insert_with(|| json!({}));
    }
}

fn build_scale(res: &Resource, paths: &ScalePaths, obj: &Value) -> Value {
    let spec = obj
        .pointer(&pointer(&paths.spec_replicas))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let status = obj
        .pointer(&pointer(&paths.status_replicas))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let selector = paths.label_selector.as_ref().and_then(|p| {
        let v = obj.pointer(&pointer(p))?;
        if paths.selector_is_structured {
            LabelSelector::from_json(v).ok().map(|s| s.to_string())
        } else {
            v.as_str().map(str::to_string)
        }
    });
    let m = object::meta(obj).cloned().unwrap_or_default();
    let mut meta = json!({});
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = m.get(f) {
            meta[f] = v.clone();
        }
    }
    let mut status_obj = json!({"replicas": status});
    if let Some(s) = selector {
        status_obj["selector"] = json!(s);
    }
    let _ = res;
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": {"replicas": spec},
        "status": status_obj,
    })
}

pub async fn scale(ctx: &Ctx<'_>, name: &str, method: &Method) -> Result<Reply, ApiError> {
    let res = ctx.res.clone();
    let paths = res
        .scale
        .clone()
        .ok_or_else(|| ApiError::new(404, "NotFound", "no scale subresource"))?;
    let key = res.key(
        ctx.path.namespace.as_deref().filter(|_| res.namespaced),
        name,
    );
    let dry_run = ctx.query.dry_run()?;
    if *method == Method::GET {
        let (_, obj) = ctx
            .api
            .storage
            .read(&res, &key)
            .await?
            .ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
        return Ok(Reply::value(
            StatusCode::OK,
            &build_scale(&res, &paths, &obj),
        ));
    }
    if *method != Method::PUT && *method != Method::PATCH {
        return Err(ApiError::method_not_allowed(
            "scale supports get, update and patch",
        ));
    }
    let ct = ctx
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let (res_ref, paths_ref, ct_ref) = (&res, &paths, &ct);
    let updated = ctx
        .api
        .storage
        .update(
            &res,
            &key,
            name,
            dry_run,
            true,
            |cur: Current, old| -> UpdateStep<'_, Value> {
                let (res, paths, ct) = (res_ref, paths_ref, ct_ref);
                Box::pin(async move {
                    let current = build_scale(res, paths, &old);
                    let wanted = if *method == Method::PUT {
                        parse_body(&ctx.body, ct)?
                    } else {
                        let mut s = current.clone();
                        // A Scale is a built-in shape: strategic merge is a
                        // plain merge here.
                        let ct = if ct.starts_with("application/strategic-merge-patch") {
                            "application/merge-patch+json"
                        } else {
                            ct.as_str()
                        };
                        apply_patch(res, ct, &mut s, &ctx.body)?;
                        s
                    };
                    if let Some(rv) = object::meta_str(&wanted, "resourceVersion")
                        && !rv.is_empty()
                        && rv != cur.revision.to_string()
                    {
                        return Err(ApiError::modified(&res.group, &res.plural, name));
                    }
                    let replicas = match wanted.pointer("/spec/replicas") {
                        Some(v) => v.as_i64().filter(|r| *r >= 0 && *r <= i32::MAX as i64),
                        None => Some(0),
                    };
                    let Some(replicas) = replicas else {
                        return Err(ApiError::invalid(
                            "autoscaling",
                            "Scale",
                            name,
                            vec![Cause::invalid(
                                "spec.replicas",
                                "must be a non-negative integer",
                            )],
                        ));
                    };
                    let mut new = old.clone();
                    set_at(&mut new, &paths.spec_replicas, json!(replicas));
                    let mut new = strategy::prepare_for_update(res, None, &old, new)?;
                    admit_and_validate(
                        ctx,
                        Operation::Update,
                        Some("scale"),
                        name,
                        &mut new,
                        Some(&old),
                    )
                    .await?;
                    Ok((new.clone(), new))
                })
            },
        )
        .await?;
    let Updated::Written(_, new) = updated else {
        return Err(ApiError::not_found(&res.group, &res.plural, name));
    };
    let latest = match ctx.api.storage.read(&res, &key).await? {
        Some((_, latest)) => latest,
        None => new,
    };
    Ok(Reply::value(
        StatusCode::OK,
        &build_scale(&res, &paths, &latest),
    ))
}
