//! Protobuf field tables of meta.k8s.io/v1
//! (`k8s.io/apimachinery/pkg/apis/meta/v1`): ObjectMeta and what it refers to,
//! label selectors, conditions and DeleteOptions.
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{Bool, I64, Map, Msg, Raw, Str, Time};
use super::{Table, f};

pub(crate) const OBJECT_META: Table = &[
    f(1, "name", Str),
    f(2, "generateName", Str),
    f(3, "namespace", Str),
    f(4, "selfLink", Str),
    f(5, "uid", Str),
    f(6, "resourceVersion", Str),
    f(7, "generation", I64),
    f(8, "creationTimestamp", Time),
    f(9, "deletionTimestamp", Time),
    f(10, "deletionGracePeriodSeconds", I64).keep(),
    f(11, "labels", Map(&Str)),
    f(12, "annotations", Map(&Str)),
    f(13, "ownerReferences", Msg(OWNER_REFERENCE)).list(),
    f(14, "finalizers", Str).list(),
    f(17, "managedFields", Msg(MANAGED_FIELDS_ENTRY)).list(),
];
pub(crate) const OWNER_REFERENCE: Table = &[
    f(5, "apiVersion", Str).keep(),
    f(1, "kind", Str).keep(),
    f(3, "name", Str).keep(),
    f(4, "uid", Str).keep(),
    f(6, "controller", Bool).keep(),
    f(7, "blockOwnerDeletion", Bool).keep(),
];
pub(crate) const MANAGED_FIELDS_ENTRY: Table = &[
    f(1, "manager", Str),
    f(2, "operation", Str),
    f(3, "apiVersion", Str),
    f(4, "time", Time),
    f(6, "fieldsType", Str),
    f(7, "fieldsV1", Raw),
    f(8, "subresource", Str),
];
pub(crate) const CONDITION: Table = &[
    f(1, "type", Str).keep(),
    f(2, "status", Str).keep(),
    f(3, "observedGeneration", I64),
    f(4, "lastTransitionTime", Time),
    f(5, "reason", Str).keep(),
    f(6, "message", Str).keep(),
];
pub(crate) const LABEL_SELECTOR: Table = &[
    f(1, "matchLabels", Map(&Str)),
    f(2, "matchExpressions", Msg(LABEL_SELECTOR_REQUIREMENT)).list(),
];
pub(crate) const LABEL_SELECTOR_REQUIREMENT: Table = &[
    f(1, "key", Str).keep(),
    f(2, "operator", Str).keep(),
    f(3, "values", Str).list(),
];
pub(crate) const DELETE_OPTIONS: Table = &[
    f(1, "gracePeriodSeconds", I64).keep(),
    f(2, "preconditions", Msg(PRECONDITIONS)),
    f(3, "orphanDependents", Bool).keep(),
    f(4, "propagationPolicy", Str).keep(),
    f(5, "dryRun", Str).list(),
    f(6, "ignoreStoreReadErrorWithClusterBreakingPotential", Bool).keep(),
];
pub(crate) const PRECONDITIONS: Table =
    &[f(1, "uid", Str).keep(), f(2, "resourceVersion", Str).keep()];
pub(crate) const FIELD_SELECTOR_REQUIREMENT: Table = &[
    f(1, "key", Str).keep(),
    f(2, "operator", Str).keep(),
    f(3, "values", Str).list(),
];
