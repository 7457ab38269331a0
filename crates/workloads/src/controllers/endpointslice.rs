//! The Service executor: a Service's selected pods and managed slices in,
//! [`crate::endpointslice::plan`] applied (creations named as
//! `generateName` would, updates guarded by resource versions, deletions),
//! then [`crate::endpoints::plan`] for its Endpoints.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use super::{CACHE_WAIT, CONFLICT_WAIT, Context, Error, is_code, key};
use crate::endpointslice::{self, Observed};
use crate::expectations::Expect;
use crate::meta::{self, Selector};

pub const NAME: &str = "endpointslice";
/// Upstream's event source.
pub const REPORTER: &str = "endpoint-slice-controller";

/// The selector of a Service that has one (others get no managed slices).
pub fn selector(svc: &Service) -> Option<Selector> {
    svc.spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .filter(|s| !s.is_empty())
        .map(Selector::from_map)
}

pub async fn reconcile(svc: Arc<Service>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Some(selector) = selector(&svc) else {
        return Ok(Action::await_change());
    };
    let ns = svc.metadata.namespace.clone().unwrap_or_default();
    let name = meta::name(&svc.metadata).to_string();
    let uid = svc.metadata.uid.clone().unwrap_or_default();
    let api: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), &ns);
    let cached = |k: &str| {
        let (ns, n) = k.split_once('/').unwrap_or(("", k));
        ctx.slices
            .get(&ObjectRef::new(n).within(ns))
            .map(|s| s.metadata.clone())
    };
    if !ctx
        .slice_expectations
        .satisfied(&uid, Instant::now(), cached)
    {
        return Ok(Action::requeue(CACHE_WAIT));
    }
    let pods: Vec<Arc<Pod>> = ctx
        .pods_in(&ns)
        .into_iter()
        .filter(|p| selector.matches(p.metadata.labels.as_ref()))
        .collect();
    let slices: Vec<Arc<EndpointSlice>> = ctx
        .slices
        .state()
        .into_iter()
        .filter(|s| {
            s.metadata.namespace.as_deref() == Some(ns.as_str()) && endpointslice::managed(s, &name)
        })
        .collect();
    let plan = endpointslice::plan(&Observed {
        service: &svc,
        pods: pods.iter().map(|p| p.as_ref()).collect(),
        slices: slices.iter().map(|s| s.as_ref()).collect(),
    });
    let pp = PostParams::default();
    for mut slice in plan.create {
        let prefix = slice
            .metadata
            .generate_name
            .clone()
            .unwrap_or_else(|| format!("{name}-"));
        let slice_name = meta::generate_name(&prefix);
        slice.metadata.name = Some(slice_name.clone());
        ctx.slice_expectations
            .expect(&uid, [(key(&ns, &slice_name), Expect::Present)]);
        match api.create(&pp, &slice).await {
            Ok(_) => {}
            Err(e) => {
                ctx.slice_expectations.lower(&uid, &key(&ns, &slice_name));
                if is_code(&e, 409) {
                    return Ok(Action::requeue(CONFLICT_WAIT));
                }
                failed(&ctx, &svc, &e);
                return Err(Error::CreateFailed {
                    what: format!("endpoint slice for service {name}"),
                    source: e,
                });
            }
        }
    }
    for slice in plan.update {
        let slice_name = meta::name(&slice.metadata).to_string();
        match api.replace(&slice_name, &pp, &slice).await {
            Ok(_) => {}
            Err(e) if is_code(&e, 409) || is_code(&e, 404) => {
                return Ok(Action::requeue(CONFLICT_WAIT));
            }
            Err(e) => {
                failed(&ctx, &svc, &e);
                return Err(Error::UpdateFailed {
                    what: format!("endpoint slice {slice_name}"),
                    source: e,
                });
            }
        }
    }
    for slice_name in plan.delete {
        ctx.slice_expectations
            .expect(&uid, [(key(&ns, &slice_name), Expect::Gone)]);
        match api.delete(&slice_name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_code(&e, 404) => {}
            Err(e) => {
                ctx.slice_expectations.lower(&uid, &key(&ns, &slice_name));
                failed(&ctx, &svc, &e);
                return Err(Error::DeleteFailed {
                    what: format!("endpoint slice {slice_name}"),
                    source: e,
                });
            }
        }
    }
    let endpoints_api: Api<Endpoints> = Api::namespaced(ctx.client.clone(), &ns);
    let existing = ctx.endpoints.get(&ObjectRef::new(&name).within(&ns));
    let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
    match crate::endpoints::plan(&svc, &refs, existing.as_deref()) {
        None => {}
        Some(crate::endpoints::Plan::Create(e)) => match endpoints_api.create(&pp, &e).await {
            Ok(_) => {}
            // Made by an earlier pass the cache has not shown yet.
            Err(e) if is_code(&e, 409) => return Ok(Action::requeue(CONFLICT_WAIT)),
            Err(source) => {
                failed(&ctx, &svc, &source);
                return Err(Error::CreateFailed {
                    what: format!("endpoints {name}"),
                    source,
                });
            }
        },
        Some(crate::endpoints::Plan::Update(e)) => {
            match endpoints_api.replace(&name, &pp, &e).await {
                Ok(_) => {}
                Err(e) if is_code(&e, 409) || is_code(&e, 404) => {
                    return Ok(Action::requeue(CONFLICT_WAIT));
                }
                Err(source) => {
                    failed(&ctx, &svc, &source);
                    return Err(Error::UpdateFailed {
                        what: format!("endpoints {name}"),
                        source,
                    });
                }
            }
        }
    }
    Ok(Action::await_change())
}

fn failed(ctx: &Context, svc: &Service, e: &kube::Error) {
    ctx.event(
        REPORTER,
        svc,
        true,
        "FailedToUpdateEndpointSlices",
        format!(
            "Error updating Endpoint Slices for Service {}/{}: {e}",
            svc.metadata.namespace.as_deref().unwrap_or_default(),
            meta::name(&svc.metadata)
        ),
    );
}
