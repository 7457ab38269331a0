//! The catalogue of served resources: built-in kinds plus every established
//! CustomResourceDefinition. Handlers look resources up here by group, version
//! and plural; discovery is rendered from it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use apimachinery::schema::Schema;
use parking_lot::RwLock;

/// Where a scale subresource reads and writes its numbers, as JSON paths
/// like `.spec.replicas`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
    /// Built-in kinds keep a structured `spec.selector`; CRDs name a string path.
    pub selector_is_structured: bool,
}

/// A CRD printer column.
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: Option<String>,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// Everything the server knows about one served group/version/resource.
#[derive(Clone, Debug)]
pub struct Resource {
    pub group: String,
    pub version: String,
    /// Plural, lowercase: `pods`.
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    pub scale: Option<ScalePaths>,
    /// Pods have `eviction` (and `binding`).
    pub eviction: bool,
    /// The store key segment shared by every version of this resource:
    /// `<group or "core">/<plural>`.
    pub storage: String,
    /// The version objects are stored at (CRDs: the storage version).
    pub storage_version: String,
    /// Structural schema of a custom resource version.
    pub schema: Option<Arc<Schema>>,
    pub printer_columns: Vec<PrinterColumn>,
    /// Field selectors accepted beyond metadata.name / metadata.namespace.
    pub extra_fields: Vec<&'static str>,
    pub builtin: bool,
    /// The UID of the defining CRD, for custom resources.
    pub crd_uid: Option<String>,
    /// The verbs served on the resource itself (not its subresources), as
    /// discovery lists them; the handlers refuse any other with a 405.
    pub verbs: Vec<&'static str>,
}

/// Every verb a stored resource can have, in discovery's order.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl Resource {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether `verb` is served on the resource itself.
    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }

    /// Store key prefix of every object of this resource.
    pub fn prefix(&self) -> String {
        format!("/registry/{}/", self.storage)
    }

    /// Store key prefix of this resource's objects in one namespace.
    pub fn namespace_prefix(&self, ns: &str) -> String {
        format!("/registry/{}/{}/", self.storage, ns)
    }

    pub fn key(&self, ns: Option<&str>, name: &str) -> String {
        match ns {
            Some(ns) if self.namespaced => format!("/registry/{}/{}/{}", self.storage, ns, name),
            _ => format!("/registry/{}/{}", self.storage, name),
        }
    }

    /// Field paths this resource accepts in field selectors.
    pub fn selectable_fields(&self) -> Vec<&'static str> {
        let mut f = vec!["metadata.name", "metadata.namespace"];
        f.extend(self.extra_fields.iter().copied());
        f
    }

    /// A group-qualified resource name for messages: `pods`, `deployments.apps`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// Served resources keyed by (group, version, plural).
#[derive(Default)]
pub struct Registry {
    inner: RwLock<BTreeMap<(String, String, String), Arc<Resource>>>,
    /// Bumped on every change, so documents derived from the registry
    /// (OpenAPI) know when to render again.
    generation: AtomicU64,
    /// The rendered OpenAPI documents of this registry.
    pub(crate) openapi: crate::openapi::Cache,
}

impl Registry {
    pub fn new() -> Registry {
        let r = Registry::default();
        for res in crate::builtin::resources() {
            r.insert(res);
        }
        r
    }

    pub fn insert(&self, res: Resource) {
        self.inner.write().insert(
            (res.group.clone(), res.version.clone(), res.plural.clone()),
            Arc::new(res),
        );
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Removes every version of a custom resource defined by the CRD `uid`.
    pub fn remove_crd(&self, uid: &str) {
        self.inner
            .write()
            .retain(|_, r| r.crd_uid.as_deref() != Some(uid));
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Serves `resources` in place of whatever the CRD `uid` served before, in
    /// one step, so no request sees the resource missing in between.
    pub fn replace_crd(&self, uid: &str, resources: Vec<Resource>) {
        let mut inner = self.inner.write();
        inner.retain(|_, r| r.crd_uid.as_deref() != Some(uid));
        for res in resources {
            inner.insert(
                (res.group.clone(), res.version.clone(), res.plural.clone()),
                Arc::new(res),
            );
        }
        drop(inner);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// A counter that moves whenever the set of served resources changes.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Resource>> {
        self.inner
            .read()
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Every served resource, ordered by group, version, plural.
    pub fn all(&self) -> Vec<Arc<Resource>> {
        self.inner.read().values().cloned().collect()
    }

    /// One served version per storage location (for controllers that walk
    /// every object: namespace deletion, garbage collection).
    pub fn storage_resources(&self) -> Vec<Arc<Resource>> {
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for r in self.all() {
            if r.version == r.storage_version && seen.insert(r.storage.clone()) {
                out.push(r);
            }
        }
        out
    }

    /// The resource stored under `storage` (e.g. `apps/deployments`) at its
    /// storage version.
    pub fn by_storage(&self, storage: &str) -> Option<Arc<Resource>> {
        self.all()
            .into_iter()
            .find(|r| r.storage == storage && r.version == r.storage_version)
    }

    /// The resource for an apiVersion and kind, at that version.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<Resource>> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        self.all()
            .into_iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
    }
}
