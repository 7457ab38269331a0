//! Protobuf field tables of discovery.k8s.io/v1 (`k8s.io/api/discovery/v1`):
//! EndpointSlice.
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{Bool, I32, Map, Msg, Str};
use super::{Table, f};

pub(crate) const ENDPOINT_SLICE: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(4, "addressType", Str).keep(),
    f(2, "endpoints", Msg(ENDPOINT)).list(),
    f(3, "ports", Msg(ENDPOINT_PORT)).list(),
];
pub(crate) const ENDPOINT: Table = &[
    f(1, "addresses", Str).list(),
    f(2, "conditions", Msg(ENDPOINT_CONDITIONS)),
    f(3, "hostname", Str).keep(),
    f(4, "targetRef", Msg(super::core::OBJECT_REFERENCE)),
    f(5, "deprecatedTopology", Map(&Str)),
    f(6, "nodeName", Str).keep(),
    f(7, "zone", Str).keep(),
    f(8, "hints", Msg(ENDPOINT_HINTS)),
];
pub(crate) const ENDPOINT_CONDITIONS: Table = &[
    f(1, "ready", Bool).keep(),
    f(2, "serving", Bool).keep(),
    f(3, "terminating", Bool).keep(),
];
pub(crate) const ENDPOINT_HINTS: Table = &[f(1, "forZones", Msg(FOR_ZONE)).list()];
pub(crate) const FOR_ZONE: Table = &[f(1, "name", Str).keep()];
pub(crate) const ENDPOINT_PORT: Table = &[
    f(1, "name", Str).keep(),
    f(2, "protocol", Str).keep(),
    f(3, "port", I32).keep(),
    f(4, "appProtocol", Str).keep(),
];
