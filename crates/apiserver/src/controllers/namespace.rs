//! Namespace lifecycle: the system namespaces exist from the first start, and
//! a namespace being deleted is emptied of every namespaced object before its
//! `kubernetes` finalizer is removed and it goes away.

use crate::error::Error;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use store::{RangeRequest, StoreError};

use super::Context;
use crate::object;
use crate::storage::{DeleteOptions, Storage, codec, keys};
use crate::strategy::namespace::new_object;

/// Creates namespace `name` if it does not exist.
pub async fn ensure(storage: &Storage, name: &str) -> Result<(), Error> {
    let key = keys::key(keys::NAMESPACES, None, name);
    match storage
        .store()
        .create(&key, codec::encode(&new_object(name)))
        .await
    {
        Ok(_) | Err(StoreError::AlreadyExists(_)) => Ok(()),
        Err(source) => Err(Error::StoreWriteFailed { key, source }),
    }
}

/// One pass over a terminating namespace: delete what is left in it; once
/// nothing is, drop the `kubernetes` finalizer so the namespace goes.
pub(super) async fn finalize(ctx: &Context, ns: &str) {
    let mut remaining = 0usize;
    for res in ctx.registry.storage_resources() {
        if !res.namespaced {
            continue;
        }
        let Ok(r) = ctx
            .storage
            .store()
            .range(RangeRequest {
                prefix: res.namespace_prefix(ns),
                ..Default::default()
            })
            .await
        else {
            remaining += 1;
            continue;
        };
        remaining += r.kvs.len();
        for kv in r.kvs {
            let Ok(v) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            if object::is_deleting(&v) {
                continue;
            }
            let opts = DeleteOptions {
                propagation: Some("Background".into()),
                ..Default::default()
            };
            if let Err(e) = ctx.delete(&res, Some(ns), object::name(&v), &opts).await
                && e.code != 404
            {
                tracing::debug!(namespace = ns, error = %e, "namespace cleanup delete failed");
            }
        }
    }
    if remaining == 0 {
        let key = keys::key(keys::NAMESPACES, None, ns);
        let _ = ctx
            .storage
            .mutate(&key, |o| {
                let had = o.pointer("/spec/finalizers").is_some();
                if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("finalizers");
                }
                had
            })
            .await;
    }
}

/// Namespaces are removed by [`finalize`] once empty; a namespace object whose
/// spec finalizers are gone and metadata finalizers empty is deleted.
pub(super) async fn sweep(ctx: &Context) {
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
    for kv in r.kvs {
        let Ok(v) = serde_json::from_slice::<Value>(&kv.value) else {
            continue;
        };
        if !object::is_deleting(&v) {
            continue;
        }
        let name = object::name(&v).to_string();
        if v.pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            finalize(ctx, &name).await;
        } else if object::finalizers(&v).is_empty() {
            let _ = ctx
                .storage
                .store()
                .delete(&kv.key, Some(kv.mod_revision))
                .await;
        }
    }
}

pub fn spawn(ctx: Arc<Context>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tick.tick().await;
            sweep(&ctx).await;
        }
    });
}
