//! Admission: what runs between a request's decoded object and the storage
//! layer.
//!
//! - the [`AdmissionPlugin`] trait that in-process plugins (other crates,
//!   RBAC's escalation check) implement, and the [`Chain`] of them, with the
//!   external webhooks ([`webhook`]) last, as kube-apiserver runs its
//!   webhook plugins after the compiled-in ones;
//! - [`admit`]: the kind's normalisation and validation through its
//!   strategy, then the mutating plugins, then (once the object is known to
//!   be valid) the validating plugins;
//! - [`DeleteAdmission`], the same chain for deletions, handed to the
//!   storage layer's delete;
//! - who is asking ([`UserInfo`], [`current_user`]): set by the request
//!   path, absent for the server's own controllers.
//!
//! Nothing here knows HTTP: the verbs translate requests into [`Attributes`].

pub mod service_ip;
pub mod webhook;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use apimachinery::{ApiError, Cause};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::storage::DeleteCheck;
use crate::storage::registry::Resource;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub fn as_str(&self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// The authenticated identity of a request (kube's `user.Info`), in the
/// shape `authentication.k8s.io/v1 UserInfo` serialises to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInfo {
    pub username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn in_group(&self, g: &str) -> bool {
        self.groups.iter().any(|x| x == g)
    }
}

tokio::task_local! {
    /// The user of the request being handled. Admission runs deep inside the
    /// verbs and also for the server's own controllers (no request, no
    /// user); a task-local carries the identity there without threading it
    /// through every signature.
    static CURRENT_USER: Option<Arc<UserInfo>>;
}

/// Runs `f` as a request of `user`.
pub async fn with_user<F: std::future::Future>(user: Option<Arc<UserInfo>>, f: F) -> F::Output {
    CURRENT_USER.scope(user, f).await
}

/// The user of the current request, if it has one.
pub fn current_user() -> Option<Arc<UserInfo>> {
    CURRENT_USER.try_with(Clone::clone).ok().flatten()
}

/// What is being admitted.
pub struct Attributes<'a> {
    pub operation: Operation,
    pub resource: &'a Resource,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    /// The object before the request (updates and deletes).
    pub old: Option<&'a Value>,
    pub dry_run: bool,
    /// Who sent the request; `None` for the server's own controllers and
    /// when authentication is off.
    pub user: Option<Arc<UserInfo>>,
}

/// An admission plugin. Both hooks default to admitting unchanged.
#[async_trait::async_trait]
pub trait AdmissionPlugin: Send + Sync {
    fn name(&self) -> &str;

    /// May change the object (create and update only).
    async fn mutate(&self, _attrs: &Attributes<'_>, _obj: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// May reject the object; for deletes `obj` is the object being deleted.
    async fn validate(&self, _attrs: &Attributes<'_>, _obj: &Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// Warnings for the client about an admitted create or update: the
    /// `Warning: 299` headers kubectl prints, or an AdmissionReview's
    /// `response.warnings`. Asked only once every plugin has accepted the
    /// object.
    async fn warnings(&self, _attrs: &Attributes<'_>, _obj: &Value) -> Vec<String> {
        Vec::new()
    }
}

/// The plugins of one server, in order.
#[derive(Default)]
pub struct Chain {
    plugins: RwLock<Vec<Arc<dyn AdmissionPlugin>>>,
    /// External admission webhooks: after every in-process plugin.
    webhooks: OnceLock<Arc<dyn AdmissionPlugin>>,
}

impl Chain {
    /// Appends an in-process plugin.
    pub fn add(&self, plugin: Arc<dyn AdmissionPlugin>) {
        self.plugins.write().push(plugin);
    }

    /// Installs the webhook plugin (once).
    pub fn set_webhooks(&self, webhooks: Arc<dyn AdmissionPlugin>) {
        let _ = self.webhooks.set(webhooks);
    }

    /// Every plugin in the order they run.
    pub fn plugins(&self) -> Vec<Arc<dyn AdmissionPlugin>> {
        let mut plugins = self.plugins.read().clone();
        plugins.extend(self.webhooks.get().cloned());
        plugins
    }
}

/// Admits a create or update of `obj`: the kind's normalisation, the
/// metadata and kind rules (`causes` already holds what the caller found,
/// such as schema violations), for updates of the main resource the kind's
/// update rules, then the mutating plugins, then for updates the
/// generation (on the defaulted, mutated object), then a 422 if anything is
/// invalid, then the validating plugins. Returns the plugins' warnings for
/// the client.
pub async fn admit(
    chain: &Chain,
    attrs: &Attributes<'_>,
    obj: &mut Value,
    mut causes: Vec<Cause>,
) -> Result<Vec<String>, ApiError> {
    let res = attrs.resource;
    res.strategy.normalize(res, obj);
    causes.extend(crate::strategy::validate_meta(res, obj));
    causes.extend(res.strategy.validate(res, obj)?);
    if let Some(old) = attrs.old
        && attrs.subresource.is_none()
    {
        causes.extend(res.strategy.validate_update(obj, old));
    }
    let plugins = chain.plugins();
    for p in &plugins {
        p.mutate(attrs, obj).await?;
    }
    if !plugins.is_empty() {
        // kube decodes (and so defaults) what mutating webhooks return.
        res.strategy.apply_defaults(res, obj);
    }
    if let Some(old) = attrs.old {
        crate::strategy::settle_generation(res, attrs.subresource, old, obj);
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&res.group, &res.kind, attrs.name, causes));
    }
    for p in &plugins {
        p.validate(attrs, obj).await?;
    }
    let mut warnings = Vec::new();
    for p in &plugins {
        warnings.extend(p.warnings(attrs, obj).await);
    }
    Ok(warnings)
}

/// The admission check of one deletion, for the storage layer's delete.
pub struct DeleteAdmission<'a> {
    pub chain: &'a Chain,
    pub resource: &'a Resource,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub dry_run: bool,
}

#[async_trait::async_trait]
impl DeleteCheck for DeleteAdmission<'_> {
    async fn check(&self, old: &Value) -> Result<(), ApiError> {
        let attrs = Attributes {
            operation: Operation::Delete,
            resource: self.resource,
            subresource: None,
            namespace: self.namespace,
            name: self.name,
            old: Some(old),
            dry_run: self.dry_run,
            user: current_user(),
        };
        for p in self.chain.plugins() {
            p.validate(&attrs, old).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
