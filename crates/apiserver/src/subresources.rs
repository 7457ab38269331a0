//! The scale and eviction subresources.
//!
//! Scale maps an `autoscaling/v1 Scale` onto the object's replica paths.
//! Eviction deletes a pod unless a PodDisruptionBudget forbids it, claiming
//! one allowed disruption atomically (and recording the pod as disrupted so
//! the disruption controller does not count it healthy meanwhile).

use apimachinery::selector::LabelSelector;
use apimachinery::{ApiError, Cause};
use http::{Method, StatusCode};
use serde_json::{Value, json};
use store::{RangeRequest, StoreError};

use crate::admission::Operation;
use crate::handlers::{
    Ctx, admit_and_validate, apply_patch, delete_one, merge_for_update, parse_body, read,
    store_err, write_over,
};
use crate::object;
use crate::registry::{Resource, ScalePaths};
use crate::server::Reply;

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
        let (_, obj) = read(ctx.server, &res, &key)
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
    for _ in 0..16 {
        let (cur, old) = read(ctx.server, &res, &key)
            .await?
            .ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
        let current = build_scale(&res, &paths, &old);
        let wanted = if *method == Method::PUT {
            parse_body(&ctx.body, &ct)?
        } else {
            let mut s = current.clone();
            // A Scale is a built-in shape: strategic merge is a plain merge here.
            let ct = if ct.starts_with("application/strategic-merge-patch") {
                "application/merge-patch+json"
            } else {
                ct.as_str()
            };
            apply_patch(&res, ct, &mut s, &ctx.body)?;
            s
        };
        if let Some(rv) = object::meta_str(&wanted, "resourceVersion")
            && !rv.is_empty()
            && rv != cur.mod_revision.to_string()
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
        let mut new = merge_for_update(&res, None, &old, new)?;
        admit_and_validate(
            ctx,
            Operation::Update,
            Some("scale"),
            name,
            &mut new,
            Some(&old),
        )
        .await?;
        match write_over(ctx, &key, &cur, new.clone(), dry_run).await? {
            Ok(_) => {
                let (_, latest) = read(ctx.server, &res, &key).await?.unwrap_or((cur, new));
                return Ok(Reply::value(
                    StatusCode::OK,
                    &build_scale(&res, &paths, &latest),
                ));
            }
            Err(_) => continue,
        }
    }
    Err(ApiError::modified(&res.group, &res.plural, name))
}

/// How long a pod stays in a budget's `disruptedPods` before the disruption
/// controller stops discounting it.
pub const DISRUPTED_POD_TIMEOUT_SECS: i64 = 120;

pub async fn evict(ctx: &Ctx<'_>, name: &str) -> Result<Reply, ApiError> {
    let res = ctx.res.clone();
    let ns = ctx
        .path
        .namespace
        .clone()
        .ok_or_else(|| ApiError::bad_request("eviction needs a namespace"))?;
    let body = if ctx.body.is_empty() {
        json!({})
    } else {
        parse_body(&ctx.body, "application/json")?
    };
    if let Some(n) = object::meta_str(&body, "name")
        && !n.is_empty()
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "name in URL does not match name in Eviction object: {name} != {n}"
        )));
    }
    let opts_body = body
        .get("deleteOptions")
        .map(|v| v.to_string())
        .unwrap_or_default();
    let mut opts = crate::handlers::delete_options(opts_body.as_bytes(), ctx.query)?;
    let key = res.key(Some(&ns), name);
    let (_, pod) = read(ctx.server, &res, &key)
        .await?
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let success = || {
        Reply::value(
            StatusCode::CREATED,
            &json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}),
        )
    };
    if object::is_deleting(&pod) {
        return Ok(success());
    }
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    let skip_budget = matches!(phase, "Pending" | "Succeeded" | "Failed");
    if !skip_budget {
        claim_disruption(ctx, &ns, name, &pod, opts.dry_run).await?;
    }
    if opts.dry_run {
        return Ok(success());
    }
    opts.dry_run = false;
    match delete_one(ctx.server, &res, Some(&ns), name, &opts).await {
        Ok(_) => Ok(success()),
        Err(e) => Err(e),
    }
}

async fn claim_disruption(
    ctx: &Ctx<'_>,
    ns: &str,
    pod_name: &str,
    pod: &Value,
    dry_run: bool,
) -> Result<(), ApiError> {
    let labels = object::meta(pod)
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for _ in 0..16 {
        let r = ctx
            .server
            .store
            .range(RangeRequest {
                prefix: format!("/registry/policy/poddisruptionbudgets/{ns}/"),
                ..Default::default()
            })
            .await
            .map_err(store_err)?;
        let mut matching = Vec::new();
        for kv in r.kvs {
            let Ok(pdb) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            let sel = pdb
                .pointer("/spec/selector")
                .cloned()
                .unwrap_or(Value::Null);
            if LabelSelector::from_json(&sel).is_ok_and(|s| s.matches(&labels)) {
                matching.push((kv, pdb));
            }
        }
        if matching.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        let Some((kv, mut pdb)) = matching.pop() else {
            return Ok(());
        };
        let pdb_name = object::name(&pdb).to_string();
        let refuse = |message: String| {
            let mut e = ApiError::too_many_requests(
                "Cannot evict pod as it would violate the pod's disruption budget.",
            );
            e.causes = vec![Cause::new("DisruptionBudget", "", message)];
            e.retry_after_seconds = Some(5);
            e
        };
        let generation = object::meta(&pdb)
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let observed = pdb
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64)
            .unwrap_or(-1);
        if observed < generation {
            return Err(refuse(format!(
                "The disruption budget {pdb_name} is still being processed by the server."
            )));
        }
        let allowed = pdb
            .pointer("/status/disruptionsAllowed")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if allowed < 1 {
            let desired = pdb
                .pointer("/status/desiredHealthy")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let current = pdb
                .pointer("/status/currentHealthy")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            return Err(refuse(format!(
                "The disruption budget {pdb_name} needs {desired} healthy pods and has {current} currently"
            )));
        }
        if dry_run {
            return Ok(());
        }
        pdb["status"]["disruptionsAllowed"] = json!(allowed - 1);
        let status = pdb
            .get_mut("status")
            .and_then(Value::as_object_mut)
            .expect("status is an object");
        let disrupted = status.entry("disruptedPods").or_insert_with(|| json!({}));
        if !disrupted.is_object() {
            *disrupted = json!({});
        }
        disrupted[pod_name] = json!(object::now_rfc3339());
        match ctx
            .server
            .store
            .update(&kv.key, object::encode(&pdb), kv.mod_revision)
            .await
        {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(store_err(e)),
        }
    }
    Err(ApiError::too_many_requests(
        "the disruption budget is changing too fast; retry",
    ))
}
