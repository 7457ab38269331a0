//! Who is asking, and may they: authentication (client certificates, a
//! static token file, ServiceAccount JWTs), impersonation, and the request
//! attributes RBAC decides on.
//!
//! The request path runs [`gate`] before anything else: authenticate →
//! impersonate → authorize. Without an [`AuthConfig`] the gate lets every
//! request through as before security existed (tests, benchmarks and
//! `--insecure-http`). The virtual resources that only make sense with
//! identities (TokenRequest, the access reviews) are served from here too,
//! see [`serve_virtual`].

pub mod audit;
pub mod bootstrap;
mod impersonation;
mod protobuf;
pub mod rbac;
mod review;
pub mod serviceaccount;
pub mod token_file;
mod x509;

use std::sync::Arc;

use apimachinery::ApiError;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{Method, Request};

use crate::http::error_response;
use crate::http::request::{Query, Target, parse_path};
use crate::http::tls::PeerCertificates;
use crate::storage::Storage;
use rbac::Rbac;

pub use serviceaccount::TokenSigner;
pub use token_file::StaticToken;

/// Every authenticated user is in this group.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// Members bypass authorization (kube's privileged group).
pub const MASTERS_GROUP: &str = "system:masters";
/// Token audience and issuer kube-apiserver uses by default; clients that
/// validate tokens (TokenReview callers) expect them.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

pub use crate::admission::{UserInfo, current_user, with_user};

/// Adds `system:authenticated` unless present: every authenticated user is
/// in that group.
fn authenticated(mut user: UserInfo) -> UserInfo {
    if !user.in_group(AUTHENTICATED_GROUP) {
        user.groups.push(AUTHENTICATED_GROUP.to_string());
    }
    user
}

/// Turns authentication and RBAC on.
#[derive(Clone)]
pub struct AuthConfig {
    /// PEM (PKCS#8, ECDSA P-256) of the key that signs ServiceAccount tokens.
    pub service_account_key_pem: String,
    /// `iss` of issued tokens; tokens from other issuers are rejected.
    pub issuer: String,
    /// Audiences the server accepts; the first is the default of a
    /// TokenRequest without audiences.
    pub audiences: Vec<String>,
    /// Users of the static token file.
    pub static_tokens: Vec<StaticToken>,
}

impl AuthConfig {
    pub fn new(service_account_key_pem: impl Into<String>) -> AuthConfig {
        AuthConfig {
            service_account_key_pem: service_account_key_pem.into(),
            issuer: DEFAULT_ISSUER.to_string(),
            audiences: vec![DEFAULT_ISSUER.to_string()],
            static_tokens: Vec::new(),
        }
    }

    /// Adds the users of a kube token file (`token,user,uid,"g1,g2"`).
    pub fn with_token_file(mut self, path: &std::path::Path) -> crate::error::Result<AuthConfig> {
        self.static_tokens.extend(token_file::load(path)?);
        Ok(self)
    }
}

// Keys and tokens stay out of logs.
impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("issuer", &self.issuer)
            .field("audiences", &self.audiences)
            .field("static_tokens", &self.static_tokens.len())
            .finish_non_exhaustive()
    }
}

/// The running authenticator and authorizer, built from an [`AuthConfig`].
pub struct Auth {
    pub signer: TokenSigner,
    tokens: std::collections::HashMap<String, UserInfo>,
    pub rbac: Rbac,
    /// Where ServiceAccounts and the RBAC objects are read.
    pub storage: Arc<Storage>,
}

impl Auth {
    pub fn new(config: &AuthConfig, storage: Arc<Storage>) -> crate::error::Result<Auth> {
        Ok(Auth {
            storage,
            signer: TokenSigner::new(
                &config.service_account_key_pem,
                &config.issuer,
                config.audiences.clone(),
            )?,
            tokens: config
                .static_tokens
                .iter()
                .map(|t| (t.token.clone(), t.user.clone()))
                .collect(),
            rbac: Rbac::default(),
        })
    }

