//! The storage layer: objects of served resources in the revisioned
//! [`store`], with kube-apiserver's storage semantics and nothing of HTTP.
//!
//! - [`keys`] spells every `/registry/…` key;
//! - [`codec`] is the stored encoding (resource version spliced on the way
//!   out) and version conversion;
//! - [`registry`] is the catalogue of served resources and the
//!   [`registry::Strategy`] interface each kind's rules implement;
//! - [`select`] is list and watch selection, [`hub`] the shared watch
//!   caches (one store watch per stored resource);
//! - [`Storage`] holds the compare-and-swap primitives every write goes
//!   through: create, write over a read state (no-op writes keep their
//!   revision, a deleting object whose last finalizer went is removed),
//!   delete by kube's rules, and the read-modify-write loop the server's
//!   own controllers use.
//!
//! Everything here returns values or [`ApiError`]s; rendering them as HTTP
//! replies is the `http` layer's job.

pub mod codec;
pub mod hub;
pub mod keys;
pub mod registry;
pub mod select;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use apimachinery::ApiError;
use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{Value, json};
use store::{KeyValue, RangeRequest, Revision, Store, StoreError};

use crate::object::{self, meta_mut};
use hub::Hub;
use registry::Resource;

/// How many times an unconditional write is retried on a concurrent change.
pub const WRITE_RETRIES: usize = 16;
/// Largest object accepted into the store.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// The finalizer of an owner deleted with `propagationPolicy: Orphan`.
pub const ORPHAN: &str = "orphan";
/// The finalizer of an owner deleted with `propagationPolicy: Foreground`.
pub const FOREGROUND: &str = "foregroundDeletion";

/// A store error as the API reports it.
pub fn store_err(e: StoreError) -> ApiError {
    match e {
        StoreError::Compacted { requested, .. } => {
            ApiError::gone(format!("too old resource version: {requested}"))
        }
        StoreError::FutureRevision { requested, current } => ApiError::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        ),
        other => ApiError::internal(other.to_string()),
    }
}

/// The 413 for an object over [`MAX_OBJECT_BYTES`].
pub fn too_large(size: usize) -> ApiError {
    ApiError::request_entity_too_large(format!(
        "the object is {size} bytes, over the limit of {MAX_OBJECT_BYTES} bytes"
    ))
}

/// Refuses an object too large to store before any further work is spent
/// on it (admission, validation, managed fields). Only objects that could
/// be that large are measured: `hint` is a byte count the object's encoding
/// is unlikely to be much smaller than (the body, or the body plus the
/// stored object for a patch).
pub fn check_size_early(obj: &Value, hint: usize) -> Result<(), ApiError> {
    if hint <= MAX_OBJECT_BYTES / 2 {
        return Ok(());
    }
    let size = serde_json::to_vec(obj).map(|v| v.len()).unwrap_or(0);
    if size > MAX_OBJECT_BYTES {
        return Err(too_large(size));
    }
    Ok(())
}

/// What a write hands back: an object as the server built it (dry runs,
/// deletions), or the stored bytes rendered for the served version.
#[derive(Debug)]
pub enum Output {
    Object(Value),
    Encoded(Bytes),
}

/// The outcome of a create.
#[derive(Debug)]
pub enum Created {
    Done(Output),
    /// An object of that name exists (the caller may pick another name).
    NameTaken,
}

/// A compare-and-swap that lost: the object changed or went since it was
/// read. The caller reads again or reports a conflict.
#[derive(Debug)]
pub struct Lost;

/// The stored state an update step works on.
#[derive(Clone, Copy, Debug)]
pub struct Current {
    /// Its revision (the object's resourceVersion).
    pub revision: Revision,
    /// The size of its stored form.
    pub stored_bytes: usize,
}

/// One step of [`Storage::update`]: the new state and what the caller wants
/// back with it.
pub type UpdateStep<'s, T> = futures::future::BoxFuture<'s, Result<(Value, T), ApiError>>;

/// The outcome of [`Storage::update`].
#[derive(Debug)]
pub enum Updated<T> {
    /// Written (or a no-op): the stored result and what the caller's step
    /// returned with it.
    Written(Output, T),
    /// No object at the key.
    Missing,
}

/// DeleteOptions, as the verbs and the controllers pass them.
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    /// `Orphan`, `Background` (the default) or `Foreground`.
    pub propagation: Option<String>,
    pub grace: Option<i64>,
    /// Preconditions.
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

