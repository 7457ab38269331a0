//! The operations of each served resource as kube-apiserver publishes them
//! (list, create, deletecollection, read, replace, patch, delete, the
//! status/scale/eviction subresources and the watch paths), rendered as
//! OpenAPI 3.0 and Swagger 2.0 path items. Every operation carries
//! `x-kubernetes-action` and `x-kubernetes-group-version-kind`, and every
//! PATCH lists `fieldValidation`: that is what kubectl checks before it
//! leaves field validation to the server.

use serde_json::{Map, Value, json};

use super::schemas::{META, V2_REF, V3_REF, definition_name, gvk, list_definition_name};
use crate::storage::registry::Resource;

#[derive(Clone, Copy)]
struct Param {
    name: &'static str,
    location: &'static str,
    ty: &'static str,
    description: &'static str,
}

const fn q(name: &'static str, ty: &'static str, description: &'static str) -> Param {
    Param {
        name,
        location: "query",
        ty,
        description,
    }
}

const PRETTY: Param = q(
    "pretty",
    "string",
    "If 'true', the output is pretty printed.",
);
const DRY_RUN: Param = q(
    "dryRun",
    "string",
    "When present, indicates that modifications should not be persisted. The only valid value is All.",
);
const FIELD_MANAGER: Param = q(
    "fieldManager",
    "string",
    "A name associated with the actor or entity that is making these changes.",
);
const FIELD_VALIDATION: Param = q(
    "fieldValidation",
    "string",
    "How the server handles unknown or duplicate fields in the request: Ignore, Warn (the default) or Strict.",
);
const FORCE: Param = q(
    "force",
    "boolean",
    "Force is going to \"force\" Apply requests: the request re-acquires conflicting fields owned by other managers.",
);
const LIST_PARAMS: &[Param] = &[
    q(
        "allowWatchBookmarks",
        "boolean",
        "Requests watch events of type BOOKMARK.",
    ),
    q(
        "continue",
        "string",
        "The continue token of a previous paginated list.",
    ),
    q(
        "fieldSelector",
        "string",
        "A selector restricting the returned objects by their fields.",
    ),
    q(
        "labelSelector",
        "string",
        "A selector restricting the returned objects by their labels.",
    ),
    q(
        "limit",
        "integer",
        "The maximum number of responses to return for a list call.",
    ),
    q(
        "resourceVersion",
        "string",
        "Constrains which resource versions the request may be served from.",
    ),
    q(
        "resourceVersionMatch",
        "string",
        "How resourceVersion applies to list calls: Exact or NotOlderThan.",
    ),
    q(
        "sendInitialEvents",
        "boolean",
        "With watch=true, starts the watch stream with synthetic events of the current state.",
    ),
    q(
        "timeoutSeconds",
        "integer",
        "Timeout for the list/watch call.",
    ),
    q(
        "watch",
        "boolean",
        "Watch for changes to the described resources and return them as a stream of events.",
    ),
];
const DELETE_PARAMS: &[Param] = &[
    DRY_RUN,
    q(
        "gracePeriodSeconds",
        "integer",
        "The duration in seconds before the object should be deleted.",
    ),
    q(
        "orphanDependents",
        "boolean",
        "Deprecated: use propagationPolicy.",
    ),
    q(
        "propagationPolicy",
        "string",
        "Whether and how garbage collection is performed: Orphan, Background or Foreground.",
    ),
];

enum Body {
    Object(String),
    Patch { strategic: bool },
    Delete,
}

struct Op {
    method: &'static str,
    id: String,
    action: &'static str,
    gvk: Value,
    description: String,
    params: Vec<Param>,
    body: Option<Body>,
    /// Definition name of the response, and its success codes.
    response: String,
    codes: &'static [&'static str],
}

pub(super) struct PathItem {
    pub(super) path: String,
    /// Path parameters (`name`, `namespace`) in order.
    path_params: Vec<&'static str>,
    ops: Vec<Op>,
}

/// `apps` → `Apps`, `coordination.k8s.io` → `Coordination`,
/// `example.com` → `ExampleCom`: kube's operationId group prefix.
fn group_prefix(res: &Resource) -> String {
    let g = if res.group.is_empty() {
        "core"
    } else if res.builtin {
        res.group.trim_end_matches(".k8s.io")
    } else {
        &res.group
    };
    let mut out: String = g
        .split(['.', '-'])
        .map(|seg| {
            let mut c = seg.chars();
            match c.next() {
                Some(f) => f.to_uppercase().chain(c).collect::<String>(),
                None => String::new(),
            }
        })
        .collect();
    let mut v = res.version.chars();
    if let Some(f) = v.next() {
        out.extend(f.to_uppercase());
        out.extend(v);
    }
    out
}

