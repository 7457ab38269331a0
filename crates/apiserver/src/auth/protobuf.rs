//! Reading the protobuf bodies kubectl sends to the identity endpoints.
//!
//! kubectl's typed clients (`auth can-i`, `auth whoami`, `create token`)
//! POST `application/vnd.kubernetes.protobuf` even when the server answers
//! JSON, so these few request kinds must be readable in protobuf. Replies
//! stay JSON, which client-go accepts since it asks for both. The wire
//! reader and the spec tables are the shared ones in `crate::http::protobuf`;
//! this file only says which table each review kind's spec uses. The
//! endpoint already knows its kind, so the envelope's type meta is not
//! consulted; malformed input is a 400.

use apimachinery::ApiError;
use serde_json::Value;

use super::review::VirtualKind;
use crate::http::protobuf::schema::Ty::Msg;
use crate::http::protobuf::schema::{Table, authentication, authorization, f, meta};

pub use crate::http::protobuf::CONTENT_TYPE;

/// The top-level schema of a kind: metadata = 1, spec = 2.
fn top(kind: &VirtualKind) -> Table {
    const SSAR: Table = &[
        f(1, "metadata", Msg(meta::OBJECT_META)),
        f(
            2,
            "spec",
            Msg(authorization::SELF_SUBJECT_ACCESS_REVIEW_SPEC),
        ),
    ];
    const SAR: Table = &[
        f(1, "metadata", Msg(meta::OBJECT_META)),
        f(2, "spec", Msg(authorization::SUBJECT_ACCESS_REVIEW_SPEC)),
    ];
    const SSRR: Table = &[
        f(1, "metadata", Msg(meta::OBJECT_META)),
        f(
            2,
            "spec",
            Msg(authorization::SELF_SUBJECT_RULES_REVIEW_SPEC),
        ),
    ];
    const TR: Table = &[
        f(1, "metadata", Msg(meta::OBJECT_META)),
        f(2, "spec", Msg(authentication::TOKEN_REQUEST_SPEC)),
    ];
    const TREVIEW: Table = &[
        f(1, "metadata", Msg(meta::OBJECT_META)),
        f(2, "spec", Msg(authentication::TOKEN_REVIEW_SPEC)),
    ];
    const SSR: Table = &[f(1, "metadata", Msg(meta::OBJECT_META))];
    match kind {
        VirtualKind::SelfSubjectAccessReview => SSAR,
        VirtualKind::SubjectAccessReview | VirtualKind::LocalSubjectAccessReview { .. } => SAR,
        VirtualKind::SelfSubjectRulesReview => SSRR,
        VirtualKind::TokenRequest { .. } => TR,
        VirtualKind::TokenReview => TREVIEW,
        VirtualKind::SelfSubjectReview => SSR,
    }
}

/// Decodes a protobuf request body of `kind` into its JSON form.
pub fn decode(kind: &VirtualKind, body: &[u8]) -> Result<Value, ApiError> {
    crate::http::protobuf::decode_as(body, top(kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MAGIC: &[u8] = b"k8s\x00";

    fn field(n: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![((n << 3) | 2) as u8, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn self_subject_access_review() {
        let attrs = [field(1, b"ns"), field(2, b"list"), field(5, b"pods")].concat();
        let spec = field(1, &attrs);
        let obj = [field(1, &[]), field(2, &spec)].concat();
        let type_meta = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &obj)].concat();
        let v = decode(&VirtualKind::SelfSubjectAccessReview, &body).unwrap();
        assert_eq!(
            v["spec"]["resourceAttributes"],
            json!({"namespace": "ns", "verb": "list", "resource": "pods"})
        );
    }

    #[test]
    fn token_request_expiration() {
        let spec = [field(1, b"api"), vec![4 << 3, 0x90, 0x1c]].concat();
        let body = [MAGIC.to_vec(), field(2, &field(2, &spec))].concat();
        let v = decode(
            &VirtualKind::TokenRequest {
                namespace: "a".into(),
                name: "b".into(),
            },
            &body,
        )
        .unwrap();
        assert_eq!(
            v["spec"],
            json!({"audiences": ["api"], "expirationSeconds": 3600})
        );
    }

    #[test]
    fn garbage_is_a_400() {
        for b in [
            &b""[..],
            b"k8s\x00\x12\x05ab",
            b"{}",
            b"k8s\x00\x12\x02\x0a\x09",
        ] {
            let e = decode(&VirtualKind::SelfSubjectReview, b).unwrap_err();
            assert_eq!(e.code, 400);
        }
    }
}
