//! The server's own public-key infrastructure, kept in one directory
//! (`DATA_DIR/pki/`): a CA, the serving certificate it signs, the admin
//! client certificate (`CN=trellis-admin`, `O=system:masters`) that the admin
//! kubeconfig embeds, and the key that signs ServiceAccount tokens.
//!
//! Everything is created on first start and reused afterwards, so clients
//! that trust `ca.crt` keep working across restarts. Only the serving
//! certificate is re-issued, when the requested names change or it nears
//! expiry; clients trust the CA, not the leaf, so that is invisible to them.
//! Private keys are written with mode 0600.
//!
//! A start writes only what is missing or changed (each file is compared
//! before it is written), so a server with everything in place starts, and
//! serves reads, on a full disk. Writes are atomic and durable (temporary
//! file, fsync, rename, fsync of the directory); a re-issued certificate and
//! its key are staged together and renamed into place only once both are
//! written, so a failure never pairs a new key with an old certificate. If a
//! renewal that is merely due (the leaf is still valid) cannot be written,
//! the current leaf is kept and the failure logged.

use crate::error::{Error, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use chrono::{Datelike, Utc};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::http::tls::TlsConfig;

/// Subject of the CA. It is fixed so the issuer can be rebuilt from the
/// stored key alone when a leaf is re-issued.
const CA_COMMON_NAME: &str = "trellis-ca";
/// The admin identity: `system:masters` bypasses authorization, as in kube.
pub const ADMIN_USER: &str = "trellis-admin";
pub const ADMIN_GROUP: &str = "system:masters";
/// Leaves live a year; they are re-issued after half of that.
const LEAF_DAYS: i64 = 365;
const LEAF_RENEW_AFTER: Duration = Duration::from_secs(182 * 24 * 3600);
/// A leaf this young is still valid (with a margin), so a renewal that
/// cannot be written may wait.
const LEAF_USABLE: Duration = Duration::from_secs((LEAF_DAYS as u64 - 7) * 24 * 3600);
const CA_DAYS: i64 = 3650;
/// Names every serving certificate carries.
const DEFAULT_SANS: &[&str] = &[
    "localhost",
    "127.0.0.1",
    "::1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
];

/// The PEM material of one installation.
#[derive(Clone, Debug)]
pub struct Pki {
    pub dir: PathBuf,
    pub ca_cert_pem: String,
    ca_key_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
    /// PKCS#8 ECDSA P-256 key that signs ServiceAccount tokens.
    pub service_account_key_pem: String,
}

impl Pki {
    /// Loads the PKI in `dir`, creating whatever is missing. `extra_sans` are
    /// DNS names or IP addresses the serving certificate must also carry.
    pub fn ensure(dir: &Path, extra_sans: &[String]) -> Result<Pki> {
        std::fs::create_dir_all(dir).map_err(|source| Error::DirectoryCreateFailed {
            path: dir.to_path_buf(),
            source,
        })?;
        set_mode(dir, 0o700)?;
        let ca_key_pem = load_or(dir, "ca.key", || Ok(KeyPair::generate()?.serialize_pem()))?;
        let ca_key = KeyPair::from_pem(&ca_key_pem).map_err(|source| Error::KeyReadFailed {
            file: "ca.key".into(),
            source,
        })?;
        let ca_cert_pem = load_or(dir, "ca.crt", || {
            Ok(ca_params().self_signed(&ca_key)?.pem())
        })?;
        let issuer = Issuer::new(ca_params(), &ca_key);

        let mut sans: BTreeSet<String> = DEFAULT_SANS.iter().map(|s| s.to_string()).collect();
        sans.extend(
            extra_sans
                .iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()),
        );
        if let Some(bad) = sans.iter().find(|s| !valid_san(s)) {
            return Err(Error::SanInvalid { san: bad.clone() });
        }
        let sans_record = sans.iter().cloned().collect::<Vec<_>>().join("\n") + "\n";
        let recorded = std::fs::read_to_string(dir.join("apiserver.sans")).unwrap_or_default();
        let server_usable = recorded == sans_record
            && dir.join("apiserver.key").exists()
            && younger_than(&dir.join("apiserver.crt"), LEAF_USABLE);
        let server_fresh = server_usable && is_fresh(&dir.join("apiserver.crt"));
        if !server_fresh {
            let key = KeyPair::generate().map_err(|source| Error::KeyGenerationFailed {
                file: "apiserver.key".into(),
                source,
            })?;
            let mut params = CertificateParams::new(sans.iter().cloned().collect::<Vec<_>>())
                .map_err(|source| Error::SanRejected { source })?;
            params.distinguished_name = name(&[(DnType::CommonName, "trellis-apiserver")]);
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            params.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ];
            validity(&mut params, LEAF_DAYS);
            let cert = params.signed_by(&key, &issuer).map_err(|source| {
                Error::CertificateSigningFailed {
                    what: "the serving certificate",
                    source,
                }
            })?;
            let written = write_together(
                dir,
                &[
                    ("apiserver.key", &key.serialize_pem(), true),
                    ("apiserver.crt", &cert.pem(), false),
                    ("apiserver.sans", &sans_record, false),
                ],
            );
            keep_usable_on_failure(written, server_usable, "the serving certificate")?;
        }
        let server_cert_pem = read(dir, "apiserver.crt")?;
        let server_key_pem = read(dir, "apiserver.key")?;

        let admin_usable =
            dir.join("admin.key").exists() && younger_than(&dir.join("admin.crt"), LEAF_USABLE);
        if !admin_usable || !is_fresh(&dir.join("admin.crt")) {
            let (cert, key) = issue_client(&issuer, ADMIN_USER, &[ADMIN_GROUP])?;
            let written = write_together(
                dir,
                &[("admin.key", &key, true), ("admin.crt", &cert, false)],
            );
            keep_usable_on_failure(written, admin_usable, "the admin client certificate")?;
        }
        let admin_cert_pem = read(dir, "admin.crt")?;
        let admin_key_pem = read(dir, "admin.key")?;

        let service_account_key_pem =
            load_or(dir, "sa.key", || Ok(KeyPair::generate()?.serialize_pem()))?;
        let sa_pub = KeyPair::from_pem(&service_account_key_pem)
            .map_err(|source| Error::KeyReadFailed {
                file: "sa.key".into(),
                source,
            })?
            .public_key_pem();
        write(dir, "sa.pub", &sa_pub, false)?;

        Ok(Pki {
            dir: dir.to_path_buf(),
            ca_cert_pem,
            ca_key_pem,
            server_cert_pem,
            server_key_pem,
            admin_cert_pem,
            admin_key_pem,
            service_account_key_pem,
        })
    }

    /// Issues a client certificate for `user` in `groups` (at most one:
    /// rcgen writes one attribute per type into a subject), signed by the
    /// CA: `(certificate PEM, key PEM)`. Nothing is written to disk.
    pub fn issue_client_cert(&self, user: &str, groups: &[&str]) -> Result<(String, String)> {
        let ca_key =
            KeyPair::from_pem(&self.ca_key_pem).map_err(|source| Error::KeyReadFailed {
                file: "ca.key".into(),
                source,
            })?;
        issue_client(&Issuer::new(ca_params(), &ca_key), user, groups)
    }

    /// The serving configuration: our certificate, and client certificates
    /// verified against our CA.
    pub fn tls_config(&self) -> TlsConfig {
        TlsConfig {
            cert_chain_pem: self.server_cert_pem.clone(),
            key_pem: self.server_key_pem.clone(),
            client_ca_pem: Some(self.ca_cert_pem.clone()),
        }
    }
}

