//! ServiceAccount tokens: JWTs (ES256) the server signs for ServiceAccount
//! objects through the TokenRequest subresource, with the claims
//! kube-apiserver puts in them, and their validation: signature, issuer,
//! audience, time window, and that the ServiceAccount still exists with the
//! same uid (so deleting and recreating it revokes old tokens).

use crate::error::Error;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{SecondsFormat, TimeZone, Utc};
use http::StatusCode;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _, UnparsedPublicKey};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

use apimachinery::{ApiError, Cause};

use super::{UserInfo, unauthorized};
use crate::http::Reply;
use crate::storage::Storage;

/// Default and bounds of `spec.expirationSeconds`, as kube has them.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// Clock skew tolerated on `nbf` and `exp`.
const LEEWAY_SECONDS: i64 = 60;
pub const SA_PREFIX: &str = "system:serviceaccount:";

/// Signs and verifies ServiceAccount tokens.
pub struct TokenSigner {
    key: EcdsaKeyPair,
    public: Vec<u8>,
    kid: String,
    issuer: String,
    audiences: Vec<String>,
    rng: SystemRandom,
}

/// The claims of a verified token that identify the ServiceAccount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaClaims {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub jti: String,
}

impl TokenSigner {
    pub fn new(key_pem: &str, issuer: &str, audiences: Vec<String>) -> Result<TokenSigner, Error> {
        let der = match PrivateKeyDer::from_pem_slice(key_pem.as_bytes()) {
            Ok(PrivateKeyDer::Pkcs8(k)) => k,
            Ok(_) => {
                return Err(Error::SigningKeyInvalid(
                    "the ServiceAccount signing key must be PKCS#8".into(),
                ));
            }
            Err(e) => {
                return Err(Error::SigningKeyInvalid(format!(
                    "reading the ServiceAccount signing key: {e}"
                )));
            }
        };
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            der.secret_pkcs8_der(),
            &rng,
        )
        .map_err(|e| {
            Error::SigningKeyInvalid(format!(
                "the ServiceAccount signing key is not ECDSA P-256: {e}"
            ))
        })?;
        let public = key.public_key().as_ref().to_vec();
        // Like kube: the key id is a digest of the public key, so verifiers
        // holding several keys can pick the right one.
        let kid = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &public));
        if audiences.is_empty() {
            return Err(Error::AudiencesMissing);
        }
        Ok(TokenSigner {
            key,
            public,
            kid,
            issuer: issuer.to_string(),
            audiences,
            rng,
        })
    }

    pub fn audiences(&self) -> &[String] {
        &self.audiences
    }

    /// A token for ServiceAccount `ns/name` (uid `uid`), valid for `secs`
    /// seconds from now, returned with its expiry (Unix seconds).
    pub fn issue(
        &self,
        ns: &str,
        name: &str,
        uid: &str,
        audiences: &[String],
        secs: i64,
    ) -> Result<(String, i64), ApiError> {
        let now = Utc::now().timestamp();
        let exp = now + secs;
        let claims = json!({
            "aud": audiences,
            "exp": exp,
            "iat": now,
            "iss": self.issuer,
            "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": {
                "namespace": ns,
                "serviceaccount": {"name": name, "uid": uid},
            },
            "nbf": now,
            "sub": format!("{SA_PREFIX}{ns}:{name}"),
        });
        let header = json!({"alg": "ES256", "kid": self.kid});
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = self
            .key
            .sign(&self.rng, signing_input.as_bytes())
            .map_err(|_| ApiError::internal("signing the token failed"))?;
        Ok((
            format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())),
            exp,
        ))
    }

    /// Checks signature, algorithm, issuer, audience and time window, and
    /// returns the ServiceAccount the token names. Errors say why, for logs
    /// and TokenReview; clients only ever see "Unauthorized".
    pub fn verify(&self, token: &str) -> Result<SaClaims, String> {
        let mut parts = token.split('.');
        let (Some(h), Some(c), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not a JWT".into());
        };
        let decode = |p: &str| {
            URL_SAFE_NO_PAD
                .decode(p)
                .map_err(|_| "bad base64".to_string())
        };
        let header: Value =
            serde_json::from_slice(&decode(h)?).map_err(|_| "bad header".to_string())?;
        if header.get("alg").and_then(Value::as_str) != Some("ES256") {
            return Err("unexpected signing algorithm".into());
        }
        let sig = decode(s)?;
        UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &self.public)
            .verify(format!("{h}.{c}").as_bytes(), &sig)
            .map_err(|_| "invalid signature".to_string())?;
        let claims: Value =
            serde_json::from_slice(&decode(c)?).map_err(|_| "bad claims".to_string())?;
        if claims.get("iss").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err("unexpected issuer".into());
        }
        let auds: Vec<&str> = match claims.get("aud") {
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !auds.iter().any(|a| self.audiences.iter().any(|x| x == a)) {
            return Err("token audiences do not include the API server's".into());
        }
        let now = Utc::now().timestamp();
        let exp = claims.get("exp").and_then(Value::as_i64).unwrap_or(0);
        if now > exp + LEEWAY_SECONDS {
            return Err("token has expired".into());
        }
        if let Some(nbf) = claims.get("nbf").and_then(Value::as_i64)
            && now + LEEWAY_SECONDS < nbf
        {
            return Err("token is not valid yet".into());
        }
        let k = claims.get("kubernetes.io").cloned().unwrap_or(Value::Null);
        let field = |p: &str| {
            k.pointer(p)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| format!("claim kubernetes.io{p} is missing"))
        };
        let sa = SaClaims {
            namespace: field("/namespace")?,
            name: field("/serviceaccount/name")?,
            uid: field("/serviceaccount/uid")?,
            jti: claims
                .get("jti")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        };
        let sub = format!("{SA_PREFIX}{}:{}", sa.namespace, sa.name);
        if claims.get("sub").and_then(Value::as_str) != Some(sub.as_str()) {
            return Err("subject does not match the ServiceAccount".into());
        }
        Ok(sa)
    }
}

