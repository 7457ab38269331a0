//! Managed fields and server-side apply, without HTTP.

use super::*;
use serde_json::json;

const T0: &str = "2025-01-01T00:00:00Z";
const T1: &str = "2025-01-01T00:01:00Z";

fn res(group: &str, kind: &str) -> Resource {
    crate::strategy::resources()
        .into_iter()
        .find(|r| r.group == group && r.kind == kind)
        .expect("a served kind")
}

fn set(paths: &[&[&str]]) -> FieldSet {
    paths
        .iter()
        .map(|p| p.iter().map(|s| s.to_string()).collect())
        .collect()
}

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "default", "labels": {"app": "d"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": image, "ports": [{"containerPort": 80, "protocol": "TCP"}]}]},
            },
        },
    })
}

fn skeleton() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"}})
}

fn managers(obj: &Value) -> Vec<Managed> {
    live_managers(obj)
}

#[test]
fn fields_v1_round_trip_and_encoding() {
    let d = deployment(1, "nginx");
    let fields: FieldSet = owned(flatten(&d, Shape::for_resource(&res("apps", "Deployment"))));
    let enc = encode_fields(&fields);
    assert_eq!(
        enc,
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {
                        ".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {}, "f:containerPort": {}, "f:protocol": {},
                        }},
                    }}},
                },
            },
        })
    );
    assert_eq!(decode_fields(&enc).unwrap(), fields);
    // "." must come first, as kube-apiserver writes it.
    let text = enc.to_string();
    assert!(text.contains(r#"{".":{},"f:image""#), "{text}");
    assert!(decode_fields(&json!({"x:bad": {}})).is_none());
    assert!(decode_fields(&json!({"f:a": 1})).is_none());
}

#[test]
fn finalizers_are_set_items_and_display_paths() {
    let cm = json!({"metadata": {"name": "c", "finalizers": ["a/b"]}, "data": {"k": "v"}});
    let fields: FieldSet = owned(flatten(&cm, Shape::for_resource(&res("", "ConfigMap"))));
    assert_eq!(
        fields,
        set(&[
            &["f:data", "f:k"],
            &["f:metadata", "f:finalizers", "v:\"a/b\""]
        ])
    );
    assert_eq!(
        display_path(&vec![
            "f:metadata".into(),
            "f:finalizers".into(),
            "v:\"a/b\"".into()
        ]),
        ".metadata.finalizers[=\"a/b\"]"
    );
    assert_eq!(
        display_path(&vec![
            "f:spec".into(),
            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}".into(),
            "f:x".into()
        ]),
        ".spec[containerPort=80,protocol=\"TCP\"].x"
    );
}

