//! Admission without HTTP: the kind's normalisation and rules, then the
//! mutating plugins, then validation errors, then the validating plugins;
//! deletions through the same chain.

use std::sync::Mutex;

use serde_json::json;

use super::*;

fn builtin(kind: &str) -> Resource {
    crate::strategy::resources()
        .into_iter()
        .find(|r| r.kind == kind && r.group.is_empty())
        .unwrap()
}

fn attrs<'a>(res: &'a Resource, op: Operation, old: Option<&'a Value>) -> Attributes<'a> {
    Attributes {
        operation: op,
        resource: res,
        subresource: None,
        namespace: Some("ns"),
        name: "x",
        old,
        dry_run: false,
        user: current_user(),
    }
}

/// Records what it saw and labels what it mutates.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl AdmissionPlugin for Recorder {
    fn name(&self) -> &str {
        "Recorder"
    }

    async fn mutate(&self, a: &Attributes<'_>, obj: &mut Value) -> Result<(), ApiError> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("mutate {}", a.operation.as_str()));
        obj["metadata"]["labels"] = json!({"admitted": "yes"});
        Ok(())
    }

    async fn validate(&self, a: &Attributes<'_>, _obj: &Value) -> Result<(), ApiError> {
        let user = a
            .user
            .as_ref()
            .map(|u| u.username.clone())
            .unwrap_or_default();
        self.seen
            .lock()
            .unwrap()
            .push(format!("validate {} {user}", a.operation.as_str()));
        Ok(())
    }
}

#[tokio::test]
async fn the_kind_is_normalised_then_plugins_mutate_then_validate() {
    let chain = Chain::default();
    let rec = Arc::new(Recorder::default());
    chain.add(rec.clone());
    let res = builtin("Secret");
    let mut obj = json!({"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": "x"}, "stringData": {"a": "b"}});
    let user = Arc::new(UserInfo {
        username: "alice".into(),
        ..Default::default()
    });
    with_user(Some(user), async {
        admit(
            &chain,
            &attrs(&res, Operation::Create, None),
            &mut obj,
            Vec::new(),
        )
        .await
    })
    .await
    .unwrap();
    assert_eq!(
        obj["data"]["a"], "Yg==",
        "the secret strategy folded stringData"
    );
    assert_eq!(obj["type"], "Opaque", "defaults applied");
    assert_eq!(obj["metadata"]["labels"]["admitted"], "yes");
    assert_eq!(
        *rec.seen.lock().unwrap(),
        ["mutate CREATE", "validate CREATE alice"]
    );
}

#[tokio::test]
async fn invalid_objects_never_reach_validating_plugins() {
    let chain = Chain::default();
    let rec = Arc::new(Recorder::default());
    chain.add(rec.clone());
    let res = builtin("Pod");
    let mut pod = json!({"metadata": {"name": "x"}, "spec": {"containers": []}});
    let e = admit(
        &chain,
        &attrs(&res, Operation::Create, None),
        &mut pod,
        Vec::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(*rec.seen.lock().unwrap(), ["mutate CREATE"]);
    // Causes the caller found (a schema) count as well.
    let mut cm = json!({"metadata": {"name": "x"}});
    let cause = Cause::required("data");
    let e = admit(
        &chain,
        &attrs(&builtin("ConfigMap"), Operation::Create, None),
        &mut cm,
        vec![cause],
    )
    .await
    .unwrap_err();
    assert_eq!(e.causes[0].field, "data");
}

#[tokio::test]
async fn updates_follow_the_kinds_update_rules() {
    let chain = Chain::default();
    let res = builtin("Pod");
    let old = json!({"metadata": {"name": "x"},
                     "spec": {"containers": [{"name": "c", "image": "a"}]}});
    let mut new = old.clone();
    new["spec"]["containers"][0]["name"] = json!("renamed");
    let e = admit(
        &chain,
        &attrs(&res, Operation::Update, Some(&old)),
        &mut new,
        Vec::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(e.causes[0].field, "spec");
}

#[tokio::test]
async fn deletions_run_the_validating_plugins_without_a_user() {
    let chain = Chain::default();
    let rec = Arc::new(Recorder::default());
    chain.add(rec.clone());
    let res = builtin("ConfigMap");
    let check = DeleteAdmission {
        chain: &chain,
        resource: &res,
        namespace: Some("ns"),
        name: "x",
        dry_run: false,
    };
    check
        .check(&json!({"metadata": {"name": "x"}}))
        .await
        .unwrap();
    assert_eq!(*rec.seen.lock().unwrap(), ["validate DELETE "]);
    assert!(current_user().is_none());
}

#[test]
fn webhooks_run_after_every_in_process_plugin() {
    let chain = Chain::default();
    chain.set_webhooks(Arc::new(Recorder::default()));
    chain.add(Arc::new(Recorder::default()));
    chain.add(Arc::new(Recorder::default()));
    assert_eq!(chain.plugins().len(), 3);
}

/// Warns about every object it sees, and refuses those named "no".
struct Warner;

#[async_trait::async_trait]
impl AdmissionPlugin for Warner {
    fn name(&self) -> &str {
        "Warner"
    }

    async fn validate(&self, _a: &Attributes<'_>, obj: &Value) -> Result<(), ApiError> {
        if obj["metadata"]["name"] == "no" {
            return Err(ApiError::bad_request("refused"));
        }
        Ok(())
    }

    async fn warnings(&self, a: &Attributes<'_>, _obj: &Value) -> Vec<String> {
        vec![format!("careful with {}", a.resource.kind)]
    }
}

#[tokio::test]
async fn plugins_warnings_reach_the_caller_only_for_admitted_objects() {
    let chain = Chain::default();
    chain.add(Arc::new(Warner));
    let res = builtin("ConfigMap");
    let mut ok = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let warnings = admit(
        &chain,
        &attrs(&res, Operation::Create, None),
        &mut ok,
        Vec::new(),
    )
    .await
    .unwrap();
    assert_eq!(warnings, vec!["careful with ConfigMap".to_string()]);
    let mut refused = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "no"}});
    assert!(
        admit(
            &chain,
            &attrs(&res, Operation::Create, None),
            &mut refused,
            Vec::new()
        )
        .await
        .is_err()
    );
}
