//! Protobuf field tables of policy/v1 (`k8s.io/api/policy/v1`): Eviction and
//! PodDisruptionBudget.
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{I32, I64, IntOrString, Map, Msg, Str, Time};
use super::{Table, f};

pub(crate) const EVICTION: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "deleteOptions", Msg(super::meta::DELETE_OPTIONS)),
];
pub(crate) const POD_DISRUPTION_BUDGET: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(POD_DISRUPTION_BUDGET_SPEC)),
    f(3, "status", Msg(POD_DISRUPTION_BUDGET_STATUS)),
];
pub(crate) const POD_DISRUPTION_BUDGET_SPEC: Table = &[
    f(1, "minAvailable", IntOrString).keep(),
    f(2, "selector", Msg(super::meta::LABEL_SELECTOR)),
    f(3, "maxUnavailable", IntOrString).keep(),
    f(4, "unhealthyPodEvictionPolicy", Str).keep(),
];
pub(crate) const POD_DISRUPTION_BUDGET_STATUS: Table = &[
    f(1, "observedGeneration", I64),
    f(2, "disruptedPods", Map(&Time)),
    f(3, "disruptionsAllowed", I32).keep(),
    f(4, "currentHealthy", I32).keep(),
    f(5, "desiredHealthy", I32).keep(),
    f(6, "expectedPods", I32).keep(),
    f(7, "conditions", Msg(super::meta::CONDITION)).list(),
];
