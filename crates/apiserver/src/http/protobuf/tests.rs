//! Decoder tests: bodies captured from kubectl 1.32 (`kubectl create …`
//! against a recording proxy) decode to the JSON a JSON client would send;
//! objects built with a small test encoder cover every field kind; every
//! table agrees with the OpenAPI schemas of the same kinds; and random or
//! damaged input is an error, never a panic.

use serde_json::json;

use super::schema::{self, Table, Ty};
use super::*;

// Bodies kubectl 1.32 sent for `create namespace foo`, `create configmap cm2
// --from-file=bin=<00 01 ff> --from-literal=x=y`, `create secret generic s1
// --from-literal=user=admin`, `create deployment web --image=nginx:1.25
// --replicas=2 --port=80`, `create rolebinding rb1 --role=r1 --user=alice
// --serviceaccount=foo:sa1`, `create pdb pdb2 --selector=app=web
// --max-unavailable=50%`, `create service clusterip svc2 --tcp=5678:8080`,
// `create role r1 --verb=get,list --resource=pods,configmaps
// --resource-name=x`, and the DeleteOptions of `drain --disable-eviction
// --grace-period=0`.
const NAMESPACE: &[u8] =
    b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x1b\x0a\x13\x0a\x03foo\x12\x00\x1a\
      \x00\x22\x00*\x002\x008\x00B\x00\x12\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
const CONFIG_MAP: &[u8] =
    b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12,\x0a\x16\x0a\x03cm2\x12\x00\x1a\x03fo\
      o\x22\x00*\x002\x008\x00B\x00\x12\x06\x0a\x01x\x12\x01y\x1a\x0a\x0a\x03bin\x12\x03\
      \x00\x01\xff\x1a\x00\x22\x00";