/// The groups every ServiceAccount of `ns` is in.
pub fn groups(ns: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{ns}"),
        super::AUTHENTICATED_GROUP.to_string(),
    ]
}

/// The current ServiceAccount object, if any.
async fn load(storage: &Storage, ns: &str, name: &str) -> Result<Option<Value>, ApiError> {
    let key = crate::storage::keys::key(crate::storage::keys::SERVICE_ACCOUNTS, Some(ns), name);
    let (kv, _) = storage
        .store()
        .get(&key, None)
        .await
        .map_err(crate::storage::store_err)?;
    Ok(kv.and_then(|kv| serde_json::from_slice(&kv.value).ok()))
}

/// Validates a token and checks its ServiceAccount is still there, unchanged.
pub async fn verify_live(
    storage: &Storage,
    signer: &TokenSigner,
    token: &str,
) -> Result<UserInfo, String> {
    let c = signer.verify(token)?;
    let sa = load(storage, &c.namespace, &c.name)
        .await
        .map_err(|e| e.message)?
        .ok_or_else(|| format!("serviceaccount {}/{} no longer exists", c.namespace, c.name))?;
    if crate::object::uid(&sa) != c.uid {
        return Err(format!(
            "serviceaccount {}/{} was recreated (uid changed)",
            c.namespace, c.name
        ));
    }
    if crate::object::is_deleting(&sa) {
        return Err(format!(
            "serviceaccount {}/{} is being deleted",
            c.namespace, c.name
        ));
    }
    let mut user = UserInfo {
        username: format!("{SA_PREFIX}{}:{}", c.namespace, c.name),
        uid: c.uid,
        groups: groups(&c.namespace),
        ..Default::default()
    };
    if !c.jti.is_empty() {
        user.extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            vec![format!("JTI={}", c.jti)],
        );
    }
    Ok(user)
}

/// A bearer token that claims to be a ServiceAccount token.
pub async fn authenticate(
    storage: &Storage,
    signer: &TokenSigner,
    token: &str,
) -> Result<UserInfo, ApiError> {
    verify_live(storage, signer, token).await.map_err(|why| {
        tracing::debug!(%why, "ServiceAccount token rejected");
        unauthorized()
    })
}

