//! Requests on resource paths: [`Ctx`], everything a verb needs about the
//! request, and [`handle`], which checks the path's scope and dispatches to
//! the verb modules (and the subresources) by method.

use std::sync::Arc;

use apimachinery::ApiError;
use bytes::Bytes;
use http::{HeaderMap, Method};

use crate::http::Api;
use crate::http::reply::Reply;
use crate::http::request::{Query, ResourcePath};
use crate::storage::registry::Resource;

/// Everything a verb needs about the request.
pub struct Ctx<'a> {
    pub api: &'a Arc<Api>,
    pub res: Arc<Resource>,
    pub path: &'a ResourcePath,
    pub query: &'a Query,
    pub headers: &'a HeaderMap,
    pub body: Bytes,
    /// The query string as sent, for requests passed on unchanged (to a
    /// kubelet).
    pub raw_query: Option<&'a str>,
}

impl Ctx<'_> {
    /// The namespace of the request, for namespaced resources.
    pub fn ns(&self) -> Option<&str> {
        if self.res.namespaced {
            self.path.namespace.as_deref()
        } else {
            None
        }
    }

    /// The store key of `name` in the request's namespace.
    pub fn key(&self, name: &str) -> String {
        self.res.key(self.ns(), name)
    }

    pub fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.res.group, &self.res.plural, name)
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
    }
}

/// Entry point for resource paths.
pub async fn handle(ctx: Ctx<'_>, method: &Method) -> Result<Reply, ApiError> {
    use crate::http::{
        create, delete, deletecollection, eviction, get, list, patch, scale, update, watch,
    };
    let res = ctx.res.clone();
    if res.namespaced && ctx.path.namespace.is_none() && ctx.path.name.is_some() {
        return Err(ApiError::not_found(
            &res.group,
            &res.plural,
            ctx.path.name.as_deref().unwrap_or(""),
        ));
    }
    if !res.namespaced && ctx.path.namespace.is_some() {
        return Err(not_found());
    }
    let sub = ctx.path.subresource.clone();
    if sub.is_none()
        && let Some(verb) = verb_of(method, ctx.path.name.is_some(), ctx.query.flag("watch"))
        && !res.allows(verb)
    {
        return Err(method_not_allowed());
    }
    match (&ctx.path.name, sub.as_deref()) {
        (None, _) => match *method {
            Method::GET if ctx.query.flag("watch") => watch::watch(&ctx).await,
            Method::GET => list::list(&ctx).await,
            Method::POST => {
                if res.namespaced && ctx.path.namespace.is_none() {
                    return Err(ApiError::method_not_allowed(
                        "a namespace is required to create a namespaced resource",
                    ));
                }
                create::create(&ctx).await
            }
            // The all-namespaces path of a namespaced resource serves only
            // list and watch.
            Method::DELETE if res.namespaced && ctx.path.namespace.is_none() => {
                Err(method_not_allowed())
            }
            Method::DELETE => deletecollection::delete_collection(&ctx).await,
            _ => Err(method_not_allowed()),
        },
        (Some(name), None) => {
            let name = name.clone();
            match *method {
                Method::GET if ctx.query.flag("watch") => watch::watch(&ctx).await,
                Method::GET => get::get(&ctx, &name).await,
                Method::PUT => update::update(&ctx, &name, None).await,
                Method::PATCH => patch::patch(&ctx, &name, None).await,
                Method::DELETE => delete::delete(&ctx, &name).await,
                _ => Err(method_not_allowed()),
            }
        }
        (Some(name), Some("status")) if res.status_subresource => {
            let name = name.clone();
            match *method {
                Method::GET => get::get(&ctx, &name).await,
                Method::PUT => update::update(&ctx, &name, Some("status")).await,
                Method::PATCH => patch::patch(&ctx, &name, Some("status")).await,
                _ => Err(method_not_allowed()),
            }
        }
        (Some(name), Some("scale")) if res.scale.is_some() => {
            let name = name.clone();
            scale::scale(&ctx, &name, method).await
        }
        (Some(name), Some("eviction")) if res.eviction && *method == Method::POST => {
            let name = name.clone();
            eviction::evict(&ctx, &name).await
        }
        (Some(name), Some("binding")) if res.eviction && *method == Method::POST => {
            let name = name.clone();
            crate::http::binding::bind(&ctx, &name).await
        }
        (Some(_), Some("log")) if res.eviction && *method == Method::GET => {
            crate::http::podproxy::logs(ctx.api, ctx.path, ctx.query, ctx.raw_query).await
        }
        (Some(name), Some("finalize"))
            if res.strategy.finalize_subresource() && *method == Method::PUT =>
        {
            let name = name.clone();
            update::update(&ctx, &name, Some("finalize")).await
        }
        _ => Err(not_found()),
    }
}

fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// The verb a request on a resource itself is authorized and served as.
fn verb_of(method: &Method, named: bool, watch: bool) -> Option<&'static str> {
    Some(match (method.as_str(), named) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    })
}

/// kube's 405 carries no Status; client-go then reports exactly this.
fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed("the server does not allow this method on the requested resource")
}