const SECRET: &[u8] =
    b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x12(\x0a\x15\x0a\x02s1\x12\x00\x1a\x03foo\
      \x22\x00*\x002\x008\x00B\x00\x12\x0d\x0a\x04user\x12\x05admin\x1a\x00\x1a\x00\x22\
      \x00";
const DEPLOYMENT: &[u8] =
    b"k8s\x00\x0a\x15\x0a\x07apps/v1\x12\x0aDeployment\x12\xc0\x01\x0a\x22\x0a\x03web\x12\
      \x00\x1a\x03foo\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12\x8b\x01\
      \x08\x02\x12\x0c\x0a\x0a\x0a\x03app\x12\x03web\x1aq\x0a\x1c\x0a\x00\x12\x00\x1a\x00\
      \x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12Q\x123\x0a\x05nginx\x12\
      \x0anginx:1.25*\x002\x0a\x0a\x00\x10\x00\x18P\x22\x00*\x00B\x00j\x00r\x00\x80\x01\
      \x00\x88\x01\x00\x90\x01\x00\xa2\x01\x00\x1a\x002\x00B\x00J\x00R\x00X\x00`\x00h\x00\
      \x82\x01\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\x22\x02\x0a\x00(\x008\x00\x1a\x0c\
      \x08\x00\x10\x00\x18\x00 \x00(\x008\x00\x1a\x00\x22\x00";
const ROLE_BINDING: &[u8] =
    b"k8s\x00\x0a+\x0a\x1crbac.authorization.k8s.io/v1\x12\x0bRoleBinding\x12\x89\x01\x0a\
      \x16\x0a\x03rb1\x12\x00\x1a\x03foo\x22\x00*\x002\x008\x00B\x00\x12*\x0a\x04User\x12\
      \x19rbac.authorization.k8s.io\x1a\x05alice\x22\x00\x12\x1c\x0a\x0eServiceAccount\x12\
      \x00\x1a\x03sa1\x22\x03foo\x1a%\x0a\x19rbac.authorization.k8s.io\x12\x04Role\x1a\x02\
      r1\x1a\x00\x22\x00";
const PDB: &[u8] =
    b"k8s\x00\x0a \x0a\x09policy/v1\x12\x13PodDisruptionBudget\x12@\x0a\x17\x0a\x04pdb2\
      \x12\x00\x1a\x03foo\x22\x00*\x002\x008\x00B\x00\x12\x19\x12\x0c\x0a\x0a\x0a\x03app\
      \x12\x03web\x1a\x09\x08\x01\x10\x00\x1a\x0350%\x1a\x0a\x08\x00\x18\x00 \x00(\x000\
      \x00\x1a\x00\x22\x00";
const SERVICE: &[u8] =
    b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12r\x0a$\x0a\x04svc2\x12\x00\x1a\x03foo\
      \x22\x00*\x002\x008\x00B\x00Z\x0b\x0a\x03app\x12\x04svc2\x12F\x0a\x1e\x0a\x095678-80\
      80\x12\x03TCP\x18\xae,\x22\x07\x08\x00\x10\x90?\x1a\x00(\x00\x12\x0b\x0a\x03app\x12\
      \x04svc2\x1a\x00\x22\x09ClusterIP:\x00B\x00R\x00Z\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\
      \x00\x22\x00";
const ROLE: &[u8] =
    b"k8s\x00\x0a$\x0a\x1crbac.authorization.k8s.io/v1\x12\x04Role\x12;\x0a\x15\x0a\x02r1\
      \x12\x00\x1a\x03foo\x22\x00*\x002\x008\x00B\x00\x12\x22\x0a\x03get\x0a\x04list\x12\
      \x00\x1a\x04pods\x1a\x0aconfigmaps\x22\x01x\x1a\x00\x22\x00";
const DELETE_OPTIONS: &[u8] =
    b"k8s\x00\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x02\x08\x00\x1a\x00\x22\x00";

/// A minimal protobuf encoder for building test bodies.
#[derive(Default, Clone)]
struct Enc(Vec<u8>);

impl Enc {
    fn key(mut self, num: u64, wire_type: u64) -> Enc {
        self.put_varint((num << 3) | wire_type);
        self
    }

    fn put_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn varint(self, num: u64, v: u64) -> Enc {
        let mut e = self.key(num, 0);
        e.put_varint(v);
        e
    }

    fn int(self, num: u64, v: i64) -> Enc {
        self.varint(num, v as u64)
    }

    fn bytes(self, num: u64, b: &[u8]) -> Enc {
        let mut e = self.key(num, 2);
        e.put_varint(b.len() as u64);
        e.0.extend_from_slice(b);
        e
    }

    fn str(self, num: u64, s: &str) -> Enc {
        self.bytes(num, s.as_bytes())
    }

    fn msg(self, num: u64, m: Enc) -> Enc {
        self.bytes(num, &m.0)
    }

    /// A `map<string, string>` entry.
    fn entry(self, num: u64, k: &str, v: &str) -> Enc {
        self.msg(num, Enc::default().str(1, k).str(2, v))
    }
}

fn envelope(api_version: &str, kind: &str, obj: &Enc) -> Vec<u8> {
    let type_meta = Enc::default().str(1, api_version).str(2, kind);
    let mut b = b"k8s\x00".to_vec();
    b.extend(
        Enc::default()
            .msg(1, type_meta)
            .bytes(2, &obj.0)
            .str(3, "")
            .str(4, "")
            .0,
    );
    b
}

fn time(secs: i64, nanos: i64) -> Enc {
    Enc::default().int(1, secs).int(2, nanos)
}

#[test]
fn captured_kubectl_bodies() {
    let cases = [
        (
            NAMESPACE,
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "foo"}, "spec": {}, "status": {}}),
        ),
        (
            CONFIG_MAP,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm2", "namespace": "foo"},
                "data": {"x": "y"}, "binaryData": {"bin": "AAH/"}}),
        ),
        (
            SECRET,
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s1", "namespace": "foo"},
                "data": {"user": "YWRtaW4="}}),
        ),
        (
            DEPLOYMENT,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "foo", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{
                            "name": "nginx", "image": "nginx:1.25",
                            "ports": [{"containerPort": 80}], "resources": {},
                        }]},
                    },
                    "strategy": {},
                },
                "status": {}}),
        ),
        (
            ROLE_BINDING,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "rb1", "namespace": "foo"},
                "subjects": [
                    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                    {"kind": "ServiceAccount", "name": "sa1", "namespace": "foo"},
                ],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r1"}}),
        ),
        (
            PDB,
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "pdb2", "namespace": "foo"},
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "50%"},
                "status": {"disruptionsAllowed": 0, "currentHealthy": 0,
                    "desiredHealthy": 0, "expectedPods": 0}}),
        ),
        (
            SERVICE,
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "svc2", "namespace": "foo", "labels": {"app": "svc2"}},
                "spec": {
                    "ports": [{"name": "5678-8080", "protocol": "TCP", "port": 5678, "targetPort": 8080}],
                    "selector": {"app": "svc2"},
                    "type": "ClusterIP",
                },
                "status": {"loadBalancer": {}}}),
        ),
        (
            ROLE,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "r1", "namespace": "foo"},
                "rules": [{"verbs": ["get", "list"], "apiGroups": [""],
                    "resources": ["pods", "configmaps"], "resourceNames": ["x"]}]}),
        ),
        (
            DELETE_OPTIONS,
            json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}),
        ),
    ];
    for (body, want) in cases {
        assert!(is_envelope(body));
        let got = decode_object(body).unwrap();
        assert_eq!(got, want);
    }
    assert!(decode_kind(DELETE_OPTIONS, "DeleteOptions").is_ok());
    assert_eq!(
        decode_kind(CONFIG_MAP, "DeleteOptions").unwrap_err().code,
        400
    );
}

