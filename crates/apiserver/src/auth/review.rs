//! The create-only virtual resources that answer questions about identity
//! and access instead of storing anything: authorization.k8s.io/v1
//! SubjectAccessReview, SelfSubjectAccessReview, LocalSubjectAccessReview and
//! SelfSubjectRulesReview (`kubectl auth can-i`, `--list`),
//! authentication.k8s.io/v1 SelfSubjectReview (`kubectl auth whoami`) and
//! TokenReview, and the ServiceAccount `token` subresource (TokenRequest,
//! `kubectl create token`). Each returns the posted object with its status.

use std::collections::BTreeMap;

use apimachinery::{ApiError, Cause};
use axum::body::Body;
use http::{Method, Request, StatusCode};
use serde_json::{Value, json};

use super::Auth;
use super::{RequestAttributes, UserInfo};
use crate::http::request::{Target, parse_path};
use crate::http::{MAX_BODY_BYTES, Reply};
use crate::storage::Storage;

const AUTHZ: &str = "authorization.k8s.io";
const AUTHN: &str = "authentication.k8s.io";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VirtualKind {
    SubjectAccessReview,
    SelfSubjectAccessReview,
    LocalSubjectAccessReview { namespace: String },
    SelfSubjectRulesReview,
    SelfSubjectReview,
    TokenReview,
    TokenRequest { namespace: String, name: String },
}

impl VirtualKind {
    pub fn of(path: &str) -> Option<VirtualKind> {
        let Some(Target::Resource(p)) = parse_path(path) else {
            return None;
        };
        if p.version != "v1" {
            return None;
        }
        let cluster = p.namespace.is_none() && p.name.is_none();
        Some(match (p.group.as_str(), p.resource.as_str()) {
            (AUTHZ, "subjectaccessreviews") if cluster => VirtualKind::SubjectAccessReview,
            (AUTHZ, "selfsubjectaccessreviews") if cluster => VirtualKind::SelfSubjectAccessReview,
            (AUTHZ, "selfsubjectrulesreviews") if cluster => VirtualKind::SelfSubjectRulesReview,
            (AUTHZ, "localsubjectaccessreviews") if p.name.is_none() => {
                VirtualKind::LocalSubjectAccessReview {
                    namespace: p.namespace.clone()?,
                }
            }
            (AUTHN, "selfsubjectreviews") if cluster => VirtualKind::SelfSubjectReview,
            (AUTHN, "tokenreviews") if cluster => VirtualKind::TokenReview,
            ("", "serviceaccounts") if p.subresource.as_deref() == Some("token") => {
                VirtualKind::TokenRequest {
                    namespace: p.namespace.clone()?,
                    name: p.name.clone()?,
                }
            }
            _ => return None,
        })
    }

    fn kind(&self) -> &'static str {
        match self {
            VirtualKind::SubjectAccessReview => "SubjectAccessReview",
            VirtualKind::SelfSubjectAccessReview => "SelfSubjectAccessReview",
            VirtualKind::LocalSubjectAccessReview { .. } => "LocalSubjectAccessReview",
            VirtualKind::SelfSubjectRulesReview => "SelfSubjectRulesReview",
            VirtualKind::SelfSubjectReview => "SelfSubjectReview",
            VirtualKind::TokenReview => "TokenReview",
            VirtualKind::TokenRequest { .. } => "TokenRequest",
        }
    }

    fn group(&self) -> &'static str {
        match self {
            VirtualKind::SelfSubjectReview
            | VirtualKind::TokenReview
            | VirtualKind::TokenRequest { .. } => AUTHN,
            _ => AUTHZ,
        }
    }
}

