//! Behaviour of CRD structural schemas through the public API: admitting a
//! schema, pruning, defaulting and validating custom resources the way
//! kube-apiserver does.

use apimachinery::Cause;
use apimachinery::schema::{ListType, MapType, Schema, Type, validate_structural};
use serde_json::{Value, json};

const CRD_PATH: &str = "spec.versions[0].schema.openAPIV3Schema";

fn compile(schema: Value) -> Schema {
    match Schema::from_json(&schema) {
        Ok(s) => s,
        Err(causes) => panic!("schema did not compile: {causes:#?}"),
    }
}

/// A schema shaped like most CRDs: spec with a few typed fields.
fn widget() -> Schema {
    compile(json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                    "color": {"type": "string", "enum": ["red", "green"], "default": "red"},
                    "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                    "ratio": {"type": "number"},
                    "enabled": {"type": "boolean"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string"},
                                "port": {"type": "integer", "format": "int32"},
                                "protocol": {"type": "string", "default": "TCP"}
                            }
                        }
                    },
                    "tags": {
                        "type": "array",
                        "x-kubernetes-list-type": "set",
                        "items": {"type": "string"}
                    },
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }
            },
            "status": {
                "type": "object",
                "properties": {"phase": {"type": "string"}}
            }
        }
    }))
}

fn fields(causes: &[Cause]) -> Vec<(&str, &str)> {
    causes
        .iter()
        .map(|c| (c.reason.as_str(), c.field.as_str()))
        .collect()
}

// --- compiling and admitting schemas --------------------------------------

#[test]
fn source_is_kept_verbatim() {
    let src = json!({"type": "object", "description": "A widget.", "properties": {"spec": {"type": "object", "description": "Desired state."}}});
    let s = compile(src.clone());
    assert_eq!(s.source(), &src);
    assert_eq!(s.root().description(), Some("A widget."));
    assert_eq!(
        s.root().property("spec").and_then(|n| n.description()),
        Some("Desired state.")
    );
}

#[test]
fn ref_is_rejected_by_both_entry_points() {
    let schema = json!({"type": "object", "properties": {"spec": {"$ref": "#/definitions/Spec"}}});
    let err = Schema::from_json(&schema).unwrap_err();
    assert_eq!(
        fields(&err),
        [("FieldValueForbidden", "properties[spec].$ref")]
    );
    let causes = validate_structural(&schema, CRD_PATH);
    assert!(causes.iter().any(|c| c.field
        == "spec.versions[0].schema.openAPIV3Schema.properties[spec].$ref"
        && c.reason == "FieldValueForbidden"));
}

#[test]
fn bad_keywords_are_reported_with_paths() {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "(unclosed"},
            "b": {"type": "integer", "minimum": "one"},
            "c": {"type": "string", "maxLength": -1},
            "d": {"type": "strin"},
            "e": {"type": "array", "items": [{"type": "string"}]},
            "f": "not a schema",
            "g": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"}
        }
    });
    let err = Schema::from_json(&schema).unwrap_err();
    assert_eq!(
        fields(&err),
        [
            ("FieldValueInvalid", "properties[a].pattern"),
            ("FieldValueTypeInvalid", "properties[b].minimum"),
            ("FieldValueTypeInvalid", "properties[c].maxLength"),
            ("FieldValueNotSupported", "properties[d].type"),
            ("FieldValueForbidden", "properties[e].items"),
            ("FieldValueTypeInvalid", "properties[f]"),
            (
                "FieldValueNotSupported",
                "properties[g].x-kubernetes-list-type"
            ),
        ]
    );
    assert!(
        err[0].message.contains("\"(unclosed\""),
        "{}",
        err[0].message
    );
    assert_eq!(
        err[3].message,
        "Unsupported value: \"strin\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
    );
}

#[test]
fn from_json_is_lenient_about_structural_rules() {
    // Untyped nodes compile (and validate nothing); only admission objects.
    let schema = json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}});
    assert!(Schema::from_json(&schema).is_ok());
    assert_eq!(
        fields(&validate_structural(&schema, CRD_PATH)),
        [(
            "FieldValueRequired",
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type"
        )]
    );
}

#[test]
fn a_typical_schema_is_structural() {
    let causes = validate_structural(widget().source(), CRD_PATH);
    assert!(causes.is_empty(), "{causes:#?}");
}

#[test]
fn types_are_required_except_for_int_or_string_and_preserved_fields() {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"x-kubernetes-int-or-string": true},
            "b": {"x-kubernetes-preserve-unknown-fields": true},
            "c": {"description": "no type"},
            "d": {"type": "array", "items": {"properties": {}}},
            "e": {"type": "object", "additionalProperties": {"minLength": 1}}
        }
    });
    let causes = validate_structural(&schema, "");
    assert_eq!(
        fields(&causes),
        [
            ("FieldValueRequired", "properties[c].type"),
            ("FieldValueRequired", "properties[d].items.type"),
            (
                "FieldValueRequired",
                "properties[e].additionalProperties.type"
            ),
        ]
    );
    assert_eq!(
        causes[0].message,
        "Required value: must not be empty for specified fields"
    );
}

#[test]
fn the_root_must_be_a_plain_object() {
    let causes = validate_structural(&json!({"type": "string", "nullable": true}), "root");
    assert_eq!(
        fields(&causes),
        [
            ("FieldValueInvalid", "root.type"),
            ("FieldValueForbidden", "root.nullable")
        ]
    );
}