#[test]
fn pod_with_every_kind_of_field() {
    let managed = Enc::default()
        .str(1, "kubectl")
        .str(2, "Update")
        .msg(4, time(1_700_000_000, 0))
        .str(6, "FieldsV1")
        .msg(7, Enc::default().str(1, r#"{"f:metadata":{}}"#));
    let meta = Enc::default()
        .str(1, "p")
        .str(3, "ns")
        .str(4, "") // an empty string is left out
        .msg(8, time(1_700_000_000, 123))
        .int(10, 0) // a pointer: zero is kept
        .entry(11, "app", "x")
        .entry(12, "note", "")
        .msg(
            13,
            Enc::default()
                .str(1, "ReplicaSet")
                .str(3, "rs")
                .str(4, "u")
                .str(5, "apps/v1")
                .varint(6, 1)
                .varint(7, 0),
        )
        .str(14, "a/b")
        .str(14, "c/d")
        .msg(17, managed);
    let env = Enc::default().str(1, "CM").msg(
        3,
        Enc::default().msg(
            3,
            Enc::default()
                .msg(1, Enc::default().str(1, "cfg"))
                .str(2, "k")
                .varint(3, 0),
        ),
    );
    let resources = Enc::default().msg(
        1,
        Enc::default()
            .str(1, "cpu")
            .msg(2, Enc::default().str(1, "500m")),
    );
    let probe = Enc::default()
        .msg(
            1,
            Enc::default().msg(
                2,
                Enc::default()
                    .str(1, "/healthz")
                    .msg(2, Enc::default().varint(1, 1).str(3, "http")),
            ),
        )
        .int(4, 10);
    let container = Enc::default()
        .str(1, "c")
        .str(2, "busybox")
        .str(3, "sleep")
        .str(4, "3600")
        .str(5, "")
        .msg(6, Enc::default().int(3, 8080).str(4, "TCP"))
        .msg(7, env)
        .msg(8, resources)
        .msg(
            9,
            Enc::default().str(1, "data").str(3, "/data").varint(2, 0),
        )
        .msg(11, probe)
        .msg(15, Enc::default().int(4, 0).varint(7, 0))
        .varint(16, 0);
    let volumes = [
        Enc::default()
            .str(1, "data")
            .msg(2, Enc::default().msg(2, Enc::default())),
        Enc::default().str(1, "cfg").msg(
            2,
            Enc::default().msg(
                19,
                Enc::default()
                    .msg(1, Enc::default().str(1, "settings"))
                    .int(3, 0o644),
            ),
        ),
    ];
    let mut spec = Enc::default();
    for v in volumes {
        spec = spec.msg(1, v);
    }
    let spec = spec
        .msg(2, container)
        .str(3, "Never")
        .int(4, 0)
        .entry(7, "disk", "ssd")
        .str(10, "node-1")
        .varint(11, 0)
        .msg(
            14,
            Enc::default()
                .bytes(4, &{
                    // supplementalGroups, packed
                    let mut p = Enc::default();
                    p.put_varint(1000);
                    p.put_varint(2000);
                    p.0
                })
                .int(4, 3000),
        )
        .msg(
            22,
            Enc::default()
                .str(1, "k")
                .str(2, "Exists")
                .str(4, "NoExecute")
                .int(5, 0),
        )
        .int(25, -5);
    let pod = Enc::default()
        .msg(1, meta)
        .msg(2, spec)
        .msg(3, Enc::default().str(1, "Pending"));
    let got = decode_object(&envelope("v1", "Pod", &pod)).unwrap();
    let want = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "p", "namespace": "ns",
            "creationTimestamp": "2023-11-14T22:13:20Z",
            "deletionGracePeriodSeconds": 0,
            "labels": {"app": "x"},
            "annotations": {"note": ""},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "u",
                "apiVersion": "apps/v1", "controller": true, "blockOwnerDeletion": false}],
            "finalizers": ["a/b", "c/d"],
            "managedFields": [{"manager": "kubectl", "operation": "Update",
                "time": "2023-11-14T22:13:20Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {}}}],
        },
        "spec": {
            "volumes": [
                {"name": "data", "emptyDir": {}},
                {"name": "cfg", "configMap": {"name": "settings", "defaultMode": 420}},
            ],
            "containers": [{
                "name": "c", "image": "busybox", "command": ["sleep"], "args": ["3600"],
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "CM", "valueFrom": {"configMapKeyRef":
                    {"name": "cfg", "key": "k", "optional": false}}}],
                "resources": {"limits": {"cpu": "500m"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                    "periodSeconds": 10},
                "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": false},
            }],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"disk": "ssd"},
            "nodeName": "node-1",
            "securityContext": {"supplementalGroups": [1000, 2000, 3000]},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 0}],
            "priority": -5,
        },
        "status": {"phase": "Pending"},
    });
    assert_eq!(got, want);
    // The JSON is what the typed Kubernetes structs accept.
    serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(got).unwrap();
}

