//! The service account controller's one job that an API server on its own
//! needs: every active namespace has a ServiceAccount `default`, created
//! when the namespace appears and again if it is deleted (as
//! kube-controller-manager's does), so pods that name no account can get
//! a token.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use store::{RangeRequest, StoreError};

use super::Context;
use crate::object;
use crate::storage::{Storage, codec, keys};

/// The account every namespace gets.
pub const DEFAULT: &str = "default";

/// A fresh `default` ServiceAccount of namespace `ns`.
fn new_object(ns: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": DEFAULT,
            "namespace": ns,
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": object::now_rfc3339(),
        },
    })
}

/// The namespaces (by uid) that need their `default` account checked:
/// active ones not seen yet. Pure.
pub(super) fn to_check<'a>(
    namespaces: &'a [Value],
    seen: &HashSet<String>,
) -> Vec<(&'a str, &'a str)> {
    namespaces
        .iter()
        .filter(|ns| !object::is_deleting(ns))
        .filter_map(|ns| {
            let uid = ns.pointer("/metadata/uid")?.as_str()?;
            (!seen.contains(uid)).then(|| (object::name(ns), uid))
        })
        .collect()
}

/// Creates `default` in `ns` if it does not exist.
pub(super) async fn ensure(storage: &Storage, ns: &str) -> Result<(), StoreError> {
    let key = keys::key(keys::SERVICE_ACCOUNTS, Some(ns), DEFAULT);
    match storage
        .store()
        .create(&key, codec::encode(&new_object(ns)))
        .await
    {
        Ok(_) | Err(StoreError::AlreadyExists(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// One pass: every namespace not checked since `seen` was last cleared.
pub(super) async fn pass(ctx: &Context, seen: &mut HashSet<String>) {
    let Ok(r) = ctx
        .storage
        .store()
        .range(RangeRequest {
            prefix: keys::prefix(keys::NAMESPACES),
            ..Default::default()
        })
        .await
    else {
        return;
    };
    let namespaces: Vec<Value> = r
        .kvs
        .iter()
        .filter_map(|kv| serde_json::from_slice(&kv.value).ok())
        .collect();
    for (ns, uid) in to_check(&namespaces, seen) {
        match ensure(&ctx.storage, ns).await {
            Ok(()) => {
                seen.insert(uid.to_string());
            }
            Err(e) => {
                tracing::debug!(namespace = ns, error = %e, "creating the default ServiceAccount")
            }
        }
    }
}

/// New namespaces get their account within a second; every namespace is
/// checked again every 30 s, which brings back a deleted `default`.
pub fn spawn(ctx: Arc<Context>) {
    tokio::spawn(async move {
        let mut seen = HashSet::new();
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        let mut passes = 0u32;
        loop {
            tick.tick().await;
            passes = passes.wrapping_add(1);
            if passes.is_multiple_of(60) {
                seen.clear();
            }
            pass(&ctx, &mut seen).await;
        }
    });
}
