//! Protobuf field tables of rbac.authorization.k8s.io/v1
//! (`k8s.io/api/rbac/v1`): Role, ClusterRole, RoleBinding and
//! ClusterRoleBinding.
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{Msg, Str};
use super::{Table, f};

pub(crate) const ROLE: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "rules", Msg(POLICY_RULE)).list(),
];
pub(crate) const POLICY_RULE: Table = &[
    f(1, "verbs", Str).list(),
    f(2, "apiGroups", Str).list(),
    f(3, "resources", Str).list(),
    f(4, "resourceNames", Str).list(),
    f(5, "nonResourceURLs", Str).list(),
];
pub(crate) const CLUSTER_ROLE: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "rules", Msg(POLICY_RULE)).list(),
    f(3, "aggregationRule", Msg(AGGREGATION_RULE)),
];
pub(crate) const AGGREGATION_RULE: Table =
    &[f(1, "clusterRoleSelectors", Msg(super::meta::LABEL_SELECTOR)).list()];
pub(crate) const ROLE_BINDING: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "subjects", Msg(SUBJECT)).list(),
    f(3, "roleRef", Msg(ROLE_REF)),
];
pub(crate) const SUBJECT: Table = &[
    f(1, "kind", Str).keep(),
    f(2, "apiGroup", Str),
    f(3, "name", Str).keep(),
    f(4, "namespace", Str),
];
pub(crate) const ROLE_REF: Table = &[
    f(1, "apiGroup", Str).keep(),
    f(2, "kind", Str).keep(),
    f(3, "name", Str).keep(),
];
pub(crate) const CLUSTER_ROLE_BINDING: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "subjects", Msg(SUBJECT)).list(),
    f(3, "roleRef", Msg(ROLE_REF)),
];
