//! kube-apiserver behaviours of the built-in kinds that kubectl can see,
//! checked over raw HTTP: dry-run creates that collide, creates in a
//! terminating namespace, built-in defaulting, pod spec immutability, which
//! kinds carry `metadata.generation`, the access-review resources and
//! per-resource verbs in discovery, and the namespaces that cannot be
//! deleted.

mod common;

use bytes::Bytes;
use common::start;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

struct Http {
    c: Client<HttpConnector, Full<Bytes>>,
    base: String,
}

impl Http {
    fn new(base: &str) -> Http {
        Http {
            c: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
            base: base.to_string(),
        }
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        ct: &str,
        accept: &str,
        body: &Value,
    ) -> (u16, Value) {
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", ct);
        if !accept.is_empty() {
            req = req.header("accept", accept);
        }
        let bytes = if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(body).unwrap()
        };
        let resp = self
            .c
            .request(req.body(Full::new(Bytes::from(bytes))).unwrap())
            .await
            .unwrap();
        let code = resp.status().as_u16();
        let b = resp.into_body().collect().await.unwrap().to_bytes();
        (code, serde_json::from_slice(&b).unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, "application/json", "", &Value::Null)
            .await
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call("POST", path, "application/json", "", body).await
    }

    async fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call("PUT", path, "application/json", "", body).await
    }

    async fn delete(&self, path: &str) -> (u16, Value) {
        self.call("DELETE", path, "application/json", "", &Value::Null)
            .await
    }

    async fn merge(&self, path: &str, patch: &Value) -> (u16, Value) {
        self.call("PATCH", path, "application/merge-patch+json", "", patch)
            .await
    }

    async fn strategic(&self, path: &str, patch: &Value) -> (u16, Value) {
        self.call(
            "PATCH",
            path,
            "application/strategic-merge-patch+json",
            "",
            patch,
        )
        .await
    }
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}],
                 "tolerations": [{"key": "a", "operator": "Exists"}]}})
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

#[tokio::test]
async fn dry_run_create_checks_the_name_is_free() {
    let t = start().await;
    let h = Http::new(&t.url);
    let body = json!({"metadata": {"name": "dup"}, "data": {"a": "1"}});
    // A dry run of a free name answers 201 and stores nothing.
    let (code, _) = h.post(&format!("{CMS}?dryRun=All"), &body).await;
    assert_eq!(code, 201);
    assert_eq!(h.get(&format!("{CMS}/dup")).await.0, 404);
    assert_eq!(h.post(CMS, &body).await.0, 201);
    let (code, status) = h.post(&format!("{CMS}?dryRun=All"), &body).await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["reason"], "AlreadyExists");
    assert_eq!(status["message"], "configmaps \"dup\" already exists");
    // generateName still finds a free name under dry run.
    let generated = json!({"metadata": {"generateName": "dup-"}});
    assert_eq!(
        h.post(&format!("{CMS}?dryRun=All"), &generated).await.0,
        201
    );
}

#[tokio::test]
async fn create_in_a_terminating_namespace_is_forbidden_as_in_kube() {
    let t = start().await;
    let h = Http::new(&t.url);
    let ns = json!({"metadata": {"name": "term"}});
    assert_eq!(h.post("/api/v1/namespaces", &ns).await.0, 201);
    let held = json!({"metadata": {"name": "held", "finalizers": ["e2e/hold"]}});
    assert_eq!(
        h.post("/api/v1/namespaces/term/configmaps", &held).await.0,
        201
    );
    assert_eq!(h.delete("/api/v1/namespaces/term").await.0, 200);
    let late = json!({"metadata": {"name": "late"}});
    let (code, s) = h.post("/api/v1/namespaces/term/configmaps", &late).await;
    assert_eq!(code, 403, "{s}");
    assert_eq!(s["reason"], "Forbidden");
    assert_eq!(
        s["message"],
        "configmaps \"late\" is forbidden: unable to create new content in namespace term because it is being terminated"
    );
    assert_eq!(s["details"]["name"], "late");
    assert_eq!(s["details"]["kind"], "configmaps");
    assert_eq!(
        s["details"]["causes"][0],
        json!({"reason": "NamespaceTerminating", "message": "namespace term is being terminated",
               "field": "metadata.namespace"})
    );
    // With generateName there is no name yet: kube leaves it out.
    let (code, s) = h
        .post(
            "/api/v1/namespaces/term/configmaps",
            &json!({"metadata": {"generateName": "g-"}}),
        )
        .await;
    assert_eq!(code, 403);
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .starts_with("configmaps is forbidden: unable"),
        "{s}"
    );
}