fn tag(res: &Resource) -> String {
    let g = if res.group.is_empty() {
        "core".to_string()
    } else {
        res.group
            .trim_end_matches(".k8s.io")
            .replace(['.', '-'], "_")
    };
    format!("{g}_{}", res.version)
}

pub(super) fn operations(res: &Resource) -> Vec<PathItem> {
    let prefix = if res.group.is_empty() {
        format!("/api/{}", res.version)
    } else {
        format!("/apis/{}/{}", res.group, res.version)
    };
    let kind_def = definition_name(res);
    let list_def = list_definition_name(res);
    let status_def = format!("{META}Status");
    let watch_def = format!("{META}WatchEvent");
    let my_gvk = gvk(&res.group, &res.version, &res.kind);
    let gp = group_prefix(res);
    let ns_word = if res.namespaced { "Namespaced" } else { "" };
    let ns_path = if res.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let ns_params: Vec<&'static str> = if res.namespaced {
        vec!["namespace"]
    } else {
        Vec::new()
    };
    let with_name = |mut v: Vec<&'static str>| {
        v.insert(0, "name");
        v
    };
    let kind = &res.kind;
    let strategic = res.builtin;
    let write_params = vec![DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION];
    let patch_params = vec![DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE];
    let op = |method, verb: &str, suffix: &str, action, description: String| Op {
        method,
        id: format!("{verb}{gp}{ns_word}{kind}{suffix}"),
        action,
        gvk: my_gvk.clone(),
        description,
        params: Vec::new(),
        body: None,
        response: kind_def.clone(),
        codes: &["200"],
    };
    let collection = format!("{prefix}{ns_path}/{}", res.plural);
    let item = format!("{collection}/{{name}}");
    let mut out = vec![
        PathItem {
            path: collection.clone(),
            path_params: ns_params.clone(),
            ops: vec![
                Op {
                    params: LIST_PARAMS.to_vec(),
                    response: list_def.clone(),
                    ..op(
                        "get",
                        "list",
                        "",
                        "list",
                        format!("list or watch objects of kind {kind}"),
                    )
                },
                Op {
                    params: write_params.clone(),
                    body: Some(Body::Object(kind_def.clone())),
                    codes: &["200", "201", "202"],
                    ..op("post", "create", "", "post", format!("create a {kind}"))
                },
                Op {
                    id: format!("delete{gp}Collection{ns_word}{kind}"),
                    params: [LIST_PARAMS, DELETE_PARAMS].concat(),
                    body: Some(Body::Delete),
                    response: status_def.clone(),
                    ..op(
                        "delete",
                        "",
                        "",
                        "deletecollection",
                        format!("delete collection of {kind}"),
                    )
                },
            ],
        },
        PathItem {
            path: item.clone(),
            path_params: with_name(ns_params.clone()),
            ops: vec![
                op(
                    "get",
                    "read",
                    "",
                    "get",
                    format!("read the specified {kind}"),
                ),
                Op {
                    params: write_params.clone(),
                    body: Some(Body::Object(kind_def.clone())),
                    codes: &["200", "201"],
                    ..op(
                        "put",
                        "replace",
                        "",
                        "put",
                        format!("replace the specified {kind}"),
                    )
                },
                Op {
                    params: patch_params.clone(),
                    body: Some(Body::Patch { strategic }),
                    codes: &["200", "201"],
                    ..op(
                        "patch",
                        "patch",
                        "",
                        "patch",
                        format!("partially update the specified {kind}"),
                    )
                },
                Op {
                    params: DELETE_PARAMS.to_vec(),
                    body: Some(Body::Delete),
                    response: status_def.clone(),
                    codes: &["200", "202"],
                    ..op("delete", "delete", "", "delete", format!("delete a {kind}"))
                },
            ],
        },
    ];
    // Only the verbs the resource serves (namespaces: no deletecollection).
    if !res.allows("deletecollection") {
        out[0].ops.retain(|o| o.action != "deletecollection");
    }
    if res.status_subresource {
        out.push(PathItem {
            path: format!("{item}/status"),
            path_params: with_name(ns_params.clone()),
            ops: vec![
                op(
                    "get",
                    "read",
                    "Status",
                    "get",
                    format!("read status of the specified {kind}"),
                ),
                Op {
                    params: write_params.clone(),
                    body: Some(Body::Object(kind_def.clone())),
                    codes: &["200", "201"],
                    ..op(
                        "put",
                        "replace",
                        "Status",
                        "put",
                        format!("replace status of the specified {kind}"),
                    )
                },
                Op {
                    params: patch_params.clone(),
                    body: Some(Body::Patch { strategic }),
                    codes: &["200", "201"],
                    ..op(
                        "patch",
                        "patch",
                        "Status",
                        "patch",
                        format!("partially update status of the specified {kind}"),
                    )
                },
            ],
        });
    }
    if res.scale.is_some() {
        let scale_def = "io.k8s.api.autoscaling.v1.Scale".to_string();
        let scale_gvk = gvk("autoscaling", "v1", "Scale");
        let scale_op = |o: Op| Op {
            gvk: scale_gvk.clone(),
            response: scale_def.clone(),
            ..o
        };
        out.push(PathItem {
            path: format!("{item}/scale"),
            path_params: with_name(ns_params.clone()),
            ops: vec![
                scale_op(op(
                    "get",
                    "read",
                    "Scale",
                    "get",
                    format!("read scale of the specified {kind}"),
                )),
                scale_op(Op {
                    params: write_params.clone(),
                    body: Some(Body::Object(scale_def.clone())),
                    codes: &["200", "201"],
                    ..op(
                        "put",
                        "replace",
                        "Scale",
                        "put",
                        format!("replace scale of the specified {kind}"),
                    )
                }),
                scale_op(Op {
                    params: patch_params.clone(),
                    body: Some(Body::Patch { strategic }),
                    codes: &["200", "201"],
                    ..op(
                        "patch",
                        "patch",
                        "Scale",
                        "patch",
                        format!("partially update scale of the specified {kind}"),
                    )
                }),
            ],
        });
    }
    if res.eviction {
        let eviction_def = "io.k8s.api.policy.v1.Eviction".to_string();
        out.push(PathItem {
            path: format!("{item}/eviction"),
            path_params: with_name(ns_params.clone()),
            ops: vec![Op {
                gvk: gvk("policy", "v1", "Eviction"),
                params: vec![DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION],
                body: Some(Body::Object(eviction_def.clone())),
                response: eviction_def,
                codes: &["200", "201", "202"],
                ..op(
                    "post",
                    "create",
                    "Eviction",
                    "post",
                    format!("create eviction of a {kind}"),
                )
            }],
        });
    }
    let watch_op = |id: String, action, description: String| Op {
        method: "get",
        id,
        action,
        gvk: my_gvk.clone(),
        description,
        params: LIST_PARAMS.to_vec(),
        body: None,
        response: watch_def.clone(),
        codes: &["200"],
    };
    out.push(PathItem {
        path: format!("{prefix}/watch{ns_path}/{}", res.plural),
        path_params: ns_params.clone(),
        ops: vec![watch_op(
            format!("watch{gp}{ns_word}{kind}List"),
            "watchlist",
            format!("watch individual changes to a list of {kind}"),
        )],
    });
    out.push(PathItem {
        path: format!("{prefix}/watch{ns_path}/{}/{{name}}", res.plural),
        path_params: with_name(ns_params.clone()),
        ops: vec![watch_op(
            format!("watch{gp}{ns_word}{kind}"),
            "watch",
            format!("watch changes to an object of kind {kind}"),
        )],
    });
    if res.namespaced {
        out.push(PathItem {
            path: format!("{prefix}/{}", res.plural),
            path_params: Vec::new(),
            ops: vec![Op {
                params: LIST_PARAMS.to_vec(),
                response: list_def.clone(),
                id: format!("list{gp}{kind}ForAllNamespaces"),
                ..op(
                    "get",
                    "",
                    "",
                    "list",
                    format!("list or watch objects of kind {kind}"),
                )
            }],
        });
        out.push(PathItem {
            path: format!("{prefix}/watch/{}", res.plural),
            path_params: Vec::new(),
            ops: vec![watch_op(
                format!("watch{gp}{kind}ListForAllNamespaces"),
                "watchlist",
                format!("watch individual changes to a list of {kind}"),
            )],
        });
    }
    out
}

