//! The eviction subresource of pods: the pod is deleted unless a
//! PodDisruptionBudget forbids it, claiming one allowed disruption
//! atomically (and recording the pod as disrupted so the disruption
//! controller does not count it healthy meanwhile).

use apimachinery::selector::LabelSelector;
use apimachinery::{ApiError, Cause};
use http::StatusCode;
use serde_json::{Value, json};
use store::StoreError;

use crate::admission::DeleteAdmission;
use crate::http::body::{delete_options, parse_body};
use crate::http::reply::Reply;
use crate::http::resource::Ctx;
use crate::object;
use crate::storage::{WRITE_RETRIES, codec, keys, store_err};

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
    let mut opts = delete_options(opts_body.as_bytes(), ctx.query)?;
    let key = res.key(Some(&ns), name);
    let (_, pod) = ctx
        .api
        .storage
        .read(&res, &key)
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
    let check = DeleteAdmission {
        chain: &ctx.api.admission,
        resource: &res,
        namespace: Some(&ns),
        name,
        dry_run: opts.dry_run,
    };
    match ctx
        .api
        .storage
        .delete(&res, Some(&ns), name, &opts, &check)
        .await
    {
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
    for _ in 0..WRITE_RETRIES {
        let kvs = ctx
            .api
            .storage
            .range(&keys::namespace_prefix(keys::POD_DISRUPTION_BUDGETS, ns))
            .await?;
        let mut matching = Vec::new();
        for kv in kvs {
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
            .api
            .storage
            .store()
            .update(&kv.key, codec::encode(&pdb), kv.mod_revision)
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
