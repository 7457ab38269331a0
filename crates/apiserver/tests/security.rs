//! Security end to end over real HTTPS with kube-rs clients: TLS with the
//! generated CA, authentication (client certificates, the static token
//! file, ServiceAccount tokens from TokenRequest), RBAC with kube-style 403s,
//! access reviews, impersonation, the default roles, and the audit log.

mod common;

use common::{Creds, SecureServer, start_secure};
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

const TOKENS: &str = "alice-token,alice,1001,\"dev,qa\"\nbob-token,bob,1002\n";

/// The HTTP code and message of a failed call.
fn api_error<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn create<K>(api: &Api<K>, obj: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

/// Namespace `ns` with ServiceAccount `robot` bound to a Role that may read
/// configmaps there; returns a token of the ServiceAccount.
async fn robot_with_configmap_role(s: &SecureServer, ns: &str) -> String {
    let admin = s.admin().await;
    create(
        &Api::<Namespace>::all(admin.clone()),
        json!({"metadata": {"name": ns}}),
    )
    .await;
    create(
        &Api::<ServiceAccount>::namespaced(admin.clone(), ns),
        json!({"metadata": {"name": "robot"}}),
    )
    .await;
    create(
        &Api::<Role>::namespaced(admin.clone(), ns),
        json!({"metadata": {"name": "cm-reader"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}
        ]}),
    )
    .await;
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), ns),
        json!({"metadata": {"name": "robot-reads"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "robot"}]}),
    )
    .await;
    token_request(&admin, ns, "robot", json!({"spec": {}}))
        .await
        .unwrap()
        .status
        .unwrap()
        .token
}

async fn token_request(
    c: &kube::Client,
    ns: &str,
    sa: &str,
    body: serde_json::Value,
) -> Result<TokenRequest, kube::Error> {
    let req = http::Request::post(format!(
        "/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&body).unwrap())
    .unwrap();
    c.request::<TokenRequest>(req).await
}

#[tokio::test]
async fn anonymous_requests_get_401_except_health_and_version() {
    let s = start_secure("").await;
    let anon = s
        .client_with(Some(&s.pki.ca_cert_pem), Creds::Anonymous, None)
        .await;
    let (code, msg) = api_error(
        Api::<Namespace>::all(anon.clone())
            .list(&ListParams::default())
            .await,
    );
    assert_eq!((code, msg.as_str()), (401, "Unauthorized"));
    for path in ["/healthz", "/livez", "/readyz", "/readyz/ping"] {
        let body = anon
            .request_text(http::Request::get(path).body(Vec::new()).unwrap())
            .await
            .unwrap();
        assert_eq!(body, "ok", "{path}");
    }
    let v = anon.apiserver_version().await.unwrap();
    assert_eq!(v.minor, "32");
    // A wrong token is just as unauthorized.
    let bad = s.token_client("not-a-token").await;
    let (code, _) = api_error(
        Api::<Namespace>::all(bad)
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(code, 401);
    let forged = s.token_client("a.b.c").await;
    let (code, _) = api_error(
        Api::<Namespace>::all(forged)
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(code, 401);
}

#[tokio::test]
async fn admin_client_certificate_is_allowed_and_known() {
    let s = start_secure("").await;
    let admin = s.admin().await;
    let names: Vec<String> = Api::<Namespace>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"kube-system".to_string()), "{names:?}");
    let me: SelfSubjectReview = Api::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {}})).unwrap(),
        )
        .await
        .unwrap();
    let info = me.status.unwrap().user_info.unwrap();
    assert_eq!(info.username.as_deref(), Some("trellis-admin"));
    let groups = info.groups.unwrap();
    assert!(groups.contains(&"system:masters".to_string()), "{groups:?}");
    assert!(
        groups.contains(&"system:authenticated".to_string()),
        "{groups:?}"
    );
}

