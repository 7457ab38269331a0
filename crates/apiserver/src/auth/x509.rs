//! The user a client certificate names: CommonName is the user name,
//! each Organization a group (kube's x509 authenticator).
//!
//! rustls has verified the chain before a request exists, so this only reads
//! the subject out of the leaf. That needs a few lines of DER walking, not a
//! full X.509 parser; anything unexpected is a 401, never a panic.

use apimachinery::ApiError;
use rustls::pki_types::CertificateDer;

use super::{UserInfo, unauthorized};

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
/// `[0] EXPLICIT Version` at the start of a v3 TBSCertificate.
const VERSION_TAG: u8 = 0xa0;
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

/// One DER element: its tag, its contents, and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | *b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The subject's attributes as (OID, value) pairs, in order.
fn subject_attributes(der: &[u8]) -> Option<Vec<(&[u8], String)>> {
    let (tag, cert, _) = element(der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut rest = tbs;
    if rest.first() == Some(&VERSION_TAG) {
        rest = element(rest)?.2;
    }
    // serialNumber, signature, issuer, validity, then subject.
    for _ in 0..4 {
        rest = element(rest)?.2;
    }
    let (tag, mut subject, _) = element(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut out = Vec::new();
    while !subject.is_empty() {
        let (tag, mut rdn, next) = element(subject)?;
        if tag != SET {
            return None;
        }
        while !rdn.is_empty() {
            let (tag, atv, next_atv) = element(rdn)?;
            if tag != SEQUENCE {
                return None;
            }
            let (tag, oid, value) = element(atv)?;
            if tag != OID {
                return None;
            }
            let (_, value, _) = element(value)?;
            // UTF8String, PrintableString, IA5String and T61String all hold
            // ASCII-compatible bytes for the names kube uses.
            out.push((oid, String::from_utf8_lossy(value).into_owned()));
            rdn = next_atv;
        }
        subject = next;
    }
    Some(out)
}

/// The user of a verified client certificate.
pub fn user_from_certificate(cert: &CertificateDer<'_>) -> Result<UserInfo, ApiError> {
    let attrs = subject_attributes(cert.as_ref()).ok_or_else(unauthorized)?;
    let username = attrs
        .iter()
        .find(|(oid, _)| *oid == OID_COMMON_NAME)
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    if username.is_empty() {
        return Err(unauthorized());
    }
    let groups = attrs
        .iter()
        .filter(|(oid, _)| *oid == OID_ORGANIZATION)
        .map(|(_, v)| v.clone())
        .collect();
    Ok(UserInfo {
        username,
        groups,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;

    #[test]
    fn reads_cn_and_organizations() {
        let dir = tempfile::tempdir().unwrap();
        let pki = crate::http::pki::Pki::ensure(dir.path(), &[]).unwrap();
        let (pem, _) = pki.issue_client_cert("alice", &["dev"]).unwrap();
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let u = user_from_certificate(&der).unwrap();
        assert_eq!(u.username, "alice");
        assert_eq!(u.groups, vec!["dev"]);
        assert!(pki.issue_client_cert("bob", &["a", "b"]).is_err());
        let admin = CertificateDer::from_pem_slice(pki.admin_cert_pem.as_bytes()).unwrap();
        let u = user_from_certificate(&admin).unwrap();
        assert_eq!(
            (u.username.as_str(), u.groups),
            ("trellis-admin", vec!["system:masters".to_string()])
        );
    }

    #[test]
    fn garbage_is_unauthorized_not_a_panic() {
        for bytes in [
            &b""[..],
            &[0x30],
            &[0x30, 0x84, 0xff, 0xff],
            &[0x30, 0x03, 0x30, 0x01],
        ] {
            let e = user_from_certificate(&CertificateDer::from(bytes.to_vec())).unwrap_err();
            assert_eq!(e.code, 401);
        }
    }
}
