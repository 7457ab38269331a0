//! Provider objects of kinds the core does not know, read through the
//! API: a reference is resolved to a served resource (discovery, then the
//! CRD's contract label picks the version, as upstream's
//! `util/contract` does), and the first time a kind is referenced a watch
//! of it starts (upstream: dynamic informers), whose events trigger the
//! Machines and Clusters that own the changed object.
//!
//! A reference to a kind no CRD serves resolves to a readable problem,
//! which the planners turn into a condition; it is looked up again after
//! [`RESOLVE_RETRY`], so installing the provider later just works.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{ObjectRef, Store};

use super::informer::{Sink, informer};
use crate::machine::Lookup;

/// How long a failed resolution is remembered before it is tried again.
pub const RESOLVE_RETRY: Duration = Duration::from_secs(10);

type GroupKind = (String, String);

/// A resolution and when it was made.
type Resolution = (Instant, Result<ApiResource, String>);

/// An owned lookup result (the planners borrow from it).
#[derive(Clone, Debug)]
pub enum Fetched {
    None,
    Invalid(String),
    NotFound,
    Found(Box<DynamicObject>),
}

impl Fetched {
    pub fn as_lookup(&self) -> Lookup<'_> {
        match self {
            Fetched::None => Lookup::None,
            Fetched::Invalid(s) => Lookup::Invalid(s.clone()),
            Fetched::NotFound => Lookup::NotFound,
            Fetched::Found(o) => Lookup::Found(o),
        }
    }

    pub fn found(&self) -> Option<&DynamicObject> {
        match self {
            Fetched::Found(o) => Some(o),
            _ => None,
        }
    }
}

/// Resolves references and keeps one watch per referenced kind.
pub struct Dynamic {
    client: kube::Client,
    resolved: parking_lot::Mutex<HashMap<GroupKind, Resolution>>,
    watches: tokio::sync::Mutex<HashMap<GroupKind, Store<DynamicObject>>>,
    /// Called for every event of every dynamically watched object.
    sinks: Arc<Vec<Sink<DynamicObject>>>,
    shutdown: futures::future::Shared<futures::future::BoxFuture<'static, ()>>,
}

impl Dynamic {
    pub fn new(
        client: kube::Client,
        sinks: Vec<Sink<DynamicObject>>,
        shutdown: futures::future::Shared<futures::future::BoxFuture<'static, ()>>,
    ) -> Dynamic {
        Dynamic {
            client,
            resolved: parking_lot::Mutex::new(HashMap::new()),
            watches: tokio::sync::Mutex::new(HashMap::new()),
            sinks: Arc::new(sinks),
            shutdown,
        }
    }

    /// The served resource a reference names, in the version the CRD's
    /// contract label picks; the problem in words otherwise.
    pub async fn resolve(&self, r: &ObjectReference) -> Result<ApiResource, String> {
        let (group, kind) = crate::contract::group_kind(r);
        let key = (group.clone(), kind.clone());
        if let Some((at, result)) = self.resolved.lock().get(&key)
            && (result.is_ok() || at.elapsed() < RESOLVE_RETRY)
        {
            return result.clone();
        }
        let result = self.resolve_live(r, &group, &kind).await;
        self.resolved
            .lock()
            .insert(key, (Instant::now(), result.clone()));
        result
    }

    async fn resolve_live(
        &self,
        r: &ObjectReference,
        group: &str,
        kind: &str,
    ) -> Result<ApiResource, String> {
        if kind.is_empty() {
            return Err("the reference names no kind".into());
        }
        let api_version = r.api_version.as_deref().unwrap_or_default();
        let version = api_version.rsplit('/').next().unwrap_or_default();
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, _) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|e| match e {
                kube::Error::Discovery(_) | kube::Error::Api(_) => format!(
                    "no API serves kind {kind} in {api_version}; is its provider installed?"
                ),
                other => format!("discovering {kind} in {api_version} failed: {other}"),
            })?;
        // The CRD's contract label says which version to speak.
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let crd_name = format!("{}.{group}", ar.plural);
        let crd = crds
            .get_opt(&crd_name)
            .await
            .map_err(|e| format!("reading CRD {crd_name} failed: {e}"))?
            .ok_or_else(|| format!("kind {kind} is not served by a CustomResourceDefinition"))?;
        let served: Vec<String> = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect();
        let labels = crd.metadata.labels.clone().unwrap_or_default();
        let contract_version =
            crate::contract::contract_version(&labels, crate::types::labels::CONTRACT, &served)
                .map_err(|e| format!("kind {kind}: {e}"))?;
        if contract_version == ar.version {
            return Ok(ar);
        }
        let gvk = GroupVersionKind::gvk(group, &contract_version, kind);
        kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map(|(ar, _)| ar)
            .map_err(|e| format!("discovering {kind} in {group}/{contract_version} failed: {e}"))
    }

    /// The cache of a kind, starting its watch on first use.
    async fn watch(&self, ar: &ApiResource) -> Option<Store<DynamicObject>> {
        let key = (ar.group.clone(), ar.kind.clone());
        let mut watches = self.watches.lock().await;
        if let Some(store) = watches.get(&key) {
            return Some(store.clone());
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), ar);
        let sinks = self.sinks.clone();
        let sink: Sink<DynamicObject> = Box::new(move |o: &DynamicObject| {
            for s in sinks.iter() {
                s(o);
            }
        });
        let started = tokio::time::timeout(
            Duration::from_secs(30),
            informer(api, ar.clone(), vec![sink], self.shutdown.clone()),
        )
        .await;
        match started {
            Ok(Ok(store)) => {
                tracing::info!(kind = %ar.kind, group = %ar.group, "watching a referenced kind");
                watches.insert(key, store.clone());
                Some(store)
            }
            _ => {
                tracing::warn!(kind = %ar.kind, "could not start watching a referenced kind");
                None
            }
        }
    }

    /// The object a reference names in `namespace`: from the kind's cache
    /// (its watch starts on first use), else read live, since a cache may
    /// not show an object created a moment ago.
    pub async fn get(
        &self,
        r: Option<&ObjectReference>,
        namespace: &str,
    ) -> Result<Fetched, kube::Error> {
        let Some(r) = r else {
            return Ok(Fetched::None);
        };
        let ar = match self.resolve(r).await {
            Ok(ar) => ar,
            Err(why) => return Ok(Fetched::Invalid(why)),
        };
        let name = r.name.as_deref().unwrap_or_default();
        if name.is_empty() {
            return Ok(Fetched::Invalid("the reference names no object".into()));
        }
        if let Some(store) = self.watch(&ar).await
            && let Some(o) = store.get(&ObjectRef::new_with(name, ar.clone()).within(namespace))
        {
            return Ok(Fetched::Found(Box::new((*o).clone())));
        }
        self.get_live(&ar, name, namespace).await
    }

    /// Reads an object without a cache (templates, which are read once per
    /// clone and need no watch).
    pub async fn get_live(
        &self,
        ar: &ApiResource,
        name: &str,
        namespace: &str,
    ) -> Result<Fetched, kube::Error> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, ar);
        Ok(match api.get_opt(name).await? {
            Some(o) => Fetched::Found(Box::new(o)),
            None => Fetched::NotFound,
        })
    }

    /// The API of a resolved kind in a namespace.
    pub fn api(&self, ar: &ApiResource, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, ar)
    }
}
