//! Protobuf field tables of events.k8s.io/v1 (`k8s.io/api/events/v1`): Event.
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{I32, MicroTime, Msg, Str, Time};
use super::{Table, f};

pub(crate) const EVENT: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "eventTime", MicroTime),
    f(3, "series", Msg(EVENT_SERIES)),
    f(4, "reportingController", Str),
    f(5, "reportingInstance", Str),
    f(6, "action", Str),
    f(7, "reason", Str),
    f(8, "regarding", Msg(super::core::OBJECT_REFERENCE)),
    f(9, "related", Msg(super::core::OBJECT_REFERENCE)),
    f(10, "note", Str),
    f(11, "type", Str),
    f(12, "deprecatedSource", Msg(super::core::EVENT_SOURCE)),
    f(13, "deprecatedFirstTimestamp", Time),
    f(14, "deprecatedLastTimestamp", Time),
    f(15, "deprecatedCount", I32),
];
pub(crate) const EVENT_SERIES: Table = &[
    f(1, "count", I32).keep(),
    f(2, "lastObservedTime", MicroTime),
];