/// Answers one POST to a virtual resource for `user` (`None` when
/// authentication is off: everything is allowed then).
pub async fn serve(
    auth: Option<&Auth>,
    storage: &Storage,
    kind: VirtualKind,
    user: Option<&UserInfo>,
    req: Request<Body>,
) -> Result<Reply, ApiError> {
    if req.method() != Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "{} only supports create",
            kind.kind()
        )));
    }
    let protobuf = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with(super::protobuf::CONTENT_TYPE));
    let body = axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            ApiError::request_entity_too_large(format!(
                "the request body is larger than the limit of {MAX_BODY_BYTES} bytes"
            ))
        })?;
    let mut obj: Value = if protobuf {
        super::protobuf::decode(&kind, &body)?
    } else if body.is_empty() && matches!(kind, VirtualKind::TokenRequest { .. }) {
        json!({})
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?
    };
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    if let VirtualKind::TokenRequest { namespace, name } = &kind {
        let auth = auth.ok_or_else(|| {
            ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource (authentication is off)",
            )
        })?;
        return super::serviceaccount::token_request(storage, &auth.signer, namespace, name, obj)
            .await;
    }
    let av = format!("{}/v1", kind.group());
    if let Some(v) = obj.get("apiVersion").and_then(Value::as_str)
        && v != av
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({av})"
        )));
    }
    obj["apiVersion"] = json!(av);
    obj["kind"] = json!(kind.kind());
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]["creationTimestamp"] = Value::Null;
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let invalid = |field: &str, msg: &str| {
        ApiError::invalid(
            kind.group(),
            kind.kind(),
            "",
            vec![Cause::invalid(field, msg.to_string())],
        )
    };
    let anonymous = UserInfo {
        username: "system:anonymous".into(),
        groups: vec!["system:unauthenticated".into()],
        ..Default::default()
    };
    let me = user.cloned().unwrap_or(anonymous);
    let status = match &kind {
        VirtualKind::SelfSubjectReview => json!({"userInfo": me}),
        VirtualKind::TokenReview => {
            let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
            if token.is_empty() {
                return Err(invalid("spec.token", "Required value"));
            }
            match auth {
                None => json!({"authenticated": false, "error": "authentication is off"}),
                Some(auth) => {
                    let who = if let Some(u) = auth.tokens.get(token) {
                        Ok(super::authenticated(u.clone()))
                    } else {
                        super::serviceaccount::verify_live(storage, &auth.signer, token).await
                    };
                    match who {
                        Ok(u) => json!({
                            "authenticated": true,
                            "user": u,
                            "audiences": auth.signer.audiences(),
                        }),
                        Err(why) => json!({"authenticated": false, "error": why}),
                    }
                }
            }
        }
        VirtualKind::SelfSubjectRulesReview => {
            let ns = spec.get("namespace").and_then(Value::as_str).unwrap_or("");
            match auth {
                None => json!({
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    "incomplete": false,
                }),
                Some(auth) => {
                    let (res, non) = auth.rbac.rules_for(storage, &me, ns).await?;
                    json!({"resourceRules": res, "nonResourceRules": non, "incomplete": false})
                }
            }
        }
        VirtualKind::SubjectAccessReview
        | VirtualKind::SelfSubjectAccessReview
        | VirtualKind::LocalSubjectAccessReview { .. } => {
            let attrs = access_attributes(&kind, &spec, &invalid)?;
            if let VirtualKind::LocalSubjectAccessReview { namespace } = &kind {
                obj["metadata"]["namespace"] = json!(namespace);
                obj["spec"]["resourceAttributes"]["namespace"] = json!(namespace);
            }
            let subject = match kind {
                VirtualKind::SelfSubjectAccessReview => me,
                _ => {
                    let s = subject_of(&spec);
                    if s.username.is_empty() && s.groups.is_empty() {
                        return Err(invalid(
                            "spec.user",
                            "Invalid value: \"\": at least one of user or group must be specified",
                        ));
                    }
                    s
                }
            };
            match auth {
                None => json!({"allowed": true, "reason": "authorization is off"}),
                Some(auth) => {
                    let d = auth.rbac.authorize(storage, &subject, &attrs).await?;
                    let mut s = json!({"allowed": d.allowed});
                    if !d.reason.is_empty() {
                        s["reason"] = json!(d.reason);
                    }
                    s
                }
            }
        }
        VirtualKind::TokenRequest { .. } => unreachable!("answered above"),
    };
    obj["status"] = status;
    Ok(Reply::value(StatusCode::CREATED, &obj))
}

/// The attributes an access review asks about, checked as kube validates
/// them (exactly one of resource and non-resource attributes).
fn access_attributes(
    kind: &VirtualKind,
    spec: &Value,
    invalid: &dyn Fn(&str, &str) -> ApiError,
) -> Result<RequestAttributes, ApiError> {
    let res = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match (res, non) {
        (Some(r), None) => {
            let mut namespace = s(r, "namespace");
            if let VirtualKind::LocalSubjectAccessReview { namespace: path_ns } = kind {
                if !namespace.is_empty() && namespace != *path_ns {
                    return Err(invalid(
                        "spec.resourceAttributes.namespace",
                        "Invalid value: must match metadata.namespace",
                    ));
                }
                namespace = path_ns.clone();
            }
            Ok(RequestAttributes {
                verb: s(r, "verb"),
                resource_request: true,
                path: String::new(),
                api_group: s(r, "group"),
                api_version: s(r, "version"),
                resource: s(r, "resource"),
                subresource: s(r, "subresource"),
                namespace,
                name: s(r, "name"),
            })
        }
        (None, Some(n)) if !matches!(kind, VirtualKind::LocalSubjectAccessReview { .. }) => {
            Ok(RequestAttributes {
                verb: s(n, "verb"),
                resource_request: false,
                path: s(n, "path"),
                ..Default::default()
            })
        }
        (None, Some(_)) => Err(invalid(
            "spec.nonResourceAttributes",
            "Invalid value: disallowed on this kind of request",
        )),
        _ => Err(invalid(
            "spec.resourceAttributes",
            "Invalid value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

/// The user a SubjectAccessReview asks about, exactly as given (kube adds
/// no groups to it).
fn subject_of(spec: &Value) -> UserInfo {
    let strs = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let extra: BTreeMap<String, Vec<String>> = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), strs(Some(v)))).collect())
        .unwrap_or_default();
    UserInfo {
        username: spec
            .get("user")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        uid: spec
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        groups: strs(spec.get("groups")),
        extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_paths() {
        assert_eq!(
            VirtualKind::of("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"),
            Some(VirtualKind::SelfSubjectAccessReview)
        );
        assert_eq!(
            VirtualKind::of("/apis/authorization.k8s.io/v1/namespaces/a/localsubjectaccessreviews"),
            Some(VirtualKind::LocalSubjectAccessReview {
                namespace: "a".into()
            })
        );
        assert_eq!(
            VirtualKind::of("/api/v1/namespaces/a/serviceaccounts/b/token"),
            Some(VirtualKind::TokenRequest {
                namespace: "a".into(),
                name: "b".into()
            })
        );
        assert_eq!(
            VirtualKind::of("/api/v1/namespaces/a/serviceaccounts/b"),
            None
        );
        assert_eq!(VirtualKind::of("/apis/authorization.k8s.io/v1"), None);
    }
}