fn path_param_description(name: &str) -> &'static str {
    match name {
        "namespace" => "object name and auth scope, such as for teams and projects",
        _ => "name of the object",
    }
}

const PATCH_TYPES: &[&str] = &[
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
];

fn patch_types(strategic: bool) -> Vec<&'static str> {
    let mut v = PATCH_TYPES.to_vec();
    if strategic {
        v.push("application/strategic-merge-patch+json");
    }
    v
}

fn v3_param(p: &Param) -> Value {
    json!({"name": p.name, "in": p.location, "description": p.description,
           "schema": {"type": p.ty, "uniqueItems": true}})
}

fn v3_path_param(name: &str) -> Value {
    json!({"name": name, "in": "path", "description": path_param_description(name),
           "required": true, "schema": {"type": "string", "uniqueItems": true}})
}

fn v3_ref(def: &str) -> Value {
    json!({"$ref": format!("{V3_REF}{def}")})
}

fn v3_operation(res: &Resource, op: &Op) -> Value {
    let mut o = json!({
        "tags": [tag(res)],
        "description": op.description,
        "operationId": op.id,
        "responses": {},
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": op.gvk,
    });
    if !op.params.is_empty() {
        o["parameters"] = Value::Array(op.params.iter().map(v3_param).collect());
    }
    match &op.body {
        Some(Body::Object(def)) => {
            o["requestBody"] =
                json!({"content": {"*/*": {"schema": v3_ref(def)}}, "required": true});
        }
        Some(Body::Patch { strategic }) => {
            let content: Map<String, Value> = patch_types(*strategic)
                .into_iter()
                .map(|t| {
                    (
                        t.to_string(),
                        json!({"schema": v3_ref(&format!("{META}Patch"))}),
                    )
                })
                .collect();
            o["requestBody"] = json!({"content": content, "required": true});
        }
        Some(Body::Delete) => {
            o["requestBody"] =
                json!({"content": {"*/*": {"schema": v3_ref(&format!("{META}DeleteOptions"))}}});
        }
        None => {}
    }
    let mut responses = Map::new();
    for code in op.codes {
        let desc = match *code {
            "201" => "Created",
            "202" => "Accepted",
            _ => "OK",
        };
        responses.insert(
            code.to_string(),
            json!({"description": desc, "content": {
                "application/json": {"schema": v3_ref(&op.response)},
                "application/yaml": {"schema": v3_ref(&op.response)},
            }}),
        );
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    o["responses"] = Value::Object(responses);
    o
}

/// One path of an OpenAPI 3.0 document: its operations and the parameters
/// they share.
pub(super) fn v3_path_item(res: &Resource, item: &PathItem) -> Value {
    let mut p = Map::new();
    for op in &item.ops {
        p.insert(op.method.to_string(), v3_operation(res, op));
    }
    let mut params: Vec<Value> = item.path_params.iter().map(|n| v3_path_param(n)).collect();
    params.push(v3_param(&PRETTY));
    p.insert("parameters".into(), Value::Array(params));
    Value::Object(p)
}

fn v2_param(p: &Param) -> Value {
    json!({"uniqueItems": true, "type": p.ty, "description": p.description,
           "name": p.name, "in": p.location})
}

fn v2_ref(def: &str) -> Value {
    json!({"$ref": format!("{V2_REF}{def}")})
}

/// One path of the Swagger 2.0 document.
pub(super) fn v2_path_item(res: &Resource, item: &PathItem) -> Value {
    let mut p = Map::new();
    for op in &item.ops {
        let mut params: Vec<Value> = Vec::new();
        let consumes: Vec<&str> = match &op.body {
            Some(Body::Object(def)) => {
                params.push(
                    json!({"name": "body", "in": "body", "required": true, "schema": v2_ref(def)}),
                );
                vec!["*/*"]
            }
            Some(Body::Patch { strategic }) => {
                params.push(json!({"name": "body", "in": "body", "required": true, "schema": v2_ref(&format!("{META}Patch"))}));
                patch_types(*strategic)
            }
            Some(Body::Delete) => {
                params.push(json!({"name": "body", "in": "body", "schema": v2_ref(&format!("{META}DeleteOptions"))}));
                vec!["*/*"]
            }
            None => vec!["*/*"],
        };
        params.extend(op.params.iter().map(v2_param));
        let mut responses = Map::new();
        for code in op.codes {
            let desc = match *code {
                "201" => "Created",
                "202" => "Accepted",
                _ => "OK",
            };
            responses.insert(
                code.to_string(),
                json!({"description": desc, "schema": v2_ref(&op.response)}),
            );
        }
        responses.insert("401".into(), json!({"description": "Unauthorized"}));
        p.insert(
            op.method.to_string(),
            json!({
                "description": op.description,
                "consumes": consumes,
                "produces": ["application/json", "application/yaml"],
                "schemes": ["https"],
                "tags": [tag(res)],
                "operationId": op.id,
                "parameters": params,
                "responses": responses,
                "x-kubernetes-action": op.action,
                "x-kubernetes-group-version-kind": op.gvk,
            }),
        );
    }
    let mut params: Vec<Value> = item
        .path_params
        .iter()
        .map(|n| {
            json!({"uniqueItems": true, "type": "string", "description": path_param_description(n),
                   "name": n, "in": "path", "required": true})
        })
        .collect();
    params.push(v2_param(&PRETTY));
    p.insert("parameters".into(), Value::Array(params));
    Value::Object(p)
}
