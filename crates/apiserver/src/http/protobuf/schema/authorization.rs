//! Protobuf field tables of authorization.k8s.io/v1
//! (`k8s.io/api/authorization/v1`): the specs of the access reviews (read by
//! `auth::protobuf`).
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{Items, Map, Msg, Str};
use super::{Table, f};

pub(crate) const SELF_SUBJECT_ACCESS_REVIEW_SPEC: Table = &[
    f(1, "resourceAttributes", Msg(RESOURCE_ATTRIBUTES)),
    f(2, "nonResourceAttributes", Msg(NON_RESOURCE_ATTRIBUTES)),
];
pub(crate) const RESOURCE_ATTRIBUTES: Table = &[
    f(1, "namespace", Str),
    f(2, "verb", Str),
    f(3, "group", Str),
    f(4, "version", Str),
    f(5, "resource", Str),
    f(6, "subresource", Str),
    f(7, "name", Str),
    f(8, "fieldSelector", Msg(FIELD_SELECTOR_ATTRIBUTES)),
    f(9, "labelSelector", Msg(LABEL_SELECTOR_ATTRIBUTES)),
];
pub(crate) const FIELD_SELECTOR_ATTRIBUTES: Table = &[
    f(1, "rawSelector", Str),
    f(
        2,
        "requirements",
        Msg(super::meta::FIELD_SELECTOR_REQUIREMENT),
    )
    .list(),
];
pub(crate) const LABEL_SELECTOR_ATTRIBUTES: Table = &[
    f(1, "rawSelector", Str),
    f(
        2,
        "requirements",
        Msg(super::meta::LABEL_SELECTOR_REQUIREMENT),
    )
    .list(),
];
pub(crate) const NON_RESOURCE_ATTRIBUTES: Table = &[f(1, "path", Str), f(2, "verb", Str)];
pub(crate) const SUBJECT_ACCESS_REVIEW_SPEC: Table = &[
    f(1, "resourceAttributes", Msg(RESOURCE_ATTRIBUTES)),
    f(2, "nonResourceAttributes", Msg(NON_RESOURCE_ATTRIBUTES)),
    f(3, "user", Str),
    f(4, "groups", Str).list(),
    f(5, "extra", Map(&Items)),
    f(6, "uid", Str),
];
pub(crate) const SELF_SUBJECT_RULES_REVIEW_SPEC: Table = &[f(1, "namespace", Str)];