    /// Who a bearer token belongs to; `Err` is a 401.
    pub async fn authenticate_token(&self, token: &str) -> Result<UserInfo, ApiError> {
        if let Some(u) = self.tokens.get(token) {
            return Ok(authenticated(u.clone()));
        }
        if token.matches('.').count() == 2 {
            return serviceaccount::authenticate(&self.storage, &self.signer, token).await;
        }
        Err(unauthorized())
    }
}

/// kube's answer to missing or bad credentials; it never says which.
pub fn unauthorized() -> ApiError {
    ApiError::unauthorized("Unauthorized")
}

/// What a request asks to do, in the terms authorization decides on
/// (kube's `authorizer.Attributes` / `RequestInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestAttributes {
    pub verb: String,
    pub resource_request: bool,
    /// The URL path (non-resource requests are decided on it).
    pub path: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl RequestAttributes {
    /// Maps an HTTP request to a verb and resource as kube-apiserver does.
    pub fn from_request(method: &Method, path: &str, query: &Query) -> RequestAttributes {
        let target = match parse_path(path) {
            Some(Target::Resource(p)) => p,
            _ => {
                return RequestAttributes {
                    verb: method.as_str().to_ascii_lowercase(),
                    path: path.to_string(),
                    ..Default::default()
                };
            }
        };
        let legacy_watch = path
            .trim_start_matches('/')
            .split('/')
            .nth(if target.group.is_empty() { 2 } else { 3 })
            == Some("watch");
        let has_name = target.name.is_some();
        let verb = match *method {
            Method::GET | Method::HEAD if legacy_watch || query.flag("watch") && !has_name => {
                "watch"
            }
            Method::GET | Method::HEAD if has_name => "get",
            Method::GET | Method::HEAD => "list",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if has_name => "delete",
            Method::DELETE => "deletecollection",
            _ => "",
        };
        let mut name = target.name.clone().unwrap_or_default();
        // A list or watch narrowed to one name is authorized as that name,
        // so resourceNames rules work with `kubectl get -w NAME`.
        if name.is_empty()
            && matches!(verb, "list" | "watch")
            && let Some(fs) = query.get("fieldSelector")
            && let Some(n) = single_name(fs)
        {
            name = n;
        }
        // `/api/v1/namespaces/foo` is in the namespace it names.
        let namespace = match (&target.namespace, target.resource.as_str()) {
            (Some(ns), _) => ns.clone(),
            (None, "namespaces") => target.name.clone().unwrap_or_default(),
            _ => String::new(),
        };
        RequestAttributes {
            verb: verb.to_string(),
            resource_request: true,
            path: path.to_string(),
            api_group: target.group,
            api_version: target.version,
            resource: target.resource,
            subresource: target.subresource.unwrap_or_default(),
            namespace,
            name,
        }
    }

    /// Verbs that change state, the ones the audit log records.
    pub fn is_mutating(&self) -> bool {
        if self.resource_request {
            matches!(
                self.verb.as_str(),
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
        } else {
            matches!(self.verb.as_str(), "post" | "put" | "patch" | "delete")
        }
    }
}

/// `metadata.name=X` (or `==`) as the only field requirement.
fn single_name(fs: &str) -> Option<String> {
    if fs.contains(',') {
        return None;
    }
    let v = fs
        .strip_prefix("metadata.name==")
        .or_else(|| fs.strip_prefix("metadata.name="))?;
    (!v.is_empty()).then(|| v.to_string())
}

/// Paths anyone may read, authenticated or not (kube's
/// system:public-info-viewer, plus the 401 exemption).
pub fn is_public_path(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz", "/version"]
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
}

/// The outcome of the security checks for one request.
pub struct Gate {
    /// What the request asks; `None` when neither auth nor audit is on.
    pub attrs: Option<RequestAttributes>,
    /// The identity the request acts as (after impersonation).
    pub user: Option<Arc<UserInfo>>,
    /// Who authenticated, when that differs from `user` (impersonation).
    pub impersonator: Option<Arc<UserInfo>>,
    pub result: Result<(), ApiError>,
}

/// Authenticate → impersonate → authorize.
pub async fn gate(auth: Option<&Auth>, audit: bool, parts: &http::request::Parts) -> Gate {
    let path = parts.uri.path();
    if auth.is_none() && !audit {
        return Gate {
            attrs: None,
            user: None,
            impersonator: None,
            result: Ok(()),
        };
    }
    let query = Query::parse(parts.uri.query());
    let attrs = RequestAttributes::from_request(&parts.method, path, &query);
    let mut g = Gate {
        attrs: Some(attrs),
        user: None,
        impersonator: None,
        result: Ok(()),
    };
    let Some(auth) = auth else { return g };
    if is_public_path(path) {
        return g;
    }
    let user = match authenticate(auth, parts).await {
        Ok(u) => u,
        Err(e) => {
            g.result = Err(e);
            return g;
        }
    };
    let attrs = g.attrs.as_ref().expect("set above");
    let user = match impersonation::apply(auth, user, &parts.headers).await {
        Ok((user, by)) => {
            g.impersonator = by.map(Arc::new);
            user
        }
        Err((user, e)) => {
            g.user = Some(Arc::new(user));
            g.result = Err(e);
            return g;
        }
    };
    g.result = match auth.rbac.authorize(&auth.storage, &user, attrs).await {
        Ok(d) if d.allowed => Ok(()),
        Ok(d) => Err(forbidden(&user, attrs, &d.reason)),
        Err(e) => Err(e),
    };
    g.user = Some(Arc::new(user));
    g
}

/// The identity proven by the request's credentials.
async fn authenticate(auth: &Auth, parts: &http::request::Parts) -> Result<UserInfo, ApiError> {
    if let Some(PeerCertificates(chain)) = parts.extensions.get::<PeerCertificates>()
        && let Some(leaf) = chain.first()
    {
        return x509::user_from_certificate(leaf).map(authenticated);
    }
    let header = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match header {
        Some(h) => match h.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
                let token = token.trim();
                if token.is_empty() {
                    return Err(unauthorized());
                }
                auth.authenticate_token(token).await
            }
            _ => Err(unauthorized()),
        },
        None => Err(unauthorized()),
    }
}