/// An IP address, or a DNS name (letters, digits, `-`, `.`, a leading `*.`).
fn valid_san(s: &str) -> bool {
    if s.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let host = s.strip_prefix("*.").unwrap_or(s);
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = name(&[(DnType::CommonName, CA_COMMON_NAME)]);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut p, CA_DAYS);
    p
}

fn issue_client(
    issuer: &Issuer<'_, &KeyPair>,
    user: &str,
    groups: &[&str],
) -> Result<(String, String)> {
    if groups.len() > 1 {
        return Err(Error::TooManyGroups);
    }
    let key = KeyPair::generate().map_err(|source| Error::KeyGenerationFailed {
        file: format!("the key of {user}"),
        source,
    })?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    // Kubernetes reads groups from the Organization attributes.
    for g in groups {
        dn.push(DnType::OrganizationName, *g);
    }
    dn.push(DnType::CommonName, user);
    params.distinguished_name = dn;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    validity(&mut params, LEAF_DAYS);
    let cert =
        params
            .signed_by(&key, issuer)
            .map_err(|source| Error::CertificateSigningFailed {
                what: "a client certificate",
                source,
            })?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn name(parts: &[(DnType, &str)]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for (t, v) in parts {
        dn.push(t.clone(), *v);
    }
    dn
}

/// From yesterday (tolerates clock skew between machines) for `days`.
fn validity(p: &mut CertificateParams, days: i64) {
    let ymd =
        |d: chrono::DateTime<Utc>| rcgen::date_time_ymd(d.year(), d.month() as u8, d.day() as u8);
    let now = Utc::now();
    p.not_before = ymd(now - chrono::Duration::days(1));
    p.not_after = ymd(now + chrono::Duration::days(days));
}

/// Whether a leaf was written recently enough to keep.
fn is_fresh(path: &Path) -> bool {
    younger_than(path, LEAF_RENEW_AFTER)
}

fn younger_than(path: &Path, limit: Duration) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age < limit)
}

