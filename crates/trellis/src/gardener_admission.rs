//! Admission for core.gardener.cloud objects in the embedded API server:
//! CloudProfiles are defaulted and validated, and updates that would break
//! a NamespacedCloudProfile are rejected naming it; NamespacedCloudProfiles
//! are checked against their parent and the requester's custom verbs
//! (`modify-spec-kubernetes`, `modify-spec-machineimages`,
//! `modify-spec-providerconfig`, asked of the server's RBAC authorizer);
//! Shoots get their profile reference synced, their versions and images
//! defaulted, and every worker validated against the (rendered) profile.
//!
//! The decisions are the `gardener` crate's pure functions; this module
//! only loads what they need from the store and asks the authorizer.

// Admission answers are full metav1.Status errors, as in the apiserver crate.
#![allow(clippy::result_large_err)]

use std::sync::{Arc, Weak};

use apimachinery::{ApiError, Cause};
use apiserver::auth::RequestAttributes;
use apiserver::{AdmissionPlugin, Attributes, Operation, Server, UserInfo};
use chrono::Utc;
use gardener::ncp_admission::{self, NcpRef};
use gardener::{
    CloudProfileReference, CloudProfileSpec, Extensions, KIND_CLOUD_PROFILE,
    KIND_NAMESPACED_CLOUD_PROFILE, NamespacedCloudProfileSpec, ShootSpec, render, shoot_admission,
    validation,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::machine_admission::decode_in;

const GROUP: &str = gardener::API_GROUP;
const VERSION: &str = gardener::API_VERSION;

pub struct GardenerAdmission {
    source: Arc<dyn Source>,
    ext: Extensions,
}

impl GardenerAdmission {
    /// Admission inside the embedded server: reads its store, asks its
    /// RBAC authorizer.
    pub fn embedded(server: &Arc<Server>, ext: Extensions) -> GardenerAdmission {
        GardenerAdmission {
            source: Arc::new(Embedded(Arc::downgrade(server))),
            ext,
        }
    }

    /// Admission as a webhook of another API server: reads through a
    /// client, asks SubjectAccessReviews.
    pub fn remote(client: kube::Client, ext: Extensions) -> GardenerAdmission {
        GardenerAdmission {
            source: Arc::new(Remote(client)),
            ext,
        }
    }
}

/// Where admission reads the objects it judges against, and whom it asks
/// about custom verbs.
#[async_trait::async_trait]
pub trait Source: Send + Sync {
    /// One core.gardener.cloud object, if it exists.
    async fn read(&self, plural: &str, ns: Option<&str>, name: &str) -> Option<Value>;
    /// Every core.gardener.cloud object of a resource (in `ns`, or all).
    async fn list(&self, plural: &str, ns: Option<&str>) -> Result<Vec<Value>, ApiError>;
    /// Whether `user` may `verb` the NCP `ns/name`.
    async fn may(
        &self,
        user: Option<&Arc<UserInfo>>,
        verb: &str,
        ns: &str,
        name: &str,
    ) -> Result<bool, ApiError>;
}

struct Embedded(Weak<Server>);

impl Embedded {
    fn server(&self) -> Result<Arc<Server>, ApiError> {
        self.0
            .upgrade()
            .ok_or_else(|| ApiError::service_unavailable("the API server is shutting down"))
    }
}

#[async_trait::async_trait]
impl Source for Embedded {
    async fn read(&self, plural: &str, ns: Option<&str>, name: &str) -> Option<Value> {
        let server = self.server().ok()?;
        let res = server.registry.get(GROUP, VERSION, plural)?;
        let (kv, _) = server.store.get(&res.key(ns, name), None).await.ok()?;
        serde_json::from_slice(&kv?.value).ok()
    }

    async fn list(&self, plural: &str, ns: Option<&str>) -> Result<Vec<Value>, ApiError> {
        let server = self.server()?;
        let Some(res) = server.registry.get(GROUP, VERSION, plural) else {
            return Ok(Vec::new());
        };
        let prefix = match ns {
            Some(ns) => res.namespace_prefix(ns),
            None => res.prefix(),
        };
        let r = server
            .store
            .range(store::RangeRequest {
                prefix,
                ..Default::default()
            })
            .await
            .map_err(apiserver::storage::store_err)?;
        Ok(r.kvs
            .iter()
            .filter_map(|kv| serde_json::from_slice(&kv.value).ok())
            .collect())
    }

    /// With authorization off, or for the server's own requests,
    /// everything is allowed.
    async fn may(
        &self,
        user: Option<&Arc<UserInfo>>,
        verb: &str,
        ns: &str,
        name: &str,
    ) -> Result<bool, ApiError> {
        let server = self.server()?;
        let (Some(auth), Some(user)) = (server.auth(), user) else {
            return Ok(true);
        };
        let attrs = RequestAttributes {
            verb: verb.into(),
            resource_request: true,
            path: String::new(),
            api_group: GROUP.into(),
            api_version: VERSION.into(),
            resource: "namespacedcloudprofiles".into(),
            subresource: String::new(),
            namespace: ns.into(),
            name: name.into(),
        };
        Ok(auth
            .rbac
            .authorize(&server.storage, user, &attrs)
            .await?
            .allowed)
    }
}

struct Remote(kube::Client);

impl Remote {
    fn api(&self, plural: &str, ns: Option<&str>) -> kube::Api<kube::api::DynamicObject> {
        let kind = match plural {
            "cloudprofiles" => "CloudProfile",
            "namespacedcloudprofiles" => "NamespacedCloudProfile",
            _ => "Shoot",
        };
        let gvk = kube::core::GroupVersionKind::gvk(GROUP, VERSION, kind);
        let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
        match ns {
            Some(ns) => kube::Api::namespaced_with(self.0.clone(), ns, &ar),
            None => kube::Api::all_with(self.0.clone(), &ar),
        }
    }
}

fn unavailable(what: &str, e: kube::Error) -> ApiError {
    ApiError::service_unavailable(format!("{what}: {e}"))
}

#[async_trait::async_trait]
impl Source for Remote {
    async fn read(&self, plural: &str, ns: Option<&str>, name: &str) -> Option<Value> {
        let obj = self.api(plural, ns).get_opt(name).await.ok()??;
        serde_json::to_value(obj).ok()
    }

    async fn list(&self, plural: &str, ns: Option<&str>) -> Result<Vec<Value>, ApiError> {
        let list = self
            .api(plural, ns)
            .list(&Default::default())
            .await
            .map_err(|e| unavailable(&format!("listing {plural}"), e))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect())
    }

    /// Asks the API server with a SubjectAccessReview for the request's
    /// user, groups and extra.
    async fn may(
        &self,
        user: Option<&Arc<UserInfo>>,
        verb: &str,
        ns: &str,
        name: &str,
    ) -> Result<bool, ApiError> {
        use k8s_openapi::api::authorization::v1::{
            ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
        };
        let Some(user) = user else {
            return Ok(false);
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.username.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(GROUP.into()),
                    version: Some(VERSION.into()),
                    resource: Some("namespacedcloudprofiles".into()),
                    verb: Some(verb.into()),
                    namespace: Some(ns.into()),
                    name: Some(name.into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.0.clone());
        let answer = api
            .create(&Default::default(), &review)
            .await
            .map_err(|e| unavailable("asking a SubjectAccessReview", e))?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}

/// The spec of an object, decoded; a field of the wrong type is a 422.
fn spec<T: DeserializeOwned + Default>(obj: &Value, kind: &str) -> Result<T, ApiError> {
    match obj.get("spec") {
        None | Some(Value::Null) => Ok(T::default()),
        Some(spec) => {
            let wrapped = serde_json::json!({"metadata": obj.get("metadata"), "spec": spec});
            #[derive(serde::Deserialize)]
            struct Spec<T> {
                spec: T,
            }
            let s: Spec<T> = decode_in(GROUP, &wrapped, kind)?;
            Ok(s.spec)
        }
    }
}

fn encode<T: serde::Serialize>(v: &T) -> Result<Value, ApiError> {
    serde_json::to_value(v).map_err(|e| ApiError::internal(e.to_string()))
}

/// Lays `typed` (a modelled view of the object, changed by defaulting) over
/// `orig` (what was sent, possibly with fields the types do not model):
/// modelled values win, unmodelled keys stay. Lists of objects merge by
/// index when their lengths agree (worker pools); otherwise the typed list
/// replaces.
fn overlay(orig: &mut Value, typed: &Value) {
    match (orig, typed) {
        (Value::Object(o), Value::Object(t)) => {
            for (k, tv) in t {
                match o.get_mut(k) {
                    Some(ov) => overlay(ov, tv),
                    None => {
                        o.insert(k.clone(), tv.clone());
                    }
                }
            }
        }
        (Value::Array(o), Value::Array(t)) if o.len() == t.len() => {
            for (ov, tv) in o.iter_mut().zip(t) {
                overlay(ov, tv);
            }
        }
        (o, t) => *o = t.clone(),
    }
}

fn spec_of<T: DeserializeOwned + Default>(obj: &Value) -> T {
    obj.get("spec")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default()
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn namespace_of(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The spec a profile reference resolves to: a CloudProfile's spec, or an
/// NCP rendered against its parent now (so a Shoot created right after its
/// NCP does not wait for the controller), falling back to the NCP's status
/// for parents the plugin cannot render alone (NCP chains).
async fn effective_profile(
    server: &dyn Source,
    r: &CloudProfileReference,
    namespace: &str,
) -> Option<CloudProfileSpec> {
    if r.kind == KIND_NAMESPACED_CLOUD_PROFILE {
        let ncp = server
            .read("namespacedcloudprofiles", Some(namespace), &r.name)
            .await?;
        let ncp_spec: NamespacedCloudProfileSpec = spec_of(&ncp);
        if ncp_spec.parent.kind.is_empty() || ncp_spec.parent.kind == KIND_CLOUD_PROFILE {
            let parent = server
                .read("cloudprofiles", None, &ncp_spec.parent.name)
                .await?;
            return Some(render::render(&spec_of(&parent), &ncp_spec));
        }
        return ncp
            .pointer("/status/cloudProfileSpec")
            .cloned()
            .and_then(|s| serde_json::from_value(s).ok());
    }
    let cp = server.read("cloudprofiles", None, &r.name).await?;
    Some(spec_of(&cp))
}

/// The root CloudProfile a reference derives from (for profile switches).
async fn root_of(
    server: &dyn Source,
    r: &CloudProfileReference,
    namespace: &str,
) -> Option<String> {
    let mut current = r.clone();
    let mut ns = namespace.to_string();
    // Chains are short (the library caps them); the bound guards loops.
    for _ in 0..16 {
        if current.kind != KIND_NAMESPACED_CLOUD_PROFILE {
            server.read("cloudprofiles", None, &current.name).await?;
            return Some(current.name);
        }
        if let Some(n) = current.namespace.clone() {
            ns = n;
        }
        let ncp = server
            .read("namespacedcloudprofiles", Some(&ns), &current.name)
            .await?;
        let s: NamespacedCloudProfileSpec = spec_of(&ncp);
        current = s.parent;
        if current.kind.is_empty() {
            current.kind = KIND_CLOUD_PROFILE.into();
        }
    }
    None
}

fn reject(kind: &str, name: &str, causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(GROUP, kind, name, causes))
    }
}

/// Only the objects themselves: status writes come from controllers.
fn applies(attrs: &Attributes<'_>) -> bool {
    attrs.resource.group == GROUP
        && attrs.operation != Operation::Delete
        && attrs.subresource.is_none()
}

impl GardenerAdmission {
    async fn mutate_shoot(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), ApiError> {
        let server = self.source.as_ref();
        let mut new: ShootSpec = spec(obj, "Shoot")?;
        let old: Option<ShootSpec> = attrs.old.map(spec_of);
        let mut causes = shoot_admission::sync_profile_reference(&mut new, old.as_ref());
        let ns = attrs.namespace.unwrap_or("");
        if let Some(r) = shoot_admission::profile_reference(&new) {
            let target_ns = r.namespace.clone().unwrap_or_else(|| ns.to_string());
            if let Some(profile) = effective_profile(server, &r, &target_ns).await {
                causes.extend(shoot_admission::default_shoot(
                    &mut new,
                    old.as_ref(),
                    &profile,
                    Utc::now(),
                ));
            }
        }
        reject("Shoot", attrs.name, causes)?;
        let typed = encode(&new)?;
        let spec = obj
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("a Shoot must be an object"))?
            .entry("spec")
            .or_insert_with(|| Value::Object(Default::default()));
        overlay(spec, &typed);
        // The sync may drop the legacy name; the overlay only adds.
        if new.cloud_profile_name.is_none()
            && let Some(s) = spec.as_object_mut()
        {
            s.remove("cloudProfileName");
        }
        Ok(())
    }

    async fn validate_shoot(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), ApiError> {
        let server = self.source.as_ref();
        let new: ShootSpec = spec(obj, "Shoot")?;
        let old: Option<ShootSpec> = attrs.old.map(spec_of);
        if old.as_ref() == Some(&new) {
            // Metadata-only updates (finalizers, labels) are not re-judged.
            return Ok(());
        }
        let ns = attrs.namespace.unwrap_or("");
        // The resolver is synchronous: load the roots of both references.
        let mut roots = Vec::new();
        for r in [
            old.as_ref().and_then(shoot_admission::profile_reference),
            shoot_admission::profile_reference(&new),
        ]
        .into_iter()
        .flatten()
        {
            let rns = r.namespace.clone().unwrap_or_else(|| ns.to_string());
            let root = root_of(server, &r, &rns).await;
            roots.push((r, rns, root));
        }
        let mut granted_use = Vec::new();
        if let Some(r) = shoot_admission::profile_reference(&new)
            && let Some(other) = r.namespace.as_deref().filter(|o| *o != ns)
        {
            let ok = server
                .may(attrs.user.as_ref(), "use", other, &r.name)
                .await?;
            granted_use.push((other.to_string(), r.name.clone(), ok));
        }
        let resolver = |r: &CloudProfileReference, rns: &str| {
            roots
                .iter()
                .find(|(x, n, _)| x.kind == r.kind && x.name == r.name && n == rns)
                .and_then(|(_, _, root)| root.clone())
        };
        let use_granted = |n: &str, name: &str| {
            granted_use
                .iter()
                .any(|(gn, gname, ok)| gn == n && gname == name && *ok)
        };
        let mut causes = shoot_admission::validate_profile_reference(
            &new,
            old.as_ref(),
            ns,
            &resolver,
            self.ext,
            &use_granted,
        );
        if let Some(r) = shoot_admission::profile_reference(&new) {
            let target_ns = r.namespace.clone().unwrap_or_else(|| ns.to_string());
            match effective_profile(server, &r, &target_ns).await {
                Some(profile) => {
                    causes.extend(shoot_admission::validate_shoot(
                        &new,
                        old.as_ref(),
                        &profile,
                        Utc::now(),
                    ));
                    let switched = old
                        .as_ref()
                        .and_then(shoot_admission::profile_reference)
                        .is_some_and(|o| o != r);
                    if switched {
                        causes.extend(shoot_admission::validate_switch_target(
                            &new, &profile, &r.name,
                        ));
                    }
                }
                None if causes.is_empty() => causes.push(Cause::new(
                    "FieldValueNotFound",
                    "spec.cloudProfile.name",
                    format!("{} {:?} does not exist", r.kind, r.name),
                )),
                None => {}
            }
        }
        reject("Shoot", attrs.name, causes)
    }

    async fn validate_cloud_profile(
        &self,
        attrs: &Attributes<'_>,
        obj: &Value,
    ) -> Result<(), ApiError> {
        let server = self.source.as_ref();
        let new: CloudProfileSpec = spec(obj, "CloudProfile")?;
        let mut causes = validation::validate_cloud_profile_spec(&new);
        if let Some(old) = attrs.old {
            let old: CloudProfileSpec = spec_of(old);
            let ncps = server.list("namespacedcloudprofiles", None).await?;
            let specs: Vec<(String, String, NamespacedCloudProfileSpec)> = ncps
                .iter()
                .map(|n| {
                    (
                        namespace_of(n).to_string(),
                        name_of(n).to_string(),
                        spec_of::<NamespacedCloudProfileSpec>(n),
                    )
                })
                .filter(|(_, _, s)| {
                    (s.parent.kind.is_empty() || s.parent.kind == KIND_CLOUD_PROFILE)
                        && s.parent.name == attrs.name
                })
                .collect();
            let refs: Vec<NcpRef<'_>> = specs
                .iter()
                .map(|(namespace, name, spec)| NcpRef {
                    namespace,
                    name,
                    spec,
                })
                .collect();
            causes.extend(ncp_admission::protect_parent(&old, &new, &refs));
        }
        reject("CloudProfile", attrs.name, causes)
    }

    async fn validate_ncp(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), ApiError> {
        let server = self.source.as_ref();
        let ns = attrs.namespace.unwrap_or("");
        let new: NamespacedCloudProfileSpec = spec(obj, "NamespacedCloudProfile")?;
        let old: Option<NamespacedCloudProfileSpec> = attrs.old.map(spec_of);
        let old_rendered: Option<CloudProfileSpec> = attrs
            .old
            .and_then(|o| o.pointer("/status/cloudProfileSpec").cloned())
            .and_then(|s| serde_json::from_value(s).ok());
        let parent = if new.parent.kind == KIND_NAMESPACED_CLOUD_PROFILE {
            server
                .read("namespacedcloudprofiles", Some(ns), &new.parent.name)
                .await
                .and_then(|p| p.pointer("/status/cloudProfileSpec").cloned())
                .and_then(|s| serde_json::from_value(s).ok())
        } else {
            server
                .read("cloudprofiles", None, &new.parent.name)
                .await
                .map(|p| spec_of::<CloudProfileSpec>(&p))
        };
        let mut granted = Vec::new();
        for (verb, _) in ncp_admission::required_verbs(&new, old.as_ref()) {
            if server
                .may(attrs.user.as_ref(), verb, ns, attrs.name)
                .await?
            {
                granted.push(verb);
            }
        }
        let now = Utc::now();
        let mut causes = ncp_admission::validate(
            &new,
            old.as_ref(),
            old_rendered.as_ref(),
            parent.as_ref(),
            &granted,
            self.ext,
            now,
        );
        if let (Some(old), Some(parent)) = (old.as_ref(), parent.as_ref()) {
            let shoots = server.list("shoots", Some(ns)).await?;
            let using: Vec<(String, ShootSpec)> = shoots
                .iter()
                .map(|s| (name_of(s).to_string(), spec_of::<ShootSpec>(s)))
                .filter(|(_, s)| {
                    shoot_admission::profile_reference(s).is_some_and(|r| {
                        r.kind == KIND_NAMESPACED_CLOUD_PROFILE && r.name == attrs.name
                    })
                })
                .collect();
            let refs: Vec<(&str, &ShootSpec)> =
                using.iter().map(|(n, s)| (n.as_str(), s)).collect();
            causes.extend(ncp_admission::protect_used_overrides(
                old, &new, parent, &refs, now,
            ));
        }
        reject("NamespacedCloudProfile", attrs.name, causes)
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for GardenerAdmission {
    fn name(&self) -> &str {
        "GardenerProfiles"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), ApiError> {
        if !applies(attrs) {
            return Ok(());
        }
        match attrs.resource.kind.as_str() {
            "Shoot" => self.mutate_shoot(attrs, obj).await,
            "CloudProfile" => {
                let mut s: CloudProfileSpec = spec(obj, "CloudProfile")?;
                validation::default_cloud_profile_spec(&mut s);
                overlay(&mut obj["spec"], &encode(&s)?);
                Ok(())
            }
            "NamespacedCloudProfile" => {
                let mut s: NamespacedCloudProfileSpec = spec(obj, "NamespacedCloudProfile")?;
                let old: Option<NamespacedCloudProfileSpec> = attrs.old.map(spec_of);
                ncp_admission::drop_inactive_versions(&mut s, old.as_ref(), Utc::now());
                // Dropping removes list entries, which an overlay cannot
                // express: the modelled spec replaces the sent one.
                obj["spec"] = encode(&s)?;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), ApiError> {
        if !applies(attrs) {
            return Ok(());
        }
        match attrs.resource.kind.as_str() {
            "Shoot" => self.validate_shoot(attrs, obj).await,
            "CloudProfile" => self.validate_cloud_profile(attrs, obj).await,
            "NamespacedCloudProfile" => self.validate_ncp(attrs, obj).await,
            _ => Ok(()),
        }
    }
}

/// Installs the core.gardener.cloud CRDs with their admission, and the
/// extensions.gardener.cloud CRDs (Worker, Cluster) of the shoot flow.
pub async fn prepare(server: &Arc<Server>, ext: Extensions) -> anyhow::Result<()> {
    for crd in gardener::crds().into_iter().chain(worker::crds()) {
        let manifest = serde_json::to_value(&crd)?;
        apiserver::crd::install(server, &manifest).await?;
    }
    server.add_admission(Arc::new(GardenerAdmission::embedded(server, ext)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overlay_keeps_unmodelled_fields_and_takes_modelled_ones() {
        let mut orig = json!({
            "networking": {"type": "calico"},
            "kubernetes": {"version": "1.30", "kubeAPIServer": {"x": 1}},
            "provider": {"workers": [{"name": "a", "sysctls": {"k": "v"}}]}
        });
        let typed = json!({
            "kubernetes": {"version": "1.30.2"},
            "provider": {"workers": [{"name": "a", "machine": {"architecture": "amd64"}}]}
        });
        overlay(&mut orig, &typed);
        assert_eq!(
            orig,
            json!({
                "networking": {"type": "calico"},
                "kubernetes": {"version": "1.30.2", "kubeAPIServer": {"x": 1}},
                "provider": {"workers": [{"name": "a", "sysctls": {"k": "v"}, "machine": {"architecture": "amd64"}}]}
            })
        );
    }

    #[test]
    fn overlay_replaces_lists_whose_length_changed() {
        let mut orig = json!({"zones": ["a", "b"]});
        overlay(&mut orig, &json!({"zones": ["a"]}));
        assert_eq!(orig, json!({"zones": ["a"]}));
    }
}
