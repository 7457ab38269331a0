//! Protobuf field tables of apps/v1 (`k8s.io/api/apps/v1`): Deployment and
//! StatefulSet.
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{Bool, I32, I64, IntOrString, Msg, Str, Time};
use super::{Table, f};

pub(crate) const DEPLOYMENT: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(DEPLOYMENT_SPEC)),
    f(3, "status", Msg(DEPLOYMENT_STATUS)),
];
pub(crate) const DEPLOYMENT_SPEC: Table = &[
    f(1, "replicas", I32).keep(),
    f(2, "selector", Msg(super::meta::LABEL_SELECTOR)),
    f(3, "template", Msg(super::core::POD_TEMPLATE_SPEC)),
    f(4, "strategy", Msg(DEPLOYMENT_STRATEGY)),
    f(5, "minReadySeconds", I32),
    f(6, "revisionHistoryLimit", I32).keep(),
    f(7, "paused", Bool),
    f(9, "progressDeadlineSeconds", I32).keep(),
];
pub(crate) const DEPLOYMENT_STRATEGY: Table = &[
    f(1, "type", Str),
    f(2, "rollingUpdate", Msg(ROLLING_UPDATE_DEPLOYMENT)),
];
pub(crate) const ROLLING_UPDATE_DEPLOYMENT: Table = &[
    f(1, "maxUnavailable", IntOrString).keep(),
    f(2, "maxSurge", IntOrString).keep(),
];
pub(crate) const DEPLOYMENT_STATUS: Table = &[
    f(1, "observedGeneration", I64),
    f(2, "replicas", I32),
    f(3, "updatedReplicas", I32),
    f(7, "readyReplicas", I32),
    f(4, "availableReplicas", I32),
    f(5, "unavailableReplicas", I32),
    f(6, "conditions", Msg(DEPLOYMENT_CONDITION)).list(),
    f(8, "collisionCount", I32).keep(),
];
pub(crate) const DEPLOYMENT_CONDITION: Table = &[
    f(1, "type", Str).keep(),
    f(2, "status", Str).keep(),
    f(6, "lastUpdateTime", Time),
    f(7, "lastTransitionTime", Time),
    f(4, "reason", Str),
    f(5, "message", Str),
];
pub(crate) const STATEFUL_SET: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(STATEFUL_SET_SPEC)),
    f(3, "status", Msg(STATEFUL_SET_STATUS)),
];
pub(crate) const STATEFUL_SET_SPEC: Table = &[
    f(1, "replicas", I32).keep(),
    f(2, "selector", Msg(super::meta::LABEL_SELECTOR)),
    f(3, "template", Msg(super::core::POD_TEMPLATE_SPEC)),
    f(
        4,
        "volumeClaimTemplates",
        Msg(super::core::PERSISTENT_VOLUME_CLAIM),
    )
    .list(),
    f(5, "serviceName", Str).keep(),
    f(6, "podManagementPolicy", Str),
    f(7, "updateStrategy", Msg(STATEFUL_SET_UPDATE_STRATEGY)),
    f(8, "revisionHistoryLimit", I32).keep(),
    f(9, "minReadySeconds", I32),
    f(
        10,
        "persistentVolumeClaimRetentionPolicy",
        Msg(STATEFUL_SET_PERSISTENT_VOLUME_CLAIM_RETENTION_POLICY),
    ),
    f(11, "ordinals", Msg(STATEFUL_SET_ORDINALS)),
];
pub(crate) const STATEFUL_SET_UPDATE_STRATEGY: Table = &[
    f(1, "type", Str),
    f(
        2,
        "rollingUpdate",
        Msg(ROLLING_UPDATE_STATEFUL_SET_STRATEGY),
    ),
];
pub(crate) const ROLLING_UPDATE_STATEFUL_SET_STRATEGY: Table = &[
    f(1, "partition", I32).keep(),
    f(2, "maxUnavailable", IntOrString).keep(),
];
pub(crate) const STATEFUL_SET_PERSISTENT_VOLUME_CLAIM_RETENTION_POLICY: Table =
    &[f(1, "whenDeleted", Str), f(2, "whenScaled", Str)];
pub(crate) const STATEFUL_SET_ORDINALS: Table = &[f(1, "start", I32).keep()];
pub(crate) const STATEFUL_SET_STATUS: Table = &[
    f(1, "observedGeneration", I64),
    f(2, "replicas", I32).keep(),
    f(3, "readyReplicas", I32),
    f(4, "currentReplicas", I32),
    f(5, "updatedReplicas", I32),
    f(6, "currentRevision", Str),
    f(7, "updateRevision", Str),
    f(9, "collisionCount", I32).keep(),
    f(10, "conditions", Msg(STATEFUL_SET_CONDITION)).list(),
    f(11, "availableReplicas", I32),
];
pub(crate) const STATEFUL_SET_CONDITION: Table = &[
    f(1, "type", Str).keep(),
    f(2, "status", Str).keep(),
    f(3, "lastTransitionTime", Time),
    f(4, "reason", Str),
    f(5, "message", Str),
];