#[test]
fn updates_take_changed_fields_and_drop_removed_ones() {
    let r = res("apps", "Deployment");
    let mut created = deployment(1, "nginx");
    record_update_at(&r, None, None, &mut created, "creator", T0);
    let m = managers(&created);
    assert_eq!(m.len(), 1);
    assert_eq!(
        (m[0].manager.as_str(), m[0].operation, m[0].time.as_deref()),
        ("creator", Operation::Update, Some(T0))
    );
    assert_eq!(m[0].api_version, "apps/v1");

    // Another manager changes the image and removes the label.
    let mut edited = created.clone();
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    edited["metadata"].as_object_mut().unwrap().remove("labels");
    record_update_at(&r, None, Some(&created), &mut edited, "editor", T1);
    let m = managers(&edited);
    assert_eq!(m.len(), 2);
    let image: Path = [
        "f:spec",
        "f:template",
        "f:spec",
        "f:containers",
        "k:{\"name\":\"c\"}",
        "f:image",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let label: Path = ["f:metadata", "f:labels", "f:app"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let creator = m.iter().find(|x| x.manager == "creator").unwrap();
    let editor = m.iter().find(|x| x.manager == "editor").unwrap();
    assert!(!creator.fields.contains(&image) && !creator.fields.contains(&label));
    assert_eq!(editor.fields, [image].into_iter().collect());
    assert_eq!(
        creator.time.as_deref(),
        Some(T0),
        "untouched managers keep their time"
    );

    // A no-op write keeps managedFields exactly.
    let mut same = edited.clone();
    record_update_at(
        &r,
        None,
        Some(&edited),
        &mut same,
        "third",
        "2030-01-01T00:00:00Z",
    );
    assert_eq!(same, edited);

    // `[{}]` resets; an empty list keeps the live entries.
    let mut reset = edited.clone();
    reset["metadata"]["managedFields"] = json!([{}]);
    record_update_at(&r, None, Some(&edited), &mut reset, "x", T1);
    assert!(reset["metadata"].get("managedFields").is_none());
    let mut keep = edited.clone();
    keep["metadata"]["managedFields"] = json!([]);
    record_update_at(&r, None, Some(&edited), &mut keep, "x", T1);
    assert_eq!(keep, edited);
}

#[test]
fn apply_owns_removes_and_conflicts() {
    let r = res("apps", "Deployment");
    let first = apply_at(
        &r,
        None,
        None,
        &skeleton(),
        &deployment(1, "nginx"),
        "a",
        false,
        T0,
    )
    .unwrap()
    .object;
    let m = managers(&first);
    assert_eq!(m.len(), 1);
    assert_eq!(
        (m[0].operation, m[0].manager.as_str()),
        (Operation::Apply, "a")
    );

    // Re-applying without the label removes it.
    let mut less = deployment(1, "nginx");
    less["metadata"].as_object_mut().unwrap().remove("labels");
    let second = apply_at(&r, None, Some(&first), &skeleton(), &less, "a", false, T1)
        .unwrap()
        .object;
    assert!(second["metadata"].get("labels").is_none(), "{second}");

    // Another manager applying a different replicas value conflicts.
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 3}});
    let e = apply_at(&r, None, Some(&second), &skeleton(), &other, "b", false, T1)
        .err()
        .unwrap();
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"a\": .spec.replicas"
    );
    assert_eq!(e.causes[0].reason, "FieldManagerConflict");
    assert_eq!(e.causes[0].field, ".spec.replicas");
    assert_eq!(e.causes[0].message, "conflict with \"a\"");

    // The same value is shared, not a conflict.
    let same = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1}});
    let shared = apply_at(&r, None, Some(&second), &skeleton(), &same, "b", false, T1)
        .unwrap()
        .object;
    assert_eq!(managers(&shared).len(), 2);

    // Force takes it over; the first manager then drops it without
    // removing the field.
    let forced = apply_at(&r, None, Some(&second), &skeleton(), &other, "b", true, T1)
        .unwrap()
        .object;
    assert_eq!(forced["spec"]["replicas"], 3);
    let a = managers(&forced)
        .into_iter()
        .find(|m| m.manager == "a")
        .unwrap();
    assert!(
        !a.fields
            .iter()
            .any(|p| p.ends_with(&["f:replicas".to_string()]))
    );
    let mut without = deployment(1, "nginx");
    without["spec"].as_object_mut().unwrap().remove("replicas");
    let after = apply_at(
        &r,
        None,
        Some(&forced),
        &skeleton(),
        &without,
        "a",
        false,
        T1,
    )
    .unwrap()
    .object;
    assert_eq!(after["spec"]["replicas"], 3, "b still owns replicas");
}

#[test]
fn update_managers_conflict_with_their_api_version() {
    let r = res("apps", "Deployment");
    let mut created = deployment(1, "nginx");
    record_update_at(
        &r,
        None,
        None,
        &mut created,
        "kubectl-client-side-apply",
        T0,
    );
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    let e = apply_at(
        &r,
        None,
        Some(&created),
        &skeleton(),
        &other,
        "b",
        false,
        T1,
    )
    .err()
    .unwrap();
    assert_eq!(
        e.message,
        "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using apps/v1:\n- .spec.replicas\n- .spec.template.spec.containers[name=\"c\"].image"
    );
    assert_eq!(e.causes.len(), 2);
}

