//! The default ClusterRoles and ClusterRoleBindings, created at every start
//! like kube-apiserver's RBAC bootstrap: `cluster-admin` for system:masters,
//! `admin`/`edit`/`view` for people, the discovery and self-review roles
//! every authenticated user has, and one role per trellis controller, bound
//! to a ServiceAccount of its own in kube-system so each controller runs
//! under its own identity.
//!
//! Reconciliation is additive and idempotent: missing objects are created;
//! existing ones marked `rbac.authorization.kubernetes.io/autoupdate: "true"`
//! gain the rules and subjects they lack (what an operator added stays); an
//! operator opts an object out by setting the annotation to "false".

use serde_json::{Value, json};
use store::StoreError;

use crate::error::Error;
use crate::object;
use crate::storage::Storage;
use crate::storage::{codec, keys};

const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// ServiceAccount names cannot hold `:`, so the controllers' accounts use
/// `-` where their ClusterRoles use `:`.
pub const CONTROLLERS: &[(&str, &str)] = &[
    (
        "trellis:machine-controller-manager",
        "trellis-machine-controller-manager",
    ),
    ("trellis:node-simulator", "trellis-node-simulator"),
];
const CONTROLLER_NAMESPACE: &str = "kube-system";

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
const ALL: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn urls(paths: &[&str], verbs: &[&str]) -> Value {
    json!({"nonResourceURLs": paths, "verbs": verbs})
}

/// Namespaced resources people work with, by API group, for view/edit/admin.
const WORKLOADS: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "configmaps",
            "endpoints",
            "events",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "pods",
            "pods/status",
            "pods/log",
            "services",
            "services/status",
            "serviceaccounts",
        ],
    ),
    (
        "apps",
        &[
            "deployments",
            "deployments/scale",
            "deployments/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
    ),
    ("discovery.k8s.io", &["endpointslices"]),
    ("events.k8s.io", &["events"]),
    (
        "policy",
        &["poddisruptionbudgets", "poddisruptionbudgets/status"],
    ),
    ("coordination.k8s.io", &["leases"]),
    (
        "machine.sapcloud.io",
        &[
            "machineclasses",
            "machines",
            "machines/status",
            "machinesets",
            "machinesets/status",
            "machinesets/scale",
            "machinedeployments",
            "machinedeployments/status",
            "machinedeployments/scale",
        ],
    ),
];

fn view_rules() -> Vec<Value> {
    let mut r: Vec<Value> = WORKLOADS
        .iter()
        .map(|(g, res)| rule(&[g], res, READ))
        .collect();
    r.push(rule(&[""], &["namespaces", "namespaces/status"], READ));
    r
}

fn edit_rules() -> Vec<Value> {
    let mut r = view_rules();
    r.extend(WORKLOADS.iter().map(|(g, res)| rule(&[g], res, WRITE)));
    r.push(rule(&[""], &["secrets"], ALL));
    r.push(rule(
        &[""],
        &["pods/eviction", "serviceaccounts/token"],
        &["create"],
    ));
    r.push(rule(&[""], &["serviceaccounts"], &["impersonate"]));
    r
}

fn admin_rules() -> Vec<Value> {
    let mut r = edit_rules();
    r.push(rule(
        &["rbac.authorization.k8s.io"],
        &["roles", "rolebindings"],
        ALL,
    ));
    r.push(rule(
        &["authorization.k8s.io"],
        &["localsubjectaccessreviews"],
        &["create"],
    ));
    r
}

fn machine_controller_manager_rules() -> Vec<Value> {
    vec![
        rule(&["machine.sapcloud.io"], &["*"], ALL),
        rule(&[""], &["nodes", "nodes/status"], ALL),
        rule(&[""], &["pods"], ALL),
        rule(&[""], &["pods/eviction"], &["create"]),
        rule(&[""], &["events"], ALL),
        rule(&["events.k8s.io"], &["events"], ALL),
        rule(&[""], &["secrets"], READ),
        rule(
            &[""],
            &["persistentvolumes", "persistentvolumeclaims"],
            READ,
        ),
        rule(&["storage.k8s.io"], &["volumeattachments"], READ),
        rule(&["coordination.k8s.io"], &["leases"], ALL),
        rule(&["apps"], &["deployments"], READ),
        rule(&["policy"], &["poddisruptionbudgets"], READ),
    ]
}

fn node_simulator_rules() -> Vec<Value> {
    vec![
        rule(&[""], &["nodes", "nodes/status"], ALL),
        rule(&["coordination.k8s.io"], &["leases"], ALL),
        rule(&[""], &["pods", "pods/status"], ALL),
        rule(&[""], &["events"], &["create", "patch", "update"]),
        rule(
            &["events.k8s.io"],
            &["events"],
            &["create", "patch", "update"],
        ),
    ]
}

fn cluster_role(name: &str, rules: Vec<Value>, aggregate_label: Option<&str>) -> Value {
    let mut r = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules,
    });
    if let Some(l) = aggregate_label {
        // Custom resources join admin/edit/view by labelling a ClusterRole
        // with this, as in kube.
        r["aggregationRule"] = json!({
            "clusterRoleSelectors": [{"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{l}"): "true"}}]
        });
    }
    r
}

fn binding(name: &str, role: &str, subjects: Vec<Value>) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

fn group(name: &str) -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name})
}