/// The admission check of a deletion, run on the object about to be
/// deleted on every attempt (the storage layer knows of admission only
/// through this).
#[async_trait::async_trait]
pub trait DeleteCheck: Send + Sync {
    async fn check(&self, old: &Value) -> Result<(), ApiError>;
}

/// No admission check (tests).
pub struct Unchecked;

#[async_trait::async_trait]
impl DeleteCheck for Unchecked {
    async fn check(&self, _old: &Value) -> Result<(), ApiError> {
        Ok(())
    }
}

/// The store with the watch hubs over it and the write primitives.
pub struct Storage {
    store: Arc<dyn Store>,
    hubs: Mutex<HashMap<String, Arc<Hub>>>,
    /// The runtime the server started on: long-lived tasks (watch hubs)
    /// belong there even when a request on another runtime starts them.
    runtime: tokio::runtime::Handle,
}

impl Storage {
    /// Storage over `store`; must be called inside a Tokio runtime.
    pub fn new(store: Arc<dyn Store>) -> Storage {
        Storage {
            store,
            hubs: Mutex::new(HashMap::new()),
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// The store itself, for reads and watches by key.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The watch hub of a resource's storage, started on first use.
    pub fn hub(&self, res: &Resource) -> Arc<Hub> {
        let _on_main_runtime = self.runtime.enter();
        let mut hubs = self.hubs.lock();
        hubs.entry(res.storage.clone())
            .or_insert_with(|| {
                Hub::start(self.store.clone(), res.prefix(), res.selectable_fields())
            })
            .clone()
    }

    /// Expires the watch history of every resource: current watches end and
    /// clients resuming from before now get 410 Gone and relist.
    pub fn expire_watches(&self) {
        for hub in self.hubs.lock().values() {
            hub.expire();
        }
    }

    /// The stored state at `key`, if any.
    pub async fn get(&self, key: &str) -> Result<Option<KeyValue>, ApiError> {
        let (kv, _) = self.store.get(key, None).await.map_err(store_err)?;
        Ok(kv)
    }

    /// The stored state at `key` and the object in its served form.
    pub async fn read(
        &self,
        res: &Resource,
        key: &str,
    ) -> Result<Option<(KeyValue, Value)>, ApiError> {
        match self.get(key).await? {
            None => Ok(None),
            Some(kv) => {
                let v = codec::to_served(res, codec::decode(&kv.value, kv.mod_revision)?);
                Ok(Some((kv, v)))
            }
        }
    }

    /// Every stored state under `prefix`, at the current revision.
    pub async fn range(&self, prefix: &str) -> Result<Vec<KeyValue>, ApiError> {
        let r = self
            .store
            .range(RangeRequest {
                prefix: prefix.to_string(),
                ..Default::default()
            })
            .await
            .map_err(store_err)?;
        Ok(r.kvs)
    }

    /// Stores the new object `obj` of `res` at `key` (a dry run only checks
    /// that the name is free, as kube's dry run goes through the storage
    /// create without writing).
    pub async fn create(
        &self,
        res: &Resource,
        key: &str,
        obj: &Value,
        dry_run: bool,
    ) -> Result<Created, ApiError> {
        let stored = codec::encode_stored(res, obj);
        if stored.len() > MAX_OBJECT_BYTES {
            return Err(too_large(stored.len()));
        }
        if dry_run {
            return Ok(match self.get(key).await? {
                Some(_) => Created::NameTaken,
                None => Created::Done(Output::Object(obj.clone())),
            });
        }
        match self.store.create(key, stored).await {
            Ok(kv) => Ok(Created::Done(Output::Encoded(codec::render(
                res,
                &kv.value,
                kv.mod_revision,
            )?))),
            Err(StoreError::AlreadyExists(_)) => Ok(Created::NameTaken),
            Err(e) => Err(store_err(e)),
        }
    }

    /// Writes `new` over the object at `key` whose stored state is `cur`:
    /// unchanged bytes are a no-op (no new revision, no event), and an
    /// object being deleted whose last finalizer went away is removed.
    pub async fn write_over(
        &self,
        res: &Resource,
        key: &str,
        cur: &KeyValue,
        new: Value,
        dry_run: bool,
    ) -> Result<Result<Output, Lost>, ApiError> {
        if object::is_deleting(&new) && object::finalizers(&new).is_empty() {
            if dry_run {
                return Ok(Ok(Output::Object(new)));
            }
            return match self.store.delete(key, Some(cur.mod_revision)).await {
                Ok((_, rev)) => {
                    let mut out = new;
                    object::set_rv(&mut out, rev);
                    Ok(Ok(Output::Object(out)))
                }
                Err(StoreError::Conflict(_) | StoreError::NotFound) => Ok(Err(Lost)),
                Err(e) => Err(store_err(e)),
            };
        }
        let stored = codec::encode_stored(res, &new);
        if stored.len() > MAX_OBJECT_BYTES {
            return Err(too_large(stored.len()));
        }
        if stored == cur.value {
            return Ok(Ok(Output::Encoded(codec::render(
                res,
                &cur.value,
                cur.mod_revision,
            )?)));
        }
        if dry_run {
            return Ok(Ok(Output::Object(new)));
        }
        match self.store.update(key, stored, cur.mod_revision).await {
            Ok(kv) => Ok(Ok(Output::Encoded(codec::render(
                res,
                &kv.value,
                kv.mod_revision,
            )?))),
            Err(StoreError::Conflict(_) | StoreError::NotFound) => Ok(Err(Lost)),
            Err(e) => Err(store_err(e)),
        }
    }

    /// The compare-and-swap loop of an update: reads the object at `key`,
    /// asks `next` for the state to store (with whatever else the caller
    /// wants back, warnings for instance), and writes it over what was read.
    /// A write that lost against a concurrent change is tried again from a
    /// fresh read when `retry` (no precondition pinned the state the caller
    /// meant), else it is a 409 Conflict, as it is after
    /// [`WRITE_RETRIES`] lost rounds. A missing object is
    /// [`Updated::Missing`], for the caller to create or refuse.
    ///
    /// `next` gets what it works on ([`Current`]) and the object in its
    /// served form; it returns a boxed future so that the verbs' steps (which run
    /// admission) stay `Send` on any runtime.
    pub async fn update<'s, T, F>(
        &self,
        res: &Resource,
        key: &str,
        name: &str,
        dry_run: bool,
        retry: bool,
        mut next: F,
    ) -> Result<Updated<T>, ApiError>
    where
        F: FnMut(Current, Value) -> UpdateStep<'s, T>,
    {
        for _ in 0..WRITE_RETRIES {
            let Some((cur, old)) = self.read(res, key).await? else {
                return Ok(Updated::Missing);
            };
            let current = Current {
                revision: cur.mod_revision,
                stored_bytes: cur.value.len(),
            };
            let (new, extra) = next(current, old).await?;
            match self.write_over(res, key, &cur, new, dry_run).await? {
                Ok(out) => return Ok(Updated::Written(out, extra)),
                Err(Lost) if retry => continue,
                Err(Lost) => break,
            }
        }
        Err(ApiError::modified(&res.group, &res.plural, name))
    }

    /// Deletes one object by the rules of kube-apiserver: preconditions,
    /// the admission `check`, then either removal, or marking with
    /// `deletionTimestamp` when finalizers (or the requested propagation,
    /// or what deletion means for the kind: a namespace's lifecycle, a
    /// pod's grace period) keep it around.
    pub async fn delete(
        &self,
        res: &Resource,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
        check: &dyn DeleteCheck,
    ) -> Result<Output, ApiError> {
        let key = res.key(ns, name);
        for _ in 0..WRITE_RETRIES {
            let Some((cur, old)) = self.read(res, &key).await? else {
                return Err(ApiError::not_found(&res.group, &res.plural, name));
            };
            check_preconditions(res, name, opts, &cur, &old)?;
            check.check(&old).await?;
            let mut fins = object::finalizers(&old);
            let policy = opts.propagation.as_deref().unwrap_or("Background");
            let mut want = |f: &str, on: bool| {
                let has = fins.iter().any(|x| x == f);
                if on && !has {
                    fins.push(f.to_string());
                } else if !on && has && !object::is_deleting(&old) {
                    fins.retain(|x| x != f);
                }
            };
            want(ORPHAN, policy == "Orphan");
            want(FOREGROUND, policy == "Foreground");
            let meaning = res.strategy.deletion(&old, opts.grace);
            for f in &meaning.finalizers {
                want(f, true);
            }
            let grace = meaning.grace_seconds;
            let already = object::is_deleting(&old);
            let immediate = fins.is_empty() && !meaning.lifecycle && grace == 0;
            if immediate {
                if opts.dry_run {
                    return Ok(Output::Object(old));
                }
                match self.store.delete(&key, Some(cur.mod_revision)).await {
                    Ok(_) => return Ok(Output::Object(old)),
                    Err(StoreError::Conflict(_)) => continue,
                    Err(StoreError::NotFound) => {
                        return Err(ApiError::not_found(&res.group, &res.plural, name));
                    }
                    Err(e) => return Err(store_err(e)),
                }
            }
            let mut new = old.clone();
            object::set_finalizers(&mut new, &fins);
            if !already {
                let m = meta_mut(&mut new).expect("metadata");
                let ts = if grace > 0 {
                    (chrono::Utc::now() + chrono::Duration::seconds(grace))
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                } else {
                    object::now_rfc3339()
                };
                m.insert("deletionTimestamp".into(), json!(ts));
                m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                // kube bumps generation on graceful deletion only where the
                // kind has one.
                if let Some(g) = m.get("generation").and_then(Value::as_i64)
                    && g > 0
                {
                    m.insert("generation".into(), json!(g + 1));
                }
                res.strategy.mark_deleting(&mut new);
            } else if grace == 0 && fins.is_empty() && !meaning.lifecycle {
                // A second delete with grace 0 finishes a graceful deletion.
                match self.store.delete(&key, Some(cur.mod_revision)).await {
                    Ok(_) => return Ok(Output::Object(old)),
                    Err(StoreError::Conflict(_)) => continue,
                    Err(e) => return Err(store_err(e)),
                }
            }
            object::tidy(&mut new);
            if opts.dry_run {
                return Ok(Output::Object(new));
            }
            let stored = codec::encode_stored(res, &new);
            if stored == cur.value {
                return Ok(Output::Encoded(codec::render(
                    res,
                    &cur.value,
                    cur.mod_revision,
                )?));
            }
            match self.store.update(&key, stored, cur.mod_revision).await {
                Ok(kv) => {
                    return Ok(Output::Encoded(codec::render(
                        res,
                        &kv.value,
                        kv.mod_revision,
                    )?));
                }
                Err(StoreError::Conflict(_)) => continue,
                Err(StoreError::NotFound) => {
                    return Err(ApiError::not_found(&res.group, &res.plural, name));
                }
                Err(e) => return Err(store_err(e)),
            }
        }
        Err(ApiError::modified(&res.group, &res.plural, name))
    }

    /// Changes a stored object in place with `f` (metadata bookkeeping done
    /// by the server's own controllers: finalizers, owner references,
    /// status), retrying on concurrent changes. `f` sees the stored form and
    /// returns whether it changed anything. An object being deleted whose
    /// finalizers become empty is removed; a missing object is no error.
    pub async fn mutate(&self, key: &str, f: impl Fn(&mut Value) -> bool) -> Result<(), ApiError> {
        for _ in 0..WRITE_RETRIES {
            let Some(kv) = self.get(key).await? else {
                return Ok(());
            };
            let mut v: Value = serde_json::from_slice(&kv.value)
                .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))?;
            if !f(&mut v) {
                return Ok(());
            }
            object::tidy(&mut v);
            let result = if object::is_deleting(&v) && object::finalizers(&v).is_empty() {
                self.store
                    .delete(key, Some(kv.mod_revision))
                    .await
                    .map(|_| ())
            } else {
                let bytes = codec::encode(&v);
                if bytes == kv.value {
                    return Ok(());
                }
                self.store
                    .update(key, bytes, kv.mod_revision)
                    .await
                    .map(|_| ())
            };
            match result {
                Ok(()) => return Ok(()),
                Err(StoreError::Conflict(_)) => continue,
                Err(StoreError::NotFound) => return Ok(()),
                Err(e) => return Err(store_err(e)),
            }
        }
        Err(ApiError::internal(format!(
            "too many concurrent changes to {key}"
        )))
    }
}

/// The UID and resourceVersion preconditions of a delete.
fn check_preconditions(
    res: &Resource,
    name: &str,
    opts: &DeleteOptions,
    cur: &KeyValue,
    old: &Value,
) -> Result<(), ApiError> {
    if let Some(uid) = &opts.uid
        && uid != object::uid(old)
    {
        return Err(ApiError::conflict(
            &res.group,
            &res.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                object::uid(old)
            ),
        ));
    }
    if let Some(rv) = &opts.resource_version
        && *rv != cur.mod_revision.to_string()
    {
        return Err(ApiError::conflict(
            &res.group,
            &res.plural,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                cur.mod_revision
            ),
        ));
    }
    Ok(())
}