#[test]
fn root_metadata_may_only_restrict_name_and_generate_name() {
    let ok = json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 20, "pattern": "^[a-z-]+$"}
    }}}});
    assert!(validate_structural(&ok, "").is_empty());
    let bad = json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "name": {"type": "integer"}
    }}}});
    assert_eq!(
        fields(&validate_structural(&bad, "")),
        [
            (
                "FieldValueForbidden",
                "properties[metadata].properties[labels]"
            ),
            (
                "FieldValueInvalid",
                "properties[metadata].properties[name].type"
            ),
        ]
    );
}

#[test]
fn structural_rules_for_objects_and_arrays() {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "array"},
            "b": {"type": "object", "additionalProperties": false},
            "c": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "string"}},
            "d": {"type": "object", "x-kubernetes-preserve-unknown-fields": false},
            "e": {"type": "string", "x-kubernetes-int-or-string": true},
            "f": {"type": "string", "x-kubernetes-embedded-resource": true},
            "g": {"type": "object", "definitions": {}},
            "h": {"type": "number", "multipleOf": 0}
        }
    });
    assert_eq!(
        fields(&validate_structural(&schema, "")),
        [
            ("FieldValueRequired", "properties[a].items"),
            ("FieldValueForbidden", "properties[b].additionalProperties"),
            ("FieldValueForbidden", "properties[c].additionalProperties"),
            (
                "FieldValueInvalid",
                "properties[d].x-kubernetes-preserve-unknown-fields"
            ),
            ("FieldValueInvalid", "properties[e].type"),
            (
                "FieldValueInvalid",
                "properties[f].x-kubernetes-embedded-resource"
            ),
            ("FieldValueForbidden", "properties[g].definitions"),
            ("FieldValueInvalid", "properties[h].multipleOf"),
        ]
    );
}

#[test]
fn list_and_map_type_rules() {
    let schema = json!({
        "type": "object",
        "properties": {
            "ok": {
                "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "proto"],
                "items": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"}, "proto": {"type": "string", "default": "TCP"}
                }}
            },
            "nokeys": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object"}},
            "badkeys": {
                "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["missing", "opt", "obj", "opt"],
                "items": {"type": "object", "required": ["obj"], "properties": {
                    "opt": {"type": "string"}, "obj": {"type": "object"}
                }}
            },
            "keysonly": {"type": "array", "x-kubernetes-list-map-keys": ["a"], "items": {"type": "string"}},
            "setobj": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object"}},
            "notarray": {"type": "string", "x-kubernetes-list-type": "set"},
            "maptype": {"type": "string", "x-kubernetes-map-type": "atomic"}
        }
    });
    assert_eq!(
        fields(&validate_structural(&schema, "")),
        [
            (
                "FieldValueRequired",
                "properties[nokeys].x-kubernetes-list-map-keys"
            ),
            (
                "FieldValueInvalid",
                "properties[badkeys].x-kubernetes-list-map-keys[0]"
            ),
            (
                "FieldValueRequired",
                "properties[badkeys].x-kubernetes-list-map-keys[1]"
            ),
            (
                "FieldValueInvalid",
                "properties[badkeys].x-kubernetes-list-map-keys[2]"
            ),
            (
                "FieldValueDuplicate",
                "properties[badkeys].x-kubernetes-list-map-keys[3]"
            ),
            (
                "FieldValueForbidden",
                "properties[keysonly].x-kubernetes-list-map-keys"
            ),
            (
                "FieldValueInvalid",
                "properties[setobj].items.x-kubernetes-map-type"
            ),
            (
                "FieldValueInvalid",
                "properties[notarray].x-kubernetes-list-type"
            ),
            (
                "FieldValueInvalid",
                "properties[maptype].x-kubernetes-map-type"
            ),
        ]
    );
}

#[test]
fn defaults_must_validate_under_their_schema() {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer", "default": "three"},
                    "mode": {"type": "string", "enum": ["a", "b"], "default": "c"},
                    "tpl": {
                        "type": "object",
                        "default": {"known": 1, "unknown": 2},
                        "properties": {"known": {"type": "integer"}}
                    },
                    "nested": {
                        "type": "object",
                        "default": {},
                        "required": ["x"],
                        "properties": {"x": {"type": "string", "default": "filled"}}
                    },
                    "nothing": {"type": "string", "default": null},
                    "maybe": {"type": "string", "nullable": true, "default": null},
                    "short": {"type": "string", "maxLength": 2, "default": "long"}
                }
            }
        }
    });
    let causes = validate_structural(&schema, CRD_PATH);
    let p = "spec.versions[0].schema.openAPIV3Schema.properties[spec]";
    assert_eq!(
        fields(&causes),
        [
            (
                "FieldValueTypeInvalid",
                format!("{p}.properties[replicas].default").as_str()
            ),
            (
                "FieldValueNotSupported",
                format!("{p}.properties[mode].default").as_str()
            ),
            (
                "FieldValueInvalid",
                format!("{p}.properties[tpl].default").as_str()
            ),
            (
                "FieldValueInvalid",
                format!("{p}.properties[nothing].default").as_str()
            ),
            (
                "FieldValueTooLong",
                format!("{p}.properties[short].default").as_str()
            ),
        ]
    );
    assert!(
        causes[2].message.contains("unknown"),
        "{}",
        causes[2].message
    );
}

#[test]
fn junctors_may_only_validate_structurally_specified_fields() {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                "anyOf": [
                    {"properties": {"a": {"minLength": 1}}},
                    {"properties": {"c": {"type": "string"}}}
                ],
                "allOf": [{"default": "x", "properties": {"a": {"nullable": true}}}]
            }
        }
    });
    assert_eq!(
        fields(&validate_structural(&schema, "")),
        [
            ("FieldValueForbidden", "properties[spec].allOf[0].default"),
            (
                "FieldValueForbidden",
                "properties[spec].anyOf[1].properties[c]"
            ),
        ]
    );
}

