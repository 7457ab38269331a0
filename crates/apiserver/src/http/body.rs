//! Request bodies: objects in JSON, YAML or a Kubernetes protobuf envelope,
//! and DeleteOptions from a body and the query.

use apimachinery::ApiError;
use serde_json::Value;

use crate::http::request::Query;
use crate::storage::DeleteOptions;

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
    let v: Value = if crate::http::protobuf::is_envelope(body) {
        crate::http::protobuf::decode_object(body)?
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

/// DeleteOptions from the body and the query.
pub fn delete_options(body: &[u8], q: &Query) -> Result<DeleteOptions, ApiError> {
    let mut o = DeleteOptions {
        dry_run: q.dry_run()?,
        ..Default::default()
    };
    if !body.is_empty() {
        // Typed client-go deletes (e.g. `kubectl drain --disable-eviction`)
        // send DeleteOptions in protobuf.
        let v: Value = if crate::http::protobuf::is_envelope(body) {
            crate::http::protobuf::decode_kind(body, "DeleteOptions")?
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
