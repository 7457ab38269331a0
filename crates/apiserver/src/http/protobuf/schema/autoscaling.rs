//! Protobuf field tables of autoscaling/v1 (`k8s.io/api/autoscaling/v1`):
//! Scale, which a typed client may PUT on a `/scale` subresource.
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{I32, Msg, Str};
use super::{Table, f};

pub(crate) const SCALE: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(SCALE_SPEC)),
    f(3, "status", Msg(SCALE_STATUS)),
];
pub(crate) const SCALE_SPEC: Table = &[f(1, "replicas", I32)];
pub(crate) const SCALE_STATUS: Table = &[f(1, "replicas", I32).keep(), f(2, "selector", Str)];