#[test]
fn junctors_may_check_fields_where_unknown_fields_are_kept() {
    let schema = json!({"type": "object", "properties": {
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                 "anyOf": [{"required": ["a"]}, {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
        "map": {"type": "object", "additionalProperties": true,
                "not": {"properties": {"c": {"type": "string"}}, "required": ["c"]}}
    }});
    assert!(validate_structural(&schema, "").is_empty());
    let s = compile(schema);
    assert!(
        s.validate(&json!({"free": {"b": "x"}, "map": {"c": 1}}), "")
            .is_empty()
    );
    assert_eq!(
        fields(&s.validate(&json!({"free": {"b": 1}, "map": {"c": "x"}}), "")),
        [("FieldValueInvalid", "free"), ("FieldValueInvalid", "map")]
    );
}

#[test]
fn kube_rs_style_schemas_are_accepted() {
    // What kube-rs derives: optional fields as nullable, enum variants as
    // oneOf over required hoisted properties, flattened maps as preserved
    // fields, int-or-string quantities, and an optional unit enum with null.
    let schema = json!({
        "description": "Auto-generated derived type for FooSpec via `CustomResource`",
        "type": "object",
        "title": "Foo",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "info": {"type": "string", "nullable": true},
                    "replicas": {"type": "integer", "format": "uint32", "minimum": 0.0, "nullable": true},
                    "source": {
                        "type": "object",
                        "properties": {
                            "git": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
                            "oci": {"type": "object", "properties": {"image": {"type": "string"}}, "required": ["image"]}
                        },
                        "oneOf": [{"required": ["git"]}, {"required": ["oci"]}]
                    },
                    "mode": {"type": "string", "enum": ["Fast", "Slow", null], "nullable": true},
                    "cpu": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "values": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "items": {"type": "array", "nullable": true, "items": {"type": "string"}}
                }
            },
            "status": {"type": "object", "nullable": true, "properties": {"ok": {"type": "boolean"}}}
        }
    });
    assert!(validate_structural(&schema, CRD_PATH).is_empty());
    let s = compile(schema);
    let mut obj = json!({
        "apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "f"},
        "spec": {"name": "x", "info": null, "replicas": 3, "source": {"git": {"url": "https://g"}},
                 "mode": null, "cpu": "500m", "values": {"any": {"thing": [1]}}, "items": null},
        "status": null
    });
    let processed = s.process(&mut obj, "");
    assert_eq!(processed.causes, vec![]);
    assert!(processed.pruned.is_empty());

    obj["spec"]["source"] = json!({"git": {"url": "a"}, "oci": {"image": "b"}});
    obj["spec"]["mode"] = json!("Medium");
    let causes = s.validate(&obj, "");
    assert_eq!(
        fields(&causes),
        [
            ("FieldValueInvalid", "spec.source"),
            ("FieldValueNotSupported", "spec.mode")
        ]
    );
    assert!(
        causes[0].message.contains("matches 2"),
        "{}",
        causes[0].message
    );
}

// --- pruning ---------------------------------------------------------------

#[test]
fn prune_drops_unknown_fields_and_reports_their_paths() {
    let s = widget();
    let mut obj = json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "whatever": {"x": 1}},
        "spec": {
            "size": 3,
            "bogus": true,
            "ports": [{"name": "a", "port": 80, "junk": 1}, {"name": "b", "more": {"x": 1}}],
            "labels": {"app": "web"},
            "extra": {"free": {"form": [1, 2]}}
        },
        "status": {"phase": "Ready", "secret": "x"},
        "top": 1
    });
    let pruned = s.prune(&mut obj);
    assert_eq!(
        pruned,
        [
            "spec.bogus",
            "spec.ports[0].junk",
            "spec.ports[1].more",
            "status.secret",
            "top"
        ]
    );
    assert_eq!(
        obj,
        json!({
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "whatever": {"x": 1}},
            "spec": {
                "size": 3,
                "ports": [{"name": "a", "port": 80}, {"name": "b"}],
                "labels": {"app": "web"},
                "extra": {"free": {"form": [1, 2]}}
            },
            "status": {"phase": "Ready"}
        })
    );
    // Order of the remaining fields is preserved.
    let keys: Vec<&String> = obj["spec"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["size", "ports", "labels", "extra"]);
}

#[test]
fn preserve_unknown_fields_still_prunes_inside_specified_properties() {
    let s = compile(json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"a": {"type": "string"}}
            },
            "list": {
                "type": "array",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                          "properties": {"inner": {"type": "object", "properties": {}}}}
            }
        }
    }));
    let mut obj = json!({
        "anything": {"goes": 1},
        "spec": {"a": "x", "b": "gone"},
        "list": [{"kept": 1, "inner": {"dropped": 2}}]
    });
    let pruned = s.prune(&mut obj);
    assert_eq!(pruned, ["spec.b", "list[0].inner.dropped"]);
    assert_eq!(
        obj,
        json!({"anything": {"goes": 1}, "spec": {"a": "x"}, "list": [{"kept": 1, "inner": {}}]})
    );
}

#[test]
fn prune_descends_into_map_values_and_reports_dotted_keys() {
    let s = compile(json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "additionalProperties": {
                "type": "object", "properties": {"x": {"type": "integer"}}
            }},
            "any": {"type": "object", "additionalProperties": true}
        }
    }));
    let mut obj = json!({"spec": {"k1": {"x": 1, "y": 2}}, "any": {"z": {"deep": 1}}});
    assert_eq!(s.prune(&mut obj), ["spec.k1.y"]);
    assert_eq!(
        obj,
        json!({"spec": {"k1": {"x": 1}}, "any": {"z": {"deep": 1}}})
    );
}