#[test]
fn apply_drops_containers_it_no_longer_applies() {
    let r = res("apps", "Deployment");
    let mut two = deployment(1, "nginx");
    two["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "side", "image": "busybox"}));
    let first = apply_at(&r, None, None, &skeleton(), &two, "a", false, T0)
        .unwrap()
        .object;
    let second = apply_at(
        &r,
        None,
        Some(&first),
        &skeleton(),
        &deployment(1, "nginx"),
        "a",
        false,
        T1,
    )
    .unwrap()
    .object;
    let names: Vec<&str> = second["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c"]);
}

#[test]
fn maps_owned_whole_stay_while_their_entries_are_applied() {
    // kubectl's client-side → server-side migration hands the applier
    // the client-side set, `".": {}` on labels included; the next
    // apply no longer names the map itself but still its entries.
    let r = res("apps", "Deployment");
    let mut live = apply_at(
        &r,
        None,
        None,
        &skeleton(),
        &deployment(1, "nginx"),
        "kubectl",
        false,
        T0,
    )
    .unwrap()
    .object;
    let mut fields = managers(&live)[0].fields.clone();
    fields.insert(vec!["f:metadata".into(), "f:labels".into()]);
    fields.insert(vec![
        "f:spec".into(),
        "f:template".into(),
        "f:metadata".into(),
        "f:labels".into(),
    ]);
    set_managed(
        &mut live,
        vec![Managed {
            manager: "kubectl".into(),
            operation: Operation::Apply,
            api_version: "apps/v1".into(),
            time: Some(T0.into()),
            subresource: String::new(),
            fields,
        }],
    );
    let again = apply_at(
        &r,
        None,
        Some(&live),
        &skeleton(),
        &deployment(1, "nginx"),
        "kubectl",
        false,
        T1,
    )
    .unwrap()
    .object;
    assert_eq!(again["metadata"]["labels"], json!({"app": "d"}));
    assert_eq!(
        again["spec"]["template"]["metadata"]["labels"],
        json!({"app": "d"})
    );
}

#[test]
fn status_is_not_owned_through_the_main_resource() {
    let r = res("apps", "Deployment");
    let mut d = deployment(1, "nginx");
    d["status"] = json!({"replicas": 5});
    let out = apply_at(&r, None, None, &skeleton(), &d, "a", false, T0)
        .unwrap()
        .object;
    let m = managers(&out);
    assert!(!m[0].fields.iter().any(|p| p[0] == "f:status"));
}

#[test]
fn bad_applied_lists_are_rejected() {
    let r = res("apps", "Deployment");
    let mut dup = deployment(1, "nginx");
    dup["spec"]["template"]["spec"]["containers"] = json!([{"name": "c"}, {"name": "c"}]);
    assert_eq!(
        apply_at(&r, None, None, &skeleton(), &dup, "a", false, T0)
            .err()
            .unwrap()
            .code,
        400
    );
    let mut keyless = deployment(1, "nginx");
    keyless["spec"]["template"]["spec"]["containers"] = json!([{"image": "x"}]);
    assert_eq!(
        apply_at(&r, None, None, &skeleton(), &keyless, "a", false, T0)
            .err()
            .unwrap()
            .code,
        400
    );
}

#[test]
fn manager_names_from_user_agent() {
    let q = Query::parse(None);
    let mut h = HeaderMap::new();
    h.insert(
        http::header::USER_AGENT,
        "kubectl/v1.32.4 (linux/amd64) kubernetes/abc"
            .parse()
            .unwrap(),
    );
    assert_eq!(manager_for(&q, &h).unwrap(), "kubectl");
    let q = Query::parse(Some("fieldManager=mine"));
    assert_eq!(manager_for(&q, &h).unwrap(), "mine");
    let long = format!("fieldManager={}", "x".repeat(200));
    assert_eq!(
        manager_for(&Query::parse(Some(&long)), &h)
            .unwrap_err()
            .code,
        400
    );
    h.insert(http::header::USER_AGENT, "y".repeat(300).parse().unwrap());
    assert_eq!(manager_for(&Query::parse(None), &h).unwrap().len(), 128);
}