#[tokio::test]
async fn built_in_defaults_on_create_and_update() {
    let t = start().await;
    let h = Http::new(&t.url);
    let (code, s) = h
        .post(
            "/api/v1/namespaces/default/secrets",
            &json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}}),
        )
        .await;
    assert_eq!(code, 201, "{s}");
    assert_eq!(s["type"], "Opaque");

    let deps = "/apis/apps/v1/namespaces/default/deployments";
    let (code, d) = h.post(deps, &deployment("web")).await;
    assert_eq!(code, 201, "{d}");
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(
        d["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
    let tpl = &d["spec"]["template"]["spec"];
    assert_eq!(tpl["restartPolicy"], "Always");
    assert_eq!(tpl["dnsPolicy"], "ClusterFirst");
    assert_eq!(tpl["containers"][0]["imagePullPolicy"], "Always");
    // The Update manager owns the defaults, as in kube.
    let fields = d["metadata"]["managedFields"][0]["fieldsV1"].to_string();
    assert!(fields.contains("f:progressDeadlineSeconds"), "{fields}");

    // A PUT that leaves the defaults out gets them again.
    let mut replaced = deployment("web");
    replaced["metadata"]["resourceVersion"] = d["metadata"]["resourceVersion"].clone();
    replaced["spec"]["replicas"] = json!(3);
    let (code, d2) = h.put(&format!("{deps}/web"), &replaced).await;
    assert_eq!(code, 200, "{d2}");
    assert_eq!(d2["spec"]["replicas"], 3);
    assert_eq!(d2["spec"]["strategy"]["type"], "RollingUpdate");

    let (code, sts) = h
        .post(
            "/apis/apps/v1/namespaces/default/statefulsets",
            &json!({"metadata": {"name": "db"}, "spec": {"serviceName": "db",
                "selector": {"matchLabels": {"a": "db"}},
                "template": {"metadata": {"labels": {"a": "db"}}, "spec": {"containers": [{"name": "c", "image": "pg:16"}]}}}}),
        )
        .await;
    assert_eq!(code, 201, "{sts}");
    assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        sts["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(
        sts["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );

    let (code, p) = h.post(PODS, &pod("p")).await;
    assert_eq!(code, 201, "{p}");
    let spec = &p["spec"];
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    assert_eq!(spec["schedulerName"], "default-scheduler");
    assert_eq!(spec["securityContext"], json!({}));
    let c = &spec["containers"][0];
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(c["ports"][0]["protocol"], "TCP");

    let (code, svc) = h
        .post(
            "/api/v1/namespaces/default/services",
            &json!({"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}),
        )
        .await;
    assert_eq!(code, 201, "{svc}");
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["sessionAffinity"], "None");
    assert_eq!(
        svc["spec"]["ports"][0],
        json!({"port": 80, "protocol": "TCP", "targetPort": 80})
    );

    let (code, pvc) = h
        .post(
            "/api/v1/namespaces/default/persistentvolumeclaims",
            &json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .await;
    assert_eq!(code, 201, "{pvc}");
    assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
}

#[tokio::test]
async fn pod_spec_is_immutable_but_for_kubes_exceptions() {
    let t = start().await;
    let h = Http::new(&t.url);
    assert_eq!(h.post(PODS, &pod("p")).await.0, 201);
    let path = format!("{PODS}/p");

    // Container env: forbidden, in kube's words.
    let (code, s) = h
        .strategic(
            &path,
            &json!({"spec": {"containers": [{"name": "c", "env": [{"name": "X", "value": "1"}]}]}}),
        )
        .await;
    assert_eq!(code, 422, "{s}");
    let msg = s["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"),
        "{msg}"
    );
    assert!(msg.contains("spec.containers[0].env"), "{msg}");
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueForbidden");
    assert_eq!(s["details"]["causes"][0]["field"], "spec");

    // Adding a container: forbidden.
    let (code, s) = h
        .strategic(
            &path,
            &json!({"spec": {"containers": [{"name": "d", "image": "x"}]}}),
        )
        .await;
    assert_eq!(code, 422, "{s}");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("pod updates may not add or remove containers")
    );

    // The image, labels, an added toleration and an activeDeadlineSeconds
    // set then lowered: allowed.
    for patch in [
        json!({"spec": {"containers": [{"name": "c", "image": "nginx:1.28"}]}}),
        json!({"metadata": {"labels": {"x": "y"}}}),
        json!({"spec": {"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}}),
        json!({"spec": {"activeDeadlineSeconds": 100}}),
        json!({"spec": {"activeDeadlineSeconds": 50}}),
    ] {
        let (code, s) = h.strategic(&path, &patch).await;
        assert_eq!(code, 200, "{patch}: {s}");
    }
    // Raising activeDeadlineSeconds, dropping a toleration: refused.
    let (code, s) = h
        .merge(&path, &json!({"spec": {"activeDeadlineSeconds": 60}}))
        .await;
    assert_eq!(code, 422, "{s}");
    assert_eq!(
        s["details"]["causes"][0]["field"],
        "spec.activeDeadlineSeconds"
    );
    let (code, s) = h
        .merge(
            &path,
            &json!({"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}),
        )
        .await;
    assert_eq!(code, 422, "{s}");
    assert_eq!(s["details"]["causes"][0]["field"], "spec.tolerations");

    // No binding subresource here: nodeName may be set once, from empty.
    let (code, s) = h.merge(&path, &json!({"spec": {"nodeName": "n1"}})).await;
    assert_eq!(code, 200, "{s}");
    let (code, s) = h.merge(&path, &json!({"spec": {"nodeName": "n2"}})).await;
    assert_eq!(code, 422, "{s}");

    // A PUT of the object as read (defaults included) is fine, and so is
    // /status.
    let (_, cur) = h.get(&path).await;
    assert_eq!(h.put(&path, &cur).await.0, 200);
    let (code, s) = h
        .merge(
            &format!("{path}/status"),
            &json!({"status": {"phase": "Running"}}),
        )
        .await;
    assert_eq!(code, 200, "{s}");
}

#[tokio::test]
async fn generation_only_where_kube_has_it() {
    let t = start().await;
    let h = Http::new(&t.url);
    // A client-sent generation is dropped on kinds without one.
    let (code, cm) = h
        .post(
            CMS,
            &json!({"metadata": {"name": "c", "generation": 7}, "data": {"a": "1"}}),
        )
        .await;
    assert_eq!(code, 201);
    assert!(cm["metadata"].get("generation").is_none(), "{cm}");
    let (_, cm) = h
        .merge(&format!("{CMS}/c"), &json!({"data": {"a": "2"}}))
        .await;
    assert!(cm["metadata"].get("generation").is_none(), "{cm}");
    for (path, body) in [
        (
            "/api/v1/namespaces",
            json!({"metadata": {"name": "gen-ns"}}),
        ),
        (
            "/api/v1/namespaces/default/secrets",
            json!({"metadata": {"name": "s"}}),
        ),
        (PODS, pod("p")),
        (
            "/api/v1/namespaces/default/services",
            json!({"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 1}]}}),
        ),
        (
            "/api/v1/namespaces/default/serviceaccounts",
            json!({"metadata": {"name": "sa"}}),
        ),
    ] {
        let (code, o) = h.post(path, &body).await;
        assert_eq!(code, 201, "{path}: {o}");
        assert!(o["metadata"].get("generation").is_none(), "{path}: {o}");
    }
    // Deleting a namespace (graceful) does not give it one either.
    let (_, ns) = h.delete("/api/v1/namespaces/gen-ns").await;
    assert!(ns["metadata"].get("generation").is_none(), "{ns}");

    let deps = "/apis/apps/v1/namespaces/default/deployments";
    let (_, d) = h.post(deps, &deployment("web")).await;
    assert_eq!(d["metadata"]["generation"], 1);
    let (_, d) = h
        .merge(&format!("{deps}/web"), &json!({"spec": {"replicas": 2}}))
        .await;
    assert_eq!(d["metadata"]["generation"], 2);
    let (_, d) = h
        .merge(
            &format!("{deps}/web"),
            &json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await;
    assert_eq!(d["metadata"]["generation"], 2);

    // kube's EndpointSlice strategy bumps generation on label changes too.
    let slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
    let (code, e) = h
        .post(
            slices,
            &json!({"metadata": {"name": "e"}, "addressType": "IPv4", "endpoints": []}),
        )
        .await;
    assert_eq!(code, 201, "{e}");
    assert_eq!(e["metadata"]["generation"], 1);
    let (_, e) = h
        .merge(
            &format!("{slices}/e"),
            &json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await;
    assert_eq!(e["metadata"]["generation"], 2);
}

fn names(list: &Value) -> Vec<(String, Value)> {
    list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_string(), r["verbs"].clone()))
        .collect()
}

#[tokio::test]
async fn discovery_lists_reviews_and_served_verbs() {
    let t = start().await;
    let h = Http::new(&t.url);
    let (_, groups) = h.get("/apis").await;
    let group_names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(
        group_names.contains(&"authorization.k8s.io"),
        "{group_names:?}"
    );
    assert!(
        group_names.contains(&"authentication.k8s.io"),
        "{group_names:?}"
    );
    let (code, _) = h.get("/apis/authorization.k8s.io").await;
    assert_eq!(code, 200);

    let (_, authz) = h.get("/apis/authorization.k8s.io/v1").await;
    let create = json!(["create"]);
    assert_eq!(
        names(&authz),
        [
            "localsubjectaccessreviews",
            "selfsubjectaccessreviews",
            "selfsubjectrulesreviews",
            "subjectaccessreviews"
        ]
        .iter()
        .map(|n| (n.to_string(), create.clone()))
        .collect::<Vec<_>>()
    );
    let (_, authn) = h.get("/apis/authentication.k8s.io/v1").await;
    assert_eq!(
        names(&authn),
        vec![
            ("selfsubjectreviews".to_string(), create.clone()),
            ("tokenreviews".to_string(), create.clone())
        ]
    );

    let (_, core) = h.get("/api/v1").await;
    let core = names(&core);
    let verbs_of = |n: &str| core.iter().find(|(x, _)| x == n).map(|(_, v)| v.clone());
    assert_eq!(verbs_of("serviceaccounts/token"), Some(create.clone()));
    assert_eq!(
        verbs_of("namespaces"),
        Some(json!([
            "create", "delete", "get", "list", "patch", "update", "watch"
        ]))
    );
    assert_eq!(verbs_of("namespaces/finalize"), Some(json!(["update"])));
    assert!(
        verbs_of("configmaps")
            .unwrap()
            .as_array()
            .unwrap()
            .contains(&json!("deletecollection"))
    );

    // Aggregated discovery says the same.
    let (_, agg) = h.call("GET", "/apis", "", AGGREGATED, &Value::Null).await;
    let authz = agg["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "authorization.k8s.io")
        .expect("authorization.k8s.io in aggregated discovery");
    let ssar = authz["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "selfsubjectaccessreviews")
        .unwrap();
    assert_eq!(ssar["verbs"], create);
    assert_eq!(ssar["scope"], "Cluster");
    let (_, agg) = h.call("GET", "/api", "", AGGREGATED, &Value::Null).await;
    let core = &agg["items"][0]["versions"][0]["resources"];
    let find = |n: &str| {
        core.as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == n)
            .unwrap()
            .clone()
    };
    assert!(
        !find("namespaces")["verbs"]
            .as_array()
            .unwrap()
            .contains(&json!("deletecollection"))
    );
    let token = find("serviceaccounts")["subresources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["subresource"] == "token")
        .cloned()
        .unwrap();
    assert_eq!(token["responseKind"]["kind"], "TokenRequest");

    // The reviews are still answered where they were.
    let (code, r) = h
        .post(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                    "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}),
        )
        .await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(r["status"]["allowed"], true);

    // Verbs a resource does not list are not served.
    let (code, s) = h.delete("/api/v1/namespaces").await;
    assert_eq!(code, 405, "{s}");
    assert_eq!(s["reason"], "MethodNotAllowed");
    assert_eq!(
        s["message"],
        "the server does not allow this method on the requested resource"
    );
    assert_eq!(h.get("/api/v1/namespaces/default").await.0, 200);
    // The all-namespaces path of a namespaced resource: list and watch only.
    assert_eq!(
        h.post(CMS, &json!({"metadata": {"name": "kept"}})).await.0,
        201
    );
    let (code, s) = h.delete("/api/v1/configmaps").await;
    assert_eq!(code, 405, "{s}");
    assert_eq!(h.get(&format!("{CMS}/kept")).await.0, 200);
    assert_eq!(h.delete(CMS).await.0, 200);
    let (_, v2) = h.get("/openapi/v2").await;
    assert!(v2["paths"]["/api/v1/namespaces"].get("delete").is_none());
    assert!(
        v2["paths"]["/api/v1/namespaces/{namespace}/configmaps"]
            .get("delete")
            .is_some()
    );
}

#[tokio::test]
async fn immortal_namespaces_cannot_be_deleted() {
    let t = start().await;
    let h = Http::new(&t.url);
    for ns in ["default", "kube-system", "kube-public"] {
        for query in ["", "?dryRun=All"] {
            let (code, s) = h.delete(&format!("/api/v1/namespaces/{ns}{query}")).await;
            assert_eq!(code, 403, "{ns}{query}: {s}");
            assert_eq!(
                s["message"],
                format!("namespaces \"{ns}\" is forbidden: this namespace may not be deleted")
            );
            assert_eq!(s["details"]["name"], ns);
            assert_eq!(s["details"]["kind"], "namespaces");
        }
        let (_, n) = h.get(&format!("/api/v1/namespaces/{ns}")).await;
        assert_eq!(n["status"]["phase"], "Active");
    }
    // Other namespaces, kube-node-lease among them, can go.
    assert_eq!(
        h.delete("/api/v1/namespaces/kube-node-lease?dryRun=All")
            .await
            .0,
        200
    );
}