#[test]
fn prune_keeps_the_identity_of_embedded_resources_and_trims_their_metadata() {
    let s = compile(json!({
        "type": "object",
        "properties": {
            "template": {
                "type": "object",
                "x-kubernetes-embedded-resource": true,
                "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}
            },
            "raw": {
                "type": "object",
                "x-kubernetes-embedded-resource": true,
                "x-kubernetes-preserve-unknown-fields": true
            }
        }
    }));
    let mut obj = json!({
        "template": {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}, "madeUp": 1},
            "spec": {"a": "x", "b": "y"},
            "status": {}
        },
        "raw": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "oops": true}, "data": {"k": "v"}}
    });
    let pruned = s.prune(&mut obj);
    assert_eq!(
        pruned,
        [
            "template.metadata.madeUp",
            "template.spec.b",
            "template.status",
            "raw.metadata.oops"
        ]
    );
    assert_eq!(
        obj,
        json!({
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"a": "x"}},
            "raw": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
        })
    );
}

#[test]
fn prune_empties_objects_a_schema_does_not_describe() {
    // An object where the schema says string keeps no fields (validation then
    // reports the type), as in Kubernetes.
    let s = compile(json!({"type": "object", "properties": {
        "name": {"type": "string"},
        "list": {"type": "array", "items": {"type": "string"}}
    }}));
    let mut obj = json!({"name": {"a": 1}, "list": [{"b": 2}, "ok"]});
    assert_eq!(s.prune(&mut obj), ["name.a", "list[0].b"]);
    assert_eq!(obj, json!({"name": {}, "list": [{}, "ok"]}));
}

// --- defaulting ---------------------------------------------------------------

#[test]
fn defaults_fill_missing_fields_at_every_depth() {
    let s = compile(json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "default": {},
                "properties": {
                    "replicas": {"type": "integer", "default": 1},
                    "strategy": {
                        "type": "object",
                        "default": {"type": "Rolling"},
                        "properties": {
                            "type": {"type": "string"},
                            "maxSurge": {"type": "integer", "default": 25}
                        }
                    },
                    "containers": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "pull": {"type": "string", "default": "IfNotPresent"}}
                    }},
                    "limits": {"type": "object", "additionalProperties": {
                        "type": "object", "properties": {"unit": {"type": "string", "default": "Mi"}}
                    }}
                }
            }
        }
    }));
    let mut obj = json!({"spec": {"containers": [{"name": "a"}, {"name": "b", "pull": "Always"}], "limits": {"mem": {}}}});
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj,
        json!({"spec": {
            "containers": [{"name": "a", "pull": "IfNotPresent"}, {"name": "b", "pull": "Always"}],
            "limits": {"mem": {"unit": "Mi"}},
            "replicas": 1,
            "strategy": {"type": "Rolling", "maxSurge": 25}
        }})
    );
    // A missing spec is created from its default, and defaulted inside.
    let mut empty = json!({"apiVersion": "v1", "kind": "X", "metadata": {}});
    s.apply_defaults(&mut empty);
    assert_eq!(empty["spec"]["replicas"], 1);
    assert_eq!(empty["spec"]["strategy"]["maxSurge"], 25);
}

#[test]
fn nulls_in_non_nullable_fields_are_dropped_then_defaulted() {
    let s = compile(json!({
        "type": "object",
        "properties": {
            "a": {"type": "string", "default": "x"},
            "b": {"type": "string"},
            "c": {"type": "string", "nullable": true, "default": "x"},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
            "l": {"type": "array", "items": {"type": "integer", "default": 0}}
        }
    }));
    let mut obj =
        json!({"a": null, "b": null, "c": null, "m": {"k": null, "j": "v"}, "l": [1, null]});
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj,
        json!({"a": "x", "c": null, "m": {"j": "v"}, "l": [1, 0]})
    );
    assert!(s.validate(&obj, "").is_empty());
}

#[test]
fn metadata_at_the_root_is_left_alone() {
    let s = compile(json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "x"}}}
    }}));
    let mut obj = json!({"metadata": {"namespace": "n", "labels": null}});
    s.apply_defaults(&mut obj);
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj, json!({"metadata": {"namespace": "n", "labels": null}}));
}

// --- validation ------------------------------------------------------------

#[test]
fn types_are_checked_with_clear_messages() {
    let s = widget();
    let obj = json!({"spec": {"size": "three", "ratio": 1, "enabled": "yes", "name": 5}});
    let causes = s.validate(&obj, "");
    assert_eq!(
        fields(&causes),
        [
            ("FieldValueTypeInvalid", "spec.size"),
            ("FieldValueTypeInvalid", "spec.enabled"),
            ("FieldValueTypeInvalid", "spec.name"),
        ]
    );
    assert_eq!(
        causes[0].message,
        "Invalid value: \"string\": must be of type integer, got the string \"three\""
    );
    assert_eq!(
        causes[2].message,
        "Invalid value: \"integer\": must be of type string, got the number 5"
    );
}