/// A renewal that could not be written is an error only if the current leaf
/// cannot be used any more (or there is none).
fn keep_usable_on_failure(written: Result<()>, usable: bool, what: &str) -> Result<()> {
    match written {
        Err(e) if usable => {
            tracing::warn!(
                error = crate::error::report(&e),
                "renewing {what} failed; keeping the current one, which is still valid"
            );
            Ok(())
        }
        other => other,
    }
}

fn read(dir: &Path, file: &str) -> Result<String> {
    let p = dir.join(file);
    std::fs::read_to_string(&p).map_err(|source| Error::FileReadFailed { path: p, source })
}

fn load_or(
    dir: &Path,
    file: &str,
    make: impl FnOnce() -> Result<String, rcgen::Error>,
) -> Result<String> {
    let p = dir.join(file);
    if p.exists() {
        return read(dir, file);
    }
    let pem = make().map_err(|source| Error::KeyGenerationFailed {
        file: file.to_string(),
        source,
    })?;
    write(dir, file, &pem, file.ends_with(".key"))?;
    Ok(pem)
}

/// Writes one file if its content changed; see [`write_together`].
fn write(dir: &Path, file: &str, content: &str, secret: bool) -> Result<()> {
    write_together(dir, &[(file, content, secret)])
}

/// Writes the files whose content differs from what is on disk, keys
/// readable by the owner only. All changed files are staged (temporary file,
/// fsync) before any is renamed into place, so a failure (a full disk)
/// leaves every file as it was; the directory is fsynced after the renames.
/// Nothing is written when nothing changed.
fn write_together(dir: &Path, files: &[(&str, &str, bool)]) -> Result<()> {
    let changed: Vec<_> = files
        .iter()
        .filter(|(file, content, _)| {
            std::fs::read(dir.join(file)).ok().as_deref() != Some(content.as_bytes())
        })
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    let tmp = |file: &str| dir.join(format!(".{file}.tmp"));
    let staged = changed.iter().try_for_each(|(file, content, secret)| {
        stage(&tmp(file), content, if *secret { 0o600 } else { 0o644 })
    });
    if let Err(e) = staged {
        for (file, _, _) in &changed {
            let _ = std::fs::remove_file(tmp(file));
        }
        return Err(e);
    }
    for (file, _, _) in &changed {
        let p = dir.join(file);
        std::fs::rename(tmp(file), &p)
            .map_err(|source| Error::FileWriteFailed { path: p, source })?;
    }
    sync_dir(dir)
}