#[tokio::test]
async fn token_file_users_are_authenticated_and_rbac_decides() {
    let s = start_secure(TOKENS).await;
    let alice = s.token_client("alice-token").await;
    let (code, msg) = api_error(
        Api::<ConfigMap>::namespaced(alice.clone(), "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        msg,
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    // Discovery is open to every authenticated user.
    alice
        .request_text(http::Request::get("/api").body(Vec::new()).unwrap())
        .await
        .unwrap();
    // Bind the group `dev` to `view` in default: alice may read there now,
    // but still not write, and bob (not in dev) still may not read.
    let admin = s.admin().await;
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), "default"),
        json!({"metadata": {"name": "dev-view"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "Group", "name": "dev"}]}),
    )
    .await;
    Api::<ConfigMap>::namespaced(alice.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let (code, msg) = api_error(
        Api::<ConfigMap>::namespaced(alice.clone(), "default")
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
            )
            .await,
    );
    assert_eq!(code, 403, "{msg}");
    let bob = s.token_client("bob-token").await;
    let (code, _) = api_error(
        Api::<ConfigMap>::namespaced(bob, "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(code, 403);
    // Cluster-scoped denials say so.
    let (_, msg) = api_error(
        Api::<Namespace>::all(alice)
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(
        msg,
        "namespaces is forbidden: User \"alice\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );
}

#[tokio::test]
async fn service_account_with_a_namespaced_role_reads_configmaps_only_there() {
    let s = start_secure("").await;
    let token = robot_with_configmap_role(&s, "team").await;
    let admin = s.admin().await;
    create(
        &Api::<ConfigMap>::namespaced(admin.clone(), "team"),
        json!({"metadata": {"name": "settings"}, "data": {"a": "1"}}),
    )
    .await;
    create(
        &Api::<Secret>::namespaced(admin.clone(), "team"),
        json!({"metadata": {"name": "db"}, "stringData": {"password": "p"}}),
    )
    .await;
    let robot = s.token_client(&token).await;
    let cm = Api::<ConfigMap>::namespaced(robot.clone(), "team")
        .get("settings")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["a"], "1");
    let (code, msg) = api_error(
        Api::<Secret>::namespaced(robot.clone(), "team")
            .get("db")
            .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        msg,
        "secrets \"db\" is forbidden: User \"system:serviceaccount:team:robot\" cannot get resource \"secrets\" in API group \"\" in the namespace \"team\""
    );
    let (code, _) = api_error(
        Api::<ConfigMap>::namespaced(robot.clone(), "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(code, 403);
    // Deleting the ServiceAccount revokes its tokens.
    Api::<ServiceAccount>::namespaced(admin, "team")
        .delete("robot", &Default::default())
        .await
        .unwrap();
    let (code, _) = api_error(
        Api::<ConfigMap>::namespaced(robot, "team")
            .get("settings")
            .await,
    );
    assert_eq!(code, 401);
}

#[tokio::test]
async fn token_request_round_trip() {
    let s = start_secure("").await;
    let token = robot_with_configmap_role(&s, "tr").await;
    let admin = s.admin().await;
    let tr = token_request(
        &admin,
        "tr",
        "robot",
        json!({"spec": {"expirationSeconds": 7200}}),
    )
    .await
    .unwrap();
    let status = tr.status.unwrap();
    let left = status.expiration_timestamp.0.as_second() - now_seconds();
    assert!((7100..=7300).contains(&left), "expiry {left}s from now");
    assert_eq!(tr.spec.expiration_seconds, Some(7200));
    // Who the token is: the ServiceAccount, in its groups.
    let robot = s.token_client(&token).await;
    let me: SelfSubjectReview = Api::all(robot)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {}})).unwrap(),
        )
        .await
        .unwrap();
    let info = me.status.unwrap().user_info.unwrap();
    assert_eq!(
        info.username.as_deref(),
        Some("system:serviceaccount:tr:robot")
    );
    let groups = info.groups.unwrap();
    for g in [
        "system:serviceaccounts",
        "system:serviceaccounts:tr",
        "system:authenticated",
    ] {
        assert!(groups.contains(&g.to_string()), "{groups:?}");
    }
    // Kube's bounds and a missing ServiceAccount.
    let (code, msg) = api_error(
        token_request(
            &admin,
            "tr",
            "robot",
            json!({"spec": {"expirationSeconds": 60}}),
        )
        .await,
    );
    assert_eq!(code, 422, "{msg}");
    assert!(
        msg.contains("may not specify a duration less than 10 minutes"),
        "{msg}"
    );
    let (code, msg) = api_error(token_request(&admin, "tr", "ghost", json!({"spec": {}})).await);
    assert_eq!(
        (code, msg.as_str()),
        (404, "serviceaccounts \"ghost\" not found")
    );
}

fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn access_reviews_answer_for_others_and_for_oneself() {
    let s = start_secure(TOKENS).await;
    let token = robot_with_configmap_role(&s, "rev").await;
    let admin = s.admin().await;
    let sar = |verb: &str, resource: &str| -> SubjectAccessReview {
        SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some("system:serviceaccount:rev:robot".into()),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some("rev".into()),
                    verb: Some(verb.into()),
                    resource: Some(resource.into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    };
    let api = Api::<SubjectAccessReview>::all(admin.clone());
    let yes = api
        .create(&PostParams::default(), &sar("list", "configmaps"))
        .await
        .unwrap();
    let st = yes.status.unwrap();
    assert!(st.allowed);
    assert_eq!(
        st.reason.as_deref(),
        Some(
            "RBAC: allowed by RoleBinding \"rev/robot-reads\" of Role \"rev/cm-reader\" to ServiceAccount \"rev/robot\""
        )
    );
    let no = api
        .create(&PostParams::default(), &sar("get", "secrets"))
        .await
        .unwrap();
    assert!(!no.status.unwrap().allowed);
    // A plain user may not ask about others...
    let alice = s.token_client("alice-token").await;
    let (code, _) = api_error(
        Api::<SubjectAccessReview>::all(alice.clone())
            .create(&PostParams::default(), &sar("list", "configmaps"))
            .await,
    );
    assert_eq!(code, 403);
    // ...but anyone may ask about themselves (kubectl auth can-i).
    let ssar = |verb: &str, resource: &str| SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some("rev".into()),
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let robot = s.token_client(&token).await;
    let ask = |c: kube::Client, verb: &'static str, res: &'static str| async move {
        Api::<SelfSubjectAccessReview>::all(c)
            .create(&PostParams::default(), &ssar(verb, res))
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    };
    assert!(ask(robot.clone(), "watch", "configmaps").await);
    assert!(!ask(robot.clone(), "delete", "configmaps").await);
    assert!(!ask(alice.clone(), "list", "configmaps").await);
    assert!(ask(admin.clone(), "delete", "secrets").await);
    // A review must say what it asks about.
    let (code, _) = api_error(
        Api::<SelfSubjectAccessReview>::all(alice)
            .create(&PostParams::default(), &SelfSubjectAccessReview::default())
            .await,
    );
    assert_eq!(code, 422);
}

#[tokio::test]
async fn impersonation_is_allowed_for_admin_and_denied_for_a_plain_user() {
    let s = start_secure(TOKENS).await;
    let admin_as_alice = s
        .client_with(
            Some(&s.pki.ca_cert_pem),
            Creds::Cert {
                cert: &s.pki.admin_cert_pem,
                key: &s.pki.admin_key_pem,
            },
            Some("alice"),
        )
        .await;
    let (code, msg) = api_error(
        Api::<Secret>::namespaced(admin_as_alice, "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(code, 403);
    assert!(msg.contains("User \"alice\" cannot list"), "{msg}");
    let alice_as_bob = s
        .client_with(
            Some(&s.pki.ca_cert_pem),
            Creds::Token("alice-token"),
            Some("bob"),
        )
        .await;
    let (code, msg) = api_error(
        Api::<Secret>::namespaced(alice_as_bob, "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        msg,
        "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    // The audit log names both.
    let admin = s.admin().await;
    let admin_as_cm_writer = s
        .client_with(
            Some(&s.pki.ca_cert_pem),
            Creds::Cert {
                cert: &s.pki.admin_cert_pem,
                key: &s.pki.admin_key_pem,
            },
            Some("system:serviceaccount:default:nobody"),
        )
        .await;
    let _ = Api::<ConfigMap>::namespaced(admin_as_cm_writer, "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "imp"}})).unwrap(),
        )
        .await;
    drop(admin);
    let lines = s.audit_lines();
    let l = lines
        .iter()
        .find(|l| l["impersonatedUser"] == "system:serviceaccount:default:nobody")
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(l["user"], "trellis-admin");
    assert_eq!(l["code"], 403);
}

#[tokio::test]
async fn kube_rs_verifies_the_server_certificate_with_the_generated_ca() {
    let s = start_secure("").await;
    // Trusting the generated CA works (the other tests do it throughout);
    // trusting the platform's roots, or another installation's CA, fails.
    let untrusting = s
        .client_with(
            None,
            Creds::Cert {
                cert: &s.pki.admin_cert_pem,
                key: &s.pki.admin_key_pem,
            },
            None,
        )
        .await;
    let r = Api::<Namespace>::all(untrusting)
        .list(&ListParams::default())
        .await;
    assert!(
        !matches!(r, Ok(_) | Err(kube::Error::Api(_))),
        "a client without the CA must fail the handshake: {r:?}"
    );
    let other = tempfile::tempdir().unwrap();
    let other_ca = apiserver::Pki::ensure(other.path(), &[])
        .unwrap()
        .ca_cert_pem;
    let wrong = s.client_with(Some(&other_ca), Creds::Anonymous, None).await;
    let r = wrong.apiserver_version().await;
    assert!(r.is_err(), "another CA must not verify: {r:?}");
    // A client certificate from another CA is refused by the server.
    let other_pki = apiserver::Pki::ensure(other.path(), &[]).unwrap();
    let foreign = s
        .client_with(
            Some(&s.pki.ca_cert_pem),
            Creds::Cert {
                cert: &other_pki.admin_cert_pem,
                key: &other_pki.admin_key_pem,
            },
            None,
        )
        .await;
    let r = Api::<Namespace>::all(foreign)
        .list(&ListParams::default())
        .await;
    assert!(
        r.is_err(),
        "a foreign client certificate must not pass: {r:?}"
    );
}

#[tokio::test]
async fn default_roles_and_controller_identities_exist() {
    let s = start_secure("").await;
    let admin = s.admin().await;
    let roles = Api::<ClusterRole>::all(admin.clone());
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
        "trellis:machine-controller-manager",
        "trellis:node-simulator",
    ] {
        roles
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let sas = Api::<ServiceAccount>::namespaced(admin.clone(), "kube-system");
    sas.get("trellis-node-simulator").await.unwrap();
    // The node simulator may heartbeat nodes but not read secrets.
    let tr = token_request(&admin, "kube-system", "trellis-node-simulator", json!({}))
        .await
        .unwrap();
    let sim = s.token_client(&tr.status.unwrap().token).await;
    Api::<k8s_openapi::api::core::v1::Node>::all(sim.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let (code, _) = api_error(Api::<Secret>::all(sim).list(&ListParams::default()).await);
    assert_eq!(code, 403);
    // RBAC names may hold colons; bad role references are invalid.
    create(
        &roles,
        json!({"metadata": {"name": "custom:reader"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
    )
    .await;
    let bad: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "bad"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Secret", "name": "x"}}))
    .unwrap();
    let (code, _) = api_error(
        Api::<RoleBinding>::namespaced(admin, "default")
            .create(&PostParams::default(), &bad)
            .await,
    );
    assert_eq!(code, 422);
}

#[tokio::test]
async fn audit_log_records_mutations_only() {
    let s = start_secure(TOKENS).await;
    let admin = s.admin().await;
    let cms = Api::<ConfigMap>::namespaced(admin.clone(), "default");
    create(&cms, json!({"metadata": {"name": "audited"}})).await;
    cms.list(&ListParams::default()).await.unwrap();
    cms.delete("audited", &Default::default()).await.unwrap();
    let alice = s.token_client("alice-token").await;
    let _ = Api::<ConfigMap>::namespaced(alice, "default")
        .delete("audited", &Default::default())
        .await;
    let lines: Vec<_> = s
        .audit_lines()
        .into_iter()
        .filter(|l| l["resource"] == "configmaps")
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["verb"], "create");
    assert_eq!(lines[0]["name"], "audited");
    assert_eq!(lines[0]["namespace"], "default");
    assert_eq!(lines[0]["user"], "trellis-admin");
    assert_eq!(lines[0]["code"], 201);
    assert_eq!(lines[1]["verb"], "delete");
    assert_eq!(lines[1]["code"], 200);
    assert_eq!(lines[2]["user"], "alice");
    assert_eq!(lines[2]["code"], 403);
    for l in &lines {
        for f in ["time", "groups", "group", "subresource", "userAgent"] {
            assert!(l.get(f).is_some(), "{f} missing in {l}");
        }
    }
}

#[tokio::test]
async fn rbac_cannot_be_used_to_escalate() {
    let s = start_secure(TOKENS).await;
    let admin = s.admin().await;
    // alice administers namespace default.
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), "default"),
        json!({"metadata": {"name": "alice-admin"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
               "subjects": [{"kind": "User", "name": "alice"}]}),
    )
    .await;
    let alice = s.token_client("alice-token").await;
    let roles = Api::<Role>::namespaced(alice.clone(), "default");
    // What she holds she may hand out...
    create(
        &roles,
        json!({"metadata": {"name": "cm-reader"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
    )
    .await;
    create(
        &Api::<RoleBinding>::namespaced(alice.clone(), "default"),
        json!({"metadata": {"name": "bob-reads"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
               "subjects": [{"kind": "User", "name": "bob"}]}),
    )
    .await;
    // ...but not more than that.
    let wide: Role = serde_json::from_value(json!({"metadata": {"name": "all"}, "rules": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}))
    .unwrap();
    let (code, msg) = api_error(roles.create(&PostParams::default(), &wide).await);
    assert_eq!(code, 403);
    assert!(
        msg.contains("is attempting to grant RBAC permissions not currently held"),
        "{msg}"
    );
    let to_cluster_admin: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "me-root"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "User", "name": "alice"}]}))
    .unwrap();
    let (code, _) = api_error(
        Api::<RoleBinding>::namespaced(alice, "default")
            .create(&PostParams::default(), &to_cluster_admin)
            .await,
    );
    assert_eq!(code, 403);
    // The admin may do both.
    Api::<RoleBinding>::namespaced(admin, "default")
        .create(&PostParams::default(), &to_cluster_admin)
        .await
        .unwrap();
}
