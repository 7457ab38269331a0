//! Writing the admin kubeconfig: with TLS it embeds the CA that signed the
//! serving certificate and the admin client certificate (CN=trellis-admin,
//! O=system:masters), so kubectl verifies the server and authenticates
//! without any other file; with `--insecure-http` it points at plain HTTP.

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

/// Writes atomically with mode 0600: the file holds the admin's key.
fn write_private(path: &Path, doc: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, doc).with_context(|| format!("writing {}", tmp.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("setting the mode of {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