/// Writes `content` to `tmp` with `mode` and makes it durable.
fn stage(tmp: &Path, content: &str, mode: u32) -> Result<()> {
    use std::io::Write;
    let failed = |source| Error::FileWriteFailed {
        path: tmp.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::create(tmp).map_err(failed)?;
    set_mode(tmp, mode)?;
    f.write_all(content.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(failed)
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| Error::DirectorySyncFailed {
            path: dir.to_path_buf(),
            source,
        })
}

#[cfg(not(unix))]
fn sync_dir(_: &Path) -> Result<()> {
    Ok(())
}

/// Sets `p`'s permission bits, unless they already are `mode` (a start with
/// everything in place changes nothing on disk).
#[cfg(unix)]
fn set_mode(p: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let current = std::fs::metadata(p)
        .map_err(|source| Error::ModeReadFailed {
            path: p.to_path_buf(),
            source,
        })?
        .permissions()
        .mode();
    if current & 0o7777 == mode {
        return Ok(());
    }
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        Error::ModeSetFailed {
            path: p.to_path_buf(),
            source,
        }
    })
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) -> Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = Pki::ensure(dir.path(), &[]).unwrap();
        let b = Pki::ensure(dir.path(), &[]).unwrap();
        assert_eq!(a.ca_cert_pem, b.ca_cert_pem);
        assert_eq!(a.server_cert_pem, b.server_cert_pem);
        assert_eq!(a.admin_key_pem, b.admin_key_pem);
        assert_eq!(a.service_account_key_pem, b.service_account_key_pem);
        // A new SAN re-issues only the serving certificate.
        let c = Pki::ensure(dir.path(), &["trellis.example".into()]).unwrap();
        assert_eq!(a.ca_cert_pem, c.ca_cert_pem);
        assert_ne!(a.server_cert_pem, c.server_cert_pem);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for f in ["ca.key", "apiserver.key", "admin.key", "sa.key"] {
                let m = std::fs::metadata(dir.path().join(f)).unwrap();
                assert_eq!(m.permissions().mode() & 0o777, 0o600, "{f}");
            }
        }
    }

    /// A start with everything in place writes nothing: no file is replaced
    /// (a rename would give it a new inode), so it works on a full disk.
    #[cfg(unix)]
    #[test]
    fn a_second_start_writes_nothing() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        Pki::ensure(dir.path(), &["trellis.example".into()]).unwrap();
        let snapshot = || {
            let mut files: Vec<(String, u64, i64)> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    let m = e.metadata().unwrap();
                    let name = e.file_name().to_string_lossy().into_owned();
                    (name, m.ino(), m.mtime_nsec() + m.mtime() * 1_000_000_000)
                })
                .collect();
            files.sort();
            files
        };
        let before = snapshot();
        assert!(before.iter().any(|(n, _, _)| n == "sa.pub"));
        Pki::ensure(dir.path(), &["trellis.example".into()]).unwrap();
        assert_eq!(snapshot(), before);
    }

    /// On a full disk (a small tmpfs; skipped where mounting is not
    /// permitted) a renewal that is due but cannot be written keeps the
    /// current, still valid certificate and leaves no partial files; a
    /// change that must be written (a new SAN) is an error.
    #[cfg(target_os = "linux")]
    #[test]
    fn renewal_on_a_full_disk_keeps_the_current_leaf() {
        use std::io::Write;
        let mnt = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(mnt.path())
            .output();
        match mounted {
            Ok(o) if o.status.success() => {}
            other => {
                eprintln!("SKIPPED: cannot mount a tmpfs: {other:?}");
                return;
            }
        }
        let result = std::panic::catch_unwind(|| {
            let dir = mnt.path().join("pki");
            let first = Pki::ensure(&dir, &[]).unwrap();
            // Make both leaves due for renewal, then fill the disk.
            let due = SystemTime::now() - LEAF_RENEW_AFTER - Duration::from_secs(3600);
            for f in ["apiserver.crt", "admin.crt"] {
                let file = std::fs::File::options()
                    .write(true)
                    .open(dir.join(f))
                    .unwrap();
                file.set_modified(due).unwrap();
            }
            let mut filler = std::fs::File::create(mnt.path().join("filler")).unwrap();
            for chunk in [4096usize, 1] {
                while filler.write_all(&vec![0u8; chunk]).is_ok() {}
            }
            let again = Pki::ensure(&dir, &[]).unwrap();
            assert_eq!(again.server_cert_pem, first.server_cert_pem);
            assert_eq!(again.server_key_pem, first.server_key_pem);
            assert_eq!(again.admin_cert_pem, first.admin_cert_pem);
            let leftovers: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".tmp"))
                .collect();
            assert!(leftovers.is_empty(), "{leftovers:?}");
            assert!(Pki::ensure(&dir, &["new.example".into()]).is_err());
            // With space again the renewal happens.
            drop(filler);
            std::fs::remove_file(mnt.path().join("filler")).unwrap();
            let renewed = Pki::ensure(&dir, &[]).unwrap();
            assert_ne!(renewed.server_cert_pem, first.server_cert_pem);
            assert_ne!(renewed.admin_key_pem, first.admin_key_pem);
            assert_eq!(renewed.ca_cert_pem, first.ca_cert_pem);
        });
        let _ = std::process::Command::new("umount")
            .arg(mnt.path())
            .status();
        if let Err(panic) = result {
            std::panic::resume_unwind(panic);
        }
    }

    #[test]
    fn bad_san_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Pki::ensure(dir.path(), &["not a name!".into()]).is_err());
    }
}