#[test]
fn lease_micro_time_and_eviction() {
    let lease = Enc::default().msg(1, Enc::default().str(1, "l")).msg(
        2,
        Enc::default()
            .str(1, "me")
            .int(2, 40)
            .msg(3, time(1_700_000_000, 5_000))
            .msg(4, time(1_700_000_001, 0))
            .int(5, 0),
    );
    let got = decode_object(&envelope("coordination.k8s.io/v1", "Lease", &lease)).unwrap();
    assert_eq!(
        got["spec"],
        json!({"holderIdentity": "me", "leaseDurationSeconds": 40,
            "acquireTime": "2023-11-14T22:13:20.000005Z",
            "renewTime": "2023-11-14T22:13:21.000000Z", "leaseTransitions": 0})
    );

    let eviction = Enc::default()
        .msg(1, Enc::default().str(1, "p").str(3, "ns"))
        .msg(
            2,
            Enc::default()
                .int(1, 0)
                .msg(2, Enc::default().str(1, "uid-1"))
                .str(4, "Foreground")
                .str(5, "All"),
        );
    for version in ["policy/v1", "policy/v1beta1"] {
        let got = decode_object(&envelope(version, "Eviction", &eviction)).unwrap();
        assert_eq!(
            got["deleteOptions"],
            json!({"gracePeriodSeconds": 0, "preconditions": {"uid": "uid-1"},
                "propagationPolicy": "Foreground", "dryRun": ["All"]})
        );
        assert_eq!(got["metadata"], json!({"name": "p", "namespace": "ns"}));
    }
}

#[test]
fn pdb_int_or_string_and_cluster_role() {
    let pdb = Enc::default().msg(
        2,
        Enc::default()
            .msg(1, Enc::default().int(2, 0)) // minAvailable: 0 (a pointer)
            .str(4, "AlwaysAllow"),
    );
    let got = decode_object(&envelope("policy/v1", "PodDisruptionBudget", &pdb)).unwrap();
    assert_eq!(
        got["spec"],
        json!({"minAvailable": 0, "unhealthyPodEvictionPolicy": "AlwaysAllow"})
    );

    let selector = Enc::default().msg(
        2,
        Enc::default()
            .str(1, "tier")
            .str(2, "In")
            .str(3, "a")
            .str(3, "b"),
    );
    let role = Enc::default()
        .msg(1, Enc::default().str(1, "agg"))
        .msg(3, Enc::default().msg(1, selector))
        .msg(2, Enc::default().str(1, "get").str(5, "/healthz"));
    let got = decode_object(&envelope(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        &role,
    ))
    .unwrap();
    assert_eq!(
        got["aggregationRule"],
        json!({"clusterRoleSelectors": [{"matchExpressions":
            [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}]})
    );
    assert_eq!(
        got["rules"],
        json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}])
    );
}