/// The default ClusterRoles and ClusterRoleBindings.
pub fn defaults() -> (Vec<Value>, Vec<Value>) {
    let discovery = &[
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/openapi",
        "/openapi/*",
        "/version",
        "/version/",
        "/healthz",
        "/livez",
        "/readyz",
    ];
    let public = &["/healthz", "/livez", "/readyz", "/version", "/version/"];
    let mut roles = vec![
        cluster_role(
            "cluster-admin",
            vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])],
            None,
        ),
        cluster_role("system:discovery", vec![urls(discovery, &["get"])], None),
        cluster_role(
            "system:public-info-viewer",
            vec![urls(public, &["get"])],
            None,
        ),
        cluster_role(
            "system:basic-user",
            vec![
                rule(
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    &["create"],
                ),
                rule(
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                    &["create"],
                ),
            ],
            None,
        ),
        cluster_role("admin", admin_rules(), Some("admin")),
        cluster_role("edit", edit_rules(), Some("edit")),
        cluster_role("view", view_rules(), Some("view")),
        cluster_role(CONTROLLERS[0].0, machine_controller_manager_rules(), None),
        cluster_role(CONTROLLERS[1].0, node_simulator_rules(), None),
    ];
    // Kube's admin and edit include what the next role down has through
    // aggregation; ours list it, so only custom additions aggregate.
    for r in &mut roles {
        r["metadata"]["labels"] = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    }
    let authenticated = group(crate::auth::AUTHENTICATED_GROUP);
    let mut bindings = vec![
        binding(
            "cluster-admin",
            "cluster-admin",
            vec![group(crate::auth::MASTERS_GROUP)],
        ),
        binding(
            "system:discovery",
            "system:discovery",
            vec![authenticated.clone()],
        ),
        binding(
            "system:basic-user",
            "system:basic-user",
            vec![authenticated.clone()],
        ),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            vec![authenticated, group("system:unauthenticated")],
        ),
    ];
    for (role, sa) in CONTROLLERS {
        bindings.push(binding(
            role,
            role,
            vec![json!({"kind": "ServiceAccount", "name": sa, "namespace": CONTROLLER_NAMESPACE})],
        ));
    }
    for b in &mut bindings {
        b["metadata"]["labels"] = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    }
    (roles, bindings)
}

/// Creates or reconciles the defaults, and the controllers' ServiceAccounts.
pub async fn ensure(storage: &Storage) -> Result<(), Error> {
    let (roles, bindings) = defaults();
    for r in roles {
        reconcile(storage, "clusterroles", r, "rules").await?;
    }
    for b in bindings {
        reconcile(storage, "clusterrolebindings", b, "subjects").await?;
    }
    for (_, sa) in CONTROLLERS {
        let key = keys::key(keys::SERVICE_ACCOUNTS, Some(CONTROLLER_NAMESPACE), sa);
        let obj = json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": sa, "namespace": CONTROLLER_NAMESPACE},
        });
        create(storage, &key, obj).await?;
    }
    Ok(())
}

async fn create(storage: &Storage, key: &str, mut obj: Value) -> Result<(), Error> {
    obj["metadata"]["uid"] = json!(uuid::Uuid::new_v4().to_string());
    obj["metadata"]["creationTimestamp"] = json!(object::now_rfc3339());
    match storage.store().create(key, codec::encode(&obj)).await {
        Ok(_) | Err(StoreError::AlreadyExists(_)) => Ok(()),
        Err(source) => Err(Error::StoreWriteFailed {
            key: key.to_string(),
            source,
        }),
    }
}

/// Creates `desired`, or adds to the stored object's `list` field what it
/// lacks, unless auto-update is switched off on it.
async fn reconcile(
    storage: &Storage,
    plural: &str,
    mut desired: Value,
    list: &str,
) -> Result<(), Error> {
    let name = object::name(&desired).to_string();
    let key = keys::key(
        &keys::storage_of(crate::strategy::rbac::GROUP, plural),
        None,
        &name,
    );
    desired["metadata"]["annotations"] = json!({AUTOUPDATE: "true"});
    let (kv, _) =
        storage
            .store()
            .get(&key, None)
            .await
            .map_err(|source| Error::StoreReadFailed {
                what: key.clone(),
                source,
            })?;
    let Some(kv) = kv else {
        return create(storage, &key, desired).await;
    };
    let mut current: Value =
        serde_json::from_slice(&kv.value).map_err(|source| Error::StoredObjectInvalid {
            key: key.clone(),
            source,
        })?;
    let autoupdate = object::meta(&current)
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(AUTOUPDATE))
        .and_then(Value::as_str)
        != Some("false");
    if !autoupdate {
        return Ok(());
    }
    let mut items = current
        .get(list)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let before = items.len();
    for want in desired[list].as_array().into_iter().flatten() {
        if !items.contains(want) {
            items.push(want.clone());
        }
    }
    if items.len() == before {
        return Ok(());
    }
    current[list] = json!(items);
    match storage
        .store()
        .update(&key, codec::encode(&current), kv.mod_revision)
        .await
    {
        // Someone else changed it at the same time; the next start retries.
        Ok(_) | Err(StoreError::Conflict(_)) => Ok(()),
        Err(source) => Err(Error::StoreWriteFailed { key, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_rbac() {
        let (roles, bindings) = defaults();
        for r in &roles {
            assert!(
                crate::strategy::rbac::validate("ClusterRole", r).is_empty(),
                "{r}"
            );
        }
        for b in &bindings {
            assert!(
                crate::strategy::rbac::validate("ClusterRoleBinding", b).is_empty(),
                "{b}"
            );
        }
    }
}