#[test]
fn a_float_is_not_an_integer_even_when_whole() {
    let s = widget();
    let obj: Value = serde_json::from_str(r#"{"spec": {"size": 1.0}}"#).unwrap();
    let causes = s.validate(&obj, "");
    assert_eq!(fields(&causes), [("FieldValueTypeInvalid", "spec.size")]);
    assert!(
        causes[0].message.contains("got the number 1.0"),
        "{}",
        causes[0].message
    );
    let obj = json!({"spec": {"size": 1.5}});
    assert_eq!(s.validate(&obj, "").len(), 1);
}

#[test]
fn null_is_rejected_unless_nullable() {
    let s = compile(json!({"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "string", "nullable": true},
        "c": {"x-kubernetes-preserve-unknown-fields": true}
    }}));
    let causes = s.validate(&json!({"a": null, "b": null, "c": null}), "");
    assert_eq!(fields(&causes), [("FieldValueTypeInvalid", "a")]);
    assert_eq!(
        causes[0].message,
        "Invalid value: \"null\": must be of type string, got null"
    );
}

#[test]
fn required_fields_and_prefixes() {
    let s = widget();
    let causes = s.validate(&json!({"spec": {}}), "");
    assert_eq!(causes, vec![Cause::required("spec.size")]);
    let causes = s.validate(&json!({"spec": {}}), "items[3]");
    assert_eq!(
        fields(&causes),
        [("FieldValueRequired", "items[3].spec.size")]
    );
}

#[test]
fn enums_list_the_supported_values() {
    let s = widget();
    let causes = s.validate(&json!({"spec": {"size": 1, "color": "blue"}}), "");
    assert_eq!(
        causes,
        vec![Cause::new(
            "FieldValueNotSupported",
            "spec.color",
            "Unsupported value: \"blue\": supported values: \"red\", \"green\""
        )]
    );
    // Numbers in enums compare by value.
    let s = compile(
        json!({"type": "object", "properties": {"n": {"type": "number", "enum": [1, 2.5]}}}),
    );
    assert!(s.validate(&json!({"n": 1.0}), "").is_empty());
    assert_eq!(s.validate(&json!({"n": 2}), "").len(), 1);
}

#[test]
fn numeric_bounds() {
    let s = compile(json!({"type": "object", "properties": {
        "a": {"type": "integer", "minimum": 1, "maximum": 10},
        "b": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 1, "exclusiveMaximum": true},
        "c": {"type": "integer", "multipleOf": 5},
        "d": {"type": "number", "multipleOf": 0.1},
        "e": {"type": "integer", "format": "int32"},
        "f": {"type": "integer", "format": "int64"},
        "g": {"type": "integer", "minimum": -9223372036854775808_i64, "maximum": 18446744073709551615_u64}
    }}));
    let ok = json!({"a": 10, "b": 0.5, "c": 15, "d": 0.3, "e": 2147483647, "f": -9223372036854775808_i64, "g": 18446744073709551615_u64});
    assert_eq!(s.validate(&ok, ""), vec![]);
    let bad = json!({"a": 0, "b": 1, "c": 7, "d": 0.35, "e": 2147483648_i64, "f": 9223372036854775808_u64});
    let causes = s.validate(&bad, "");
    let messages: Vec<(&str, &str)> = causes
        .iter()
        .map(|c| (c.field.as_str(), c.message.as_str()))
        .collect();
    assert_eq!(
        messages,
        [
            ("a", "Invalid value: 0: must be greater than or equal to 1"),
            ("b", "Invalid value: 1: must be less than 1"),
            ("c", "Invalid value: 7: must be a multiple of 5"),
            ("d", "Invalid value: 0.35: must be a multiple of 0.1"),
            (
                "e",
                "Invalid value: 2147483648: must be a 32-bit signed integer (format int32)"
            ),
            (
                "f",
                "Invalid value: 9223372036854775808: must be a 64-bit signed integer (format int64)"
            ),
        ]
    );
    let causes = s.validate(&json!({"a": 11, "b": 0}), "");
    assert_eq!(
        causes[0].message,
        "Invalid value: 11: must be less than or equal to 10"
    );
    assert_eq!(
        causes[1].message,
        "Invalid value: 0: must be greater than 0"
    );
}

#[test]
fn string_lengths_count_characters_and_patterns_match() {
    let s = compile(json!({"type": "object", "properties": {
        "a": {"type": "string", "minLength": 2, "maxLength": 3},
        "b": {"type": "string", "pattern": "^[a-z]+$"}
    }}));
    assert!(s.validate(&json!({"a": "héé", "b": "abc"}), "").is_empty());
    let causes = s.validate(&json!({"a": "toolong", "b": "ABC"}), "spec");
    assert_eq!(
        causes,
        vec![
            Cause::new(
                "FieldValueTooLong",
                "spec.a",
                "Too long: may not be longer than 3 characters"
            ),
            Cause::invalid(
                "spec.b",
                "Invalid value: \"ABC\": must match the regular expression \"^[a-z]+$\""
            ),
        ]
    );
    let causes = s.validate(&json!({"a": "x"}), "");
    assert_eq!(
        causes[0].message,
        "Invalid value: \"x\": must be at least 2 characters long"
    );
}

