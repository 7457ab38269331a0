//! The CRD controller: keeps every stored CustomResourceDefinition served
//! (its resources in the registry), established (its status), and on
//! deletion removes every custom object before dropping the cleanup
//! finalizer. [`install`] puts a server's own CRDs in place at start. What a
//! definition means (validation, resources, status) is
//! [`crate::strategy::crd`].

use crate::error::Error;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use store::{RangeRequest, WatchItem};

use super::Context;
use crate::object;
use crate::storage::registry::Registry;
use crate::storage::{DeleteOptions, Storage, codec, keys};
use crate::strategy::crd::{CLEANUP_FINALIZER, desired_status, resources_of, validate_crd};

/// Serves the CRD's resources now (replacing an earlier definition).
pub fn register(registry: &Registry, crd: &Value) {
    let uid = object::uid(crd);
    if uid.is_empty() {
        return;
    }
    registry.replace_crd(uid, resources_of(crd));
}

/// Registers every stored CRD at start.
pub async fn load_all(storage: &Storage, registry: &Registry) -> Result<(), Error> {
    let r = storage
        .store()
        .range(RangeRequest {
            prefix: keys::prefix(keys::CRDS),
            ..Default::default()
        })
        .await
        .map_err(|source| Error::StoreReadFailed {
            what: "the CRDs".into(),
            source,
        })?;
    for kv in r.kvs {
        if let Ok(v) = serde_json::from_slice::<Value>(&kv.value) {
            register(registry, &v);
        }
    }
    Ok(())
}

pub(super) async fn reconcile(ctx: &Context, key: &str) {
    let Ok((Some(kv), _)) = ctx.storage.store().get(key, None).await else {
        return;
    };
    let Ok(crd) = serde_json::from_slice::<Value>(&kv.value) else {
        return;
    };
    register(&ctx.registry, &crd);
    if object::is_deleting(&crd) {
        if !object::finalizers(&crd)
            .iter()
            .any(|f| f == CLEANUP_FINALIZER)
        {
            return;
        }
        let Some(res) = resources_of(&crd).into_iter().next().map(Arc::new) else {
            return;
        };
        let objs = ctx
            .storage
            .store()
            .range(RangeRequest {
                prefix: res.prefix(),
                ..Default::default()
            })
            .await
            .map(|r| r.kvs)
            .unwrap_or_default();
        if objs.is_empty() {
            let _ = ctx
                .storage
                .mutate(key, |o| {
                    let fins: Vec<String> = object::finalizers(o)
                        .into_iter()
                        .filter(|f| f != CLEANUP_FINALIZER)
                        .collect();
                    object::set_finalizers(o, &fins);
                    true
                })
                .await;
            ctx.registry.remove_crd(object::uid(&crd));
            return;
        }
        for kv in objs {
            let Ok(v) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            if object::is_deleting(&v) {
                continue;
            }
            let ns = object::meta_str(&v, "namespace").map(str::to_string);
            let _ = ctx
                .delete(
                    &res,
                    ns.as_deref(),
                    object::name(&v),
                    &DeleteOptions::default(),
                )
                .await;
        }
        return;
    }
    let want = desired_status(&crd);
    if crd.get("status") != Some(&want) {
        let _ = ctx
            .storage
            .mutate(key, |o| {
                o["status"] = desired_status(o);
                true
            })
            .await;
    }
}

/// Follows CRDs: keeps them served, established, and cleans up on delete.
pub fn spawn(ctx: Arc<Context>) {
    let crds = keys::prefix(keys::CRDS);
    tokio::spawn(async move {
        let server = &ctx;
        loop {
            let from = ctx.storage.store().current_revision();
            if let Ok(r) = ctx
                .storage
                .store()
                .range(RangeRequest {
                    prefix: crds.clone(),
                    ..Default::default()
                })
                .await
            {
                for kv in r.kvs {
                    reconcile(server, &kv.key).await;
                }
            }
            let Ok(mut w) = ctx.storage.store().watch(&crds, from).await else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            loop {
                tokio::select! {
                    item = w.recv() => match item {
                        Some(WatchItem::Event(ev)) => match ev.kind {
                            store::EventKind::Put => reconcile(server, &ev.kv.key).await,
                            store::EventKind::Delete => {
                                if let Some(p) = ev.prev
                                    && let Ok(v) = serde_json::from_slice::<Value>(&p.value) {
                                    ctx.registry.remove_crd(object::uid(&v));
                                }
                            }
                        },
                        Some(WatchItem::Progress(_)) => {}
                        None => break,
                    },
                    // Deleting CRDs wait for their objects' finalizers.
                    _ = tick.tick() => {
                        if let Ok(r) = ctx.storage.store().range(RangeRequest { prefix: crds.clone(), ..Default::default() }).await {
                            for kv in r.kvs {
                                if let Ok(v) = serde_json::from_slice::<Value>(&kv.value)
                                    && object::is_deleting(&v) {
                                    reconcile(server, &kv.key).await;
                                }
                            }
                        }
                    }
                }
            }
        }
    });
}

/// Installs (or upgrades) a CRD directly in the store, as a server does for
/// its own kinds at start: created when missing, its spec replaced when it
/// differs, and served at once. Idempotent.
pub async fn install(
    storage: &Storage,
    registry: &Registry,
    manifest: &Value,
) -> Result<(), Error> {
    let name = object::name(manifest).to_string();
    if name.is_empty() {
        return Err(Error::CrdUnnamed);
    }
    let causes = validate_crd(manifest);
    if !causes.is_empty() {
        return Err(Error::CrdInvalid {
            name,
            causes: format!("{causes:?}"),
        });
    }
    let key = keys::key(keys::CRDS, None, &name);
    for _ in 0..16 {
        let (cur, _) =
            storage
                .store()
                .get(&key, None)
                .await
                .map_err(|source| Error::StoreReadFailed {
                    what: key.clone(),
                    source,
                })?;
        let result = match cur {
            None => {
                let mut crd = manifest.clone();
                if let Some(m) = object::meta_mut(&mut crd) {
                    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
                    m.insert("creationTimestamp".into(), json!(object::now_rfc3339()));
                    m.insert("generation".into(), json!(1));
                }
                crd["status"] = desired_status(&crd);
                storage
                    .store()
                    .create(&key, codec::encode(&crd))
                    .await
                    .map(|kv| (kv, crd))
            }
            Some(kv) => {
                let mut crd: Value = serde_json::from_slice(&kv.value).map_err(|source| {
                    Error::StoredObjectInvalid {
                        key: key.clone(),
                        source,
                    }
                })?;
                if crd.get("spec") == manifest.get("spec") {
                    register(registry, &crd);
                    return Ok(());
                }
                crd["spec"] = manifest.get("spec").cloned().unwrap_or(json!({}));
                if let Some(m) = object::meta_mut(&mut crd) {
                    let g = m.get("generation").and_then(Value::as_i64).unwrap_or(1);
                    m.insert("generation".into(), json!(g + 1));
                }
                crd["status"] = desired_status(&crd);
                storage
                    .store()
                    .update(&key, codec::encode(&crd), kv.mod_revision)
                    .await
                    .map(|kv| (kv, crd))
            }
        };
        match result {
            Ok((_, crd)) => {
                register(registry, &crd);
                return Ok(());
            }
            Err(store::StoreError::AlreadyExists(_) | store::StoreError::Conflict(_)) => continue,
            Err(source) => return Err(Error::StoreWriteFailed { key, source }),
        }
    }
    Err(Error::CrdInstallRaced { name })
}
