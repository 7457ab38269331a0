//! The catalogue of served resources (built-in kinds plus every established
//! CustomResourceDefinition) and the [`Strategy`] interface through which
//! each resource's own rules are reached.
//!
//! The verbs look resources up here by group, version and plural; discovery
//! and OpenAPI are rendered from it. A [`Resource`] carries its strategy, so
//! generic code asks `res.strategy` instead of branching on the kind; the
//! implementations live in `crate::strategy`, one file per kind with rules.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use apimachinery::schema::Schema;
use apimachinery::{ApiError, Cause};
use parking_lot::RwLock;
use serde_json::Value;

use crate::object;
use crate::storage::keys;

/// How `metadata.name` of a kind is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS-1123 subdomain (most kinds).
    Subdomain,
    /// A DNS-1123 label (namespaces).
    Label,
    /// Any path segment: the kind checks the name itself (RBAC kinds).
    PathSegment,
}

/// What deleting an object of a kind means beyond the generic rules
/// (preconditions, finalizers, propagation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deletion {
    /// Finalizers the deletion adds (a CRD's cleanup finalizer).
    pub finalizers: Vec<&'static str>,
    /// Deletion is a phase a controller finishes (namespaces): the object is
    /// marked and kept even without finalizers.
    pub lifecycle: bool,
    /// Seconds until the object may go (a scheduled pod's grace period);
    /// 0 deletes at once.
    pub grace_seconds: i64,
}

/// The rules of one kind (kube-apiserver's registry strategies): what a
/// create or update prepares, what makes an object invalid, what deletion
/// means, and how a converted view maps to its stored form. Every method
/// has the generic behaviour as its default, so a kind implements only the
/// rules it has.
pub trait Strategy: Send + Sync + std::fmt::Debug {
    /// Whether objects carry `metadata.generation`.
    fn has_generation(&self) -> bool {
        false
    }

    /// How `metadata.name` is checked.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// Served form → stored form, for a view stored as another version.
    fn served_to_storage(&self, _res: &Resource, obj: Value) -> Value {
        obj
    }

    /// Stored form → served form, for a view stored as another version.
    fn storage_to_served(&self, _res: &Resource, obj: Value) -> Value {
        obj
    }

    /// The status a new object starts with where the kind has a status
    /// subresource; `given` is what the client sent (otherwise dropped).
    fn initial_status(&self, _given: Option<Value>) -> Option<Value> {
        None
    }

    /// Kind-specific preparation of a new object (labels, finalizers).
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// kube-apiserver's defaults for the kind, as decoding a body applies
    /// them.
    fn apply_defaults(&self, _res: &Resource, _obj: &mut Value) {}

    /// Normalises an object before validation: defaults plus folding of
    /// write-only fields (a Secret's `stringData`).
    fn normalize(&self, res: &Resource, obj: &mut Value) {
        self.apply_defaults(res, obj);
    }

    /// Shape and rule checks: a wrongly typed field is an error (400), a
    /// rule broken is a cause (422).
    fn validate(&self, _res: &Resource, _obj: &Value) -> Result<Vec<Cause>, ApiError> {
        Ok(Vec::new())
    }

    /// Rules an update of the main resource must follow beyond
    /// [`Strategy::validate`].
    fn validate_update(&self, _new: &Value, _old: &Value) -> Vec<Cause> {
        Vec::new()
    }

    /// Whether a PUT on a missing object creates it.
    fn create_on_update(&self) -> bool {
        false
    }

    /// Whether an update moves `generation`: by default a change outside
    /// `metadata` (and `status`, where it is a subresource).
    fn generation_changed(&self, old: &Value, new: &Value, status_subresource: bool) -> bool {
        object::generation_relevant_differs(old, new, status_subresource)
    }

    /// A check on deleting `name` that holds before existence and for dry
    /// runs (the NamespaceLifecycle admission's immortal namespaces).
    fn check_delete(&self, _res: &Resource, _name: &str) -> Result<(), ApiError> {
        Ok(())
    }

    /// What deleting `old` means; `grace` is the requested grace period.
    fn deletion(&self, _old: &Value, _grace: Option<i64>) -> Deletion {
        Deletion::default()
    }

    /// Marks an object whose deletion starts (a namespace turns
    /// Terminating).
    fn mark_deleting(&self, _obj: &mut Value) {}

    /// Whether the kind serves the `finalize` subresource (namespaces).
    fn finalize_subresource(&self) -> bool {
        false
    }

    /// Whether webhooks match the object by its own labels instead of its
    /// namespace's (namespaces themselves).
    fn is_namespace(&self) -> bool {
        false
    }
}

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
    /// The kind's rules (stateless, so shared by every resource of a kind).
    pub strategy: &'static dyn Strategy,
}

/// The generic rules alone, for resources that are not stored (the
/// computed review kinds) or seen from outside (an AdmissionReview's).
#[derive(Debug)]
pub struct NoRules;

impl Strategy for NoRules {}

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
        keys::prefix(&self.storage)
    }

    /// Store key prefix of this resource's objects in one namespace.
    pub fn namespace_prefix(&self, ns: &str) -> String {
        keys::namespace_prefix(&self.storage, ns)
    }

    /// The store key of an object (`ns` is ignored for cluster-scoped ones).
    pub fn key(&self, ns: Option<&str>, name: &str) -> String {
        keys::key(&self.storage, ns.filter(|_| self.namespaced), name)
    }

    /// Whether this view is served in another form than it is stored in: a
    /// built-in view of another kind's storage (events.k8s.io/v1 Events) or a
    /// custom resource version other than the storage version.
    pub fn converted(&self) -> bool {
        self.version != self.storage_version
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
}

impl Registry {
    /// A registry serving `resources` (the built-in kinds, at start).
    pub fn with(resources: Vec<Resource>) -> Registry {
        let r = Registry::default();
        for res in resources {
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
