//! POST `pods/{name}/binding`: a scheduler assigns a pod to a node. The
//! pod's `spec.nodeName` is set once (a pod already assigned, or being
//! deleted, is a 409 as in kube-apiserver) and its `PodScheduled`
//! condition turns True.

use apimachinery::{ApiError, Cause};
use http::StatusCode;
use serde_json::{Value, json};

use crate::http::body::parse_body;
use crate::http::reply::Reply;
use crate::http::resource::Ctx;
use crate::object;

/// The node a Binding names, or the field causes of a bad one.
pub fn target_node(binding: &Value) -> Result<String, Vec<Cause>> {
    let kind = binding
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut causes = Vec::new();
    if !kind.is_empty() && kind != "Node" {
        causes.push(Cause::new(
            "FieldValueNotSupported",
            "target.kind",
            format!("Unsupported value: \"{kind}\": supported values: \"Node\""),
        ));
    }
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        causes.push(Cause::required("target.name"));
    }
    if causes.is_empty() {
        Ok(node.to_string())
    } else {
        Err(causes)
    }
}

/// Assigns `pod` (the stored form) to `node`, or says why it cannot be.
pub fn assign(pod: &mut Value, name: &str, node: &str, now: &str) -> Result<(), ApiError> {
    if object::is_deleting(pod) {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!("pod {name} is being deleted, cannot be assigned to a host"),
        ));
    }
    if let Some(current) = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!("pod {name} is already assigned to node \"{current}\""),
        ));
    }
    pod["spec"]["nodeName"] = json!(node);
    let scheduled = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                           "lastTransitionTime": now});
    let conditions = pod
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut);
    match conditions {
        Some(list) => {
            list.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
            list.push(scheduled);
        }
        None => {
            if !pod.get("status").is_some_and(Value::is_object) {
                pod["status"] = json!({});
            }
            pod["status"]["conditions"] = json!([scheduled]);
        }
    }
    Ok(())
}

pub async fn bind(ctx: &Ctx<'_>, name: &str) -> Result<Reply, ApiError> {
    let binding = parse_body(&ctx.body, ctx.content_type())?;
    let node =
        target_node(&binding).map_err(|causes| ApiError::invalid("", "Binding", name, causes))?;
    let key = ctx.key(name);
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    // The closure cannot return an error: it records why it refused.
    let refused = std::sync::Mutex::new(None);
    let found = std::sync::atomic::AtomicBool::new(false);
    ctx.api
        .storage
        .mutate(&key, |pod| {
            found.store(true, std::sync::atomic::Ordering::Relaxed);
            match assign(pod, name, &node, &now) {
                Ok(()) => true,
                Err(e) => {
                    *refused.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    false
                }
            }
        })
        .await?;
    if !found.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(ctx.not_found(name));
    }
    if let Some(e) = refused.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    Ok(Reply::value(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_names_a_node() {
        assert_eq!(
            target_node(&json!({"target": {"kind": "Node", "name": "n1"}})).unwrap(),
            "n1"
        );
        assert_eq!(
            target_node(&json!({"target": {"name": "n1"}})).unwrap(),
            "n1"
        );
        let causes = target_node(&json!({"target": {"kind": "Pod"}})).unwrap_err();
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["target.kind", "target.name"]);
    }

    #[test]
    fn a_pod_is_assigned_once_and_marked_scheduled() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": []},
                             "status": {"phase": "Pending",
                                        "conditions": [{"type": "PodScheduled", "status": "False"}]}});
        assign(&mut pod, "p", "n1", "2026-01-01T00:00:00Z").unwrap();
        assert_eq!(pod["spec"]["nodeName"], "n1");
        let conditions = pod["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0]["status"], "True");
        let e = assign(&mut pod, "p", "n2", "t").unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(e.message, "pod p is already assigned to node \"n1\"");
        let mut deleting = json!({"metadata": {"name": "q", "deletionTimestamp": "t"},
                                  "spec": {}});
        assert_eq!(assign(&mut deleting, "q", "n1", "t").unwrap_err().code, 409);
        let mut bare = json!({"metadata": {"name": "r"}, "spec": {}});
        assign(&mut bare, "r", "n1", "t").unwrap();
        assert_eq!(bare["status"]["conditions"][0]["type"], "PodScheduled");
    }
}