/// kube's 403: `<resource>.<group> "<name>" is forbidden: User "<u>" cannot
/// <verb> resource "<r>" in API group "<g>" in the namespace "<ns>"`.
pub fn forbidden(user: &UserInfo, a: &RequestAttributes, reason: &str) -> ApiError {
    let mut why = if !a.resource_request {
        format!(
            "User {:?} cannot {} path {:?}",
            user.username, a.verb, a.path
        )
    } else {
        let resource = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let scope = if a.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {:?}", a.namespace)
        };
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} {scope}",
            user.username, a.verb, resource, a.api_group
        )
    };
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    if !a.resource_request {
        return ApiError::forbidden(format!("forbidden: {why}"));
    }
    let qualified = if a.api_group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.api_group)
    };
    let message = if a.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", a.name)
    };
    ApiError::forbidden(message).with_details(&a.api_group, &a.resource, &a.name)
}

/// Serves the resources that are computed rather than stored (TokenRequest,
/// access reviews, SelfSubjectReview); any other request comes back as `Err`.
pub async fn serve_virtual(
    auth: Option<&Auth>,
    storage: &Storage,
    gate: &Gate,
    req: Request<Body>,
) -> Result<Response, Request<Body>> {
    let Some(kind) = review::VirtualKind::of(req.uri().path()) else {
        return Err(req);
    };
    let user = gate.user.as_deref();
    let reply = review::serve(auth, storage, kind, user, req).await;
    Ok(match reply {
        Ok(r) => r.into_response(),
        Err(e) => error_response(&e),
    })
}
