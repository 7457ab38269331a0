//! `metav1.Status` errors as kube-apiserver sends them: an HTTP code, a
//! machine-readable reason, a message, and for invalid objects the causes with
//! field paths.

use serde::Serialize;
use serde_json::{Value, json};

/// One reason an object was rejected, tied to a field path such as
/// `spec.replicas` or `metadata.labels[app]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`,
    /// `FieldValueDuplicate`, `FieldValueForbidden`, `FieldValueTypeInvalid`,
    /// `FieldValueTooLong`, `FieldValueTooMany`, `FieldManagerConflict`...
    pub reason: String,
    pub message: String,
    pub field: String,
}

impl Cause {
    pub fn new(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Cause {
        Cause {
            reason: reason.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Cause {
        Cause::new("FieldValueInvalid", field, message)
    }
    pub fn required(field: impl Into<String>) -> Cause {
        Cause::new("FieldValueRequired", field, "Required value")
    }
}

/// An error answer of the API, rendered as a `metav1.Status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details.name`, `details.group`, `details.kind`.
    pub name: Option<String>,
    pub group: Option<String>,
    pub kind: Option<String>,
    pub causes: Vec<Cause>,
    pub retry_after_seconds: Option<u32>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
            retry_after_seconds: None,
        }
    }

    /// Sets `details.group`, `details.kind` (the resource, as kube-apiserver
    /// does for NotFound/AlreadyExists/Conflict) and `details.name`.
    pub fn with_details(mut self, group: &str, kind: &str, name: &str) -> ApiError {
        self.group = Some(group.to_string());
        self.kind = Some(kind.to_string());
        self.name = Some(name.to_string());
        self
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(401, "Unauthorized", message)
    }
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(403, "Forbidden", message)
    }
    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(405, "MethodNotAllowed", message)
    }
    pub fn not_acceptable(message: impl Into<String>) -> ApiError {
        ApiError::new(406, "NotAcceptable", message)
    }
    pub fn gone(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }
    pub fn request_entity_too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(413, "RequestEntityTooLarge", message)
    }
    pub fn unsupported_media_type(message: impl Into<String>) -> ApiError {
        ApiError::new(415, "UnsupportedMediaType", message)
    }
    pub fn too_many_requests(message: impl Into<String>) -> ApiError {
        ApiError::new(429, "TooManyRequests", message)
    }
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }
    pub fn service_unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "ServiceUnavailable", message)
    }

    /// `<resource>.<group> "<name>" not found`, as kube-apiserver words it.
    pub fn not_found(group: &str, resource: &str, name: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", qualified(group, resource), name),
        )
        .with_details(group, resource, name)
    }

    pub fn already_exists(group: &str, resource: &str, name: &str) -> ApiError {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", qualified(group, resource), name),
        )
        .with_details(group, resource, name)
    }

    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                qualified(group, resource),
                name,
                why
            ),
        )
        .with_details(group, resource, name)
    }

    /// The standard optimistic-concurrency conflict.
    pub fn modified(group: &str, resource: &str, name: &str) -> ApiError {
        ApiError::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid: `<Kind>.<group> "<name>" is invalid: <field>: <message>, ...`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> ApiError {
        let summary = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect::<Vec<_>>();
        let summary = if summary.len() == 1 {
            summary[0].clone()
        } else {
            format!("[{}]", summary.join(", "))
        };
        let mut e = ApiError::new(
            422,
            "Invalid",
            format!(
                "{} \"{}\" is invalid: {}",
                qualified(group, kind),
                name,
                summary
            ),
        )
        .with_details(group, kind, name);
        e.causes = causes;
        e
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut details = serde_json::Map::new();
        if let Some(n) = &self.name {
            details.insert("name".into(), json!(n));
        }
        if let Some(g) = &self.group {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = &self.kind {
            details.insert("kind".into(), json!(k));
        }
        if !self.causes.is_empty() {
            details.insert("causes".into(), json!(self.causes));
        }
        if let Some(r) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), json!(r));
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// A successful `metav1.Status`, as returned by some deletes.
pub fn success_status(details: Option<Value>) -> Value {
    let mut s = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
    });
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_lists_causes_with_fields() {
        let e = ApiError::invalid(
            "apps",
            "Deployment",
            "web",
            vec![Cause::invalid(
                "spec.replicas",
                "must be greater than or equal to 0",
            )],
        );
        let s = e.to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["reason"], "Invalid");
        assert_eq!(s["details"]["causes"][0]["field"], "spec.replicas");
        assert_eq!(
            s["message"],
            "Deployment.apps \"web\" is invalid: spec.replicas: must be greater than or equal to 0"
        );
    }

    #[test]
    fn not_found_names_core_resources_without_group() {
        let s = ApiError::not_found("", "pods", "p1").to_status();
        assert_eq!(s["message"], "pods \"p1\" not found");
        assert_eq!(s["details"]["kind"], "pods");
    }
}