#[test]
fn proto_rules_for_repeats_unknown_fields_and_zeroes() {
    // Unknown fields of every wire type are skipped; a message sent twice
    // merges; a singular field sent twice keeps its last value, which for a
    // pointer field is kept even when it is zero.
    let mut obj = Enc::default()
        .msg(1, Enc::default().str(1, "first").entry(11, "a", "1"))
        .varint(99, 7)
        .key(98, 1);
    obj.0.extend([0; 8]);
    let mut obj = obj.key(97, 5);
    obj.0.extend([0; 4]);
    let obj = obj
        .str(96, "ignored")
        .msg(1, Enc::default().str(1, "second").entry(11, "b", "2"))
        .varint(4, 1)
        .varint(4, 0);
    let got = decode_object(&envelope("v1", "ConfigMap", &obj)).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "second", "labels": {"a": "1", "b": "2"}},
            "immutable": false})
    );

    // A field of the wrong wire type is a 400 naming the field.
    let obj = Enc::default().msg(1, Enc::default().varint(3, 1));
    let e = decode_object(&envelope("v1", "ConfigMap", &obj)).unwrap_err();
    assert_eq!(e.code, 400);
    assert!(e.message.contains("metadata.namespace"), "{}", e.message);
}

#[test]
fn unknown_kinds_are_415_and_bad_envelopes_400() {
    let daemon_set = envelope("apps/v1", "DaemonSet", &Enc::default());
    let e = decode_object(&daemon_set).unwrap_err();
    assert_eq!(e.code, 415);
    assert!(e.message.contains("DaemonSet (apps/v1)"), "{}", e.message);

    let gzip = {
        let mut b = b"k8s\x00".to_vec();
        b.extend(Enc::default().str(3, "gzip").0);
        b
    };
    assert_eq!(decode_object(&gzip).unwrap_err().code, 415);

    for body in [
        &b"k8s\x00"[..],              // no kind
        b"{\"kind\":\"ConfigMap\"}",  // not protobuf at all
        b"k8s\x00\x0a\x05\x0a\x02v1", // type meta cut short
        b"k8s\x00\x0b",               // a group
    ] {
        let e = decode_object(body).unwrap_err();
        assert_eq!(e.code, 400, "{body:?}: {}", e.message);
    }
    // An object whose metadata claims more bytes than there are: the
    // envelope is fine, the object is not, and the error names the kind.
    let obj = Enc::default().msg(1, Enc::default().str(1, "n"));
    let mut body = envelope("v1", "ConfigMap", &obj);
    let n = body.len();
    // The envelope ends with the object (5 bytes: key, length 3, "\x0a\x01n")
    // and two empty strings (4 bytes); raise the metadata length to 127.
    assert_eq!(body[n - 8], 3);
    body[n - 8] = 0x7f;
    let e = decode_object(&body).unwrap_err();
    assert_eq!(e.code, 400);
    assert!(e.message.contains("protobuf ConfigMap"), "{}", e.message);
}

/// A protobuf message with every field of `table` set (lists and maps get one
/// element), for checking tables against the OpenAPI schemas.
fn synthesize(table: Table, depth: usize) -> Enc {
    table
        .iter()
        .fold(Enc::default(), |e, f| put(e, f.num, &f.ty, depth))
}

/// `e` with a sample value of `ty` added as field `num`.
fn put(e: Enc, num: u64, ty: &Ty, depth: usize) -> Enc {
    match ty {
        Ty::Str => e.str(num, "x"),
        Ty::Bytes => e.bytes(num, b"\x01"),
        Ty::I32 | Ty::I64 | Ty::Bool => e.varint(num, 1),
        Ty::Msg(t) | Ty::Inline(t) => e.msg(num, synthesize(t, depth + 1)),
        Ty::Map(v) => e.msg(num, put(Enc::default().str(1, "key"), 2, v, depth)),
        Ty::IntOrString => e.msg(num, Enc::default().varint(2, 1)),
        Ty::Quantity => e.msg(num, Enc::default().str(1, "1")),
        Ty::Time | Ty::MicroTime => e.msg(num, time(1_700_000_000, 1_000)),
        Ty::Raw => e.msg(num, Enc::default().str(1, "{}")),
        Ty::Items => e.msg(num, Enc::default().str(1, "x")),
    }
}