#[test]
fn formats_are_checked_on_strings() {
    let s = compile(json!({"type": "object", "properties": {
        "when": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "data": {"type": "string", "format": "byte"},
        "id": {"type": "string", "format": "uuid"},
        "wait": {"type": "string", "format": "duration"},
        "host": {"type": "string", "format": "hostname"},
        "v4": {"type": "string", "format": "ipv4"},
        "v6": {"type": "string", "format": "ipv6"},
        "net": {"type": "string", "format": "cidr"},
        "mail": {"type": "string", "format": "email"},
        "odd": {"type": "string", "format": "my-own-format"}
    }}));
    let good = json!({
        "when": "2024-05-01T10:00:00Z", "day": "2024-05-01", "data": "aGk=",
        "id": "123e4567-e89b-12d3-a456-426614174000", "wait": "1h30m", "host": "example.com",
        "v4": "192.168.0.1", "v6": "fe80::1", "net": "10.0.0.0/8", "mail": "a@b.c", "odd": "?"
    });
    assert_eq!(s.validate(&good, ""), vec![]);
    let bad = json!({
        "when": "May 1st", "day": "2024-02-30", "data": "aGk", "id": "nope", "wait": "soon",
        "host": "-x-", "v4": "1.2.3", "v6": "1.2.3.4", "net": "10.0.0.0/99", "mail": "nobody"
    });
    let causes = s.validate(&bad, "");
    assert_eq!(causes.len(), 10, "{causes:#?}");
    assert!(causes.iter().all(|c| c.reason == "FieldValueInvalid"));
    assert_eq!(
        causes[4].message,
        "Invalid value: \"soon\": must be a duration such as 30s, 1h30m or 500ms"
    );
}

#[test]
fn list_types_reject_duplicates() {
    let s = widget();
    let obj = json!({"spec": {
        "size": 1,
        "tags": ["a", "b", "a"],
        "ports": [{"name": "http", "port": 80}, {"name": "https"}, {"name": "http", "port": 8080}]
    }});
    let causes = s.validate(&obj, "");
    assert_eq!(
        causes,
        vec![
            Cause::new(
                "FieldValueDuplicate",
                "spec.tags[2]",
                "Duplicate value: \"a\""
            ),
            Cause::new(
                "FieldValueDuplicate",
                "spec.ports[2]",
                "Duplicate value: {\"name\":\"http\"}"
            ),
        ]
    );
}

#[test]
fn long_lists_are_checked_for_duplicates_too() {
    let s = compile(json!({"type": "object", "properties": {
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}},
        "uniq": {"type": "array", "uniqueItems": true, "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b"],
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
    }}));
    let mut set: Vec<Value> = (0..40).map(|i| json!(i)).collect();
    set.push(json!(17));
    let mut uniq: Vec<Value> = (0..40).map(|i| json!({"i": i, "k": [i]})).collect();
    uniq.push(json!({"k": [3], "i": 3}));
    let mut map: Vec<Value> = (0..40).map(|i| json!({"a": i, "b": "x"})).collect();
    map.push(json!({"a": 5, "b": "y"}));
    map.push(json!({"b": "x", "a": 5, "c": "other"}));
    map.push(json!({"a": 5}));
    map.push(json!({"a": 5}));
    let causes = s.validate(&json!({"set": set, "uniq": uniq, "map": map}), "");
    assert_eq!(
        fields(&causes),
        [
            ("FieldValueDuplicate", "set[40]"),
            ("FieldValueDuplicate", "uniq[40]"),
            ("FieldValueDuplicate", "map[41]"),
            ("FieldValueDuplicate", "map[43]"),
        ]
    );
}

#[test]
fn sizes_of_lists_and_maps() {
    let s = compile(json!({"type": "object", "properties": {
        "l": {"type": "array", "minItems": 2, "maxItems": 3, "items": {"type": "integer"}},
        "m": {"type": "object", "minProperties": 1, "maxProperties": 2, "additionalProperties": {"type": "string"}}
    }}));
    let causes = s.validate(
        &json!({"l": [1, 2, 3, 4], "m": {"a": "1", "b": "2", "c": "3"}}),
        "",
    );
    assert_eq!(
        causes,
        vec![
            Cause::new(
                "FieldValueTooMany",
                "l",
                "Too many: 4: must have at most 3 items"
            ),
            Cause::new(
                "FieldValueTooMany",
                "m",
                "Too many: 3: must have at most 2 properties"
            ),
        ]
    );
    let causes = s.validate(&json!({"l": [1], "m": {}}), "");
    assert_eq!(
        fields(&causes),
        [("FieldValueInvalid", "l"), ("FieldValueInvalid", "m")]
    );
}

#[test]
fn map_values_and_list_items_have_kubernetes_paths() {
    let s = compile(
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
            "template": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "containers": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"}, "image": {"type": "string"}
                }}}
            }}}}
        }}}}),
    );
    let obj = json!({"spec": {
        "labels": {"foo": 1, "bar": "long"},
        "template": {"spec": {"containers": [{"name": "a"}, {"image": "x"}, {"name": 3}]}}
    }});
    assert_eq!(
        fields(&s.validate(&obj, "")),
        [
            ("FieldValueTypeInvalid", "spec.labels[foo]"),
            ("FieldValueTooLong", "spec.labels[bar]"),
            (
                "FieldValueRequired",
                "spec.template.spec.containers[1].name"
            ),
            (
                "FieldValueTypeInvalid",
                "spec.template.spec.containers[2].name"
            ),
        ]
    );
}

#[test]
fn int_or_string_accepts_both_and_nothing_else() {
    let s = compile(json!({"type": "object", "properties": {
        "port": {"x-kubernetes-int-or-string": true, "maximum": 100, "pattern": "^[a-z]+$"}
    }}));
    assert!(s.validate(&json!({"port": 80}), "").is_empty());
    assert!(s.validate(&json!({"port": "http"}), "").is_empty());
    assert_eq!(s.validate(&json!({"port": 101}), "").len(), 1);
    assert_eq!(s.validate(&json!({"port": "HTTP"}), "").len(), 1);
    let causes = s.validate(&json!({"port": true}), "");
    assert_eq!(
        causes[0].message,
        "Invalid value: \"boolean\": must be of type integer or string, got the boolean true"
    );
    assert_eq!(s.validate(&json!({"port": 1.5}), "").len(), 1);
    assert_eq!(s.validate(&json!({"port": null}), "").len(), 1);
}

