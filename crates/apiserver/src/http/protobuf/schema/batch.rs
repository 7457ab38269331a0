//! Protobuf field tables of batch/v1 (`k8s.io/api/batch/v1`): Job and
//! CronJob, which `kubectl create job` and `kubectl create cronjob` send.
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{Bool, I32, I64, Msg, Str, Time};
use super::{Table, f};

pub(crate) const JOB: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(JOB_SPEC)),
    f(3, "status", Msg(JOB_STATUS)),
];
pub(crate) const JOB_SPEC: Table = &[
    f(1, "parallelism", I32).keep(),
    f(2, "completions", I32).keep(),
    f(3, "activeDeadlineSeconds", I64).keep(),
    f(11, "podFailurePolicy", Msg(POD_FAILURE_POLICY)),
    f(16, "successPolicy", Msg(SUCCESS_POLICY)),
    f(7, "backoffLimit", I32).keep(),
    f(12, "backoffLimitPerIndex", I32).keep(),
    f(13, "maxFailedIndexes", I32).keep(),
    f(4, "selector", Msg(super::meta::LABEL_SELECTOR)),
    f(5, "manualSelector", Bool).keep(),
    f(6, "template", Msg(super::core::POD_TEMPLATE_SPEC)),
    f(8, "ttlSecondsAfterFinished", I32).keep(),
    f(9, "completionMode", Str).keep(),
    f(10, "suspend", Bool).keep(),
    f(14, "podReplacementPolicy", Str).keep(),
    f(15, "managedBy", Str).keep(),
];
pub(crate) const POD_FAILURE_POLICY: Table = &[f(1, "rules", Msg(POD_FAILURE_POLICY_RULE)).list()];
pub(crate) const POD_FAILURE_POLICY_RULE: Table = &[
    f(1, "action", Str).keep(),
    f(2, "onExitCodes", Msg(POD_FAILURE_POLICY_ON_EXIT_CODES)),
    f(
        3,
        "onPodConditions",
        Msg(POD_FAILURE_POLICY_ON_POD_CONDITIONS),
    )
    .list(),
];
pub(crate) const POD_FAILURE_POLICY_ON_EXIT_CODES: Table = &[
    f(1, "containerName", Str).keep(),
    f(2, "operator", Str).keep(),
    f(3, "values", I32).list(),
];
pub(crate) const POD_FAILURE_POLICY_ON_POD_CONDITIONS: Table =
    &[f(1, "type", Str).keep(), f(2, "status", Str).keep()];
pub(crate) const SUCCESS_POLICY: Table = &[f(1, "rules", Msg(SUCCESS_POLICY_RULE)).list()];
pub(crate) const SUCCESS_POLICY_RULE: Table = &[
    f(1, "succeededIndexes", Str).keep(),
    f(2, "succeededCount", I32).keep(),
];
pub(crate) const JOB_STATUS: Table = &[
    f(1, "conditions", Msg(JOB_CONDITION)).list(),
    f(2, "startTime", Time),
    f(3, "completionTime", Time),
    f(4, "active", I32),
    f(5, "succeeded", I32),
    f(6, "failed", I32),
    f(11, "terminating", I32).keep(),
    f(7, "completedIndexes", Str),
    f(10, "failedIndexes", Str).keep(),
    f(8, "uncountedTerminatedPods", Msg(UNCOUNTED_TERMINATED_PODS)),
    f(9, "ready", I32).keep(),
];
pub(crate) const JOB_CONDITION: Table = &[
    f(1, "type", Str).keep(),
    f(2, "status", Str).keep(),
    f(3, "lastProbeTime", Time),
    f(4, "lastTransitionTime", Time),
    f(5, "reason", Str),
    f(6, "message", Str),
];
pub(crate) const UNCOUNTED_TERMINATED_PODS: Table =
    &[f(1, "succeeded", Str).list(), f(2, "failed", Str).list()];
pub(crate) const CRON_JOB: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(CRON_JOB_SPEC)),
    f(3, "status", Msg(CRON_JOB_STATUS)),
];
pub(crate) const CRON_JOB_SPEC: Table = &[
    f(1, "schedule", Str).keep(),
    f(8, "timeZone", Str).keep(),
    f(2, "startingDeadlineSeconds", I64).keep(),
    f(3, "concurrencyPolicy", Str),
    f(4, "suspend", Bool).keep(),
    f(5, "jobTemplate", Msg(JOB_TEMPLATE_SPEC)),
    f(6, "successfulJobsHistoryLimit", I32).keep(),
    f(7, "failedJobsHistoryLimit", I32).keep(),
];
pub(crate) const JOB_TEMPLATE_SPEC: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(JOB_SPEC)),
];
pub(crate) const CRON_JOB_STATUS: Table = &[
    f(1, "active", Msg(super::core::OBJECT_REFERENCE)).list(),
    f(4, "lastScheduleTime", Time),
    f(5, "lastSuccessfulTime", Time),
];