#[test]
fn tables_agree_with_the_openapi_schemas() {
    let registry = crate::storage::registry::Registry::with(crate::strategy::resources());
    let kinds = [
        ("v1", "Namespace"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "ServiceAccount"),
        ("v1", "Service"),
        ("v1", "Pod"),
        ("v1", "Node"),
        ("v1", "Endpoints"),
        ("v1", "PersistentVolumeClaim"),
        ("v1", "Event"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("batch/v1", "Job"),
        ("batch/v1", "CronJob"),
        ("policy/v1", "PodDisruptionBudget"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
        ("coordination.k8s.io/v1", "Lease"),
        ("discovery.k8s.io/v1", "EndpointSlice"),
        ("events.k8s.io/v1", "Event"),
    ];
    for (api_version, kind) in kinds {
        let table = schema::for_kind(api_version, kind).unwrap();
        let body = envelope(api_version, kind, &synthesize(table, 0));
        let mut obj = decode_object(&body).unwrap_or_else(|e| panic!("{kind}: {}", e.message));
        let res = registry
            .by_kind(api_version, kind)
            .unwrap_or_else(|| panic!("{kind} is not served"));
        // Every field name is one the schema knows…
        let pruned = crate::http::openapi::prune_unknown(&res, &mut obj);
        assert!(pruned.is_empty(), "{kind}: unknown fields {pruned:?}");
        let mut bogus = obj.clone();
        bogus["metadata"]["bogusField"] = json!(1);
        assert!(!crate::http::openapi::prune_unknown(&res, &mut bogus).is_empty());
        // …and every value has the shape the typed structs expect.
        assert!(
            res.strategy.validate(&res, &obj).is_ok(),
            "{kind}: {:?}",
            res.strategy.validate(&res, &obj).err().map(|e| e.message)
        );
    }
}

/// xorshift64*: deterministic pseudo-random bytes without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn random_and_damaged_input_never_panics() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let captured = [
        NAMESPACE,
        CONFIG_MAP,
        SECRET,
        DEPLOYMENT,
        ROLE_BINDING,
        PDB,
        SERVICE,
        ROLE,
        DELETE_OPTIONS,
    ];
    let pod = envelope(
        "v1",
        "Pod",
        &synthesize(schema::for_kind("v1", "Pod").unwrap(), 0),
    );
    for i in 0..20_000 {
        let body: Vec<u8> = match i % 3 {
            // Random bytes after the magic, under a real kind.
            0 => {
                let n = (rng.next() % 200) as usize;
                let raw: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                envelope("apps/v1", "Deployment", &Enc(raw))
            }
            // A captured body with a few bytes flipped.
            1 => {
                let mut b = captured[(rng.next() % captured.len() as u64) as usize].to_vec();
                for _ in 0..1 + rng.next() % 4 {
                    let at = (rng.next() % b.len() as u64) as usize;
                    b[at] ^= 1 << (rng.next() % 8);
                }
                b
            }
            // A large synthesized pod cut short.
            _ => pod[..(rng.next() % pod.len() as u64) as usize].to_vec(),
        };
        let _ = decode_object(&body);
    }
}

#[test]
fn handlers_read_protobuf_bodies() {
    let v = crate::http::body::parse_body(DEPLOYMENT, CONTENT_TYPE).unwrap();
    assert_eq!(v["spec"]["replicas"], json!(2));
    // The magic bytes decide, whatever the Content-Type claims.
    let v = crate::http::body::parse_body(CONFIG_MAP, "application/json").unwrap();
    assert_eq!(v["data"], json!({"x": "y"}));
    let q = crate::http::request::Query::parse(None);
    let o = crate::http::body::delete_options(DELETE_OPTIONS, &q).unwrap();
    assert_eq!(o.grace, Some(0));
    assert_eq!(
        crate::http::body::delete_options(SECRET, &q)
            .unwrap_err()
            .code,
        400
    );
}

#[test]
fn scale_body_for_the_scale_subresource() {
    let scale = Enc::default()
        .msg(1, Enc::default().str(1, "web").str(6, "42"))
        .msg(2, Enc::default().int(1, 3));
    let v =
        crate::http::body::parse_body(&envelope("autoscaling/v1", "Scale", &scale), "").unwrap();
    assert_eq!(v["spec"], json!({"replicas": 3}));
    assert_eq!(v["metadata"]["resourceVersion"], "42");
}
