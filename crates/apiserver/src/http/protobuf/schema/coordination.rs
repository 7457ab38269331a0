//! Protobuf field tables of coordination.k8s.io/v1
//! (`k8s.io/api/coordination/v1`): Lease.
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{I32, MicroTime, Msg, Str};
use super::{Table, f};

pub(crate) const LEASE: Table = &[
    f(1, "metadata", Msg(super::meta::OBJECT_META)),
    f(2, "spec", Msg(LEASE_SPEC)),
];
pub(crate) const LEASE_SPEC: Table = &[
    f(1, "holderIdentity", Str).keep(),
    f(2, "leaseDurationSeconds", I32).keep(),
    f(3, "acquireTime", MicroTime),
    f(4, "renewTime", MicroTime),
    f(5, "leaseTransitions", I32).keep(),
    f(6, "strategy", Str).keep(),
    f(7, "preferredHolder", Str).keep(),
];
