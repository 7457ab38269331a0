//! CustomResourceDefinitions: validation of the definition, turning it into
//! served resources (one per served version), the Established/NamesAccepted
//! status, and cleanup of every custom object when the CRD is deleted.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::Cause;
use apimachinery::schema::Schema;
use serde_json::{Value, json};
use store::{RangeRequest, WatchItem};

use crate::handlers::{DeleteOptions, delete_one, mutate_stored};
use crate::object;
use crate::registry::{PrinterColumn, Resource, ScalePaths};
use crate::server::Server;

pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
const CRD_PREFIX: &str = "/registry/apiextensions.k8s.io/customresourcedefinitions/";

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// Checks a CRD beyond its JSON shape.
pub fn validate_crd(crd: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let group = s(crd, "/spec/group");
    let plural = s(crd, "/spec/names/plural");
    let kind = s(crd, "/spec/names/kind");
    if group.is_empty() {
        causes.push(Cause::required("spec.group"));
    } else if !group.contains('.') {
        causes.push(Cause::invalid(
            "spec.group",
            format!("Invalid value: \"{group}\": should be a domain with at least one dot"),
        ));
    }
    if plural.is_empty() {
        causes.push(Cause::required("spec.names.plural"));
    } else if let Some(why) = object::check_label(plural) {
        causes.push(Cause::invalid(
            "spec.names.plural",
            format!("Invalid value: \"{plural}\": {why}"),
        ));
    }
    if kind.is_empty() {
        causes.push(Cause::required("spec.names.kind"));
    }
    let name = object::name(crd);
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    match s(crd, "/spec/scope") {
        "Namespaced" | "Cluster" => {}
        "" => causes.push(Cause::required("spec.scope")),
        other => causes.push(Cause::new(
            "FieldValueNotSupported",
            "spec.scope",
            format!(
                "Unsupported value: \"{other}\": supported values: \"Cluster\", \"Namespaced\""
            ),
        )),
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::required("spec.versions"));
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if !versions.is_empty() && storage != 1 {
        causes.push(Cause::invalid(
            "spec.versions",
            format!("Invalid value: must have exactly one version marked as storage version, found {storage}"),
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        let vname = s(v, "/name");
        if vname.is_empty() {
            causes.push(Cause::required(format!("spec.versions[{i}].name")));
        }
        if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
            causes.extend(apimachinery::schema::validate_structural(
                schema,
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
            ));
        }
    }
    causes
}

fn printer_columns(v: &Value) -> Vec<PrinterColumn> {
    v.get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| PrinterColumn {
                    name: s(c, "/name").to_string(),
                    type_: s(c, "/type").to_string(),
                    format: c.get("format").and_then(Value::as_str).map(str::to_string),
                    description: s(c, "/description").to_string(),
                    priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    json_path: s(c, "/jsonPath").to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One served resource per served version of the CRD.
pub fn resources_of(crd: &Value) -> Vec<Resource> {
    let group = s(crd, "/spec/group").to_string();
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let plural = s(&names, "/plural").to_string();
    let kind = s(&names, "/kind").to_string();
    let strs = |p: &str| -> Vec<String> {
        names
            .get(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .map(|v| s(v, "/name").to_string())
        .unwrap_or_default();
    let uid = object::uid(crd).to_string();
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
        .map(|v| {
            let schema = v
                .pointer("/schema/openAPIV3Schema")
                .and_then(|sch| Schema::from_json(sch).ok())
                .map(Arc::new);
            let scale = v.pointer("/subresources/scale").map(|sc| ScalePaths {
                spec_replicas: s(sc, "/specReplicasPath").to_string(),
                status_replicas: s(sc, "/statusReplicasPath").to_string(),
                label_selector: sc
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                selector_is_structured: false,
            });
            Resource {
                group: group.clone(),
                version: s(v, "/name").to_string(),
                plural: plural.clone(),
                singular: names
                    .get("singular")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| kind.to_lowercase()),
                kind: kind.clone(),
                list_kind: names
                    .get("listKind")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{kind}List")),
                namespaced: s(crd, "/spec/scope") == "Namespaced",
                short_names: strs("shortNames"),
                categories: strs("categories"),
                status_subresource: v.pointer("/subresources/status").is_some(),
                scale,
                eviction: false,
                storage: format!("{group}/{plural}"),
                storage_version: storage_version.clone(),
                schema,
                printer_columns: printer_columns(v),
                extra_fields: Vec::new(),
                builtin: false,
                crd_uid: Some(uid.clone()),
                verbs: crate::registry::ALL_VERBS.to_vec(),
            }
        })
        .collect()
}

/// Serves the CRD's resources now (replacing an earlier definition).
pub fn register(server: &Server, crd: &Value) {
    let uid = object::uid(crd);
    if uid.is_empty() {
        return;
    }
    server.registry.replace_crd(uid, resources_of(crd));
}

/// Registers every stored CRD at start.
pub async fn load_all(server: &Server) -> anyhow::Result<()> {
    let r = server
        .store
        .range(RangeRequest {
            prefix: CRD_PREFIX.into(),
            ..Default::default()
        })
        .await?;
    for kv in r.kvs {
        if let Ok(v) = serde_json::from_slice::<Value>(&kv.value) {
            register(server, &v);
        }
    }
    Ok(())
}

/// The status a CRD should have: names accepted, established, stored versions.
fn desired_status(crd: &Value) -> Value {
    let mut stored: Vec<String> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if let Some(sv) = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        && !stored.iter().any(|x| x == sv)
    {
        stored.push(sv.to_string());
    }
    let old_conditions = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let cond = |ty: &str, reason: &str, message: &str| {
        let prev = old_conditions
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(ty));
        let since = prev
            .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(object::now_rfc3339()));
        json!({"type": ty, "status": "True", "lastTransitionTime": since,
               "reason": reason, "message": message})
    };
    let mut accepted = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    if accepted.get("singular").is_none()
        && let Some(k) = accepted.get("kind").and_then(Value::as_str)
    {
        accepted["singular"] = json!(k.to_lowercase());
    }
    if accepted.get("listKind").is_none()
        && let Some(k) = accepted.get("kind").and_then(Value::as_str)
    {
        accepted["listKind"] = json!(format!("{k}List"));
    }
    json!({
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": accepted,
        "storedVersions": stored,
    })
}

async fn reconcile(server: &Arc<Server>, key: &str) {
    let Ok((Some(kv), _)) = server.store.get(key, None).await else {
        return;
    };
    let Ok(crd) = serde_json::from_slice::<Value>(&kv.value) else {
        return;
    };
    register(server, &crd);
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
        let objs = server
            .store
            .range(RangeRequest {
                prefix: res.prefix(),
                ..Default::default()
            })
            .await
            .map(|r| r.kvs)
            .unwrap_or_default();
        if objs.is_empty() {
            let _ = mutate_stored(server, key, |o| {
                let fins: Vec<String> = object::finalizers(o)
                    .into_iter()
                    .filter(|f| f != CLEANUP_FINALIZER)
                    .collect();
                object::set_finalizers(o, &fins);
                true
            })
            .await;
            server.registry.remove_crd(object::uid(&crd));
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
            let _ = delete_one(
                server,
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
        let _ = mutate_stored(server, key, |o| {
            o["status"] = desired_status(o);
            true
        })
        .await;
    }
}

/// Follows CRDs: keeps them served, established, and cleans up on delete.
pub fn spawn(server: Arc<Server>) {
    tokio::spawn(async move {
        loop {
            let from = server.store.current_revision();
            if let Ok(r) = server
                .store
                .range(RangeRequest {
                    prefix: CRD_PREFIX.into(),
                    ..Default::default()
                })
                .await
            {
                for kv in r.kvs {
                    reconcile(&server, &kv.key).await;
                }
            }
            let Ok(mut w) = server.store.watch(CRD_PREFIX, from).await else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            loop {
                tokio::select! {
                    item = w.recv() => match item {
                        Some(WatchItem::Event(ev)) => match ev.kind {
                            store::EventKind::Put => reconcile(&server, &ev.kv.key).await,
                            store::EventKind::Delete => {
                                if let Some(p) = ev.prev
                                    && let Ok(v) = serde_json::from_slice::<Value>(&p.value) {
                                    server.registry.remove_crd(object::uid(&v));
                                }
                            }
                        },
                        Some(WatchItem::Progress(_)) => {}
                        None => break,
                    },
                    // Deleting CRDs wait for their objects' finalizers.
                    _ = tick.tick() => {
                        if let Ok(r) = server.store.range(RangeRequest { prefix: CRD_PREFIX.into(), ..Default::default() }).await {
                            for kv in r.kvs {
                                if let Ok(v) = serde_json::from_slice::<Value>(&kv.value)
                                    && object::is_deleting(&v) {
                                    reconcile(&server, &kv.key).await;
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
pub async fn install(server: &Arc<Server>, manifest: &Value) -> anyhow::Result<()> {
    let name = object::name(manifest).to_string();
    anyhow::ensure!(!name.is_empty(), "a CRD manifest without a name");
    let causes = validate_crd(manifest);
    anyhow::ensure!(causes.is_empty(), "CRD {name} is invalid: {causes:?}");
    let key = format!("{CRD_PREFIX}{name}");
    for _ in 0..16 {
        let (cur, _) = server.store.get(&key, None).await?;
        let result = match cur {
            None => {
                let mut crd = manifest.clone();
                if let Some(m) = object::meta_mut(&mut crd) {
                    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
                    m.insert("creationTimestamp".into(), json!(object::now_rfc3339()));
                    m.insert("generation".into(), json!(1));
                }
                crd["status"] = desired_status(&crd);
                server
                    .store
                    .create(&key, object::encode(&crd))
                    .await
                    .map(|kv| (kv, crd))
            }
            Some(kv) => {
                let mut crd: Value = serde_json::from_slice(&kv.value)?;
                if crd.get("spec") == manifest.get("spec") {
                    register(server, &crd);
                    return Ok(());
                }
                crd["spec"] = manifest.get("spec").cloned().unwrap_or(json!({}));
                if let Some(m) = object::meta_mut(&mut crd) {
                    let g = m.get("generation").and_then(Value::as_i64).unwrap_or(1);
                    m.insert("generation".into(), json!(g + 1));
                }
                crd["status"] = desired_status(&crd);
                server
                    .store
                    .update(&key, object::encode(&crd), kv.mod_revision)
                    .await
                    .map(|kv| (kv, crd))
            }
        };
        match result {
            Ok((_, crd)) => {
                register(server, &crd);
                return Ok(());
            }
            Err(store::StoreError::AlreadyExists(_) | store::StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    anyhow::bail!("CRD {name} kept changing while being installed")
}