#[test]
fn embedded_resources_must_name_their_kind() {
    let s = compile(json!({"type": "object", "properties": {"t": {
        "type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true
    }}}));
    let ok = json!({"t": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "b"}}}});
    assert!(s.validate(&ok, "").is_empty());
    let bad = json!({"t": {"apiVersion": "a/b/c", "metadata": {"name": 1, "labels": {"a": 2}}}});
    assert_eq!(
        fields(&s.validate(&bad, "")),
        [
            ("FieldValueInvalid", "t.apiVersion"),
            ("FieldValueRequired", "t.kind"),
            ("FieldValueTypeInvalid", "t.metadata.name"),
            ("FieldValueTypeInvalid", "t.metadata.labels[a]"),
        ]
    );
}

#[test]
fn junctors_validate() {
    let s = compile(json!({"type": "object", "properties": {
        "all": {"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 3}]},
        "any": {"type": "string", "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}]},
        "one": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        "not": {"type": "string", "not": {"enum": ["forbidden"]}}
    }}));
    assert!(
        s.validate(
            &json!({"all": "ab", "any": "::1", "one": {"b": "x"}, "not": "fine"}),
            ""
        )
        .is_empty()
    );
    let causes = s.validate(
        &json!({"all": "abcd", "any": "host", "one": {}, "not": "forbidden"}),
        "",
    );
    assert_eq!(
        fields(&causes),
        [
            ("FieldValueTooLong", "all"),
            ("FieldValueInvalid", "any"),
            ("FieldValueInvalid", "one"),
            ("FieldValueInvalid", "not"),
        ]
    );
    assert!(
        causes[1].message.starts_with("Invalid value: \"host\": must match at least one of the anyOf schemas (alternative 1: any: Invalid value: \"host\": must be an IPv4 address; alternative 2:"),
        "{}",
        causes[1].message
    );
    assert!(
        causes[2].message.contains("matches none (alternative 1: one.a: Required value; alternative 2: one.b: Required value)"),
        "{}",
        causes[2].message
    );
}

#[test]
fn process_prunes_then_defaults_then_validates() {
    let s = widget();
    let mut obj = json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 20, "unknown": 1, "color": null, "ports": [{"name": "a"}]}
    });
    let p = s.process(&mut obj, "");
    assert_eq!(p.pruned, ["spec.unknown"]);
    assert_eq!(fields(&p.causes), [("FieldValueInvalid", "spec.size")]);
    assert_eq!(obj["spec"]["color"], "red");
    assert_eq!(obj["spec"]["ports"][0]["protocol"], "TCP");
}

#[test]
fn schema_node_view_exposes_list_and_map_semantics() {
    let s = compile(json!({"type": "object", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {"name": {"type": "string", "default": "x"}}}},
        "sel": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}}
    }}));
    let root = s.root();
    assert_eq!(root.ty(), Some(Type::Object));
    assert_eq!(root.property_names().collect::<Vec<_>>(), ["ports", "sel"]);
    let ports = root.property("ports").unwrap();
    assert_eq!(ports.list_type(), Some(ListType::Map));
    assert_eq!(ports.list_map_keys(), ["name"]);
    let name = ports.items().and_then(|i| i.property("name")).unwrap();
    assert_eq!(name.default_value(), Some(&json!("x")));
    let sel = root.property("sel").unwrap();
    assert_eq!(sel.map_type(), Some(MapType::Atomic));
    assert_eq!(
        sel.additional_properties().and_then(|a| a.ty()),
        Some(Type::String)
    );
    assert!(root.property("missing").is_none());
}

#[test]
fn many_properties_are_found_through_the_index() {
    let mut props = serde_json::Map::new();
    for i in 0..50 {
        props.insert(format!("f{i}"), json!({"type": "integer", "maximum": i}));
    }
    let s = compile(json!({"type": "object", "properties": props}));
    let mut obj = json!({"f3": 3, "f49": 50, "zzz": 1});
    assert_eq!(s.prune(&mut obj), ["zzz"]);
    assert_eq!(
        fields(&s.validate(&obj, "")),
        [("FieldValueInvalid", "f49")]
    );
}

// --- robustness ------------------------------------------------------------

/// A tiny deterministic generator, so the test needs no extra crates.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() as usize) % items.len()]
    }
}

fn random_value(r: &mut Lcg, depth: u32) -> Value {
    let scalars = [
        json!(null),
        json!(true),
        json!(0),
        json!(-1),
        json!(1.5),
        json!(u64::MAX),
        json!(""),
        json!("x"),
        json!("2024-01-01"),
        json!("é€"),
        json!("[("),
    ];
    if depth == 0 || r.next().is_multiple_of(3) {
        return r.pick(&scalars).clone();
    }
    if r.next().is_multiple_of(2) {
        Value::Array(
            (0..r.next() % 4)
                .map(|_| random_value(r, depth - 1))
                .collect(),
        )
    } else {
        let keys = [
            "a",
            "b",
            "type",
            "items",
            "properties",
            "x-kubernetes-list-type",
        ];
        let mut m = serde_json::Map::new();
        for _ in 0..r.next() % 4 {
            m.insert(r.pick(&keys).to_string(), random_value(r, depth - 1));
        }
        Value::Object(m)
    }
}

