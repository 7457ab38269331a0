//! Protobuf field tables of authentication.k8s.io/v1
//! (`k8s.io/api/authentication/v1`): the specs of TokenRequest and TokenReview
//! (read by `auth::protobuf`).
//!
//! Field numbers and JSON names as in the Kubernetes 1.32 `generated.proto`
//! and Go types; see the parent module for what `keep` and `list` mean.

use super::Ty::{I64, Msg, Str};
use super::{Table, f};

pub(crate) const TOKEN_REQUEST_SPEC: Table = &[
    f(1, "audiences", Str).list(),
    f(4, "expirationSeconds", I64).keep(),
    f(3, "boundObjectRef", Msg(BOUND_OBJECT_REFERENCE)),
];
pub(crate) const BOUND_OBJECT_REFERENCE: Table = &[
    f(1, "kind", Str),
    f(2, "apiVersion", Str),
    f(3, "name", Str),
    f(4, "uid", Str),
];
pub(crate) const TOKEN_REVIEW_SPEC: Table = &[f(1, "token", Str), f(2, "audiences", Str).list()];
