//! The audit log (`--audit-log FILE`, off by default): one JSON line per
//! mutating request, written after the response is decided, with who asked
//! (and who they impersonated), what they asked for, and the response code.
//! Denied and failed requests are logged too; reads are not.

use crate::error::Error;
use std::io::Write;
use std::path::Path;

use axum::body::Body;
use axum::response::Response;
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::auth::Gate;

pub struct AuditLog {
    file: Mutex<std::fs::File>,
}

impl AuditLog {
    /// Opens `path` for appending, creating it (mode 0600: it names users).
    pub fn open(path: &Path) -> Result<AuditLog, Error> {
        let mut opts = std::fs::OpenOptions::new();
        opts.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let file = opts
            .open(path)
            .map_err(|source| Error::AuditLogOpenFailed {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(AuditLog {
            file: Mutex::new(file),
        })
    }

    /// Appends one event. A failed write is logged, never failing the request.
    fn write(&self, event: &Value) {
        let mut line = event.to_string();
        line.push('\n');
        if let Err(e) = self.file.lock().write_all(line.as_bytes()) {
            tracing::warn!(error = %e, "writing the audit log failed");
        }
    }
}

/// Records the request if it was a mutating one. Creates name their object
/// only in the response, so a successful create's JSON body is read back
/// for the name (and passed on unchanged).
pub async fn record(log: &AuditLog, gate: &Gate, user_agent: &str, response: Response) -> Response {
    let Some(a) = &gate.attrs else {
        return response;
    };
    if !a.is_mutating() {
        return response;
    }
    let code = response.status().as_u16();
    let mut name = a.name.clone();
    let response = if name.is_empty() && a.verb == "create" && response.status().is_success() {
        let (parts, body) = response.into_parts();
        match axum::body::to_bytes(body, crate::http::MAX_BODY_BYTES * 2).await {
            Ok(bytes) => {
                if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                    name = crate::object::name(&v).to_string();
                }
                Response::from_parts(parts, Body::from(bytes))
            }
            Err(_) => Response::from_parts(parts, Body::empty()),
        }
    } else {
        response
    };
    let (user, groups) = match (&gate.impersonator, &gate.user) {
        (Some(by), _) => (by.username.clone(), by.groups.clone()),
        (None, Some(u)) => (u.username.clone(), u.groups.clone()),
        (None, None) => (String::new(), Vec::new()),
    };
    let mut event = json!({
        "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "user": user,
        "groups": groups,
        "verb": a.verb,
        "group": a.api_group,
        "resource": a.resource,
        "subresource": a.subresource,
        "namespace": a.namespace,
        "name": name,
        "code": code,
        "userAgent": user_agent,
    });
    if !a.resource_request {
        event["path"] = json!(a.path);
    }
    if gate.impersonator.is_some()
        && let Some(u) = &gate.user
    {
        event["impersonatedUser"] = json!(u.username);
        event["impersonatedGroups"] = json!(u.groups);
    }
    log.write(&event);
    response
}