fn random_schema(r: &mut Lcg, depth: u32) -> Value {
    let keywords: [(&str, Vec<Value>); 24] = [
        (
            "type",
            vec![
                json!("object"),
                json!("array"),
                json!("string"),
                json!("integer"),
                json!("number"),
                json!("boolean"),
                json!(7),
            ],
        ),
        ("nullable", vec![json!(true), json!(false), json!("yes")]),
        ("minimum", vec![json!(0), json!(1.5), json!("x")]),
        ("maximum", vec![json!(10), json!(-1)]),
        ("exclusiveMinimum", vec![json!(true), json!(3)]),
        (
            "multipleOf",
            vec![json!(0), json!(2), json!(0.5), json!(-1)],
        ),
        ("minLength", vec![json!(1), json!(-1)]),
        ("maxLength", vec![json!(2)]),
        ("minItems", vec![json!(1)]),
        ("maxProperties", vec![json!(1)]),
        (
            "pattern",
            vec![json!("^a"), json!("("), json!("[[:alpha:]]"), json!("\\")],
        ),
        (
            "format",
            vec![
                json!("date-time"),
                json!("int32"),
                json!("byte"),
                json!("duration"),
            ],
        ),
        ("enum", vec![json!([]), json!([1, "a", null]), json!("no")]),
        ("required", vec![json!(["a"]), json!([1])]),
        ("default", vec![json!(1), json!({"a": null}), json!(null)]),
        ("uniqueItems", vec![json!(true)]),
        (
            "x-kubernetes-preserve-unknown-fields",
            vec![json!(true), json!(false)],
        ),
        ("x-kubernetes-int-or-string", vec![json!(true)]),
        ("x-kubernetes-embedded-resource", vec![json!(true)]),
        (
            "x-kubernetes-list-type",
            vec![json!("set"), json!("map"), json!("atomic"), json!("x")],
        ),
        (
            "x-kubernetes-list-map-keys",
            vec![json!(["a"]), json!(["a", "a"]), json!("a")],
        ),
        ("x-kubernetes-map-type", vec![json!("atomic"), json!(1)]),
        (
            "additionalProperties",
            vec![json!(true), json!(false), json!(3)],
        ),
        ("$ref", vec![json!("#/x")]),
    ];
    let mut m = serde_json::Map::new();
    for _ in 0..r.next() % 5 {
        let (k, vals) = r.pick(&keywords);
        m.insert(k.to_string(), r.pick(vals).clone());
    }
    if depth > 0 {
        match r.next() % 6 {
            0 => {
                let mut props = serde_json::Map::new();
                for k in ["a", "b"] {
                    if r.next().is_multiple_of(2) {
                        props.insert(k.to_string(), random_schema(r, depth - 1));
                    }
                }
                m.insert("properties".into(), Value::Object(props));
            }
            1 => {
                m.insert("items".into(), random_schema(r, depth - 1));
            }
            2 => {
                m.insert("additionalProperties".into(), random_schema(r, depth - 1));
            }
            3 => {
                let alts = (0..r.next() % 3)
                    .map(|_| random_schema(r, depth - 1))
                    .collect();
                let kw = *r.pick(&["allOf", "anyOf", "oneOf"]);
                m.insert(kw.into(), Value::Array(alts));
            }
            4 => {
                m.insert("not".into(), random_schema(r, depth - 1));
            }
            _ => {}
        }
    }
    if r.next().is_multiple_of(10) {
        return random_value(r, 2);
    }
    Value::Object(m)
}

#[test]
fn arbitrary_schemas_and_objects_never_panic() {
    let mut r = Lcg(42);
    let mut compiled = 0;
    for _ in 0..3000 {
        let schema = random_schema(&mut r, 4);
        let _ = validate_structural(&schema, CRD_PATH);
        let Ok(s) = Schema::from_json(&schema) else {
            continue;
        };
        compiled += 1;
        for _ in 0..5 {
            let mut obj = random_value(&mut r, 4);
            let _ = s.validate(&obj, "");
            let _ = s.process(&mut obj, "spec");
        }
    }
    assert!(compiled > 300, "only {compiled} random schemas compiled");
}

#[test]
fn deeply_nested_schemas_are_refused_not_overflowed() {
    let mut schema = json!({"type": "string"});
    for _ in 0..500 {
        schema = json!({"type": "object", "properties": {"a": schema}});
    }
    let err = Schema::from_json(&schema).unwrap_err();
    assert!(
        err[0].message.contains("nested deeper"),
        "{}",
        err[0].message
    );
    assert!(!validate_structural(&schema, "").is_empty());
}

#[test]
#[ignore = "timing; run with --release -- --ignored"]
fn validating_a_typical_object_is_fast() {
    let s = widget();
    let mut obj = json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default", "labels": {"app": "web", "tier": "front"}},
        "spec": {
            "size": 3, "color": "green", "name": "widget", "ratio": 0.5, "enabled": true,
            "labels": (0..50).map(|i| (format!("key{i}"), json!(format!("value-{i}")))).collect::<serde_json::Map<_, _>>(),
            "ports": (0..10).map(|i| json!({"name": format!("p{i}"), "port": 8000 + i, "protocol": "TCP"})).collect::<Vec<_>>(),
            "tags": (0..20).map(|i| json!(format!("tag{i}"))).collect::<Vec<_>>(),
            "extra": {"notes": "x".repeat(300)}
        },
        "status": {"phase": "Ready"}
    });
    let size = obj.to_string().len();
    assert!((1500..4096).contains(&size), "object is {size} bytes");
    let runs = 10_000;
    let start = std::time::Instant::now();
    for _ in 0..runs {
        let p = s.process(&mut obj, "");
        assert!(p.causes.is_empty());
    }
    let per = start.elapsed() / runs;
    eprintln!("process of a {size}-byte object: {per:?}");
    assert!(per < std::time::Duration::from_micros(100), "{per:?}");
}
