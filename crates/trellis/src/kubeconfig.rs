//! Writing the admin kubeconfig: with TLS it embeds the CA that signed the
//! serving certificate and the admin client certificate (CN=trellis-admin,
//! O=system:masters), so kubectl verifies the server and authenticates
//! without any other file; with `--insecure-http` it points at plain HTTP.
//!
//! The file is written only when its content changes, so a restart with the
//! same address writes nothing (and works on a full disk), and atomically and
//! durably when it does (temporary file, fsync, rename, fsync of the
//! directory), so a reader never sees half a kubeconfig.

use std::path::Path;

use anyhow::Context;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// A kubeconfig for a plain-HTTP server at `url` (`--insecure-http`: no
/// authentication, so no credentials).
pub fn write_plain(path: &Path, url: &str) -> anyhow::Result<()> {
    let doc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: trellis\n  cluster:\n    server: {url}\ncontexts:\n- name: trellis\n  context:\n    cluster: trellis\n    user: admin\n    namespace: default\ncurrent-context: trellis\nusers:\n- name: admin\n  user:\n    token: trellis-admin\n"
    );
    write_private(path, &doc)
}

/// A kubeconfig for the HTTPS server at `url`, trusting `ca_pem` and
/// authenticating with the client certificate `cert_pem`/`key_pem`.
pub fn write_tls(
    path: &Path,
    url: &str,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> anyhow::Result<()> {
    let doc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: trellis\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\ncontexts:\n- name: trellis\n  context:\n    cluster: trellis\n    user: trellis-admin\n    namespace: default\ncurrent-context: trellis\nusers:\n- name: trellis-admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n",
        ca = STANDARD.encode(ca_pem),
        cert = STANDARD.encode(cert_pem),
        key = STANDARD.encode(key_pem),
    );
    write_private(path, &doc)
}

/// Writes `doc` to `path` with mode 0600 (the file holds the admin's key),
/// unless the file already holds exactly `doc`.
fn write_private(path: &Path, doc: &str) -> anyhow::Result<()> {
    if std::fs::read(path).ok().as_deref() == Some(doc.as_bytes()) {
        return Ok(());
    }
    let tmp = path.with_extension("tmp");
    let staged = stage(&tmp, doc);
    if staged.is_err() {
        // Do not leave a partial file holding space (or half a key).
        let _ = std::fs::remove_file(&tmp);
    }
    staged?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

/// Writes `doc` to the new file `tmp`, mode 0600 before any byte of the key
/// is in it, and makes it durable.
fn stage(tmp: &Path, doc: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(tmp).with_context(|| format!("writing {}", tmp.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("setting the mode of {}", tmp.display()))?;
    }
    f.write_all(doc.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn inode(p: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).unwrap().ino()
    }

    /// Same content: the file is left alone (no new inode from a rename), so
    /// a restart writes nothing; new content replaces it with mode 0600.
    #[cfg(unix)]
    #[test]
    fn written_only_when_the_content_changes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let kc = dir.path().join("admin.kubeconfig");
        write_plain(&kc, "http://127.0.0.1:6443").unwrap();
        let first = inode(&kc);
        write_plain(&kc, "http://127.0.0.1:6443").unwrap();
        assert_eq!(inode(&kc), first, "an unchanged kubeconfig was rewritten");
        write_plain(&kc, "http://127.0.0.1:7443").unwrap();
        assert_ne!(inode(&kc), first);
        let text = std::fs::read_to_string(&kc).unwrap();
        assert!(text.contains("127.0.0.1:7443"), "{text}");
        let mode = std::fs::metadata(&kc).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!kc.with_extension("tmp").exists());
    }
}