/// `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`.
pub async fn token_request(
    storage: &Storage,
    signer: &TokenSigner,
    ns: &str,
    name: &str,
    mut req: Value,
) -> Result<Reply, ApiError> {
    let invalid = |field: &str, msg: String| {
        ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            name,
            vec![Cause::invalid(field, msg)],
        )
    };
    let secs = match req.pointer("/spec/expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| ApiError::bad_request("spec.expirationSeconds must be an integer"))?,
    };
    if secs < MIN_EXPIRATION_SECONDS {
        return Err(invalid(
            "spec.expirationSeconds",
            format!("Invalid value: {secs}: may not specify a duration less than 10 minutes"),
        ));
    }
    if secs > MAX_EXPIRATION_SECONDS {
        return Err(invalid(
            "spec.expirationSeconds",
            format!("Invalid value: {secs}: may not specify a duration larger than 2^32 seconds"),
        ));
    }
    let audiences: Vec<String> = match req.pointer("/spec/audiences") {
        Some(Value::Array(a)) if !a.is_empty() => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::bad_request("spec.audiences must be strings"))
            })
            .collect::<Result<_, _>>()?,
        _ => signer.audiences().to_vec(),
    };
    let sa = load(storage, ns, name)
        .await?
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let uid = crate::object::uid(&sa).to_string();
    let (token, exp) = signer.issue(ns, name, &uid, &audiences, secs)?;
    let expiration = Utc
        .timestamp_opt(exp, 0)
        .single()
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_default();
    req["apiVersion"] = json!("authentication.k8s.io/v1");
    req["kind"] = json!("TokenRequest");
    req["metadata"] = json!({"name": name, "namespace": ns, "creationTimestamp": null});
    if !req.get("spec").is_some_and(Value::is_object) {
        req["spec"] = json!({});
    }
    req["spec"]["audiences"] = json!(audiences);
    req["spec"]["expirationSeconds"] = json!(secs);
    if req.pointer("/spec/boundObjectRef").is_none() {
        req["spec"]["boundObjectRef"] = Value::Null;
    }
    req["status"] = json!({"token": token, "expirationTimestamp": expiration});
    Ok(Reply::value(StatusCode::CREATED, &req))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> TokenSigner {
        let key = rcgen::KeyPair::generate().unwrap().serialize_pem();
        TokenSigner::new(&key, super::super::DEFAULT_ISSUER, vec!["api".into()]).unwrap()
    }

    #[test]
    fn round_trip_and_tampering() {
        let s = signer();
        let (t, _) = s
            .issue("ns1", "robot", "uid-1", &["api".into()], 600)
            .unwrap();
        let c = s.verify(&t).unwrap();
        assert_eq!(
            (c.namespace.as_str(), c.name.as_str(), c.uid.as_str()),
            ("ns1", "robot", "uid-1")
        );
        // Another signer's tokens, other audiences and edited claims fail.
        assert!(signer().verify(&t).is_err());
        let (other_aud, _) = s
            .issue("ns1", "robot", "uid-1", &["x".into()], 600)
            .unwrap();
        assert!(s.verify(&other_aud).is_err());
        let mut parts: Vec<String> = t.split('.').map(str::to_string).collect();
        let mut claims: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts[1]).unwrap()).unwrap();
        claims["kubernetes.io"]["namespace"] = json!("kube-system");
        parts[1] = URL_SAFE_NO_PAD.encode(claims.to_string());
        assert!(s.verify(&parts.join(".")).is_err());
        assert!(s.verify("a.b.c").is_err());
        assert!(s.verify("").is_err());
    }

    #[test]
    fn expired_tokens_fail() {
        let s = signer();
        let (t, _) = s
            .issue("ns1", "robot", "u", &["api".into()], -3600)
            .unwrap();
        assert_eq!(s.verify(&t).unwrap_err(), "token has expired");
    }
}
